"""Reads tree.tsv, the call trees of every rank merged inside the job (docs/format.md,
"tree.tsv (format 2.9)"), into plain records; pathscope.calltree makes the tree of them.

    tree = read_tree_tsv(dir_fd, "prof/tree.tsv")
    tree.ranks, tree.columns, tree.nodes[0].stats["incl_time"].max_rank
    tree.scalars["thread.elapsed_ns"].sum

Rules kept here (the reader's duties, as for the rank files):
- Read relative to the profile directory's descriptor, never through a symbolic link, within
  the limits of pathscope.tsv (16 MiB a line, 256 MiB the file); a newer major format
  is refused (FormatVersionError); unknown line types and trailing fields are ignored; a
  column the `columns` line declares but this reader does not know is kept and unused.
- A file that breaks a rule, or has no `end` line, is not used: ProfileError naming file,
  line and rule.  The run id (line 2) is the caller's to compare with profile.tsv's.
- Every statistic is checked against its population P (the `ranks` line): MIN <= MAX <= SUM,
  ranks below P, NONZERO <= P and equal to the ranks the sketch counts, MIN = 0 when a rank
  has 0, MAX in the sketch's highest bin, MIN in its lowest.  Since format 2.14 a statistic
  leaves out what follows from the rest (`=V`, NONZERO and MAX's bin implied, consecutive bins
  by their counts, `@COLUMN` for an earlier column of the line): it is read into the same
  Stats as the whole form of earlier versions, which is still read by the file's version.
- Nodes: ids dense from 0, a parent before its children, at most MAX_DEPTH levels; roots are
  `root` nodes without a parent (node 0 `app`, then `runtime`); a `pcomm` node is a child of
  an `mpi` node.
Nothing here prints or exits.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from pathscope.cct import MAX_DEPTH, MAX_ID, MPI, ROOT, Module
from pathscope.errors import ProfileError
from pathscope.stats import SKETCH_BINS, Stats
from pathscope.tsv import (MAX_WORLD_SIZE, Record, _shown, open_in_directory, parse_count,
                           read_records, version_at_least)

TREE_FILE = "tree.tsv"
TREE_MAGIC = "pathscope-tree"
PCOMM = "pcomm"               # an `mpi` node's part on one communicator (a child node)
APP_ROOT, RUNTIME_ROOT = "app", "runtime"
INCLUSIVE = ("incl_time", "incl_mpi", "incl_offcpu")   # per-rank inclusive columns
STATS_FIELDS = "SUM,MIN,MIN_RANK,MAX,MAX_RANK,NONZERO,BINS"      # 2.14
OLD_FIELDS = "SUM,MIN,MIN_RANK,MAX,MAX_RANK,NONZERO,SKETCH"      # 2.9 to 2.13
COMPACT_FORMAT = (2, 14)      # statistics: =V, NONZERO left out for every rank, bins implied


@dataclass(slots=True)
class TreeNode:
    id: int
    parent: Optional[int]
    kind: str
    module: Optional[int]         # module id of this file
    address: Optional[int]
    name: str                     # "" for `-`
    stats: dict[str, Stats]       # column name -> statistics (columns 0 on every rank absent)
    depth: int = 0


@dataclass
class TreeProbe:
    id: int
    module: int
    address: int
    name: str
    file: str
    line: int


@dataclass
class ReducedTree:
    """What tree.tsv holds."""
    name: str                     # the file as messages show it
    version: str
    run: Optional[str]
    ranks: int                    # P
    columns: list[str]
    modules: dict[int, Module]
    strings: dict[str, list[tuple[int, str]]]   # key -> (ranks with the value, value)
    warnings: list[tuple[str, int, int, str]]   # key, ranks, count, text of the lowest rank
    scalars: dict[str, Stats]
    probes: dict[int, TreeProbe]
    nodes: list[TreeNode]
    # --per-rank summary: node id -> column -> each rank's value (the heaviest paths only)
    rank_vectors: dict[int, dict[str, list[int]]] = field(default_factory=dict)


def _bad(record: Record, index: int, why: str) -> ProfileError:
    return ProfileError(f"{record.where}: '{record.kind}' line: field {index + 2} {why}")


def _count(record: Record, index: int, what: str, text: str) -> int:
    try:
        return parse_count(text)
    except ValueError as e:
        raise _bad(record, index, f"({what}): {e}") from None


def _sketch(record: Record, index: int, what: str, text: str) -> tuple[tuple[int, int], ...]:
    """Before 2.14: every non-empty bin as K:COUNT, or `-`."""
    if text == "-":
        return ()
    bins: dict[int, int] = {}
    for pair in text.split(";"):
        k, sep, n = pair.partition(":")
        if not sep:
            raise _bad(record, index, f"({what}): sketch '{_shown(text)}' is not K:COUNT;...")
        k_value = _count(record, index, what, k)
        if not 1 <= k_value <= SKETCH_BINS:
            raise _bad(record, index, f"({what}): sketch bin {k_value} is not 1 to "
                                      f"{SKETCH_BINS}")
        if k_value in bins:
            raise _bad(record, index, f"({what}): sketch bin {k_value} given twice")
        bins[k_value] = _count(record, index, what, n)
    return tuple(sorted(bins.items()))


def _bins(record: Record, index: int, what: str, text: str, low: int, high: int,
          nonzero: int) -> tuple[tuple[int, int], ...]:
    """(2.14) The bins below MAX's, `K:COUNT`, or COUNT alone for the bin one above the one
    before (before the first: MIN's bin, when MIN > 0); MAX's bin holds the rest of NONZERO."""
    top = high.bit_length()
    before = low.bit_length() - 1 if low else None
    bins: list[tuple[int, int]] = []
    for item in text.split(";") if text else ():
        k, sep, n = item.partition(":")
        if sep:
            k_value = _count(record, index, what, k)
        elif before is None:
            raise _bad(record, index, f"({what}): sketch '{_shown(text)}' does not name its "
                                      f"first bin (K:COUNT), as MIN 0 needs")
        else:
            k_value, n = before + 1, k
        lowest = 1 if before is None else before + 1
        if k_value < lowest:
            raise _bad(record, index, f"({what}): sketch bin {k_value} is below {lowest}")
        if k_value >= top:
            raise _bad(record, index, f"({what}): sketch bin {k_value} is not below MAX's "
                                      f"bin {top}")
        count = _count(record, index, what, n)
        if not count:
            raise _bad(record, index, f"({what}): sketch bin {k_value} counts no rank")
        bins.append((k_value, count))
        before = k_value
    if nonzero:
        below = sum(n for _, n in bins)
        if below >= nonzero:
            raise _bad(record, index, f"({what}): the sketch counts {below} ranks below MAX's "
                                      f"bin, NONZERO is {nonzero}")
        bins.append((top, nonzero - below))
    return tuple(bins)


def _number(record: Record, index: int, what: str, text: str) -> int:
    return (int(text) if text.isdigit() and text.isascii() and len(text) < 20 else
            _count(record, index, what, text))


def parse_stats(record: Record, index: int, what: str, text: str, ranks: int,
                compact: bool = True) -> Stats:
    """One statistic over ranks ranks, checked (what names the value in messages): (2.14,
    compact) `=V`, or SUM,MIN,MIN_RANK,MAX,MAX_RANK,NONZERO,BINS with NONZERO empty for every
    rank; before 2.14 SUM,MIN,MIN_RANK,MAX,MAX_RANK,NONZERO,SKETCH."""
    if compact and text.startswith("="):
        value = _number(record, index, what, text[1:])
        return Stats(value * ranks, ranks, value, 0, value, 0, ranks if value else 0,
                     ((value.bit_length(), ranks),) if value else ())
    parts = text.split(",")
    if len(parts) != 7:
        raise _bad(record, index, f"({what}): statistics '{_shown(text)}' have {len(parts)} "
                                  f"fields, expected "
                                  + (f"=VALUE or 7 ({STATS_FIELDS})" if compact else
                                     f"7 ({OLD_FIELDS})"))
    total, low, low_rank, high, high_rank = (_number(record, index, what, p) for p in parts[:5])
    if not compact:
        nonzero = _number(record, index, what, parts[5])
        sketch = _sketch(record, index, what, parts[6])
    else:
        if parts[5]:
            nonzero = _number(record, index, what, parts[5])
        elif low:
            nonzero = ranks
        else:
            raise _bad(record, index, f"({what}): NONZERO left out (every rank) with MIN 0")
        sketch = _bins(record, index, what, parts[6], low, high, nonzero)
    why = _broken(total, low, low_rank, high, high_rank, nonzero, sketch, ranks)
    if why:
        raise _bad(record, index, f"({what}): {why}")
    return Stats(total, ranks, low, low_rank, high, high_rank, nonzero, sketch)


def _broken(total: int, low: int, low_rank: int, high: int, high_rank: int, nonzero: int,
            sketch: tuple[tuple[int, int], ...], ranks: int) -> str:
    """The first rule a statistic breaks, or ""."""
    if low > high:
        return f"MIN {low} is larger than MAX {high}"
    if high > total:
        return f"MAX {high} is larger than SUM {total}"
    for name, r in (("MIN_RANK", low_rank), ("MAX_RANK", high_rank)):
        if r >= ranks:
            return f"{name} {r} is not one of the {ranks} ranks"
    if nonzero > ranks:
        return f"NONZERO {nonzero} is more than the {ranks} ranks"
    counted = sum(n for _, n in sketch)
    if counted != nonzero:
        return f"the sketch counts {counted} ranks, NONZERO is {nonzero}"
    if nonzero < ranks and low:
        return f"MIN {low} while {ranks - nonzero} ranks have 0"
    if (high == 0) != (nonzero == 0):
        return f"MAX {high} with NONZERO {nonzero}"
    if sketch and sketch[-1][0] != high.bit_length():
        return f"MAX {high} is not in the sketch's highest bin {sketch[-1][0]}"
    if low and sketch and sketch[0][0] != low.bit_length():
        return f"MIN {low} is not in the sketch's lowest bin {sketch[0][0]}"
    return ""


class _Parser:
    def __init__(self, name: str):
        self.tree = ReducedTree(name, "", None, 0, [], {}, {}, [], {}, {}, [])
        self.declared: set[str] = set()
        self.compact = True           # statistics of format 2.14 (set from the first line)

    def handlers(self) -> dict:
        return {"run": self.run, "ranks": self.ranks, "columns": self.columns,
                "module": self.module, "string": self.string, "warning": self.warning,
                "scalar": self.scalar, "probe": self.probe, "node": self.node,
                "rankvec": self.rankvec}

    def need_ranks(self, record: Record) -> int:
        if not self.tree.ranks:
            raise ProfileError(f"{record.where}: '{record.kind}' line before the 'ranks' line")
        return self.tree.ranks

    def run(self, record: Record) -> None:
        from pathscope.reader import RUN_ID        # the reader imports this module
        if record.line != 2:
            raise ProfileError(f"{record.where}: 'run' line not on line 2")
        record.need(1)
        self.tree.run = record.word(0, RUN_ID, "a run id (32 lowercase hex digits)")

    def ranks(self, record: Record) -> None:
        record.need(1)
        if self.tree.ranks:
            raise ProfileError(f"{record.where}: 'ranks' line given twice")
        count = record.number(0, MAX_WORLD_SIZE)
        if count == 0:
            raise ProfileError(f"{record.where}: 'ranks' line: 0 ranks")
        self.tree.ranks = count

    def columns(self, record: Record) -> None:
        if self.tree.columns:
            raise ProfileError(f"{record.where}: 'columns' line given twice")
        names = [record.text(i) for i in range(len(record.fields))]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ProfileError(f"{record.where}: 'columns' line: column '{_shown(repeated[0])}' "
                               f"given twice")
        self.tree.columns = names
        self.declared = set(names)

    def module(self, record: Record) -> None:
        record.need(3)
        module_id = record.number(0, MAX_ID)
        if module_id in self.tree.modules:
            raise ProfileError(f"{record.where}: module {module_id} given twice")
        build_id = record.text(2)
        self.tree.modules[module_id] = Module(module_id, record.text(1),
                                              "" if build_id == "-" else build_id)

    def string(self, record: Record) -> None:
        record.need(3)
        count = record.number(1, self.need_ranks(record))
        self.tree.strings.setdefault(record.text(0), []).append((count, record.text(2)))

    def warning(self, record: Record) -> None:
        record.need(4)
        self.tree.warnings.append((record.text(0), record.number(1, self.need_ranks(record)),
                                   record.number(2), record.text(3)))

    def scalar(self, record: Record) -> None:
        record.need(2)
        name = record.text(0)
        if name in self.tree.scalars:
            raise ProfileError(f"{record.where}: scalar '{_shown(name)}' given twice")
        self.tree.scalars[name] = parse_stats(record, 1, name, record.fields[1],
                                              self.need_ranks(record), self.compact)

    def probe(self, record: Record) -> None:
        record.need(6)
        probe_id = record.number(0, MAX_ID)
        module_id = record.number(1, MAX_ID)
        if module_id not in self.tree.modules:
            raise _bad(record, 1, f"names module {module_id}, which has no 'module' line")
        if probe_id in self.tree.probes:
            raise ProfileError(f"{record.where}: probe {probe_id} given twice")
        self.tree.probes[probe_id] = TreeProbe(probe_id, module_id, record.hex_number(2),
                                               record.text(3), _dash(record.text(4)),
                                               record.number(5, MAX_ID))

    def node(self, record: Record) -> None:
        record.need(6)
        ranks = self.need_ranks(record)
        nodes = self.tree.nodes
        node_id = record.number(0, MAX_ID)
        if node_id != len(nodes):
            raise _bad(record, 0, f"node id {node_id} out of order (expected {len(nodes)}: "
                                  f"ids are dense from 0, in file order)")
        kind = record.text(2)
        parent: Optional[int] = None
        depth = 0
        if record.fields[1] == "-":
            if kind != ROOT:
                raise _bad(record, 1, f"'-': a '{_shown(kind)}' node needs a parent")
        else:
            parent = record.number(1, MAX_ID)
            if parent >= node_id:
                raise _bad(record, 1, f"parent {parent} does not come before node {node_id}")
            depth = nodes[parent].depth + 1
            if depth > MAX_DEPTH:
                raise ProfileError(f"{record.where}: node {node_id} is more than {MAX_DEPTH} "
                                   f"levels below its root")
            if kind == PCOMM and nodes[parent].kind != MPI:
                raise _bad(record, 1, f"a 'pcomm' node's parent {parent} is not an 'mpi' node")
        module: Optional[int] = None
        if record.fields[3] != "-":
            module = record.number(3, MAX_ID)
            if module not in self.tree.modules:
                raise _bad(record, 3, f"names module {module}, which has no 'module' line")
        address = None if record.fields[4] == "-" else record.hex_number(4)
        # a communicator's name may be `-` (operations bound to none): a pcomm keeps it
        name = record.text(5) if kind == PCOMM else _dash(record.text(5))
        stats: dict[str, Stats] = {}
        for i in range(6, len(record.fields)):
            column, sep, text = record.fields[i].partition("=")
            if not sep:
                raise _bad(record, i, f"'{_shown(record.fields[i])}' is not NAME=STATISTICS")
            if column not in self.declared:
                raise _bad(record, i, f"column '{_shown(column)}' is not on the 'columns' line")
            if column in stats:
                raise _bad(record, i, f"column '{_shown(column)}' given twice")
            if self.compact and text.startswith("@"):     # (2.14) an earlier column's
                same = stats.get(text[1:])
                if same is None:
                    raise _bad(record, i, f"({column}): '{_shown(text)}' names no column "
                                          f"before it on the line")
                stats[column] = same
                continue
            stats[column] = parse_stats(record, i, column, text, ranks, self.compact)
        nodes.append(TreeNode(node_id, parent, kind, module, address, name, stats, depth))


    def rankvec(self, record: Record) -> None:
        """One column of one node, rank by rank; it must agree with the node's statistics."""
        record.need(3)
        ranks = self.need_ranks(record)
        node_id = record.number(0, MAX_ID)
        if node_id >= len(self.tree.nodes):
            raise _bad(record, 0, f"names node {node_id}, which has no 'node' line before it")
        column = record.text(1)
        stats = self.tree.nodes[node_id].stats.get(column)
        if stats is None:
            raise _bad(record, 1, f"node {node_id} has no column '{_shown(column)}'")
        texts = record.fields[2].split(",")
        if len(texts) != ranks:
            raise _bad(record, 2, f"{len(texts)} values for {ranks} ranks")
        values = [_count(record, 2, column, text) for text in texts]
        if (sum(values) != stats.total or max(values) != stats.max
                or values.index(stats.max) != stats.max_rank):
            raise _bad(record, 2, f"the values do not agree with node {node_id}'s {column} "
                                  f"statistics")
        vectors = self.tree.rank_vectors.setdefault(node_id, {})
        if column in vectors:
            raise ProfileError(f"{record.where}: 'rankvec' of node {node_id}, column "
                               f"'{_shown(column)}' given twice")
        vectors[column] = values


def _dash(text: str) -> str:
    return "" if text == "-" else text


def read_tree_tsv(directory_fd: int, name: str) -> ReducedTree:
    """tree.tsv of the directory, checked; ProfileError (FormatVersionError for a newer
    major format, RefusedFile for a link, a file that is not regular, or one too large)."""
    parser = _Parser(name)

    def on_version(version: str) -> None:
        parser.tree.version = version
        parser.compact = version_at_least(version, *COMPACT_FORMAT)

    with open_in_directory(directory_fd, TREE_FILE, name, TREE_MAGIC) as source:
        info = read_records(source, name, TREE_MAGIC, parser.handlers(),
                            on_version=on_version)
    tree = parser.tree
    if not info.has_end:
        raise ProfileError(f"{name} has no 'end' line (cut short)")
    if tree.run is None:
        raise ProfileError(f"{name} has no run line")
    if not tree.ranks:
        raise ProfileError(f"{name} has no 'ranks' line")
    if tree.nodes and tree.nodes[0].name != APP_ROOT:     # none: a run without call paths
        raise ProfileError(f"{name}: node 0 is not the root '{APP_ROOT}'")
    return tree
