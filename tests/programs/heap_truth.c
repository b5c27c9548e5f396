/* Heap profiling ground truth (tests/e2e/test_heap.py): allocations of known counts and
 * sizes from known functions, through every allocator function.  Prints, at the end, one
 * `truth` line per path: allocations, bytes, frees, bytes freed, bytes live at this
 * program's peak.  The peak is a single 8 MiB block, so it is the rank's peak too.
 * Argument "fork": a child allocates too (it must not count).  Exit 1 on a wrong result
 * (alignment, usable size, contents kept by realloc). */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define N_A 1000
#define S_A 100
#define N_B 50
#define BIG (8u << 20)
#define N_LEAK 7
#define S_LEAK 24

static int failures;
static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "heap_truth: %s\n", what);
        failures++;
    }
}

__attribute__((noinline)) void leak_e(void)
{
    for (int i = 0; i < N_LEAK; i++) {
        volatile char *p = malloc(S_LEAK);
        p[0] = 1;
    }
}

__attribute__((noinline)) void alloc_a(void)
{
    for (int i = 0; i < N_A; i++) {
        char *p = malloc(S_A);
        check(malloc_usable_size(p) >= S_A, "usable size below the request");
        memset(p, i, S_A);
        free(p);
    }
}

__attribute__((noinline)) void **calloc_b(void)
{
    void **kept = malloc(N_B * sizeof *kept); /* (a malloc here: counted on calloc_b;malloc) */
    for (int i = 0; i < N_B; i++) {
        kept[i] = calloc(10, 64);
        check(((char *)kept[i])[639] == 0, "calloc memory not zero");
    }
    return kept;
}

__attribute__((noinline)) size_t realloc_c(void)
{
    char *p = NULL;
    size_t total = 0;
    for (size_t n = 16; n <= 8192; n *= 2) { /* 10 reallocs */
        p = realloc(p, n);
        p[n / 2] = 7;
        check(n == 16 || p[n / 4] == 7, "realloc lost contents");
        total += n;
    }
    free(p);
    return total;
}

__attribute__((noinline)) void aligned_d(void)
{
    void *p = NULL;
    check(posix_memalign(&p, 64, 1000) == 0 && (uintptr_t)p % 64 == 0, "posix_memalign");
    free(p);
    p = aligned_alloc(128, 1024);
    check(p && (uintptr_t)p % 128 == 0, "aligned_alloc");
    free(p);
    p = memalign(256, 512);
    check(p && (uintptr_t)p % 256 == 0, "memalign");
    free(p);
    p = valloc(100);
    check(p && (uintptr_t)p % 4096 == 0, "valloc");
    free(p);
    p = pvalloc(100);
    check(p && (uintptr_t)p % 4096 == 0, "pvalloc");
    free(p);
    check(posix_memalign(&p, 3, 10) == 22, "posix_memalign accepted alignment 3");
}

__attribute__((noinline)) void big_peak(void)
{
    char *p = malloc(BIG);
    memset(p, 1, BIG);
    __asm__ __volatile__("" : : "r"(p) : "memory"); /* (GCC would drop an unused block) */
    free(p);
}

__attribute__((noinline)) void forked_child(void)
{
    for (int i = 0; i < 1000; i++) {
        char *p = malloc(S_A);
        __asm__ __volatile__("" : : "r"(p) : "memory");
        free(p);
    }
}

int main(int argc, char **argv)
{
    int do_fork = argc > 1 && strcmp(argv[1], "fork") == 0;
    leak_e();
    alloc_a();
    void **kept = calloc_b();
    size_t realloc_bytes = realloc_c();
    aligned_d();
    big_peak();
    if (do_fork) {
        pid_t pid = fork();
        if (pid == 0) {
            forked_child();
            _exit(0);
        }
        int status;
        waitpid(pid, &status, 0);
        check(WIFEXITED(status) && WEXITSTATUS(status) == 0, "forked child failed");
    }
    for (int i = 0; i < N_B; i++) free(kept[i]);
    free(kept);
    /* allocs bytes frees freed peak_live */
    printf("truth path=leak_e;malloc %d %d 0 0 %d\n", N_LEAK, N_LEAK * S_LEAK, N_LEAK * S_LEAK);
    printf("truth path=alloc_a;malloc %d %d %d %d 0\n", N_A, N_A * S_A, N_A, N_A * S_A);
    printf("truth path=calloc_b;malloc 1 %zu 1 %zu %zu\n", N_B * sizeof(void *), N_B * sizeof(void *),
           N_B * sizeof(void *));
    printf("truth path=calloc_b;calloc %d %d %d %d %d\n", N_B, N_B * 640, N_B, N_B * 640, N_B * 640);
    printf("truth path=realloc_c;realloc 10 %zu 10 %zu 0\n", realloc_bytes, realloc_bytes);
    printf("truth path=aligned_d;posix_memalign 1 1000 1 1000 0\n");
    printf("truth path=aligned_d;aligned_alloc 1 1024 1 1024 0\n");
    printf("truth path=aligned_d;memalign 1 512 1 512 0\n");
    printf("truth path=aligned_d;valloc 1 100 1 100 0\n");
    printf("truth path=aligned_d;pvalloc 1 4096 1 4096 0\n");
    printf("truth path=big_peak;malloc 1 %u 1 %u %u\n", BIG, BIG, BIG);
    printf("truth peak=%zu\n", (size_t)BIG + N_LEAK * S_LEAK + N_B * 640 + N_B * sizeof(void *));
    return failures ? 1 : 0;
}
