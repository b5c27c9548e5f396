"""The sampler on busy and oversubscribed nodes (issue 11): sampled on-CPU time against the
CPU time the programs measure themselves, and off-CPU time on the path that was preempted.

tests/programs/phases_mpi.c: compute phases of 0.2 ms (10x shorter than the default 5 ms
sampling period) and 8 ms (more than a period), each followed by MPI calls from functions
that compute nothing, on 4 ranks on 2 cores.  tests/programs/preempt.c: phase A computes alone
on CPU 0, phase B on CPU 1 beside a busy process the test pins there."""
import os
import subprocess
import sys

import pytest

from conftest import _mpi
from test_paths import PATHSCOPE, PY_ENV, folded, rank_records, total, truths

# Each phase's sampled on-CPU time within 5% of its truth (issue 11), summed over the 4 ranks,
# and within 10% on every rank (below).  The estimate is statistical: with 2 s of each kind of phase per
# rank (50 iterations) a rank's phase gets about 400 samples, a relative error of about 2-3%
# per rank and 1-1.5% for the sum.  Open MPI yields while it waits on an oversubscribed node,
# so its ranks move between the POSIX CPU-time timer and perf events with the phases of the
# run (sample.c, "Choosing the timer"); MPICH does not yield, and its ranks, preempted by each
# other, move to perf events.
# Per rank the bound is 10%: Open MPI's ranks here change timer 6 to 15 times a run (auto:
# preempted by each other, then yielding), and the two timers see the short phases a little
# differently; one rank's short phase measured +9.0% on a quiet machine (the sum +3.6%), with
# or without the auto timer's watchdog (docs/architecture.md, "Samplers").
ITERATIONS = 50
PER_RANK_TOLERANCE = 0.10
PHASES_TOLERANCE = 0.05
# The functions that only make MPI calls: self time under 1% of the rank's non-MPI time.
MPI_CALLERS = ("sync_short", "sync_long", "exchange")
CALLER_SHARE = 0.01


@pytest.fixture(scope="module", params=["openmpi", "mpich"])
def phases_run(request, tmp_path_factory):
    mpi = _mpi(request.param)
    out = tmp_path_factory.mktemp(f"phases-{request.param}") / "prof"
    p = mpi.run(4, [mpi.prog("phases_mpi"), ITERATIONS], out, timeout=240)
    return out, truths(p.stdout)


def test_phases_oncpu_time_matches_cpu_clock(phases_run):
    out, truth = phases_run
    assert sorted(truth) == [0, 1, 2, 3]
    report, wrong = [], []
    sums = {phase: [0.0, 0.0] for phase in ("short_phase", "long_phase")}
    for rank in range(4):
        oncpu = folded(out, "oncpu_time", rank=rank)
        for phase in sums:
            sampled, real = total(oncpu, f";{phase}$"), truth[rank][phase]
            sums[phase][0] += sampled
            sums[phase][1] += real
            line = (f"rank {rank} {phase}: profile {sampled / 1e3:.1f} ms, "
                    f"truth {real / 1e3:.1f} ms ({(sampled - real) / real:+.1%})")
            report.append(line)
            if abs(sampled - real) > PER_RANK_TOLERANCE * real:
                wrong.append(line)
    for phase, (sampled, real) in sums.items():
        line = (f"all ranks {phase}: profile {sampled / 1e3:.1f} ms, truth {real / 1e3:.1f} ms "
                f"({(sampled - real) / real:+.1%})")
        report.append(line)
        if abs(sampled - real) > PHASES_TOLERANCE * real:
            wrong.append(line)
    assert not wrong, "\n".join(report)


def test_mpi_callers_get_no_self_time(phases_run):
    """The caller of an MPI call is not charged the compute time before the call (today's
    profile gives sync_short and sync_long about 10% self time)."""
    out, _ = phases_run
    for rank in range(4):
        time = folded(out, "time", rank=rank)
        non_mpi = sum(time.values()) - sum(folded(out, "mpi_time", rank=rank).values())
        assert non_mpi > 0
        for caller in MPI_CALLERS:
            self_time = total(time, f";{caller}$")
            assert self_time < CALLER_SHARE * non_mpi, \
                f"rank {rank} {caller}: self time {self_time / 1e3:.1f} ms of " \
                f"{non_mpi / 1e3:.1f} ms non-MPI time"


# A busy loop that pins itself to CPU 1, says so, and runs until killed.
COMPETITOR = ("import os, sys\nos.sched_setaffinity(0, {1})\nprint('ready', flush=True)\n"
              "while True:\n    pass\n")
PREEMPT_TOLERANCE = 0.10


def test_preemption_is_offcpu_time_on_the_preempted_path(openmpi, tmp_path):
    """phase_b shares CPU 1 with a busy process (about half each): its path gets its CPU time
    as on-CPU time and the time it waited for the CPU as off-CPU time; phase_a, alone on
    CPU 0, gets its CPU time and only the off-CPU time it really had.  Within 10%.

    Off-CPU time is seen at the next kept sample (wall minus CPU time since the previous
    one), so a phase's first sample also carries the off-CPU time after the previous phase's
    last sample, and phase_b's first sample the wait for CPU 1 after the move there: about
    half a sampling interval and one scheduler slice per round, a few percent of phase_b's
    off-CPU time over 6 rounds."""
    if not {0, 1} <= os.sched_getaffinity(0):
        pytest.skip("needs CPUs 0 and 1")
    out = tmp_path / "prof"
    competitor = subprocess.Popen([sys.executable, "-c", COMPETITOR], stdout=subprocess.PIPE,
                                  text=True)
    try:
        assert competitor.stdout.readline().strip() == "ready"
        p = subprocess.run(PATHSCOPE + ["run", "-o", str(out), "--", str(openmpi.prog("preempt"))],
                           capture_output=True, text=True, env=PY_ENV, timeout=120)
    finally:
        competitor.kill()
        competitor.wait()
    assert p.returncode == 0, p.stderr
    truth = truths(p.stdout)[0]
    a_off, b_off = truth["a_wall"] - truth["a_cpu"], truth["b_wall"] - truth["b_cpu"]
    # the competitor took a real share of CPU 1 (about half: b_off close to b_cpu)
    assert b_off > 0.5 * truth["b_cpu"], truth
    oncpu, offcpu = folded(out, "oncpu_time"), folded(out, "offcpu_time")
    measured = {"a_cpu": total(oncpu, ";phase_a$"), "b_cpu": total(oncpu, ";phase_b$"),
                "a_off": total(offcpu, ";phase_a$"), "b_off": total(offcpu, ";phase_b$")}
    summary = f"profile {measured}, truth {truth} (us)"
    assert abs(measured["a_cpu"] - truth["a_cpu"]) <= PREEMPT_TOLERANCE * truth["a_cpu"], summary
    assert abs(measured["b_cpu"] - truth["b_cpu"]) <= PREEMPT_TOLERANCE * truth["b_cpu"], summary
    assert abs(measured["b_off"] - b_off) <= PREEMPT_TOLERANCE * b_off, summary
    # on a quiet machine a_off is about 0: phase_a gets under 10% of phase_b's off-CPU time
    assert abs(measured["a_off"] - a_off) <= PREEMPT_TOLERANCE * b_off, summary


def preempt_with_sleep(prog, out, *options):
    """preempt.c with a sleeping phase_c (300 naps of 1 ms per round) beside the competitor:
    (truth, folded on-CPU, folded off-CPU, the sampler line)."""
    competitor = subprocess.Popen([sys.executable, "-c", COMPETITOR], stdout=subprocess.PIPE,
                                  text=True)
    try:
        assert competitor.stdout.readline().strip() == "ready"
        p = subprocess.run(PATHSCOPE + ["run", *options, "-o", str(out), "--", str(prog),
                                        "6", "150", "300"],
                           capture_output=True, text=True, env=PY_ENV, timeout=120)
    finally:
        competitor.kill()
        competitor.wait()
    assert p.returncode == 0, p.stderr
    (sampler,) = [r for r in rank_records(out, 0) if r[0] == "sampler"]
    return truths(p.stdout)[0], folded(out, "oncpu_time"), folded(out, "offcpu_time"), sampler


def test_kernel_scheduler_places_blocked_and_preempted_time(openmpi, tmp_path):
    """With --kernel, off-CPU time comes from the scheduler (the collector's reports, sent when
    the thread runs again, so they find it where it stopped): phase_c's sleep goes to
    phase_c's nanosleep, phase_b's wait for CPU 1 to phase_b, within 10%; phase_a, which
    neither sleeps nor waits, gets under 10% of phase_b's off-CPU time.  Without --kernel
    the sleep lands on whatever the next CPU-time sample finds (phase_a: see the next test)."""
    if not {0, 1} <= os.sched_getaffinity(0):
        pytest.skip("needs CPUs 0 and 1")
    truth, oncpu, offcpu, sampler = preempt_with_sleep(openmpi.prog("preempt"), tmp_path / "p",
                                                       "--kernel", "ebpf")
    assert sampler[8] == "scheduler" and int(sampler[9]) > 0, sampler
    a_off, b_off = truth["a_wall"] - truth["a_cpu"], truth["b_wall"] - truth["b_cpu"]
    c_off = truth["c_wall"] - truth["c_cpu"]
    assert b_off > 0.5 * truth["b_cpu"], truth
    measured = {"a_off": total(offcpu, ";phase_a$"), "b_off": total(offcpu, ";phase_b$"),
                "c_off": total(offcpu, ";phase_c;(__)?nanosleep(;clock_nanosleep)?$")}
    summary = f"profile {measured}, truth {truth} (us)"
    assert abs(measured["c_off"] - c_off) <= PREEMPT_TOLERANCE * c_off, summary
    assert abs(measured["b_off"] - b_off) <= PREEMPT_TOLERANCE * b_off, summary
    assert abs(measured["a_off"] - a_off) <= PREEMPT_TOLERANCE * b_off, summary
    assert abs(total(oncpu, ";phase_b$") - truth["b_cpu"]) <= PREEMPT_TOLERANCE * truth["b_cpu"], \
        summary


def test_without_kernel_sleep_lands_on_the_next_sample(openmpi, tmp_path):
    """The limit the --kernel reports remove, measured so that the docs' claim stays true:
    without them the sleeping phase's off-CPU time is seen only by the next CPU-time sample,
    which is in phase_a (the next phase that computes), not on phase_c.  phase_c's naps take
    some CPU time too (about 20 us each; more on a loaded node), so a sample sometimes lands
    there and takes the sleep before it: on a quiet machine under 10% of the sleep, but 0.1
    failed once with a load average of 3.5 on 2 cores, hence 0.3 (and 0.4 for phase_a)."""
    if not {0, 1} <= os.sched_getaffinity(0):
        pytest.skip("needs CPUs 0 and 1")
    truth, _, offcpu, sampler = preempt_with_sleep(openmpi.prog("preempt"), tmp_path / "p")
    assert sampler[8] == "samples" and sampler[9] == "0", sampler
    c_off = truth["c_wall"] - truth["c_cpu"]
    seen = f"phase_c {total(offcpu, ';phase_c;')}, phase_a {total(offcpu, ';phase_a$')} us " \
           f"of a {c_off} us sleep; truth {truth}"
    assert total(offcpu, ";phase_c;") < 0.3 * c_off, seen
    assert total(offcpu, ";phase_a$") > 0.4 * c_off, seen


# A perf-sampled thread in a storm of switches: back on its POSIX timer within the storm.
STORM_MS = 200
STORM_RUNS = 3


def test_auto_leaves_the_perf_event_in_a_switch_storm(openmpi, tmp_path):
    """tests/programs/timer_storm.c on CPU 1 beside a busy process: preempted at every slice
    while it computes, the thread moves to a perf event (auto); then a 200 ms storm of pipe
    round trips with a child (tens of thousands of switches a second, nearly all kernel time)
    must bring it back to the POSIX timer, which costs nothing per switch.  The perf event
    counts user time only and fires a few times in such a storm: without the POSIX timer kept
    as its watchdog (sample.c, "Choosing the timer") the thread stayed on it in about half
    the runs (measured: 4 of 8), and in 5 of 6 with a 100 ms storm."""
    if not {0, 1} <= os.sched_getaffinity(0):
        pytest.skip("needs CPUs 0 and 1")
    competitor = subprocess.Popen([sys.executable, "-c", COMPETITOR], stdout=subprocess.PIPE,
                                  text=True)
    results = []
    try:
        assert competitor.stdout.readline().strip() == "ready"
        for run in range(STORM_RUNS):
            out = tmp_path / f"prof{run}"
            p = subprocess.run(PATHSCOPE + ["run", "-o", str(out), "--",
                                            str(openmpi.prog("timer_storm")), "1500",
                                            str(STORM_MS)],
                               capture_output=True, text=True, env=PY_ENV, timeout=60)
            if p.returncode == 77:
                pytest.skip(p.stderr.strip())
            assert p.returncode == 0, p.stderr
            fields = dict(f.split("=") for f in p.stdout.split()[1:])
            if fields["after_compute"] != "1":
                pytest.skip(f"the thread did not move to a perf event (perf events refused?): "
                            f"{p.stdout.strip()}")
            results.append(fields)
    finally:
        competitor.kill()
        competitor.wait()
    assert [r["after_storm"] for r in results] == ["0"] * STORM_RUNS, results
