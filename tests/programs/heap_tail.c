/* Allocator functions reached by sibling calls (`return malloc(n)` compiles to a jump), after
 * the caller's frame got a thunk (tests/e2e/test_traversal.py): 100 blocks from f, 100 that
 * f's jump makes main's own. */
#include <stdlib.h>

__attribute__((noinline)) void *f(size_t n)
{
    void *volatile a = malloc(8);
    free(a);
    return malloc(n);
}

int main(void)
{
    void *volatile keep[100];
    for (int i = 0; i < 100; i++) keep[i] = f(100 + (size_t)i);
    for (int i = 0; i < 100; i++) free(keep[i]);
    return 0;
}
