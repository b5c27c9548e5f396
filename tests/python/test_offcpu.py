"""Format 2.4 (issue 11): the node line's offcpu_ns and the thread line's cpu_ns, read and
checked; the oncpu_time and offcpu_time metrics in the exports and the merged tree; the
report's on/off-CPU rows, off-CPU columns, its one-line off-CPU warning and the uncertainty
marks of times that rest on few samples.

The profile is written by hand: two ranks, one thread each (times in ms):

    rank 0: elapsed 1000 = main;compute 850 (85 samples, off CPU: OFF0)
                         + main;wait_io 40 (4 samples, off CPU 30)
                         + main;MPI_Barrier 100 (measured) + [not unwound] 10
    rank 1: elapsed 1000 = main;compute 790 (79 samples, off CPU: OFF1)
                         + main;MPI_Barrier 200 + [not unwound] 10

Outside MPI: 900 + 800 = 1700 ms; off CPU: 30 + OFF0 + OFF1.
"""
import io

import pytest

from pathscope.calltree import INCL_OFFCPU, OFFCPU_NS, SAMPLE_NS, build_tree
from pathscope.cli import main
from pathscope.export import export_call_paths
from pathscope.export.tables import build_table
from pathscope.reader import load_profile
from pathscope.report import render
from pathscope.report.calltree import UNCERTAINTY_NOTE
from pathscope.symbolize import resolve_symbols
from pathscope_samples import (HYBRID, rank_rows, read_rows, split_rows, with_run,
                               write_profile, write_rows)

RUN = "0123456789abcdef0123456789abcdef"
MS = 1_000_000
WARNING_11 = ("  WARNING: 11.0% of the time outside MPI was off the CPU (run queue or blocked): "
              "run no more ranks and threads than cores, pin them (mpirun --bind-to core), look "
              "for other load on the nodes; for time blocked in I/O, pathscope run --kernel "
              "places it exactly and shows the system calls")
SYMBOLS = ("pathscope-symbols\t2.0\nmodule\t0\t/opt/app/bin/app\t-\tok\n"
           "frame\t0\t0x401010\tcall\t0\tmain\t/src/app.c\t10\n"
           "frame\t0\t0x401100\tfn\t0\tcompute\t/src/app.c\t20\n"
           "frame\t0\t0x401200\tfn\t0\twait_io\t/src/app.c\t30\nend\n")


def node(index, parent, kind, address, sample_ms=0, samples=0, mpi_ms=0, visits=0,
         offcpu_ms=None):
    """A `node` line of thread 0; offcpu_ms None: without the 14th field (format 2.3)."""
    module = 0 if kind in ("call", "fn") else "-"
    row = ("node", 0, index, "-" if parent is None else parent, kind, module, address, visits,
           sample_ms * MS, samples, mpi_ms * MS, 0, 0, 0)
    return row + ((offcpu_ms * MS,) if offcpu_ms is not None else ())


def rank_file(rank, compute_ms, compute_samples, barrier_ms, off_compute_ms, with_wait,
              version="2.4", sampler_extra=()):
    off = (lambda ms: ms) if version >= "2.4" else (lambda ms: None)
    nodes = [node(0, None, "root", "-", offcpu_ms=off(0)),
             node(1, 0, "call", "0x401010", offcpu_ms=off(0)),
             node(2, 1, "fn", "0x401100", compute_ms, compute_samples,
                  offcpu_ms=off(off_compute_ms))]
    if with_wait:
        nodes.append(node(3, 1, "fn", "0x401200", 40, 4, offcpu_ms=off(30)))
    nodes.append(node(len(nodes), 1, "mpi", "MPI_Barrier", mpi_ms=barrier_ms, visits=1,
                      offcpu_ms=off(0)))
    nodes.append(node(len(nodes), 0, "not_unwound", "-", 10, 0, offcpu_ms=off(0)))
    kept = compute_samples + (4 if with_wait else 0)
    thread = ("thread", 0, 4100 + rank, 1000 * MS, kept, 10, 0, 0, len(nodes), "-", "-", 0)
    if version >= "2.4":
        thread += ((compute_ms - off_compute_ms + (10 if with_wait else 0)) * MS,)
    extra = [("sampler", "posix-cpu-timer", 100, "cpu") + tuple(sampler_extra), ("unwind", "coll", "path"),
             ("module", 0, "/opt/app/bin/app", "-"), thread] + nodes
    rows = rank_rows(rank, 2, "complete", f"node{rank}", 1010 * MS, barrier_ms * MS,
                     comms=[("W", 2, 0, rank, "-", "-", 0, "0-1", "-", 0, 0, 0, 0)],
                     ops=[("W", "MPI_Barrier", 1, 0, barrier_ms * MS, "-")],
                     extra=extra, program="app")
    return with_run(rows, RUN, version)


def write_run(directory, off0=100, off1=57, version="2.4", sampler_extra=()):
    """The two-rank profile; off0, off1: ms off the CPU in compute on ranks 0 and 1;
    sampler_extra: fields after the sampler line's first three."""
    d = write_profile(directory, None, {
        0: rank_file(0, 850, 85, 100, off0, True, version, sampler_extra),
        1: rank_file(1, 790, 79, 200, off1, False, version, sampler_extra)})
    (d / "symbols.tsv").write_text(SYMBOLS)
    return d


def folded(profile, metric):
    out = io.StringIO()
    export_call_paths(profile, "folded", out, resolve_symbols(profile), metric)
    return out.getvalue()


def section(text, heading):
    return (heading + text.split(f"\n\n{heading}")[1].split("\n\n")[0]).splitlines()


# ---- reader -------------------------------------------------------------------------------

def test_fields_read(tmp_path):
    p = load_profile(write_run(tmp_path / "prof"))
    assert p.incomplete_ranks == [] and p.meta["format_version"] == "2.4"
    paths = p.callpaths[0]
    assert paths.knows_offcpu()
    thread = paths.threads[0]
    assert thread.cpu_ns == 760 * MS
    assert [(n.sample_ns, n.offcpu_ns, n.oncpu_ns) for n in thread.nodes[2:4]] == [
        (850 * MS, 100 * MS, 750 * MS), (40 * MS, 30 * MS, 10 * MS)]
    assert thread.time_balance_ns() == 0


def test_older_files_have_neither_field(tmp_path):
    p = load_profile(write_run(tmp_path / "prof", version="2.3"))
    assert p.incomplete_ranks == []
    assert not p.callpaths[0].knows_offcpu()
    thread = p.callpaths[0].threads[0]
    assert thread.cpu_ns == 0
    assert [n.offcpu_ns for n in thread.nodes] == [0] * 6


def test_offcpu_larger_than_sampled_time_makes_the_rank_unreadable(tmp_path):
    d = write_run(tmp_path / "prof")
    path = d / "ranks" / "rank-000001.tsv"
    rows = read_rows(path)
    line = next(i for i, r in enumerate(rows) if r[:4] == ["node", "0", "2", "1"])
    rows[line][14] = str(790 * MS + 1)
    write_rows(path, rows)
    p = load_profile(d)
    problem = (f"{path}:{line + 1}: 'node' line: field 15 '790000001' (offcpu_ns) is larger "
               f"than sample_ns (field 9, 790000000)")
    assert p.incomplete_ranks == [(1, "unreadable: " + problem)]
    assert sorted(p.callpaths) == [0]
    assert f"    rank 1: unreadable, left out: {problem}" in render(p).splitlines()


# ---- metrics ------------------------------------------------------------------------------

def test_folded_oncpu_and_offcpu_time(tmp_path):
    p = load_profile(write_run(tmp_path / "prof"))
    assert folded(p, "oncpu_time") == ("[not unwound] 20000\n"
                                       "main;compute 1483000\n"       # 750 + 733 ms
                                       "main;wait_io 10000\n")
    assert folded(p, "offcpu_time") == ("main;compute 157000\n"       # 100 + 57 ms
                                        "main;wait_io 30000\n")
    # time = on CPU + off CPU + MPI on every stack
    parts = [dict(line.rsplit(" ", 1) for line in folded(p, m).splitlines())
             for m in ("oncpu_time", "offcpu_time", "mpi_time")]
    total = {}
    for part in parts:
        for stack, value in part.items():
            total[stack] = total.get(stack, 0) + int(value)
    assert total == {k: int(v) for k, v in
                     (line.rsplit(" ", 1) for line in folded(p, "time").splitlines())}


def test_speedscope_offcpu_time(tmp_path, capsys):
    d = write_run(tmp_path / "prof")
    assert main(["export", str(d), "--format", "speedscope", "--metric", "offcpu_time"]) == 0
    import json
    prof = json.loads(capsys.readouterr().out)["profiles"][0]
    assert (prof["name"], prof["unit"], prof["endValue"]) == (
        "app: offcpu_time (all ranks, all threads)", "microseconds", 187000)


def test_merged_tree_per_rank(tmp_path):
    profile = load_profile(write_run(tmp_path / "prof"))
    tree = build_tree(profile)
    compute = next(n for n in tree.root.walk() if n.frame.kind == "fn" and
                   n.by_rank.get(1))
    assert {r: v[OFFCPU_NS] for r, v in compute.by_rank.items()} == {0: 100 * MS, 1: 57 * MS}
    assert {r: v[SAMPLE_NS] for r, v in compute.by_rank.items()} == {0: 850 * MS, 1: 790 * MS}
    stats = tree.stat(tree.root, INCL_OFFCPU)
    assert (stats.total, stats.min, stats.min_rank, stats.max, stats.max_rank) == (
        187 * MS, 57 * MS, 1, 130 * MS, 0)
    split = split_rows(profile, tree)
    offcpu, oncpu = split["execution_offcpu"], split["execution_oncpu"]
    assert (offcpu.max, offcpu.max_rank, offcpu.min, offcpu.min_rank) == (130 * MS, 0, 57 * MS, 1)
    assert (oncpu.max, oncpu.max_rank, oncpu.min, oncpu.min_rank) == (760 * MS, 0, 733 * MS, 1)
    # the off-CPU share of the time outside MPI (the report's warning)
    assert split["offcpu"].sum / (split["time"].sum - split["mpi"].sum) == 187 / 1700


@pytest.mark.parametrize("metric", ["oncpu_time", "offcpu_time"])
def test_older_profiles_refuse_the_split_metrics(tmp_path, capsys, metric):
    for d, version in ((HYBRID, "2.0"), (write_run(tmp_path / "prof", version="2.3"), "2.3")):
        assert main(["export", str(d), "--format", "folded", "--metric", metric]) == 2
        assert capsys.readouterr() == ("", f"pathscope: metric {metric} needs profile format "
                                           f"2.4 or later: this profile (format {version}) "
                                           f"does not split sampled time into on-CPU and "
                                           f"off-CPU time\n")


def test_threads_table(tmp_path, capsys):
    d = write_run(tmp_path / "prof")
    assert main(["export", str(d), "--table", "threads"]) == 0
    assert capsys.readouterr().out == (
        "rank,thread,tid,mpi_runtime,elapsed_s,mpi_s,sampled_s,oncpu_s,offcpu_s,cpu_s,samples\n"
        "0,0,4100,0,1,0.1,0.9,0.77,0.13,0.76,89\n"
        "1,0,4101,0,1,0.2,0.8,0.743,0.057,0.733,79\n")
    old = load_profile(write_run(tmp_path / "old", version="2.3"))
    assert [(r["oncpu_s"], r["offcpu_s"], r["cpu_s"]) for r in
            build_table(old, "threads").rows] == [(None, None, None)] * 2


# ---- report -------------------------------------------------------------------------------

def test_time_split_rows(tmp_path):
    lines = section(render(load_profile(write_run(tmp_path / "prof"))), "Time split")
    assert lines[:10] == [
        "Time split (call paths of 2 threads on 2 ranks; per rank: min, mean, max)",
        "                                                    time       %   min (rank)     mean"
        "   max (rank)",
        "  Time                                            2.00 s  100.0%   1.00 s (0)   1.00 s"
        "   1.00 s (0)",
        "    Failed unwind                                   0 ns    0.0%     0 ns (0)     0 ns"
        "     0 ns (0)",
        "    Not unwound                                  20.0 ms    1.0%  10.0 ms (0)  10.0 ms"
        "  10.0 ms (0)",
        "    Execution                                     1.98 s   99.0%   990 ms (0)   990 ms"
        "   990 ms (0)",
        "      MPI                                         300 ms   15.0%   100 ms (0)   150 ms"
        "   200 ms (1)",
        "      outside MPI, on CPU                         1.49 s   74.7%   733 ms (1)   746 ms"
        "   760 ms (0)",
        "      outside MPI, off CPU (run queue, blocked)   187 ms    9.3%  57.0 ms (1)  93.5 ms"
        "   130 ms (0)",
        "  sampler    posix-cpu-timer, 100 Hz, cpu clock"]


@pytest.mark.parametrize("off1, shown", [(57, True), (40, False), (23, False)])
def test_offcpu_warning_above_ten_percent(tmp_path, off1, shown):
    """Off CPU: 30 + 100 + off1 ms of 1700 ms outside MPI: 11%, exactly 10%, 9%."""
    lines = section(render(load_profile(write_run(tmp_path / "prof", off1=off1))),
                    "Time split")
    warnings = [line for line in lines if "off the CPU" in line]
    assert warnings == ([WARNING_11] if shown else [])
    if shown:
        assert lines[-2:] == [WARNING_11, "  per rank: over the 2 ranks with call paths; a rank "
                                          "without a value counts as 0; (rank) is the lowest "
                                          "on ties"]


def test_no_offcpu_rows_or_warning_before_format_2_4(tmp_path):
    text = render(load_profile(write_run(tmp_path / "prof", off0=500, version="2.3")))
    assert "off CPU" not in text and "outside MPI" not in text


def test_call_tree_and_hot_path_show_offcpu_and_uncertainty(tmp_path):
    text = render(load_profile(write_run(tmp_path / "prof")))
    tree = section(text, "Call tree")
    assert tree == [
        "Call tree (inclusive time, top-down; nodes with at least 1% of the total time)",
        f"  {UNCERTAINTY_NOTE}",
        "     time     ±       %     self     MPI  off CPU  visits  bytes   min (rank)     mean"
        "   max (rank)  call path",
        "   2.00 s        100.0%        -  300 ms   187 ms                  1.00 s (0)   1.00 s"
        "   1.00 s (0)  [all threads]",
        "   1.98 s         99.0%        -  300 ms   187 ms                  990 ms (0)   990 ms"
        "   990 ms (0)    main (app.c:10)",
        "   1.64 s         82.0%   1.64 s       -   157 ms                  790 ms (1)   820 ms"
        "   850 ms (0)      compute (app.c:20)",
        "   300 ms         15.0%   300 ms  300 ms        -       2    0 B   100 ms (0)   150 ms"
        "   200 ms (1)      MPI_Barrier",
        "  40.0 ms  ±50%    2.0%  40.0 ms       -  30.0 ms                    0 ns (1)  20.0 ms"
        "  40.0 ms (0)      wait_io (app.c:30)",
        "  20.0 ms          1.0%  20.0 ms       -        -                 10.0 ms (0)  10.0 ms"
        "  10.0 ms (0)    [not unwound]",
        "  0 nodes below 1% of the total time hidden (pathscope export --format folded shows "
        "every path)"]
    assert UNCERTAINTY_NOTE == (
        "±N%: the approximate relative standard error of a time that rests on fewer than 100 "
        "samples (sampled time varies by about 1/sqrt(samples); measured MPI time does not)")
    assert text.count("±N%") == 1
    hot = section(text, "Hot path")
    assert hot[1:] == [
        "    time  ±       %  off CPU  min (rank)    mean  max (rank)  max/mean  frame",
        "  2.00 s     100.0%   187 ms  1.00 s (0)  1.00 s  1.00 s (0)      1.00  [all threads]",
        "  1.98 s      99.0%   187 ms  990 ms (0)  990 ms  990 ms (0)      1.00  main (app.c:10)",
        "  1.64 s      82.0%   157 ms  790 ms (1)  820 ms  850 ms (0)      1.04  compute "
        "(app.c:20)"]


def test_uncertainty_only_on_the_sampled_part(tmp_path):
    """A node whose time is mostly measured MPI time: the mark is the sampled part's error
    scaled by its share (4 samples of 40 ms beside 360 ms of MPI: 50% of 10% = ±5%); with 100
    samples or more, none."""
    from pathscope.calltree import MergedNode
    from pathscope.report.calltree import uncertainty
    from pathscope.symbols import ROOT_FRAME
    node = MergedNode(ROOT_FRAME, None)
    node.incl_time, node.incl_mpi, node.incl_samples = {0: 400 * MS}, {0: 360 * MS}, 4
    assert uncertainty(node) == "±5%"
    node.incl_mpi = {0: 0}
    assert uncertainty(node) == "±50%"
    node.incl_samples = 99
    assert uncertainty(node) == "±10%"
    node.incl_samples = 100
    assert uncertainty(node) == ""
    node.incl_samples = 0          # time without samples (after a thread's last sample)
    assert uncertainty(node) == ""


# ---- format 2.5: off-CPU time from the scheduler (--kernel) ---------------------------------

SCHEDULER = (0, 250, 0, 0, "scheduler", 37, 5)   # timer counts, then the off-CPU fields


def test_scheduler_fields_read_and_reported(tmp_path):
    p = load_profile(write_run(tmp_path / "prof", version="2.5", sampler_extra=SCHEDULER))
    sampler = p.callpaths[1].sampler
    assert (sampler.offcpu_from, sampler.offcpu_reports, sampler.offcpu_in_mpi) == ("scheduler", 37, 5)
    lines = section(render(p), "Time split")
    assert ("  off CPU    from the scheduler (--kernel) on 2 of 2 ranks: 74 reports placed where "
            "the thread stopped, 10 inside MPI (its time is measured)") in lines
    (warning,) = [line for line in lines if "off the CPU" in line]
    assert warning == WARNING_11.replace(
        "pathscope run --kernel places it exactly and shows the system calls",
        "the Kernel time section splits it into blocked and run queue per thread")


def test_sampler_line_without_offcpu_fields_means_samples(tmp_path):
    p = load_profile(write_run(tmp_path / "prof", sampler_extra=SCHEDULER[:4]))
    sampler = p.callpaths[0].sampler
    assert (sampler.by_posix, sampler.offcpu_from, sampler.offcpu_reports) == (250, "samples", 0)
    assert "from the scheduler" not in render(p)
