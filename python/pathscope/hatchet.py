"""A profile as a Hatchet GraphFrame, for Hatchet and Thicket notebooks (issue 15).

    import pathscope.hatchet
    gf = pathscope.hatchet.read("prof")         # hatchet.GraphFrame
    print(gf.tree(metric_column="time (inc)"))
    th = pathscope.hatchet.thicket(["base", "new"])   # thicket.Thicket of several profiles

Needs the extra `hatchet` (pyproject.toml): llnl-hatchet 2026.2.0 requires pandas<3, so
scripts/setup.sh installs it with llnl-thicket and pandas 2.3.3 into .venv-hatchet, not .venv.

The graph is pathscope's merged call tree (pathscope.open(DIR).nodes) without its "[all
threads]" root: its children (_start, the threads' __clone3, [not unwound], ...) are the
roots.  A node's Frame holds name, type (pathscope's kind: call, fn, pc, mpi, ...), file and
line ("" and 0 when unknown), so call sites of one function stay apart as they are in
pathscope's report, and Thicket matches nodes of several profiles by all four.

The dataframe, like Hatchet's readers of MPI profiles: indexed by (node, rank) with a row
for every node and rank (0 where the rank has no value) when the rank files were read
(`--per-rank all`); indexed by node alone, with the values summed over the ranks, for a
reduced profile (tree.tsv).  Columns: name, type, file, line, module (as in the Frame: ""
and 0 when unknown; plain Python values, not pyarrow's), then the metrics:
- time: the node's own time, sampled + MPI, in seconds (pathscope's "time"), and time (inc);
- mpi time, offcpu time with their (inc), sample time, kernel time, probe time ...: every
  stored metric in ns is in seconds and named with " time" for "_ns" (sample_ns is "sample
  time"); the other stored metrics keep pathscope's names (visits, bytes, samples, allocs,
  ...).  Only metrics some node of the profile has are columns (time and time (inc) always).
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Union

import numpy as np
import pandas as pd

from pathscope.calltree import INCL_MPI, INCL_OFFCPU, INCL_TIME, no_call_paths_message
from pathscope.errors import PathscopeError, ProfileError
from pathscope.frames import ProfileFrames
from pathscope.frames import open as open_frames
from pathscope.metrics import STORED

if TYPE_CHECKING:
    import hatchet
    import thicket

MISSING = ("pathscope.hatchet needs llnl-hatchet and llnl-thicket, which need pandas<3: "
           "use .venv-hatchet (scripts/setup.sh makes it) or pip install 'pathscope[hatchet]' "
           "into an environment of its own")
INFO_COLUMNS = ["name", "type", "file", "line", "module"]
NS_PER_S = 1e9
# the inclusive metrics and the exclusive column they belong to
INCLUSIVE = {INCL_TIME: "time", INCL_MPI: "mpi_ns", INCL_OFFCPU: "offcpu_ns"}


def read(path: Union[str, Path]) -> "hatchet.GraphFrame":
    """The profile directory at path as a GraphFrame (pathscope.open's errors; a profile
    without call paths is a ProfileError)."""
    return graphframe(open_frames(path))


def thicket(paths: Iterable[Union[str, Path]]) -> "thicket.Thicket":
    """Several profiles as one Thicket (the union of their call trees), each profile named
    by its directory: what Thicket.concat_thickets(axis="index", calltree="union") makes of
    their GraphFrames, built here from the union of pathscope's node tables (Thicket's own
    union remaps every row's node with DataFrame.replace over Node objects, quadratic in the
    nodes: 20 s for two profiles of 5,000 paths, docs/benchmarks.md section AC)."""
    try:
        from thicket import Thicket
    except ImportError:
        raise PathscopeError(MISSING) from None

    names = [str(p) for p in paths]
    if not names:
        raise PathscopeError("pathscope.hatchet.thicket: no profiles")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise PathscopeError(f"pathscope.hatchet.thicket: the same profile twice: {twice[0]}")
    parts = [_parts(open_frames(name)) for name in names]
    if len(parts) == 1:
        return Thicket.thicketize_graphframe(_graphframe(parts[0]), names[0])
    return _thicket(parts, names)


def column_name(metric: str) -> str:
    """A stored metric's column: 'mpi_ns' is 'mpi time', 'alloc_bytes' stays."""
    if metric.endswith("_ns"):
        return metric[:-3].replace("_", " ") + " time"
    return metric


def graphframe(p: ProfileFrames) -> "hatchet.GraphFrame":
    try:
        import hatchet  # noqa: F401 (first: the error before reading)
    except ImportError:
        raise PathscopeError(MISSING) from None
    return _graphframe(_parts(p))


@dataclass
class _Parts:
    """A profile's GraphFrame before Hatchet's objects: its nodes and their values."""
    info: pd.DataFrame          # per node id (the root's 0 too): parent and INFO_COLUMNS
    values: pd.DataFrame        # the metric columns, indexed by node id (and rank)
    exc: list[str]
    inc: list[str]
    metadata: dict


def _parts(p: ProfileFrames) -> _Parts:
    nodes = p.nodes
    if nodes.empty:
        raise ProfileError(no_call_paths_message(p.profile))
    # the metrics some node has (sums over ranks, exclusive)
    stored = [m for m in STORED if nodes[m.name].sum() != 0]
    if p.per_rank_known:
        wanted = ["sample_ns", "mpi_ns", *(m.name for m in stored), *INCLUSIVE]
        values = _per_rank(p, list(dict.fromkeys(wanted)))
    else:
        values = _summed(nodes)
    values = _metric_columns(values, stored)
    inc = [c for c in values.columns if c.endswith(" (inc)")]
    exc = [c for c in values.columns if c not in inc]
    metadata = {"program": p.profile.meta.get("program"), "nranks": len(p.tree.ranks),
                "pathscope_profile": str(p.profile.path)}
    return _Parts(_info(nodes), values, exc, inc, metadata)


def _info(nodes: pd.DataFrame) -> pd.DataFrame:
    """The frame of every node as Hatchet shows it: plain Python values, "" and 0 unknown."""
    def text(column: str) -> np.ndarray:
        return nodes[column].astype(object).where(nodes[column].notna(), "").to_numpy()

    return pd.DataFrame({
        "parent": nodes["parent"].fillna(-1).to_numpy(dtype=np.int64),
        "name": text("name"), "type": text("kind"), "file": text("file"),
        "line": nodes["line"].fillna(0).to_numpy(dtype=np.int64), "module": text("module")})


def _graphframe(parts: _Parts) -> "hatchet.GraphFrame":
    from hatchet import GraphFrame

    graph, by_id = _graph(parts.info)
    values = parts.values
    ids = values.index.get_level_values("node").to_numpy()
    levels = [by_id[ids]] + [values.index.get_level_values(n) for n in values.index.names[1:]]
    df = _with_info(values, parts.info, ids, levels, list(values.index.names))
    if not df.index.is_monotonic_increasing:       # (it is: nodes are depth first)
        df = df.sort_index()
    return GraphFrame(graph, df, parts.exc, parts.inc, default_metric="time",
                      metadata=parts.metadata)


def _with_info(values: pd.DataFrame, info: pd.DataFrame, ids: np.ndarray, levels: list,
               names: list[str]) -> pd.DataFrame:
    """values with the INFO_COLUMNS of its rows' nodes (ids: rows of info) first, indexed by
    levels: each column taken from info's by the ids, no Python loop over the rows."""
    data = {c: info[c].to_numpy()[ids] for c in INFO_COLUMNS}
    data.update({c: values[c].to_numpy() for c in values.columns})
    index = (pd.MultiIndex.from_arrays(levels, names=names) if len(levels) > 1
             else pd.Index(levels[0], name="node"))
    return pd.DataFrame(data, index=index)


def _graph(info: pd.DataFrame) -> tuple["hatchet.graph.Graph", np.ndarray]:
    """Hatchet's graph of the nodes of info (row 0 the root, left out; parents before
    children) and its Node of each row."""
    from hatchet.frame import Frame
    from hatchet.graph import Graph
    from hatchet.node import Node

    by_id = np.empty(len(info), dtype=object)
    roots = []
    rows = zip(info["parent"].tolist(), info["name"].tolist(), info["type"].tolist(),
               info["file"].tolist(), info["line"].tolist())
    next(rows)
    for i, (parent, name, kind, file, line) in enumerate(rows, start=1):
        up = by_id[parent] if parent > 0 else None
        node = by_id[i] = Node(Frame({"name": name, "type": kind, "file": file,
                                      "line": line}), up)
        if up is None:
            roots.append(node)
        else:
            up.add_child(node)
    graph = Graph(roots)
    graph.enumerate_traverse()          # Hatchet's node ids and depths, depth first
    return graph, by_id


def _union(infos: list[pd.DataFrame]) -> tuple[pd.DataFrame, list[np.ndarray]]:
    """The union of several profiles' trees (info tables): a node per path of frames, where
    the k-th child of a parent with one frame (name, type, file, line) is the k-th in every
    profile (Hatchet's union keeps such siblings apart too); its frame and module are the
    first profile's.  Also each profile's rows' rows in the union."""
    keys: dict[tuple, int] = {}
    rows = [infos[0].iloc[0].tolist()]                          # the root
    maps = []
    for info in infos:
        local = [0] * len(info)
        seen: dict[tuple, int] = {}
        columns = (info[c].tolist() for c in ["parent", *INFO_COLUMNS])
        for i, (parent, name, kind, file, line, module) in enumerate(zip(*columns)):
            if i == 0:
                continue
            frame = (local[parent], name, kind, file, line)
            k = seen[frame] = seen.get(frame, -1) + 1
            at = keys.setdefault((frame, k), len(rows))
            if at == len(rows):
                rows.append([local[parent], name, kind, file, line, module])
            local[i] = at
        maps.append(np.asarray(local, dtype=np.int64))
    return pd.DataFrame(rows, columns=["parent", *INFO_COLUMNS]), maps


def _thicket(parts: list[_Parts], names: list[str]) -> "thicket.Thicket":
    """The Thicket of several profiles as concat_thickets makes it: the union tree, rows
    indexed by (node, profile[, rank]) (rank 0 for a profile without ranks when another has
    them), a row for every combination of the index's values (missing values NaN, missing
    texts None), the metadata by profile."""
    from thicket import Thicket

    union, maps = _union([p.info for p in parts])
    graph, by_id = _graph(union)
    hashes = [Thicket.profile_hasher(name) for name in names]
    ranked = any("rank" in p.values.index.names for p in parts)
    index_names = ["node", "profile"] + (["rank"] if ranked else [])
    frames = []
    for p, local, h in zip(parts, maps, hashes):
        ids = local[p.values.index.get_level_values("node").to_numpy()]
        levels = [by_id[ids], np.full(len(ids), h, dtype=np.int64)]
        if ranked:
            levels.append(p.values.index.get_level_values("rank").to_numpy()
                          if "rank" in p.values.index.names else np.zeros(len(ids), np.int64))
        frames.append(_with_info(p.values, union, ids, levels, index_names))
    df = pd.concat(frames)
    full = pd.MultiIndex.from_product([df.index.unique(level=n) for n in index_names],
                                      names=index_names)
    if len(full) != len(df):
        df = df.reindex(full)
        texts = [c for c in df.columns if df[c].dtype == object]
        df[texts] = df[texts].astype(object).where(df[texts].notna(), None)
    metadata = pd.DataFrame.from_dict(dict(zip(hashes, (p.metadata for p in parts))),
                                      orient="index").sort_index()
    metadata.index.name = "profile"
    metrics = [list(dict.fromkeys(m for p in parts for m in getattr(p, kind)))
               for kind in ("exc", "inc")]
    return Thicket(graph=graph, dataframe=df.sort_index(), exc_metrics=metrics[0],
                   inc_metrics=metrics[1], metadata=metadata, profile=hashes,
                   profile_mapping=OrderedDict(sorted(zip(hashes, names))),
                   statsframe_ops_cache={})


def _per_rank(p: ProfileFrames, metrics: list[str]) -> pd.DataFrame:
    """Every (node, rank) pair of the tree (root left out) with the rank's value of each
    metric (0 where the rank has none)."""
    ranks = p.tree.ranks
    index = pd.MultiIndex.from_product([range(1, len(p.nodes)), ranks],
                                       names=["node", "rank"])
    arrays = p.rank_matrices(metrics)
    return pd.DataFrame({m: arrays[k, 1:].reshape(-1) for k, m in enumerate(metrics)},
                        index=index)


def _summed(nodes: pd.DataFrame) -> pd.DataFrame:
    metrics = [m.name for m in STORED] + list(INCLUSIVE)
    out = nodes.iloc[1:].set_index("node")[metrics]
    return out.astype("int64")


def _metric_columns(values: pd.DataFrame, stored: list) -> pd.DataFrame:
    """time and time (inc) first, then the stored metrics the profile has and the inclusive
    ones of mpi_ns and offcpu_ns; ns in seconds."""
    def col(name: str) -> np.ndarray:
        if name in values.columns:
            return values[name].to_numpy(dtype=np.int64)
        return np.zeros(len(values), dtype=np.int64)

    out = {"time": (col("sample_ns") + col("mpi_ns")) / NS_PER_S,
           "time (inc)": col(INCL_TIME) / NS_PER_S}
    names = {m.name for m in stored}
    for m in stored:
        out[column_name(m.name)] = col(m.name) / NS_PER_S if m.unit == "ns" else col(m.name)
    for incl, exclusive in INCLUSIVE.items():
        if exclusive in names:
            out[f"{column_name(exclusive)} (inc)"] = col(incl) / NS_PER_S
    return pd.DataFrame(out, index=values.index)
