"""Exports behind one dispatcher; each format is a module, imported only when asked for.

Tables (pathscope.export.tables, as pathscope.frames' DataFrames, in chunks of rows) as CSV
or JSON, each format with `write(dataframes, out)`, written by pandas:
    export(profile, "comm-ops", "csv", sys.stdout)
Call paths (pathscope.export.stacks) as flame-graph formats, each with
`write(stacks, out, name)` and WITH_FILES (whether frames keep their source file):
    export_call_paths(profile, "folded", sys.stdout, symbols, metric="time", rank=0)
"""
import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional, TextIO

from pathscope.export.tables import DEFAULT_TABLE, TABLES, tables_help
from pathscope.metrics import CALL_PATH_METRICS, DEFAULT_METRIC
from pathscope.reader import Profile
from pathscope.symbols import SymbolTable

if TYPE_CHECKING:
    from pathscope.frames import ProfileFrames


@dataclass(frozen=True)
class Format:
    module: str                   # imported when the format is asked for
    phrase: str                   # what it writes, in `pathscope export --help`


# every export format, once; `pathscope export --format` and its --help read these
FORMATS = {"csv": Format("pathscope.export.csv_format", "CSV"),
           "json": Format("pathscope.export.json_format", "JSON")}
CALL_PATH_FORMATS = {"folded": Format("pathscope.export.folded", "folded stacks"),
                     "speedscope": Format("pathscope.export.speedscope", "a speedscope file")}
# the whole profile into -o (a binary file, a directory), each module with
# `write(frames, path)` taking a pathscope.frames.ProfileFrames
FILE_FORMATS = {"pprof": Format("pathscope.export.pprof", "a pprof profile (-o FILE)"),
                "parquet": Format("pathscope.export.parquet", "Parquet tables (-o DIR)")}
DEFAULT_FORMAT = "csv"


def export(profile: Profile, table: str, fmt: str, out: TextIO) -> None:
    """The table's DataFrame (pathscope.frames) written by the format's module."""
    from pathscope.frames import ProfileFrames

    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r} (known: {', '.join(FORMATS)})")
    if table not in TABLES:
        raise ValueError(f"unknown table {table!r} (known: {', '.join(TABLES)})")
    importlib.import_module(FORMATS[fmt].module).write(ProfileFrames(profile).table_chunks(table),
                                                       out)


def export_call_paths(profile: Profile, fmt: str, out: TextIO, symbols: SymbolTable,
                      metric: str = DEFAULT_METRIC, rank: Optional[int] = None,
                      thread: Optional[int] = None) -> None:
    """ProfileError when the profile has no call paths, or rank / thread are not in it."""
    from pathscope.export.stacks import collect_stacks

    if fmt not in CALL_PATH_FORMATS:
        raise ValueError(f"unknown call-path format {fmt!r} "
                         f"(known: {', '.join(CALL_PATH_FORMATS)})")
    module = importlib.import_module(CALL_PATH_FORMATS[fmt].module)
    stacks = collect_stacks(profile, symbols, metric, rank, thread, module.WITH_FILES)
    name = str(profile.meta.get("program") or (profile.path.name if profile.path else "profile"))
    module.write(stacks, out, name)


def export_file(frames: "ProfileFrames", fmt: str, path: str) -> None:
    """The FILE_FORMATS format fmt of frames' profile to path."""
    if fmt not in FILE_FORMATS:
        raise ValueError(f"unknown file format {fmt!r} (known: {', '.join(FILE_FORMATS)})")
    importlib.import_module(FILE_FORMATS[fmt].module).write(frames, path)


__all__ = ["CALL_PATH_FORMATS", "FILE_FORMATS", "export_file", "CALL_PATH_METRICS", "DEFAULT_FORMAT", "DEFAULT_METRIC",
           "DEFAULT_TABLE", "FORMATS", "TABLES", "Format", "export", "export_call_paths",
           "tables_help"]
