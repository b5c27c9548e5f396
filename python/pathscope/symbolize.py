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
- The answer is written as it came to DIR/symbols.tsv, relative to a descriptor of the
  directory opened without following a link, through a temporary file with an unpredictable
  name created with O_EXCL|O_NOFOLLOW, then renamed (pathscope.tsv.write_in_directory).  Not
  in a directory reached through a symbolic link, one that changed since the profile was
  read, one owned by another user (not root), or one writable by everyone without the sticky
  bit: the names are then used from memory and a note says so.  A directory we cannot write
  (read-only) keeps them in memory silently.
- symbols.tsv is never read through a symbolic link.
- For report and export a missing or failing symbolizer is not an error: frames keep their
  module+offset names and the table's notes say why, once.
"""
from __future__ import annotations

import errno
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from pathscope.cct import CODE_KINDS
from pathscope.errors import OutputError, ProfileError, SymbolizerError
from pathscope.home import (SYMBOLIZER_NAME, SYMBOLIZER_VARIABLE, symbolizer_hint,
                            symbolizer_path)
from pathscope.reader import Profile
from pathscope.symbols import (MODULE_OK, ModuleKey, SymbolTable, frame_of, parse_symbols,
                               read_symbols_at)
from pathscope.tsv import directory_unsafe, format_line, open_directory, write_in_directory

SYMBOLS_FILE = "symbols.tsv"
SYMBOLIZER_TIMEOUT_S = 900    # a symbolizer that hangs (e.g. on a module path that blocks)
FALLBACK = "frames shown as module+offset"
_STATUS_TEXT = {"missing": "not found on this machine",
                "build-id-mismatch": "the file on this machine has another build id",
                "unreadable": "cannot be read"}

Needed = dict[ModuleKey, set[tuple[int, str]]]     # module -> {(address, kind)}


def needed_addresses(profile: Profile) -> Needed:
    """The distinct code addresses of all rank files (of tree.tsv when it is the profile's
    only call paths), by module (sorted).  Addresses outside every module (no module id)
    cannot be looked up and are left out."""
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
    tree = profile.tree if profile.reduced_only() else None
    for tree_node in tree.nodes if tree is not None else ():
        module = tree.modules.get(tree_node.module) if tree_node.module is not None else None
        if tree_node.kind in CODE_KINDS and module is not None:
            needed.setdefault((module.path, module.build_id), set()).add(
                (tree_node.address or 0, tree_node.kind))
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
        raise SymbolizerError(f"{SYMBOLIZER_NAME} not found ({symbolizer_hint()})")
    if not path.is_file():
        raise SymbolizerError(f"{SYMBOLIZER_VARIABLE}={path}: no such file")
    return path


def run_symbolizer(executable: Path, needed: Needed) -> tuple[SymbolTable, str]:
    """Asks executable for needed: the parsed answer and its text.  SymbolizerError if it
    cannot be run, exits with a status other than 0, or answers something malformed."""
    try:
        done = subprocess.run([str(executable)], input=request_text(needed),
                              capture_output=True, text=True, encoding="utf-8",
                              errors="replace", check=False, timeout=SYMBOLIZER_TIMEOUT_S)
    except OSError as e:
        raise SymbolizerError(f"cannot run {executable}: {e.strerror}") from e
    except subprocess.TimeoutExpired:
        raise SymbolizerError(f"{executable.name} did not answer within "
                              f"{SYMBOLIZER_TIMEOUT_S} s") from None
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


class _Directory:
    """The profile directory, opened again for symbols.tsv: fd for reading (None if it cannot
    be opened), and why symbols.tsv must not be written there (None: it may be)."""

    def __init__(self, profile: Profile):
        self.fd: Optional[int] = None
        self.refusal: Optional[str] = None
        assert profile.path is not None
        shown = str(profile.path)
        try:
            self.fd = open_directory(shown, follow=False)
        except OSError as e:
            if e.errno not in (errno.ELOOP, errno.ENOTDIR):
                self.refusal = f"cannot open {shown}: {e.strerror}"
                return
            try:
                self.fd = open_directory(shown, follow=True)
            except OSError as e2:
                self.refusal = f"cannot open {shown}: {e2.strerror}"
                return
            self.refusal = f"{shown} is a symbolic link"
        st = os.fstat(self.fd)
        if (profile.directory_identity is not None
                and (st.st_dev, st.st_ino) != profile.directory_identity):
            os.close(self.fd)
            self.fd = None
            self.refusal = f"{shown} is no longer the directory that was read"
            return
        if profile.directory_is_link and self.refusal is None:
            self.refusal = f"{shown} was reached through a symbolic link"
        if self.refusal is None:
            unsafe = directory_unsafe(self.fd)
            if unsafe:
                self.refusal = f"{shown}: {unsafe}"

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _read_cache(directory: _Directory, path: Path, notes: list[str]) -> Optional[SymbolTable]:
    if directory.fd is None:
        return None
    try:
        os.stat(SYMBOLS_FILE, dir_fd=directory.fd, follow_symlinks=False)
    except OSError:
        return None
    try:
        return read_symbols_at(directory.fd, SYMBOLS_FILE, str(path))
    except ProfileError as e:
        notes.append(f"symbols: {e} (ignored)")
        return None


def resolve_symbols(profile: Profile) -> SymbolTable:
    """The names of profile's frames (see the module's rules); never raises."""
    needed = needed_addresses(profile)
    if not needed:
        return SymbolTable()
    notes: list[str] = []
    path = _symbols_path(profile)
    directory = _Directory(profile) if path is not None else None
    try:
        cached = _read_cache(directory, path, notes) if directory and path else None
        if cached is not None and cached.covers(needed):
            table = cached
        else:
            try:
                table, text = run_symbolizer(find_symbolizer(), needed)
            except SymbolizerError as e:
                table = cached or SymbolTable()
                notes.append(f"symbols: {e}; {FALLBACK}")
            else:
                if directory is not None and path is not None:
                    if directory.refusal is not None or directory.fd is None:
                        notes.append(f"symbols: {path} not written ({directory.refusal}); "
                                     f"the names are used from memory")
                    else:
                        try:
                            write_in_directory(directory.fd, SYMBOLS_FILE, text)
                        except OSError:
                            pass    # a read-only profile: the names are used from memory
    finally:
        if directory is not None:
            directory.close()
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
    directory = _Directory(profile)
    try:
        if directory.refusal is not None or directory.fd is None:
            raise OutputError(f"refusing to write '{path}': {directory.refusal}")
        try:
            write_in_directory(directory.fd, SYMBOLS_FILE, text)
        except OSError as e:
            raise OutputError(f"cannot write '{path}': {e.strerror}") from e
    finally:
        directory.close()
    counts = []
    for key, addresses in needed.items():
        resolved = sum(1 for address, kind in addresses
                       if table.addresses.get((key[0], key[1], address, kind)))
        counts.append(ModuleCount(key[0], key[1], table.modules.get(key, "not looked up"),
                                  resolved, len(addresses) - resolved))
    return SymbolizeResult(path, counts)
