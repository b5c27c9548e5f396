/* Does reading the clock wait for the cache misses in flight?  No MPI, no pathscope.
 *
 *   gcc -O2 -o clockfence bench/clockfence.c && taskset -c 1 ./clockfence
 *
 * The loop is the one of HPCC's RandomAccess: one read-modify-write at a pseudo-random place in
 * a 512 MiB table per iteration.  Alone, consecutive iterations' misses overlap (the CPU does
 * not wait for one to finish before issuing the next).  Each variant puts something between
 * the updates: what a timed MPI wrapper does (two rdtsc, or two clock_gettime) and, for
 * comparison, fences and the coarse clock.  If a variant costs about a full cache + TLB miss
 * per iteration, it serialises the misses: every timed wrapper in such a loop pays that much.
 * Prints ns per iteration, the best of 4 passes, for each variant.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <x86intrin.h>

#define TABLE_BITS 26 /* 2^26 words = 512 MiB */
#define ITERATIONS 2000000L

static volatile uint64_t sink;

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

enum { NONE, RDTSC_1, RDTSC_2, RDTSCP_2, CLOCK_2, COARSE_2, LFENCE, MFENCE, NVARIANTS };
static const char *names[NVARIANTS] = {
    "update alone", "1 rdtsc + update", "2 rdtsc + update", "2 rdtscp + update",
    "2 clock_gettime(MONOTONIC) + update", "2 clock_gettime(MONOTONIC_COARSE) + update",
    "lfence + update", "mfence + update",
};

static double pass(uint64_t *table, int variant)
{
    uint64_t ran = 1, acc = 0;
    unsigned aux;
    struct timespec ts;
    double t0 = now_ns();
    for (long i = 0; i < ITERATIONS; i++) {
        uint64_t a = 0, b = 0;
        switch (variant) {
        case RDTSC_1: a = __rdtsc(); break;
        case RDTSC_2: a = __rdtsc(); b = __rdtsc(); break;
        case RDTSCP_2: a = __rdtscp(&aux); b = __rdtscp(&aux); break;
        case CLOCK_2:
            clock_gettime(CLOCK_MONOTONIC, &ts); a = (uint64_t)ts.tv_nsec;
            clock_gettime(CLOCK_MONOTONIC, &ts); b = (uint64_t)ts.tv_nsec;
            break;
        case COARSE_2:
            clock_gettime(CLOCK_MONOTONIC_COARSE, &ts); a = (uint64_t)ts.tv_nsec;
            clock_gettime(CLOCK_MONOTONIC_COARSE, &ts); b = (uint64_t)ts.tv_nsec;
            break;
        case LFENCE: _mm_lfence(); break;
        case MFENCE: _mm_mfence(); break;
        }
        acc += b - a;
        ran = (ran << 1) ^ ((int64_t)ran < 0 ? 7 : 0);
        table[ran & ((1ull << TABLE_BITS) - 1)] ^= ran;
    }
    sink = acc;
    return (now_ns() - t0) / ITERATIONS;
}

int main(void)
{
    uint64_t *table = malloc(sizeof(uint64_t) << TABLE_BITS);
    if (!table) return 1;
    memset(table, 1, sizeof(uint64_t) << TABLE_BITS); /* fault every page in now */
    for (int v = 0; v < NVARIANTS; v++) {
        double best = 1e300;
        for (int p = 0; p < 4; p++) {
            double t = pass(table, v);
            if (t < best) best = t;
        }
        printf("%-44s %8.1f ns/iteration\n", names[v], best);
    }
    free(table);
    return 0;
}
