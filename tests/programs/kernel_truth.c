/* Known system calls for tests/e2e/test_kernel.py: N write() of 64 bytes to /dev/null from
 * do_writes, N getppid() from do_getppid, and a thread that sleeps 100 ms in nanosleep
 * (sleeper).  Prints the tids and the sleep's wall time as the sleeper saw it around the call
 * (CLOCK_MONOTONIC): "truth main=<tid> sleeper=<tid> sum=1 sleep_ns=<ns>". */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static pid_t sleeper_tid;
static long long sleep_ns;

__attribute__((noinline)) void do_writes(int fd, long n)
{
    static const char buf[64];
    for (long i = 0; i < n; i++)
        if (write(fd, buf, sizeof buf) != (ssize_t)sizeof buf) abort();
}

__attribute__((noinline)) long do_getppid(long n)
{
    long s = 0;
    for (long i = 0; i < n; i++) s += getppid();
    return s;
}

__attribute__((noinline)) static void *sleeper(void *arg)
{
    (void)arg;
    sleeper_tid = gettid();
    struct timespec t = {0, 100000000}, t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    nanosleep(&t, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    sleep_ns = (t1.tv_sec - t0.tv_sec) * 1000000000ll + (t1.tv_nsec - t0.tv_nsec);
    return NULL;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000;
    pthread_t th;
    pthread_create(&th, NULL, sleeper, NULL);
    int fd = open("/dev/null", O_WRONLY);
    do_writes(fd, n);
    long s = do_getppid(n);
    close(fd);
    pthread_join(th, NULL);
    printf("truth main=%d sleeper=%d sum=%d sleep_ns=%lld\n", (int)gettid(), (int)sleeper_tid,
           s > 0, sleep_ns);
    return 0;
}
