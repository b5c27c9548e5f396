"""Report formats behind one dispatcher; each format is a module with
`render(profile, symbols) -> str`, imported only when asked for."""
import importlib
from typing import Optional

from pathscope.reader import Profile
from pathscope.symbols import SymbolTable

FORMATS = {"text": "pathscope.report.text"}


def render(profile: Profile, fmt: str = "text", symbols: Optional[SymbolTable] = None,
           call_sites: bool = False) -> str:
    """symbols: the names of the call-path frames (default: resolved by the format);
    call_sites: keep a function's call sites apart in the call tree and hot path."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown report format {fmt!r} (known: {', '.join(FORMATS)})")
    text: str = importlib.import_module(FORMATS[fmt]).render(profile, symbols, call_sites)
    return text
