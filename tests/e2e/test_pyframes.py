"""Python frames in call paths (runtime/python; docs/architecture.md, "Python frames"): an
mpi4py program with a known Python call structure, on both MPIs, read from the interpreter's
own frame chain.

- Every MPI_Allreduce is on the path of its Python callers, file:function:line, with the native
  frames around them (mpi4py below, ctypes and qsort between the callback and its caller): the
  exact calls per Python path.
- Samples of the busy loop land on its Python function.
- No MPI path and almost no sampled time keeps the interpreter's evaluation frame.
- Allocations (--heap) and system calls (--kernel) are on their Python paths too.
- --no-python-frames gives native paths only, and says so; so does a CPython of a version
  pathscope has no layout for (a program that exports the interpreter's symbols as 3.13).
"""
import os
import re
from pathlib import Path

import pytest

from conftest import ROOT
from profile_files import rank_text
from test_paths import cli, folded

PROGRAM = ROOT / "tests" / "programs" / "pyframes_main.py"
BASE = PROGRAM.name
PYTHONS = {"openmpi": Path("/usr/bin/python3"),                       # Debian's mpi4py 3.1.4
           "mpich": ROOT / ".deps" / "venv-mpich" / "bin" / "python"}  # mpi4py 4.1.2
BUSY_S = 0.6
EVAL = "_PyEval_EvalFrameDefault"
ALLREDUCE = ("MPI_Allreduce", "MPI_Allreduce_c")  # mpi4py 4 on MPICH 4: the large-count one


def marks():
    """The program's marked lines: NAME -> line number."""
    lines = PROGRAM.read_text().splitlines()
    return {m.group(1): i + 1 for i, line in enumerate(lines)
            for m in [re.search(r"# at:(\w+)$", line)] if m}


def python_frames(path):
    """The Python frames of a folded path, outermost first, and its leaf."""
    frames = path.split(";")
    return tuple(f for f in frames if f.startswith(BASE + ":")), frames[-1]


def python_for(mpi):
    python = PYTHONS[mpi.name]
    if not python.exists():
        pytest.skip(f"{python} missing (make mpi4py-deps)")
    probe = os.popen(f"{python} -c 'import mpi4py' 2>&1").read()
    if probe.strip():
        pytest.skip(f"mpi4py missing for {python}: {probe.strip()}")
    return python


def run(mpi, tmp_path, args=()):
    out = tmp_path / "prof"
    p = mpi.run(2, [python_for(mpi), PROGRAM, BUSY_S], out, pathscope_args=list(args), timeout=180)
    # (the launcher may join the ranks' lines: "compares 1compares 1")
    compares = [int(m) for m in re.findall(r"compares (\d+)", p.stdout)]
    assert len(compares) == 2 and compares[0] == compares[1] and compares[0] >= 1, p.stdout
    return out, compares[0]


def python_line(out, rank):
    return [line.split("\t") for line in rank_text(out, rank).splitlines()
            if line.startswith("python\t")]


def test_mpi_calls_per_python_path(mpi, tmp_path):
    out, compares = run(mpi, tmp_path)
    at = marks()
    f = lambda name, where: f"{BASE}:{name}:{at[where]}"
    top = (f("<module>", "module"),)
    reduce = f("reduce_once", "reduce")
    expected = {
        top + (f("main", "main_a"), f("caller_a", "caller_a"), reduce): 3,
        top + (f("main", "main_b"), f("caller_b", "caller_b"), reduce): 1,
        top + (f("main", "main_recurse"), f("recurse", "recurse"), f("recurse", "recurse"),
               f("recurse", "recurse_leaf"), reduce): 1,
        top + (f("main", "main_c"), f("through_c", "qsort"), f("compare", "compare"), reduce):
            compares,
    }
    for rank in (0, 1):
        visits = {}
        for path, n in folded(out, "visits", rank=rank).items():
            frames, leaf = python_frames(path)
            if leaf in ALLREDUCE:
                visits[frames] = visits.get(frames, 0) + n
                assert EVAL not in path, path
                if f("compare", "compare") in frames:
                    # the C library between the callback and the Python that called qsort
                    between = path.split(f("through_c", "qsort"))[1].split(f("compare", "compare"))[0]
                    assert "qsort" in between and "ffi_call" in between, path
                else:
                    # mpi4py's extension module below the Python caller
                    assert re.search(r";MPI\.cpython-311[^;]*\.so(\+0x[0-9a-f]+)?;", path) or \
                        "PyMPI" in path or "__pyx" in path, path
        assert visits == expected, (rank, visits)
        [line] = python_line(out, rank)
        assert line[1:5] == ["3.11.2", "on", "-", line[4]] and int(line[4]) > 0, line
    # the merged paths (tree.tsv, both ranks) name the same frames
    merged = {python_frames(p)[0]: n for p, n in folded(out, "visits").items()
              if python_frames(p)[1] in ALLREDUCE}
    assert merged == {k: 2 * v for k, v in expected.items()}


def test_busy_loop_samples_land_on_its_function(openmpi, tmp_path):
    out, _ = run(openmpi, tmp_path)
    at = marks()
    # the loop is two lines (the `while` with its call, the addition): a sample lands on the
    # one running, in a proportion that changes with the machine's load (all on either, seen)
    busy = {f"{BASE}:busy:{at['busy']}", f"{BASE}:busy:{at['busy'] + 1}"}
    times = folded(out, "time", rank=0, thread=0)
    in_busy = sum(us for p, us in times.items() if python_frames(p)[0][-1:] and
                  python_frames(p)[0][-1] in busy)
    assert in_busy >= 0.8 * BUSY_S * 1e6, (in_busy, times)
    # the interpreter's evaluation frame stays only where it was entering or leaving a call
    native = sum(us for p, us in times.items() if EVAL in p)
    assert native <= 0.02 * sum(times.values()), native


def test_python_frames_off(openmpi, tmp_path):
    out, compares = run(openmpi, tmp_path, ["--no-python-frames"])
    visits = folded(out, "visits", rank=0)
    allreduce = {p: n for p, n in visits.items() if python_frames(p)[1] in ALLREDUCE}
    assert sum(allreduce.values()) == 5 + compares, allreduce
    assert all(not python_frames(p)[0] and EVAL in p for p in allreduce), allreduce
    assert python_line(out, 0) == [["python", "3.11.2", "off", "PATHSCOPE_PYTHON_FRAMES=off",
                                    "0", "0", "0", "0", "0", "0"]]
    report = cli("report", out).stdout
    assert ("Python frames: not read on ranks 0,1 (CPython 3.11.2: PATHSCOPE_PYTHON_FRAMES=off): "
            "their paths show the interpreter's native frames") in report


def test_unknown_version_keeps_native_frames(openmpi, tmp_path):
    out = tmp_path / "prof"
    p = cli("run", "-o", out, "--", openmpi.prog("pyframes_fake"))
    assert p.returncode == 0, p.stderr
    text = (out / "ranks" / "rank-000000.tsv").read_text()
    assert [line for line in text.splitlines() if line.startswith("python\t")] == [
        "python\t3.13.0\toff\tunknown CPython version\t0\t0\t0\t0\t0\t0"]
    assert "\tpy\t" not in text
    times = folded(out, "time", rank=0)
    assert sum(us for p, us in times.items() if f";main;{EVAL}" in p) >= 0.3e6, times
    report = cli("report", out).stdout
    assert ("Python frames: not read on rank 0 (CPython 3.13.0: unknown CPython version): its "
            "paths show the interpreter's native frames") in report


PY312 = Path("/root/.pyenv/versions/3.12.1/bin/python3")


@pytest.mark.skipif(not PY312.exists(), reason="no CPython 3.12 here (pyenv 3.12.1)")
def test_python_312_busy_loop(tmp_path):
    """CPython 3.12 (a shared libpython; entry frames are shim frames on the C stack)."""
    script = tmp_path / "spin.py"
    script.write_text("import time\n\n\ndef spin(seconds):\n    end = time.process_time() + seconds\n"
                      "    while time.process_time() < end:\n        pass\n\n\ndef outer():\n"
                      "    spin(0.5)\n\n\nouter()\n")
    out = tmp_path / "prof"
    assert cli("run", "-o", out, "--", PY312, script).returncode == 0
    times = folded(out, "time", rank=0)
    on_spin = sum(us for p, us in times.items()
                  if re.search(r";spin\.py:<module>:14;spin\.py:outer:11;spin\.py:spin:[67](;|$)", p))
    assert on_spin >= 0.4e6, times
    [line] = [l for l in (out / "ranks" / "rank-000000.tsv").read_text().splitlines()
              if l.startswith("python\t")]
    assert line.split("\t")[1:4] == ["3.12.1", "on", "-"]


def test_heap_allocations_on_python_paths(openmpi, tmp_path):
    """Allocations (--heap) are on the Python path that made them: eight 1 MiB bytearrays
    from a list comprehension (its own code object in 3.11) in alloc_big."""
    script = tmp_path / "alloc.py"
    script.write_text("def alloc_big():\n    return [bytearray(1 << 20) for _ in range(8)]\n\n\n"
                      "def main():\n    keep = alloc_big()\n    return len(keep)\n\n\nmain()\n")
    out = tmp_path / "prof"
    assert cli("run", "--heap", "-o", out, "--", "/usr/bin/python3", script).returncode == 0
    frames = ("alloc.py:<module>:10", "alloc.py:main:6", "alloc.py:alloc_big:2",
              "alloc.py:alloc_big.<locals>.<listcomp>:2")
    for metric, want in (("alloc_bytes", 8 * ((1 << 20) + 1)), ("alloc_count", 8)):
        got = sum(n for p, n in folded(out, metric).items()
                  if "PyByteArray_Resize" in p and
                  tuple(f for f in p.split(";") if f.startswith("alloc.py:")) == frames)
        assert got == want, (metric, got)


def test_system_calls_on_python_paths(openmpi, tmp_path):
    """System calls (--kernel, every call put on its path: period 0) are on the Python line
    that made them: 300 writes from one loop, whichever native way the interpreter took to
    os.write (it specialises the call after a few runs)."""
    script = tmp_path / "writes.py"
    script.write_text("import os\n\n\ndef writes():\n    fd = os.open('/dev/null', os.O_WRONLY)\n"
                      "    for _ in range(300):\n        os.write(fd, b'x' * 100)\n"
                      "    os.close(fd)\n\n\nwrites()\n")
    out = tmp_path / "prof"
    assert cli("run", "--kernel", "--kernel-period", "0", "-o", out, "--", "/usr/bin/python3",
               script).returncode == 0
    calls = folded(out, "syscall_count")
    on_line = sum(n for p, n in calls.items() if p.endswith(";write") and
                  tuple(f for f in p.split(";") if f.startswith("writes.py:")) ==
                  ("writes.py:<module>:11", "writes.py:writes:7"))
    assert on_line == 300, calls


def test_mpi_calls_from_python_threads(mpi, tmp_path):
    """Threads other than the main one: their thread states lie on the heap (read in place
    while the interpreter's count of thread states has not moved, else checked with a system
    call); threads started one after another, two at once, and a generator's frames."""
    program = ROOT / "tests" / "programs" / "pyframes_threads.py"
    base = program.name
    lines = program.read_text().splitlines()
    at = {m.group(1): i + 1 for i, line in enumerate(lines)
          for m in [re.search(r"# at:(\w+)$", line)] if m}
    out = tmp_path / "prof"
    p = mpi.run(2, [python_for(mpi), program], out, timeout=180)
    assert p.stdout.count("threads done") == 2, p.stdout
    f = lambda name, where: f"{base}:{name}:{at[where]}"
    reduce = f("reduce_on", "reduce")
    expected = {
        (f("<module>", "module"), f("main", "main_in_main"), f("in_main", "in_main"), reduce): 5,
        (f("one_after_another", "after"), reduce): 2 + 3 + 4,
        (f("side_by_side", "side"), reduce): 12,
        (f("consume", "consume"), f("produce", "produce"), reduce): 3,
    }
    for rank in (0, 1):
        visits = {}
        for path, n in folded(out, "visits", rank=rank).items():
            frames = tuple(x for x in path.split(";") if x.startswith(base + ":"))
            if path.split(";")[-1] in ALLREDUCE:
                assert EVAL not in path, path
                visits[frames] = visits.get(frames, 0) + n
        assert visits == expected, (rank, visits)
        [line] = python_line(out, rank)
        # spliced, unmatched, unread, too deep
        assert line[2] == "on" and int(line[4]) > 0 and line[5:8] == ["0", "0", "0"], line
