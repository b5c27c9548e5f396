#!/usr/bin/env python3
"""Stress test of the end of --heap runs (issue 10: a few short collective test programs of
5-8 ranks crashed with SIGSEGV after MPI_Finalize, while exiting, on a loaded node).

Runs tests/programs/heap_exit_stress (reduce_scatter_block, an MPI_LXOR reduction,
intercommunicator gather/scatter, nonblocking collectives; in mode `threads` with one more
thread per rank that allocates until the process exits) again and again, with 5 to 8 ranks
(oversubscribed) under `pathscope run --heap`, alternating the MPI libraries and modes, while
a CPU hog per core keeps the node loaded.  A run fails when the launcher's exit status is not
0, when stderr mentions a signal or a crash, when a rank did not print its result line, or
when a rank file is missing or not `complete`.  The log of every failed run is kept.

    bench/stress_heap_exit.py                      500 runs, both MPIs, both modes, loaded
    bench/stress_heap_exit.py --runs 40 --mpi mpich --mode threads --no-load
    bench/stress_heap_exit.py --builds /tmp/snap   a copy of build/ (openmpi/, mpich/ with
                                                   libpathscope.so, libpathscope-heap.so and
                                                   heap_exit_stress): rebuild meanwhile

Prints one line per failure and a summary (runs, failures, by MPI and mode, duration);
exits 1 if any run failed.  Needs `make build-all` (build/<mpi>/heap_exit_stress).
Standard library only (runs with the system python3)."""
import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent / "tests"))
from profile_files import has_rank_text, rank_text  # noqa: E402  (ranks/ files or ranks.tsv)

ROOT = Path(__file__).resolve().parents[1]
LAUNCHERS = {
    "openmpi": ["mpirun.openmpi", "--allow-run-as-root", "--oversubscribe"],
    "mpich": ["mpirun.mpich"],
}
ENV = {"openmpi": {"OMPI_MCA_rmaps_base_oversubscribe": "1"}, "mpich": {}}
CRASH = re.compile(r"signal 11|Segmentation fault|Caught signal|core dumped|exited on signal|"
                   r"Bus error|Aborted|killed by signal", re.I)


def start_load(ncores):
    """One busy loop per core, in its own process group (killed by pid at the end)."""
    return [subprocess.Popen(["/bin/sh", "-c", "while :; do :; done"], start_new_session=True)
            for _ in range(ncores)]


def stop_load(hogs):
    for p in hogs:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()


def one_run(builds, mpi, mode, np, outdir, timeout):
    """(failure reason or None, launcher exit status, stdout, stderr)."""
    cmd = LAUNCHERS[mpi] + ["-np", str(np), str(ROOT / "bin" / "pathscope"), "run", "--heap",
                            "--quiet", "-o", str(outdir), "--",
                            str(builds / mpi / "heap_exit_stress")]
    if mode == "threads":
        cmd.append("threads")
    env = dict(os.environ, **ENV[mpi], PATHSCOPE_LIB=str(builds / mpi / "libpathscope.so"))
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        return f"hung (> {timeout} s)", p.returncode, out, err
    if p.returncode != 0:
        return f"exit status {p.returncode}", p.returncode, out, err
    m = CRASH.search(err)
    if m:
        return f"stderr says '{m.group(0)}'", p.returncode, out, err
    ok = sorted(int(l.split()[2]) for l in out.splitlines() if l.startswith("heap_exit_stress rank"))
    if ok != list(range(np)):
        return f"result lines of ranks {ok}", p.returncode, out, err
    for r in range(np):
        if not has_rank_text(outdir, r):
            return f"no rank text for rank {r}", p.returncode, out, err
        lines = rank_text(outdir, r).splitlines()
        status = [l.split("\t", 1)[1] for l in lines if l.startswith("status\t")]
        if status != ["complete"] or not lines or lines[-1] != "end":
            return f"rank {r}: status {status}, last line {lines[-1:]}", p.returncode, out, err
    return None, p.returncode, out, err


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=500)
    ap.add_argument("--mpi", default="openmpi,mpich")
    ap.add_argument("--mode", default="plain,threads")
    ap.add_argument("--np", default="5-8", help="rank counts, cycled: LO-HI")
    ap.add_argument("--no-load", action="store_true", help="no CPU hogs beside the runs")
    ap.add_argument("--timeout", type=float, default=180)
    ap.add_argument("--keep", default=None, help="directory for the logs of failed runs")
    ap.add_argument("--builds", default=str(ROOT / "build"),
                    help="directory with openmpi/ and mpich/ builds (default: build/)")
    a = ap.parse_args()
    mpis, modes = a.mpi.split(","), a.mode.split(",")
    lo, _, hi = a.np.partition("-")
    nps = list(range(int(lo), int(hi or lo) + 1))
    builds = Path(a.builds).resolve()
    for m in mpis:
        if not (builds / m / "heap_exit_stress").exists():
            sys.exit(f"stress: {builds / m}/heap_exit_stress missing: run make build-all")
    keep = Path(a.keep or tempfile.mkdtemp(prefix="stress-heap-exit-"))
    keep.mkdir(parents=True, exist_ok=True)
    hogs = [] if a.no_load else start_load(os.cpu_count() or 1)
    counts, fails = {}, {}
    t0 = time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix="stress-heap-exit-prof-") as tmp:
            for i in range(a.runs):
                mpi = mpis[i % len(mpis)]
                mode = modes[(i // len(mpis)) % len(modes)]
                np = nps[(i // (len(mpis) * len(modes))) % len(nps)]
                outdir = Path(tmp) / f"run{i}"
                why, rc, out, err = one_run(builds, mpi, mode, np, outdir, a.timeout)
                key = (mpi, mode)
                counts[key] = counts.get(key, 0) + 1
                if why:
                    fails[key] = fails.get(key, 0) + 1
                    log = keep / f"run{i:04d}-{mpi}-{mode}-np{np}.log"
                    log.write_text(f"{why}\nexit status {rc}\n--- stdout\n{out}\n--- stderr\n{err}")
                    print(f"run {i}: {mpi} {mode} np={np}: FAILED: {why} (log {log})", flush=True)
                elif (i + 1) % 50 == 0:
                    print(f"... {i + 1} runs, {sum(fails.values())} failed, "
                          f"{time.monotonic() - t0:.0f} s", flush=True)
                subprocess.run(["rm", "-rf", str(outdir)])
    finally:
        stop_load(hogs)
    dt = time.monotonic() - t0
    for key in sorted(counts):
        print(f"{key[0]:8s} {key[1]:8s} runs {counts[key]:4d}  failed {fails.get(key, 0)}")
    total, failed = sum(counts.values()), sum(fails.values())
    print(f"stress_heap_exit: {total} runs, {failed} failed, {dt:.0f} s "
          f"({'with' if hogs else 'without'} {len(hogs)} CPU hogs; np {a.np}; logs in {keep})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
