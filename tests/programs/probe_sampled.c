/* Samples that land in probes' code (tests/e2e/test_probe.py): probed functions with short
 * bodies called in tight loops, so that at a high sampling rate many samples interrupt a
 * trampoline (the relocated first instructions, the stub), the entry stub's common part or an
 * exit's hooked thunk; and a function whose first instruction is a call (calls_first, in
 * assembly), displaced into its trampoline: its callee returns into the trampoline.
 *
 *   probe_sampled TINY_CALLS FIRST_CALLS SPIN
 *
 * tiny() TINY_CALLS times from loop_tiny(), then calls_first() FIRST_CALLS times from
 * loop_first(), each spinning SPIN iterations in spin_callee(). */
#include <stdio.h>
#include <stdlib.h>

volatile unsigned long sink;

__attribute__((noinline)) unsigned long tiny(unsigned long x)
{
    return x * 2654435761u + 7;
}

__attribute__((noinline)) void loop_tiny(long n)
{
    unsigned long x = sink;
    for (long i = 0; i < n; i++) x = tiny(x);
    sink = x;
}

static long spin;

/* Called with the stack 8 bytes off the ABI's alignment (calls_first does not adjust it):
 * integer work only. */
__attribute__((noinline, used)) void spin_callee(void)
{
    for (long i = 0; i < spin; i++) sink = sink + 1;
}

/* The first instruction is the call: a probe displaces it into the trampoline. */
void calls_first(void);
__asm__(".text\n"
        ".globl calls_first\n"
        ".type calls_first, @function\n"
        "calls_first:\n"
        ".cfi_startproc\n"
        "call spin_callee\n"
        "ret\n"
        ".cfi_endproc\n"
        ".size calls_first, .-calls_first\n");

__attribute__((noinline)) void loop_first(long n)
{
    for (long i = 0; i < n; i++) calls_first();
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: probe_sampled TINY_CALLS FIRST_CALLS SPIN\n");
        return 2;
    }
    long tiny_calls = atol(argv[1]), first_calls = atol(argv[2]);
    spin = atol(argv[3]);
    loop_tiny(tiny_calls);
    loop_first(first_calls);
    printf("probe_sampled tiny=%ld first=%ld sink=%lu\n", tiny_calls, first_calls, sink);
    return 0;
}
