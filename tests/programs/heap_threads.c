/* Heap profiling with threads (tests/e2e/test_heap.py): a worker thread allocates N_W blocks
 * that the main thread frees after joining it (frees are charged to the allocating path, on
 * the worker's tree); two threads allocate and free concurrently; a thread ends with
 * pthread_exit while holding a leaked block. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define N_W 100
#define S_W 48
#define N_C 20000

static void *blocks[N_W];

__attribute__((noinline)) void worker_alloc(void)
{
    for (int i = 0; i < N_W; i++) blocks[i] = malloc(S_W);
}

static void *worker(void *arg)
{
    worker_alloc();
    return arg;
}

__attribute__((noinline)) void churn(void)
{
    for (int i = 0; i < N_C; i++) {
        void *volatile p = malloc(32);
        free(p);
    }
}

static void *churner(void *arg)
{
    churn();
    return arg;
}

__attribute__((noinline)) void exit_leaking(void)
{
    void *volatile p = malloc(1000);
    (void)p;
    pthread_exit(NULL);
}

static void *exiter(void *arg)
{
    exit_leaking();
    return arg;
}

int main(void)
{
    pthread_t t[4];
    pthread_create(&t[0], NULL, worker, NULL);
    pthread_join(t[0], NULL);
    for (int i = 0; i < N_W; i++) free(blocks[i]);
    pthread_create(&t[1], NULL, churner, NULL);
    pthread_create(&t[2], NULL, churner, NULL);
    pthread_create(&t[3], NULL, exiter, NULL);
    for (int i = 1; i < 4; i++) pthread_join(t[i], NULL);
    printf("truth path=worker;worker_alloc;malloc %d %d %d %d\n", N_W, N_W * S_W, N_W, N_W * S_W);
    printf("truth path=churner;churn;malloc %d %d %d %d\n", 2 * N_C, 2 * N_C * 32, 2 * N_C, 2 * N_C * 32);
    printf("truth path=exiter;exit_leaking;malloc 1 1000 0 0\n");
    return 0;
}
