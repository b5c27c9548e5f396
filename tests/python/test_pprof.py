"""`pathscope export --format pprof` (python/pathscope/export/pprof.py) on the hybrid fixture
(tests/python/data/hybrid/README.md has its tree and times): `go tool pprof -top` and
`-traces` read the file back with the fixture's totals and stacks, and the file parsed again
with the generated bindings holds, per sample type, the sum of that metric over the tree.

Needs the build's build/<mpi>/python/profile_pb2.py (`make build`), the protobuf runtime and
`go` (scripts/setup.sh installs protobuf-compiler, golang-go and protobuf)."""
import gzip
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import pathscope
from pathscope.errors import ProfileError
from pathscope.export import pprof
from pathscope.metrics import STORED
from pathscope_samples import HYBRID, write_sample

ROOT = Path(__file__).resolve().parents[2]
PATHSCOPE = ROOT / "bin" / "pathscope"
LIBC = "__libc_start_call_main"
MAIN_PATH = ["main", LIBC, "_start"]
SOLVE_PATH = ["solve"] + MAIN_PATH
UPDATE_PATH = ["update (inline)"] + SOLVE_PATH    # update inlined into solve
# every sample with a time (ns) and its stack, leaf first: the README's tree, both ranks summed
REAL = HYBRID.parent / "real-2.2" / "mpi-kernel"   # a real run (format 2.2)
HYBRID_TRACES = sorted([
    (2269000000, ["compute"] + UPDATE_PATH),
    (300000000, ["libkernels.so+0x1a4f", "compute"] + UPDATE_PATH),
    (900000000, ["MPI_Allreduce"] + SOLVE_PATH),
    (150000000, ["MPI_Recv"] + MAIN_PATH),
    (294000000, MAIN_PATH),
    (10000000, ["MPI_Send"] + MAIN_PATH),
    (30000000, ["compute", "[failed unwind]"]),
    (135000001, ["[not unwound]"]),
    (10000000, ["MPI_Finalize", "[not unwound]"]),
    (2000000, ["MPI_Comm_dup", "[not unwound]"]),
    (2200000000, ["worker", "start_thread", "__clone3"]),
    (400000000, ["compute", "worker", "start_thread", "__clone3"]),
])


def cli(*args):
    return subprocess.run([str(PATHSCOPE), *map(str, args)], capture_output=True, text=True,
                          timeout=120)


def go_pprof(*args):
    go = shutil.which("go")
    assert go, "go not found: scripts/setup.sh installs golang-go"
    p = subprocess.run([go, "tool", "pprof", *map(str, args)], capture_output=True, text=True,
                       timeout=300, env={**os.environ, "PPROF_TMPDIR": "/nonexistent"})
    assert p.returncode == 0, p.stderr
    return p.stdout


@pytest.fixture(scope="module")
def hybrid_pb(tmp_path_factory):
    out = tmp_path_factory.mktemp("pprof") / "prof.pb.gz"
    p = cli("export", HYBRID, "--format", "pprof", "-o", out)
    assert p.returncode == 0, p.stderr
    assert p.stdout == ""
    return out


def top_rows(text):
    """-top's rows: {function: (flat, cum)} as printed."""
    rows = {}
    started = False
    for line in text.splitlines():
        if line.split()[:2] == ["flat", "flat%"]:
            started = True
        elif started:
            flat, _, _, cum, _, name = line.split(None, 5)
            rows[name] = (flat, cum)
    return rows


def test_top_has_the_fixtures_totals(hybrid_pb):
    text = go_pprof("-top", "-unit=ns", "-nodefraction=0", "-nodecount=100", hybrid_pb)
    assert "File: solver\n" in text
    assert "pathscope profile of solver\ncommand: mpirun -np 2 ./solver --steps 10\n" in text
    assert "Type: time\n" in text
    assert "of 6700000001ns total" in text       # 5628.000001 ms sampled + 1072 ms in MPI
    rows = top_rows(text)
    assert rows["compute"] == ("2699000000ns", "2999000000ns")   # 2269 + 30 + 400 (+ 300)
    assert rows["worker"] == ("2200000000ns", "2600000000ns")
    assert rows["MPI_Allreduce"] == ("900000000ns", "900000000ns")
    assert rows["main"] == ("294000000ns", "3923000000ns")
    assert rows["[not unwound]"] == ("135000001ns", "147000001ns")
    assert rows["update (inline)"] == ("0", "2569000000ns")
    assert rows["_start"] == ("0", "3923000000ns")


@pytest.mark.parametrize("sample_index, total", [
    ("sample_ns", "of 5628000001ns total"), ("mpi_ns", "of 1072000000ns total"),
    ("visits", "of 54 total"), ("bytes", "of 10560B total")])
def test_top_per_metric(hybrid_pb, sample_index, total):
    unit = ["-unit=ns"] if sample_index.endswith("_ns") else []
    text = go_pprof("-top", *unit, f"-sample_index={sample_index}", hybrid_pb)
    assert f"Type: {sample_index}\n" in text
    assert total in text
    if sample_index == "bytes":
        rows = top_rows(text)
        assert rows["MPI_Recv"] == rows["MPI_Send"] == ("5120B", "5120B")
        assert rows["MPI_Allreduce"] == ("320B", "320B")


def parse_traces(text):
    """-traces' samples as (value, [frames leaf first]), sorted."""
    traces = []
    for block in text.split("-----------+" + "-" * 55)[1:]:
        lines = [line for line in block.splitlines() if line.strip()]
        if not lines:
            continue
        value, first = lines[0].split(None, 1)
        traces.append((int(value.removesuffix("ns")), [first.strip()] +
                       [line.strip() for line in lines[1:]]))
    return sorted(traces)


def test_traces_are_the_fixtures_stacks(hybrid_pb):
    assert parse_traces(go_pprof("-traces", "-unit=ns", hybrid_pb)) == HYBRID_TRACES


@pytest.mark.parametrize("directory", [HYBRID, REAL])
def test_round_trip_totals_per_metric(tmp_path, directory):
    frames = pathscope.open(directory)
    out = tmp_path / "prof.pb.gz"
    pprof.write(frames, out)
    pb = pprof.load_bindings()
    prof = pb.Profile.FromString(gzip.decompress(out.read_bytes()))
    s = prof.string_table
    assert s[0] == ""
    types = [(s[t.type], s[t.unit]) for t in prof.sample_type]
    assert types == [("time", "nanoseconds")] + [
        (m.name, {"ns": "nanoseconds", "bytes": "bytes", "count": "count"}[m.unit])
        for m in STORED]
    assert s[prof.default_sample_type] == "time"
    nodes = frames.nodes
    want = [int(nodes["sample_ns"].sum() + nodes["mpi_ns"].sum())] + [
        int(nodes[m.name].sum()) for m in STORED]
    got = [sum(sample.value[i] for sample in prof.sample) for i in range(len(types))]
    assert got == want
    # every sample's stack is its node's path to the root, leaf first
    for sample in prof.sample:
        node, path = sample.location_id[0], []
        while node:
            path.append(node)
            node = int(nodes.loc[node, "parent"])
        assert list(sample.location_id) == path


def test_locations_carry_the_frames_names_files_and_lines(tmp_path):
    out = tmp_path / "prof.pb.gz"
    pprof.write(pathscope.open(HYBRID), out)
    prof = pprof.load_bindings().Profile.FromString(gzip.decompress(out.read_bytes()))
    s = prof.string_table
    functions = {f.id: f for f in prof.function}
    where = {loc.id: [(s[functions[ln.function_id].name], s[functions[ln.function_id].filename],
                       ln.line) for ln in loc.line] for loc in prof.location}
    assert where[4] == [("update", "/src/solver/update.h", 7),       # inlined: innermost first
                        ("solve", "/src/solver/solver.c", 20)]
    assert where[3] == [("main", "/src/solver/app.c", 41)]
    assert where[7] == [("libkernels.so+0x1a4f", "", 0)]
    assert where[9] == [("MPI_Allreduce", "", 0)]
    locations = {loc.id: loc for loc in prof.location}
    mappings = {m.id: s[m.filename] for m in prof.mapping}
    assert mappings[1] == "/opt/solver/bin/solver"         # the program's first
    assert (mappings[locations[7].mapping_id], locations[7].address) == (
        "/opt/solver/lib/libkernels.so", 0x1a4f)
    assert prof.time_nanos == 1700000000000000000


def test_a_profile_without_call_paths_is_refused(tmp_path):
    d = write_sample(tmp_path / "prof")
    p = cli("export", d, "--format", "pprof", "-o", tmp_path / "prof.pb.gz")
    assert (p.returncode, p.stderr) == (2, f"pathscope: no call-path data in {d} (profile "
                                           f"format 1.x or sampling and unwinding were off)\n")
    assert not (tmp_path / "prof.pb.gz").exists()


def test_the_pinned_protobuf_runtime_reads_protoc_321s_code():
    """setup.sh's protobuf pin is the runtime in use, and the build's module is protoc 3.21's
    (the round trips above parse files with it)."""
    import google.protobuf
    pin = re.search(r"protobuf==([\d.]+)", (ROOT / "scripts" / "setup.sh").read_text())
    assert pin and google.protobuf.__version__ == pin.group(1)
    protoc = subprocess.run(["protoc", "--version"], capture_output=True, text=True)
    assert protoc.stdout.startswith("libprotoc 3.21."), protoc.stdout
    text = pprof.bindings_path().read_text()
    assert text.startswith("# -*- coding: utf-8 -*-\n# Generated by the protocol buffer "
                           "compiler.  DO NOT EDIT!\n# source: profile.proto\n")


def test_without_the_generated_module_or_the_runtime(tmp_path, monkeypatch):
    # a checkout whose build has no profile_pb2.py (bin/pathscope would set its own home)
    p = subprocess.run([sys.executable, "-m", "pathscope", "export", HYBRID, "--format",
                        "pprof", "-o", tmp_path / "prof.pb.gz"], capture_output=True,
                       text=True, timeout=120,
                       env={**os.environ, "PATHSCOPE_HOME": str(tmp_path),
                            "PYTHONPATH": str(ROOT / "python")})
    assert (p.returncode, p.stderr.splitlines()[-1]) == (
        2, "pathscope: the pprof export needs the message classes the build generates with "
           "protoc (profile_pb2.py): run `make build` (protoc: Debian's protobuf-compiler)")
    assert not (tmp_path / "prof.pb.gz").exists()
    monkeypatch.setitem(sys.modules, "google.protobuf", None)
    with pytest.raises(ProfileError) as e:
        pprof.load_bindings()
    assert str(e.value) == ("the pprof export needs the Python protobuf runtime: pip install "
                            "protobuf==4.21.12")


def test_usage_errors():
    p = cli("export", HYBRID, "--format", "pprof")
    assert (p.returncode, p.stderr) == (2, "pathscope export: --format pprof needs -o FILE "
                                           "(try 'pathscope export --help')\n")
    p = cli("export", HYBRID, "--format", "pprof", "--metric", "time", "-o", "x")
    assert (p.returncode, p.stderr) == (2, "pathscope export: --metric does not apply to "
                                           "--format pprof (it holds every metric) (try "
                                           "'pathscope export --help')\n")


def test_unwritable_output(tmp_path):
    p = cli("export", HYBRID, "--format", "pprof", "-o", tmp_path / "no" / "prof.pb.gz")
    assert p.returncode == 2
    assert p.stderr.splitlines()[-1] == (f"pathscope: cannot write '{tmp_path}/no/prof.pb.gz': "
                                         f"No such file or directory")
