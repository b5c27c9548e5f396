"""pathscope diff (python/pathscope/diff.py) on profiles with known values: the hybrid fixture
(data/hybrid/README.md) against a copy with a known slowdown written into its rank 0 file,
a reduced profile against its own rank files, and the command line's output, exit statuses
and error lines.  tests/e2e/test_diff_runs.py diffs two real runs."""
import csv
import io
import json
import shutil
import subprocess
import sys

import pytest

import pathscope
from pathscope.diff import diff, path_rows, regressions
from pathscope_samples import HYBRID, copy_hybrid, read_rows, write_rows, write_sample
from test_cli import pathscope as cli

COMPUTE = ("_start", "__libc_start_call_main", "main", "solve / update", "compute")
MAIN = ("_start", "__libc_start_call_main", "main")


def slowed(directory):
    """The hybrid fixture with rank 0's compute 0.5 s slower (1.1 -> 1.6 s sampled) and its
    MPI_Recv on W taking twice the calls, time and bytes (5 -> 10, 0.15 -> 0.3 s, 5120 ->
    10240 B); the thread's elapsed time grows by the 0.65 s."""
    copy_hybrid(directory)
    f = directory / "ranks" / "rank-000000.tsv"
    rows = read_rows(f)
    for r in rows:
        if r[:3] == ["node", "0", "5"]:
            r[8:10] = ["1600000000", "160"]
        elif r[:2] == ["thread", "0"]:
            r[3] = "2650000000"
        elif r[:3] == ["node", "0", "11"]:
            r[7], r[10], r[11] = "10", "300000000", "10240"
        elif r[:4] == ["pcomm", "0", "11", "W"]:
            r[4:7] = ["10", "300000000", "10240"]
    write_rows(f, rows)
    return directory


def key(row):
    return (tuple(row["path"]), row["comm"], row["op"])


def test_rows_of_the_hybrid_fixture():
    """Exclusive values per path of names (README.md): MPI operations per communicator under
    the path that calls them; a path of zeros (call frames) has no row."""
    rows = {(tuple(r["path"]), r["comm"], r["op"]): (r["time_ns"], r["bytes"], r["calls"])
            for r in path_rows(pathscope.open(HYBRID)).to_dict("records")}
    assert rows == {
        (COMPUTE, "", ""): (2_269_000_000, 0, 0),
        (COMPUTE + ("libkernels.so+0x1a4f",), "", ""): (300_000_000, 0, 0),
        (MAIN + ("solve",), "W", "MPI_Allreduce"): (750_000_000, 160, 20),
        (MAIN + ("solve",), "W_d1", "MPI_Allreduce"): (150_000_000, 160, 20),
        (MAIN, "W", "MPI_Recv"): (150_000_000, 5120, 5),
        (MAIN, "W", "MPI_Send"): (10_000_000, 5120, 5),
        # main's own samples: fn 0x401300 (194 + 100 ms)
        (MAIN, "", ""): (294_000_000, 0, 0),
        (("[failed unwind]", "compute"), "", ""): (30_000_000, 0, 0),
        (("[not unwound]",), "", ""): (135_000_001, 0, 0),
        (("[not unwound]",), "-", "MPI_Finalize"): (10_000_000, 0, 2),
        (("[not unwound]",), "W", "MPI_Comm_dup"): (2_000_000, 0, 2),
        (("__clone3", "start_thread", "worker"), "", ""): (2_200_000_000, 0, 0),
        (("__clone3", "start_thread", "worker", "compute"), "", ""): (400_000_000, 0, 0),
    }


def test_the_slowdown_comes_first(tmp_path):
    d = diff(pathscope.open(HYBRID), pathscope.open(slowed(tmp_path / "new")))
    rows = d.rows.to_dict("records")
    assert len(rows) == 13
    first, second = rows[0], rows[1]
    assert key(first) == (COMPUTE, "", "")
    assert (first["base_time_ns"], first["new_time_ns"], first["delta_time_ns"]) == (
        2_269_000_000, 2_769_000_000, 500_000_000)
    assert first["time_pct"] == pytest.approx(500 / 2269 * 100)
    assert key(second) == (MAIN, "W", "MPI_Recv")
    assert (second["delta_time_ns"], second["delta_bytes"], second["delta_calls"],
            second["time_pct"]) == (150_000_000, 5120, 5, 100.0)
    assert all(r["delta_time_ns"] == r["delta_bytes"] == r["delta_calls"] == 0
               for r in rows[2:])
    # the unchanged rows by path
    assert [key(r)[0][0] for r in rows[2:5]] == ["[failed unwind]", "[not unwound]",
                                                  "[not unwound]"]
    assert d.total == {"base_time_ns": 6_700_000_001, "new_time_ns": 7_350_000_001,
                       "delta_time_ns": 650_000_000, "base_bytes": 10_560,
                       "new_bytes": 15_680, "delta_bytes": 5120, "base_calls": 54,
                       "new_calls": 59, "delta_calls": 5,
                       "time_pct": pytest.approx(650_000_000 / 6_700_000_001 * 100)}


def test_regressions_above_a_percentage_and_a_floor(tmp_path):
    d = diff(pathscope.open(HYBRID), pathscope.open(slowed(tmp_path / "new")))
    compute = ("_start > __libc_start_call_main > main > solve / update > compute: "
               "time 2.269000 s -> 2.769000 s (+22.0%)")
    recv = ("_start > __libc_start_call_main > main > MPI_Recv on W: "
            "time 0.150000 s -> 0.300000 s (+100.0%)")
    total = "total time 6.700000 s -> 7.350000 s (+9.7%)"
    assert regressions(d, 20.0) == [compute, recv]
    assert regressions(d, 9.0) == [total, compute, recv]
    assert regressions(d, 25.0) == [recv]
    assert regressions(d, 100.0) == []
    # the floor: MPI_Recv's 0.3 s is 4.5% of BASE's total
    assert regressions(d, 25.0, floor=4.4) == [recv]
    assert regressions(d, 25.0, floor=4.5) == []
    # backwards everything got faster
    back = diff(pathscope.open(tmp_path / "new"), pathscope.open(HYBRID))
    assert back.rows.loc[0, "delta_time_ns"] == -500_000_000
    assert regressions(back, 0.0) == []


def test_a_path_only_new_has(tmp_path):
    """compute's fn node moved under a new frame name: its old path is gone (-100%), the new
    one is new (no percentage) and a regression at any PCT once above the floor."""
    new = copy_hybrid(tmp_path / "new")
    symbols = new / "symbols.tsv"
    symbols.write_text(symbols.read_text().replace(
        "0x401100\tfn\t0\tcompute", "0x401100\tfn\t0\tcompute_v2"))
    d = diff(pathscope.open(HYBRID), pathscope.open(new))
    by_key = {key(r): r for r in d.rows.to_dict("records")}
    gone, added = by_key[(COMPUTE, "", "")], by_key[(COMPUTE[:-1] + ("compute_v2",), "", "")]
    assert (gone["new_time_ns"], gone["time_pct"]) == (0, -100.0)
    assert added["base_time_ns"] == 0 and added["time_pct"] != added["time_pct"]   # NaN
    assert regressions(d, 1000.0) == [
        "_start > __libc_start_call_main > main > solve / update > compute_v2: "
        "time 0.000000 s -> 2.269000 s (new)",
        "__clone3 > start_thread > worker > compute_v2: time 0.000000 s -> 0.400000 s (new)"]


def test_a_reduced_profile_diffs_as_its_rank_files(tmp_path):
    """tree.tsv's sums give the rows the rank files give: nothing changed."""
    from conftest import ROOT
    d = tmp_path / "prof"
    subprocess.run([sys.executable, ROOT / "bench" / "synth_profile.py", d, "--ranks", "6",
                    "--paths", "80", "--rank-files"], check=True, capture_output=True)
    reduced = tmp_path / "reduced"
    shutil.copytree(d, reduced, ignore=shutil.ignore_patterns("ranks"))
    files, tree = pathscope.open(d), pathscope.open(reduced)
    assert files.per_rank_known and not tree.per_rank_known
    result = diff(files, tree)
    assert len(result.rows) == 43                # (deterministic: synth_profile.py)
    assert (result.rows["delta_time_ns"] == 0).all() and (result.rows["delta_bytes"] == 0).all()
    assert (result.rows["delta_calls"] == 0).all() and result.total["delta_time_ns"] == 0
    assert (result.rows["comm"] != "").any()


# ---- the command line ------------------------------------------------------------------------

def test_cli_exit_statuses(tmp_path):
    new = slowed(tmp_path / "new")
    p = cli("diff", HYBRID, new, "--fail-above", "20", "--top", "2")
    assert p.returncode == 4
    assert p.stderr.splitlines() == [
        "pathscope: regression: _start > __libc_start_call_main > main > solve / update > "
        "compute: time 2.269000 s -> 2.769000 s (+22.0%)",
        "pathscope: regression: _start > __libc_start_call_main > main > MPI_Recv on W: "
        "time 0.150000 s -> 0.300000 s (+100.0%)",
        "pathscope: 2 regression(s) above 20% (exit status 4)"]
    lines = p.stdout.splitlines()
    assert "solve / update > compute" in lines[4] and "+0.500000 s" in lines[4]
    assert "MPI_Recv" in lines[5] and "+100.0%" in lines[5]
    assert lines[-1] == "2 of 13 rows by impact (--top N shows more; --csv and --json write them all)"
    assert cli("diff", HYBRID, new, "--fail-above", "100").returncode == 0
    assert cli("diff", HYBRID, new, "--fail-above", "25", "--floor", "4.5").returncode == 0
    p = cli("diff", HYBRID, new)
    assert (p.returncode, p.stderr) == (0, "")


def test_cli_csv_and_json(tmp_path):
    new = slowed(tmp_path / "new")
    p = cli("diff", HYBRID, new, "--csv")
    rows = list(csv.DictReader(io.StringIO(p.stdout)))
    assert p.returncode == 0 and len(rows) == 13
    assert rows[0] == {"path": " > ".join(COMPUTE), "comm": "", "op": "",
                       "base_time_ns": "2269000000", "new_time_ns": "2769000000",
                       "delta_time_ns": "500000000", "base_bytes": "0", "new_bytes": "0",
                       "delta_bytes": "0", "base_calls": "0", "new_calls": "0",
                       "delta_calls": "0", "time_pct": "22.036139"}
    p = cli("diff", HYBRID, new, "--json", "--fail-above", "50")
    doc = json.loads(p.stdout)
    assert p.returncode == 4
    assert doc["base"] == str(HYBRID) and doc["new"] == str(new)
    assert doc["rows"][1]["path"] == list(MAIN) and doc["rows"][1]["op"] == "MPI_Recv"
    assert doc["total"]["delta_time_ns"] == 650_000_000
    assert doc["regressions"] == [
        "_start > __libc_start_call_main > main > MPI_Recv on W: "
        "time 0.150000 s -> 0.300000 s (+100.0%)"]
    assert "regressions" not in json.loads(cli("diff", HYBRID, new, "--json").stdout)


@pytest.mark.parametrize("args, message", [
    (["--fail-above", "x"], "argument --fail-above: invalid percentage value: 'x'"),
    (["--fail-above", "-5"], "argument --fail-above: invalid percentage value: '-5'"),
    (["--fail-above", "nan"], "argument --fail-above: invalid percentage value: 'nan'"),
    (["--floor", "inf"], "argument --floor: invalid percentage value: 'inf'"),
    (["--csv", "--json"], "argument --json: not allowed with argument --csv"),
])
def test_cli_bad_flags(args, message):
    p = cli("diff", HYBRID, HYBRID, *args)
    assert (p.returncode, p.stdout) == (2, "")
    assert p.stderr == f"pathscope diff: {message} (try 'pathscope diff --help')\n"


def test_cli_bad_directories(tmp_path):
    p = cli("diff", tmp_path / "nope", HYBRID)
    assert (p.returncode, p.stdout) == (2, "")
    assert p.stderr == f"pathscope: profile directory not found: {tmp_path / 'nope'}\n"
    empty = tmp_path / "empty"
    empty.mkdir()
    p = cli("diff", HYBRID, empty)
    assert p.returncode == 2
    assert p.stderr == (f"pathscope: not a pathscope profile directory: {empty} (no "
                        f"profile.tsv and no ranks/rank-*.tsv)\n")
    (tmp_path / "file").write_text("x\n")
    p = cli("diff", HYBRID, tmp_path / "file")
    assert p.stderr == f"pathscope: not a profile directory: {tmp_path / 'file'}\n"
    flat = write_sample(tmp_path / "flat")               # format 1.0: no call paths
    p = cli("diff", flat, HYBRID)
    assert (p.returncode, p.stderr) == (2, f"pathscope: no call-path data in {flat} (profile "
                                           f"format 1.x or sampling and unwinding were off)\n")
    p = cli("diff", "", HYBRID)
    assert p.stderr == ("pathscope diff: BASE and NEW: empty value "
                        "(try 'pathscope diff --help')\n")
