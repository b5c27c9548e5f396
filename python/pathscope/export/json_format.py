"""JSON: a list of objects with the table's columns as keys, in column order.  Numbers are
numbers, None is null, a histogram is an object {"bin": count}."""
import json
from typing import TextIO

from pathscope.export.tables import Table


def write(table: Table, out: TextIO) -> None:
    rows = [{c: row[c] for c in table.columns} for row in table.rows]
    json.dump(rows, out, indent=1, ensure_ascii=False)
    out.write("\n")
