/* Sampling bias between MPI calls (tests/e2e/test_sampling_bias.py, issue 11).
 *
 *   An iteration runs SHORTS short phases (short_phase: SHORT_US of CPU time, 10x shorter
 *   than the default 5 ms sampling period), each followed by MPI calls made from
 *   sync_short(), then LONGS long phases (long_phase: LONG_US, more than one period), each
 *   followed by MPI calls made from sync_long(), then exchange() waits for those calls and
 *   makes an MPI_Allreduce.  sync_short, sync_long and exchange compute nothing themselves: a
 *   profiler that charges the compute time between the last sample and the next MPI call to
 *   that call's caller gives them self time.
 *
 * The work is sized by CPU time: calibrate() measures how many loop iterations take one
 * millisecond of this thread's CPU time, once per rank, and the phases use that rate.
 *
 * The truth is each kind of phase's CPU time, summed, in seconds:
 *   "truth rank=R short_phase=S long_phase=L"
 * The thread CPU clock (CLOCK_THREAD_CPUTIME_ID) is read only where a run of phases of one
 * kind starts and ends, never around each phase: reading it makes the kernel bring the
 * thread's run time up to date, and the scheduler (EEVDF, Linux 6.6 on) then ends a used-up
 * time slice at once instead of at the next tick, so a thread that read it every 0.1 ms was
 * preempted between ticks and a tick-driven sampler saw that stretch 10-50% less often (4
 * ranks on 2 cores, Linux 6.18).  From a run's CPU time the program subtracts the time of its
 * MPI calls, measured with CLOCK_MONOTONIC (vDSO, no system call): a call of a few
 * microseconds is wall time = CPU time, unless the thread was preempted inside it (longer
 * than PREEMPTED_S): such a call counts as the mean of the others.  Ranks that share a CPU
 * are preempted inside phases: that is wall time, not CPU time.
 *
 * Usage: phases_mpi [ITERATIONS [SHORTS [LONGS [SHORT_US [LONG_US]]]]]
 *        (default 25 200 5 200 8000: 1 s of each kind of phase per rank) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define MAX_POSTS 1024
#define PREEMPTED_S 100e-6

static volatile double sink;

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static inline __attribute__((always_inline)) void spin(long n)
{
    double x = 0;
    for (long i = 0; i < n; i++) x += (double)i * 0.5;
    sink = x;
}

/* Loop iterations per millisecond of CPU time: the best of a few runs of >= 20 ms each (the
 * least disturbed by preemption's cache effects; preemption itself is not CPU time). */
__attribute__((noinline)) double calibrate(void)
{
    long n = 100000;
    double took;
    for (;;) {
        double t = cpu_now();
        spin(n);
        took = cpu_now() - t;
        if (took >= 0.02) break;
        n *= 2;
    }
    double best = n / (took * 1e3);
    for (int i = 0; i < 4; i++) {
        double t = cpu_now();
        spin(n);
        double rate = n / ((cpu_now() - t) * 1e3);
        if (rate > best) best = rate;
    }
    return best;
}

__attribute__((noinline)) void short_phase(long n) { spin(n); }
__attribute__((noinline)) void long_phase(long n) { spin(n); }

/* The MPI calls after each phase post a receive from the left and a send to the right
 * neighbour (one double, tagged by the phase's place in the iteration) and return at once;
 * exchange() waits for all of them and adds up one value over all ranks.  A blocking call
 * after every phase would cost milliseconds on 4 ranks on 2 cores (each waits for a
 * descheduled neighbour). */
static int left, right;
static double one = 1, received[MAX_POSTS];
static MPI_Request requests[2 * MAX_POSTS];

/* noipa: identical bodies, never merged into one function */
__attribute__((noipa)) void sync_short(int tag)
{
    MPI_Irecv(&received[tag], 1, MPI_DOUBLE, left, tag, MPI_COMM_WORLD, &requests[2 * tag]);
    MPI_Isend(&one, 1, MPI_DOUBLE, right, tag, MPI_COMM_WORLD, &requests[2 * tag + 1]);
}

__attribute__((noipa)) void sync_long(int tag)
{
    MPI_Irecv(&received[tag], 1, MPI_DOUBLE, left, tag, MPI_COMM_WORLD, &requests[2 * tag]);
    MPI_Isend(&one, 1, MPI_DOUBLE, right, tag, MPI_COMM_WORLD, &requests[2 * tag + 1]);
}

__attribute__((noinline)) void exchange(int posts, double *v)
{
    MPI_Waitall(2 * posts, requests, MPI_STATUSES_IGNORE);
    MPI_Allreduce(MPI_IN_PLACE, v, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
}

/* count phases of n loop iterations, each followed by sync(first_tag + i); returns their CPU
 * time (see the top of the file) and counts the MPI calls found preempted. */
static double run_phases(void (*phase)(long), void (*sync)(int), long n, int count,
                         int first_tag, long *preempted)
{
    double in_sync = 0;
    int timed = 0;
    double cpu = cpu_now();
    for (int i = 0; i < count; i++) {
        phase(n);
        double t = wall_now();
        sync(first_tag + i);
        t = wall_now() - t;
        if (t < PREEMPTED_S) {
            in_sync += t;
            timed++;
        }
    }
    cpu = cpu_now() - cpu;
    if (timed < count) {
        *preempted += count - timed;
        if (timed) in_sync *= (double)count / timed;
    }
    return cpu - in_sync;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    left = (rank + size - 1) % size;
    right = (rank + 1) % size;
    int iterations = argc > 1 ? atoi(argv[1]) : 25;
    int shorts = argc > 2 ? atoi(argv[2]) : 200;
    int longs = argc > 3 ? atoi(argv[3]) : 5;
    double short_us = argc > 4 ? atof(argv[4]) : 200;
    double long_us = argc > 5 ? atof(argv[5]) : 8000;
    if (shorts < 0 || longs < 0 || shorts + longs > MAX_POSTS) {
        fprintf(stderr, "phases_mpi: at most %d phases per iteration\n", MAX_POSTS);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    double per_ms = calibrate();
    long n_short = (long)(per_ms * short_us / 1e3), n_long = (long)(per_ms * long_us / 1e3);
    double in_short = 0, in_long = 0, v = 1, t0 = wall_now();
    long preempted = 0;
    for (int it = 0; it < iterations; it++) {
        in_short += run_phases(short_phase, sync_short, n_short, shorts, 0, &preempted);
        in_long += run_phases(long_phase, sync_long, n_long, longs, shorts, &preempted);
        exchange(shorts + longs, &v);
    }
    double wall = wall_now() - t0;
    printf("truth rank=%d short_phase=%.6f long_phase=%.6f\n", rank, in_short, in_long);
    printf("phases rank=%d mean_short_us=%.1f mean_long_us=%.1f loop_wall=%.3f "
           "preempted_calls=%ld\n", rank, in_short / ((double)iterations * shorts) * 1e6,
           in_long / ((double)iterations * longs) * 1e6, wall, preempted);
    MPI_Finalize();
    return 0;
}
