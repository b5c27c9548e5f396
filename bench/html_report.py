#!/usr/bin/env python3
"""`pathscope report --html` (issue 15): time and peak memory of writing the page, its size,
and its first render in headless Chromium, on the demo profile (`make demo`) and on a
synthetic 1,024-rank x 5,000-path profile (bench/synth_profile.py with the rank vectors of
`--per-rank summary`).  With --diff: the same for `pathscope diff --html`'s two-profile page,
on the demo pair (the demo's profile as BASE; NEW the same stencil run with 300 steps instead
of 200, made once under build/bench/html) and on two synthetic profiles (seeds 14 and 15:
the same tree with other values).

    bench/html_report.py                    # build/bench/html/...
    bench/html_report.py --ranks 64 --paths 500 --renders 5
    bench/html_report.py --diff

Writing: each report under /usr/bin/time (wall seconds, maximum resident set), twice (the
first resolves the symbols).  Rendering: RENDERS times, a headless chromium started (Selenium,
as tests/e2e/test_html_browser.py) that opens the page twice: cold (nothing compiled yet: what
opening the file first costs) and warm (plotly.js compiled); each time: the navigation timing's
loadEventEnd (the page's script draws everything before the load event: the first render),
its performance marks (when the icicle was drawn), and Chrome's ScriptDuration and
ThreadTime (CPU time of the page's main thread) from the DevTools protocol.  The machine's
load average is printed with them (2 cores shared here: wall times grow with it).
Goals (issue 15): under 10 s and bounded memory to write, under 20 MB, first render under 3 s.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
WORK = REPO / "build" / "bench" / "html"


def write_page(command: list[str], out: Path) -> tuple[float, float]:
    """(wall s, max RSS MiB) of `pathscope COMMAND... --html -o out`."""
    p = subprocess.run(["/usr/bin/time", "-f", "%e %M", str(REPO / "bin" / "pathscope"),
                        *command, "--html", "-o", str(out)], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{' '.join(command)} --html failed:\n{p.stderr}")
    wall, rss = p.stderr.strip().splitlines()[-1].split()
    return float(wall), int(rss) / 1024


def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,1000"):
        options.add_argument(arg)
    options.binary_location = "/usr/bin/chromium"
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    driver.execute_cdp_cmd("Performance.enable", {})
    return driver


def render(driver, page: Path) -> dict[str, float]:
    driver.get("about:blank")
    before = _metrics(driver)
    driver.get(page.as_uri())
    while not driver.execute_script(
            "return performance.getEntriesByName('pathscope:done').length"):
        time.sleep(0.05)
    while not driver.execute_script(
            "return performance.getEntriesByType('navigation')[0].loadEventEnd"):
        time.sleep(0.05)
    after = _metrics(driver)
    nav = driver.execute_script(
        "const n = performance.getEntriesByType('navigation')[0];"
        "const m = performance.getEntriesByName('pathscope:tree')[0];"
        "const h = performance.getEntriesByName('pathscope:header')[0];"
        "return [n.loadEventEnd, m.startTime, h.startTime]")
    return {"load_s": nav[0] / 1e3, "icicle_s": nav[1] / 1e3, "script_start_s": nav[2] / 1e3,
            "script_cpu_s": after["ScriptDuration"] - before["ScriptDuration"],
            "thread_cpu_s": after["ThreadTime"] - before["ThreadTime"]}


def _metrics(driver) -> dict[str, float]:
    got = driver.execute_cdp_cmd("Performance.getMetrics", {})["metrics"]
    return {m["name"]: m["value"] for m in got}


def synthetic(ranks: int, paths: int, seed: int = 14) -> Path:
    directory = WORK / f"synth-{ranks}x{paths}" if seed == 14 else \
        WORK / f"synth-{ranks}x{paths}-seed{seed}"
    if not directory.is_dir():
        subprocess.run([sys.executable, str(REPO / "bench" / "synth_profile.py"), str(directory),
                        "--ranks", str(ranks), "--paths", str(paths), "--seed", str(seed),
                        "--rank-vectors"], check=True)
    return directory


def demo_new(demo: Path) -> Path:
    """The demo's stencil again, 300 steps instead of 200 (Open MPI, 4 ranks, as make demo)."""
    directory = WORK / "demo-300"
    if not directory.is_dir():
        subprocess.run(["mpirun.openmpi", "--allow-run-as-root", "--oversubscribe", "-np", "4",
                        str(REPO / "bin" / "pathscope"), "run", "-o", str(directory), "--",
                        str(demo.parent / "stencil"), "512", "300"], check=True)
    return directory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--demo", type=Path, default=REPO / "build" / "openmpi" / "demo-profile")
    parser.add_argument("--ranks", type=int, default=1024)
    parser.add_argument("--paths", type=int, default=5000)
    parser.add_argument("--renders", type=int, default=3)
    parser.add_argument("--diff", action="store_true",
                        help="the two-profile page of diff --html instead of report --html")
    args = parser.parse_args()
    if not args.demo.is_dir():
        sys.exit(f"{args.demo}: not there; run `make demo` first")
    WORK.mkdir(parents=True, exist_ok=True)
    synth = synthetic(args.ranks, args.paths)
    shape = f"{args.ranks} x {args.paths}"
    if args.diff:
        cases = [("demo pair (200 -> 300 steps)", ["diff", str(args.demo),
                                                   str(demo_new(args.demo))], "diff-demo"),
                 (f"synthetic pair {shape}", ["diff", str(synth), str(
                     synthetic(args.ranks, args.paths, seed=15))], "diff-synth")]
    else:
        cases = [("demo", ["report", str(args.demo)], args.demo.name),
                 (f"synthetic {shape}", ["report", str(synth)], synth.name)]
    for name, command, stem in cases:
        out = WORK / f"{stem}.html"
        writes = [write_page(command, out) for _ in range(2)]
        size = out.stat().st_size / 1e6
        # cold: each in a browser just started (nothing compiled yet); warm: then again in it
        cold, warm = [], []
        for _ in range(args.renders):
            driver = browser()
            try:
                cold.append(render(driver, out))
                warm.append(render(driver, out))
            finally:
                driver.quit()
        print(f"{name}: pathscope {' '.join(command)} --html")
        for i, (wall, rss) in enumerate(writes):
            print(f"  write run {i + 1}: {wall:.2f} s, max RSS {rss:.0f} MiB")
        print(f"  page: {size:.2f} MB")
        for label, renders in (("cold", cold), ("warm", warm)):
            for key in renders[0]:
                values = [r[key] for r in renders]
                print(f"  {label} {key}: median {statistics.median(values):.2f} s "
                      f"({', '.join(f'{v:.2f}' for v in values)})")
        print(f"  load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")

if __name__ == "__main__":
    main()
