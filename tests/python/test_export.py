"""pathscope export: exact CSV and JSON for the hand-written sample profile."""
import io
import json
from pathlib import Path

import pytest

from pathscope.cli import main
from pathscope.export import export
from pathscope.export.tables import DEFAULT_TABLE, TABLES
from pathscope.reader import load_profile
from pathscope_samples import rank_rows, write_profile, write_sample

COMM_OPS_CSV = """\
comm,size,op,calls,bytes,time_min_s,time_mean_s,time_max_s,rank_min,rank_max,nranks,time_sum_s,hist
-,0,MPI_Wtime,15,0,0.000001,0.000001,0.000001,0,0,2,0.000002,-
W,3,MPI_Comm_split,3,0,0.01,0.03,0.04,2,0,3,0.09,-
W,3,MPI_Recv,3,3072,0.1,0.166666667,0.3,0,1,3,0.5,11:3
W,3,MPI_Send,3,3072,0.2,0.25,0.3,1,0,2,0.5,11:3
W_s1.0,2,MPI_Recv,2,200,0.00004,0.00005,0.00006,1,0,2,0.0001,7:2
W_s1.0,2,MPI_Send,2,200,0.00005,0.00006,0.00007,0,1,2,0.00012,7:2
W_s1.2,1,MPI_Comm_free,1,0,0.0000005,0.0000005,0.0000005,2,2,1,0.0000005,-
"""

OPS_CSV = """\
op,calls,bytes,time_min_s,time_mean_s,time_max_s,rank_min,rank_max,nranks,time_sum_s,hist
MPI_Comm_free,1,0,0.0000005,0.0000005,0.0000005,2,2,1,0.0000005,-
MPI_Comm_split,3,0,0.01,0.03,0.04,2,0,3,0.09,-
MPI_Recv,5,3272,0.1,0.1667,0.30004,2,1,3,0.5001,"7:2,11:3"
MPI_Send,5,3272,0.20007,0.25006,0.30005,1,0,2,0.50012,"7:2,11:3"
MPI_Wtime,15,0,0.000001,0.000001,0.000001,0,0,2,0.000002,-
"""

COMMS_CSV = """\
name,size,remote_size,parent,creator,freed,members,hosts,topology,sent_msgs,sent_bytes,recv_msgs,recv_bytes,folded,memberships
-,0,0,-,-,0,-,-,-,0,0,0,0,0,0
W,3,0,-,-,0,0-2,node[01-02],-,3,3072,3,3072,0,0
W_s1.0,2,0,W,MPI_Comm_split,1,0-1,node[01-02],-,2,200,2,200,0,0
W_s1.2,1,0,W,MPI_Comm_split,0,2,node02,cart ndims=1 dims=1 periods=0 reorder=0,0,0,0,0,0,0
"""

RANKS_CSV = """\
rank,host,status,wall_s,mpi_s,mpi_fraction,pid
0,node01,complete,2,0.5,0.25,1000
1,node02,complete,2.1,0.7,0.333333,1001
2,node02,complete,1.9,0.1,0.052632,1002
"""


@pytest.fixture
def profile(tmp_path):
    return load_profile(write_sample(tmp_path / "prof"))


@pytest.mark.parametrize("table, expected", [
    ("comm-ops", COMM_OPS_CSV), ("ops", OPS_CSV), ("comms", COMMS_CSV), ("ranks", RANKS_CSV)])
def test_csv(profile, table, expected):
    out = io.StringIO()
    export(profile, table, "csv", out)
    assert out.getvalue() == expected


def test_csv_from_rank_files_is_the_same(tmp_path):
    out = io.StringIO()
    export(load_profile(write_sample(tmp_path / "prof", with_profile=False)), "comm-ops", "csv",
           out)
    assert out.getvalue() == COMM_OPS_CSV


def test_json_comm_ops(profile):
    out = io.StringIO()
    export(profile, "comm-ops", "json", out)
    rows = json.loads(out.getvalue())
    assert len(rows) == 7
    assert list(rows[0]) == COMM_OPS_CSV.splitlines()[0].split(",")
    assert rows[3] == {"comm": "W", "size": 3, "op": "MPI_Send", "calls": 3, "bytes": 3072,
                       "time_min_s": 0.2, "time_mean_s": 0.25, "time_max_s": 0.3,
                       "rank_min": 1, "rank_max": 0, "nranks": 2, "time_sum_s": 0.5,
                       "hist": {"11": 3}}
    assert rows[0]["hist"] == {}


def test_json_comms_and_ranks(profile):
    out = io.StringIO()
    export(profile, "comms", "json", out)
    comms = {c["name"]: c for c in json.loads(out.getvalue())}
    assert comms["W_s1.0"] == {"name": "W_s1.0", "size": 2, "remote_size": 0, "parent": "W",
                               "creator": "MPI_Comm_split", "freed": 1, "members": "0-1",
                               "hosts": "node[01-02]", "topology": "-", "sent_msgs": 2,
                               "sent_bytes": 200, "recv_msgs": 2, "recv_bytes": 200,
                               "folded": 0, "memberships": 0}
    out = io.StringIO()
    export(profile, "ranks", "json", out)
    assert json.loads(out.getvalue())[1] == {"rank": 1, "host": "node02", "status": "complete",
                                             "wall_s": 2.1, "mpi_s": 0.7,
                                             "mpi_fraction": 0.333333, "pid": 1001}


def test_missing_rank_in_ranks_table(tmp_path):
    d = write_sample(tmp_path / "prof", with_profile=False)
    (d / "ranks" / "rank-000001.tsv").unlink()
    out = io.StringIO()
    export(load_profile(d), "ranks", "json", out)
    assert json.loads(out.getvalue())[1] == {"rank": 1, "host": None, "status": "missing",
                                             "wall_s": None, "mpi_s": None,
                                             "mpi_fraction": None, "pid": None}


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_written_in_chunks_the_same(profile, monkeypatch, fmt):
    """The exports write a table in chunks of rows (bounded memory): chunks of 2 rows give
    the same text as one chunk."""
    import pathscope.frames

    whole = io.StringIO()
    export(profile, "comm-ops", fmt, whole)
    monkeypatch.setattr(pathscope.frames, "CHUNK_ROWS", 2)
    chunked = io.StringIO()
    export(profile, "comm-ops", fmt, chunked)
    assert chunked.getvalue() == whole.getvalue()
    if fmt == "csv":
        assert whole.getvalue() == COMM_OPS_CSV


def test_untimed_operations_have_no_ranks_at_the_extremes(tmp_path):
    """MPI_Comm_rank is counted, not timed (time 0 on every rank): rank_min and rank_max
    are empty in CSV and null in JSON; a timed operation of the same run keeps them."""
    ops = [("W", "MPI_Comm_rank", 2, 0, 0, "-"), ("W", "MPI_Barrier", 1, 0, 5000, "-")]
    ranks = {r: rank_rows(r, 2, "complete", "h", 10_000, 5000, ops=ops, version="2.0",
                          comms=[("W", 2, 0, r, "-", "-", 0, "0-1", "-", 0, 0, 0, 0)])
             for r in (0, 1)}
    profile = load_profile(write_profile(tmp_path / "prof", None, ranks))
    out = io.StringIO()
    export(profile, "comm-ops", "csv", out)
    assert out.getvalue().splitlines()[1:] == [
        "W,2,MPI_Barrier,2,0,0.000005,0.000005,0.000005,0,0,2,0.00001,-",
        "W,2,MPI_Comm_rank,4,0,0,0,0,,,2,0,-"]
    out = io.StringIO()
    export(profile, "ops", "json", out)
    untimed = json.loads(out.getvalue())[1]
    assert (untimed["op"], untimed["rank_min"], untimed["rank_max"]) == (
        "MPI_Comm_rank", None, None)


def test_cli_export_stdout_and_file(tmp_path, capsys):
    d = write_sample(tmp_path / "prof")
    assert main(["export", str(d), "--table", "comm-ops", "--format", "csv"]) == 0
    assert capsys.readouterr().out == COMM_OPS_CSV
    target = tmp_path / "comms.json"
    assert main(["export", str(d), "--table", "comms", "--format", "json", "-o",
                 str(target)]) == 0
    assert capsys.readouterr().out == ""
    assert json.loads(target.read_text())[1]["name"] == "W"


def test_cli_export_dash_is_stdout(tmp_path, capsys, monkeypatch):
    """`-o -` writes to stdout (no file named '-'); a binary format refuses it."""
    d = write_sample(tmp_path / "prof")
    monkeypatch.chdir(tmp_path)
    assert main(["export", str(d), "--table", "comm-ops", "--format", "csv", "-o", "-"]) == 0
    assert capsys.readouterr().out == COMM_OPS_CSV
    assert not (tmp_path / "-").exists()
    assert main(["export", str(d), "--format", "pprof", "-o", "-"]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "pathscope export: --format pprof needs -o FILE (it cannot go to stdout) "
        "(try 'pathscope export --help')")
    assert not (tmp_path / "-").exists()


def test_cli_export_unwritable_output(tmp_path, capsys):
    d = write_sample(tmp_path / "prof")
    (tmp_path / "file").write_text("")
    bad = tmp_path / "file" / "x.csv"
    assert main(["export", str(d), "--table", "ops", "--format", "csv", "-o", str(bad)]) == 2
    assert capsys.readouterr().err == f"pathscope: cannot write '{bad}': Not a directory\n"


def test_cli_export_unknown_table(tmp_path, capsys):
    d = write_sample(tmp_path / "prof")
    assert main(["export", str(d), "--table", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("pathscope export: argument --table: invalid choice: 'nope'")


def test_the_user_guide_lists_exactly_the_tables():
    """docs/user-guide.md's table of `pathscope export --table` has one row per table of
    the registry (pathscope.export.tables.TABLES), in its order, with its columns."""
    guide = (Path(__file__).resolve().parents[2] / "docs" / "user-guide.md").read_text()
    lines = guide.splitlines()
    start = lines.index("| table | one row per | columns |") + 2
    rows = []
    for line in lines[start:]:
        if not line.startswith("| "):
            break
        name, _, columns = [cell.strip() for cell in line.strip(" |").split(" | ")]
        rows.append((name.split("`")[1], columns.split("`")[1].split(","),
                     "(default)" in name))
    assert [(name, columns) for name, columns, _ in rows] == [
        (spec.name, spec.columns) for spec in TABLES.values()]
    assert [name for name, _, default in rows if default] == [DEFAULT_TABLE]
