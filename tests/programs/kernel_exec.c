/* The process keeps its pid across exec (tests/e2e/test_kernel.py): after some system calls
 * under pathscope it replaces itself with argv[1..] (run without pathscope: LD_PRELOAD
 * removed), which then makes many system calls without pathscope's signal handler.  The
 * collector must never signal it: it would die of the signal. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    for (int i = 0; i < 1000; i++) getppid();
    if (argc < 2) return 1;
    unsetenv("LD_PRELOAD");
    execvp(argv[1], argv + 1);
    perror("execvp");
    return 1;
}
