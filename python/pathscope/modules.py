"""The executable modules mapped in a running process, with their GNU build ids, for the
resolver (`pathscope-symbolize --resolve`).

    modules = mapped_modules(pid)        # [Module("/usr/bin/app", "3f2a..."), ...]

Rules kept here:
- A module is a file-backed mapping with execute permission, named by the absolute path
  /proc/PID/maps gives (deleted files and pseudo files such as [vdso] are left out), listed
  once, in the order of the maps.
- The build id is read from the file's PT_NOTE segments (ELF64 little-endian only): at most
  MAX_PHNUM program headers and MAX_NOTE_BYTES of notes are read; a file without one, or
  that cannot be read, has build id "" (the resolver then matches by path only).
Nothing here prints or exits.
"""
from __future__ import annotations

import os
import stat
import struct
from dataclasses import dataclass

from pathscope.errors import LiveError

MAX_MAPS_BYTES = 64 << 20
MAX_PHNUM = 256
MAX_NOTE_BYTES = 64 << 10
PT_NOTE = 4
NT_GNU_BUILD_ID = 3
_EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
_PHDR = struct.Struct("<IIQQQQQQ")


@dataclass(frozen=True)
class Module:
    path: str
    build_id: str            # lowercase hex, "" if none


def executable_paths(maps: str) -> list[str]:
    """The distinct paths of the executable file mappings in the text of /proc/PID/maps."""
    paths: list[str] = []
    for line in maps.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) < 6 or "x" not in fields[1]:
            continue
        path = fields[5]
        if not path.startswith("/") or path.endswith(" (deleted)") or path in paths:
            continue
        paths.append(path)
    return paths


def _notes_build_id(notes: bytes) -> str:
    at = 0
    while at + 12 <= len(notes):
        namesz, descsz, kind = struct.unpack_from("<III", notes, at)
        name_at = at + 12
        desc_at = name_at + (namesz + 3) // 4 * 4
        end = desc_at + (descsz + 3) // 4 * 4
        if end > len(notes):
            return ""
        if kind == NT_GNU_BUILD_ID and notes[name_at:name_at + namesz] == b"GNU\0":
            return notes[desc_at:desc_at + descsz].hex()
        at = end
    return ""


def build_id(path: str) -> str:
    """The GNU build id of the ELF file at path, "" if it has none or cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        size = os.fstat(fd).st_size
        if not stat.S_ISREG(os.fstat(fd).st_mode) or size < _EHDR.size:
            return ""
        ehdr = _EHDR.unpack(os.pread(fd, _EHDR.size, 0))
        ident, phoff, phentsize, phnum = ehdr[0], ehdr[5], ehdr[9], ehdr[10]
        if ident[:4] != b"\x7fELF" or ident[4] != 2 or ident[5] != 1:
            return ""
        if phentsize != _PHDR.size or phnum > MAX_PHNUM or phoff + phnum * phentsize > size:
            return ""
        table = os.pread(fd, phnum * phentsize, phoff)
        for i in range(phnum):
            kind, _flags, offset, _v, _p, filesz, _m, _a = _PHDR.unpack_from(table, i * _PHDR.size)
            if kind != PT_NOTE or filesz > MAX_NOTE_BYTES or offset + filesz > size:
                continue
            found = _notes_build_id(os.pread(fd, filesz, offset))
            if found:
                return found
        return ""
    except (OSError, struct.error):
        return ""
    finally:
        os.close(fd)


def mapped_modules(pid: int) -> list[Module]:
    """The executable modules of pid with their build ids (module docstring)."""
    try:
        with open(f"/proc/{pid}/maps", "rb") as f:
            maps = f.read(MAX_MAPS_BYTES).decode("utf-8", "replace")
    except FileNotFoundError:
        raise LiveError(f"no process {pid}") from None
    except PermissionError:
        raise LiveError(f"cannot read /proc/{pid}/maps: permission denied") from None
    return [Module(path, build_id(path)) for path in executable_paths(maps)]
