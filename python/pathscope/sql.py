"""`pathscope sql DIR [DIR...] "SELECT ..."`: DuckDB over the tables of one or more profiles.

    columns, rows = query(["run1", "run2"],
                          "SELECT profile, sum(calls) FROM comm_ops GROUP BY profile")

Each DIR is a profile directory (read with pathscope.open) or a Parquet export of one
(`pathscope export --format parquet`, read by DuckDB from its files).  Every table is a view
named like the table with `_` for `-` (comm_ops, heap_timeline, ..., nodes, metrics,
node_stats) whose first column `profile` is the DIR as given, followed by the table's own
columns: the rows of every DIR, one after the other (UNION ALL BY NAME), so one query compares
an ensemble (`GROUP BY profile`) and the same query works on one profile.  Only the tables a
query names are built.  Errors are one line: the query's (`SQL: Parser Error: ...`), an
unknown table (`no table 'x' (tables: ...)`), or the profile's own (a missing directory).
"""
from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any, Callable, Optional, Sequence, TextIO

from pathscope.errors import ProfileError, QueryError
from pathscope.export.parquet import MANIFEST, frame_of, read_manifest
from pathscope.export.tables import TABLES

# the view names, in the order `--help` and the unknown-table message list them
VIEWS = {name.replace("-", "_"): name for name in [*TABLES, "nodes", "metrics", "node_stats"]}
_MISSING_TABLE = re.compile(r"Catalog Error: Table with name (\S+) does not exist")


def unknown_table_message(name: str) -> str:
    return f"no table '{name}' (tables: {', '.join(VIEWS)})"


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


class _Source:
    """One DIR: a Parquet export (its manifest) or a profile (pathscope.open)."""

    def __init__(self, directory: str):
        self.label = directory
        self.parquet = (Path(directory) / MANIFEST).is_file()
        if self.parquet:
            self.manifest = read_manifest(directory)
        else:
            import pathscope
            self.frames = pathscope.open(directory)

    def relation(self, con: Any, view: str, alias: str) -> str:
        """A relation of the table for a FROM clause (registering what it needs)."""
        name = VIEWS[view]
        if self.parquet:
            entry = self.manifest["tables"].get(name)
            if entry is None:
                raise ProfileError(f"{self.label}: {MANIFEST} has no table '{name}'")
            return f"read_parquet({_quote(str(Path(self.label) / entry['file']))})"
        from pathscope.export.parquet import arrow_table
        con.register(alias, arrow_table(frame_of(self.frames, name)))
        return alias


def named_views(query_text: str) -> list[str]:
    """The views whose names occur in the query as words: a superset of the tables it reads
    (a column named like a table only costs building that table).  DuckDB's own
    get_table_names would bind the query, which fails before the views exist."""
    words = {w.lower() for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", query_text)}
    return [view for view in VIEWS if view in words]


def _connect(directories: Sequence[str], query_text: str,
             warn: Optional[Callable[[str], None]]) -> Any:
    import duckdb

    sources = [_Source(d) for d in directories]
    for source in sources:
        problems = [] if source.parquet else source.frames.profile.problems()
        if problems and warn is not None:
            warn(f"incomplete profile {source.label}: {'; '.join(problems)}; its tables "
                 f"hold what there is")
    con = duckdb.connect(":memory:")
    for view in named_views(query_text):
        parts = [f"SELECT {_quote(s.label)} AS profile, * FROM "
                 f"{s.relation(con, view, f'_p{i}_{view}')}" for i, s in enumerate(sources)]
        con.execute(f"CREATE VIEW {view} AS " + " UNION ALL BY NAME ".join(parts))
    return con


def query(directories: Sequence[str], query_text: str,
          warn: Optional[Callable[[str], None]] = None) -> tuple[list[str], list[tuple]]:
    """The column names and rows of query_text over the directories' tables (module
    docstring); a statement without a result gives ([], []).  warn(message) for each partial
    profile (missing, incomplete or unreadable ranks, stray files): queried all the same."""
    import duckdb

    con = _connect(directories, query_text, warn)
    try:
        cursor = con.execute(query_text)
        if cursor.description is None:
            return [], []
        return [d[0] for d in cursor.description], cursor.fetchall()
    except duckdb.CatalogException as e:
        missing = _MISSING_TABLE.match(str(e))
        if missing:
            raise QueryError(unknown_table_message(missing.group(1))) from e
        raise QueryError(f"SQL: {str(e).splitlines()[0]}") from e
    except duckdb.Error as e:
        raise QueryError(f"SQL: {str(e).splitlines()[0]}") from e
    finally:
        con.close()


def _text(value: Any) -> str:
    """A value as a field: NULL empty, lists and structs (histograms) as JSON."""
    if value is None:
        return ""
    if isinstance(value, (list, dict)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def write_csv(columns: list[str], rows: list[tuple], out: TextIO) -> None:
    """A header line and a line per row; NULL is an empty field."""
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows([_text(v) for v in row] for row in rows)


def print_table(columns: list[str], rows: list[tuple], out: TextIO) -> None:
    """A rich table (numbers right-aligned), with the row count below it."""
    from rich.console import Console
    from rich.table import Table

    table = Table(show_edge=False, header_style="bold")
    numeric = [bool(rows) and all(isinstance(r[i], (int, float)) or r[i] is None for r in rows)
               for i in range(len(columns))]
    for name, right in zip(columns, numeric):
        table.add_column(name, justify="right" if right else "left")
    for row in rows:
        table.add_row(*(_text(v) for v in row))
    console = Console(file=out, highlight=False)
    console.print(table)
    console.print(f"({len(rows)} row{'' if len(rows) == 1 else 's'})", style="dim")
