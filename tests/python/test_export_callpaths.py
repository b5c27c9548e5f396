"""pathscope export --format folded|speedscope: exact stacks of the hybrid fixture for every
metric and choice of rank and thread, speedscope's structure and totals, and the exact
command-line errors."""
import io
import json

import pytest

from pathscope.cli import main
from pathscope.export import export_call_paths
from pathscope.reader import load_profile
from pathscope.symbolize import resolve_symbols
from pathscope_samples import (HYBRID, copy_hybrid, rank_rows, write_profile, write_sample)

MAIN = "_start;__libc_start_call_main;main"
LIBKERNELS_NOTE = ("pathscope: note: symbols: /opt/solver/lib/libkernels.so: not found on this "
                   "machine; its frames are shown as module+offset\n")

FOLDED = {
    ("time", None, None): f"""\
[failed unwind];compute 30000
[not unwound] 135000
[not unwound];MPI_Comm_dup 2000
[not unwound];MPI_Finalize 10000
__clone3;start_thread;worker 2200000
__clone3;start_thread;worker;compute 400000
{MAIN} 294000
{MAIN};MPI_Recv 150000
{MAIN};MPI_Send 10000
{MAIN};solve;MPI_Allreduce 900000
{MAIN};solve;update;compute 2269000
{MAIN};solve;update;compute;libkernels.so+0x1a4f 300000
""",
    ("mpi_time", None, None): f"""\
[not unwound];MPI_Comm_dup 2000
[not unwound];MPI_Finalize 10000
{MAIN};MPI_Recv 150000
{MAIN};MPI_Send 10000
{MAIN};solve;MPI_Allreduce 900000
""",
    ("visits", None, None): f"""\
[not unwound];MPI_Comm_dup 2
[not unwound];MPI_Finalize 2
{MAIN};MPI_Recv 5
{MAIN};MPI_Send 5
{MAIN};solve;MPI_Allreduce 40
""",
    ("bytes", None, None): f"""\
{MAIN};MPI_Recv 5120
{MAIN};MPI_Send 5120
{MAIN};solve;MPI_Allreduce 320
""",
    ("time", 0, None): f"""\
[failed unwind];compute 30000
[not unwound] 70000
[not unwound];MPI_Comm_dup 1000
[not unwound];MPI_Finalize 5000
__clone3;start_thread;worker 1200000
__clone3;start_thread;worker;compute 250000
{MAIN} 194000
{MAIN};MPI_Recv 150000
{MAIN};solve;MPI_Allreduce 300000
{MAIN};solve;update;compute 1100000
{MAIN};solve;update;compute;libkernels.so+0x1a4f 200000
""",
    ("time", 1, 1): """\
[not unwound] 50000
__clone3;start_thread;worker 1000000
__clone3;start_thread;worker;compute 150000
""",
    ("time", None, 1): """\
[not unwound] 100000
__clone3;start_thread;worker 2200000
__clone3;start_thread;worker;compute 400000
""",
    ("visits", None, 0): f"""\
[not unwound];MPI_Comm_dup 2
[not unwound];MPI_Finalize 2
{MAIN};MPI_Recv 5
{MAIN};MPI_Send 5
{MAIN};solve;MPI_Allreduce 40
""",
    ("bytes", 1, None): f"""\
{MAIN};MPI_Send 5120
{MAIN};solve;MPI_Allreduce 160
""",
    ("visits", 0, 1): "",
}


def folded(profile, metric, rank=None, thread=None, fmt="folded"):
    out = io.StringIO()
    export_call_paths(profile, fmt, out, resolve_symbols(profile), metric, rank, thread)
    return out.getvalue()


@pytest.fixture(scope="module")
def profile():
    return load_profile(HYBRID)


@pytest.mark.parametrize("metric, rank, thread", list(FOLDED))
def test_folded_exact(profile, metric, rank, thread):
    assert folded(profile, metric, rank, thread) == FOLDED[(metric, rank, thread)]


def test_folded_totals_are_the_time_split(profile):
    lines = FOLDED[("time", None, None)].splitlines()
    assert sum(int(line.rsplit(" ", 1)[1]) for line in lines) == 6_700_000   # µs: 3.5 s + 3.2 s


def test_time_rounds_half_up_after_summing_and_zero_lines_are_left_out(tmp_path):
    extra = [("sampler", "perf-task-clock", 1000, "cpu"), ("unwind", "p2p", "path"),
             ("module", 0, "/usr/bin/app", "-"),
             ("thread", 0, 7, 3698, 5, 0, 0, 0, 8),
             ("node", 0, 0, "-", "root", "-", "-", 0, 0, 0, 0, 0),
             ("node", 0, 1, 0, "fn", 0, "0x10", 0, 499, 1, 0, 0),     # 0.499 µs: left out
             ("node", 0, 2, 0, "fn", 0, "0x20", 0, 500, 1, 0, 0),     # 0.5 µs: 1
             ("node", 0, 3, 0, "call", 0, "0x30", 0, 0, 0, 0, 0),     # f, one call site
             ("node", 0, 4, 3, "fn", 0, "0x40", 0, 600, 1, 0, 0),
             ("node", 0, 5, 0, "call", 0, "0x50", 0, 0, 0, 0, 0),     # f, another call site
             ("node", 0, 6, 5, "fn", 0, "0x40", 0, 600, 1, 0, 0),     # f;g: 1.2 µs -> 1, not 2
             ("node", 0, 7, 0, "not_unwound", "-", "-", 0, 1499, 0, 0, 0)]
    d = write_profile(tmp_path / "prof", None, {0: rank_rows(0, 1, "complete", "h", 3698, 0,
                                                             version="2.0", extra=extra)})
    (d / "symbols.tsv").write_text(
        "pathscope-symbols\t2.0\nmodule\t0\t/usr/bin/app\t-\tok\n"
        "frame\t0\t0x30\tcall\t0\tf\tapp.c\t3\nframe\t0\t0x50\tcall\t0\tf\tapp.c\t4\n"
        "frame\t0\t0x40\tfn\t0\tg\tapp.c\t9\nend\n")
    assert folded(load_profile(d), "time") == "[not unwound] 1\napp+0x20 1\nf;g 1\n"


def test_speedscope_structure_and_totals(profile):
    for metric, unit in (("time", "microseconds"), ("mpi_time", "microseconds"),
                         ("visits", "none"), ("bytes", "bytes")):
        doc = json.loads(folded(profile, metric, fmt="speedscope"))
        assert set(doc) == {"$schema", "shared", "profiles", "name", "activeProfileIndex",
                            "exporter"}
        assert doc["$schema"] == "https://www.speedscope.app/file-format-schema.json"
        assert doc["name"] == "solver" and doc["activeProfileIndex"] == 0
        assert doc["exporter"].startswith("pathscope ")
        frames = doc["shared"]["frames"]
        for frame in frames:
            assert set(frame) <= {"name", "file"} and isinstance(frame["name"], str)
        assert len({json.dumps(f, sort_keys=True) for f in frames}) == len(frames)
        [prof] = doc["profiles"]
        assert set(prof) == {"type", "name", "unit", "startValue", "endValue", "samples",
                             "weights"}
        assert (prof["type"], prof["unit"], prof["startValue"]) == ("sampled", unit, 0)
        assert prof["name"] == f"solver: {metric} (all ranks, all threads)"
        assert len(prof["samples"]) == len(prof["weights"])
        assert prof["endValue"] == sum(prof["weights"])
        stacks = {";".join(frames[i]["name"] for i in sample): weight
                  for sample, weight in zip(prof["samples"], prof["weights"])}
        expected = dict(line.rsplit(" ", 1) for line in
                        FOLDED[(metric, None, None)].splitlines())
        assert stacks == {k: int(v) for k, v in expected.items()}
    doc = json.loads(folded(profile, "time", fmt="speedscope"))
    assert doc["profiles"][0]["endValue"] == 6_700_000
    files = {f["name"]: f.get("file") for f in doc["shared"]["frames"]}
    assert files["update"] == "/src/solver/update.h"
    assert files["[failed unwind]"] is None and files["MPI_Recv"] is None
    assert files["libkernels.so+0x1a4f"] is None


def test_cli_folded_to_file_and_notes_on_stderr(tmp_path, capsys):
    target = tmp_path / "out.folded"
    assert main(["export", str(HYBRID), "--format", "folded", "-o", str(target)]) == 0
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", LIBKERNELS_NOTE)
    assert target.read_text() == FOLDED[("time", None, None)]
    assert main(["export", str(HYBRID), "--format", "folded", "--metric", "bytes", "--rank",
                 "1"]) == 0
    assert capsys.readouterr().out == FOLDED[("bytes", 1, None)]
    assert main(["export", str(HYBRID), "--format", "speedscope", "--thread", "1"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["profiles"][0]["name"] == "solver: time (all ranks, thread 1)"
    assert doc["profiles"][0]["endValue"] == 2_700_000


@pytest.mark.parametrize("args, message", [
    (["--format", "csv", "--metric", "time"],
     "pathscope export: --metric applies to --format folded or speedscope, not csv "
     "(try 'pathscope export --help')"),
    (["--format", "json", "--rank", "0"],
     "pathscope export: --rank applies to --format folded or speedscope, not json "
     "(try 'pathscope export --help')"),
    (["--thread", "0"],
     "pathscope export: --thread applies to --format folded or speedscope, not csv "
     "(try 'pathscope export --help')"),
    (["--format", "folded", "--table", "ops"],
     "pathscope export: --table applies to --format csv or json, not folded "
     "(try 'pathscope export --help')"),
    (["--format", "speedscope", "--metric", "cycles"],
     "pathscope export: argument --metric: invalid choice: 'cycles' (choose from 'time', "
     "'mpi_time', 'oncpu_time', 'offcpu_time', 'visits', 'bytes', 'calls', 'alloc_count', 'alloc_bytes', 'free_count', 'leaked_bytes', "
     "'peak_bytes', 'syscall_count', 'syscall_count_estimated', 'syscall_time', 'syscall_time_estimated', 'probe_calls', 'probe_time', "
     "'probe_self_time', 'probe_cpu_time') (try 'pathscope export --help')"),
    (["--format", "folded", "--rank", "7"], "pathscope: no rank 7 in this profile (ranks 0-1)"),
    (["--format", "speedscope", "--thread", "4"],
     "pathscope: no thread 4 in this profile (threads 0-1)"),
    (["--format", "folded", "--rank", "1", "--thread", "2"],
     "pathscope: no thread 2 of rank 1 in this profile (threads 0-1)"),
])
def test_cli_errors(tmp_path, capsys, args, message):
    target = tmp_path / "out"
    assert main(["export", str(HYBRID)] + args + ["-o", str(target)]) == 2
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", message + "\n")
    assert not target.exists()


def test_cli_error_without_call_paths(tmp_path, capsys):
    d = write_sample(tmp_path / "prof")
    for fmt in ("folded", "speedscope"):
        assert main(["export", str(d), "--format", fmt]) == 2
        assert capsys.readouterr().err == (f"pathscope: no call-path data in {d} (profile "
                                           f"format 1.x or sampling and unwinding were off)\n")


def test_csv_still_defaults_to_comm_ops(tmp_path, capsys):
    d = copy_hybrid(tmp_path / "prof")
    assert main(["export", str(d)]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("comm,size,op,calls")
