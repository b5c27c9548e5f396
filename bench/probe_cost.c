/* Cost of a probed function call, by stack depth (bench/probe.py).
 *
 *   probe_cost DEPTH CALLS [f|g]
 *
 * Calls f (or g) CALLS times from a loop whose frame is DEPTH frames below main (a noinline
 * recursion, no tail calls: each level is one real frame), in CHUNKS timed chunks, after a
 * warm-up of CALLS / 10 calls; prints
 *   probe_cost depth=D func=F calls=TOTAL ns_per_call=MEDIAN_CHUNK same_page=0|1
 * where TOTAL counts every call of F, warm-up included (a probe's count must equal it).
 * f and g are neighbours in one page (same_page says whether the linker kept them so):
 * probing f while the loop calls g measures what a probe costs the rest of its page.
 * Built with -fno-omit-frame-pointer (bench/probe.py) so that f and g open as most compiled
 * functions do.  The binary knows nothing about any profiler; the probes come from outside. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHUNKS 51
#define PAGE 4096

volatile long probe_cost_sink;

/* Global, so that f and g keep their names for uprobes and pathscope; noipa keeps each a real
 * call (no inlining, cloning or knowledge of its body at the call site).  f starts a page, so
 * g, emitted right after it, shares that page. */
__attribute__((noipa, aligned(PAGE))) void f(long x)
{
    volatile long local = x; /* a stack slot: built with frame pointers, f opens with the */
    probe_cost_sink += local; /* usual push %rbp; mov %rsp,%rbp */
}

__attribute__((noipa)) void g(long x)
{
    volatile long local = x;
    probe_cost_sink += local;
}

typedef void (*target_fn)(long);

__attribute__((noipa)) static void calls(target_fn fn, long n)
{
    for (long i = 0; i < n; i++)
        fn(i);
}

__attribute__((noipa)) static void descend(int depth, target_fn fn, long n)
{
    if (depth <= 1) calls(fn, n);
    else descend(depth - 1, fn, n);
    __asm__ __volatile__("" ::: "memory"); /* no tail call: every level keeps its frame */
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 4 || (argc == 4 && strcmp(argv[3], "f") && strcmp(argv[3], "g"))) {
        fprintf(stderr, "usage: probe_cost DEPTH CALLS [f|g]\n");
        return 2;
    }
    int depth = atoi(argv[1]);
    long n = atol(argv[2]);
    const char *name = argc == 4 ? argv[3] : "f";
    target_fn fn = name[0] == 'g' ? g : f;
    if (depth < 1 || n < CHUNKS) {
        fprintf(stderr, "probe_cost: DEPTH must be >= 1 and CALLS >= %d\n", CHUNKS);
        return 2;
    }
    /* main, descend x (depth - 1), calls: the loop runs depth frames below main */
    long warm = n / 10, chunk = n / CHUNKS;
    descend(depth, fn, warm);
    double per_chunk[CHUNKS];
    for (int c = 0; c < CHUNKS; c++) {
        double t0 = now_ns();
        descend(depth, fn, chunk);
        per_chunk[c] = (now_ns() - t0) / (double)chunk;
    }
    qsort(per_chunk, CHUNKS, sizeof per_chunk[0], cmp);
    int same_page = (uintptr_t)f / PAGE == (uintptr_t)g / PAGE;
    printf("probe_cost depth=%d func=%s calls=%ld ns_per_call=%.2f same_page=%d\n", depth, name,
           warm + chunk * CHUNKS, per_chunk[CHUNKS / 2], same_page);
    return 0;
}
