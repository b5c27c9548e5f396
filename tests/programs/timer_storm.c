/* The auto timer leaves a perf event in a storm of context switches (tests/e2e/
 * test_sampling_bias.py, issue 11).  No MPI.
 *
 * The test keeps a busy process pinned to CPU 1.  This program pins itself there too and:
 *   1. computes for COMPUTE_MS of wall time, preempted by the busy process at every slice:
 *      PATHSCOPE_SAMPLE_TIMER=auto moves the thread to a perf event (preempted often, switched
 *      rarely);
 *   2. passes a byte back and forth with a child process (also on CPU 1) through two pipes for
 *      STORM_MS: tens of thousands of switches a second, almost all of the time in the kernel,
 *      the kind of storm a yielding MPI library makes.  A perf event that counts user time
 *      fires a few times in it at most; auto must still move the thread back to its POSIX
 *      timer, which costs nothing per switch.
 * After each step it prints whether the thread holds a perf event's mapping ("[perf_event]"
 * or "anon_inode:[perf_event]" in /proc/self/maps: a perf-sampled thread keeps one, and
 * nothing else here maps a perf event):
 *   "timer after_compute=1 after_storm=0 switches=N"
 * N: the storm's round trips.  Exits with status 77 when it cannot run on CPU 1.
 *
 * Usage: timer_storm [COMPUTE_MS [STORM_MS]] (default 1500 400). */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile double sink;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0 || sched_getcpu() != cpu) {
        fprintf(stderr, "timer_storm: cannot run on CPU %d\n", cpu);
        exit(77);
    }
}

static int has_perf_mapping(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return -1;
    char line[512];
    int found = 0;
    while (fgets(line, sizeof line, f))
        if (strstr(line, "perf_event")) found = 1;
    fclose(f);
    return found;
}

__attribute__((noinline)) void compute(double seconds)
{
    double end = now() + seconds, x = 0;
    while (now() < end)
        for (int i = 0; i < 10000; i++) x += (double)i * 0.5;
    sink = x;
}

__attribute__((noinline)) long storm(double seconds)
{
    int up[2], down[2];
    if (pipe(up) != 0 || pipe(down) != 0) exit(1);
    pid_t child = fork();
    if (child < 0) exit(1);
    char byte = 0;
    if (child == 0) { /* echoes every byte until the pipe closes */
        close(up[1]);
        close(down[0]);
        while (read(up[0], &byte, 1) == 1)
            if (write(down[1], &byte, 1) != 1) break;
        _exit(0);
    }
    close(up[0]);
    close(down[1]);
    long trips = 0;
    double end = now() + seconds;
    while (now() < end) {
        if (write(up[1], &byte, 1) != 1 || read(down[0], &byte, 1) != 1) exit(1);
        trips++;
    }
    close(up[1]);
    close(down[0]);
    waitpid(child, NULL, 0);
    return trips;
}

int main(int argc, char **argv)
{
    double compute_s = (argc > 1 ? atof(argv[1]) : 1500) / 1e3;
    double storm_s = (argc > 2 ? atof(argv[2]) : 400) / 1e3;
    pin(1);
    compute(compute_s);
    int after_compute = has_perf_mapping();
    long trips = storm(storm_s);
    int after_storm = has_perf_mapping();
    printf("timer after_compute=%d after_storm=%d switches=%ld\n", after_compute, after_storm,
           trips);
    return 0;
}
