"""Names for the call-path addresses of a profile: DIR/symbols.tsv when it covers the run,
otherwise the symbolizer executable, whose answer is kept in DIR/symbols.tsv.

    table = resolve_symbols(profile)   # report, export: never raises; table.notes says why not
    result = symbolize(profile)        # `pathscope symbolize DIR`: always asks; raises

The symbolizer (pathscope-symbolize, built with the runtime; see home.symbolizer_path) reads
on stdin one line per module, then one line per address (text escaped as in every pathscope
file):
    module<TAB>ID<TAB>PATH<TAB>BUILD_ID or -
    addr<TAB>MODULE_ID<TAB>0xHEX<TAB>KIND          (KIND: call, fn or pc)
and answers on stdout in the symbols.tsv format with exit status 0, echoing each module's
path and build id (its module ids may differ from ours).  Input it cannot parse: exit
status 2 and a message on stderr.

Rules kept here:
- Each distinct (module, address, kind) of all rank files is asked for once.
- symbols.tsv covers the run when every module of the run has a `module` line: addresses
  without a `frame` line are then unresolvable, and asking again would not help (the format
  has no line for "looked up, not found"; `pathscope symbolize DIR` asks again on demand).
- The answer is written as it came to DIR/symbols.tsv, through a temporary file and a
  rename, when the directory is writable; otherwise it is used from memory, silently.
- For report and export a missing or failing symbolizer is not an error: frames keep their
  module+offset names and the table's notes say why, once.
"""
from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from pathscope.cct import CODE_KINDS
from pathscope.errors import OutputError, ProfileError, SymbolizerError
from pathscope.home import SYMBOLIZER_NAME, SYMBOLIZER_VARIABLE, symbolizer_path
from pathscope.reader import Profile
from pathscope.symbols import (MODULE_OK, ModuleKey, SymbolTable, frame_of, parse_symbols,
                               read_symbols)
from pathscope.tsv import format_line, write_atomically

SYMBOLS_FILE = "symbols.tsv"
FALLBACK = "frames shown as module+offset"
_STATUS_TEXT = {"missing": "not found on this machine",
                "build-id-mismatch": "the file on this machine has another build id",
                "unreadable": "cannot be read"}

Needed = dict[ModuleKey, set[tuple[int, str]]]     # module -> {(address, kind)}


def needed_addresses(profile: Profile) -> Needed:
    """The distinct code addresses of all rank files, by module (sorted).  Addresses outside
    every module (no module id) cannot be looked up and are left out."""
    needed: Needed = {}
    for paths in profile.callpaths.values():
        for thread in paths.threads.values():
            for node in thread.nodes:
                if node.kind not in CODE_KINDS:
                    continue
                frame = frame_of(node, paths.modules)
                if frame.module:
                    needed.setdefault((frame.module, frame.build_id), set()).add(
                        (frame.address, frame.kind))
    return dict(sorted(needed.items()))


def request_text(needed: Needed) -> str:
    """The symbolizer's stdin for needed."""
    lines = []
    for module_id, (path, build_id) in enumerate(needed):
        lines.append(format_line(["module", module_id, path, build_id or "-"]))
    for module_id, addresses in enumerate(needed.values()):
        for address, kind in sorted(addresses):
            lines.append(format_line(["addr", module_id, f"0x{address:x}", kind]))
    return "".join(lines)


def find_symbolizer() -> Path:
    path = symbolizer_path()
    if path is None:
        raise SymbolizerError(f"{SYMBOLIZER_NAME} not found (run `make build`)")
    if not path.is_file():
        raise SymbolizerError(f"{SYMBOLIZER_VARIABLE}={path}: no such file")
    return path


def run_symbolizer(executable: Path, needed: Needed) -> tuple[SymbolTable, str]:
    """Asks executable for needed: the parsed answer and its text.  SymbolizerError if it
    cannot be run, exits with a status other than 0, or answers something malformed."""
    try:
        done = subprocess.run([str(executable)], input=request_text(needed),
                              capture_output=True, text=True, encoding="utf-8",
                              errors="replace", check=False)
    except OSError as e:
        raise SymbolizerError(f"cannot run {executable}: {e.strerror}") from e
    if done.returncode != 0:
        said = [line for line in done.stderr.splitlines() if line.strip()]
        how = (f"killed by signal {-done.returncode}" if done.returncode < 0
               else f"exit status {done.returncode}")
        raise SymbolizerError(f"{executable.name} failed ({how})"
                              + (f": {said[-1].strip()}" if said else ""))
    try:
        return parse_symbols(done.stdout, f"{executable.name} output"), done.stdout
    except ProfileError as e:
        raise SymbolizerError(f"{executable.name} answered malformed symbols: {e}") from e


def module_notes(table: SymbolTable, needed: Needed) -> list[str]:
    """One note per module of the run that the symbolizer could not read (not for the
    kernel's pseudo files such as [vdso])."""
    notes = []
    for key in needed:
        status = table.modules.get(key)
        if status and status != MODULE_OK and not key[0].startswith("["):
            notes.append(f"symbols: {key[0]}: {_STATUS_TEXT.get(status, status)}; its frames "
                         f"are shown as module+offset")
    return notes


def _symbols_path(profile: Profile) -> Optional[Path]:
    return profile.path / SYMBOLS_FILE if profile.path is not None else None


def resolve_symbols(profile: Profile) -> SymbolTable:
    """The names of profile's frames (see the module's rules); never raises."""
    needed = needed_addresses(profile)
    if not needed:
        return SymbolTable()
    notes: list[str] = []
    cached: Optional[SymbolTable] = None
    path = _symbols_path(profile)
    if path is not None and path.exists():
        try:
            cached = read_symbols(path)
        except ProfileError as e:
            notes.append(f"symbols: {e} (ignored)")
    if cached is not None and cached.covers(needed):
        table = cached
    else:
        try:
            table, text = run_symbolizer(find_symbolizer(), needed)
        except SymbolizerError as e:
            table = cached or SymbolTable()
            notes.append(f"symbols: {e}; {FALLBACK}")
        else:
            if path is not None:
                try:
                    write_atomically(path, [text])
                except OSError:
                    pass            # a read-only profile: the names are used from memory
    table.notes = notes + module_notes(table, needed)
    return table


@dataclass
class ModuleCount:
    path: str
    build_id: str
    status: str                   # as symbols.tsv says, or "not looked up"
    resolved: int
    unresolved: int


@dataclass
class SymbolizeResult:
    written: Optional[Path]       # None: no code addresses in the profile
    modules: list[ModuleCount]


def symbolize(profile: Profile) -> SymbolizeResult:
    """(Re)writes DIR/symbols.tsv from the symbolizer's answer.  Raises SymbolizerError, or
    OutputError when the file cannot be written."""
    needed = needed_addresses(profile)
    path = _symbols_path(profile)
    if not needed or path is None:
        return SymbolizeResult(None, [])
    table, text = run_symbolizer(find_symbolizer(), needed)
    try:
        write_atomically(path, [text])
    except OSError as e:
        raise OutputError(f"cannot write '{path}': {e.strerror}") from e
    counts = []
    for key, addresses in needed.items():
        resolved = sum(1 for address, kind in addresses
                       if table.addresses.get((key[0], key[1], address, kind)))
        counts.append(ModuleCount(key[0], key[1], table.modules.get(key, "not looked up"),
                                  resolved, len(addresses) - resolved))
    return SymbolizeResult(path, counts)
