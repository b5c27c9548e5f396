"""Report formats behind one dispatcher; each format is a module with
`render(profile) -> str`, imported only when asked for."""
import importlib

from pathscope.reader import Profile

FORMATS = {"text": "pathscope.report.text"}


def render(profile: Profile, fmt: str = "text") -> str:
    if fmt not in FORMATS:
        raise ValueError(f"unknown report format {fmt!r} (known: {', '.join(FORMATS)})")
    text: str = importlib.import_module(FORMATS[fmt]).render(profile)
    return text
