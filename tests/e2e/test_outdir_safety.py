"""The profile directory among other users, full disks and reruns (issue 10): nothing pathscope
writes follows a link or lands in someone else's directory, a directory holding another run's
profile is refused (or cleared with --force), and a write that fails is reported per rank
without changing the program's exit status."""
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import MPI_ENV, ROOT
from profile_files import check_rank_layout, rank_text, rank_texts

PS = str(ROOT / "bin" / "pathscope")
SYMLINK = "is a symbolic link (pathscope does not follow links in the output directory)"
OTHER_RUN = ("holds another run's profile ({what}): choose another directory, or add --force "
             "(PATHSCOPE_FORCE=on) to delete those files first")


def rank_texts_layout(prof, nranks):
    """The files holding the rank texts of a run that reached MPI_Finalize: ranks.tsv (format
    2.10), or one rank file per rank where MPI-IO could not be used."""
    check_rank_layout(prof, nranks)
    if (prof / "ranks.tsv").exists():
        return ["ranks.tsv"]
    return [f"ranks/rank-{r:06d}.tsv" for r in range(nranks)]


def run_id(path):
    lines = Path(path).read_text().splitlines()
    assert lines[1].startswith("run\t"), lines[:2]
    rid = lines[1].split("\t")[1]
    assert len(rid) == 32 and int(rid, 16) >= 0
    return rid


def pathscope_lines(stderr):
    # (Open MPI's mpirun may glue its own "-----" banner to the last line a rank wrote just
    # before exiting: that banner is not ours; and it may forward two ranks' lines as one,
    # "pathscope: ...rootpathscope: ...": each is a line of ours)
    pieces = [piece for line in stderr.splitlines()
              for piece in re.split(r"(?<=.)(?=pathscope: )", line)]
    return sorted(re.sub(r"-{20,}$", "", l) for l in pieces if l.startswith("pathscope:"))


def refused_everywhere(mpi, outdir, message, tmp_path):
    """The CLI (pre-check) and the runtime (environment form, no CLI) refuse outdir with the
    same one line and status 2, before the program runs."""
    cli = subprocess.run([PS, "run", "-o", str(outdir), "--", "/bin/echo", "ran"],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path)
    env = subprocess.run(["/bin/echo", "ran"], capture_output=True, text=True, timeout=60,
                         cwd=tmp_path, env=dict(os.environ, LD_PRELOAD=str(mpi.lib),
                                                PATHSCOPE_OUTPUT=str(outdir)))
    for p in (cli, env):
        assert (p.returncode, p.stdout, p.stderr) == (2, "", f"pathscope: {message}\n")


class Secret:
    """A root-only file the attacker points links at: its bytes and mtime must not change."""

    def __init__(self, tmp_path):
        self.dir = tmp_path / "root-only"
        self.dir.mkdir(mode=0o700)
        self.file = self.dir / "secret"
        self.file.write_bytes(b"root's data\n")
        os.utime(self.file, ns=(1_000_000_000, 1_000_000_000))
        self.listing = sorted(os.listdir(self.dir))

    def untouched(self):
        st = os.lstat(self.file)
        return (self.file.read_bytes(), st.st_mtime_ns, sorted(os.listdir(self.dir))) == (
            b"root's data\n", 1_000_000_000, self.listing)


def as_attacker(attacker, code):
    p = attacker.run(["/usr/bin/python3", "-c", code])
    assert p.returncode == 0, p.stderr


def test_attackers_directory_is_refused(attacker, shared_scratch, openmpi, tmp_path):
    """The issue's attack: the attacker pre-creates prof/ranks/rank-000000.tsv.tmp (and the
    other guessable names) as links to a root-only file in a shared scratch area."""
    secret = Secret(tmp_path)
    prof = shared_scratch / "prof"
    as_attacker(attacker, f"""
import os
os.makedirs({str(prof / 'ranks')!r}, mode=0o755)
for name in ('profile.tsv', 'profile.tsv.tmp', 'ranks/rank-000000.tsv', 'ranks/rank-000000.tsv.tmp',
             'ranks/rank-000001.tsv.tmp', 'ranks/.rank-000000.tsv.tmp'):
    os.symlink({str(secret.file)!r}, os.path.join({str(prof)!r}, name))
""")
    before = sorted(str(p.relative_to(prof)) for p in prof.rglob("*"))
    message = (f"output directory '{prof}' belongs to another user (uid {attacker.uid}): "
               f"pathscope writes only into directories owned by you or root")
    refused_everywhere(openmpi, prof, message, tmp_path)
    p = openmpi.run(2, [openmpi.prog("outdir"), "exit", "0"], prof, check=False)
    assert p.returncode != 0 and "outdir: rank" not in p.stdout
    assert set(pathscope_lines(p.stderr)) == {f"pathscope: {message}"}
    assert sorted(str(p.relative_to(prof)) for p in prof.rglob("*")) == before
    assert secret.untouched()


def test_output_location_links_are_refused(attacker, shared_scratch, openmpi, tmp_path):
    secret = Secret(tmp_path)
    prof = shared_scratch / "prof"
    as_attacker(attacker, f"import os; os.symlink({str(secret.dir)!r}, {str(prof)!r})")
    refused_everywhere(openmpi, prof, f"output location '{prof}' {SYMLINK}", tmp_path)
    assert secret.untouched()
    # prof/ranks as a link to the root-only directory, in a sticky (shared) prof
    os.unlink(prof)
    prof.mkdir()
    os.chmod(prof, 0o1777)
    as_attacker(attacker, f"import os; os.symlink({str(secret.dir)!r}, {str(prof / 'ranks')!r})")
    refused_everywhere(openmpi, prof, f"output location '{prof}/ranks' {SYMLINK}", tmp_path)
    assert os.listdir(prof) == ["ranks"]
    assert secret.untouched()


def test_links_at_every_name_of_a_shared_directory(attacker, shared_scratch, openmpi, tmp_path):
    """A sticky, world-writable prof and prof/ranks (accepted, like /tmp): the attacker's links
    at every name pathscope writes are another run's files -- refused, or with --force
    removed (the links, never their target) before a correct profile is written."""
    secret = Secret(tmp_path)
    prof = shared_scratch / "prof"
    (prof / "ranks").mkdir(parents=True)
    os.chmod(prof, 0o1777)
    os.chmod(prof / "ranks", 0o1777)
    names = ["profile.tsv", "profile.tsv.tmp", ".profile.tsv.tmp", "symbols.tsv", "tree.tsv",
             ".tree.tsv.0123456789abcdef",
             "ranks/rank-000000.tsv", "ranks/rank-000001.tsv", "ranks/rank-000000.tsv.tmp",
             "ranks/rank-000001.tsv.tmp", "ranks/.rank-000000.tsv.0123456789abcdef"]
    as_attacker(attacker, f"""
import os
for name in {names!r}:
    os.symlink({str(secret.file)!r}, os.path.join({str(prof)!r}, name))
""")
    what = "profile.tsv, tree.tsv, symbols.tsv, 2 rank files"
    refused_everywhere(openmpi, prof, f"output directory '{prof}' " + OTHER_RUN.format(what=what),
                       tmp_path)
    assert secret.untouched()
    p = openmpi.run(2, [openmpi.prog("outdir"), "exit", "0"], prof, pathscope_args=["--force"])
    assert pathscope_lines(p.stderr) == [
        f"pathscope: profile written to {prof} (view: pathscope report {prof})"]
    assert secret.untouched()
    rid = run_id(prof / "profile.tsv")
    texts = rank_texts_layout(prof, 2)
    for name in ("profile.tsv", "tree.tsv", *texts):
        assert not (prof / name).is_symlink() and (prof / name).is_file()
        assert run_id(prof / name) == rid
    # every one of the attacker's links is gone (pathscope's temporaries are regular files)
    left = sorted(str(p.relative_to(prof)) for p in prof.rglob("*"))
    assert left == sorted(["profile.tsv", "ranks", "tree.tsv", *texts])


@pytest.fixture
def full_tmpfs(tmp_path):
    """A 64 KiB tmpfs filled to the last block."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "full"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], check=True)
    try:
        fd = os.open(mnt / "filler", os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            while True:
                os.write(fd, b"\0" * 4096)
        except OSError:
            pass
        finally:
            os.close(fd)
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_full_disk(mpi, full_tmpfs):
    prof = full_tmpfs / "prof"
    bare = mpi.run(2, [mpi.prog("outdir"), "exit", "3"], mode="none", check=False)
    p = mpi.run(2, [mpi.prog("outdir"), "exit", "3"], prof, check=False)
    assert p.returncode == bare.returncode != 0
    # (Open MPI stops the job once a rank exits non-zero: the other may not get to print)
    assert " done\n" in p.stdout and " done\n" in bare.stdout
    enospc = "No space left on device"
    # (format 2.10: ranks.tsv first, then each rank's own file in its place)
    assert pathscope_lines(p.stderr) == sorted([
        f"pathscope: rank 0: profile not written: ranks.tsv: {enospc}",
        f"pathscope: rank 0: profile not written: ranks/rank-000000.tsv: {enospc}",
        f"pathscope: rank 1: profile not written: ranks/rank-000001.tsv: {enospc}",
        f"pathscope: rank 0: profile not written: profile.tsv: {enospc}",
        f"pathscope: rank 0: profile not written: tree.tsv: {enospc}",
        f"pathscope: no profile written to {prof}: not written: profile.tsv, tree.tsv, the "
        f"rank files of all 2 ranks"])
    assert sorted(os.listdir(full_tmpfs)) == ["filler", "prof"]
    assert os.listdir(prof) == ["ranks"] and os.listdir(prof / "ranks") == []  # no temporaries
    if mpi.name == "openmpi":  # a program without MPI: the same line, its own exit status
        s = subprocess.run([PS, "run", "-o", str(prof), "--", "/bin/bash", "-c", "exit 5"],
                           capture_output=True, text=True, timeout=60)
        assert (s.returncode, s.stdout) == (5, "")
        assert pathscope_lines(s.stderr) == [
            f"pathscope: no profile written to {prof}: not written: the rank file of rank 0",
            f"pathscope: rank 0: profile not written: ranks/rank-000000.tsv: {enospc}"]


def test_directory_removed_during_the_run(mpi, tmp_path):
    prof = tmp_path / "prof"
    p = mpi.run(2, [mpi.prog("outdir"), "remove", prof], prof)
    assert sorted(p.stdout.split()) == sorted("outdir: rank 0 done outdir: rank 1 done".split())
    gone = "the output directory was removed during the run"
    assert pathscope_lines(p.stderr) == sorted([
        f"pathscope: rank 0: profile not written: ranks.tsv: {gone}",
        f"pathscope: rank 0: profile not written: ranks/rank-000000.tsv: {gone}",
        f"pathscope: rank 1: profile not written: ranks/rank-000001.tsv: {gone}",
        f"pathscope: rank 0: profile not written: profile.tsv: {gone}",
        f"pathscope: rank 0: profile not written: tree.tsv: {gone}",
        f"pathscope: no profile written to {prof}: not written: profile.tsv, tree.tsv, the "
        f"rank files of all 2 ranks"])
    assert not prof.exists()  # nothing was created again behind the user's back
    if mpi.name == "openmpi":  # only ranks/ removed: nothing is lost in a complete run, whose
        # rank texts go to ranks.tsv beside it (format 2.10)
        p = mpi.run(2, [mpi.prog("outdir"), "remove", prof / "ranks"], prof)
        assert pathscope_lines(p.stderr) == [
            f"pathscope: profile written to {prof} (view: pathscope report {prof})"]
        assert sorted(os.listdir(prof)) == ["profile.tsv", "ranks.tsv", "tree.tsv"]
        assert not [l for l in (prof / "profile.tsv").read_text().splitlines()
                    if l.startswith("write_failed\t")]
        assert sorted(rank_texts(prof)) == [0, 1]


def test_over_long_path_refused_before_start(openmpi, tmp_path):
    deep = tmp_path.joinpath(*(["d" * 250] * 16))
    length = len(str(deep))
    assert length > 4035
    message = (f"output directory path too long: {length} bytes as an absolute path, at most "
               f"4035 (every file pathscope writes under it must fit in PATH_MAX, 4096)")
    refused_everywhere(openmpi, deep, message, tmp_path)
    assert os.listdir(tmp_path) == []
    # the longest accepted path: every file of the profile (and of a spawned job) fits
    fits = Path(str(tmp_path / ("x" * 4035))[:4035])
    parts = str(fits)[len(str(tmp_path)) + 1:]
    fits = tmp_path.joinpath(*[parts[i:i + 200] for i in range(0, len(parts), 200)])
    fits = Path(str(fits)[:4035].rstrip("/"))
    p = subprocess.run([PS, "run", "-o", str(fits), "--", "/bin/true"], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert run_id(fits / "ranks" / "rank-000000.tsv")


def test_rerun_into_a_previous_run(mpi, tmp_path):
    """A crashing rerun into the directory of a complete run: refused without --force (the old
    profile untouched); with --force the old run's files are gone and the new run's are
    there, all with one new run id."""
    prof = tmp_path / "prof"
    mpi.run(3, [mpi.prog("lifecycle"), "normal"], prof)
    old_id = run_id(prof / "profile.tsv")
    old = {str(p.relative_to(prof)): p.read_bytes() for p in prof.rglob("*.tsv")}
    texts = rank_texts_layout(prof, 3)
    old_rank1 = rank_text(prof, 1)
    assert sorted(old) == sorted(["profile.tsv", "tree.tsv", *texts])
    assert {run_id(prof / name) for name in old} == {old_id}
    p = mpi.run(3, [mpi.prog("lifecycle"), "segv"], prof, check=False)
    assert p.returncode != 0
    refusal = f"pathscope: output directory '{prof}' " + OTHER_RUN.format(
        what="profile.tsv, tree.tsv, " + ("ranks.tsv" if texts == ["ranks.tsv"] else
                                           "3 rank files"))
    assert set(pathscope_lines(p.stderr)) == {refusal}
    assert {str(p.relative_to(prof)): p.read_bytes() for p in prof.rglob("*.tsv")} == old
    (prof / "notes.txt").write_text("mine")
    mpi.run(3, [mpi.prog("lifecycle"), "segv"], prof, check=False, pathscope_args=["--force"])
    assert sorted(str(p.relative_to(prof)) for p in prof.rglob("*")) == [
        "notes.txt", "ranks", "ranks/rank-000000.tsv", "ranks/rank-000001.tsv",
        "ranks/rank-000002.tsv"]
    new_ids = {run_id(prof / "ranks" / f"rank-{r:06d}.tsv") for r in range(3)}
    assert len(new_ids) == 1 and new_ids != {old_id}
    # a rank file of the old run put back by hand carries the old run's id
    (prof / "ranks" / "rank-000003.tsv").write_text(old_rank1)
    assert run_id(prof / "ranks" / "rank-000003.tsv") == old_id


def test_ranks_agree_on_the_run_id_without_mpi(mpi, tmp_path):
    """Processes of one launch that never call MPI_Init (no collective to agree on anything)
    derive the same run id from the launcher's job identity (hydra: the proxy), start
    concurrently without refusing each other's files, and a second launch is another run."""
    prof = tmp_path / "prof"
    mpi.run(3, ["/bin/bash", "-c", "exit 0"], prof)
    ids = {run_id(prof / "ranks" / f"rank-{r:06d}.tsv") for r in range(3)}
    assert len(ids) == 1
    p = mpi.run(3, ["/bin/bash", "-c", "exit 0"], prof, check=False)
    assert set(pathscope_lines(p.stderr)) == {
        f"pathscope: output directory '{prof}' " + OTHER_RUN.format(what="3 rank files")}


def test_application_closes_and_reuses_our_descriptors(openmpi, tmp_path):
    """A program that closes every descriptor from 3 up and puts its own log at the numbers
    pathscope's directory descriptors had: the log gets only the program's bytes, and the
    profile is written through the reopened (and identity-checked) directory."""
    prof, log = tmp_path / "prof", tmp_path / "app.log"
    code = f"""
import os
os.closerange(3, 65536)
fd = os.open({str(log)!r}, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
for n in range(768, 776):
    os.dup2(fd, n)
os.write(fd, b"app\\n")
"""
    p = subprocess.run([PS, "run", "-o", str(prof), "--", "/usr/bin/python3", "-c", code],
                       capture_output=True, text=True, timeout=60)
    assert (p.returncode, p.stdout) == (0, "")
    assert pathscope_lines(p.stderr) == [
        f"pathscope: profile written to {prof} (view: pathscope report {prof})"]
    assert log.read_bytes() == b"app\n"
    text = (prof / "ranks" / "rank-000000.tsv").read_text()
    assert text.endswith("\nend\n") and "\nstatus\tcomplete\n" in text
