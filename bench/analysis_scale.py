#!/usr/bin/env python3
"""The analysis at scale (issue 14): time and peak memory of `pathscope report` and of the
flame-graph exports on a synthetic reduced profile (bench/synth_profile.py: profile.tsv +
tree.tsv, 10,000 ranks x 10,000 paths by default), of the report and `export --table rankvec`
on one with the rank vectors of `--per-rank summary`, and of the same report on a rank-file
profile of as many paths at fewer ranks (--compare-ranks, 64 by default).

    bench/analysis_scale.py                       # build/bench/analysis/...
    bench/analysis_scale.py --ranks 1000 --paths 1000 --compare-ranks 16

Each command runs under /usr/bin/time -v (wall seconds, maximum resident set); the first
report of a directory also resolves its symbols (symbols.tsv), so the report runs twice and
both are shown.  Goal (issue 14): under 30 s and 4 GiB for the 10^4 x 10^4 profile.
Only the standard library and the checkout's python/ (run with any python3 >= 3.11).
"""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

import synth_profile  # noqa: E402

WORK = REPO / "build" / "bench" / "analysis"
COMMANDS = {
    "report (first: symbols resolved)": ["report"],
    "report": ["report"],
    "export folded": ["export", "--format", "folded", "-o", "/dev/null"],
    "export speedscope": ["export", "--format", "speedscope", "-o", "/dev/null"],
}
# a --per-rank summary profile (rankvec lines): the report, and the vectors in long form
SUMMARY_COMMANDS = {
    "report (first: symbols resolved)": ["report"],
    "report": ["report"],
    "export --table rankvec (csv)": ["export", "--table", "rankvec", "-o", "/dev/null"],
    "export --table rankvec (json)": ["export", "--table", "rankvec", "--format", "json",
                                      "-o", "/dev/null"],
}


def measure(args: list[str], directory: Path) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds (user + system: what a shared machine's load does not
    inflate) and peak RSS (KiB) of `pathscope ARGS DIR`."""
    cmd = ["/usr/bin/time", "-v", sys.executable, "-m", "pathscope", *args[:1], str(directory),
           *args[1:]]
    env = {"PYTHONPATH": str(REPO / "python"), "PATH": "/usr/bin:/bin"}
    result = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{result.stderr[-2000:]}")
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):([\d.]+)",
                     result.stderr)
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", result.stderr)
    cpu = [re.search(rf"{kind} time \(seconds\): ([\d.]+)", result.stderr)
           for kind in ("User", "System")]
    assert wall and rss and all(cpu), result.stderr[-2000:]
    seconds = int(wall.group(1) or 0) * 3600 + int(wall.group(2)) * 60 + float(wall.group(3))
    return seconds, sum(float(c.group(1)) for c in cpu if c), int(rss.group(1))


def generated(name: str, ranks: int, paths: int, rank_files: bool,
              extra: int = 0, rank_vectors: bool = False) -> tuple[Path, float]:
    directory = WORK / name
    if directory.exists():
        shutil.rmtree(directory)
    WORK.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    synth_profile.write_dir(directory, ranks, paths, rank_files=rank_files, extra_columns=extra,
                            rank_vectors=rank_vectors)
    return directory, time.monotonic() - start


def size_of(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())


def run(name: str, ranks: int, paths: int, rank_files: bool, commands: dict,
        extra: int = 0, rank_vectors: bool = False) -> None:
    directory, made = generated(name, ranks, paths, rank_files, extra, rank_vectors)
    tree = directory / "tree.tsv"
    lines = [line.split("\t") for line in tree.read_text().splitlines()]
    nodes = [f for f in lines if f[0] == "node"]
    fields = sum(len(f) - 7 for f in nodes) / len(nodes)
    print(f"\n{name}: {ranks} ranks x {paths} paths"
          f"{' with rank files' if rank_files else ' (tree.tsv only)'}"
          f"{' with rank vectors' if rank_vectors else ''}: tree.tsv "
          f"{tree.stat().st_size / 2**20:.1f} MiB ({len(nodes)} node lines, {fields:.1f} "
          f"statistics each), directory {size_of(directory) / 2**20:.1f} MiB (generated in "
          f"{made:.1f} s)")
    print(f"  {'command':36s} {'wall s':>8s} {'CPU s':>8s} {'peak RSS MiB':>13s}")
    for label, args in commands.items():
        seconds, cpu, rss = measure(args, directory)
        print(f"  {label:36s} {seconds:8.2f} {cpu:8.2f} {rss / 1024:13.0f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=10_000)
    parser.add_argument("--paths", type=int, default=10_000)
    parser.add_argument("--extra-columns", type=int, default=6,
                        help="columns of a newer minor format on every node of the reduced "
                             "profile (parsed, not used): ~10 statistics a node")
    parser.add_argument("--compare-ranks", type=int, default=64,
                        help="ranks of the rank-file profile of as many paths (0: none)")
    args = parser.parse_args()
    run("reduced", args.ranks, args.paths, False, COMMANDS)
    if args.extra_columns:
        run("reduced-wide", args.ranks, args.paths, False, COMMANDS, args.extra_columns)
    run("summary", args.ranks, args.paths, False, SUMMARY_COMMANDS, rank_vectors=True)
    if args.compare_ranks:
        run("rank-files", args.compare_ranks, args.paths, True,
            {k: v for k, v in COMMANDS.items() if k.startswith("report")})
    return 0


if __name__ == "__main__":
    sys.exit(main())
