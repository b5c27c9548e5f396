/* What reading the clock pair costs a sample (issue 16, docs/benchmarks.md AF): each kept
 * sample converts its CPU time to ticks with the rate from the start of the run to now,
 * which reads CLOCK_MONOTONIC and the TSC.  Before: one read of each; now: the TSC between
 * two reads of CLOCK_MONOTONIC (retried only when preempted in between).  ns per pair, the
 * median of 9 rounds of 1e6 pairs.   cc -O2 -o clock_pair bench/clock_pair.c && ./clock_pair */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline uint64_t tsc(void)
{
    uint32_t lo, hi;
    __asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
    return ((uint64_t)hi << 32) | lo;
}

static uint64_t mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static volatile uint64_t sink;
static int cmp(const void *a, const void *b) { return (*(const double *)a > *(const double *)b) - (*(const double *)a < *(const double *)b); }

int main(void)
{
    enum { N = 1000000, ROUNDS = 9 };
    double one[ROUNDS], two[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        uint64_t t0 = mono();
        for (int i = 0; i < N; i++) sink = mono() + tsc();
        uint64_t t1 = mono();
        for (int i = 0; i < N; i++) {
            uint64_t a = mono(), t = tsc(), b = mono();
            sink = t + (b - a < 20000 ? a + (b - a) / 2 : 0);
        }
        uint64_t t2 = mono();
        one[r] = (double)(t1 - t0) / N;
        two[r] = (double)(t2 - t1) / N;
    }
    qsort(one, ROUNDS, sizeof *one, cmp);
    qsort(two, ROUNDS, sizeof *two, cmp);
    printf("one read each: %.1f ns; tsc between two clock reads: %.1f ns; added per kept sample: %.1f ns\n",
           one[ROUNDS / 2], two[ROUNDS / 2], two[ROUNDS / 2] - one[ROUNDS / 2]);
    return 0;
}
