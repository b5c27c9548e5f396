"""Call paths in the rank files (format 2.0): the per-rank model, the contract's invariants on
the hand-written fixture, and the reader's checks (errors naming file and line)."""
import pytest

from pathscope.errors import FormatVersionError
from pathscope.reader import load_profile
from pathscope_samples import (HYBRID, copy_hybrid, rank_rows, read_rows, write_profile,
                               write_rows)


def test_model_of_the_fixture():
    p = load_profile(HYBRID)
    assert p.meta["format_version"] == "2.0"
    assert p.has_call_paths()
    assert sorted(p.callpaths) == [0, 1]
    r0 = p.callpaths[0]
    assert (r0.sampler.source, r0.sampler.rate_hz, r0.sampler.clock) == (
        "posix-cpu-timer", 100, "cpu")
    assert r0.unwind == {"env": "count", "topo": "count", "poll": "path", "p2p": "path",
                         "coll": "path", "rma": "path", "io": "path", "other": "count"}
    assert {i: (m.path, m.build_id) for i, m in r0.modules.items()} == {
        0: ("/opt/solver/bin/solver", "a1b2c3d4e5f60718"),
        3: ("/lib/x86_64-linux-gnu/libc.so.6", "89abcdef01234567"),
        7: ("/opt/solver/lib/libkernels.so", "")}
    main = r0.threads[0]
    assert (main.index, main.tid, main.elapsed_ns, main.samples_kept, main.samples_in_mpi,
            main.samples_other, main.unwind_failures, main.node_count) == (
        0, 4100, 2_000_000_000, 158, 45, 1, 3, 18)
    assert [n.id for n in main.nodes] == list(range(18))
    allreduce = main.nodes[9]
    assert (allreduce.kind, allreduce.parent, allreduce.module, allreduce.address,
            allreduce.op, allreduce.visits, allreduce.mpi_ns, allreduce.bytes) == (
        "mpi", 8, None, None, "MPI_Allreduce", 20, 300_000_000, 160)
    assert [(c.comm, c.calls, c.time_ns, c.bytes) for c in allreduce.comms] == [
        ("W", 10, 250_000_000, 80), ("W_d1", 10, 50_000_000, 80)]
    pc = main.nodes[7]
    assert (pc.kind, pc.module, pc.address, pc.sample_ns, pc.samples) == (
        "pc", 7, 0x1A4F, 200_000_000, 20)
    assert [n.kind for n in main.nodes if n.parent == 0] == ["call", "failed", "not_unwound"]
    assert sorted(p.callpaths[1].threads) == [0, 1]


def test_fixture_keeps_the_contracts_invariants():
    """docs/format.md, Call paths: the time of every thread adds up to its elapsed time (1 ns
    per node), pcomm lines add up to their node, MPI nodes add up to the op lines."""
    p = load_profile(HYBRID)
    for rank, paths in p.callpaths.items():
        per_op: dict[str, list[int]] = {}
        for thread in paths.threads.values():
            assert abs(thread.time_balance_ns()) <= len(thread.nodes), (rank, thread.index)
            assert thread.node_count == len(thread.nodes)
            for node in thread.nodes:
                if node.kind != "mpi":
                    assert (node.visits, node.mpi_ns, node.bytes) == (0, 0, 0)
                    continue
                assert node.sample_ns == 0 and node.samples == 0
                assert [sum(c.calls for c in node.comms), sum(c.time_ns for c in node.comms),
                        sum(c.bytes for c in node.comms)] == [node.visits, node.mpi_ns,
                                                             node.bytes]
                totals = per_op.setdefault(node.op, [0, 0, 0])
                totals[0] += node.visits
                totals[1] += node.mpi_ns
                totals[2] += node.bytes
        rank_ops: dict[str, list[int]] = {}
        for row in read_rows(HYBRID / "ranks" / f"rank-{rank:06d}.tsv"):
            if row[0] == "op":
                totals = rank_ops.setdefault(row[2], [0, 0, 0])
                totals[0] += int(row[3])
                totals[1] += int(row[5])
                totals[2] += int(row[4])
        assert per_op == rank_ops
    balances = {(r, t.index): t.time_balance_ns() for r, paths in p.callpaths.items()
                for t in paths.threads.values()}
    assert balances == {(0, 0): 0, (0, 1): 0, (1, 0): 0, (1, 1): -1}


def test_profile_tsv_of_the_fixture_is_the_merged_rank_files(tmp_path):
    reduced = load_profile(HYBRID)
    merged = load_profile(copy_hybrid(tmp_path / "prof", profile=False))
    assert merged.source == "ranks" and reduced.source == "profile"
    assert merged.ops == reduced.ops
    assert merged.comms == reduced.comms
    # without profile.tsv the rank files' meta lines are used
    assert merged.meta["command"] == "mpirun -np 2 ./solver --steps 10"
    assert merged.meta["mpi_library"] == "Open MPI v4.1.4"
    assert merged.meta["tool_version"] == "0.2.0"


def test_format_1_has_no_call_paths(tmp_path):
    p = load_profile(write_profile(tmp_path / "prof", None, {0: rank_rows(0, 1, "complete",
                                                                         "h", 10, 5)}))
    assert not p.has_call_paths()
    assert p.callpaths[0].threads == {} and p.callpaths[0].sampler is None


def test_newer_major_version_refused(tmp_path):
    rows = rank_rows(0, 1, "complete", "h", 10, 5, version="3.0")
    with pytest.raises(FormatVersionError, match=r"^profile format 3\.0 is newer than this "
                                                 r"pathscope \(reads 2\.x\)$"):
        load_profile(write_profile(tmp_path / "prof", None, {0: rows}))


def non_mpi_rows(end=True):
    """A program that never called MPI: size 1, mpi_library -, no comms or ops."""
    extra = [("sampler", "perf-task-clock", 1000, "cpu"), ("unwind", "env", "count"),
             ("module", 0, "/usr/bin/app", "-"),
             ("thread", 0, 77, 1000, 1, 0, 0, 0, 3),
             ("node", 0, 0, "-", "root", "-", "-", 0, 0, 0, 0, 0),
             ("node", 0, 1, 0, "fn", 0, "0x1000", 0, 900, 1, 0, 0),
             ("node", 0, 2, 0, "not_unwound", "-", "-", 0, 100, 0, 0, 0)]
    rows = rank_rows(0, 1, "complete", "h", 1000, 0, version="2.0", extra=extra, end=end,
                     program="app")
    rows.insert(5, ("mpi_library", "-"))
    return rows


def test_program_without_mpi(tmp_path):
    rows = non_mpi_rows()
    p = load_profile(write_profile(tmp_path / "prof", None, {0: rows}))
    assert (p.nranks, p.source, p.missing_ranks, p.incomplete_ranks) == (1, "ranks", [], [])
    assert p.meta["mpi_library"] == "-"
    assert p.ops == {} and p.comms == {}
    assert p.has_call_paths()
    assert p.callpaths[0].threads[0].time_balance_ns() == 0


def test_sampler_off_and_every_group_counted_is_no_call_path_data(tmp_path):
    extra = [("sampler", "off", 0, "cpu"), ("unwind", "p2p", "count"),
             ("thread", 0, 77, 1000, 0, 0, 0, 0, 3),
             ("node", 0, 0, "-", "root", "-", "-", 0, 0, 0, 0, 0),
             ("node", 0, 1, 0, "not_unwound", "-", "-", 0, 900, 0, 0, 0),
             ("node", 0, 2, 1, "mpi", "-", "MPI_Send", 1, 0, 0, 100, 8)]
    p = load_profile(write_profile(tmp_path / "prof", None, {0: rank_rows(
        0, 1, "complete", "h", 1000, 100, version="2.0", extra=extra)}))
    assert p.callpaths[0].threads[0].nodes[2].op == "MPI_Send"
    assert not p.has_call_paths()


def replace_line(path, old_prefix, new_row):
    rows = read_rows(path)
    index = next(i for i, r in enumerate(rows) if "\t".join(r).startswith(old_prefix))
    rows[index] = [str(f) for f in new_row]
    write_rows(path, rows)
    return index + 1


@pytest.mark.parametrize("prefix, row, message", [
    ("node\t0\t5\t", ("node", 0, 5, 4, "fn", 9, "0x401100", 0, 1, 1, 0, 0),
     "{where}: node 5 of thread 0: unknown module id 9"),
    ("node\t0\t5\t", ("node", 0, 5, 6, "fn", 0, "0x401100", 0, 1, 1, 0, 0),
     "{where}: node 5 of thread 0: parent 6 is not smaller than the node's id"),
    ("node\t0\t0\t", ("node", 0, 0, "-", "call", 0, "0x1", 0, 0, 0, 0, 0),
     "{where}: node 0 of thread 0: node 0 must be the root (kind 'root', parent '-')"),
    ("node\t0\t5\t", ("node", 0, 5, "-", "fn", 0, "0x401100", 0, 1, 1, 0, 0),
     "{where}: node 5 of thread 0: only node 0 may have no parent"),
    ("node\t0\t5\t", ("node", 0, 5, 4, "fn", 0, "401100", 0, 1, 1, 0, 0),
     "{where}: 'node' line: field 7 '401100' is not a hexadecimal address (0x...)"),
    ("node\t0\t5\t", ("node", 0, 4, 3, "fn", 0, "0x401100", 0, 1, 1, 0, 0),
     "{where}: node 4 of thread 0 listed twice"),
    ("node\t0\t5\t", ("node", 5, 1, 0, "fn", 0, "0x401100", 0, 1, 1, 0, 0),
     "{where}: node 1 of thread 5, which has no 'thread' line"),
    ("pcomm\t0\t9\t", ("pcomm", 0, 5, "W", 10, 250000000, 80),
     "{where}: 'pcomm' line names node 5 of thread 0, a 'fn' node (expected 'mpi')"),
    ("pcomm\t0\t9\t", ("pcomm", 0, 99, "W", 10, 250000000, 80),
     "{where}: 'pcomm' line names node 99 of thread 0, which does not exist"),
    ("module\t3\t", ("module", 0, "/lib/x86_64-linux-gnu/libc.so.6", "-"),
     "{where}: module 0 listed twice"),
    # format 2.4: offcpu_ns (the 14th field) is an integer and part of sample_ns
    ("node\t0\t5\t", ("node", 0, 5, 4, "fn", 0, "0x401100", 0, 100, 1, 0, 0, 0, 0, "nan"),
     "{where}: 'node' line: field 15 'nan' is not an integer"),
    ("node\t0\t5\t", ("node", 0, 5, 4, "fn", 0, "0x401100", 0, 100, 1, 0, 0, 0, 0, 101),
     "{where}: 'node' line: field 15 '101' (offcpu_ns) is larger than sample_ns (field 9, 100)"),
    ("thread\t0\t", ("thread", 0, 4100, 2000000000, 158, 45, 1, 3, 18, "-", "-", 0, "-1"),
     "{where}: 'thread' line: field 13 '-1' is negative"),
])
def test_malformed_call_paths_name_file_and_line(tmp_path, prefix, row, message):
    """The rank is unreadable (its data left out, the message kept); the others are read."""
    d = copy_hybrid(tmp_path / "prof")
    path = d / "ranks" / "rank-000000.tsv"
    number = replace_line(path, prefix, row)
    p = load_profile(d)
    assert p.incomplete_ranks == [(0, "unreadable: " + message.format(where=f"{path}:{number}"))]
    assert sorted(p.callpaths) == [1]


def test_node_ids_must_be_dense(tmp_path):
    d = copy_hybrid(tmp_path / "prof")
    path = d / "ranks" / "rank-000001.tsv"
    rows = [r for r in read_rows(path) if r[:3] != ["node", "1", "4"]]
    write_rows(path, rows)
    assert load_profile(d).incomplete_ranks == [
        (1, f"unreadable: {path}: thread 1: node ids are not dense (no node 4, highest id 6)")]


def test_file_cut_short_keeps_the_tree_written_before_the_cut(tmp_path):
    d = copy_hybrid(tmp_path / "prof")
    path = d / "ranks" / "rank-000001.tsv"
    rows = read_rows(path)
    cut = next(i for i, r in enumerate(rows) if r[:3] == ["node", "0", "12"])
    write_rows(path, rows[:cut] + [["node", "0", "12", "2", "f"]])   # cut mid-line, no end
    p = load_profile(d)
    assert p.incomplete_ranks == [(1, "no end line")]
    thread = p.callpaths[1].threads[0]
    assert [n.id for n in thread.nodes] == list(range(12))
    assert thread.node_count == 16
    assert 1 not in p.callpaths[1].threads      # its thread line came after the cut
    assert p.has_call_paths()
