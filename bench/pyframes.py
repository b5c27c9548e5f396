#!/usr/bin/env python3
"""What Python frames cost (runtime/python): per MPI call and per sample of an mpi4py program,
with Python frames on against native-only paths, and pathscope's whole cost against no
pathscope at all.

    python3 bench/pyframes.py [--runs 3] [--chunks 200] [--calls 500] [--work 200000]
                              [--depth 10] [--rate 10000] [--mpi openmpi]
                              [--python /usr/bin/python3] [--thread] [--json FILE]

A shared, loaded machine makes separate runs differ by more than what is measured, so the two
states are compared inside one process, in adjacent chunks: the benchmark switches the
runtime's own flag (`ps_py_on`, found with nm in libpathscope.so's symbol table and its load
address in /proc/self/maps) between chunks, alternating the order, and takes the median over
the chunks of the main thread's CPU time (CLOCK_THREAD_CPUTIME_ID).  Python frames off this
way is exactly PATHSCOPE_PYTHON_FRAMES=off after start-up.  The same loop without pathscope
(separate runs, the same chunks) gives the baseline.  --depth Python frames deep (plus the
module's), an MPI singleton:
  mpi     chunks of --calls 8-byte comm.Allreduce calls (the coll group: every call walked),
          sampling off: ns per call; added = state - baseline.
  sample  chunks of --work additions in a Python loop, sampled at --rate Hz of CPU time:
          ns per chunk; per sample = (state - baseline) / (samples per chunk = the rank
          file's kept samples of the main thread / chunks).
The goal: added with Python frames <= 2 x added native-only.  Whole processes run in slow and
fast spells here (the same loop without pathscope: 394 to 883 ns per call in one hour), so
besides the pooled medians the ratio is also taken per repetition, from the uninstrumented and
the instrumented run made side by side, and the median of those is reported.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib as bl  # noqa: E402

PROGRAM = '''
import ctypes, os, subprocess, sys, time
from array import array
mode, chunks, n, depth = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
flag = None
lib = os.environ.get("LD_PRELOAD")
if lib:
    value = next(int(line.split()[0], 16) for line in
                 subprocess.run(["nm", lib], capture_output=True, text=True).stdout.splitlines()
                 if line.endswith(" ps_py_on"))
    base = min(int(line.split("-")[0], 16) for line in open("/proc/self/maps")
               if line.rstrip().endswith(lib) and line.split()[2] == "00000000")
    flag = ctypes.c_int.from_address(base + value)
if mode == "mpi":
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    send, recv = array("d", [1.0]), array("d", [0.0])
    def chunk():
        t0 = time.thread_time_ns()
        for _ in range(n):
            comm.Allreduce(send, recv)
        return time.thread_time_ns() - t0
else:
    def chunk():
        t0 = time.thread_time_ns()
        x = 0
        for i in range(n):
            x += i
        return time.thread_time_ns() - t0
def loop():
    times = {0: [], 1: []}
    chunk()  # (warm: the caches of code locations, the tree's nodes)
    for c in range(chunks):
        for state in ((1, 0) if c % 2 else (0, 1)):
            if flag is not None:
                flag.value = state
            times[state].append(chunk())
    if flag is not None:
        flag.value = 1
    return times
def nest(d):
    return nest(d - 1) if d else loop()
if len(sys.argv) > 5 and sys.argv[5] == "thread":
    import threading
    box = []
    worker = threading.Thread(target=lambda: box.append(nest(depth)))
    worker.start()
    worker.join()
    times = box[0]
else:
    times = nest(depth)
for state in (0, 1):
    print("chunks", state, " ".join(map(str, times[state])), flush=True)
'''


def run_one(args, lib: Path, script: Path, mode: str, instrumented: bool):
    """Chunk times by state (0 off, 1 on; without pathscope both are the baseline) and the
    main thread's kept samples."""
    env = {}
    n = args.calls if mode == "mpi" else args.work
    with tempfile.TemporaryDirectory(prefix="pyframes-", dir=bl.WORK) as tmp:
        if instrumented:
            env.update(LD_PRELOAD=str(lib), PATHSCOPE_OUTPUT=str(Path(tmp) / "prof"),
                       PATHSCOPE_PER_RANK="all",
                       PATHSCOPE_SAMPLE_RATE="0" if mode == "mpi" else str(args.rate))
        _, _, out = bl.run_status([args.python, str(script), mode, str(args.chunks), str(n),
                                   str(args.depth), "thread" if args.thread else "main"],
                                  env=env)
        times = {}
        for line in out.splitlines():
            if line.startswith("chunks "):
                f = line.split()
                times[int(f[1])] = [int(x) for x in f[2:]]
        samples = 0
        if instrumented:
            text = bl.rank_text(Path(tmp) / "prof", 0)
            python = [line.split("\t") for line in text.splitlines() if line.startswith("python\t")]
            if not python or python[0][2] != "on":
                raise bl.BenchError(f"python line {python}")
            samples = int(next(line.split("\t") for line in text.splitlines()
                               if line.startswith("thread\t0\t"))[4])
    return times, samples


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--chunks", type=int, default=200)
    ap.add_argument("--calls", type=int, default=500)
    ap.add_argument("--work", type=int, default=200_000)
    ap.add_argument("--depth", type=int, default=10)
    ap.add_argument("--rate", type=int, default=10000)
    ap.add_argument("--mpi", default="openmpi", choices=bl.MPIS)
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--thread", action="store_true",
                    help="run the MPI loop in a Python thread (its thread state on the heap)")
    ap.add_argument("--json")
    args = ap.parse_args()
    bl.WORK.mkdir(parents=True, exist_ok=True)
    lib = bl.snapshot_library(args.mpi)
    script = bl.WORK / "pyframes_loop.py"
    script.write_text(PROGRAM)
    results = {}
    # (--thread: the MPI loop only; the sample loop's count of samples is the main thread's)
    for mode in ("mpi",) if args.thread else ("mpi", "sample"):
        base, off, on, samples, pair_ratios = [], [], [], [], []
        per = args.calls if mode == "mpi" else 1
        for rep in range(args.runs):
            pair = {}
            for instrumented in ((False, True) if rep % 2 == 0 else (True, False)):
                times, kept = run_one(args, lib, script, mode, instrumented)
                if instrumented:
                    off += times[0]
                    on += times[1]
                    samples.append(kept / (2 * args.chunks + 1))
                    pair["off"], pair["on"] = (statistics.median(times[s]) / per for s in (0, 1))
                else:
                    base += times[0] + times[1]
                    pair["base"] = statistics.median(times[0] + times[1]) / per
            # (the processes of one repetition ran next to each other: the machine's slow and
            # fast spells, which move whole processes, cancel best within a pair)
            if pair["off"] > pair["base"]:
                pair_ratios.append((pair["on"] - pair["base"]) / (pair["off"] - pair["base"]))
        b, n_off, n_on = (statistics.median(x) / per for x in (base, off, on))
        div = 1 if mode == "mpi" else statistics.median(samples)
        added_off, added_on = (n_off - b) / div, (n_on - b) / div
        results[mode] = {"baseline_ns": b, "native_ns": n_off, "python_ns": n_on,
                         "samples_per_chunk": statistics.median(samples) if samples else 0,
                         "added_native_ns": added_off, "added_python_ns": added_on,
                         "python_minus_native_ns": added_on - added_off,
                         "ratio": added_on / added_off if added_off > 0 else None,
                         "pair_ratios": pair_ratios,
                         "median_pair_ratio": statistics.median(pair_ratios) if pair_ratios else None,
                         "chunks": len(off)}
        unit = "per MPI call" if mode == "mpi" else "per sample"
        print(f"{mode}: {unit}: chunk medians (ns{'/call' if mode == 'mpi' else ''}) without "
              f"pathscope {b:.0f}, native-only {n_off:.0f}, Python frames {n_on:.0f}"
              + (f" ({statistics.median(samples):.1f} samples per chunk)" if mode != "mpi" else "")
              + f"; added {unit}: native-only {added_off:.0f} ns, Python frames {added_on:.0f} ns"
              f" (+{added_on - added_off:.0f} ns), ratio "
              f"{(added_on / added_off) if added_off > 0 else float('nan'):.2f}; per repetition "
              f"(base and instrumented run side by side): ratios "
              f"{' '.join(f'{r:.2f}' for r in pair_ratios)}, median "
              f"{statistics.median(pair_ratios) if pair_ratios else float('nan'):.2f}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "results": results,
                                               "machine": bl.machine()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
