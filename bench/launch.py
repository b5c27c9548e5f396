#!/usr/bin/env python3
"""Start-up at scale (issue 14): the wall time of `mpirun -np N` of a trivial MPI program
(bench/launch_hello.c) with no pathscope, with the environment form (LD_PRELOAD and
PATHSCOPE_* variables), with `pathscope run` (bin/pathscope -> the compiled launcher
pathscope-run -> the program) and with the Python CLI's `run` in every rank (what `pathscope
run` did before the launcher: `python -m pathscope run`).

    python3 bench/launch.py [--mpi openmpi,mpich] [--ranks 16,64] [--reps 5] [--starts 20]
                            [--json FILE]

First, without mpirun, the CPU time of one start of /bin/true each way (start_cost).

Variants are interleaved within each repetition (benchlib.interleaved).  Every pathscope run
must write its profile (profile.tsv with its `end` line), so a failing run is never timed.
Prints, per MPI and rank count, the median wall time (min..max) of each variant and its ratio
to no pathscope, and the ratios that matter: pathscope run / env form, Python run / pathscope
run."""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys

import benchlib as bl

VARIANTS = ("none", "env", "run", "python-run")
VENV_PYTHON = bl.REPO / ".venv" / "bin" / "python"


def build_program(mpi: str):
    exe = bl.WORK / mpi / "launch_hello"
    exe.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([bl.MPICC[mpi], "-O2", "-o", str(exe), str(bl.REPO / "bench" /
                                                              "launch_hello.c")], check=True)
    return exe


def command(variant: str, mpi: str, nranks: int, program, outdir) -> tuple[list[str], dict]:
    """The mpirun command line of variant and the environment it adds."""
    lib = bl.REPO / "build" / mpi / "libpathscope.so"
    quiet = ["--quiet", "-o", str(outdir), "--mpi", mpi, "--"]
    if variant == "none":
        return bl.mpirun(mpi, nranks, [str(program)], bind=False), {}
    if variant == "env":
        env = {"LD_PRELOAD": str(lib), "PATHSCOPE_OUTPUT": str(outdir), "PATHSCOPE_QUIET": "on"}
        return bl.mpirun(mpi, nranks, [str(program)], env, bind=False), {}
    if variant == "run":
        return bl.mpirun(mpi, nranks, [str(bl.REPO / "bin" / "pathscope"), "run", *quiet,
                                       str(program)], bind=False), {}
    python = str(VENV_PYTHON if VENV_PYTHON.exists() else sys.executable)
    home = {"PYTHONPATH": str(bl.REPO / "python"), "PATHSCOPE_HOME": str(bl.REPO)}
    return bl.mpirun(mpi, nranks, [python, "-m", "pathscope", "run", *quiet, str(program)],
                     bind=False), home


def start_cost(starts: int) -> str:
    """CPU time (user + system, of the process and everything it started) of one start of
    /bin/true alone, through `pathscope run` and through the Python CLI's run, without
    mpirun and with an empty runtime library (PATHSCOPE_LIB: ld.so declines to preload it), so
    that only the way to the program's exec is measured.  CPU time, unlike wall time, does
    not grow with other load on a shared machine."""
    fake = bl.WORK / "launch-empty" / "libpathscope.so"
    fake.parent.mkdir(parents=True, exist_ok=True)
    fake.write_text("")
    python = str(VENV_PYTHON if VENV_PYTHON.exists() else sys.executable)
    home = {"PYTHONPATH": str(bl.REPO / "python"), "PATHSCOPE_HOME": str(bl.REPO),
            "PATHSCOPE_LIB": str(fake)}
    ways = {"program alone": (["/bin/true"], {}),
            "pathscope run": ([str(bl.REPO / "bin" / "pathscope"), "run", "--", "/bin/true"],
                              {"PATHSCOPE_LIB": str(fake)}),
            "Python run": ([python, "-m", "pathscope", "run", "--", "/bin/true"], home)}
    lines = [f"one start, CPU milliseconds (user + system), median of {starts}:"]
    for name, (cmd, env) in ways.items():
        cpu = []
        for _ in range(starts):
            _, _, usage = bl.run_measured(cmd, env=env)
            cpu.append(1000 * (usage["user_s"] + usage["sys_s"]))
        lines.append(f"  {name:<14} {bl.cell(cpu, '.1f')}")
    return "\n".join(lines)


def measure(mpi: str, nranks: int, reps: int) -> dict[str, list[float]]:
    program = build_program(mpi)
    times: dict[str, list[float]] = {v: [] for v in VARIANTS}
    for rep in range(reps):
        for variant in bl.interleaved(rep, VARIANTS):
            outdir = bl.WORK / mpi / f"launch-{variant}"
            shutil.rmtree(outdir, ignore_errors=True)
            cmd, env = command(variant, mpi, nranks, program, outdir)
            wall, _ = bl.run_status(cmd, env=env)[:2]
            if variant != "none":
                bl.profile_summary(outdir)
            shutil.rmtree(outdir, ignore_errors=True)
            times[variant].append(wall)
    return times


def report(mpi: str, nranks: int, times: dict[str, list[float]]) -> str:
    med = {v: statistics.median(t) for v, t in times.items()}
    lines = [f"{mpi}, {nranks} ranks ({len(times['none'])} runs each; wall seconds, "
             f"median (min..max), and median / no pathscope):"]
    for v in VARIANTS:
        lines.append(f"  {v:<11} {bl.cell(times[v], '.2f'):<22} x{med[v] / med['none']:.2f}")
    lines.append(f"  pathscope run / env form: x{med['run'] / med['env']:.2f};  "
                 f"Python run / pathscope run: x{med['python-run'] / med['run']:.2f}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mpi", default="openmpi,mpich")
    parser.add_argument("--ranks", default="16,64")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--starts", type=int, default=20,
                        help="sequential starts for the CPU time of one start")
    parser.add_argument("--json", help="also write the raw times here")
    args = parser.parse_args()
    results = {"machine": bl.machine(), "runs": []}
    print(start_cost(args.starts), flush=True)
    for mpi in args.mpi.split(","):
        for nranks in map(int, args.ranks.split(",")):
            times = measure(mpi, nranks, args.reps)
            print(report(mpi, nranks, times), flush=True)
            results["runs"].append({"mpi": mpi, "ranks": nranks,
                                    **{v: bl.stats(t) | {"raw": t} for v, t in times.items()}})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
