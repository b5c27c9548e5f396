"""CSV: a header line with the table's columns, then one line per row.  None is an empty cell,
seconds are fixed-point with nanosecond precision, a histogram is `bin:count,...` or `-`."""
import csv
from typing import Any, TextIO

from pathscope.export.tables import Table


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        text = f"{value:.9f}".rstrip("0").rstrip(".")
        return text or "0"
    if isinstance(value, dict):
        return ",".join(f"{k}:{v}" for k, v in value.items()) or "-"
    return str(value)


def write(table: Table, out: TextIO) -> None:
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(table.columns)
    for row in table.rows:
        writer.writerow([_cell(row[c]) for c in table.columns])
