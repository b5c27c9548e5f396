#!/usr/bin/env python3
"""The in-job reduction of the call trees against the rank count (issue 14): for 4 ... 128
ranks (oversubscribed on this machine's cores), the program of known structure of the tests
(tests/programs/reduce_known.c: communicators, a helper thread, sampling on) run

    none        without pathscope
    all         pathscope run --per-rank all (tree.tsv, and every rank's file in ranks.tsv,
                written with MPI-IO by one writer per node)
    summary     pathscope run --per-rank summary (tree.tsv with the heaviest paths rank by
                rank: the default)
    reduced     pathscope run --per-rank none (tree.tsv and profile.tsv only)

    python3 bench/reduce.py [--mpi openmpi,mpich] [--ranks 4,8,16,32,64,128] [--reps 3]
                            [--json FILE]

Variants are interleaved within each repetition (benchlib.interleaved).  Per MPI and rank
count it prints the median wall time of each variant (and its ratio to none), what the
reduction cost rank 0 (tree.tsv's `reduction` line: from the moment every rank reached it to
the last merge; the rounds; the most bytes of blocks held at once), and the sizes: tree.tsv,
profile.tsv, and ranks.tsv (or rank files) that --per-rank all adds.  all - reduced is what
writing ranks.tsv adds to the run.  The test programs are those of
`make build` (build/<mpi>/reduce_known)."""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys

import benchlib as bl

VARIANTS = ("none", "all", "summary", "reduced")


def command(variant: str, mpi: str, nranks: int, outdir) -> list[str]:
    program = [str(bl.REPO / "build" / mpi / "reduce_known")]
    if variant == "none":
        return bl.mpirun(mpi, nranks, program, bind=False)
    extra = ["--per-rank", {"reduced": "none"}.get(variant, variant)]
    return bl.mpirun(mpi, nranks, [str(bl.REPO / "bin" / "pathscope"), "run", "--quiet", "-o",
                                   str(outdir), *extra, "--", *program], bind=False)


def tree_facts(outdir) -> dict:
    text = (outdir / "tree.tsv").read_text()
    cost = next(line.split("\t")[1:] for line in text.splitlines()
                if line.startswith("reduction\t"))
    ranks = sorted((outdir / "ranks").glob("rank-*.tsv"))
    if (outdir / "ranks.tsv").exists():
        ranks.append(outdir / "ranks.tsv")
    return {"reduce_ms": int(cost[0]) / 1e6, "rounds": int(cost[1]),
            "peak_kb": int(cost[3]) / 1024, "tree_kb": len(text) / 1024,
            "profile_kb": (outdir / "profile.tsv").stat().st_size / 1024,
            "rank_files": len(ranks), "rank_files_kb": sum(p.stat().st_size for p in ranks) / 1024,
            "nodes": sum(1 for line in text.splitlines() if line.startswith("node\t"))}


def measure(mpi: str, nranks: int, reps: int) -> tuple[dict, dict]:
    times: dict[str, list[float]] = {v: [] for v in VARIANTS}
    facts: dict[str, list[dict]] = {"all": [], "summary": [], "reduced": []}
    for rep in range(reps):
        for variant in bl.interleaved(rep, VARIANTS):
            outdir = bl.WORK / mpi / f"reduce-{variant}"
            shutil.rmtree(outdir, ignore_errors=True)
            wall, status = bl.run_status(command(variant, mpi, nranks, outdir))[:2]
            if status != 0:
                raise SystemExit(f"{mpi} {nranks} ranks {variant}: exit status {status}")
            if variant != "none":
                facts[variant].append(tree_facts(outdir))
            shutil.rmtree(outdir, ignore_errors=True)
            times[variant].append(wall)
    return times, facts


def median_of(facts: list[dict], key: str) -> float:
    return statistics.median(f[key] for f in facts)


def report(mpi: str, nranks: int, times: dict, facts: dict) -> str:
    med = {v: statistics.median(t) for v, t in times.items()}
    lines = [f"{mpi}, {nranks} ranks ({len(times['none'])} runs each; wall seconds, median "
             f"(min..max), and median / none):"]
    for v in VARIANTS:
        lines.append(f"  {v:<8} {bl.cell(times[v], '.2f'):<22} x{med[v] / med['none']:.2f}")
    both = facts["all"] + facts["summary"] + facts["reduced"]
    lines.append(
        f"  reduction on rank 0: {median_of(both, 'reduce_ms'):.1f} ms median "
        f"({min(f['reduce_ms'] for f in both):.1f}..{max(f['reduce_ms'] for f in both):.1f}), "
        f"{both[0]['rounds']} rounds, at most {median_of(both, 'peak_kb'):.0f} KiB of blocks")
    lines.append(
        f"  sizes: tree.tsv {median_of(both, 'tree_kb'):.1f} KiB ({median_of(both, 'nodes'):.0f} "
        f"nodes; summary {median_of(facts['summary'], 'tree_kb'):.1f} KiB), profile.tsv "
        f"{median_of(both, 'profile_kb'):.1f} KiB; --per-rank all adds "
        f"{facts['all'][0]['rank_files']} file(s), {median_of(facts['all'], 'rank_files_kb'):.0f}"
        f" KiB; none and summary: {facts['reduced'][0]['rank_files']}, "
        f"{facts['summary'][0]['rank_files']} files")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mpi", default="openmpi,mpich")
    parser.add_argument("--ranks", default="4,8,16,32,64,128")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--json", help="also write the raw figures here")
    args = parser.parse_args()
    results = {"machine": bl.machine(), "runs": []}
    print("\n".join(bl.machine_lines(results["machine"])), flush=True)
    for mpi in args.mpi.split(","):
        for nranks in map(int, args.ranks.split(",")):
            times, facts = measure(mpi, nranks, args.reps)
            print(report(mpi, nranks, times, facts), flush=True)
            results["runs"].append({"mpi": mpi, "ranks": nranks, "facts": facts,
                                    **{v: bl.stats(t) | {"raw": t} for v, t in times.items()}})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
