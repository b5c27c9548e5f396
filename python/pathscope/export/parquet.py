"""A profile's tables as Parquet files (`pathscope export --format parquet -o OUTDIR`), for
DuckDB, Spark, polars and pandas pipelines (docs/format.md, "Parquet tables").

    write(pathscope.open("prof"), "prof-parquet")
    read_parquet("prof-parquet")        # {name: DataFrame}, the same frames again

OUTDIR/NAME.parquet for every table of pathscope.open (the export tables under their export
names, then nodes, metrics and node_stats), each with the frame's columns and pyarrow types,
and OUTDIR/manifest.json saying what they are of: the profile's path and run id, the tables
and their row counts, and the version of this layout.  Each file is written under a temporary
name and renamed, the manifest last, so a reader never sees half a file.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable, Union

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from pathscope.errors import OutputError, ProfileError
from pathscope.frames import ProfileFrames

LAYOUT = "pathscope-parquet"
LAYOUT_VERSION = "1.0"
MANIFEST = "manifest.json"
CALL_TREE_TABLES = ("nodes", "metrics", "node_stats")


def table_names(frames: ProfileFrames) -> list[str]:
    return frames.table_names + list(CALL_TREE_TABLES)


def frame_of(frames: ProfileFrames, name: str) -> pd.DataFrame:
    return getattr(frames, name) if name in CALL_TREE_TABLES else frames.table(name)


def arrow_table(df: pd.DataFrame) -> pa.Table:
    """df's columns as they are (pyarrow-backed), without pandas' index."""
    return pa.Table.from_pandas(df, preserve_index=False)


def write(frames: ProfileFrames, outdir: Union[str, Path]) -> dict:
    """Every table into outdir (created if missing); returns the manifest."""
    out = Path(outdir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OutputError(f"cannot write '{outdir}': {e.strerror}") from e
    tables = {}
    for name in table_names(frames):
        table = arrow_table(frame_of(frames, name))
        _replace(out / f"{name}.parquet", lambda tmp, t=table: pq.write_table(t, tmp))
        tables[name] = {"file": f"{name}.parquet", "rows": table.num_rows}
    manifest = {"layout": LAYOUT, "version": LAYOUT_VERSION,
                "profile": str(frames.profile.path.resolve()) if frames.profile.path else None,
                "run_id": frames.profile.run_id,
                "program": frames.profile.meta.get("program"),
                "format_version": frames.profile.meta.get("format_version"),
                "tables": tables}
    text = json.dumps(manifest, indent=2) + "\n"
    _replace(out / MANIFEST, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
    return manifest


def _replace(path: Path, make: Callable[[str], object]) -> None:
    """make(tmp) then rename tmp to path: path is the old file or the whole new one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        make(str(tmp))
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise OutputError(f"cannot write '{path}': {e.strerror}") from e


def read_manifest(directory: Union[str, Path]) -> dict:
    """directory's manifest.json (ProfileError when it is not a Parquet export)."""
    path = Path(directory) / MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ProfileError(f"{directory}: not a Parquet export of pathscope "
                           f"({MANIFEST}: {getattr(e, 'strerror', None) or e})") from e
    if not isinstance(manifest, dict) or manifest.get("layout") != LAYOUT:
        raise ProfileError(f"{directory}: {MANIFEST} is not a pathscope Parquet manifest")
    major = str(manifest.get("version", "")).split(".")[0]
    if major != LAYOUT_VERSION.split(".")[0]:
        raise ProfileError(f"{directory}: Parquet layout version {manifest.get('version')}, "
                           f"this pathscope reads {LAYOUT_VERSION.split('.')[0]}.x")
    return manifest


def read_parquet(directory: Union[str, Path]) -> dict[str, pd.DataFrame]:
    """The tables of a Parquet export as pyarrow-backed DataFrames, by name."""
    manifest = read_manifest(directory)
    return {name: pq.read_table(Path(directory) / entry["file"]).to_pandas(
        types_mapper=pd.ArrowDtype) for name, entry in manifest["tables"].items()}
