"""Folded stacks (Brendan Gregg's flamegraph.pl, inferno, speedscope, ...): one line
`frame;frame;...;leaf VALUE` per distinct stack of names, outermost frame first, sorted.
The rules of the stacks and values are export/stacks.py's."""
from typing import TextIO

from pathscope.export.stacks import Stacks, stack_text

WITH_FILES = False            # a folded line is names only


def write(stacks: Stacks, out: TextIO, name: str = "") -> None:
    """name (the profile's) is not part of the format."""
    for stack, value in stacks.stacks:
        out.write(f"{stack_text(stack)} {value}\n")
