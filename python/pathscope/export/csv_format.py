"""CSV, written by pandas (DataFrame.to_csv) from the table's DataFrame (pathscope.frames): a
header line with the table's columns, then one line per row.  An unknown value (<NA>) is an
empty cell, seconds are fixed-point with nanosecond precision (trailing zeros left out), a
histogram is `bin:count,...` or `-`; quoting is the csv module's (minimal)."""
from typing import Any, Iterable, TextIO

import pandas as pd
import pyarrow as pa


def _decimal(value: float) -> str:
    """A float of a table (seconds rounded to the ns, fractions) in fixed point."""
    text = f"{value:.9f}".rstrip("0").rstrip(".")
    return text or "0"


def _hist_text(items: Any) -> str:
    return ",".join(f"{item['bin']}:{item['count']}" for item in items) or "-"


def cells(table: pd.DataFrame) -> pd.DataFrame:
    """The columns pandas would not write as the format says, as their text: floats and
    histograms (lists of {bin, count}); the others as they are."""
    out = {}
    for name, column in table.items():
        kind = column.dtype.pyarrow_dtype if isinstance(column.dtype, pd.ArrowDtype) else None
        if kind is not None and pa.types.is_floating(kind):
            out[name] = column.map(_decimal, na_action="ignore")
        elif kind is not None and pa.types.is_list(kind):
            out[name] = column.map(_hist_text, na_action="ignore")
        else:
            out[name] = column
    return pd.DataFrame(out, columns=table.columns)


def write(chunks: Iterable[pd.DataFrame], out: TextIO) -> None:
    """chunks: the table's rows in order, as DataFrames (the first gives the header)."""
    for i, chunk in enumerate(chunks):
        cells(chunk).to_csv(out, index=False, header=i == 0, lineterminator="\n", na_rep="")
