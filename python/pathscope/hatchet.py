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
NODE_INFO = ["name", "kind", "file", "line", "module"]        # their columns in nodes
NS_PER_S = 1e9
# the inclusive metrics and the exclusive column they belong to
INCLUSIVE = {INCL_TIME: "time", INCL_MPI: "mpi_ns", INCL_OFFCPU: "offcpu_ns"}


def read(path: Union[str, Path]) -> "hatchet.GraphFrame":
    """The profile directory at path as a GraphFrame (pathscope.open's errors; a profile
    without call paths is a ProfileError)."""
    return graphframe(open_frames(path))


def thicket(paths: Iterable[Union[str, Path]]) -> "thicket.Thicket":
    """Several profiles as one Thicket (the union of their call trees), each profile named
    by its directory."""
    try:
        from thicket import Thicket
    except ImportError:
        raise PathscopeError(MISSING) from None

    thickets = [Thicket.thicketize_graphframe(read(p), str(p)) for p in paths]
    if len(thickets) == 1:
        return thickets[0]
    return Thicket.concat_thickets(thickets=thickets, axis="index", calltree="union",
                                   disable_tqdm=True)


def column_name(metric: str) -> str:
    """A stored metric's column: 'mpi_ns' is 'mpi time', 'alloc_bytes' stays."""
    if metric.endswith("_ns"):
        return metric[:-3].replace("_", " ") + " time"
    return metric


def graphframe(p: ProfileFrames) -> "hatchet.GraphFrame":
    try:
        from hatchet import GraphFrame
    except ImportError:
        raise PathscopeError(MISSING) from None

    nodes = p.nodes
    if nodes.empty:
        raise ProfileError(no_call_paths_message(p.profile))
    graph, hnodes = _graph(nodes)
    # the metrics some node has (sums over ranks, exclusive)
    stored = [m for m in STORED if nodes[m.name].sum() != 0]
    if p.per_rank_known:
        wanted = ["sample_ns", "mpi_ns", *(m.name for m in stored), *INCLUSIVE]
        values, index_names = _per_rank(p, list(dict.fromkeys(wanted))), ["node", "rank"]
    else:
        values, index_names = _summed(nodes), ["node"]
    df = _with_nodes(_metric_columns(values, stored), nodes, hnodes, index_names)
    inc = [c for c in df.columns if c.endswith(" (inc)")]
    exc = [c for c in df.columns if c not in inc and c not in INFO_COLUMNS]
    metadata = {"program": p.profile.meta.get("program"), "nranks": len(p.tree.ranks),
                "pathscope_profile": str(p.profile.path)}
    return GraphFrame(graph, df.sort_index(), exc, inc, default_metric="time",
                      metadata=metadata)


def _with_nodes(df: pd.DataFrame, nodes: pd.DataFrame, hnodes: dict,
                index_names: list[str]) -> pd.DataFrame:
    """df (indexed by node id, and rank) with the nodes' INFO_COLUMNS first and Hatchet's
    Node objects for the ids: each column made once per node, then taken for every row."""
    ids = df.index.get_level_values("node").to_numpy()
    for at, (column, source) in enumerate(zip(INFO_COLUMNS, NODE_INFO)):
        unknown = 0 if column == "line" else ""
        by_id = np.array([unknown if _missing(v) else v for v in nodes[source].tolist()],
                         dtype="int64" if column == "line" else object)
        df.insert(at, column, by_id[ids])
    node_by_id = np.empty(len(nodes), dtype=object)
    for i, node in hnodes.items():
        node_by_id[i] = node
    levels = [node_by_id[ids]] + [df.index.get_level_values(n) for n in index_names[1:]]
    df.index = (pd.MultiIndex.from_arrays(levels, names=index_names) if len(levels) > 1
                else pd.Index(levels[0], name="node"))
    return df


def _graph(nodes: pd.DataFrame) -> tuple["hatchet.graph.Graph", dict]:
    """Hatchet's graph of pathscope's nodes (depth first, parents first): the nodes by id."""
    from hatchet.frame import Frame
    from hatchet.graph import Graph
    from hatchet.node import Node

    hnodes: dict[int, Node] = {}
    roots = []
    for r in nodes.iloc[1:].to_dict("records"):
        frame = Frame({"name": r["name"], "type": r["kind"],
                       "file": "" if _missing(r["file"]) else r["file"],
                       "line": 0 if _missing(r["line"]) else int(r["line"])})
        parent = hnodes.get(r["parent"])
        node = hnodes[r["node"]] = Node(frame, parent, depth=r["depth"] - 1)
        if parent is None:
            roots.append(node)
        else:
            parent.add_child(node)
    graph = Graph(roots)
    graph.enumerate_traverse()          # Hatchet's node ids and depths, depth first
    return graph, hnodes


def _per_rank(p: ProfileFrames, metrics: list[str]) -> pd.DataFrame:
    """Every (node, rank) pair of the tree (root left out) with the rank's value of each
    metric (0 where the rank has none)."""
    ranks = p.tree.ranks
    index = pd.MultiIndex.from_product([range(1, len(p.nodes)), ranks],
                                       names=["node", "rank"])
    return pd.DataFrame({m: p.rank_matrix(m)[1:].reshape(-1) for m in metrics}, index=index)


def _summed(nodes: pd.DataFrame) -> pd.DataFrame:
    metrics = [m.name for m in STORED] + list(INCLUSIVE)
    out = nodes.iloc[1:].set_index("node")[metrics]
    return out.astype("int64")


def _metric_columns(values: pd.DataFrame, stored: list) -> pd.DataFrame:
    """time and time (inc) first, then the stored metrics the profile has and the inclusive
    ones of mpi_ns and offcpu_ns; ns in seconds."""
    def col(name: str) -> pd.Series:
        if name in values.columns:
            return values[name].astype("int64")
        return pd.Series(0, index=values.index, dtype="int64")

    out = pd.DataFrame(index=values.index)
    out["time"] = (col("sample_ns") + col("mpi_ns")) / NS_PER_S
    out["time (inc)"] = col(INCL_TIME) / NS_PER_S
    names = {m.name for m in stored}
    for m in stored:
        if m.unit == "ns":
            out[column_name(m.name)] = col(m.name) / NS_PER_S
        else:
            out[m.name] = col(m.name)
    for incl, exclusive in INCLUSIVE.items():
        if exclusive in names:
            out[f"{column_name(exclusive)} (inc)"] = col(incl) / NS_PER_S
    return out


def _missing(value: object) -> bool:
    return value is None or value is pd.NA
