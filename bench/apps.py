#!/usr/bin/env python3
"""End-to-end overhead of pathscope on real applications packaged by Debian (Open MPI builds).

    python3 bench/apps.py [--reps 5] [--cases lammps-2,lammps-4,hpcc-2] [--variants ...]
                          [--steps 1500] [--hpl-n 4000] [--json FILE]

Cases (all from Debian packages; nobody here wrote them):
  lammps-N  LAMMPS (`lmp`, package lammps) on N ranks, the shipped example
            /usr/share/lammps/examples/melt/in.melt (3d Lennard-Jones melt) with two size edits
            applied here and checked: box 20^3 lattice cells (32,000 atoms) instead of 10^3, and
            --steps timesteps instead of 250.  Inside time: LAMMPS's "Loop time".
  hpcc-N    HPC Challenge (`hpcc`, package hpcc) on N ranks: HPL, PTRANS, DGEMM, STREAM,
            RandomAccess, FFT and b_eff in one run, with the shipped example hpccinf.txt
            (/usr/share/doc/hpcc/examples/_hpccinf.txt) edited to N=--hpl-n and a 1xN (2 ranks)
            or 2x2 (4 ranks) grid.  Inside time: HPL_time from hpccoutf.txt.
Variants, interleaved in every repetition (forward order on even repetitions, reversed on odd):
  base               mpirun ... APP
  pathscope          mpirun ... bin/pathscope run -o DIR -- APP      (the documented CLI form)
  pathscope-preload  mpirun -x LD_PRELOAD=libpathscope.so -x PATHSCOPE_OUTPUT=DIR ... APP
                     (the environment form: no Python start-up per rank)
  perf               mpirun ... perf record -F 99 -g -o DIR/perf-RANK.data -- APP
                     (a sampling profiler, for reference; it measures something else)
  perf-1khz          mpirun ... perf record -e cpu-clock -F 1000 -- APP (in-kernel sampling at
                     pathscope's 1 kHz setting, no call graphs: the cost of the timer
                     interrupts alone on this machine)
  pathscope-100hz    as pathscope-preload with PATHSCOPE_SAMPLE_RATE=100 (call paths at every
                     MPI call, each thread sampled 100 times per CPU second)
  pathscope-1khz     as pathscope-preload with PATHSCOPE_SAMPLE_RATE=1000 (the default rate)
  pathscope-nopaths  as pathscope-preload with PATHSCOPE_PATHS=off: the per-communicator MPI
                     profile only (no unwinding, no sampling; the foundation's measurement)
  pathscope-heap     as pathscope-preload with heap profiling (libpathscope-heap.so preloaded
                     first, PATHSCOPE_HEAP=on): every allocation on its call path
  heaptrack          mpirun ... heaptrack -o ht-RANK APP (Debian's heap profiler, recording)
  pathscope-off      as pathscope-preload with PATHSCOPE_MPI=off: every MPI call still goes
                     through pathscope's wrapper, which passes it straight on (the cost of the
                     interposition alone; not run unless asked for with --variants)
Wall time is the whole mpirun command (start-up, MPI_Init, the run, MPI_Finalize and the
profile write).  Every pathscope run must leave a complete profile.tsv, or the benchmark fails.
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib as bl  # noqa: E402

MELT = Path("/usr/share/lammps/examples/melt/in.melt")
HPCCINF = Path("/usr/share/doc/hpcc/examples/_hpccinf.txt")
VARIANTS = ("base", "pathscope", "pathscope-preload", "perf")
SAMPLING_VARIANTS = {"pathscope-100hz": {"PATHSCOPE_SAMPLE_RATE": "100"},
                     "pathscope-1khz": {"PATHSCOPE_SAMPLE_RATE": "1000"},
                     "pathscope-nopaths": {"PATHSCOPE_PATHS": "off"}}
# not run by default: the interposition floor (wrappers installed, measurement off)
EXTRA_VARIANTS = ("pathscope-off", "perf-1khz", "pathscope-heap", "heaptrack") + tuple(SAMPLING_VARIANTS)
MPI = "openmpi"  # Debian builds lmp and hpcc against Open MPI only
GOAL_PERCENT = 1.0
# hpccoutf.txt summary values kept for every HPCC run (seconds, except the problem size)
HPCC_PHASES = ("HPL_time", "PTRANS_time", "MPIRandomAccess_time", "MPIRandomAccess_LCG_time",
               "MPIRandomAccess_N")


def substitute(text: str, pattern: str, replacement: str, what: str) -> str:
    new, n = re.subn(pattern, replacement, text, count=1, flags=re.M)
    if n != 1:
        raise bl.BenchError(f"cannot edit {what}: pattern {pattern!r} not found")
    return new


def lammps_input(steps: int) -> str:
    if not MELT.is_file():
        raise bl.BenchError(f"{MELT} missing: apt-get install lammps-examples")
    text = MELT.read_text()
    text = substitute(text, r"^region\s+box block 0 10 0 10 0 10\s*$",
                      "region\t\tbox block 0 20 0 20 0 20", str(MELT))
    return substitute(text, r"^run\s+250\s*$", f"run\t\t{steps}", str(MELT))


def hpcc_input(n: int, ranks: int) -> str:
    if not HPCCINF.is_file():
        raise bl.BenchError(f"{HPCCINF} missing: apt-get install hpcc")
    p, q = (1, ranks) if ranks < 4 else (2, ranks // 2)
    text = HPCCINF.read_text()
    text = substitute(text, r"^1000(\s+Ns)$", f"{n:<13d}Ns", str(HPCCINF))
    text = substitute(text, r"^2(\s+Ps)$", f"{p:<13d}Ps", str(HPCCINF))
    return substitute(text, r"^2(\s+Qs)$", f"{q:<13d}Qs", str(HPCCINF))


class Case:
    def __init__(self, name: str, args: argparse.Namespace):
        self.name = name
        self.app, n = name.rsplit("-", 1)
        self.ranks = int(n)
        if self.app == "lammps":
            self.program = ["lmp", "-in", "in.melt", "-log", "log.lammps", "-screen", "none"]
            self.files = {"in.melt": lammps_input(args.steps)}
            self.describe = (f"LAMMPS in.melt, 32,000 atoms, {args.steps} steps, "
                             f"{self.ranks} ranks")
        elif self.app == "hpcc":
            self.program = ["hpcc"]
            self.files = {"hpccinf.txt": hpcc_input(args.hpl_n, self.ranks)}
            self.describe = f"HPCC (all tests), HPL N={args.hpl_n} NB=80, {self.ranks} ranks"
        else:
            raise bl.BenchError(f"unknown case '{name}' (lammps-N or hpcc-N)")

    def inside_seconds(self, cwd: Path) -> dict[str, float]:
        """The application's own timings: "inside" is its main phase (LAMMPS Loop time, HPCC
        HPL_time); for HPCC also the other MPI-heavy phases of hpccoutf.txt's summary."""
        if self.app == "lammps":
            m = re.search(r"^Loop time of ([0-9.eE+-]+) on", (cwd / "log.lammps").read_text(), re.M)
            if not m:
                raise bl.BenchError(f"{self.name}: no Loop time in {cwd}/log.lammps")
            return {"inside": float(m.group(1))}
        text = (cwd / "hpccoutf.txt").read_text()
        times = {}
        for key in HPCC_PHASES:
            m = re.search(rf"^{key}=([0-9.eE+-]+)$", text, re.M)
            if not m:
                raise bl.BenchError(f"{self.name}: no {key} in {cwd}/hpccoutf.txt")
            times[key] = float(m.group(1))
        times["inside"] = times["HPL_time"]
        return times


def command(case: Case, variant: str, cwd: Path, lib: Path) -> list[str]:
    program = case.program
    env: dict[str, str] = {}
    if variant == "pathscope":
        env = {"PATHSCOPE_LIB": str(lib)}
        program = [str(bl.REPO / "bin" / "pathscope"), "run", "--mpi", MPI, "-o",
                   str(cwd / "profile"), "--"] + program
    elif variant == "pathscope-preload":
        env = {"LD_PRELOAD": str(lib), "PATHSCOPE_OUTPUT": str(cwd / "profile")}
    elif variant in SAMPLING_VARIANTS:
        env = {"LD_PRELOAD": str(lib), "PATHSCOPE_OUTPUT": str(cwd / "profile"),
               **SAMPLING_VARIANTS[variant]}
    elif variant == "pathscope-heap":
        shim = bl.REPO / "build" / MPI / "libpathscope-heap.so"
        env = {"LD_PRELOAD": f"{shim}:{lib}", "PATHSCOPE_OUTPUT": str(cwd / "profile"),
               "PATHSCOPE_HEAP": "on"}
    elif variant == "heaptrack":
        program = ["sh", "-c", 'exec heaptrack -o "ht-$OMPI_COMM_WORLD_RANK" "$@" >/dev/null',
                   "sh"] + program
    elif variant == "pathscope-off":
        env = {"LD_PRELOAD": str(lib), "PATHSCOPE_OUTPUT": str(cwd / "profile"),
               "PATHSCOPE_MPI": "off"}
    elif variant == "perf":
        program = ["sh", "-c", 'exec perf record -q -F 99 -g -o "perf-$OMPI_COMM_WORLD_RANK.data"'
                   ' -- "$@"', "sh"] + program
    elif variant == "perf-1khz":
        program = ["sh", "-c", 'exec perf record -q -e cpu-clock -F 1000 -o '
                   '"perf-$OMPI_COMM_WORLD_RANK.data" -- "$@"', "sh"] + program
    return bl.mpirun(MPI, case.ranks, program, env)


def one_run(case: Case, variant: str, lib: Path, tmp: Path) -> dict:
    cwd = Path(tempfile.mkdtemp(prefix=f"{case.name}-{variant}-", dir=tmp))
    for name, text in case.files.items():
        (cwd / name).write_text(text)
    wall, out = bl.run(command(case, variant, cwd, lib), cwd=cwd)
    result = {"wall": wall, **case.inside_seconds(cwd)}
    if variant in ("pathscope", "pathscope-preload", "pathscope-heap") or variant in SAMPLING_VARIANTS:
        summary = bl.profile_summary(cwd / "profile")
        result["profile"] = {k: summary[k] for k in ("profile_tsv_bytes", "dir_bytes", "files")}
        result["profile"]["mpi_calls"] = sum(summary["calls"].values())
    elif variant in ("perf", "perf-1khz"):
        data = list(cwd.glob("perf-*.data"))
        if len(data) != case.ranks:
            raise bl.BenchError(f"perf wrote {len(data)} data files for {case.ranks} ranks in {cwd}")
        result["perf_bytes"] = sum(p.stat().st_size for p in data)
    # keep the disk small: application outputs are not needed after parsing
    for p in sorted(cwd.rglob("*"), reverse=True):
        if p.is_file() and not p.name.endswith(".tsv"):
            p.unlink()
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5, help="repetitions of each variant (default 5)")
    ap.add_argument("--cases", default="lammps-2,lammps-4,hpcc-2")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--steps", type=int, default=1500, help="LAMMPS timesteps (default 1500)")
    ap.add_argument("--hpl-n", type=int, default=4000, help="HPL matrix order (default 4000)")
    ap.add_argument("--json", help="also write every measurement to this file")
    args = ap.parse_args(argv)
    variants = [v for v in args.variants.split(",") if v]
    if "base" not in variants or any(v not in VARIANTS + EXTRA_VARIANTS for v in variants):
        raise bl.BenchError(f"--variants must include base and be among "
                            f"{', '.join(VARIANTS + EXTRA_VARIANTS)}")
    cases = [Case(c, args) for c in args.cases.split(",") if c]

    info = bl.machine()
    lib = bl.snapshot_library(MPI)
    tmp = Path(tempfile.mkdtemp(prefix="apps-", dir=bl.WORK))
    results = {(c.name, v): [] for c in cases for v in variants}
    for rep in range(args.reps):
        for c in cases:
            for v in bl.interleaved(rep, variants):
                results[(c.name, v)].append(one_run(c, v, lib, tmp))
            print(f"apps: {c.name} repetition {rep + 1}/{args.reps}: " + ", ".join(
                f"{v} {results[(c.name, v)][-1]['wall']:.2f} s" for v in variants),
                file=sys.stderr, flush=True)

    print("\n".join(bl.machine_lines(info)))
    print(f"wall time of the whole mpirun, median of {args.reps} interleaved runs (min..max); "
          f"overhead = median / median of base - 1; paired = per repetition, min..max")
    rows, inside_rows, profile_lines = [], [], []
    for c in cases:
        base = [r["wall"] for r in results[(c.name, "base")]]
        base_in = [r["inside"] for r in results[(c.name, "base")]]
        for v in variants:
            walls = [r["wall"] for r in results[(c.name, v)]]
            ins = [r["inside"] for r in results[(c.name, v)]]
            paired = [100 * (w / b - 1) for w, b in zip(walls, base)]
            over = 100 * (statistics.median(walls) / statistics.median(base) - 1)
            over_in = 100 * (statistics.median(ins) / statistics.median(base_in) - 1)
            goal = "-" if v not in ("pathscope", "pathscope-preload") else \
                ("yes" if over <= GOAL_PERCENT else "no")
            rows.append([c.describe, v,
                         f"{statistics.median(walls):.2f} ({min(walls):.2f}..{max(walls):.2f})",
                         "-" if v == "base" else f"{over:+.1f}%",
                         "-" if v == "base" else f"{min(paired):+.1f}..{max(paired):+.1f}%",
                         goal])
            inside_rows.append([c.describe, v,
                                f"{statistics.median(ins):.2f} ({min(ins):.2f}..{max(ins):.2f})",
                                "-" if v == "base" else f"{over_in:+.1f}%"])
            last = results[(c.name, v)][-1]
            if "profile" in last:
                p = last["profile"]
                profile_lines.append(
                    f"{c.name} {v}: profile.tsv {p['profile_tsv_bytes']} B, directory "
                    f"{p['dir_bytes']} B in {p['files']} files, {p['mpi_calls']} MPI calls "
                    f"recorded ({p['mpi_calls'] / statistics.median(base):.0f} per second of run)")
            if "perf_bytes" in last:
                profile_lines.append(f"{c.name} perf: perf.data {last['perf_bytes']} B in total")
    print(bl.table(["application", "variant", "wall s", "overhead", "paired", "<= 1%"], rows))
    print("\nthe application's own timing of its main phase (LAMMPS Loop time, HPCC HPL_time), "
          "same runs")
    print(bl.table(["application", "variant", "inside s", "overhead"], inside_rows))
    for c in cases:
        if c.app != "hpcc":
            continue
        print(f"\nHPCC phases ({c.describe}): median seconds as reported in hpccoutf.txt "
              f"(min..max), overhead against base")
        prow = []
        for v in variants:
            cells = [v]
            for key in HPCC_PHASES[:-1]:
                vals = [r[key] for r in results[(c.name, v)]]
                base_med = statistics.median(r[key] for r in results[(c.name, "base")])
                over = "" if v == "base" else \
                    f" {100 * (statistics.median(vals) / base_med - 1):+.1f}%"
                cells.append(f"{statistics.median(vals):.3g} ({min(vals):.3g}..{max(vals):.3g})"
                             f"{over}")
            prow.append(cells)
        print(bl.table(["variant"] + list(HPCC_PHASES[:-1]), prow))
    print("\noutput of the last repetition:\n" + "\n".join(profile_lines))
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"machine": info, "library_sha256": bl.sha256(lib), "args": vars(args),
             "results": {f"{c} {v}": r for (c, v), r in results.items()}}, indent=1))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except bl.BenchError as e:
        print(f"apps: {e}", file=sys.stderr)
        sys.exit(1)
