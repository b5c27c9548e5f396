"""JSON, written by pandas (DataFrame.to_json, orient records, indent 1) from the table's
DataFrame (pathscope.frames): a list of objects with the table's columns as keys, in column
order.  Numbers are numbers (a float column's with at most 9 decimals: the tables' seconds are
rounded to the ns), an unknown value (<NA>) is null, a histogram is an object {"bin": count}.
pandas' writer escapes `/` in strings as `\\/` (the same string to every JSON parser)."""
from typing import Any, Iterable, TextIO

import pandas as pd
import pyarrow as pa

DECIMALS = 9                  # seconds to the ns; fractions are rounded to 6 decimals


def _hist_object(items: Any) -> dict[str, int]:
    return {str(item["bin"]): int(item["count"]) for item in items}


def write(chunks: Iterable[pd.DataFrame], out: TextIO) -> None:
    """chunks: the table's rows in order, as DataFrames: each chunk's records, written by
    pandas, go into one list."""
    out.write("[")
    first = True
    for chunk in chunks:
        if chunk.empty:
            continue
        records = _with_hist_objects(chunk).to_json(orient="records", indent=1,
                                                    force_ascii=False,
                                                    double_precision=DECIMALS)
        out.write(("" if first else ",") + records[1:-1].rstrip("\n"))
        first = False
    out.write("]\n" if first else "\n]\n")


def _with_hist_objects(chunk: pd.DataFrame) -> pd.DataFrame:
    lists = [name for name, column in chunk.items() if isinstance(column.dtype, pd.ArrowDtype)
             and pa.types.is_list(column.dtype.pyarrow_dtype)]
    if not lists:
        return chunk
    chunk = chunk.copy()
    for name in lists:
        chunk[name] = chunk[name].astype(object).map(_hist_object, na_action="ignore")
    return chunk
