/* Off-CPU time outside MPI (tests/e2e/test_sampling_bias.py, issue 11).  No MPI.
 *
 *   ROUNDS times: phase_a computes on CPU 0, then phase_b computes on CPU 1, each for PHASE_MS
 *   of CPU time.  The test keeps a busy process pinned to CPU 1 meanwhile, so phase_b gets
 *   about half of that CPU: about as much time off the CPU (runnable, preempted) as on it.
 *   phase_a runs alone on CPU 0 (apart from whatever else the machine runs).  With SLEEP_MS,
 *   each round then has phase_c, which sleeps SLEEP_MS in 1 ms naps (blocked: off the CPU
 *   without being preempted).
 *
 * The program pins itself before each phase (sched_setaffinity, outside the measured
 * stretch), sizes the work by CPU time (calibrate(): loop iterations per millisecond of this
 * thread's CPU time, measured on CPU 0) and prints, in seconds, each phase's CPU time (the
 * thread CPU clock) and wall time (CLOCK_MONOTONIC), summed over the rounds:
 *   "truth a_cpu=... a_wall=... b_cpu=... b_wall=... c_cpu=... c_wall=..."
 * Exits with status 77 when it cannot pin itself to CPU 0 or CPU 1.
 *
 * Usage: preempt [ROUNDS [PHASE_MS [SLEEP_MS]]] (default 6 150 0). */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile double sink;

static double clock_seconds(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static inline __attribute__((always_inline)) void spin(long n)
{
    double x = 0;
    for (long i = 0; i < n; i++) x += (double)i * 0.5;
    sink = x;
}

static void pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0 || sched_getcpu() != cpu) {
        fprintf(stderr, "preempt: cannot run on CPU %d\n", cpu);
        exit(77);
    }
}

/* Loop iterations per millisecond of CPU time: the best of a few runs of >= 20 ms each. */
__attribute__((noinline)) double calibrate(void)
{
    long n = 100000;
    double took;
    for (;;) {
        double t = clock_seconds(CLOCK_THREAD_CPUTIME_ID);
        spin(n);
        took = clock_seconds(CLOCK_THREAD_CPUTIME_ID) - t;
        if (took >= 0.02) break;
        n *= 2;
    }
    double best = n / (took * 1e3);
    for (int i = 0; i < 4; i++) {
        double t = clock_seconds(CLOCK_THREAD_CPUTIME_ID);
        spin(n);
        double rate = n / ((clock_seconds(CLOCK_THREAD_CPUTIME_ID) - t) * 1e3);
        if (rate > best) best = rate;
    }
    return best;
}

__attribute__((noinline)) void phase_a(long n) { spin(n); }
__attribute__((noinline)) void phase_b(long n) { spin(n); }
__attribute__((noinline)) void phase_c(long ms)
{
    struct timespec nap = {0, 1000000};
    for (long i = 0; i < ms; i++) nanosleep(&nap, NULL);
}

/* Runs phase(n) and adds its CPU and wall time to sums[0] and sums[1]. */
static void measured(void (*phase)(long), long n, double *sums)
{
    double cpu = clock_seconds(CLOCK_THREAD_CPUTIME_ID), wall = clock_seconds(CLOCK_MONOTONIC);
    phase(n);
    sums[0] += clock_seconds(CLOCK_THREAD_CPUTIME_ID) - cpu;
    sums[1] += clock_seconds(CLOCK_MONOTONIC) - wall;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 6;
    double phase_ms = argc > 2 ? atof(argv[2]) : 150;
    long sleep_ms = argc > 3 ? atol(argv[3]) : 0;
    pin(0);
    long n = (long)(calibrate() * phase_ms);
    double a[2] = {0, 0}, b[2] = {0, 0}, c[2] = {0, 0};
    for (int r = 0; r < rounds; r++) {
        pin(0);
        measured(phase_a, n, a);
        pin(1);
        measured(phase_b, n, b);
        if (sleep_ms) {
            pin(0);
            measured(phase_c, sleep_ms, c);
        }
    }
    printf("truth a_cpu=%.6f a_wall=%.6f b_cpu=%.6f b_wall=%.6f c_cpu=%.6f c_wall=%.6f\n", a[0],
           a[1], b[0], b[1], c[0], c[1]);
    return 0;
}
