/* Time spent in a signal handler, interrupting a known path.
 *
 *   paths_signal [N [SPIN_MS]]                     (defaults 50, 20)
 *
 * main calls work(N), which raises SIGUSR1 N times; each delivery (on the thread's own stack,
 * when raise's kill returns) runs on_usr1, which spins SPIN_MS ms of wall time.  Samples in
 * the handler must walk through the kernel's signal frame back to main;work;raise.  It prints
 * paths_signal n=N handler_ns=T   (T: the handlers' total, measured by the handler). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long spin_ms = 20;
static long handler_ns;
static volatile long sink;

static long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

__attribute__((noinline, noclone)) void on_usr1(int sig)
{
    (void)sig;
    long start = now_ns(), end = start + spin_ms * 1000000L, t;
    while ((t = now_ns()) < end) sink++;
    handler_ns += t - start;
}

__attribute__((noinline, noclone)) void work(int n)
{
    for (int i = 0; i < n; i++) raise(SIGUSR1);
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 50;
    spin_ms = argc > 2 ? atol(argv[2]) : 20;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    work(n);
    printf("paths_signal n=%d handler_ns=%ld\n", n, handler_ns);
    return 0;
}
