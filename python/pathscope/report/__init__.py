"""Report formats behind one dispatcher; each format is a module with
`render(profile, symbols) -> str`, imported only when asked for."""
import importlib
from typing import Optional

from pathscope.reader import Profile
from pathscope.symbols import SymbolTable

FORMATS = {"text": "pathscope.report.text"}


def render(profile: Profile, fmt: str = "text", symbols: Optional[SymbolTable] = None) -> str:
    """symbols: the names of the call-path frames (default: resolved by the format)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown report format {fmt!r} (known: {', '.join(FORMATS)})")
    text: str = importlib.import_module(FORMATS[fmt]).render(profile, symbols)
    return text
