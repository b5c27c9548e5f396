/* Built with -O2 -D_FORTIFY_SOURCE=2 (CMakeLists.txt), as several distributions compile by
 * default: read() into a buffer of known size becomes __read_chk, open() with flags the
 * compiler cannot see __open_2 (tests/e2e/test_kernel.py: the libc source counts them under
 * read and open).  One open of /dev/zero, N reads. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000;
    volatile int flags = O_RDONLY; /* not a constant: open() goes through __open_2 */
    int fd = open("/dev/zero", flags);
    if (fd < 0) return 1;
    char buf[64];
    for (long i = 0; i < n; i++)
        if (read(fd, buf, (size_t)(argc > 2 ? atoi(argv[2]) : 64)) < 0) return 1;
    close(fd);
    printf("truth main=%d\n", (int)gettid());
    return 0;
}
