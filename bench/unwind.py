#!/usr/bin/env python3
"""Added nanoseconds per MPI call for call-path unwinding, by stack depth, in one run.

    python3 bench/unwind.py [--mpi openmpi,mpich] [--depths 10,30,60] [--reps 5]
                            [--iterations 2000000] [--traversal MODE] [--json FILE]

bench/unwind_depth.c calls MPI_Comm_rank (1 rank) from DEPTH frames below main.  Per depth
and MPI, interleaved in every repetition (order reversed on odd repetitions):
  base     no pathscope
  count    pathscope preloaded, PATHSCOPE_UNWIND=env=count (the default: counted, no walk)
  path     pathscope preloaded, PATHSCOPE_UNWIND=env=path (a stack walk and a tree update at
           every call, warm caches: the same call site every time)
Sampling is off (PATHSCOPE_SAMPLE_RATE=0) so that only the per-call work is measured.
"walk" = path - count is the cost of unwinding plus the tree update; "vs base" = path - base.
Every `path` run must record exactly the calls made (the visit count on the call path),
otherwise the benchmark fails.  Medians over repetitions, with min..max.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib as bl  # noqa: E402

VARIANTS = {"base": None, "count": "env=count", "path": "env=path"}


def build(mpi: str) -> Path:
    exe = bl.WORK / mpi / "unwind_depth"
    exe.parent.mkdir(parents=True, exist_ok=True)
    src = Path(__file__).resolve().parent / "unwind_depth.c"
    subprocess.run([bl.MPICC[mpi], "-O2", "-g", "-Wall", "-o", str(exe), str(src)], check=True)
    return exe


def visits_on_paths(outdir: Path) -> int:
    """MPI_Comm_rank calls recorded below a call path (not below [not unwound])."""
    text = (outdir / "ranks" / "rank-000000.tsv").read_text()
    nodes = {}
    total = 0
    for line in text.splitlines():
        f = line.split("\t")
        if f[0] == "node" and f[1] == "0":
            nodes[f[2]] = f
    for f in nodes.values():
        if f[4] == "mpi" and f[6] == "MPI_Comm_rank" and nodes[f[3]][4] == "call":
            total += int(f[7])
    return total


def measure(mpi: str, exe: Path, depth: int, iterations: int, variant: str, lib: Path,
            tmp: Path, traversal: str = "") -> float:
    env = {}
    outdir = None
    if VARIANTS[variant]:
        outdir = Path(tempfile.mkdtemp(prefix=f"unwind-{mpi}-{depth}-{variant}-", dir=tmp))
        env = {"LD_PRELOAD": str(lib), "PATHSCOPE_OUTPUT": str(outdir), "PATHSCOPE_QUIET": "on",
               "PATHSCOPE_SAMPLE_RATE": "0", "PATHSCOPE_UNWIND": VARIANTS[variant]}
        if traversal:
            env["PATHSCOPE_TRAVERSAL"] = traversal
    _, out = bl.run(bl.mpirun(mpi, 1, [str(exe), str(depth), str(iterations)], env))
    line = next((l for l in out.splitlines() if l.startswith("unwind ")), None)
    if line is None:
        raise bl.BenchError(f"no result line from unwind_depth ({mpi}):\n{out}")
    kv = bl.parse_kv(line)
    if variant == "path":
        made = int(kv["iterations"]) + iterations // 10
        got = visits_on_paths(outdir)
        if got < made:
            raise bl.BenchError(f"{outdir}: {got} MPI_Comm_rank calls on call paths, {made} made")
    return float(kv["ns_per_call"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mpi", default="openmpi,mpich")
    ap.add_argument("--depths", default="10,30,60")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--iterations", type=int, default=2_000_000)
    ap.add_argument("--traversal", default="",
                    help="PATHSCOPE_TRAVERSAL for the pathscope runs (default: the runtime's)")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    depths = [int(d) for d in a.depths.split(",")]
    results: dict = {}
    with tempfile.TemporaryDirectory(prefix="pathscope-unwind-") as tmpname:
        tmp = Path(tmpname)
        for mpi in a.mpi.split(","):
            lib = bl.snapshot_library(mpi)
            exe = build(mpi)
            for depth in depths:
                runs: dict[str, list[float]] = {v: [] for v in VARIANTS}
                for rep in range(a.reps):
                    for variant in bl.interleaved(rep, list(VARIANTS)):
                        runs[variant].append(measure(mpi, exe, depth, a.iterations, variant, lib,
                                                     tmp, a.traversal))
                results[f"{mpi}-{depth}"] = runs
    rows = []
    for key, runs in results.items():
        mpi, depth = key.rsplit("-", 1)
        med = {v: statistics.median(x) for v, x in runs.items()}
        walk = [p - c for p, c in zip(runs["path"], runs["count"])]
        rows.append([mpi, depth, f"{med['base']:.1f}", f"{med['count']:.1f}", f"{med['path']:.1f}",
                     f"{statistics.median(walk):+.1f} ({min(walk):+.1f}..{max(walk):+.1f})",
                     f"{med['path'] - med['base']:+.1f}"])
    print(bl.table(["MPI", "frames below main", "base ns", "count ns", "path ns",
                    "walk = path - count (min..max)", "path - base"], rows))
    if a.json:
        Path(a.json).write_text(json.dumps({"machine": bl.machine(), "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except bl.BenchError as e:
        print(f"unwind.py: {e}", file=sys.stderr)
        sys.exit(1)
