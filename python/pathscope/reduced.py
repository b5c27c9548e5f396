"""Checks a tree reduced in the job against its ground truth: the rank files of the same run
(`--per-rank all` keeps both).  The tests of the reduction (tests/e2e) call it.

    differences("prof")     # [] when tree.tsv holds exactly what the rank files say

What is compared, root by root (`app`: the application's threads; `runtime`: the MPI
library's, cct.RUNTIME_MODULES):
- the frames: every path of one tree is a path of the other;
- on every node, every stored metric of the registry and the inclusive values (incl_time,
  incl_mpi, incl_offcpu): SUM, MIN, MIN_RANK, MAX, MAX_RANK, NONZERO and SKETCH of tree.tsv
  against the same statistics computed from the rank files (pathscope.stats, over ranks
  0 .. P-1, a rank without the node counting as 0);
- on every `mpi` node, its per-communicator parts (`pcomm`), column by column, alike;
- and the rank files themselves: a missing, incomplete or unreadable one is a difference.
The source hooks (the kernel's `[kernel: no call path]`) are left out: they are the reader's
own additions, made from other records, on both sides.
Nothing here prints or exits.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Optional, Union

from pathscope.calltree import (INCLUSIVE, CallTree, MergedNode, ReducedNode, _add_inclusive,
                                merge_rank_threads, merge_reduced_roots)
from pathscope.errors import ProfileError
from pathscope.metrics import STORED
from pathscope.reader import Profile, load_profile
from pathscope.stats import Stats
from pathscope.symbols import Frame, frame_of
from pathscope.treefile import APP_ROOT, PCOMM, RUNTIME_ROOT

COMM_COLUMNS = ("visits", "mpi_ns", "bytes")
MAX_REPORTED = 200            # differences listed; the rest are counted


def differences(profile_dir: Union[str, Path],
                columns: Optional[Iterable[str]] = None) -> list[str]:
    """Every way tree.tsv differs from the rank files of the same directory, one line each
    ([] when equal).  columns: compare only these (stored metrics, incl_*, `pcomm`; the
    frames always), e.g. for a heap run whose rank files were written again at exit.
    ProfileError when the directory lacks either."""
    profile = load_profile(profile_dir)
    if profile.tree is None:
        raise ProfileError(f"{profile_dir}: no usable tree.tsv"
                           + "".join(f" ({note})" for note in profile.notes))
    ranks = sorted(profile.callpaths)
    if not any(paths.threads for paths in profile.callpaths.values()):
        raise ProfileError(f"{profile_dir}: no rank file with call paths")
    out = [f"rank files: {problem}" for problem in profile.problems()]
    if ranks != list(range(profile.tree.ranks)):
        out.append(f"ranks: tree.tsv merged {profile.tree.ranks}, rank files with call paths: "
                   f"{len(ranks)}")
    for name, runtime in ((APP_ROOT, False), (RUNTIME_ROOT, True)):
        truth = merge_rank_threads(profile, ranks, None,
                                   lambda cct, modules, want=runtime:
                                   cct.runtime_thread(modules) == want)
        _add_inclusive(truth.root)
        truth.ranks = list(range(profile.tree.ranks))
        reduced = merge_reduced_roots(profile.tree, (name,))
        _compare(name, truth, reduced, _rank_comms(profile, runtime), out,
                 set(columns) if columns is not None else None)
    if len(out) > MAX_REPORTED:
        out[MAX_REPORTED:] = [f"... and {len(out) - MAX_REPORTED} more differences"]
    return out


def _compare(root_name: str, truth: CallTree, reduced: CallTree,
             comms: dict[tuple[tuple[Frame, ...], str], dict[int, list[int]]],
             out: list[str], columns: Optional[set[str]]) -> None:
    def chosen(name: str) -> bool:
        return columns is None or name in columns

    stack: list[tuple[MergedNode, MergedNode, tuple[Frame, ...]]] = [
        (truth.root, reduced.root, ())]
    while stack:
        mine, theirs, path = stack.pop()
        where = f"{root_name}:{_path_text(path)}"
        assert isinstance(theirs, ReducedNode)
        for m in (m for m in STORED if chosen(m.name)):
            _compare_stats(where, m.name, truth.stat(mine, m.column or 0),
                           reduced.stat(theirs, m.column or 0), out)
        for key in (k for k in INCLUSIVE if chosen(k)):
            _compare_stats(where, key, truth.stat(mine, key), reduced.stat(theirs, key), out)
        for comm in sorted(set(mine.comms) | set(theirs.comms)) if chosen(PCOMM) else ():
            per_rank = comms.get((path, comm), {})
            for i, column in enumerate(COMM_COLUMNS):
                expected = Stats.of_ranks({r: v[i] for r, v in per_rank.items() if v[i]},
                                          truth.ranks)
                got = theirs.comm_stats.get(comm, {}).get(column) or Stats.zero(
                    len(truth.ranks))
                _compare_stats(where, f"pcomm {comm} {column}", expected, got, out)
        for frame in sorted(set(mine.children) | set(theirs.children), key=repr):
            a, b = mine.children.get(frame), theirs.children.get(frame)
            if a is None or b is None:
                side = "tree.tsv only" if a is None else "rank files only"
                out.append(f"{root_name}:{_path_text(path + (frame,))}: {side}")
                continue
            stack.append((a, b, path + (frame,)))


def _compare_stats(where: str, what: str, expected: Stats, got: Stats,
                   out: list[str]) -> None:
    if expected != got:
        out.append(f"{where}: {what}: rank files {expected.text()}, tree.tsv {got.text()}")


def _rank_comms(profile: Profile, runtime: bool
                ) -> dict[tuple[tuple[Frame, ...], str], dict[int, list[int]]]:
    """(path of an mpi node, communicator) -> rank -> calls, ns, bytes, from the rank files."""
    out: dict[tuple[tuple[Frame, ...], str], dict[int, list[int]]] = {}
    for rank, paths in profile.callpaths.items():
        for cct in paths.threads.values():
            if cct.runtime_thread(paths.modules) != runtime:
                continue
            at: list[tuple[Frame, ...]] = []
            for node in cct.nodes:
                at.append(() if node.parent is None else
                          at[node.parent] + (frame_of(node, paths.modules),))
                for part in node.comms:
                    into = out.setdefault((at[-1], part.comm), {}).setdefault(rank, [0, 0, 0])
                    into[0] += part.calls
                    into[1] += part.time_ns
                    into[2] += part.bytes
    return out


def _path_text(path: tuple[Frame, ...]) -> str:
    return ";".join(f.name or (f"{f.kind}:{f.module.rsplit('/', 1)[-1]}+0x{f.address:x}"
                               if f.module or f.address else f.kind) for f in path) or "(root)"
