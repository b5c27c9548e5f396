"""speedscope's file format (https://www.speedscope.app/file-format-schema.json): one
"sampled" profile whose samples are the stacks of export/stacks.py (frame indices, outermost
first) and whose weights are their values; shared frames carry the function's source file
when it is known."""
import json
from typing import Any, TextIO

from pathscope import __version__
from pathscope.export.stacks import StackFrame, Stacks

SCHEMA = "https://www.speedscope.app/file-format-schema.json"
WITH_FILES = True             # a function's frames in different files stay apart
# speedscope's unit of a metric's unit (pathscope.metrics; times are exported in microseconds)
UNITS = {"ns": "microseconds", "bytes": "bytes", "count": "none"}


def document(stacks: Stacks, name: str) -> dict[str, Any]:
    """The speedscope JSON document; name: the profile's name (e.g. the program)."""
    index: dict[StackFrame, int] = {}
    frames: list[dict[str, Any]] = []
    samples = []
    for stack, _value in stacks.stacks:
        sample = []
        for frame in stack:
            if frame not in index:
                index[frame] = len(frames)
                frames.append({"name": frame.name, **({"file": frame.file} if frame.file else {})})
            sample.append(index[frame])
        samples.append(sample)
    profile = {"type": "sampled", "name": f"{name}: {stacks.metric.name} ({stacks.selection})",
               "unit": UNITS[stacks.metric.unit], "startValue": 0, "endValue": stacks.total,
               "samples": samples, "weights": [value for _, value in stacks.stacks]}
    return {"$schema": SCHEMA, "shared": {"frames": frames}, "profiles": [profile],
            "name": name, "activeProfileIndex": 0, "exporter": f"pathscope {__version__}"}


def write(stacks: Stacks, out: TextIO, name: str = "pathscope") -> None:
    json.dump(document(stacks, name), out, ensure_ascii=False)
    out.write("\n")
