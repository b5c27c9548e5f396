"""The reader on rank files written by real runs, where the runtime matters: a program that
exits before MPI_Init (the report said both "the run did not reach MPI_Finalize" and "all 2
ranks complete"), rank files of two runs in one directory, rank files cut short, and the
ranks.tsv of a complete run (format 2.10)."""
import shutil
import subprocess
from pathlib import Path

from pathscope.reader import load_profile
from pathscope.report import render
from profile_files import check_rank_layout, rank_texts

ROOT = Path(__file__).resolve().parents[2]
PATHSCOPE = ROOT / "bin" / "pathscope"


def cli(*args):
    return subprocess.run([str(PATHSCOPE), *map(str, args)], capture_output=True, text=True,
                          timeout=120)


def section(text: str, name: str) -> list[str]:
    return text.split(f"\n\n{name}\n")[1].split("\n\n")[0].splitlines()


def source_line(text: str) -> str:
    return next(line for line in text.splitlines() if line.startswith("  source "))


def run_line(path: Path) -> str:
    """The run id of a rank file (format 2.3), or "" for older files."""
    lines = path.read_text().splitlines()
    return lines[1].split("\t")[1] if len(lines) > 1 and lines[1].startswith("run\t") else ""


def test_program_that_exits_before_mpi_init(mpi, tmp_path):
    out = tmp_path / "prof"
    mpi.run(2, [mpi.prog("lifecycle"), "preinit"], out)
    text = render(load_profile(out))
    assert source_line(text) == ("  source       rank files (the program never called MPI_Init: "
                                 "no profile.tsv)")
    assert section(text, "Ranks") == [
        "  all 2 processes ended normally without calling MPI_Init: no MPI data"]
    assert "did not reach MPI_Finalize" not in text and "ranks complete" not in text
    done = cli("export", out, "--table", "ranks")
    assert (done.returncode, done.stderr) == (0, "")
    assert [line.split(",")[0:3:2] for line in done.stdout.splitlines()[1:]] == [
        ["0", "complete"], ["1", "complete"]]


def test_rank_files_of_two_runs_and_cut_files(mpi, tmp_path):
    """A 3-rank run and a 2-rank run that both stopped without MPI_Finalize, their rank files
    in one directory (a rerun over an older run): the 2-rank run is read, rank 2's file named
    as another run's; then the rank files of that run cut short (a full disk)."""
    old, new = tmp_path / "old", tmp_path / "new"
    mpi.run(3, [mpi.prog("lifecycle"), "nofinalize"], old, check=False)
    mpi.run(2, [mpi.prog("lifecycle"), "nofinalize"], new, check=False)
    mixed = tmp_path / "mixed"
    shutil.copytree(old, mixed)
    for path in (new / "ranks").iterdir():
        shutil.copy(path, mixed / "ranks" / path.name)
    stray = mixed / "ranks" / "rank-000002.tsv"
    run = run_line(stray)
    reason = f"belongs to another run ({run})" if run else "is of a run of 3 ranks, not of " \
                                                             "this run's 2"
    p = load_profile(mixed)
    assert (p.nranks, p.missing_ranks, [str(s) for s in p.stray_files]) == (
        2, [], [f"{stray} {reason}"])
    assert p.incomplete_ranks == [(0, "exit-without-finalize"), (1, "exit-without-finalize")]
    assert section(render(p), "Ranks") == [
        "  WARNING: 2 of 2 ranks did not complete; their data is partial or absent:",
        "    ranks 0-1: exited without calling MPI_Finalize",
        "  WARNING: 1 file not merged (of another run, or not read):",
        f"    {stray} {reason}"]
    bcast = p.ops[("W", "MPI_Bcast")]
    assert (bcast.calls, bcast.nranks) == (2, 2)

    stray.unlink()
    rank0, rank1 = mixed / "ranks" / "rank-000000.tsv", mixed / "ranks" / "rank-000001.tsv"
    rank0.write_text("")
    text = rank1.read_text()
    rank1.write_text(text[:text.index("\nop\t") + 6])            # cut inside its first op line
    p = load_profile(mixed)
    assert p.incomplete_ranks == [(0, "empty"), (1, "no end line")]
    assert section(render(p), "Ranks")[:3] == [
        "  WARNING: 2 of 2 ranks did not complete; their data is partial or absent:",
        "    rank 0: incomplete: rank file empty or cut short before its first lines",
        "    rank 1: incomplete: rank file cut short (no end line)"]
    done = cli("export", mixed)
    assert (done.returncode, done.stdout, done.stderr) == (3, "", (
        f"pathscope: incomplete profile {mixed}: ranks 0-1 incomplete; nothing exported "
        f"(pathscope report shows the details; --allow-partial exports what there is)\n"))


def test_ranks_tsv_of_a_complete_run(mpi, tmp_path):
    """A complete run of 3 ranks with --per-rank all leaves ranks.tsv (format 2.10): read as the
    same texts in ranks/ files would be; cut in the middle of a section, it is not used (a
    note says why) and profile.tsv still is; another run's ranks.tsv is stray."""
    out = tmp_path / "prof"
    mpi.run(3, [mpi.prog("lifecycle"), "normal"], out)
    check_rank_layout(out, 3)
    assert (out / "ranks.tsv").exists(), "ranks.tsv not written (MPI-IO not usable here?)"
    files = tmp_path / "files"
    shutil.copytree(out, files)
    (files / "ranks.tsv").unlink()
    for rank, text in rank_texts(out).items():
        (files / "ranks" / f"rank-{rank:06d}.tsv").write_text(text)
    for a, b in ((out, files), (copy_without_profile(out, tmp_path / "a"),
                                copy_without_profile(files, tmp_path / "b"))):
        one, many = load_profile(a), load_profile(b)
        assert (one.source, one.comms, one.ops, one.ranks, one.callpaths, one.problems()) == \
            (many.source, many.comms, many.ops, many.ranks, many.callpaths, [])
    assert load_profile(tmp_path / "a").source == "ranks"

    cut = tmp_path / "cut"
    shutil.copytree(out, cut)
    data = (cut / "ranks.tsv").read_bytes()
    (cut / "ranks.tsv").write_bytes(data[:len(data) - 1000])
    p = load_profile(cut)
    assert p.notes == [f"ranks.tsv not used: {cut}/ranks.tsv is cut short: {len(data) - 1000} "
                       f"bytes, its index ends at byte {len(data)}"]
    assert (p.source, p.missing_ranks) == ("profile", [0, 1, 2])

    other = tmp_path / "other"
    mpi.run(3, [mpi.prog("lifecycle"), "normal"], other)
    shutil.copy(other / "ranks.tsv", cut / "ranks.tsv")
    p = load_profile(cut)
    assert [str(s) for s in p.stray_files] == [
        f"{cut}/ranks.tsv belongs to another run ({run_line(other / 'ranks.tsv')})"]
    assert p.missing_ranks == [0, 1, 2]


def copy_without_profile(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    for name in ("profile.tsv", "tree.tsv"):
        (dst / name).unlink()
    return dst
