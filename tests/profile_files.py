"""The rank texts of a profile directory, as the tests read them (docs/format.md): a rank's
`ranks/rank-NNNNNN.tsv` when there is one, else its section of `ranks.tsv` (format 2.10: the
rank files of `--per-rank all` written together with MPI-IO).  A run that reached
MPI_Finalize leaves either layout (ranks.tsv, or one file per rank when MPI-IO could not be
used), so tests of such runs read their ranks through here and pass with both.

This is the tests' oracle, independent of pathscope.reader: it trusts the index and checks
only what it needs (head lines, contiguous sections, the file's size).

    from profile_files import rank_text, rank_texts
    text = rank_text(out, 0)                    # "pathscope-rank\t2.10\nrun\t...\nend\n"
"""
import os
from pathlib import Path

RANKS_FILE = "ranks.tsv"
RANKS_DIR = "ranks"


def rank_file_name(rank: int) -> str:
    return f"rank-{rank:06d}.tsv"


def rank_file_names(outdir) -> list:
    """The rank files in DIR/ranks (rank-*.tsv, sorted; hidden temporaries left out)."""
    ranks = Path(outdir) / RANKS_DIR
    if not ranks.is_dir():
        return []
    return sorted(f.name for f in ranks.iterdir() if f.name.startswith("rank-")
                  and f.name.endswith(".tsv"))


def ranks_tsv_index(outdir) -> dict:
    """rank -> (offset in the file, length) of each section of DIR/ranks.tsv; {} without
    one.  AssertionError when its head or size breaks the format's rules."""
    path = Path(outdir) / RANKS_FILE
    if not path.exists():
        return {}
    sections = {}
    with open(path, "rb") as f:
        head = [f.readline().rstrip(b"\n").split(b"\t") for _ in range(3)]
        assert head[0][0] == b"pathscope-ranks" and head[1][0] == b"run" and \
            head[2][0] == b"ranks", head
        size = int(head[2][1])
        offset = 0
        while True:
            line = f.readline()
            assert line.endswith(b"\n"), f"{path}: cut short in its head"
            fields = line.rstrip(b"\n").split(b"\t")
            if fields == [b"data"]:
                break
            assert fields[0] == b"index" and len(fields) >= 4, line
            rank, at, length = (int(x) for x in fields[1:4])
            assert rank < size and rank not in sections and at == offset and length > 0, line
            sections[rank] = (at, length)
            offset += length
        start = f.tell()
    assert os.path.getsize(path) == start + offset, f"{path}: size is not its index's"
    return {rank: (start + at, length) for rank, (at, length) in sections.items()}


def _section(outdir, offset: int, length: int) -> str:
    with open(Path(outdir) / RANKS_FILE, "rb") as f:
        f.seek(offset)
        data = f.read(length)
    assert len(data) == length
    return data.decode("utf-8", errors="replace")


def has_rank_text(outdir, rank: int) -> bool:
    return (Path(outdir) / RANKS_DIR / rank_file_name(rank)).exists() or \
        rank in ranks_tsv_index(outdir)


def rank_text(outdir, rank: int) -> str:
    """Rank's text: its ranks/ file if present, else its section of ranks.tsv.
    FileNotFoundError when it has neither."""
    own = Path(outdir) / RANKS_DIR / rank_file_name(rank)
    if own.exists():
        return own.read_text(errors="replace")
    index = ranks_tsv_index(outdir)
    if rank not in index:
        raise FileNotFoundError(f"{outdir}: rank {rank} has no {RANKS_DIR}/"
                                f"{rank_file_name(rank)} and no section in {RANKS_FILE}")
    return _section(outdir, *index[rank])


def rank_texts(outdir) -> dict:
    """rank -> text of every rank that has one (ranks/ files over sections)."""
    texts = {rank: _section(outdir, *where) for rank, where in ranks_tsv_index(outdir).items()}
    for name in rank_file_names(outdir):
        digits = name[len("rank-"):-len(".tsv")]
        if digits.isdigit():
            texts[int(digits)] = (Path(outdir) / RANKS_DIR / name).read_text(errors="replace")
    return dict(sorted(texts.items()))


def rank_text_size(outdir, rank: int) -> int:
    """The bytes of rank's text (its file, or its section)."""
    own = Path(outdir) / RANKS_DIR / rank_file_name(rank)
    if own.exists():
        return own.stat().st_size
    return ranks_tsv_index(outdir)[rank][1]


def check_rank_layout(outdir, nranks: int) -> None:
    """The rank texts a run of nranks that reached MPI_Finalize leaves: ranks.tsv with a
    section per rank and no rank file, or (MPI-IO not usable) a file per rank."""
    names = rank_file_names(outdir)
    if (Path(outdir) / RANKS_FILE).exists():
        assert sorted(ranks_tsv_index(outdir)) == list(range(nranks)) and names == [], names
    else:
        assert names == [rank_file_name(r) for r in range(nranks)], names
