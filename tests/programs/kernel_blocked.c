/* A thread that blocks pathscope's kernel-time signal (SIGRTMAX-2) while it makes N getppid()
 * calls (tests/e2e/test_kernel.py): the collector must not queue signals for it.  Prints
 * "truth main=<tid> pending=<0|1>" (pending: the signal is pending after the calls). */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000;
    sigset_t block, pending;
    sigemptyset(&block);
    sigaddset(&block, SIGRTMAX - 2);
    pthread_sigmask(SIG_BLOCK, &block, NULL);
    for (long i = 0; i < n; i++) getppid();
    sigpending(&pending);
    printf("truth main=%d pending=%d\n", (int)gettid(), sigismember(&pending, SIGRTMAX - 2));
    fflush(stdout);
    return 0;
}
