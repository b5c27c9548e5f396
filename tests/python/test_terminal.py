"""rich on a terminal (a real pseudo-terminal here): progress bars (pathscope.progress),
drawn once the work has taken SHOW_AFTER, never on a pipe or a file, never with
PATHSCOPE_PROGRESS=0, and drawn by reading and merging a synthetic profile of 12 rank
files; the report in colour (pathscope.report.terminal), the golden text once the colours
are taken out."""
import io
import re
import os
import sys
from pathlib import Path

import pytest

from pathscope import progress
from pathscope.calltree import build_tree
from pathscope.progress import Steps
from pathscope.reader import load_profile

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import synth_profile  # noqa: E402


def on_a_terminal(work):
    """What work(stream) draws on a pseudo-terminal's stream."""
    master, slave = os.openpty()
    with os.fdopen(slave, "w", encoding="utf-8", closefd=True) as stream:
        work(stream)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:           # EIO: the terminal's other side is closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    return b"".join(chunks).decode("utf-8", "replace")


def count(stream, after, steps=200):
    with Steps("counting", steps, stream=stream, after=after) as step:
        for _ in range(steps):
            step()
    return step


def test_a_bar_on_a_terminal_once_the_work_is_long(monkeypatch):
    monkeypatch.delenv(progress.PROGRESS_VARIABLE, raising=False)
    drawn = on_a_terminal(lambda stream: count(stream, after=0))
    assert "pathscope: counting" in drawn and "200/200" in drawn
    assert on_a_terminal(lambda stream: count(stream, after=3600)) == ""


def test_no_bar_on_a_pipe_or_when_turned_off(monkeypatch):
    monkeypatch.delenv(progress.PROGRESS_VARIABLE, raising=False)
    out = io.StringIO()
    assert count(out, after=0).done == 200
    assert out.getvalue() == ""
    monkeypatch.setenv(progress.PROGRESS_VARIABLE, "0")
    assert on_a_terminal(lambda stream: count(stream, after=0)) == ""


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    d = tmp_path_factory.mktemp("synth") / "prof"
    synth_profile.write_dir(d, ranks=12, paths=50, seed=3, rank_files=True)
    return d


def test_reading_and_merging_rank_files_draw_bars(synthetic, monkeypatch):
    monkeypatch.delenv(progress.PROGRESS_VARIABLE, raising=False)
    monkeypatch.setattr(progress, "SHOW_AFTER", 0.0)

    def work(stream):
        monkeypatch.setattr(sys, "stderr", stream)
        tree = build_tree(load_profile(synthetic))
        assert len(tree.ranks) == 12

    drawn = on_a_terminal(work)
    assert "pathscope: reading rank files" in drawn and "12/12" in drawn
    assert "pathscope: merging call trees" in drawn


def test_report_on_a_terminal_is_the_golden_text_in_colour(monkeypatch):
    """`pathscope report` on a terminal: rich's escape sequences around the very characters
    a pipe gets (the golden file); headings bold, table headers bold cyan, the hot path's
    max/mean above 1.2 yellow."""
    from pathscope.cli import main
    from pathscope_samples import HYBRID

    def work(stream):
        monkeypatch.setattr(sys, "stdout", stream)
        assert main(["report", str(HYBRID)]) == 0

    drawn = on_a_terminal(work).replace("\r\n", "\n")
    golden = (Path(__file__).parent / "golden" / "report_hybrid.txt").read_text()
    assert re.sub(r"\x1b\[[0-9;]*m", "", drawn) == golden.replace("{path}", str(HYBRID))
    assert "\x1b[1mHot path (at each level" in drawn
    assert "\x1b[1;36m    time     ±       %  min (rank)" in drawn
    assert "\x1b[33m1.33\x1b[0m  libkernels.so+0x1a4f" in drawn
