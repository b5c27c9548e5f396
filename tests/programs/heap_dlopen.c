/* Opens a C++ library with RTLD_LOCAL and has it throw and catch 100 exceptions
 * (tests/e2e/test_traversal.py).  argv[1]: the library. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    void *h = dlopen(argc > 1 ? argv[1] : "./libheap_thrower.so", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        printf("dlopen: %s\n", dlerror());
        return 1;
    }
    int (*thrower)(int) = (int (*)(int))dlsym(h, "thrower");
    printf("caught %d\n", thrower(100));
    return 0;
}
