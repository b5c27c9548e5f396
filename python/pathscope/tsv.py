"""The common rules of every pathscope file (docs/format.md, Common rules and "How readers
check a profile"): one record per line, TAB-separated fields with TAB, newline and backslash
escaped, a first line `MAGIC<TAB>VERSION`, a last line `end`.

    with open_in_directory(dir_fd, "profile.tsv", "prof/profile.tsv") as source:
        info = read_records(source, "prof/profile.tsv", "pathscope-profile", {"op": on_op})

Rules kept here:
- Files are opened relative to a directory descriptor, never through a symbolic link
  (O_NOFOLLOW), and only if they are regular files no larger than the limit of their kind;
  a line longer than MAX_LINE_BYTES is refused.  Memory and time are bounded by those limits.
- A newer major format version than READER_MAJOR is refused (FormatVersionError).
- Unknown line types are skipped without looking at their fields; trailing fields are ignored
  by the handlers.
- Fields are checked when a handler asks for them: integers are ASCII digits within their
  range (counts and times 0 to 2^64-1), escapes are `\\t`, `\\n`, `\\\\` only, histograms
  have bins 0-47.  Anything else is a ProfileError naming file and line.
- A file without its `end` line was cut short: a last line without its newline was cut
  mid-line and is dropped unread; a last complete line that does not parse is dropped too.
Nothing here prints or exits.
"""
from __future__ import annotations

import errno
import io
import os
import re
import secrets
import stat
from dataclasses import dataclass
from typing import BinaryIO, Callable, Optional, Sequence

from pathscope.errors import FormatVersionError, ProfileError

READER_MAJOR = 2              # reads formats 1.x and 2.x (1.x files simply have no call paths)
U64_MAX = (1 << 64) - 1
I64_MAX = (1 << 63) - 1
HIST_BINS = 48                # message-size bins 0-47 (docs/format.md, Histograms)
MAX_LINE_BYTES = 16 << 20     # one record; a comm line of a million ranks fits easily
MAX_WORLD_SIZE = 1 << 20      # ranks believed (rank and size lines); a larger size is refused
MAX_FILE_BYTES = {            # per kind of file (the magic of its first line)
    "pathscope-rank": 1 << 30,
    "pathscope-profile": 256 << 20,
    "pathscope-symbols": 256 << 20,
    "pathscope-tree": 256 << 20,
}
_VERSION = re.compile(r"^(\d{1,6})\.(\d{1,6})$")
_ESCAPES = {"t": "\t", "n": "\n", "\\": "\\"}
_DIGITS = re.compile(r"^[0-9]{1,20}$")
_SIGNED = re.compile(r"^-?[0-9]{1,19}$")
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def unescape(text: str, strict: bool = False) -> str:
    """Undoes the writer's escaping of TAB, newline and backslash (\\t, \\n, \\\\).  Any other
    backslash stays as it is, or with strict (the reader's fields) is a ValueError."""
    if "\\" not in text:
        return text
    out = []
    i = 0
    while i < len(text):
        c = text[i]
        nxt = text[i + 1] if c == "\\" and i + 1 < len(text) else ""
        if c == "\\" and nxt in _ESCAPES and nxt:
            out.append(_ESCAPES[nxt])
            i += 2
            continue
        if c == "\\" and strict:
            shown = "\\" + nxt if nxt else "\\ at the end"
            raise ValueError(f"invalid escape '{shown}'" if nxt else f"invalid escape ({shown})")
        out.append(c)
        i += 1
    return "".join(out)


def unescape_strict(text: str) -> str:
    """As unescape, but ValueError for a backslash not followed by `t`, `n` or `\\`."""
    return unescape(text, strict=True)


def escape(text: str) -> str:
    """The writer's side: backslash, TAB and newline as `\\\\`, `\\t`, `\\n`."""
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")


def format_line(fields: Sequence[object]) -> str:
    """One record: the fields escaped (text) and joined by TAB, with the newline."""
    return "\t".join(escape(str(f)) for f in fields) + "\n"


def parse_version(text: str, where: str) -> tuple[int, int]:
    match = _VERSION.match(text.strip())
    if not match:
        raise ProfileError(f"{where}: malformed format version '{_shown(text)}'")
    return int(match.group(1)), int(match.group(2))


def check_version(version: str, where: str) -> None:
    major, _minor = parse_version(version, where)
    if major > READER_MAJOR:
        raise FormatVersionError(
            f"profile format {version} is newer than this pathscope (reads {READER_MAJOR}.x)")


def version_at_least(version: str, major: int, minor: int) -> bool:
    match = _VERSION.match(version.strip())
    return bool(match) and (int(match.group(1)), int(match.group(2))) >= (major, minor)


def _shown(text: str, limit: int = 40) -> str:
    """A field as a message shows it: cut, and without control characters."""
    cut = text if len(text) <= limit else text[:limit] + "..."
    return "".join(c if c.isprintable() else "?" for c in cut)


def parse_count(text: str) -> int:
    """An integer from 0 to 2^64-1 in ASCII digits; ValueError (its message says why)."""
    if text.isascii() and text.isdigit() and len(text) <= 20:   # the common case, no regex
        value = int(text)
        if value <= U64_MAX:
            return value
    if _DIGITS.match(text):
        value = int(text)
        if value <= U64_MAX:
            return value
        raise ValueError(f"'{_shown(text)}' is larger than {U64_MAX}")
    if _SIGNED.match(text):
        raise ValueError(f"'{_shown(text)}' is negative")
    raise ValueError(f"'{_shown(text)}' is not an integer")


@dataclass
class Record:
    kind: str
    fields: list[str]             # as written (escaped)
    where: str                    # "file:line"
    line: int = 0                 # its line number (the header is line 1)

    def need(self, count: int) -> None:
        if len(self.fields) < count:
            raise ProfileError(f"{self.where}: '{self.kind}' line has {len(self.fields)} fields "
                               f"after the type, expected {count}")

    def _bad(self, i: int, why: str) -> ProfileError:
        return ProfileError(f"{self.where}: '{self.kind}' line: field {i + 2} {why}")

    def number(self, i: int, limit: int = U64_MAX) -> int:
        """A count, time or id: an integer from 0 to limit."""
        try:
            value = parse_count(self.fields[i])
        except ValueError as e:
            raise self._bad(i, str(e)) from None
        if value > limit:
            raise self._bad(i, f"'{_shown(self.fields[i])}' is larger than {limit}")
        return value

    def signed(self, i: int) -> int:
        """A signed 64-bit integer (e.g. a rank that may be MPI_UNDEFINED)."""
        text = self.fields[i]
        if _SIGNED.match(text) and -I64_MAX - 1 <= int(text) <= I64_MAX:
            return int(text)
        raise self._bad(i, f"'{_shown(text)}' is not an integer")

    def hex_number(self, i: int) -> int:
        """A `0x`-prefixed hexadecimal field (addresses, at most 64 bits)."""
        text = self.fields[i]
        if re.match(r"^0[xX][0-9a-fA-F]{1,16}$", text):
            return int(text, 16)
        raise self._bad(i, f"'{_shown(text)}' is not a hexadecimal address (0x...)")

    def optional_number(self, i: int, limit: int = U64_MAX) -> Optional[int]:
        """An integer field, or None for `-`."""
        return None if self.fields[i] == "-" else self.number(i, limit)

    def hist(self, i: int) -> dict[int, int]:
        try:
            return parse_hist(self.fields[i])
        except ValueError as e:
            raise self._bad(i, f"is a malformed histogram: {e}") from None

    def text(self, i: int) -> str:
        try:
            return unescape_strict(self.fields[i])
        except ValueError as e:
            raise self._bad(i, f"has an {e}") from None

    def word(self, i: int, pattern: "re.Pattern[str]", what: str) -> str:
        """A field that must match pattern (an identifier, a run id)."""
        text = self.fields[i]
        if not pattern.match(text):
            raise self._bad(i, f"'{_shown(text)}' is not {what}")
        return text


def parse_hist(text: str) -> dict[int, int]:
    """`0:10,11:10` -> {0: 10, 11: 10}; `-` -> {}.  Bins are 0-47, each at most once, counts
    0 to 2^64-1.  Raises ValueError (its message says why)."""
    if text == "-" or text == "":
        return {}
    hist: dict[int, int] = {}
    for pair in text.split(","):
        b, sep, count = pair.partition(":")
        if not sep or not _DIGITS.match(b):
            raise ValueError(f"'{_shown(text)}' (expected bin:count,...)")
        if int(b) >= HIST_BINS:
            raise ValueError(f"bin {_shown(b)} is not 0 to {HIST_BINS - 1}")
        if int(b) in hist:
            raise ValueError(f"bin {int(b)} given twice")
        hist[int(b)] = parse_count(count)
    return hist


@dataclass
class FileInfo:
    version: str
    has_end: bool                 # the `end` line was read
    lines: int                    # lines read, the header included
    cut_mid_line: bool = False    # the last line had no newline (dropped)


Handler = Callable[[Record], None]


class CutShort(ProfileError):
    """A file that is empty or ends inside its first line: nothing of it can be read."""


def read_records(source: BinaryIO, name: str, magic: str, handlers: dict[str, Handler],
                 other: Optional[Handler] = None, max_bytes: Optional[int] = None,
                 on_version: Optional[Callable[[str], None]] = None,
                 where: tuple[str, str] = ("", "")) -> FileInfo:
    """Reads a file's records from source (a binary stream at its start) and feeds each to
    its handler (other: for line types without one, e.g. the `counter_*` lines).  name is
    what messages call the file, and line N "name:N" (where: the text around N instead).  ProfileError for
    an empty file, a wrong first line, a line or file beyond the limits, or a malformed
    record (see the module's rules); CutShort for an empty file or one cut in its first
    line.  on_version: called with the version once the first line is checked."""
    limit = MAX_FILE_BYTES.get(magic, 256 << 20) if max_bytes is None else max_bytes
    total = 0
    before, after = where if where[0] else (f"{name}:", "")

    def next_line(line: int) -> Optional[bytes]:
        nonlocal total
        try:
            raw = source.readline(MAX_LINE_BYTES + 1)
        except OSError as e:        # EIO, a file on a vanished mount, ...
            raise ProfileError(f"cannot read {name}: {e.strerror or e}") from None
        if not raw:
            return None
        total += len(raw)
        if len(raw) > MAX_LINE_BYTES:
            raise ProfileError(f"{before}{line}{after}: line longer than {MAX_LINE_BYTES} bytes")
        if total > limit:
            raise ProfileError(f"{name} is larger than {limit} bytes (the limit for a "
                               f"{magic} file)")
        return raw

    number = 1
    first = next_line(1)
    if first is None:
        raise CutShort(f"{name} is empty")
    head = first.rstrip(b"\n").decode("utf-8", errors="replace").split("\t")
    if head[0] != magic or len(head) < 2 or not first.endswith(b"\n"):
        if not first.endswith(b"\n") and magic.startswith(head[0]) and len(head) < 3:
            raise CutShort(f"{name} is cut short in its first line")
        raise ProfileError(f"{name} is not a pathscope file (first line is not "
                           f"'{magic}<TAB>VERSION')")
    version = head[1]
    check_version(version, f"{before}1{after}")
    if on_version is not None:
        on_version(version)
    info = FileInfo(version, False, 1)
    pending: Optional[ProfileError] = None     # the error of the last line read, if any
    while True:
        raw = next_line(number + 1)
        if raw is None:
            break
        number += 1
        info.lines = number
        if not raw.endswith(b"\n"):            # cut mid-line: the file ends here
            if pending is not None:
                raise pending
            if raw == b"end":                  # only the newline is missing
                info.has_end = True
            else:
                info.cut_mid_line = True
            break
        if pending is not None:                # not the last line: its error stands
            raise pending
        line = raw[:-1].decode("utf-8", errors="replace")
        kind, _, rest = line.partition("\t")
        if kind == "end":
            info.has_end = True
            break
        handler = handlers.get(kind, other)
        if handler is None:
            continue
        record = Record(kind, rest.split("\t") if _ else [], f"{before}{number}{after}",
                        number)
        try:
            handler(record)
        except ProfileError as e:
            pending = e
    if pending is not None and info.has_end:
        raise pending
    return info


def parse_text(data: str, name: str, magic: str, handlers: dict[str, Handler],
               other: Optional[Handler] = None) -> FileInfo:
    """read_records on a text already in memory (e.g. the symbolizer's answer)."""
    return read_records(io.BytesIO(data.encode("utf-8", errors="replace")), name, magic,
                        handlers, other)


# ---- files relative to a directory descriptor -------------------------------------------------

class RefusedFile(ProfileError):
    """A profile file that is not read: a symbolic link, not a regular file, or too large."""


def open_in_directory(dir_fd: int, entry: str, name: str, magic: str) -> BinaryIO:
    """Opens dir_fd/entry for reading without following a symbolic link and without blocking
    (a FIFO or device is refused, never waited on); RefusedFile for a link, a file that is not
    regular or larger than the limit of its kind; ProfileError for other failures.  name is
    what messages call the file."""
    try:
        fd = os.open(entry, READ_FLAGS, dir_fd=dir_fd)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise RefusedFile(f"{name} is a symbolic link (not followed)") from None
        raise ProfileError(f"cannot read {name}: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise RefusedFile(f"{name} is not a regular file (not read)")
        limit = MAX_FILE_BYTES.get(magic, 256 << 20)
        if st.st_size > limit:
            raise RefusedFile(f"{name} is larger than {limit} bytes (the limit for a {magic} "
                              f"file; not read)")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb", buffering=1 << 16)
    except BaseException:
        os.close(fd)
        raise


class _Region(io.RawIOBase):
    """Bytes offset to offset+length of an open file, read with pread (the descriptor is
    shared: several regions of one file may be read in turn without seeking it)."""

    def __init__(self, fd: int, offset: int, length: int):
        super().__init__()
        self._fd, self._start, self._offset, self._end = fd, offset, offset, offset + length

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        """Within the region (tell() is the position from its start)."""
        base = {io.SEEK_SET: self._start, io.SEEK_CUR: self._offset, io.SEEK_END: self._end}
        self._offset = min(max(base[whence] + offset, self._start), self._end)
        return self._offset - self._start

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def]
        count = min(len(buffer), self._end - self._offset)
        if count <= 0:
            return 0
        data = os.pread(self._fd, count, self._offset)
        buffer[:len(data)] = data
        self._offset += len(data)
        return len(data)


def open_region(fd: int, offset: int, length: int, buffering: int = 1 << 16) -> BinaryIO:
    """A binary stream of length bytes of the regular file fd from offset (a section of
    ranks.tsv): nothing before or after it is read.  Closing it leaves fd open."""
    return io.BufferedReader(_Region(fd, offset, length), buffer_size=buffering)  # type: ignore[return-value]


def open_directory(path: str, follow: bool) -> int:
    """A descriptor of the directory at path (O_DIRECTORY; O_NOFOLLOW unless follow).
    Raises OSError."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    return os.open(path, flags)


def directory_unsafe(dir_fd: int) -> Optional[str]:
    """Why pathscope should not create files in this directory, or None: it must belong to us
    or to root, and not be writable by others unless the sticky bit is set."""
    st = os.fstat(dir_fd)
    if st.st_uid not in (os.geteuid(), 0):
        return f"it belongs to uid {st.st_uid} (neither you nor root)"
    if st.st_mode & stat.S_IWOTH and not st.st_mode & stat.S_ISVTX:
        return "it is writable by everyone without the sticky bit"
    return None


def write_in_directory(dir_fd: int, entry: str, text: str) -> None:
    """Writes text to dir_fd/entry through a temporary file with an unpredictable name,
    created with O_EXCL|O_NOFOLLOW (a planted file or link is never followed or reused), then
    renamed over entry (replacing a link named entry, never writing through it).  Raises
    OSError; the temporary file is removed on failure."""
    tmp = f".{entry}.{secrets.token_hex(8)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o644, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.rename(tmp, entry, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            pass
        raise

