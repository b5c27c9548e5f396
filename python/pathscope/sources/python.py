"""Python frames (format 2.13): a CPython process's `python` line and its `py` nodes, the
Python frames its call paths show in place of the interpreter's evaluation frames
(docs/format.md, "Python frames").

    python = profile.callpaths[0].by_source.get("python")   # PythonFrames, or None
    node.kind == "py"; node.op == "main.py:solve:12"          # file:function:line

Rules kept here:
- A `py` node is named by its address field (file basename, qualified function name, line):
  it is a frame like a call site, merged across threads and ranks by that name (frames keyed
  by name: pathscope.symbols.frame_of).
- The `python` line says whether frames were read and why not; the report says it in one
  line when some rank's Python paths are native only (an unknown version, the option off).
Nothing here prints or exits.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Optional

from pathscope.cct import RankCallPaths
from pathscope.sources.base import Section, Source
from pathscope.tsv import Record

if TYPE_CHECKING:
    from pathscope.frames import ProfileFrames
    from pathscope.reader import Profile

PY = "py"                         # a Python frame: file.py:function:line


@dataclass
class PythonFrames:
    """A rank's `python` line."""
    version: str                  # "3.11.2"
    on: bool                      # frames were read
    note: str                     # why not ("" when on)
    spliced: int                  # walks whose evaluation frames were replaced
    unmatched: int                # walks left native: chain and native frames disagreed
    unread: int                   # walks left native: the chain could not be read
    too_deep: int                 # walks left native: the path would exceed 256 frames
    locations: int                # distinct (code, line) named
    locations_lost: int           # locations not named: the table was full


class PythonParser:
    def __init__(self, name: str, world: int):
        self.frames: Optional[PythonFrames] = None

    def handlers(self) -> dict[str, Callable[[Record], None]]:
        return {"python": self._python}

    def _python(self, r: Record) -> None:
        r.need(9)
        note = r.text(2)
        self.frames = PythonFrames(r.text(0), r.text(1) == "on", "" if note == "-" else note,
                                   *(r.number(i) for i in range(3, 9)))

    def finish(self, rank_paths: RankCallPaths, complete: bool) -> Optional[PythonFrames]:
        return self.frames


def native_only_line(profile: "Profile") -> Optional[str]:
    """`Python frames: not read on rank 0 (CPython 3.13.0: unknown CPython version): its
    paths show the interpreter's native frames`, or None when every Python rank read them."""
    off: dict[tuple[str, str], list[int]] = {}
    for rank, paths in sorted(profile.callpaths.items()):
        frames = paths.by_source.get("python")
        if frames is not None and not frames.on:
            off.setdefault((frames.version, frames.note), []).append(rank)
    if not off and profile.tree is not None:
        for ranks, value in profile.tree.strings.get("python", []):
            version, _, note = value.partition(" ")
            if note and not note.startswith("on"):
                off.setdefault((version, note.removeprefix("off ")), []).extend([-1] * ranks)
    if not off:
        return None
    parts = []
    for (version, note), ranks in off.items():
        known = [r for r in ranks if r >= 0]
        who = (f"rank{'s' if len(known) > 1 else ''} {','.join(map(str, known))}" if known
               else f"{len(ranks)} rank{'s' if len(ranks) > 1 else ''}")
        parts.append(f"{who} (CPython {version}: {note})")
    many = len(off) > 1 or sum(len(ranks) for ranks in off.values()) > 1
    return ("Python frames: not read on " + "; ".join(parts) +
            f": {'their' if many else 'its'} paths show the interpreter's native frames")


def _section(frames: "ProfileFrames") -> list[str]:
    line = native_only_line(frames.profile)
    return [line] if line else []


SOURCE = Source("python", PythonParser, sections=(Section(44, _section),), node_kinds=(PY,))
