"""JSON, written by pandas (DataFrame.to_json, orient records, indent 1) from the table's
DataFrame (pathscope.frames): a list of objects with the table's columns as keys, in column
order.  Numbers are numbers (a float column's with at most 9 decimals: the tables' seconds are
rounded to the ns), an unknown value (<NA>) is null, a histogram is an object {"bin": count}.
pandas' writer escapes `/` in strings as `\\/` (the same string to every JSON parser)."""
from typing import Any, TextIO

import pandas as pd
import pyarrow as pa

DECIMALS = 9                  # seconds to the ns; fractions are rounded to 6 decimals


def _hist_object(items: Any) -> dict[str, int]:
    return {str(item["bin"]): int(item["count"]) for item in items}


def write(table: pd.DataFrame, out: TextIO) -> None:
    out_table = table.copy()
    for name, column in table.items():
        kind = column.dtype.pyarrow_dtype if isinstance(column.dtype, pd.ArrowDtype) else None
        if kind is not None and pa.types.is_list(kind):
            out_table[name] = column.astype(object).map(_hist_object, na_action="ignore")
    out.write(out_table.to_json(orient="records", indent=1, force_ascii=False,
                                double_precision=DECIMALS))
    out.write("\n")
