#!/usr/bin/env bash
# Every pathscope benchmark in one command (no make target needed):
#   bench/run-all.sh           installs the benchmark dependencies (apt, as root), builds the
#                              runtime for Open MPI and MPICH, runs bench/percall.py,
#                              bench/clockfence.c, bench/unwind.py, bench/perfcompare.py,
#                              bench/apps.py, bench/heap.py, bench/kernel.py and
#                              bench/launch.py and bench/ending.py, prints
#                              their tables and keeps them with the raw measurements (JSON)
#                              in build/bench/results-<date>/.
#   bench/run-all.sh --quick   the same with few repetitions and small sizes: checks that
#                              everything runs (about 2 minutes); its numbers mean little.
# Takes 15-30 minutes on 2 cores.  Run it on an otherwise idle machine: the drivers interleave
# the instrumented and the uninstrumented runs, which protects the comparison against slow
# drift, not against a neighbour that starts compiling half-way through one run.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
case "${1:-}" in
  --quick) quick=1 ;;
  "") ;;
  *) echo "usage: bench/run-all.sh [--quick]" >&2; exit 2 ;;
esac

# lammps, hpcc, gromacs, linux-perf, strace, bpftrace, hyperfine, netpipe-openmpi, heaptrack;
# then the example inputs that bench/apps.py edits (Debian ships in.melt in lammps-examples,
# not in lammps).
scripts/setup.sh --bench
if ! dpkg-query -W -f='${Status}' lammps-examples 2>/dev/null | grep "install ok installed" >/dev/null; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "bench: missing lammps-examples: sudo apt-get install -y lammps-examples" >&2
    exit 1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq lammps-examples >/dev/null
fi

make --no-print-directory build MPI=openmpi >/dev/null
make --no-print-directory build MPI=mpich >/dev/null

out=build/bench/results-$(date +%Y%m%d-%H%M%S)
mkdir -p "$out"
if [ $quick = 1 ]; then
  percall_args=(--reps 2 --iterations-rank 2000000 --iterations-2rank 50000)
  apps_args=(--reps 1 --steps 30 --hpl-n 800)
  unwind_args=(--reps 1 --iterations 200000)
  compare_args=(--steps 100)
  heap_args=(--reps 1 --scale 200 --iterations 200000)
  kernel_args=(--reps 1 --quick)
  launch_args=(--reps 1 --ranks 16 --starts 5)
  ending_args=(--reps 1 --ranks 16)
else
  percall_args=()
  apps_args=(--variants base,pathscope,pathscope-preload,pathscope-100hz,pathscope-nopaths,perf)
  unwind_args=()
  compare_args=()
  heap_args=()
  kernel_args=()
  launch_args=()
  ending_args=()
fi
echo "== per-call cost (bench/percall.py) =="
python3 bench/percall.py "${percall_args[@]}" --json "$out/percall.json" | tee "$out/percall.txt"
echo
echo "== clock reads between cache misses, no MPI (bench/clockfence.c, on core 1) =="
gcc -O2 -o build/bench/clockfence bench/clockfence.c
taskset -c 1 build/bench/clockfence | tee "$out/clockfence.txt"
echo
echo "== call-path unwinding per MPI call, by stack depth (bench/unwind.py) =="
python3 bench/unwind.py "${unwind_args[@]}" --json "$out/unwind.json" | tee "$out/unwind.txt"
echo
echo "== sampled attribution vs perf record on LAMMPS (bench/perfcompare.py) =="
python3 bench/perfcompare.py "${compare_args[@]}" | tee "$out/perfcompare.txt"
echo
echo "== end-to-end overhead on applications (bench/apps.py) =="
python3 bench/apps.py "${apps_args[@]}" --json "$out/apps.json" | tee "$out/apps.txt"
echo
echo "== heap profiling per traversal mode vs heaptrack (bench/heap.py) =="
python3 bench/heap.py "${heap_args[@]}" --json "$out/heap.json" | tee "$out/heap.txt"
echo
echo "== kernel-time profiling per syscall vs strace and bpftrace (bench/kernel.py) =="
python3 bench/kernel.py "${kernel_args[@]}" --json "$out/kernel.json" | tee "$out/kernel.txt"
echo
echo "== start-up at scale: mpirun -np 16 and 64, pathscope run against the env form (bench/launch.py) =="
python3 bench/launch.py "${launch_args[@]}" --json "$out/launch.json" | tee "$out/launch.txt"
echo
echo "== the end of the run at 64 ranks: MPI_Finalize, and a rank's failure, to the launcher's exit (bench/ending.py) =="
python3 bench/ending.py "${ending_args[@]}" --json "$out/ending.json" | tee "$out/ending.txt"
python3 bench/ending.py "${ending_args[@]}" --failures --json "$out/failures.json" | tee "$out/failures.txt"
echo
echo "bench: tables and raw measurements in $out"
