#!/usr/bin/env python3
"""pathscope under Slurm: what a launch costs and how fast a killed job's data is on disk.

    python3 bench/slurm.py [--reps 5] [--time-limit] [--json FILE]

Starts the tests' private one-node cluster (tests/e2e/slurm_cluster.py: munged, slurmctld and
slurmd of Debian's slurm-wlm; needs root and `make test-deps`) and measures, for each MPI
(build/openmpi, build/mpich: `make build-all`):
  launch   the wall time of one 4-rank run of tests/programs/p2p_counts (about 0.1 s of work),
           launcher to launcher exit, by variant, interleaved in every repetition:
             srun-bare  srun -n 4 --overcommit --mpi=P PROG
             srun-cli   srun ... bin/pathscope run -o DIR -- PROG
             srun-env   LD_PRELOAD=... PATHSCOPE_OUTPUT=DIR srun ... PROG
             mpirun-bare, mpirun-cli   the same two with the MPI's mpirun, outside Slurm
           (P: pmix for Open MPI, pmi2 for MPICH)
  scancel  a batch job whose 4 ranks hang (tests/programs/lifecycle hang) is cancelled: the
           time from scancel to the 4th rank file on disk (the ranks' SIGTERM writes), and to
           the job's end as Slurm reports it (its bookkeeping included)
  limit    (--time-limit, about 90 s) the same job with --time=1: when Slurm ends it after its
           start (slurmctld looks for jobs past their limit every 30 s) and the time from that
           end to the 4th rank file
Prints medians and ranges; --json writes every sample."""
import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
from slurm_cluster import SlurmCluster  # noqa: E402

PLUGIN = {"openmpi": "pmix", "mpich": "pmi2"}
MPIRUN = {"openmpi": ["mpirun.openmpi", "--allow-run-as-root", "--oversubscribe"],
          "mpich": ["mpirun.mpich"]}
PATHSCOPE = str(ROOT / "bin" / "pathscope")


def launch(cluster, mpi, variant, out):
    build = ROOT / "build" / mpi
    prog = str(build / "p2p_counts")
    env = {}
    if variant.startswith("srun"):
        cmd = ["srun", "-n", "4", "--overcommit", f"--mpi={PLUGIN[mpi]}"]
    else:
        cmd = MPIRUN[mpi] + ["-np", "4"]
    if variant.endswith("cli"):
        cmd += [PATHSCOPE, "run", "-o", str(out), "--quiet", "--", prog]
    elif variant.endswith("env"):
        env = {"LD_PRELOAD": str(build / "libpathscope.so"), "PATHSCOPE_OUTPUT": str(out),
               "PATHSCOPE_QUIET": "on"}
        cmd += [prog]
    else:
        cmd += [prog]
    t0 = time.monotonic()
    p = cluster.run(cmd, env=env, timeout=300)
    took = time.monotonic() - t0
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr}")
    if variant != "srun-bare" and variant != "mpirun-bare" and not (out / "profile.tsv").exists():
        raise SystemExit(f"{variant}: no profile in {out}")
    return took


def rank_files_done(out):
    files = list((out / "ranks").glob("rank-*.tsv")) if (out / "ranks").exists() else []
    if len(files) < 4:
        return None
    texts = [f.read_text() for f in files]
    if not all("\nstatus\tsignal 15\n" in t and "\nend" in t for t in texts):
        return None
    return max(f.stat().st_mtime for f in files)


def hang_job(cluster, mpi, work, tag, extra=()):
    build = ROOT / "build" / mpi
    out, log = work / f"{tag}-prof", work / f"{tag}.out"
    script = work / f"{tag}.sh"
    script.write_text(f"#!/bin/bash\nsrun --mpi={PLUGIN[mpi]} {PATHSCOPE} run -o {out} -- "
                      f"{build / 'lifecycle'} hang\n")
    job = cluster.sbatch(script, ["-n", "4", "--overcommit", "-o", str(log), *extra])
    end = time.monotonic() + 120
    while not (log.exists() and "lifecycle: hanging" in log.read_text()):
        if time.monotonic() > end:
            raise SystemExit(f"job {job} never hung: {log.read_text() if log.exists() else ''}")
        time.sleep(0.05)
    return job, out


def scancel_once(cluster, mpi, work, tag):
    job, out = hang_job(cluster, mpi, work, tag)
    time.sleep(0.3)
    t0_wall, t0 = time.time(), time.monotonic()
    cluster.run(["scancel", str(job)])
    files_at = None
    while True:
        if files_at is None and rank_files_done(out) is not None:
            files_at = rank_files_done(out) - t0_wall
        if cluster.job(job)["JobState"] == "CANCELLED":
            break
        time.sleep(0.02)
    ended = time.monotonic() - t0
    while files_at is None:  # (written before the job ended; mtimes say when)
        done = rank_files_done(out)
        files_at = done - t0_wall if done is not None else None
    return files_at, ended


def time_limit_jobs(cluster, work):
    jobs = {mpi: hang_job(cluster, mpi, work, f"limit-{mpi}", ["--time=1"]) for mpi in PLUGIN}
    results = {}
    for mpi, (job, out) in jobs.items():
        info = cluster.wait_job(job, timeout=200)
        start = time.mktime(time.strptime(info["StartTime"], "%Y-%m-%dT%H:%M:%S"))
        end = time.mktime(time.strptime(info["EndTime"], "%Y-%m-%dT%H:%M:%S"))
        files = rank_files_done(out)
        results[mpi] = {"state": info["JobState"], "ended_after_s": end - start,
                        "files_after_end_s": None if files is None else files - end}
    return results


def summary(xs):
    return f"median {statistics.median(xs):.3f} s (min {min(xs):.3f}, max {max(xs):.3f})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--time-limit", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("bench/slurm.py starts slurmctld and slurmd: run it as root")
    work = Path(tempfile.mkdtemp(prefix="pathscope-bench-slurm-"))
    cluster = SlurmCluster(Path(tempfile.mkdtemp(prefix="pathscope-slurm-")))
    t0 = time.monotonic()
    cluster.start()
    data = {"cluster_start_s": time.monotonic() - t0, "launch": {}, "scancel": {}}
    print(f"cluster started in {data['cluster_start_s']:.2f} s "
          f"(load average {os.getloadavg()[0]:.1f})")
    try:
        variants = ["srun-bare", "srun-cli", "srun-env", "mpirun-bare", "mpirun-cli"]
        for mpi in PLUGIN:
            samples = {v: [] for v in variants}
            for rep in range(args.reps):
                order = variants if rep % 2 == 0 else variants[::-1]
                for v in order:
                    samples[v].append(launch(cluster, mpi, v, work / f"{mpi}-{v}-{rep}"))
            data["launch"][mpi] = samples
            for v in variants:
                print(f"launch  {mpi:7} {v:11} {summary(samples[v])}")
        for mpi in PLUGIN:
            runs = [scancel_once(cluster, mpi, work, f"cancel-{mpi}-{i}")
                    for i in range(max(1, args.reps // 2 + 1))]
            data["scancel"][mpi] = runs
            print(f"scancel {mpi:7} rank files {summary([r[0] for r in runs])}; "
                  f"job ended {summary([r[1] for r in runs])}")
        if args.time_limit:
            data["limit"] = time_limit_jobs(cluster, work)
            for mpi, r in data["limit"].items():
                print(f"limit   {mpi:7} {r['state']} {r['ended_after_s']:.0f} s after its start; "
                      f"rank files {r['files_after_end_s']:+.2f} s from that end")
        data["load_average_end"] = os.getloadavg()
    finally:
        leftovers = cluster.stop()
        if leftovers:
            print("killed leftovers:", leftovers)
        shutil.rmtree(cluster.base, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(data, indent=1))


if __name__ == "__main__":
    main()
