/* Test program of the symbolizer (driven by test_symbolize.py, built with -O2 -g): an inline
 * chain under outer(), a plain function, and calls from main.  Lines are found by MARK. */
#include <stdio.h>

#include "symtest_inline.h"

__attribute__((noipa)) int leaf(int x)
{
    __asm__ volatile("" ::: "memory");
    return x * 3 + 1;
}

__attribute__((noipa)) int outer(int x)
{
    int s = symtest_mid(x); /* MARK:outer-calls-mid */
    return s * 5;
}

/* On one line, so that the entry's line is the MARK line whatever the compiler picks. */
__attribute__((noipa)) int plain(int x) { return x ^ 0x5a; } /* MARK:plain-entry */

int main(int argc, char **argv)
{
    (void)argv;
    int a = outer(argc);
    int b = plain(argc); /* MARK:main-calls-plain */
    printf("%d %d\n", a, b);
    return 0;
}
