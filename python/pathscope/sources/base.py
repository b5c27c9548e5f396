"""What a measurement source provides: its descriptor (Source), the parser of its rank-file
lines (SourceParser), and the types of what it adds to the analysis: metrics (Metric, gathered
by pathscope.metrics), export tables (TableSpec, Table, gathered by pathscope.export.tables)
and report sections (Section, gathered by pathscope.report.text).

    parser = heap.SOURCE.parser("prof/ranks/rank-000000.tsv", 4)
    parser.handlers()["hnode"](record)         # one call per line of that kind, in file order
    rank_paths.by_source["heap"] = parser.finish(rank_paths, complete)

Rules a source parser keeps:
- Its handlers take the line kinds no other source and not the core (pathscope.cct,
  pathscope.reader) takes; a kind is claimed by exactly one parser.
- A handler checks the fields it reads (pathscope.tsv.Record) and raises ProfileError naming
  file and line; anything that needs other lines (a node, a thread) waits for finish().
- finish() runs once the core has linked every thread's tree, in SOURCES order; it links the
  source's lines to nodes and threads (pathscope.cct.named_node) and returns what the rank has
  of this source (None when the rank has none of its lines).  complete is False for a file cut
  short: a line naming a node lost in the cut is then dropped, not an error.
- A source module imports only modules that do not gather the sources (pathscope.cct, tsv,
  errors, merge, units and this one) at import time: a report section imports what it needs
  when it renders.
Nothing here prints or exits.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional, Protocol

from pathscope.tsv import Record

if TYPE_CHECKING:
    from pathscope.calltree import MergedNode
    from pathscope.cct import RankCallPaths
    from pathscope.frames import ProfileFrames
    from pathscope.reader import Profile
    from pathscope.treefile import ReducedTree

CALL_PATHS = "call-paths"     # `exports` tag: every call-path format (export.CALL_PATH_FORMATS)
TREE_MERGE = "sum"            # the one rule calltree.MergedNode applies to stored metrics


@dataclass(frozen=True)
class Metric:
    """A value kept per call-tree node or exported per call path (pathscope.metrics says the
    rules)."""
    name: str
    source: str                   # the measurement source that produces it (metrics.SOURCES)
    unit: str                     # metrics.UNITS
    merge: str = TREE_MERGE       # a rule of pathscope.merge.RULES
    field: Optional[str] = None   # stored: the exclusive value's attribute of a cct.Node,
                                  # or of a part of it ("heap.allocs": 0 without the part)
    kind: Optional[str] = None    # stored: read only from nodes of this kind (see above)
    column: Optional[int] = None  # stored: index in MergedNode.by_rank
    formula: Optional[Callable[[Callable[[str], int]], int]] = None  # exported, derived:
                                  # its value from the stored metrics' values by name
    exports: tuple[str, ...] = ()  # CALL_PATHS when the flame-graph formats carry it
    order: int = 0                # exported: place among the --metric choices
    needs_format: Optional[tuple[int, int]] = None  # the format that introduced it
    needs_what: str = ""          # what older profiles do not do ("split sampled time ...")

    @property
    def stored(self) -> bool:
        return self.column is not None

    def value(self, stored_value: Callable[[str], int]) -> int:
        """This metric given the stored metrics' values by name (a node's, summed, ...)."""
        return self.formula(stored_value) if self.formula else stored_value(self.name)


@dataclass
class Table:
    columns: list[str]
    rows: Iterable[dict[str, Any]]    # a list, or made row by row (the ranks table: a world
                                      # of a million ranks is written without holding it)


@dataclass(frozen=True)
class TableSpec:
    name: str                     # `--table NAME`
    help: str                     # its phrase in `pathscope export --help` ("": the name says it)
    columns: list[str]
    build: Callable[["Profile"], Table]
    order: int = 0                # place in the table list (--help, TABLES)


@dataclass(frozen=True)
class Section:
    """A part of the text report: render gives its blocks ([] when the profile has none of
    it) from the profile's tables (pathscope.frames.ProfileFrames: .profile, .symbols, the
    call tree without the MPI library's threads); the report prints every section by order
    (pathscope.report.text)."""
    order: int
    render: Callable[["ProfileFrames"], list[str]]


class SourceParser(Protocol):
    def handlers(self) -> dict[str, Callable[[Record], None]]:
        ...

    def finish(self, rank_paths: "RankCallPaths", complete: bool) -> Optional[Any]:
        ...


@dataclass(frozen=True)
class Source:
    name: str                     # "mpi", "sample", "heap", "kernel", "probe": by_source key
    # a new parser for each rank file: (file name as messages show it, ranks of the run)
    parser: Callable[[str, int], SourceParser]
    metrics: tuple[Metric, ...] = ()
    tables: tuple[TableSpec, ...] = ()
    sections: tuple[Section, ...] = ()
    # the kinds of the leaf nodes it adds to call paths, each named by its key (an MPI
    # function, an allocator, a system call): frames shown by that name
    node_kinds: tuple[str, ...] = ()
    # adds to the merged call tree what the rank's CCTs do not hold, after its threads are
    # merged: (root, world rank, the rank's call paths, the thread index chosen or None)
    tree_hook: Optional[Callable[["MergedNode", int, "RankCallPaths", Optional[int]], None]] = None
    # the same for a tree reduced in the job (calltree.reduced_tree): (root, tree.tsv's data)
    reduced_hook: Optional[Callable[["MergedNode", "ReducedTree"], None]] = None
