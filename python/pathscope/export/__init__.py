"""Exports: a table (pathscope.export.tables) written in a format.  Each format is a module
with `write(table, out)`, imported only when asked for.

    export(profile, "comm-ops", "csv", sys.stdout)
"""
import importlib
from typing import TextIO

from pathscope.export.tables import TABLES, build_table
from pathscope.reader import Profile

FORMATS = {"csv": "pathscope.export.csv_format", "json": "pathscope.export.json_format"}


def export(profile: Profile, table: str, fmt: str, out: TextIO) -> None:
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r} (known: {', '.join(FORMATS)})")
    importlib.import_module(FORMATS[fmt]).write(build_table(profile, table), out)


__all__ = ["FORMATS", "TABLES", "export"]
