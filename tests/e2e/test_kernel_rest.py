"""Kernel time (issue 16): at the default period, the calls no report carried (a thread's
calls of one system call after its last report) are spread over the paths that thread's
reports of it reached, in proportion, and marked as estimated (`knode` lines, format 2.12).

Exact: a loop of one system call from one site has all its calls on its path, with both
sources; `--kernel-period 0` has nothing estimated; the estimated part is the same in the rank
file, the report, the folded export and the in-job reduction (tree.tsv).  Bounded: two sites
3:1 one after the other are each within one period's worth of calls of the truth."""
import re

import pytest

from test_kernel import kernel_line, path_sum, run_kernel, tables, truth
from test_paths import cli, folded, rank_records

MODES = ["libc", "ebpf"]


def knodes(out, rank=0):
    """(thread, node id) -> [calls, ns] estimated, from the knode lines."""
    return {(int(r[1]), int(r[2])): [int(r[3]), int(r[4])]
            for r in rank_records(out, rank) if r[0] == "knode"}


def syscall_nodes(out, rank=0):
    """(thread, node id) -> (name, calls, ns) of the syscall nodes."""
    return {(int(r[1]), int(r[2])): (r[6], int(r[7]), int(r[13]))
            for r in rank_records(out, rank) if r[0] == "node" and r[4] == "syscall"}


def no_path(counts, name):
    return path_sum(counts, f"[kernel: no call path];{name}")


@pytest.mark.parametrize("mode", MODES)
def test_one_site_writes_exact_at_the_default_period(openmpi, tmp_path, mode):
    """3,000 writes of 100 bytes from one function: before issue 16, 1 on its path and 2,999
    under [kernel: no call path]; now all 3,000 on its path, the rest marked estimated."""
    out = tmp_path / "prof"
    t = truth(run_kernel(openmpi.prog("kernel_rest"), out, "writes", 3000, mode=mode).stdout)
    assert kernel_line(out)[1] == "1000000"
    assert tables(out)[(t["main"], "write")][0] == 3000
    counts = folded(out, "syscall_count", thread=0)
    assert path_sum(counts, ";main;write_loop;write") == 3000
    assert no_path(counts, "write") == 0
    # the estimated part: what the reports did not carry (the first call is always reported)
    estimated = folded(out, "syscall_count_estimated", thread=0)
    est = path_sum(estimated, ";main;write_loop;write")
    (node,) = [k for k, (name, calls, ns) in syscall_nodes(out).items()
               if k[0] == 0 and name == "write" and calls == 3000]
    assert knodes(out)[node][0] == est and 1 <= est <= 2999


@pytest.mark.parametrize("mode", MODES)
def test_one_site_getppid_exact_at_the_default_period(openmpi, tmp_path, mode):
    """20,000 getppid: before issue 16, about 1,900 had no path; now none of them."""
    out = tmp_path / "prof"
    t = truth(run_kernel(openmpi.prog("kernel_rest"), out, "getppid", 20000, mode=mode).stdout)
    calls, ns = tables(out)[(t["main"], "getppid")]
    assert calls == 20000
    counts = folded(out, "syscall_count", thread=0)
    assert path_sum(counts, ";main;getppid_loop;getppid") == 20000
    assert no_path(counts, "getppid") == 0
    # the time too: the path has the table's time (µs, rounded once)
    times = folded(out, "syscall_time", thread=0)
    assert abs(path_sum(times, ";main;getppid_loop;getppid") - ns / 1000) <= 1


def sites(out):
    counts = folded(out, "syscall_count", thread=0)
    estimated = folded(out, "syscall_count_estimated", thread=0)
    return ([path_sum(counts, f";main;{site};getppid") for site in ("site_three", "site_one")],
            [path_sum(estimated, f";main;{site};getppid") for site in ("site_three", "site_one")],
            no_path(counts, "getppid"))


@pytest.mark.parametrize("mode", MODES)
def test_two_sites_within_one_period(openmpi, tmp_path, mode):
    """150,000 getppid from one site, then 50,000 from another: many periods each.  Both
    sites' paths hold every call; the rest (less than one period of the thread's time in
    getppid) is spread in proportion to what the reports carried, calls by calls and time by
    time; each site is off the truth by at most one period's worth of calls (the batch that
    crossed from one site to the other, and the rest spread 3:1)."""
    n = 50000
    out = tmp_path / "prof"
    t = truth(run_kernel(openmpi.prog("kernel_rest"), out, "sites", n, mode=mode).stdout)
    calls, ns = tables(out)[(t["main"], "getppid")]
    assert calls == 4 * n
    (three, one), _, unattributed = sites(out)
    assert unattributed == 0 and three + one == 4 * n
    # the two getppid nodes, site_three's first (made first), and their estimated parts
    nodes = sorted((k, v) for k, v in syscall_nodes(out).items() if v[0] == "getppid")
    assert [v[1] for k, v in nodes] == [three, one]
    est = [knodes(out)[k] for k, v in nodes]
    reported = [[v[1] - e[0], v[2] - e[1]] for (k, v), e in zip(nodes, est)]
    rest = [est[0][i] + est[1][i] for i in (0, 1)]
    assert 0 < rest[1] < 1_000_000, est            # less than one period (1 ms) of time
    # calls by calls, time by time: exact (libc's time is split in TSC ticks, then each
    # value converted to ns: within 2 ns)
    for i, slack in ((0, 0), (1, 2 if mode == "libc" else 0)):
        share = rest[i] * reported[0][i] // (reported[0][i] + reported[1][i])
        assert abs(est[0][i] - share) <= slack, (est, reported)
    # one period's worth of calls: at the rate of the rest's calls (the mean rate counts the
    # calls a preemption made slow), or the mean rate if faster
    per_period = 1e6 * max(calls / ns, rest[0] / rest[1])
    assert abs(three - 3 * n) <= 1.5 * per_period, (three, one, per_period)


@pytest.mark.parametrize("mode", MODES)
def test_period_zero_stays_exact(openmpi, tmp_path, mode):
    n = 20000
    out = tmp_path / "prof"
    run_kernel(openmpi.prog("kernel_rest"), out, "sites", n, mode=mode, period=0)
    assert sites(out) == ([3 * n, n], [0, 0], 0)
    names = syscall_nodes(out)
    assert not [k for k in knodes(out) if names[k][0] == "getppid"]


def test_estimates_in_the_report(openmpi, tmp_path):
    out = tmp_path / "prof"
    run_kernel(openmpi.prog("kernel_rest"), out, "writes", 3000, mode="libc")
    est = path_sum(folded(out, "syscall_count_estimated", thread=0), ";main;write_loop;write")
    report = cli("report", out).stdout
    row = re.search(r"^\s+[\d.]+ \S+\s+[\d.]+%\s+([\d,]+)\s+([\d,]+|-)\s+(.*write_loop.*)$",
                    report, re.M)
    assert row and row.group(1) == "3,000" and row.group(2) == f"{est:,}", report
    assert "estimated: the calls after a thread's last report of a system call, spread over " \
           "the paths its reports reached in proportion" in report


def test_estimates_in_the_reduction(openmpi, tmp_path):
    """Two ranks at the default period: tree.tsv's reduction has the estimated columns, equal
    to the rank files' (reduced.differences compares every column of every node)."""
    from pathscope import reduced
    from pathscope.reader import load_profile
    out = tmp_path / "prof"
    n = 20000
    openmpi.run(2, [openmpi.prog("kernel_mpi"), n], outdir=out,
                pathscope_args=["--kernel", "libc"])
    assert reduced.differences(out) == []
    tree = load_profile(out).tree
    assert {"syscalls_estimated", "kernel_ns_estimated"} <= set(tree.columns)
    getppid = [node for node in tree.nodes if node.kind == "syscall" and node.name == "getppid"]
    assert sum(node.stats["syscalls"].sum for node in getppid) == 2 * n
    assert sum(node.stats["syscalls_estimated"].sum for node in getppid
               if "syscalls_estimated" in node.stats) > 0
