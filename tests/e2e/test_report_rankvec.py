"""The rank vectors of a real run under `--per-rank summary` (tests/programs/reduce_known.c,
8 ranks, both MPIs) in `pathscope report` (the section "Ranks of the heaviest paths") and
`pathscope export --table rankvec`: the values known per rank come out exactly (the ring's
MPI_Sendrecv bytes, 8 (r + 1) sent and 8 (left + 1) received; r % 2 + 1 MPI_Allreduce)."""
import csv
import io
import re
import subprocess

from conftest import ROOT
from pathscope.reader import load_profile

NP = 8
PATHSCOPE = str(ROOT / "bin" / "pathscope")


def cells(line):
    """A table row's cells (columns are apart by two spaces or more)."""
    return re.split(r"\s{2,}", line.strip())


def test_report_and_export_show_each_rank_s_known_values(mpi, tmp_path):
    prof = tmp_path / "prof"
    mpi.run(NP, [mpi.prog("reduce_known")], prof, pathscope_args=["--per-rank", "summary"])
    paths = len(load_profile(prof).tree.rank_vectors)
    report = subprocess.run([PATHSCOPE, "report", str(prof)], capture_output=True, text=True,
                            timeout=120, check=True).stdout
    section = report.split("\nRanks of the heaviest paths")[1].split("\n\n")[0].splitlines()
    assert section[0] == f" (--per-rank summary: each rank's value, {paths} paths)"
    assert section[2] == ("  ranks: ranks 0-7 left to right, one character each; ▁ to █: from 0 "
                          "to the row's max (a share: to 100%), blank: 0")
    assert section[3] == "  Time: the 10 paths with the most inclusive time below main"
    assert cells(section[4]) == ["value", "total", "min (rank)", "median", "p90", "max (rank)",
                                 "max/mean", ">mean+10%", "ranks", "call path"]
    assert [cells(line)[0] for line in section[5:]].count("time") == 10
    counts = section[section.index(next(line for line in section if line.startswith(
        "  MPI calls whose visits or bytes differ between ranks"))) + 2:]
    rows = {}
    for line, following in zip(counts, counts[1:] + [""]):
        if line.startswith("  visits"):
            *values, label = cells(line)
            rows[re.sub(r" \(reduce_known\.c:\d+\)$", "", label)] = (values, cells(following))
    # r % 2 + 1 calls of 4 bytes: ranks 1, 3, 5, 7 make two
    assert rows["main > row_phase > MPI_Allreduce"] == (
        ["visits", "12", "1 (0)", "1", "2", "2 (1)", "1.33", "4: 1,3,5,7", "▄█▄█▄█▄█"],
        ["bytes", "48 B", "4 B (0)", "4 B", "8 B", "8 B (1)", "1.33", "4: 1,3,5,7", "▄█▄█▄█▄█"])
    # 8 (r + 1) + 8 (left + 1) bytes: 72 24 40 56 72 88 104 120, the mean 72
    assert rows["main > ring > MPI_Sendrecv"] == (
        ["visits", "8", "1 (0)", "1", "1", "1 (0)", "1.00", "-", "████████"],
        ["bytes", "576 B", "24 B (1)", "72 B", "120 B", "120 B (7)", "1.67", "3: 5-7",
         "▅▂▃▄▅▆▇█"])

    out = subprocess.run([PATHSCOPE, "export", str(prof), "--table", "rankvec"],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    table = list(csv.DictReader(io.StringIO(out)))
    assert len({row["node"] for row in table}) == paths

    def values(path_end, column):
        found = [row for row in table
                 if row["path"].endswith(path_end) and row["column"] == column]
        assert [row["rank"] for row in found] == [str(r) for r in range(NP)]
        return [row["value"] for row in found], {row["unit"] for row in found}

    assert values(";ring;MPI_Sendrecv", "bytes") == (
        [str(8 * (r + 1) + 8 * ((r - 1) % NP + 1)) for r in range(NP)], {"bytes"})
    assert values(";row_phase;MPI_Allreduce", "visits") == (
        [str(r % 2 + 1) for r in range(NP)], {"count"})
    root = [row for row in table if row["node"] == "0" and row["column"] == "incl_time"]
    assert [(row["root"], row["path"], row["unit"], row["rank"]) for row in root] == [
        ("app", "", "s", str(r)) for r in range(NP)]
    assert all(float(row["value"]) > 0 for row in root)
