"""Small hand-written profile directories (docs/format.md, format 1.0) for the unit tests.

SAMPLE is a 3-rank run on hosts node01 (rank 0) and node02 (ranks 1-2).  Its profile.tsv is
what the in-job reduction gives for the three rank files (worked out by hand, see the comments
in SAMPLE_OPS), so the reader must produce the same ops and comms from either source.
"""
from pathlib import Path
from typing import Iterable, Sequence

START = 1700000000000000000


def tsv_text(rows: Iterable[Sequence[object]]) -> str:
    return "".join("\t".join(str(f) for f in row) + "\n" for row in rows)


def rank_rows(rank, size, status, host, wall_ns, mpi_ns, comms=(), ops=(), counters=None,
              end=True, version="1.0", program="my\\tapp", extra=()):
    counters = {**dict(unknown_requests=0, request_table_full=0, comm_table_full=0,
                       unknown_comms=0, alloc_failures=0), **(counters or {})}
    rows = [("pathscope-rank", version), ("rank", rank), ("size", size), ("status", status),
            ("host", host), ("pid", 1000 + rank), ("program", program),
            ("start_unix_ns", START + rank), ("wall_ns", wall_ns), ("mpi_ns", mpi_ns),
            ("thread_multiple", 0)]
    rows += [(f"counter_{k}", v) for k, v in counters.items()]
    rows += [("comm",) + tuple(c) for c in comms]
    rows += [("op",) + tuple(o) for o in ops]
    rows += list(extra)
    if end:
        rows.append(("end",))
    return rows


# comm lines of a rank file: name size remote_size my_rank parent creator freed members
#                            topology sent_msgs sent_bytes recv_msgs recv_bytes
RANK0 = rank_rows(
    0, 3, "complete", "node01", 2_000_000_000, 500_000_000,
    comms=[("-", 0, 0, 0, "-", "-", 0, "-", "-", 0, 0, 0, 0),
           ("W", 3, 0, 0, "-", "-", 0, "0-2", "-", 2, 2048, 1, 1024),
           ("S.0", 1, 0, 0, "-", "-", 0, "0", "-", 0, 0, 0, 0),
           ("W_s1.0", 2, 0, 0, "W", "MPI_Comm_split", 1, "0-1", "-", 1, 100, 1, 100)],
    ops=[("-", "MPI_Wtime", 10, 0, 1000, "-"),
         ("W", "MPI_Send", 2, 2048, 300_000_000, "11:2"),
         ("W", "MPI_Recv", 1, 1024, 100_000_000, "11:1"),
         ("W", "MPI_Comm_split", 1, 0, 40_000_000, "-"),
         ("W_s1.0", "MPI_Send", 1, 100, 50_000, "7:1"),
         ("W_s1.0", "MPI_Recv", 1, 100, 60_000, "7:1")])
RANK1 = rank_rows(
    1, 3, "complete", "node02", 2_100_000_000, 700_000_000,
    comms=[("-", 0, 0, 0, "-", "-", 0, "-", "-", 0, 0, 0, 0),
           ("W", 3, 0, 1, "-", "-", 0, "0-2", "-", 1, 1024, 1, 1024),
           ("S.1", 1, 0, 0, "-", "-", 0, "1", "-", 0, 0, 0, 0),
           ("W_s1.0", 2, 0, 1, "W", "MPI_Comm_split", 1, "0-1", "-", 1, 100, 1, 100)],
    ops=[("-", "MPI_Wtime", 5, 0, 1000, "-"),
         ("W", "MPI_Send", 1, 1024, 200_000_000, "11:1"),
         ("W", "MPI_Recv", 1, 1024, 300_000_000, "11:1"),
         ("W", "MPI_Comm_split", 1, 0, 40_000_000, "-"),
         ("W_s1.0", "MPI_Send", 1, 100, 70_000, "7:1"),
         ("W_s1.0", "MPI_Recv", 1, 100, 40_000, "7:1")])
RANK2 = rank_rows(
    2, 3, "complete", "node02", 1_900_000_000, 100_000_000,
    comms=[("-", 0, 0, 0, "-", "-", 0, "-", "-", 0, 0, 0, 0),
           ("W", 3, 0, 2, "-", "-", 0, "0-2", "-", 0, 0, 1, 1024),
           ("S.2", 1, 0, 0, "-", "-", 0, "2", "-", 0, 0, 0, 0),
           ("W_s1.2", 1, 0, 0, "W", "MPI_Comm_split", 0, "2",
            "cart ndims=1 dims=1 periods=0 reorder=0", 0, 0, 0, 0)],
    ops=[("W", "MPI_Recv", 1, 1024, 100_000_000, "11:1"),
         ("W", "MPI_Comm_split", 1, 0, 10_000_000, "-"),
         ("W_s1.2", "MPI_Comm_free", 1, 0, 500, "-")])

# op lines of profile.tsv: comm op calls bytes time_sum time_min rank_min time_max rank_max
#                          nranks hist
SAMPLE_OPS = [
    # totals per rank: Send r0 3 calls/2148 B/300.05 ms, r1 2/1124/200.07 ms
    ("*", "MPI_Comm_free", 1, 0, 500, 500, 2, 500, 2, 1, "-"),
    ("*", "MPI_Comm_split", 3, 0, 90_000_000, 10_000_000, 2, 40_000_000, 0, 3, "-"),
    # Recv r0 2/1124/100.06 ms, r1 2/1124/300.04 ms, r2 1/1024/100 ms
    ("*", "MPI_Recv", 5, 3272, 500_100_000, 100_000_000, 2, 300_040_000, 1, 3, "7:2,11:3"),
    ("*", "MPI_Send", 5, 3272, 500_120_000, 200_070_000, 1, 300_050_000, 0, 2, "7:2,11:3"),
    ("*", "MPI_Wtime", 15, 0, 2000, 1000, 0, 1000, 0, 2, "-"),
    ("-", "MPI_Wtime", 15, 0, 2000, 1000, 0, 1000, 0, 2, "-"),
    ("W", "MPI_Comm_split", 3, 0, 90_000_000, 10_000_000, 2, 40_000_000, 0, 3, "-"),
    ("W", "MPI_Recv", 3, 3072, 500_000_000, 100_000_000, 0, 300_000_000, 1, 3, "11:3"),
    ("W", "MPI_Send", 3, 3072, 500_000_000, 200_000_000, 1, 300_000_000, 0, 2, "11:3"),
    ("W_s1.0", "MPI_Recv", 2, 200, 100_000, 40_000, 1, 60_000, 0, 2, "7:2"),
    ("W_s1.0", "MPI_Send", 2, 200, 120_000, 50_000, 0, 70_000, 1, 2, "7:2"),
    ("W_s1.2", "MPI_Comm_free", 1, 0, 500, 500, 2, 500, 2, 1, "-"),
]
# comm lines of profile.tsv: name size remote_size parent creator freed members topology
#                            sent_msgs sent_bytes recv_msgs recv_bytes
SAMPLE_COMMS = [
    ("-", 0, 0, "-", "-", 0, "-", "-", 0, 0, 0, 0),
    # (no S.r: MPI_COMM_SELF no rank used, only in the rank files since format 2.10)
    ("W", 3, 0, "-", "-", 0, "0-2", "-", 3, 3072, 3, 3072),
    ("W_s1.0", 2, 0, "W", "MPI_Comm_split", 1, "0-1", "-", 2, 200, 2, 200),
    ("W_s1.2", 1, 0, "W", "MPI_Comm_split", 0, "2", "cart ndims=1 dims=1 periods=0 reorder=0",
     0, 0, 0, 0),
]


def with_run(rows, run, version="2.3"):
    """Format 2.3 rows: the version, and the run line as line 2."""
    rows = [(rows[0][0], version)] + [("run", run)] + list(rows[1:]) if run else \
        [(rows[0][0], version)] + list(rows[1:])
    return rows


def profile_rows(comms=SAMPLE_COMMS, ops=SAMPLE_OPS, version="1.0", nranks=3, extra=(),
                 end=True):
    rows = [("pathscope-profile", version), ("tool_version", "0.1.0"),
            ("program", "my\\tapp"),
            ("command", "mpirun -np 3 ./my\\tapp --name \"a\\\\b\" --text line1\\nline2"),
            ("mpi_library", "Open MPI v4.1.4, package: Debian OpenMPI"),
            ("nranks", nranks), ("start_unix_ns", START),
            ("rank", 0, "node01", 2_000_000_000, 500_000_000),
            ("rank", 1, "node02", 2_100_000_000, 700_000_000),
            ("rank", 2, "node02", 1_900_000_000, 100_000_000)]
    rows = rows[: 7 + nranks] if nranks < 3 else rows
    rows += [("comm",) + tuple(c) for c in comms]
    rows += [("op",) + tuple(o) for o in ops]
    rows += list(extra)
    if end:
        rows.append(("end",))
    return rows


def write_profile(directory: Path, profile=None, ranks=None) -> Path:
    """Writes profile.tsv (rows, or None for none) and ranks/rank-NNNNNN.tsv ({rank: rows})."""
    directory.mkdir(parents=True, exist_ok=True)
    if profile is not None:
        (directory / "profile.tsv").write_text(tsv_text(profile))
    if ranks:
        (directory / "ranks").mkdir(exist_ok=True)
        for rank, rows in ranks.items():
            (directory / "ranks" / f"rank-{rank:06d}.tsv").write_text(tsv_text(rows))
    return directory


def write_sample(directory: Path, with_profile=True) -> Path:
    return write_profile(directory, profile_rows() if with_profile else None,
                         {0: RANK0, 1: RANK1, 2: RANK2})


# ---- call paths (format 2.0) ------------------------------------------------------------------
# tests/python/data/hybrid: a 2-rank run of a "solver" with 2 threads per rank, written by hand
# (data/hybrid/README.md has the tree and the numbers), with its profile.tsv and symbols.tsv.
HYBRID = Path(__file__).parent / "data" / "hybrid"


def copy_hybrid(directory: Path, symbols=True, profile=True) -> Path:
    """A writable copy of the hybrid fixture (optionally without symbols.tsv / profile.tsv)."""
    import shutil

    shutil.copytree(HYBRID, directory, ignore=shutil.ignore_patterns("README.md"))
    if not symbols:
        (directory / "symbols.tsv").unlink()
    if not profile:
        (directory / "profile.tsv").unlink()
    return directory


def read_rows(path: Path) -> list[list[str]]:
    return [line.split("\t") for line in path.read_text().splitlines()]


def write_rows(path: Path, rows) -> None:
    path.write_text(tsv_text(rows))


def split_rows(profile, tree):
    """pathscope.frames.ProfileFrames.time_split of tree: part -> its row, whose attributes
    are sum, mean, min, min_rank, max, max_rank (None: not known)."""
    from types import SimpleNamespace
    import pandas as pd
    from pathscope.frames import ProfileFrames
    split = ProfileFrames(profile, tree=tree).time_split().reset_index()
    return {row.pop("part"): SimpleNamespace(**{k: None if pd.isna(v) else v
                                                for k, v in row.items()})
            for row in split.to_dict("records")}
