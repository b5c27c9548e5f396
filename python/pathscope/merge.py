"""The merge rules of the reduction, once: how the records of ranks (and threads) combine.

    merge_op(into, other)          # an `op` record: profile.tsv's fields (reader.OpStat)
    merge_comm(into, other)        # a `comm` record (reader.Comm)
    lowest_group_first(comm)       # an intercommunicator as profile.tsv describes it
    RULES["min_lowest_rank"]((5, 3), (5, 1)) == (5, 1)

The rules are docs/format.md's "Merge rules", the ones the in-job reduction applies
(runtime/output/reduce.c, merge_op and merge_comm): the analysis package merges rank files with
them when profile.tsv is missing, and the call tree's per-rank statistics name ranks with the
same tie rule.  Every rule is associative and commutative, so the result does not depend on the
order in which records arrive (reduce.c merges along a binomial tree, the reader rank by rank).
tests/python/data/reduce_cases.tsv holds cases worked out by hand for both implementations.
Records are any objects with the named attributes; nothing here reads a file.
"""
from __future__ import annotations

from typing import Any, Callable

from pathscope import ranges

RankValue = tuple[int, int]         # (value, world rank)


def _sum(a: int, b: int) -> int:
    return a + b


def _min_lowest_rank(a: RankValue, b: RankValue) -> RankValue:
    """The smaller value and its rank; on equal values the lower rank."""
    return b if b[0] < a[0] or (b[0] == a[0] and b[1] < a[1]) else a


def _max_lowest_rank(a: RankValue, b: RankValue) -> RankValue:
    """The larger value and its rank; on equal values the lower rank."""
    return b if b[0] > a[0] or (b[0] == a[0] and b[1] < a[1]) else a


def _and(a: int, b: int) -> int:
    """1 when both are (a communicator freed by every member), else 0."""
    return int(bool(a and b))


def add_hist(a: dict[int, int], b: dict[int, int]) -> dict[int, int]:
    """Bin by bin sum of two message-size histograms (a new dict)."""
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return out


def _first(a: Any, b: Any) -> Any:
    """The value already there (descriptions every member writes alike)."""
    return a


RULES: dict[str, Callable[[Any, Any], Any]] = {
    "sum": _sum, "min_lowest_rank": _min_lowest_rank, "max_lowest_rank": _max_lowest_rank,
    "and": _and, "hist": add_hist, "first": _first}

# (rule, fields): the rank rules take (value, rank) pairs of two fields
OP_RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("sum", ("calls",)), ("sum", ("bytes",)), ("sum", ("time_sum_ns",)),
    ("min_lowest_rank", ("time_min_ns", "rank_min")),
    ("max_lowest_rank", ("time_max_ns", "rank_max")),
    ("sum", ("nranks",)), ("hist", ("hist",)))
# comm, op: the key; the other fields of a communicator ("first") describe it alike on
# every member once lowest_group_first has ordered an intercommunicator's groups
COMM_RULES: tuple[tuple[str, tuple[str, ...]], ...] = tuple(
    ("sum", (name,)) for name in ("sent_msgs", "sent_bytes", "recv_msgs", "recv_bytes",
                                  "freed_sends", "freed_recvs", "freed_recv_capacity",
                                  "failed_requests", "folded", "memberships")) + (
    ("and", ("freed",)),) + tuple(
    ("first", (name,)) for name in ("size", "remote_size", "parent", "creator", "members",
                                    "topology"))


def merge_fields(into: Any, other: Any, rules: tuple[tuple[str, tuple[str, ...]], ...]) -> None:
    """Merges other into into, field by field."""
    for rule, names in rules:
        merge = RULES[rule]
        if len(names) == 1:
            name = names[0]
            setattr(into, name, merge(getattr(into, name), getattr(other, name)))
        else:
            merged = merge(tuple(getattr(into, n) for n in names),
                           tuple(getattr(other, n) for n in names))
            for name, value in zip(names, merged):
                setattr(into, name, value)


def merge_op(into: Any, other: Any) -> None:
    """Merges other's `op` record (same communicator and operation) into into."""
    merge_fields(into, other, OP_RULES)


def merge_comm(into: Any, other: Any) -> None:
    """Merges other's `comm` record (same name) into into.  A folded row (format 2.8) is
    described by each rank from the communicators it was in: its members are the union, group
    by group (sizes follow), and its topology `mixed` where the ranks' differ."""
    if into.memberships and other.memberships:
        into.members, into.size, into.remote_size = unite_members(into.members, other.members)
        if into.topology != other.topology:
            into.topology = "mixed"
    merge_fields(into, other, COMM_RULES)


def unite_members(a: str, b: str) -> tuple[str, int, int]:
    """The union of two member lists, group by group, sorted: ('0,2', '0|4') ->
    ('0,2|4', 2, 1).  A list cut short (`...`) leaves the union cut short."""
    (groups_a, cut_a), (groups_b, cut_b) = ranges.parse(a), ranges.parse(b)
    inter = len(groups_a) > 1 or len(groups_b) > 1
    out, sizes = [], []
    for k in range(2 if inter else 1):
        members: set[int] = set()
        for spans in (groups_a[k] if k < len(groups_a) else [],
                      groups_b[k] if k < len(groups_b) else []):
            for span in spans:
                members.update(span)
        sizes.append(len(members))
        out.append(ranges.compress(sorted(members), steps=True))
    text = "|".join(out) + (ranges.TRUNCATION_MARK if cut_a or cut_b else "")
    return text, sizes[0], sizes[1] if inter else 0


def lowest_group_first(comm: Any) -> None:
    """An intercommunicator as profile.tsv describes it: the group holding the lowest world
    rank first (rank files write local|remote, which differs between the two sides).  Other
    communicators, and member lists that do not parse, are left as they are."""
    if not comm.is_inter or comm.members.count("|") != 1:
        return
    first, second = comm.members.split("|")
    try:
        a, b = ranges.parse(first)[0][0], ranges.parse(second)[0][0]
    except ValueError:
        return
    low_a = min((span[0] for span in a), default=None)
    low_b = min((span[0] for span in b), default=None)
    if low_b is not None and (low_a is None or low_b < low_a):
        comm.members = f"{second}|{first}"
        comm.size, comm.remote_size = ranges.span_count(b), ranges.span_count(a)
