"""The merge rules (pathscope.merge) on the hand-worked cases of data/reduce_cases.tsv, the
file the C unit test of runtime/output/reduce.c reads too: every case merged in file order, in
reverse and pairwise gives exactly the expected records; the reader's merge and the call tree's
statistics use these rules."""
from pathlib import Path

import pytest

from pathscope import merge, reader
from pathscope.frames import rank_statistics
from pathscope.stats import Stats
from pathscope.reader import Comm, OpStat
from pathscope.tsv import parse_hist

CASES = Path(__file__).parent / "data" / "reduce_cases.tsv"


def read_cases():
    """[(name, inputs, expected lines)]; inputs: [("op" | "comm", fields)]."""
    cases = []
    for line in CASES.read_text(encoding="utf-8").splitlines():
        if not line or line.startswith("#"):
            continue
        kind, *fields = line.split("\t")
        if kind == "case":
            cases.append((fields[0], [], []))
        elif kind in ("op", "comm"):
            cases[-1][1].append((kind, fields))
        else:
            assert kind in ("=op", "=comm"), line
            cases[-1][2].append(line[1:])
    return cases


def record(kind, f):
    if kind == "op":
        return OpStat(f[0], f[1], *(int(v) for v in f[2:10]), parse_hist(f[10]))
    return Comm(f[0], int(f[1]), int(f[2]), f[3], f[4], int(f[5]), f[6], [], f[7],
                *(int(v) for v in f[8:18]))


def key(kind, r):
    return (kind, r.comm, r.op) if kind == "op" else (kind, r.name)


def merged(inputs):
    """One record per key: the inputs merged in the order given."""
    out = {}
    for kind, r in inputs:
        k = key(kind, r)
        if k in out:
            (merge.merge_op if kind == "op" else merge.merge_comm)(out[k], r)
        else:
            out[k] = r
    return out


def pairwise(inputs):
    """As a binomial tree merges: neighbours first, then pairs of pairs, ..."""
    parts = [[item] for item in inputs]
    while len(parts) > 1:
        joined = []
        for i in range(0, len(parts), 2):
            both = parts[i] + (parts[i + 1] if i + 1 < len(parts) else [])
            joined.append([(k[0], r) for k, r in merged(both).items()])
        parts = joined
    return merged(parts[0])


def profile_lines(records):
    """The merged records as profile.tsv lines: comm lines by name, then op lines by
    communicator and operation name."""
    lines = []
    for (kind, *_), r in sorted(records.items(), key=lambda kr: (kr[0][0] != "comm", kr[0])):
        if kind == "comm":
            fields = [r.name, r.size, r.remote_size, r.parent, r.creator, r.freed, r.members,
                      r.topology, r.sent_msgs, r.sent_bytes, r.recv_msgs, r.recv_bytes,
                      r.freed_sends, r.freed_recvs, r.freed_recv_capacity, r.failed_requests,
                      r.folded, r.memberships]
        else:
            hist = ",".join(f"{b}:{n}" for b, n in sorted(r.hist.items()) if n) or "-"
            fields = [r.comm, r.op, r.calls, r.bytes, r.time_sum_ns, r.time_min_ns, r.rank_min,
                      r.time_max_ns, r.rank_max, r.nranks, hist]
        lines.append("\t".join([kind] + [str(v) for v in fields]))
    return lines


@pytest.mark.parametrize("order", ["file", "reverse", "pairwise"])
@pytest.mark.parametrize("name, inputs, expected", read_cases(),
                         ids=[name for name, _, _ in read_cases()])
def test_cases_merge_to_the_hand_worked_records(name, inputs, expected, order):
    records = [(kind, record(kind, fields)) for kind, fields in inputs]
    if order == "reverse":
        records.reverse()
    result = pairwise(records) if order == "pairwise" else merged(records)
    assert profile_lines(result) == expected


def test_the_printed_output_the_c_test_compares():
    """The whole output for the file (the header's "What the tests print")."""
    printed, wanted = [], []
    for name, inputs, expected in read_cases():
        printed += [f"case\t{name}"] + profile_lines(merged(
            [(kind, record(kind, fields)) for kind, fields in inputs]))
        wanted += [f"case\t{name}"] + expected
    text = CASES.read_text(encoding="utf-8").splitlines()
    assert printed == wanted == [line.lstrip("=") for line in text
                                 if line.startswith(("case\t", "=op\t", "=comm\t"))]
    assert len(read_cases()) == 11


def test_the_reader_merges_with_these_rules():
    """merge_rank_files calls merge_op through the name reader.merge_op (the fuzz self-test
    replaces it there)."""
    assert reader.merge_op is merge.merge_op


def test_rank_stats_use_the_same_tie_rule():
    stats = Stats.of_ranks({3: 5, 1: 5, 2: 9, 4: 9}, [4, 3, 2, 1, 0])
    assert (stats.min, stats.min_rank, stats.max, stats.max_rank) == (0, 0, 9, 2)
    stats = Stats.of_ranks({3: 5, 1: 5}, [3, 1])
    assert (stats.min_rank, stats.max_rank, stats.total, stats.mean) == (1, 1, 10, 5.0)


def test_rank_statistics_of_the_tables_use_the_same_tie_rule():
    """pathscope.frames.rank_statistics (the report's groupby): a rank without a row is 0,
    the lowest rank on ties, rows of 0 count as values."""
    import pandas as pd
    values = pd.DataFrame({"g": ["a"] * 4 + ["b"] * 2 + ["c"] * 2 + ["d"],
                           "rank": [3, 1, 2, 4, 3, 1, 2, 0, 4],
                           "value": [5, 5, 9, 9, 5, 5, 0, 7, 0]})
    got = rank_statistics(values, ["g"], [4, 3, 2, 1, 0])
    assert [tuple(r) for r in got.itertuples(index=False)] == [
        ("a", 28, 5.6, 0, 0, 9, 2, 4),      # rank 0 absent: the minimum 0
        ("b", 10, 2.0, 0, 0, 5, 1, 2),
        ("c", 7, 1.4, 0, 1, 7, 0, 1),       # rank 1 absent, rank 2's row of 0 is higher
        ("d", 0, 0.0, 0, 0, 0, 0, 0)]       # all 0: the lowest rank at both ends
    got = rank_statistics(values[values["g"] == "b"], ["g"], [3, 1])
    assert tuple(next(got.itertuples(index=False))) == ("b", 10, 5.0, 5, 1, 5, 1, 2)


@pytest.mark.parametrize("members, size, remote, after", [
    ("2-3|0-1", 2, 2, ("0-1|2-3", 2, 2)),          # the remote group holds rank 0: first
    ("0|1-3", 1, 3, ("0|1-3", 1, 3)),              # already lowest first
    ("4-6|1", 3, 1, ("1|4-6", 1, 3)),              # sizes follow their groups
    ("0-1", 2, 0, ("0-1", 2, 0)),                  # an intracommunicator: untouched
])
def test_lowest_group_first(members, size, remote, after):
    comm = Comm("W_n0", size, remote, "W", "MPI_Intercomm_create", 0, members, [], "-",
                0, 0, 0, 0)
    merge.lowest_group_first(comm)
    assert (comm.members, comm.size, comm.remote_size) == after
