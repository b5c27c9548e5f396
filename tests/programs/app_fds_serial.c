/* A program without MPI that closes every descriptor from 3 up while a thread of it runs, then
 * opens files of its own and uses them after the thread ended (tests/e2e/test_app_fds.py).
 *
 *   app_fds_serial DIR
 *
 * pathscope once kept a perf-event descriptor per thread and closed it when the thread ended:
 * by then the number was the application's data file.  stdout: the lowest free descriptor at
 * the start and while the thread runs, the descriptors the files got, then the descriptors a
 * child started with exec (empty environment: no profiler in it) inherited -- all the same with
 * and without pathscope.  Exit status: the writes that failed (0: none), or 10 + what went
 * wrong.  worker_after_close computes after the close: its samples show sampling went on. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

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
__attribute__((noinline)) double worker_after_close(void) { return compute(60000000L); }

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static int started, closed;

static void *worker(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&lock);
    started = 1;
    pthread_cond_broadcast(&changed);
    while (!closed) pthread_cond_wait(&changed, &lock);
    pthread_mutex_unlock(&lock);
    worker_after_close();
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 2) return 10;
    int low_start = lowest_free();
    pthread_t thread;
    if (pthread_create(&thread, NULL, worker, NULL)) return 11;
    pthread_mutex_lock(&lock);
    while (!started) pthread_cond_wait(&changed, &lock);
    pthread_mutex_unlock(&lock);
    int low_thread = lowest_free();
    for (int fd = 3; fd < 1024; fd++) close(fd);
    char path[4096];
    int fds[4];
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/file-%d.txt", argv[1], i);
        fds[i] = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fds[i] < 0) return 12;
    }
    pthread_mutex_lock(&lock);
    closed = 1;
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
    pthread_join(thread, NULL);
    printf("lowest free: start %d, while the thread runs %d; files on %d %d %d %d\n", low_start,
           low_thread, fds[0], fds[1], fds[2], fds[3]);
    fflush(stdout);
    int failed = 0;
    for (int i = 0; i < 4; i++) {
        char line[64];
        int len = snprintf(line, sizeof line, "file %d on %d\n", i, fds[i]);
        if (write(fds[i], line, (size_t)len) != len) {
            fprintf(stderr, "write to %d after the thread ended: %s\n", fds[i], strerror(errno));
            failed++;
        }
        close(fds[i]);
    }
    /* what an exec'd child inherits: ls opens one directory of its own, the same every time */
    pid_t child = fork();
    if (child == 0) {
        char *args[] = {"ls", "/proc/self/fd", NULL}, *env[] = {NULL};
        execve("/bin/ls", args, env);
        _exit(127);
    }
    int status = 0;
    if (child < 0 || waitpid(child, &status, 0) != child || status != 0) return 13;
    return failed;
}
