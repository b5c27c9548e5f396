"""Format 2.12 (issue 16): the estimated part of `syscall` nodes (`knode` lines) read from a
rank file written by hand, shown by the report and the exports; malformed `knode` lines make
the rank unreadable.

One rank, one thread (tid 4100), the libc source at the default period:

    main (app.c:10) > [write]     1,000 calls, 10 ms, of which 600 calls and 4 ms estimated
    main (app.c:12) > [write]       500 calls,  5 ms, of which 300 calls and 2 ms estimated
    [kernel: no call path] > [read] 40 calls, 1 ms (the thread's reads reached no path)

The `ksys` lines: write 1,500 calls 15 ms, read 40 calls 1 ms.
"""
import io

import pytest

from pathscope.calltree import build_tree
from pathscope.export import export_call_paths
from pathscope.reader import load_profile
from pathscope.report import render
from pathscope.symbolize import resolve_symbols
from pathscope_samples import rank_rows, read_rows, with_run, write_profile, write_rows

RUN = "0123456789abcdef0123456789abcdef"
MS = 1_000_000
APP = "/opt/app/bin/app"
SYMBOLS = ("pathscope-symbols\t2.0\n"
           f"module\t0\t{APP}\tab12\tok\n"
           "frame\t0\t0x401010\tcall\t0\tmain\t/src/app.c\t10\n"
           "frame\t0\t0x401018\tcall\t0\tmain\t/src/app.c\t12\nend\n")


def rank_file(version="2.12"):
    def node(index, parent, kind, module, address, visits=0, kernel_ns=0):
        return ("node", 0, index, "-" if parent is None else parent, kind, module, address,
                visits, 0, 0, 0, 0, 0, kernel_ns, 0)

    nodes = [node(0, None, "root", "-", "-"), node(1, 0, "call", 0, "0x401010"),
             node(2, 1, "syscall", "-", "write", 1000, 10 * MS),
             node(3, 0, "call", 0, "0x401018"),
             node(4, 3, "syscall", "-", "write", 500, 5 * MS)]
    extra = [("module", 0, APP, "ab12"),
             ("kernel", "libc", 1_000_000, "wrappers", 4, 0, 0, "-"),
             ("ksys", 4100, "write", 1500, 15 * MS), ("ksys", 4100, "read", 40, 1 * MS),
             ("kend", 0, 0),
             ("thread", 0, 4100, 1000 * MS, 0, 0, 0, 0, len(nodes), "-", "-", 0, 900 * MS),
             *nodes,
             ("knode", 0, 2, 600, 4 * MS), ("knode", 0, 4, 300, 2 * MS)]
    rows = rank_rows(0, 1, "complete", "node0", 1000 * MS, 0, extra=extra, program="app")
    return with_run(rows, RUN, version)


@pytest.fixture
def run_dir(tmp_path):
    d = write_profile(tmp_path / "prof", None, {0: rank_file()})
    (d / "symbols.tsv").write_text(SYMBOLS)
    return d


def folded(profile, metric):
    out = io.StringIO()
    export_call_paths(profile, "folded", out, resolve_symbols(profile), metric)
    return dict(line.rsplit(" ", 1) for line in out.getvalue().splitlines())


def test_nodes_carry_their_estimated_part(run_dir):
    nodes = load_profile(run_dir).callpaths[0].threads[0].nodes
    assert [(n.syscalls_est, n.kernel_ns_est) for n in nodes] == [
        (0, 0), (0, 0), (600, 4 * MS), (0, 0), (300, 2 * MS)]


def test_exports_show_the_estimated_part(run_dir):
    p = load_profile(run_dir)
    assert folded(p, "syscall_count") == {
        "main;write": "1500", "[kernel: no call path];read": "40"}
    assert folded(p, "syscall_count_estimated") == {"main;write": "900"}
    assert folded(p, "syscall_time_estimated") == {"main;write": "6000"}


def test_report_shows_the_estimated_column(run_dir):
    text = render(load_profile(run_dir))
    lines = text.split("Top paths by time in system calls")[1].splitlines()
    assert lines[1].split() == ["time", "%", "calls", "estimated", "path"]
    assert lines[2].split()[3:] == ["1,000", "600", "main", ">", "write"]
    assert lines[3].split()[3:] == ["500", "300", "main", ">", "write"]
    assert lines[4].split()[3:] == ["40", "-", "[kernel:", "no", "call", "path]", ">", "read"]
    assert lines[5].strip().startswith("estimated: the calls after a thread's last report")


def test_an_older_profile_has_no_estimated_metric(tmp_path):
    rows = [r for r in rank_file("2.11") if r[0] != "knode"]
    d = write_profile(tmp_path / "prof", None, {0: rows})
    (d / "symbols.tsv").write_text(SYMBOLS)
    with pytest.raises(Exception, match="format 2.12 or later"):
        folded(load_profile(d), "syscall_count_estimated")
    assert build_tree(load_profile(d)).root.total(0) == 0     # read all the same


@pytest.mark.parametrize("change, message", [
    (lambda r: r.__setitem__(2, "1"),
     "'knode' line names node 1 of thread 0, a 'call' node, not a 'syscall' node"),
    (lambda r: r.__setitem__(2, "9"),
     "'knode' line names node 9 of thread 0, which does not exist"),
    (lambda r: r.__setitem__(2, "2"), "node 2 of thread 0 has two 'knode' lines"),
    (lambda r: r.__setitem__(3, "501"),
     "'knode' line: 501 calls and 2000000 ns estimated of node 4's 500 calls and "
     "5000000 ns"),
    (lambda r: r.pop(), "'knode' line has 3 fields after the type, expected 4"),
    (lambda r: r.__setitem__(4, "-1"), "'knode' line: field 5 '-1' is negative"),
])
def test_malformed_knode_makes_the_rank_unreadable(run_dir, change, message):
    path = run_dir / "ranks" / "rank-000000.tsv"
    rows = read_rows(path)
    line = max(i for i, r in enumerate(rows) if r[0] == "knode")
    change(rows[line])
    write_rows(path, rows)
    p = load_profile(run_dir)
    assert p.incomplete_ranks == [(0, f"unreadable: {path}:{line + 1}: {message}")]
