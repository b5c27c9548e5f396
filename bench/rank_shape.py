#!/usr/bin/env python3
"""Rank-file shape, to diff before and after a runtime change that must not move the format:
runs a few test programs (tests/programs, built in BUILD_DIR) through their endings (complete,
abort, signal, exit without MPI_Finalize, before MPI_Init, a peer's request, heap rewrite at
exit, kernel tables) and prints each rank file's sequence of (line type, number of fields),
consecutive repeats collapsed, so the number of nodes or threads does not matter.

  bench/rank_shape.py build/openmpi /tmp/shape [RUN ...] > before.txt   (then after.txt; diff)"""
import os, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT / "tests"))
from profile_files import rank_texts  # noqa: E402  (ranks/ files, or ranks.tsv's sections)
build = Path(sys.argv[1]).resolve()
work = Path(sys.argv[2]).resolve()
mpi = build.name
L = {"openmpi": ["mpirun.openmpi", "--allow-run-as-root", "--oversubscribe"],
     "mpich": ["mpirun.mpich"]}[mpi]
PS = [str(ROOT / "bin" / "pathscope"), "run"]
P = lambda n: str(build / n)
runs = [
    ("paths_mpi", L + ["-np", "2"] + PS + ["-o", "{o}", "--", P("paths_mpi"), "5"]),
    ("heap_mpi", L + ["-np", "2"] + PS + ["--heap", "-o", "{o}", "--", P("heap_mpi")]),
    ("kernel_mpi", L + ["-np", "2"] + PS + ["--kernel", "ebpf", "--kernel-period", "0", "-o", "{o}", "--", P("kernel_mpi"), "200"]),
    ("kernel_abort", L + ["-np", "2"] + PS + ["--kernel", "ebpf", "-o", "{o}", "--", P("kernel_mpi"), "100", "abort"]),
    ("threads", PS + ["-o", "{o}", "--", P("paths_threads")]),
    ("heap_threads", PS + ["--heap", "-o", "{o}", "--", P("heap_threads")]),
    ("lc_normal", L + ["-np", "2"] + PS + ["-o", "{o}", "--", P("lifecycle"), "normal"]),
    ("lc_abort", L + ["-np", "3"] + PS + ["-o", "{o}", "--", P("lifecycle"), "abort"]),
    ("lc_segv", L + ["-np", "3"] + PS + ["-o", "{o}", "--", P("lifecycle"), "segv"]),
    ("lc_nofinalize", L + ["-np", "2"] + PS + ["-o", "{o}", "--", P("lifecycle"), "nofinalize"]),
    ("lc_preinit", L + ["-np", "2"] + PS + ["-o", "{o}", "--", P("lifecycle"), "preinit"]),
]
only = sys.argv[3:]
for name, cmd in runs:
    if only and name not in only: continue
    out = work / name
    subprocess.run(["rm", "-rf", str(out)])
    cmd = [c.replace("{o}", str(out)) for c in cmd]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=180,
                       env=dict(os.environ, OMPI_MCA_rmaps_base_oversubscribe="1"))
    print(f"== {name} rc={p.returncode}")
    for rank, text in rank_texts(out).items():
        seq = []
        for line in text.splitlines():
            fs = line.split("\t")
            key = fs[0]
            if key in ("status",):
                key += ":" + fs[1].split(" ")[0]
            item = (key, len(fs))
            if seq and seq[-1][0] == item: seq[-1][1] += 1
            else: seq.append([item, 1])
        print(f"-- rank-{rank:06d}.tsv")
        for (k, n), c in seq:
            print(f"   {k} {n}")
    for g in ["profile.tsv"]:
        if (out / g).exists():
            print(f"-- {g}: {len((out / g).read_text().splitlines())>0}")
