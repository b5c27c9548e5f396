"""Many short-lived communicators (issue 14): tests/programs/comm_many.c on 4 ranks creates
and frees one communicator per iteration (dup, split, create in turn, at most 201 alive), with
known calls on some of them.  Freed communicators fold into one row per parent and kind
(runtime/mpi/fold.c, docs/format.md "Folded communicators"): every count below is exact, no
communicator goes untracked, the files stay the same size whatever the number of
communicators, and the report is quick.  The full 200,001 is bench/comm_many.py's (minutes
here); the tests run fewer iterations of the same loop.  They fold every freed communicator
(--comm-keep 0) but test_default_keep, where the first ones keep their names.
"""
import re
import os
import shutil
import subprocess
import sys
import time

import pytest

from conftest import ROOT
from pathscope.reader import load_profile
from profile_files import rank_text_size

# iterations per MPI: MPICH busy-polls, and 4 ranks on 2 cores make each of its collectives
# slow, so it runs a shorter loop of the same shape
ITERATIONS = {"openmpi": 20001, "mpich": 451}
REPORT_SECONDS = 20


def expected_rows(n):
    """Mirrors comm_many.c's loop: (folded, memberships, {op: (calls, bytes)}) per row, and
    the creating calls on W, summed over the 4 ranks."""
    it = range(n)
    dups = sum(1 for i in it if i % 3 == 0)
    splits = sum(1 for i in it if i % 3 == 1)
    creates = sum(1 for i in it if i % 3 == 2)
    nested = sum(1 for i in it if i % 300 == 150)
    reduced = {k: sum(1 for i in it if i % 10 == 0 and i % 3 == k) for k in range(3)}
    sendrecvs = sum(1 for i in it if i % 60 == 0)
    rows = {
        "W_d*": (dups + nested, 4 * (dups + nested),
                 {"MPI_Comm_free": (4 * (dups + nested), 0),
                  "MPI_Allreduce": (4 * reduced[0], 16 * reduced[0]),
                  "MPI_Sendrecv": (4 * sendrecvs, 4 * 32 * sendrecvs),
                  "MPI_Comm_split": (4 * nested, 0)}),
        "W_s*.0": (splits, 2 * splits, {"MPI_Comm_free": (2 * splits, 0),
                                        "MPI_Allreduce": (2 * reduced[1], 8 * reduced[1])}),
        "W_s*.1": (splits, 2 * splits, {"MPI_Comm_free": (2 * splits, 0),
                                        "MPI_Allreduce": (2 * reduced[1], 8 * reduced[1])}),
        "W_c*.0": (creates, 3 * creates, {"MPI_Comm_free": (3 * creates, 0),
                                          "MPI_Allreduce": (3 * reduced[2], 12 * reduced[2])}),
        "W_d*_s*.0": (nested, 2 * nested, {"MPI_Comm_free": (2 * nested, 0),
                                           "MPI_Allreduce": (2 * nested, 8 * nested)}),
        "W_d*_s*.2": (nested, 2 * nested, {"MPI_Comm_free": (2 * nested, 0),
                                           "MPI_Allreduce": (2 * nested, 8 * nested)}),
    }
    on_world = {"MPI_Comm_dup": 4 * (dups + nested), "MPI_Comm_split": 4 * splits,
                "MPI_Comm_create": 4 * creates}
    return rows, on_world, sendrecvs


def check_profile(prof, n):
    rows, on_world, sendrecvs = expected_rows(n)
    folded = {name for name, c in prof.comms.items() if c.is_folded}
    assert folded == set(rows)
    members = {"W_d*": "0-3", "W_s*.0": "0,2", "W_s*.1": "1,3", "W_c*.0": "0-2",
               "W_d*_s*.0": "0-1", "W_d*_s*.2": "2-3"}
    parents = {"W_d*_s*.0": "W_d*", "W_d*_s*.2": "W_d*"}
    for name, (count, memberships, ops) in rows.items():
        c = prof.comms[name]
        assert (c.folded, c.memberships, c.members, c.parent, c.freed) == \
            (count, memberships, members[name], parents.get(name, "W"), 1), name
        assert {op: (s.calls, s.bytes) for op, s in
                ((s.op, s) for s in prof.comm_ops(name))} == ops, name
    # nothing else left behind: W, SELF, "-" and the rows
    # (MPI_COMM_SELF of each rank, unused: in the rank files only, since format 2.10)
    assert set(prof.comms) == set(rows) | {"W", "-"}
    for op, calls in on_world.items():
        assert prof.ops[("W", op)].calls == calls, op
    d = prof.comms["W_d*"]
    assert (d.sent_msgs, d.sent_bytes, d.recv_msgs, d.recv_bytes) == \
        (4 * sendrecvs, 64 * sendrecvs, 4 * sendrecvs, 64 * sendrecvs)
    for info in prof.ranks:
        assert (info.counters["comm_table_full"], info.counters["unknown_comms"],
                info.counters["tree_full"]) == (0, 0, 0), info.rank


def pcomm_totals(prof):
    """The folded rows' calls in the call trees (pcomm lines), summed over threads and ranks."""
    totals = {}
    for paths in prof.callpaths.values():
        for thread in paths.threads.values():
            for node in thread.nodes:
                for pc in node.comms:
                    key = (pc.comm, node.op)
                    totals[key] = totals.get(key, 0) + pc.calls
    return totals


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return {}


def run_many(mpi, runs, tmp_path_factory, n, keep="0"):
    key = (mpi.name, n, keep)
    if key not in runs:
        out = tmp_path_factory.mktemp(f"many-{mpi.name}-{n}") / "prof"
        mpi.run(4, [mpi.prog("comm_many"), str(n)], out, timeout=600,
                pathscope_args=["--comm-keep", keep] if keep else [])
        runs[key] = out
    return runs[key]


def test_folded_rows_exact(mpi, runs, tmp_path_factory):
    n = ITERATIONS[mpi.name]
    out = run_many(mpi, runs, tmp_path_factory, n)
    prof = load_profile(out)
    assert prof.source == "profile"
    check_profile(prof, n)
    # the call trees carry the rows too: every call of the op lines, none lost
    totals = pcomm_totals(prof)
    rows, _, _ = expected_rows(n)
    for name, (_, _, ops) in rows.items():
        for op, (calls, _) in ops.items():
            assert totals.get((name, op)) == calls, (name, op)


def test_rank_files_merge_alike(mpi, runs, tmp_path_factory):
    """Without profile.tsv the reader merges the rank files' rows by the same rules."""
    n = ITERATIONS[mpi.name]
    out = run_many(mpi, runs, tmp_path_factory, n)
    copy = out.parent / "ranks-only"
    shutil.copytree(out, copy)
    (copy / "profile.tsv").unlink()
    prof = load_profile(copy)
    assert prof.source == "ranks"
    check_profile(prof, n)


def test_bounded_files_and_quick_report(mpi, runs, tmp_path_factory):
    """The files do not grow with the number of communicators (only the counts' digits do),
    and the report reads them quickly."""
    big = ITERATIONS[mpi.name]
    small = 301
    out_big = run_many(mpi, runs, tmp_path_factory, big)
    out_small = run_many(mpi, runs, tmp_path_factory, small)
    for name in ["profile.tsv"] + [f"rank {r}" for r in range(4)]:
        size_big, size_small = (os.path.getsize(o / name) if name == "profile.tsv" else
                                rank_text_size(o, int(name[5:])) for o in (out_big, out_small))
        assert size_big < 64 * 1024, name
        assert abs(size_big - size_small) < 2048, (name, size_small, size_big)
    started = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "pathscope", "report", str(out_big)],
                       capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=str(ROOT / "python")))
    elapsed = time.monotonic() - started
    assert p.returncode == 0, p.stderr
    assert elapsed < REPORT_SECONDS
    rows, _, _ = expected_rows(big)
    count = rows["W_d*"][0]
    assert (f"W_d*  folded: {count} freed communicators ({4 * count} memberships) of size 4 "
            f"or less, members 0-3 together") in p.stdout


def test_default_keep(mpi, runs, tmp_path_factory):
    """By default (PATHSCOPE_COMM_KEEP 256) a freed communicator whose number M is at most 256
    keeps its name; the later ones fold: each kind's named ones and its row's count add up to
    exactly the communicators created."""
    n = 301
    prof = load_profile(run_many(mpi, runs, tmp_path_factory, n, keep=""))
    rows, _, _ = expected_rows(n)
    kinds = {"W_d*": r"W_d(\d+)", "W_s*.0": r"W_s(\d+)\.0", "W_s*.1": r"W_s(\d+)\.1",
             "W_c*.0": r"W_c(\d+)\.0", "W_d*_s*.0": r"W_d\d+_s(\d+)\.0",
             "W_d*_s*.2": r"W_d\d+_s(\d+)\.2"}
    for row, pattern in kinds.items():
        kept = [int(m.group(1)) for m in (re.fullmatch(pattern, name) for name in prof.comms) if m]
        folded = prof.comms[row].folded if row in prof.comms else 0
        assert kept and max(kept) <= 256, row
        assert len(kept) + folded == rows[row][0], row
        assert all(prof.comms[name].freed == 1 for name in prof.comms
                   if re.fullmatch(pattern, name)), row
    assert prof.comms["W_d*"].folded > 0
