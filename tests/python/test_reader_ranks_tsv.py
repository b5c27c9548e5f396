"""ranks.tsv (format 2.10): the rank texts of `--per-rank all` in one file, read by sections.
A profile read from ranks.tsv is the one read from the same texts as ranks/ files; a rank's
ranks/ file of the run wins over its section; each rule of the head has its exact note (the
file is not used, the ranks/ files still are); a section keeps the rules of a rank file, with
its messages naming "DIR/ranks.tsv (rank R, line N)"; another run's ranks.tsv, a link and a
FIFO are stray; the report and export of such a directory (docs/format.md, "ranks.tsv")."""
import os
import shutil
import threading
from pathlib import Path

import pytest

from pathscope import tsv
from pathscope.cli import main
from pathscope.errors import FormatVersionError, ProfileError
from pathscope.reader import load_profile
from pathscope.report import render
from pathscope_samples import (HYBRID, rank_rows, read_rows, tsv_text, with_run, write_profile)
from profile_files import rank_text, rank_texts
from test_reader_checks import RUN_A, RUN_B, rank23
from test_tree_tsv import RUN as TREE_RUN, write_reduced


def ranks_tsv(texts: dict, run=RUN_A, nranks=None, version="2.10") -> bytes:
    """ranks.tsv of texts ({rank: text}) as the runtime writes it: head, index, sections."""
    body = [(rank, texts[rank].encode()) for rank in sorted(texts)]
    head = [f"pathscope-ranks\t{version}", f"run\t{run}",
            f"ranks\t{nranks if nranks is not None else len(texts)}"]
    offset = 0
    for rank, data in body:
        head.append(f"index\t{rank}\t{offset}\t{len(data)}")
        offset += len(data)
    return ("\n".join(head) + "\ndata\n").encode() + b"".join(data for _, data in body)


def hybrid_texts(run=RUN_A) -> dict:
    """The hybrid fixture's two rank files (call paths, two threads), with a run line."""
    return {r: tsv_text(with_run(read_rows(HYBRID / "ranks" / f"rank-{r:06d}.tsv"), run))
            for r in (0, 1)}


def sample_texts(size=3, run=RUN_A, ranks=None) -> dict:
    return {r: tsv_text(rank23(r, size=size, run=run)) for r in (ranks or range(size))}


def write_dir(d: Path, texts=None, files=None, **head) -> Path:
    """A profile directory with ranks.tsv of texts and ranks/ files of files ({rank: text})."""
    (d / "ranks").mkdir(parents=True)
    if texts is not None:
        (d / "ranks.tsv").write_bytes(ranks_tsv(texts, **head))
    for rank, text in (files or {}).items():
        (d / "ranks" / f"rank-{rank:06d}.tsv").write_text(text)
    return d


def same_profile(a, b) -> None:
    assert (a.source, a.nranks, a.run_id, a.meta) == (b.source, b.nranks, b.run_id, b.meta)
    assert (a.comms, a.ops, a.ranks, a.callpaths) == (b.comms, b.ops, b.ranks, b.callpaths)
    assert (a.missing_ranks, a.incomplete_ranks, a.stray_files, a.notes) == \
        (b.missing_ranks, b.incomplete_ranks, b.stray_files, b.notes)
    assert render(a).replace(str(a.path), "DIR") == render(b).replace(str(b.path), "DIR")


# ---- the same profile from either layout -----------------------------------------------------

@pytest.mark.parametrize("texts", [hybrid_texts, sample_texts])
def test_ranks_tsv_reads_as_the_rank_files(tmp_path, texts):
    files = write_dir(tmp_path / "files", files=texts())
    one = write_dir(tmp_path / "one", texts=texts())
    a, b = load_profile(files), load_profile(one)
    same_profile(a, b)
    assert a.problems() == [] and a.source == "ranks"
    if texts is hybrid_texts:
        assert a.has_call_paths() and len(b.callpaths[1].threads) == 2
    # the tests' oracle reads both layouts alike
    assert rank_texts(one) == rank_texts(files) == texts()
    assert rank_text(one, 1) == texts()[1]


def test_a_rank_file_wins_over_its_section(tmp_path):
    texts = sample_texts()
    rewritten = texts[1].replace("wall_ns\t2100000000\n", "wall_ns\t99\n")
    assert rewritten != texts[1]
    d = write_dir(tmp_path / "prof", texts=texts, files={1: rewritten})
    p = load_profile(d)
    walls = [r.wall_ns for r in p.ranks]
    assert walls == [2_000_000_000, 99, 1_900_000_000]
    assert p.problems() == [] and p.stray_files == []
    assert rank_text(d, 1) == rewritten
    # a file of another run does not: it is stray, the section is read
    (d / "ranks" / "rank-000001.tsv").write_text(tsv_text(rank23(1, run=RUN_B)))
    p = load_profile(d)
    assert [r.wall_ns for r in p.ranks] == [2_000_000_000, 2_100_000_000, 1_900_000_000]
    assert [str(s) for s in p.stray_files] == [
        f"{d}/ranks/rank-000001.tsv belongs to another run ({RUN_B})"]
    # a file of the run that breaks a rule wins too: the rank is unreadable
    (d / "ranks" / "rank-000001.tsv").write_text(rewritten.replace("wall_ns\t99", "wall_ns\tx"))
    p = load_profile(d)
    assert p.incomplete_ranks == [(1, f"unreadable: {d}/ranks/rank-000001.tsv:10: 'wall_ns' "
                                      f"line: field 2 'x' is not an integer")]


def test_missing_ranks_and_ranks_files_beside_the_sections(tmp_path):
    d = write_dir(tmp_path / "prof", texts=sample_texts(5, ranks=[0, 3]), nranks=5,
                  files={1: tsv_text(rank23(1, size=5))})
    (d / "ranks" / f".rank-000004.tsv.{'0' * 16}").write_text("")
    p = load_profile(d)
    assert (p.nranks, p.missing_ranks, p.partial_rank_files) == (5, [2, 4], [4])
    assert p.problems() == ["ranks 2,4 missing (no rank file)"]
    assert sorted(p.callpaths) == [0, 1, 3]


# ---- sections keep the rules of a rank file ---------------------------------------------------

def section_lines(text: str, kind: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if line.startswith(kind + "\t"))


def test_a_section_that_breaks_a_rule_makes_its_rank_unreadable(tmp_path):
    texts = sample_texts()
    texts[1] = texts[1].replace("rank\t1\n", "rank\t2\n")
    texts[2] = texts[2].replace("wall_ns\t1900000000\n", "wall_ns\t-3\n")
    d = write_dir(tmp_path / "prof", texts=texts)
    p = load_profile(d)
    name = f"{d}/ranks.tsv"
    assert p.incomplete_ranks == [
        (1, f"unreadable: {name} (rank 1, line {section_lines(texts[1], 'rank')}): 'rank' "
            f"line says rank 2, but the index of ranks.tsv gives this section to rank 1"),
        (2, f"unreadable: {name} (rank 2, line {section_lines(texts[2], 'wall_ns')}): "
            f"'wall_ns' line: field 2 '-3' is negative")]
    assert p.ops[("W", "MPI_Send")].nranks == 1          # rank 0's only
    assert f"    rank 2: unreadable, left out: {name} (rank 2, line 10): 'wall_ns' line: " \
           f"field 2 '-3' is negative" in render(p)


def test_a_section_cut_short_or_of_another_size_or_run(tmp_path):
    texts = sample_texts(4)
    texts[1] = texts[1][:texts[1].index("\nwall_ns\t") + 6]       # no end line, cut mid-line
    texts[2] = tsv_text(rank23(2, size=5))
    texts[3] = tsv_text(rank23(3, size=4, run=RUN_B))
    d = write_dir(tmp_path / "prof", texts=texts, nranks=4)
    p = load_profile(d)
    assert p.incomplete_ranks == [
        (1, "no end line"),
        (2, f"unreadable: {d}/ranks.tsv (rank 2, line 4): 'size' line says 5 ranks, the run "
            f"has 4")]
    assert [str(s) for s in p.stray_files] == [
        f"{d}/ranks.tsv (rank 3) belongs to another run ({RUN_B})"]
    assert p.missing_ranks == [3]


def test_a_section_beyond_the_rank_file_limit_is_stray(tmp_path, monkeypatch):
    d = write_dir(tmp_path / "prof", texts=sample_texts())
    limit = len(sample_texts()[0]) - 1
    monkeypatch.setattr(tsv, "MAX_FILE_BYTES", {**tsv.MAX_FILE_BYTES, "pathscope-rank": limit})
    p = load_profile(d)
    assert [str(s) for s in p.stray_files][0] == (
        f"{d}/ranks.tsv (rank 0) is larger than {limit} bytes (the limit for a pathscope-rank "
        f"file; not read)")


# ---- the head of ranks.tsv --------------------------------------------------------------------

def head_lines(data: bytes) -> list:
    head, _, _ = data.partition(b"\ndata\n")
    return head.decode().split("\n")


def with_head(data: bytes, lines: list) -> bytes:
    return ("\n".join(lines) + "\ndata\n").encode() + data.partition(b"\ndata\n")[2]


def index_line(rank, offset, length) -> str:
    return f"index\t{rank}\t{offset}\t{length}"


GOOD = ranks_tsv(sample_texts())
L0, L1, L2 = (len(t.encode()) for t in sample_texts().values())


@pytest.mark.parametrize("lines, message", [
    (lambda h: [h[0], h[2], h[1]] + h[3:], ":2: line 2 is not 'run<TAB>RUNID'"),
    (lambda h: [h[0], "run\tABC"] + h[2:],
     ":2: 'run' line: field 2 'ABC' is not a run id (32 lowercase hex digits)"),
    (lambda h: h[:2] + ["ranks\t0"] + h[3:], ":3: 'ranks' line: 0 ranks"),
    (lambda h: h[:2] + [f"ranks\t{(1 << 20) + 1}"] + h[3:],
     f":3: 'ranks' line: field 2 '{(1 << 20) + 1}' is larger than {1 << 20}"),
    (lambda h: h[:2] + ["index\t0\t0\t1"] + h[3:], ":3: line 3 is not 'ranks<TAB>P'"),
    (lambda h: h[:3] + [h[2]] + h[3:], ":4: 'ranks' line not on line 3"),
    (lambda h: h[:5] + [index_line(3, L0 + L1, L2)],
     ":6: 'index' line: rank 3 is not below ranks 3"),
    (lambda h: h[:4] + [index_line(0, L0, L1)] + h[5:],
     ":5: 'index' line: rank 0 after rank 0 (the index is in increasing rank order)"),
    (lambda h: h[:3] + [index_line(1, 0, L1), index_line(0, L1, L0)] + h[5:],
     ":5: 'index' line: rank 0 after rank 1 (the index is in increasing rank order)"),
    (lambda h: h[:4] + [index_line(1, L0 + 1, L1 - 1)] + h[5:],
     f":5: 'index' line: rank 1: section at offset {L0 + 1}, expected {L0} (sections follow "
     f"each other from offset 0)"),
    (lambda h: h[:3] + [index_line(0, 5, L0 - 5)] + h[4:],
     ":4: 'index' line: rank 0: section at offset 5, expected 0 (sections follow each other "
     "from offset 0)"),
    (lambda h: h[:3] + [index_line(0, 0, 0), index_line(1, 0, L0 + L1)] + h[5:],
     ":4: 'index' line: rank 0: section of length 0"),
    (lambda h: h[:3] + ["index\t0\t0"] + h[4:],
     ":4: 'index' line has 2 fields after the type, expected 3"),
    (lambda h: h[:3] + [f"index\t0\t0\t{L0}x"] + h[4:],
     f":4: 'index' line: field 4 '{L0}x' is not an integer"),
    (lambda h: h[:5] + [index_line(2, L0 + L1, L2 + 1)],
     f" is cut short: {len(GOOD)} bytes, its index ends at byte {len(GOOD) + 1}"),
    (lambda h: h[:5] + [index_line(2, L0 + L1, L2 - 1)],
     f" has 1 bytes after its last section (byte {len(GOOD) - 1})"),
    (lambda h: ["pathscope-rank\t2.10"] + h[1:],
     " is not a pathscope file (first line is not 'pathscope-ranks<TAB>VERSION')"),
])
def test_a_ranks_tsv_that_breaks_a_rule_is_not_used(tmp_path, lines, message):
    """The note names the rule; the ranks/ files are read all the same."""
    d = write_dir(tmp_path / "prof", files={0: sample_texts()[0]})
    (d / "ranks.tsv").write_bytes(with_head(GOOD, lines(head_lines(GOOD))))
    p = load_profile(d)
    assert p.notes == [f"ranks.tsv not used: {d}/ranks.tsv{message}"]
    assert (p.nranks, p.missing_ranks, p.stray_files) == (3, [1, 2], [])
    assert p.ranks[0].status == "complete"


@pytest.mark.parametrize("cut, message", [
    (0, " is empty"),
    (30, " is cut short before its 'data' line"),
    (len(GOOD) - L2 // 2, f" is cut short: {len(GOOD) - L2 // 2} bytes, its index ends at "
                          f"byte {len(GOOD)}"),
])
def test_a_ranks_tsv_cut_short_is_not_used(tmp_path, cut, message):
    d = write_dir(tmp_path / "prof", files={2: sample_texts()[2]})
    (d / "ranks.tsv").write_bytes(GOOD[:cut])
    p = load_profile(d)
    assert p.notes == [f"ranks.tsv not used: {d}/ranks.tsv{message}"]
    assert p.missing_ranks == [0, 1] and p.ranks[2].status == "complete"
    # alone, nothing of the directory can be read
    (d / "ranks" / "rank-000002.tsv").unlink()
    with pytest.raises(ProfileError) as e:
        load_profile(d)
    assert str(e.value) == f"nothing of {d} can be read: ranks.tsv not used: {d}/ranks.tsv" \
                           f"{message}"


def test_unknown_lines_in_the_head_are_skipped_and_a_newer_major_refused(tmp_path):
    h = head_lines(GOOD)
    d = write_dir(tmp_path / "prof")
    (d / "ranks.tsv").write_bytes(with_head(GOOD, h[:3] + ["future\tline"] + h[3:]))
    assert load_profile(d).problems() == []
    (d / "ranks.tsv").write_bytes(with_head(GOOD, ["pathscope-ranks\t3.0"] + h[1:]))
    with pytest.raises(FormatVersionError):
        load_profile(d)


def test_a_head_beyond_its_limit(tmp_path, monkeypatch):
    from pathscope import reader
    monkeypatch.setattr(reader, "MAX_RANKS_HEAD_BYTES", 100)
    d = write_dir(tmp_path / "prof", texts=sample_texts(), files={0: sample_texts()[0]})
    p = load_profile(d)
    assert p.notes == [f"ranks.tsv not used: {d}/ranks.tsv has no 'data' line in its first "
                       f"100 bytes (the limit for its head)"]


# ---- stray ranks.tsv --------------------------------------------------------------------------

def test_a_ranks_tsv_of_another_run_is_stray(tmp_path):
    d = write_dir(tmp_path / "prof", texts=sample_texts(run=RUN_B, ranks=[0]), nranks=3,
                  run=RUN_B, files={r: tsv_text(rank23(r)) for r in (1, 2)})
    p = load_profile(d)
    assert [str(s) for s in p.stray_files] == [f"{d}/ranks.tsv belongs to another run "
                                               f"({RUN_B})"]
    assert (p.run_id, p.missing_ranks) == (RUN_A, [0])


def test_a_ranks_tsv_of_another_world_size_is_stray(tmp_path):
    d = write_dir(tmp_path / "prof", texts=sample_texts(ranks=[0]), nranks=4,
                  files={r: tsv_text(rank23(r)) for r in (1, 2)})
    p = load_profile(d)
    assert [str(s) for s in p.stray_files] == [f"{d}/ranks.tsv is of a run of 4 ranks, not of "
                                               f"this run's 3"]
    assert p.missing_ranks == [0]


def test_a_link_or_fifo_named_ranks_tsv_is_stray_and_never_waited_on(tmp_path):
    real = tmp_path / "real.tsv"
    real.write_bytes(GOOD)
    d = write_dir(tmp_path / "prof", files={0: sample_texts()[0]})
    (d / "ranks.tsv").symlink_to(real)
    p = load_profile(d)
    assert [str(s) for s in p.stray_files] == [f"{d}/ranks.tsv is a symbolic link (not "
                                               f"followed)"]
    assert p.missing_ranks == [1, 2]
    (d / "ranks.tsv").unlink()
    os.mkfifo(d / "ranks.tsv")
    done = []
    reader = threading.Thread(target=lambda: done.append(load_profile(d)), daemon=True)
    reader.start()
    reader.join(30)
    assert done, "the reader waited on a FIFO"
    assert [str(s) for s in done[0].stray_files] == [f"{d}/ranks.tsv is not a regular file "
                                                     f"(not read)"]
    # hidden temporaries of a writer that did not finish are not looked at
    (d / "ranks.tsv").unlink()
    (d / f".ranks.tsv.{'a' * 16}").write_bytes(GOOD[:40])
    assert load_profile(d).stray_files == []


# ---- with tree.tsv: --per-rank all, not a reduced run -------------------------------------------

def test_tree_tsv_with_ranks_tsv(tmp_path):
    d = write_reduced(tmp_path / "prof")
    texts = {r: tsv_text(rank23(r, size=4, run=TREE_RUN)) for r in range(4)}
    (d / "ranks.tsv").write_bytes(ranks_tsv(texts, run=TREE_RUN))
    p = load_profile(d)
    assert p.problems() == [] and sorted(p.callpaths) == [0, 1, 2, 3]
    assert [r.host for r in p.ranks] == ["node0", "node1", "node2", "node3"]
    assert [r.pid for r in p.ranks] == [1000, 1001, 1002, 1003]      # from the sections
    # a ranks.tsv of the run that cannot be used: its ranks are missing, not stood for by
    # tree.tsv as in a --per-rank none run
    (d / "ranks.tsv").write_bytes(ranks_tsv(texts, run=TREE_RUN)[:-3])
    p = load_profile(d)
    assert p.missing_ranks == [0, 1, 2, 3]
    assert p.notes[0].startswith("ranks.tsv not used: ")


# ---- the command line ---------------------------------------------------------------------------

def test_report_and_export_of_a_ranks_tsv_profile(tmp_path, capsys):
    d = write_dir(tmp_path / "prof", texts=hybrid_texts())
    files = write_dir(tmp_path / "files", files=hybrid_texts())
    for kind in ("hybrid", "files"):
        for name in ("symbols.tsv",):
            shutil.copy(HYBRID / name, (d if kind == "hybrid" else files) / name)
    outputs = []
    for directory in (d, files):
        assert main(["report", str(directory)]) == 0
        report = capsys.readouterr().out
        assert main(["export", str(directory), "--table", "ops"]) == 0
        outputs.append((report.replace(str(directory), "DIR"), capsys.readouterr().out))
    assert outputs[0] == outputs[1]
    assert "MPI_Allreduce" in outputs[0][1]


def test_tree_tsv_with_a_stray_ranks_tsv(tmp_path):
    """Any ranks.tsv says the run kept its ranks' texts: with another run's, this run's ranks
    are missing (not stood for by tree.tsv)."""
    d = write_reduced(tmp_path / "prof")
    texts = {r: tsv_text(rank23(r, size=4, run=RUN_B)) for r in range(4)}
    (d / "ranks.tsv").write_bytes(ranks_tsv(texts, run=RUN_B))
    p = load_profile(d)
    assert [str(s) for s in p.stray_files] == [f"{d}/ranks.tsv belongs to another run "
                                               f"({RUN_B})"]
    assert p.missing_ranks == [0, 1, 2, 3]


def test_ranks_tsv_without_a_ranks_directory(tmp_path):
    d = write_dir(tmp_path / "prof", texts=sample_texts())
    (d / "ranks").rmdir()
    p = load_profile(d)
    assert (p.source, p.nranks, p.problems()) == ("ranks", 3, [])
