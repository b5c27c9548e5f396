// bench: N getppid() in a timed loop, ns per call printed (start-up not counted).
//   bench [N] [threads] [mode]; mode: getppid (default) | write | sleep | mixed
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <pthread.h>
#include <fcntl.h>
static long N = 2000000; static const char *mode = "getppid";
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e9 + t.tv_nsec; }
__attribute__((noinline)) void do_getppid_loop(long n) { for (long i = 0; i < n; i++) getppid(); }
__attribute__((noinline)) void do_write_loop(long n) { int fd = open("/dev/null", O_WRONLY); char b[64] = {0};
    for (long i = 0; i < n; i++) write(fd, b, sizeof b); close(fd); }
static void *run(void *a) {
    double t0 = now();
    if (!strcmp(mode, "write")) do_write_loop(N);
    else if (!strcmp(mode, "sleep")) { struct timespec ts = {0, 100000000}; nanosleep(&ts, 0); }
    else do_getppid_loop(N);
    double t1 = now();
    if (strcmp(mode, "sleep")) printf("%.1f ns/call (%ld calls, %s)\n", (t1 - t0) / N, N, mode);
    return a; }
int main(int argc, char **argv) {
    if (argc > 1) N = atol(argv[1]);
    int T = argc > 2 ? atoi(argv[2]) : 1; if (argc > 3) mode = argv[3];
    if (T <= 1) { run(0); return 0; }
    pthread_t th[64]; for (int i = 0; i < T; i++) pthread_create(&th[i], 0, run, 0);
    for (int i = 0; i < T; i++) pthread_join(th[i], 0); return 0; }
