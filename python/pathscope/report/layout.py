"""Layout helpers and choices shared by the report sections: aligned tables, plurals, the
function paths start below, how many top paths are listed."""
from __future__ import annotations

from typing import Sequence

INDENT = "  "
MAIN = "main"                 # the program's main function: paths are shown from below it
TOP_PATHS = 10                # paths listed by the heap and kernel sections


def plural(count: int, noun: str) -> str:
    """`1 rank`, `2 ranks`."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], align: str,
          indent: str = INDENT) -> str:
    """Columns padded to their widest cell; align has one letter per column, l or r."""
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]
    lines = []
    for row in [headers, *rows]:
        cells = [str(c).ljust(w) if align[i] == "l" else str(c).rjust(w)
                 for i, (c, w) in enumerate(zip(row, widths))]
        lines.append((indent + "  ".join(cells)).rstrip())
    return "\n".join(lines)
