"""The metric registry (pathscope.metrics): its invariants are checked when it is built, and
every consumer reads it (the --metric choices, the by_rank columns, the exported values)."""
import dataclasses
import re
from pathlib import Path

import pytest

from pathscope import metrics
from pathscope.calltree import METRIC_COUNT, MergedNode
from pathscope.export import CALL_PATH_METRICS
from pathscope.symbols import ROOT_FRAME


def test_consumers_read_the_registry():
    assert CALL_PATH_METRICS == metrics.CALL_PATH_METRICS
    assert METRIC_COUNT == len(metrics.STORED) == 24
    assert [m.column for m in metrics.STORED] == list(range(24))


def test_a_derived_value_is_its_formula_over_the_stored_totals():
    node = MergedNode(ROOT_FRAME, None)
    row = [0] * METRIC_COUNT
    for name, value in (("sample_ns", 700), ("mpi_ns", 300), ("offcpu_ns", 200),
                        ("alloc_bytes", 50), ("freed_bytes", 20)):
        row[metrics.COLUMNS[name]] = value
    node.by_rank = {0: row, 3: list(row)}
    assert [node.value(name) for name in ("time", "mpi_time", "oncpu_time", "offcpu_time",
                                          "leaked_bytes")] == [2000, 600, 1000, 400, 60]


@pytest.mark.parametrize("change, message", [
    (lambda ms: ms + (ms[0],), "names repeated"),
    (lambda ms: ms + (dataclasses.replace(ms[1], name="x"),), "columns not 0..n-1"),
    (lambda ms: ms + (metrics.Metric("x", "core", "ns", formula=lambda v: v("nope"),
                                     exports=(metrics.CALL_PATHS,), order=999),),
     "x: formula of unknown metrics ['nope']"),
    (lambda ms: ms + (metrics.Metric("x", "core", "ns", formula=lambda v: 0,
                                     exports=(metrics.CALL_PATHS,), order=10),),
     "--metric orders repeated"),
    (lambda ms: ms + (metrics.Metric("x", "core", "ns", field="x", column=24,
                                     merge="and"),), "x: the tree only sums"),
    (lambda ms: ms + (metrics.Metric("x", "core", "ns", field="x", column=24,
                                     merge="avg"),), "x: source, unit or merge rule"),
])
def test_a_broken_registry_is_refused(change, message):
    with pytest.raises(ValueError, match="metric registry: " + re.escape(message)):
        metrics._check(change(metrics._ALL))


def _guide() -> str:
    return (Path(__file__).resolve().parents[2] / "docs" / "user-guide.md").read_text()


def test_the_user_guide_names_exactly_the_exported_metrics():
    """docs/user-guide.md's `--metric` row of `pathscope export` names every choice of the
    registry, no other, and its default."""
    row = next(line for line in _guide().splitlines() if line.startswith("| `--metric` |"))
    _, choices, default = [cell.strip() for cell in row.strip(" |").split(" | ")]
    assert set(re.findall(r"`([a-z_]+)`", choices)) == set(metrics.CALL_PATH_METRICS)
    assert default == f"`{metrics.DEFAULT_METRIC}`"
