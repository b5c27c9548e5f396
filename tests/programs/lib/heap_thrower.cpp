// A C++ library that a C program opens with RTLD_LOCAL (as Python opens extension modules):
// its libstdc++ and libgcc_s are outside the global scope, where pathscope's interposed
// unwinder functions must still find them (runtime/unwind/thunk.c: next_symbol).
#include <cstdlib>
#include <stdexcept>

__attribute__((noinline)) static void fail(int i)
{
    void *volatile p = std::malloc(16);
    std::free(p);
    throw std::runtime_error(i % 2 ? "odd" : "even");
}

extern "C" int thrower(int n)
{
    int caught = 0;
    for (int i = 0; i < n; i++) {
        try {
            fail(i);
        } catch (const std::exception &) {
            caught++;
        }
    }
    return caught;
}
