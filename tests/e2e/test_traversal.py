"""Stack-walk traversal modes (PATHSCOPE_TRAVERSAL) under heap profiling: every allocation is a
synchronous walk, so these programs make tens of thousands of them.

tests/programs/heap_paths.c   paths that change slowly, quickly and by rotation of callers with
                              identical frames; prints its exact counts per path (truth lines)
tests/programs/heap_thunks.cpp  everything that can break thunk stacks (exceptions, longjmp,
                              signals, backtrace, fork, threads, pthread_cancel, swapcontext);
                              checks itself and prints its allocations per root function

The exact modes (full, reuse, thunk) must give the exact counts on every path, and every walk
repeated as a full walk (--traversal-check 1) must agree with it.  The heuristic of Perks et
al. may charge an allocation to the wrong path (that is measured: its agreement) but never
loses one."""
import re
import subprocess

import pytest

from conftest import ROOT
from test_paths import PATHSCOPE, PY_ENV, cli, folded, rank_records, total

EXACT_MODES = ("full", "reuse", "thunk")
THUNK_SCENARIOS = ("exceptions", "dtor_catch", "longjmp", "signals", "backtrace", "fork",
                   "threads", "cancel", "coroutine", "cancel_main")
# scenarios that go through an interposed function which puts the return addresses back
RESTORING = ("exceptions", "dtor_catch", "backtrace", "threads", "coroutine")


def run(prog, out, mode, *args, check=1, extra=()):
    return subprocess.run(PATHSCOPE + ["run", "--heap", "--quiet", "--traversal", mode,
                                       "--traversal-check", str(check), *extra, "-o", str(out),
                                       "--", str(prog), *args],
                          capture_output=True, text=True, env=PY_ENV, timeout=60)


def walks(out):
    """Per thread: walks, reused, checks, agree, thunk_errors, thunk_restores."""
    return [[int(v) for v in r[2:]] for r in rank_records(out, 0) if r[0] == "walks"]


def heap_allocs(out):
    (line,) = [r for r in rank_records(out, 0) if r[0] == "heap"]
    return int(line[2])


def truths(stdout):
    """heap_paths: {'P;Q;S': count, ...} and the total."""
    paths = dict(re.findall(r"^truth path=(\S+) count=(\d+)$", stdout, re.M))
    return {p: int(n) for p, n in paths.items()}, int(re.search(r"^truth total=(\d+)$", stdout,
                                                                  re.M).group(1))


def path_count(lines, frames):
    """Allocations whose innermost application frames are `frames` (A;B;C), right above malloc."""
    return total(lines, ";" + re.escape(frames) + ";malloc$")


def app_total(lines):
    return total(lines, r";main;(slow|fast|rotation)_phase;.*;malloc$")


@pytest.fixture(scope="module")
def paths_prog():
    from conftest import _mpi
    return _mpi("openmpi").prog("heap_paths")


@pytest.mark.parametrize("mode", EXACT_MODES)
def test_exact_modes_count_every_path(paths_prog, tmp_path, mode):
    out = tmp_path / "prof"
    p = run(paths_prog, out, mode, extra=["--sample-rate", "0"])
    assert p.returncode == 0, p.stderr
    paths, count = truths(p.stdout)
    assert len(paths) == 8 and count == 43000
    lines = folded(out, "alloc_count")
    assert {path: path_count(lines, path) for path in paths} == paths
    assert app_total(lines) == count
    assert [r[1:3] for r in rank_records(out, 0) if r[0] == "traversal"] == [[mode, "1"]]
    (main,) = walks(out)
    n, reused, checks, agree, thunk_errors, restores = main
    assert n >= count and checks == n and agree == checks and thunk_errors == 0
    if mode != "full":
        assert reused >= count - 10  # all but the first walks stop early


def test_heuristic_loses_no_allocation_but_misattributes(paths_prog, tmp_path):
    """Every allocation is counted once (the totals are exact), but with return address and
    stack pointer matching and one more return address, P's allocations go to R and back:
    the full-walk check measures it."""
    agreement = {}
    for phases in ((), ("rotation",)):
        out = tmp_path / ("-".join(phases) or "all")
        p = run(paths_prog, out, "heuristic", *phases, extra=["--sample-rate", "0"])
        assert p.returncode == 0, p.stderr
        paths, count = truths(p.stdout)
        lines = folded(out, "alloc_count")
        assert app_total(lines) == count  # each allocation once, maybe on a wrong path
        assert sum(v for path, v in lines.items() if path.endswith(";malloc")) == heap_allocs(out)
        (main,) = walks(out)
        n, reused, checks, agree, thunk_errors, restores = main
        assert checks == n and thunk_errors == 0
        agreement[phases] = (agree, checks)
    agree, checks = agreement[("rotation",)]
    assert agree < checks, agreement  # the false positive of Perks et al.


def test_heuristic_full_walks_bound_the_drift(paths_prog, tmp_path):
    """Every 64th walk is a full walk which the next ones reuse (unwind/traversal.c): when the path
    changes for good (slow_a -> slow_b), at most 63 allocations can go to the old one."""
    out = tmp_path / "prof"
    p = run(paths_prog, out, "heuristic", "slow", check=0, extra=["--sample-rate", "0"])
    assert p.returncode == 0, p.stderr
    paths, count = truths(p.stdout)
    lines = folded(out, "alloc_count")
    got = {path: path_count(lines, path) for path in paths}
    assert sum(got.values()) == count
    for path, want in paths.items():
        assert abs(got[path] - want) < 64, got


# ---- heap_thunks ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def thunks_prog():
    from conftest import _mpi
    return _mpi("openmpi").prog("heap_thunks")


def scenario_counts(stdout):
    """{(scenario, root): allocations} from the `scenario NAME root=FN allocs=N` lines."""
    return {(name, root): int(n) for name, root, n in
            re.findall(r"^scenario (\S+) root=(\S+) allocs=(\d+)$", stdout, re.M)}


def root_count(lines, root):
    """Allocations of app_malloc/app_new (new: through operator new) below root."""
    rx = ";" + re.escape(root) + r";(.*;)?app_(malloc|new)(;[^;]*)?;malloc$"
    return total(lines, rx)


def check_thunks_run(p, out, mode, scenarios):
    assert (p.returncode, p.stdout.splitlines()[-1:]) == (0, ["heap_thunks: ok"]), \
        p.stdout + p.stderr
    counts = scenario_counts(p.stdout)
    assert {name for name, root in counts} >= set(scenarios)
    threads = walks(out)
    assert threads and all(thunk_errors == 0 for *_, thunk_errors, restores in threads)
    if mode == "heuristic":
        return
    assert any(r[0] == "module" for r in rank_records(out, 0)), \
        "no module lines in the rank file: no frame can be symbolized"
    lines = folded(out, "alloc_count")
    want = {k: v for k, v in counts.items() if k[1] != "-"}
    got = {k: root_count(lines, k[1]) for k in counts if k[1] != "-"}
    # the signal handler's allocations are also below the scenario it interrupted: walks step
    # through the kernel's signal frame back to the interrupted path -- but for an alarm that
    # interrupted a thunk's jump back (pathscope's own code, after the frame's return): that
    # walk ends there, as [failed unwind];libpathscope.so+...;<signal frame>;on_alarm
    if ("signals", "scen_signals") in want:
        in_thunk = total(lines, r"^\[failed unwind\];libpathscope\.so\+0x[0-9a-f]+;[^;]*;on_alarm;"
                                r"(.*;)?app_(malloc|new)(;[^;]*)?;malloc$")
        want[("signals", "scen_signals")] += counts.get(("signal-handler", "on_alarm"), 0)
        got[("signals", "scen_signals")] += in_thunk
    assert got == want
    for n, reused, checks, agree, thunk_errors, restores in threads:
        assert checks == n and agree == checks, threads


def test_heap_thunks_without_pathscope(thunks_prog):
    for args in ([], ["cancel_main"]):
        p = subprocess.run([str(thunks_prog), *args], capture_output=True, text=True, timeout=60)
        assert (p.returncode, p.stderr) == (0, "")
        assert p.stdout.splitlines()[-1] == "heap_thunks: ok"


@pytest.mark.parametrize("mode", EXACT_MODES + ("heuristic",))
def test_heap_thunks(thunks_prog, tmp_path, mode):
    """The whole program (all scenarios but cancel_main) under every mode."""
    out = tmp_path / "prof"
    p = run(thunks_prog, out, mode)
    check_thunks_run(p, out, mode, [s for s in THUNK_SCENARIOS if s != "cancel_main"])
    assert [r[1] for r in rank_records(out, 0) if r[0] == "traversal"] == [mode]
    if mode == "thunk":
        assert sum(restores for *_, restores in walks(out)) > 0


@pytest.mark.parametrize("mode, scenario", [("thunk", s) for s in THUNK_SCENARIOS] +
                         [("full", "cancel_main"), ("reuse", "cancel_main")])
def test_heap_thunks_scenario(thunks_prog, tmp_path, mode, scenario):
    """One scenario at a time: a failure names what broke."""
    out = tmp_path / "prof"
    p = run(thunks_prog, out, mode, scenario)
    check_thunks_run(p, out, mode, [scenario])
    if mode == "thunk" and scenario in RESTORING:
        assert sum(restores for *_, restores in walks(out)) > 0


# ---- errors ----------------------------------------------------------------------------------

def test_invalid_traversal(paths_prog, tmp_path):
    p = subprocess.run(PATHSCOPE + ["run", "--traversal", "sideways", "--", "true"],
                       capture_output=True, text=True, env=PY_ENV, cwd=tmp_path, timeout=60)
    assert (p.returncode, p.stdout, p.stderr) == (
        2, "", "pathscope run: argument --traversal: invalid choice: 'sideways' (choose from "
               "'full', 'reuse', 'heuristic', 'thunk') (try 'pathscope run --help')\n")
    # the environment form: the runtime refuses it before the program starts
    from conftest import _mpi
    env = dict(PY_ENV, LD_PRELOAD=str(_mpi("openmpi").lib), PATHSCOPE_TRAVERSAL="sideways")
    p = subprocess.run([str(paths_prog)], capture_output=True, text=True, env=env, cwd=tmp_path,
                       timeout=60)
    assert (p.returncode, p.stdout, p.stderr) == (
        2, "", "pathscope: invalid value 'sideways' for PATHSCOPE_TRAVERSAL (accepted: "
               "full|reuse|heuristic|thunk)\n")
    assert list(tmp_path.iterdir()) == []


def test_modes_agree_on_a_mixed_program(tmp_path):
    """bench/heap_alloc.cpp (small): 11 allocation sites at depths 20..40, clustered bursts,
    C++ containers -- every exact mode gives the very same paths and counts as full walks,
    and the heuristic loses no allocation."""
    from conftest import _mpi
    prog = _mpi("openmpi").prog("heap_alloc_mix")
    results = {}
    for mode in ("full", "reuse", "thunk", "heuristic"):
        out = tmp_path / mode
        p = run(prog, out, mode, "60", "1", check=1000)
        assert p.returncode == 0, p.stderr
        results[mode] = folded(out, "alloc_count")
    assert results["reuse"] == results["full"]
    assert results["thunk"] == results["full"]
    assert sum(results["heuristic"].values()) == sum(results["full"].values())


@pytest.mark.parametrize("mode", ["reuse", "thunk"])
@pytest.mark.parametrize("heap", [False, True])
def test_exceptions_in_a_library_opened_locally(tmp_path, mode, heap):
    """pathscope interposes the unwinder's entry points; a C++ library opened with RTLD_LOCAL
    by a C program (Python's extension modules) must still throw and catch through them."""
    from conftest import _mpi
    build = _mpi("openmpi").build
    args = ["run", "--quiet", "--traversal", mode] + (["--heap"] if heap else [])
    p = subprocess.run(PATHSCOPE + args + ["-o", str(tmp_path / "prof"), "--",
                                           str(build / "heap_dlopen"),
                                           str(build / "libheap_thrower.so")],
                       capture_output=True, text=True, env=PY_ENV, timeout=60)
    assert (p.returncode, p.stdout, p.stderr) == (0, "caught 100\n", "")


def test_thunk_mode_refused_for_a_static_unwinder(tmp_path):
    """A program with its own copy of the C++ unwinder (-static-libgcc): thunk mode is refused,
    the reuse mode used and the refusal written; the program's exceptions work."""
    from conftest import _mpi
    out = tmp_path / "prof"
    p = run(_mpi("openmpi").prog("heap_static_exc"), out, "thunk")
    assert (p.returncode, p.stdout) == (0, "caught 3\n"), p.stderr
    (traversal,) = [r for r in rank_records(out, 0) if r[0] == "traversal"]
    assert traversal[1] == "reuse" and traversal[3] == "thunk (refused: (the program) has its own unwinder)"
    report = cli("report", out).stdout
    assert "\n  asked for: thunk (refused: (the program) has its own unwinder)\n" in report


def test_sibling_calls_into_the_allocator(tmp_path):
    """`return malloc(n)` jumps to malloc, which then returns through its caller's thunk."""
    from conftest import _mpi
    for mode in ("full", "thunk"):
        out = tmp_path / mode
        p = run(_mpi("openmpi").prog("heap_tail"), out, mode)
        assert p.returncode == 0, p.stderr
        lines = folded(out, "alloc_count")
        assert total(lines, r";main;f;malloc$") == 100 and total(lines, r";main;malloc$") == 100, lines
        assert not any(path.startswith("[failed unwind]") for path in lines)


@pytest.mark.parametrize("mode", ["reuse", "thunk"])
def test_pthread_exit_through_a_destructor_that_catches(tmp_path, mode):
    from conftest import _mpi
    out = tmp_path / "prof"
    p = run(_mpi("openmpi").prog("heap_pexit"), out, mode)
    assert (p.returncode, p.stdout) == (0, "cleanup handlers run: 5 of 5\n"), p.stderr


def test_thunks_count_calls(tmp_path):
    """Thunk mode counts, on each call site, the calls that a walk saw start: exact for calls
    that allocate (every such call is walked), a lower bound for calls only samples see."""
    from conftest import _mpi
    prog = _mpi("openmpi").prog("heap_calls")
    out = tmp_path / "thunk"
    p = run(prog, out, "thunk", extra=["--sample-rate", "2000"])
    assert p.returncode == 0, p.stderr
    calls = folded(out, "calls")
    main = "_start;__libc_start_main;__libc_start_call_main;main"
    assert calls[main + ";run_f"] == 1000
    assert calls[main + ";run_h"] == 20
    assert calls[main + ";run_h;h"] == 1000
    assert 0 < calls.get(main + ";run_spin", 0) <= 2000
    report = cli("report", out).stdout
    assert "  visits >=N on a call frame: calls made at that call site that a stack walk saw " \
           "start (thunk mode; a lower bound)\n" in report
    assert re.search(r" >=\d+ .* run_spin ", report)
    out = tmp_path / "reuse"
    assert run(prog, out, "reuse").returncode == 0
    assert folded(out, "calls") == {}


@pytest.mark.parametrize("mode", ["full", "reuse", "thunk"])
def test_samples_in_a_signal_handler_walk_through_the_signal_frame(tmp_path, mode):
    """A handler's samples reach the interrupted path (main;work;raise...) through the kernel's
    signal frame (glibc's __restore_rt: its CFI has expressions the walker does not evaluate,
    so the frame is recognised by its code and stepped through the saved ucontext): none is
    a failed unwind, and the handler's sampled time is within 10% of what it measured."""
    prog = ROOT / "build" / "openmpi" / "paths_signal"
    out = tmp_path / "prof"
    p = subprocess.run(PATHSCOPE + ["run", "--quiet", "--traversal", mode, "-o", str(out), "--",
                                    str(prog), "40", "20"],
                       capture_output=True, text=True, env=PY_ENV, timeout=120)
    assert p.returncode == 0, p.stderr
    handler_ns = int(re.search(r"handler_ns=(\d+)", p.stdout).group(1))
    lines = folded(out)
    in_handler = {path: v for path, v in lines.items() if ";on_usr1" in path}
    assert in_handler, lines
    bad = {path: v for path, v in in_handler.items()
           if not re.search(r"^_start;.*;main;work;raise;.*;on_usr1(;|$)", path)}
    assert not bad, bad
    assert total(lines, r"^\[failed unwind\]") == 0, lines
    sampled_us = sum(in_handler.values())
    assert abs(sampled_us * 1000 - handler_ns) <= 0.1 * handler_ns, (sampled_us, handler_ns)
