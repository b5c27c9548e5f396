"""Heap profiling (issue 4): every allocation on its call path, checked against programs that
know what they allocate (tests/programs/heap_*.c, heap_cxx.cpp, fortran_heap.f90).

Counts, bytes, frees, leaks and live bytes at the peak are exact; the programs print `truth`
lines (a path -- a regular expression over the folded path, or its last frames -- and the
numbers) and the tests compare the folded exports with them."""
import csv
import io
import json
import os
import re
import shutil
import subprocess

import pytest

from test_paths import PATHSCOPE, PY_ENV, cli, folded, rank_records
from test_paths import env_run as paths_env_run


def run_heap(prog, out, *args, extra=(), env=None, check=True):
    p = subprocess.run(PATHSCOPE + ["run", "--heap", *extra, "-o", str(out), "--", str(prog),
                                    *map(str, args)],
                       capture_output=True, text=True, env=dict(PY_ENV, **(env or {})),
                       timeout=120)
    if check:
        assert p.returncode == 0, p.stderr
    return p


def truth_lines(stdout):
    """`truth path=P a b c ...` -> [(P, [a, b, ...])]"""
    out = []
    for line in stdout.splitlines():
        if line.startswith("truth path="):
            fields = line.split()
            out.append((fields[1][len("path="):], [int(v) for v in fields[2:]]))
    return out


def path_value(lines, path):
    """The value of the one folded path ending in path (';'-separated frames) or matching the
    regular expression path (when it starts with ';')."""
    rx = re.compile(path if path.startswith(";") else r";" + re.escape(path) + r"$")
    hits = [v for p, v in lines.items() if rx.search(p)]
    assert len(hits) <= 1, f"{path}: {len(hits)} paths"
    return hits[0] if hits else 0


METRICS = ("alloc_count", "alloc_bytes", "free_count", "leaked_bytes", "peak_bytes")


def heap_metrics(out, rank=None):
    return {m: folded(out, m, rank=rank) for m in METRICS}


def heap_line(out, rank=0):
    (line,) = [r for r in rank_records(out, rank) if r[0] == "heap"]
    names = ["mode", "allocs", "alloc_bytes", "frees", "freed_bytes", "peak", "peak_ns", "live",
             "untracked_allocs", "untracked_frees", "foreign_frees"]
    heap = {k: (v if k == "mode" else int(v)) for k, v in zip(names, line[1:])}
    assert heap["live"] == heap["alloc_bytes"] - heap["freed_bytes"], heap  # (docs/format.md)
    return heap


def walks_lines(out, rank=0):
    return [[int(v) for v in r[2:]] for r in rank_records(out, rank) if r[0] == "walks"]


@pytest.mark.parametrize("arg", ["", "fork"])
def test_truth_exact(openmpi, tmp_path, arg):
    """Counts, bytes, frees, leaks and live bytes at the peak per path, through malloc, calloc,
    realloc, posix_memalign, aligned_alloc, memalign, valloc and pvalloc; a forked child's
    allocations do not count."""
    out = tmp_path / "prof"
    p = run_heap(openmpi.prog("heap_truth"), out, *([arg] if arg else []))
    metrics = heap_metrics(out)
    truths = truth_lines(p.stdout)
    assert len(truths) == 11
    for path, (allocs, nbytes, frees, freed, peak) in truths:
        got = [path_value(metrics[m], path) for m in METRICS]
        assert got == [allocs, nbytes, frees, nbytes - freed, peak], path
    assert not any("forked_child" in path for path in metrics["alloc_count"])
    peak = int(re.search(r"truth peak=(\d+)", p.stdout).group(1))
    heap = heap_line(out)
    assert heap["peak"] == peak  # the 8 MiB block and what was live with it, nothing else
    assert heap["mode"] == "reuse" and heap["foreign_frees"] == 0
    # the totals are the sums over the paths
    assert heap["allocs"] == sum(metrics["alloc_count"].values())
    assert heap["live"] == sum(metrics["leaked_bytes"].values())
    for walks, reused, checks, agree, thunk_errors, restores in walks_lines(out):
        assert checks == agree and thunk_errors == 0


def test_threads_and_cross_thread_frees(openmpi, tmp_path):
    """Blocks freed by another thread are charged to the path (and thread) that allocated
    them; a thread leaving with pthread_exit keeps its leak."""
    out = tmp_path / "prof"
    p = run_heap(openmpi.prog("heap_threads"), out)
    metrics = heap_metrics(out)
    for path, (allocs, nbytes, frees, freed) in truth_lines(p.stdout):
        got = [path_value(metrics[m], path) for m in METRICS[:4]]
        assert got == [allocs, nbytes, frees, nbytes - freed], path
    worker = folded(out, "free_count", thread=1)
    assert path_value(worker, "worker;worker_alloc;malloc") == 100


def test_cxx_new_and_delete(openmpi, tmp_path):
    out = tmp_path / "prof"
    p = run_heap(openmpi.prog("heap_cxx"), out)
    metrics = heap_metrics(out)
    truths = truth_lines(p.stdout)
    assert len(truths) == 3
    for path, (allocs, nbytes) in truths:
        assert [path_value(metrics["alloc_count"], path),
                path_value(metrics["alloc_bytes"], path)] == [allocs, nbytes], path


def test_fortran_allocate(openmpi, tmp_path):
    prog = openmpi.prog("fortran_heap")
    if not prog.exists():
        pytest.skip("Fortran test programs not built (no mpifort)")
    out = tmp_path / "prof"
    run_heap(prog, out)
    counts = folded(out, "alloc_count")
    assert path_value(counts, "MAIN__;heap_mod::heap_work;malloc") == 10
    assert path_value(folded(out, "alloc_bytes"), "MAIN__;heap_mod::heap_work;malloc") == 80000


def test_mpi_program_until_exit(mpi, tmp_path):
    """The MPI library's allocations land below MPI_Init; recording goes on after
    MPI_Finalize until exit: a block freed after MPI_Finalize is no leak, one allocated then
    and never freed is."""
    out = tmp_path / "prof"
    p = mpi.run(2, [mpi.prog("heap_mpi")], outdir=out, pathscope_args=["--heap"])
    assert p.stdout.count("truth rank=") == 2
    for rank in (0, 1):
        m = heap_metrics(out, rank=rank)
        assert path_value(m["alloc_count"], "main;keep_across_finalize;malloc") == 1
        assert path_value(m["leaked_bytes"], "main;keep_across_finalize;malloc") == 0
        assert path_value(m["leaked_bytes"], "main;leak_after_finalize;malloc") == 777
        assert path_value(m["alloc_count"], "main;per_rank;calloc") == rank + 1
        below_init = sum(v for path, v in m["alloc_count"].items() if ";MPI_Init;" in path)
        assert below_init > 100
        for walks, reused, checks, agree, thunk_errors, restores in walks_lines(out, rank):
            assert checks == agree
    report = cli("report", out).stdout
    assert "Heap (allocations by call path on 2 ranks; stack walks: reuse)" in report


def test_report_and_exports(openmpi, tmp_path):
    out = tmp_path / "prof"
    p = run_heap(openmpi.prog("heap_truth"), out)
    report = cli("report", out).stdout
    heap = report.split("\nHeap (", 1)[1]
    for title in ("Top allocating paths", "Live at the peak", "Live at the end (leaks)",
                  "Live heap over time", "allocations/s"):
        assert title in heap, title
    top = heap.split("Top allocating paths", 1)[1].splitlines()[2]
    assert top.split()[:2] == ["8.00", "MiB"] and top.endswith("main > big_peak > malloc")
    leaks = heap.split("Live at the end (leaks)", 1)[1].splitlines()
    assert any(line.endswith("main > leak_e > malloc") and " 7  " in line for line in leaks)
    assert "\nStack walks\n  mode reuse: " in report
    # tables for plots
    ranks = list(csv.DictReader(io.StringIO(cli("export", out, "--table", "heap-ranks").stdout)))
    truth_peak = int(re.search(r"truth peak=(\d+)", p.stdout).group(1))
    assert [(r["rank"], int(r["peak_bytes"])) for r in ranks] == [("0", truth_peak)]
    points = json.loads(cli("export", out, "--format", "json", "--table", "heap-timeline").stdout)
    assert isinstance(points, (list, dict))
    # speedscope: the allocated bytes of every path
    doc = json.loads(cli("export", out, "--format", "speedscope", "--metric", "alloc_bytes").stdout)
    profile = doc["profiles"][0]
    assert profile["unit"] == "bytes"
    assert sum(profile["weights"]) == heap_line(out)["alloc_bytes"]


def test_traversal_modes_agree_exactly(openmpi, tmp_path):
    """full, reuse and thunk give the same paths and counts; every checked walk agrees."""
    results = {}
    for mode in ("full", "reuse", "thunk"):
        out = tmp_path / mode
        run_heap(openmpi.prog("heap_truth"), out, extra=["--traversal", mode, "--traversal-check", "7"])
        results[mode] = folded(out, "alloc_bytes")
        assert heap_line(out)["mode"] == mode
        for walks, reused, checks, agree, thunk_errors, restores in walks_lines(out):
            assert checks == agree and checks >= walks // 7 and thunk_errors == 0
    app = {m: {p: v for p, v in r.items() if ";main;" in p and "_IO_" not in p}
           for m, r in results.items()}
    assert app["full"] == app["reuse"] == app["thunk"]


def test_frees_from_a_thread_pathscope_never_saw(openmpi, tmp_path):
    """A SIGEV_THREAD timer's thread (started inside glibc) frees while the main thread
    allocates: every update counts (heap_line checks live = allocated - freed)."""
    out = tmp_path / "prof"
    p = run_heap(openmpi.prog("heap_timer"), out)
    (made,) = [int(line.split()[1]) for line in p.stdout.splitlines() if line.startswith("allocs ")]
    heap = heap_line(out)
    # glibc's timer machinery may allocate a few blocks of its own beside the program's.
    assert made <= heap["allocs"] <= made + 16 and heap["foreign_frees"] == 0


# ---- errors ----------------------------------------------------------------------------------

def env_run(openmpi, preload, env, tmp_path):
    return paths_env_run([openmpi.prog("heap_cxx")], preload, env, tmp_path / "prof")


def test_env_form_needs_the_shim(openmpi, tmp_path):
    p = env_run(openmpi, str(openmpi.lib), {"PATHSCOPE_HEAP": "on"}, tmp_path)
    assert (p.returncode, p.stdout, p.stderr) == (
        2, "", "pathscope: PATHSCOPE_HEAP=on needs libpathscope-heap.so in LD_PRELOAD next to "
               "libpathscope.so (pathscope run --heap sets both)\n")


def test_shim_without_heap_option(openmpi, tmp_path):
    shim = openmpi.build / "libpathscope-heap.so"
    p = env_run(openmpi, f"{shim}:{openmpi.lib}", {}, tmp_path)
    assert (p.returncode, p.stdout, p.stderr) == (
        2, "", "pathscope: libpathscope-heap.so is preloaded but PATHSCOPE_HEAP is not on: set "
               "PATHSCOPE_HEAP=on or remove it from LD_PRELOAD\n")


def test_shim_without_runtime_passes_through(openmpi, tmp_path):
    shim = openmpi.build / "libpathscope-heap.so"
    p = env_run(openmpi, str(shim), {}, tmp_path)
    assert p.returncode == 0
    assert p.stderr == ("pathscope: libpathscope-heap.so needs libpathscope.so in LD_PRELOAD: "
                        "heap profiling is off\n")
    assert p.stdout.count("truth path=") == 3
    assert not (tmp_path / "prof").exists()


def test_heap_needs_call_paths(openmpi, tmp_path):
    p = run_heap(openmpi.prog("heap_cxx"), tmp_path / "prof", extra=["--no-paths"], check=False)
    assert (p.returncode, p.stdout, p.stderr) == (
        2, "", "pathscope: PATHSCOPE_HEAP=on needs call paths: PATHSCOPE_PATHS=off cannot be "
               "combined with it\n")


def test_cli_error_without_shim(openmpi, tmp_path):
    """A runtime library given with PATHSCOPE_LIB whose directory has no shim."""
    lib_dir = tmp_path / "lib"
    lib_dir.mkdir()
    shutil.copy(openmpi.lib, lib_dir / "libpathscope.so")
    p = run_heap(openmpi.prog("heap_cxx"), tmp_path / "prof", check=False,
                 env={"PATHSCOPE_LIB": str(lib_dir / "libpathscope.so")})
    assert (p.returncode, p.stdout) == (2, "")
    assert p.stderr == (f"pathscope: heap profiling needs {lib_dir}/libpathscope-heap.so next to "
                        f"libpathscope.so; build it with: make build\n")
