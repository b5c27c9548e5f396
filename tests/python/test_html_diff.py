"""`pathscope diff BASE NEW --html -o FILE` without a browser (tests/e2e/test_html_browser.py
opens the page): the page's data for the hybrid fixture against test_diff's copy with a known
slowdown (rank 0's compute +0.5 s, its MPI_Recv on W twice the calls, time and bytes), a path
only NEW has, and the command line's output, exit statuses and errors."""
import json
import os

import pytest

import pathscope
from pathscope.diff import diff, regressions
from pathscope.report.html_diff import diff_page_data, render_diff_html
from pathscope_samples import HYBRID, copy_hybrid, write_sample
from test_diff import slowed
from test_cli import pathscope as cli

COMPUTE = "_start > __libc_start_call_main > main > solve / update > compute"
MAIN = "_start > __libc_start_call_main > main"
REGRESSIONS = [
    f"{COMPUTE}: time 2.269000 s -> 2.769000 s (+22.0%)",
    f"{MAIN} > MPI_Recv on W: time 0.150000 s -> 0.300000 s (+100.0%)"]


@pytest.fixture(scope="module")
def new(tmp_path_factory):
    return slowed(tmp_path_factory.mktemp("diffhtml") / "new")


@pytest.fixture(scope="module")
def data(new):
    d = diff(pathscope.open(HYBRID), pathscope.open(new))
    return diff_page_data(d, regressions(d, 20.0), 20.0, 1.0)


def test_the_union_tree(data):
    """Both profiles' paths by frame names, depth first with siblings by name; an MPI
    operation under the path calling it (MPI_Allreduce's W and W_d1 summed); compute under
    solve / update holds both its call sites (2.269 s of its own, libkernels below it)."""
    t = data["tree"]
    assert list(zip(t["parent"], t["label"], t["kind"])) == [
        (-1, "[all threads]", "root"), (0, "[failed unwind]", ""), (1, "compute", ""),
        (0, "[not unwound]", ""), (3, "MPI_Comm_dup", "mpi"), (3, "MPI_Finalize", "mpi"),
        (0, "__clone3", ""), (6, "start_thread", ""), (7, "worker", ""), (8, "compute", ""),
        (0, "_start", ""), (10, "__libc_start_call_main", ""), (11, "main", ""),
        (12, "MPI_Recv", "mpi"), (12, "MPI_Send", "mpi"), (12, "solve", ""),
        (15, "MPI_Allreduce", "mpi"), (12, "solve / update", ""), (17, "compute", ""),
        (18, "libkernels.so+0x1a4f", "")]
    time, calls = t["values"]["time_ns"], t["values"]["calls"]
    assert (time["base"][18], time["new"][18]) == (2_269_000_000, 2_769_000_000)
    assert (time["base"][13], time["new"][13]) == (150_000_000, 300_000_000)
    assert (calls["base"][16], calls["new"][16]) == (40, 40)
    assert (sum(time["base"]), sum(time["new"])) == (6_700_000_001, 7_350_000_001)
    assert t["values"]["bytes"]["new"][13] == 10_240


def test_rows_comms_totals_and_regressions(data):
    r = data["rows"]
    assert len(r["path"]) == 13
    first = {k: v[0] for k, v in r.items()}
    assert first == {"path": COMPUTE, "node": 18, "comm": "", "op": "",
                     "base_time_ns": 2_269_000_000, "new_time_ns": 2_769_000_000,
                     "delta_time_ns": 500_000_000, "base_bytes": 0, "new_bytes": 0,
                     "delta_bytes": 0, "base_calls": 0, "new_calls": 0, "delta_calls": 0,
                     "time_pct": pytest.approx(500 / 2269 * 100)}
    assert (r["path"][1], r["node"][1], r["comm"][1], r["op"][1], r["delta_calls"][1]) == (
        MAIN, 13, "W", "MPI_Recv", 5)
    c = data["comms"]
    assert list(zip(c["comm"], c["op"], c["base_calls"], c["new_calls"], c["delta_bytes"])) == [
        ("-", "MPI_Finalize", 2, 2, 0), ("W", "MPI_Allreduce", 20, 20, 0),
        ("W", "MPI_Comm_dup", 2, 2, 0), ("W", "MPI_Recv", 5, 10, 5120),
        ("W", "MPI_Send", 5, 5, 0), ("W_d1", "MPI_Allreduce", 20, 20, 0)]
    assert data["total"]["delta_time_ns"] == 650_000_000 and data["total"]["delta_calls"] == 5
    assert data["regressions"] == {"lines": REGRESSIONS, "fail_above": 20.0, "floor": 1.0}


def test_a_path_only_new_has(tmp_path):
    """compute renamed compute_v2 in NEW: two nodes, the old one 0 in NEW, the new one 0 in
    BASE with no percentage (null in the JSON: the page says "new")."""
    renamed = copy_hybrid(tmp_path / "new")
    symbols = renamed / "symbols.tsv"
    symbols.write_text(symbols.read_text().replace(
        "0x401100\tfn\t0\tcompute", "0x401100\tfn\t0\tcompute_v2"))
    data = diff_page_data(diff(pathscope.open(HYBRID), pathscope.open(renamed)))
    t = data["tree"]
    under = [i for i, p in enumerate(t["parent"]) if t["label"][p] == "solve / update"]
    assert [t["label"][i] for i in under] == ["compute", "compute_v2"]
    time = t["values"]["time_ns"]
    old, added = under
    assert (time["base"][old], time["new"][old]) == (2_269_000_000, 0)
    assert (time["base"][added], time["new"][added]) == (0, 2_269_000_000)
    row = data["rows"]["path"].index(f"{MAIN} > solve / update > compute_v2")
    assert data["rows"]["time_pct"][row] is None and data["regressions"] is None
    json.dumps(data, allow_nan=False)


def test_page_is_self_contained(data, new):
    d = diff(pathscope.open(HYBRID), pathscope.open(new))
    page = render_diff_html(d, "/* plotly */", regressions(d, 20.0), 20.0, 1.0)
    assert page.startswith(f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                           f"<title>pathscope: diff {HYBRID} -&gt; {new}</title><style>")
    assert "<script>/* plotly */</script>" in page
    assert "src=" not in page and "href=\"http" not in page and "<link" not in page
    start = page.index('<script id="pathscope-data" type="application/json">') + 52
    assert json.loads(page[start:page.index("</script>", start)]) == json.loads(json.dumps(data))


# ---- the command line ------------------------------------------------------------------------

def page_data_of(path):
    page = path.read_text()
    start = page.index('<script id="pathscope-data" type="application/json">') + 52
    return json.loads(page[start:page.index("</script>", start)])


def test_cli_writes_the_page_and_gates(tmp_path, new, data):
    """--fail-above with --html: the page is written (with the regressions on it), the
    regressions named on stderr and exit status 4 as without --html; nothing on stdout."""
    out = tmp_path / "d.html"
    p = cli("diff", HYBRID, new, "--html", "-o", out, "--fail-above", "20")
    assert (p.returncode, p.stdout) == (4, "")
    assert p.stderr.splitlines() == [f"pathscope: regression: {line}" for line in REGRESSIONS] + [
        "pathscope: 2 regression(s) above 20% (exit status 4)"]
    page = out.read_text()
    assert page.count("plotly.js v4.1.1") == 1 and page.endswith("</body></html>\n")
    got = page_data_of(out)
    assert got["regressions"] == data["regressions"] and got["tree"] == data["tree"]
    p = cli("diff", HYBRID, new, "--html", "--output", out, "--fail-above", "100")
    assert (p.returncode, p.stdout, p.stderr) == (0, "", "")
    assert page_data_of(out)["regressions"] == {"lines": [], "fail_above": 100.0, "floor": 1.0}
    p = cli("diff", HYBRID, new, "--html", "-o", out)
    assert (p.returncode, p.stdout, p.stderr) == (0, "", "")
    assert page_data_of(out)["regressions"] is None


@pytest.mark.parametrize("args, message", [
    (["--html"], "--html needs -o FILE"),
    (["-o", "x.html"], "-o/--output applies to --html"),
    (["--csv", "-o", "x.html"], "-o/--output applies to --html"),
    (["--html", "--csv", "-o", "x.html"], "argument --csv: not allowed with argument --html"),
    (["--json", "--html", "-o", "x.html"], "argument --html: not allowed with argument --json"),
    (["--html", "-o", "x.html", "--top", "5"],
     "--top applies to the table, not to --html (the page has every row)"),
])
def test_cli_usage_errors(tmp_path, args, message):
    p = cli("diff", HYBRID, HYBRID, *args, cwd=tmp_path)
    assert (p.returncode, p.stdout) == (2, "")
    assert p.stderr == f"pathscope diff: {message} (try 'pathscope diff --help')\n"
    assert not (tmp_path / "x.html").exists()


def test_cli_bad_input_writes_nothing(tmp_path):
    out = tmp_path / "d.html"
    p = cli("diff", tmp_path / "nope", HYBRID, "--html", "-o", out)
    assert (p.returncode, p.stdout) == (2, "")
    assert p.stderr == f"pathscope: profile directory not found: {tmp_path / 'nope'}\n"
    assert not out.exists()
    flat = write_sample(tmp_path / "flat")               # format 1.0: no call paths
    p = cli("diff", HYBRID, flat, "--html", "-o", out)
    assert (p.returncode, p.stderr) == (2, f"pathscope: no call-path data in {flat} (profile "
                                           f"format 1.x or sampling and unwinding were off)\n")
    assert not out.exists()
    p = cli("diff", HYBRID, HYBRID, "--html", "-o", tmp_path / "no" / "d.html")
    assert (p.returncode, p.stderr) == (
        2, f"pathscope: cannot write '{tmp_path / 'no' / 'd.html'}': No such file or directory\n")


def test_cli_without_plotly_reads_nothing(tmp_path, monkeypatch, capsys):
    """plotly.js is checked first: a missing bundle is the error even with a bad BASE."""
    from pathscope.cli import main
    out = tmp_path / "d.html"
    monkeypatch.setenv("PATHSCOPE_HOME", str(tmp_path))
    assert main(["diff", str(tmp_path / "nope"), str(HYBRID), "--html", "-o", str(out)]) == 2
    assert capsys.readouterr().err == (
        f"pathscope: diff --html needs plotly.js 4.1.1 at {tmp_path}/.deps/html/plotly.min.js: "
        f"No such file or directory; run scripts/setup.sh (it fetches the pinned bundle)\n")
    assert not out.exists()


def test_report_call_sites_html(tmp_path):
    """report --call-sites --html: the page's tree by call site (main four times)."""
    out = tmp_path / "r.html"
    p = cli("report", HYBRID, "--call-sites", "--html", "-o", out)
    assert p.returncode == 0, p.stderr
    data = page_data_of(out)
    assert data["call_sites"] is True and data["tree"]["label"].count("main") == 4
    p = cli("report", HYBRID, "--html", "-o", out)
    data = page_data_of(out)
    assert data["call_sites"] is False and data["tree"]["label"].count("main") == 1
    assert os.path.getsize(out) > 4_000_000            # plotly.js inlined
