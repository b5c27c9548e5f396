"""Transparency: mpi4py's own test suite gives the same results with and without pathscope.

For each MPI library and 1 and 2 ranks, the suite runs once without pathscope and once under
it; every rank must report the same numbers of tests run, failures, errors and skips (and the
launcher the same exit code).  The profiled run must also leave a complete profile that
recorded a plausible amount of MPI traffic.

The suites come from scripts/setup-mpi4py.sh (run by `make mpi4py-deps`, part of `make test`):
  Open MPI: Debian's python3-mpi4py 3.1.4 with the 3.1.4 sdist's test/runtests.py
  MPICH:    mpi4py 4.1.2 built against MPICH in .deps/venv-mpich, test/main.py; on MPICH 4 it
            calls the MPI-4 large-count "_c" functions, which the profile must show.

How pathscope is attached: `bin/pathscope run` per rank ("cli") for Open MPI and LD_PRELOAD plus
PATHSCOPE_OUTPUT ("env") for MPICH, so both forms are covered.  PSTEST_MPI4PY_MODE=cli or
=env forces one form for both libraries.
"""
import os
import re
import time
from pathlib import Path

import pytest

from profile_files import rank_text

ROOT = Path(__file__).resolve().parents[2]

DEPS = ROOT / ".deps"

# MPICH 4.0.2 with 2 ranks: the util.sync RMA tests hang even without any tool.
MPICH_HANGS_NP2 = ["MutexBasicWorld", "MutexRecursiveWorld", "ConditionWorld",
                   "ConditionMutexWorld", "SemaphoreWorld"]

SUITES = {
    "openmpi": {
        "python": Path("/usr/bin/python3"),
        "script": DEPS / "mpi4py-3.1.4" / "test" / "runtests.py",
        "args": ["--no-builddir", "-q", "-e", "spawn"],
        "mode": "cli",
        "large_count": False,  # Open MPI 4.1 is MPI-3.1: no _c functions
    },
    "mpich": {
        "python": DEPS / "venv-mpich" / "bin" / "python",
        "script": DEPS / "mpi4py-4.1.2" / "test" / "main.py",
        "args": ["--no-builddir", "-q", "-e", "spawn"],
        "mode": "env",
        "large_count": True,
    },
}
TIMEOUT = 900  # one suite run takes 5-60 s; a hang must not stall `make test` forever

RAN_RE = re.compile(r"^Ran (\d+) tests? in ")
END_RE = re.compile(r"^(OK|FAILED)(?: \((.*)\))?\s*$")


def per_rank_output_args(mpi_name, logdir):
    """Launcher options writing each rank's stdout and stderr to files of their own (tagging
    the merged output is unreliable: both launchers tag chunks, not lines)."""
    if mpi_name == "openmpi":
        return ["--output-filename", str(logdir)]
    return ["-outfile-pattern", f"{logdir}/out.%r", "-errfile-pattern", f"{logdir}/err.%r"]


def rank_output(mpi_name, logdir, rank):
    if mpi_name == "openmpi":
        files = [logdir / "1" / f"rank.{rank}" / "stderr", logdir / "1" / f"rank.{rank}" / "stdout"]
    else:
        files = [logdir / f"err.{rank}", logdir / f"out.{rank}"]
    return "\n".join(f.read_text(errors="replace") for f in files if f.exists())


def summary(text):
    """{'ran': N, 'status': 'OK'|'FAILED', 'failures': F, 'errors': E, 'skipped': K, ...} from
    one rank's unittest output; {} if it has no summary."""
    r = {}
    for line in text.splitlines():
        line = line.strip()
        m = RAN_RE.match(line)
        if m:
            r = {"ran": int(m.group(1))}
            continue
        m = END_RE.match(line)
        if m and "ran" in r:
            r["status"] = m.group(1)
            for part in (m.group(2) or "").split(","):
                if "=" in part:
                    key, value = part.split("=")
                    r[key.strip()] = int(value)
    return r if "status" in r else {}


def suite_argv(mpi_name, np):
    s = SUITES[mpi_name]
    for path in (s["python"], s["script"]):
        if not path.exists():
            pytest.fail(f"{path} missing: run `make mpi4py-deps` (scripts/setup-mpi4py.sh)")
    argv = [s["python"], s["script"]] + s["args"]
    if mpi_name == "mpich" and np > 1:
        for name in MPICH_HANGS_NP2:
            argv += ["-x", name]
    return argv


def read_tsv(path):
    return [line.split("\t") for line in path.read_text().splitlines()]


def check_profile(outdir, np, mpi_name):
    """A complete profile: profile.tsv ending in `end`, one complete rank file per rank, and
    plausible numbers of MPI calls."""
    prof = outdir / "profile.tsv"
    assert prof.exists(), f"no profile.tsv in {outdir}: {sorted(os.listdir(outdir))}"
    lines = read_tsv(prof)
    assert lines[0][0] == "pathscope-profile" and lines[-1] == ["end"], f"{prof} incomplete"
    assert ["nranks", str(np)] in lines
    calls = {}
    for rank in range(np):
        rf = f"{outdir}: rank {rank}"    # (its ranks/ file or ranks.tsv section)
        rl = [line.split("\t") for line in rank_text(outdir, rank).splitlines()]
        assert rl[-1] == ["end"], f"{rf} has no end line"
        assert ["status", "complete"] in rl, f"{rf}: {[l for l in rl if l[0] == 'status']}"
        # every request completed was one pathscope saw created, every communicator used was
        # one it saw created: nothing fell through the wrappers
        problems = [f for f in rl if f[0].startswith("counter_") and f[1] != "0"]
        assert not problems, f"{rf}: {problems}"
        for f in rl:  # op <comm> <operation> <calls> <bytes> <time_ns> <histogram>
            if f[0] == "op":
                calls[f[2]] = calls.get(f[2], 0) + int(f[3])
    total = sum(calls.values())
    reduced = sum(int(f[3]) for f in lines if f[0] == "op" and f[1] == "*")
    assert reduced == total, f"profile.tsv has {reduced} calls, the rank files {total}"
    # The suite makes hundreds of thousands of MPI calls per rank (measured: > 1.5 million).
    assert total > 100_000 * np, f"only {total} MPI calls recorded"
    expected = ["MPI_Comm_dup", "MPI_Barrier", "MPI_Type_commit"]
    if SUITES[mpi_name]["large_count"]:
        # mpi4py 4 on an MPI-4 library moves every buffer with the large-count functions
        expected += ["MPI_Bcast_c", "MPI_Allreduce_c", "MPI_Type_contiguous_c"]
        if np > 1:
            expected += ["MPI_Send_c", "MPI_Recv_c", "MPI_Isend_c", "MPI_Irecv_c",
                         "MPI_Sendrecv_c"]
    else:
        expected += ["MPI_Bcast", "MPI_Allreduce", "MPI_Type_contiguous"]
        if np > 1:
            expected += ["MPI_Send", "MPI_Recv", "MPI_Isend", "MPI_Irecv", "MPI_Sendrecv"]
    missing = [op for op in expected if calls.get(op, 0) == 0]
    assert not missing, f"operations not recorded: {missing}"
    return total


# heap-thunk: heap profiling (every allocation of the interpreter walked) with thunk stacks
# on every walk -- the most intrusive configuration -- through the CLI, 2 ranks
# kernel-ebpf / kernel-libc: kernel time from the eBPF collector (its signals interrupt the
# interpreter after system calls: every call attributed) or from the libc wrappers
@pytest.mark.parametrize("np, variant", [(1, "default"), (2, "default"), (2, "heap-thunk"),
                                         (2, "kernel-ebpf"), (2, "kernel-libc")])
@pytest.mark.parametrize("mpi_name", ["openmpi", "mpich"])
def test_mpi4py_suite_unchanged_by_pathscope(request, mpi_name, np, variant, tmp_path,
                                             monkeypatch):
    mpi = request.getfixturevalue(mpi_name)
    mode = os.environ.get("PSTEST_MPI4PY_MODE") or SUITES[mpi_name]["mode"]
    assert mode in ("cli", "env"), f"PSTEST_MPI4PY_MODE={mode}: use cli or env"
    options = {}
    if variant == "heap-thunk":
        mode = "cli"  # (the CLI preloads the heap shim)
        options = {"PATHSCOPE_HEAP": "on", "PATHSCOPE_TRAVERSAL": "thunk"}
    elif variant.startswith("kernel-"):
        mode = "cli"  # (the CLI preloads the libc wrappers)
        options = {"PATHSCOPE_KERNEL": variant[len("kernel-"):], "PATHSCOPE_KERNEL_PERIOD": "100"}
    argv = suite_argv(mpi_name, np)
    monkeypatch.chdir(tmp_path)  # whatever the suite writes into the working directory

    def suite(outdir, how):
        logdir = tmp_path / f"output-{how}"
        logdir.mkdir()  # hydra does not create it
        t0 = time.monotonic()
        p = mpi.run(np, argv, outdir, mode=how, timeout=TIMEOUT, check=False,
                    launcher_args=per_rank_output_args(mpi_name, logdir),
                    env=options if how != "none" else None)
        took = time.monotonic() - t0
        outs = [rank_output(mpi_name, logdir, r) for r in range(np)]
        counts = {r: summary(out) for r, out in enumerate(outs)}
        assert all(counts.values()), (
            f"{how}: no unittest summary from every rank (exit {p.returncode}):\n"
            f"{p.stdout[-3000:]}\n{p.stderr[-3000:]}\n"
            + "\n".join(f"--- rank {r} ---\n{out[-3000:]}" for r, out in enumerate(outs)))
        print(f"{mpi_name} np={np} {how}: {took:.1f} s, exit {p.returncode}, {counts}")
        return p.returncode, counts, "\n".join(outs)

    rc0, plain, out0 = suite(None, "none")
    assert all(c["ran"] > 1000 for c in plain.values()), f"suite too small: {plain}"
    outdir = tmp_path / "profile"
    rc1, profiled, out1 = suite(outdir, mode)
    assert profiled == plain, (
        f"mpi4py results differ under pathscope ({mode}):\nwithout: {plain}\nwith:    {profiled}\n"
        f"--- output with pathscope (tail) ---\n{out1[-8000:]}")
    assert rc1 == rc0
    calls = check_profile(outdir, np, mpi_name)
    if variant == "heap-thunk":
        for rank in range(np):
            rl = [line.split("\t") for line in rank_text(outdir, rank).splitlines()]
            (heap,) = [f for f in rl if f[0] == "heap"]
            assert heap[1] == "thunk" and int(heap[2]) > 100_000, heap  # allocations on paths
            for f in rl:  # walks <thread> <walks> <reused> <checks> <agree> <errors> <restores>
                if f[0] == "walks":
                    assert f[4] == f[5] and f[6] == "0", f
    if variant.startswith("kernel-"):
        for rank in range(np):
            rl = [line.split("\t") for line in rank_text(outdir, rank).splitlines()]
            (kernel,) = [f for f in rl if f[0] == "kernel"]
            (kend,) = [f for f in rl if f[0] == "kend"]
            calls_in_tables = sum(int(f[3]) for f in rl if f[0] == "ksys")
            # source, attributions made (> 0), none lost; the tables arrived and are large
            assert kernel[1] == variant[len("kernel-"):] and int(kernel[4]) > 0, kernel
            assert kend[1] != "-" and calls_in_tables > 10_000, (kend, calls_in_tables)
    print(f"{mpi_name} np={np}: {calls} MPI calls recorded")
