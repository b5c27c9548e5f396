"""Frames and their names: the identity of a call-path frame, the symbols.tsv table
(docs/format.md, symbols.tsv) and the names shown for a frame.

    frame = frame_of(node, rank_paths.modules)        # what the merged tree keys on
    table = read_symbols(directory / "symbols.tsv")
    table.names(frame)    # ["solve", "update"]: level 0 first, then the inlined functions

Rules kept here:
- A frame is identified by (kind, module path, build id, address) for `call`, `fn` and `pc`
  nodes, by the operation for `mpi` nodes, by its kind for the pseudo frames `[failed
  unwind]` and `[not unwound]`, and for `probe` nodes by the probed function's module path,
  build id and address (its name rides along) - never by a code frame's name, and never by
  a module id (those are per file).
- A code frame expands to one name per level of its `frame` lines, outermost first; an
  unresolved address (no `frame` line) is named `module+0xADDR` (module basename), never
  dropped; so is a level whose function is unknown (`-`).
Nothing here prints, exits or runs a program (that is pathscope.symbolize).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Optional

from pathscope.cct import (CODE_KINDS, FAILED, KERNEL_UNATTRIBUTED, MAX_ID, NOT_UNWOUND, ROOT,
                           Module, Node)
from pathscope.errors import ProfileError
from pathscope.sources import SOURCES
from pathscope.tsv import Record, open_directory, open_in_directory, parse_text, read_records

SYMBOLS_MAGIC = "pathscope-symbols"
PSEUDO_NAMES = {FAILED: "[failed unwind]", NOT_UNWOUND: "[not unwound]",
                KERNEL_UNATTRIBUTED: "[kernel: no call path]"}
NAMED_KINDS = tuple(kind for source in SOURCES for kind in source.node_kinds)  # shown by name
MODULE_OK = "ok"
UNKNOWN_MODULE = "?"          # the module name of an address outside every mapped module

ModuleKey = tuple[str, str]             # path, build id ("" for none)
AddressKey = tuple[str, str, int, str]  # path, build id, address, kind


@dataclass(frozen=True, order=True)
class Frame:
    kind: str
    module: str = ""              # path as mapped (code kinds)
    build_id: str = ""            # "" for none
    address: int = 0              # code kinds
    name: str = ""                # mpi: the operation; a newer kind: its address field

    @property
    def address_key(self) -> AddressKey:
        return (self.module, self.build_id, self.address, self.kind)


ROOT_FRAME = Frame(ROOT)


def frame_of(node: Node, modules: dict[int, Module]) -> Frame:
    """The identity of node (modules: its rank file's modules, by id)."""
    if node.kind in CODE_KINDS:
        module = modules.get(node.module) if node.module is not None else None
        return Frame(node.kind, module.path if module else "", module.build_id if module else "",
                     node.address or 0)
    if node.kind in (ROOT, FAILED, NOT_UNWOUND):
        return Frame(node.kind)
    if node.module is None:
        return Frame(node.kind, name=node.op)
    # a named leaf that is code of a module (a probed function, pathscope.sources.probe): the
    # module and address keep two functions of one name apart, on every rank alike
    module = modules.get(node.module)
    return Frame(node.kind, module.path if module else "", module.build_id if module else "",
                 node.address or 0, node.op)


@dataclass(frozen=True)
class SourceLine:
    """One level of an address: the function and, for a call, the call site."""
    function: Optional[str]
    file: Optional[str]
    line: Optional[int]


def unresolved_name(frame: Frame) -> str:
    """`libkernels.so+0x1a4f`: the module's basename and the address."""
    module = os.path.basename(frame.module) or UNKNOWN_MODULE
    return f"{module}+0x{frame.address:x}"


@dataclass
class SymbolTable:
    modules: dict[ModuleKey, str] = field(default_factory=dict)   # -> status
    addresses: dict[AddressKey, list[SourceLine]] = field(default_factory=dict)  # level order
    notes: list[str] = field(default_factory=list)   # said once by the report (or on stderr)

    def lines(self, frame: Frame) -> list[SourceLine]:
        """The resolved levels of a code frame, outermost first ([] when unresolved)."""
        return self.addresses.get(frame.address_key, [])

    def names(self, frame: Frame) -> list[str]:
        """The names a frame stands for in a path, outermost first ([] for the root)."""
        if frame.kind == ROOT:
            return []
        if frame.kind in PSEUDO_NAMES:
            return [PSEUDO_NAMES[frame.kind]]
        if frame.kind in NAMED_KINDS:
            return [frame.name]
        if frame.kind not in CODE_KINDS:
            return [f"[{frame.kind} {frame.name}]"]
        lines = self.lines(frame)
        if not lines:
            return [unresolved_name(frame)]
        return [level.function or unresolved_name(frame) for level in lines]

    def covers(self, modules: Iterable[ModuleKey]) -> bool:
        """True when every module was looked up (its addresses without a `frame` line are
        then known to be unresolvable, not merely absent)."""
        return all(module in self.modules for module in modules)


def _handlers(table: SymbolTable) -> dict[str, Callable[[Record], None]]:
    ids: dict[int, ModuleKey] = {}

    def module(r: Record) -> None:
        r.need(4)
        module_id = r.number(0, MAX_ID)
        if module_id in ids:
            raise ProfileError(f"{r.where}: module {module_id} listed twice")
        build_id = r.text(2)
        key = (r.text(1), "" if build_id == "-" else build_id)
        ids[module_id] = key
        table.modules[key] = r.text(3)

    def frame(r: Record) -> None:
        r.need(7)
        module_id = r.number(0, MAX_ID)
        if module_id not in ids:
            raise ProfileError(f"{r.where}: 'frame' line names module {module_id}, which has "
                               f"no 'module' line")
        path, build_id = ids[module_id]
        key = (path, build_id, r.hex_number(1), r.text(2))
        level = r.number(3, MAX_ID)
        lines = table.addresses.setdefault(key, [])
        if level != len(lines):
            raise ProfileError(f"{r.where}: level {level} of address {r.fields[1]} follows "
                               f"level {len(lines) - 1} (levels are 0, 1, ... in order)")
        text = [None if r.text(i) == "-" else r.text(i) for i in (4, 5)]
        line = r.optional_number(6, MAX_ID)
        lines.append(SourceLine(text[0], text[1], line if line else None))

    return {"module": module, "frame": frame}


def read_symbols_at(dir_fd: int, entry: str, name: str) -> SymbolTable:
    """Reads dir_fd/entry (never through a symbolic link); ProfileError if it is malformed,
    cut short or refused (pathscope.tsv.RefusedFile)."""
    table = SymbolTable()
    with open_in_directory(dir_fd, entry, name, SYMBOLS_MAGIC) as source:
        info = read_records(source, name, SYMBOLS_MAGIC, _handlers(table))
    if not info.has_end:
        raise ProfileError(f"{name} is cut short (no end line)")
    return table


def read_symbols(path: Path) -> SymbolTable:
    """Reads a symbols.tsv; ProfileError if it is malformed or cut short."""
    try:
        dir_fd = open_directory(str(path.parent), follow=True)
    except OSError as e:
        raise ProfileError(f"cannot read {path}: {e.strerror}") from None
    try:
        return read_symbols_at(dir_fd, path.name, str(path))
    finally:
        os.close(dir_fd)


def parse_symbols(text: str, name: str) -> SymbolTable:
    """The symbols.tsv format from text (e.g. the symbolizer's output, name `<stdout>`)."""
    table = SymbolTable()
    info = parse_text(text, name, SYMBOLS_MAGIC, _handlers(table))
    if not info.has_end:
        raise ProfileError(f"{name} is cut short (no end line)")
    return table
