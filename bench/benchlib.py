"""Shared pieces of the benchmark drivers (bench/percall.py, bench/apps.py).

Only the standard library: the drivers run with Debian's python3, no venv needed.
Contract: a driver measures the uninstrumented and the instrumented program in the same run,
interleaved (rep i runs A then B, rep i+1 runs B then A, so slow drift of a shared machine
hits both sides alike), and reports medians with min/max.  Nothing here edits the repository
outside build/bench/.
"""
from __future__ import annotations

import hashlib
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Optional, Sequence

REPO = Path(__file__).resolve().parent.parent
# the rank texts of a profile, from ranks/ files or ranks.tsv (format 2.10): the tests' reader
sys.path.append(str(REPO / "tests"))
from profile_files import has_rank_text, rank_text, rank_texts  # noqa: E402,F401
WORK = REPO / "build" / "bench"
MPIS = ("openmpi", "mpich")
MPICC = {"openmpi": "mpicc.openmpi", "mpich": "mpicc.mpich"}
RUN_TIMEOUT = 900  # seconds for one mpirun


class BenchError(Exception):
    """A benchmark could not be run (missing build, failed run, missing profile)."""


def clean_environment() -> dict[str, str]:
    """This process's environment without anything that would instrument the baseline."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PATHSCOPE_") and k != "LD_PRELOAD"}
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def mpirun(mpi: str, nranks: int, program: Sequence[str], env: Optional[dict[str, str]] = None,
           bind: bool = True) -> list[str]:
    """The launcher command for nranks ranks of program, with env set in every rank.

    Open MPI: as root it needs --allow-run-as-root, and --oversubscribe for more ranks than
    cores; binding to cores is asked for only when there are at least as many cores as ranks
    (Open MPI refuses to bind an oversubscribed job to cores)."""
    env = env or {}
    bind = bind and nranks <= (os.cpu_count() or 1)
    if mpi == "openmpi":
        cmd = ["mpirun.openmpi", "--allow-run-as-root", "--oversubscribe", "-np", str(nranks)]
        cmd += ["--bind-to", "core" if bind else "none"]
        for k, v in env.items():
            cmd += ["-x", f"{k}={v}"]
    elif mpi == "mpich":
        cmd = ["mpirun.mpich", "-np", str(nranks)]
        if bind:
            cmd += ["-bind-to", "core"]
        for k, v in env.items():
            cmd += ["-genv", k, v]
    else:
        raise BenchError(f"unknown MPI '{mpi}' (expected one of {', '.join(MPIS)})")
    return cmd + list(program)


def run_status(cmd: Sequence[str], cwd: Optional[Path] = None,
               env: Optional[dict[str, str]] = None, check: bool = True,
               timeout: int = RUN_TIMEOUT) -> tuple[float, int, str]:
    """Runs cmd in a clean environment plus env: (wall seconds, exit status, stdout+stderr).
    With check, a non-zero exit is a BenchError."""
    t0 = time.monotonic()
    done = subprocess.run(list(cmd), cwd=cwd, env={**clean_environment(), **(env or {})},
                          capture_output=True, text=True, timeout=timeout)
    wall = time.monotonic() - t0
    out = done.stdout + done.stderr
    if check and done.returncode != 0:
        tail = "\n".join(out.splitlines()[-15:])
        raise BenchError(f"exit status {done.returncode}: {' '.join(cmd)}\n{tail}")
    return wall, done.returncode, out


def run_measured(cmd: Sequence[str], cwd: Optional[Path] = None,
                 env: Optional[dict[str, str]] = None,
                 timeout: int = RUN_TIMEOUT) -> tuple[float, str, dict]:
    """Runs cmd as run() does; also returns its resource usage from os.wait4, which covers cmd
    and every descendant it waited for (mpirun reaps its ranks): user and system seconds,
    voluntary and involuntary context switches.  A non-zero exit is a BenchError."""
    with tempfile.TemporaryFile(mode="w+") as output:
        t0 = time.monotonic()
        proc = subprocess.Popen(list(cmd), cwd=cwd, env={**clean_environment(), **(env or {})},
                                stdout=output, stderr=subprocess.STDOUT, text=True)
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        wall = time.monotonic() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)  # (reaped: Popen must not wait)
        output.seek(0)
        out = output.read()
    if proc.returncode != 0:
        tail = "\n".join(out.splitlines()[-15:])
        raise BenchError(f"exit status {proc.returncode}: {' '.join(cmd)}\n{tail}")
    return wall, out, {"user_s": usage.ru_utime, "sys_s": usage.ru_stime,
                       "voluntary_switches": usage.ru_nvcsw,
                       "involuntary_switches": usage.ru_nivcsw}


def run(cmd: Sequence[str], cwd: Optional[Path] = None,
        timeout: int = RUN_TIMEOUT) -> tuple[float, str]:
    """Runs cmd; returns (wall seconds, stdout+stderr).  A non-zero exit is a BenchError."""
    wall, _, out = run_status(cmd, cwd, timeout=timeout)
    return wall, out


def cell(values: Sequence[float], fmt: str) -> str:
    """median (min..max)"""
    return f"{statistics.median(values):{fmt}} ({min(values):{fmt}}..{max(values):{fmt}})"


def snapshot_library(mpi: str, lib: Optional[str] = None) -> Path:
    """Copies build/<mpi>/libpathscope.so (or lib) into build/bench/<mpi>/ so that a rebuild
    by someone else during the benchmark cannot change the library under measurement."""
    src = Path(lib) if lib else REPO / "build" / mpi / "libpathscope.so"
    if not src.is_file():
        raise BenchError(f"{src} does not exist: build it with `make build MPI={mpi}`")
    dst = WORK / mpi / "libpathscope.so"
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(src, dst)
    return dst


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def profile_summary(directory: Path) -> dict:
    """Checks that a pathscope profile was written: profile.tsv with an `end` line.
    Returns its size, the directory's size, and the per-operation call counts of `op *` lines."""
    tsv = directory / "profile.tsv"
    if not tsv.is_file():
        ranks = sorted(rank_texts(directory))
        raise BenchError(f"no profile.tsv in {directory} (ranks with a text: {ranks or 'none'})")
    lines = tsv.read_text().splitlines()
    if not lines or lines[-1] != "end":
        raise BenchError(f"{tsv} has no `end` line")
    calls: dict[str, int] = {}
    for line in lines:
        f = line.split("\t")
        if f[0] == "op" and f[1] == "*":
            calls[f[2]] = int(f[3])
    dir_bytes = sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())
    return {"profile_tsv_bytes": tsv.stat().st_size, "dir_bytes": dir_bytes,
            "files": sum(1 for p in directory.rglob("*") if p.is_file()), "calls": calls}


def stats(values: Sequence[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "n": len(values)}


def interleaved(rep: int, variants: Sequence[str]) -> list[str]:
    """Order of the variants in repetition rep: forward on even reps, reversed on odd ones."""
    return list(variants) if rep % 2 == 0 else list(reversed(variants))


def first_line(cmd: Sequence[str]) -> str:
    try:
        out = subprocess.run(list(cmd), capture_output=True, text=True, timeout=30)
        text = (out.stdout or out.stderr).strip()
        return text.splitlines()[0] if text else "?"
    except (OSError, subprocess.SubprocessError):
        return "?"


def dpkg_version(package: str) -> str:
    return first_line(["dpkg-query", "-W", "-f=${Version}", package]) or "?"


def machine() -> dict:
    """What the numbers were measured on."""
    cpu = "?"
    flags: list[str] = []
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") and cpu == "?":
                cpu = line.split(":", 1)[1].strip()
            if line.startswith("flags") and not flags:
                flags = line.split(":", 1)[1].split()
    except OSError:
        pass
    load = os.getloadavg()
    git = first_line(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"])
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", "runtime"],
                           capture_output=True, text=True).stdout.strip()
    return {
        "nproc": os.cpu_count(), "cpu": cpu, "kernel": platform.release(),
        "hypervisor": "hypervisor" in flags,
        "invariant_tsc": "constant_tsc" in flags and "nonstop_tsc" in flags,
        "os": first_line(["sh", "-c", ". /etc/os-release && echo $PRETTY_NAME"]),
        "openmpi": dpkg_version("openmpi-bin"), "mpich": dpkg_version("mpich"),
        "gcc": first_line(["gcc", "-dumpfullversion"]),
        "git": git + ("+uncommitted runtime/ changes" if dirty else ""),
        "loadavg_at_start": f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
    }


def machine_lines(m: dict) -> list[str]:
    return [f"machine: {m['nproc']} cores, {m['cpu']}, kernel {m['kernel']}, {m['os']}"
            f"{' (VM)' if m['hypervisor'] else ''}",
            f"MPI: Open MPI {m['openmpi']}, MPICH {m['mpich']}; gcc {m['gcc']}; "
            f"pathscope {m['git']}; load average at start {m['loadavg_at_start']}"]


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table (also readable as plain text)."""
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) if rows else len(str(h))
              for i, h in enumerate(headers)]
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(headers), sep] + [line(r) for r in rows])


def parse_kv(line: str) -> dict[str, str]:
    return dict(m.groups() for m in re.finditer(r"(\w+)=(\S+)", line))
