"""The reader side of the live view (pathscope.live, pathscope.top, pathscope.modules,
pathscope.control): segments built here byte by byte per the layout of
/work/notes/live-contract.md, the seqlock copy, the bounds of malformed headers with their
exact messages, the aggregation over ranks, and the frame names from the real symbolizer."""
import os
import socket
import struct
import subprocess
import time
from pathlib import Path

import pytest

from pathscope.control import Target, _check_listener
from pathscope.errors import LiveError
from pathscope.live import (HEADER_SIZE, ProcessId, parse_data, parse_header, parse_name,
                            parse_segment, process_start_time, read_segment, seqlock_copy)
from pathscope.modules import Module, build_id, executable_paths
from pathscope.probes import format_list, format_reply_line, resolver_input
from pathscope.symbols import parse_symbols
from pathscope.top import (FrameNames, Selection, aggregate, build_snapshot, render_text, select,
                           view_rows)

SEGMENT_BYTES = 256 << 10
NAME = "seg"


def segment_bytes(data: bytes = b"", *, seq: int = 2, state: int = 0, pid: int = 4242,
                  start_time: int = 777, rank: int = 0, size: int = 2, uid: int = 0,
                  outdir: bytes = b"/scratch/prof", published: int = 0, interval: int = 1000,
                  data_offset: int = HEADER_SIZE, capacity: int = SEGMENT_BYTES - HEADER_SIZE,
                  data_len: int = -1, total: int = SEGMENT_BYTES, magic: bytes = b"PSLIVE1\0",
                  version: int = 1, header_size: int = HEADER_SIZE) -> bytearray:
    """A segment as the runtime lays it out (little-endian, fixed offsets)."""
    b = bytearray(total)
    b[0:8] = magic
    struct.pack_into("<IIQQQII", b, 8, version, header_size, seq, 17, published, interval, state)
    struct.pack_into("<IIQii", b, 48, uid, pid, start_time, rank, size)
    struct.pack_into("<IIII", b, 72, data_offset, capacity,
                     len(data) if data_len < 0 else data_len, 250)
    for offset, text in ((88, b"run-1"), (128, b"node7"), (192, b"/bin/app"), (448, outdir),
                         (1472, b"4242-777.sock")):
        b[offset:offset + len(text)] = text
    struct.pack_into("<Q", b, 1600, 123456)
    b[data_offset:data_offset + len(data)] = data
    return b


DATA = (b"source\tlive\nelapsed\t5000000000\nthread\t0\t4242\t5000000000\t4900000000\n"
        b"module\t0\t/bin/app\tabcd\nmodule\t1\t/lib/libm.so.6\t-\n"
        b"source\tsample\nhot\t3000000\t100\t3\t0:0x1209;1:0x40\n"
        b"source\tmpi\nmpi\tWORLD\tMPI_Allreduce\t10\t2000\t80\n"
        b"source\theap\nheap\t1024\t4096\t7\t5\n"
        b"source\tkernel\nsys\twrite\t4\t900\n"
        b"source\tprobe\nprobe\t1\tactive\t5\t700\t600\tsolve\n"
        b"ppath\t1\t5\t700\t600\t0:0x1300\n"
        b"future\tline\tof a newer runtime\n")


def test_header_and_data_parse_to_the_values_written():
    s = parse_segment(bytes(segment_bytes(DATA, published=99)), NAME)
    h = s.header
    assert (h.layout_version, h.header_size, h.seq, h.publishes, h.published_unix_ns) == \
        (1, 4096, 2, 17, 99)
    assert (h.interval_ms, h.state_name, h.uid, h.pid, h.start_time, h.rank, h.size) == \
        (1000, "running", 0, 4242, 777, 0, 2)
    assert (h.data_offset, h.data_capacity, h.data_len, h.publisher_cpu_us) == \
        (4096, SEGMENT_BYTES - 4096, len(DATA), 250)
    assert (h.run_id, h.host, h.program, h.outdir, h.socket, h.publisher_cpu_total_ns) == \
        ("run-1", "node7", "/bin/app", "/scratch/prof", "4242-777.sock", 123456)
    d = s.data
    assert d.source_names == ["live", "sample", "mpi", "heap", "kernel", "probe"]
    assert d.elapsed_ns == 5_000_000_000
    assert d.threads == [(0, 4242, 5_000_000_000, 4_900_000_000)]
    assert d.modules == {0: ("/bin/app", "abcd"), 1: ("/lib/libm.so.6", "")}
    assert d.hot == [(3_000_000, 100, 3, ((0, 0x1209), (1, 0x40)))]
    assert d.mpi == [("WORLD", "MPI_Allreduce", 10, 2000, 80)]
    assert d.heap == (1024, 4096, 7, 5)
    assert d.syscalls == [("write", 4, 900)]
    assert d.probes == [(1, "active", 5, 700, 600, "solve")]
    assert d.ppaths == [(1, 5, 700, 600, ((0, 0x1300),))]


class Publisher:
    """A segment whose seq reads as `seqs` says, one value per read (then the last one, or
    ever increasing with forever_busy): what a reader sees while the runtime publishes."""

    def __init__(self, seqs: list, forever_busy: bool = False):
        self.buffer = segment_bytes(DATA)
        self.seqs = list(seqs)
        self.forever_busy = forever_busy
        self.reads = 0

    def __len__(self):
        return len(self.buffer)

    def __getitem__(self, key):
        if key == slice(16, 24, None):
            self.reads += 1
            if self.forever_busy:
                return struct.pack("<Q", 2 * self.reads)
            return struct.pack("<Q", self.seqs.pop(0) if len(self.seqs) > 1 else self.seqs[0])
        return bytes(self.buffer[key])


def test_seqlock_retries_while_the_publisher_writes():
    pauses = []
    # odd (writing): no copy; 4 -> 6: changed during the copy; odd again; then 8 -> 8: kept
    publisher = Publisher([3, 4, 6, 7, 8])
    copy = seqlock_copy(publisher, NAME, pause=lambda: pauses.append(1))
    assert len(pauses) == 3 and publisher.reads == 6 and copy[:8] == b"PSLIVE1\0"


def test_seqlock_gives_up_after_100_copies():
    pauses = []
    with pytest.raises(LiveError) as e:
        seqlock_copy(Publisher([], forever_busy=True), NAME, pause=lambda: pauses.append(1))
    assert str(e.value) == "seg: busy (the publisher was writing during 100 copies)"
    assert len(pauses) == 100


@pytest.mark.parametrize("kwargs,message", [
    (dict(total=4095, capacity=0, data_offset=4095), "seg: 4095 bytes, shorter than the 4096-byte header"),
    (dict(magic=b"PSLIVE2\0"), "seg: not a live segment (magic b'PSLIVE2\\x00')"),
    (dict(version=2), "seg: layout version 2 (this pathscope reads version 1)"),
    (dict(header_size=2048), "seg: header size 2048, not 4096"),
    (dict(state=3), "seg: unknown state 3"),
    (dict(data_offset=100), "seg: data offset 100 outside 4096-262144"),
    (dict(data_offset=300000), "seg: data offset 300000 outside 4096-262144"),
    (dict(capacity=SEGMENT_BYTES), "seg: data capacity 262144 at offset 4096 exceeds the "
                                   "segment's 262144 bytes"),
    (dict(capacity=100, data_len=101), "seg: data length 101 exceeds its capacity 100"),
    (dict(data_len=2 ** 32 - 1), "seg: data length 4294967295 exceeds its capacity 258048"),
    (dict(outdir=b"x" * 1024), "seg: header field outdir is not NUL-terminated"),
])
def test_malformed_headers_are_refused_with_the_rule(kwargs, message):
    with pytest.raises(LiveError) as e:
        parse_header(bytes(segment_bytes(b"", **kwargs)), NAME)
    assert str(e.value) == message


@pytest.mark.parametrize("data,message", [
    (b"hot\t1\t2\t3\n", "seg: data line 1: 'hot' line has 3 fields, needs 4"),
    (b"elapsed\t1\nmpi\tW\tMPI_Send\t-1\t2\t3\n",
     "seg: data line 2: 'mpi' field 3 '-1' is not a count"),
    (b"heap\t1\t2\t3\t18446744073709551616\n",
     "seg: data line 1: 'heap' field 4 '18446744073709551616' is not a count"),
    (b"hot\t1\t2\t3\t0:1209\n", "seg: data line 1: 'hot' frame '0:1209' is not MODID:0xVADDR"),
    (b"ppath\t1\t1\t1\t1\tx:0x10\n", "seg: data line 1: 'ppath' frame 'x:0x10' is not "
                                     "MODID:0xVADDR"),
    (b"elapsed\t5\nelapsed\t6", "seg: data ends inside a line"),
])
def test_malformed_data_lines_are_refused(data, message):
    with pytest.raises(LiveError) as e:
        parse_data(data, NAME)
    assert str(e.value) == message


def test_a_frame_outside_every_module():
    d = parse_data(b"hot\t5\t0\t1\t-:0x7ffc1000;0:0x40\n", NAME)
    assert d.hot == [(5, 0, 1, ((None, 0x7FFC1000), (0, 0x40)))]
    doc = build_snapshot("/job", [parse_segment(bytes(segment_bytes(
        b"module\t0\t/bin/app\t-\nhot\t5\t0\t1\t-:0x7ffc1000;0:0x40\n", pid=os.getpid(),
        start_time=process_start_time(os.getpid()), published=time.time_ns())), "s")],
        [], FrameNames(lambda needed: parse_symbols(SYMBOLS, "answer")), time.time_ns()).to_json()
    assert [f["name"] for f in doc["hot"][0]["frames"]] == ["?+0x7ffc1000", "app+0x40"]


def test_data_text_is_unescaped():
    d = parse_data(b"mpi\tmy\\tcomm\tMPI_Bcast\t1\t2\t3\n", NAME)
    assert d.mpi == [("my\tcomm", "MPI_Bcast", 1, 2, 3)]


def _write(directory: Path, entry: str, content: bytes, mode: int = 0o600) -> None:
    path = directory / entry
    path.write_bytes(content)
    os.chmod(path, mode)


def test_read_segment_checks_the_file_before_mapping_it(tmp_path):
    uid = os.geteuid()
    _write(tmp_path, "4242-777.live", bytes(segment_bytes(DATA, uid=uid)))
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        s = read_segment(fd, "4242-777.live", uid, "D")
        assert s.process == ProcessId(4242, 777) and s.data.heap == (1024, 4096, 7, 5)

        def refused(entry: str) -> str:
            with pytest.raises(LiveError) as e:
                read_segment(fd, entry, uid, "D")
            return str(e.value)

        _write(tmp_path, "1-2.live", bytes(segment_bytes(uid=uid)), 0o644)
        assert refused("1-2.live") == "D/1-2.live: mode 0644, not 0600"
        os.symlink(tmp_path / "4242-777.live", tmp_path / "3-4.live")
        assert refused("3-4.live") == "cannot open D/3-4.live: Too many levels of symbolic links"
        _write(tmp_path, "5-6.live", b"x" * 100)
        assert refused("5-6.live") == "D/5-6.live: 100 bytes (a segment has 4096 to 67108864)"
        _write(tmp_path, "7-8.live", bytes(segment_bytes(uid=uid)))
        assert refused("7-8.live") == "D/7-8.live: header names process 4242-777"
        _write(tmp_path, "4242-778.live", bytes(segment_bytes(uid=uid + 1)))
        assert refused("4242-778.live") == f"D/4242-778.live: header uid {uid + 1}, the " \
                                           f"file's owner is {uid}"
        os.mkfifo(tmp_path / "9-9.live", 0o600)
        assert refused("9-9.live") == "D/9-9.live: not a regular file"
        if uid == 0:
            _write(tmp_path, "10-10.live", bytes(segment_bytes(uid=0)))
            os.chown(tmp_path / "10-10.live", 1, 1)
            assert refused("10-10.live") == "D/10-10.live: owned by uid 1, not 0"
    finally:
        os.close(fd)


def test_names_of_the_private_directory():
    assert parse_name("4242-777.live") == (ProcessId(4242, 777), "live")
    assert parse_name("4242-777.sock") == (ProcessId(4242, 777), "sock")
    for other in ("4242-777.live.tmp", "0-1.live", "x-1.sock", "4242.live", "kc.sock"):
        assert parse_name(other) is None


# ---- aggregation ----------------------------------------------------------------------------

def test_aggregate_sum_min_mean_max_and_their_ranks():
    s = aggregate({0: 10, 1: 30, 3: 5}, [0, 1, 2, 3])
    assert (s.sum, s.min, s.min_rank, s.mean, s.max, s.max_rank) == (45, 0, 2, 11.25, 30, 1)
    tie = aggregate({0: 7, 1: 7, 2: 7}, [0, 1, 2])
    assert (tie.min_rank, tie.max_rank, tie.mean) == (0, 0, 7.0)
    assert aggregate({}, []).sum == 0


APP = ("/opt/app/bin/app", "abcd")
SHORT, LONG = 0x1209, 0x1248
# what pathscope-symbolize answers for APP (symbols.tsv): long_phase has spin inlined
SYMBOLS = ("pathscope-symbols\t2.0\nmodule\t0\t/opt/app/bin/app\tabcd\tok\n"
           "frame\t0\t0x1209\tpc\t0\tshort_phase\ta.c\t10\n"
           "frame\t0\t0x1248\tpc\t0\tlong_phase\ta.c\t20\n"
           "frame\t0\t0x1248\tpc\t1\tspin\ta.c\t5\nend\n")


def _rank_data(rank: int, short: int, long: int, allreduce_ns: int) -> bytes:
    return (f"module\t3\t{APP[0]}\t{APP[1]}\n"
            f"hot\t{short}\t0\t{short // 1000}\t3:0x{SHORT:x}\n"
            f"hot\t{long}\t{long // 2}\t{long // 1000}\t3:0x{LONG:x}\n"
            f"mpi\tWORLD\tMPI_Allreduce\t{10 + rank}\t{allreduce_ns}\t{8 * (10 + rank)}\n"
            f"probe\t{rank + 1}\tactive\t{rank}\t{1000 * rank}\t{500 * rank}\tlong_phase\n"
            f"heap\t{100 * rank}\t{1000 + rank}\t{rank}\t0\n").encode()


def test_snapshot_aggregates_live_ranks_and_names_frames_once():
    me, start = os.getpid(), process_start_time(os.getpid())
    now = time.time_ns()
    segments = [parse_segment(bytes(segment_bytes(_rank_data(r, *v), pid=me, start_time=start,
                                                  rank=r, published=now)), f"r{r}")
                for r, v in enumerate([(1000, 5000, 70), (3000, 2000, 30), (2000, 2000, 20)])]
    segments.append(parse_segment(bytes(segment_bytes(_rank_data(3, 9, 9, 9), pid=me,
                                                      start_time=start, rank=3,
                                                      published=now - 4_000_000_000)), "r3"))
    asked = []
    names = FrameNames(lambda needed: asked.append(needed) or parse_symbols(SYMBOLS, "answer"))
    doc = build_snapshot("/job", segments, [], names, now).to_json()
    assert doc["ranks"] == [0, 1, 2]
    assert [p["stale"] for p in doc["processes"]] == [None, None, None, "not updating"]
    assert [(r["frames"][0]["name"], r["frames"][0]["inlined"]) for r in doc["hot"]] == \
        [("long_phase", ["spin"]), ("short_phase", [])]
    long, short = doc["hot"]
    assert long["sample_ns"] == {"sum": 9000, "min": 2000, "mean": 3000.0, "max": 5000,
                                 "min_rank": 1, "max_rank": 0}
    assert long["offcpu_ns"]["sum"] == 4500 and short["samples"]["sum"] == 6
    assert long["frames"][0]["where"] == "a.c:5" and long["frames"][0]["address"] == "0x1248"
    mpi = doc["mpi"][0]
    assert (mpi["comm"], mpi["op"], mpi["calls"]["sum"], mpi["ns"]["max_rank"],
            mpi["bytes"]["sum"]) == ("WORLD", "MPI_Allreduce", 33, 0, 264)
    probe = doc["probes"][0]
    assert (probe["name"], probe["calls"]["sum"], probe["incl_ns"]["mean"],
            probe["excl_ns"]["min_rank"]) == ("long_phase", 3, 1000.0, 0)
    assert doc["heap"]["live"]["sum"] == 300 and doc["heap"]["peak"]["max_rank"] == 2
    assert doc["processes"][1]["probe_ids"] == {"long_phase": 2}
    assert asked == [{APP: {(SHORT, "pc"), (LONG, "pc")}}]
    build_snapshot("/job", segments, [], names, now)
    assert len(asked) == 1            # known addresses are not asked again
    _headers, rows, _ = view_rows(doc, "mpi")
    assert rows == [["WORLD", "MPI_Allreduce", "33", "120 ns", "20 ns (r2)", "40 ns",
                     "70 ns (r0)", "264 B"]]
    _headers, rows, _ = view_rows(doc, "hot")
    assert [r[6] for r in rows] == ["long_phase [spin]", "short_phase"]


def test_a_gone_process_is_listed_not_aggregated():
    p = subprocess.Popen(["true"])
    p.wait()
    gone = parse_segment(bytes(segment_bytes(b"mpi\tW\tMPI_Send\t1\t2\t3\n", pid=p.pid)), "g")
    doc = build_snapshot("/job", [gone], [], FrameNames(), time.time_ns()).to_json()
    assert doc["processes"][0]["stale"] == "process gone"
    assert doc["ranks"] == [] and doc["mpi"] == []


# ---- modules, resolver lines, replies, listener ---------------------------------------------

def test_executable_modules_of_maps():
    maps = ("55d0-55d1 r--p 00000000 08:01 10 /usr/bin/app\n"
            "55d1-55d2 r-xp 00001000 08:01 10 /usr/bin/app\n"
            "7f00-7f01 r-xp 00000000 08:01 11 /lib/with space.so\n"
            "7f01-7f02 r-xp 00000000 08:01 12 /tmp/gone.so (deleted)\n"
            "7f02-7f03 rw-p 00000000 00:00 0 \n"
            "7f03-7f04 r-xp 00000000 00:00 0 [vdso]\n"
            "7f05-7f06 r-xp 00002000 08:01 10 /usr/bin/app\n")
    assert executable_paths(maps) == ["/usr/bin/app", "/lib/with space.so"]


def test_build_id_is_the_elf_note():
    out = subprocess.run(["readelf", "-n", "/bin/true"], capture_output=True, text=True).stdout
    expected = next(line.split()[-1] for line in out.splitlines() if "Build ID" in line)
    assert build_id("/bin/true") == expected
    assert build_id("/etc/hostname") == "" and build_id("/no/such") == ""


def test_resolver_input_lines():
    assert resolver_input([Module("/a b", "ab12"), Module("/c", "")], ["ns::f(int)"]) == [
        "module\t0\t/a b\tab12", "module\t1\t/c\t-", "spec\t0\tns::f(int)"]


def test_replies_for_a_person():
    assert format_reply_line("ok\tadded\t3\tsolve(int)\t/usr/lib/libx.so.1\tx.c:12") == \
        "added probe 3: solve(int) [libx.so.1] x.c:12"
    assert format_reply_line("ok\tremoved\t3\tsolve(int)") == "removed probe 3: solve(int)"
    assert format_reply_line("refused\tf\tf\ttoo-short\t4 bytes, the jump needs 5") == \
        "refused 'f': f (too-short): 4 bytes, the jump needs 5"
    assert format_reply_line("error\tno probe 9") == "error: no probe 9"
    assert format_list(["probe\t1\tactive\t12\t3000000\t1500\tsolve\t/bin/app\ta.c:3\tsolve"]) \
        .split("\n") == ["id  state   calls     incl     excl  name   module  file:line",
                         "1   active     12  3.00 ms  1.50 µs  solve  app     a.c:3"]


def test_listener_of_another_process_is_refused_before_sending():
    ours, theirs = socket.socketpair()
    try:
        target = Target(ProcessId(1, 6), os.geteuid())
        with pytest.raises(LiveError) as e:
            _check_listener(ours, target)
        assert str(e.value) == (f"/dev/shm/pathscope-{os.geteuid()}/1-6.sock is served by pid "
                                f"{os.getpid()} uid {os.geteuid()}, not by process 1 (uid "
                                f"{os.geteuid()}): nothing sent")
    finally:
        theirs.close()
        ours.close()


def _job_segment(outdir: bytes, pid: int, rank: int):
    return parse_segment(bytes(segment_bytes(b"", outdir=outdir, pid=pid, rank=rank)), "s")


def test_selection_of_the_job():
    a0, a1 = _job_segment(b"/a", 10, 0), _job_segment(b"/a", 11, 1)
    b0 = _job_segment(b"/b", 12, 0)
    assert select([a1, b0, a0], Selection(outdir="/a")) == ("/a", [a0, a1])
    assert select([a1, b0, a0], Selection(pid=12)) == ("/b", [b0])
    assert select([a1, a0], Selection()) == ("/a", [a0, a1])
    shown = f"/dev/shm/pathscope-{os.geteuid()}"
    for segments, selection, message in [
            ([a0, b0], Selection(), "2 jobs on this node, name one (pathscope top DIR): /a, /b"),
            ([], Selection(), f"no pathscope process on this node (no live segment in {shown})"),
            ([a0], Selection(pid=99), f"process 99 has no live segment in {shown} (not started "
                                      f"under pathscope, PATHSCOPE_LIVE=0, or another user's)"),
            ([a0], Selection(outdir="/c"), f"no process of job /c on this node (no live segment "
                                           f"in {shown} names it)")]:
        with pytest.raises(LiveError) as e:
            select(segments, selection)
        assert str(e.value) == message


def test_text_snapshot():
    me, start = os.getpid(), process_start_time(os.getpid())
    now = time.time_ns()
    segments = [parse_segment(bytes(segment_bytes(
        b"elapsed\t2000000000\nsys\tread\t3\t3000\n", pid=me, start_time=start, rank=r,
        published=now)), f"r{r}") for r in (0, 1)]
    doc = build_snapshot("/job", segments, [], FrameNames(), now).to_json()
    text = render_text(doc).split("\n")
    assert text[0] == "pathscope top: job /job, 2 rank(s) aggregated, 2 process(es)"
    at = text.index("system calls:")
    assert text[at + 1:at + 3] == [
        "  name  calls     time    min (rank)     mean    max (rank)",
        "  read      6  6.00 µs  3.00 µs (r0)  3.00 µs  3.00 µs (r0)"]
    at = text.index("ranks:")
    assert text[at + 2].split() == ["0", str(me), "node7", "running", "17", "2.00", "s", "0",
                                    "123", "µs"]
