"""The measurement sources the reader knows, one module each (pathscope.sources.base says what
a source provides).  A new source is one module here and one line in SOURCES.

SOURCES is in the order the rank file's lines of each source are checked and linked, and
RankCallPaths.by_source is keyed by Source.name.
"""
from pathscope.sources import heap, kernel, mpi, probe, python, sample
from pathscope.sources.base import Source, SourceParser

SOURCES: tuple[Source, ...] = (
    mpi.SOURCE,
    sample.SOURCE,
    heap.SOURCE,
    kernel.SOURCE,
    probe.SOURCE,
    python.SOURCE,
)

__all__ = ["SOURCES", "Source", "SourceParser"]
