"""The text report on a terminal: the same characters as the plain report (what a pipe or a
file gets, tests/python/golden), with rich's colours: section headings and table headers
bold, warnings yellow, mismatches red, a consistency that holds green, the hot path's
imbalance above IMBALANCE_MARK yellow.  Lines are never wrapped or cut (soft wrap): the
terminal does what it does with long lines, as with the plain report.

    show(text, sys.stdout)     # only when sys.stdout is a terminal (pathscope.cli decides)
"""
from __future__ import annotations

import re
from typing import TextIO

HEADING = "bold"
TABLE_HEADER = "bold cyan"
WARNING = "yellow"
PROBLEM = "bold red"
GOOD = "green"
IMBALANCE_MARK = 1.2          # a max/mean above this is worth a colour in the hot path
_CELL_GAP = re.compile(r"\S  +\S")
_HOT_ROW = re.compile(r"\s(\d+\.\d\d)  \S")


def style_of(line: str) -> str:
    """The rich style of one report line ("" for none)."""
    if line and not line[0].isspace():
        return HEADING
    text = line.strip()
    if "MISMATCH" in text or text.startswith("ERROR"):
        return PROBLEM
    if "WARNING" in text:
        return WARNING
    if text.startswith("OK:"):
        return GOOD
    if len(_CELL_GAP.findall(line)) >= 3 and not any(c.isdigit() for c in text):
        return TABLE_HEADER
    return ""


def styled(text: str) -> "Text":
    """The report as one rich Text, styled line by line (and the hot path's imbalance)."""
    from rich.text import Text

    out = Text()
    in_hot_path = False
    for line in text.splitlines(keepends=True):
        start = len(out)
        out.append(line, style=style_of(line) or None)
        if line and not line[0].isspace():
            in_hot_path = line.startswith("Hot path")
        elif in_hot_path:
            match = _HOT_ROW.search(line)
            if match and float(match.group(1)) > IMBALANCE_MARK:
                out.stylize(WARNING, start + match.start(1), start + match.end(1))
    return out


def show(text: str, stream: TextIO) -> None:
    from rich.console import Console

    console = Console(file=stream, force_terminal=True, highlight=False, soft_wrap=True,
                      emoji=False, markup=False)
    console.print(styled(text), end="")
