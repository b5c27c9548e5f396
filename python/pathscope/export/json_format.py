"""JSON: a list of objects with the table's columns as keys, in column order.  Numbers are
numbers, None is null, a histogram is an object {"bin": count}."""
import json
from typing import Any, TextIO

from pathscope.export.tables import Table

_dumps = json.JSONEncoder(ensure_ascii=False).encode


def _value(value: Any) -> str:
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = ",\n".join(f"   {_dumps(str(k))}: {_dumps(v)}" for k, v in value.items())
        return "{\n" + items + "\n  }"
    return _dumps(value)


def write(table: Table, out: TextIO) -> None:
    """Exactly json.dump(rows, out, indent=1, ensure_ascii=False) and a newline, but written
    row by row (a table may have a million rows) and faster (the values are flat)."""
    keys = [f"  {_dumps(c)}: " for c in table.columns]
    first = True
    out.write("[")
    for row in table.rows:
        body = ",\n".join(key + _value(row[c]) for key, c in zip(keys, table.columns))
        out.write(("\n {\n" if first else ",\n {\n") + body + "\n }")
        first = False
    out.write("]\n" if first else "\n]\n")
