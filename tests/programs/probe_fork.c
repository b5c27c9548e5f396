/* A probed function in a process that forks (tests/e2e/test_probe.py): work() is called 3
 * times, then the process forks; the child calls it 5 times and exits 0, the parent waits,
 * then calls it 2 more times.  The parent's profile has 5 calls; the child writes nothing
 * and must not crash.  Prints `probe_fork parent=5 child_status=0`. */
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile double sink;

__attribute__((noinline, noclone)) void work(int n)
{
    double s = 0;
    for (int i = 1; i <= n; i++) s += 1.0 / i;
    sink = s;
}

int main(void)
{
    for (int i = 0; i < 3; i++) work(100000);
    pid_t pid = fork();
    if (pid == 0) {
        for (int i = 0; i < 5; i++) work(100000);
        _exit(0);
    }
    int status = -1;
    waitpid(pid, &status, 0);
    for (int i = 0; i < 2; i++) work(100000);
    printf("probe_fork parent=5 child_status=%d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return 0;
}
