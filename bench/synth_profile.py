#!/usr/bin/env python3
"""A synthetic profile directory of P ranks and N call paths, for the analysis at scale (issue
14): profile.tsv and tree.tsv (format 2.9) as a `--per-rank none` run writes them, or with
--rank-files also every rank's ranks/rank-NNNNNN.tsv (a `--per-rank all` run), tree.tsv then
being their exact reduction.

    bench/synth_profile.py DIR                          # 10,000 ranks x 10,000 paths
    bench/synth_profile.py DIR --ranks 64 --paths 10000 --rank-files

The tree: one application (`solver`) with its libraries (libm, libmpi, libc, libstdc++), call
frames down to depth ~40, leaves that are sampled functions (`fn`, on and off the CPU), MPI
operations on a few communicators (with their `pcomm` parts), allocators (heap metrics),
system calls (kernel time, with a part no path got: the `ksys.*` scalars) and one probed
function.  Every value is a deterministic function of (seed, node, rank): two runs with the
same arguments write the same bytes.

Statistics without rank files are made from a model, not from P values per node, so a
10^4 x 10^4 profile is written in seconds: a node's value is m on its k ranks (k = P, P/2 or
P/7) except one rank at m - d and one at m + d, so that its sum, extremes, NONZERO and sketch
are consistent and exact for that model (pathscope's reader checks them).
"""
from __future__ import annotations

import argparse
import os
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))

from pathscope.stats import Stats  # noqa: E402

VERSION = "2.14"
RUN = "5e1f0c2d3b4a69788796a5b4c3d2e1f0"
MODULES = [("/opt/solver/bin/solver", "a1b2c3d4e5f60718"),
           ("/lib/x86_64-linux-gnu/libm.so.6", "0a1b2c3d4e5f6071"),
           ("/usr/lib/x86_64-linux-gnu/openmpi/lib/libmpi.so.40", "1b2c3d4e5f607182"),
           ("/lib/x86_64-linux-gnu/libc.so.6", "89abcdef01234567"),
           ("/lib/x86_64-linux-gnu/libstdc++.so.6", "-")]
MPI_OPS = ["MPI_Allreduce", "MPI_Send", "MPI_Recv", "MPI_Wait", "MPI_Bcast", "MPI_Barrier"]
COMMS = ["W", "W_s3.0", "W_s3.1", "W_d2"]
ALLOCATORS = ["malloc", "calloc", "realloc"]
SYSCALLS = ["write", "read", "futex", "openat"]
COUNTERS = ["unknown_requests", "request_table_full", "comm_table_full", "unknown_comms",
            "alloc_failures", "write_errors", "tree_full"]
PROBE_ADDRESS, PROBE_NAME = 0x401f00, "solver::exchange_halo"
# columns a leaf of each kind fills (exclusive), besides the inclusive ones
FILLS = {"fn": ("sample_ns", "samples", "offcpu_ns"), "mpi": ("visits", "mpi_ns", "bytes"),
         "heap": ("allocs", "alloc_bytes", "frees", "freed_bytes", "peak_bytes"),
         "syscall": ("syscalls", "kernel_ns"), "probe": ("probe_calls", "probe_time",
                                                         "probe_self_time")}
INCL = ("incl_time", "incl_mpi", "incl_offcpu")
SAMPLE_NS = 10_000_000          # 100 Hz
RANKVEC_PATHS = 64              # paths with `rankvec` lines (--per-rank summary)


class Node:
    def __init__(self, nid: int, parent: "Node | None", kind: str, module: str, address: str,
                 name: str, scale: int, presence: int):
        self.id, self.parent, self.kind = nid, parent, kind
        self.module, self.address, self.name = module, address, name
        self.scale = scale          # the mean of its main value on a rank that has it
        self.presence = presence    # every presence-th rank has it (1: all)
        self.children: list[Node] = []
        self.comms: list[Node] = []   # pcomm parts of an mpi node


def make_tree(paths: int, seed: int, sources: bool = True) -> list[Node]:
    """paths nodes below the root (the leaves carry the values), parents first; without
    sources, no system-call and probe leaves (a rank file needs its sources' sections for
    them)."""
    rng = random.Random(seed)
    root = Node(0, None, "root", "-", "-", "app", 0, 1)
    nodes = [root]
    main = Node(1, root, "call", "0", "0x401025", "-", 0, 1)
    root.children.append(main)
    nodes.append(main)
    frames = [main]
    while len(nodes) < paths + 1:
        parent = frames[rng.randrange(len(frames))] if len(frames) < 8 or rng.random() < 0.9 \
            else frames[-1]
        depth = 0
        up = parent
        while up.parent is not None:
            depth, up = depth + 1, up.parent
        presence = rng.choice((1, 1, 1, 2, 7))
        roll = rng.random()
        if not sources and roll >= 0.95:
            roll -= 0.5             # a sampled function instead
        nid = len(nodes)
        if roll < 0.45 and depth < 40:
            module = rng.choice(("0", "0", "0", "1", "3", "4"))
            node = Node(nid, parent, "call", module, f"0x{0x401000 + 16 * nid:x}", "-", 0,
                        presence)
            frames.append(node)
        elif roll < 0.75:
            node = Node(nid, parent, "fn", rng.choice(("0", "1", "3")),
                        f"0x{0x402000 + 32 * nid:x}", "-", rng.randint(1, 400) * SAMPLE_NS,
                        presence)
        elif roll < 0.88:
            node = Node(nid, parent, "mpi", "-", "-", rng.choice(MPI_OPS),
                        rng.randint(1, 2000) * 1000, presence)
        elif roll < 0.95:
            node = Node(nid, parent, "heap", "-", "-", rng.choice(ALLOCATORS),
                        rng.randint(1, 500), presence)
        elif roll < 0.995:
            node = Node(nid, parent, "syscall", "-", "-", rng.choice(SYSCALLS),
                        rng.randint(1, 300), presence)
        else:
            node = Node(nid, parent, "probe", "0", f"0x{PROBE_ADDRESS:x}", PROBE_NAME,
                        rng.randint(1, 50), presence)
        siblings = {(c.kind, c.module, c.address, c.name) for c in parent.children}
        if (node.kind, node.module, node.address, node.name) in siblings:
            continue                # one node per frame identity below a parent
        parent.children.append(node)
        nodes.append(node)
        if node.kind == "mpi":
            for comm in rng.sample(COMMS, rng.randint(1, 2)):
                part = Node(-1, node, "pcomm", "-", "-", comm, 0, presence)
                node.comms.append(part)
    return nodes


def leaf_values(node: Node, v: int) -> dict[str, int]:
    """A leaf's exclusive columns on a rank where its main value is v."""
    if not v:
        return {}
    if node.kind == "fn":
        return {"sample_ns": v, "samples": max(v // SAMPLE_NS, 1), "offcpu_ns": v // 8}
    if node.kind == "mpi":
        return {"visits": v // 1000 + 1, "mpi_ns": v, "bytes": (v // 1000) * 64}
    if node.kind == "heap":
        return {"allocs": v, "alloc_bytes": v * 48, "frees": v - v // 4,
                "freed_bytes": (v - v // 4) * 48, "peak_bytes": (v // 4) * 48}
    if node.kind == "syscall":
        return {"syscalls": v, "kernel_ns": v * 2500}
    if node.kind == "probe":
        return {"probe_calls": v, "probe_time": v * 40_000, "probe_self_time": v * 30_000}
    return {}


def rank_value(node: Node, rank: int, ranks: int) -> int:
    """The main value of node on rank (0 where it is absent)."""
    if rank % node.presence or not node.scale:
        return 0
    spread = ((rank * 7 + node.id * 3) % 11) - 5        # -5 .. 5
    return max(node.scale + node.scale * spread // 10, 1)


def model_stats(node: Node, ranks: int, value: int) -> Stats:
    """Model statistics of a column whose value is `value` on a typical rank of node's."""
    k = len(range(0, ranks, node.presence))
    if not value:
        return Stats.zero(ranks)
    d = value // 4
    low_rank = (node.id * 13) % k * node.presence
    high_rank = (node.id * 29 + 1) % k * node.presence
    if k == 1 or low_rank == high_rank:
        bins: dict[int, int] = {value.bit_length(): k}
        lo, hi, lo_rank, hi_rank, total = value, value, low_rank, low_rank, value * k
    else:
        lo, hi = value - d, value + d
        bins = {}
        for v, n in ((lo, 1), (value, k - 2), (hi, 1)):
            if n:
                bins[v.bit_length()] = bins.get(v.bit_length(), 0) + n
        lo_rank, hi_rank, total = low_rank, high_rank, value * k
    if k < ranks:                   # a rank without the node: the minimum is 0 there
        lo, lo_rank = 0, 1 if node.presence > 1 else 0
    return Stats(total, ranks, lo, lo_rank, hi, hi_rank, k, tuple(sorted(bins.items())))


def write_file(path: Path, lines) -> None:
    with open(path, "w") as out:
        for line in lines:
            out.write(line)
            out.write("\n")


def profile_lines(ranks: int, wall: list[int], mpi: list[int]):
    yield f"pathscope-profile\t{VERSION}"
    yield f"run\t{RUN}"
    yield "tool_version\t0.9.0"
    yield "program\tsolver"
    yield f"command\tmpirun -np {ranks} ./solver"
    yield "mpi_library\tOpen MPI v4.1.4"
    yield f"nranks\t{ranks}"
    yield "start_unix_ns\t1700000000000000000"
    for r in range(ranks):
        yield f"rank\t{r}\tnode{r // 64:04d}\t{wall[r]}\t{mpi[r]}"
    members = f"0-{ranks - 1}" if ranks > 1 else "0"
    yield f"comm\tW\t{ranks}\t0\t-\t-\t0\t{members}\t-\t0\t0\t0\t0\t0\t0\t0\t0\t0\t0"
    yield "op\t*\tMPI_Allreduce\t{0}\t{1}\t{2}\t{3}\t0\t{3}\t0\t{4}\t4:{0}".format(
        ranks * 10, ranks * 80, sum(mpi), min(mpi), ranks)
    yield "end"


# ---- tree.tsv from the model (no rank files) ---------------------------------------------------

def model_tree_lines(nodes: list[Node], ranks: int, extra: int = 0,
                     rank_vectors: bool = False):
    """rank_vectors: `rankvec` lines (`--per-rank summary`) for the RANKVEC_PATHS nodes with
    the most inclusive time whose model has a single largest rank (model_vector), of their
    columns whose largest rank stands out (value // 4 > 0)."""
    incl: dict[int, list[int]] = {}
    for node in reversed(nodes):
        own = leaf_values(node, node.scale)
        time = own.get("sample_ns", 0) + own.get("mpi_ns", 0)
        values = [time, own.get("mpi_ns", 0), own.get("offcpu_ns", 0)]
        for child in node.children:
            values = [a + b for a, b in zip(values, incl[child.id])]
        incl[node.id] = values
    yield from _tree_head(ranks, extra)
    root_time = incl[0][0]
    scalars = {"wall_ns": root_time + 50_000_000, "mpi_ns": incl[0][1],
               "thread.elapsed_ns": root_time, "thread.cpu_ns": root_time - incl[0][2],
               "thread.count": 1, "thread.nodes": len(nodes),
               "thread.samples_kept": max(root_time // SAMPLE_NS, 1),
               "heap.allocs": 1000}
    full = Node(-2, None, "root", "-", "-", "", 0, 1)
    for name, value in scalars.items():
        yield f"scalar\t{name}\t{model_stats(full, ranks, value).text()}"
    for name in SYSCALLS:           # a fifth of each system call's calls got no path
        calls = sum(n.scale for n in nodes if n.kind == "syscall" and n.name == name)
        yield f"scalar\tksys.calls.{name}\t{model_stats(full, ranks, calls + 40).text()}"
        yield f"scalar\tksys.ns.{name}\t{model_stats(full, ranks, (calls + 40) * 2500).text()}"
    columns: dict[int, dict[str, int]] = {}       # node id -> column -> typical value
    for node in nodes:
        typical = {c: v for c, v in leaf_values(node, node.scale).items() if v}
        typical.update((c, v) for c, v in zip(INCL, incl[node.id]) if v)
        typical.update((f"x{i}", incl[node.id][0] + i) for i in range(extra))
        columns[node.id] = typical
        yield _node_line(node, [f"{c}={model_stats(node, ranks, v).text()}"
                                for c, v in typical.items()])
        for part in node.comms:
            values = leaf_values(node, node.scale // len(node.comms))
            fields = [f"{c}={model_stats(node, ranks, v).text()}" for c, v in values.items()]
            yield _pcomm_line(part, fields)
    if rank_vectors:
        heaviest = sorted((n for n in nodes if _single_largest(n, ranks)),
                          key=lambda n: (-incl[n.id][0], n.id))[:RANKVEC_PATHS]
        for node in sorted(heaviest, key=lambda n: n.line_id):
            for c, v in columns[node.id].items():
                if v // 4:
                    values = ",".join(map(str, model_vector(node, ranks, v)))
                    yield f"rankvec\t{node.line_id}\t{c}\t{values}"
    yield "end"


def _single_largest(node: Node, ranks: int) -> bool:
    """True when model_stats gives node's columns one rank above the others (a vector of
    its model then has its maximum first at MAX_RANK, as the reader checks)."""
    k = len(range(0, ranks, node.presence))
    return k > 1 and (node.id * 13) % k != (node.id * 29 + 1) % k


def model_vector(node: Node, ranks: int, value: int) -> list[int]:
    """Each rank's value of a column whose model_stats are those of `value`: value on node's
    ranks, value - d on its lowest one and value + d on its highest (d = value // 4)."""
    k = len(range(0, ranks, node.presence))
    values = [0 if r % node.presence else value for r in range(ranks)]
    d = value // 4
    values[(node.id * 13) % k * node.presence] -= d
    values[(node.id * 29 + 1) % k * node.presence] += d
    return values


def _node_line(node: Node, fields: list[str]) -> str:
    parent = "-" if node.parent is None else str(node.parent.line_id)
    return "\t".join([f"node\t{node.line_id}\t{parent}\t{node.kind}\t{node.module}\t"
                      f"{node.address}\t{node.name}"] + fields)


def _pcomm_line(part: Node, fields: list[str]) -> str:
    assert part.parent is not None
    return "\t".join([f"node\t{part.line_id}\t{part.parent.line_id}\tpcomm\t-\t-\t"
                      f"{part.name}"] + fields)


def _tree_head(ranks: int, extra: int = 0):
    from pathscope.metrics import STORED
    yield f"pathscope-tree\t{VERSION}"
    yield f"run\t{RUN}"
    yield f"ranks\t{ranks}"
    yield "columns\t" + "\t".join([m.name for m in STORED] + list(INCL) +
                                   [f"x{i}" for i in range(extra)])
    for i, (path, build_id) in enumerate(MODULES):
        yield f"module\t{i}\t{path}\t{build_id}"
    for key, value in (("program", "solver"), ("mpi_library", "Open MPI v4.1.4"),
                       ("status", "complete"), ("tool_version", "0.9.0")):
        yield f"string\t{key}\t{ranks}\t{value}"
    yield f"probe\t1\t0\t0x{PROBE_ADDRESS:x}\t{PROBE_NAME}\tsolver.cpp\t120"


def assign_line_ids(nodes: list[Node]) -> None:
    """Ids in file order: each node, then its pcomm parts (depth first, parents first)."""
    next_id = 0
    order = []
    stack = [nodes[0]]
    while stack:
        node = stack.pop()
        node.line_id = next_id
        for i, part in enumerate(node.comms):
            part.line_id = next_id + 1 + i
        next_id += 1 + len(node.comms)
        order.append(node)
        stack.extend(reversed(node.children))
    nodes[:] = order


# ---- rank files and their exact reduction -------------------------------------------------------

def rank_values(nodes: list[Node], rank: int, ranks: int) -> dict[int, dict[str, int]]:
    """Every node's exclusive columns on rank, and its inclusive ones."""
    out: dict[int, dict[str, int]] = {}
    for node in reversed(nodes):
        own = leaf_values(node, rank_value(node, rank, ranks)) if node.scale else {}
        values = dict(own)
        values["incl_time"] = own.get("sample_ns", 0) + own.get("mpi_ns", 0)
        values["incl_mpi"] = own.get("mpi_ns", 0)
        values["incl_offcpu"] = own.get("offcpu_ns", 0)
        for child in node.children:
            for c in INCL:
                values[c] += out[child.id][c]
        out[node.id] = values
    return out


def rank_file_lines(nodes: list[Node], rank: int, ranks: int, values):
    root = values[0]
    elapsed = root["incl_time"]
    yield f"pathscope-rank\t{VERSION}"
    yield f"run\t{RUN}"
    for line in (f"rank\t{rank}", f"size\t{ranks}", "status\tcomplete",
                 f"host\tnode{rank // 64:04d}", f"pid\t{1000 + rank}", "program\tsolver",
                 f"command\tmpirun -np {ranks} ./solver", "tool_version\t0.9.0",
                 "mpi_library\tOpen MPI v4.1.4", "start_unix_ns\t1700000000000000000",
                 f"wall_ns\t{elapsed + 50_000_000}", f"mpi_ns\t{root['incl_mpi']}",
                 "thread_multiple\t0"):
        yield line
    for name in COUNTERS:
        yield f"counter_{name}\t0"
    members = f"0-{ranks - 1}" if ranks > 1 else "0"
    yield f"comm\tW\t{ranks}\t0\t{rank}\t-\t-\t0\t{members}\t-\t0\t0\t0\t0\t0\t0\t0\t0\t0\t0"
    yield f"op\tW\tMPI_Allreduce\t10\t80\t{root['incl_mpi']}\t4:10"
    yield "sampler\tperf-task-clock\t100\tcpu\t0\t0\t0\t0\tsamples\t0\t0"
    for i, (path, build_id) in enumerate(MODULES):
        yield f"module\t{i}\t{path}\t{build_id}"
    present = present_nodes(nodes, values)
    local = {n.id: i for i, n in enumerate(present)}
    kept = sum(values[n.id].get("samples", 0) for n in present)
    heap = [values[n.id] for n in present if n.kind == "heap"]
    totals = [sum(v[c] for v in heap) for c in FILLS["heap"]]
    yield (f"heap\tfull\t{totals[0]}\t{totals[1]}\t{totals[2]}\t{totals[3]}\t{totals[4]}\t0\t"
           f"{totals[1] - totals[3]}\t0\t0\t0")
    yield (f"thread\t0\t{1000 + rank}\t{elapsed}\t{kept}\t0\t0\t0\t{len(present)}\t-\t-\t0\t"
           f"{elapsed - root['incl_offcpu'] - root['incl_mpi']}")
    for n in present:
        v = values[n.id]
        parent = "-" if n.parent is None else str(local[n.parent.id])
        address = n.name if n.kind in ("mpi", "heap") else n.address
        module = n.module
        yield (f"node\t0\t{local[n.id]}\t{parent}\t{n.kind}\t{module}\t{address}\t"
               f"{v.get('visits', 0)}\t{v.get('sample_ns', 0)}\t{v.get('samples', 0)}\t"
               f"{v.get('mpi_ns', 0)}\t{v.get('bytes', 0)}\t0\t0\t{v.get('offcpu_ns', 0)}")
    for n in present:
        if n.kind == "heap":
            v = values[n.id]
            yield (f"hnode\t0\t{local[n.id]}\t{v['allocs']}\t{v['alloc_bytes']}\t{v['frees']}\t"
                   f"{v['freed_bytes']}\t{v['peak_bytes']}")
    for n in present:
        if n.kind == "mpi":
            for i, part in enumerate(n.comms):
                share = _comm_share(values[n.id], i, len(n.comms))
                yield (f"pcomm\t0\t{local[n.id]}\t{part.name}\t{share['visits']}\t"
                       f"{share['mpi_ns']}\t{share['bytes']}")
    yield "end"


def present_nodes(nodes: list[Node], values: dict[int, dict[str, int]]) -> list[Node]:
    """The nodes of a rank's tree: every frame, and the leaves with a value on this rank."""
    return [n for n in nodes if n.kind in ("root", "call") or any(values[n.id].values())]


def _comm_share(values: dict[str, int], i: int, parts: int) -> dict[str, int]:
    """Part i of an mpi node's calls, time and bytes (the last part takes the remainder)."""
    out = {}
    for c in ("visits", "mpi_ns", "bytes"):
        each = values.get(c, 0) // parts
        out[c] = each if i < parts - 1 else values.get(c, 0) - each * (parts - 1)
    return out


def reduced_tree_lines(nodes: list[Node], ranks: int, per_rank: list[dict]):
    """tree.tsv as the job would write it: the exact statistics of the rank files' values
    (rank-file mode has only the kinds rank files can say without their sources' sections:
    call, fn, mpi, heap)."""
    population = range(ranks)
    yield from _tree_head(ranks)
    roots = [values[0] for values in per_rank]
    scalars = {"thread.elapsed_ns": [v["incl_time"] for v in roots],
               "thread.count": [1] * ranks,
               "thread.nodes": [len(present_nodes(nodes, v)) for v in per_rank]}
    for name, vals in scalars.items():
        yield f"scalar\t{name}\t{Stats.of_ranks(dict(enumerate(vals)), population).text()}"
    columns = [c for c in (m for kind in FILLS.values() for m in kind)] + list(INCL)
    for node in nodes:
        fields = []
        for c in dict.fromkeys(columns):
            vals = {r: per_rank[r][node.id].get(c, 0) for r in population}
            if any(vals.values()):
                fields.append(f"{c}={Stats.of_ranks(vals, population).text()}")
        yield _node_line(node, fields)
        for i, part in enumerate(node.comms):
            fields = []
            for c in ("visits", "mpi_ns", "bytes"):
                vals = {r: _comm_share(per_rank[r][node.id], i, len(node.comms))[c]
                        for r in population}
                if any(vals.values()):
                    fields.append(f"{c}={Stats.of_ranks(vals, population).text()}")
            yield _pcomm_line(part, fields)
    yield "end"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--ranks", type=int, default=10_000)
    parser.add_argument("--paths", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--extra-columns", type=int, default=0,
                        help="columns this reader does not know (a newer minor format's), on "
                             "every node: parsed and checked, not used")
    parser.add_argument("--rank-files", action="store_true",
                        help="also write every rank's file (tree.tsv their exact reduction)")
    parser.add_argument("--rank-vectors", action="store_true",
                        help="without --rank-files: `rankvec` lines for the 64 heaviest paths "
                             "(a --per-rank summary run)")
    args = parser.parse_args()
    write_dir(args.directory, args.ranks, args.paths, args.seed, args.rank_files,
              args.extra_columns, args.rank_vectors)
    return 0


def write_dir(directory: Path, ranks: int, paths: int, seed: int = 14,
              rank_files: bool = False, extra_columns: int = 0,
              rank_vectors: bool = False) -> None:
    directory.mkdir(parents=True, exist_ok=False)
    nodes = make_tree(paths, seed, sources=not rank_files)
    assign_line_ids(nodes)
    if rank_files:
        per_rank = [rank_values(nodes, r, ranks) for r in range(ranks)]
        os.mkdir(directory / "ranks")
        for r in range(ranks):
            write_file(directory / "ranks" / f"rank-{r:06d}.tsv",
                       rank_file_lines(nodes, r, ranks, per_rank[r]))
        wall = [v[0]["incl_time"] + 50_000_000 for v in per_rank]
        mpi = [v[0]["incl_mpi"] for v in per_rank]
        write_file(directory / "tree.tsv", reduced_tree_lines(nodes, ranks, per_rank))
    else:
        write_file(directory / "tree.tsv", model_tree_lines(nodes, ranks, extra_columns,
                                                            rank_vectors))
        wall = [2_000_000_000] * ranks
        mpi = [500_000_000] * ranks
    write_file(directory / "profile.tsv", profile_lines(ranks, wall, mpi))


if __name__ == "__main__":
    sys.exit(main())
