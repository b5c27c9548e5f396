/* System calls whose call sites are known, for tests/e2e/test_kernel_rest.py (what no report
 * carried, spread over the reported paths):
 *   writes N    N write()s of 100 bytes to /dev/null from write_loop
 *   getppid N   N getppid() from getppid_loop
 *   sites N     3N getppid() from site_three, then N from site_one (one after the other)
 * Prints "truth main=<tid>". */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

__attribute__((noinline)) void write_loop(int fd, long n)
{
    static const char buf[100];
    for (long i = 0; i < n; i++)
        if (write(fd, buf, sizeof buf) != (ssize_t)sizeof buf) abort();
}

__attribute__((noinline)) long getppid_loop(long n)
{
    long s = 0;
    for (long i = 0; i < n; i++) s += getppid();
    return s;
}

__attribute__((noinline)) long site_three(long n)
{
    long s = 0;
    for (long i = 0; i < 3 * n; i++) s += getppid();
    return s;
}

__attribute__((noinline)) long site_one(long n)
{
    long s = 0;
    for (long i = 0; i < n; i++) s += getppid();
    return s;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: kernel_rest writes|getppid|sites N\n");
        return 2;
    }
    long n = atol(argv[2]), s = 1;
    if (strcmp(argv[1], "writes") == 0) {
        int fd = open("/dev/null", O_WRONLY);
        write_loop(fd, n);
        close(fd);
    } else if (strcmp(argv[1], "getppid") == 0) {
        s = getppid_loop(n);
    } else {
        s = site_three(n) + site_one(n);
    }
    printf("truth main=%d ok=%d\n", (int)gettid(), s > 0);
    return 0;
}
