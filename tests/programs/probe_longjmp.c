/* longjmp out of two nested probed functions (the probes lose those exits).
 *
 *   probe_longjmp [ROUNDS]                                      (default 10)
 *
 * Every round: jump_outer calls jump_inner, which longjmps to main's setjmp, leaving both
 * frames without a return; then returner is called once and returns normally (a probed call
 * that completes after the lost exits, on the same stack).  All three are noinline.  It prints
 * on stdout, once at the end:
 *   probe_longjmp rounds=N jump_outer=N jump_inner=N longjmps=N returner=N
 * the calls it made and the jumps that landed, counted by the program itself; the exit status
 * is 1 if a count is not ROUNDS.  The binary knows nothing about pathscope. */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>

static jmp_buf landing;
static long outer_calls, inner_calls, returner_calls;
static volatile long sink;

__attribute__((noinline, noclone)) void jump_inner(int value)
{
    inner_calls++;
    longjmp(landing, value);
}

__attribute__((noinline, noclone)) void jump_outer(int value)
{
    outer_calls++;
    jump_inner(value);
    sink = sink + 1; /* never reached: keeps the call from being a tail call */
}

__attribute__((noinline, noclone)) long returner(long x)
{
    returner_calls++;
    sink = sink + x;
    return sink;
}

int main(int argc, char **argv)
{
    long rounds = argc > 1 ? atol(argv[1]) : 10;
    if (argc > 2 || rounds < 1) {
        fprintf(stderr, "usage: probe_longjmp [ROUNDS] (ROUNDS >= 1)\n");
        return 2;
    }
    volatile long landed = 0; /* changed between setjmp and longjmp: must be volatile */
    for (volatile long r = 0; r < rounds; r++) {
        if (setjmp(landing) == 0)
            jump_outer(1);
        else
            landed++;
        returner(r);
    }
    printf("probe_longjmp rounds=%ld jump_outer=%ld jump_inner=%ld longjmps=%ld returner=%ld\n",
           rounds, outer_calls, inner_calls, (long)landed, returner_calls);
    int ok = outer_calls == rounds && inner_calls == rounds && landed == rounds &&
             returner_calls == rounds;
    return ok ? 0 : 1;
}
