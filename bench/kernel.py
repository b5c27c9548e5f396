#!/usr/bin/env python3
"""Kernel-time profiling overhead: pathscope --kernel (eBPF, libc) against strace and bpftrace.

    python3 bench/kernel.py [--reps 5] [--calls 2000000] [--strace-calls N] [--modes getppid]
                            [--threads 1] [--pin CPU] [--variants base,pathscope-ebpf,...]
                            [--quick] [--json FILE]

Program (built here with gcc -O2 -g into build/bench/kernel/syscalls): bench/syscalls.c,
--calls getppid() calls (mode write: 64-byte writes to /dev/null) in a noinline loop in each
of --threads threads; the loop alone is timed with CLOCK_MONOTONIC, so start-up, the
profiler's initialisation and its write at exit are not in "ns per call".
Variants, interleaved in every repetition (forward order on even repetitions, reversed on odd):
  base                  the program alone
  pathscope             bin/pathscope run --mpi openmpi --quiet -o DIR -- PROGRAM
                        (no --kernel: the runtime's fixed costs alone)
  pathscope-ebpf        ... run --mpi openmpi --quiet --kernel ebpf -o DIR -- PROGRAM
                        (the node's collector pathscope-kcollect, default period 1000 us)
  pathscope-ebpf-exact  ... --kernel ebpf --kernel-period 0 ... (a signal after every
                        syscall: exact attribution to call paths, expected to be expensive)
  pathscope-libc        ... --kernel libc ... (the libc wrappers, libpathscope-kernel.so)
  strace                strace -c -f -o DIR/strace.txt PROGRAM  (with --strace-calls calls,
                        default --calls/10: strace costs 5-100 us per call)
  bpftrace              bpftrace -o DIR/bpftrace.txt -c "PROGRAM ARGS" bench/syscalls_pertid.bt
                        (per-thread, per-syscall count and time; its output is only checked)
  foreign               the base program while another process is profiled on the node:
                        bin/pathscope run --mpi openmpi --quiet --kernel ebpf -- sleep 600 is
                        started in the background, the program runs once the collector is up,
                        then the sleep is ended (SIGTERM to its pid): what the collector's
                        raw_syscalls programs cost a process nobody profiles
The pathscope variants use copies of build/openmpi/libpathscope.so, libpathscope-kernel.so
and pathscope-kcollect made at start in build/bench/kernel/lib/ (PATHSCOPE_LIB), so a
rebuild during the benchmark cannot change what is measured.  Before every run the benchmark
waits (up to 5 s) until no pathscope-kcollect process is left (the collector lingers 0.5 s
after its last process and taxes every process while attached).  bpftrace needs root and
tracefs: it is mounted on /sys/kernel/tracing if missing; without root bpftrace is skipped
with a note.  --pin CPU runs every command under taskset -c CPU (default: unpinned): strace
and bpftrace then share the program's CPU, as they do inside an MPI rank bound to a core (on a
VM, a tracer on the other CPU costs far more: every stop wakes it there).  A variant whose
probe run fails because the eBPF collector was not built (or eBPF is refused) is skipped
with a note, and foreign with it.
Reported per mode: ns per call inside the loop, median of --reps runs (min..max); added ns =
median of the per-repetition differences to base (min..max); ratio = median / median of
base; and the wall time of the whole command with its ratio.  Goals: pathscope-ebpf adds at
most 250 ns per syscall, pathscope-libc at most 50 ns per intercepted call.  Checks (the
benchmark fails otherwise): every pathscope --kernel run's rank file has `ksys` lines that
count at least the program's calls of its syscall (summed over its threads) and a complete
`kend` line, and its `kernel` line names the source asked for; strace's summary and
bpftrace's @count map count at least the calls too.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib as bl  # noqa: E402

HERE = Path(__file__).resolve().parent
WORK = bl.WORK / "kernel"
MPI = "openmpi"  # the program is serial; the runtime build only has to exist
RUNTIME_FILES = ("libpathscope.so", "libpathscope-kernel.so", "pathscope-kcollect")
COLLECTOR = "pathscope-kcollect"
BT_SCRIPT = HERE / "syscalls_pertid.bt"
TRACEFS = Path("/sys/kernel/tracing")
VARIANTS = ("base", "pathscope", "pathscope-ebpf", "pathscope-ebpf-exact", "pathscope-libc",
            "strace", "bpftrace", "foreign")
KERNEL_FLAGS = {"pathscope": [],
                "pathscope-ebpf": ["--kernel", "ebpf"],
                "pathscope-ebpf-exact": ["--kernel", "ebpf", "--kernel-period", "0"],
                "pathscope-libc": ["--kernel", "libc"]}
EBPF_VARIANTS = ("pathscope-ebpf", "pathscope-ebpf-exact", "foreign")
GOAL_NS = {"pathscope-ebpf": 250.0, "pathscope-libc": 50.0}
SYSCALL_NR = {"getppid": 110, "write": 1}  # x86_64, for bpftrace's @count keys
COLLECTOR_GONE_S = 5.0
FOREIGN_READY_S = 20.0
LABELS = {"base": "the program alone",
          "pathscope": "pathscope, no --kernel",
          "pathscope-ebpf": "--kernel ebpf (1 ms)",
          "pathscope-ebpf-exact": "--kernel ebpf --kernel-period 0",
          "pathscope-libc": "--kernel libc",
          "strace": "strace -c -f",
          "bpftrace": "bpftrace per-tid script",
          "foreign": "base, another process profiled"}


def ensure_tracefs() -> Optional[str]:
    """Mounts tracefs on /sys/kernel/tracing if it is not there (bpftrace's tracepoints need
    it).  None when it is usable, else why not."""
    if (TRACEFS / "events").is_dir():
        return None
    if os.geteuid() != 0:
        return f"tracefs is not mounted on {TRACEFS} and mounting it needs root"
    done = subprocess.run(["mount", "-t", "tracefs", "tracefs", str(TRACEFS)],
                          capture_output=True, text=True)
    if done.returncode != 0 or not (TRACEFS / "events").is_dir():
        return f"cannot mount tracefs on {TRACEFS}: {done.stderr.strip() or 'no events/'}"
    print(f"kernel.py: mounted tracefs on {TRACEFS}", file=sys.stderr, flush=True)
    return None


def collector_pids() -> list[int]:
    """Running pathscope-kcollect processes (anyone's: they tax every process alike)."""
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if (d / "comm").read_text().strip() == COLLECTOR[:15]:
                pids.append(int(d.name))
        except OSError:
            pass
    return pids


def wait_collector_gone(timeout: float = COLLECTOR_GONE_S) -> bool:
    """Waits until no collector runs; False if one is still there after timeout."""
    end = time.monotonic() + timeout
    while collector_pids():
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True


def build() -> Path:
    WORK.mkdir(parents=True, exist_ok=True)
    exe = WORK / "syscalls"
    cmd = ["gcc", "-O2", "-g", "-Wall", "-Wextra", "-o", str(exe), str(HERE / "syscalls.c"),
           "-lpthread"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise bl.BenchError(f"build failed: {' '.join(cmd)}\n{done.stderr}")
    if done.stderr.strip():
        print(f"kernel.py: compiler warnings:\n{done.stderr}", file=sys.stderr)
    return exe


def snapshot_runtime() -> dict[str, Path]:
    """Copies the runtime files that exist in build/openmpi/ into build/bench/kernel/lib/
    (emptied first, so that no stale collector is left there)."""
    dst_dir = WORK / "lib"
    shutil.rmtree(dst_dir, ignore_errors=True)
    dst_dir.mkdir(parents=True)
    files = {}
    for name in RUNTIME_FILES:
        src = bl.REPO / "build" / MPI / name
        if not src.is_file():
            if name == "libpathscope.so":
                raise bl.BenchError(f"{src} does not exist: build it with `make build MPI={MPI}`")
            continue  # the probe runs say what is missing
        shutil.copy2(src, dst_dir / name)
        files[name] = dst_dir / name
    return files


def pathscope_command(flags: list[str], outdir: Path, program: list[str]) -> list[str]:
    return [str(bl.REPO / "bin" / "pathscope"), "run", "--mpi", MPI, "--quiet"] + flags + \
        ["-o", str(outdir), "--"] + program


def command(variant: str, program: list[str], outdir: Path,
            lib: Path) -> tuple[list[str], dict[str, str]]:
    if variant in ("base", "foreign"):
        return program, {}
    if variant in KERNEL_FLAGS:
        return pathscope_command(KERNEL_FLAGS[variant], outdir, program), \
            {"PATHSCOPE_LIB": str(lib)}
    if variant == "strace":
        return ["strace", "-c", "-f", "-o", str(outdir / "strace.txt")] + program, {}
    if variant == "bpftrace":
        return ["bpftrace", "-o", str(outdir / "bpftrace.txt"), "-c", shlex.join(program),
                str(BT_SCRIPT)], {}
    raise bl.BenchError(f"unknown variant {variant}")


def rank_lines(outdir: Path) -> list[list[str]]:
    if not bl.has_rank_text(outdir, 0):
        raise bl.BenchError(f"no text of rank 0 in {outdir}")
    return [line.split("\t") for line in bl.rank_text(outdir, 0).splitlines()]


def check_kernel(variant: str, outdir: Path, mode: str, calls: int) -> dict:
    """The rank file's kernel tables: the calls of mode counted (all threads), their ns, the
    attributions made and lost; fails unless they cover the program's calls."""
    lines = rank_lines(outdir)
    kernel = [f for f in lines if f[0] == "kernel"]
    want = "libc" if variant == "pathscope-libc" else "ebpf"
    if len(kernel) != 1 or kernel[0][1] != want:
        raise bl.BenchError(f"{variant}: {outdir}: expected one `kernel` line with source "
                            f"{want}, found {kernel}")
    ksys = [f for f in lines if f[0] == "ksys" and f[2] == mode]
    kend = [f for f in lines if f[0] == "kend"]
    if not kend or kend[-1][1] == "-":
        raise bl.BenchError(f"{variant}: {outdir}: the kernel tables are incomplete ({kend})")
    counted = sum(int(f[3]) for f in ksys)
    if counted < calls:
        raise bl.BenchError(f"{variant}: {outdir}: {counted} {mode} calls in the ksys lines, "
                            f"the program made {calls}")
    return {"counted": counted, "kernel_ns": sum(int(f[4]) for f in ksys),
            "threads": len(ksys), "attributions": int(kernel[0][4]),
            "lost": int(kernel[0][5]), "missed_exits": int(kend[-1][1]),
            "dropped": int(kend[-1][2])}


def check_strace(outdir: Path, mode: str, calls: int) -> dict:
    text = (outdir / "strace.txt").read_text() if (outdir / "strace.txt").is_file() else ""
    for line in text.splitlines():
        f = line.split()
        if f and f[-1] == mode and len(f) >= 5:
            counted = int(f[3])
            if counted < calls:
                raise bl.BenchError(f"strace counted {counted} {mode} calls in {outdir}, the "
                                    f"program made {calls}")
            return {"counted": counted}
    raise bl.BenchError(f"no {mode} line in strace's summary {outdir}/strace.txt:\n{text[-1000:]}")


def check_bpftrace(outdir: Path, mode: str, calls: int) -> dict:
    text = (outdir / "bpftrace.txt").read_text() if (outdir / "bpftrace.txt").is_file() else ""
    nr = SYSCALL_NR[mode] if platform.machine() == "x86_64" else None
    if nr is None:
        return {}
    counted = sum(int(m.group(2)) for m in
                  re.finditer(r"^@count\[(\d+), " + str(nr) + r"\]: (\d+)$", text, re.M))
    if counted < calls:
        raise bl.BenchError(f"bpftrace counted {counted} {mode} calls (syscall {nr}) in "
                            f"{outdir}/bpftrace.txt, the program made {calls}")
    return {"counted": counted}


class Foreign:
    """A profiled sleep in the background (bin/pathscope run --kernel ebpf -- sleep 600), so
    that the node's collector is attached while an unprofiled program runs."""

    def __init__(self, outdir: Path, lib: Path):
        cmd = pathscope_command(["--kernel", "ebpf"], outdir, ["sleep", "600"])
        self.proc = subprocess.Popen(cmd, cwd=outdir, env={**bl.clean_environment(),
                                                           "PATHSCOPE_LIB": str(lib)},
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        # the CLI execs the program in the same process: ready when that pid is the sleep,
        # inside its (clock_)nanosleep, and a collector runs (the runtime registers before
        # main, waiting for the collector's answer)
        end = time.monotonic() + FOREIGN_READY_S
        while True:
            if self.proc.poll() is not None:
                raise bl.BenchError(f"the background profiled sleep ended early "
                                    f"({self.proc.returncode}): {' '.join(cmd)}\n"
                                    f"{self.proc.stderr.read() if self.proc.stderr else ''}")
            if self.sleeping() and collector_pids():
                break
            if time.monotonic() > end:
                self.stop()
                raise bl.BenchError(f"no collector running {FOREIGN_READY_S:.0f} s after "
                                    f"starting {' '.join(cmd)}")
            time.sleep(0.05)
        time.sleep(0.2)

    def sleeping(self) -> bool:
        try:
            if Path(f"/proc/{self.proc.pid}/comm").read_text().strip() != "sleep":
                return False
            state = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return False
        if state != "S":
            return False
        try:  # x86_64: 230 clock_nanosleep, 35 nanosleep (not the registration's read)
            nr = Path(f"/proc/{self.proc.pid}/syscall").read_text().split()[0]
        except (OSError, IndexError):
            return True
        return platform.machine() != "x86_64" or nr in ("230", "35")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        finally:
            if self.proc.stderr:
                self.proc.stderr.close()


class Bench:
    def __init__(self, args: argparse.Namespace, exe: Path, lib: Path, tmp: Path):
        self.args, self.exe, self.lib, self.tmp = args, exe, lib, tmp
        self.lingering = 0  # runs that started with a collector still there after 5 s

    def calls_for(self, variant: str) -> int:
        return self.args.strace_calls if variant == "strace" else self.args.calls

    def program(self, mode: str, calls: int) -> list[str]:
        return [str(self.exe), str(calls), mode, str(self.args.threads)]

    def pinned(self, cmd: list[str]) -> list[str]:
        """cmd on --pin's CPU (taskset: the tool and the program alike), else cmd."""
        return cmd if self.args.pin is None else ["taskset", "-c", str(self.args.pin)] + cmd

    def probe(self, variant: str) -> Optional[str]:
        """A tiny run under variant: None if it works, else why it is skipped (eBPF not
        available).  Any other failure stops the benchmark."""
        outdir = Path(tempfile.mkdtemp(prefix=f"probe-{variant}-", dir=self.tmp))
        try:
            if variant == "foreign":
                Foreign(outdir, self.lib).stop()
                return None
            cmd, env = command(variant, self.program("getppid", 1000), outdir, self.lib)
            cmd = self.pinned(cmd)
            _, status, out = bl.run_status(cmd, outdir, env, check=False)
        except bl.BenchError as e:
            out, status, cmd = str(e), 1, ["(background) pathscope run --kernel ebpf -- sleep"]
        finally:
            wait_collector_gone()
            shutil.rmtree(outdir, ignore_errors=True)
        if status == 0:
            return None
        lower = out.lower()
        if variant in EBPF_VARIANTS and ("ebpf" in lower or "collector" in lower):
            line = next((l for l in out.splitlines() if "ebpf" in l.lower()
                         or "collector" in l.lower()), out.strip())
            return line.strip()
        tail = "\n".join(out.splitlines()[-10:])
        raise bl.BenchError(f"{variant} does not run: {' '.join(cmd)}\n{tail}")

    def one(self, mode: str, variant: str) -> dict:
        """One run of the program under variant: its ns per call, the wall time, the checks."""
        if not wait_collector_gone():
            self.lingering += 1
        outdir = Path(tempfile.mkdtemp(prefix=f"{mode}-{variant}-", dir=self.tmp))
        calls = self.calls_for(variant)
        cmd, env = command(variant, self.program(mode, calls), outdir, self.lib)
        cmd = self.pinned(cmd)
        foreign = Foreign(outdir, self.lib) if variant == "foreign" else None
        try:
            wall, _, out = bl.run_status(cmd, outdir, env)
        finally:
            if foreign is not None:
                foreign.stop()
        m = re.search(r"^ns_per_call (\S+) calls (\d+) mode (\S+) threads (\d+)$", out, re.M)
        if m is None:
            raise bl.BenchError(f"no result line from the program ({variant}):\n{out[-2000:]}")
        result = {"ns": float(m.group(1)), "calls": int(m.group(2)), "wall": wall}
        total = result["calls"]
        if variant in KERNEL_FLAGS and variant != "pathscope":
            result.update(check_kernel(variant, outdir, mode, total))
        elif variant == "pathscope":
            rank_lines(outdir)  # the runtime wrote its rank file
        elif variant == "strace":
            result.update(check_strace(outdir, mode, total))
        elif variant == "bpftrace":
            result.update(check_bpftrace(outdir, mode, total))
        shutil.rmtree(outdir, ignore_errors=True)
        return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5, help="repetitions of each variant (default 5)")
    ap.add_argument("--calls", type=int, help="calls per thread in the loop (default 2000000; "
                    "--quick: 200000)")
    ap.add_argument("--strace-calls", type=int,
                    help="calls per thread under strace (default --calls/10)")
    ap.add_argument("--modes", default="getppid", help="getppid and/or write (comma-separated)")
    ap.add_argument("--threads", type=int, default=1, help="threads running the loop (default 1)")
    ap.add_argument("--pin", type=int, metavar="CPU",
                    help="run every command on this CPU only (taskset -c CPU): a tracer and "
                    "its tracee then share the CPU, as in a rank bound to a core")
    ap.add_argument("--variants", help="only these variants (comma-separated; base is always "
                    "run), e.g. base,pathscope-ebpf,pathscope-libc")
    ap.add_argument("--quick", action="store_true",
                    help="small sizes (200000 calls): checks that everything runs")
    ap.add_argument("--json", help="also write every measurement to this file")
    args = ap.parse_args(argv)
    if args.calls is None:
        args.calls = 200_000 if args.quick else 2_000_000
    if args.strace_calls is None:
        args.strace_calls = max(1, args.calls // 10)
    modes = [m for m in args.modes.split(",") if m]
    unknown = [m for m in modes if m not in SYSCALL_NR]
    if unknown:
        raise bl.BenchError(f"unknown modes {', '.join(unknown)} (getppid, write)")
    variants = list(VARIANTS)
    if args.variants:
        wanted = [v for v in args.variants.split(",") if v]
        unknown = [v for v in wanted if v not in variants]
        if unknown:
            raise bl.BenchError(f"unknown variants {', '.join(unknown)} "
                                f"(known: {', '.join(variants)})")
        variants = [v for v in variants if v == "base" or v in wanted]
    skipped: dict[str, str] = {}
    for tool in ("strace", "bpftrace"):
        if tool in variants and shutil.which(tool) is None:
            raise bl.BenchError(f"{tool} not found: apt-get install {tool} "
                                f"(or leave it out with --variants)")
    if "bpftrace" in variants:
        why = "bpftrace needs root" if os.geteuid() != 0 else ensure_tracefs()
        if why:
            skipped["bpftrace"] = why

    info = bl.machine()
    info["strace"] = bl.dpkg_version("strace")
    info["bpftrace"] = bl.dpkg_version("bpftrace")
    exe = build()
    files = snapshot_runtime()
    sums = {n: bl.sha256(p) for n, p in files.items()}
    sources = {n: bl.REPO / "build" / MPI / n for n in files}
    lib = files["libpathscope.so"]
    if not wait_collector_gone():
        print(f"kernel.py: warning: a {COLLECTOR} is running (pids "
              f"{', '.join(map(str, collector_pids()))}) and did not end within "
              f"{COLLECTOR_GONE_S:.0f} s: every run pays its tax", file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(prefix="tmp-", dir=WORK) as tmpname:
        bench = Bench(args, exe, lib, Path(tmpname))
        for v in variants[1:]:
            if v in skipped:
                continue
            if v == "foreign" and "pathscope-ebpf" in skipped:
                skipped[v] = skipped["pathscope-ebpf"]
            else:
                why = bench.probe(v)
                if why is not None:
                    skipped[v] = why
        for v, why in skipped.items():
            print(f"kernel.py: skipping {v}: {why}", file=sys.stderr, flush=True)
        variants = [v for v in variants if v not in skipped]
        results: dict[tuple[str, str], list[dict]] = {(m, v): [] for m in modes for v in variants}
        for rep in range(args.reps):
            for m in modes:
                for v in bl.interleaved(rep, variants):
                    results[(m, v)].append(bench.one(m, v))
                print(f"kernel.py: repetition {rep + 1}/{args.reps} {m}: " + ", ".join(
                    f"{v} {results[(m, v)][-1]['ns']:.0f} ns" for v in variants),
                    file=sys.stderr, flush=True)
    changed = [n for n, p in sources.items() if p.is_file() and bl.sha256(p) != sums[n]]

    print("\n".join(bl.machine_lines(info)))
    print(f"strace {info['strace']}, bpftrace {info['bpftrace']}; pathscope through "
          f"bin/pathscope run --mpi {MPI} --quiet (runtime copied to {WORK / 'lib'}); "
          + ("unpinned" if args.pin is None else f"every command on CPU {args.pin} (taskset)"))
    for v, why in skipped.items():
        print(f"skipped {v}: {why}")
    for m in modes:
        base_ns = [r["ns"] for r in results[(m, "base")]]
        base_w = [r["wall"] for r in results[(m, "base")]]
        print(f"\n{m}: ns per call inside the program's loop, {args.calls} calls per thread "
              f"(strace: {args.strace_calls}), {args.threads} thread(s); median of {args.reps} "
              f"interleaved runs (min..max); added = median of the per-repetition differences "
              f"to base (min..max); ratio = median / median of base; wall = the whole command")
        rows = []
        for v in variants:
            rs = results[(m, v)]
            ns = [r["ns"] for r in rs]
            wall = [r["wall"] for r in rs]
            added = [x - b for x, b in zip(ns, base_ns)]
            last = rs[-1]
            counted = "-"
            if "counted" in last:
                counted = f"{min(r['counted'] for r in rs)}"
                if "attributions" in last:
                    counted += f", {statistics.median(r['attributions'] for r in rs):.0f} to paths"
            goal = "-"
            if v in GOAL_NS:
                goal = f"<= {GOAL_NS[v]:.0f}: " + \
                    ("yes" if statistics.median(added) <= GOAL_NS[v] else "no")
            rows.append([v, LABELS[v], bl.cell(ns, ".1f"),
                         "-" if v == "base" else
                         f"{statistics.median(added):+.1f} ({min(added):+.1f}..{max(added):+.1f})",
                         "-" if v == "base" else
                         f"{statistics.median(ns) / statistics.median(base_ns):.2f}x",
                         bl.cell(wall, ".2f"),
                         "-" if v == "base" else
                         f"{statistics.median(wall) / statistics.median(base_w):.2f}x"
                         + (" (fewer calls)" if v == "strace" and
                            args.strace_calls != args.calls else ""),
                         counted, goal])
        print(bl.table(["variant", "what", "ns per call", "added ns", "ratio", "wall s",
                        "wall ratio", f"{m} counted (min)", "goal ns"], rows))
        if "foreign" in variants:
            tax = [r["ns"] - b for r, b in zip(results[(m, "foreign")], base_ns)]
            print(f"foreign-process tax ({m}): an unprofiled process pays "
                  f"{statistics.median(tax):+.1f} ns per call ({min(tax):+.1f}.."
                  f"{max(tax):+.1f}) while pathscope --kernel ebpf profiles another process")
    if bench.lingering:
        print(f"\nWARNING: {bench.lingering} runs started with a {COLLECTOR} still running "
              f"after {COLLECTOR_GONE_S:.0f} s (someone else's?): they paid its tax")
    if changed:
        print(f"\nnote: {', '.join(changed)} changed in build/{MPI}/ during the benchmark "
              f"(rebuilt); the copies measured here did not")
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"machine": info, "runtime_sha256": sums, "changed_during_run": changed,
             "args": vars(args), "skipped": skipped, "lingering_collector_runs": bench.lingering,
             "results": {f"{m} {v}": r for (m, v), r in results.items()}}, indent=1))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except bl.BenchError as e:
        print(f"kernel.py: {e}", file=sys.stderr)
        sys.exit(1)
