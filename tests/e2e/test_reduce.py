"""The call trees reduced inside the job (issue 14; docs/format.md "tree.tsv"): at MPI_Finalize
the ranks merge their trees over a binomial tree and rank 0 writes tree.tsv, whose size depends
on the distinct paths, not on the ranks.

The truth tree.tsv is held to is the rank files of the same run (--per-rank all, the default:
the reduced text is byte for byte what each rank wrote) merged by the analysis package's own
rank-file reader (pathscope.calltree.build_tree): every node, every column, every statistic
(sum, min and max with their ranks, ranks with a value, the power-of-two sketch) must be equal,
at 16, 64 and 128 ranks on both MPIs (oversubscribed: 2 cores here).  The oracle below parses
tree.tsv by itself, so that it does not share code with the reader of tree.tsv it could hide a
bug of.  tests/programs/reduce_known.c gives values known without the rank files too.
"""
import math
import os
import re
import subprocess
import time

import pytest

from conftest import ROOT
from pathscope.calltree import COLUMNS, build_tree
from pathscope.reader import load_profile
from pathscope.reduced import differences as reader_differences
from pathscope.symbols import Frame
from profile_files import check_rank_layout

INCLUSIVE = ("incl_time", "incl_mpi", "incl_offcpu")


def stats_text(values, nranks):
    """tree.tsv's statistics of {rank: value} (absent: 0) as format 2.14 writes them: `=V` when
    every rank has V; else SUM,MIN,MIN_RANK,MAX,MAX_RANK,NONZERO,BINS, NONZERO empty when every
    rank has a value, BINS the non-empty power-of-two bins below MAX's, `K:COUNT` or COUNT
    alone when K is one above the bin before (before the first: MIN's bin when MIN > 0)."""
    per_rank = [(values.get(r, 0), r) for r in range(nranks)]
    low = min(per_rank, key=lambda vr: (vr[0], vr[1]))
    high = max(per_rank, key=lambda vr: (vr[0], -vr[1]))
    if low[0] == high[0]:
        return f"={low[0]}"
    bins = {}
    for v, _ in per_rank:
        if v:
            bins[v.bit_length()] = bins.get(v.bit_length(), 0) + 1
    listed, before = [], (low[0].bit_length() - 1 if low[0] else None)
    for k in sorted(bins)[:-1]:
        listed.append(f"{bins[k]}" if before is not None and k == before + 1 else f"{k}:{bins[k]}")
        before = k
    nonzero = sum(1 for v, _ in per_rank if v)
    return (f"{sum(v for v, _ in per_rank)},{low[0]},{low[1]},{high[0]},{high[1]},"
            f"{'' if nonzero == nranks else nonzero},{';'.join(listed)}")


def stats_sum(text, nranks):
    return int(text[1:]) * nranks if text.startswith("=") else int(text.split(",")[0])


def expected_nodes(prof_dir):
    """{path of frames: {column: statistics}} of the application's threads, from the rank files;
    `[kernel: no call path]` is the reader's (computed from the ksys scalars), not a node."""
    tree = build_tree(load_profile(prof_dir), runtime_threads=False)
    nranks = len(tree.ranks)
    names = {column: name for name, column in COLUMNS.items()}
    out = {}

    def walk(node, path):
        cols = {}
        for column, name in names.items():
            values = {r: v[column] for r, v in node.by_rank.items() if v[column]}
            if values:
                cols[name] = stats_text(values, nranks)
        for name, values in zip(INCLUSIVE, (node.incl_time, node.incl_mpi, node.incl_offcpu)):
            if any(values.values()):
                cols[name] = stats_text(values, nranks)
        out[path] = cols
        for frame, child in node.children.items():
            if frame.kind != "kernel_unattributed":
                walk(child, path + (frame,))

    walk(tree.root, ())
    return out, tree


def read_tree(prof_dir):
    """tree.tsv parsed here: (head lines by type, {path: {column: statistics}} of the `app`
    root, {path: {comm: (calls, ns, bytes) sums}}, node lines)."""
    head, modules, nodes, comms, paths, lines = {}, {}, {}, {}, {}, []
    for line in (prof_dir / "tree.tsv").read_text().splitlines():
        f = line.split("\t")
        if f[0] == "module":
            modules[f[1]] = (f[2], "" if f[3] == "-" else f[3])
        elif f[0] == "node":
            lines.append(f)
            nid, parent, kind, mod, addr, name = f[1:7]
            cols = columns_of(f)
            base = () if parent == "-" else paths[parent]
            if parent == "-" and name != "app" or base is None:
                paths[nid] = None      # the runtime's threads: not in build_tree(runtime_threads=False)
                continue
            if kind == "pcomm":
                nranks = int(head["ranks"][0][0])
                comms.setdefault(base, {})[name] = tuple(
                    stats_sum(cols[c], nranks) if c in cols else 0
                    for c in ("visits", "mpi_ns", "bytes"))
                continue
            if parent != "-":
                module = modules.get(mod, ("", ""))
                base = base + (Frame(kind, module[0], module[1],
                                     int(addr, 16) if addr != "-" else 0,
                                     "" if name == "-" else name),)
            paths[nid] = base
            nodes[base] = cols
        else:
            head.setdefault(f[0], []).append(f[1:])
    return head, nodes, comms, lines


def differences(prof_dir):
    expected, tree = expected_nodes(prof_dir)
    _, got, comms, _ = read_tree(prof_dir)
    diffs = [f"{path[-1:]}: rank files {expected.get(path)}, tree.tsv {got.get(path)}"
             for path in sorted(set(expected) | set(got), key=str)
             if expected.get(path) != got.get(path)]

    def comm_sums(node, path):
        if node.comms:
            want = {c: tuple(v) for c, v in node.comms.items()}
            if comms.get(path) != want:
                diffs.append(f"{path[-1:]}: communicators {want}, tree.tsv {comms.get(path)}")
        for frame, child in node.children.items():
            comm_sums(child, path + (frame,))

    comm_sums(tree.root, ())
    return diffs


def columns_of(node_line):
    """{column: statistics} of a node line's fields, `@COLUMN` (the statistics of an earlier
    column of the line) resolved."""
    cols = {}
    for field in node_line[7:]:
        name, text = field.split("=", 1)
        cols[name] = cols[text[1:]] if text.startswith("@") else text
    return cols


def mpi_nodes(lines, name):
    return [columns_of(f) for f in lines if f[3] == "mpi" and f[6] == name]


def run_known(mpi, np, prof, args=(), timeout=300):
    started = time.monotonic()
    p = mpi.run(np, [mpi.prog("reduce_known"), *args], prof, timeout=timeout)
    return p, time.monotonic() - started


@pytest.mark.parametrize("np", [16, 64, 128])
def test_reduced_tree_equals_the_rank_files(mpi, np, tmp_path):
    prof = tmp_path / "prof"
    p, _ = run_known(mpi, np, prof)
    assert p.stderr.strip().splitlines()[-1] == (
        f"pathscope: profile written to {prof} (view: pathscope report {prof})")
    check_rank_layout(prof, np)
    assert differences(prof) == []
    # and the analysis package's reader of tree.tsv, both roots (the runtime's threads too)
    assert reader_differences(prof) == []
    head, _, _, lines = read_tree(prof)
    assert head["ranks"] == [[str(np)]]
    assert int(head["reduction"][0][1]) == math.ceil(math.log2(np))
    # known without the rank files: r % 2 + 1 MPI_Allreduce on row (W_s1.0: even ranks,
    # W_s1.1: odd), one MPI_Sendrecv of 8 (r + 1) bytes, two MPI_Bcast on col
    half = np // 2
    (allreduce,) = mpi_nodes(lines, "MPI_Allreduce")
    assert allreduce["visits"] == f"{3 * half},1,0,2,1,,{half}"
    # (the compiler unrolls the loop of two: two call sites)
    assert [b["visits"] for b in mpi_nodes(lines, "MPI_Bcast")] == ["=1"] * 2
    (sendrecv,) = mpi_nodes(lines, "MPI_Sendrecv")
    assert sendrecv["visits"] == "=1"
    assert len(mpi_nodes(lines, "MPI_Barrier")) == 2        # two call sites
    (allreduce_id,) = [f[1] for f in lines if f[3] == "mpi" and f[6] == "MPI_Allreduce"]
    pcomm = {f[6]: f[7] for f in lines if f[3] == "pcomm" and f[2] == allreduce_id}
    assert pcomm == {"W_s1.0": f"visits={half},0,1,1,0,{half},",
                     "W_s1.1": f"visits={np},0,0,2,1,{half},"}
    scalars = {f[0]: f[1] for f in head["scalar"]}
    assert scalars["thread.count"] == "=2"                # main and the helper thread
    assert {tuple(f) for f in head["string"] if f[0] in ("status", "program")} == {
        ("status", str(np), "complete"), ("program", str(np), "reduce_known")}


def busy_loops(count, seconds):
    """count busy loops (sh under timeout, so that they end after seconds even if this test
    dies), for a run as crowded as one of more ranks; end_loops stops them."""
    return [subprocess.Popen(["timeout", str(seconds), "sh", "-c", "while :; do :; done"])
            for _ in range(count)]


def end_loops(loops):
    """SIGTERM to each timeout, which passes it on to its loop (a SIGKILL would leave the loop
    running without it), then waits for it."""
    for loop in loops:
        loop.terminate()
    for loop in loops:
        loop.wait()


def test_size_does_not_grow_with_ranks(openmpi, tmp_path):
    """The same program at 16 and 128 ranks with the profile of the default (the run's files
    only; --per-rank none, and summary but for its rankvec lines), without sampling (where
    samples land depends on how long an oversubscribed run takes, so sampled paths vary with
    the rank count): the same lines, and the same bytes within 10%.  The 16 ranks run beside
    112 busy loops, so that both runs crowd the 2 cores alike: 128 ranks on 2 cores take ten
    times longer, and their times spread over more power-of-two bins, which is the machine,
    not the rank count.  What still grows with the ranks: the digits of sums (8 times
    larger) and of rank numbers.  Measured (docs/benchmarks.md, section V; format 2.14):
    11.1 -> 11.7 KB (+5.6%) crowded alike, 10.8 -> 11.7 KB (+8.9%) against a quiet 16-rank
    run; before 2.14 (whole statistics) 14.4 -> 16.2 KB (+12.4%), before 2.11 (every member
    listed) +20%, before 2.10 (a profile.tsv line per rank) +76%."""
    sizes, shapes = {}, {}
    for np in (16, 128):
        prof = tmp_path / f"p{np}"
        crowd = busy_loops(128 - np, 120) if np < 128 else []
        try:
            openmpi.run(np, [openmpi.prog("reduce_known")], prof, timeout=300,
                        pathscope_args=["--sample-rate", "0", "--per-rank", "none"])
        finally:
            end_loops(crowd)
        text = (prof / "profile.tsv").read_text() + (prof / "tree.tsv").read_text()
        sizes[np] = len(text)
        # each statistic (or number, or rank list) one character; the run id aside
        shapes[np] = [re.sub(r"[0-9][0-9:;,-]*", "0", line) for line in text.splitlines()
                      if not line.startswith("run\t")]
    assert shapes[16] == shapes[128]
    assert sizes[128] <= 1.1 * sizes[16], sizes


def test_per_rank_none_keeps_one_file_per_run(mpi, tmp_path):
    prof = tmp_path / "prof"
    p = mpi.run(8, [mpi.prog("reduce_known")], prof, pathscope_args=["--per-rank", "none"])
    assert p.stderr.strip().splitlines()[-1] == (
        f"pathscope: profile written to {prof} (view: pathscope report {prof})")
    assert sorted(os.listdir(prof)) == ["profile.tsv", "ranks", "tree.tsv"]
    assert os.listdir(prof / "ranks") == []
    head, _, _, lines = read_tree(prof)
    assert head["ranks"] == [["8"]]
    (allreduce,) = mpi_nodes(lines, "MPI_Allreduce")
    assert allreduce["visits"] == "12,1,0,2,1,,4"
    # the report reads it alone; a view of one rank needs the rank files
    r = subprocess.run([str(ROOT / "bin" / "pathscope"), "report", str(prof)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "\nCall tree (inclusive time" in r.stdout
    r = subprocess.run([str(ROOT / "bin" / "pathscope"), "export", str(prof), "--format",
                        "folded", "--metric", "visits"], capture_output=True, text=True,
                       timeout=120)
    assert ("_start;__libc_start_main;__libc_start_call_main;main;row_phase;MPI_Allreduce 12"
            in r.stdout.splitlines())
    r = subprocess.run([str(ROOT / "bin" / "pathscope"), "export", str(prof), "--format",
                        "folded", "--rank", "1"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip().splitlines()[-1].endswith("rerun with --per-rank all")


def test_heap_of_a_thread_reduced(openmpi, tmp_path):
    """--heap: the helper thread's r + 1 blocks of 1000 bytes, freed before MPI_Finalize, on
    the path through alloc_blocks (the call site's address is inside it: nm)."""
    prof = tmp_path / "prof"
    openmpi.run(4, [openmpi.prog("reduce_known")], prof, pathscope_args=["--heap"])
    symbols = subprocess.run(["nm", "-n", str(openmpi.prog("reduce_known"))], capture_output=True,
                             text=True, check=True).stdout.split("\n")
    addrs = [(int(s.split()[0], 16), s.split()[2]) for s in symbols if len(s.split()) == 3]
    start = next(a for a, n in addrs if n == "alloc_blocks")
    end = min(a for a, _ in addrs if a > start)
    _, _, _, lines = read_tree(prof)
    by_id = {f[1]: f for f in lines}
    ours = [columns_of(f) for f in lines
            if f[3] == "heap" and f[6] == "malloc" and by_id[f[2]][3] == "call"
            and start < int(by_id[f[2]][5], 16) <= end]
    # 1, 2, 3, 4 blocks: bins 1, 2, 2, 3; 1000 to 4000 bytes: bins 10, 11, 12, 12
    assert ours == [{"allocs": "10,1,0,4,3,,1;2",
                     "alloc_bytes": "10000,1000,0,4000,3,,1;1",
                     "frees": "10,1,0,4,3,,1;2",
                     "freed_bytes": "10000,1000,0,4000,3,,1;1",
                     "peak_bytes": "10000,1000,0,4000,3,,1;1"}]


def test_tree_not_written_every_rank_keeps_its_file(openmpi, tmp_path):
    """--per-rank none, and tree.tsv cannot be written (a directory took its name while the
    program ran): nothing is lost -- every rank writes its own file -- and the notice says
    what is missing."""
    prof = tmp_path / "prof"
    cmd = ["mpirun.openmpi", "--allow-run-as-root", "--oversubscribe", "-np", "4",
           str(ROOT / "bin" / "pathscope"), "run", "-o", str(prof),
           "--per-rank", "none", "--", str(openmpi.prog("reduce_known")), "3"]
    job = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # every rank is past MPI_Init (and its look at the directory) once rank 0 says so
        assert job.stdout.readline() == "ready\n"
        (prof / "tree.tsv").mkdir()
        out, err = job.communicate(timeout=120)
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
    assert job.returncode == 0, err
    lines = sorted(line for line in err.splitlines() if line.startswith("pathscope:"))
    assert lines == [
        f"pathscope: profile written to {prof} incompletely: not written: tree.tsv (view: "
        f"pathscope report {prof})",
        "pathscope: rank 0: profile not written: tree.tsv: Is a directory"]
    assert sorted(os.listdir(prof / "ranks")) == [f"rank-{r:06d}.tsv" for r in range(4)]
    assert (prof / "tree.tsv").is_dir() and os.listdir(prof / "tree.tsv") == []


def test_per_rank_summary_keeps_the_heaviest_paths_rank_by_rank(mpi, tmp_path):
    """--per-rank summary: no rank files; tree.tsv carries each rank's value of every column
    of the 64 paths with the most inclusive time (`rankvec` lines), which the reader checks
    against the node's statistics and keeps."""
    prof = tmp_path / "prof"
    np = 8
    mpi.run(np, [mpi.prog("reduce_known")], prof, pathscope_args=["--per-rank", "summary"])
    assert sorted(os.listdir(prof)) == ["profile.tsv", "ranks", "tree.tsv"]
    assert os.listdir(prof / "ranks") == []
    tree = load_profile(prof).tree
    assert 0 < len(tree.rank_vectors) <= 64
    by_id = {n.id: n for n in tree.nodes}
    vectors = {by_id[i].name: v for i, v in tree.rank_vectors.items() if by_id[i].kind == "mpi"}
    # known per rank: r % 2 + 1 allreduces of 4 bytes; a ring sendrecv of 8 (r + 1) bytes sent
    # and 8 (left + 1) received
    assert vectors["MPI_Allreduce"]["visits"] == [r % 2 + 1 for r in range(np)]
    assert vectors["MPI_Allreduce"]["bytes"] == [4 * (r % 2 + 1) for r in range(np)]
    assert vectors["MPI_Sendrecv"]["bytes"] == [8 * (r + 1) + 8 * ((r - 1) % np + 1)
                                                for r in range(np)]
    # the root's inclusive time is among them, and agrees with its statistics
    root = tree.rank_vectors[0]["incl_time"]
    assert sum(root) == tree.nodes[0].stats["incl_time"].sum and min(root) > 0
    # a value changed by hand: the file breaks its rule, the report says so and goes on
    text = (prof / "tree.tsv").read_text().splitlines()
    (at,) = [i for i, line in enumerate(text) if line.startswith(f"rankvec\t0\tincl_time\t")]
    fields = text[at].split("\t")
    values = fields[3].split(",")
    values[0] = str(int(values[0]) + 1)
    text[at] = "\t".join(fields[:3] + [",".join(values)])
    (prof / "tree.tsv").write_text("\n".join(text) + "\n")
    r = subprocess.run([str(ROOT / "bin" / "pathscope"), "report", str(prof)],
                       capture_output=True, text=True, timeout=120)
    assert (f"tree.tsv not used: {prof}/tree.tsv:{at + 1}: 'rankvec' line: field 4 the values "
            f"do not agree with node 0's incl_time statistics") in r.stdout + r.stderr
