/* An MPI program that treats file descriptors and SIGPROF as its own (tests/e2e/test_app_fds.py).
 *
 *   app_fds close LOGDIR    after MPI_Init and after starting a thread, closes every descriptor
 *                           from 3 to 1023 that is not the MPI library's, opens its log (which
 *                           gets a low number), computes, calls MPI_Finalize, then writes to the
 *                           log again
 *   app_fds dup2 LOGDIR     the same, but instead of closing, dup2()s its log over every
 *                           descriptor from 3 to 63 that is not the MPI library's, open or not
 *   app_fds sigprof         installs its own SIGPROF handler and an ITIMER_PROF timer for a
 *                           while, then puts the previous handler back
 *
 * "The MPI library's" descriptors are those MPI_Init and the launcher use for the job to work:
 * sockets, pipes, eventfds, epoll instances and /dev/shm segments (closing those makes MPI hang
 * or fail, with or without a profiler).  Everything else goes: regular files, /dev/null, and
 * whatever a profiler might keep (perf events, directories).
 *
 * stdout (one line per rank, the same with and without pathscope): the lowest free descriptor
 * in main, after MPI_Init and after the thread started, and the descriptors the log got.
 * stderr: what the application measured that depends on timing.  Exit status: the number of
 * writes to the log that failed after MPI_Finalize (0: all worked), or 10 + what went wrong.
 * Work is spread over named functions, so that the profile shows where samples fell:
 * main_after_fds and worker_after_fds run after the descriptors were closed or replaced;
 * while_taken while the application owns SIGPROF, after_restoring after it gave it back.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define WORK 60000000L /* additions per compute phase: about 0.1 to 0.2 s */

static int lowest_free(void)
{
    int fd = open("/dev/null", O_RDONLY);
    if (fd >= 0) close(fd);
    return fd;
}

__attribute__((noinline)) static double compute(long n)
{
    volatile double x = 0;
    for (long i = 0; i < n; i++) x += (double)i * 1e-9;
    return x;
}
__attribute__((noinline)) double main_after_fds(void) { return compute(WORK); }
__attribute__((noinline)) double worker_after_fds(void) { return compute(WORK); }
__attribute__((noinline)) double before_taking(void) { return compute(WORK); }
__attribute__((noinline)) double while_taken(void) { return compute(2 * WORK); }
__attribute__((noinline)) double after_restoring(void) { return compute(WORK); }

static int mpi_owned(int fd)
{
    char path[64], target[256];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(path, target, sizeof target - 1);
    if (n <= 0) return 0;
    target[n] = 0;
    static const char *kept[] = {"socket:", "pipe:", "anon_inode:[eventfd]", "anon_inode:[eventpoll]",
                                 "/dev/shm/", NULL};
    for (int i = 0; kept[i]; i++)
        if (strncmp(target, kept[i], strlen(kept[i])) == 0) return 1;
    return 0;
}

/* ---- the worker: waits (no CPU) until the descriptors are gone, then computes ------------ */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static int fds_done, worker_registered;

static void *worker(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&lock);
    worker_registered = 1;
    pthread_cond_broadcast(&changed);
    while (!fds_done) pthread_cond_wait(&changed, &lock);
    pthread_mutex_unlock(&lock);
    worker_after_fds();
    return NULL;
}

static int run_fds(int rank, const char *mode, const char *logdir, int low_main, int low_init)
{
    pthread_t thread;
    if (pthread_create(&thread, NULL, worker, NULL)) return 11;
    pthread_mutex_lock(&lock);
    while (!worker_registered) pthread_cond_wait(&changed, &lock);
    pthread_mutex_unlock(&lock);
    int low_thread = lowest_free();

    int dup2_mode = strcmp(mode, "dup2") == 0;
    if (!dup2_mode)
        for (int fd = 3; fd < 1024; fd++)
            if (!mpi_owned(fd)) close(fd);
    char path[4096];
    snprintf(path, sizeof path, "%s/log-%d.txt", logdir, rank);
    int log = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
    if (log < 0) return 12;
    int fds[64], nfds = 0;
    fds[nfds++] = log;
    if (dup2_mode)
        for (int fd = 3; fd < 64; fd++)
            if (fd != log && !mpi_owned(fd) && dup2(log, fd) == fd) fds[nfds++] = fd;
    char line[128];
    int len = snprintf(line, sizeof line, "before MPI_Finalize on %d\n", log);
    if (write(log, line, (size_t)len) != len) return 13;

    pthread_mutex_lock(&lock);
    fds_done = 1;
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
    main_after_fds();
    pthread_join(thread, NULL);

    char copies[512] = "-";
    for (int i = 1, at = 0; i < nfds; i++) { /* ranges: 18-40,42 */
        int j = i;
        while (j + 1 < nfds && fds[j + 1] == fds[j] + 1) j++;
        const char *comma = i > 1 ? "," : "";
        if (j > i) at += snprintf(copies + at, sizeof copies - (size_t)at, "%s%d-%d", comma, fds[i], fds[j]);
        else at += snprintf(copies + at, sizeof copies - (size_t)at, "%s%d", comma, fds[i]);
        i = j;
    }
    printf("rank %d lowest free: main %d, after MPI_Init %d, after the thread started %d; log on %d, "
           "copies on %s\n", rank, low_main, low_init, low_thread, log, copies);
    fflush(stdout);
    MPI_Finalize();
    int failed = 0;
    for (int i = 0; i < nfds; i++) {
        len = snprintf(line, sizeof line, "after MPI_Finalize on %d\n", fds[i]);
        if (write(fds[i], line, (size_t)len) != len) {
            fprintf(stderr, "rank %d: write to %d after MPI_Finalize: %s\n", rank, fds[i], strerror(errno));
            failed++;
        }
    }
    return failed;
}

/* ---- SIGPROF ---------------------------------------------------------------------------- */
static volatile sig_atomic_t prof_signals;
static void on_prof(int sig) { (void)sig; prof_signals++; }

static double process_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int run_sigprof(int rank, int low_main, int low_init)
{
    before_taking();
    struct sigaction mine, previous;
    memset(&mine, 0, sizeof mine);
    mine.sa_handler = on_prof;
    sigemptyset(&mine.sa_mask);
    if (sigaction(SIGPROF, &mine, &previous)) return 14;
    struct itimerval every_20ms = {{0, 20000}, {0, 20000}}, off = {{0, 0}, {0, 0}};
    double cpu0 = process_cpu();
    setitimer(ITIMER_PROF, &every_20ms, NULL);
    while_taken();
    setitimer(ITIMER_PROF, &off, NULL);
    double cpu = process_cpu() - cpu0;
    if (sigaction(SIGPROF, &previous, NULL)) return 15;
    after_restoring();
    printf("rank %d lowest free: main %d, after MPI_Init %d\n", rank, low_main, low_init);
    fflush(stdout);
    /* the timer's own signals only: one per 20 ms of the process's CPU time */
    fprintf(stderr, "rank %d: SIGPROF handler called %d times in %.0f ms of CPU time\n", rank,
            (int)prof_signals, cpu * 1000);
    MPI_Finalize();
    return prof_signals > 0 ? 0 : 16;
}

int main(int argc, char **argv)
{
    int low_main = lowest_free();
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int low_init = lowest_free();
    if (argc >= 3 && (strcmp(argv[1], "close") == 0 || strcmp(argv[1], "dup2") == 0))
        return run_fds(rank, argv[1], argv[2], low_main, low_init);
    if (argc >= 2 && strcmp(argv[1], "sigprof") == 0) return run_sigprof(rank, low_main, low_init);
    fprintf(stderr, "usage: app_fds close|dup2 LOGDIR | app_fds sigprof\n");
    MPI_Finalize();
    return 10;
}
