/* The resolver test's second C file: a static helper named like restest_a.c's. */
volatile int counter_b;

static __attribute__((noipa)) int helper(int x) { counter_b ^= x; return counter_b + 5; } /* MARK:b-helper */

__attribute__((noipa)) int b_entry(int x)
{
    return helper(x) * 2;
}
