#!/usr/bin/env python3
"""The exports to other tools (issue 15): time and peak memory of `export --format pprof`,
`export --format parquet` and `pathscope sql` (over the profile and over its Parquet export)
on the demo (the stencil on 4 ranks, N=512, 200 iterations, as `make demo` runs it) and on a
synthetic reduced profile (bench/synth_profile.py: 1,024 ranks x 5,000 paths, tree.tsv;
then the same with the rank vectors of `--per-rank summary`).

    bench/export_tools.py                        # build/bench/exports/...
    bench/export_tools.py --ranks 256 --paths 2000 --no-demo

Each command runs under /usr/bin/time -v (bench/analysis_scale.measure: wall and CPU seconds,
peak RSS) after `pathscope symbolize` wrote the directory's symbols.tsv, so no command pays
for the symbolizer.  Goals (issue 15): under 1 s each on the demo, under 10 s on the
synthetic profile.  Needs `make build` (the demo, and protoc's profile_pb2.py for pprof).
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

import synth_profile  # noqa: E402
from analysis_scale import measure  # noqa: E402

WORK = REPO / "build" / "bench" / "exports"
SQL_OPS = "SELECT op, sum(calls), sum(bytes) FROM comm_ops GROUP BY op ORDER BY 3 DESC"
SQL_HOT = ("SELECT n.name, s.sum FROM nodes n JOIN node_stats s USING (node) "
           "WHERE s.metric = 'incl_time' ORDER BY s.sum DESC LIMIT 10")


def commands(directory: Path) -> dict[str, list[str]]:
    parquet = directory.parent / f"{directory.name}-parquet"
    return {
        "export --format pprof": ["export", "--format", "pprof", "-o",
                                  str(directory.parent / f"{directory.name}.pb.gz")],
        "export --format parquet": ["export", "--format", "parquet", "-o", str(parquet)],
        "sql comm_ops (profile)": ["sql", SQL_OPS, "--csv"],
        "sql nodes+node_stats (profile)": ["sql", SQL_HOT, "--csv"],
        "sql comm_ops (parquet)": ["sql", f"@{parquet}", SQL_OPS, "--csv"],
        "sql nodes+node_stats (parquet)": ["sql", f"@{parquet}", SQL_HOT, "--csv"],
    }


def arguments(args: list[str], directory: Path) -> tuple[list[str], Path]:
    """`sql @DIR ...` reads DIR instead of the profile (measure puts the profile after the
    command's first word)."""
    if len(args) > 1 and args[1].startswith("@"):
        return [args[0], *args[2:]], Path(args[1][1:])
    return args, directory


def symbolize(directory: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO / "python")}
    subprocess.run([sys.executable, "-m", "pathscope", "symbolize", str(directory)], env=env,
                   capture_output=True, check=True)


def demo() -> Path:
    directory = WORK / "demo"
    shutil.rmtree(directory, ignore_errors=True)
    WORK.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mpirun.openmpi", "--allow-run-as-root", "--oversubscribe", "-np", "4",
                    str(REPO / "bin" / "pathscope"), "run", "-o", str(directory), "--",
                    str(REPO / "build" / "openmpi" / "stencil"), "512", "200"],
                   capture_output=True, check=True)
    return directory


def synthetic(ranks: int, paths: int, rank_vectors: bool) -> Path:
    directory = WORK / ("synthetic-summary" if rank_vectors else "synthetic")
    shutil.rmtree(directory, ignore_errors=True)
    WORK.mkdir(parents=True, exist_ok=True)
    synth_profile.write_dir(directory, ranks, paths, rank_files=False, rank_vectors=rank_vectors)
    return directory


def run(label: str, directory: Path, goal: float) -> None:
    symbolize(directory)
    print(f"\n{label} (goal: under {goal:g} s each)")
    print(f"  {'command':34s} {'wall s':>8s} {'CPU s':>8s} {'peak RSS MiB':>13s}")
    for name, args in commands(directory).items():
        args, target = arguments(args, directory)
        seconds, cpu, rss = measure(args, target)
        print(f"  {name:34s} {seconds:8.2f} {cpu:8.2f} {rss / 1024:13.0f}")
    size = sum(p.stat().st_size for p in (WORK / f"{directory.name}-parquet").iterdir())
    print(f"  pprof file {(WORK / f'{directory.name}.pb.gz').stat().st_size / 1024:.0f} KiB, "
          f"Parquet directory {size / 1024:.0f} KiB")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=1024)
    parser.add_argument("--paths", type=int, default=5000)
    parser.add_argument("--no-demo", action="store_true", help="only the synthetic profile")
    args = parser.parse_args()
    if not args.no_demo:
        run("demo: stencil 512 200 on 4 ranks (Open MPI)", demo(), 1)
    run(f"synthetic: {args.ranks} ranks x {args.paths} paths (tree.tsv)",
        synthetic(args.ranks, args.paths, False), 10)
    # --per-rank summary: the heaviest paths' rank vectors (rankvec, and `metrics` rows)
    run(f"synthetic with rank vectors: {args.ranks} ranks x {args.paths} paths",
        synthetic(args.ranks, args.paths, True), 10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
