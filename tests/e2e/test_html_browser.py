"""`pathscope report --html` and `pathscope diff --html` in a real headless browser (Debian's
chromium + chromium-driver, driven by Selenium; scripts/setup.sh --test installs them): the page
loads with nothing in the browser's console, the icicle shows the hand-computed tree of
tests/python/data/hybrid (README.md there) with a function's call sites merged (or apart with
--call-sites), switching the metric or the rank and clicking a node change what is shown, and a
screenshot is taken.  Then the same on a real MPI run (tests/programs/reduce_known.c); the
two-profile page of diff --html on the hybrid fixture against test_diff's known slowdown and
on two real runs (tests/e2e/test_diff_runs.py's)."""
import subprocess
import time

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from conftest import ROOT
from test_diff_runs import runs  # noqa: F401 (the fixture: two runs of paths_mpi)

HYBRID = ROOT / "tests" / "python" / "data" / "hybrid"
PARTS = ["header", "tree", "split", "imbalance", "comms", "heap", "syscalls", "done"]
DIFF_PARTS = ["header", "tree", "rows", "comms", "done"]


@pytest.fixture(scope="module")
def browser():
    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,1000"):
        options.add_argument(arg)
    options.binary_location = "/usr/bin/chromium"
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    yield driver
    driver.quit()


def report_html(directory, out, *flags):
    p = subprocess.run([str(ROOT / "bin" / "pathscope"), "report", str(directory), "--html",
                        "-o", str(out), *flags], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return out


def diff_html(base, new, out, *flags, status=0):
    p = subprocess.run([str(ROOT / "bin" / "pathscope"), "diff", str(base), str(new), "--html",
                        "-o", str(out), *flags], capture_output=True, text=True, timeout=120)
    assert (p.returncode, p.stdout) == (status, ""), p.stderr
    return out


def load(driver, page, parts=PARTS):
    """Opens page; returns the browser's console lines of the load (every level)."""
    driver.get_log("browser")                   # what an earlier page left
    driver.get(page.as_uri())
    deadline = time.monotonic() + 60
    while driver.execute_script(
            "return performance.getEntriesByName('pathscope:done').length") == 0:
        assert time.monotonic() < deadline, "the page's script did not finish"
        time.sleep(0.1)
    marks = driver.execute_script(
        "return performance.getEntriesByType('mark').map(m => m.name)")
    assert marks == [f"pathscope:{p}" for p in parts]
    return driver.get_log("browser")


def tiles_of(driver, label):
    """The drawn icicle's tiles labelled label: [[id, value], ...]."""
    return driver.execute_script(
        "const t = document.getElementById('flame').data[0];"
        "return t.labels.map((l, i) => [l, t.ids[i], t.values[i]])"
        ".filter(x => x[0] === arguments[0]).map(x => [Number(x[1]), x[2]])", label)


def cells(driver, selector):
    """The text of each row's cells of the table at selector."""
    return [[c.text for c in row.find_elements(By.TAG_NAME, "td")]
            for row in driver.find_elements(By.CSS_SELECTOR, f"{selector} tbody tr")]


def shown(driver):
    """The icicle's tiles as drawn: 'label value' of every tile's text in the page."""
    return driver.execute_script(
        "return [...document.querySelectorAll('#flame .slicetext')]"
        ".map(e => [...e.querySelectorAll('tspan')].map(t => t.textContent).join(' '))")


def status(driver):
    return driver.find_element(By.ID, "flame-status").text


def click_tile(driver, label):
    """Clicks the (first) tile whose label is label, as a user would: the mouse on it."""
    tile = driver.execute_script(
        "return [...document.querySelectorAll('#flame g.slice')].find(g => "
        "g.querySelector('.slicetext tspan')?.textContent === arguments[0])"
        "?.querySelector('path')", label)
    assert tile is not None, f"no tile {label}"
    ActionChains(driver).move_to_element(tile).click().perform()


def test_hybrid_page(browser, tmp_path):
    page = report_html(HYBRID, tmp_path / "hybrid.html")
    assert load(browser, page) == []
    # time over both ranks (README.md: rank 0 + rank 1); by function: main's four call
    # sites are one node, compute's two under solve / update and worker's two as well
    assert status(browser) == ("time, all ranks: 6.700 s in the whole tree (19 nodes drawn, "
                               "1 under 0.1% of it not drawn)")   # MPI_Comm_dup: 2 ms
    tiles = set(shown(browser))
    for tile in ("[all threads] 6.700 s",
                 "main 3.923 s",                            # 3469 + 294 + 150 + 10 ms
                 "solve / update 2.569 s",
                 "compute 2.569 s",                         # 1100 + 1169 sampled, 300 below
                 "libkernels.so+0x1a4f 300.000 ms",         # 200 + 100
                 "MPI_Allreduce 900.000 ms",                # 300 + 600 MPI
                 "MPI_Recv 150.000 ms", "MPI_Send 10.000 ms",
                 "worker 2.600 s",                          # 1200 + 1000 + 250 + 150
                 "[failed unwind] 30.000 ms", "[not unwound] 147.000 ms"):
        assert tile in tiles
    # the merged node is drawn once, with the sum of its sites
    assert tiles_of(browser, "main") == [[3, 3_923_000_000]]
    assert sorted(v for _, v in tiles_of(browser, "compute")) == [30_000_000, 400_000_000,
                                                            2_569_000_000]
    assert browser.find_element(By.ID, "hot-path").text == (
        "hot path: [all threads] (6.700 s) > _start (3.923 s) > __libc_start_call_main "
        "(3.923 s) > main (3.923 s) > solve / update (2.569 s) > compute (2.569 s) > "
        "libkernels.so+0x1a4f (300.000 ms)")
    # a click on the merged node: its call sites in the details
    click_tile(browser, "main")
    assert browser.execute_script("return pathscope.state.selected") == 3
    assert browser.find_element(By.ID, "details").text.startswith(
        "_start > __libc_start_call_main > main\n/src/solver/app.c:41 and 3 more call sites "
        "(call; all ranks)")
    assert cells(browser, "#details-sites") == [
        ["/src/solver/app.c:41", "3.469 s", "88.4%", "900.000 ms"],
        ["/src/solver/app.c:30", "294.000 ms", "7.5%", "0 s"],
        ["/src/solver/app.c:45", "150.000 ms", "3.8%", "150.000 ms"],
        ["/src/solver/app.c:46", "10.000 ms", "0.3%", "10.000 ms"]]
    # a step of the hot path zooms to it
    browser.find_element(By.CSS_SELECTOR, "#hot-path a[data-node='5']").click()
    assert browser.execute_script("return [pathscope.state.root, pathscope.state.selected]") \
        == [5, 5]
    browser.find_element(By.ID, "reset").click()

    # the metric switch: MPI time only
    Select(browser.find_element(By.ID, "metric")).select_by_value("mpi_time")
    assert status(browser) == "MPI time, all ranks: 1.072 s in the whole tree (11 nodes drawn)"
    tiles = set(shown(browser))
    assert {"MPI_Allreduce 900.000 ms", "MPI_Recv 150.000 ms", "MPI_Send 10.000 ms",
            "MPI_Finalize 10.000 ms", "MPI_Comm_dup 2.000 ms"} <= tiles
    assert not any(t.startswith(("compute", "worker")) for t in tiles)

    # the rank selector: rank 1 (its MPI_Allreduce 600 ms, no MPI_Recv: rank 0's)
    Select(browser.find_element(By.ID, "rank")).select_by_value("1")
    assert status(browser).startswith("MPI time, rank 1: 616.000 ms in the whole tree")
    tiles = set(shown(browser))
    assert "MPI_Allreduce 600.000 ms" in tiles
    assert not any(t.startswith("MPI_Recv") for t in tiles)

    # a click: the node's subtree and its details
    Select(browser.find_element(By.ID, "rank")).select_by_value("all")
    Select(browser.find_element(By.ID, "metric")).select_by_value("time")
    click_tile(browser, "solve")
    assert browser.execute_script("return [pathscope.state.root, pathscope.state.selected]") \
        == [7, 7]
    assert status(browser) == ("time, all ranks: 900.000 ms in _start > __libc_start_call_main "
                               "> main > solve (2 nodes drawn)")
    details = browser.find_element(By.ID, "details").text
    assert details.startswith("_start > __libc_start_call_main > main > solve\n"
                              "/src/solver/solver.c:28 (call; all ranks)")
    assert "MPI time 900.000 ms 0 s" in details
    shot = tmp_path / "hybrid.png"
    assert browser.save_screenshot(str(shot))
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000

    # per-path imbalance: the hand-computed extremes, and each rank's value
    rows = browser.find_elements(By.CSS_SELECTOR, "#imbalance-table tbody tr")
    first = [c.text for c in rows[0].find_elements(By.TAG_NAME, "td")]
    assert first == ["_start > __libc_start_call_main > main", "3", "3.923 s", "1.944 s (0)",
                     "1.962 s", "1.979 s (1)", "1.01"]
    # the communicators: calls per rank and communicator (the rank files)
    Select(browser.find_element(By.ID, "comm-metric")).select_by_value("calls")
    heat = browser.execute_script(
        "const t = document.getElementById('comm-heatmap').data[0]; return [t.x, t.y, t.z]")
    assert heat == [["W", "W_d1"], [0, 1], [[16, 10], [16, 10]]]     # not "-": MPI_Finalize
    bars = browser.execute_script(
        "return document.getElementById('comm-bars').data.map(t => [t.name, t.x, t.y])")
    assert bars == [["MPI_Allreduce", ["W", "W_d1"], [20, 20]],
                    ["MPI_Comm_dup", ["W", "W_d1"], [2, 0]],
                    ["MPI_Recv", ["W", "W_d1"], [5, 0]], ["MPI_Send", ["W", "W_d1"], [5, 0]]]


def test_hybrid_page_by_call_site(browser, tmp_path):
    """report --call-sites --html: one tile per call site (main four times)."""
    page = report_html(HYBRID, tmp_path / "sites.html", "--call-sites")
    assert load(browser, page) == []
    assert status(browser) == ("time, all ranks: 6.700 s in the whole tree (24 nodes drawn, "
                               "1 under 0.1% of it not drawn)")
    assert sorted(v for _, v in tiles_of(browser, "main")) == [10_000_000, 150_000_000, 294_000_000,
                                                         3_469_000_000]
    assert {"compute 2.269 s", "worker 2.200 s"} <= set(shown(browser))
    assert browser.find_element(By.ID, "tree-note").text.startswith("one tile per call site")
    click_tile(browser, "main")
    assert browser.find_elements(By.ID, "details-sites") == []


def test_real_run(openmpi, browser, tmp_path):
    """reduce_known on 4 ranks with --heap: MPI visits as the program makes them."""
    prof = tmp_path / "prof"
    openmpi.run(4, [openmpi.prog("reduce_known")], prof, timeout=300,
                pathscope_args=["--heap"])
    page = report_html(prof, tmp_path / "real.html")
    assert load(browser, page) == []
    Select(browser.find_element(By.ID, "metric")).select_by_value("visits")
    data = browser.execute_script(
        "const t = document.getElementById('flame').data[0]; return [t.labels, t.values]")
    visits = {}
    for label, value in zip(*data):
        visits[label] = visits.get(label, 0) + value
    # per rank r of 4: r % 2 + 1 Allreduce, 2 Bcast, 1 Sendrecv, 2 Barrier
    assert visits["MPI_Allreduce"] == 6
    assert visits["MPI_Bcast"] == 8
    assert visits["MPI_Sendrecv"] == 4
    assert visits["MPI_Barrier"] == 8
    assert "rank 3" in [o.text for o in Select(browser.find_element(By.ID, "rank")).options]
    heat = browser.execute_script(
        "const t = document.getElementById('comm-heatmap').data[0]; return t.y")
    assert heat == [0, 1, 2, 3]
    series = browser.execute_script("return Object.keys(pathscope.data.heap.series || {})")
    assert series == ["0", "1", "2", "3"]
    shot = tmp_path / "real.png"
    assert browser.save_screenshot(str(shot))
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("name", ["mpi-kernel", "serial-heap"])
def test_kernel_and_heap_sections(browser, tmp_path, name):
    """Profiles of real runs (tests/python/data/real-2.2): the system-call table per thread
    (--kernel) shows the profile's rows; a program without MPI (and a heap profile of format
    2.2: no timeline yet) says what it does not have."""
    import shutil

    import pathscope
    # a copy: the report writes symbols.tsv into the profile directory
    directory = shutil.copytree(ROOT / "tests" / "python" / "data" / "real-2.2" / name,
                                tmp_path / name)
    frames = pathscope.open(directory)
    page = report_html(directory, tmp_path / f"{name}.html")
    assert load(browser, page) == []
    threads = browser.find_elements(By.CSS_SELECTOR, "#syscall-threads tbody tr")
    calls = browser.find_elements(By.CSS_SELECTOR, "#syscall-calls tbody tr")
    assert (len(threads), len(calls)) == (len(frames.table("kernel-threads")),
                                          min(300, len(frames.table("kernel-syscalls"))))
    heap = browser.execute_script(
        "return [...document.getElementById('heap').data || []].map(t => t.name)")
    ranks = sorted(set(frames.table("heap-timeline")["rank"].astype(int)))
    assert heap == [f"rank {r}" for r in ranks]
    if name == "mpi-kernel":
        assert len(threads) == 6 and heap == []
        first = [c.text for c in calls[0].find_elements(By.TAG_NAME, "td")]
        assert first == ["1", "25621", "1", "libc", "poll", "2", "0.284224065"]
    else:
        assert (len(threads), heap) == (0, [])
        assert browser.find_element(By.ID, "syscall-note").text == (
            "no kernel data in this profile (pathscope run --kernel)")
        assert browser.find_element(By.ID, "heap-note").text == (
            "no heap timeline in this profile (pathscope run --heap)")
        assert browser.find_element(By.ID, "comm-note").text == "no MPI operations recorded"


# ---- diff --html: the two-profile view ----------------------------------------------------------

def test_diff_page(browser, tmp_path):
    """The hybrid fixture against test_diff's slowed copy (rank 0's compute +0.5 s, its
    MPI_Recv on W twice the calls, time and bytes), gated by --fail-above 20."""
    import sys
    sys.path.insert(0, str(ROOT / "tests" / "python"))
    from test_diff import slowed

    new = slowed(tmp_path / "new")
    page = diff_html(HYBRID, new, tmp_path / "diff.html", "--fail-above", "20", status=4)
    assert load(browser, page, DIFF_PARTS) == []
    assert browser.find_element(By.ID, "title").text == f"pathscope diff: {HYBRID} → {new}"
    assert cells(browser, "#totals") == [["time", "6.700 s", "7.350 s", "+650.000 ms", "+9.7%"],
                                         ["bytes", "10.3 KiB", "15.3 KiB", "+5.00 KiB", "+48.5%"],
                                         ["calls", "54", "59", "+5", "+9.3%"]]
    assert browser.find_element(By.ID, "regressions").text.splitlines() == [
        "2 regression(s) above 20% (--fail-above; paths from 1% of BASE's total time):",
        "_start > __libc_start_call_main > main > solve / update > compute: "
        "time 2.269000 s -> 2.769000 s (+22.0%)",
        "_start > __libc_start_call_main > main > MPI_Recv on W: "
        "time 0.150000 s -> 0.300000 s (+100.0%)"]
    # the icicle: width NEW's time, colour the change (in seconds)
    assert status(browser) == ("time: 6.700 s → 7.350 s (+650.000 ms, +9.7%) in the whole "
                               "tree; width: NEW (19 nodes drawn, 1 under 0.1% not drawn)")
    tiles = set(shown(browser))
    assert {"[all threads] 7.350 s (+650.000 ms)", "main 4.573 s (+650.000 ms)",
            "compute 3.069 s (+500.000 ms)",       # solve / update's: both sites, libkernels
            "MPI_Recv 300.000 ms (+150.000 ms)", "worker 2.600 s (0 s)",
            "MPI_Allreduce 900.000 ms (0 s)"} <= tiles
    colours = browser.execute_script(
        "const t = document.getElementById('flame').data[0];"
        "return Object.fromEntries(t.ids.map((id, i) => [id, t.marker.colors[i]]))")
    assert (colours["18"], colours["13"], colours["8"]) == (0.5, 0.15, 0)
    # the rows by impact: compute first, then MPI_Recv on W
    rows = cells(browser, "#rows")
    assert len(rows) == 13
    assert rows[0] == ["_start > __libc_start_call_main > main > solve / update > compute", "",
                       "", "2.269 s", "2.769 s", "+500.000 ms", "+22.0%", "0 B", "0"]
    assert rows[1] == ["_start > __libc_start_call_main > main", "W", "MPI_Recv",
                       "150.000 ms", "300.000 ms", "+150.000 ms", "+100.0%", "+5.00 KiB", "+5"]

    # the value switch: calls, in the icicle, the rows and the communicators
    Select(browser.find_element(By.ID, "value")).select_by_value("calls")
    assert status(browser) == ("calls: 54 → 59 (+5, +9.3%) in the whole tree; width: NEW "
                               "(11 nodes drawn)")
    assert {"MPI_Recv 10 (+5)", "MPI_Allreduce 40 (0)"} <= set(shown(browser))
    assert cells(browser, "#rows")[0][:3] == ["_start > __libc_start_call_main > main", "W",
                                              "MPI_Recv"]
    comms = cells(browser, "#comm-table")
    assert comms[0][:2] == ["W", "MPI_Recv"] and comms[0][-3:] == ["5", "10", "+5"]
    bars = browser.execute_script(
        "return document.getElementById('comm-bars').data.map(t => [t.name, t.x[0], t.y[0]])")
    assert bars == [["BASE", "MPI_Recv on W", 5], ["NEW", "MPI_Recv on W", 10]]

    # a click on a tile: its subtree, and its values in both profiles with its communicators
    click_tile(browser, "MPI_Recv")
    assert browser.execute_script("return [pathscope.state.root, pathscope.state.selected]") \
        == [13, 13]
    assert cells(browser, "#details-table")[2] == ["calls", "5", "10", "+5", "+100.0%", "5",
                                                   "10"]
    assert cells(browser, "#details-comms") == [["W", "MPI_Recv", "150.000 ms", "300.000 ms",
                                                 "+150.000 ms", "+100.0%", "+5.00 KiB", "+5"]]
    # a click on a row: its tile
    Select(browser.find_element(By.ID, "value")).select_by_value("time_ns")
    browser.find_element(By.CSS_SELECTOR, "#rows tbody tr").click()
    assert browser.execute_script("return pathscope.state.root") == 18
    assert status(browser).startswith("time: 2.569 s → 3.069 s (+500.000 ms, +19.5%) in _start "
                                      "> __libc_start_call_main > main > solve / update > "
                                      "compute; width: NEW")
    shot = tmp_path / "diff.png"
    assert browser.save_screenshot(str(shot))
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


def test_diff_page_paths_only_in_one_profile(browser, tmp_path):
    """compute's fn frame renamed compute_v2 in NEW (three paths: under solve / update,
    [failed unwind] and worker): with NEW's width the two compute paths that only BASE has
    are not drawn (the status says so; solve / update's compute stays: its call frame holds
    libkernels), with BASE's the three compute_v2 paths only NEW has are not."""
    import sys
    sys.path.insert(0, str(ROOT / "tests" / "python"))
    from pathscope_samples import copy_hybrid

    new = copy_hybrid(tmp_path / "new")
    symbols = new / "symbols.tsv"
    symbols.write_text(symbols.read_text().replace(
        "0x401100\tfn\t0\tcompute", "0x401100\tfn\t0\tcompute_v2"))
    page = diff_html(HYBRID, new, tmp_path / "renamed.html")
    assert load(browser, page, DIFF_PARTS) == []
    assert browser.find_element(By.ID, "regressions").text == ""
    assert status(browser).endswith("width: NEW (20 nodes drawn, 1 under 0.1% not drawn, "
                                    "2 only in BASE: width BASE shows them)")
    assert {"compute_v2 2.269 s (+2.269 s)"} <= set(shown(browser))
    Select(browser.find_element(By.ID, "size")).select_by_value("base")
    assert status(browser).endswith("width: BASE (19 nodes drawn, 1 under 0.1% not drawn, "
                                    "3 only in NEW: width NEW shows them)")
    assert "compute 2.569 s (-2.269 s)" in set(shown(browser))


def test_diff_page_of_two_runs(runs, browser, tmp_path):
    """tests/e2e/test_diff_runs.py's runs (NEW: compute_b 4x its iterations): compute_b is
    the first row and a red tile; the MPI_Allreduce tiles under exchange_x and exchange_y
    hold the same calls in both runs (60 and 140, no change)."""
    page = diff_html(*runs, tmp_path / "runs.html", "--fail-above", "50", status=4)
    assert load(browser, page, DIFF_PARTS) == []
    first = cells(browser, "#rows")[0]
    assert first[0].endswith(" > main > compute_b") and first[5].startswith("+")
    node = browser.execute_script("return pathscope.data.rows.node[0]")
    colour = browser.execute_script(
        "const t = document.getElementById('flame').data[0];"
        "return t.marker.colors[t.ids.indexOf(String(arguments[0]))]", node)
    assert colour > 0
    # calls: delay's 200,000 thunk-mode entries hide the MPI tiles (under 0.1%) until a
    # caller is the shown root
    Select(browser.find_element(By.ID, "value")).select_by_value("calls")
    for caller, calls in (("exchange_x", 60), ("exchange_y", 140)):
        browser.execute_script("clicked(pathscope.data.tree.label.indexOf(arguments[0]))",
                               caller)
        assert tiles_of(browser, "MPI_Allreduce")[0][1] == calls
        assert status(browser).startswith(f"calls: {calls} → {calls} (0, 0.0%) in ")
    assert browser.save_screenshot(str(tmp_path / "runs.png"))
