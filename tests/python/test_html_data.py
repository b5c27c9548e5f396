"""`pathscope report --html` without a browser (tests/e2e/test_html_browser.py has the browser):
the page's data for the hand-computed hybrid fixture (tests/python/data/hybrid/README.md), a
reduced profile (bench/synth_profile.py), the per-rank communicator frame, the pinned plotly.js
check and the command line's errors."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import pathscope
from pathscope.report import html

ROOT = Path(__file__).resolve().parents[2]
HYBRID = ROOT / "tests" / "python" / "data" / "hybrid"
PATHSCOPE = ROOT / "bin" / "pathscope"


@pytest.fixture(scope="module")
def hybrid():
    """The page's data as report --html writes it: the tree by function."""
    return html.page_data(pathscope.open(HYBRID))


@pytest.fixture(scope="module")
def by_site():
    """... and as report --call-sites --html writes it."""
    return html.page_data(pathscope.open(HYBRID), call_sites=True)


def metric(data, name):
    return next(m for m in data["tree"]["metrics"] if m["name"] == name)


def test_tree_metrics_of_the_hybrid_fixture_by_call_site(by_site):
    hybrid = by_site
    tree = hybrid["tree"]
    assert hybrid["call_sites"] is True and tree["sites"] == {}
    assert [m["name"] for m in tree["metrics"]] == ["time", "mpi_time", "oncpu_time", "visits",
                                                    "bytes"]
    assert tree["ranks"] == [0, 1] and tree["per_rank"] is True
    assert tree["label"][:6] == ["[all threads]", "_start", "__libc_start_call_main", "main",
                                 "solve / update", "compute"]
    assert tree["where"][5] == "/src/solver/compute.c:10"
    assert tree["where"][7] == "libkernels.so+0x1a4f"           # not resolved: module+offset
    time = metric(hybrid, "time")
    assert sum(time["all"]) == 6_700_000_001
    assert time["all"][5] == 2_269_000_000                      # compute: 1100 + 1169 ms
    # MPI_Allreduce (node 9): 300 ms on rank 0, 600 on rank 1; MPI_Recv (11) on rank 0 only
    mpi = metric(hybrid, "mpi_time")
    r0, r1 = (dict(zip(*mpi["ranks"][r])) for r in ("0", "1"))
    assert (r0[9], r1[9]) == (300_000_000, 600_000_000)
    assert r0[11] == 150_000_000 and 11 not in r1
    assert sum(r0.values()) == 456_000_000 and sum(r1.values()) == 616_000_000
    assert metric(hybrid, "visits")["all"][9] == 40
    assert hybrid["notes"] == []


def test_tree_by_function(hybrid):
    """README.md's tree with main's four call sites (app.c:41, 30, 45, 46), compute's two
    under solve / update (compute.c:10, 15) and worker's two (worker.c:5, 12) merged: one
    node each, the sum of the sites' values; the sites, heaviest first, on the node."""
    tree = hybrid["tree"]
    assert hybrid["call_sites"] is False
    assert list(zip(tree["parent"], tree["label"])) == [
        (-1, "[all threads]"), (0, "_start"), (1, "__libc_start_call_main"), (2, "main"),
        (3, "solve / update"), (4, "compute"), (5, "libkernels.so+0x1a4f"), (3, "solve"),
        (7, "MPI_Allreduce"), (3, "MPI_Recv"), (3, "MPI_Send"), (0, "[failed unwind]"),
        (11, "compute"), (0, "[not unwound]"), (13, "MPI_Finalize"), (13, "MPI_Comm_dup"),
        (0, "__clone3"), (16, "start_thread"), (17, "worker"), (18, "compute")]
    assert tree["where"][3] == "/src/solver/app.c:41"          # the heaviest site's
    assert tree["sites"] == {
        "3": [["/src/solver/app.c:41", 3_469_000_000, 900_000_000],
              ["/src/solver/app.c:30", 294_000_000, 0],
              ["/src/solver/app.c:45", 150_000_000, 150_000_000],
              ["/src/solver/app.c:46", 10_000_000, 10_000_000]],
        "5": [["/src/solver/compute.c:10", 2_269_000_000, 0],
              ["/src/solver/compute.c:15", 300_000_000, 0]],
        "18": [["/src/solver/worker.c:5", 2_200_000_000, 0],
               ["/src/solver/worker.c:12", 400_000_000, 0]]}
    time = metric(hybrid, "time")
    assert sum(time["all"]) == 6_700_000_001
    # main's own samples (fn 0x401300: 194 + 100 ms), compute's (1100 + 1169 ms)
    assert (time["all"][3], time["all"][5]) == (294_000_000, 2_269_000_000)
    mpi = metric(hybrid, "mpi_time")
    r0, r1 = (dict(zip(*mpi["ranks"][r])) for r in ("0", "1"))
    assert (r0[8], r1[8]) == (300_000_000, 600_000_000)
    assert r0[9] == 150_000_000 and 9 not in r1
    assert sum(r0.values()) == 456_000_000 and sum(r1.values()) == 616_000_000


def test_imbalance_by_function(hybrid):
    """main merged holds all of __libc_start_call_main's time: main says it; then worker
    (its two sites) and compute under solve / update (its two)."""
    rows = hybrid["imbalance"]["incl_time"]
    assert [r["node"] for r in rows[:3]] == [3, 18, 5]
    assert rows[0] == {"node": 3, "path": "_start > __libc_start_call_main > main",
                       "sum": 3_923_000_000, "mean": 1_961_500_000.0,
                       "min": 1_944_000_000, "min_rank": 0, "max": 1_979_000_000,
                       "max_rank": 1, "ranks": {"0": 1_944_000_000, "1": 1_979_000_000}}
    assert rows[1]["path"] == "__clone3 > start_thread > worker" and (
        rows[1]["sum"], rows[1]["max"], rows[1]["max_rank"]) == (2_600_000_000,
                                                                 1_450_000_000, 0)


def test_imbalance_time_split_and_comms(by_site):
    hybrid = by_site
    rows = hybrid["imbalance"]["incl_time"]
    # _start is left out: all its time is in __libc_start_call_main
    assert [r["node"] for r in rows[:3]] == [2, 3, 21]
    assert rows[0] == {"node": 2, "path": "_start > __libc_start_call_main",
                       "sum": 3_923_000_000, "mean": 1_961_500_000.0,
                       "min": 1_944_000_000, "min_rank": 0, "max": 1_979_000_000,
                       "max_rank": 1, "ranks": {"0": 1_944_000_000, "1": 1_979_000_000}}
    allreduce = next(r for r in hybrid["imbalance"]["incl_mpi"] if r["node"] == 9)
    assert (allreduce["min"], allreduce["min_rank"], allreduce["max"],
            allreduce["max_rank"]) == (300_000_000, 0, 600_000_000, 1)
    assert hybrid["split"][0] == {"row": "time", "sum": 6_700_000_000, "min": 3_200_000_000,
                                  "min_rank": 1, "mean": 3_350_000_000.0,
                                  "max": 3_500_000_000, "max_rank": 0}
    comms = hybrid["comms"]
    assert list(zip(comms["comm"], comms["op"], comms["calls"])) == [
        ("-", "MPI_Finalize", 2), ("W", "MPI_Allreduce", 20), ("W", "MPI_Comm_dup", 2),
        ("W", "MPI_Recv", 5), ("W", "MPI_Send", 5), ("W_d1", "MPI_Allreduce", 20)]
    assert comms["rank_note"] == "" and len(comms["rank"]["rank"]) == 10
    assert hybrid["heap"] == {} and hybrid["syscalls"] == {}


def test_rank_comm_ops_frame():
    frame = pathscope.open(HYBRID).rank_comm_ops
    assert list(frame.columns) == ["rank", "comm", "op", "calls", "bytes", "time_s"]
    rows = [tuple(r) for r in frame.itertuples(index=False)]
    assert rows == [(0, "-", "MPI_Finalize", 1, 0, 0.005), (0, "W", "MPI_Allreduce", 10, 80, 0.25),
                    (0, "W", "MPI_Comm_dup", 1, 0, 0.001), (0, "W", "MPI_Recv", 5, 5120, 0.15),
                    (0, "W_d1", "MPI_Allreduce", 10, 80, 0.05),
                    (1, "-", "MPI_Finalize", 1, 0, 0.005), (1, "W", "MPI_Allreduce", 10, 80, 0.5),
                    (1, "W", "MPI_Comm_dup", 1, 0, 0.001), (1, "W", "MPI_Send", 5, 5120, 0.01),
                    (1, "W_d1", "MPI_Allreduce", 10, 80, 0.1)]
    # the rank files' values sum to comm-ops' (both sides' bytes alike)
    ops = pathscope.open(HYBRID).comm_ops
    summed = frame.groupby(["comm", "op"])[["calls", "bytes"]].sum().reset_index()
    assert summed.values.tolist() == ops[["comm", "op", "calls", "bytes"]].values.tolist()


def test_reduced_profile(tmp_path):
    """--per-rank summary: only all ranks in the icicle; each rank's value where tree.tsv
    kept it (rankvec paths); no rank x communicator heatmap."""
    subprocess.run([sys.executable, str(ROOT / "bench" / "synth_profile.py"), str(tmp_path / "p"),
                    "--ranks", "8", "--paths", "60", "--rank-vectors"], check=True,
                   capture_output=True)
    frames = pathscope.open(tmp_path / "p")
    data = html.page_data(frames)
    assert data["tree"]["per_rank"] is False
    assert all(m["ranks"] == {} for m in data["tree"]["metrics"])
    assert data["notes"] == [
        "per-rank call trees need the rank files (--per-rank all); this profile has the job's "
        "statistics (the icicle shows all ranks; per-path imbalance shows each rank's value "
        "where tree.tsv kept it: its rankvec paths)"]
    assert data["comms"]["rank"]["rank"] == []
    assert data["comms"]["rank_note"] == ("the rank x communicator heatmap needs the rank "
                                          "files (--per-rank all)")
    rows = data["imbalance"]["incl_time"]
    with_ranks = [r for r in rows if r["ranks"]]
    assert with_ranks, "no rankvec path among the heaviest"
    for r in with_ranks:                    # the kept vector agrees with the statistics
        values = [r["ranks"].get(str(k), 0) for k in range(8)]
        assert (sum(values), min(values), max(values)) == (r["sum"], r["min"], r["max"])


def test_page_is_self_contained(tmp_path):
    page = html.render_html(pathscope.open(HYBRID), plotly="/* plotly */")
    assert page.startswith("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                           "<title>pathscope: solver</title><style>")
    assert "<script>/* plotly */</script>" in page
    assert "src=" not in page and "href=\"http" not in page and "<link" not in page
    start = page.index('<script id="pathscope-data" type="application/json">') + 52
    data = json.loads(page[start:page.index("</script>", start)])
    assert data == json.loads(json.dumps(html.page_data(pathscope.open(HYBRID))))


def test_script_safe():
    assert html._script_safe('{"a":"</script><b>"}') == '{"a":"<\\/script><b>"}'
    assert json.loads(html._script_safe('"</script>"')) == "</script>"


def test_plotly_missing_or_changed(tmp_path):
    with pytest.raises(html.HtmlAssetError) as e:
        html.load_plotly(tmp_path)
    assert str(e.value) == (f"report --html needs plotly.js 4.1.1 at {tmp_path}/plotly.min.js: "
                            f"No such file or directory; run scripts/setup.sh (it fetches the "
                            f"pinned bundle)")
    (tmp_path / "plotly.min.js").write_text("not plotly")
    with pytest.raises(html.HtmlAssetError) as e:
        html.load_plotly(tmp_path)
    assert str(e.value) == (f"report --html: {tmp_path}/plotly.min.js is not plotly.js 4.1.1 "
                            f"(sha256 differs from the pinned one); run scripts/setup.sh (it "
                            f"fetches the pinned bundle)")


def run_cli(*args, env=None, cwd=None):
    return subprocess.run([str(PATHSCOPE), *map(str, args)], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=60, cwd=cwd)


@pytest.mark.parametrize("args, message", [
    (["--html"], "pathscope report: --html needs -o FILE (try 'pathscope report --help')"),
    (["-o", "x.html"], "pathscope report: -o/--output applies to --html "
                       "(try 'pathscope report --help')"),
])
def test_cli_usage_errors(tmp_path, args, message):
    p = run_cli("report", HYBRID, *args)
    assert (p.returncode, p.stdout, p.stderr) == (2, "", message + "\n")


def test_cli_without_plotly_writes_nothing(tmp_path, monkeypatch, capsys):
    """A checkout without .deps/html (PATHSCOPE_HOME names where pathscope's files are; in
    this process: bin/pathscope sets its own)."""
    from pathscope.cli import main
    out = tmp_path / "r.html"
    monkeypatch.setenv("PATHSCOPE_HOME", str(tmp_path))
    assert main(["report", str(HYBRID), "--html", "-o", str(out)]) == 2
    assert capsys.readouterr().err == (
        f"pathscope: report --html needs plotly.js 4.1.1 at {tmp_path}/.deps/html/plotly.min.js: "
        f"No such file or directory; run scripts/setup.sh (it fetches the pinned bundle)\n")
    assert not out.exists()


def test_cli_writes_the_page(tmp_path):
    out = tmp_path / "r.html"
    p = run_cli("report", HYBRID, "--html", "-o", out)
    assert (p.returncode, p.stdout) == (0, "")
    page = out.read_text()
    assert page.count("plotly.js v4.1.1") == 1 and page.endswith("</body></html>\n")


def test_cli_writes_the_page_to_stdout_with_a_dash(tmp_path):
    """`-o -`: the page on stdout, no file named '-'."""
    p = run_cli("report", HYBRID, "--html", "-o", "-", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("<!DOCTYPE html>") and p.stdout.endswith("</body></html>\n")
    assert not (tmp_path / "-").exists()
