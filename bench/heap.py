#!/usr/bin/env python3
"""Heap profiling overhead: pathscope --heap per traversal mode against heaptrack, in one run.

    python3 bench/heap.py [--reps 5] [--modes full,reuse,heuristic,thunk] [--depths 10,20,30,40]
                          [--scale 1300] [--work 2] [--iterations 2000000] [--quick]
                          [--variants base,pathscope-full,...,heaptrack] [--preload] [--json FILE]

Programs (built here with -O2 -g, no frame pointers, into build/bench/heap/):
  heap_alloc  bench/heap_alloc.cpp: a mock mesh/particle/AMR code, allocation bursts from 11
              sites at call depths 20..40 (vector growth, map/list/unordered_map nodes, strings,
              malloc/calloc/posix_memalign buffers, shared_ptr, realloc), some memory kept live,
              a few blocks leaked; over 5e6 allocations per second uninstrumented here
              (--scale steps, --work units of computation per allocation).  Reports its main
              phase's own time and the exact number of allocation calls it made.
  heap_depth  bench/heap_depth.c: malloc(64) + free from one site DEPTH frames below main;
              reports ns per pair (median of 51 timed chunks of --iterations pairs).
Variants, interleaved in every repetition (forward order on even repetitions, reversed on odd):
  base              the program alone
  pathscope-MODE    bin/pathscope run --mpi openmpi --heap --traversal MODE --quiet -o DIR --
                    PROGRAM (with --preload: the environment form, LD_PRELOAD=
                    libpathscope-heap.so:libpathscope.so PATHSCOPE_HEAP=on ..., both libraries
                    copied to build/bench/heap/lib/ first)
  heaptrack         heaptrack -o DIR/ht PROGRAM (recording only, Debian's heaptrack)
A traversal mode that pathscope rejects (the CLI or the runtime exits non-zero naming the
traversal and the mode) is skipped with a note.  heap_alloc: the program's own seconds and the
wall time of the whole command (tool start-up and profile write included), medians with
min..max, and their ratio to base (goal: pathscope at most 1.3x).  heap_depth: ns per
malloc+free pair and ns added to base.  Every pathscope run must record at least the
allocations the program reports (the `heap` line of ranks/rank-000000.tsv, field 2), else the
benchmark fails; a profile without a `heap` line only warns.  heaptrack's own count (its
"allocations:" summary, which includes reallocs) is checked the same way.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib as bl  # noqa: E402

HERE = Path(__file__).resolve().parent
WORK = bl.WORK / "heap"
MPI = "openmpi"  # the programs are serial; the runtime build only has to exist
LIBS = ("libpathscope-heap.so", "libpathscope.so")  # preload order: heap interposer first
GOAL_RATIO = 1.3
HEAPTRACK = "heaptrack"


def build() -> dict[str, Path]:
    WORK.mkdir(parents=True, exist_ok=True)
    exes = {"heap_alloc": WORK / "heap_alloc", "heap_depth": WORK / "heap_depth"}
    for cmd in (["g++", "-std=c++17", "-O2", "-g", "-Wall", "-Wextra", "-o",
                 str(exes["heap_alloc"]), str(HERE / "heap_alloc.cpp")],
                ["gcc", "-O2", "-g", "-Wall", "-Wextra", "-o", str(exes["heap_depth"]),
                 str(HERE / "heap_depth.c")]):
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise bl.BenchError(f"build failed: {' '.join(cmd)}\n{done.stderr}")
        if done.stderr.strip():
            print(f"heap.py: compiler warnings:\n{done.stderr}", file=sys.stderr)
    return exes


def libraries(preload: bool) -> dict[str, Path]:
    """The runtime libraries in use: build/openmpi/ (the CLI preloads them from there), or
    copies in build/bench/heap/lib/ for --preload, so a rebuild cannot change them mid-run."""
    libs = {}
    for name in LIBS:
        src = bl.REPO / "build" / MPI / name
        if not src.is_file() and not preload:
            continue  # the CLI will say what is missing (the probe runs it)
        if not src.is_file():
            raise bl.BenchError(f"{src} does not exist: build it with `make build MPI={MPI}`")
        if preload:
            dst = WORK / "lib" / name
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
            src = dst
        libs[name] = src
    return libs


def command(variant: str, program: list[str], outdir: Path, libs: dict[str, Path],
            preload: bool) -> tuple[list[str], dict[str, str]]:
    if variant == "base":
        return program, {}
    if variant == HEAPTRACK:
        return [HEAPTRACK, "-o", str(outdir / "ht")] + program, {}
    mode = variant.removeprefix("pathscope-")
    if preload:
        return program, {"LD_PRELOAD": ":".join(str(libs[n]) for n in LIBS),
                         "PATHSCOPE_HEAP": "on", "PATHSCOPE_TRAVERSAL": mode,
                         "PATHSCOPE_OUTPUT": str(outdir), "PATHSCOPE_QUIET": "on"}
    return [str(bl.REPO / "bin" / "pathscope"), "run", "--mpi", MPI, "--heap", "--traversal",
            mode, "--quiet", "-o", str(outdir), "--"] + program, {}


def heap_line(outdir: Path) -> Optional[list[str]]:
    """The `heap` line of the rank file, split on tabs, or None if there is none."""
    if not bl.has_rank_text(outdir, 0):
        raise bl.BenchError(f"no text of rank 0 in {outdir}")
    for line in bl.rank_text(outdir, 0).splitlines():
        if line.startswith("heap\t"):
            return line.split("\t")
    return None


def dir_bytes(d: Path) -> int:
    return sum(p.stat().st_size for p in d.rglob("*") if p.is_file())


class Bench:
    def __init__(self, args: argparse.Namespace, exes: dict[str, Path], libs: dict[str, Path],
                 tmp: Path):
        self.args, self.exes, self.libs, self.tmp = args, exes, libs, tmp
        self.warned: set[str] = set()

    def warn_once(self, key: str, text: str) -> None:
        if key not in self.warned:
            self.warned.add(key)
            print(f"heap.py: warning: {text}", file=sys.stderr, flush=True)

    def probe(self, variant: str) -> Optional[str]:
        """Runs a tiny heap_depth under variant: None if it works, else why it is skipped.
        A failure that is not a rejected traversal mode stops the benchmark."""
        outdir = Path(tempfile.mkdtemp(prefix=f"probe-{variant}-", dir=self.tmp))
        cmd, env = command(variant, [str(self.exes["heap_depth"]), "5", "1000"], outdir,
                           self.libs, self.args.preload)
        _, status, out = bl.run_status(cmd, outdir, env, check=False)
        shutil.rmtree(outdir, ignore_errors=True)
        if status == 0:
            return None
        mode = variant.removeprefix("pathscope-")
        lower = out.lower()
        if variant != HEAPTRACK and "traversal" in lower and mode in lower \
                and "unrecognized arguments" not in lower:
            line = next((l for l in out.splitlines() if "traversal" in l.lower()), out.strip())
            return line.strip()
        tail = "\n".join(out.splitlines()[-10:])
        hint = " (a runtime without heap profiling? try --variants base,heaptrack)" \
            if variant != HEAPTRACK and "heap" in lower else ""
        raise bl.BenchError(f"{variant} does not run{hint}: {' '.join(cmd)}\n{tail}")

    def one(self, prog: str, args: list[str], variant: str) -> dict:
        """One run of prog under variant: the program's result line, wall time, checks."""
        outdir = Path(tempfile.mkdtemp(prefix=f"{prog}-{variant}-", dir=self.tmp))
        cmd, env = command(variant, [str(self.exes[prog])] + args, outdir, self.libs,
                           self.args.preload)
        wall, _, out = bl.run_status(cmd, outdir, env)
        line = next((l for l in out.splitlines() if l.startswith(f"{prog}: ")), None)
        if line is None:
            raise bl.BenchError(f"no result line from {prog} ({variant}):\n{out[-2000:]}")
        kv = bl.parse_kv(line)
        result = {"wall": wall, **{k: float(v) if "." in v else int(v) for k, v in kv.items()}}
        made = int(kv["allocations"])
        if variant.startswith("pathscope-"):
            fields = heap_line(outdir)
            if fields is None:
                self.warn_once(variant, f"{variant}: no `heap` line in {outdir}/ranks/"
                               "rank-000000.tsv (runtime not finished?): allocations unchecked")
            else:
                try:
                    recorded = int(fields[2])
                except (IndexError, ValueError):
                    raise bl.BenchError(f"{outdir}: unreadable heap line {fields}")
                result["recorded"] = recorded
                result["heap_line"] = fields
                if recorded < made:
                    raise bl.BenchError(f"{variant} {prog}: {recorded} allocations recorded in "
                                        f"{outdir}, the program made {made}")
            result["output_bytes"] = dir_bytes(outdir)
        elif variant == HEAPTRACK:
            m = re.search(r"^\s*allocations:\s*(\d+)", out, re.M)
            if m is None:
                self.warn_once(variant, "no 'allocations:' summary from heaptrack: unchecked")
            else:
                result["recorded"] = int(m.group(1))
                if result["recorded"] < made:
                    raise bl.BenchError(f"heaptrack {prog}: {result['recorded']} allocations "
                                        f"recorded, the program made {made}")
            if not list(outdir.glob("ht*")):
                raise bl.BenchError(f"heaptrack wrote no output in {outdir}")
            result["output_bytes"] = dir_bytes(outdir)
        shutil.rmtree(outdir, ignore_errors=True)
        return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5, help="repetitions of each variant (default 5)")
    ap.add_argument("--modes", default="full,reuse,heuristic,thunk",
                    help="pathscope traversal modes, one variant pathscope-MODE each")
    ap.add_argument("--depths", default="10,20,30,40", help="heap_depth stack depths")
    ap.add_argument("--scale", type=int, help="heap_alloc steps (default 1300; --quick: 200)")
    ap.add_argument("--work", type=int, default=2,
                    help="heap_alloc computation units per allocation (default 2, 0: none)")
    ap.add_argument("--iterations", type=int,
                    help="heap_depth malloc+free pairs per run (default 2000000; --quick: 300000)")
    ap.add_argument("--quick", action="store_true",
                    help="small sizes, 3 repetitions, depths 10 and 40: a before/after check of "
                    "a change in minutes")
    ap.add_argument("--variants", help="only these variants (comma-separated; base is always "
                    "run), e.g. base,heaptrack")
    ap.add_argument("--preload", action="store_true",
                    help="run pathscope through LD_PRELOAD (environment form), not the CLI")
    ap.add_argument("--json", help="also write every measurement to this file")
    args = ap.parse_args(argv)
    if args.scale is None:
        args.scale = 200 if args.quick else 1300
    if args.iterations is None:
        args.iterations = 300_000 if args.quick else 2_000_000
    if args.quick and args.reps == 5:
        args.reps = 3
    if args.quick and args.depths == "10,20,30,40":
        args.depths = "10,40"
    modes = [m for m in args.modes.split(",") if m]
    depths = [int(d) for d in args.depths.split(",") if d]
    variants = ["base"] + [f"pathscope-{m}" for m in modes] + [HEAPTRACK]
    if args.variants:
        wanted = [v for v in args.variants.split(",") if v]
        unknown = [v for v in wanted if v not in variants]
        if unknown:
            raise bl.BenchError(f"unknown variants {', '.join(unknown)} "
                                f"(known: {', '.join(variants)})")
        variants = [v for v in variants if v == "base" or v in wanted]
    if HEAPTRACK in variants and shutil.which(HEAPTRACK) is None:
        raise bl.BenchError("heaptrack not found: apt-get install heaptrack "
                            "(or leave it out with --variants)")

    info = bl.machine()
    info["heaptrack"] = bl.dpkg_version("heaptrack")
    exes = build()
    uses_pathscope = any(v.startswith("pathscope-") for v in variants)
    libs = libraries(args.preload) if uses_pathscope else {}
    lib_sums = {n: bl.sha256(p) for n, p in libs.items()}
    WORK.mkdir(parents=True, exist_ok=True)
    skipped: dict[str, str] = {}
    alloc_args = [str(args.scale), str(args.work)]
    with tempfile.TemporaryDirectory(prefix="tmp-", dir=WORK) as tmpname:
        bench = Bench(args, exes, libs, Path(tmpname))
        for v in variants[1:]:
            why = bench.probe(v)
            if why is not None:
                skipped[v] = why
                print(f"heap.py: skipping {v}: {why}", file=sys.stderr, flush=True)
        variants = [v for v in variants if v not in skipped]
        alloc: dict[str, list[dict]] = {v: [] for v in variants}
        depth: dict[tuple[int, str], list[dict]] = {(d, v): [] for d in depths for v in variants}
        for rep in range(args.reps):
            for v in bl.interleaved(rep, variants):
                alloc[v].append(bench.one("heap_alloc", alloc_args, v))
            for d in depths:
                for v in bl.interleaved(rep, variants):
                    depth[(d, v)].append(bench.one("heap_depth", [str(d), str(args.iterations)],
                                                   v))
            print(f"heap.py: repetition {rep + 1}/{args.reps}: heap_alloc " + ", ".join(
                f"{v} {alloc[v][-1]['seconds']:.2f} s" for v in variants),
                file=sys.stderr, flush=True)
    changed = [n for n, p in libs.items() if p.is_file() and bl.sha256(p) != lib_sums[n]]

    print("\n".join(bl.machine_lines(info)))
    print(f"heaptrack {info['heaptrack']}; pathscope through "
          f"{'LD_PRELOAD' if args.preload else 'bin/pathscope run --heap'}")
    for v, why in skipped.items():
        print(f"skipped {v}: {why}")
    base = alloc["base"][0]
    rate = [r["allocations"] / r["seconds"] for r in alloc["base"]]
    print(f"\nheap_alloc {args.scale} {args.work}: {base['allocations']} allocation calls "
          f"(+{base['reallocs']} realloc), {base['leaked']} leaked, retained peak "
          f"{base['retained_peak_bytes'] / 2**20:.1f} MiB; uninstrumented "
          f"{statistics.median(rate) / 1e6:.2f} M allocations/s ({min(rate) / 1e6:.2f}.."
          f"{max(rate) / 1e6:.2f})")
    print(f"median of {args.reps} interleaved runs (min..max); ratio = median / median of base; "
          f"paired = per repetition; wall = the whole command")
    rows = []
    base_s = [r["seconds"] for r in alloc["base"]]
    base_w = [r["wall"] for r in alloc["base"]]
    for v in variants:
        s = [r["seconds"] for r in alloc[v]]
        w = [r["wall"] for r in alloc[v]]
        ratio = statistics.median(s) / statistics.median(base_s)
        paired = [x / b for x, b in zip(s, base_s)]
        last = alloc[v][-1]
        rows.append([v, bl.cell(s, ".3f"),
                     "-" if v == "base" else f"{ratio:.2f}x",
                     "-" if v == "base" else f"{min(paired):.2f}..{max(paired):.2f}x",
                     bl.cell(w, ".3f"),
                     "-" if v == "base" else
                     f"{statistics.median(w) / statistics.median(base_w):.2f}x",
                     str(last.get("recorded", "-")),
                     f"{last['output_bytes'] / 1024:.0f} KiB" if "output_bytes" in last else "-",
                     ("yes" if ratio <= GOAL_RATIO else "no") if v.startswith("pathscope-")
                     else "-"])
    print(bl.table(["variant", "program s", "ratio", "paired", "wall s", "wall ratio",
                    "allocations recorded", "output", f"<= {GOAL_RATIO}x"], rows))

    print(f"\nheap_depth: ns per malloc(64)+free pair, {args.iterations} pairs from one site at "
          f"frame DEPTH (main = 1); median of {args.reps} runs (min..max); added = median of "
          f"the paired differences to base (min..max)")
    rows = []
    for d in depths:
        base_ns = [r["ns_per_pair"] for r in depth[(d, "base")]]
        for v in variants:
            ns = [r["ns_per_pair"] for r in depth[(d, v)]]
            added = [x - b for x, b in zip(ns, base_ns)]
            rows.append([str(d), v, bl.cell(ns, ".1f"), "-" if v == "base" else
                         f"{statistics.median(added):+.1f} ({min(added):+.1f}..{max(added):+.1f})"])
    print(bl.table(["depth", "variant", "ns per pair", "added ns"], rows))
    if changed:
        print(f"\nWARNING: {', '.join(changed)} changed during the benchmark (rebuilt?): "
              f"the pathscope numbers may mix two builds")
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"machine": info, "libraries_sha256": lib_sums, "changed_during_run": changed,
             "args": vars(args), "skipped": skipped,
             "heap_alloc": alloc,
             "heap_depth": {f"{d} {v}": r for (d, v), r in depth.items()}}, indent=1))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except bl.BenchError as e:
        print(f"heap.py: {e}", file=sys.stderr)
        sys.exit(1)
