/* Heap call paths whose shape changes slowly, quickly, and by rotation
 * (tests/e2e/test_traversal.py): the traversal modes must agree with a full walk.
 *   slow      10,000 allocations from slow_a;slow_site, then 10,000 from slow_b;slow_site
 *   fast      fast_0 .. fast_3 (each calling fast_site) in turn, every call another path
 *   rotation  P and R have identical frames (same size, same stack pointers) and both call
 *             Q -> S -> malloc; they alternate, then run in bursts.  The innermost frames of
 *             two consecutive walks match in return address and stack pointer, and so does
 *             the next return address: the heuristic of Perks et al. trusts them and charges
 *             one caller's allocations to the other; the difference is three levels up.
 * No MPI.  Arguments name the phases to run (default all).  Prints one
 * "truth path=A;B;C count=N" line per path (the application frames right above malloc,
 * outermost first) and "truth total=N" (every malloc made here). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *volatile sink;
static long total;

#define KEEP() __asm__ __volatile__("" ::: "memory") /* no tail call, no merging */

__attribute__((noinline)) void slow_site(size_t n)
{
    void *p = malloc(n);
    sink = p;
    free(p);
    total++;
    KEEP();
}

__attribute__((noinline)) void slow_a(size_t n) { slow_site(n); KEEP(); }
__attribute__((noinline)) void slow_b(size_t n) { slow_site(n + 8); KEEP(); }

__attribute__((noinline)) void fast_site(size_t n)
{
    void *p = malloc(n);
    sink = p;
    free(p);
    total++;
    KEEP();
}

__attribute__((noinline)) void fast_0(size_t n) { fast_site(n); KEEP(); }
__attribute__((noinline)) void fast_1(size_t n) { fast_site(n + 1); KEEP(); }
__attribute__((noinline)) void fast_2(size_t n) { fast_site(n + 2); KEEP(); }
__attribute__((noinline)) void fast_3(size_t n) { fast_site(n + 3); KEEP(); }

/* rotation: S allocates, Q calls S, P and R call Q with the same frame layout */
static volatile int which;

__attribute__((noinline)) void S(size_t n)
{
    void *p = malloc(n);
    sink = p;
    free(p);
    total++;
    KEEP();
}

__attribute__((noinline)) void Q(size_t n) { S(n); KEEP(); }
__attribute__((noinline)) void P(size_t n) { which = 1; Q(n); KEEP(); }
__attribute__((noinline)) void R(size_t n) { which = 2; Q(n); KEEP(); }

__attribute__((noinline)) void slow_phase(int n)
{
    for (int i = 0; i < n; i++) slow_a(32);
    for (int i = 0; i < n; i++) slow_b(32);
    KEEP();
}

__attribute__((noinline)) void fast_phase(int n)
{
    for (int i = 0; i < n; i++) {
        switch (i % 4) {
        case 0: fast_0(24); break;
        case 1: fast_1(24); break;
        case 2: fast_2(24); break;
        default: fast_3(24); break;
        }
    }
    KEEP();
}

__attribute__((noinline)) void rotation_phase(int n, int burst_p, int burst_r)
{
    for (int i = 0; i < n; i++) {
        P(40);
        R(40);
    }
    for (int i = 0; i < burst_p; i++) P(40);
    for (int i = 0; i < burst_r; i++) R(40);
    for (int i = 0; i < n; i++) { /* R first this time */
        R(40);
        P(40);
    }
    KEEP();
}

static int wanted(int argc, char **argv, const char *phase)
{
    if (argc == 1) return 1;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], phase) == 0) return 1;
    return 0;
}

/* heap_paths [slow|fast|rotation ...]: the phases named, default all */
int main(int argc, char **argv)
{
    const int slow = 10000, fast = 10000, rot = 3000, burst_p = 700, burst_r = 300;
    long want = 0;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "slow") && strcmp(argv[i], "fast") && strcmp(argv[i], "rotation")) {
            fprintf(stderr, "heap_paths: unknown phase '%s'\n", argv[i]);
            return 2;
        }
    if (wanted(argc, argv, "slow")) {
        slow_phase(slow);
        printf("truth path=slow_a;slow_site count=%d\n", slow);
        printf("truth path=slow_b;slow_site count=%d\n", slow);
        want += 2L * slow;
    }
    if (wanted(argc, argv, "fast")) {
        fast_phase(fast);
        for (int k = 0; k < 4; k++)
            printf("truth path=fast_%d;fast_site count=%d\n", k, fast / 4 + (k < fast % 4));
        want += fast;
    }
    if (wanted(argc, argv, "rotation")) {
        rotation_phase(rot, burst_p, burst_r);
        printf("truth path=P;Q;S count=%d\n", 2 * rot + burst_p);
        printf("truth path=R;Q;S count=%d\n", 2 * rot + burst_r);
        want += 4L * rot + burst_p + burst_r;
    }
    printf("truth total=%ld\n", total);
    return total == want ? 0 : 1;
}
