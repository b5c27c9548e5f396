/* The cost of timer-driven sampling on this machine, per mechanism, without pathscope
 * (docs/benchmarks.md, section H; driver: bench/sample_cost.py).
 *
 *   sample_cost loop  MECHANISM HZ [ITERATIONS]        cost per sample
 *   sample_cost gaps  MECHANISM HZ [SECONDS]           time a sample takes from the thread
 *   sample_cost yield MECHANISM HZ [ROUNDS] [CPU]      cost per context switch, sched_yield
 *   sample_cost pipe  MECHANISM HZ [ROUNDS] [CPU]      cost per context switch, pipe ping-pong
 *
 * MECHANISM is how SIGPROF is made to arrive HZ times per second:
 *   none             no timer (the baseline)
 *   perf-task-clock  a perf_event task-clock software event on the thread, delivering SIGPROF
 *                    to the thread (F_SETOWN_EX); kept alive by a one-page mapping and its
 *                    descriptor closed, as pathscope's perf sampler does
 *   perf-cpu-clock   the same with the cpu-clock software event on the thread
 *   posix-cpu        timer_create on the thread's CPU-time clock, SIGEV_THREAD_ID (the kernel
 *                    checks CPU-time timers at its tick: the rate is capped at the tick rate)
 *   posix-wall       timer_create on CLOCK_MONOTONIC, SIGEV_THREAD_ID
 *   itimer-prof      setitimer(ITIMER_PROF): process-wide CPU time, also checked at the tick
 *   external         arms nothing: someone else sends SIGPROF (bench/sample_cost.py runs a
 *                    bpftrace profile:hz probe, a per-CPU cpu-clock event, that signals us).
 *                    The process renames itself (comm) to sample_cost_sig once its handler
 *                    is installed: filter on that name, since SIGPROF kills it before then
 *
 * loop:  a fixed loop of ITERATIONS additions (default 4e8).  (cpu time - cpu time of `none`)
 *        / signals is what one sample costs: the interrupt, the signal delivery, an empty
 *        handler and the return.
 * gaps:  reads CLOCK_MONOTONIC in a loop for SECONDS (default 2) of wall time; a gap of more
 *        than GAP_THRESHOLD_NS between two reads is time the thread did not run: an interrupt,
 *        a signal, a preemption.  Gaps with a context switch (getrusage) are left out (another
 *        task ran); gaps during which a signal was handled and the others are counted apart,
 *        each with its median: the median gap with a signal is what one sample takes from
 *        the thread, measured directly (the loop mode cannot resolve mechanisms that fire
 *        only at the kernel's tick: too few samples); the median gap without one is mostly
 *        the tick, which every thread pays anyway.
 * yield, pipe: a second process is forked and both are pinned to CPU (default 1); both arm the
 *        sampler, then each calls sched_yield ROUNDS times (yield: both stay runnable, as Open
 *        MPI's ranks do when oversubscribed) or they pass one byte back and forth ROUNDS times
 *        through two pipes (pipe: each blocks in read until the other writes).  (cpu time -
 *        cpu time of `none`) / switches, after taking out signals x the cost per sample, is
 *        what the sampler adds to one context switch.
 *
 * Prints one line of key=value pairs: seconds (wall), cpu_seconds (CPU time of the process,
 * or of both processes), signals (handled), switches (voluntary + involuntary context switches
 * during the measured part, both processes); gaps also prints gaps_signal, gap_signal_us,
 * gaps_other, gap_other_us (the number and the median of each kind of gap) and
 * gaps_preempted.  CPU time is the steadier measure on a shared
 * machine: time a neighbour takes from the CPU is not in it.
 *
 * Build: gcc -O1 -o sample_cost bench/sample_cost.c
 *
 * Everything reachable from the signal handler is async-signal-safe: it increments a counter. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define EXTERNAL_COMM "sample_cost_sig" /* (15 characters: the most a comm holds) */

static volatile sig_atomic_t signals_handled;

static void on_sigprof(int signo, siginfo_t *info, void *context)
{
    (void)signo;
    (void)info;
    (void)context;
    signals_handled++;
}

/* What one process measured over its timed part. */
struct measurement {
    double cpu_seconds;
    long switches;
    long signals;
};

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static double clock_seconds(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static long context_switches(void)
{
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    return usage.ru_nvcsw + usage.ru_nivcsw;
}

static pid_t current_tid(void) { return (pid_t)syscall(SYS_gettid); }

/* Installs the handler, then renames the process (comm) to EXTERNAL_COMM: an external sender
 * filters on that name, so no signal reaches the process before it can take one. */
static void install_handler(void)
{
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = on_sigprof;
    action.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&action.sa_mask);
    if (sigaction(SIGPROF, &action, NULL) != 0) die("sigaction");
    if (prctl(PR_SET_NAME, EXTERNAL_COMM) != 0) die("prctl");
}

/* A perf software event (task-clock or cpu-clock) on the calling thread that sends it SIGPROF
 * every period, set up as pathscope's perf sampler: user time only, the descriptor closed
 * once a one-page mapping keeps the event alive. */
static void arm_perf_event(unsigned long long config, int hz)
{
    struct perf_event_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = config;
    attr.sample_period = 1000000000ull / (unsigned long long)hz;
    attr.disabled = 1;
    attr.wakeup_events = 1;
    attr.exclude_kernel = 1;
    attr.exclude_hv = 1;
    int fd = (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0) die("perf_event_open");
    void *page = mmap(NULL, (size_t)sysconf(_SC_PAGESIZE), PROT_READ, MAP_SHARED, fd, 0);
    if (page == MAP_FAILED) die("mmap of the perf event");
    struct f_owner_ex owner = {F_OWNER_TID, current_tid()};
    if (fcntl(fd, F_SETOWN_EX, &owner) != 0 || fcntl(fd, F_SETSIG, SIGPROF) != 0 ||
        fcntl(fd, F_SETFL, O_ASYNC | O_NONBLOCK) != 0)
        die("fcntl on the perf event");
    if (ioctl(fd, PERF_EVENT_IOC_REFRESH, 0) != 0 || ioctl(fd, PERF_EVENT_IOC_ENABLE, 0) != 0)
        die("ioctl on the perf event");
    close(fd);
}

/* A POSIX timer on clock that sends SIGPROF to the calling thread HZ times per second. */
static void arm_posix_timer(clockid_t clock, int hz)
{
    struct sigevent event;
    memset(&event, 0, sizeof event);
    event.sigev_notify = SIGEV_THREAD_ID;
    event.sigev_signo = SIGPROF;
    event._sigev_un._tid = current_tid();
    timer_t timer;
    if (timer_create(clock, &event, &timer) != 0) die("timer_create");
    long period_ns = 1000000000L / hz;
    struct timespec period = {period_ns / 1000000000L, period_ns % 1000000000L};
    struct itimerspec spec = {period, period};
    if (timer_settime(timer, 0, &spec, NULL) != 0) die("timer_settime");
}

static void arm_itimer_prof(int hz)
{
    long period_us = 1000000L / hz;
    struct timeval period = {period_us / 1000000L, period_us % 1000000L};
    struct itimerval spec = {period, period};
    if (setitimer(ITIMER_PROF, &spec, NULL) != 0) die("setitimer");
}

static const char *const mechanisms[] = {"none", "perf-task-clock", "perf-cpu-clock", "posix-cpu",
                                         "posix-wall", "itimer-prof", "external"};

static int mechanism_known(const char *name)
{
    for (size_t i = 0; i < sizeof mechanisms / sizeof mechanisms[0]; i++)
        if (!strcmp(name, mechanisms[i])) return 1;
    return 0;
}

/* Arms a known MECHANISM on the calling thread (none and external arm nothing). */
static void arm_sampler(const char *mechanism, int hz)
{
    if (!strcmp(mechanism, "perf-task-clock")) arm_perf_event(PERF_COUNT_SW_TASK_CLOCK, hz);
    else if (!strcmp(mechanism, "perf-cpu-clock")) arm_perf_event(PERF_COUNT_SW_CPU_CLOCK, hz);
    else if (!strcmp(mechanism, "posix-cpu")) arm_posix_timer(CLOCK_THREAD_CPUTIME_ID, hz);
    else if (!strcmp(mechanism, "posix-wall")) arm_posix_timer(CLOCK_MONOTONIC, hz);
    else if (!strcmp(mechanism, "itimer-prof")) arm_itimer_prof(hz);
}

static void run_loop(long iterations, double *wall_seconds, struct measurement *m)
{
    double wall0 = clock_seconds(CLOCK_MONOTONIC);
    double cpu0 = clock_seconds(CLOCK_PROCESS_CPUTIME_ID);
    long switches0 = context_switches();
    volatile double sum = 0;
    for (long i = 0; i < iterations; i++) sum += (double)i * 0.5;
    m->cpu_seconds = clock_seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
    *wall_seconds = clock_seconds(CLOCK_MONOTONIC) - wall0;
    m->switches = context_switches() - switches0;
    m->signals = signals_handled;
}

#define GAP_THRESHOLD_NS 1500
#define MAX_GAPS (1 << 20)

static int compare_longs(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

static double median_us(long *values, long count)
{
    if (count == 0) return 0;
    qsort(values, (size_t)count, sizeof values[0], compare_longs);
    return (double)values[count / 2] * 1e-3;
}

static long clock_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

/* Gaps between consecutive clock reads during SECONDS: with a signal handled in them, and
 * without; their numbers and medians go into summary, to be printed. */
static void run_gaps(double seconds, double *wall_seconds, struct measurement *m,
                     char *summary, size_t summary_size)
{
    static long with_signal[MAX_GAPS], without_signal[MAX_GAPS];
    long n_with = 0, n_without = 0;
    double cpu0 = clock_seconds(CLOCK_PROCESS_CPUTIME_ID);
    long switches0 = context_switches();
    long start = clock_ns(), end = start + (long)(seconds * 1e9), previous = start;
    long signals_seen = signals_handled, switches_seen = switches0, preempted = 0;
    for (long now = start; now < end; previous = now) {
        now = clock_ns();
        if (now - previous < GAP_THRESHOLD_NS) continue;
        long signals_now = signals_handled, switches_now = context_switches();
        if (switches_now != switches_seen) preempted++; /* another task ran: not counted */
        else if (signals_now != signals_seen && n_with < MAX_GAPS)
            with_signal[n_with++] = now - previous;
        else if (signals_now == signals_seen && n_without < MAX_GAPS)
            without_signal[n_without++] = now - previous;
        signals_seen = signals_now;
        switches_seen = switches_now;
        now = clock_ns(); /* (getrusage's own time is no gap) */
    }
    *wall_seconds = (double)(clock_ns() - start) * 1e-9;
    m->cpu_seconds = clock_seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
    m->switches = context_switches() - switches0;
    m->signals = signals_handled;
    snprintf(summary, summary_size, " gaps_signal=%ld gap_signal_us=%.2f gaps_other=%ld "
             "gap_other_us=%.2f gaps_preempted=%ld", n_with, median_us(with_signal, n_with),
             n_without, median_us(without_signal, n_without), preempted);
}

static void write_all(int fd, const void *buffer, size_t size)
{
    const char *p = buffer;
    while (size > 0) {
        ssize_t n = write(fd, p, size);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) die("write");
        p += n;
        size -= (size_t)n;
    }
}

static void read_all(int fd, void *buffer, size_t size)
{
    char *p = buffer;
    while (size > 0) {
        ssize_t n = read(fd, p, size);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) die("read");
        p += n;
        size -= (size_t)n;
    }
}

/* The timed part of one side of a switch benchmark.  send_fd/receive_fd are used by the pipe
 * mode only; the parent writes first. */
static void switch_side(int use_pipe, int is_parent, long rounds, int send_fd, int receive_fd,
                        struct measurement *m)
{
    double cpu0 = clock_seconds(CLOCK_PROCESS_CPUTIME_ID);
    long switches0 = context_switches();
    long signals0 = signals_handled;
    char byte = 'x';
    for (long i = 0; i < rounds; i++) {
        if (!use_pipe) {
            sched_yield();
        } else if (is_parent) {
            write_all(send_fd, &byte, 1);
            read_all(receive_fd, &byte, 1);
        } else {
            read_all(receive_fd, &byte, 1);
            write_all(send_fd, &byte, 1);
        }
    }
    m->cpu_seconds = clock_seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
    m->switches = context_switches() - switches0;
    m->signals = signals_handled - signals0;
}

/* Two processes pinned to one CPU, each with its own sampler; the parent's measurement plus
 * the child's (sent back through the pipe at the end). */
static void run_switches(const char *mechanism, int hz, int use_pipe, long rounds, int cpu,
                         double *wall_seconds, struct measurement *total)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) die("sched_setaffinity");
    int to_child[2], to_parent[2];
    if (pipe(to_child) != 0 || pipe(to_parent) != 0) die("pipe");
    pid_t child = fork();
    if (child < 0) die("fork");
    if (child == 0) {
        arm_sampler(mechanism, hz);
        char ready = 'r', go;
        write_all(to_parent[1], &ready, 1);
        read_all(to_child[0], &go, 1);
        struct measurement mine;
        switch_side(use_pipe, 0, rounds, to_parent[1], to_child[0], &mine);
        write_all(to_parent[1], &mine, sizeof mine);
        _exit(0);
    }
    arm_sampler(mechanism, hz);
    char ready, go = 'g';
    read_all(to_parent[0], &ready, 1);
    double wall0 = clock_seconds(CLOCK_MONOTONIC);
    write_all(to_child[1], &go, 1);
    struct measurement mine, theirs;
    switch_side(use_pipe, 1, rounds, to_child[1], to_parent[0], &mine);
    read_all(to_parent[0], &theirs, sizeof theirs);
    *wall_seconds = clock_seconds(CLOCK_MONOTONIC) - wall0;
    int status;
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "sample_cost: the second process failed\n");
        exit(1);
    }
    total->cpu_seconds = mine.cpu_seconds + theirs.cpu_seconds;
    total->switches = mine.switches + theirs.switches;
    total->signals = mine.signals + theirs.signals;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: sample_cost loop MECHANISM HZ [ITERATIONS]\n"
            "       sample_cost gaps MECHANISM HZ [SECONDS]\n"
            "       sample_cost yield|pipe MECHANISM HZ [ROUNDS] [CPU]\n"
            "MECHANISM: none perf-task-clock perf-cpu-clock posix-cpu posix-wall itimer-prof "
            "external\n");
    exit(2);
}

int main(int argc, char **argv)
{
    if (argc < 4) usage();
    const char *mode = argv[1], *mechanism = argv[2];
    int hz = atoi(argv[3]);
    if (hz <= 0 || !mechanism_known(mechanism)) usage();
    install_handler();
    double wall_seconds;
    struct measurement m;
    char summary[256] = "";
    if (!strcmp(mode, "loop")) {
        long iterations = argc > 4 ? atol(argv[4]) : 400000000L;
        arm_sampler(mechanism, hz);
        run_loop(iterations, &wall_seconds, &m);
    } else if (!strcmp(mode, "gaps")) {
        double seconds = argc > 4 ? atof(argv[4]) : 2.0;
        arm_sampler(mechanism, hz);
        run_gaps(seconds, &wall_seconds, &m, summary, sizeof summary);
    } else if (!strcmp(mode, "yield") || !strcmp(mode, "pipe")) {
        long rounds = argc > 4 ? atol(argv[4]) : 200000L;
        int cpu = argc > 5 ? atoi(argv[5]) : 1;
        run_switches(mechanism, hz, !strcmp(mode, "pipe"), rounds, cpu, &wall_seconds, &m);
    } else {
        usage();
    }
    printf("sample_cost mode=%s mechanism=%s hz=%d seconds=%.6f cpu_seconds=%.6f signals=%ld "
           "switches=%ld%s\n",
           mode, mechanism, hz, wall_seconds, m.cpu_seconds, m.signals, m.switches, summary);
    return 0;
}
