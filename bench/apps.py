#!/usr/bin/env python3
"""End-to-end overhead of pathscope on real applications packaged by Debian (Open MPI builds).

    python3 bench/apps.py [--reps 5] [--cases lammps-2,lammps-4,hpcc-2] [--variants ...]
                          [--steps 1500] [--hpl-n 4000] [--gmx-steps 3000] [--json FILE]
                          [--perf-stat] [--mpip-lib PATH] [--mpisee-lib PATH] [--issue11]

    python3 bench/apps.py --issue11 --mpip-lib PATH --mpisee-lib PATH --json FILE
        the sampler comparison of issue 11: cases hpcc-4,hpcc-2,lammps-4,lammps-2,gromacs-4,
        gromacs-2 (4 ranks on 2 cores and 2 ranks), HPL N=1200 (a 2x2 grid on 4 ranks), the
        variants base,pathscope,pathscope-preload,pathscope-perf,pathscope-wall,
        pathscope-nopaths,pathscope-1khz,mpip,mpip-nosites,mpisee and --perf-stat; any of
        --cases, --variants, --hpl-n given as well replaces its part of the preset

Cases (all from Debian packages; nobody here wrote them):
  lammps-N  LAMMPS (`lmp`, package lammps) on N ranks, the shipped example
            /usr/share/lammps/examples/melt/in.melt (3d Lennard-Jones melt) with two size edits
            applied here and checked: box 20^3 lattice cells (32,000 atoms) instead of 10^3, and
            --steps timesteps instead of 250.  Inside time: LAMMPS's "Loop time".
  hpcc-N    HPC Challenge (`hpcc`, package hpcc) on N ranks: HPL, PTRANS, DGEMM, STREAM,
            RandomAccess, FFT and b_eff in one run, with the shipped example hpccinf.txt
            (/usr/share/doc/hpcc/examples/_hpccinf.txt) edited to N=--hpl-n and a 1xN (2 ranks)
            or 2x2 (4 ranks) grid.  Inside time: HPL_time from hpccoutf.txt.
  gromacs-N GROMACS (`gmx_mpi`, package gromacs) on N ranks: a box of SPC/E water (OPLS-AA,
            4 nm cube, 2,165 molecules, 6,495 atoms) made once per benchmark run with the
            packaged tools from the shipped data: `gmx solvate -cs spc216.gro -box 4 4 4`
            and `gmx grompp` with the .mdp written here (md, dt 2 fs, PME, 1.0 nm cut-offs,
            Verlet lists, V-rescale at 300 K, no output but the log); each run is
            `gmx_mpi mdrun -s topol.tpr -nsteps --gmx-steps -ntomp 1 -notunepme -dlb no`
            (no PME grid tuning or dynamic load balancing: both adapt the work to measured
            timings).  Inside time: the "Wall t" of md.log.
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
  pathscope-1khz     as pathscope-preload with PATHSCOPE_SAMPLE_RATE=1000 (five times the
                     default rate)
  pathscope-nosamples as pathscope-preload with PATHSCOPE_SAMPLE_RATE=0: call paths of the MPI
                     calls only, no sampler (what the paths cost without the timers)
  pathscope-posix    as pathscope-preload with PATHSCOPE_SAMPLE_TIMER=posix: each thread sampled
                     by a POSIX CPU-time timer only (tick-driven, no cost per context switch)
  pathscope-perf     as pathscope-preload with PATHSCOPE_SAMPLE_TIMER=perf: each thread sampled
                     by a perf_event task-clock event (the default sampler before issue 11; its
                     hrtimer is stopped and restarted at every context switch); skipped with a
                     note if the library predates PATHSCOPE_SAMPLE_TIMER
  pathscope-wall     as pathscope-preload with PATHSCOPE_SAMPLE_CLOCK=wall (a POSIX
                     CLOCK_MONOTONIC timer per thread: samples wall-clock time)
  pathscope-nopaths  as pathscope-preload with PATHSCOPE_PATHS=off: the per-communicator MPI
                     profile only (no unwinding, no sampling; the foundation's measurement)
  pathscope-heap     as pathscope-preload with heap profiling (libpathscope-heap.so preloaded
                     first, PATHSCOPE_HEAP=on): every allocation on its call path
  heaptrack          mpirun ... heaptrack -o ht-RANK APP (Debian's heap profiler, recording)
  pathscope-nolive   as pathscope-preload with PATHSCOPE_LIVE=0: no live segment (the control
                     channel stays; the default publishes the segment every second)
  pathscope-nocontrol as pathscope-preload with PATHSCOPE_CONTROL=off: no control socket (the
                     live segment stays)
  pathscope-nothread as pathscope-preload with PATHSCOPE_LIVE=0 and PATHSCOPE_CONTROL=off:
                     neither, so no control thread at all
  pathscope-probe    as pathscope-preload with PATHSCOPE_PROBE=--probe (LAMMPS only; default
                     LAMMPS_NS::PairLJCut::compute,LAMMPS_NS::Neighbor::build, metrics time).
                     Check: per rank, the calls of each probe equal what log.lammps implies:
                     PairLJCut::compute steps + 1 (setup computes the forces once), and
                     Neighbor::build the "Neighbor list builds" + 1 (setup builds once)
  pathscope-off      as pathscope-preload with PATHSCOPE_MPI=off: every MPI call still goes
                     through pathscope's wrapper, which passes it straight on (the cost of the
                     interposition alone; not run unless asked for with --variants)
  pathscope-kernel   as pathscope with --kernel ebpf (kernel time from the node's collector
                     pathscope-kcollect, default period); skipped with a note if the collector
                     was not built
  pathscope-kernel-libc  as pathscope with --kernel libc (the libc wrappers in each rank)
  strace             mpirun ... strace -c -f -o strace-RANK.txt APP (Debian's strace, counts)
  bpftrace           bpftrace -o bpftrace.txt -c "mpirun ... APP" SCRIPT: one bpftrace for the
                     whole run, SCRIPT (written here) counting and timing every syscall of the
                     processes named like the application (comm) per pid, thread and syscall,
                     as bench/syscalls_pertid.bt does for one process; needs root (tracefs is
                     mounted on /sys/kernel/tracing if missing); skipped with a note otherwise
  mpip               mpirun -x LD_PRELOAD=--mpip-lib -x LOGNAME ... APP: mpiP (LLNL's PMPI
                     profiler, built from its sources: bench/peers.md) with its defaults (call
                     sites one frame deep); LOGNAME is set from this process's user, since mpiP
                     needs it at run time.  Check: one *.mpiP report in the run directory
  mpip-nosites       as mpip with MPIP="-k 0": no call-site stack walks
  mpisee             mpirun -x LD_PRELOAD=--mpisee-lib ... APP: mpisee (a communicator-centric
                     PMPI profiler, built from its sources); skipped on hpcc-N cases: its
                     MPI_Testany wrapper calls PMPI_Waitany, which deadlocks HPCC's
                     MPIRandomAccess.  Check: one *.db (SQLite) file in the run directory
                     The peer variants are skipped with a note unless their library is given.
The kernel variants run with copies of libpathscope-kernel.so and pathscope-kcollect next to
the snapshot of libpathscope.so (build/bench/openmpi/), and every run starts once no
pathscope-kcollect is left (it lingers 0.5 s after its last process and taxes every process
on the node while it runs).  Checks: each --kernel run's rank files have `ksys` lines with
calls, a complete `kend` line and the source asked for; strace leaves one summary per rank;
bpftrace counts syscalls of as many processes as there are ranks.
The live segments (PATHSCOPE_LIVE, docs/format.md): while a pathscope run goes, a thread here
looks for the run's segments (/dev/shm/pathscope-<uid>/*.live whose outdir is the run's profile
directory) every 0.1 s and keeps each open, so that it reads the header words the publisher
writes last (state ended) after the run, though the file is unlinked by then; reported: the
segments found (one per rank, none with PATHSCOPE_LIVE=0), publishes, and the publishers' CPU
time (publisher_cpu_total_ns summed over the ranks) against the ranks' CPU time (user + system
of the whole run).
Wall time is the whole mpirun command (start-up, MPI_Init, the run, MPI_Finalize and the
profile write).  Every pathscope run must leave a complete profile.tsv, or the benchmark fails.
Resources of every run, from os.wait4 on mpirun (which reaps the ranks, so their usage is
included): user and system CPU seconds, CPUs used ((user + system) / wall) and context
switches (voluntary + involuntary, all processes and threads of the run); medians are
reported per variant.  With --perf-stat, one more interleaved repetition of every case and
variant runs under `perf stat -e context-switches,task-clock -x, -o FILE -- mpirun ...`
(counting for the whole process tree); its counts and its system time are reported in their
own table and kept out of the wall-time medians, since perf's counters cost something at every
context switch too.
"""
from __future__ import annotations

import argparse
import json
import os
import pwd
import re
import shutil
import statistics
import sys
import tempfile
import threading
from pathlib import Path
from typing import Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib as bl  # noqa: E402
import kernel as kb  # noqa: E402  (tracefs and collector helpers of bench/kernel.py)

MELT = Path("/usr/share/lammps/examples/melt/in.melt")
HPCCINF = Path("/usr/share/doc/hpcc/examples/_hpccinf.txt")
GMX_TOP = Path("/usr/share/gromacs/top")
GMX_BOX_NM = 4.0
# the .mdp for the GROMACS case (nsteps is given to mdrun)
GMX_MDP = """integrator         = md
dt                 = 0.002
nsteps             = 1000
nstlog             = 1000
nstcalcenergy      = 100
nstenergy          = 0
nstxout            = 0
nstvout            = 0
nstfout            = 0
nstxout-compressed = 0
cutoff-scheme      = Verlet
nstlist            = 10
coulombtype        = PME
rcoulomb           = 1.0
rvdw               = 1.0
DispCorr           = EnerPres
tcoupl             = V-rescale
tc-grps            = System
tau_t              = 0.1
ref_t              = 300
pcoupl             = no
gen_vel            = yes
gen_temp           = 300
gen_seed           = 1
constraints        = h-bonds
"""
GMX_TOPOL = """#include "oplsaa.ff/forcefield.itp"
#include "oplsaa.ff/spce.itp"

[ system ]
SPC/E water

[ molecules ]
"""
VARIANTS = ("base", "pathscope", "pathscope-preload", "perf")
SAMPLING_VARIANTS = {"pathscope-100hz": {"PATHSCOPE_SAMPLE_RATE": "100"},
                     "pathscope-1khz": {"PATHSCOPE_SAMPLE_RATE": "1000"},
                     "pathscope-nosamples": {"PATHSCOPE_SAMPLE_RATE": "0"},
                     "pathscope-nopaths": {"PATHSCOPE_PATHS": "off"},
                     "pathscope-perf": {"PATHSCOPE_SAMPLE_TIMER": "perf"},
                     "pathscope-posix": {"PATHSCOPE_SAMPLE_TIMER": "posix"},
                     "pathscope-wall": {"PATHSCOPE_SAMPLE_CLOCK": "wall"},
                     "pathscope-nolive": {"PATHSCOPE_LIVE": "0"},
                     "pathscope-nocontrol": {"PATHSCOPE_CONTROL": "off"},
                     "pathscope-nothread": {"PATHSCOPE_LIVE": "0", "PATHSCOPE_CONTROL": "off"},
                     "pathscope-probe": {}}  # (PATHSCOPE_PROBE from --probe)
DEFAULT_PROBE = "LAMMPS_NS::PairLJCut::compute,LAMMPS_NS::Neighbor::build"
LIVE_DIR = Path(f"/dev/shm/pathscope-{os.geteuid()}")
# live segment header (docs/format.md, "Live segment"): offsets of the words read here
LIVE_MAGIC = b"PSLIVE1\0"
# not run by default: the interposition floor (wrappers installed, measurement off)
KERNEL_VARIANTS = {"pathscope-kernel": "ebpf", "pathscope-kernel-libc": "libc"}
# other PMPI profilers, preloaded: variant -> (its --*-lib option, extra environment)
PEER_VARIANTS = {"mpip": ("mpip_lib", {}), "mpip-nosites": ("mpip_lib", {"MPIP": "-k 0"}),
                 "mpisee": ("mpisee_lib", {})}
# (application, variant) pairs that cannot run, and why
PEER_BROKEN = {("hpcc", "mpisee"): "mpisee's MPI_Testany wrapper calls PMPI_Waitany, which "
                                   "deadlocks HPCC's MPIRandomAccess"}
EXTRA_VARIANTS = ("pathscope-off", "perf-1khz", "pathscope-heap", "heaptrack") + \
    tuple(SAMPLING_VARIANTS) + tuple(KERNEL_VARIANTS) + ("strace", "bpftrace") + \
    tuple(PEER_VARIANTS)
ISSUE11_CASES = "hpcc-4,hpcc-2,lammps-4,lammps-2,gromacs-4,gromacs-2"
ISSUE11_VARIANTS = ("base,pathscope,pathscope-preload,pathscope-perf,pathscope-posix,pathscope-wall,"
                    "pathscope-nopaths,pathscope-1khz,mpip,mpip-nosites,mpisee")
ISSUE11_HPL_N = 1200
KERNEL_FILES = ("libpathscope-kernel.so", "pathscope-kcollect")  # next to libpathscope.so
# bpftrace for a whole run: every syscall of the processes called COMM, per pid, thread and
# syscall number (the aggregation of bench/syscalls_pertid.bt, filtered by name, not by pid)
BPFTRACE_APP = """tracepoint:raw_syscalls:sys_enter /comm == "COMM"/ {
  @start[tid] = nsecs; @nr[tid] = args->id; }
tracepoint:raw_syscalls:sys_exit /comm == "COMM" && @start[tid]/ {
  @count[pid, tid, @nr[tid]] = count(); @ns[pid, tid, @nr[tid]] = sum(nsecs - @start[tid]);
  delete(@start[tid]); }
END { clear(@start); clear(@nr); }
"""
MPI = "openmpi"  # Debian builds lmp, hpcc and gmx_mpi against Open MPI only
# end-to-end goals, % of the base wall time: default settings and 1 kHz (issue 11), kernel time
GOAL_PERCENT = {"pathscope": 5.0, "pathscope-preload": 5.0, "pathscope-1khz": 2.0,
                "pathscope-kernel": 1.0, "pathscope-kernel-libc": 1.0}
PERF_STAT_EVENTS = "context-switches,task-clock"
# hpccoutf.txt summary values kept for every HPCC run (seconds, except the problem size)
HPCC_PHASES = ("HPL_time", "PTRANS_time", "MPIRandomAccess_time", "MPIRandomAccess_LCG_time",
               "MPIRandomAccess_N")


class LiveWatch:
    """Finds a run's live segments while it runs and keeps them open (see the docstring)."""

    def __init__(self, outdir: Path):
        self.outdir = str(outdir).encode()
        self.fds: dict[str, int] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.watch, daemon=True)

    def watch(self) -> None:
        while not self.stop.wait(0.1):
            try:
                names = [n for n in os.listdir(LIVE_DIR) if n.endswith(".live")]
            except OSError:
                continue
            for name in names:
                if name in self.fds:
                    continue
                try:
                    fd = os.open(LIVE_DIR / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
                except OSError:
                    continue
                header = read_live_header(fd)
                if header and header["outdir"] == self.outdir:
                    self.fds[name] = fd
                else:
                    os.close(fd)  # another run's segment, or its outdir not known yet

    def __enter__(self) -> "LiveWatch":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()

    def totals(self) -> dict:
        """After the run: segments, publishes and publisher CPU ns over every segment."""
        headers = [read_live_header(fd) for fd in self.fds.values()]
        for fd in self.fds.values():
            os.close(fd)
        if any(h is None for h in headers):
            raise bl.BenchError("a live segment could not be read consistently")
        return {"segments": len(headers), "ended": sum(h["state"] == 2 for h in headers),
                "publishes": sum(h["publishes"] for h in headers),
                "publisher_cpu_ns": sum(h["cpu_total_ns"] for h in headers),
                "interval_ms": sorted({h["interval_ms"] for h in headers})}


def read_live_header(fd: int) -> Optional[dict]:
    """The header words read here, from a copy taken under the seqlock (None if no consistent
    copy in 100 tries, or not a segment)."""
    for _ in range(100):
        head = os.pread(fd, 1608, 0)
        if len(head) < 1608 or head[:8] != LIVE_MAGIC:
            return None
        seq = int.from_bytes(head[16:24], "little")
        again = os.pread(fd, 1608, 0)
        if seq % 2 == 0 and head == again:
            return {"publishes": int.from_bytes(head[24:32], "little"),
                    "interval_ms": int.from_bytes(head[40:44], "little"),
                    "state": int.from_bytes(head[44:48], "little"),
                    "outdir": head[448:1472].split(b"\0", 1)[0],
                    "cpu_total_ns": int.from_bytes(head[1600:1608], "little")}
    return None


def lammps_expected_calls(log: str) -> dict[str, int]:
    """Per rank: the calls of PairLJCut::compute and Neighbor::build that log.lammps implies,
    summed over its runs: steps + 1 and neighbor list builds + 1 (each run's setup)."""
    steps = [int(m) for m in re.findall(r"^Loop time of \S+ on \d+ procs for (\d+) steps", log,
                                        re.M)]
    builds = [int(m) for m in re.findall(r"^Neighbor list builds = (\d+)$", log, re.M)]
    if not steps or len(steps) != len(builds):
        raise bl.BenchError(f"log.lammps: {len(steps)} Loop time and {len(builds)} Neighbor "
                            f"list builds lines")
    return {"LAMMPS_NS::PairLJCut::compute": sum(s + 1 for s in steps),
            "LAMMPS_NS::Neighbor::build": sum(b + 1 for b in builds)}


def probe_calls(profile: Path) -> dict[str, list[int]]:
    """Per probe SPEC, the calls of each rank (visits of its `probe` nodes)."""
    calls: dict[str, list[int]] = {}
    files = list(bl.rank_texts(profile).values())
    for rank, text in enumerate(files):
        names: dict[str, str] = {}
        for line in text.splitlines():
            f = line.split("\t")
            if f[0] == "probe":  # id, module, address, size, state, added, removed, SPEC, name
                names[f[1]] = f[8]
                calls.setdefault(f[8], [0] * len(files))
            elif f[0] == "node" and f[4] == "probe":  # thread, id, parent, kind, module, address
                calls[names[f[6]]][rank] += int(f[7])
    return calls


def check_probes(case: Case, profile: Path, cwd: Path) -> dict:
    want = lammps_expected_calls((cwd / "log.lammps").read_text())
    got = probe_calls(profile)
    for name, n in want.items():
        if got.get(name) != [n] * case.ranks:
            raise bl.BenchError(f"{case.name} pathscope-probe: calls of {name} per rank "
                                f"{got.get(name)}, log.lammps implies {n} on each of "
                                f"{case.ranks} ranks ({profile})")
    return {"probe_calls_per_rank": want}


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


def gromacs_input() -> tuple[bytes, int]:
    """topol.tpr for the water box, made with the packaged gmx (serial build, same release as
    gmx_mpi) in a scratch directory, and its number of water molecules."""
    for tool in ("gmx", "gmx_mpi"):
        if shutil.which(tool) is None:
            raise bl.BenchError(f"{tool} not found: apt-get install gromacs")
    if not (GMX_TOP / "spc216.gro").is_file() or not (GMX_TOP / "oplsaa.ff").is_dir():
        raise bl.BenchError(f"{GMX_TOP}/spc216.gro or oplsaa.ff missing: apt-get install "
                            f"gromacs-data")
    bl.WORK.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="gromacs-prep-", dir=bl.WORK) as d:
        cwd = Path(d)
        (cwd / "topol.top").write_text(GMX_TOPOL)
        (cwd / "md.mdp").write_text(GMX_MDP)
        box = f"{GMX_BOX_NM:g}"
        for cmd in (["gmx", "-quiet", "solvate", "-cs", "spc216.gro", "-box", box, box, box,
                     "-o", "conf.gro", "-p", "topol.top"],
                    ["gmx", "-quiet", "grompp", "-f", "md.mdp", "-c", "conf.gro", "-p",
                     "topol.top", "-o", "topol.tpr"]):
            bl.run(cmd, cwd=cwd)
        m = re.search(r"^SOL\s+(\d+)\s*$", (cwd / "topol.top").read_text(), re.M)
        if not m:
            raise bl.BenchError(f"gmx solvate added no water to {cwd}/topol.top")
        return (cwd / "topol.tpr").read_bytes(), int(m.group(1))


class Case:
    def __init__(self, name: str, args: argparse.Namespace):
        self.name = name
        self.app, n = name.rsplit("-", 1)
        self.ranks = int(n)
        if self.app == "lammps":
            self.program = ["lmp", "-in", "in.melt", "-log", "log.lammps", "-screen", "none"]
            self.files: dict[str, str | bytes] = {"in.melt": lammps_input(args.steps)}
            self.describe = (f"LAMMPS in.melt, 32,000 atoms, {args.steps} steps, "
                             f"{self.ranks} ranks")
        elif self.app == "hpcc":
            self.program = ["hpcc"]
            self.files = {"hpccinf.txt": hpcc_input(args.hpl_n, self.ranks)}
            self.describe = f"HPCC (all tests), HPL N={args.hpl_n} NB=80, {self.ranks} ranks"
        elif self.app == "gromacs":
            self.program = ["gmx_mpi", "mdrun", "-s", "topol.tpr", "-nsteps",
                            str(args.gmx_steps), "-ntomp", "1", "-notunepme", "-dlb", "no"]
            tpr, waters = gromacs_input()
            self.files = {"topol.tpr": tpr}
            self.describe = (f"GROMACS water, {3 * waters:,} atoms, PME, {args.gmx_steps} "
                             f"steps, {self.ranks} ranks")
        else:
            raise bl.BenchError(f"unknown case '{name}' (lammps-N, hpcc-N or gromacs-N)")
        self.comm = {"lammps": "lmp", "hpcc": "hpcc", "gromacs": "gmx_mpi"}[self.app]

    def inside_seconds(self, cwd: Path) -> dict[str, float]:
        """The application's own timings: "inside" is its main phase (LAMMPS Loop time, HPCC
        HPL_time, GROMACS mdrun's Wall t); for HPCC also the other MPI-heavy phases of
        hpccoutf.txt's summary."""
        if self.app == "lammps":
            m = re.search(r"^Loop time of ([0-9.eE+-]+) on", (cwd / "log.lammps").read_text(), re.M)
            if not m:
                raise bl.BenchError(f"{self.name}: no Loop time in {cwd}/log.lammps")
            return {"inside": float(m.group(1))}
        if self.app == "gromacs":
            log = cwd / "md.log"
            m = re.search(r"^\s+Time:\s+([0-9.eE+-]+)\s+([0-9.eE+-]+)", log.read_text()
                          if log.is_file() else "", re.M)
            if not m:
                raise bl.BenchError(f"{self.name}: no Time: line (Wall t) in {log}")
            return {"inside": float(m.group(2))}
        text = (cwd / "hpccoutf.txt").read_text()
        times = {}
        for key in HPCC_PHASES:
            m = re.search(rf"^{key}=([0-9.eE+-]+)$", text, re.M)
            if not m:
                raise bl.BenchError(f"{self.name}: no {key} in {cwd}/hpccoutf.txt")
            times[key] = float(m.group(1))
        times["inside"] = times["HPL_time"]
        return times


def login_name() -> str:
    """The user name for LOGNAME (mpiP refuses to run without it)."""
    return os.environ.get("LOGNAME") or pwd.getpwuid(os.getuid()).pw_name


def command(case: Case, variant: str, cwd: Path, lib: Path,
            peer_libs: Optional[dict[str, Path]] = None, perf_stat: bool = False,
            probe: str = DEFAULT_PROBE) -> list[str]:
    """The command of one run; peer_libs: the preloaded library of each peer variant; with
    perf_stat the whole command runs under `perf stat`, which writes cwd/perf-stat.csv."""
    program = case.program
    env: dict[str, str] = {}
    if variant == "pathscope" or variant in KERNEL_VARIANTS:
        env = {"PATHSCOPE_LIB": str(lib)}
        kernel = ["--kernel", KERNEL_VARIANTS[variant]] if variant in KERNEL_VARIANTS else []
        program = [str(bl.REPO / "bin" / "pathscope"), "run", "--mpi", MPI] + kernel + \
            ["-o", str(cwd / "profile"), "--"] + program
    elif variant == "pathscope-preload":
        env = {"LD_PRELOAD": str(lib), "PATHSCOPE_OUTPUT": str(cwd / "profile")}
    elif variant in SAMPLING_VARIANTS:
        env = {"LD_PRELOAD": str(lib), "PATHSCOPE_OUTPUT": str(cwd / "profile"),
               **SAMPLING_VARIANTS[variant]}
        if variant == "pathscope-probe":
            env["PATHSCOPE_PROBE"] = probe
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
    elif variant == "strace":
        program = ["sh", "-c", 'exec strace -c -f -o "strace-$OMPI_COMM_WORLD_RANK.txt" "$@"',
                   "sh"] + program
    elif variant in PEER_VARIANTS:
        env = {"LD_PRELOAD": str((peer_libs or {})[variant]), **PEER_VARIANTS[variant][1]}
        if variant.startswith("mpip"):
            env["LOGNAME"] = login_name()
    cmd = bl.mpirun(MPI, case.ranks, program, env)
    if variant == "bpftrace":
        script = cwd / "syscalls.bt"
        script.write_text(BPFTRACE_APP.replace("COMM", case.comm[:15]))
        launcher = shutil.which(cmd[0])  # bpftrace wants a path (usrmerge: two on PATH)
        if launcher is None:
            raise bl.BenchError(f"{cmd[0]} not found")
        cmd = [launcher] + cmd[1:]
        if any(" " in a or not a for a in cmd):
            raise bl.BenchError(f"bpftrace -c cannot take arguments with spaces: {cmd}")
        cmd = ["bpftrace", "-o", str(cwd / "bpftrace.txt"), "-c", " ".join(cmd), str(script)]
    if perf_stat:
        cmd = ["perf", "stat", "-e", PERF_STAT_EVENTS, "-x,", "-o", str(cwd / "perf-stat.csv"),
               "--"] + cmd
    return cmd


def snapshot_kernel_files(lib: Path) -> Optional[str]:
    """Copies libpathscope-kernel.so and pathscope-kcollect next to the snapshot lib (the CLI
    and the runtime look for them there), removing stale copies first.  None, or why
    pathscope-kernel (eBPF) cannot run."""
    why = None
    for name in KERNEL_FILES:
        src, dst = bl.REPO / "build" / MPI / name, lib.parent / name
        dst.unlink(missing_ok=True)
        if src.is_file():
            shutil.copy2(src, dst)
        elif name == "pathscope-kcollect":
            why = f"the eBPF collector was not built ({src} is missing)"
        else:
            raise bl.BenchError(f"{src} does not exist: build it with `make build MPI={MPI}`")
    return why


def check_kernel(case: Case, variant: str, profile: Path) -> dict:
    """Every rank file has kernel tables from the source asked for, with calls counted."""
    want = KERNEL_VARIANTS[variant]
    calls = ns = 0
    files = list(bl.rank_texts(profile).values())
    if len(files) != case.ranks:
        raise bl.BenchError(f"{variant}: {len(files)} rank texts in {profile} for {case.ranks}")
    for text in files:
        rows = [line.split("\t") for line in text.splitlines()]
        kernel = [r for r in rows if r[0] == "kernel"]
        kend = [r for r in rows if r[0] == "kend"]
        ksys = [r for r in rows if r[0] == "ksys"]
        if len(kernel) != 1 or kernel[0][1] != want:
            raise bl.BenchError(f"{variant}: {f}: expected a `kernel` line with source {want}, "
                                f"found {kernel}")
        if not kend or kend[-1][1] == "-" or not ksys:
            raise bl.BenchError(f"{variant}: {f}: incomplete kernel tables ({len(ksys)} ksys "
                                f"lines, kend {kend})")
        c = sum(int(r[3]) for r in ksys)
        if c <= 0:
            raise bl.BenchError(f"{variant}: {f}: no calls in the ksys lines")
        calls += c
        ns += sum(int(r[4]) for r in ksys)
    return {"syscalls": calls, "syscall_ns": ns}


def check_strace(case: Case, cwd: Path) -> dict:
    files = sorted(cwd.glob("strace-*.txt"))
    if len(files) != case.ranks:
        raise bl.BenchError(f"strace wrote {len(files)} summaries for {case.ranks} ranks in {cwd}")
    calls = 0
    for f in files:
        m = re.search(r"^\s*[0-9.]+\s+[0-9.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?total$",
                      f.read_text(), re.M)
        if not m:
            raise bl.BenchError(f"no total line in strace's summary {f}")
        calls += int(m.group(1))
    return {"syscalls": calls}


def check_bpftrace(case: Case, cwd: Path) -> dict:
    text = (cwd / "bpftrace.txt").read_text() if (cwd / "bpftrace.txt").is_file() else ""
    counts = [(int(m.group(1)), int(m.group(2))) for m in
              re.finditer(r"^@count\[(\d+), \d+, \d+\]: (\d+)$", text, re.M)]
    pids = {p for p, _ in counts}
    if len(pids) < case.ranks:
        raise bl.BenchError(f"bpftrace counted syscalls of {len(pids)} {case.comm} processes "
                            f"for {case.ranks} ranks in {cwd}/bpftrace.txt")
    return {"syscalls": sum(c for _, c in counts)}


def read_perf_stat(path: Path) -> dict:
    """context switches and task-clock seconds from `perf stat -x,` output (value,unit,event,...)."""
    counts = {}
    text = path.read_text() if path.is_file() else ""
    for line in text.splitlines():
        fields = line.split(",")
        if len(fields) < 3 or line.startswith("#"):
            continue
        value, unit, event = fields[0], fields[1], fields[2]
        try:
            number = float(value)
        except ValueError:
            raise bl.BenchError(f"perf stat did not count {event} ({value}) in {path}")
        if event == "context-switches":
            counts["perf_switches"] = int(number)
        elif event == "task-clock":
            counts["perf_task_clock_s"] = number / 1000 if unit == "msec" else number / 1e9
    if set(counts) != {"perf_switches", "perf_task_clock_s"}:
        raise bl.BenchError(f"no context-switches and task-clock counts in {path}:\n{text}")
    return counts


# the sampler each variant must have run with (rank files' `sampler` line, docs/format.md)
EXPECTED_SAMPLER = {"pathscope-perf": "perf-task-clock", "pathscope-posix": "posix-cpu-timer",
                    "pathscope-wall": "posix-wall-timer",
                    "pathscope-nopaths": "off", "pathscope-nosamples": "off"}


def check_sampler(case: Case, variant: str, profile: Path) -> list[str]:
    """The sampler sources of the rank files (`sampler` lines); the one a variant asks for must
    be the only one."""
    sources = set()
    for text in bl.rank_texts(profile).values():
        for line in text.splitlines():
            fields = line.split("\t")
            if fields[0] == "sampler" and len(fields) > 1:
                sources.add(fields[1])
    want = EXPECTED_SAMPLER.get(variant)
    if want and sources and sources != {want}:
        raise bl.BenchError(f"{case.name} {variant}: the ranks sampled with {sorted(sources)}, "
                            f"not {want} ({profile}/ranks)")
    return sorted(sources)


def check_live(case: Case, variant: str, live: dict) -> None:
    """One segment per rank, each ended, unless PATHSCOPE_LIVE=0 (none)."""
    off = SAMPLING_VARIANTS.get(variant, {}).get("PATHSCOPE_LIVE") == "0"
    want = 0 if off else case.ranks
    if live["segments"] != want or live["ended"] != want:
        raise bl.BenchError(f"{case.name} {variant}: {live['segments']} live segments "
                            f"({live['ended']} ended), expected {want}")


def check_peer(case: Case, variant: str, cwd: Path) -> str:
    """The peer profiler wrote its output: mpiP one *.mpiP report, mpisee one *.db file."""
    pattern = "*.mpiP" if variant.startswith("mpip") else "*.db"
    found = sorted(cwd.glob(pattern))
    if len(found) != 1 or found[0].stat().st_size == 0:
        raise bl.BenchError(f"{case.name} {variant}: expected one non-empty {pattern} in {cwd}, "
                            f"found {[p.name for p in found]}")
    return f"{found[0].name} {found[0].stat().st_size} B"


def one_run(case: Case, variant: str, lib: Path, tmp: Path,
            peer_libs: Optional[dict[str, Path]] = None, perf_stat: bool = False,
            probe: str = DEFAULT_PROBE) -> dict:
    cwd = Path(tempfile.mkdtemp(prefix=f"{case.name}-{variant}-", dir=tmp))
    for name, content in case.files.items():
        if isinstance(content, bytes):
            (cwd / name).write_bytes(content)
        else:
            (cwd / name).write_text(content)
    if not kb.wait_collector_gone():
        print(f"apps: warning: a {kb.COLLECTOR} is still running: this run pays its tax",
              file=sys.stderr, flush=True)
    with LiveWatch(cwd / "profile") as live:
        wall, out, usage = bl.run_measured(
            command(case, variant, cwd, lib, peer_libs, perf_stat, probe), cwd=cwd)
    result = {"wall": wall, **usage, **case.inside_seconds(cwd), "live": live.totals()}
    if variant.startswith("pathscope"):
        check_live(case, variant, result["live"])
    if variant == "pathscope-probe":
        result.update(check_probes(case, cwd / "profile", cwd))
    if perf_stat:
        result["perf_stat"] = read_perf_stat(cwd / "perf-stat.csv")
    if variant in ("pathscope", "pathscope-preload", "pathscope-heap") or \
            variant in SAMPLING_VARIANTS or variant in KERNEL_VARIANTS:
        summary = bl.profile_summary(cwd / "profile")
        result["profile"] = {k: summary[k] for k in ("profile_tsv_bytes", "dir_bytes", "files")}
        result["profile"]["mpi_calls"] = sum(summary["calls"].values())
        result["profile"]["sampler"] = check_sampler(case, variant, cwd / "profile")
        if variant in KERNEL_VARIANTS:
            result["profile"].update(check_kernel(case, variant, cwd / "profile"))
    elif variant in PEER_VARIANTS:
        result["peer_output"] = check_peer(case, variant, cwd)
    elif variant == "strace":
        result["strace"] = check_strace(case, cwd)
    elif variant == "bpftrace":
        result["bpftrace"] = check_bpftrace(case, cwd)
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


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    doc = __doc__.split("\n\n")
    ap = argparse.ArgumentParser(description=doc[0], epilog="\n\n".join(doc[1:]),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=5,
                    help="interleaved repetitions of each case and variant (default 5)")
    ap.add_argument("--cases", help="comma-separated lammps-N, hpcc-N, gromacs-N (N ranks; "
                                    "default lammps-2,lammps-4,hpcc-2; --issue11: "
                                    f"{ISSUE11_CASES})")
    ap.add_argument("--variants", help=f"comma-separated, must include base (default "
                                       f"{','.join(VARIANTS)}; --issue11: {ISSUE11_VARIANTS}); "
                                       f"all: {', '.join(VARIANTS + EXTRA_VARIANTS)}")
    ap.add_argument("--steps", type=int, default=1500, help="LAMMPS timesteps (default 1500)")
    ap.add_argument("--hpl-n", type=int, help=f"HPL matrix order (default 4000; --issue11: "
                                              f"{ISSUE11_HPL_N})")
    ap.add_argument("--gmx-steps", type=int, default=3000,
                    help="GROMACS mdrun steps (default 3000)")
    ap.add_argument("--perf-stat", action="store_true",
                    help="one more repetition of everything under `perf stat -e "
                         f"{PERF_STAT_EVENTS}`, reported apart (on with --issue11)")
    ap.add_argument("--mpip-lib", type=Path, metavar="PATH",
                    help="libmpiP.so for the mpip variants (without it they are skipped)")
    ap.add_argument("--mpisee-lib", type=Path, metavar="PATH",
                    help="libmpisee.so for the mpisee variant (without it it is skipped)")
    ap.add_argument("--issue11", action="store_true",
                    help="the sampler comparison of issue 11 (cases, variants, HPL N, "
                         "--perf-stat; see above)")
    ap.add_argument("--probe", default=DEFAULT_PROBE,
                    help=f"PATHSCOPE_PROBE of the pathscope-probe variant (default "
                         f"{DEFAULT_PROBE}; its count check knows these two only)")
    ap.add_argument("--json", help="also write every measurement to this file")
    args = ap.parse_args(argv)
    if args.cases is None:
        args.cases = ISSUE11_CASES if args.issue11 else "lammps-2,lammps-4,hpcc-2"
    if args.variants is None:
        args.variants = ISSUE11_VARIANTS if args.issue11 else ",".join(VARIANTS)
    if args.hpl_n is None:
        args.hpl_n = ISSUE11_HPL_N if args.issue11 else 4000
    args.perf_stat = args.perf_stat or args.issue11
    return args


def skipped_variants(variants: list[str], lib: Path, args: argparse.Namespace) -> dict[str, str]:
    """The variants that cannot run here, with the reason; raises for a missing tool."""
    skipped: dict[str, str] = {}
    if any(v in KERNEL_VARIANTS for v in variants):
        why = snapshot_kernel_files(lib)
        if why and "pathscope-kernel" in variants:
            skipped["pathscope-kernel"] = why
    for tool in ("strace", "bpftrace"):
        if tool in variants and shutil.which(tool) is None:
            raise bl.BenchError(f"{tool} not found: apt-get install {tool} "
                                f"(or leave it out with --variants)")
    if "bpftrace" in variants:
        why = "bpftrace needs root" if os.geteuid() != 0 else kb.ensure_tracefs()
        if why:
            skipped["bpftrace"] = why
    if "pathscope-perf" in variants and b"PATHSCOPE_SAMPLE_TIMER" not in lib.read_bytes():
        skipped["pathscope-perf"] = (f"{lib.name} has no PATHSCOPE_SAMPLE_TIMER option (built "
                                     f"before issue 11; its default sampler is the perf event)")
    for v in variants:
        if v not in PEER_VARIANTS:
            continue
        option = PEER_VARIANTS[v][0]
        path = getattr(args, option)
        flag = "--" + option.replace("_", "-")
        if path is None:
            skipped[v] = f"no {flag} PATH given (build it from its sources: bench/peers.md)"
        elif not path.is_file():
            skipped[v] = f"{flag} {path} does not exist"
    if args.perf_stat and shutil.which("perf") is None:
        raise bl.BenchError("perf not found for --perf-stat: apt-get install linux-perf")
    return skipped


def median_cell(runs: list[dict], key: str, fmt: str, scale: float = 1.0) -> str:
    return bl.cell([scale * r[key] for r in runs], fmt) if runs else "-"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    variants = [v for v in args.variants.split(",") if v]
    if "base" not in variants or any(v not in VARIANTS + EXTRA_VARIANTS for v in variants):
        raise bl.BenchError(f"--variants must include base and be among "
                            f"{', '.join(VARIANTS + EXTRA_VARIANTS)}")
    cases = [Case(c, args) for c in args.cases.split(",") if c]

    info = bl.machine()
    lib = bl.snapshot_library(MPI)
    skipped = skipped_variants(variants, lib, args)
    for v, why in skipped.items():
        print(f"apps: skipping {v}: {why}", file=sys.stderr, flush=True)
    variants = [v for v in variants if v not in skipped]
    if "pathscope-probe" in variants:  # the runtime runs the resolver found next to itself
        shutil.copy2(bl.REPO / "build" / MPI / "pathscope-symbolize", lib.parent)
    # (case, variant) pairs that cannot run
    broken = {(c.name, v): why for c in cases for v in variants
              if (why := PEER_BROKEN.get((c.app, v)))}
    for (c, v), why in broken.items():
        print(f"apps: skipping {v} on {c}: {why}", file=sys.stderr, flush=True)
    peer_libs = {v: getattr(args, PEER_VARIANTS[v][0]).resolve()
                 for v in variants if v in PEER_VARIANTS}
    if "strace" in variants or "bpftrace" in variants:
        info["strace"] = bl.dpkg_version("strace")
        info["bpftrace"] = bl.dpkg_version("bpftrace")
    if any(c.app == "gromacs" for c in cases):
        info["gromacs"] = bl.dpkg_version("gromacs")
    if args.perf_stat:
        info["perf"] = bl.dpkg_version("linux-perf")
    for v, path in peer_libs.items():
        info[f"{v}_lib"] = f"{path} (sha256 {bl.sha256(path)[:12]})"
    tmp = Path(tempfile.mkdtemp(prefix="apps-", dir=bl.WORK))

    def run_all(rep: int, perf_stat: bool) -> dict:
        done = {}
        for c in cases:
            for v in bl.interleaved(rep, variants):
                if (c.name, v) not in broken:
                    done[(c.name, v)] = one_run(c, v, lib, tmp, peer_libs, perf_stat,
                                                args.probe)
            print(f"apps: {c.name} repetition {rep + 1}/{args.reps}"
                  f"{' (perf stat)' if perf_stat else ''}: " +
                  ", ".join(f"{v} {done[(c.name, v)]['wall']:.2f} s" for v in variants
                            if (c.name, v) in done), file=sys.stderr, flush=True)
        return done

    results = {(c.name, v): [] for c in cases for v in variants if (c.name, v) not in broken}
    for rep in range(args.reps):
        for key, run in run_all(rep, False).items():
            results[key].append(run)
    perf_results = run_all(args.reps, True) if args.perf_stat else {}

    print("\n".join(bl.machine_lines(info)))
    for v, why in skipped.items():
        print(f"skipped {v}: {why}")
    for (c, v), why in broken.items():
        print(f"skipped {v} on {c}: {why}")
    tools = [f"{k} {info[k]}" for k in ("gromacs", "strace", "bpftrace", "perf") if k in info]
    tools += [f"{v}: {info[f'{v}_lib']}" for v in peer_libs]
    if tools:
        print("; ".join(tools))
    print(f"wall time of the whole mpirun, median of {args.reps} interleaved runs (min..max); "
          f"overhead = median / median of base - 1; paired = per repetition, min..max")
    rows, inside_rows, usage_rows, perf_rows, profile_lines = [], [], [], [], []
    for c in cases:
        base_runs = results[(c.name, "base")]
        base = [r["wall"] for r in base_runs]
        base_in = [r["inside"] for r in base_runs]
        for v in variants:
            if (c.name, v) in broken:
                continue
            runs = results[(c.name, v)]
            walls = [r["wall"] for r in runs]
            ins = [r["inside"] for r in runs]
            paired = [100 * (w / b - 1) for w, b in zip(walls, base)]
            over = 100 * (statistics.median(walls) / statistics.median(base) - 1)
            over_in = 100 * (statistics.median(ins) / statistics.median(base_in) - 1)
            goal = GOAL_PERCENT.get(v)
            rows.append([c.describe, v, bl.cell(walls, ".2f"),
                         "-" if v == "base" else f"{over:+.1f}%",
                         "-" if v == "base" else f"{min(paired):+.1f}..{max(paired):+.1f}%",
                         "-" if goal is None else
                         f"<= {goal:g}%: {'yes' if over <= goal else 'no'}"])
            inside_rows.append([c.describe, v, bl.cell(ins, ".2f"),
                                "-" if v == "base" else f"{over_in:+.1f}%"])
            switches = [{"switches": r["voluntary_switches"] + r["involuntary_switches"],
                         "cpus": (r["user_s"] + r["sys_s"]) / r["wall"]} for r in runs]
            usage_rows.append([c.describe, v, median_cell(runs, "user_s", ".2f"),
                               median_cell(runs, "sys_s", ".2f"),
                               median_cell(switches, "cpus", ".2f"),
                               median_cell(switches, "switches", ".3f", 1e-6)])
            if (c.name, v) in perf_results:
                r = perf_results[(c.name, v)]
                p = r["perf_stat"]
                perf_rows.append([c.describe, v, f"{r['wall']:.2f}",
                                  f"{p['perf_switches'] / 1e6:.3f}",
                                  f"{p['perf_task_clock_s']:.2f}",
                                  f"{p['perf_task_clock_s'] / r['wall']:.2f}",
                                  f"{r['sys_s']:.2f}"])
            last = runs[-1]
            if "profile" in last:
                p = last["profile"]
                profile_lines.append(
                    f"{c.name} {v}: profile.tsv {p['profile_tsv_bytes']} B, directory "
                    f"{p['dir_bytes']} B in {p['files']} files, {p['mpi_calls']} MPI calls "
                    f"recorded ({p['mpi_calls'] / statistics.median(base):.0f} per second of "
                    f"run), sampler {','.join(p['sampler']) or '(no sampler line)'}")
            if "perf_bytes" in last:
                profile_lines.append(f"{c.name} perf: perf.data {last['perf_bytes']} B in total")
            if "peer_output" in last:
                profile_lines.append(f"{c.name} {v}: {last['peer_output']}")
            if "profile" in last and "syscalls" in last["profile"]:
                p = last["profile"]
                profile_lines.append(f"{c.name} {v}: {p['syscalls']} syscalls counted (ksys, all "
                                     f"ranks and threads), {p['syscall_ns'] / 1e9:.3f} s in them")
            for tool in ("strace", "bpftrace"):
                if tool in last:
                    profile_lines.append(f"{c.name} {tool}: {last[tool]['syscalls']} syscalls "
                                         f"counted")
    print(bl.table(["application", "variant", "wall s", "overhead", "paired", "goal"], rows))
    live_rows = [[c.describe, v, median_cell([r["live"] for r in results[(c.name, v)]],
                                             "publishes", ".0f"),
                  median_cell([r["live"] for r in results[(c.name, v)]], "publisher_cpu_ns",
                              ".1f", 1e-6),
                  bl.cell([100 * r["live"]["publisher_cpu_ns"] / 1e9 / (r["user_s"] + r["sys_s"])
                           for r in results[(c.name, v)]], ".4f")]
                 for c in cases for v in variants
                 if (c.name, v) in results and v.startswith("pathscope")]
    if live_rows:
        print("\nlive segments (all ranks): publishes, the publishers' CPU time, and its share "
              "of the run's CPU time (user + system), median (min..max)")
        print(bl.table(["application", "variant", "publishes", "publisher CPU ms",
                        "% of CPU"], live_rows))
    print("\nthe application's own timing of its main phase (LAMMPS Loop time, HPCC HPL_time, "
          "GROMACS Wall t), same runs")
    print(bl.table(["application", "variant", "inside s", "overhead"], inside_rows))
    print("\nresources of the same runs (os.wait4 on mpirun: all ranks and threads), median "
          "(min..max): CPUs used = (user + system) / wall")
    print(bl.table(["application", "variant", "user s", "system s", "CPUs used",
                    "context switches (M)"], usage_rows))
    if perf_rows:
        print(f"\none more run of each under perf stat -e {PERF_STAT_EVENTS} (whole mpirun; "
              f"not in the medians above); system s from os.wait4")
        print(bl.table(["application", "variant", "wall s", "context switches (M)",
                        "task-clock s", "CPUs used", "system s"], perf_rows))
    for c in cases:
        if c.app != "hpcc":
            continue
        print(f"\nHPCC phases ({c.describe}): median seconds as reported in hpccoutf.txt "
              f"(min..max), overhead against base")
        prow = []
        for v in variants:
            if (c.name, v) in broken:
                continue
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
            {"machine": info, "library_sha256": bl.sha256(lib),
             "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
             "skipped": skipped, "skipped_pairs": {f"{c} {v}": w for (c, v), w in broken.items()},
             "results": {f"{c} {v}": r for (c, v), r in results.items()},
             "perf_stat_results": {f"{c} {v}": r for (c, v), r in perf_results.items()}},
            indent=1))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except bl.BenchError as e:
        print(f"apps: {e}", file=sys.stderr)
        sys.exit(1)
