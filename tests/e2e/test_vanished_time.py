"""No computation vanishes from a rank's tree (issue 16).

Issue 3's runs twice lost a rank's compute_a and compute_b altogether: the thread's MPI time
came out larger than its elapsed time, and the closing of its timeline scaled every sample to
nothing.  MPI_Init was counted twice (a sample kept between PMPI_Init's return and the
record of its time took the whole of it as the sample's own); the guard now also keeps each
interval's MPI time within its wall time (counter_mpi_ns_beyond_elapsed says how much was
cut).  Here the same program runs 100 times at 5 kHz on 2 ranks: every run, on every rank,
compute_a holds at least half the time the program measured for it, and the main thread's
MPI time stays within its elapsed time."""
import os
import subprocess

from profile_files import rank_text

RUNS = int(os.environ.get("PSTEST_VANISH_RUNS", "100"))


def function_range(prog, name):
    """[start, end) of a function of prog, from nm (the next symbol ends it)."""
    out = subprocess.run(["nm", "-n", str(prog)], capture_output=True, text=True,
                         check=True).stdout
    symbols = [(int(a, 16), n) for a, _, n in (line.split() for line in out.splitlines()
                                                if len(line.split()) == 3)]
    start = next(a for a, n in symbols if n == name)
    return start, min(a for a, _ in symbols if a > start)


def main_thread(text, prog_path, start, end):
    """(elapsed_ns, mpi_ns, compute_ns) of thread 0 of a rank text: mpi_ns summed over its
    nodes, compute_ns the sampled time of its nodes inside [start, end) of the program."""
    module = elapsed = None
    mpi = compute = 0
    for line in text.splitlines():
        f = line.split("\t")
        if f[0] == "module" and f[2] == prog_path:
            module = f[1]
        elif f[0] == "thread" and f[1] == "0":
            elapsed = int(f[3])
        elif f[0] == "node" and f[1] == "0":   # thread, id, parent, kind, module, address,
            mpi += int(f[10])                   # visits, sample_ns, samples, mpi_ns, ...
            if f[5] == module and start <= int(f[6], 16) < end:
                compute += int(f[8])
    return elapsed, mpi, compute


def test_no_vanished_computation_in_100_runs(openmpi, tmp_path):
    prog = openmpi.prog("paths_mpi")
    start, end = function_range(prog, "compute_a")
    problems = []
    for run in range(RUNS):
        out = tmp_path / f"p{run}"
        # scale 2: compute_a is 4e7 iterations, about 40 ms alone on a core
        p = openmpi.run(2, [prog, "2"], out, mode="env", env={"PATHSCOPE_SAMPLE_RATE": "5000"})
        truth = {int(f.split("=")[1]): float(l.split("compute_a=")[1].split()[0])
                 for l in p.stdout.splitlines() if l.startswith("truth")
                 for f in l.split()[1:2]}
        for rank in (0, 1):
            text = rank_text(out, rank)
            elapsed, mpi, compute = main_thread(text, str(prog), start, end)
            beyond = [int(l.split("\t")[1]) for l in text.splitlines()
                      if l.startswith("counter_mpi_ns_beyond_elapsed\t")]
            want = truth[rank] * 1e9
            # (no upper bound: on a loaded node, time the rank spent preempted just before
            # compute_a, in its loop of MPI_Comm_rank calls that are counted and not timed,
            # is rightly off-CPU time placed where the next sample finds the rank: in
            # compute_a; docs/architecture.md, "What samples cannot know")
            if not (mpi <= elapsed and compute >= 0.5 * want):
                problems.append(f"run {run} rank {rank}: compute_a {compute / 1e6:.1f} ms "
                                f"(measured by the program {want / 1e6:.1f} ms), MPI "
                                f"{mpi / 1e6:.1f} ms of {elapsed / 1e6:.1f} ms elapsed, "
                                f"cut by the guard {beyond} ns")
        if not problems:
            subprocess.run(["rm", "-rf", str(out)], check=True)
    assert not problems, "\n".join(problems)
