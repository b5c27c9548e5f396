#!/usr/bin/env python3
"""Reading the rank texts of a `--per-rank all` profile from ranks.tsv (format 2.10) against
the same texts as ranks/ files: `load_profile`'s CPU time (user + system: on a loaded machine
the wall time varies by 2x from run to run) and peak memory, each in a fresh process,
on a synthetic profile (bench/synth_profile.py --rank-files) whose rank files are then packed
into ranks.tsv as the runtime writes it (docs/format.md, "ranks.tsv").

    bench/ranks_tsv_read.py WORKDIR --ranks 1024 --paths 500 [--repeats 3]
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import synth_profile  # noqa: E402

MEASURE = """
import json, resource, sys, time
sys.path.insert(0, {python!r})
from pathscope.reader import load_profile
def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime
started = cpu()
p = load_profile({directory!r})
took = cpu() - started
assert not p.problems(), p.problems()
print(json.dumps({{"s": took, "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "ranks": len(p.callpaths)}}))
"""


def pack(files: Path, packed: Path) -> int:
    """A copy of the profile at files with its rank files as ranks.tsv; its size."""
    shutil.copytree(files, packed)
    names = sorted((packed / "ranks").glob("rank-*.tsv"))
    texts = [p.read_bytes() for p in names]
    run = next(line for line in (packed / "tree.tsv").read_text().splitlines()
               if line.startswith("run\t")).split("\t")[1]
    head = [f"pathscope-ranks\t2.10", f"run\t{run}", f"ranks\t{len(texts)}"]
    offset = 0
    for rank, text in enumerate(texts):
        head.append(f"index\t{rank}\t{offset}\t{len(text)}")
        offset += len(text)
    with open(packed / "ranks.tsv", "wb") as out:
        out.write(("\n".join(head) + "\ndata\n").encode())
        for text in texts:
            out.write(text)
    for p in names:
        p.unlink()
    return (packed / "ranks.tsv").stat().st_size


def measure(directory: Path) -> dict:
    code = MEASURE.format(python=str(HERE.parent / "python"), directory=str(directory))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("work", type=Path)
    parser.add_argument("--ranks", type=int, default=1024)
    parser.add_argument("--paths", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    files, packed = args.work / "files", args.work / "packed"
    shutil.rmtree(args.work, ignore_errors=True)
    synth_profile.write_dir(files, args.ranks, args.paths, rank_files=True)
    size = pack(files, packed)
    results = {}
    for name, directory in (("ranks/ files", files), ("ranks.tsv", packed)):
        runs = [measure(directory) for _ in range(args.repeats)]
        assert all(r["ranks"] == args.ranks for r in runs)
        results[name] = (statistics.median(r["s"] for r in runs),
                         statistics.median(r["rss_mib"] for r in runs))
    print(f"{args.ranks} ranks x {args.paths} paths, ranks.tsv {size / 1e6:.1f} MB")
    for name, (s, rss) in results.items():
        print(f"  {name:<13} load_profile {s:6.2f} s CPU  peak RSS {rss:6.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
