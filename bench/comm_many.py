#!/usr/bin/env python3
"""Many communicators (issue 14, docs/benchmarks.md section O).

  bench/comm_many.py run [--mpi openmpi] [--counts 1000,10000,100000,200001] [--reps 1]
      tests/programs/comm_many on 4 ranks (build/<mpi>/comm_many), without and with pathscope
      (the environment form, so no interpreter start is timed), interleaved: the cost per
      communicator-creating iteration, the size of profile.tsv and of a rank file, the
      counters of untracked communicators, and the time of `pathscope report`.
  bench/comm_many.py ab --before OLD/libpathscope.so [--count 20001] [--reps 3]
      the same program without pathscope, with an older library (before folding) and with
      this one, interleaved: what folding itself costs per iteration.
  bench/comm_many.py synthetic [--comms 65536] [--package OTHER/python] [--report-only]
      the profile of issue 14 before folding: a real run of comm_many (301 iterations) with
      COMMS distinct communicators added to profile.tsv and to every rank file (one
      `comm` line, two `op` lines and two `pcomm` lines each, as 65,536 unfolded ones were);
      times `pathscope report` and exports of it (tables, call paths).

Standard library only; builds nothing (make build first).  Work files in build/bench/comm_many.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import (REPO, WORK, BenchError, clean_environment, mpirun,  # noqa: E402
                      rank_text, rank_texts)

HERE = WORK / "comm_many"
CLI = [sys.executable, "-m", "pathscope"]
EXPORT_TABLES = (("csv", "comm-ops"), ("csv", "comms"), ("json", "comm-ops"), ("json", "comms"))


def run_program(mpi: str, count: int, out: Path | None, library: Path | None = None) -> float:
    """Wall seconds of one comm_many run (pathscope in the environment form when out: this
    checkout's library, or the one given)."""
    build = REPO / "build" / mpi
    env = clean_environment()
    extra = {}
    if out is not None:
        # (the ranks' own texts too: the synthetic profile adds its communicators to them)
        extra = {"LD_PRELOAD": str(library or build / "libpathscope.so"),
                 "PATHSCOPE_OUTPUT": str(out), "PATHSCOPE_PER_RANK": "all"}
    cmd = mpirun(mpi, 4, [str(build / "comm_many"), str(count)], extra, bind=False)
    started = time.monotonic()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600)
    elapsed = time.monotonic() - started
    if p.returncode != 0:
        raise BenchError(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr[-2000:]}")
    return elapsed


def time_cli(args: list[str], package: Path = REPO / "python") -> tuple[float, str]:
    """Seconds of one `pathscope ARGS` with the analysis package found in package."""
    started = time.monotonic()
    p = subprocess.run(CLI + args, env=dict(os.environ, PYTHONPATH=str(package)),
                       capture_output=True, text=True, timeout=7200)
    elapsed = time.monotonic() - started
    if p.returncode != 0:
        raise BenchError(f"pathscope {' '.join(args)} failed: {p.stderr[-2000:]}")
    return elapsed, p.stdout


def counters(text: str) -> dict[str, int]:
    out = {}
    for line in text.splitlines():
        if line.startswith("counter_"):
            key, value = line.split("\t")
            out[key[len("counter_"):]] = int(value)
    return out


def bench_run(mpi: str, counts: list[int], reps: int) -> None:
    print(f"comm_many on 4 ranks, {mpi}, {reps} rep(s) per count, medians "
          f"(pathscope: LD_PRELOAD form)")
    print(f"{'iterations':>10} {'without s':>10} {'with s':>9} {'extra us/it':>11} "
          f"{'profile B':>9} {'rank0 B':>8} {'untracked':>9} {'report s':>8}")
    for count in counts:
        base, inst = [], []
        out = HERE / f"run-{mpi}-{count}"
        for rep in range(reps):
            order = (False, True) if rep % 2 == 0 else (True, False)
            for instrumented in order:
                if instrumented:
                    shutil.rmtree(out, ignore_errors=True)
                    inst.append(run_program(mpi, count, out))
                else:
                    base.append(run_program(mpi, count, None))
        b, i = statistics.median(base), statistics.median(inst)
        c = counters(rank_text(out, 0))
        untracked = c["comm_table_full"] + c["unknown_comms"] + c["tree_full"]
        report_s, _ = time_cli(["report", str(out)])
        print(f"{count:>10} {b:>10.2f} {i:>9.2f} {(i - b) / count * 1e6:>11.1f} "
              f"{(out / 'profile.tsv').stat().st_size:>9} "
              f"{len(rank_text(out, 0).encode()):>8} {untracked:>9} "
              f"{report_s:>8.2f}", flush=True)


def bench_ab(mpi: str, count: int, reps: int, before: Path) -> None:
    """Without pathscope, with another build's library (before folding: it never reuses a
    record) and with this one, interleaved in rotating order: the cost of folding itself."""
    sides = {"none": [], "before": [], "after": []}
    names = list(sides)
    for rep in range(reps):
        for side in names[rep % 3:] + names[:rep % 3]:
            out = HERE / f"ab-{side}"
            shutil.rmtree(out, ignore_errors=True)
            library = before if side == "before" else None
            sides[side].append(run_program(mpi, count, None if side == "none" else out,
                                           library))
    base = statistics.median(sides["none"])
    print(f"comm_many {count} iterations on 4 ranks, {mpi}, {reps} reps, median (min-max) s")
    for side, times in sides.items():
        extra = (statistics.median(times) - base) / count * 1e6
        print(f"  {side:>6}: {statistics.median(times):.2f} ({min(times):.2f}-{max(times):.2f})"
              f"  +{extra:.1f} us per iteration over none")


def add_comms(path: Path, comms: int, rank: int | None) -> None:
    """COMMS communicators W_x1..W_xCOMMS in one file of the template profile: a `comm` and
    two `op` lines each before `end`, and (rank files) two `pcomm` lines each on thread 0's
    first MPI_Allreduce and MPI_Comm_free nodes."""
    lines = path.read_text().splitlines(keepends=True)
    end = lines.index("end\n")
    nodes = {}
    for line in lines:
        f = line.rstrip("\n").split("\t")
        if f[0] == "node" and f[1] == "0" and f[4] == "mpi" and f[6] in (
                "MPI_Allreduce", "MPI_Comm_free"):
            nodes.setdefault(f[6], f[2])
    added, pcomms = [], []
    for k in range(1, comms + 1):
        name = f"W_x{k}"
        if rank is None:
            added.append(f"comm\t{name}\t4\t0\tW\tMPI_Comm_dup\t1\t0-3\t-\t0\t0\t0\t0\t0\t0\t0\t0"
                         f"\t0\t0\n")
            added.append(f"op\t{name}\tMPI_Allreduce\t4\t16\t40000\t9000\t0\t11000\t3\t4\t3:4\n")
            added.append(f"op\t{name}\tMPI_Comm_free\t4\t0\t8000\t1000\t0\t3000\t3\t4\t-\n")
        else:
            added.append(f"comm\t{name}\t4\t0\t{rank}\tW\tMPI_Comm_dup\t1\t0-3\t-\t0\t0\t0\t0"
                         f"\t0\t0\t0\t0\t0\t0\n")
            added.append(f"op\t{name}\tMPI_Allreduce\t1\t4\t10000\t3:1\n")
            added.append(f"op\t{name}\tMPI_Comm_free\t1\t0\t2000\t-\n")
            pcomms.append(f"pcomm\t0\t{nodes['MPI_Allreduce']}\t{name}\t1\t10000\t4\n")
            pcomms.append(f"pcomm\t0\t{nodes['MPI_Comm_free']}\t{name}\t1\t2000\t0\n")
    if pcomms:
        last = max(i for i, line in enumerate(lines) if line.startswith("pcomm\t0\t"))
        lines[last + 1:last + 1] = pcomms
        end = lines.index("end\n")
    lines[end:end] = added
    path.write_text("".join(lines))


def bench_synthetic(mpi: str, comms: int, package: Path, report_only: bool) -> None:
    template = HERE / f"template-{mpi}"
    shutil.rmtree(template, ignore_errors=True)
    run_program(mpi, 301, template)
    time_cli(["symbolize", str(template)])
    out = HERE / f"synthetic-{comms}"
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(template, out)
    add_comms(out / "profile.tsv", comms, None)
    # the ranks' texts as ranks/ files (a template of format 2.10 has them in ranks.tsv)
    for r, text in rank_texts(out).items():
        (out / "ranks" / f"rank-{r:06d}.tsv").write_text(text)
    (out / "ranks.tsv").unlink(missing_ok=True)
    for r in range(4):
        add_comms(out / "ranks" / f"rank-{r:06d}.tsv", comms, r)
    size = sum(p.stat().st_size for p in out.rglob("*.tsv"))
    print(f"synthetic profile: {comms} extra communicators, {size / 1e6:.1f} MB of .tsv")
    runs = [["report"]]
    if not report_only:
        runs += [["export", "--format", f, "--table", t] for f, t in EXPORT_TABLES]
        runs += [["export", "--format", f] for f in ("folded", "speedscope")]
    for what in runs:
        seconds, _ = time_cli(what[:1] + [str(out)] + what[1:] + ["-o", str(out / "x")] *
                              (what[0] == "export"), package)
        print(f"  pathscope {' '.join(what)}: {seconds:.2f} s", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    r = sub.add_parser("run")
    r.add_argument("--mpi", default="openmpi", choices=("openmpi", "mpich"))
    r.add_argument("--counts", default="1000,10000,100000,200001")
    r.add_argument("--reps", type=int, default=1)
    a = sub.add_parser("ab")
    a.add_argument("--mpi", default="openmpi", choices=("openmpi", "mpich"))
    a.add_argument("--count", type=int, default=20001)
    a.add_argument("--reps", type=int, default=3)
    a.add_argument("--before", type=Path, required=True, help="libpathscope.so of the base")
    s = sub.add_parser("synthetic")
    s.add_argument("--mpi", default="openmpi", choices=("openmpi", "mpich"))
    s.add_argument("--comms", type=int, default=65536)
    s.add_argument("--package", type=Path, default=REPO / "python",
                   help="the directory holding the pathscope package to time (another "
                        "checkout's python/: before and after)")
    s.add_argument("--report-only", action="store_true")
    args = ap.parse_args()
    HERE.mkdir(parents=True, exist_ok=True)
    try:
        if args.what == "run":
            bench_run(args.mpi, [int(c) for c in args.counts.split(",")], args.reps)
        elif args.what == "ab":
            bench_ab(args.mpi, args.count, args.reps, args.before)
        else:
            bench_synthetic(args.mpi, args.comms, args.package, args.report_only)
    except BenchError as e:
        print(f"comm_many.py: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
