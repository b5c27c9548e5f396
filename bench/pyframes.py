#!/usr/bin/env python3
"""What Python frames cost (runtime/python): per MPI call and per sample of an mpi4py program,
with Python frames on against native-only paths (PATHSCOPE_PYTHON_FRAMES=off) and against no
pathscope at all.

    python3 bench/pyframes.py [--reps 5] [--calls 200000] [--depth 10] [--work 40000000]
                              [--rate 2000] [--mpi openmpi] [--python /usr/bin/python3]
                              [--json FILE]

One process (an MPI singleton), LD_PRELOAD form, variants interleaved per repetition:
  mpi     a Python loop of --calls 8-byte comm.Allreduce calls, --depth Python frames deep
          (plus the module's): the main thread's CPU ns per call (its own clock: a loaded
          machine's preemptions stay out); added per call = variant - none.  Every call is unwound (the coll group), so the walk, the splice and
          the tree insertion are all in it.
  sample  a Python busy loop of --work additions, as deep, sampled at --rate Hz of CPU time:
          the thread's CPU ns of the loop; per sample = (variant - none) / samples kept (the rank file's
          thread line).
The figure of merit: added cost with Python frames / added cost native-only (goal: <= 2).
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
import sys, time
from array import array
mode, n, depth = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
if mode == "mpi":
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    send, recv = array("d", [1.0]), array("d", [0.0])
    def loop():
        t0 = time.thread_time_ns()
        for _ in range(n):
            comm.Allreduce(send, recv)
        return time.thread_time_ns() - t0
else:
    def loop():
        t0 = time.thread_time_ns()
        x = 0
        for i in range(n):
            x += i
        return time.thread_time_ns() - t0
def nest(d):
    return nest(d - 1) if d else loop()
print("ns", nest(depth), flush=True)
'''
VARIANTS = ("none", "native", "python")


def run_one(args, lib: Path, script: Path, mode: str, variant: str) -> tuple[float, int]:
    """(ns of the loop, samples kept) of one run."""
    env = {}
    n = args.calls if mode == "mpi" else args.work
    with tempfile.TemporaryDirectory(prefix="pyframes-", dir=bl.WORK) as tmp:
        if variant != "none":
            env.update(LD_PRELOAD=str(lib), PATHSCOPE_OUTPUT=str(Path(tmp) / "prof"),
                       PATHSCOPE_PER_RANK="all", PATHSCOPE_SAMPLE_RATE=str(args.rate),
                       PATHSCOPE_PYTHON_FRAMES="on" if variant == "python" else "off")
            if mode == "mpi":
                env["PATHSCOPE_SAMPLE_RATE"] = "0"  # (the walk per call alone)
        _, _, out = bl.run_status([args.python, str(script), mode, str(n), str(args.depth)], env=env)
        ns = float(next(line.split()[1] for line in out.splitlines() if line.startswith("ns ")))
        samples = 0
        if variant != "none":
            text = bl.rank_text(Path(tmp) / "prof", 0)
            want = "on" if variant == "python" else "off"
            python = [line.split("\t") for line in text.splitlines() if line.startswith("python\t")]
            if not python or python[0][2] != want:
                raise bl.BenchError(f"{variant}: python line {python}")
            thread0 = next(line.split("\t") for line in text.splitlines()
                           if line.startswith("thread\t0\t"))
            samples = int(thread0[4])
    return ns, samples


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--calls", type=int, default=200_000)
    ap.add_argument("--depth", type=int, default=10)
    ap.add_argument("--work", type=int, default=40_000_000)
    ap.add_argument("--rate", type=int, default=2000)
    ap.add_argument("--mpi", default="openmpi", choices=bl.MPIS)
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--json")
    args = ap.parse_args()
    bl.WORK.mkdir(parents=True, exist_ok=True)
    lib = bl.snapshot_library(args.mpi)
    script = bl.WORK / "pyframes_loop.py"
    script.write_text(PROGRAM)
    results = {}
    for mode in ("mpi", "sample"):
        got = {v: [] for v in VARIANTS}
        for rep in range(args.reps):
            for v in bl.interleaved(rep, VARIANTS):
                got[v].append(run_one(args, lib, script, mode, v))
        n = args.calls if mode == "mpi" else None
        added = {}
        for v in ("native", "python"):
            if mode == "mpi":
                added[v] = [(got[v][i][0] - got["none"][i][0]) / n for i in range(args.reps)]
            else:
                added[v] = [(got[v][i][0] - got["none"][i][0]) / max(got[v][i][1], 1)
                            for i in range(args.reps)]
        ratio = [p / q if q > 0 else float("inf") for p, q in zip(added["python"], added["native"])]
        results[mode] = {"base_ns": bl.stats([g[0] / (n or 1) for g in got["none"]]),
                         "native_added_ns": bl.stats(added["native"]),
                         "python_added_ns": bl.stats(added["python"]),
                         "ratio": bl.stats(ratio),
                         "samples": bl.stats([g[1] for g in got["python"]])}
        what = "per MPI call" if mode == "mpi" else "per sample"
        print(f"{mode}: {what}: uninstrumented {bl.cell([g[0] / (n or 1) for g in got['none']], '.0f')} ns"
              f"{'' if n else ' (loop total)'}; added native-only {bl.cell(added['native'], '.0f')} ns, "
              f"with Python frames {bl.cell(added['python'], '.0f')} ns; ratio "
              f"{bl.cell(ratio, '.2f')}"
              + (f"; samples {bl.cell([g[1] for g in got['python']], '.0f')}" if not n else ""),
              flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "results": results,
                                               "machine": bl.machine()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
