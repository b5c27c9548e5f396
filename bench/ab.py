#!/usr/bin/env python3
"""Two builds of pathscope on one command, interleaved with the unprofiled command.

    python3 bench/ab.py --before DIR --after DIR [--reps 5] [--options "--kernel ebpf"] \\
        [--cwd DIR] -- mpirun -np 4 hpcc

DIR is a checkout with a build (`make build`): its bin/pathscope runs the command as
`DIR/bin/pathscope run OPTIONS -o TMP -- COMMAND`.  Each repetition runs the command alone,
then under the 'before' build, then under the 'after' build (in that order; a second's pause
between runs), and the script prints the wall time of each run and the medians, with the
overheads against the unprofiled command.  For a change's cost on one application, when
bench/apps.py (one build, many applications) cannot compare two builds.

To compare with an earlier commit:  git worktree add /tmp/before COMMIT && (cd /tmp/before &&
ln -s "$PWD/.venv" .venv && make build)  (the worktree needs the project's .venv and .deps).
"""
import argparse
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True, type=Path, help="checkout with a build")
    ap.add_argument("--after", required=True, type=Path, help="checkout with a build")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--options", default="", help="pathscope run options, one string")
    ap.add_argument("--cwd", type=Path, default=Path.cwd(), help="where the command runs")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        ap.error("the command to run goes after --")
    for tree in (args.before, args.after):
        if not (tree / "bin" / "pathscope").exists():
            ap.error(f"{tree}/bin/pathscope not found: build that checkout first (make build)")
    times: dict[str, list[float]] = {"base": [], "before": [], "after": []}
    with tempfile.TemporaryDirectory(prefix="pathscope-ab-") as tmp:
        for rep in range(1, args.reps + 1):
            for variant, tree in (("base", None), ("before", args.before), ("after", args.after)):
                out = Path(tmp) / variant
                shutil.rmtree(out, ignore_errors=True)
                cmd = list(command) if tree is None else (
                    [str(tree / "bin" / "pathscope"), "run", *shlex.split(args.options),
                     "-o", str(out), "--", *command])
                start = time.monotonic()
                p = subprocess.run(cmd, cwd=args.cwd, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, text=True)
                took = time.monotonic() - start
                if p.returncode != 0:
                    print(f"ab: {variant} failed (exit {p.returncode}): {p.stderr[-500:]}",
                          file=sys.stderr)
                    return 1
                times[variant].append(took)
                print(f"ab: repetition {rep}/{args.reps}: {variant} {took:.2f} s", file=sys.stderr)
                time.sleep(1)
    base = statistics.median(times["base"])
    print(f"wall time, median of {args.reps} interleaved runs (min..max); overhead against base")
    print("| variant | wall s | overhead |\n|---|---|---|")
    for variant, values in times.items():
        median = statistics.median(values)
        overhead = "-" if variant == "base" else f"{(median / base - 1) * 100:+.1f}%"
        print(f"| {variant} | {median:.2f} ({min(values):.2f}..{max(values):.2f}) | {overhead} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
