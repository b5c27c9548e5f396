"""The metric registry: every value kept per call-tree node or exported per call path, once.

    METRICS["time"].formula, METRICS["sample_ns"].column    # by name
    COLUMNS["mpi_ns"] == 3            # a stored metric's index in MergedNode.by_rank
    CALL_PATH_METRICS                 # `pathscope export --metric` choices, in their order

Two kinds of metric, one namespace:
- stored: a node's exclusive value, an attribute of a CCT node (`field`), kept per rank in
  calltree.MergedNode.by_rank at `column`.  The columns are pinned (0..23; tests check the
  layout): a new stored metric takes the next column.  A metric with `kind` is read only from
  nodes of that kind, and a node of such a kind feeds only those metrics (a system call's
  visits are its calls, not MPI visits);
- exported: the value of a call path in the flame-graph formats (`exports` holds
  CALL_PATHS): a stored metric itself, or a `formula` over stored metrics by name.
Rules kept here:
- unit: "ns", "bytes" or "count".  Exports show ns in microseconds, rounded half up after
  summing (export/stacks.py); each format names the unit in its own words.
- merge: how the values of threads and ranks combine, a rule of pathscope.merge (docs/format.md,
  "Merge rules").  Every stored metric sums, over a rank's threads and over ranks, with
  per-rank min/mean/max (frames.rank_statistics: a rank without the node counts as 0, the lowest
  rank on ties).
- needs_format: the profile format that introduced the metric; a profile with an older rank
  is refused for it (export/stacks.check_metric: "does not <needs_what>"), never exported as
  zeros.
- order: the place among the --metric choices (ascending); the choices keep today's order.
Adding a metric is one entry in its source's metrics (pathscope.sources), or in _CORE.  Nothing here reads a profile.
"""
from __future__ import annotations

from pathscope.merge import RULES
from pathscope.sources import SOURCES as _SOURCES
# Metric, CALL_PATHS, TREE_MERGE: importable from here too (they were defined here)
from pathscope.sources.base import CALL_PATHS, TREE_MERGE, Metric  # noqa: F401

UNITS = ("ns", "bytes", "count")
# who produces a metric: the core, a source of pathscope.sources, or the stack walker
SOURCES = ("core", *(source.name for source in _SOURCES), "unwind")
DEFAULT_METRIC = "time"       # export --metric when none is given


# The metrics of the core and of the stack walker (not a source of pathscope.sources).
_CORE = (
    # thunk mode: calls made at a call site, a lower bound
    Metric("entries", "unwind", "count", field="entries", column=10),

    Metric("time", "core", "ns", formula=lambda v: v("sample_ns") + v("mpi_ns"),
           exports=(CALL_PATHS,), order=10),
    # thunk mode: calls made at each call site that a walk saw start, a lower bound
    Metric("calls", "unwind", "count", formula=lambda v: v("entries"), exports=(CALL_PATHS,),
           order=70),
)


def _require(condition: bool, what: str) -> None:
    if not condition:
        raise ValueError(f"metric registry: {what}")


def _check(metrics: tuple[Metric, ...]) -> None:
    """The registry's invariants; a broken one is a programming error (raised at import)."""
    names = [m.name for m in metrics]
    _require(len(set(names)) == len(names), f"names repeated: {names}")
    stored = [m for m in metrics if m.stored]
    _require(sorted(m.column or 0 for m in stored) == list(range(len(stored))),
             "columns not 0..n-1, each once")
    for m in metrics:
        _require(m.source in SOURCES and m.unit in UNITS and m.merge in RULES,
                 f"{m.name}: source, unit or merge rule")
        _require((m.field is not None) == m.stored, f"{m.name}: a stored metric needs field")
        _require(not m.field or m.field.count(".") <= 1, f"{m.name}: field a.b at most")
        _require(m.stored != (m.formula is not None), f"{m.name}: stored or a formula")
        _require(not m.stored or m.merge == TREE_MERGE, f"{m.name}: the tree only sums")
    exported = [m for m in metrics if CALL_PATHS in m.exports]
    orders = [m.order for m in exported]
    _require(len(set(orders)) == len(orders), f"--metric orders repeated: {orders}")
    known = {m.name for m in stored}
    for m in exported:
        used: list[str] = []
        m.value(lambda name: used.append(name) or 0)
        _require(set(used) <= known, f"{m.name}: formula of unknown metrics {used}")


# Stored metrics by column, then the exported ones that are formulas, by choice order.
_ALL = tuple(sorted(_CORE + tuple(m for source in _SOURCES for m in source.metrics),
                    key=lambda m: (not m.stored, m.column if m.stored else m.order)))
_check(_ALL)
METRICS: dict[str, Metric] = {m.name: m for m in _ALL}
STORED: tuple[Metric, ...] = tuple(sorted((m for m in _ALL if m.stored),
                                          key=lambda m: m.column or 0))
COLUMNS: dict[str, int] = {m.name: m.column for m in STORED if m.column is not None}
COLUMN_COUNT = len(STORED)
CALL_PATH_METRICS: tuple[str, ...] = tuple(
    m.name for m in sorted((m for m in _ALL if CALL_PATHS in m.exports), key=lambda m: m.order))
_require(DEFAULT_METRIC in CALL_PATH_METRICS, "the default metric is not exported")
