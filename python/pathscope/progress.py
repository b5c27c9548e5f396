"""Progress bars for the analysis's long loops (reading and merging many rank files), drawn
by rich on stderr, only on a terminal and only once the work has taken SHOW_AFTER seconds:
a profile of a few ranks never shows one, and a pipe or a file never gets one.

    with Steps("reading rank files", total=len(files)) as step:
        for f in files:
            ...
            step()

rich is imported when a bar is first drawn, never otherwise (`pathscope run` does not use
this module; an analysis on a pipe does not pay for rich).  PATHSCOPE_PROGRESS=0 turns the
bars off.  Nothing here writes to stdout.
"""
from __future__ import annotations

import os
import sys
import time
from types import TracebackType
from typing import Any, Optional, TextIO

SHOW_AFTER = 1.0              # seconds of work before a bar is drawn
PROGRESS_VARIABLE = "PATHSCOPE_PROGRESS"
# time.monotonic is read once per CHECK_EVERY steps (a merge takes millions of them)
CHECK_EVERY = 64


class Steps:
    """A counted loop of total steps (module docstring); call the object once per step."""

    def __init__(self, description: str, total: int, stream: Optional[TextIO] = None,
                 after: Optional[float] = None):
        """stream: sys.stderr by default; after: SHOW_AFTER by default."""
        self.description = description
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        self.after = after if after is not None else SHOW_AFTER
        self.done = 0
        self._start = 0.0
        self._bar: Any = None         # rich.progress.Progress once drawn
        self._task: Any = None
        self._allowed = False

    def __enter__(self) -> "Steps":
        self._start = time.monotonic()
        self._allowed = (self.total > 0 and os.environ.get(PROGRESS_VARIABLE, "1") != "0"
                         and _is_terminal(self.stream))
        return self

    def __call__(self, count: int = 1) -> None:
        self.done += count
        if not self._allowed:
            return
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done)
        elif self.done % CHECK_EVERY == 0 or self.done == 1:
            if time.monotonic() - self._start >= self.after:
                self._draw()

    def _draw(self) -> None:
        from rich.console import Console
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                   TimeElapsedColumn, TimeRemainingColumn)

        console = Console(file=self.stream, force_terminal=True)
        self._bar = Progress(TextColumn("pathscope: {task.description}"), BarColumn(),
                             MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn(),
                             console=console, transient=True)
        self._bar.start()
        self._task = self._bar.add_task(self.description, total=self.total,
                                        completed=self.done)

    def __exit__(self, kind: Optional[type[BaseException]], error: Optional[BaseException],
                 trace: Optional[TracebackType]) -> None:
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done)
            self._bar.stop()
            self._bar = None


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):      # a closed or a file-like object
        return False
