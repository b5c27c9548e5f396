"""--per-rank all writes the rank files of a job that reached MPI_Finalize into one file,
ranks.tsv, with MPI-IO (issue 14; docs/format.md "ranks.tsv"): the layout, the values each
section carries, and every way it can fail -- then every rank writes its own
ranks/rank-NNNNNN.tsv, and nothing is lost.

The layout is checked by a parser of its own here, not by the analysis package's reader.
"""
import os
import re
import subprocess

import pytest

from conftest import ROOT

RUN = re.compile(rb"run\t([0-9a-f]{32})\n")


def sections(prof):
    """{rank: section bytes} of prof/ranks.tsv, every rule of the layout asserted."""
    data = (prof / "ranks.tsv").read_bytes()
    head, sep, body = data.partition(b"\ndata\n")
    assert sep, "no data line"
    lines = head.split(b"\n")
    assert lines[0] == b"pathscope-ranks\t2.14"
    assert RUN.fullmatch(lines[1] + b"\n")
    assert lines[2].startswith(b"ranks\t")
    nranks = int(lines[2].split(b"\t")[1])
    out, at = {}, 0
    for line in lines[3:]:
        kind, rank, offset, length = line.split(b"\t")
        assert kind == b"index"
        rank, offset, length = int(rank), int(offset), int(length)
        assert offset == at and length >= 1 and rank < nranks and rank not in out
        out[rank] = body[offset:offset + length]
        at += length
    assert at == len(body)           # the file ends where the last section ends
    assert sorted(out) == list(range(nranks))
    return out, lines[1].split(b"\t")[1].decode()


def fields(section, kind):
    return [line.split("\t")[1:] for line in section.decode().splitlines()
            if line.startswith(kind + "\t")]


@pytest.mark.parametrize("np", [16, 64])
def test_one_file_for_all_ranks(mpi, np, tmp_path):
    prof = tmp_path / "prof"
    mpi.run(np, [mpi.prog("reduce_known")], prof, timeout=300,
            pathscope_args=["--per-rank", "all"])
    assert sorted(os.listdir(prof)) == ["profile.tsv", "ranks", "ranks.tsv", "tree.tsv"]
    assert os.listdir(prof / "ranks") == []        # no rank file, no temporary left behind
    secs, run = sections(prof)
    assert (prof / "profile.tsv").read_text().splitlines()[1] == f"run\t{run}"
    for rank, text in secs.items():
        assert text.startswith(b"pathscope-rank\t2.14\n") and text.endswith(b"\nend\n")
        assert fields(text, "run") == [[run]] and fields(text, "rank") == [[str(rank)]]
        assert fields(text, "size") == [[str(np)]] and fields(text, "status") == [["complete"]]
        # tests/programs/reduce_known.c: r % 2 + 1 allreduces, 2 broadcasts, 8 (r + 1) bytes
        # sent by the sendrecv on world
        calls = {}
        for comm, op, n, nbytes, *_ in fields(text, "op"):
            calls[op] = calls.get(op, 0) + int(n)
            if op == "MPI_Sendrecv":
                assert comm == "W" and int(nbytes) == 8 * (rank + 1) + 8 * ((rank - 1) % np + 1)
        assert calls["MPI_Allreduce"] == rank % 2 + 1 and calls["MPI_Bcast"] == 2, rank
        assert calls["MPI_Sendrecv"] == 1 and calls["MPI_Barrier"] == 2


def run_and_wait(cmd, prof, env=None, during=None):
    """cmd (reduce_known with a pause before MPI_Finalize); during() once every rank is
    past MPI_Init.  Returns (returncode, the pathscope lines of stderr)."""
    job = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env={**os.environ, **(env or {})})
    try:
        if during:
            assert job.stdout.readline() == "ready\n"
            during()
        out, err = job.communicate(timeout=180)
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
    return job.returncode, sorted(l for l in err.splitlines() if l.startswith("pathscope:"))


def openmpi_cmd(openmpi, prof, np, *args):
    return ["mpirun.openmpi", "--allow-run-as-root", "--oversubscribe", "-np", str(np),
            str(ROOT / "bin" / "pathscope"), "run", "-o", str(prof), "--per-rank", "all",
            "--", str(openmpi.prog("reduce_known")), *args]


def assert_every_rank_kept_its_file(prof, np):
    assert sorted(os.listdir(prof / "ranks")) == [f"rank-{r:06d}.tsv" for r in range(np)]
    for r in range(np):
        text = (prof / "ranks" / f"rank-{r:06d}.tsv").read_text()
        assert f"\nrank\t{r}\n" in text and "\nstatus\tcomplete\n" in text
        assert text.endswith("\nend\n")
    assert not [n for n in os.listdir(prof) if n.startswith(".ranks.tsv.")]


def test_without_mpi_io_every_rank_writes_its_own_file(openmpi, tmp_path):
    """An MPI library without MPI-IO (Open MPI with its io components excluded): the open
    fails, the temporary is removed, every rank writes its own file, and the end of the run
    says why ranks.tsv is missing."""
    prof = tmp_path / "prof"
    code, lines = run_and_wait(openmpi_cmd(openmpi, prof, 4), prof,
                               env={"OMPI_MCA_io": "^ompio,romio321"})
    assert code == 0
    assert lines == [
        f"pathscope: profile written to {prof} (view: pathscope report {prof})",
        "pathscope: rank 0: profile not written: ranks.tsv: not every rank could write it "
        "with MPI-IO (each rank wrote its own file in ranks/)"]
    assert sorted(os.listdir(prof)) == ["profile.tsv", "ranks", "tree.tsv"]
    assert_every_rank_kept_its_file(prof, 4)


def test_name_taken_every_rank_writes_its_own_file(openmpi, tmp_path):
    """A directory took the name ranks.tsv while the program ran: the rename fails after
    every rank wrote its section, and every rank writes its own file instead."""
    prof = tmp_path / "prof"
    code, lines = run_and_wait(openmpi_cmd(openmpi, prof, 4, "3"), prof,
                               during=lambda: (prof / "ranks.tsv").mkdir())
    assert code == 0
    assert lines == [
        f"pathscope: profile written to {prof} (view: pathscope report {prof})",
        "pathscope: rank 0: profile not written: ranks.tsv: Is a directory"]
    assert (prof / "ranks.tsv").is_dir() and os.listdir(prof / "ranks.tsv") == []
    assert_every_rank_kept_its_file(prof, 4)


def test_another_runs_ranks_tsv_is_refused_or_removed(openmpi, tmp_path):
    """ranks.tsv of another run: the run refuses the directory, or with --force deletes it."""
    prof = tmp_path / "prof"
    openmpi.run(2, [openmpi.prog("reduce_known")], prof, pathscope_args=["--per-rank", "all"])
    os.unlink(prof / "profile.tsv")
    os.unlink(prof / "tree.tsv")
    p = openmpi.run(2, [openmpi.prog("reduce_known")], prof, check=False,
                    pathscope_args=["--per-rank", "all"])
    assert p.returncode != 0
    assert (f"pathscope: output directory '{prof}' holds another run's profile (ranks.tsv): "
            f"choose another directory, or add --force (PATHSCOPE_FORCE=on) to delete those "
            f"files first") in p.stderr
    old = (prof / "ranks.tsv").read_bytes()
    openmpi.run(2, [openmpi.prog("reduce_known")], prof,
                pathscope_args=["--per-rank", "all", "--force"])
    assert (prof / "ranks.tsv").read_bytes() != old
    sections(prof)


def test_heap_rank_files_are_rewritten_at_exit(openmpi, tmp_path):
    """--heap records until exit: ranks.tsv holds MPI_Finalize's texts, and each rank's file
    in ranks/ the allocations made after it (docs/format.md)."""
    prof = tmp_path / "prof"
    openmpi.run(2, [openmpi.prog("heap_mpi")], prof, pathscope_args=["--per-rank", "all",
                                                                      "--heap"])
    secs, run = sections(prof)
    assert sorted(os.listdir(prof / "ranks")) == ["rank-000000.tsv", "rank-000001.tsv"]
    for r in (0, 1):
        late = (prof / "ranks" / f"rank-{r:06d}.tsv").read_text()
        assert late.splitlines()[1] == f"run\t{run}"
        # the `heap` line's allocations: more by exit than at MPI_Finalize
        (at_finalize,), (at_exit,) = fields(secs[r], "heap"), fields(late.encode(), "heap")
        assert int(at_exit[1]) > int(at_finalize[1])


def test_the_default_is_summary(mpi, tmp_path):
    """Without --per-rank (and without PATHSCOPE_PER_RANK, which the test suite sets): no
    rank file and no ranks.tsv, and tree.tsv carries each rank's values of the heaviest
    paths."""
    prof = tmp_path / "prof"
    cmd, e = mpi.command(4, [mpi.prog("reduce_known")], prof)
    e.pop("PATHSCOPE_PER_RANK", None)
    p = subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert sorted(os.listdir(prof)) == ["profile.tsv", "ranks", "tree.tsv"]
    assert os.listdir(prof / "ranks") == []
    rankvec = [line.split("\t") for line in (prof / "tree.tsv").read_text().splitlines()
               if line.startswith("rankvec\t")]
    assert rankvec and all(len(f[3].split(",")) == 4 for f in rankvec)
