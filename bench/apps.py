#!/usr/bin/env python3
"""End-to-end overhead of pathscope on real applications packaged by Debian (Open MPI builds).

    python3 bench/apps.py [--reps 5] [--cases lammps-2,lammps-4,hpcc-2] [--variants ...]
                          [--steps 1500] [--hpl-n 4000] [--gmx-steps 3000] [--json FILE]

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
  pathscope-1khz     as pathscope-preload with PATHSCOPE_SAMPLE_RATE=1000 (the default rate)
  pathscope-nopaths  as pathscope-preload with PATHSCOPE_PATHS=off: the per-communicator MPI
                     profile only (no unwinding, no sampling; the foundation's measurement)
  pathscope-heap     as pathscope-preload with heap profiling (libpathscope-heap.so preloaded
                     first, PATHSCOPE_HEAP=on): every allocation on its call path
  heaptrack          mpirun ... heaptrack -o ht-RANK APP (Debian's heap profiler, recording)
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
The kernel variants run with copies of libpathscope-kernel.so and pathscope-kcollect next to
the snapshot of libpathscope.so (build/bench/openmpi/), and every run starts once no
pathscope-kcollect is left (it lingers 0.5 s after its last process and taxes every process
on the node while it runs).  Checks: each --kernel run's rank files have `ksys` lines with
calls, a complete `kend` line and the source asked for; strace leaves one summary per rank;
bpftrace counts syscalls of as many processes as there are ranks.
Wall time is the whole mpirun command (start-up, MPI_Init, the run, MPI_Finalize and the
profile write).  Every pathscope run must leave a complete profile.tsv, or the benchmark fails.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
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
                     "pathscope-nopaths": {"PATHSCOPE_PATHS": "off"}}
# not run by default: the interposition floor (wrappers installed, measurement off)
KERNEL_VARIANTS = {"pathscope-kernel": "ebpf", "pathscope-kernel-libc": "libc"}
EXTRA_VARIANTS = ("pathscope-off", "perf-1khz", "pathscope-heap", "heaptrack") + \
    tuple(SAMPLING_VARIANTS) + tuple(KERNEL_VARIANTS) + ("strace", "bpftrace")
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


def command(case: Case, variant: str, cwd: Path, lib: Path) -> list[str]:
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
    files = sorted((profile / "ranks").glob("rank-*.tsv"))
    if len(files) != case.ranks:
        raise bl.BenchError(f"{variant}: {len(files)} rank files in {profile} for {case.ranks}")
    for f in files:
        rows = [line.split("\t") for line in f.read_text().splitlines()]
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


def one_run(case: Case, variant: str, lib: Path, tmp: Path) -> dict:
    cwd = Path(tempfile.mkdtemp(prefix=f"{case.name}-{variant}-", dir=tmp))
    for name, content in case.files.items():
        if isinstance(content, bytes):
            (cwd / name).write_bytes(content)
        else:
            (cwd / name).write_text(content)
    if not kb.wait_collector_gone():
        print(f"apps: warning: a {kb.COLLECTOR} is still running: this run pays its tax",
              file=sys.stderr, flush=True)
    wall, out = bl.run(command(case, variant, cwd, lib), cwd=cwd)
    result = {"wall": wall, **case.inside_seconds(cwd)}
    if variant in ("pathscope", "pathscope-preload", "pathscope-heap") or \
            variant in SAMPLING_VARIANTS or variant in KERNEL_VARIANTS:
        summary = bl.profile_summary(cwd / "profile")
        result["profile"] = {k: summary[k] for k in ("profile_tsv_bytes", "dir_bytes", "files")}
        result["profile"]["mpi_calls"] = sum(summary["calls"].values())
        if variant in KERNEL_VARIANTS:
            result["profile"].update(check_kernel(case, variant, cwd / "profile"))
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5, help="repetitions of each variant (default 5)")
    ap.add_argument("--cases", default="lammps-2,lammps-4,hpcc-2")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--steps", type=int, default=1500, help="LAMMPS timesteps (default 1500)")
    ap.add_argument("--hpl-n", type=int, default=4000, help="HPL matrix order (default 4000)")
    ap.add_argument("--gmx-steps", type=int, default=3000,
                    help="GROMACS mdrun steps (default 3000)")
    ap.add_argument("--json", help="also write every measurement to this file")
    args = ap.parse_args(argv)
    variants = [v for v in args.variants.split(",") if v]
    if "base" not in variants or any(v not in VARIANTS + EXTRA_VARIANTS for v in variants):
        raise bl.BenchError(f"--variants must include base and be among "
                            f"{', '.join(VARIANTS + EXTRA_VARIANTS)}")
    cases = [Case(c, args) for c in args.cases.split(",") if c]

    info = bl.machine()
    lib = bl.snapshot_library(MPI)
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
    for v, why in skipped.items():
        print(f"apps: skipping {v}: {why}", file=sys.stderr, flush=True)
    variants = [v for v in variants if v not in skipped]
    if "strace" in variants or "bpftrace" in variants:
        info["strace"] = bl.dpkg_version("strace")
        info["bpftrace"] = bl.dpkg_version("bpftrace")
    if any(c.app == "gromacs" for c in cases):
        info["gromacs"] = bl.dpkg_version("gromacs")
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
    for v, why in skipped.items():
        print(f"skipped {v}: {why}")
    tools = [f"{k} {info[k]}" for k in ("gromacs", "strace", "bpftrace") if k in info]
    if tools:
        print("; ".join(tools))
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
            goal = "-" if v not in ("pathscope", "pathscope-preload") + tuple(KERNEL_VARIANTS) else \
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
            if "profile" in last and "syscalls" in last["profile"]:
                p = last["profile"]
                profile_lines.append(f"{c.name} {v}: {p['syscalls']} syscalls counted (ksys, all "
                                     f"ranks and threads), {p['syscall_ns'] / 1e9:.3f} s in them")
            for tool in ("strace", "bpftrace"):
                if tool in last:
                    profile_lines.append(f"{c.name} {tool}: {last[tool]['syscalls']} syscalls "
                                         f"counted")
    print(bl.table(["application", "variant", "wall s", "overhead", "paired", "<= 1%"], rows))
    print("\nthe application's own timing of its main phase (LAMMPS Loop time, HPCC HPL_time, "
          "GROMACS Wall t), same runs")
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
             "skipped": skipped,
             "results": {f"{c} {v}": r for (c, v), r in results.items()}}, indent=1))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except bl.BenchError as e:
        print(f"apps: {e}", file=sys.stderr)
        sys.exit(1)
