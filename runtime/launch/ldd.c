/* The MPI library a program links, from `ldd PROGRAM` (launch.py, run_ldd and mpi_from_ldd):
 * asked only when the environment does not say which launcher started the rank (e.g. srun).
 * ldd is started with an argument vector (no shell), stdin and stderr on /dev/null; its output
 * is read up to LDD_OUTPUT_MAX and for at most LDD_TIMEOUT_S (then it is killed and counts as
 * no answer, as Python's timeout does).  A longer output is handed to Python. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "run.h"

#define LDD_OUTPUT_MAX (1 << 20)
#define LDD_TIMEOUT_S 20

extern char **environ;

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ldd's output in buf (NUL-terminated), its length, or -1: it failed, timed out or is not
 * there. */
static long ldd_output(const char *executable, char *buf, size_t size)
{
    int out[2];
    if (pipe2(out, O_CLOEXEC) != 0) return -1;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    char *argv[] = {"ldd", (char *)executable, NULL};
    pid_t pid;
    int failed = posix_spawnp(&pid, "ldd", &actions, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    close(out[1]);
    if (failed) {
        close(out[0]);
        return -1;
    }
    size_t used = 0;
    long long deadline = now_ms() + LDD_TIMEOUT_S * 1000LL;
    int timed_out = 0;
    for (;;) {
        struct pollfd p = {out[0], POLLIN, 0};
        long long left = deadline - now_ms();
        int ready = left > 0 ? poll(&p, 1, (int)left) : 0;
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0) {
            timed_out = 1;
            break;
        }
        if (used + 1 >= size) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            close(out[0]);
            run_hand_over("ldd's output is too long");
        }
        ssize_t got = read(out[0], buf + used, size - 1 - used);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) break;
        used += (size_t)got;
    }
    close(out[0]);
    if (timed_out) kill(pid, SIGKILL);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    buf[used] = 0;
    return !timed_out && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? (long)used : -1;
}

const char *run_mpi_from_ldd(const char *executable)
{
    /* launch.py's _LDD_SIGNATURES, in its order */
    static const char *const signatures[][2] = {
        {"libmpi.so.40", "openmpi"}, {"libmpich.so", "mpich"}, {"libmpi.so.12", "mpich"}};
    char *buf = malloc(LDD_OUTPUT_MAX);
    if (!buf) run_hand_over("out of memory");
    long n = ldd_output(executable, buf, LDD_OUTPUT_MAX);
    const char *mpi = NULL;
    for (size_t i = 0; n > 0 && !mpi && i < sizeof signatures / sizeof signatures[0]; i++)
        if (memmem(buf, (size_t)n, signatures[i][0], strlen(signatures[i][0])))
            mpi = signatures[i][1];
    free(buf);
    return mpi;
}
