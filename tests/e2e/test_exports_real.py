"""The pprof, Parquet and SQL exports of a real run: the demo stencil on a 2x2 grid, N=32, 10
iterations (tests/e2e/test_demo.py has its exact traffic).  `go tool pprof` reads the pprof
file back with the run's MPI visits and bytes per function, every MPI_Isend stack is the
program's, the file's totals per metric are the call tree's, and `pathscope sql` over the
profile and over its Parquet export gives the same per-operation numbers."""
import gzip
import shutil
import subprocess
from pathlib import Path

import pathscope
from pathscope.export import pprof
from pathscope.metrics import STORED

ROOT = Path(__file__).resolve().parents[2]
PATHSCOPE = ROOT / "bin" / "pathscope"
# function: (visits, bytes) over the 4 ranks (test_demo.py's per-communicator figures summed;
# a call-tree node's bytes are the ones its calls sent)
MPI_CALLS = {"MPI_Isend": (80, 10240), "MPI_Irecv": (80, 0), "MPI_Waitall": (40, 0),
             "MPI_Allreduce": (4, 32), "MPI_Reduce": (4, 512), "MPI_Bcast": (4, 256),
             "MPI_Gather": (4, 192)}


def cli(*args):
    p = subprocess.run([str(PATHSCOPE), *map(str, args)], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    return p.stdout


def go_pprof(*args):
    go = shutil.which("go")
    assert go, "go not found: scripts/setup.sh installs golang-go"
    p = subprocess.run([go, "tool", "pprof", *map(str, args)], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    return p.stdout


def flat(text):
    """-top's flat column by function (the number without its unit)."""
    rows, started = {}, False
    for line in text.splitlines():
        if line.split()[:2] == ["flat", "flat%"]:
            started = True
        elif started:
            value, _, _, _, _, name = line.split(None, 5)
            rows[name] = int(value.removesuffix("B"))
    return rows


def test_stencil_exports(mpi, tmp_path):
    out = tmp_path / "prof"
    mpi.run(4, [mpi.prog("stencil"), 32, 10], out)
    pb = tmp_path / "prof.pb.gz"
    cli("export", out, "--format", "pprof", "-o", pb)
    visits = flat(go_pprof("-top", "-nodefraction=0", "-sample_index=visits", pb))
    sent = flat(go_pprof("-top", "-nodefraction=0", "-unit=B", "-sample_index=bytes", pb))
    for name, (calls, nbytes) in MPI_CALLS.items():
        assert (visits[name], sent.get(name, 0)) == (calls, nbytes), name
    traces = go_pprof("-traces", "-sample_index=visits", pb).split("-----------+")
    isend = [t for t in traces if "MPI_Isend" in t]
    stacks = {tuple(line.split()[-1] for line in t.splitlines()[1:] if line.strip())
              for t in isend}
    assert stacks == {("MPI_Isend", "main", "__libc_start_call_main", "__libc_start_main",
                       "_start")}
    assert sum(int(t.splitlines()[1].split()[0]) for t in isend) == 80

    # the file's totals per sample type are the call tree's
    frames = pathscope.open(out)
    prof = pprof.load_bindings().Profile.FromString(gzip.decompress(pb.read_bytes()))
    nodes = frames.nodes
    want = [int(nodes["sample_ns"].sum() + nodes["mpi_ns"].sum())] + [
        int(nodes[m.name].sum()) for m in STORED]
    assert [sum(s.value[i] for s in prof.sample) for i in range(len(want))] == want

    parquet = tmp_path / "parquet"
    cli("export", out, "--format", "parquet", "-o", parquet)
    query = ("SELECT profile, op, sum(calls), sum(bytes) FROM comm_ops WHERE comm = 'W_a2' "
             "AND op IN ('MPI_Allreduce', 'MPI_Irecv', 'MPI_Isend', 'MPI_Waitall') "
             "GROUP BY profile, op ORDER BY op, profile")
    rows = cli("sql", out, parquet, query, "--csv").splitlines()
    assert rows[0] == "profile,op,sum(calls),sum(bytes)"
    expected = []
    for op, calls, nbytes in (("MPI_Allreduce", 4, 32), ("MPI_Irecv", 80, 10240),
                              ("MPI_Isend", 80, 10240), ("MPI_Waitall", 40, 0)):
        expected += sorted(f"{d},{op},{calls},{nbytes}" for d in (out, parquet))
    assert rows[1:] == expected
