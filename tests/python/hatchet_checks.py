"""pathscope.hatchet with the real llnl-hatchet and llnl-thicket: run in .venv-hatchet (their
pandas<3 environment, scripts/setup.sh) by tests/python/test_hatchet.py and, on real runs, by
tests/e2e/test_diff_runs.py (PATHSCOPE_HATCHET_RUNS: the BASE and NEW directories, ':'-separated).

The hybrid fixture's numbers are its README's (data/hybrid/README.md)."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hatchet.query import ObjectQuery
from thicket import Thicket

import pathscope.hatchet as ph
from pathscope.errors import PathscopeError
from pathscope_samples import HYBRID
from test_diff import slowed

ROOT = Path(__file__).resolve().parents[2]
SOLVE_COMPUTE = ("_start", "__libc_start_call_main", "main", "solve / update", "compute")


def path_of(node):
    names = []
    while node is not None:
        names.append(node.frame["name"])
        node = node.parents[0] if node.parents else None
    return tuple(reversed(names))


def row(gf, path, rank=None, kind=None):
    """The rows of the node at path (of names; kind picks among call sites), by rank."""
    df = gf.dataframe
    nodes = {n for n in df.index.get_level_values("node")
             if path_of(n) == path and (kind is None or n.frame["type"] == kind)}
    assert len(nodes) == 1, (path, nodes)
    node = nodes.pop()
    return df.loc[node] if rank is None else df.loc[(node, rank)]


def test_the_dataframe_of_the_hybrid_fixture():
    gf = ph.read(HYBRID)
    df = gf.dataframe
    assert df.index.names == ["node", "rank"]
    assert len(df) == 24 * 2                        # every node on every rank
    assert list(df.columns) == ["name", "type", "file", "line", "module", "time", "time (inc)",
                                "visits", "sample time", "samples", "mpi time", "bytes",
                                "mpi time (inc)"]
    assert gf.exc_metrics == ["time", "visits", "sample time", "samples", "mpi time", "bytes"]
    assert gf.inc_metrics == ["time (inc)", "mpi time (inc)"]
    assert gf.default_metric == "time"
    assert gf.metadata == {"program": "solver", "nranks": 2, "pathscope_profile": str(HYBRID)}
    compute = row(gf, SOLVE_COMPUTE, kind="fn")
    assert compute["time"].tolist() == [1.1, 1.169]
    assert compute["samples"].tolist() == [110, 117]
    assert (compute["file"].tolist(), compute["line"].tolist()) == (
        ["/src/solver/compute.c"] * 2, [10, 10])
    allreduce = row(gf, ("_start", "__libc_start_call_main", "main", "solve", "MPI_Allreduce"))
    assert allreduce["mpi time"].tolist() == [0.3, 0.6]
    assert allreduce["visits"].tolist() == [20, 20]
    assert allreduce["bytes"].tolist() == [160, 160]
    recv = row(gf, ("_start", "__libc_start_call_main", "main", "MPI_Recv"))
    assert (recv["time"].tolist(), recv["bytes"].tolist()) == ([0.15, 0.0], [5120, 0])
    start = row(gf, ("_start",))
    assert start["time (inc)"].tolist() == [1.944, 1.979]
    assert start["mpi time (inc)"].tolist() == [0.45, 0.61]
    assert round(df["time"].sum() * 1e9) == 6_700_000_001
    roots = sorted(r.frame["name"] for r in gf.graph.roots)
    assert roots == ["[failed unwind]", "[not unwound]", "__clone3", "_start"]


def test_tree_prints_the_call_tree():
    gf = ph.read(HYBRID)
    text = gf.tree()
    for line in ("0.000 _start", "│     ├─ 1.100 compute /src/solver/compute.c",
                 "│     └─ 0.000 compute /src/solver/compute.c",
                 "│        └─ 0.200 libkernels.so+0x1a4f", "│  │  └─ 0.300 MPI_Allreduce",
                 "   ├─ 1.200 worker /src/solver/worker.c"):
        assert line in text, line
    assert "├─ 1.169 compute /src/solver/compute.c" in gf.tree(rank=1)
    assert "└─ 1.300 solve / update /src/solver/update.h" in gf.tree(
        metric_column="time (inc)")


def test_filter_and_query():
    gf = ph.read(HYBRID)
    mpi = gf.filter(lambda r: r["type"] == "mpi", squash=True)
    assert sorted(n.frame["name"] for n in mpi.graph.traverse()) == [
        "MPI_Allreduce", "MPI_Comm_dup", "MPI_Finalize", "MPI_Recv", "MPI_Send"]
    assert mpi.dataframe["visits"].sum() == 40 + 2 + 2 + 5 + 5
    # a path query, compute and everything below it: squashed, the three call sites of
    # compute's line 10 (solve / update, [failed unwind], worker) become one root
    below = gf.filter(ObjectQuery([{"name": "compute"}, "*"], multi_index_mode="all"))
    assert sorted((n.frame["name"], n.frame["line"]) for n in below.graph.traverse()) == [
        ("compute", 10), ("compute", 15), ("libkernels.so+0x1a4f", 0)]
    line10 = [n for n in below.graph.roots if n.frame["line"] == 10][0]
    assert [round(t * 1e9) for t in below.dataframe.loc[line10, "time"]] == [
        1_380_000_000, 1_319_000_000]                      # 1.1 + 0.03 + 0.25, 1.169 + 0.15
    # over the ranks summed: the nodes holding more than 0.5 s of their own
    summed = gf.deepcopy()
    summed.drop_index_levels(function="sum")
    heavy = summed.filter(lambda r: r["time"] > 0.5, squash=True)
    assert sorted((n.frame["name"], round(heavy.dataframe.loc[n, "time"], 9))
                  for n in heavy.graph.traverse()) == [
        ("MPI_Allreduce", 0.9), ("compute", 2.269), ("worker", 2.2)]


def test_thicket_of_two_profiles(tmp_path):
    new = slowed(tmp_path / "new")
    th = ph.thicket([HYBRID, new])
    assert isinstance(th, Thicket)
    df = th.dataframe
    assert df.index.names == ["node", "profile", "rank"]
    assert len(df) == 24 * 2 * 2                    # one tree: both profiles have its nodes
    assert sorted(th.profile_mapping.values()) == sorted([str(HYBRID), str(new)])
    assert sorted(th.metadata["pathscope_profile"]) == sorted([str(HYBRID), str(new)])
    by_name = {v: k for k, v in th.profile_mapping.items()}
    compute = [n for n in th.graph.traverse() if path_of(n) == SOLVE_COMPUTE
               and n.frame["type"] == "fn"][0]
    assert df.loc[(compute, by_name[str(HYBRID)], 0), "time"] == 1.1
    assert df.loc[(compute, by_name[str(new)], 0), "time"] == 1.6
    assert "1.600 compute" in th.tree(metric_column="time") or "1.100 compute" in th.tree(
        metric_column="time")


def frames_of(node):
    """A node's path of frames (name, type, file, line), root first."""
    path = []
    while node is not None:
        path.append(tuple(node.frame[k] for k in ("name", "type", "file", "line")))
        node = node.parents[0] if node.parents else None
    return tuple(reversed(path))


def rows_by_path(th, columns):
    """The dataframe as {(path of frames, profile name, rank...): values of columns}, NaN as
    None."""
    df = th.dataframe[columns]
    out = {}
    for index, values in zip(df.index, df.itertuples(index=False)):
        index = index if isinstance(index, tuple) else (index,)
        key = (frames_of(index[0]), th.profile_mapping[index[1]], *index[2:])
        assert key not in out, key
        out[key] = tuple(None if v is None or v != v else v for v in values)
    return out


def synthetic(tmp_path, name, seed, paths):
    d = tmp_path / name
    subprocess.run([sys.executable, ROOT / "bench" / "synth_profile.py", d, "--ranks", "3",
                    "--paths", str(paths), "--seed", str(seed)], check=True,
                   capture_output=True)
    return str(d)


@pytest.mark.parametrize("pair", ["slowed", "synthetic", "mixed"])
def test_thicket_is_what_concat_thickets_makes(tmp_path, pair):
    """pathscope.hatchet.thicket builds the union itself: the same graph, rows, values,
    metrics and metadata as Thicket.concat_thickets of the profiles' GraphFrames.  Pairs:
    the hybrid fixture and its slowed copy (one tree, (node, rank) rows); two synthetic
    reduced profiles of different trees (rows missing in one profile: NaN, names None); the
    hybrid fixture and a reduced profile (different trees, rank 0 for the reduced one)."""
    a, b = {"slowed": lambda: (str(HYBRID), str(slowed(tmp_path / "new"))),
            "synthetic": lambda: (synthetic(tmp_path, "s1", 14, 60),
                                  synthetic(tmp_path, "s2", 15, 90)),
            "mixed": lambda: (str(HYBRID), synthetic(tmp_path, "s1", 14, 60))}[pair]()
    ours = ph.thicket([a, b])
    theirs = Thicket.concat_thickets(
        [Thicket.thicketize_graphframe(ph.read(d), d) for d in (a, b)], axis="index",
        calltree="union", disable_tqdm=True)
    assert ours.dataframe.index.names == theirs.dataframe.index.names
    # (concat_thickets puts the last profile's columns first: ours are the first's)
    columns = list(theirs.dataframe.columns)
    assert sorted(ours.dataframe.columns) == sorted(columns)
    assert rows_by_path(ours, columns) == rows_by_path(theirs, columns)
    missing = ours.dataframe["name"].isna().sum()
    assert (missing > 0) == (pair != "slowed")
    assert sorted(map(frames_of, ours.graph.traverse())) == sorted(
        map(frames_of, theirs.graph.traverse()))
    assert [n._hatchet_nid for n in ours.graph.traverse()] == list(range(
        len(list(ours.graph.traverse()))))
    assert (sorted(ours.exc_metrics), sorted(ours.inc_metrics)) == (
        sorted(theirs.exc_metrics), sorted(theirs.inc_metrics))
    assert ours.metadata.equals(theirs.metadata)
    assert (ours.profile, ours.profile_mapping) == (theirs.profile, theirs.profile_mapping)
    assert sorted(ours.statsframe.dataframe["name"]) == sorted(
        theirs.statsframe.dataframe["name"])


def test_thicket_of_nothing_or_one_profile_twice():
    with pytest.raises(PathscopeError) as e:
        ph.thicket([])
    assert str(e.value) == "pathscope.hatchet.thicket: no profiles"
    with pytest.raises(PathscopeError) as e:
        ph.thicket([HYBRID, str(HYBRID)])
    assert str(e.value) == f"pathscope.hatchet.thicket: the same profile twice: {HYBRID}"


def test_a_reduced_profile_is_indexed_by_node(tmp_path):
    """tree.tsv alone: one row per node with the sums over the ranks, equal to the rank
    files' frame summed over its ranks."""
    d = tmp_path / "prof"
    subprocess.run([sys.executable, ROOT / "bench" / "synth_profile.py", d, "--ranks", "6",
                    "--paths", "80", "--rank-files"], check=True, capture_output=True)
    reduced = tmp_path / "reduced"
    shutil.copytree(d, reduced, ignore=shutil.ignore_patterns("ranks"))
    files, tree = ph.read(d), ph.read(reduced)
    assert files.dataframe.index.names == ["node", "rank"]
    assert tree.dataframe.index.names == ["node"]
    assert list(files.dataframe.columns) == list(tree.dataframe.columns)
    summed = files.dataframe.groupby(level="node")[files.exc_metrics + files.inc_metrics].sum()
    by_path = {path_of(n): r for n, r in summed.iterrows()}
    checked = 0
    for node, r in tree.dataframe.iterrows():
        other = by_path[path_of(node)]
        for metric in tree.exc_metrics + tree.inc_metrics:
            assert r[metric] == pytest.approx(other[metric], rel=1e-12, abs=1e-12), metric
            checked += 1
    assert checked > 500
    assert "solver" in tree.tree()


def test_no_profile_is_an_error(tmp_path):
    from pathscope.errors import ProfileError
    from pathscope_samples import write_sample
    with pytest.raises(ProfileError, match="^profile directory not found: "):
        ph.read(tmp_path / "nope")
    flat = write_sample(tmp_path / "flat")               # format 1.0: no call paths
    with pytest.raises(ProfileError) as e:
        ph.read(flat)
    assert str(e.value) == (f"no call-path data in {flat} (profile format 1.x or sampling and "
                            f"unwinding were off)")


# ---- real runs (tests/e2e/test_diff_runs.py sets PATHSCOPE_HATCHET_RUNS) ---------------------------

def runs():
    value = os.environ.get("PATHSCOPE_HATCHET_RUNS")
    if not value:
        pytest.skip("real runs: tests/e2e/test_diff_runs.py runs this test")
    return value.split(":")


def test_real_run():
    """paths_mpi on 2 ranks (tests/programs/paths_mpi.c): exchange_x and exchange_y call
    MPI_Allreduce 30 and 70 times on every rank; NEW's compute_b ran 4x the iterations.
    A profile read from tree.tsv is indexed by node (sums), one with rank files by node and
    rank: the sums are the same."""
    base, new = runs()
    gf = ph.read(base)
    df = gf.dataframe
    per_rank = "rank" in df.index.names
    if per_rank:
        assert sorted(set(df.index.get_level_values("rank"))) == [0, 1]
    calls = {}
    for node in gf.graph.traverse():
        if node.frame["name"] == "MPI_Allreduce":
            visits = df.loc[node, "visits"]
            calls[node.parents[0].frame["name"]] = (visits.tolist() if per_rank
                                                    else int(visits))
    assert calls == ({"exchange_x": [30, 30], "exchange_y": [70, 70]} if per_rank
                     else {"exchange_x": 60, "exchange_y": 140})
    mpi = gf.filter(lambda r: r["name"] == "MPI_Allreduce", squash=True)
    assert mpi.dataframe["visits"].sum() == 200
    assert mpi.dataframe["bytes"].sum() == 200 * 64
    th = ph.thicket([base, new])
    by_name = {v: k for k, v in th.profile_mapping.items()}
    summed = th.dataframe.groupby(level=["node", "profile"])["time"].sum()
    b = [n for n in th.graph.traverse() if n.frame["name"] == "compute_b"]
    assert len(b) == 1
    assert summed[(b[0], by_name[new])] > 2 * summed[(b[0], by_name[base])]
