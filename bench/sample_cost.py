#!/usr/bin/env python3
"""What each sampling mechanism of this kernel costs: per sample and per context switch.

    python3 bench/sample_cost.py [--reps 5] [--loop-hz 5000] [--gap-hz 1000]
                                 [--switch-hz 200,1000] [--iterations 400000000]
                                 [--gap-seconds 2] [--rounds 200000] [--cpu 1]
                                 [--mechanisms none,perf-task-clock,...] [--json FILE]

Builds bench/sample_cost.c into build/bench/sample_cost and runs, in every repetition and
interleaved (forward order on even repetitions, reversed on odd), each mechanism in four modes:
  loop   a fixed loop with the sampler at --loop-hz: CPU time per signal added to the loop
         = (CPU time - CPU time without a sampler) / signals handled; also the rate reached
  gaps   a loop reading the clock for --gap-seconds with the sampler at --gap-hz: the median
         time the thread loses to an interruption with a signal, measured directly (gaps
         with a context switch left out); without a sampler, the median interruption
         without a signal, mostly the kernel's tick
  yield  two processes pinned to --cpu call sched_yield --rounds times each (both always
         runnable, as oversubscribed Open MPI ranks are), each with its own sampler, at each
         rate of --switch-hz: the cost the sampler adds per context switch = (CPU time - CPU
         time without a sampler - signals x the cost per sample) / context switches
  pipe   the same with the two processes passing a byte back and forth through pipes
Mechanisms (see bench/sample_cost.c): none (baseline), perf-task-clock (pathscope's perf
sampler), perf-cpu-clock (the cpu-clock event per thread), posix-cpu (timer_create on the
thread's CPU clock, SIGEV_THREAD_ID; pathscope's posix sampler), posix-wall (CLOCK_MONOTONIC
timer; PATHSCOPE_SAMPLE_CLOCK=wall), itimer-prof (setitimer(ITIMER_PROF), process-wide), and
bpf-cpu-clock: a per-CPU cpu-clock event (bpftrace `profile:hz:N`) whose BPF program sends
SIGPROF to the process on the CPU when it is ours (`bpftrace --unsafe`, root only; skipped with
a note without root or bpftrace).
The cost of one sample ("added") is the gap with a signal; for a mechanism that the kernel runs
at its tick (the rate reached in the loop stays far below --loop-hz: posix-cpu, itimer-prof)
it is the gap less the tick's own gap, since the tick interrupts every thread anyway; such a
mechanism cannot sample faster than the tick.  The floor columns are added x rate, in % of one
CPU.  Every figure is the median over the repetitions of the figure of each repetition (a
mechanism's run against the baseline run of the same repetition), with min..max.  CPU time (of
both processes in the switch modes) is used rather than wall time: time a neighbour takes from
the CPU is not in it.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib as bl  # noqa: E402

SOURCE = bl.REPO / "bench" / "sample_cost.c"
BINARY = bl.WORK / "sample_cost"
MECHANISMS = ("none", "perf-task-clock", "perf-cpu-clock", "posix-cpu", "posix-wall",
              "itimer-prof", "bpf-cpu-clock")
SWITCH_MODES = ("yield", "pipe")
# the name sample_cost gives itself once its handler is installed (sample_cost.c: EXTERNAL_COMM)
EXTERNAL_COMM = "sample_cost_sig"
SIGPROF = 27  # bpftrace 0.17 knows no SIGPROF by name; 27 on x86-64 and arm64
BPFTRACE_PROGRAM = f'profile:hz:HZ /comm == "{EXTERNAL_COMM}"/ {{ signal({SIGPROF}) }}'
# a loop reaching less than this share of --loop-hz is taken to run at the kernel's tick
CAPPED_SHARE = 0.8


def build() -> None:
    BINARY.parent.mkdir(parents=True, exist_ok=True)
    bl.run(["gcc", "-O1", "-Wall", "-o", str(BINARY), str(SOURCE)])


def experiments(args: argparse.Namespace) -> list[tuple[str, int]]:
    """(mode, rate) of every run of a mechanism in one repetition."""
    return [("loop", args.loop_hz), ("gaps", args.gap_hz)] + \
        [(mode, hz) for hz in args.switch_hz for mode in SWITCH_MODES]


def command(mechanism: str, mode: str, hz: int, args: argparse.Namespace) -> list[str]:
    size = {"loop": args.iterations, "gaps": args.gap_seconds}.get(mode, args.rounds)
    program = [str(BINARY), mode, "external" if mechanism == "bpf-cpu-clock" else mechanism,
               str(hz), str(size)]
    if mode in SWITCH_MODES:
        program.append(str(args.cpu))
    if mechanism != "bpf-cpu-clock":
        return program
    if any(" " in part for part in program):
        raise bl.BenchError(f"bpftrace -c cannot take a path with spaces: {program}")
    return ["bpftrace", "--unsafe", "-e", BPFTRACE_PROGRAM.replace("HZ", str(hz)),
            "-c", " ".join(program)]


def one_run(mechanism: str, mode: str, hz: int, args: argparse.Namespace) -> dict:
    _, out = bl.run(command(mechanism, mode, hz, args))
    lines = [line for line in out.splitlines() if line.startswith("sample_cost ")]
    if len(lines) != 1:
        raise bl.BenchError(f"{mechanism} {mode} {hz} Hz: no result line in:\n{out}")
    kv = bl.parse_kv(lines[0])
    return {k: (int(v) if re.fullmatch(r"-?\d+", v) else float(v))
            for k, v in kv.items() if k not in ("mode", "mechanism")}


def bpf_unavailable() -> str | None:
    """Why the bpf-cpu-clock mechanism cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root (bpftrace)"
    if shutil.which("bpftrace") is None:
        return "bpftrace not found: apt-get install bpftrace"
    return None


def loop_sample_us(run: dict, base: dict) -> float | None:
    """CPU time per signal that the sampler added to the loop."""
    if run["signals"] <= 0:
        return None
    return 1e6 * (run["cpu_seconds"] - base["cpu_seconds"]) / run["signals"]


def per_switch_ns(run: dict, base: dict, sample_us: float) -> float | None:
    """CPU time per context switch that the sampler added, its samples' cost taken out."""
    if run["switches"] <= 0:
        return None
    extra = run["cpu_seconds"] - base["cpu_seconds"] - run["signals"] * sample_us * 1e-6
    return 1e9 * extra / run["switches"]


def cell(values: list[float], fmt: str) -> str:
    return bl.cell(values, fmt) if values else "-"


def rate_list(text: str) -> list[int]:
    rates = [int(r) for r in text.split(",") if r]
    if not rates or min(rates) <= 0:
        raise argparse.ArgumentTypeError(f"expected positive rates in Hz, got {text!r}")
    return rates


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    doc = __doc__.split("\n\n")
    ap = argparse.ArgumentParser(description=doc[0], epilog="\n\n".join(doc[1:]),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=5, help="repetitions (default 5)")
    ap.add_argument("--loop-hz", type=int, default=5000,
                    help="sampling rate of the loop mode (default 5000: many samples per run)")
    ap.add_argument("--gap-hz", type=int, default=1000,
                    help="sampling rate of the gaps mode (default 1000)")
    ap.add_argument("--switch-hz", type=rate_list, default=[200, 1000],
                    help="sampling rates of the switch modes, comma-separated (default "
                         "200,1000: pathscope's default rate and 1 kHz)")
    ap.add_argument("--iterations", type=int, default=400_000_000,
                    help="additions in the loop (default 4e8, about 1 s)")
    ap.add_argument("--gap-seconds", type=float, default=2.0,
                    help="length of the gaps mode (default 2 s)")
    ap.add_argument("--rounds", type=int, default=200_000,
                    help="sched_yield calls or pipe round trips per process (default 200000)")
    ap.add_argument("--cpu", type=int, default=1, help="the CPU of the switch modes (default 1)")
    ap.add_argument("--mechanisms", default=",".join(MECHANISMS),
                    help=f"comma-separated, must include none (default: all: "
                         f"{','.join(MECHANISMS)})")
    ap.add_argument("--json", help="also write every measurement to this file")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    mechanisms = [m for m in args.mechanisms.split(",") if m]
    if "none" not in mechanisms or any(m not in MECHANISMS for m in mechanisms):
        raise bl.BenchError(f"--mechanisms must include none and be among {', '.join(MECHANISMS)}")
    skipped: dict[str, str] = {}
    if "bpf-cpu-clock" in mechanisms:
        why = bpf_unavailable()
        if why:
            skipped["bpf-cpu-clock"] = why
            print(f"sample_cost: skipping bpf-cpu-clock: {why}", file=sys.stderr, flush=True)
    mechanisms = [m for m in mechanisms if m not in skipped]

    info = bl.machine()
    build()
    runs = experiments(args)
    results: dict[tuple[str, str, int], list[dict]] = \
        {(m, mode, hz): [] for m in mechanisms for mode, hz in runs}
    for rep in range(args.reps):
        for mode, hz in runs:
            for m in bl.interleaved(rep, mechanisms):
                results[(m, mode, hz)].append(one_run(m, mode, hz, args))
        print(f"sample_cost: repetition {rep + 1}/{args.reps} done", file=sys.stderr, flush=True)

    def base(mode: str, hz: int) -> list[dict]:
        return results[("none", mode, hz)]

    loop_base, gap_base = base("loop", args.loop_hz), base("gaps", args.gap_hz)
    tick_us = statistics.median(r["gap_other_us"] for r in gap_base)
    print("\n".join(bl.machine_lines(info)))
    for m, why in skipped.items():
        print(f"skipped {m}: {why}")
    baseline = [f"loop {cell([r['cpu_seconds'] for r in loop_base], '.3f')} CPU s",
                f"an interruption without a signal (mostly the kernel's tick) "
                f"{cell([r['gap_other_us'] for r in gap_base], '.1f')} us"]
    for mode in SWITCH_MODES:
        runs_ = base(mode, args.switch_hz[0])
        baseline.append(f"{mode} {cell([1e9 * r['cpu_seconds'] / r['switches'] for r in runs_], '.0f')}"
                        f" CPU ns per switch "
                        f"({statistics.median(r['switches'] for r in runs_):.0f} switches)")
    print(f"baseline (no sampler), median (min..max) of {args.reps}: " + "; ".join(baseline))

    rows = []
    summary: dict = {"tick_us": tick_us}
    for m in mechanisms:
        if m == "none":
            continue
        loops = results[(m, "loop", args.loop_hz)]
        loop_us = [u for u in (loop_sample_us(r, b) for r, b in zip(loops, loop_base))
                   if u is not None]
        rate = statistics.median(r["signals"] / r["cpu_seconds"] for r in loops)
        on_tick = rate < CAPPED_SHARE * args.loop_hz
        gaps = [r["gap_signal_us"] for r in results[(m, "gaps", args.gap_hz)]
                if r["gaps_signal"] > 0]
        # a sample at the tick costs only what it adds to the tick, which happens anyway
        added = [g - tick_us if on_tick else g for g in gaps]
        sample_us = statistics.median(added) if added else 0.0
        floors = []
        for hz in (200, 1000):
            if on_tick and hz > rate / CAPPED_SHARE:
                floors.append(f"n/a (at most ~{rate:.0f} Hz)")
            else:
                floors.append(f"{100 * sample_us * 1e-6 * hz:.2f}%" if added else "-")
        summary[m] = {"sample_us": sample_us, "loop_sample_us": loop_us, "rate_hz": rate,
                      "on_tick": on_tick}
        switch_cells = []
        for hz in args.switch_hz:
            for mode in SWITCH_MODES:
                ns = [n for n in (per_switch_ns(r, b, sample_us) for r, b in
                                  zip(results[(m, mode, hz)], base(mode, hz))) if n is not None]
                switch_cells.append(cell(ns, ".0f"))
                summary[m][f"switch_ns_{mode}_{hz}"] = statistics.median(ns) if ns else None
        rows.append([m, f"{rate:.0f}" + (" (tick)" if on_tick else ""), cell(gaps, ".1f"),
                     cell(added, ".1f"), cell(loop_us, ".1f"), *floors, *switch_cells])
    print(f"rate: signals per CPU second in the loop at {args.loop_hz} Hz ((tick): the kernel's "
          f"tick caps it); gap: the median interruption with a signal at {args.gap_hz} Hz; "
          f"added: the gap, less the tick's {tick_us:.1f} us for a mechanism that rides the "
          f"tick; loop: CPU time per signal added to the loop; floors = added x rate; per "
          f"switch at N Hz: each of the two processes on CPU {args.cpu} sampled at N Hz, the "
          f"samples' cost (added) taken out.  Median (min..max) of {args.reps} interleaved "
          f"repetitions.")
    switch_headers = [f"per switch ns, {mode} {hz} Hz" for hz in args.switch_hz
                      for mode in SWITCH_MODES]
    print(bl.table(["mechanism", "rate Hz", "gap us", "added per sample us",
                    "loop us per sample", "200 Hz, % of a CPU", "1 kHz, % of a CPU",
                    *switch_headers], rows))
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"machine": info, "args": vars(args), "skipped": skipped, "summary": summary,
             "results": {f"{m} {mode} {hz}": r for (m, mode, hz), r in results.items()}},
            indent=1))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except bl.BenchError as e:
        print(f"sample_cost: {e}", file=sys.stderr)
        sys.exit(1)
