"""The live segments of running processes (/work/notes/live-contract.md, docs/user-guide.md
"pathscope top"): the private directory D = /dev/shm/pathscope-<uid>, the processes' names
in it, and the segment reader.

    directory = open_private_dir(uid)                 # checked: owner, 0700, no link
    segment = read_segment(directory, "1234-5678.live", uid)
    segment.header.rank, segment.data.hot

Rules kept here:
- D is used only if it is a real directory owned by uid with mode exactly 0700; files in it
  are opened relative to its descriptor with O_NOFOLLOW and read only if they are regular
  files owned by uid with mode exactly 0600 and no larger than MAX_SEGMENT_BYTES.
- A segment is copied under its seqlock (seq even and unchanged around the copy, at most
  SEQLOCK_RETRIES copies) and only the copy is parsed; every offset and length of the header
  is checked against the file's size before it is used.  A broken rule is a LiveError naming
  the file and the rule.
- Data lines of unknown types are skipped (newer runtimes add tables); known ones are checked.
Nothing here prints or exits.
"""
from __future__ import annotations

import mmap
import os
import re
import stat
import struct
import time
from dataclasses import dataclass, field
from typing import Callable, Optional, Protocol

from pathscope.errors import LiveError
from pathscope.tsv import unescape

SHM = "/dev/shm"
MAGIC = b"PSLIVE1\0"
LAYOUT_VERSION = 1
HEADER_SIZE = 4096
MAX_SEGMENT_BYTES = 64 << 20
SEQLOCK_RETRIES = 100
STALE_INTERVALS = 3              # no publish for this many intervals: "not updating"
NAME_PATTERN = re.compile(r"^([1-9][0-9]{0,9})-([0-9]{1,20})\.(live|sock)$")
STATES = ("running", "finalizing", "ended")

# (name, struct format, offset) of the fixed header fields, little-endian
_U32, _U64, _I32 = "<I", "<Q", "<i"
SEQ_OFFSET = 16
_NUMBERS = (("layout_version", _U32, 8), ("header_size", _U32, 12), ("seq", _U64, 16),
            ("publishes", _U64, 24), ("published_unix_ns", _U64, 32),
            ("interval_ms", _U32, 40), ("state", _U32, 44), ("uid", _U32, 48),
            ("pid", _U32, 52), ("start_time", _U64, 56), ("rank", _I32, 64),
            ("size", _I32, 68), ("data_offset", _U32, 72), ("data_capacity", _U32, 76),
            ("data_len", _U32, 80), ("publisher_cpu_us", _U32, 84),
            ("publisher_cpu_total_ns", _U64, 1600))
_TEXTS = (("run_id", 88, 40), ("host", 128, 64), ("program", 192, 256),
          ("outdir", 448, 1024), ("socket", 1472, 128))


def private_dir_path(uid: int) -> str:
    return f"{SHM}/pathscope-{uid}"


def open_private_dir(uid: int) -> int:
    """A descriptor of D for uid; LiveError if it is missing, a link, not uid's, or not
    exactly 0700 (a squatter's directory is never used)."""
    path = private_dir_path(uid)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise LiveError(f"no pathscope process of uid {uid} on this node ({path} does not "
                        f"exist)") from None
    except OSError as e:
        raise LiveError(f"cannot open {path}: {e.strerror}") from None
    st = os.fstat(fd)
    problem = None
    if st.st_uid != uid:
        problem = f"owned by uid {st.st_uid}, not {uid}"
    elif stat.S_IMODE(st.st_mode) != 0o700:
        problem = f"mode {stat.S_IMODE(st.st_mode):04o}, not 0700"
    if problem:
        os.close(fd)
        raise LiveError(f"{path} is not used: {problem}")
    return fd


# ---- processes -----------------------------------------------------------------------------

@dataclass(frozen=True)
class ProcessId:
    """A process as its files name it: pid and /proc/PID/stat field 22 (start time)."""
    pid: int
    start_time: int

    @property
    def name(self) -> str:
        return f"{self.pid}-{self.start_time}"


def process_start_time(pid: int) -> Optional[int]:
    """Field 22 of /proc/PID/stat, None if there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read(4096)
    except (FileNotFoundError, ProcessLookupError):
        return None
    # the command (field 2) may hold spaces and parentheses: fields start after the last ')'
    fields = text[text.rfind(b")") + 2:].split()
    return int(fields[19])


def process_euid(pid: int) -> Optional[int]:
    """The effective uid of pid (/proc/PID/status), None if there is no such process."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            text = f.read(65536)
    except (FileNotFoundError, ProcessLookupError):
        return None
    for line in text.split(b"\n"):
        if line.startswith(b"Uid:"):
            return int(line.split()[2])
    return None


def process_alive(process: ProcessId) -> bool:
    return process_start_time(process.pid) == process.start_time


def parse_name(entry: str) -> Optional[tuple[ProcessId, str]]:
    """(process, "live" or "sock") for a file name of D, None for any other name."""
    m = NAME_PATTERN.match(entry)
    if not m:
        return None
    return ProcessId(int(m.group(1)), int(m.group(2))), m.group(3)


# ---- the segment ---------------------------------------------------------------------------

@dataclass
class Header:
    layout_version: int = 0
    header_size: int = 0
    seq: int = 0
    publishes: int = 0
    published_unix_ns: int = 0
    interval_ms: int = 0
    state: int = 0
    uid: int = 0
    pid: int = 0
    start_time: int = 0
    rank: int = -1
    size: int = 0
    data_offset: int = 0
    data_capacity: int = 0
    data_len: int = 0
    publisher_cpu_us: int = 0
    publisher_cpu_total_ns: int = 0
    run_id: str = ""
    host: str = ""
    program: str = ""
    outdir: str = ""
    socket: str = ""

    @property
    def state_name(self) -> str:
        return STATES[self.state]


Frames = tuple[tuple[Optional[int], int], ...]  # (module id, ELF vaddr) innermost first


@dataclass
class Data:
    source_names: list[str] = field(default_factory=list)
    elapsed_ns: int = 0
    threads: list[tuple[int, int, int, int]] = field(default_factory=list)  # index tid el cpu
    modules: dict[int, tuple[str, str]] = field(default_factory=dict)       # id: path, build id
    hot: list[tuple[int, int, int, Frames]] = field(default_factory=list)   # ns offcpu n frames
    mpi: list[tuple[str, str, int, int, int]] = field(default_factory=list)  # comm op n ns bytes
    heap: Optional[tuple[int, int, int, int]] = None                        # live peak allocs frees
    syscalls: list[tuple[str, int, int]] = field(default_factory=list)      # name calls ns
    probes: list[tuple[int, str, int, int, int, str]] = field(default_factory=list)
    ppaths: list[tuple[int, int, int, int, Frames]] = field(default_factory=list)


@dataclass
class Segment:
    name: str                    # as shown in messages (D/NAME.live)
    header: Header
    data: Data

    @property
    def process(self) -> ProcessId:
        return ProcessId(self.header.pid, self.header.start_time)


class Readable(Protocol):
    def __getitem__(self, key: slice) -> bytes: ...

    def __len__(self) -> int: ...


def _seq(buffer: Readable) -> int:
    return int(struct.unpack(_U64, buffer[SEQ_OFFSET:SEQ_OFFSET + 8])[0])


def seqlock_copy(buffer: Readable, name: str, retries: int = SEQLOCK_RETRIES,
                 pause: Callable[[], None] = lambda: time.sleep(0.001)) -> bytes:
    """A consistent copy of buffer: seq even and equal before and after the copy.  LiveError
    after `retries` copies that the publisher overlapped."""
    for _ in range(retries):
        before = _seq(buffer)
        if before % 2 == 0:
            copy = bytes(buffer[0:len(buffer)])
            if _seq(buffer) == before:
                return copy
        pause()
    raise LiveError(f"{name}: busy (the publisher was writing during {retries} copies)")


def parse_header(copy: bytes, name: str) -> Header:
    """The header of a segment's copy, every offset checked against len(copy)."""
    if len(copy) < HEADER_SIZE:
        raise LiveError(f"{name}: {len(copy)} bytes, shorter than the {HEADER_SIZE}-byte "
                        f"header")
    if copy[:8] != MAGIC:
        raise LiveError(f"{name}: not a live segment (magic {copy[:8]!r})")
    header = Header()
    for attr, fmt, offset in _NUMBERS:
        setattr(header, attr, struct.unpack_from(fmt, copy, offset)[0])
    for attr, offset, size in _TEXTS:
        raw = copy[offset:offset + size]
        end = raw.find(b"\0")
        if end < 0:
            raise LiveError(f"{name}: header field {attr} is not NUL-terminated")
        setattr(header, attr, raw[:end].decode("utf-8", "replace"))
    _check_header(header, len(copy), name)
    return header


def _check_header(h: Header, size: int, name: str) -> None:
    if h.layout_version != LAYOUT_VERSION:
        raise LiveError(f"{name}: layout version {h.layout_version} (this pathscope reads "
                        f"version {LAYOUT_VERSION})")
    if h.header_size != HEADER_SIZE:
        raise LiveError(f"{name}: header size {h.header_size}, not {HEADER_SIZE}")
    if h.state >= len(STATES):
        raise LiveError(f"{name}: unknown state {h.state}")
    if h.data_offset < HEADER_SIZE or h.data_offset > size:
        raise LiveError(f"{name}: data offset {h.data_offset} outside {HEADER_SIZE}-{size}")
    if h.data_capacity > size - h.data_offset:
        raise LiveError(f"{name}: data capacity {h.data_capacity} at offset {h.data_offset} "
                        f"exceeds the segment's {size} bytes")
    if h.data_len > h.data_capacity:
        raise LiveError(f"{name}: data length {h.data_len} exceeds its capacity "
                        f"{h.data_capacity}")


class _Line:
    """One data line's fields, checked as its handler reads them."""

    def __init__(self, fields: list[str], where: str):
        self.fields = fields
        self.where = where

    def need(self, count: int) -> None:
        if len(self.fields) < count + 1:
            raise LiveError(f"{self.where}: '{self.fields[0]}' line has {len(self.fields) - 1} "
                            f"fields, needs {count}")

    def number(self, i: int) -> int:
        text = self.fields[i + 1]
        if not text.isascii() or not text.isdigit() or len(text) > 20 or int(text) >= 1 << 64:
            raise LiveError(f"{self.where}: '{self.fields[0]}' field {i + 1} '{text[:40]}' is "
                            f"not a count")
        return int(text)

    def text(self, i: int) -> str:
        return unescape(self.fields[i + 1])

    def frames(self, i: int) -> Frames:
        """MODID:0xVADDR;... (`-` for an address outside every module: module id None)."""
        out = []
        for item in self.fields[i + 1].split(";") if self.fields[i + 1] else []:
            module, _, address = item.partition(":")
            known = module.isascii() and module.isdigit() and len(module) <= 10
            if (not known and module != "-") or not address.startswith("0x") \
                    or not _is_hex(address[2:]):
                raise LiveError(f"{self.where}: '{self.fields[0]}' frame '{item[:40]}' is not "
                                f"MODID:0xVADDR")
            out.append((int(module) if known else None, int(address, 16)))
        return tuple(out)


def _is_hex(text: str) -> bool:
    return 0 < len(text) <= 16 and all(c in "0123456789abcdefABCDEF" for c in text)


def _handlers(data: Data) -> dict[str, Callable[[_Line], None]]:
    def source(r: _Line) -> None:
        r.need(1)
        data.source_names.append(r.text(0))

    def elapsed(r: _Line) -> None:
        r.need(1)
        data.elapsed_ns = r.number(0)

    def thread(r: _Line) -> None:
        r.need(4)
        data.threads.append((r.number(0), r.number(1), r.number(2), r.number(3)))

    def module(r: _Line) -> None:
        r.need(3)
        build_id = r.text(2)
        data.modules[r.number(0)] = (r.text(1), "" if build_id == "-" else build_id)

    def hot(r: _Line) -> None:
        r.need(4)
        data.hot.append((r.number(0), r.number(1), r.number(2), r.frames(3)))

    def mpi(r: _Line) -> None:
        r.need(5)
        data.mpi.append((r.text(0), r.text(1), r.number(2), r.number(3), r.number(4)))

    def heap(r: _Line) -> None:
        r.need(4)
        data.heap = (r.number(0), r.number(1), r.number(2), r.number(3))

    def sys(r: _Line) -> None:
        r.need(3)
        data.syscalls.append((r.text(0), r.number(1), r.number(2)))

    def probe(r: _Line) -> None:
        r.need(6)
        data.probes.append((r.number(0), r.text(1), r.number(2), r.number(3), r.number(4),
                            r.text(5)))

    def ppath(r: _Line) -> None:
        r.need(5)
        data.ppaths.append((r.number(0), r.number(1), r.number(2), r.number(3), r.frames(4)))

    return {"source": source, "elapsed": elapsed, "thread": thread, "module": module,
            "hot": hot, "mpi": mpi, "heap": heap, "sys": sys, "probe": probe, "ppath": ppath}


def parse_data(raw: bytes, name: str) -> Data:
    """The data lines (TAB-separated text); a last line without its newline is refused."""
    data = Data()
    handlers = _handlers(data)
    text = raw.decode("utf-8", "replace")
    if text and not text.endswith("\n"):
        raise LiveError(f"{name}: data ends inside a line")
    for number, line in enumerate(text.split("\n")[:-1], 1):
        fields = line.split("\t")
        handler = handlers.get(fields[0])
        if handler is not None:
            handler(_Line(fields, f"{name}: data line {number}"))
    return data


def parse_segment(copy: bytes, name: str) -> Segment:
    header = parse_header(copy, name)
    start = header.data_offset
    return Segment(name, header, parse_data(copy[start:start + header.data_len], name))


def read_segment(dir_fd: int, entry: str, uid: int, shown_dir: str) -> Segment:
    """Opens dir_fd/entry (no link), checks it (regular, uid's, 0600, bounded size), maps it
    read-only, copies it under the seqlock and parses the copy."""
    name = f"{shown_dir}/{entry}"
    try:
        fd = os.open(entry, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     dir_fd=dir_fd)
    except OSError as e:
        raise LiveError(f"cannot open {name}: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise LiveError(f"{name}: not a regular file")
        if st.st_uid != uid:
            raise LiveError(f"{name}: owned by uid {st.st_uid}, not {uid}")
        if stat.S_IMODE(st.st_mode) != 0o600:
            raise LiveError(f"{name}: mode {stat.S_IMODE(st.st_mode):04o}, not 0600")
        if st.st_size < HEADER_SIZE or st.st_size > MAX_SEGMENT_BYTES:
            raise LiveError(f"{name}: {st.st_size} bytes (a segment has {HEADER_SIZE} to "
                            f"{MAX_SEGMENT_BYTES})")
        with mmap.mmap(fd, st.st_size, mmap.MAP_SHARED, mmap.PROT_READ) as mapped:
            copy = seqlock_copy(mapped, name)
    finally:
        os.close(fd)
    segment = parse_segment(copy, name)
    if segment.header.uid != uid:
        raise LiveError(f"{name}: header uid {segment.header.uid}, the file's owner is {uid}")
    parsed = parse_name(entry)
    if parsed is not None and parsed[0] != segment.process:
        raise LiveError(f"{name}: header names process {segment.process.name}")
    return segment


def list_entries(dir_fd: int) -> list[tuple[str, ProcessId, str]]:
    """(entry, process, "live" or "sock") for the files of D named as the runtime names them,
    sorted."""
    out = []
    for entry in sorted(os.listdir(dir_fd)):
        parsed = parse_name(entry)
        if parsed is not None:
            out.append((entry, parsed[0], parsed[1]))
    return out
