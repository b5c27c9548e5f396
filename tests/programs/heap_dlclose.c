/* One thread loads and unloads a library (dlopen, dlclose) again and again while the main
 * thread allocates (tests/e2e/test_heap_exit.py, under --heap).  Every dlclose makes
 * pathscope's unwinder rebuild its module table at the next walk, from /proc/self/maps and
 * the ELF headers of the modules listed there; the library may be unmapped between the two
 * (issue 10: the --heap exit crash, where the MPI library unloads its components in
 * MPI_Finalize while its progress thread allocates).
 *   heap_dlclose LIBRARY CYCLES
 * Output: "heap_dlclose: CYCLES cycles, sum S" (S = sum over cycles of the library's answer). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

static const char *library;
static int cycles;
static atomic_int done;
static long sum;

static void *loader(void *arg)
{
    (void)arg;
    for (int i = 0; i < cycles; i++) {
        void *h = dlopen(library, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            fprintf(stderr, "heap_dlclose: %s\n", dlerror());
            exit(1);
        }
        int (*f)(int) = (int (*)(int))dlsym(h, "dlclose_victim");
        sum += f(i);
        dlclose(h);
    }
    atomic_store(&done, 1);
    return NULL;
}

__attribute__((noinline)) static void churn(void)
{
    void *volatile p = malloc(64);
    free(p);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: heap_dlclose LIBRARY CYCLES\n");
        return 2;
    }
    library = argv[1];
    cycles = atoi(argv[2]);
    pthread_t t;
    pthread_create(&t, NULL, loader, NULL);
    while (!atomic_load(&done)) churn();
    pthread_join(t, NULL);
    printf("heap_dlclose: %d cycles, sum %ld\n", cycles, sum);
    return 0;
}
