"""The common rules of every pathscope file (docs/format.md, Common rules): one record per
line, TAB-separated fields with TAB, newline and backslash escaped, a first line
`MAGIC<TAB>VERSION`, a last line `end`.

    file = read_file(path, "pathscope-rank")
    parse_records(file, {"op": handle_op})

Rules kept here:
- A newer major format version than READER_MAJOR is refused (FormatVersionError).
- Unknown line types are skipped; trailing fields are ignored by the handlers.
- A file without its `end` line was cut short: a last line that does not parse is dropped.
  Any other malformed line is a ProfileError naming file and line.
Nothing here prints or exits.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Optional, Sequence

from pathscope.errors import FormatVersionError, ProfileError

READER_MAJOR = 2              # reads formats 1.x and 2.x (1.x files simply have no call paths)
_VERSION = re.compile(r"^(\d+)\.(\d+)$")
_ESCAPES = {"t": "\t", "n": "\n", "\\": "\\"}


def unescape(text: str) -> str:
    """Undoes the writer's escaping of TAB, newline and backslash (\\t, \\n, \\\\)."""
    if "\\" not in text:
        return text
    out = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt in _ESCAPES:
                out.append(_ESCAPES[nxt])
                i += 2
                continue
        out.append(c)
        i += 1
    return "".join(out)


def escape(text: str) -> str:
    """The writer's side: backslash, TAB and newline as `\\\\`, `\\t`, `\\n`."""
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")


def format_line(fields: Sequence[object]) -> str:
    """One record: the fields escaped (text) and joined by TAB, with the newline."""
    return "\t".join(escape(str(f)) for f in fields) + "\n"


def parse_version(text: str, where: str) -> tuple[int, int]:
    match = _VERSION.match(text.strip())
    if not match:
        raise ProfileError(f"{where}: malformed format version '{text}'")
    return int(match.group(1)), int(match.group(2))


def check_version(version: str, where: str) -> None:
    major, _minor = parse_version(version, where)
    if major > READER_MAJOR:
        raise FormatVersionError(
            f"profile format {version} is newer than this pathscope (reads {READER_MAJOR}.x)")


@dataclass
class Record:
    kind: str
    fields: list[str]
    where: str                    # "file:line"

    def need(self, count: int) -> None:
        if len(self.fields) < count:
            raise ProfileError(f"{self.where}: '{self.kind}' line has {len(self.fields)} fields "
                               f"after the type, expected {count}")

    def number(self, i: int) -> int:
        try:
            return int(self.fields[i])
        except ValueError:
            raise ProfileError(f"{self.where}: '{self.kind}' line: field {i + 2} "
                               f"'{self.fields[i]}' is not an integer") from None

    def hex_number(self, i: int) -> int:
        """A `0x`-prefixed hexadecimal field (addresses)."""
        text = self.fields[i]
        try:
            if not text.lower().startswith("0x"):
                raise ValueError(text)
            return int(text, 16)
        except ValueError:
            raise ProfileError(f"{self.where}: '{self.kind}' line: field {i + 2} "
                               f"'{text}' is not a hexadecimal address (0x...)") from None

    def optional_number(self, i: int) -> Optional[int]:
        """An integer field, or None for `-`."""
        return None if self.fields[i] == "-" else self.number(i)

    def hist(self, i: int) -> dict[int, int]:
        try:
            return parse_hist(self.fields[i])
        except ValueError:
            raise ProfileError(f"{self.where}: '{self.kind}' line: malformed histogram "
                               f"'{self.fields[i]}'") from None

    def text(self, i: int) -> str:
        return self.fields[i]


@dataclass
class File:
    version: str
    records: list[Record]
    has_end: bool


def parse_hist(text: str) -> dict[int, int]:
    """`0:10,11:10` -> {0: 10, 11: 10}; `-` -> {}.  Raises ValueError if malformed."""
    if text == "-" or text == "":
        return {}
    hist: dict[int, int] = {}
    for pair in text.split(","):
        b, sep, count = pair.partition(":")
        if not sep:
            raise ValueError(f"malformed histogram '{text}'")
        hist[int(b)] = hist.get(int(b), 0) + int(count)
    return hist


def parse_text(data: str, name: str, magic: str) -> File:
    """The records of a file's text; name is what messages call it (a path, `<stdout>`)."""
    lines = data.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        raise ProfileError(f"{name} is empty (not a pathscope profile file)")
    head = lines[0].split("\t")
    if head[0] != magic or len(head) < 2:
        raise ProfileError(f"{name} is not a pathscope file (first line is not "
                           f"'{magic}<TAB>VERSION')")
    version = unescape(head[1])
    check_version(version, f"{name}:1")
    records = []
    has_end = False
    for number, line in enumerate(lines[1:], start=2):
        fields = [unescape(f) for f in line.split("\t")]
        if fields[0] == "end":
            has_end = True
            break
        records.append(Record(fields[0], fields[1:], f"{name}:{number}"))
    return File(version, records, has_end)


def read_file(path: Path, magic: str) -> File:
    try:
        data = path.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise ProfileError(f"cannot read {path}: {e.strerror}") from e
    return parse_text(data, str(path), magic)


def parse_records(file: File, handlers: dict[str, Callable[[Record], None]]) -> None:
    """Feeds each known record to its handler; unknown line types are skipped.  In a file cut
    short, a last line that does not parse is dropped (it may have been cut mid-line)."""
    for index, record in enumerate(file.records):
        handler = handlers.get(record.kind)
        if handler is None:
            continue
        try:
            handler(record)
        except ProfileError:
            if not file.has_end and index == len(file.records) - 1:
                continue
            raise


def write_atomically(path: Path, lines: Iterable[str]) -> None:
    """Writes a temporary file next to path and renames it to path, so readers never see a
    partial file (the name holds our pid: two writers never share it).  Raises OSError; the
    temporary file is removed on failure."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8", newline="") as out:
            out.writelines(lines)
        tmp.replace(path)
    except OSError:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise
