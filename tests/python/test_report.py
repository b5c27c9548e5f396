"""The text report: golden files for the sample profile (format 1.0) and the hybrid
call-path fixture (2.0), the ranks section for unfinished runs, and the consistency check
(OK / MISMATCH)."""
from pathlib import Path

from pathscope.cli import main
from pathscope.reader import load_profile
from pathscope.report import render
from pathscope_samples import (with_run, HYBRID, RANK0, RANK1, RANK2, SAMPLE_COMMS, copy_hybrid,
                               profile_rows, rank_rows, write_profile, write_sample)

GOLDEN = Path(__file__).parent / "golden"


def test_golden_report(tmp_path):
    """The whole report, character for character (regenerate the golden file only after
    reading the difference)."""
    d = write_sample(tmp_path / "prof")
    expected = (GOLDEN / "report_sample.txt").read_text().replace("{path}", str(d))
    assert render(load_profile(d)) == expected


def test_golden_report_with_call_paths():
    """The hybrid fixture: time split, call tree and hot path between Summary and the
    communicators (symbols from the fixture's symbols.tsv: no symbolizer runs)."""
    expected = (GOLDEN / "report_hybrid.txt").read_text().replace("{path}", str(HYBRID))
    assert render(load_profile(HYBRID)) == expected


def test_call_path_sections_in_order():
    text = render(load_profile(HYBRID))
    headings = [block.splitlines()[0] for block in text.split("\n\n")
                if block and not block.startswith(" ")]
    assert headings == ["pathscope report: " + str(HYBRID), "Ranks", "Summary",
                        "Time split (call paths of 4 threads on 2 ranks; per rank: min, mean, "
                        "max)",
                        "Call tree (inclusive time, top-down; nodes with at least 1% of the "
                        "total time)",
                        "Hot path (at each level the child with the most inclusive time, from "
                        "the root but not into [failed unwind] or [not unwound]; max/mean: the "
                        "load imbalance)",
                        "Communicators ranked by MPI time",
                        "Consistency (point-to-point: sent == received on each "
                        "intracommunicator)"]


def test_report_without_call_paths_has_no_new_sections(tmp_path):
    """Sampler off and every group counted: call-path lines, but nothing unwound."""
    extra = [("sampler", "off", 0, "cpu"), ("unwind", "p2p", "count"),
             ("thread", 0, 77, 1000, 0, 0, 0, 0, 3),
             ("node", 0, 0, "-", "root", "-", "-", 0, 0, 0, 0, 0),
             ("node", 0, 1, 0, "not_unwound", "-", "-", 0, 900, 0, 0, 0),
             ("node", 0, 2, 1, "mpi", "-", "MPI_Send", 1, 0, 0, 100, 8)]
    off = write_profile(tmp_path / "off", None, {0: rank_rows(
        0, 1, "complete", "h", 1000, 100, version="2.0", extra=extra)})
    plain = write_profile(tmp_path / "plain", None, {0: rank_rows(
        0, 1, "complete", "h", 1000, 100, version="2.0")})
    text = render(load_profile(off))
    assert "Time split" not in text and "Call tree" not in text and "Hot path" not in text
    assert text.replace(str(off), "DIR") == render(load_profile(plain)).replace(str(plain), "DIR")


def test_report_frames_unresolved_without_symbolizer(tmp_path, monkeypatch):
    monkeypatch.delenv("PATHSCOPE_SYMBOLIZER", raising=False)
    monkeypatch.setenv("PATHSCOPE_HOME", str(tmp_path))
    d = copy_hybrid(tmp_path / "prof", symbols=False)
    text = render(load_profile(d))
    tree = text.split("\nCall tree")[1].split("\n\n")[0].splitlines()
    assert tree[1] == ("  note: symbols: pathscope-symbolize not found (run `make build`); "
                       "frames shown as module+offset")
    # no names, so no main to collapse the frames above: one line per frame
    assert [line.split(")  ")[-1] for line in tree[5:11]] == [
        "  solver+0x401025", "    libc.so.6+0x2724a", "      solver+0x401345",
        "        solver+0x401288", "          solver+0x401100", "          solver+0x401130"]
    assert text.count("note: symbols") == 1


def test_report_from_rank_files_differs_only_in_header(tmp_path):
    a = render(load_profile(write_sample(tmp_path / "a"))).split("\n\n", 1)[1]
    b = render(load_profile(write_sample(tmp_path / "b", with_profile=False))).split("\n\n", 1)
    # every rank complete: the source line does not claim the run stopped early
    assert ("source       rank files (no profile.tsv, although every rank reached "
            "MPI_Finalize)") in b[0]
    assert "command      (not recorded: no profile.tsv)" in b[0]
    assert b[1] == a


def test_consistency_ok(tmp_path):
    text = render(load_profile(write_sample(tmp_path / "prof")))
    consistency = text.split("Consistency")[1]
    assert "\n  OK: all 3 intracommunicators\n" in consistency
    assert "MISMATCH" not in text


def test_consistency_mismatch(tmp_path):
    comms = [c if c[0] != "W" else c[:10] + (2, 2048) for c in SAMPLE_COMMS]
    comms.append(("W_n5.0", 1, 1, "W", "MPI_Intercomm_create", 0, "0|1", "-", 1, 8, 0, 0))
    d = write_profile(tmp_path / "prof", profile_rows(comms=comms), {0: RANK0, 1: RANK1,
                                                                     2: RANK2})
    text = render(load_profile(d))
    consistency = text.split("Consistency")[1].splitlines()
    assert consistency[1:] == [
        "  MISMATCH comm W: sent 3 msgs/3072 B, received 2 msgs/2048 B",
        "  OK: the other 2 intracommunicators",
        "  not checked: 1 intercommunicator (W_n5.0)"]


def _consistency_lines(tmp_path, w_comm, name="prof"):
    comms = [c if c[0] != "W" else w_comm for c in SAMPLE_COMMS]
    run = "0123456789abcdef0123456789abcdef"
    d = write_profile(tmp_path / name, with_run(profile_rows(comms=comms), run),
                      {r: with_run(rows, run) for r, rows in ((0, RANK0), (1, RANK1), (2, RANK2))})
    return render(load_profile(d)).split("Consistency")[1].splitlines()[1:]


def test_consistency_with_freed_receives(tmp_path):
    """Format 2.3: receives freed by MPI_Request_free while outstanding are messages that
    arrived unseen, of at most their posted capacity; sent = received + freed is consistent."""
    w = ("W", 3, 0, "-", "-", 0, "0-2", "-", 5, 3100, 3, 3072, 1, 2, 64, 0)
    assert _consistency_lines(tmp_path, w) == [
        "  OK: comm W: sent 5 msgs/3100 B = received 3 msgs/3072 B + 2 receives freed by "
        "MPI_Request_free before completing (64 B posted), whose 28 B arrived unseen",
        "  OK: all 3 intracommunicators"]
    # one message unaccounted for
    w = ("W", 3, 0, "-", "-", 0, "0-2", "-", 6, 3100, 3, 3072, 0, 2, 64, 1)
    lines = _consistency_lines(tmp_path, w, "b")
    assert lines[0] == (
        "  MISMATCH comm W: sent 6 msgs/3100 B, received 3 msgs/3072 B + 2 receives freed by "
        "MPI_Request_free before completing (64 B posted)")
    assert lines[-1] == ("  note: on W, 1 request of the program ended with an error (e.g. a "
                         "truncated receive): no message is counted for them")
    # more bytes missing than the freed receives could hold
    w = ("W", 3, 0, "-", "-", 0, "0-2", "-", 5, 3200, 3, 3072, 0, 2, 64, 0)
    assert _consistency_lines(tmp_path, w, "c")[0].startswith("  MISMATCH comm W: sent 5 msgs/3200 B")
    # more received than sent
    w = ("W", 3, 0, "-", "-", 0, "0-2", "-", 5, 3000, 3, 3072, 0, 2, 64, 0)
    assert _consistency_lines(tmp_path, w, "d")[0].startswith("  MISMATCH comm W: sent 5 msgs/3000 B")


def test_freed_fields_read_and_merged(tmp_path):
    """The four 2.3 fields of `comm` lines: 0 when absent (older files), summed over rank
    files."""
    prof = load_profile(write_sample(tmp_path / "old"))
    w = prof.comms["W"]
    assert (w.freed_sends, w.freed_recvs, w.freed_recv_capacity, w.failed_requests) == (0, 0, 0, 0)
    ranks = {}
    for r, rows in ((0, RANK0), (1, RANK1), (2, RANK2)):
        ranks[r] = [row + (r, r + 1, 10 * r, 1) if row[0] == "comm" and row[1] == "W" else row
                    for row in rows]
    merged = load_profile(write_profile(tmp_path / "new", None, ranks))
    w = merged.comms["W"]
    assert (w.freed_sends, w.freed_recvs, w.freed_recv_capacity, w.failed_requests) == (3, 6, 30, 3)


def test_ranks_section_lists_every_problem(tmp_path):
    ranks = {0: [("size", 7) if row[0] == "size" else row for row in RANK0],
             1: rank_rows(1, 7, "signal 15", "node02", 10, 5),
             3: rank_rows(3, 7, "complete", "node03", 10, 5, end=False),
             4: rank_rows(4, 7, "abort 3", "node04", 10, 5),
             5: rank_rows(5, 7, "signal 15", "node05", 10, 5,
                          counters={"unknown_requests": 7}),
             6: rank_rows(6, 7, "signal 15 before-init", "node05", 10, 0)}
    d = write_profile(tmp_path / "prof", None, ranks)
    (d / "ranks" / "rank-000002.tsv.tmp").write_text("")
    (d / "ranks" / "rank-000007.tsv.tmp").write_text("")   # not a rank of this run: ignored
    text = render(load_profile(d))
    section = text.split("\n\nRanks\n")[1].split("\n\n")[0].splitlines()
    assert section == [
        "  WARNING: 6 of 7 ranks did not complete; their data is partial or absent:",
        "    ranks 1,5: killed by signal 15 (SIGTERM)",
        "    rank 2: missing: killed while writing its rank file (its temporary file was left "
        "behind)",
        "    rank 3: incomplete: rank file cut short (no end line)",
        "    rank 4: called MPI_Abort (error code 3)",
        "    rank 6: killed by signal 15 (SIGTERM) before MPI_Init returned: no MPI data",
        "  WARNING: counter unknown_requests = 7 (ranks 5)"]
    d2 = write_profile(tmp_path / "prof2", None, {0: RANK0, 2: RANK2})
    section = render(load_profile(d2)).split("\n\nRanks\n")[1].split("\n\n")[0].splitlines()
    assert section == [
        "  WARNING: 1 of 3 ranks did not complete; their data is partial or absent:",
        "    rank 1: missing: no rank file (never initialised MPI under pathscope, or killed "
        "by SIGKILL)"]


def test_cli_report(tmp_path, capsys):
    d = write_sample(tmp_path / "prof")
    assert main(["report", str(d)]) == 0
    out = capsys.readouterr().out
    assert out == render(load_profile(d))


def test_cli_report_version_refused(tmp_path, capsys):
    d = write_profile(tmp_path / "prof", profile_rows(version="3.0"), {0: RANK0})
    assert main(["report", str(d)]) == 2
    captured = capsys.readouterr()
    assert captured.err == "pathscope: profile format 3.0 is newer than this pathscope " \
                           "(reads 2.x)\n"
    assert captured.out == ""


def test_cli_report_missing_directory(tmp_path, capsys):
    assert main(["report", str(tmp_path / "nope")]) == 2
    assert capsys.readouterr().err == f"pathscope: profile directory not found: " \
                                      f"{tmp_path / 'nope'}\n"


def test_time_split_warns_when_the_tree_does_not_add_up(tmp_path):
    d = copy_hybrid(tmp_path / "prof")
    path = d / "ranks" / "rank-000000.tsv"
    path.write_text(path.read_text().replace("thread\t1\t4105\t1500000000\t145\t0\t0\t0\t7\n",
                                             "thread\t1\t4105\t1500000100\t145\t0\t0\t0\t9\n"))
    section = render(load_profile(d)).split("\n\nTime split")[1].split("\n\n")[0].splitlines()
    assert section[-3:] == [
        "  WARNING: rank 0: the call tree holds 100 ns less than its threads' elapsed time "
        "(allowed: 1 ns per node, 25 ns)",
        "  WARNING: rank 0 thread 1: 9 nodes declared, 7 read",
        "  per rank: over the 2 ranks with call paths; a rank without a value counts as 0; "
        "(rank) is the lowest on ties"]


def test_status_words_for_every_ending():
    from pathscope.report.text import describe_status
    assert describe_status("abort 3") == "called MPI_Abort (error code 3)"
    assert describe_status("ended-by-rank 1") == (
        "stopped when rank 1 ended the job (its data up to then was written)")
    assert describe_status("signal 11") == "killed by signal 11 (SIGSEGV)"
    assert describe_status("exit-without-finalize") == "exited without calling MPI_Finalize"
