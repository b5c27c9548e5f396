"""Probed functions (issue 13): calls counted exactly per call path, inclusive and exclusive
times against the programs' own clocks, and the shapes that break naive entry/exit
instrumentation (recursion, overloads, static namesakes, shared libraries, exceptions,
longjmp), on programs that know what they do (tests/programs/probe_*.c, probe_cxx.cpp).

The truth is read from the rank files (docs/format.md, "Probed functions"): `probe` lines name
each probe, `node` lines of kind `probe` carry the calls of a path (visits), `pnode` lines the
times; the programs print their own counts and clock totals."""
import re
import subprocess
from collections import defaultdict

import pytest

from test_paths import PATHSCOPE, PY_ENV, folded, rank_records


def run_probed(prog, out, specs, *args, extra=(), check=True, env=None, stdin=None):
    p = subprocess.run(PATHSCOPE + ["run", "--probe", specs, *extra, "-o", str(out), "--",
                                    str(prog), *map(str, args)],
                       capture_output=True, text=True, env=dict(PY_ENV, **(env or {})),
                       timeout=180, stdin=subprocess.DEVNULL if stdin is None else stdin)
    if check:
        assert p.returncode == 0, p.stdout + p.stderr
    return p


def program_values(stdout, prefix):
    """`prefix k=v k=v ...` lines -> list of {k: int}"""
    out = []
    for line in stdout.splitlines():
        if line.startswith(prefix + " ") and "=" in line:
            out.append({k: int(v) for k, v in re.findall(r"(\w+)=(-?\d+)", line)})
    return out


class Probes:
    """The probe part of one rank file."""

    PNODE = ["thread", "node", "incl", "excl", "cpu", "minflt", "majflt", "vcsw", "ivcsw",
             "lost", "untimed", "exceptions", "open"]

    def __init__(self, out, rank=0):
        recs = rank_records(out, rank)
        self.probes = {}       # id -> {name, file, line, state, spec}
        self.refused = []
        self.summary = None
        nodes = {}             # (thread, node) -> (parent, kind, address, visits)
        pnodes = {}
        for r in recs:
            if r[0] == "probe":
                self.probes[r[1]] = dict(module=r[2], vaddr=r[3], size=int(r[4]), state=r[5],
                                         spec=r[8],
                                         name=r[9], file=r[10], line=int(r[11]))
            elif r[0] == "probe-refused":
                self.refused.append(r[1:])
            elif r[0] == "probes":
                self.summary = r[1:]
            elif r[0] == "node":
                nodes[(r[1], r[2])] = (r[3], r[4], r[6], int(r[7]), r[5])
            elif r[0] == "pnode":
                pnodes[(r[1], r[2])] = {k: (int(v) if v != "-" else None)
                                        for k, v in zip(self.PNODE[2:], r[3:])}
        self.nodes, self.pnodes = nodes, pnodes

    def ids(self, name_rx):
        return [i for i, p in self.probes.items() if re.search(name_rx, p["name"])]

    def paths(self, pid):
        """[(thread, node, calls, pnode metrics)] of probe pid"""
        return [(t, n, v[3], self.pnodes.get((t, n), {})) for (t, n), v in self.nodes.items()
                if v[1] == "probe" and v[2] == pid]

    def calls(self, pid):
        return sum(c for _, _, c, _ in self.paths(pid))

    def total(self, pid, metric):
        return sum(m.get(metric) or 0 for _, _, _, m in self.paths(pid))

    def ancestors_have(self, thread, node, pid):
        """Whether a frame of node's path is inside probe pid's function (a nested call of a
        recursion: the probe leaf hangs below the call site, so the outer call's frame is on
        the path as a return address into the function)."""
        probe = self.probes[pid]
        lo = int(probe["vaddr"], 16)
        hi = lo + probe["size"]
        parent = self.nodes[(thread, node)][0]
        while parent != "-":
            p = self.nodes[(thread, parent)]
            if p[1] == "call" and p[4] == probe["module"] and lo < int(p[2], 16) <= hi:
                return True
            parent = p[0]
        return False


def within(measured, truth, what, rel=0.05):
    assert abs(measured - truth) <= rel * truth, f"{what}: profile {measured}, truth {truth}"


def test_shapes_counts_and_times(openmpi, tmp_path):
    """One function from three call paths, recursion, two static namesakes, a function in a
    shared library: exact calls per path; inclusive times within 5% of the program's clocks;
    exclusive time of the recursion adds up to the outermost call's inclusive time."""
    out = tmp_path / "prof"
    p = run_probed(openmpi.prog("probe_shapes"), out, "leaf,recurse,helper,shapes_lib_work",
                   20, 1, 500)
    (truth,) = program_values(p.stdout, "probe_shapes phase=1")[:1] or [None]
    pr = Probes(out)
    assert len(pr.probes) == 5, pr.probes  # helper: two static functions, two probes
    (leaf,) = pr.ids(r"^leaf$")
    assert sorted(c for _, _, c, _ in pr.paths(leaf)) == [3, 5, 7]
    within(pr.total(leaf, "incl"), truth["leaf_ns"], "leaf inclusive")
    within(pr.total(leaf, "excl"), truth["leaf_ns"], "leaf exclusive (no probed callee)")
    (rec,) = pr.ids(r"^recurse$")
    paths = pr.paths(rec)
    assert len(paths) == 20 and all(c == 1 for _, _, c, _ in paths)
    (outer,) = [m for t, n, _, m in paths if not pr.ancestors_have(t, n, rec)]
    within(outer["incl"], truth["recurse_ns"], "recurse outermost inclusive")
    within(pr.total(rec, "excl"), truth["recurse_ns"], "recurse exclusive sum")
    helpers = {pr.probes[i]["file"].rsplit("/", 1)[-1]: i for i in pr.ids(r"^helper$")}
    assert set(helpers) == {"probe_shapes.c", "probe_shapes2.c"}, pr.probes
    assert pr.calls(helpers["probe_shapes.c"]) == 2
    assert pr.calls(helpers["probe_shapes2.c"]) == 4
    within(pr.total(helpers["probe_shapes.c"], "incl"), truth["helper1_ns"], "helper 1")
    within(pr.total(helpers["probe_shapes2.c"], "incl"), truth["helper2_ns"], "helper 2")
    (lib,) = pr.ids(r"^shapes_lib_work$")
    assert pr.calls(lib) == 6
    within(pr.total(lib, "incl"), truth["lib_ns"], "shared-library function")
    assert pr.summary[2] == "on"  # exits timed
    # the analysis side: the probe leaves on the call tree, by path
    calls = folded(out, "probe_calls")
    ends = {p.split(";main;", 1)[1]: v for p, v in calls.items()}
    assert ends["run_phase;path_a;leaf"] == 3 and ends["run_phase;path_b;leaf"] == 5
    assert ends["run_phase;path_c;leaf"] == 7 and ends["run_phase;shapes_lib_work"] == 6
    assert ends["run_phase;" + ";".join(["recurse"] * 20)] == 1
    times = folded(out, "probe_time")
    within(sum(v for p, v in times.items() if p.endswith(";leaf")) * 1000, truth["leaf_ns"],
           "folded probe_time of leaf (µs)")


@pytest.mark.parametrize("traversal", ["reuse", "thunk"])
def test_fast_path_keeps_callers_apart(openmpi, tmp_path, traversal):
    """The entry's fast path (a call from the same slot and return address as the last one
    goes to the same node if the caller's activation is the same): four callers give `inner`
    the same frame address, so hit's slot and return address are the same for all four, and
    one of them leaves inner by longjmp; three threads, timer samples at 1 kHz.  Every call
    lands on its caller's path, exactly; all but each activation's first call take the fast
    path (the `probes` line's count, format 2.7)."""
    out = tmp_path / "prof"
    rounds, threads = 300, 3
    p = run_probed(openmpi.prog("probe_fast"), out, "hit", rounds, threads,
                   extra=("--traversal", traversal),
                   env={"PATHSCOPE_SAMPLE_RATE": "1000"})
    (truth,) = program_values(p.stdout, "probe_fast")
    per_site = {"b1": 10, "c1": 20, "b2": 3, "c2": 20}
    for site, n in per_site.items():
        assert truth[site] == n * rounds * threads, truth
    calls = folded(out, "probe_calls")
    got = {}
    for path, v in calls.items():
        frames = path.split(";")
        assert frames[-2:] == ["inner", "hit"], path
        got[frames[-3]] = got.get(frames[-3], 0) + v
    assert got == {"site_" + k: truth[k] for k in per_site}, got
    pr = Probes(out)
    (hid,) = pr.ids(r"^hit$")
    assert pr.calls(hid) == truth["hit"]
    assert pr.total(hid, "lost") == 0 and pr.total(hid, "untimed") == 0
    slow = len(per_site) * rounds * threads  # each activation of inner: its first call
    assert int(pr.summary[13]) == truth["hit"] - slow, pr.summary


def test_deep_recursion_counts_exact(openmpi, tmp_path):
    """Recursion deeper than the thunk stack (256 entries): every call counted, the deepest
    ones untimed (said on their nodes), no crash."""
    out = tmp_path / "prof"
    run_probed(openmpi.prog("probe_shapes"), out, "recurse", 1000, 1, 0)
    pr = Probes(out)
    (rec,) = pr.ids(r"^recurse$")
    assert pr.calls(rec) == 1000
    untimed = pr.total(rec, "untimed")
    assert 0 < untimed < 1000
    assert sum(1 for *_, m in pr.paths(rec) if m.get("untimed") == 0) == 1000 - untimed


def test_cxx_overloads_templates_exceptions(openmpi, tmp_path):
    """Overloads and template instances are separate probes with exact calls; frames left by
    an exception are closed at the catch (counted as exception exits), a frame that catches
    inside itself returns normally."""
    out = tmp_path / "prof"
    n = 10
    p = run_probed(openmpi.prog("probe_cxx"), out, "f,twice,throw_outer,throw_inner,catch_inside", n)
    (truth,) = program_values(p.stdout, "probe_cxx")
    pr = Probes(out)
    calls = {pr.probes[i]["name"]: pr.calls(i) for i in pr.probes}
    assert calls == {"f(int)": 3 * n, "f(double)": 4 * n, "int twice<int>(int)": 2 * n,
                     "double twice<double>(double)": 5 * n, "throw_outer(int)": n,
                     "throw_inner(int)": n, "catch_inside(int)": n}, calls
    exc = {pr.probes[i]["name"]: pr.total(i, "exceptions") for i in pr.probes}
    assert exc["throw_outer(int)"] == n and exc["throw_inner(int)"] == n, exc
    assert exc["catch_inside(int)"] == 0
    assert truth["caught_above"] == n and truth["caught_inside"] == n


def test_longjmp_out_of_probed_frames(openmpi, tmp_path):
    """longjmp out of two nested probed calls: the program is unharmed, the calls are counted
    and their exits counted as lost."""
    out = tmp_path / "prof"
    n = 20
    p = run_probed(openmpi.prog("probe_longjmp"), out, "jump_outer,jump_inner,returner", n)
    (truth,) = program_values(p.stdout, "probe_longjmp")
    pr = Probes(out)
    (outer,), (inner,), (ret,) = pr.ids("jump_outer"), pr.ids("jump_inner"), pr.ids("returner")
    assert pr.calls(outer) == truth["jump_outer"] == n
    assert pr.calls(inner) == truth["jump_inner"] == n
    assert pr.calls(ret) == truth["returner"]
    assert pr.total(outer, "lost") + pr.total(inner, "lost") == 2 * n


def test_spec_matching_nothing_is_one_error(openmpi, tmp_path):
    out = tmp_path / "prof"
    p = run_probed(openmpi.prog("probe_shapes"), out, "leaf,no_such_function", 1, 1, 0,
                   check=False)
    assert p.returncode == 2
    lines = [l for l in p.stderr.splitlines() if l.startswith("pathscope")]
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("pathscope: --probe: no function matches 'no_such_function' in "), lines


def test_gather_two_waits_two_paths(mpi, tmp_path):
    """The MILC case: one wait function called from two sites of a gather; each site is its
    own path with the time the program measured there (within 5%), and the gather's
    exclusive time excludes both waits and its MPI calls."""
    out = tmp_path / "prof"
    p = mpi.run(2, [mpi.prog("probe_gather"), 10, 1], outdir=out,
                pathscope_args=["--probe", "wait_one,gather"], timeout=180)
    for rank in (0,):
        (truth,) = [v for v in program_values(p.stdout, "probe_gather")
                    if v["rank"] == rank and "site1_ns" in v]
        pr = Probes(out, rank)
        (wait,), (gather,) = pr.ids(r"^wait_one"), pr.ids(r"^gather")
        paths = sorted(pr.paths(wait), key=lambda x: -x[3]["incl"])
        assert [c for _, _, c, _ in paths] == [truth["site1_calls"], truth["site2_calls"]]
        within(paths[0][3]["incl"], truth["site1_ns"], "first wait", rel=0.05)
        within(paths[1][3]["incl"], truth["site2_ns"], "second wait", rel=0.10)
        g = pr.total(gather, "incl")
        within(g, truth["gather_ns"], "gather inclusive")
        assert pr.total(gather, "excl") < 0.05 * g


def test_refusals_are_said_and_recorded(openmpi, tmp_path):
    """A function whose entry must not be patched (setjmp keeps its own return address) is
    refused with its reason, on stderr once and in the rank file; the rest is probed."""
    out = tmp_path / "prof"
    p = run_probed(openmpi.prog("probe_shapes"), out, "/^_?setjmp$/,leaf", 1, 1, 0)
    said = [l for l in p.stderr.splitlines() if "not probed" in l]
    reason = "it keeps or uses its own return address, or pathscope relies on it"
    assert said == [f"pathscope: --probe '/^_?setjmp$/': setjmp not probed (denied): {reason}",
                    f"pathscope: --probe '/^_?setjmp$/': _setjmp not probed (denied): {reason}"]
    pr = Probes(out)
    assert [(r[0], r[3], r[4]) for r in pr.refused] == [("/^_?setjmp$/", "denied", reason)] * 2
    assert [p["name"] for p in pr.probes.values()] == ["leaf"]
    assert pr.summary[5] == "2"  # refused


@pytest.mark.parametrize("metrics", ["time", "cpu", "rusage"])
def test_probe_metrics(openmpi, tmp_path, metrics):
    """time: no CPU column; cpu: the thread's CPU time of a spinning function, at most its
    wall time; rusage: also faults and context switches."""
    out = tmp_path / "prof"
    run_probed(openmpi.prog("probe_shapes"), out, "leaf", 1, 1, 2000,
               extra=["--probe-metrics", metrics])
    pr = Probes(out)
    (leaf,) = pr.ids("^leaf$")
    assert pr.summary[0] == metrics
    incl, cpu = pr.total(leaf, "incl"), [m["cpu"] for *_, m in pr.paths(leaf)]
    if metrics == "time":
        assert cpu == [None] * 3
        return
    assert 0.3 * incl < sum(cpu) <= 1.01 * incl, (cpu, incl)
    faults = [m["minflt"] for *_, m in pr.paths(leaf)]
    assert (None in faults) == (metrics == "cpu")


def sampled_profile(prog, out, probe, *args):
    """A profile at 2000 samples/s: (its paths of on-CPU time, but [failed unwind]'s; the
    count of [failed unwind] samples)."""
    extra = ["--probe", probe] if probe else []
    p = subprocess.run(PATHSCOPE + ["run", *extra, "-o", str(out), "--", str(prog), *map(str, args)],
                       capture_output=True, text=True, timeout=180,
                       env=dict(PY_ENV, PATHSCOPE_SAMPLE_RATE="2000"))
    assert p.returncode == 0, p.stdout + p.stderr
    (thread,) = [r for r in rank_records(out, 0) if r[0] == "thread"]
    paths = {path.split(";main;", 1)[-1] for path in folded(out, "oncpu_time")
             if not path.startswith("[failed unwind]")}
    return paths, int(thread[7])


def test_samples_in_trampolines_and_thunks(openmpi, tmp_path):
    """Samples that land in probes' code walk as without the probe.  tiny() is called 3 million
    times: samples interrupt its trampoline (mapped to the instructions it stands for), the
    entry stub, the hooked thunks and the handlers (pathscope's own code: dropped).
    calls_first()'s first instruction is a call, displaced into the trampoline, so spin_callee
    returns into it: its samples must keep calls_first's call site.  Without the fix most of
    the 3,000 kept samples were [failed unwind]; without the probe there is none (measured:
    0 in every run), and with it 0 or 1 (a start-up sample in the loader's code), so the bound
    is the count without the probe plus 2."""
    prog = openmpi.prog("probe_sampled")
    plain, plain_failed = sampled_profile(prog, tmp_path / "plain", None, 100000000, 200000, 300)
    probed, probed_failed = sampled_profile(prog, tmp_path / "probed", "tiny,calls_first",
                                            3000000, 200000, 300)
    pr = Probes(tmp_path / "probed")
    (tiny,), (first,) = pr.ids("^tiny$"), pr.ids("^calls_first$")
    assert (pr.calls(tiny), pr.calls(first)) == (3000000, 200000)
    assert probed_failed <= plain_failed + 2, (plain_failed, probed_failed)
    # Where the probes' code was interrupted, the walk must give the program's own call
    # structure: a path through the probed loops is one of these (loop_tiny alone when the
    # sample lands in the loop, or just before the call or after its return).  Which of them
    # the plain run hits is chance: tiny's three instructions got none of the ~300 samples of
    # loop_tiny in 5 of 15 runs here, so the plain run is the reference for [failed unwind] only.
    structure = {"loop_tiny", "loop_tiny;tiny", "loop_first", "loop_first;calls_first",
                 "loop_first;calls_first;spin_callee"}
    names = {f for p in structure for f in p.split(";")}
    near = {p for p in probed if names & set(p.split(";"))}
    assert near <= structure, near - structure
    # The rest (start-up, printf, exit) is far from the probes, but nothing of it may be an
    # unnamed frame (a trampoline or stub the walk failed to map) either.
    unnamed = {p for p in probed - near if "+0x" in p or "[" in p}
    assert not unnamed, unnamed
    assert "loop_tiny;tiny" in probed and "loop_tiny" in plain
    spin = {p for p in plain | probed if p.endswith("spin_callee")}
    assert spin == {"loop_first;calls_first;spin_callee"}, spin


def _read_code(pid, prog, symbol, n=16):
    """n bytes of a PIE program's function, from its process's memory"""
    nm = subprocess.run(["nm", str(prog)], capture_output=True, text=True, check=True).stdout
    (vaddr,) = [int(l.split()[0], 16) for l in nm.splitlines() if l.split()[-1] == symbol]
    real = str(prog.resolve())
    for line in open(f"/proc/{pid}/maps"):
        f = line.split()
        if len(f) >= 6 and f[5] == real and int(f[2], 16) == 0:
            base = int(f[0].split("-")[0], 16)
            break
    with open(f"/proc/{pid}/mem", "rb") as mem:
        mem.seek(base + vaddr)
        return mem.read(n)


def test_added_and_removed_at_phase_boundaries(openmpi, tmp_path):
    """A probe added after phase 1 and removed after phase 2 counts exactly phase 2's calls,
    per path; removal puts the original bytes back."""
    from test_paths import cli
    out = tmp_path / "prof"
    prog = openmpi.prog("probe_shapes")
    job = subprocess.Popen(PATHSCOPE + ["run", "-o", str(out), "--", str(prog), "5", "3", "100"],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=PY_ENV)
    try:
        pid = int(re.search(r"pid=(\d+)", job.stdout.readline()).group(1))
        assert job.stdout.readline().startswith("probe_shapes phase=1 ")
        original = _read_code(pid, prog, "leaf")
        added = cli("probe", pid, "--add", "leaf").stdout
        assert re.fullmatch(r"added probe 1: leaf \[probe_shapes\] \S*probe_shapes\.c:34\n", added)
        assert _read_code(pid, prog, "leaf")[0] == 0xE9  # a jump to the trampoline
        job.stdin.write("next\n")
        job.stdin.flush()
        assert job.stdout.readline().startswith("probe_shapes phase=2 ")
        listed = cli("probe", pid, "--list").stdout.splitlines()
        assert listed[1].split()[:3] == ["1", "active", "15"], listed
        assert cli("probe", pid, "--remove", "leaf").stdout == "removed probe 1: leaf\n"
        assert _read_code(pid, prog, "leaf") == original
        job.stdin.write("next\n")
        job.stdin.close()
        rest = job.stdout.read()
        assert job.wait(timeout=60) == 0
    finally:
        if job.poll() is None:
            job.kill()
    assert "phase=3" in rest
    pr = Probes(out)
    (leaf,) = pr.ids("^leaf$")
    assert pr.probes[leaf]["state"] == "removed"
    assert sorted(c for _, _, c, _ in pr.paths(leaf)) == [3, 5, 7]


def test_fortran_module_procedure(openmpi, tmp_path):
    """gfortran's __probe_mod_MOD_work is probed as probe_mod::work: 7 calls from the program,
    3 from probe_mod::twice."""
    out = tmp_path / "prof"
    p = run_probed(openmpi.prog("probe_fortran"), out, "probe_mod::work")
    assert "probe_fortran work=10" in p.stdout
    pr = Probes(out)
    (work,) = pr.ids("^probe_mod::work$")
    calls = sorted(c for _, _, c, _ in pr.paths(work))
    # (gfortran -O1 unrolls twice's loop of 3 into three call sites)
    assert calls[-1] == 7 and sum(calls) == 10, calls


def test_fork_child_keeps_running(openmpi, tmp_path):
    """A forked child runs the patched code (its calls are its own, not written); the parent
    counts exactly its calls."""
    out = tmp_path / "prof"
    p = run_probed(openmpi.prog("probe_fork"), out, "work")
    assert p.stdout.strip() == "probe_fork parent=5 child_status=0"
    pr = Probes(out)
    (work,) = pr.ids("^work$")
    assert pr.calls(work) == 5
