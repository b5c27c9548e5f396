/* Calls that tempt the probes' entry fast path into a wrong path (docs/design-probes.md,
 * section 7): one call site of `hit` (in `inner`) reached through four callers whose frames
 * have the same size, so that inner's frame, its return-address slot and hit's return address
 * are the same for all four -- only the caller's activation tells the paths apart.  One of
 * them leaves inner by longjmp, abandoning its frame without a return.  THREADS threads (the
 * main thread among them) do the same.
 *
 *   probe_fast [ROUNDS [THREADS]]            (defaults 200, 3)
 *
 * Each round, on each thread:  site_b1: inner(10)  site_c1: inner(20)
 *                              site_b2: inner(3), then longjmp out of inner  site_c2: inner(20)
 * It prints   probe_fast rounds=R threads=T b1=.. c1=.. b2=.. c2=.. hit=..   (calls of hit per
 * site, over all threads).  The binary knows nothing about pathscope. */
#include <pthread.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>

static __thread jmp_buf env;
static __thread long calls;
static long totals[5];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
volatile long sink;

__attribute__((noinline, noclone)) void hit(void)
{
    calls++;
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline, noclone)) void inner(int n, int jump)
{
    for (int i = 0; i < n; i++) hit();
    if (jump) longjmp(env, 1);
    sink += n;
}

/* (the same frame size each, kept apart: no tail call, no identical-code folding) */
__attribute__((noinline, noclone)) void site_b1(int n) { inner(n, 0); sink += 1; }
__attribute__((noinline, noclone)) void site_c1(int n) { inner(n, 0); sink += 2; }
__attribute__((noinline, noclone)) void site_b2(int n) { inner(n, 1); sink += 3; }
__attribute__((noinline, noclone)) void site_c2(int n) { inner(n, 0); sink += 4; }

static void *work(void *arg)
{
    long rounds = (long)arg, per[4] = {0, 0, 0, 0}, before;
    for (long r = 0; r < rounds; r++) {
        before = calls;
        site_b1(10);
        per[0] += calls - before;
        before = calls;
        site_c1(20);
        per[1] += calls - before;
        before = calls;
        if (!setjmp(env)) site_b2(3);
        per[2] += calls - before;
        before = calls;
        site_c2(20);
        per[3] += calls - before;
    }
    pthread_mutex_lock(&lock);
    for (int k = 0; k < 4; k++) totals[k] += per[k];
    totals[4] += calls;
    pthread_mutex_unlock(&lock);
    return NULL;
}

int main(int argc, char **argv)
{
    long rounds = argc > 1 ? atol(argv[1]) : 200;
    int threads = argc > 2 ? atoi(argv[2]) : 3;
    if (rounds < 1 || threads < 1 || threads > 64) {
        fprintf(stderr, "usage: probe_fast [ROUNDS [THREADS (1-64)]]\n");
        return 2;
    }
    pthread_t tid[64];
    for (int i = 1; i < threads; i++) pthread_create(&tid[i], NULL, work, (void *)rounds);
    work((void *)rounds);
    for (int i = 1; i < threads; i++) pthread_join(tid[i], NULL);
    printf("probe_fast rounds=%ld threads=%d b1=%ld c1=%ld b2=%ld c2=%ld hit=%ld\n", rounds,
           threads, totals[0], totals[1], totals[2], totals[3], totals[4]);
    return 0;
}
