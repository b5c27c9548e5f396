/* Inline layers of symtest.c: always inlined, so a return address in outer() has a chain
 * outer -> symtest_mid -> symtest_inner.  The MARK comments are found by the driver. */
int leaf(int x);

static inline __attribute__((always_inline)) int symtest_inner(int x)
{
    int y = leaf(x); /* MARK:inner-calls-leaf */
    return y + 2;
}

static inline __attribute__((always_inline)) int symtest_mid(int x)
{
    int z = symtest_inner(x + 1); /* MARK:mid-calls-inner */
    return z * 7;
}
