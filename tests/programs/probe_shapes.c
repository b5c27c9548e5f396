/* Shapes of probed functions, in phases (tests of probes added and removed while it runs).
 *
 *   probe_shapes [DEPTH [PHASES [SPIN_US]]]          (defaults 20, 3, 200)
 *
 * Every phase makes the same calls:
 *   leaf       15 calls from three call paths: path_a 3, path_b 5, path_c 7 (one call site each)
 *   recurse    DEPTH calls: recurse(DEPTH) calls itself down to recurse(1), DEPTH nested frames
 *   helper     two static functions of that name: probe_shapes.c's 2 calls, lib/probe_shapes2.c's
 *              4 calls (through shapes2_run)
 *   shapes_lib_work  6 calls, in the shared library libprobe_shapes_lib.so
 * leaf, both helpers and shapes_lib_work each spin SPIN_US microseconds per call; each level of
 * recurse spins SPIN_US / 10 after its inner call returns.
 * It prints, flushed, on stdout:
 *   probe_shapes pid=PID depth=D phases=P spin_us=S               at the start
 *   probe_shapes phase=K leaf_calls=15 leaf_ns=T leaf_a=3 leaf_b=5 leaf_c=7 recurse_calls=D
 *                recurse_ns=T helper1_calls=2 helper1_ns=T helper2_calls=4 helper2_ns=T
 *                lib_calls=6 lib_ns=T                              (one line per phase)
 * with this phase's totals, wall ns measured around each call by its caller (recurse_ns: the
 * outermost call only, which contains the others).  After each phase but the last it reads one
 * line from stdin before going on (end of input: it goes on at once), so a test can add or
 * remove probes between phases.  The binary knows nothing about pathscope. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "lib/probe_shapes.h"

struct phase_totals {
    struct shapes_total leaf, leaf_a, leaf_b, leaf_c, recurse, helper1, helper2, lib;
};

static long spin_us = 200;

__attribute__((noinline, noclone)) void leaf(void)
{
    shapes_spin(spin_us);
}

__attribute__((noinline, noclone)) static void path_a(struct phase_totals *t)
{
    for (int i = 0; i < 3; i++)
        SHAPES_TIMED(t->leaf_a, leaf());
}

__attribute__((noinline, noclone)) static void path_b(struct phase_totals *t)
{
    for (int i = 0; i < 5; i++)
        SHAPES_TIMED(t->leaf_b, leaf());
}

__attribute__((noinline, noclone)) static void path_c(struct phase_totals *t)
{
    for (int i = 0; i < 7; i++)
        SHAPES_TIMED(t->leaf_c, leaf());
}

__attribute__((noinline, noclone)) int recurse(int n)
{
    int levels = n > 1 ? recurse(n - 1) + 1 : 1;
    shapes_spin(spin_us / 10); /* after the inner call: no tail call, every level keeps a frame */
    return levels;
}

__attribute__((noinline, noclone)) static void helper(long us)
{
    shapes_spin(us);
}

static void run_phase(int depth, struct phase_totals *t)
{
    path_a(t);
    path_b(t);
    path_c(t);
    t->leaf.calls = t->leaf_a.calls + t->leaf_b.calls + t->leaf_c.calls;
    t->leaf.ns = t->leaf_a.ns + t->leaf_b.ns + t->leaf_c.ns;
    int levels = 0;
    SHAPES_TIMED(t->recurse, levels = recurse(depth));
    t->recurse.calls = levels; /* every level is a call; the time is the outermost one's */
    for (int i = 0; i < 2; i++)
        SHAPES_TIMED(t->helper1, helper(spin_us));
    shapes2_run(4, spin_us, &t->helper2);
    for (int i = 0; i < 6; i++)
        SHAPES_TIMED(t->lib, shapes_lib_work(spin_us));
}

static void print_phase(int phase, const struct phase_totals *t)
{
    printf("probe_shapes phase=%d leaf_calls=%ld leaf_ns=%lld leaf_a=%ld leaf_b=%ld leaf_c=%ld "
           "recurse_calls=%ld recurse_ns=%lld helper1_calls=%ld helper1_ns=%lld "
           "helper2_calls=%ld helper2_ns=%lld lib_calls=%ld lib_ns=%lld\n",
           phase, t->leaf.calls, t->leaf.ns, t->leaf_a.calls, t->leaf_b.calls, t->leaf_c.calls,
           t->recurse.calls, t->recurse.ns, t->helper1.calls, t->helper1.ns, t->helper2.calls,
           t->helper2.ns, t->lib.calls, t->lib.ns);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    int depth = argc > 1 ? atoi(argv[1]) : 20;
    int phases = argc > 2 ? atoi(argv[2]) : 3;
    spin_us = argc > 3 ? atol(argv[3]) : 200;
    if (argc > 4 || depth < 1 || phases < 1 || spin_us < 0) {
        fprintf(stderr, "usage: probe_shapes [DEPTH [PHASES [SPIN_US]]] (DEPTH, PHASES >= 1)\n");
        return 2;
    }
    printf("probe_shapes pid=%ld depth=%d phases=%d spin_us=%ld\n", (long)getpid(), depth, phases,
           spin_us);
    fflush(stdout);
    char line[256];
    for (int phase = 1; phase <= phases; phase++) {
        struct phase_totals totals = {0};
        run_phase(depth, &totals);
        print_phase(phase, &totals);
        if (phase < phases && fgets(line, sizeof line, stdin) == NULL)
            clearerr(stdin); /* no more input: the remaining phases run without waiting */
    }
    return 0;
}
