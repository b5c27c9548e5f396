/* An application that installs its own handler for the signal pathscope's kernel time uses
 * (SIGRTMAX-2), after pathscope started (tests/e2e/test_kernel.py): the collector must stop
 * signalling it, or the application's handler would get reports it does not understand.
 * Prints "truth main=<tid> foreign=<signals the application's handler got>". */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile long received;

static void mine(int sig, siginfo_t *info, void *context)
{
    (void)sig;
    (void)info;
    (void)context;
    received++;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = mine;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigaction(SIGRTMAX - 2, &sa, NULL);
    for (long i = 0; i < n; i++) getppid();
    printf("truth main=%d foreign=%ld\n", (int)gettid(), received);
    fflush(stdout);
    return 0;
}
