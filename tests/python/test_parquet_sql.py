"""`pathscope export --format parquet` (python/pathscope/export/parquet.py) and `pathscope sql`
(python/pathscope/sql.py): every table read back with pyarrow equals its frame exactly, and
DuckDB queries over profiles, Parquet exports and both at once give the hybrid fixture's known
values (tests/python/data/hybrid/README.md); bad input gets one exact line."""
import json
import subprocess
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

import pathscope
from pathscope.export import parquet
from pathscope_samples import HYBRID, write_sample

ROOT = Path(__file__).resolve().parents[2]
PATHSCOPE = ROOT / "bin" / "pathscope"
TABLES = ["comm-ops", "ops", "comms", "ranks", "warnings", "threads", "rankvec",
          "heap-timeline", "heap-ranks", "kernel-syscalls", "kernel-threads", "probes",
          "probe-refusals", "nodes", "metrics", "node_stats"]
VIEWS = ", ".join(t.replace("-", "_") for t in TABLES)


def cli(*args, env=None):
    return subprocess.run([str(PATHSCOPE), *map(str, args)], capture_output=True, text=True,
                          timeout=120, env=env)


@pytest.fixture(scope="module")
def hybrid_parquet(tmp_path_factory):
    out = tmp_path_factory.mktemp("pq") / "hybrid"
    p = cli("export", HYBRID, "--format", "parquet", "-o", out)
    assert p.returncode == 0, p.stderr
    return out


@pytest.mark.parametrize("which", ["hybrid", "sample"])
def test_round_trip_every_table_exactly(tmp_path, which):
    d = HYBRID if which == "hybrid" else write_sample(tmp_path / "prof")
    frames = pathscope.open(d)
    manifest = parquet.write(frames, tmp_path / "out")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(
        [f"{t}.parquet" for t in TABLES] + ["manifest.json"])
    assert json.loads((tmp_path / "out" / "manifest.json").read_text()) == manifest
    assert list(manifest["tables"]) == TABLES
    for name in TABLES:
        want = getattr(frames, name) if name in parquet.CALL_TREE_TABLES else frames.table(name)
        got = pq.read_table(tmp_path / "out" / f"{name}.parquet").to_pandas(
            types_mapper=pd.ArrowDtype)
        pd.testing.assert_frame_equal(got, want, check_exact=True, obj=name)
        assert manifest["tables"][name] == {"file": f"{name}.parquet", "rows": len(want)}
    again = parquet.read_parquet(tmp_path / "out")
    for name in TABLES:
        assert again[name].equals(pq.read_table(tmp_path / "out" / f"{name}.parquet")
                                  .to_pandas(types_mapper=pd.ArrowDtype))


def test_manifest(hybrid_parquet):
    manifest = json.loads((hybrid_parquet / "manifest.json").read_text())
    assert {k: v for k, v in manifest.items() if k != "tables"} == {
        "layout": "pathscope-parquet", "version": "1.0", "profile": str(HYBRID.resolve()),
        "run_id": None, "program": "solver", "format_version": "2.0"}
    assert manifest["tables"]["comm-ops"] == {"file": "comm-ops.parquet", "rows": 6}
    assert manifest["tables"]["nodes"] == {"file": "nodes.parquet", "rows": 25}


def sql(*args):
    p = cli("sql", *args)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_sql_over_a_profile_csv():
    out = sql(HYBRID, "SELECT comm, op, calls, bytes, rank_max FROM comm_ops ORDER BY comm, op",
              "--csv")
    assert out == ("comm,op,calls,bytes,rank_max\n"
                   "-,MPI_Finalize,2,0,0\n"
                   "W,MPI_Allreduce,20,160,1\n"
                   "W,MPI_Comm_dup,2,0,0\n"
                   "W,MPI_Recv,5,5120,0\n"
                   "W,MPI_Send,5,5120,1\n"
                   "W_d1,MPI_Allreduce,20,160,1\n")


def test_sql_call_tree_tables():
    out = sql(HYBRID, "SELECT n.name, s.sum, s.min, s.min_rank, s.max, s.max_rank FROM nodes n "
                      "JOIN node_stats s USING (node) WHERE s.metric = 'mpi_ns' "
                      "AND n.kind = 'mpi' ORDER BY s.sum DESC", "--csv")
    assert out == ("name,sum,min,min_rank,max,max_rank\n"
                   "MPI_Allreduce,900000000,300000000,0,600000000,1\n"
                   "MPI_Recv,150000000,0,1,150000000,0\n"
                   "MPI_Send,10000000,0,0,10000000,1\n"
                   "MPI_Finalize,10000000,5000000,0,5000000,0\n"
                   "MPI_Comm_dup,2000000,1000000,0,1000000,0\n")
    out = sql(HYBRID, "SELECT rank, sum(value) AS t FROM metrics WHERE metric = 'sample_ns' "
                      "GROUP BY rank ORDER BY rank", "--csv")
    # rank 0: 1100+200+194+30+20 (thread 0) + 1200+250+50; rank 1: ... + 50.000001 ms
    assert out == "rank,t\n0,3044000000\n1,2584000001\n"


def test_sql_ensemble_profile_column(tmp_path, hybrid_parquet):
    other = tmp_path / "copy"
    p = cli("export", HYBRID, "--format", "parquet", "-o", other)
    assert p.returncode == 0, p.stderr
    out = sql(HYBRID, hybrid_parquet, other,
              "SELECT profile, sum(calls) AS calls, sum(bytes) AS bytes FROM comm_ops "
              "GROUP BY profile ORDER BY profile", "--csv")
    want = sorted(f"{d},54,10560" for d in (HYBRID, hybrid_parquet, other))
    assert out == "profile,calls,bytes\n" + "".join(f"{line}\n" for line in want)
    out = sql(HYBRID, "SELECT profile, hist FROM comm_ops WHERE op = 'MPI_Recv'", "--csv")
    assert out == f'profile,hist\n{HYBRID},"[{{""bin"":11,""count"":5}}]"\n'


def test_sql_rich_table():
    p = cli("sql", HYBRID, "SELECT op, sum(calls) AS calls FROM comm_ops GROUP BY op "
                           "ORDER BY calls DESC, op LIMIT 2",
            env={"PATH": "/usr/bin:/bin", "COLUMNS": "60", "TERM": "dumb"})
    assert p.returncode == 0, p.stderr
    assert p.stdout == (" op            ┃ calls \n"
                        "━━━━━━━━━━━━━━━╇━━━━━━━\n"
                        " MPI_Allreduce │    40 \n"
                        " MPI_Recv      │     5 \n"
                        "(2 rows)\n")


@pytest.mark.parametrize("args, message", [
    (["SELEC 1"], 'pathscope: SQL: Parser Error: syntax error at or near "SELEC"'),
    (["SELECT * FROM comm_opz"], f"pathscope: no table 'comm_opz' (tables: {VIEWS})"),
    (["SELECT nope FROM comms"],
     'pathscope: SQL: Binder Error: Referenced column "nope" not found in FROM clause!'),
])
def test_sql_errors_are_one_line(args, message):
    p = cli("sql", HYBRID, *args)
    assert (p.returncode, p.stdout, p.stderr) == (2, "", message + "\n")


def test_sql_missing_directory_and_bad_parquet(tmp_path):
    p = cli("sql", tmp_path / "nope", "SELECT 1")
    assert (p.returncode, p.stderr) == (
        2, f"pathscope: profile directory not found: {tmp_path / 'nope'}\n")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "manifest.json").write_text('{"layout": "other"}')
    p = cli("sql", tmp_path / "bad", "SELECT 1")
    assert (p.returncode, p.stderr) == (
        2, f"pathscope: {tmp_path / 'bad'}: manifest.json is not a pathscope Parquet "
           f"manifest\n")


def test_sql_over_a_partial_profile_warns(tmp_path):
    d = write_sample(tmp_path / "prof", with_profile=False)
    (d / "ranks" / "rank-000002.tsv").write_text("")
    p = cli("sql", d, "SELECT rank, status FROM ranks ORDER BY rank", "--csv")
    assert (p.returncode, p.stderr) == (0, f"pathscope: warning: incomplete profile {d}: rank 2 "
                                           f"incomplete; its tables hold what there is\n")
    assert p.stdout.splitlines()[3] == "2,unknown"      # (the ranks table's word for an empty file)


def test_parquet_usage_and_output_errors(tmp_path):
    p = cli("export", HYBRID, "--format", "parquet")
    assert (p.returncode, p.stderr) == (2, "pathscope export: --format parquet needs -o DIR "
                                           "(try 'pathscope export --help')\n")
    (tmp_path / "file").write_text("")
    p = cli("export", HYBRID, "--format", "parquet", "-o", tmp_path / "file")
    assert (p.returncode, p.stderr.splitlines()[-1]) == (
        2, f"pathscope: cannot write '{tmp_path / 'file'}': File exists")
