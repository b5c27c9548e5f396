"""pathscope.open: a profile as pandas DataFrames (issue 15; python/pathscope/frames.py).

The frames hold what the export tables and the call tree hold: every table equal to its
export rows, every node of the report's tree once, and the cross-rank statistics computed by
a pandas groupby equal, value for value, to the call tree's own (pathscope.stats)."""
import math

import pandas as pd
import pytest

import pathscope
from pathscope.calltree import build_tree
from pathscope.export.tables import TABLES
from pathscope.frames import NODE_METRICS, ProfileFrames
from pathscope.metrics import STORED
from pathscope.reader import load_profile
from pathscope_samples import HYBRID, write_sample


def plain(value):
    if value is None or value is pd.NA:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


@pytest.mark.parametrize("which", ["sample", "hybrid"])
def test_every_table_holds_its_export_rows(tmp_path, which):
    d = write_sample(tmp_path / "prof") if which == "sample" else HYBRID
    p = pathscope.open(d)
    for name, spec in TABLES.items():
        built = spec.build(p.profile)
        rows = list(built.rows)
        df = p.table(name)
        assert list(df.columns) == list(built.columns), name
        assert len(df) == len(rows), name
        for got, want in zip(df.to_dict("records"), rows):
            for column in built.columns:
                expected = want.get(column)
                if isinstance(expected, dict):
                    expected = [{"bin": k, "count": v} for k, v in sorted(expected.items())]
                assert plain(got[column]) == expected, (name, column)
    assert p.comm_ops is p.table("comm-ops")          # built once, by attribute or name
    assert str(p.comm_ops["calls"].dtype) == "int64[pyarrow]"
    with pytest.raises(KeyError, match="no table 'nope'"):
        p.table("nope")


def test_nodes_are_the_call_tree_depth_first():
    p = pathscope.open(HYBRID)
    tree = build_tree(load_profile(HYBRID), runtime_threads=True)
    walked = list(tree.root.walk())
    nodes = p.nodes
    assert list(nodes["node"]) == list(range(len(walked)))
    assert nodes["parent"].isna().tolist() == [True] + [False] * (len(walked) - 1)
    assert (nodes["parent"].iloc[1:] < nodes["node"].iloc[1:]).all()
    assert nodes.loc[0, "name"] == "[all threads]"
    for i, node in enumerate(walked):
        assert nodes.loc[i, "incl_time"] == node.incl_time_ns
        for metric in STORED:
            assert nodes.loc[i, metric.name] == node.total(metric.column)
    assert nodes["incl_time"].iloc[0] == 6_700_000_001      # data/hybrid/README.md


def test_groupby_statistics_equal_the_call_trees():
    """The hybrid fixture's rank files: sum, min and max with their lowest ranks and the
    ranks with a value, per node and metric, from metrics by pandas -- against tree.stat."""
    p = pathscope.open(HYBRID)
    tree = p.tree
    stats = p.node_stats.set_index(["node", "metric"])
    keys = {m.name: m.column for m in STORED} | {k: k for k in NODE_METRICS[len(STORED):]}
    checked = 0
    for i, node in enumerate(tree.root.walk()):
        for name, key in keys.items():
            s = tree.stat(node, key)
            if not s.sum:
                assert (i, name) not in stats.index
                continue
            row = stats.loc[(i, name)]
            assert (row["sum"], row["min"], row["min_rank"], row["max"], row["max_rank"],
                    row["nonzero"]) == (s.sum, s.min, s.min_rank, s.max, s.max_rank,
                                        s.nonzero), (i, name)
            assert row["mean"] == pytest.approx(s.mean)
            checked += 1
    assert checked > 50


def test_a_reduced_profile_gives_the_jobs_statistics(tmp_path):
    """bench/synth_profile.py writes rank files and their exact reduction, tree.tsv: the
    statistics of tree.tsv alone (the job's) equal those pandas computes from the rank files,
    node by node (matched by their path of names), and metrics is empty without rank
    vectors."""
    import shutil
    import subprocess
    import sys
    from conftest import ROOT
    d = tmp_path / "prof"
    subprocess.run([sys.executable, ROOT / "bench" / "synth_profile.py", d, "--ranks", "6",
                    "--paths", "80", "--rank-files"], check=True, capture_output=True)
    from_files = pathscope.open(d)
    assert from_files.per_rank_known and len(from_files.metrics) > 0
    shutil.rmtree(d / "ranks")
    reduced = pathscope.open(d)
    assert not reduced.per_rank_known and reduced.metrics.empty

    def by_path(p):
        nodes = p.nodes.set_index("node")
        paths = {}
        for node, row in nodes.iterrows():
            parent = row["parent"]
            paths[node] = (paths[parent] if parent is not pd.NA else ()) + (
                (row["kind"], row["name"]),)
        table = p.node_stats.copy()
        table["path"] = [paths[n] for n in table["node"]]
        return {(r["path"], r["metric"]): (r["sum"], r["min"], r["min_rank"], r["max"],
                                           r["max_rank"], r["nonzero"])
                for r in table.to_dict("records")}
    a, b = by_path(from_files), by_path(reduced)
    assert len(a) > 100 and a == b


def test_rank_matrix_is_metrics_wide():
    """rank_matrix: the rows of `metrics` as one array per metric (node x rank, 0 where a
    rank has no row); node 5 is solve / update's compute (data/hybrid/README.md)."""
    import numpy as np
    p = pathscope.open(HYBRID)
    m = p.metrics
    for metric in ("sample_ns", "mpi_ns", "visits", "incl_time"):
        got = p.rank_matrix(metric)
        want = np.zeros((len(p.nodes), 2), dtype=np.int64)
        for r in m[m["metric"] == metric].itertuples():
            want[r.node, r.rank] = r.value            # (the ranks are 0 and 1)
        assert (got == want).all(), metric
    assert p.rank_matrix("sample_ns")[5].tolist() == [1_100_000_000, 1_169_000_000]


def test_rank_matrices_stack_rank_matrix(tmp_path):
    """rank_matrices reads a merged tree's rank values in one walk: the same arrays as
    rank_matrix one metric at a time, stored and inclusive metrics alike, in the order
    asked; on a reduced profile with rank vectors (--per-rank summary) it is rank_matrix
    stacked."""
    import subprocess
    import sys
    import numpy as np
    from conftest import ROOT
    vectors = tmp_path / "vectors"
    subprocess.run([sys.executable, ROOT / "bench" / "synth_profile.py", vectors, "--ranks",
                    "6", "--paths", "80", "--rank-vectors"], check=True, capture_output=True)
    asked = ["incl_offcpu", "sample_ns", "bytes", "incl_time", "mpi_ns", "visits", "incl_mpi"]
    for directory in (HYBRID, vectors):
        p = pathscope.open(directory)
        got = p.rank_matrices(asked)
        assert got.shape == (len(asked), len(p.nodes), len(p.tree.ranks))
        assert (got == np.array([p.rank_matrix(m) for m in asked])).all(), directory
        assert got.any()
    hybrid = pathscope.open(HYBRID).rank_matrices(["sample_ns", "incl_time"])
    assert hybrid[0, 5].tolist() == [1_100_000_000, 1_169_000_000]
    assert hybrid[1, 0].sum() == 6_700_000_001
