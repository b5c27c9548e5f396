/* Many short-lived threads (tests/e2e/test_kernel.py): T threads, 8 at a time, each making K
 * getppid() calls and then sleeping 1 ms, over more than a second, so that the collector
 * moves exited threads out of its maps while the program runs.  Prints "truth threads=T
 * calls=K". */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static long calls;

static void *worker(void *arg)
{
    (void)arg;
    for (long i = 0; i < calls; i++) getppid();
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 800;
    calls = argc > 2 ? atol(argv[2]) : 100;
    for (int done = 0; done < threads; done += 8) {
        pthread_t t[8];
        int n = threads - done < 8 ? threads - done : 8;
        for (int i = 0; i < n; i++) pthread_create(&t[i], NULL, worker, NULL);
        for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
        struct timespec pause = {0, 10000000};
        nanosleep(&pause, NULL);
    }
    printf("truth threads=%d calls=%ld\n", threads, calls);
    return 0;
}
