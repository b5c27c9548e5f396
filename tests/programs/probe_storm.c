/* Threads calling one function while probes on it are added and removed many times.
 *
 *   probe_storm [THREADS [SHORT]]                  (defaults 8, 0)
 *
 * Each thread calls stormed(i) (noinline; SHORT 1: stormed_short(i)) in a loop, counts its own calls and checks every
 * result (stormed is a pure function of i), until main reads a line other than "trap" (or end
 * of input) from stdin.  On a line "trap", main installs a SIGTRAP handler of its own with
 * sigaction (as a debugger's helper or a language runtime may, any time), checks that
 * sigaction answers with it, raises SIGTRAP and executes an int3, and prints
 *   probe_storm trap handled=H view=V              H: its handler's calls (2 expected), V: 1
 *                                                  if sigaction showed its handler
 * (its handler steps over the int3 itself: the next instruction is the one after it).  At the
 * end, "probe_storm traps=N" gives the handler's calls over the whole run: a probe's own trap
 * reaching it would count too.  It prints, flushed:
 *   probe_storm pid=PID threads=T                  at the start, once every thread runs
 *   probe_storm thread=K calls=N wrong=W           one line per thread at the end
 *   probe_storm calls=N wrong=W                    the totals
 * and exits 1 if a result was wrong.  stormed's first instruction is 5 bytes long (a probe
 * displaces one instruction), stormed_short's 4 bytes (a probe displaces two: adding it
 * makes the patcher check that no thread is between them).  The binary knows nothing about pathscope. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_THREADS 64

struct worker {
    pthread_t thread;
    long calls, wrong;
};

static atomic_int running, stop, traps;

static void on_trap(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)si;
    (void)uc;
    atomic_fetch_add(&traps, 1);
}

/* Installs on_trap, checks the view, raises SIGTRAP and runs an int3: prints the result. */
static void trap_check(void)
{
    struct sigaction sa, seen;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_trap;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    int before = atomic_load(&traps);
    if (sigaction(SIGTRAP, &sa, NULL) != 0 || sigaction(SIGTRAP, NULL, &seen) != 0) {
        perror("probe_storm: sigaction");
        exit(2);
    }
    raise(SIGTRAP);
    __asm__ volatile("int3");
    printf("probe_storm trap handled=%d view=%d\n", atomic_load(&traps) - before,
           seen.sa_sigaction == on_trap && (seen.sa_flags & SA_SIGINFO));
    fflush(stdout);
}
static int use_short;

__attribute__((noinline, noclone)) long stormed(long x)
{
    long y = x * 2654435761L;
    return (y ^ (y >> 13)) + x;
}

__attribute__((noinline, noclone)) long stormed_short(long x)
{
    long y = x * 3;
    return (y ^ (y >> 13)) + x;
}

static long expected(long x)
{
    long y = x * 2654435761L;
    return (y ^ (y >> 13)) + x;
}

static long expected_short(long x)
{
    long y = x * 3;
    return (y ^ (y >> 13)) + x;
}

static void *work(void *arg)
{
    struct worker *w = arg;
    atomic_fetch_add(&running, 1);
    for (long i = 0; !atomic_load_explicit(&stop, memory_order_relaxed); i++) {
        /* the compiler may not fold the call: stormed is noinline and its result is checked
           against a separate copy of the formula */
        if ((use_short ? stormed_short(i) != expected_short(i) : stormed(i) != expected(i)))
            w->wrong++;
        w->calls++;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 8;
    use_short = argc > 2 && atoi(argv[2]) != 0;
    if (n < 1 || n > MAX_THREADS) {
        fprintf(stderr, "usage: probe_storm [THREADS [SHORT]] (1 to %d threads)\n", MAX_THREADS);
        return 2;
    }
    static struct worker workers[MAX_THREADS];
    for (int i = 0; i < n; i++)
        if (pthread_create(&workers[i].thread, NULL, work, &workers[i]) != 0) {
            fprintf(stderr, "probe_storm: pthread_create failed\n");
            return 2;
        }
    while (atomic_load(&running) < n)
        usleep(1000);
    printf("probe_storm pid=%d threads=%d\n", (int)getpid(), n);
    fflush(stdout);
    char line[64];
    while (fgets(line, sizeof line, stdin) && strcmp(line, "trap\n") == 0) trap_check();
    atomic_store(&stop, 1);
    long calls = 0, wrong = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(workers[i].thread, NULL);
        printf("probe_storm thread=%d calls=%ld wrong=%ld\n", i, workers[i].calls,
               workers[i].wrong);
        calls += workers[i].calls;
        wrong += workers[i].wrong;
    }
    printf("probe_storm calls=%ld wrong=%ld\n", calls, wrong);
    printf("probe_storm traps=%d\n", atomic_load(&traps));
    return wrong != 0;
}
