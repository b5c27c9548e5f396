#!/usr/bin/env python3
"""The end of the run at scale (issue 14): the wall time from the moment every rank has
reached MPI_Finalize (rank 0 leaves the barrier before it and prints the clock:
`launch_hello stamp`) to the launcher's exit, with no pathscope and with `pathscope run`
(bench/launch.py's command lines).  With pathscope that time holds each rank's rank file, the
in-job reduction of the communicator tables and profile.tsv.  With --failures, the time from
a failure to the launcher's exit instead, for the failures of tests/e2e/test_scale_failures.py
(build/<mpi>/lifecycle victim/culprit: a rank SIGKILLed, SIGTERMed, or calling MPI_Abort while
the others wait in MPI_Barrier).

    python3 bench/ending.py [--mpi openmpi,mpich] [--ranks 64] [--reps 3] [--failures]
                            [--json FILE]

Variants are interleaved within each repetition; every pathscope run must write its profile.
Prints, per MPI and rank count, the median end-of-run time (min..max) of each variant and the
time pathscope adds (difference of the medians)."""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import benchlib as bl
import launch

VARIANTS = ("none", "run")
LIVE_DIR = Path(f"/dev/shm/pathscope-{os.getuid()}")
STAMP = "launch_hello: finalize at "


def end_of_run(mpi: str, nranks: int, variant: str, program) -> float:
    """Seconds from rank 0's stamp to the launcher's exit, for one run."""
    outdir = bl.WORK / mpi / f"ending-{variant}"
    shutil.rmtree(outdir, ignore_errors=True)
    cmd, env = launch.command(variant, mpi, nranks, program, outdir)
    _, _, out = bl.run_status(cmd + ["stamp"], env=env)
    exited = time.time_ns()
    stamps = [int(line[len(STAMP):]) for line in out.splitlines() if line.startswith(STAMP)]
    if len(stamps) != 1:
        raise bl.BenchError(f"expected one '{STAMP}...' line:\n{out[-2000:]}")
    if variant != "none":
        bl.profile_summary(outdir)
    shutil.rmtree(outdir, ignore_errors=True)
    return (exited - stamps[0]) / 1e9


FAILURES = {"SIGKILL": ("victim", signal.SIGKILL), "SIGTERM": ("victim", signal.SIGTERM),
            "MPI_Abort": ("culprit", None)}


def after_failure(mpi: str, nranks: int, variant: str, failure: str) -> float:
    """Seconds from a failure to the launcher's exit, for one run: the chosen rank (the
    middle one) is killed by its pid once every rank wrote its pid, or calls MPI_Abort once
    the file PREFIX.go exists (tests/programs/lifecycle.c)."""
    mode, sig = FAILURES[failure]
    base = bl.WORK / mpi / f"failure-{variant}"
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    chosen, prefix = nranks // 2, base / "pid"
    program = bl.REPO / "build" / mpi / "lifecycle"
    if not program.exists():
        raise bl.BenchError(f"{program} missing: make build MPI={mpi}")
    cmd, env = launch.command(variant, mpi, nranks, program, base / "prof")
    live: list[str] = []
    proc = subprocess.Popen(cmd + [mode, str(chosen), str(prefix)],
                            env={**bl.clean_environment(), **env},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        files = [base / f"pid.{r}" for r in range(nranks)]
        while not all(f.exists() for f in files):
            if proc.poll() is not None:
                raise bl.BenchError(f"exit status {proc.returncode} before the failure: {cmd}")
            time.sleep(0.05)
        pids = [int(f.read_text()) for f in files]
        live = [f"{pid}-{start_time(pid)}" for pid in pids] if variant == "run" else []
        if sig is None:
            (base / "pid.go").touch()
        else:
            os.kill(pids[chosen], sig)
        failed = time.monotonic()
        proc.wait(timeout=bl.RUN_TIMEOUT)
        return time.monotonic() - failed
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        shutil.rmtree(base, ignore_errors=True)
        # a SIGKILLed rank leaves its live segment and control socket behind
        for name in live:
            for suffix in (".live", ".sock"):
                (LIVE_DIR / (name + suffix)).unlink(missing_ok=True)


def start_time(pid: int) -> str:
    """/proc/PID/stat field 22: with the pid, the name of the process's live files."""
    return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[19]


def measure(mpi: str, nranks: int, reps: int, failure: str = "") -> dict[str, list[float]]:
    program = launch.build_program(mpi)
    times: dict[str, list[float]] = {v: [] for v in VARIANTS}
    for rep in range(reps):
        for variant in bl.interleaved(rep, VARIANTS):
            times[variant].append(after_failure(mpi, nranks, variant, failure) if failure
                                  else end_of_run(mpi, nranks, variant, program))
    return times


def report(mpi: str, nranks: int, times: dict[str, list[float]], failure: str = "") -> str:
    med = {v: statistics.median(t) for v, t in times.items()}
    since = f"a rank's {failure}" if failure else "MPI_Finalize"
    lines = [f"{mpi}, {nranks} ranks ({len(times['none'])} runs each): seconds from "
             f"{since} to the launcher's exit, median (min..max)"]
    for v in VARIANTS:
        lines.append(f"  {v:<5} {bl.cell(times[v], '.2f')}")
    lines.append(f"  added by pathscope: {med['run'] - med['none']:+.2f} s")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mpi", default="openmpi,mpich")
    parser.add_argument("--ranks", default="64")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--failures", action="store_true",
                        help="time the failures of tests/e2e/test_scale_failures.py instead")
    parser.add_argument("--json", help="also write the raw times here")
    args = parser.parse_args()
    results = {"machine": bl.machine(), "runs": []}
    for mpi in args.mpi.split(","):
        for nranks in map(int, args.ranks.split(",")):
            for failure in FAILURES if args.failures else [""]:
                times = measure(mpi, nranks, args.reps, failure)
                print(report(mpi, nranks, times, failure), flush=True)
                results["runs"].append({"mpi": mpi, "ranks": nranks, "failure": failure,
                                        **{v: bl.stats(t) | {"raw": t}
                                           for v, t in times.items()}})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
