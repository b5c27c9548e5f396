#!/usr/bin/env python3
"""Every reader of a profile against issue 15's goal (synthetic profile under 10 s, bounded
memory): `report`, `report --html`, each export, `sql`, `diff`, pathscope.hatchet's GraphFrame
and Thicket, each run --repeat times (median wall, CPU and peak RSS) on profiles that
bench/synth_profile.py wrote and `pathscope symbolize` resolved.

    bench/every_reader.py DIR [DIR2] [--tree CHECKOUT] [--repeat 3] [--only hatchet]

DIR2 (the same shape, another seed) is the second profile of `diff` and the Thicket.
--tree runs another checkout's bin/pathscope and python/ (a before/after comparison).
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TABLES = ["comm-ops", "ops", "comms", "ranks", "warnings", "threads", "rankvec",
          "heap-timeline", "heap-ranks", "kernel-syscalls", "kernel-threads", "probes",
          "probe-refusals"]
SQL = ("SELECT n.name, s.sum FROM nodes n JOIN node_stats s USING (node) "
       "WHERE s.metric = 'incl_time' ORDER BY s.sum DESC LIMIT 10")


def commands(d: str, d2: str | None, out: str) -> dict[str, list[str]]:
    """label -> pathscope arguments, or ["@hatchet", code] for .venv-hatchet's python."""
    c = {"report": ["report", d], "report --html": ["report", d, "--html", "-o", f"{out}/r.html"]}
    for t in TABLES:
        c[f"export --table {t} (csv)"] = ["export", d, "--table", t, "-o", f"{out}/t.csv"]
    for t in ("comm-ops", "rankvec", "ranks"):
        c[f"export --table {t} (json)"] = ["export", d, "--table", t, "--format", "json",
                                           "-o", f"{out}/t.json"]
    for f in ("folded", "speedscope", "pprof"):
        c[f"export --format {f}"] = ["export", d, "--format", f, "-o", f"{out}/p.{f}"]
    c["export --format parquet"] = ["export", d, "--format", "parquet", "-o", f"{out}/pq"]
    c["sql nodes+node_stats"] = ["sql", d, SQL, "--csv"]
    c["hatchet.read"] = ["@hatchet", f"ph.read({d!r})"]
    if d2:
        c["diff"] = ["diff", d, d2]
        c["hatchet.thicket (2 profiles)"] = ["@hatchet", f"ph.thicket([{d!r}, {d2!r}])"]
    return c


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """(wall s, CPU s, max RSS KiB); output discarded; exit 0 or 4 (diff: regressed)."""
    p = subprocess.run(["/usr/bin/time", "-f", "TIME %e %U %S %M", *argv], env=env,
                       text=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    found = re.findall(r"^TIME (\S+) (\S+) (\S+) (\d+)$", p.stderr, re.M)
    if p.returncode not in (0, 4) or not found:
        raise SystemExit(f"{' '.join(argv)} failed ({p.returncode}):\n{p.stderr[-2000:]}")
    wall, user, system, rss = found[-1]
    return float(wall), float(user) + float(system), int(rss)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dirs", nargs="+")
    parser.add_argument("--tree", type=Path, default=REPO)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", default="",
                        help="comma-separated: the commands whose label has one of these")
    args = parser.parse_args()
    tree = args.tree.resolve()
    env = dict(os.environ, PYTHONPATH=str(tree / "python"), PATHSCOPE_SYMBOLIZER="")
    hatchet_python = str(tree / ".venv-hatchet" / "bin" / "python")
    d, d2 = args.dirs[0], (args.dirs[1] if len(args.dirs) > 1 else None)
    print(f"# {tree} on {d}: median of {args.repeat} (wall s, CPU s, max RSS MiB)")
    with tempfile.TemporaryDirectory() as out:
        for label, argv in commands(d, d2, out).items():
            if not any(part in label for part in args.only.split(",")):
                continue
            if argv[0] == "@hatchet":
                argv = [hatchet_python, "-W", "ignore", "-c",
                        "import pathscope.hatchet as ph\n" + argv[1]]
            else:
                argv = [str(tree / "bin" / "pathscope"), *argv]
            runs = [timed(argv, env) for _ in range(args.repeat)]
            wall, cpu, rss = (statistics.median(r[i] for r in runs) for i in range(3))
            print(f"| {label} | {wall:.2f} | {cpu:.2f} | {rss / 1024:.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
