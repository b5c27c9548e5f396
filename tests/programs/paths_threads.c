/* Threads get their own call-path trees (tests/e2e/test_paths.py).  No MPI.
 *   main computes in main_work; thread 1 runs thread_a, thread 2 runs thread_b (twice the
 *   work), thread 3 leaves through pthread_exit from inside exit_path; one after the other.
 * Prints "truth" lines with each function's measured wall time. */
#include <pthread.h>
#include <stdio.h>
#include <time.h>

static volatile double sink;

static double now(void)
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

static double took[4];

__attribute__((noinline)) void main_work(long n) { spin(n); }
__attribute__((noinline)) void *thread_a(void *arg) { double t = now(); spin((long)arg); took[1] = now() - t; return NULL; }
__attribute__((noinline)) void *thread_b(void *arg) { double t = now(); spin(2 * (long)arg); took[2] = now() - t; return NULL; }
__attribute__((noinline)) void exit_path(long n) { double t = now(); spin(n); took[3] = now() - t; pthread_exit(NULL); }
__attribute__((noinline)) void *thread_c(void *arg) { exit_path((long)arg); return NULL; }

int main(void)
{
    long n = 300000000L;
    /* one computing thread at a time, each function at the start of its thread: time a
     * thread spends blocked (in pthread_join) or waiting for a CPU goes to its next sample,
     * so nothing may block or wait right before a function whose time is checked */
    double t = now();
    main_work(n);
    took[0] = now() - t;
    pthread_t a, b, c;
    pthread_create(&a, NULL, thread_a, (void *)n);
    pthread_join(a, NULL);
    pthread_create(&b, NULL, thread_b, (void *)n);
    pthread_join(b, NULL);
    pthread_create(&c, NULL, thread_c, (void *)n);
    pthread_join(c, NULL);
    printf("truth main_work=%.6f thread_a=%.6f thread_b=%.6f exit_path=%.6f\n", took[0], took[1],
           took[2], took[3]);
    return 0;
}
