#!/usr/bin/env python3
"""Symbolizer speed on a large stripped C++ library (LAMMPS's), the target being under 2 s.

    python3 bench/symbolize.py [--build build/openmpi] [--reps 3] [--limit 2.0]

Runs the LAMMPS case of tests/unit/symbols/check_symbolize.py (every exported function's
entry, the address after it and a return address inside it, names checked against nm -DC)
--reps times and prints each wall time and the median.  Exits 1 when a name is wrong or the
median is over --limit seconds.  (The unit test checks the names only: a time limit there
would fail on a loaded machine.)
"""
import argparse
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "unit" / "symbols"))
import check_symbolize as cs  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=str(ROOT / "build" / "openmpi"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--limit", type=float, default=2.0)
    args = ap.parse_args()
    tool = os.path.join(args.build, "pathscope-symbolize")
    if not os.path.exists(cs.LAMMPS):
        sys.exit(f"bench/symbolize.py: {cs.LAMMPS} not installed (scripts/setup.sh --test)")
    times = [cs.test_lammps(tool) for _ in range(args.reps)]
    for f in cs.failures:
        print("FAIL", f)
    median = statistics.median(times)
    print(f"symbolize LAMMPS: median {median:.3f} s over {args.reps} "
          f"({', '.join(f'{t:.3f}' for t in times)}); target under {args.limit} s")
    sys.exit(1 if cs.failures or median >= args.limit else 0)


if __name__ == "__main__":
    main()
