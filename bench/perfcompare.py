#!/usr/bin/env python3
"""Sampled attribution compared with perf: the top functions of a real application by sampled
self time, from pathscope and from `perf record` (linux-perf, software cpu-clock event).

    python3 bench/perfcompare.py [--ranks 2] [--steps 1500] [--rate 1000] [--top 10]

The application is LAMMPS (`lmp`, Debian package lammps) on the in.melt example edited as in
bench/apps.py.  Two runs of the same job: one under pathscope (PATHSCOPE_SAMPLE_RATE=--rate),
one under `perf record -e cpu-clock -F --rate` per rank.  Both tools' self time is summed over
ranks; time inside MPI is left out of both (pathscope measures it directly on MPI_* call paths;
perf samples the MPI libraries' internals: samples in libmpi, libopen-pal, libopen-rte,
libmca_* and the MCA components are dropped), so both shares are "percent of the computation".
pathscope's names come from its symbolizer (`pathscope export --format folded --thread 0`:
the ranks' main threads, innermost frame = the function the sample was in); perf's from
`perf report --sort sym` (all threads: the MPI runtime's threads use almost no CPU).  C++ names are
compared after removing argument lists (perf prints them without).
"""
from __future__ import annotations

import argparse
import collections
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import apps  # noqa: E402
import benchlib as bl  # noqa: E402

MPI_DSOS = re.compile(r"libmpi|libopen-pal|libopen-rte|mca_|libpmix|libucp|libuct|libucs|libfabric|"
                      r"libhwloc|libevent|pathscope")


def short(name: str) -> str:
    """A function name without argument list or clone suffix, for comparing the two tools."""
    name = re.sub(r"\s*\[clone [^\]]*\]", "", name)
    name = re.sub(r"\.(constprop|isra|part|cold|lto_priv)\.\d+", "", name)
    depth = 0
    for i, c in enumerate(name):  # cut at the parameter list of the outermost function
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif c == "(" and depth == 0 and i > 0:
            return name[:i]
    return name


def pathscope_self(out: Path) -> dict[str, float]:
    env = dict(bl.clean_environment(), PYTHONPATH=str(bl.REPO / "python"), PATHSCOPE_HOME=str(bl.REPO))
    # thread 0 of every rank: LAMMPS computes there; the MPI runtime's progress threads
    # (sampled too) spend their time blocked in poll/epoll_wait, which perf's CPU-time
    # samples never see
    done = subprocess.run([sys.executable, "-m", "pathscope", "export", str(out), "--format",
                           "folded", "--metric", "time", "--thread", "0"], capture_output=True,
                          text=True, env=env, check=True)
    acc: dict[str, float] = collections.Counter()
    for line in done.stdout.splitlines():
        path, _, value = line.rpartition(" ")
        leaf = path.split(";")[-1]
        if leaf.startswith("MPI_") or leaf.startswith("["):
            continue  # directly measured MPI time, and the pseudo frames
        acc[short(leaf)] += float(value)
    return acc


def perf_self(cwd: Path) -> dict[str, float]:
    acc: dict[str, float] = collections.Counter()
    for data in sorted(cwd.glob("perf-*.data")):
        done = subprocess.run(["perf", "report", "-i", str(data), "--stdio", "--no-children",
                               "--sort", "dso,sym", "-F", "period,dso,sym", "--percent-limit", "0"],
                              capture_output=True, text=True, check=True)
        for line in done.stdout.splitlines():
            m = re.match(r"^\s*(\d+)\s+(\S+)\s+\[[.k]\]\s+(.*?)\s*$", line)
            if not m:
                continue
            period, dso, sym = int(m.group(1)), m.group(2), m.group(3)
            if MPI_DSOS.search(dso) or dso == "[kernel.kallsyms]":
                continue
            acc[short(sym)] += period / 1000.0  # ns -> us
    return acc


def shares(acc: dict[str, float]) -> dict[str, float]:
    total = sum(acc.values()) or 1.0
    return {k: 100.0 * v / total for k, v in acc.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--rate", type=int, default=1000)
    ap.add_argument("--top", type=int, default=10)
    a = ap.parse_args(argv)
    lib = bl.snapshot_library("openmpi")
    program = ["lmp", "-in", "in.melt", "-log", "log.lammps", "-screen", "none"]
    with tempfile.TemporaryDirectory(prefix="pathscope-perfcompare-") as tmpname:
        tmp = Path(tmpname)
        runs = {}
        for tool in ("pathscope", "perf"):
            cwd = tmp / tool
            cwd.mkdir()
            (cwd / "in.melt").write_text(apps.lammps_input(a.steps))
            if tool == "pathscope":
                env = {"LD_PRELOAD": str(lib), "PATHSCOPE_OUTPUT": str(cwd / "profile"),
                       "PATHSCOPE_SAMPLE_RATE": str(a.rate), "PATHSCOPE_QUIET": "on"}
                cmd = bl.mpirun("openmpi", a.ranks, program, env)
            else:
                cmd = bl.mpirun("openmpi", a.ranks, ["sh", "-c",
                                f'exec perf record -q -e cpu-clock -F {a.rate} '
                                '-o "perf-$OMPI_COMM_WORLD_RANK.data" -- "$@"', "sh"] + program)
            bl.run(cmd, cwd=cwd)
            runs[tool] = shares(pathscope_self(cwd / "profile") if tool == "pathscope" else perf_self(cwd))
    ours, theirs = runs["pathscope"], runs["perf"]
    top = sorted(ours, key=lambda k: -ours[k])[:a.top]
    rows = []
    worst = 0.0
    for name in top:
        diff = ours[name] - theirs.get(name, 0.0)
        worst = max(worst, abs(diff))
        rows.append([name[:70], f"{ours[name]:.1f}", f"{theirs.get(name, 0.0):.1f}", f"{diff:+.1f}"])
    print(f"LAMMPS in.melt (32,000 atoms, {a.steps} steps), {a.ranks} ranks, {a.rate} Hz: "
          "share of computation time (self), percent")
    print(bl.table(["function (pathscope's top 10)", "pathscope %", "perf cpu-clock %", "difference (points)"], rows))
    perf_top = sorted(theirs, key=lambda k: -theirs[k])[:a.top]
    print(f"same top-{a.top} set: {len(set(top) & set(perf_top))} of {a.top}; "
          f"largest difference {worst:.1f} percentage points")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except bl.BenchError as e:
        print(f"perfcompare.py: {e}", file=sys.stderr)
        sys.exit(1)
