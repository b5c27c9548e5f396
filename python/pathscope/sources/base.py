"""What a measurement source tells the reader: its descriptor (Source) and the parser of its
rank-file lines (SourceParser).

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
Nothing here prints or exits.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Optional, Protocol

from pathscope.tsv import Record

if TYPE_CHECKING:
    from pathscope.cct import RankCallPaths


class SourceParser(Protocol):
    def handlers(self) -> dict[str, Callable[[Record], None]]:
        ...

    def finish(self, rank_paths: "RankCallPaths", complete: bool) -> Optional[Any]:
        ...


@dataclass(frozen=True)
class Source:
    name: str                     # "mpi", "sample", "heap", "kernel": the key of by_source
    # a new parser for each rank file: (file name as messages show it, ranks of the run)
    parser: Callable[[str, int], SourceParser]
