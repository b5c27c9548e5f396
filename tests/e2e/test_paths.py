"""Call paths (issue 3): the hybrid profile of MPI calls (exact, by call path) and sampled
computation, checked against what the test programs measure themselves.

tests/programs/paths_mpi.c prints "truth" lines: the wall time each phase really took on this
(shared, noisy) machine.  Sampled attribution must be within 5% of that (plus one sampling interval and 1 ms, see
close()); MPI paths, visits and bytes are exact."""
import os
import re
import subprocess
import sys

import pytest

from conftest import MPI_ENV, ROOT
from profile_files import rank_text

PATHSCOPE = [sys.executable, "-m", "pathscope"]
PY_ENV = dict(os.environ, PYTHONPATH=str(ROOT / "python"), PATHSCOPE_HOME=str(ROOT))
for _k in [k for k in PY_ENV if k.startswith("PATHSCOPE_") and k not in ("PATHSCOPE_HOME", "PATHSCOPE_PER_RANK")]:
    del PY_ENV[_k]


def cli(*args, check=True):
    p = subprocess.run(PATHSCOPE + [str(a) for a in args], capture_output=True, text=True,
                       env=PY_ENV, timeout=120)
    if check and p.returncode != 0:
        raise AssertionError(f"pathscope {' '.join(map(str, args))}: {p.returncode}\n{p.stderr}")
    return p


def env_run(argv, preload, env, out):
    """argv in the environment form: LD_PRELOAD=preload, env's PATHSCOPE_* variables (no
    others from the caller), the profile in out."""
    e = {k: v for k, v in PY_ENV.items() if not k.startswith("PATHSCOPE_")}
    e.update(LD_PRELOAD=preload, PATHSCOPE_OUTPUT=str(out), **env)
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, env=e,
                          timeout=60)


def folded(out, metric="time", rank=None, thread=None, partial=False):
    """partial: the run did not finish (export refuses such a profile without the flag)."""
    args = ["export", out, "--format", "folded", "--metric", metric]
    if partial:
        args.append("--allow-partial")
    if rank is not None:
        args += ["--rank", rank]
    if thread is not None:
        args += ["--thread", thread]
    lines = {}
    for line in cli(*args).stdout.splitlines():
        path, _, value = line.rpartition(" ")
        lines[path] = lines.get(path, 0) + int(value)
    return lines


def total(lines, pattern):
    """Sum of the values of the paths matching the regular expression."""
    rx = re.compile(pattern)
    return sum(v for p, v in lines.items() if rx.search(p))


def truths(stdout):
    out = {}
    for line in stdout.splitlines():
        if line.startswith("truth "):
            fields = dict(f.split("=") for f in line.split()[1:])
            out[int(fields.pop("rank", 0))] = {k: float(v) * 1e6 for k, v in fields.items()}
    return out


def rank_records(out, rank):
    text = rank_text(out, rank)
    return [line.split("\t") for line in text.splitlines()]


def close(measured_us, truth_us, what):
    """Within 5% of the truth, plus one sampling interval at the default 200 Hz (5 ms) and
    1 ms: a phase's first and last samples may each carry part of a neighbour's interval."""
    assert abs(measured_us - truth_us) <= 0.05 * truth_us + 6000, \
        f"{what}: profile {measured_us / 1e3:.1f} ms, truth {truth_us / 1e3:.1f} ms"


@pytest.fixture(scope="module", params=["openmpi", "mpich"])
def paths_run(request, tmp_path_factory):
    from conftest import _mpi
    mpi = _mpi(request.param)
    out = tmp_path_factory.mktemp(f"paths-{request.param}") / "prof"
    p = mpi.run(2, [mpi.prog("paths_mpi"), "30"], out)
    return out, truths(p.stdout)


def test_sampled_time_matches_truth(paths_run):
    out, truth = paths_run
    assert sorted(truth) == [0, 1]
    for rank in (0, 1):
        lines = folded(out, "time", rank=rank)
        close(total(lines, r";main;compute_a$"), truth[rank]["compute_a"], f"rank {rank} compute_a")
        close(total(lines, r";main;compute_b$"), truth[rank]["compute_b"], f"rank {rank} compute_b")
    # the last rank computes in delay() while rank 0 waits in the barrier for as long
    close(total(folded(out, "time", rank=1), r";main;delay$"), truth[1]["delay"], "delay")
    waited = total(folded(out, "mpi_time", rank=0), r";main;MPI_Barrier$")
    close(waited, truth[0]["barrier"], "rank 0 MPI_Barrier")


def test_mpi_paths_exact(paths_run):
    out, _ = paths_run
    for rank in (0, 1):
        visits = folded(out, "visits", rank=rank)
        assert total(visits, r";main;exchange_x;MPI_Allreduce$") == 30
        assert total(visits, r";main;exchange_y;MPI_Allreduce$") == 70
        assert visits["[not unwound];MPI_Comm_rank"] == 100000
        assert total(visits, r";main;MPI_Barrier$") == 1
        nbytes = folded(out, "bytes", rank=rank)
        assert total(nbytes, r";main;exchange_x;MPI_Allreduce$") == 30 * 64
        assert total(nbytes, r";main;exchange_y;MPI_Allreduce$") == 70 * 64
    both = folded(out, "visits")
    assert total(both, r";main;exchange_y;MPI_Allreduce$") == 140
    assert both["[not unwound];MPI_Comm_rank"] == 200000


def test_failed_unwinds_are_kept(paths_run):
    """no_cfi_call has no unwind information: what lies behind it is [failed unwind], with
    the frames that could be walked, never dropped."""
    out, _ = paths_run
    for rank in (0, 1):
        visits = folded(out, "visits", rank=rank)
        assert total(visits, r"^\[failed unwind\];.*behind_no_cfi;MPI_Barrier$") == 1
        time = folded(out, "time", rank=rank)
        assert total(time, r"^\[failed unwind\];.*behind_no_cfi$") > 5000  # 20e6 iterations
        assert total(time, r"^(?!\[failed unwind\]).*behind_no_cfi") == 0
        threads = [r for r in rank_records(out, rank) if r[0] == "thread"]
        assert int(threads[0][7]) >= 2  # unwind_failures: the barrier and the samples


def test_time_adds_up_per_thread(paths_run):
    """sampled time + MPI time = elapsed time, per thread (1 ns rounding per node)."""
    out, _ = paths_run
    for rank in (0, 1):
        records = rank_records(out, rank)
        threads = {r[1]: int(r[3]) for r in records if r[0] == "thread"}
        assert threads
        sums = {t: 0 for t in threads}
        count = {t: 0 for t in threads}
        for r in records:
            if r[0] == "node":
                sums[r[1]] += int(r[8]) + int(r[10])
                count[r[1]] += 1
        for t, elapsed in threads.items():
            assert abs(sums[t] - elapsed) <= count[t], (rank, t, sums[t], elapsed)


def test_mpi_nodes_match_operation_totals(paths_run):
    """The calls and bytes on MPI nodes of all threads equal the per-operation totals."""
    out, _ = paths_run
    for rank in (0, 1):
        records = rank_records(out, rank)
        ops = {}
        for r in records:
            if r[0] == "op":
                calls, nbytes = ops.get(r[2], (0, 0))
                ops[r[2]] = (calls + int(r[3]), nbytes + int(r[4]))
        nodes = {}
        for r in records:
            if r[0] == "node" and r[4] == "mpi":
                calls, nbytes = nodes.get(r[6], (0, 0))
                nodes[r[6]] = (calls + int(r[7]), nbytes + int(r[11]))
        assert nodes == ops


@pytest.mark.parametrize("setting, path, visits", [
    ("env=path", r";main;MPI_Comm_rank$", 100000),
    ("all=count", r"^\[not unwound\];MPI_Allreduce$", 100),
    ("coll=count,env=path", r"^\[not unwound\];MPI_Allreduce$", 100),
])
def test_unwind_groups(openmpi, tmp_path, setting, path, visits):
    out = tmp_path / "prof"
    openmpi.run(2, [openmpi.prog("paths_mpi"), "2"], out, mode="env",
                env={"PATHSCOPE_UNWIND": setting})
    assert total(folded(out, "visits", rank=0), path) == visits
    unwind = {r[1]: r[2] for r in rank_records(out, 0) if r[0] == "unwind"}
    for item in setting.split(","):
        group, mode = item.split("=")
        if group != "all":
            assert unwind[group] == mode
        else:
            assert set(unwind.values()) == {mode}


def test_sampling_off_keeps_mpi_paths(mpich, tmp_path):
    out = tmp_path / "prof"
    mpich.run(2, [mpich.prog("paths_mpi"), "2"], out, env={"PATHSCOPE_SAMPLE_RATE": "0"})
    time = folded(out, "time", rank=0)
    assert total(time, r";compute_a$") == 0
    assert total(folded(out, "visits", rank=0), r";main;exchange_x;MPI_Allreduce$") == 30
    sampler = [r for r in rank_records(out, 0) if r[0] == "sampler"][0]
    assert sampler[1:3] == ["off", "0"]
    # everything that is not MPI is time without a sampled location
    records = rank_records(out, 0)
    elapsed = sum(int(r[3]) for r in records if r[0] == "thread")
    mpi = sum(int(r[10]) for r in records if r[0] == "node")
    unsampled = sum(int(r[8]) for r in records if r[0] == "node" and r[4] == "not_unwound")
    assert abs(elapsed - mpi - unsampled) <= 100


def test_rates_and_clocks(openmpi, tmp_path):
    """The timers: at 200 Hz each thread's choice (auto: perf events unless the thread is
    switched thousands of times a second), at 5 kHz (above the kernel tick) a perf task-clock
    event, either timer on request, and the wall-clock timer; all add up the same way.  Sample counts are checked against the thread's own CPU time (the `thread`
    line's cpu_ns), not the wall time: on a loaded machine the two differ."""
    cases = (("200", "cpu", "auto", "auto"), ("5000", "cpu", "auto", "perf-task-clock"),
             ("500", "cpu", "posix", "posix-cpu-timer"), ("200", "cpu", "perf", "perf-task-clock"),
             ("10", "wall", "auto", "posix-wall-timer"))
    for rate, clock, timer, source in cases:
        out = tmp_path / f"prof-{rate}-{clock}-{timer}"
        p = openmpi.run(2, [openmpi.prog("paths_mpi"), "10"], out,
                        env={"PATHSCOPE_SAMPLE_RATE": rate, "PATHSCOPE_SAMPLE_CLOCK": clock,
                             "PATHSCOPE_SAMPLE_TIMER": timer})
        truth = truths(p.stdout)
        sampler = [r for r in rank_records(out, 0) if r[0] == "sampler"][0]
        assert sampler[1:4] == [source, rate, clock], (rate, clock, timer)
        by_perf, by_posix, by_wall, changes = map(int, sampler[4:8])
        signals = {"perf-task-clock": by_perf, "posix-cpu-timer": by_posix,
                   "posix-wall-timer": by_wall, "auto": by_perf + by_posix}[source]
        assert signals == by_perf + by_posix + by_wall > 0, sampler
        assert changes == 0 or source == "auto", sampler
        main = [r for r in rank_records(out, 0) if r[0] == "thread"][0]
        samples, cpu_s = sum(int(x) for x in main[4:7]), int(main[12]) / 1e9
        assert 0 < cpu_s <= int(main[3]) / 1e9
        if clock == "cpu":
            # a POSIX CPU-time timer fires at most once per scheduler tick (250 Hz here)
            expected = cpu_s * (min(int(rate), 250) if source.startswith("posix") else int(rate))
            assert 0.5 * expected < samples < 1.5 * expected + 2, (rate, timer, samples, cpu_s)
        if rate == "5000":
            close(total(folded(out, "time", rank=0), r";main;compute_a$"), truth[0]["compute_a"],
                  "compute_a at 5 kHz")


def test_perf_timer_needs_cpu_clock(openmpi, tmp_path):
    """A perf event samples CPU time: asking it for wall time is one clear error."""
    p = env_run([openmpi.prog("paths_threads")], str(openmpi.lib), {
        "PATHSCOPE_SAMPLE_TIMER": "perf", "PATHSCOPE_SAMPLE_CLOCK": "wall"}, tmp_path / "prof")
    assert p.returncode == 2
    assert p.stderr == ("pathscope: PATHSCOPE_SAMPLE_TIMER=perf samples CPU time: it cannot be "
                        "combined with PATHSCOPE_SAMPLE_CLOCK=wall (wall time is sampled by a "
                        "POSIX timer)\n")


def test_threads_have_their_own_trees(openmpi, tmp_path):
    """pthreads, without MPI and without a launcher: `pathscope run -- ./app`."""
    out = tmp_path / "prof"
    p = subprocess.run(PATHSCOPE + ["run", "-o", str(out), "--", str(openmpi.prog("paths_threads"))],
                       capture_output=True, text=True, env=PY_ENV, timeout=120)
    assert p.returncode == 0, p.stderr
    truth = truths(p.stdout)[0]
    records = rank_records(out, 0)
    assert [r[1] for r in records if r[0] == "status"] == ["complete"]
    threads = [r[1] for r in records if r[0] == "thread"]
    assert sorted(threads) == ["0", "1", "2", "3"]
    seen = {}
    for t in threads:
        lines = folded(out, "time", thread=t)
        names = {fn for fn in ("main_work", "thread_a", "thread_b", "exit_path") if total(lines, ";" + fn + "$")}
        assert len(names) == 1, (t, lines)
        name = names.pop()
        seen[name] = total(lines, ";" + name + "$")
    assert sorted(seen) == ["exit_path", "main_work", "thread_a", "thread_b"]
    for name, us in seen.items():
        close(us, truth[name], name)
    # thread_c left through pthread_exit: its path still ends in exit_path below thread_c
    assert total(folded(out, "time"), r";thread_c;exit_path$") > 0


def test_openmp_threads_sampled(openmpi, tmp_path):
    out = tmp_path / "prof"
    p = subprocess.run(PATHSCOPE + ["run", "-o", str(out), "--", str(openmpi.prog("paths_openmp"))],
                       capture_output=True, text=True, env=PY_ENV, timeout=120)
    assert p.returncode == 0, p.stderr
    with_work = [t for t in ("0", "1") if total(folded(out, "time", thread=t), r";omp_work$") > 50000]
    assert with_work == ["0", "1"]


def test_children_do_not_write_profiles(openmpi, tmp_path):
    """Only the process pathscope was started for writes a profile, not the programs it runs."""
    out = tmp_path / "prof"
    p = subprocess.run(PATHSCOPE + ["run", "-o", str(out), "--", "/bin/bash", "-c",
                                    f"{openmpi.prog('paths_openmp')} >/dev/null; true"],
                       capture_output=True, text=True, env=PY_ENV, timeout=120, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    records = rank_records(out, 0)
    assert [r[1] for r in records if r[0] == "program"] == ["bash"]
    assert [d for d in os.listdir(tmp_path) if d.startswith("pathscope-")] == []


@pytest.mark.parametrize("variable, value, accepted", [
    ("PATHSCOPE_SAMPLE_RATE", "5", "0|10-20000"),
    ("PATHSCOPE_SAMPLE_RATE", "fast", "0|10-20000"),
    ("PATHSCOPE_UNWIND", "env=yes", "env|topo|poll|p2p|coll|rma|io|other|all=path|count"),
    ("PATHSCOPE_UNWIND", "mpi=count", "env|topo|poll|p2p|coll|rma|io|other|all=path|count"),
    ("PATHSCOPE_SAMPLE_CLOCK", "cycles", "cpu|wall"),
])
def test_bad_sampling_options(openmpi, tmp_path, variable, value, accepted):
    """One line, exit 2, program never started: from the runtime (environment form) and the
    CLI alike."""
    message = f"pathscope: invalid value '{value}' for {variable} (accepted: {accepted})\n"
    env = dict(PY_ENV, LD_PRELOAD=str(openmpi.lib), **{variable: value})
    p = subprocess.run([str(openmpi.prog("paths_threads"))], capture_output=True, text=True,
                       env=env, cwd=tmp_path)
    assert (p.returncode, p.stderr, p.stdout) == (2, message, "")
    flag = "--" + variable[len("PATHSCOPE_"):].lower().replace("_", "-")
    p = subprocess.run(PATHSCOPE + ["run", f"{flag}={value}", "--", str(openmpi.prog("paths_threads"))],
                       capture_output=True, text=True, env=PY_ENV, cwd=tmp_path)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.strip().endswith(f"invalid value '{value}' for {variable} (accepted: {accepted})") or \
        f"invalid choice: '{value}'" in p.stderr


def test_report_views(paths_run):
    """The report's call tree and hot path show the program's own threads (the MPI runtime's
    progress threads are counted, not shown); the hot path goes through compute_a."""
    out, truth = paths_run
    text = cli("report", out).stdout
    tree = text.split("Call tree")[1].split("Hot path")[0]
    hot = text.split("Hot path")[1].split("Communicators ranked")[0]
    assert "compute_a" in tree and "MPI_Barrier" in tree
    assert "epoll_wait" not in tree and "thread_trampoline" not in tree
    split = text.split("Time split")[1].split("Call tree")[0]
    runtime = re.search(r"not shown\s+(\d+) threads of the MPI library's runtime", split)
    threads = [r for r in rank_records(out, 0) if r[0] == "thread"]
    assert (int(runtime.group(1)) if runtime else 0) == 2 * (len(threads) - 1)
    # The hot path follows the largest child at each level, from the root but not into the
    # pseudo frames: the program's thread (thread 0; the runtime's are not shown) decides.
    # That is the _start chain unless start-up or a walk that ended early outweighed main on
    # a crowded machine; then MPI_Init takes ~0.2 s per rank and compute_a a similar time, so
    # only the path's shape is checked.
    tops = {}
    for path, value in folded(out, "time", thread=0).items():
        first = path.split(";", 1)[0]
        if first not in ("[failed unwind]", "[not unwound]"):
            tops[first] = tops.get(first, 0) + value
    heaviest = max(tops, key=tops.get)
    second = hot.splitlines()[3]
    assert re.search(rf"(\s|^){re.escape(heaviest)}( |$)", second), (tops, hot)
    if heaviest == "_start":
        assert re.search(r"\smain \(", hot) and ("compute_a" in hot or "MPI_Init" in hot), hot


def test_speedscope_totals(paths_run):
    """speedscope's file holds the same totals as the folded export."""
    import json
    out, _ = paths_run
    doc = json.loads(cli("export", out, "--format", "speedscope", "--metric", "visits").stdout)
    profile = doc["profiles"][0]
    frames = [f["name"] for f in doc["shared"]["frames"]]
    by_path = {}
    for sample, weight in zip(profile["samples"], profile["weights"]):
        key = ";".join(frames[i] for i in sample)
        by_path[key] = by_path.get(key, 0) + weight
    assert by_path == folded(out, "visits")


def test_exec_and_fork_at_high_rates(openmpi, tmp_path):
    """A program that forks and execs hundreds of times while sampled at 20 kHz: no child
    dies of a stray sampling signal, and only the shell writes a profile."""
    out = tmp_path / "prof"
    script = "n=0; for i in $(seq 300); do env /bin/true || exit 9; n=$((n+1)); done; echo $n"
    p = subprocess.run(PATHSCOPE + ["run", "-o", str(out), "--sample-rate", "20000", "--",
                                    "/bin/bash", "-c", script],
                       capture_output=True, text=True, env=PY_ENV, timeout=300, cwd=tmp_path)
    assert (p.returncode, p.stdout.strip()) == (0, "300"), p.stderr
    assert [r[1] for r in rank_records(out, 0) if r[0] == "status"] == ["complete"]
    assert [d for d in os.listdir(tmp_path) if d.startswith("pathscope-")] == []


def test_fortran_call_paths(mpi, tmp_path):
    """Fortran MPI calls land on the Fortran program's call path (gfortran's MAIN__), with
    exact visits: fortran_counts makes 4 MPI_ALLREDUCE and 1 MPI_BCAST per rank."""
    out = tmp_path / "prof"
    mpi.run(4, [mpi.prog("fortran_counts")], out, mode="env")
    for rank in range(4):
        visits = folded(out, "visits", rank=rank)
        assert total(visits, r";MAIN__;MPI_Allreduce$") == 4
        assert total(visits, r";MAIN__;MPI_Bcast$") == 1


def test_call_paths_survive_crash_and_abort(mpi, tmp_path):
    """The rank that crashes (SIGSEGV, written from the signal handler) and the ranks the
    launcher then terminates keep their call paths: every rank's MPI_Bcast from main is there,
    exactly once (the barrier after it may still be in progress when a rank is terminated:
    calls are recorded when they return)."""
    out = tmp_path / "prof"
    mpi.run(4, [mpi.prog("lifecycle"), "segv"], out, check=False)
    for rank in range(4):
        visits = folded(out, "visits", rank=rank, partial=True)
        assert total(visits, r";main;MPI_Bcast$") == 1, (rank, visits)


def test_walk_reuse_is_exact(mpi, tmp_path):
    """Alternating callers with identical frames: every MPI call lands on its own path."""
    out = tmp_path / "prof"
    mpi.run(2, [mpi.prog("paths_rotate")], out, env={"PATHSCOPE_SAMPLE_RATE": "0"})
    for rank in (0, 1):
        visits = folded(out, "visits", rank=rank)
        assert total(visits, r";main;rotate_a;inner;MPI_Allreduce$") == 3700
        assert total(visits, r";main;rotate_b;inner;MPI_Allreduce$") == 3300
        threads = [r for r in rank_records(out, rank) if r[0] == "thread"]
        assert int(threads[0][11]) > 6000  # walks that reused the previous one


def test_counted_calls_per_thread(mpi, tmp_path):
    """Counted calls stay with the thread that made them (MPI_THREAD_SERIALIZED, two threads):
    the main thread's come from the per-communicator table at the end, the other's from its
    own tree, and together they equal the table."""
    out = tmp_path / "prof"
    mpi.run(2, [mpi.prog("paths_serialized")], out)
    for rank in (0, 1):
        threads = [r[1] for r in rank_records(out, rank) if r[0] == "thread"]
        main = folded(out, "visits", rank=rank, thread=0)
        assert main["[not unwound];MPI_Comm_rank"] == 1000
        assert main["[not unwound];MPI_Comm_size"] == 7
        workers = [folded(out, "visits", rank=rank, thread=t) for t in threads if t != "0"]
        worker = [w for w in workers if total(w, r";worker;MPI_Allreduce$") == 1]
        assert len(worker) == 1, workers
        assert worker[0]["[not unwound];MPI_Comm_rank"] == 300
