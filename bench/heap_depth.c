/* Cost of one malloc + free pair by stack depth, for heap profiling (bench/heap.py).
 *
 *   heap_depth DEPTH ITERATIONS [SIZE]        (defaults 30, 2000000, 64)
 *
 * Build: gcc -O2 -g -Wall (no frame pointers).  Calls malloc(SIZE) then free ITERATIONS times
 * from one call site in `pairs`, which runs at frame DEPTH counting main as frame 1 (main,
 * descend x (DEPTH - 2), pairs; DEPTH >= 2).  descend is a noinline recursion that keeps its
 * frame at every level (an empty asm after the call: no tail call).  The pointer escapes into
 * a volatile global, so the compiler cannot drop the pair.  ITERATIONS / 10 warm-up pairs
 * come first (same site and depth); then the loop runs in CHUNKS timed chunks
 * (CLOCK_MONOTONIC) and the median chunk is reported:
 *   heap_depth: depth=D iterations=N size=S ns_per_pair=X allocations=A
 * allocations: every malloc call the program made after main started (warm-up included),
 * exact: a heap profiler that records every allocation must record at least A.
 * The binary knows nothing about any profiler. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CHUNKS 51

static void *volatile sink;
static long allocations;

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

__attribute__((noinline)) static void pairs(long n, size_t size)
{
    for (long i = 0; i < n; i++) {
        void *p = malloc(size);
        if (!p) abort();
        sink = p;
        free(p);
    }
    allocations += n;
}

__attribute__((noinline)) static void descend(int below, long n, size_t size)
{
    if (below <= 0) pairs(n, size);
    else descend(below - 1, n, size);
    __asm__ __volatile__("" ::: "memory"); /* no tail call: every level keeps its frame */
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int depth = argc > 1 ? atoi(argv[1]) : 30;
    long iterations = argc > 2 ? atol(argv[2]) : 2000000;
    long size = argc > 3 ? atol(argv[3]) : 64;
    if (depth < 3 || iterations < CHUNKS || size < 1) {
        fprintf(stderr, "usage: heap_depth DEPTH>=3 ITERATIONS>=%d [SIZE>=1]\n", CHUNKS);
        return 2;
    }
    /* main (frame 1), descend (frames 2..depth-1), pairs (frame depth) */
    descend(depth - 3, iterations / 10, (size_t)size); /* warm the caches */
    double per_chunk[CHUNKS];
    long chunk = iterations / CHUNKS;
    for (int c = 0; c < CHUNKS; c++) {
        double t0 = now_ns();
        descend(depth - 3, chunk, (size_t)size);
        per_chunk[c] = (now_ns() - t0) / (double)chunk;
    }
    qsort(per_chunk, CHUNKS, sizeof per_chunk[0], cmp);
    printf("heap_depth: depth=%d iterations=%ld size=%ld ns_per_pair=%.2f allocations=%ld\n",
           depth, chunk * CHUNKS, size, per_chunk[CHUNKS / 2], allocations);
    return 0;
}
