"""Format 2.6 (issue 13): probed functions read from the rank files (`probes`, `probe`,
`probe-refused`, `pnode`), merged across ranks whose probe ids and module ids differ, their
metrics in the exports, the `probes` and `probe-refusals` tables and the report's section;
malformed probe lines make the rank unreadable.

The profile is written by hand: two ranks, one thread each, metrics `cpu` (times in ms):

    main (call site app.c:10) > gather (call sites gather.c:41 and :42) > [wait_one]
    main (call site app.c:12) > [fact]            outermost calls
    main:12 > fact (call site fact.c:5) > [fact]  nested calls (recursion)

                     rank 0: calls incl excl cpu      rank 1: calls incl excl cpu
    wait_one @41             10    200  200   5               10    220  220   6
    wait_one @42             10     10   10   1               10     11   11   2
    fact (outer)              3     30   12  29                3     40   16  39
    fact (nested)             6     18   18  17                6     24   24  23

wait_one at 0x401400 (48 bytes), fact at 0x401600 (64 bytes): probes 1 and 2 on rank 0,
2 and 1 on rank 1, which also lists its modules in another order and has a third probe
(`idle`, removed, never called).  So wait_one: 40 calls, 441 ms; the call site at line 41
takes 420 ms, 20 times the 21 ms of line 42.  fact: 18 calls of which 6 outermost, 70 ms
inclusive (the nested 42 ms are inside it), 70 ms exclusive (28 + 42), 68 ms CPU.
"""
import io

import pytest

from pathscope.calltree import build_tree
from pathscope.cli import main
from pathscope.export import export_call_paths
from pathscope.export.tables import build_table
from pathscope.metrics import COLUMNS
from pathscope.reader import load_profile
from pathscope.report import render
from pathscope.sources.probe import PROBE_REFUSALS_COLUMNS, PROBES_COLUMNS
from pathscope.symbolize import resolve_symbols
from pathscope.symbols import Frame
from pathscope_samples import HYBRID, rank_rows, read_rows, with_run, write_profile, write_rows

RUN = "0123456789abcdef0123456789abcdef"
MS = 1_000_000
APP, LIBC = "/opt/app/bin/app", "/lib/x86_64-linux-gnu/libc.so.6"
SYMBOLS = ("pathscope-symbols\t2.0\n"
           f"module\t0\t{APP}\tab12\tok\nmodule\t1\t{LIBC}\t-\tok\n"
           "frame\t0\t0x401010\tcall\t0\tmain\t/src/app.c\t10\n"
           "frame\t0\t0x401018\tcall\t0\tmain\t/src/app.c\t12\n"
           "frame\t0\t0x401520\tcall\t0\tgather\t/src/gather.c\t41\n"
           "frame\t0\t0x401530\tcall\t0\tgather\t/src/gather.c\t42\n"
           "frame\t0\t0x401620\tcall\t0\tfact\t/src/fact.c\t5\nend\n")
# per rank: (calls, incl, excl, cpu) in ms of wait_one @41, @42, fact outer, fact nested
VALUES = {0: [(10, 200, 200, 5), (10, 10, 10, 1), (3, 30, 12, 29), (6, 18, 18, 17)],
          1: [(10, 220, 220, 6), (10, 11, 11, 2), (3, 40, 16, 39), (6, 24, 24, 23)]}
# per rank: lost exits, untimed calls, exception exits, open calls of the same four nodes
PROBLEMS = {0: [(0, 0, 0, 0)] * 4,
            1: [(0, 0, 1, 0), (0, 2, 0, 0), (1, 0, 0, 0), (0, 0, 0, 0)]}
REFUSED_HELPER = ("helper", "{app}", "0x401800", "too-short",
                  "'helper' in app: 4 bytes, the jump needs 5")


def rank_file(rank, version="2.6"):
    app, libc = (0, 1) if rank == 0 else (1, 0)         # rank 1 numbers its modules otherwise
    wait_id, fact_id = (1, 2) if rank == 0 else (2, 1)
    modules = sorted([("module", app, APP, "ab12"), ("module", libc, LIBC, "-")],
                     key=lambda m: m[1])
    # added, removed, refused, traps, windows, longest window, scans, passed through, lost
    counters = ((2, 0, 1, 3, 2, 1_200_000, 0, 5, 0) if rank == 0 else
                (3, 1, 2, 1, 3, 2_500_000, 1, 0, 1))
    probes = [("probes", "cpu", "procmem", "on", *counters, "-"),
              ("probe", wait_id, app, "0x401400", 48, "active", 1000, "-", "wait_one",
               "wait_one", "/src/gather.c", 30),
              ("probe", fact_id, app, "0x401600", 64, "active", 1000, "-", "/^fact$/", "fact",
               "/src/fact.c", 3),
              ("probe-refused",) + tuple(f.format(app=app) for f in REFUSED_HELPER)]
    if rank == 1:
        probes += [("probe", 3, app, "0x401700", 16, "removed", 5000, 90000, "idle", "idle",
                    "-", 0),
                   ("probe-refused", "libfoo.so:bar", "-", "-", "not-mapped",
                    "libfoo.so is not loaded")]

    def node(index, parent, kind, address, visits=0, sample_ms=0):
        module = app if kind == "call" else "-"
        return ("node", 0, index, "-" if parent is None else parent, kind, module, address,
                visits, sample_ms * MS, 0, 0, 0, 0, 0, 0)

    calls = [v[0] for v in VALUES[rank]]
    nodes = [node(0, None, "root", "-"), node(1, 0, "call", "0x401010"),
             node(2, 1, "call", "0x401520"), node(3, 2, "probe", wait_id, calls[0]),
             node(4, 1, "call", "0x401530"), node(5, 4, "probe", wait_id, calls[1]),
             node(6, 0, "call", "0x401018"), node(7, 6, "probe", fact_id, calls[2]),
             node(8, 6, "call", "0x401620"), node(9, 8, "probe", fact_id, calls[3]),
             node(10, 0, "not_unwound", "-", sample_ms=1000)]
    pnodes = [("pnode", 0, node_id, incl * MS, excl * MS, cpu * MS, "-", "-", "-", "-",
               *PROBLEMS[rank][i])
              for i, (node_id, (_, incl, excl, cpu)) in enumerate(zip((3, 5, 7, 9),
                                                                       VALUES[rank]))]
    thread = ("thread", 0, 4100 + rank, 1000 * MS, 0, 0, 0, 0, len(nodes), "-", "-", 0,
              900 * MS)
    extra = [("sampler", "posix-cpu-timer", 100, "cpu"), *modules, *probes, thread, *nodes,
             *pnodes]
    rows = rank_rows(rank, 2, "complete", f"node{rank}", 1000 * MS, 0,
                     comms=[("W", 2, 0, rank, "-", "-", 0, "0-1", "-", 0, 0, 0, 0)],
                     extra=extra, program="app")
    return with_run(rows, RUN, version)


def write_run(directory):
    d = write_profile(directory, None, {0: rank_file(0), 1: rank_file(1)})
    (d / "symbols.tsv").write_text(SYMBOLS)
    return d


@pytest.fixture
def run_dir(tmp_path):
    return write_run(tmp_path / "prof")


def folded(profile, metric):
    out = io.StringIO()
    export_call_paths(profile, "folded", out, resolve_symbols(profile), metric)
    return out.getvalue()


def section(text, heading):
    return (heading + text.split(f"\n\n{heading}")[1].split("\n\n")[0]).splitlines()
