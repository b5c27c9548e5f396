"""The reader's checks (docs/format.md, "How readers check a profile"), each with its exact
message: fields validated against what they can be, bounded sizes, files that are not read
(links, FIFOs), empty and cut files, run ids and stray files (format 2.3), warnings, the
report's Ranks section for each case, and export of a partial profile (exit status 3)."""
import io
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from pathscope import tsv
from pathscope.cli import main
from pathscope.errors import ProfileError
from pathscope.export import export
from pathscope.reader import MAX_WORLD_SIZE, load_profile
from pathscope.report import render
from pathscope_samples import (with_run, HYBRID, RANK0, RANK1, RANK2, copy_hybrid, profile_rows,
                               rank_rows, read_rows, write_profile, write_rows, write_sample)

RUN_A = "0123456789abcdef0123456789abcdef"
RUN_B = "fedcba9876543210fedcba9876543210"
STOPPED = "samples stopped at 1.2 s: the application closed pathscope's descriptor"


def ranks_section(profile) -> list[str]:
    return render(profile).split("\n\nRanks\n")[1].split("\n\n")[0].splitlines()


def header_line(profile, key: str) -> str:
    head = render(profile).split("\n\n")[0].splitlines()
    return next(line for line in head if line.startswith(f"  {key} "))[len(f"  {key} "):].strip()


def rank23(rank, size=3, run=RUN_A, status="complete", start=None, warnings=(), **kw):
    base = {0: RANK0, 1: RANK1, 2: RANK2}.get(rank) if size == 3 and not kw else None
    rows = base if base is not None else rank_rows(rank, size, status, f"node{rank:02d}", 10, 5,
                                                   **kw)
    rows = [("size", size) if r[0] == "size" else ("status", status) if r[0] == "status"
            else ("start_unix_ns", start) if r[0] == "start_unix_ns" and start else r
            for r in rows]
    rows = with_run(rows, run)
    at = next(i for i, r in enumerate(rows) if r[0] in ("comm", "op", "end"))
    rows[at:at] = [("warning",) + tuple(w) for w in warnings]
    return rows


def rank_path(d: Path, rank: int) -> Path:
    return d / "ranks" / f"rank-{rank:06d}.tsv"


def set_line(path: Path, kind: str, *fields) -> int:
    """Replaces the first line of kind in path; returns its line number."""
    rows = read_rows(path)
    i = next(i for i, r in enumerate(rows) if r[0] == kind)
    rows[i] = [kind] + [str(f) for f in fields]
    write_rows(path, rows)
    return i + 1


# ---- fields ---------------------------------------------------------------------------------

@pytest.mark.parametrize("kind, fields, message", [
    ("op", ("W", "MPI_Send", -5, 2048, 300, "11:2"),
     "'op' line: field 4 '-5' is negative"),
    ("op", ("W", "MPI_Send", 2, 2048, "nan", "11:2"),
     "'op' line: field 6 'nan' is not an integer"),
    ("op", ("W", "MPI_Send", 2, 2048, "inf", "11:2"),
     "'op' line: field 6 'inf' is not an integer"),
    ("op", ("W", "MPI_Send", 2, 18446744073709551616, 300, "11:2"),
     "'op' line: field 5 '18446744073709551616' is larger than 18446744073709551615"),
    ("op", ("W", "MPI_Send", 2, 2048, "1.5", "11:2"),
     "'op' line: field 6 '1.5' is not an integer"),
    ("op", ("W", "MPI_Send", "", 2048, 300, "11:2"),
     "'op' line: field 4 '' is not an integer"),
    ("op", ("W", "MPI_Send", "\u0663", 2048, 300, "11:2"),
     "'op' line: field 4 '\u0663' is not an integer"),
    ("op", ("W", "MPI_Send", 2, 2048, 300, "48:2"),
     "'op' line: field 7 is a malformed histogram: bin 48 is not 0 to 47"),
    ("op", ("W", "MPI_Send", 2, 2048, 300, "11:2,11:1"),
     "'op' line: field 7 is a malformed histogram: bin 11 given twice"),
    ("op", ("W", "MPI_Send", 2),
     "'op' line has 3 fields after the type, expected 6"),
    ("host", ("node\\q1",), "'host' line: field 2 has an invalid escape '\\q'"),
    ("host", ("node1\\",), "'host' line: field 2 has an invalid escape (\\ at the end)"),
    ("wall_ns", ("-2",), "'wall_ns' line: field 2 '-2' is negative"),
    ("thread_multiple", ("2",), "'thread_multiple' line: field 2 '2' is larger than 1"),
    ("rank", ("2",), "'rank' line says rank 2, but the file is named for rank 1"),
    ("comm", ("W", 3, 0, 1, "-", "-", 0, "0-5", "-", 1, 1024, 1, 1024),
     "'comm' line: member list '0-5' does not hold size 3 ranks"),
    ("comm", ("W", 3, 0, 1, "-", "-", 0, "0,1,7", "-", 1, 1024, 1, 1024),
     "'comm' line: member 7 is not a world rank of 3"),
    ("comm", ("W", 3, 0, 1, "-", "-", 0, "0-x", "-", 1, 1024, 1, 1024),
     "'comm' line: field 9: malformed rank list '0-x' at '0-x'"),
    ("comm", ("W", 3, 0, 1, "-", "-", 0, "0-2", "-", 1, 1024, 1, 1024, 0, 0, 0, 0, 3, 2),
     "'comm' line: 3 folded communicators in 2 memberships cannot be"),
    ("comm", ("W", 3, 0, 1, "-", "-", 0, "0-2", "-", 1, 1024, 1, 1024, 0, 0, 0, 0, 1, "x"),
     "'comm' line: field 20 'x' is not an integer"),
])
def test_malformed_field_makes_the_rank_unreadable(tmp_path, kind, fields, message):
    d = write_sample(tmp_path / "prof", with_profile=False)
    path = rank_path(d, 1)
    number = set_line(path, kind, *fields)
    p = load_profile(d)
    problem = f"{path}:{number}: {message}"
    assert p.incomplete_ranks == [(1, "unreadable: " + problem)]
    assert p.ranks[1].status == "unreadable"
    # the other ranks are still read: rank 1's sends are not in the merged profile
    assert p.ops[("W", "MPI_Send")].calls == 2 and p.ops[("W", "MPI_Send")].nranks == 1
    assert ranks_section(p) == [
        "  WARNING: 1 of 3 ranks did not complete; their data is partial or absent:",
        f"    rank 1: unreadable, left out: {problem}"]


def test_duplicated_lines(tmp_path):
    d = write_sample(tmp_path / "prof", with_profile=False)
    rows = read_rows(rank_path(d, 2))
    write_rows(rank_path(d, 2), rows[:4] + [rows[3]] + rows[4:])      # status twice
    rows = read_rows(rank_path(d, 1))
    comm = next(i for i, r in enumerate(rows) if r[0] == "comm")
    write_rows(rank_path(d, 1), rows[:comm + 1] + [rows[comm]] + rows[comm + 1:])
    p = load_profile(d)
    assert p.incomplete_ranks == [
        (1, f"unreadable: {rank_path(d, 1)}:{comm + 2}: communicator - described twice"),
        (2, f"unreadable: {rank_path(d, 2)}:5: 'status' line given twice")]


def test_world_size_beyond_the_limit_is_refused(tmp_path):
    """The 7.4 GB report: a rank file claiming 100,000,000 ranks.  That file is unreadable;
    the world is what the others say, and nothing is allocated for the claim."""
    d = write_sample(tmp_path / "prof", with_profile=False)
    number = set_line(rank_path(d, 2), "size", 100000000)
    p = load_profile(d)
    assert p.nranks == 3 and len(p.ranks) == 3
    assert p.incomplete_ranks == [(2, f"unreadable: {rank_path(d, 2)}:{number}: 'size' line: "
                                      f"field 2 '100000000' is larger than {MAX_WORLD_SIZE}")]
    # alone, it still does not make a world of that size
    for r in (0, 1):
        rank_path(d, r).unlink()
    p = load_profile(d)
    assert (p.nranks, p.missing_ranks, p.incomplete_ranks[0][0]) == (3, [0, 1], 2)


def test_world_size_disagreeing_with_the_run(tmp_path):
    rows = {r: rank23(r) for r in range(3)}
    rows[1] = [("size", 4) if r[0] == "size" else r for r in rows[1]]
    d = write_profile(tmp_path / "prof", None, rows)
    p = load_profile(d)
    assert p.nranks == 3
    assert p.incomplete_ranks == [(1, f"unreadable: {rank_path(d, 1)}:4: 'size' line says 4 "
                                      f"ranks, the run has 3")]


def test_a_million_ranks_claimed_by_one_file_stay_bounded(tmp_path):
    """At the limit (2^20 ranks, one file present): read, reported and exported as CSV in a
    process limited to 1 GiB of address space, in bounded time."""
    d = write_profile(tmp_path / "prof", None, {0: rank_rows(0, MAX_WORLD_SIZE, "complete",
                                                             "h", 10, 5)})
    script = f"""
import io, os, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
sys.path.insert(0, {str(Path(__file__).resolve().parents[2] / "python")!r})
from pathscope.reader import load_profile
from pathscope.report import render
from pathscope.export import export
p = load_profile({str(d)!r})
text = render(p)
with open(os.devnull, "w") as out:
    export(p, "ranks", "csv", out)
print(p.nranks, len(p.missing_ranks), text.split("Ranks")[1].splitlines()[1])
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == (f"{MAX_WORLD_SIZE} {MAX_WORLD_SIZE - 1}   WARNING: "
                        f"{MAX_WORLD_SIZE - 1} of {MAX_WORLD_SIZE} ranks did not complete; "
                        f"their data is partial or absent:")
    assert int(lines[1]) < 600        # MiB


def test_line_and_file_limits(tmp_path, monkeypatch):
    d = write_sample(tmp_path / "prof", with_profile=False)
    monkeypatch.setattr(tsv, "MAX_LINE_BYTES", 200)
    number = set_line(rank_path(d, 1), "host", "n" * 300)
    p = load_profile(d)
    assert p.incomplete_ranks == [
        (1, f"unreadable: {rank_path(d, 1)}:{number}: line longer than 200 bytes")]
    monkeypatch.setattr(tsv, "MAX_FILE_BYTES", {**tsv.MAX_FILE_BYTES, "pathscope-rank": 650})
    p = load_profile(d)
    assert [str(s) for s in p.stray_files] == [
        f"{rank_path(d, r)} is larger than 650 bytes (the limit for a pathscope-rank file; "
        f"not read)" for r in (0, 1)]
    assert p.missing_ranks == [0, 1]


# ---- files that are not read ----------------------------------------------------------------

def test_links_fifos_and_directories_are_not_read(tmp_path):
    """A rank file that is a link (here to a valid rank file of rank 1: its data must not
    appear), a FIFO (never opened for a blocking read) and a directory: stray, not read."""
    d = write_sample(tmp_path / "prof", with_profile=False)
    outside = tmp_path / "elsewhere.tsv"
    rank_path(d, 1).rename(outside)
    rank_path(d, 1).symlink_to(outside)
    rank_path(d, 2).unlink()
    os.mkfifo(rank_path(d, 2))
    (d / "ranks" / "rank-000003.tsv").mkdir()
    p = load_profile(d)
    assert [str(s) for s in p.stray_files] == [
        f"{rank_path(d, 1)} is a symbolic link (not followed)",
        f"{rank_path(d, 2)} is not a regular file (not read)",
        f"{d}/ranks/rank-000003.tsv is not a regular file (not read)"]
    assert p.nranks == 3 and p.missing_ranks == [1, 2]
    assert p.ops[("W", "MPI_Send")].nranks == 1          # only rank 0's
    assert ranks_section(p) == [
        "  WARNING: 2 of 3 ranks did not complete; their data is partial or absent:",
        "    ranks 1-2: missing: no rank file (never initialised MPI under pathscope, or "
        "killed by SIGKILL)",
        "  WARNING: 3 files not merged (of another run, or not read):",
        f"    {rank_path(d, 1)} is a symbolic link (not followed)",
        f"    {rank_path(d, 2)} is not a regular file (not read)",
        f"    {d}/ranks/rank-000003.tsv is not a regular file (not read)"]


def test_link_to_a_secret_is_never_read(tmp_path):
    d = write_sample(tmp_path / "prof", with_profile=False)
    rank_path(d, 2).unlink()
    rank_path(d, 2).symlink_to("/etc/shadow")
    p = load_profile(d)
    assert [str(s) for s in p.stray_files] == [
        f"{rank_path(d, 2)} is a symbolic link (not followed)"]
    assert "shadow" not in render(p).replace(str(d), "DIR")


def test_linked_profile_tsv_and_ranks_directory(tmp_path):
    d = write_sample(tmp_path / "prof")
    real = tmp_path / "real.tsv"
    (d / "profile.tsv").rename(real)
    (d / "profile.tsv").symlink_to(real)
    p = load_profile(d)
    assert p.source == "ranks"
    assert p.notes == [f"profile.tsv not used: {d}/profile.tsv is a symbolic link (not "
                       f"followed)"]
    assert header_line(p, "source") == "rank files (profile.tsv not used: see Ranks)"
    (d / "ranks").rename(tmp_path / "real-ranks")
    (d / "ranks").symlink_to(tmp_path / "real-ranks")
    with pytest.raises(ProfileError) as e:
        load_profile(d)
    assert str(e.value) == (f"nothing of {d} can be read: {d}/profile.tsv is a symbolic link "
                            f"(not followed) (and 1 more)")


# ---- empty and cut files --------------------------------------------------------------------

def test_empty_and_cut_rank_files_are_incomplete_ranks(tmp_path):
    """A full disk: one empty rank file, one cut mid-line.  The profile is still read."""
    d = write_sample(tmp_path / "prof", with_profile=False)
    rank_path(d, 2).write_text("")
    text = rank_path(d, 1).read_text()
    cut = text.index("W\tMPI_Recv") + len("W\tMPI_Recv\t1\t10")    # "1024" cut to "10"
    rank_path(d, 1).write_text(text[:cut])
    p = load_profile(d)
    assert p.incomplete_ranks == [(1, "no end line"), (2, "empty")]
    assert p.ops[("W", "MPI_Send")].calls == 3                # rank 1's send was before the cut
    assert p.ops[("W", "MPI_Recv")].calls == 1                # its cut line was dropped, unread
    assert ranks_section(p) == [
        "  WARNING: 2 of 3 ranks did not complete; their data is partial or absent:",
        "    rank 1: incomplete: rank file cut short (no end line)",
        "    rank 2: incomplete: rank file empty or cut short before its first lines"]
    assert p.problems() == ["ranks 1-2 incomplete"]


def test_profile_tsv_cut_short_falls_back_to_the_rank_files(tmp_path):
    d = write_sample(tmp_path / "prof")
    text = (d / "profile.tsv").read_text()
    (d / "profile.tsv").write_text(text[:text.index("op\tW_s1.0")])
    p = load_profile(d)
    assert p.source == "ranks" and p.problems() == []
    assert p.notes == [f"profile.tsv not used: {d}/profile.tsv is cut short (no end line)"]
    assert p.ops == load_profile(write_sample(tmp_path / "ref")).ops


# ---- run ids (format 2.3) -------------------------------------------------------------------

def test_files_of_another_run_are_stray(tmp_path):
    """profile.tsv and ranks 0-1 of run A; rank 2's file of run B: left out and named; rank 2
    is then missing (profile.tsv has its totals)."""
    d = write_profile(tmp_path / "prof", with_run(profile_rows(), RUN_A),
                      {0: rank23(0), 1: rank23(1), 2: rank23(2, run=RUN_B)})
    p = load_profile(d)
    assert (p.run_id, p.source, p.missing_ranks) == (RUN_A, "profile", [2])
    assert [str(s) for s in p.stray_files] == [
        f"{rank_path(d, 2)} belongs to another run ({RUN_B})"]
    assert header_line(p, "run") == RUN_A
    assert ranks_section(p) == [
        "  WARNING: 1 of 3 ranks did not complete; their data is partial or absent:",
        "    rank 2: missing: no rank file, although profile.tsv shows MPI_Finalize reached "
        "(removed, or written to another node's file system)",
        "  WARNING: 1 file not merged (of another run, or not read):",
        f"    {rank_path(d, 2)} belongs to another run ({RUN_B})"]


def test_run_most_rank_files_name_without_profile_tsv(tmp_path):
    """A crashed rerun of 2 ranks over an older run of 3: 2 files of run B (newer), 1 of A."""
    old = {r: rank23(r, run=RUN_A, start=1000) for r in range(3)}
    new = {r: rank23(r, size=2, run=RUN_B, start=2000, status="signal 15") for r in range(2)}
    d = write_profile(tmp_path / "prof", None, {**old, **new})
    p = load_profile(d)
    assert (p.run_id, p.nranks) == (RUN_B, 2)
    assert [str(s) for s in p.stray_files] == [
        f"{rank_path(d, 2)} belongs to another run ({RUN_A})"]
    assert p.incomplete_ranks == [(0, "signal 15"), (1, "signal 15")]


def test_tie_between_runs_goes_to_the_newest(tmp_path):
    d = write_profile(tmp_path / "prof", None, {
        0: rank23(0, size=2, run=RUN_A, start=2000),
        1: rank23(1, size=2, run=RUN_B, start=1000)})
    p = load_profile(d)
    assert p.run_id == RUN_A and p.missing_ranks == [1]


def test_format_2_2_files_among_2_3_are_stray_and_alone_still_read(tmp_path):
    d = write_profile(tmp_path / "prof", None, {0: rank23(0), 1: rank23(1),
                                                2: with_run(RANK2, None, version="2.2")})
    p = load_profile(d)
    assert [str(s) for s in p.stray_files] == [
        f"{rank_path(d, 2)} has no run id (format 2.2: written before run ids)"]
    assert p.missing_ranks == [2]
    old = load_profile(write_sample(tmp_path / "old"))
    assert (old.run_id, old.stray_files, old.problems()) == (None, [], [])


@pytest.mark.parametrize("change, message", [
    (lambda rows: [rows[0], ("run", "XYZ")] + rows[2:],
     ":2: 'run' line: field 2 'XYZ' is not a run id (32 lowercase hex digits)"),
    (lambda rows: [rows[0], ("run", RUN_A.upper())] + rows[2:],
     f":2: 'run' line: field 2 '{RUN_A.upper()}' is not a run id (32 lowercase hex digits)"),
    (lambda rows: [rows[0]] + rows[2:4] + [rows[1]] + rows[4:],
     ":2: line 2 is not 'run<TAB>RUNID' (format 2.3 files start with their run line)"),
])
def test_malformed_run_line(tmp_path, change, message):
    d = write_profile(tmp_path / "prof", None, {0: rank23(0), 1: change(rank23(1)),
                                                2: rank23(2)})
    p = load_profile(d)
    assert p.incomplete_ranks == [(1, f"unreadable: {rank_path(d, 1)}{message}")]


def test_all_ranks_complete_is_never_said_with_stray_files(tmp_path):
    d = write_profile(tmp_path / "prof", with_run(profile_rows(), RUN_A),
                      {0: rank23(0), 1: rank23(1), 2: rank23(2),
                       3: rank23(3, size=4, run=RUN_B)})
    p = load_profile(d)
    assert ranks_section(p) == [
        "  3 of 3 ranks of this run complete (MPI_Finalize reached)",
        "  WARNING: 1 file not merged (of another run, or not read):",
        f"    {rank_path(d, 3)} belongs to another run ({RUN_B})"]
    assert p.problems() == ["1 stray file not merged"]


def test_file_of_the_run_outside_its_ranks(tmp_path):
    d = write_profile(tmp_path / "prof", None, {0: rank23(0), 1: rank23(1), 2: rank23(2),
                                                7: rank23(7)})
    p = load_profile(d)
    assert [str(s) for s in p.stray_files] == [
        f"{rank_path(d, 7)} is for rank 7, outside the run's 3 ranks"]


# ---- warnings (format 2.3) -------------------------------------------------------------------

def test_warnings_grouped_by_key_and_text(tmp_path):
    stopped = ("samples-stopped", 1, 1_200_000_000, STOPPED)
    taken = ("sigprof-taken", 40, 5_000, "the application's own SIGPROF handler took "
                                          "pathscope's samples")
    d = write_profile(tmp_path / "prof", None, {
        0: rank23(0, size=4, warnings=[stopped, taken]),
        1: rank23(1, size=4, warnings=[stopped]),
        2: rank23(2, size=4, warnings=[stopped]),
        3: rank23(3, size=4, warnings=[stopped, ("samples-stopped-x", 2, 9, "tab\\there")])})
    p = load_profile(d)
    # in the order they first happened
    assert ranks_section(p)[1:] == [
        "  warning: tab\\x09here (rank 3, 2 times)",
        "  warning: the application's own SIGPROF handler took pathscope's samples (rank 0, "
        "40 times)",
        f"  warning: {STOPPED} (ranks 0-3)"]
    out = io.StringIO()
    export(p, "warnings", "csv", out)
    assert out.getvalue() == (
        "rank,key,count,first_s,text\n"
        f"0,samples-stopped,1,1.2,{STOPPED}\n"
        "0,sigprof-taken,40,0.000005,the application's own SIGPROF handler took pathscope's "
        "samples\n"
        f"1,samples-stopped,1,1.2,{STOPPED}\n"
        f"2,samples-stopped,1,1.2,{STOPPED}\n"
        f"3,samples-stopped,1,1.2,{STOPPED}\n"
        "3,samples-stopped-x,2,0.000000009,tab\there\n")
    assert p.problems() == []       # warnings do not make a profile partial


@pytest.mark.parametrize("warning, message", [
    (("Samples", 1, 0, "x"), "'warning' line: field 2 'Samples' is not a warning key "
                             "([a-z0-9-], at most 64)"),
    (("a", -1, 0, "x"), "'warning' line: field 3 '-1' is negative"),
    (("a", 1, "soon", "x"), "'warning' line: field 4 'soon' is not an integer"),
    (("a", 1, 0), "'warning' line has 3 fields after the type, expected 4"),
])
def test_malformed_warning_line(tmp_path, warning, message):
    d = write_profile(tmp_path / "prof", None, {0: rank23(0), 1: rank23(1, warnings=[warning]),
                                                2: rank23(2)})
    rows = read_rows(rank_path(d, 1))
    number = next(i for i, r in enumerate(rows) if r[0] == "warning") + 1
    assert load_profile(d).incomplete_ranks == [
        (1, f"unreadable: {rank_path(d, 1)}:{number}: {message}")]


# ---- the report does not contradict itself -------------------------------------------------

def test_rank_that_never_called_mpi_init_in_an_mpi_run(tmp_path):
    rows = [("mpi_library", "Open MPI v4.1.4")]
    d = write_profile(tmp_path / "prof", None, {
        0: rank_rows(0, 2, "complete", "h", 10, 5, version="2.2", extra=rows),
        1: rank_rows(1, 2, "complete", "h", 10, 0, version="2.2", extra=[("mpi_library", "-")])})
    p = load_profile(d)
    assert ranks_section(p) == [
        "  WARNING: 1 of 2 ranks did not complete; their data is partial or absent:",
        "    rank 1: ended without calling MPI_Init: no MPI data"]
    assert header_line(p, "source") == ("rank files (no profile.tsv: the run did not reach "
                                        "MPI_Finalize on every rank)")


def test_control_characters_never_reach_the_terminal(tmp_path):
    d = write_sample(tmp_path / "prof", with_profile=False)
    set_line(rank_path(d, 0), "host", "evil\x1b]0;owned\x07")
    text = render(load_profile(d))
    assert "\x1b" not in text and "\x07" not in text
    assert "evil\\x1b]0;owned\\x07" in text


# ---- export of a partial profile -----------------------------------------------------------

def test_export_of_a_partial_profile(tmp_path, capsys):
    d = write_sample(tmp_path / "prof", with_profile=False)
    rank_path(d, 2).write_text("")
    target = tmp_path / "out.csv"
    assert main(["export", str(d), "--table", "ranks", "-o", str(target)]) == 3
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", (
        f"pathscope: incomplete profile {d}: rank 2 incomplete; nothing exported (pathscope "
        f"report shows the details; --allow-partial exports what there is)\n"))
    assert not target.exists()
    assert main(["export", str(d), "--table", "ranks", "--allow-partial"]) == 0
    captured = capsys.readouterr()
    assert captured.err == (f"pathscope: warning: incomplete profile {d}: rank 2 incomplete; "
                            f"exported what there is\n")
    assert captured.out.splitlines()[1:] == ["0,node01,complete,2,0.5,0.25,1000",
                                             "1,node02,complete,2.1,0.7,0.333333,1001",
                                             "2,,unknown,,,,"]   # (cut before its times)
    assert main(["report", str(d)]) == 0            # report works, and says what is missing
    assert "rank 2: incomplete: rank file empty" in capsys.readouterr().out


def test_export_of_a_whole_profile_says_nothing(tmp_path, capsys):
    assert main(["export", str(HYBRID), "--table", "warnings"]) == 0
    assert capsys.readouterr() == ("rank,key,count,first_s,text\n", "")


def test_export_problems_list_every_kind(tmp_path, capsys):
    d = write_profile(tmp_path / "prof", None, {0: rank23(0, size=5), 2: rank23(2, size=5),
                                                3: rank23(3, size=5, status="abort 3"),
                                                4: rank23(4, size=5, run=RUN_B)})
    assert main(["export", str(d)]) == 3
    assert capsys.readouterr().err == (
        f"pathscope: incomplete profile {d}: ranks 1,4 missing (no rank file); rank 3 "
        f"incomplete; 1 stray file not merged; nothing exported (pathscope report shows the "
        f"details; --allow-partial exports what there is)\n")


def test_crash_after_mpi_finalize_next_to_profile_tsv(tmp_path):
    """profile.tsv proves every rank went through MPI_Finalize: a rank file rewritten at a
    later crash (heap profiling writes again at exit) is said to have crashed after it."""
    d = write_profile(tmp_path / "prof", with_run(profile_rows(), RUN_A),
                      {0: rank23(0), 1: rank23(1), 2: rank23(2, status="signal 11")})
    p = load_profile(d)
    assert header_line(p, "source") == "profile.tsv (reduced inside the job at MPI_Finalize)"
    assert ranks_section(p) == [
        "  WARNING: 1 of 3 ranks did not complete; their data is partial or absent:",
        "    rank 2: killed by signal 11 (SIGSEGV) after MPI_Finalize"]


# ---- profile.tsv's `host` lines (format 2.10: --per-rank summary and none) -------------------

def _hosts_instead_of_ranks(d: Path, host_lines: list[str]) -> None:
    lines = [l for l in (d / "profile.tsv").read_text().splitlines()
             if not l.startswith("rank\t")]
    at = next(i for i, l in enumerate(lines) if l.startswith("start_unix_ns")) + 1
    (d / "profile.tsv").write_text("\n".join(lines[:at] + host_lines + lines[at:]) + "\n")


def test_host_lines_give_each_rank_its_host_and_no_times(tmp_path):
    d = write_sample(tmp_path / "prof")
    _hosts_instead_of_ranks(d, ["host\tnode02\t1", "host\tnode01\t0,2"])
    for r in range(3):
        os.unlink(d / "ranks" / f"rank-00000{r}.tsv")
    p = load_profile(d)
    assert p.source == "profile" and p.notes == []
    assert [(r.rank, r.host, r.wall_ns, r.mpi_ns) for r in p.ranks] == [
        (0, "node01", 0, 0), (1, "node02", 0, 0), (2, "node01", 0, 0)]


@pytest.mark.parametrize("host_lines, message", [
    (["host\tnode01\t0-1", "host\tnode02\t1-2"], "{name}:9: rank 1 listed twice"),
    (["host\tnode01\t0-3"], "{name}:8: 'host' line: ranks 0-3 are not below nranks 3"),
    (["host\tnode01\t0-1"], "{name} has 2 ranks in 'host' lines for nranks 3"),
    (["host\tnode01\t2-0"], "{name}:8: 'host' line: malformed rank list '2-0': range 2-0 "
                            "goes down"),
    (["host\tnode01\t-"], "{name}:8: 'host' line: '-' is not a list of ranks"),
    (["host\tnode01"], "{name}:8: 'host' line has 1 fields after the type, expected 2"),
])
def test_host_lines_that_break_a_rule(tmp_path, host_lines, message):
    d = write_sample(tmp_path / "prof")
    _hosts_instead_of_ranks(d, host_lines)
    p = load_profile(d)
    assert p.source == "ranks"    # profile.tsv not used; the rank files are
    assert p.notes == ["profile.tsv not used: " + message.format(name=f"{d}/profile.tsv")]
