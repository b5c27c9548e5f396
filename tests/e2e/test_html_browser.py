"""`pathscope report --html` in a real headless browser (Debian's chromium + chromium-driver,
driven by Selenium; scripts/setup.sh --test installs them): the page loads with nothing in the
browser's console, the icicle shows the hand-computed tree of tests/python/data/hybrid
(README.md there), switching the metric or the rank and clicking a node change what is shown,
and a screenshot is taken.  Then the same on a real MPI run (tests/programs/reduce_known.c)."""
import subprocess
import time

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from conftest import ROOT

HYBRID = ROOT / "tests" / "python" / "data" / "hybrid"
PARTS = ["header", "tree", "split", "imbalance", "comms", "heap", "syscalls"]


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


def report_html(directory, out):
    p = subprocess.run([str(ROOT / "bin" / "pathscope"), "report", str(directory), "--html",
                        "-o", str(out)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return out


def load(driver, page):
    """Opens page; returns the browser's console lines of the load (every level)."""
    driver.get_log("browser")                   # what an earlier page left
    driver.get(page.as_uri())
    deadline = time.monotonic() + 60
    while driver.execute_script(
            "return performance.getEntriesByName('pathscope:syscalls').length") == 0:
        assert time.monotonic() < deadline, "the page's script did not finish"
        time.sleep(0.1)
    marks = driver.execute_script(
        "return performance.getEntriesByType('mark').map(m => m.name)")
    assert marks == [f"pathscope:{p}" for p in PARTS]
    return driver.get_log("browser")


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
    # time over both ranks (README.md: rank 0 + rank 1)
    assert status(browser) == ("time, all ranks: 6.700 s in the whole tree (24 nodes drawn, "
                               "1 under 0.1% of it not drawn)")   # MPI_Comm_dup: 2 ms
    tiles = set(shown(browser))
    for tile in ("[all threads] 6.700 s", "main 3.469 s", "solve / update 2.569 s",
                 "compute 2.269 s",                         # 1100 + 1169 ms sampled
                 "libkernels.so+0x1a4f 300.000 ms",         # 200 + 100
                 "MPI_Allreduce 900.000 ms",                # 300 + 600 MPI
                 "MPI_Recv 150.000 ms", "MPI_Send 10.000 ms",
                 "worker 2.200 s",                          # 1200 + 1000
                 "[failed unwind] 30.000 ms", "[not unwound] 147.000 ms"):
        assert tile in tiles

    # the metric switch: MPI time only
    Select(browser.find_element(By.ID, "metric")).select_by_value("mpi_time")
    assert status(browser) == "MPI time, all ranks: 1.072 s in the whole tree (13 nodes drawn)"
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
        == [8, 8]
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
    assert first == ["_start > __libc_start_call_main", "2", "3.923 s", "1.944 s (0)",
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
