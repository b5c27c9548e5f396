"""A profile as pandas DataFrames (issue 15): what notebooks, DuckDB, Hatchet and the exports
work from.

    import pathscope
    p = pathscope.open("prof")
    p.comm_ops                    # every table of `pathscope export --table`, by name
    p.table("heap-timeline")      # ... or by its export name
    p.nodes                       # the merged call tree: one row per node
    p.metrics                     # per node, rank and metric: the rank's value (long form)
    p.node_stats                  # per node and metric: sum, min/max with their ranks, ...
    p.node_comms                  # per MPI node and communicator: calls, time, bytes
    p.rank_matrix("mpi_ns")       # a metric per node and rank as one numpy array
    p.rank_comm_ops               # per rank, communicator and operation (the rank files')
    p.merged_by_function()        # the call tree with each function's call sites merged
    p.by_function().node_stats    # ... and every call-tree frame of it
    p.group_stats("incl_time", [[3, 7], [5]])   # per group of nodes: its per-rank sum's
                                                # statistics (the report's rows)
    p.time_split()                # Table I of the hybrid-profiling paper, per rank statistics
    rank_statistics(long, ["node"], ranks)      # the statistics over the ranks, for any table

Columns are pyarrow-backed (`int64[pyarrow]`, `string[pyarrow]`, nullable: None is <NA>),
in the order `export` writes them.  Frames are built on first use and kept.

The call tree is the report's (pathscope.calltree.build_tree with the MPI library's threads
merged in): `nodes` numbers its nodes depth first from 0 (the root), parents before children,
with each node's frame and its values summed over the ranks, exclusive and inclusive.
`metrics` has a row per node, rank and metric wherever the rank's value is known and not 0:
every node with the rank files (`--per-rank all`), the heaviest paths' `rankvec` values of a
reduced profile (`--per-rank summary`), nothing with `--per-rank none`.  `node_stats` is the
statistics over the ranks (a rank without a value counts as 0; the lowest rank on ties):
computed from `metrics` by a groupby where every node's per-rank values are known, else the
job's own statistics from tree.tsv.

The statistics over the ranks are one groupby (rank_statistics): node_stats, group_stats
(a function's call sites or call paths: the text report's call tree, hot path and probed
paths) and time_split use it, `pathscope report` reads all of them from here.

`merged_by_function()` is the tree by function, as the report and the HTML show it
(pathscope.calltree.merge_call_sites): the sibling nodes of one function (one caller calling
it from several lines, or sampled at several lines) are one node whose values are their
sums, and its children are theirs merged the same way.  Same columns as `nodes` (numbered
depth first from 0 in the same way; the frame, file and line of the heaviest site), plus
`sites`: how many nodes of `nodes` it merges (1: a node of its own).
"""
from __future__ import annotations

from pathlib import Path
from itertools import chain, islice
from typing import Any, Iterable, Iterator, Optional, Sequence, Union

import numpy as np
import pandas as pd
import pyarrow as pa

from pathscope.calltree import (INCL_MPI, INCL_OFFCPU, INCL_TIME, METRIC_COUNT, CallTree,
                                MergedNode, ReducedNode, build_tree, function_key,
                                merge_call_sites, reduced_time_split)
from pathscope.cct import FAILED, NOT_UNWOUND
from pathscope.export.tables import TABLES
from pathscope.metrics import COLUMNS, STORED
from pathscope.reader import Profile, load_profile
from pathscope.symbols import SymbolTable

# the metrics of the call tree, by name: the stored ones, then the inclusive sums
NODE_METRICS = [m.name for m in STORED] + [INCL_TIME, INCL_MPI, INCL_OFFCPU]
NODES_COLUMNS = ["node", "parent", "depth", "kind", "name", "file", "line", "module",
                 "address"] + NODE_METRICS
METRICS_COLUMNS = ["node", "rank", "metric", "value"]
COMMS_COLUMNS = ["node", "comm", "calls", "time_ns", "bytes"]
CHUNK_ROWS = 16_384           # rows per DataFrame of table_chunks
STATS_COLUMNS = ["node", "metric", "sum", "mean", "min", "min_rank", "max", "max_rank",
                 "nonzero"]
RANK_COMM_OPS_COLUMNS = ["rank", "comm", "op", "calls", "bytes", "time_s"]
# the rows of time_split, and its columns (the part is the index)
SPLIT_PARTS = ["time", "failed", "failed_mpi", "not_unwound", "not_unwound_mpi", "execution",
               "execution_mpi", "execution_oncpu", "execution_offcpu", "offcpu", "mpi"]
SPLIT_COLUMNS = ["sum", "mean", "min", "min_rank", "max", "max_rank"]


def open(path: Union[str, Path], runtime_threads: bool = True  # noqa: A001 (pathscope.open)
         ) -> "ProfileFrames":
    """The profile directory at path (pathscope.reader.load_profile's rules and errors).
    runtime_threads False: the call tree without the MPI library's own threads, as the
    report shows it."""
    return ProfileFrames(load_profile(path), runtime_threads=runtime_threads)


def frame(columns: list[str], rows: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """rows (dicts of plain values) as a DataFrame with pyarrow columns in this order.  A
    histogram ({bin: count}) becomes a list of {bin, count} in bin order."""
    records = [{c: _plain(row.get(c)) for c in columns} for row in rows]
    table = pa.Table.from_pylist(records) if records else pa.table(
        {c: pa.array([], pa.null()) for c in columns})
    return table.select(columns).to_pandas(types_mapper=pd.ArrowDtype)


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return [{"bin": int(k), "count": int(v)} for k, v in sorted(value.items())]
    return value


class ProfileFrames:
    """The tables of one profile (module docstring)."""

    def __init__(self, profile: Profile, symbols: Optional[SymbolTable] = None,
                 runtime_threads: bool = True, tree: Optional[CallTree] = None):
        """tree: the call tree `nodes` and `metrics` tabulate, when not every rank and thread
        of the profile (e.g. pathscope.calltree.build_tree(profile, rank=1, thread=0))."""
        self.profile = profile
        self.runtime_threads = runtime_threads
        self._symbols = symbols
        self._frames: dict[str, pd.DataFrame] = {}
        self._tree: Optional[CallTree] = tree
        self._no_tree = False         # the profile has no call paths (asked once)
        self._order: list[MergedNode] = list(tree.root.walk()) if tree is not None else []
        self._by_function: Optional["ProfileFrames"] = None
        self._ids: dict[int, int] = {}          # id(node) -> its row (node_id)
        self._by_node: dict[str, dict[int, dict[str, Any]]] = {}   # _stats_by_node's
        self._all_threads: Optional[ProfileFrames] = None

    def all_threads(self) -> "ProfileFrames":
        """These tables with the MPI library's own threads in the call tree (self when they
        are already): the heap, kernel and probe sections count every thread."""
        if self.runtime_threads:
            return self
        if self._all_threads is None:
            self._all_threads = ProfileFrames(self.profile, self.symbols, runtime_threads=True)
            self._all_threads._frames.update({n: self._frames[n] for n in TABLES
                                              if n in self._frames})
        return self._all_threads

    # ---- the export tables -------------------------------------------------------------------

    @property
    def table_names(self) -> list[str]:
        return list(TABLES)

    def table(self, name: str) -> pd.DataFrame:
        """The table `pathscope export --table NAME` writes."""
        if name not in TABLES:
            raise KeyError(f"no table '{name}' (tables: {', '.join(TABLES)})")
        if name not in self._frames:
            spec = TABLES[name]
            built = spec.build(self.profile)
            self._frames[name] = frame(list(built.columns), built.rows)
        return self._frames[name]

    def table_chunks(self, name: str, rows: Optional[int] = None) -> Iterator[pd.DataFrame]:
        """The table as DataFrames of at most rows (default CHUNK_ROWS) rows each, in order
        (at least one, empty for an empty table): what the exports write, in memory bounded
        by rows however long the table is (a profile of 2^20 ranks has a `ranks` row per
        rank)."""
        rows = rows or CHUNK_ROWS
        if name not in TABLES:
            raise KeyError(f"no table '{name}' (tables: {', '.join(TABLES)})")
        if name in self._frames:
            whole = self._frames[name]
            for start in range(0, max(len(whole), 1), rows):
                yield whole.iloc[start:start + rows]
            return
        built = TABLES[name].build(self.profile)
        columns = list(built.columns)
        rows_left = iter(built.rows)
        first = True
        while True:
            chunk = list(islice(rows_left, rows))
            if chunk or first:
                yield frame(columns, chunk)
            if len(chunk) < rows:
                return
            first = False

    def __getattr__(self, attribute: str) -> pd.DataFrame:
        name = attribute.replace("_", "-")
        if attribute.startswith("_") or name not in TABLES:
            raise AttributeError(attribute)
        return self.table(name)

    @property
    def rank_comm_ops(self) -> pd.DataFrame:
        """Each rank's calls, bytes (as comm-ops counts them) and time per communicator and
        operation, from its rank file; empty for a profile without rank files (profile.tsv
        keeps only the statistics over the ranks: comm-ops)."""
        if "rank_comm_ops" not in self._frames:
            rows = ({"rank": r, "comm": comm, "op": op, "calls": calls, "bytes": nbytes,
                     "time_s": ns / 1e9}
                    for r, ops in sorted(self.profile.rank_ops.items())
                    for (comm, op), (calls, nbytes, ns) in sorted(ops.items()))
            self._frames["rank_comm_ops"] = frame(RANK_COMM_OPS_COLUMNS, rows)
        return self._frames["rank_comm_ops"]

    # ---- the call tree ----------------------------------------------------------------------

    @property
    def symbols(self) -> SymbolTable:
        if self._symbols is None:
            from pathscope.symbolize import resolve_symbols
            self._symbols = resolve_symbols(self.profile)
        return self._symbols

    @property
    def tree(self) -> Optional[CallTree]:
        """The merged call tree (None without call paths)."""
        # (asked once: has_call_paths scans every thread, and merged_node asks per row)
        if self._tree is None and not self._no_tree:
            if self.profile.has_call_paths() or self.profile.tree is not None:
                self._tree = build_tree(self.profile, runtime_threads=self.runtime_threads)
                self._order = list(self._tree.root.walk())
            else:
                self._no_tree = True
        return self._tree

    def merged_node(self, node: int) -> MergedNode:
        """The call tree's node of `nodes`' row node (its frame, for names and files)."""
        if self.tree is None:
            raise IndexError(f"no node {node}: the profile has no call paths")
        return self._order[node]

    @property
    def nodes(self) -> pd.DataFrame:
        if "nodes" not in self._frames:
            self._frames["nodes"] = self._node_frame()
        return self._frames["nodes"]

    def merged_by_function(self) -> pd.DataFrame:
        """The call tree by function (module docstring): `nodes`' columns and `sites`."""
        if "by_function" not in self._frames:
            merged = self.by_function()
            order = merged._order if merged.tree is not None else []
            self._frames["by_function"] = merged._node_frame(
                order, {"sites": [len(node.sites) or 1 for node in order]})
        return self._frames["by_function"]

    def by_function(self) -> "ProfileFrames":
        """This profile's frames over the call tree by function (module docstring): its
        `nodes`, `metrics`, `node_stats` and `node_comms` are the merged nodes' (sums and
        per-rank statistics exact), merged_node(i).sites the nodes of this tree it holds.
        Built once and kept; itself when the profile has no call paths."""
        if self._by_function is None:
            if self.tree is None:
                return self
            merged = merge_call_sites(self.tree, function_key(self.symbols))
            self._by_function = ProfileFrames(self.profile, self.symbols, self.runtime_threads,
                                              tree=merged)
        return self._by_function

    def _node_frame(self, order: Optional[list[MergedNode]] = None,
                    extra: Optional[dict[str, list]] = None) -> pd.DataFrame:
        """A row per node of order (default: the tree's), depth first; extra: more columns.
        Built column by column: a dict per row took most of pathscope.hatchet.read."""
        columns = NODES_COLUMNS + list(extra or {})
        if self.tree is None:
            return frame(columns, [])
        order = self._order if order is None else order
        data = self._node_columns(order)
        data.update(extra or {})
        types = {c: pa.string() for c in ("kind", "name", "file", "module", "address")}
        table = pa.table({c: pa.array(data[c], types.get(c, pa.int64())) for c in columns})
        return table.to_pandas(types_mapper=pd.ArrowDtype)

    def _node_columns(self, order: list[MergedNode]) -> dict[str, list]:
        """NODES_COLUMNS of the nodes of order, as one list per column."""
        ids = {id(n): i for i, n in enumerate(order)}
        data: dict[str, list] = {c: [] for c in NODES_COLUMNS}
        depth_of: dict[int, int] = {}
        symbols = self.symbols
        for i, node in enumerate(order):
            f, up = node.frame, node.parent
            parent = ids[id(up)] if up is not None else None
            depth_of[i] = depth_of[parent] + 1 if parent is not None else 0
            lines = symbols.lines(f) if up is not None else []
            data["node"].append(i)
            data["parent"].append(parent)
            data["depth"].append(depth_of[i])
            data["kind"].append(f.kind)
            data["name"].append(" / ".join(symbols.names(f)) if up is not None
                                else "[all threads]")
            data["file"].append(lines[-1].file if lines else None)    # (the innermost level)
            data["line"].append(lines[-1].line if lines else None)
            data["module"].append(f.module or None)
            data["address"].append(f"0x{f.address:x}" if f.module else None)
            for metric, total in zip(STORED, _totals(node)):
                data[metric.name].append(total)
            data[INCL_TIME].append(node.incl_time_ns)
            data[INCL_MPI].append(node.incl_mpi_ns)
            data[INCL_OFFCPU].append(node.incl_offcpu_ns)
        return data

    def levels(self, node: int) -> list[tuple[str, Optional[str], Optional[int]]]:
        """Node `node`'s frame as (function, file, line) per level, outermost first: one
        level, or several where functions were inlined into one another ([] for the root)."""
        self.tree        # noqa: B018 (builds the node order)
        f = self._order[node].frame
        names, lines = self.symbols.names(f), self.symbols.lines(f)
        if len(lines) != len(names):
            return [(name, None, None) for name in names]
        return [(name, level.file or None, level.line or None)
                for name, level in zip(names, lines)]

    @property
    def metrics(self) -> pd.DataFrame:
        if "metrics" not in self._frames:
            self._frames["metrics"] = self._metrics_frame()
        return self._frames["metrics"]

    def _metrics_frame(self) -> pd.DataFrame:
        """Built column by column (a profile of rank files has ranks x nodes x metrics rows:
        840,000 for 64 ranks x 5,000 paths; a dict per row took most of report --html)."""
        tree = self.tree
        if tree is None:
            return frame(METRICS_COLUMNS, [])
        keys = [(m.name, m.column) for m in STORED] + [(k, k) for k in (INCL_TIME, INCL_MPI,
                                                                       INCL_OFFCPU)]
        nodes: list[int] = []
        ranks: list[int] = []
        names: list[str] = []
        values: list[int] = []
        for i, node in enumerate(self._order):
            for name, key in keys:
                vector = tree.vector(node, key)
                # (not known, or known to be 0 on every rank: a reduced tree's node merging
                # call sites without values, whose vectors are zeros, is most of by_function's)
                if vector is None or not any(vector):
                    continue
                for rank, value in zip(tree.ranks, vector):
                    if value:
                        nodes.append(i)
                        ranks.append(rank)
                        names.append(name)
                        values.append(value)
        if not nodes:
            return frame(METRICS_COLUMNS, [])
        table = pa.table({"node": pa.array(nodes, pa.int64()), "rank": pa.array(ranks, pa.int64()),
                          "metric": pa.array(names, pa.string()),
                          "value": pa.array(values, pa.int64())})
        return table.to_pandas(types_mapper=pd.ArrowDtype)

    @property
    def node_comms(self) -> pd.DataFrame:
        """An MPI node's calls, time and bytes per communicator (its `pcomm` parts), summed
        over the ranks: the rank files' or tree.tsv's, so reduced profiles have them too."""
        if "node_comms" not in self._frames:
            self.tree                   # (builds self._order)
            rows = ({"node": i, "comm": comm, "calls": calls, "time_ns": ns, "bytes": nbytes}
                    for i, node in enumerate(self._order)
                    for comm, (calls, ns, nbytes) in sorted(node.comms.items()))
            self._frames["node_comms"] = frame(COMMS_COLUMNS, rows)
        return self._frames["node_comms"]

    def rank_matrix(self, metric: str) -> np.ndarray:
        """A metric of NODE_METRICS per node (rows, as in `nodes`) and rank (columns, the
        tree's ranks in order), 0 where not known: `metrics` as one int64 array, for wide
        per-rank tables (pathscope.hatchet) without the long form's row per value."""
        tree = self.tree
        if tree is None:
            return np.zeros((0, 0), dtype=np.int64)
        key = COLUMNS[metric] if metric in COLUMNS else metric
        out = np.zeros((len(self._order), len(tree.ranks)), dtype=np.int64)
        for i, node in enumerate(self._order):
            values = tree.vector(node, key)
            if values is not None:
                out[i] = values
        return out

    def rank_matrices(self, metrics: list[str]) -> np.ndarray:
        """rank_matrix of each of metrics, stacked (metric, node, rank); from the rank files,
        in one walk of the tree that reads each node's rank values once for every metric."""
        tree = self.tree
        if tree is None or tree.reduced is not None or not metrics:
            return np.array([self.rank_matrix(m) for m in metrics], dtype=np.int64)
        position = {r: j for j, r in enumerate(tree.ranks)}
        width = len(tree.ranks)
        inclusive = {INCL_TIME: "incl_time", INCL_MPI: "incl_mpi", INCL_OFFCPU: "incl_offcpu"}
        cells: list[int] = []
        rows: list[list[int]] = []
        by_key: dict[str, tuple[list[int], list[int]]] = {k: ([], []) for k in inclusive}
        for i, node in enumerate(self._order):
            base = i * width
            cells.extend([base + position[rank] for rank in node.by_rank])
            rows.extend(node.by_rank.values())
            for key, attribute in inclusive.items():
                at, vals = by_key[key]
                values = getattr(node, attribute)
                at.extend([base + position[rank] for rank in values])
                vals.extend(values.values())
        out = np.zeros((len(metrics), len(self._order) * width), dtype=np.int64)
        asked = [(k, COLUMNS[m]) for k, m in enumerate(metrics) if m not in inclusive]
        # the rank lists in blocks (memory: a block of every stored metric, not all of them);
        # fromiter: a list of lists through np.array took twice as long
        for start in range(0, len(rows), CHUNK_ROWS):
            block = rows[start:start + CHUNK_ROWS]
            read = np.fromiter(chain.from_iterable(block), dtype=np.int64,
                               count=len(block) * METRIC_COUNT).reshape(-1, METRIC_COUNT)
            at = cells[start:start + CHUNK_ROWS]
            for k, column in asked:
                out[k, at] = read[:, column]
        for k, metric in enumerate(metrics):
            if metric in inclusive:
                at, vals = by_key[metric]
                out[k, at] = vals
        return out.reshape(len(metrics), len(self._order), width)

    @property
    def per_rank_known(self) -> bool:
        """Every node's per-rank values are in `metrics` (the rank files were read)."""
        tree = self.tree
        return tree is not None and tree.reduced is None

    @property
    def node_stats(self) -> pd.DataFrame:
        if "node_stats" not in self._frames:
            self._frames["node_stats"] = (self._stats_by_groupby() if self.per_rank_known
                                          else self._reduced_stats())
        return self._frames["node_stats"]

    def _stats_by_groupby(self) -> pd.DataFrame:
        """From `metrics`: each (node, metric) over the tree's ranks, the ranks without a
        row counting as 0."""
        tree = self.tree
        assert tree is not None
        if self.metrics.empty:
            return frame(STATS_COLUMNS, [])
        out = rank_statistics(self.metrics, ["node", "metric"], tree.ranks)
        return out[STATS_COLUMNS]

    def node_id(self, node: MergedNode) -> int:
        """The row of `nodes` of a node of self.tree."""
        if len(self._ids) != len(self._order):
            self._ids = {id(n): i for i, n in enumerate(self._order)}
        return self._ids[id(node)]

    def group_stats(self, metric: str, groups: Sequence[Sequence[int]]) -> pd.DataFrame:
        """Per group of nodes (ids of `nodes`: a function's call sites, a function's call
        paths), the statistics over the ranks of the per-rank sum of the metric (one of
        NODE_METRICS) over the group: by a groupby over each rank's values where every node
        of the group has them (rank files; rank vectors of --per-rank summary), else those of
        the group's one node with a value (the job's, tree.tsv), else the sum alone (the
        extremes <NA>: a sum of values known only by their statistics).  Columns sum, mean,
        min, min_rank, max, max_rank; a row per group, in order (index 0..)."""
        tree = self.tree
        columns = ["sum", "mean", "min", "min_rank", "max", "max_rank"]
        if tree is None or not groups:
            return frame(columns, [])
        key = COLUMNS[metric] if metric in COLUMNS else metric
        population = sorted(tree.ranks)
        ranks = np.asarray(tree.ranks, dtype=np.int64)
        vectors: dict[int, Optional[list[int]]] = {
            n: tree.vector(self._order[n], key) for nodes in groups for n in nodes}
        exact = {g for g, nodes in enumerate(groups) if all(vectors[n] is not None
                                                             for n in nodes)}
        # the long form (group, rank, value) of every node of the exact groups
        members = [(g, n) for g in sorted(exact) for n in groups[g]]
        long = pd.DataFrame({
            "group": np.repeat(np.asarray([g for g, _ in members], dtype=np.int64), len(ranks)),
            "rank": np.tile(ranks, len(members)),
            "value": np.asarray([v for _, n in members for v in vectors[n] or ()],
                                dtype=np.int64)})
        summed = long.groupby(["group", "rank"], as_index=False, sort=True)["value"].sum()
        by_group: dict[int, dict[str, Any]] = {}
        if len(summed):
            numbered = np.unique(summed["group"].to_numpy(), return_inverse=True)
            out = group_arrays(numbered[1].astype(np.int64), summed["rank"].to_numpy(),
                               summed["value"].to_numpy(), population)
            by_group = {int(g): {c: out[c][i].item() for c in columns}
                        for i, g in enumerate(numbered[0])}
        zero = {"sum": 0, "mean": 0.0, "min": 0, "min_rank": population[0] if population
                else 0, "max": 0, "max_rank": population[0] if population else 0}
        rows: list[dict[str, Any]] = []
        for g, nodes in enumerate(groups):
            if g in by_group:
                rows.append(by_group[g])
            elif g in exact:
                rows.append(zero)
            else:
                rows.append(self._combined(metric, nodes, zero))
        return frame(columns, rows)

    def _combined(self, metric: str, nodes: Sequence[int], zero: dict[str, Any]
                  ) -> dict[str, Any]:
        """The statistics of a group's sum from its nodes' statistics alone: those of its one
        node with a value, else the sum and mean without extremes."""
        stats = self._stats_by_node(metric)
        present = [stats[n] for n in nodes if n in stats]
        if not present:
            return zero
        if len(present) == 1:
            return present[0]
        total = sum(s["sum"] for s in present)
        return {"sum": total, "mean": total / len(self.tree.ranks)}   # type: ignore[union-attr]

    def _stats_by_node(self, metric: str) -> dict[int, dict[str, Any]]:
        """node_stats' rows of one metric, by node (kept)."""
        if metric not in self._by_node:
            s = self.node_stats
            rows = s[s["metric"] == metric].drop(columns="metric").to_dict("records")
            self._by_node[metric] = {int(r.pop("node")): {c: None if pd.isna(v) else v
                                                          for c, v in r.items()}
                                     for r in rows}
        return self._by_node[metric]

    def time_split(self) -> pd.DataFrame:
        """Table I of the hybrid-profiling paper (pathscope.calltree's module docstring): a
        row per part of SPLIT_PARTS (time: the merged threads' elapsed time; failed and
        not_unwound: those subtrees, with their MPI time; execution: the rest, its MPI time,
        on and off the CPU outside MPI; offcpu, mpi: the whole tree's) with its statistics
        over the tree's ranks (columns as group_stats'; part the index).  Rank files: by a
        groupby over each rank's values (split_by_rank); a reduced tree: the job's
        statistics (calltree.reduced_time_split: exact where rank vectors say each rank's
        value, else the sum alone for a difference of values that are not 0)."""
        if "time_split" not in self._frames:
            tree = self.tree
            if tree is None:
                split = frame(["part"] + SPLIT_COLUMNS, [])
            elif tree.reduced is not None:
                parts = reduced_time_split(tree)
                split = frame(["part"] + SPLIT_COLUMNS, (
                    {"part": part, "sum": s.sum, "mean": s.mean, "min": s.min,
                     "min_rank": s.min_rank, "max": s.max, "max_rank": s.max_rank}
                    for part, s in ((p, getattr(parts, p)) for p in SPLIT_PARTS)))
            else:
                values = self.split_by_rank().reset_index().melt(
                    id_vars="rank", value_vars=SPLIT_PARTS, var_name="part")
                split = rank_statistics(values, ["part"], tree.ranks)
            self._frames["time_split"] = split.set_index("part").reindex(SPLIT_PARTS)[
                SPLIT_COLUMNS]
        return self._frames["time_split"]

    def split_by_rank(self) -> pd.DataFrame:
        """A tree of rank files: per rank (the index) its value of each part of SPLIT_PARTS
        and `nodes`, the CCT nodes merged (the time split's tolerance: 1 ns per node)."""
        tree = self.tree
        assert tree is not None and tree.reduced is None
        failed, not_unwound = tree.pseudo(FAILED), tree.pseudo(NOT_UNWOUND)

        def values(node: Optional[MergedNode], key: str) -> "np.ndarray":
            return np.asarray(tree.vector(node, key), dtype=np.int64)   # type: ignore

        d = pd.DataFrame({"rank": tree.ranks, "time": [tree.elapsed[r] for r in tree.ranks]},
                         dtype=np.int64).set_index("rank")
        for key, suffix in ((INCL_TIME, ""), (INCL_MPI, "_mpi"), (INCL_OFFCPU, "_offcpu")):
            whole = values(tree.root, key)
            d["failed" + suffix] = values(failed, key)
            d["not_unwound" + suffix] = values(not_unwound, key)
            d["execution" + suffix] = whole - d["failed" + suffix] - d["not_unwound" + suffix]
            d["total" + suffix] = whole
        d["execution_oncpu"] = d["execution"] - d["execution_mpi"] - d["execution_offcpu"]
        d = d.rename(columns={"total_mpi": "mpi", "total_offcpu": "offcpu"})
        d["nodes"] = [tree.nodes[r] for r in tree.ranks]
        return d[SPLIT_PARTS + ["total", "nodes"]]

    def unaccounted(self) -> dict[str, tuple[int, int]]:
        """The time split's elapsed time minus the call tree's time, and what is allowed (1
        ns per node), by who: "rank R" (a tree of rank files) or "all ranks" (a reduced
        tree: the sums)."""
        tree = self.tree
        if tree is None:
            return {}
        if tree.reduced is not None:
            return reduced_time_split(tree).unaccounted
        d = self.split_by_rank()
        return {f"rank {r}": (int(t - total), int(n))
                for r, t, total, n in zip(d.index, d["time"], d["total"], d["nodes"])}

    def _reduced_stats(self) -> pd.DataFrame:
        """tree.tsv's statistics (the job's) of every node and metric with a value, built
        column by column (5,000 paths x 17 metrics: a dict per row took seconds)."""
        tree = self.tree
        if tree is None:
            return frame(STATS_COLUMNS, [])
        names = [m.name for m in STORED] + [INCL_TIME, INCL_MPI, INCL_OFFCPU]
        columns: dict[str, list[Any]] = {c: [] for c in STATS_COLUMNS}
        for i, node in enumerate(self._order):
            assert isinstance(node, ReducedNode)
            for name in names:
                s = node.stats.get(name)
                if s is None or not s.sum:
                    continue
                for column, value in zip(STATS_COLUMNS, (
                        i, name, s.sum, s.mean, s.min, s.min_rank, s.max, s.max_rank,
                        s.nonzero)):
                    columns[column].append(value)
        types = {c: pa.int64() for c in STATS_COLUMNS} | {"metric": pa.string(),
                                                          "mean": pa.float64()}
        return pa.table({c: pa.array(v, types[c]) for c, v in columns.items()}).to_pandas(
            types_mapper=pd.ArrowDtype)


def _totals(node: MergedNode) -> list[int]:
    """node's exclusive STORED metrics summed over the ranks: a merged node's rank lists
    added up once, not once per metric (node.total)."""
    if isinstance(node, ReducedNode) or not node.by_rank:
        return [node.total(m.column) for m in STORED]
    sums = [sum(column) for column in zip(*node.by_rank.values())]
    return [sums[m.column] for m in STORED]


def rank_statistics(values: pd.DataFrame, keys: list[str], ranks: Sequence[int]
                    ) -> pd.DataFrame:
    """Per group of keys of the long form values (keys, `rank`, `value`: at most one row per
    group and rank; values not negative where a rank has no row), the statistics over the
    population ranks: sum, mean (sum / P), min and max with their ranks, nonzero (the ranks
    whose value is not 0).  A rank of ranks without a row counts as 0; on ties the lowest
    rank is named (docs/format.md, "Merge rules").  One row per group present in values,
    sorted by keys; integer columns int64[pyarrow], mean float64[pyarrow].

    A pandas groupby numbers the groups (sorted by keys); group_arrays aggregates them."""
    columns = keys + ["sum", "mean", "min", "min_rank", "max", "max_rank", "nonzero"]
    if values.empty or not len(ranks):
        return frame(columns, [])
    grouped = values.groupby(keys, sort=True)
    out = group_arrays(grouped.ngroup().to_numpy(dtype=np.int64),
                       values["rank"].to_numpy(dtype=np.int64),
                       values["value"].to_numpy(dtype=np.int64), ranks)
    index = grouped.size().index
    table = {k: pa.array(index.get_level_values(k).to_numpy()) for k in keys}
    table.update({c: pa.array(v) for c, v in out.items()})
    return pa.table(table).select(columns).to_pandas(types_mapper=pd.ArrowDtype)


def group_arrays(group: "np.ndarray", rank: "np.ndarray", value: "np.ndarray",
                 ranks: Sequence[int]) -> dict[str, "np.ndarray"]:
    """rank_statistics' aggregation, on the columns of a long form whose groups are numbered
    0, 1, ... (each present): sum, mean, min, min_rank, max, max_rank, nonzero per group, in
    group order.  The rows sorted by group are aggregated by numpy's segment reductions
    (reduceat): the sum, and the minimum and maximum as the first row of each group sorted by
    value (ascending, descending) then rank.  (pandas' own aggregations on pyarrow columns
    took 20 to 90 ms per call on a few hundred rows, and the report asks several times.)"""
    population = np.asarray(sorted(ranks), dtype=np.int64)
    by_value = np.lexsort((rank, value, group))
    by_value_down = np.lexsort((rank, -value, group))
    starts = np.flatnonzero(np.diff(group[by_value], prepend=-1))
    rows = np.diff(np.append(starts, len(group)))
    total = np.add.reduceat(value[by_value], starts)
    low, high = by_value[starts], by_value_down[starts]
    out = {"sum": total, "mean": total / len(population),
           "min": value[low], "min_rank": rank[low], "max": value[high], "max_rank": rank[high],
           "nonzero": np.add.reduceat((value[by_value] != 0).astype(np.int64), starts)}
    # a rank without a row holds 0, the minimum (values are not negative): the lowest such
    # rank, unless a rank below it has a row of 0
    missing = rows < len(population)
    if missing.any():
        absent = _lowest_absent(group, rank, population)
        out["min_rank"] = np.where(~missing, out["min_rank"], np.where(
            out["min"] == 0, np.minimum(out["min_rank"], absent), absent))
        out["min"] = np.where(missing, 0, out["min"])
        out["max_rank"] = np.where(missing & (out["max"] == 0), out["min_rank"], out["max_rank"])
    return out


def _lowest_absent(group: "np.ndarray", rank: "np.ndarray", ranks: "np.ndarray"
                   ) -> "np.ndarray":
    """Per group (numbered 0.. in group): the lowest of ranks (ascending) without a row.
    With a group's ranks in order, the k-th one is ranks[k] until the first gap; the first
    k where it is not gives ranks[k], and a group without a gap lacks ranks[count]."""
    order = np.lexsort((rank, group))
    starts = np.flatnonzero(np.diff(group[order], prepend=-1))
    counts = np.diff(np.append(starts, len(group)))
    position = np.arange(len(group)) - np.repeat(starts, counts)
    expected = ranks[np.minimum(position, len(ranks) - 1)]
    none = np.iinfo(np.int64).max
    gap = np.minimum.reduceat(np.where(rank[order] != expected, expected, none), starts)
    after = ranks[np.minimum(counts, len(ranks) - 1)]
    return np.where(gap != none, gap, after)
