/* Test program of the resolver (check_resolve.py, built with -O2 -g -rdynamic): a static
 * function with a namesake in restest_b.c, a weak alias, an indirect function and calls into
 * the library (restest_lib.c) and the hand-written entries of restest_asm.S.  Lines are found
 * by MARK. */
#include <stdio.h>

int b_entry(int x);
int lib_work(int x);
volatile int counter_a;

/* On one line, so that the entry's line is the MARK line whatever the compiler picks. */
static __attribute__((noipa)) int helper(int x) { counter_a += x; return counter_a * 3; } /* MARK:a-helper */

__attribute__((noipa)) int a_entry(int x)
{
    return helper(x) + 1;
}

__attribute__((noipa)) int alias_target(int x)
{
    counter_a -= x;
    return counter_a;
}
int alias_weak(int x) __attribute__((weak, alias("alias_target")));

static int plain_impl(int x)
{
    return x + 2;
}
/* The dynamic linker calls the resolver; the symbol is the indirect function. */
static int (*pick_impl(void))(int)
{
    return plain_impl;
}
int chosen(int x) __attribute__((ifunc("pick_impl")));

int main(int argc, char **argv)
{
    (void)argv;
    int v = a_entry(argc) + b_entry(argc) + alias_weak(argc) + chosen(argc) + lib_work(argc);
    printf("%d\n", v);
    return 0;
}
