#!/bin/bash
# usage: run.sh TREE LABEL ARGS...: wall s, CPU s (user+sys), max RSS MiB, output bytes
tree=$1; label=$2; shift 2
export PATHSCOPE_SYMBOLIZER=
r=$( { /usr/bin/time -f "%e %U %S %M" nice "$tree/bin/pathscope" "$@" > /tmp/tvbench/out.$$ ; } 2>&1 | tail -1)
set -- $r
printf "%-34s wall %6.2f s  cpu %6.2f s  rss %5d MiB  %9d bytes\n" "$label" $1 $(echo "$2 + $3" | bc) $(( $4 / 1024 )) $(wc -c < /tmp/tvbench/out.$$)
rm -f /tmp/tvbench/out.$$
