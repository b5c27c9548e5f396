"""The merged call tree as a pprof profile (`pathscope export --format pprof -o prof.pb.gz`),
for `go tool pprof` and the other pprof readers.

    write(pathscope.open("prof"), "prof.pb.gz")

The file is pprof's Profile message, gzip-compressed, made with the message classes protoc
generated from proto/profile.proto at build time (build/<mpi>/python/profile_pb2.py).  It
holds one sample per call-tree node with a value (`nodes`, pathscope.frames): the node's
exclusive values summed over the ranks, one per sample type -- `time` (sample_ns + mpi_ns,
the default) and then every stored metric under its own name, with its unit (nanoseconds,
bytes or count).  pprof adds the callees up itself, so the inclusive sums are not samples.
A sample's stack is the node's path, the node first (pprof's order); every node is one
Location whose lines are its frame's levels (inlined functions innermost first), each naming
a Function by the report's frame name and, when known, its source file and line.
"""
from __future__ import annotations

import gzip
import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any, Optional, Union

from pathscope.calltree import no_call_paths_message
from pathscope.errors import OutputError, ProfileError
from pathscope.frames import ProfileFrames
from pathscope.home import MPI_FLAVOURS, SHARE, find_home
from pathscope.metrics import METRICS, STORED

DEFAULT_TYPE = "time"
UNITS = {"ns": "nanoseconds", "bytes": "bytes", "count": "count"}
# the sample types in value order: the default first, then the stored metrics by column
SAMPLE_TYPES = [(DEFAULT_TYPE, UNITS[METRICS[DEFAULT_TYPE].unit])] + [
    (m.name, UNITS[m.unit]) for m in STORED]
BINDINGS = "profile_pb2.py"
NO_BINDINGS = ("the pprof export needs the message classes the build generates with protoc "
               "(profile_pb2.py): run `make build` (protoc: Debian's protobuf-compiler)")
NO_RUNTIME = ("the pprof export needs the Python protobuf runtime: pip install "
              "protobuf==4.21.12")


def bindings_path() -> Optional[Path]:
    """profile_pb2.py of this checkout's build (either MPI's) or of the installed prefix."""
    home = find_home()
    if home is None:
        return None
    if home.installed:
        places = [home.root / SHARE / "python" / BINDINGS]
    else:
        places = [home.root / "build" / mpi / "python" / BINDINGS for mpi in MPI_FLAVOURS]
    return next((p for p in places if p.is_file()), None)


def load_bindings() -> ModuleType:
    """The generated module (ProfileError when the build did not make it or the protobuf
    runtime is missing)."""
    try:
        runtime = importlib.util.find_spec("google.protobuf")
    except ModuleNotFoundError:       # (no `google` package at all)
        runtime = None
    if runtime is None:
        raise ProfileError(NO_RUNTIME)
    path = bindings_path()
    if path is None:
        raise ProfileError(NO_BINDINGS)
    spec = importlib.util.spec_from_file_location("pathscope_profile_pb2", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Strings:
    """The string table: index 0 is "" and every string is stored once."""

    def __init__(self) -> None:
        self.table = [""]
        self._index = {"": 0}

    def __call__(self, text: Optional[str]) -> int:
        if not text:
            return 0
        i = self._index.get(text)
        if i is None:
            i = self._index[text] = len(self.table)
            self.table.append(text)
        return i


def build_profile(frames: ProfileFrames, pb: ModuleType) -> Any:
    """The pb.Profile message of frames' call tree (ProfileError without call paths)."""
    if frames.tree is None:
        raise ProfileError(no_call_paths_message(frames.profile))
    nodes = frames.nodes
    strings = _Strings()
    out = pb.Profile()
    for kind, unit in SAMPLE_TYPES:
        out.sample_type.add(type=strings(kind), unit=strings(unit))
    out.default_sample_type = strings(DEFAULT_TYPE)
    functions: dict[tuple[str, Optional[str]], int] = {}

    def function_id(name: str, file: Optional[str]) -> int:
        key = (name, file)
        if key not in functions:
            functions[key] = len(functions) + 1
            out.function.add(id=functions[key], name=strings(name), system_name=strings(name),
                             filename=strings(file))
        return functions[key]

    mappings = _mappings(frames, out, strings)
    stored = [m.name for m in STORED]
    values = nodes[stored].fillna(0).to_numpy(dtype="int64")
    time = METRICS[DEFAULT_TYPE]
    parents = nodes["parent"].tolist()
    addresses = nodes["address"].fillna("").tolist()
    modules = nodes["module"].fillna("").tolist()
    for node in range(1, len(nodes)):       # (node 0 is the root: no frame)
        location = out.location.add(id=node, mapping_id=mappings.get(modules[node], 0))
        if addresses[node]:
            location.address = int(addresses[node], 16)
        for name, file, line in reversed(frames.levels(node)):
            location.line.add(function_id=function_id(name, file), line=line or 0)
        row = dict(zip(stored, values[node].tolist()))
        if not any(row.values()):
            continue
        stack, up = [], node
        while up:
            stack.append(up)
            up = parents[up]
        out.sample.add(location_id=stack,
                       value=[time.value(row.__getitem__)] + values[node].tolist())
    _describe(frames, out, strings)
    out.string_table.extend(strings.table)
    return out


def _mappings(frames: ProfileFrames, out: Any, strings: _Strings) -> dict[str, int]:
    """A Mapping per module (the program's first: pprof names the profile after it), each
    saying that the file has its names, so pprof never tries to symbolize; by module path."""
    modules = list(dict.fromkeys(m for m in frames.nodes["module"].dropna()))
    program = frames.profile.meta.get("program")
    modules.sort(key=lambda m: Path(m).name != program)     # (stable: else first seen)
    ids = {}
    for module in modules:
        ids[module] = len(ids) + 1
        out.mapping.add(id=ids[module], filename=strings(module), has_functions=True,
                        has_filenames=True, has_line_numbers=True, has_inline_frames=True)
    return ids


def _describe(frames: ProfileFrames, out: Any, strings: _Strings) -> None:
    """The profile's start time and what it is of, as pprof's comments."""
    meta = frames.profile.meta
    start = meta.get("start_unix_ns")
    if start:
        out.time_nanos = int(start)
    lines = [f"pathscope profile of {meta.get('program') or '?'}"]
    if meta.get("command"):
        lines.append(f"command: {meta['command']}")
    for line in lines:
        out.comment.append(strings(line))


def write(frames: ProfileFrames, path: Union[str, Path]) -> None:
    """The gzip-compressed profile to path (OutputError when it cannot be written)."""
    data = gzip.compress(build_profile(frames, load_bindings()).SerializeToString(), mtime=0)
    try:
        Path(path).write_bytes(data)
    except OSError as e:
        raise OutputError(f"cannot write '{path}': {e.strerror}") from e
