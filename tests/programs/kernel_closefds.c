/* An application that takes pathscope's descriptors away, for tests/e2e/test_kernel_security.py:
 * N getppid() calls, then it closes every descriptor from 3 up (as daemons and some MPI codes
 * do) and opens its own log (argv[2]), which it dup2s onto every number up to 999 (as a program
 * with many open files would have them).  pathscope's collector connection is gone and its
 * number now is the application's log, which must receive nothing.  Prints "truth main=<tid>". */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

__attribute__((noinline)) static long do_getppid(long n)
{
    long s = 0;
    for (long i = 0; i < n; i++) s += getppid();
    return s;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: kernel_closefds N LOG\n");
        return 2;
    }
    long s = do_getppid(atol(argv[1]));
    fflush(stdout);
    if (syscall(SYS_close_range, 3u, ~0u, 0u) != 0)
        for (int fd = 3; fd < 65536; fd++) close(fd);
    int log = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (log != 3) return 3;
    for (int fd = 4; fd < 1000; fd++)
        if (dup2(log, fd) != fd) return 4;
    printf("truth main=%d sum=%d\n", (int)gettid(), s > 0);
    return 0;
}
