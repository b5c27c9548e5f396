#!/usr/bin/env python3
"""`pathscope diff` and pathscope.hatchet at scale (issue 15): wall time and peak memory on
two synthetic reduced profiles (bench/synth_profile.py, 1,024 ranks x 5,000 paths, seeds 14
and 15: the same tree shape, other values) and on a rank-file profile of 64 ranks x 5,000
paths (the (node, rank) GraphFrame).

    bench/diff_hatchet.py                      # build/bench/diff_hatchet/...
    bench/diff_hatchet.py --ranks 256 --paths 1000

Each command runs once under /usr/bin/time (wall and CPU seconds, maximum resident set), after
`pathscope symbolize` wrote each directory's symbols.tsv.  Hatchet runs in .venv-hatchet
(scripts/setup.sh).  Goal (issue 15): under 10 s and bounded memory.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
WORK = REPO / "build" / "bench" / "diff_hatchet"
HATCHET_PYTHON = REPO / ".venv-hatchet" / "bin" / "python"


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, maximum resident set in KiB) of argv, output discarded."""
    p = subprocess.run(["/usr/bin/time", "-f", "TIME %e %U %S %M", *argv], env=env,
                       text=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       check=True)
    wall, user, system, rss = re.findall(r"^TIME (\S+) (\S+) (\S+) (\d+)$", p.stderr, re.M)[-1]
    return float(wall), float(user) + float(system), int(rss)


def synth(directory: Path, ranks: int, paths: int, seed: int, rank_files: bool) -> None:
    argv = [sys.executable, str(REPO / "bench" / "synth_profile.py"), str(directory),
            "--ranks", str(ranks), "--paths", str(paths), "--seed", str(seed)]
    subprocess.run(argv + (["--rank-files"] if rank_files else []), check=True,
                   stdout=subprocess.DEVNULL)


def hatchet(code: str) -> list[str]:
    return [str(HATCHET_PYTHON), "-W", "ignore", "-c",
            "import pathscope.hatchet as ph\n" + code]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=1024)
    parser.add_argument("--paths", type=int, default=5000)
    parser.add_argument("--rank-file-ranks", type=int, default=64)
    args = parser.parse_args()
    shutil.rmtree(WORK, ignore_errors=True)
    a, b, r = WORK / "a", WORK / "b", WORK / "rankfiles"
    synth(a, args.ranks, args.paths, 14, False)
    synth(b, args.ranks, args.paths, 15, False)
    synth(r, args.rank_file_ranks, args.paths, 14, True)
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    pathscope = str(REPO / "bin" / "pathscope")
    commands = {
        "diff (table)": [pathscope, "diff", str(a), str(b)],
        "diff --csv": [pathscope, "diff", str(a), str(b), "--csv"],
        "diff --json --fail-above 5": [pathscope, "diff", str(a), str(b), "--json",
                                       "--fail-above", "5"],
        "hatchet.read (tree.tsv)": hatchet(f"ph.read({str(a)!r})"),
        "hatchet.thicket (2 x tree.tsv)": hatchet(f"ph.thicket([{str(a)!r}, {str(b)!r}])"),
        f"hatchet.read ({args.rank_file_ranks} rank files)": hatchet(f"ph.read({str(r)!r})"),
    }
    for d in (a, b, r):
        subprocess.run([pathscope, "symbolize", str(d)], check=True, stdout=subprocess.DEVNULL)
    print(f"# {args.ranks} ranks x {args.paths} paths (rank files: {args.rank_file_ranks} "
          f"ranks): wall s, CPU s, max RSS MiB")
    for name, argv in commands.items():
        if name.startswith("diff --json"):
            argv = ["sh", "-c", '"$@"; test $? -le 4', "sh", *argv]   # (exit 4: regressed)
        wall, cpu, rss = timed(argv, env)
        print(f"| {name} | {wall:.2f} | {cpu:.2f} | {rss / 1024:.0f} MiB |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
