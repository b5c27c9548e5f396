"""pathscope.reader: parsing, escapes, merging rank files, missing/incomplete ranks, versions."""
import pytest

from pathscope.errors import FormatVersionError, ProfileError
from pathscope.reader import OpStat, load_profile, parse_hist, unescape
from pathscope_samples import (RANK0, RANK1, RANK2, SAMPLE_COMMS, profile_rows, rank_rows,
                               write_profile, write_sample)


def test_unescape():
    assert unescape("a\\tb\\nc\\\\d") == "a\tb\nc\\d"
    assert unescape("\\\\t") == "\\t"          # an escaped backslash followed by t
    assert unescape("plain") == "plain"
    assert unescape("trailing\\") == "trailing\\"


def test_parse_hist():
    assert parse_hist("-") == {}
    assert parse_hist("0:10,11:10") == {0: 10, 11: 10}
    with pytest.raises(ValueError):
        parse_hist("11")


def test_profile_tsv(tmp_path):
    p = load_profile(write_sample(tmp_path / "prof"))
    assert p.source == "profile"
    assert p.nranks == 3
    assert p.meta["program"] == "my\tapp"
    assert p.meta["command"] == 'mpirun -np 3 ./my\tapp --name "a\\b" --text line1\nline2'
    assert p.meta["mpi_library"] == "Open MPI v4.1.4, package: Debian OpenMPI"
    assert p.meta["format_version"] == "1.0"
    assert p.meta["start_unix_ns"] == 1700000000000000000
    assert [(r.rank, r.host, r.wall_ns, r.mpi_ns, r.status) for r in p.ranks] == [
        (0, "node01", 2_000_000_000, 500_000_000, "complete"),
        (1, "node02", 2_100_000_000, 700_000_000, "complete"),
        (2, "node02", 1_900_000_000, 100_000_000, "complete")]
    assert p.ranks[1].pid == 1001
    assert p.ranks[0].counters["unknown_requests"] == 0
    assert p.missing_ranks == [] and p.incomplete_ranks == []
    send = p.ops[("W", "MPI_Send")]
    assert send == OpStat("W", "MPI_Send", 3, 3072, 500_000_000, 200_000_000, 1, 300_000_000,
                          0, 2, {11: 3})
    assert send.time_mean_ns == 250_000_000
    w = p.comms["W"]
    assert (w.size, w.remote_size, w.parent, w.creator, w.freed, w.members, w.members_list) == (
        3, 0, "-", "-", 0, "0-2", [0, 1, 2])
    assert (w.sent_msgs, w.sent_bytes, w.recv_msgs, w.recv_bytes) == (3, 3072, 3, 3072)
    assert p.comms["W_s1.2"].topology == "cart ndims=1 dims=1 periods=0 reorder=0"
    assert list(p.comms) == sorted(p.comms)


def test_merge_rank_files_equals_reduction(tmp_path):
    """Without profile.tsv the rank files give exactly what the in-job reduction wrote."""
    reduced = load_profile(write_sample(tmp_path / "a"))
    merged = load_profile(write_sample(tmp_path / "b", with_profile=False))
    assert merged.source == "ranks"
    assert merged.nranks == 3
    assert merged.ops == reduced.ops
    assert merged.comms == reduced.comms
    assert list(merged.ops) == list(reduced.ops)


def test_merge_exact_values(tmp_path):
    p = load_profile(write_sample(tmp_path / "prof", with_profile=False))
    ops = p.ops
    # min tie between ranks 0 and 2 (100 ms each): the lowest rank is named
    assert ops[("W", "MPI_Recv")] == OpStat("W", "MPI_Recv", 3, 3072, 500_000_000, 100_000_000,
                                             0, 300_000_000, 1, 3, {11: 3})
    # max tie between ranks 0 and 1 (40 ms each)
    split = ops[("W", "MPI_Comm_split")]
    assert (split.time_min_ns, split.rank_min, split.time_max_ns, split.rank_max) == (
        10_000_000, 2, 40_000_000, 0)
    # "*": per rank, the sum over all its communicators, then merged over ranks
    assert ops[("*", "MPI_Send")] == OpStat("*", "MPI_Send", 5, 3272, 500_120_000, 200_070_000,
                                             1, 300_050_000, 0, 2, {7: 2, 11: 3})
    assert ops[("*", "MPI_Recv")] == OpStat("*", "MPI_Recv", 5, 3272, 500_100_000, 100_000_000,
                                             2, 300_040_000, 1, 3, {7: 2, 11: 3})
    assert ops[("-", "MPI_Wtime")].calls == 15
    assert ops[("-", "MPI_Wtime")].nranks == 2
    # comms de-duplicated by name, sent/recv summed, freed only if every member freed it
    assert p.comms["W_s1.0"].freed == 1
    assert p.comms["W_s1.2"].freed == 0
    assert (p.comms["W"].sent_msgs, p.comms["W"].recv_bytes) == (3, 3072)
    assert p.meta == {"format_version": "1.0", "program": "my\tapp",
                      "start_unix_ns": 1700000000000000000}
    assert [r.host for r in p.ranks] == ["node01", "node02", "node02"]


def test_missing_and_incomplete_ranks_from_rank_files(tmp_path):
    cut = rank_rows(3, 6, "complete", "node03", 10, 5, end=False,
                    ops=[("W", "MPI_Barrier", 1, 0, 5, "-")], extra=[("op", "W", "MPI_Se")])
    ranks = {
        0: [("size", 6) if row[0] == "size" else row for row in RANK0],
        1: rank_rows(1, 6, "signal 15", "node02", 10, 5, ops=[("W", "MPI_Barrier", 2, 0, 7, "-")]),
        3: cut,
        4: rank_rows(4, 6, "abort 3", "node04", 10, 5),
        5: rank_rows(5, 6, "exit-without-finalize", "node05", 10, 5),
    }
    p = load_profile(write_profile(tmp_path / "prof", None, ranks))
    assert p.source == "ranks"
    assert p.nranks == 6
    assert p.missing_ranks == [2]
    assert p.incomplete_ranks == [(1, "signal 15"), (3, "no end line"), (4, "abort 3"),
                                  (5, "exit-without-finalize")]
    assert [r.status for r in p.ranks] == ["complete", "signal 15", "missing", "complete",
                                           "abort 3", "exit-without-finalize"]
    assert p.ranks[3].has_end is False
    # the data of a cut-short file is still merged (its partial last line is dropped)
    assert p.ops[("W", "MPI_Barrier")].calls == 3
    assert p.ops[("W", "MPI_Barrier")].nranks == 2


def test_missing_rank_file_next_to_profile_tsv(tmp_path):
    d = write_profile(tmp_path / "prof", profile_rows(), {0: RANK0, 2: rank_rows(
        2, 3, "signal 9", "node02", 1, 1)})
    (d / "ranks" / "rank-000001.tsv.tmp").write_text("pathscope-rank\t1.0\n")
    p = load_profile(d)
    assert p.source == "profile"
    assert p.missing_ranks == [1]
    assert p.incomplete_ranks == [(2, "signal 9")]
    assert p.partial_rank_files == [1]
    # the temporary of format 2.3 (runtime/output/outdir.c) says the same
    (d / "ranks" / "rank-000001.tsv.tmp").unlink()
    (d / "ranks" / ".rank-000001.tsv.0123456789abcdef").write_text("pathscope-rank\t2.3\n")
    assert load_profile(d).partial_rank_files == [1]
    # host and times come from profile.tsv, status from the rank file
    assert (p.ranks[1].host, p.ranks[1].status) == ("node02", "missing")
    assert (p.ranks[2].wall_ns, p.ranks[2].status) == (1_900_000_000, "signal 9")


def test_newer_major_version_refused(tmp_path):
    d = write_profile(tmp_path / "prof", profile_rows(version="3.0"), {0: RANK0})
    with pytest.raises(FormatVersionError) as e:
        load_profile(d)
    assert str(e.value) == "profile format 3.0 is newer than this pathscope (reads 2.x)"


def test_newer_major_version_in_rank_file_refused(tmp_path):
    d = write_profile(tmp_path / "prof", None, {0: rank_rows(0, 1, "complete", "h", 1, 1,
                                                             version="3.1")})
    with pytest.raises(FormatVersionError, match=r"^profile format 3\.1 is newer than this "
                                                 r"pathscope \(reads 2\.x\)$"):
        load_profile(d)


def test_newer_minor_version_extra_lines_and_fields_ignored(tmp_path):
    rows = profile_rows(version="1.7", extra=[("flamegraph", "x", "y")])
    rows = [r + ("future-field",) if r[0] in ("op", "comm", "rank") else r for r in rows]
    d = write_profile(tmp_path / "prof", rows, {0: RANK0, 1: RANK1, 2: RANK2})
    p = load_profile(d)
    assert p.meta["format_version"] == "1.7"
    assert p.ops[("W", "MPI_Send")].calls == 3
    assert p.comms["W"].recv_bytes == 3072
    assert p.ranks[2].host == "node02"


def test_intercomm_members_and_truncated_list(tmp_path):
    comms = list(SAMPLE_COMMS) + [
        ("W_n3.0", 2, 1, "W", "MPI_Intercomm_create", 0, "0-1|2", "-", 0, 0, 0, 0),
        ("W_c4.0", 3, 0, "W", "MPI_Comm_create", 0, "0,1,...", "-", 0, 0, 0, 0),
        ("P", 1, 2, "-", "-", 0, "0|-32766,-32766", "-", 0, 0, 0, 0)]
    rank0 = rank_rows(0, 3, "complete", "node01", 1, 1, comms=[
        ("W_c4.0", 3, 0, 0, "W", "MPI_Comm_create", 0, "0-2", "-", 0, 0, 0, 0)])
    d = write_profile(tmp_path / "prof", profile_rows(comms=comms), {0: rank0, 1: RANK1,
                                                                     2: RANK2})
    p = load_profile(d)
    inter = p.comms["W_n3.0"]
    assert inter.is_inter and inter.members_list == [0, 1, 2]
    # cut in profile.tsv ("..."), whole in the rank file: members_list from the rank file
    assert p.comms["W_c4.0"].members == "0,1,..."
    assert p.comms["W_c4.0"].members_list == [0, 1, 2]
    assert p.comms["P"].members_list == [0, -32766, -32766]


@pytest.mark.parametrize("setup, message", [
    ("missing", "profile directory not found: {d}"),
    ("file", "not a profile directory: {d}"),
    ("empty", "not a pathscope profile directory: {d} (no profile.tsv and no "
              "ranks/rank-*.tsv)"),
])
def test_bad_directories(tmp_path, setup, message):
    d = tmp_path / "prof"
    if setup == "file":
        d.write_text("x")
    elif setup == "empty":
        d.mkdir()
    with pytest.raises(ProfileError) as e:
        load_profile(d)
    assert str(e.value) == message.format(d=d)


def test_not_a_profile_file(tmp_path):
    d = tmp_path / "prof"
    d.mkdir()
    (d / "profile.tsv").write_text("hello\n")
    with pytest.raises(ProfileError, match="is not a pathscope file"):
        load_profile(d)


def test_malformed_line_names_file_and_line(tmp_path):
    rows = profile_rows()
    rows[8] = ("rank", "one", "node02", 1, 1)
    d = write_profile(tmp_path / "prof", rows, {})
    with pytest.raises(ProfileError) as e:
        load_profile(d)
    assert str(e.value) == (f"{d}/profile.tsv:9: 'rank' line: field 2 'one' is not an integer")
    rows = profile_rows()
    rows[8] = ("rank", 1, "node02")
    write_profile(d, rows, {})
    with pytest.raises(ProfileError, match=r"profile.tsv:9: 'rank' line has 2 fields after the "
                                           r"type, expected 4"):
        load_profile(d)


def test_profile_tsv_path_accepted(tmp_path):
    d = write_sample(tmp_path / "prof")
    assert load_profile(d / "profile.tsv").path == d
    assert load_profile(str(d)).nranks == 3


def test_profile_helpers(tmp_path):
    p = load_profile(write_sample(tmp_path / "prof"))
    assert p.host_of(2) == "node02" and p.host_of(7) is None
    assert [s.op for s in p.comm_ops("W_s1.0")] == ["MPI_Recv", "MPI_Send"]
    assert [s.op for s in p.op_totals()] == ["MPI_Comm_free", "MPI_Comm_split", "MPI_Recv",
                                            "MPI_Send", "MPI_Wtime"]
    # a communicator's MPI time (the report's): a groupby sum of its comm-ops rows
    from pathscope.frames import ProfileFrames
    from pathscope.report.mpi import ns, op_table
    times = op_table(ProfileFrames(p).comm_ops).groupby("comm")["time_sum"].sum()
    assert times["W"] == 1_090_000_000
    assert ns(ProfileFrames(p).comm_ops["time_sum_s"]).sum() == times.sum()


def test_intercomm_from_rank_files_lowest_group_first(tmp_path):
    """Rank files write local|remote; merged, the group with the lowest world rank comes
    first on both sides, as in profile.tsv (docs/format.md, Member lists)."""
    inter = ("W_n3.0", 1, 2, 0, "W", "MPI_Intercomm_create", 0, "{}", "-", 1, 8, 0, 0)
    side_a = rank_rows(0, 3, "complete", "h", 1, 1,
                       comms=[inter[:7] + ("0|1-2",) + inter[8:]])
    side_b = [rank_rows(r, 3, "complete", "h", 1, 1,
                        comms=[(inter[0], 2, 1) + inter[3:7] + ("1-2|0",) + inter[8:]])
              for r in (1, 2)]
    p = load_profile(write_profile(tmp_path / "prof", None, {0: side_a, 1: side_b[0],
                                                             2: side_b[1]}))
    c = p.comms["W_n3.0"]
    assert (c.members, c.members_list, c.size, c.remote_size) == ("0|1-2", [0, 1, 2], 1, 2)
    # the same when the lowest rank's file is missing: rank 1's local|remote is reordered
    (tmp_path / "prof" / "ranks" / "rank-000000.tsv").unlink()
    c = load_profile(tmp_path / "prof").comms["W_n3.0"]
    assert (c.members, c.members_list, c.size, c.remote_size) == ("0|1-2", [0, 1, 2], 1, 2)
