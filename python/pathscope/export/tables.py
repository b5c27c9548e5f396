"""The exportable tables of a profile, independent of the file format.

A Table is a list of column names and rows of plain values: int, float (seconds), str, None
(unknown) and, for `hist`, a dict {bin: count} (docs/format.md, Histograms).  Text fields keep
the profile's spelling, including `-` for "none".

TABLES lists every table once (TableSpec: name, --help phrase, columns, builder, order),
the core's here and the measurement sources' from pathscope.sources; each
builder's docstring says what a row is.  `pathscope export --table` and its --help read it.
"""
from __future__ import annotations

from typing import Any, Callable, Iterator

from pathscope.metrics import STORED
from pathscope.reader import Profile
from pathscope.sources import SOURCES
# Table, TableSpec: importable from here too (they were defined here)
from pathscope.sources.base import Table, TableSpec  # noqa: F401
from pathscope.treefile import INCLUSIVE
from pathscope.units import seconds


WARNINGS_COLUMNS = ["rank", "key", "count", "first_s", "text"]


def warnings_table(profile: Profile) -> Table:
    """One row per rank and warning key: the problems the runtime reported (format 2.3)."""
    rows = []
    for info in profile.ranks:
        for w in info.warnings:
            rows.append({"rank": info.rank, "key": w.key, "count": w.count,
                         "first_s": seconds(w.first_ns), "text": w.text})
    return Table(WARNINGS_COLUMNS, rows)


THREADS_COLUMNS = ["rank", "thread", "tid", "mpi_runtime", "elapsed_s", "mpi_s", "sampled_s",
                   "oncpu_s", "offcpu_s", "cpu_s", "samples"]


def threads_table(profile: Profile) -> Table:
    """Call paths: one row per rank and thread: elapsed, MPI and sampled time from its tree
    (sampled_s = oncpu_s + offcpu_s; elapsed_s = mpi_s + sampled_s within 1 ns per node), the
    sampled time on and off the CPU, and the thread's exact CPU time.  The split and the CPU
    time are None before format 2.4, cpu_s also when the runtime could not read it."""
    rows = []
    for rank, paths in sorted(profile.callpaths.items()):
        split = paths.knows_offcpu()
        for index, thread in paths.threads.items():
            sampled = sum(n.sample_ns for n in thread.nodes)
            offcpu = sum(n.offcpu_ns for n in thread.nodes)
            rows.append({"rank": rank, "thread": index, "tid": thread.tid,
                         "mpi_runtime": int(thread.runtime_thread(paths.modules)),
                         "elapsed_s": seconds(thread.elapsed_ns),
                         "mpi_s": seconds(sum(n.mpi_ns for n in thread.nodes)),
                         "sampled_s": seconds(sampled),
                         "oncpu_s": seconds(sampled - offcpu) if split else None,
                         "offcpu_s": seconds(offcpu) if split else None,
                         "cpu_s": seconds(thread.cpu_ns) if split and thread.cpu_ns else None,
                         "samples": thread.samples_kept})
    return Table(THREADS_COLUMNS, rows)


RANKVEC_COLUMNS = ["node", "root", "path", "column", "unit", "rank", "value"]


def rankvec_table(profile: Profile) -> Table:
    """--per-rank summary: one row per path of tree.tsv's `rankvec` lines, column and rank
    (the paths by node id, then the columns in the file's order, then rank 0 first): the
    rank's exact value, in seconds for a time (unit `s`), else in the column's unit (`bytes`,
    `count`; a column this reader does not know: as written, no unit).  node: tree.tsv's id;
    root: its root's name (`app`, or `runtime` for the MPI library's threads); path: the
    frames' names from the root's child down to the node, joined with `;` (empty for a root).
    No rows without rank vectors."""
    data = profile.tree
    if data is None or not data.rank_vectors:
        return Table(RANKVEC_COLUMNS, [])
    from pathscope.calltree import frame_of_tree_node
    from pathscope.symbolize import resolve_symbols
    symbols = resolve_symbols(profile)
    paths: dict[int, tuple[str, list[str]]] = {}      # node id -> root, names
    for node in data.nodes:
        if node.parent is None:
            paths[node.id] = (node.name, [])
        else:
            root, names = paths[node.parent]
            paths[node.id] = (root, names + symbols.names(frame_of_tree_node(node, data)))
    units = {**{m.name: m.unit for m in STORED}, **{name: "ns" for name in INCLUSIVE}}

    def rows() -> Iterator[dict[str, Any]]:
        for node_id, vectors in sorted(data.rank_vectors.items()):
            root, names = paths[node_id]
            path = ";".join(names)
            for column, values in vectors.items():
                unit = units.get(column)
                show: Callable[[int], Any] = seconds if unit == "ns" else int
                for rank, value in enumerate(values):
                    yield {"node": node_id, "root": root, "path": path, "column": column,
                           "unit": "s" if unit == "ns" else unit, "rank": rank,
                           "value": show(value)}
    return Table(RANKVEC_COLUMNS, rows())


# The core's tables (a rank's warnings, its threads, the rank vectors of tree.tsv); with the
# sources' tables, by order (the order of --help and of TABLES).
_CORE = (
    TableSpec("warnings", "the runtime's warnings per rank", WARNINGS_COLUMNS, warnings_table,
              30),
    TableSpec("threads", "per thread: elapsed, MPI, on-CPU, off-CPU and CPU time",
              THREADS_COLUMNS, threads_table, 40),
    TableSpec("rankvec", "each rank's value of the heaviest paths (--per-rank summary)",
              RANKVEC_COLUMNS, rankvec_table, 45),
)
TABLES: dict[str, TableSpec] = {spec.name: spec for spec in sorted(
    _CORE + tuple(t for source in SOURCES for t in source.tables), key=lambda t: t.order)}
DEFAULT_TABLE = "comm-ops"    # `pathscope export` without --table


def tables_help() -> str:
    """The table list of `pathscope export --help`: `name (help), name, ...`."""
    return ", ".join(f"{s.name} ({s.help})" if s.help else s.name for s in TABLES.values())


def build_table(profile: Profile, name: str) -> Table:
    if name not in TABLES:
        raise ValueError(f"unknown table {name!r} (known: {', '.join(TABLES)})")
    return TABLES[name].build(profile)
