#!/usr/bin/env python3
"""Two builds of pathscope compared on the per-call loops of bench/percall.c, in one session:
the same binary runs without pathscope, with library A and with library B, in rotation, so
that load changes during the session hit all three alike.

    python3 bench/percall_ab.py --a-openmpi OLD/libpathscope.so --b-openmpi build/openmpi/libpathscope.so \\
        [--a-mpich ... --b-mpich ...] [--ops test,exchange] [--reps 7]

Copy the libraries somewhere first (a rebuild during the run would change what is measured).
Prints, per MPI and loop, the added ns per call of A and B over the uninstrumented runs
(median over the repetitions of each run's median chunk; and of its fastest chunk), and B - A.
Uses percall.py's measure(): half its default iterations per run.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib as bl  # noqa: E402
import percall  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for m in bl.MPIS:
        ap.add_argument(f"--a-{m}", type=Path, help=f"library A for {m}")
        ap.add_argument(f"--b-{m}", type=Path, help=f"library B for {m}")
    ap.add_argument("--ops", default="test,exchange")
    ap.add_argument("--reps", type=int, default=7)
    args = ap.parse_args(argv)
    libs = {}
    for m in bl.MPIS:
        a, b = getattr(args, f"a_{m}"), getattr(args, f"b_{m}")
        if a and b:
            libs[m] = {"A": a.resolve(), "B": b.resolve()}
    ops = [o for o in args.ops.split(",") if o]
    if not libs or any(o not in percall.OPERATIONS for o in ops):
        raise bl.BenchError("give --a-MPI and --b-MPI for at least one MPI, and --ops among "
                            + ",".join(percall.OPERATIONS))
    exes = {m: percall.build(m) for m in libs}
    bl.WORK.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="percall-ab-", dir=bl.WORK))
    results: dict = {}
    sides = ["none", "A", "B"]
    for rep in range(args.reps):
        for m in libs:
            for op in ops:
                for side in sides[rep % 3:] + sides[:rep % 3]:
                    lib = None if side == "none" else libs[m][side]
                    median, _, fastest, _ = percall.measure(
                        m, exes[m], op, percall.OPERATIONS[op][1] // 2, lib, tmp)
                    results.setdefault((m, op, side), []).append((median, fastest))
        print(f"percall_ab: repetition {rep + 1}/{args.reps} done", file=sys.stderr, flush=True)
    rows = []
    for m in libs:
        for op in ops:
            base = results[(m, op, "none")]
            bm = statistics.median(v[0] for v in base)
            bf = statistics.median(v[1] for v in base)
            added = {}
            for side in ("A", "B"):
                runs = results[(m, op, side)]
                added[side] = (statistics.median(v[0] for v in runs) - bm,
                               statistics.median(v[1] for v in runs) - bf)
            rows.append([m, percall.LABELS[op], f"{bm:.1f}",
                         f"{added['A'][0]:+.1f} / {added['A'][1]:+.1f}",
                         f"{added['B'][0]:+.1f} / {added['B'][1]:+.1f}",
                         f"{added['B'][0] - added['A'][0]:+.1f} / "
                         f"{added['B'][1] - added['A'][1]:+.1f}"])
    print(f"added ns per call, median chunk / fastest chunks, {args.reps} rotations")
    print(bl.table(["MPI", "operation", "ns/call uninstrumented", "A", "B", "B - A"], rows))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except bl.BenchError as e:
        print(f"percall_ab: {e}", file=sys.stderr)
        sys.exit(1)
