// Built with -static-libgcc -static-libstdc++ (CMakeLists.txt): its exceptions use its own
// copy of the unwinder, which pathscope cannot interpose, so thunk mode must be refused
// (tests/e2e/test_traversal.py).
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

__attribute__((noinline)) void *work(int depth)
{
    void *p = std::malloc(32);
    if (depth == 0) throw std::runtime_error("deep");
    void *q = work(depth - 1);
    std::free(p);
    return q;
}

int main()
{
    int caught = 0;
    for (int i = 0; i < 3; i++) {
        try {
            work(5);
        } catch (const std::exception &) {
            caught++;
        }
    }
    std::printf("caught %d\n", caught);
    return 0;
}
