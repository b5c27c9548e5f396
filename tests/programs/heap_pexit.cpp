// A thread ends with pthread_exit while a destructor on the way catches an exception of its
// own and allocates (tests/e2e/test_traversal.py): in thunk mode no thunk may come back on
// the frames still to unwind, or the remaining destructors and cleanup handlers are skipped.
#include <cstdio>
#include <cstdlib>
#include <pthread.h>

static int cleanups;
static void on_cleanup(void *) { __atomic_add_fetch(&cleanups, 1, __ATOMIC_SEQ_CST); }

struct Guard {
    ~Guard()
    {
        try {
            throw 1;
        } catch (int) {
        }
        void *volatile p = std::malloc(64);
        std::free(p);
    }
};

__attribute__((noinline)) void inner()
{
    Guard g;
    void *volatile p = std::malloc(16);
    std::free(p);
    pthread_exit(nullptr);
}

__attribute__((noinline)) void middle() { inner(); }

static void *thread_main(void *)
{
    pthread_cleanup_push(on_cleanup, nullptr);
    void *volatile p = std::malloc(8);
    std::free(p);
    middle();
    pthread_cleanup_pop(0);
    return nullptr;
}

int main()
{
    for (int i = 0; i < 5; i++) {
        pthread_t t;
        pthread_create(&t, nullptr, thread_main, nullptr);
        pthread_join(t, nullptr);
    }
    std::printf("cleanup handlers run: %d of 5\n", cleanups);
    return cleanups == 5 ? 0 : 1;
}
