"""Rank ranges and host lists, compressed and expanded.

Rank lists use the format of docs/format.md: comma-separated integers, `a-b` ranges and
(format 2.11) `a-b:s` stepped ranges, every s-th rank from a to b (`0-3,6,8-20:4`), `-` for
an empty list, negative numbers allowed (`-32766` is MPI_UNDEFINED, a member from another
job).  Intercommunicator member lists hold two such lists joined by
`|` (local group, remote group)."""
import re
from typing import Iterable

TRUNCATION_MARK = "..."
_TOKEN = re.compile(r"^(-?[0-9]{1,10})(?:-(-?[0-9]{1,10})(?::([0-9]{1,10}))?)?$")
_HOST = re.compile(r"^(.*?)(\d+)$")


Spans = list[range]       # the ranks of each item of one group, first to last by its step


def parse(text: str) -> tuple[list[Spans], bool]:
    """The groups of a member list as spans, and whether it was cut short (`...`), without
    expanding anything (a list of a million ranks costs its text only).  `-` or an empty
    group has no spans.  Raises ValueError on anything else."""
    text = text.strip()
    truncated = text.endswith(TRUNCATION_MARK)
    if truncated:
        text = text[: -len(TRUNCATION_MARK)]
    groups: list[Spans] = []
    parts = text.split("|")
    for index, group in enumerate(parts):
        spans: Spans = []
        groups.append(spans)
        if group in ("-", ""):
            continue
        tokens = group.split(",")
        if truncated and index == len(parts) - 1:
            tokens = tokens[:-1]
        for token in tokens:
            match = _TOKEN.match(token)
            if not match:
                raise ValueError(f"malformed rank list '{_cut(text)}' at '{_cut(token)}'")
            first = int(match.group(1))
            last = int(match.group(2)) if match.group(2) is not None else first
            step = int(match.group(3)) if match.group(3) is not None else 1
            if last < first:
                raise ValueError(f"malformed rank list '{_cut(text)}': range {_cut(token)} "
                                 f"goes down")
            if step < 2 and match.group(3) is not None or (last - first) % step:
                raise ValueError(f"malformed rank list '{_cut(text)}': range {_cut(token)} "
                                 f"does not end on its step")
            spans.append(range(first, last + 1, step))
    return groups, truncated


def span_count(spans: Spans) -> int:
    return sum(len(span) for span in spans)


def expand(text: str) -> list[int]:
    """`0-3,6,8-12:2` -> [0, 1, 2, 3, 6, 8, 10, 12]; `0-1|4-5` -> [0, 1, 4, 5]; `-` -> [].

    A list cut short in profile.tsv (ending in `...`) expands to the ranks before the cut;
    its last, possibly partial, item is dropped.  Raises ValueError on anything else."""
    ranks: list[int] = []
    for spans in parse(text)[0]:
        for span in spans:
            ranks.extend(span)
    return ranks


def _cut(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def compress(ranks: Iterable[int], steps: bool = False) -> str:
    """[0, 1, 2, 3, 6, 8, 10, 12] -> `0-3,6,8,10,12`, keeping the given order (sort first for a
    set); [] -> `-`.  steps=True, as the runtime writes member lists (ps_fmt_ranges):
    `0-3,6,8-12:2`, three or more non-negative ranks a fixed step of at least 2 apart as
    `a-b:s`, taken left to right after consecutive ranks (`a-b`)."""
    values = list(ranks)
    if not values:
        return "-"
    parts = []
    i, n = 0, len(values)
    while i < n:
        j = i
        while j + 1 < n and values[j + 1] == values[j] + 1:
            j += 1
        step = 1
        if j == i and steps and i + 2 < n and values[i] >= 0:
            gap = values[i + 1] - values[i]
            if gap > 1 and values[i + 2] - values[i + 1] == gap:
                j, step = i + 2, gap
                while j + 1 < n and values[j + 1] - values[j] == gap:
                    j += 1
        if j == i:
            parts.append(str(values[i]))
        else:
            parts.append(f"{values[i]}-{values[j]}" + (f":{step}" if step > 1 else ""))
        i = j + 1
    return ",".join(parts)


def compress_hosts(hosts: Iterable[str]) -> str:
    """Distinct host names, numbered ones folded: {vm0, vm1, vm2, vm3, login} -> `login,vm[0-3]`.

    Numbers keep their width (node01..node03 -> node[01-03]); names without a trailing number
    are listed as they are.  Empty input -> `-`."""
    by_prefix: dict[tuple[str, int], list[str]] = {}
    plain: list[str] = []
    for host in sorted(set(hosts)):
        match = _HOST.match(host)
        if not match:
            plain.append(host)
            continue
        prefix, digits = match.groups()
        width = len(digits) if digits.startswith("0") and len(digits) > 1 else 0
        by_prefix.setdefault((prefix, width), []).append(digits)
    parts = list(plain)
    for (prefix, _width), numbers in by_prefix.items():
        numbers.sort(key=int)
        if len(numbers) == 1:
            parts.append(prefix + numbers[0])
            continue
        spans = []
        first = prev = numbers[0]
        for number in numbers[1:] + [None]:
            if number is not None and int(number) == int(prev) + 1:
                prev = number
                continue
            spans.append(first if first == prev else f"{first}-{prev}")
            if number is not None:
                first = prev = number
        parts.append(f"{prefix}[{','.join(spans)}]")
    return ",".join(sorted(parts)) if parts else "-"
