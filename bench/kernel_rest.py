#!/usr/bin/env python3
"""What spreading the system calls no report carried costs at the end of the run (issue 16):
the time of ps_kernel_estimate (runtime/kernel/kernel_estimate.c) against the whole rank-file
write (ps_write_rank_body), measured with bpftrace uprobes on build/openmpi/libpathscope.so.

    python3 bench/kernel_rest.py [--reps 5] [--json FILE]

Programs (tests/programs, built by `make build`):
  rest-getppid   kernel_rest getppid 200000: one thread, one site
  rest-sites     kernel_rest sites 50000: one thread, two sites
  threads-800    kernel_threads 800 100: 800 short threads of 100 getppid each (801 trees)
each with --kernel libc and --kernel ebpf at the default period.  Per run: the estimate's
ns, the rank file's write ns (both from the uprobes: one call each for these programs, which
write their file once at exit), the trees' nodes and the knode lines written.  Needs root
(bpftrace); prints one table, medians over --reps runs.
"""
import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "build" / "openmpi"
LIB = BUILD / "libpathscope.so"
PROGRAMS = {"rest-getppid": ["kernel_rest", "getppid", "200000"],
            "rest-sites": ["kernel_rest", "sites", "50000"],
            "threads-800": ["kernel_threads", "800", "100"]}
SCRIPT = """
uprobe:{lib}:ps_kernel_estimate {{ @e[tid] = nsecs; }}
uretprobe:{lib}:ps_kernel_estimate /@e[tid]/ {{ printf("estimate %d\\n", nsecs - @e[tid]); delete(@e[tid]); }}
uprobe:{lib}:ps_write_rank_body {{ @w[tid] = nsecs; }}
uretprobe:{lib}:ps_write_rank_body /@w[tid]/ {{ printf("write %d\\n", nsecs - @w[tid]); delete(@w[tid]); }}
"""


def one_run(name, mode, work):
    out = work / f"{name}-{mode}-{time.monotonic_ns()}"
    trace = work / "trace.txt"
    script = work / "rest.bt"
    script.write_text(SCRIPT.format(lib=LIB))
    with open(trace, "w") as sink:
        # (line-buffered output, so that "Attaching" shows; SIGINT as bpftrace expects it,
        # even when this benchmark was started with SIGINT ignored)
        tracer = subprocess.Popen(["bpftrace", "-B", "line", str(script)], stdout=sink,
                                  stderr=subprocess.DEVNULL,
                                  preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 60
    while "Attaching" not in trace.read_text() and time.time() < deadline:
        time.sleep(0.2)
    time.sleep(1)                           # (the uprobes are in place once it said so)
    prog = [str(BUILD / PROGRAMS[name][0]), *PROGRAMS[name][1:]]
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"), PATHSCOPE_HOME=str(ROOT))
    p = subprocess.run([sys.executable, "-m", "pathscope", "run", "--quiet", "--kernel", mode,
                        "-o", str(out), "--", *prog], capture_output=True, text=True, env=env,
                       timeout=300)
    time.sleep(0.5)
    tracer.send_signal(signal.SIGINT)       # (bpftrace ends on SIGINT, printing its maps)
    try:
        tracer.wait(timeout=10)
    except subprocess.TimeoutExpired:       # (it sometimes misses it; its lines are written)
        tracer.kill()
        tracer.wait()
    if p.returncode:
        raise SystemExit(f"{name} {mode}: {p.stderr}")
    text = trace.read_text()
    est = [int(v) for v in re.findall(r"^estimate (\d+)$", text, re.M)]
    write = [int(v) for v in re.findall(r"^write (\d+)$", text, re.M)]
    rank = (out / "ranks" / "rank-000000.tsv").read_text()
    nodes = sum(1 for line in rank.splitlines() if line.startswith("node\t"))
    knodes = sum(1 for line in rank.splitlines() if line.startswith("knode\t"))
    return {"estimate_ns": sum(est), "write_ns": sum(write), "nodes": nodes, "knodes": knodes}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json")
    args = ap.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in PROGRAMS:
            for mode in ("libc", "ebpf"):
                runs = [one_run(name, mode, Path(tmp)) for _ in range(args.reps)]
                results[f"{name} {mode}"] = runs
    print(f"{'program':<20} {'nodes':>7} {'knode':>6} {'estimate':>10} {'rank write':>11} "
          f"{'share':>6}")
    for key, runs in results.items():
        est = statistics.median(r["estimate_ns"] for r in runs)
        write = statistics.median(r["write_ns"] for r in runs)
        print(f"{key:<20} {runs[0]['nodes']:>7} {runs[0]['knodes']:>6} {est / 1e3:>8.1f}us "
              f"{write / 1e6:>9.2f}ms {est / write:>6.1%}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
