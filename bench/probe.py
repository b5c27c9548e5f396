#!/usr/bin/env python3
"""What a probe costs per call of the probed function: the kernel's uprobes, and pathscope's.

    python3 bench/probe.py [--reps 5] [--depths 10,30] [--calls 200000] [--entries push,step]
                           [--pathscope] [--variants ...] [--json FILE]

Builds bench/probe_cost.c twice into build/bench/ and runs it (one process, no MPI): a loop
calling a noinline function f from DEPTH frames below main (a recursion builds the depth),
timed by the program itself with clock_gettime around chunks of calls (the median chunk, in ns
per call).  The two builds differ in f's first instruction, which decides how the kernel runs
the instruction a uprobe displaces:
  push   built with frame pointers: f opens with `push %rbp; mov %rsp,%rbp`, which the kernel
         emulates at the breakpoint (one trap per probe hit)
  step   built without: f opens with a store to the stack (`mov %rdi,-0x8(%rsp)`), which the
         kernel executes out of line and single-steps (a second trap per hit)
Variants, interleaved in every repetition (forward order on even repetitions, reversed on odd):
  plain           the program alone
  plain-g         the program alone, its loop calling g (the baseline of pathscope-page)
  uprobe          bpftrace -e 'uprobe:BINARY:f { @c = count(); }' -c 'BINARY DEPTH CALLS'
  uprobe-ret      the same with a uretprobe too: 'uretprobe:BINARY:f { @r = count(); }'
  uprobe-stack    a uprobe that keys its count by the user stack, as a path profile needs:
                  'uprobe:BINARY:f { @s[ustack] = count(); }' (the kernel's frame-pointer walk:
                  correct paths with the push build only, but it costs the same walk in both)
  pathscope-time  bin/pathscope run -o DIR --probe f -- BINARY DEPTH CALLS (PATHSCOPE_PROBE=f,
                  PATHSCOPE_PROBE_METRICS=time, sampling off: PATHSCOPE_SAMPLE_RATE=0)
  pathscope-cpu   the same with PATHSCOPE_PROBE_METRICS=cpu
  pathscope-thunk pathscope-time with PATHSCOPE_TRAVERSAL=thunk (the default is reuse)
  pathscope-paths pathscope-time without exit timing: call paths and counts only.  No option
                  turns exit timing off; the runtime turns it off itself when SIGPROF already
                  has a handler at its start, so this variant preloads
                  build/bench/sigprof_holder.so (bench/sigprof_holder.c), which installs one
  pathscope-page  pathscope-time, but the loop calls g, which is not probed and shares f's page
                  (what a probe costs the rest of its page: expected nothing measurable;
                  compare with plain-g)
The pathscope variants run only with --pathscope (or named in --variants); they need the probe
runtime of issue 13, and the benchmark stops with a message before measuring anything if
`pathscope run` does not know --probe or the profile has no `probe` line for f.
Checks: bpftrace's counts (@c, @r with the uretprobe, @s summed over stacks) equal the calls
the program made, warm-up included; a pathscope profile's `probe` nodes for f have exactly that
many visits (none for pathscope-page), its `probes` line says exit timing `on` (the reason
for pathscope-paths), and its `pnode` lines count every call as untimed with pathscope-paths,
none otherwise, and its `probes` line counts every call as a fast entry but the first of each
descent to the loop (the warm-up's and each chunk's: a new activation of the calling function;
none with pathscope-paths: no thunks, no fast path).  Reported: the median ns per call (min..max over the repetitions), the added
ns against the baseline of the same repetition (plain; plain-g for pathscope-page), and the
ratio to it.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import re
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
CHUNKS = 51  # (bench/probe_cost.c: timed chunks, after one warm-up descent)
import benchlib as bl  # noqa: E402

SOURCE = bl.REPO / "bench" / "probe_cost.c"
PATHSCOPE = bl.REPO / "bin" / "pathscope"
# entry kind -> the compiler flags that give f that first instruction
ENTRIES = {"push": ["-fno-omit-frame-pointer"], "step": ["-fomit-frame-pointer"]}
UPROBE_VARIANTS = ("plain", "uprobe", "uprobe-ret", "uprobe-stack")
PATHSCOPE_VARIANTS = ("plain-g", "pathscope-time", "pathscope-cpu", "pathscope-thunk",
                      "pathscope-paths", "pathscope-page")
VARIANTS = UPROBE_VARIANTS + PATHSCOPE_VARIANTS
HOLDER_SOURCE = bl.REPO / "bench" / "sigprof_holder.c"
HOLDER = bl.WORK / "sigprof_holder.so"


def binary(entry: str) -> Path:
    return bl.WORK / f"probe_cost_{entry}"


def build(entry: str) -> str:
    """Builds the entry's binary; returns f's first instruction as objdump shows it."""
    exe = binary(entry)
    exe.parent.mkdir(parents=True, exist_ok=True)
    bl.run(["gcc", "-O1", "-g", "-Wall", *ENTRIES[entry], "-o", str(exe), str(SOURCE)])
    _, dump = bl.run(["objdump", "-d", "--no-show-raw-insn", "--disassemble=f", str(exe)])
    first = re.search(r"^\s*[0-9a-f]+:\s+(.+)$", dump.split("<f>:", 1)[-1], re.M)
    if first is None:
        raise bl.BenchError(f"no disassembly of f in {exe}")
    return " ".join(first.group(1).split())


def build_holder() -> None:
    HOLDER.parent.mkdir(parents=True, exist_ok=True)
    bl.run(["gcc", "-O1", "-Wall", "-shared", "-fPIC", "-o", str(HOLDER), str(HOLDER_SOURCE)])


def baseline(variant: str) -> str:
    return "plain-g" if variant == "pathscope-page" else "plain"


def bpftrace_command(variant: str, exe: Path, program: list[str]) -> list[str]:
    key = "@s[ustack]" if variant == "uprobe-stack" else "@c"
    script = f"uprobe:{exe}:f {{ {key} = count(); }}"
    if variant == "uprobe-ret":
        script += f" uretprobe:{exe}:f {{ @r = count(); }}"
    if any(" " in part for part in program):
        raise bl.BenchError(f"bpftrace -c cannot take a path with spaces: {program}")
    return ["bpftrace", "-e", script, "-c", " ".join(program)]


def result_line(out: str, what: str) -> dict:
    lines = [line for line in out.splitlines() if line.startswith("probe_cost ")]
    if len(lines) != 1:
        raise bl.BenchError(f"{what}: no result line in:\n{out}")
    kv = bl.parse_kv(lines[0])
    return {"calls": int(kv["calls"]), "ns": float(kv["ns_per_call"]),
            "same_page": kv["same_page"] == "1"}


def check_bpftrace_counts(out: str, variant: str, calls: int, what: str) -> None:
    maps = {m.group(1): int(m.group(2)) for m in re.finditer(r"^@(\w+): (\d+)$", out, re.M)}
    # the stack-keyed map prints one entry per stack, each ending in `]: COUNT`
    stacks = [int(n) for n in re.findall(r"^\]: (\d+)$", out, re.M)]
    if stacks:
        maps["s"] = sum(stacks)
    want = {"s" if variant == "uprobe-stack" else "c": calls}
    if variant == "uprobe-ret":
        want["r"] = calls
    if maps != want:
        raise bl.BenchError(f"{what}: bpftrace counted {maps}, the program made {calls} calls")


def probe_lines(outdir: Path) -> dict:
    """From the profile's rank files: visits of the `probe` nodes by probed function name, the
    calls their `pnode` lines count as not timed, and the exit timing fields of `probes`."""
    names: dict[tuple[str, str], str] = {}
    visits: dict[str, int] = {}
    timing: set[str] = set()
    untimed = fast = 0
    rank_files = bl.rank_texts(outdir)
    if not rank_files:
        raise bl.BenchError(f"no rank text in {outdir}")
    for rank, text in rank_files.items():
        for line in text.splitlines():
            f = line.split("\t")
            if f[0] == "probes":  # metrics, text writer, exit timing, ..., (2.7) fast entries
                timing.add(f[3])
                fast += int(f[14]) if len(f) > 14 else 0
            # probe: id, module, address, size, state, added, removed, SPEC, name, ...
            elif f[0] == "probe":
                names[(rank, f[1])] = f[9]
            elif f[0] == "node" and f[4] == "probe":  # thread, id, parent, kind, module, address
                name = names.get((rank, f[6]), f"probe {f[6]}")
                visits[name] = visits.get(name, 0) + int(f[7])
            elif f[0] == "pnode":  # thread, node, incl, excl, cpu, 4 rusage, lost, untimed, ...
                untimed += int(f[11])
    if not any(name == "f" for name in names.values()):
        raise bl.BenchError(f"no `probe` line for f in {outdir}/ranks: "
                            f"the runtime did not probe f")
    return {"visits": visits, "untimed": untimed, "timing": timing, "fast": fast}


def pathscope_run(variant: str, exe: Path, depth: int, calls: int,
                  outdir: Path) -> tuple[str, dict]:
    metrics = "cpu" if variant == "pathscope-cpu" else "time"
    program = [str(exe), str(depth), str(calls), "g" if variant == "pathscope-page" else "f"]
    env = {"PATHSCOPE_PROBE_METRICS": metrics, "PATHSCOPE_SAMPLE_RATE": "0",
           "PATHSCOPE_QUIET": "on"}
    if variant == "pathscope-thunk":
        env["PATHSCOPE_TRAVERSAL"] = "thunk"
    if variant == "pathscope-paths":
        env["LD_PRELOAD"] = str(HOLDER)  # (pathscope run puts its library first)
    cmd = [str(PATHSCOPE), "run", "-o", str(outdir), "--force", "--probe", "f", "--", *program]
    _, status, out = bl.run_status(cmd, env=env, check=False)
    if status != 0 and "--probe" in out and "unrecognized" in out:
        raise bl.BenchError(f"{variant} needs the probe runtime of issue 13: `pathscope run` "
                            f"does not know --probe yet")
    if status != 0:
        raise bl.BenchError(f"exit status {status}: {' '.join(cmd)}\n{out[-2000:]}")
    return out, probe_lines(outdir)


def check_profile(lines: dict, variant: str, calls: int, what: str) -> None:
    got = lines["visits"].get("f", 0)
    if got != calls:
        raise bl.BenchError(f"{what}: the profile has {got} calls of f, the program made {calls}")
    paths_only = variant == "pathscope-paths"
    want_timing = {"SIGPROF has another handler"} if paths_only else {"on"}
    if lines["timing"] != want_timing:
        raise bl.BenchError(f"{what}: exit timing {lines['timing']}, expected {want_timing}")
    if lines["untimed"] != (calls if paths_only else 0):
        raise bl.BenchError(f"{what}: {lines['untimed']} calls not timed of {calls}")
    # the calls come from one call site; each descent (the warm-up, then each chunk) is a new
    # activation of the caller, whose first call takes the slow path and the others the entry's
    # fast path (none without exit timing: no thunks)
    want_fast = 0 if paths_only or calls == 0 else calls - (CHUNKS + 1)
    if lines["fast"] != want_fast:
        raise bl.BenchError(f"{what}: {lines['fast']} entries took the fast path, expected "
                            f"{want_fast} of {calls}")


def one_run(variant: str, entry: str, depth: int, args: argparse.Namespace,
            outdir: Path) -> dict:
    exe = binary(entry)
    program = [str(exe), str(depth), str(args.calls)]
    what = f"{variant} {entry} depth {depth}"
    if variant.startswith("pathscope"):
        out, lines = pathscope_run(variant, exe, depth, args.calls, outdir)
        result = result_line(out, what)
        check_profile(lines, variant, 0 if variant == "pathscope-page" else result["calls"],
                      what)
        return result
    if variant == "plain-g":
        program.append("g")
    cmd = program if variant.startswith("plain") else bpftrace_command(variant, exe, program)
    _, out = bl.run(cmd)
    result = result_line(out, what)
    if not variant.startswith("plain"):
        check_bpftrace_counts(out, variant, result["calls"], what)
    return result


def int_list(text: str) -> list[int]:
    values = [int(v) for v in text.split(",") if v]
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    doc = __doc__.split("\n\n")
    ap = argparse.ArgumentParser(description=doc[0], epilog="\n\n".join(doc[1:]),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=5, help="repetitions (default 5)")
    ap.add_argument("--depths", type=int_list, default=[10, 30],
                    help="frames between main and the loop, comma-separated (default 10,30)")
    ap.add_argument("--calls", type=int, default=200_000,
                    help="timed calls per run (default 200000; a tenth more as warm-up)")
    ap.add_argument("--entries", default="push,step",
                    help=f"builds of f, comma-separated, among {','.join(ENTRIES)} (default both)")
    ap.add_argument("--pathscope", action="store_true",
                    help="add the pathscope variants (needs the probe runtime of issue 13)")
    ap.add_argument("--variants", help=f"comma-separated, must include plain; among "
                                       f"{','.join(VARIANTS)} (default: "
                                       f"{','.join(UPROBE_VARIANTS)}, plus the pathscope ones "
                                       f"with --pathscope)")
    ap.add_argument("--json", help="also write every measurement to this file")
    return ap.parse_args(argv)


def chosen(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    variants = args.variants.split(",") if args.variants else \
        list(UPROBE_VARIANTS) + (list(PATHSCOPE_VARIANTS) if args.pathscope else [])
    entries = [e for e in args.entries.split(",") if e]
    if "plain" not in variants or any(v not in VARIANTS for v in variants):
        raise bl.BenchError(f"--variants must include plain and be among {', '.join(VARIANTS)}")
    if "pathscope-page" in variants and "plain-g" not in variants:
        variants.insert(1, "plain-g")
    if not entries or any(e not in ENTRIES for e in entries):
        raise bl.BenchError(f"--entries must be among {', '.join(ENTRIES)}")
    return variants, entries


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    variants, entries = chosen(args)
    if any(v.startswith("uprobe") for v in variants) and shutil.which("bpftrace") is None:
        raise bl.BenchError("the uprobe variants need bpftrace (apt-get install bpftrace) and root")
    info = bl.machine()
    first_insn = {e: build(e) for e in entries}
    if "pathscope-paths" in variants:
        build_holder()
    cases = [(e, d) for e in entries for d in args.depths]
    results: dict[tuple[str, str, int], list[dict]] = \
        {(v, e, d): [] for v in variants for e, d in cases}
    with tempfile.TemporaryDirectory(prefix="pathscope-probe-") as tmp:
        outdir = Path(tmp) / "profile"
        if any(v.startswith("pathscope") for v in variants):  # fail before measuring anything
            pathscope_run("pathscope-time", binary(entries[0]), args.depths[0], 1000, outdir)
        for rep in range(args.reps):
            for e, d in cases:
                for v in bl.interleaved(rep, variants):
                    results[(v, e, d)].append(one_run(v, e, d, args, outdir))
            print(f"probe: repetition {rep + 1}/{args.reps} done", file=sys.stderr, flush=True)
    print("\n".join(bl.machine_lines(info)))
    for e in entries:
        print(f"entry {e}: f opens with `{first_insn[e]}`")
    rows, summary = [], {}
    for e, d in cases:
        for v in variants:
            base = results[(baseline(v), e, d)]
            runs = results[(v, e, d)]
            ns = [r["ns"] for r in runs]
            added = [r["ns"] - b["ns"] for r, b in zip(runs, base)]
            ratio = [r["ns"] / b["ns"] for r, b in zip(runs, base)]
            summary[f"{v} {e} {d}"] = {"ns": bl.stats(ns), "added": bl.stats(added),
                                       "ratio": bl.stats(ratio)}
            rows.append([e, str(d), v, bl.cell(ns, ".1f"),
                         "-" if v.startswith("plain") else bl.cell(added, "+.1f"),
                         "-" if v.startswith("plain") else f"{statistics.median(ratio):.1f}x"])
    print(f"ns per call of f (g for plain-g and pathscope-page): median (min..max) of "
          f"{args.reps} interleaved repetitions of {args.calls} timed calls; added and ratio "
          f"against the baseline of the same repetition (plain-g for pathscope-page, else "
          f"plain); load average at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(bl.table(["entry", "depth", "variant", "ns per call", "added ns", "ratio"], rows))
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"machine": info, "args": vars(args), "first_instruction": first_insn,
             "summary": summary,
             "results": {f"{v} {e} {d}": r for (v, e, d), r in results.items()}}, indent=1))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except bl.BenchError as e:
        print(f"probe: {e}", file=sys.stderr)
        sys.exit(1)
