/* A serial program whose phases the test drives (tests/e2e/test_live.py): it reads one
 * command per line on stdin and answers "ok" on stdout when the phase is done.
 *   busy MS      compute for MS ms in live_hot_loop
 *   nap N        N calls of usleep(1000)
 *   fork         a child that lives 300 ms and exits (the parent waits for it)
 *   execfail     an exec that fails (a missing program)
 *   exec         exec /bin/sleep 5 without pathscope in its environment
 *   execraw      exec itself through the raw system call (libc's execve, and pathscope's
 *                cleanup before it, bypassed): the new program starts again with "ready"
 *   abort        abort()
 *   exit         exit(0)
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

__attribute__((noinline)) static double live_hot_loop(double ms)
{
    volatile double x = 0;
    double end = now_ms() + ms;
    while (now_ms() < end)
        for (int i = 0; i < 10000; i++) x += i * 0.5;
    return x;
}

static void run_child(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        usleep(300000);
        exit(0);
    }
    waitpid(pid, NULL, 0);
}

int main(void)
{
    char line[256];
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("ready %d\n", (int)getpid());
    while (fgets(line, sizeof line, stdin)) {
        if (strncmp(line, "busy ", 5) == 0) {
            live_hot_loop(atof(line + 5));
        } else if (strncmp(line, "nap ", 4) == 0) {
            for (int i = atoi(line + 4); i > 0; i--) usleep(1000);
        } else if (strcmp(line, "fork\n") == 0) {
            run_child();
        } else if (strcmp(line, "execfail\n") == 0) {
            char *argv[] = {"missing", NULL};
            execv("/nonexistent/live-phases-missing", argv);
        } else if (strcmp(line, "exec\n") == 0) {
            char *argv[] = {"sleep", "5", NULL}, *envp[] = {"PATH=/usr/bin:/bin", NULL};
            execve("/bin/sleep", argv, envp);
            return 3;
        } else if (strcmp(line, "execraw\n") == 0) {
            char *argv[] = {"live_phases", NULL};
            extern char **environ;
            syscall(SYS_execve, "/proc/self/exe", argv, environ);
            return 3;
        } else if (strcmp(line, "abort\n") == 0) {
            abort();
        } else if (strcmp(line, "exit\n") == 0) {
            exit(0);
        }
        printf("ok\n");
    }
    return 0;
}
