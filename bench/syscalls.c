/* Syscall-heavy microbenchmark for kernel-time profiling (bench/kernel.py).
 *
 *   syscalls [N [MODE [THREADS]]]
 *
 * N       calls per thread (default 2000000)
 * MODE    getppid (default): getppid(), the cheapest system call there is
 *         write: write(fd, buf, 64) to /dev/null (opened before the timed loop)
 * THREADS threads running the loop at once (default 1: the loop runs in the main thread)
 *
 * Only the loop is timed (CLOCK_MONOTONIC just before and just after it), so start-up, the
 * profiler's initialisation and its write at exit are not counted.  The loop is in a noinline
 * function that calls the C library through the PLT, so an interposing wrapper
 * (libpathscope-kernel.so) sees every call.  Prints one line:
 *
 *   ns_per_call X calls N mode MODE threads T
 *
 * where calls is the total over the threads and X the mean over the threads of their own
 * loop time divided by their own calls. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { MODE_GETPPID, MODE_WRITE };

static long calls_per_thread = 2000000;
static int mode = MODE_GETPPID;
static int devnull = -1;

static double monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

__attribute__((noinline)) static void getppid_loop(long n)
{
    for (long i = 0; i < n; i++) {
        getppid();
        __asm__ volatile("" ::: "memory"); /* one real call per iteration */
    }
}

__attribute__((noinline)) static void write_loop(long n)
{
    static const char block[64];
    for (long i = 0; i < n; i++) {
        if (write(devnull, block, sizeof block) != (ssize_t)sizeof block) {
            perror("syscalls: write /dev/null");
            exit(1);
        }
    }
}

/* One thread's loop: its own ns per call. */
static void *timed_loop(void *result)
{
    double t0 = monotonic_ns();
    if (mode == MODE_WRITE)
        write_loop(calls_per_thread);
    else
        getppid_loop(calls_per_thread);
    double t1 = monotonic_ns();
    *(double *)result = (t1 - t0) / (double)calls_per_thread;
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1) calls_per_thread = atol(argv[1]);
    const char *mode_name = argc > 2 ? argv[2] : "getppid";
    int threads = argc > 3 ? atoi(argv[3]) : 1;
    if (strcmp(mode_name, "write") == 0) {
        mode = MODE_WRITE;
    } else if (strcmp(mode_name, "getppid") != 0) {
        fprintf(stderr, "syscalls: unknown mode '%s' (getppid or write)\n", mode_name);
        return 2;
    }
    if (calls_per_thread < 1 || threads < 1 || threads > 256) {
        fprintf(stderr, "usage: syscalls [N>0 [getppid|write [THREADS 1..256]]]\n");
        return 2;
    }
    if (mode == MODE_WRITE && (devnull = open("/dev/null", O_WRONLY | O_CLOEXEC)) < 0) {
        perror("syscalls: /dev/null");
        return 1;
    }
    double *ns = calloc((size_t)threads, sizeof *ns);
    if (!ns) return 1;
    if (threads == 1) {
        timed_loop(&ns[0]);
    } else {
        pthread_t *tids = calloc((size_t)threads, sizeof *tids);
        if (!tids) return 1;
        for (int i = 0; i < threads; i++)
            if (pthread_create(&tids[i], NULL, timed_loop, &ns[i])) {
                fprintf(stderr, "syscalls: cannot create thread %d\n", i);
                return 1;
            }
        for (int i = 0; i < threads; i++) pthread_join(tids[i], NULL);
        free(tids);
    }
    double sum = 0;
    for (int i = 0; i < threads; i++) sum += ns[i];
    printf("ns_per_call %.2f calls %ld mode %s threads %d\n", sum / threads,
           calls_per_thread * threads, mode_name, threads);
    free(ns);
    if (devnull >= 0) close(devnull);
    return 0;
}
