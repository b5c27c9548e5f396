/* Frees from a thread that glibc creates internally (a SIGEV_THREAD timer's), which
 * pathscope never registers, while the main thread allocates (tests/e2e/test_heap.py): the
 * rank's live bytes must stay consistent (live = allocated - freed). */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define Q 4096
static void *queue[Q];
static int queued;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void drain(union sigval v)
{
    (void)v;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < queued; i++) free(queue[i]);
    queued = 0;
    pthread_mutex_unlock(&lock);
}

int main(void)
{
    struct sigevent ev = {0};
    ev.sigev_notify = SIGEV_THREAD;
    ev.sigev_notify_function = drain;
    timer_t timer;
    timer_create(CLOCK_MONOTONIC, &ev, &timer);
    struct itimerspec its = {{0, 200000}, {0, 200000}};
    timer_settime(timer, 0, &its, NULL);
    long queued_total = 0; /* depends on how fast the timer thread drains: printed */
    for (long i = 0; i < 1000000; i++) {
        void *volatile p = malloc(32);
        free(p);
        if (i % 8 == 0) {
            pthread_mutex_lock(&lock);
            if (queued < Q) {
                queue[queued++] = malloc(64);
                queued_total++;
            }
            pthread_mutex_unlock(&lock);
        }
    }
    timer_delete(timer);
    usleep(10000);
    drain((union sigval){0});
    printf("allocs %ld\n", 1000000 + queued_total);
    return 0;
}
