#!/usr/bin/env python3
"""Sampled attribution compared with perf: the top functions of a real application by sampled
self time, from pathscope and from `perf record` (linux-perf, software cpu-clock event).

    python3 bench/perfcompare.py [--ranks 4] [--steps 1000] [--rate R] [--perf-rate 1000]
                                 [--metric oncpu_time|time] [--top 10] [--separate-runs]
                                 [--keep DIR] [--option PATHSCOPE_X=V ...]

The application is LAMMPS (`lmp`, Debian package lammps) on the in.melt example edited as in
bench/apps.py (32,000 atoms, --steps timesteps), Open MPI (Debian builds lmp against it).

Same run (the default): every rank is `perf record -e cpu-clock -F --perf-rate -o
perf-RANK.data -- env LD_PRELOAD=libpathscope.so lmp ...`, so both tools sample one and the
same execution (perf's samples are taken in the kernel at its timer interrupt; pathscope's
with its own per-thread timer and signal: the two do not see each other's samples, only each
other's cost).  LD_PRELOAD is set inside perf, for lmp alone, so perf itself runs without
pathscope.  pathscope samples at its default rate unless --rate is given (the sampler users
get).  With --separate-runs, two runs of the same job instead: one under pathscope, one under
perf at --perf-rate (the comparison before issue 11).

Both tools' self time is summed over ranks and turned into shares of the non-MPI CPU time:
- pathscope: `pathscope export --format folded --metric METRIC --thread 0` (the ranks' main
  threads; LAMMPS computes there), the innermost frame of every stack = the function the
  samples were in; stacks that go through an MPI function (time measured inside MPI) and the
  pseudo frames (`[failed unwind]`, ...) are left out.  METRIC is `oncpu_time` (sampled CPU
  time) when this pathscope has it, else `time` (sampled time, on- and off-CPU).
- perf: `perf record -e cpu-clock -c 1e9/--perf-rate --call-graph dwarf` per rank (all
  threads), read with `perf script`: a sample's self function is its innermost user-space
  frame (a sample in the kernel goes to the function that made the system call or took the
  fault, as pathscope's thread CPU clock counts system time there); samples with a frame in
  an MPI library (libmpi, libopen-pal, libopen-rte, mca_*, pmix, hwloc, libevent, ...) or in
  libpathscope anywhere on the chain are left out: time inside MPI (including the libc
  functions MPI calls, e.g. sched_yield when oversubscribed, memcpy), and pathscope's own
  signal handler and wrappers.  The call chain is only used for that classification.
C++ names are compared after removing argument lists and clone suffixes (perf prints some
with their parameters).  The table lists the union of both tools' top --top functions, by
perf's share, with the difference in percentage points; the exit status is 0 whatever the
difference (a benchmark, not a test: tests/e2e/test_perfcompare.py asserts).
"""
from __future__ import annotations

import argparse
import collections
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
import apps  # noqa: E402
import benchlib as bl  # noqa: E402

MPI_DSOS = re.compile(r"libmpi|libopen-pal|libopen-rte|mca_|libpmix|libucp|libuct|libucs|libfabric|"
                      r"libhwloc|libevent|pathscope")
NS_PER_S = 1_000_000_000
# user stack copied with every perf sample, for the call chain: enough to reach the MPI
# function that a sample inside MPI (say in libc's sched_yield or memcpy) was called from
PERF_STACK_BYTES = 4096
# the outermost frames of a complete user-space call chain (main thread, other threads)
THREAD_START = re.compile(r"^(__libc_start_call_main|__libc_start_main(_impl)?|_start|"
                          r"start_thread|clone3?|__clone3?)$")
PROGRAM = ["lmp", "-in", "in.melt", "-log", "log.lammps", "-screen", "none"]
# a frame of `perf script -F period,ip,sym,dso`: TAB address symbol (DSO)
PERF_FRAME = re.compile(r"^\t\s*([0-9a-f]+) (.*) \((.*)\)$")


@dataclass
class Comparison:
    """Self time per function (microseconds, summed over ranks) from both tools, and facts
    about the run that say whether the comparison is sound."""
    ours: dict[str, float]
    theirs: dict[str, float]
    metric: str
    samplers: list[str]          # the rank files' `sampler` lines (source, rate, clock)
    samples_kept: int            # pathscope's kept samples on the main threads, all ranks
    samples_taken: int           # ... and all its samples there (kept, in MPI, dropped)
    cpu_seconds: float           # the main threads' CPU time (0: not in the rank files)
    perf_counts: collections.Counter  # perf's samples by class (perf_self)
    loop_seconds: float          # LAMMPS's Loop time

    def shares(self) -> tuple[dict[str, float], dict[str, float]]:
        return shares(self.ours), shares(self.theirs)

    def sampled_fraction(self) -> Optional[float]:
        """Samples taken / (CPU time x requested rate) on the main threads: near 1 when every
        timer expiry became a sample; lower when expiries merged (a timer that fires only at
        a tick while the thread runs, threads running in short bursts)."""
        rates = {int(s.split()[1]) for s in self.samplers if len(s.split()) > 1}
        if len(rates) != 1 or not self.cpu_seconds or not min(rates):
            return None
        return self.samples_taken / (self.cpu_seconds * rates.pop())

    def rows(self, top: int) -> list[tuple[str, float, float]]:
        """(function, pathscope %, perf %) for the union of both top-`top` lists, by perf's
        share, then pathscope's."""
        ours, theirs = self.shares()
        names = set(sorted(theirs, key=lambda k: -theirs[k])[:top])
        names |= set(sorted(ours, key=lambda k: -ours[k])[:top])
        rows = [(n, ours.get(n, 0.0), theirs.get(n, 0.0)) for n in names]
        rows.sort(key=lambda r: (-r[2], -r[1], r[0]))
        return rows


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


def pathscope_env() -> dict[str, str]:
    return dict(bl.clean_environment(), PYTHONPATH=str(bl.REPO / "python"),
                PATHSCOPE_HOME=str(bl.REPO))


def pathscope_metrics() -> tuple[str, ...]:
    """The call-path metrics this checkout's `pathscope export` offers."""
    done = subprocess.run([sys.executable, "-c", "from pathscope.export import CALL_PATH_METRICS "
                           "as m; print(' '.join(m))"], capture_output=True, text=True,
                          env=pathscope_env(), check=True)
    return tuple(done.stdout.split())


def default_metric() -> str:
    return "oncpu_time" if "oncpu_time" in pathscope_metrics() else "time"


def pathscope_self(out: Path, metric: str) -> dict[str, float]:
    # thread 0 of every rank: LAMMPS computes there; the MPI runtime's progress threads
    # (sampled too) spend their time blocked in poll/epoll_wait
    done = subprocess.run([sys.executable, "-m", "pathscope", "export", str(out), "--format",
                           "folded", "--metric", metric, "--thread", "0"], capture_output=True,
                          text=True, env=pathscope_env())
    if done.returncode != 0:
        raise bl.BenchError(f"pathscope export {out} failed ({done.returncode}): {done.stderr}")
    acc: dict[str, float] = collections.Counter()
    for line in done.stdout.splitlines():
        path, _, value = line.rpartition(" ")
        frames = path.split(";")
        leaf = frames[-1]
        if any(f.startswith(("MPI_", "PMPI_")) for f in frames) or leaf.startswith("["):
            continue  # time inside MPI (measured directly), and the pseudo frames
        acc[short(leaf)] += float(value)
    return acc


def pathscope_facts(out: Path) -> tuple[list[str], int, int, float]:
    """The rank files' sampler lines, and over the ranks' main threads: the samples kept, the
    samples taken (kept, inside MPI, dropped) and the CPU seconds (format 2.4 `thread` cpu_ns;
    0 when the runtime does not write it)."""
    samplers, kept, taken, cpu_ns = [], 0, 0, 0
    for text in bl.rank_texts(out).values():
        for line in text.splitlines():
            fields = line.split("\t")
            if fields[0] == "sampler":
                samplers.append(" ".join(fields[1:]))
            elif fields[0] == "thread" and fields[1] == "0":
                kept += int(fields[4])
                taken += int(fields[4]) + int(fields[5]) + int(fields[6])
                cpu_ns += int(fields[12]) if len(fields) > 12 else 0
    return samplers, kept, taken, cpu_ns / 1e9


@dataclass
class PerfSample:
    period: int                  # ns of CPU time
    frames: list[tuple[str, str]]  # (symbol, DSO), innermost first; kernel frames included


def perf_samples(data: Path) -> list[PerfSample]:
    """The samples of one perf.data with their call chains (`perf script`)."""
    done = subprocess.run(["perf", "script", "--no-inline", "-i", str(data), "-F",
                           "period,ip,sym,dso"], capture_output=True, text=True)
    if done.returncode != 0:
        raise bl.BenchError(f"perf script -i {data} failed: {done.stderr.strip()}")
    samples: list[PerfSample] = []
    for line in done.stdout.splitlines():
        if line.startswith("\t"):
            m = PERF_FRAME.match(line)
            if m and samples:
                sym, dso = m.group(2), m.group(3)
                if sym == "[unknown]" and not dso.startswith("["):
                    sym = f"{Path(dso).name}+0x{m.group(1)}"
                samples[-1].frames.append((sym, dso))
        elif line.strip():
            samples.append(PerfSample(int(line.split()[0]), []))
    return samples


def perf_self(cwd: Path) -> tuple[dict[str, float], collections.Counter]:
    """Self time per function (microseconds) of every perf-*.data in cwd outside MPI, and the
    samples counted by class: `kept`, `mpi` (left out: in MPI or pathscope), `incomplete`
    (left out: the call chain neither reaches an MPI library nor the thread's start, so it
    cannot be told whether the sample was inside MPI; `incomplete in F`: those whose innermost
    frame is F), `kernel` (no user-space frame).

    A sample in the kernel is charged to its first user-space frame (the function that made
    the system call or took the fault: pathscope's thread CPU clock counts system time there
    too).  A sample with a frame in an MPI library or in libpathscope anywhere on its
    user-space chain is inside MPI (or pathscope's signal handler or wrappers).  perf's DWARF
    unwinder sometimes stops right after a libc leaf that MPI called (sched_yield while
    waiting for a send, process_vm_readv copying a message, the progress threads' poll):
    such chains are incomplete and left out rather than guessed."""
    acc: dict[str, float] = collections.Counter()
    counts: collections.Counter = collections.Counter()
    files = sorted(cwd.glob("perf-*.data"))
    if not files:
        raise bl.BenchError(f"no perf-*.data in {cwd}")
    for data in files:
        for sample in perf_samples(data):
            user = [(sym, dso) for sym, dso in sample.frames if not dso.startswith("[kernel")]
            if not user:
                counts["kernel"] += 1
            elif any(MPI_DSOS.search(dso) for _, dso in user):
                counts["mpi"] += 1
            elif not any(THREAD_START.match(sym) for sym, _ in user):
                counts["incomplete"] += 1
                counts["incomplete in " + short(user[0][0])] += 1
            else:
                acc[short(user[0][0])] += sample.period / 1000.0  # ns -> us
                counts["kept"] += 1
    return acc, counts


def shares(acc: dict[str, float]) -> dict[str, float]:
    total = sum(acc.values()) or 1.0
    return {k: 100.0 * v / total for k, v in acc.items()}


def loop_seconds(cwd: Path) -> float:
    m = re.search(r"^Loop time of ([0-9.eE+-]+) on", (cwd / "log.lammps").read_text(), re.M)
    if not m:
        raise bl.BenchError(f"no Loop time in {cwd}/log.lammps")
    return float(m.group(1))


def perf_record(rate: int, program: list[str], preload: Optional[Path]) -> list[str]:
    """A rank's command: perf record around program (with pathscope preloaded into program
    alone when preload is given), one perf-RANK.data per rank in the working directory."""
    inner = ["env", f"LD_PRELOAD={preload}"] if preload else []
    return ["sh", "-c", f'exec perf record -q -e cpu-clock -c {NS_PER_S // rate} '
            f'--call-graph dwarf,{PERF_STACK_BYTES} -o "perf-$OMPI_COMM_WORLD_RANK.data" '
            '-- "$@"', "sh"] + inner + program


def compare(lib: Path, ranks: int, steps: int, workdir: Path, rate: Optional[int] = None,
            perf_rate: int = 1000, metric: Optional[str] = None,
            separate_runs: bool = False, timeout: int = bl.RUN_TIMEOUT,
            options: Optional[dict[str, str]] = None) -> Comparison:
    """Runs the LAMMPS job under both tools in workdir (created if missing) and reads both.
    options: more PATHSCOPE_* variables for the ranks (e.g. PATHSCOPE_SAMPLE_TIMER)."""
    metric = metric or default_metric()
    workdir.mkdir(parents=True, exist_ok=True)
    job = apps.lammps_input(steps)
    # (each rank's own tree: the comparison is per rank, as perf's)
    env = dict(options or {}, PATHSCOPE_QUIET="on")
    env.setdefault("PATHSCOPE_PER_RANK", "all")
    if rate is not None:
        env["PATHSCOPE_SAMPLE_RATE"] = str(rate)
    if separate_runs:
        ours_dir, perf_dir = workdir / "pathscope", workdir / "perf"
        for d in (ours_dir, perf_dir):
            d.mkdir()
            (d / "in.melt").write_text(job)
        env["PATHSCOPE_OUTPUT"] = str(ours_dir / "profile")
        bl.run(bl.mpirun(apps.MPI, ranks, PROGRAM, dict(env, LD_PRELOAD=str(lib))), cwd=ours_dir,
               timeout=timeout)
        bl.run(bl.mpirun(apps.MPI, ranks, perf_record(perf_rate, PROGRAM, None)), cwd=perf_dir,
               timeout=timeout)
    else:
        ours_dir = perf_dir = workdir
        (workdir / "in.melt").write_text(job)
        env["PATHSCOPE_OUTPUT"] = str(workdir / "profile")
        bl.run(bl.mpirun(apps.MPI, ranks, perf_record(perf_rate, PROGRAM, lib), env), cwd=workdir,
               timeout=timeout)
    samplers, kept, taken, cpu = pathscope_facts(ours_dir / "profile")
    theirs, perf_counts = perf_self(perf_dir)
    return Comparison(pathscope_self(ours_dir / "profile", metric), theirs, metric, samplers,
                      kept, taken, cpu, perf_counts, loop_seconds(ours_dir))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--rate", type=int, default=None,
                    help="pathscope's sampling rate (default: pathscope's default)")
    ap.add_argument("--perf-rate", type=int, default=1000, help="perf's cpu-clock rate")
    ap.add_argument("--metric", choices=("oncpu_time", "time"), default=None,
                    help="pathscope's metric (default: oncpu_time when available)")
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--separate-runs", action="store_true",
                    help="one run under each tool instead of both on the same run")
    ap.add_argument("--option", metavar="NAME=VALUE", action="append", default=[],
                    help="a PATHSCOPE_* variable for the ranks, e.g. PATHSCOPE_SAMPLE_TIMER=perf "
                         "(repeatable)")
    ap.add_argument("--keep", metavar="DIR", type=Path, default=None,
                    help="run in DIR (a new directory) and keep the profile and perf data")
    a = ap.parse_args(argv)
    options = dict(o.split("=", 1) for o in a.option)
    if any(not k.startswith("PATHSCOPE_") for k in options):
        raise bl.BenchError("--option takes PATHSCOPE_NAME=VALUE")
    lib = bl.snapshot_library(apps.MPI)
    if a.keep:
        if a.keep.exists():
            raise bl.BenchError(f"{a.keep} exists: --keep takes a new directory")
        c = compare(lib, a.ranks, a.steps, a.keep, a.rate, a.perf_rate, a.metric,
                    a.separate_runs, options=options)
    else:
        bl.WORK.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="perfcompare-", dir=bl.WORK) as tmpname:
            c = compare(lib, a.ranks, a.steps, Path(tmpname), a.rate, a.perf_rate, a.metric,
                        a.separate_runs, options=options)
    rows = [[name[:70], f"{ours:.1f}", f"{theirs:.1f}", f"{ours - theirs:+.1f}"]
            for name, ours, theirs in c.rows(a.top)]
    worst = max((abs(o - t) for _, o, t in c.rows(a.top)), default=0.0)
    how = "two separate runs" if a.separate_runs else "the same run"
    sampled = c.sampled_fraction()
    fraction = f"{100 * sampled:.0f}% of the expiries" if sampled is not None else "?"
    print(f"LAMMPS in.melt (32,000 atoms, {a.steps} steps, Loop time {c.loop_seconds:.1f} s), "
          f"{a.ranks} ranks, {how}; pathscope metric {c.metric}, sampler "
          f"{'; '.join(sorted(set(c.samplers))) or '?'}, {c.samples_kept} samples kept, "
          f"{c.samples_taken} taken in {c.cpu_seconds:.1f} CPU s ({fraction}); "
          f"perf cpu-clock {a.perf_rate} Hz, {c.perf_counts['kept']} samples kept, "
          f"{c.perf_counts['mpi']} in MPI or pathscope, {c.perf_counts['incomplete']} with an "
          "incomplete call chain (left out)")
    worst_incomplete = sorted(((n, k[len("incomplete in "):]) for k, n in c.perf_counts.items()
                               if k.startswith("incomplete in ")), reverse=True)[:4]
    if worst_incomplete:
        print("incomplete chains by innermost frame: " +
              ", ".join(f"{name} {n}" for n, name in worst_incomplete))
    print("share of non-MPI CPU time (self), percent; the union of both tools' "
          f"top {a.top}, by perf's share")
    print(bl.table(["function", "pathscope %", "perf %", "difference (points)"], rows))
    ours, theirs = c.shares()
    top_ours = set(sorted(ours, key=lambda k: -ours[k])[:a.top])
    top_perf = set(sorted(theirs, key=lambda k: -theirs[k])[:a.top])
    print(f"same top-{a.top} set: {len(top_ours & top_perf)} of {a.top}; "
          f"largest difference {worst:.1f} percentage points")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except bl.BenchError as e:
        print(f"perfcompare.py: {e}", file=sys.stderr)
        sys.exit(1)
