#!/bin/bash
# Added cost per getppid() for each collector variant; medians of $RUNS runs of 2e6 calls.
# usage: sudo ./run_bench.sh [RUNS] [N]
cd "$(dirname "$0")"
RUNS=${1:-5}; N=${2:-2000000}
S=./sctrace/sctrace
# classic tracepoints and bpftrace need tracefs; pinning needs bpffs (neither is mounted at boot here)
mountpoint -q /sys/kernel/tracing || mount -t tracefs tracefs /sys/kernel/tracing
mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf
mkdir -p /sys/fs/bpf/sctrace
med() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
run() {  # label, command...
  local label=$1; shift; local v=()
  for i in $(seq $RUNS); do v+=("$("$@" 2>/dev/null | grep -o '^[0-9.]* ns/call' | cut -d' ' -f1)"); done
  local m=$(printf '%s\n' "${v[@]}" | med)
  printf '%-44s median %6.1f ns/call  (+%5.1f)  runs: %s\n' "$label" "$m" "$(echo "$m - ${BASE:-$m}" | bc)" "${v[*]}"
  LAST=$m
}
run "baseline (no BPF)" ./bench $N; BASE=$LAST
run "tp     + hash ts + hash stats   (IN)" $S -q -a tp  -T -H -- ./bench $N
run "raw_tp + hash ts + hash stats   (IN)" $S -q -a raw -T -H -- ./bench $N
run "tp_btf + hash ts + hash stats   (IN)" $S -q -a btf -T -H -- ./bench $N
run "tp     + task storage           (IN)" $S -q -a tp  -- ./bench $N
run "raw_tp + task storage           (IN)" $S -q -a raw -- ./bench $N
run "tp_btf + task storage           (IN)" $S -q -a btf -- ./bench $N
run "tp_btf + task storage, hash filter (IN)" $S -q -a btf -F -- ./bench $N
run "tp_btf + task + sched_switch + pf (IN)" $S -q -a btf -S -- ./bench $N
run "tp_btf + task ts + stackid + hash (IN)" $S -q -a btf -k -- ./bench $N
run "tp_btf + task ts + stackid, FP binary (IN)" $S -q -a btf -k -- ./bench_fp $N
run "empty tp pair (no map, no filter)" probe/attachrun probe/probe.bpf.o tp_plain,tp_plain_exit -- ./bench $N
run "empty raw_tp pair" probe/attachrun probe/probe.bpf.o rawtp_plain,rawtp_plain_exit -- ./bench $N
run "empty tp_btf pair" probe/attachrun probe/probe.bpf.o tpbtf_plain,tpbtf_plain_exit -- ./bench $N
run "tp_btf + task, signal/1ms syscall time (IN)" env SCTRACE_PIN=/sys/fs/bpf/sctrace $S -q -P /sys/fs/bpf/sctrace -a btf -s 1000000 -- ./bench_sig $N
run "tp_btf + task, signal/100us syscall time (IN)" env SCTRACE_PIN=/sys/fs/bpf/sctrace $S -q -P /sys/fs/bpf/sctrace -a btf -s 100000 -- ./bench_sig $N
run "tp     filtered OUT (bitmap)" $S -q -x -a tp  -- ./bench $N
run "raw_tp filtered OUT (bitmap)" $S -q -x -a raw -- ./bench $N
run "tp_btf filtered OUT (bitmap)" $S -q -x -a btf -- ./bench $N
run "tp_btf filtered OUT (hash filter)" $S -q -x -a btf -F -- ./bench $N
run "tp_btf filtered OUT + sched + pf" $S -q -x -a btf -S -- ./bench $N
run "baseline again" ./bench $N
run "bpftrace bt_pertid.bt (per-tid aggregation)" bpftrace bt_pertid.bt -c "./bench $N"
run "strace -c -f (N/10 calls)" strace -c -f -o /dev/null ./bench $((N/10))
