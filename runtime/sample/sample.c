/* Timer sampling of every thread outside MPI (the threads themselves: core/threads.c).
 *
 * Each thread has its own timer on its own CPU time (what it spends running; a thread blocked
 * in the kernel gets no signal, so the application's sleeps and reads are never interrupted):
 *  - a perf task-clock software event: it fires at the exact CPU time, so every instant of the
 *    thread's CPU time is equally likely to be sampled, but the kernel stops and restarts its
 *    hrtimer at every context switch of the thread (2 to 9 us each in a VM: HPCC on 4 ranks on
 *    2 cores, whose MPI library yields millions of times, took 2.95 times as long);
 *  - a POSIX CPU-time timer of the thread (timer_create on its CPU clock, signal to the thread):
 *    the kernel checks it at its scheduler tick, so it costs nothing at context switches, but
 *    it fires only at ticks the thread runs through, which biases where samples fall when the
 *    thread runs in stretches shorter than a tick that start at ticks (a node busy with other
 *    work: LAMMPS's neighbour-list build got 36% instead of 16%);
 *  - PATHSCOPE_SAMPLE_TIMER=auto (the default) chooses per thread ("Choosing the timer"
 *    below): the POSIX timer, and the perf event while the thread is preempted often by other
 *    work but not switched thousands of times a second;
 *  - PATHSCOPE_SAMPLE_CLOCK=wall: a CLOCK_MONOTONIC POSIX timer (wall time, also while blocked).
 * docs/benchmarks.md compares them (bench/sample_cost.c, bench/apps.py, bench/perfcompare.py).
 *
 * Weights.  A kept sample weighs the CPU time the thread used since its previous sample of any
 * kind (the thread's CPU clock is read in the handler): whatever else happened in that interval
 * (MPI calls, dropped samples), the sample stands for one sampling interval of CPU time at the
 * place it found the thread, so each path's expected on-CPU time is its true on-CPU time, however
 * often the thread calls MPI between samples (docs/architecture.md has the arithmetic).
 * Samples inside MPI (whose time is measured) and inside pathscope (a tree update, or any
 * instruction of pathscope's code: probe stubs and thunks) are dropped, their interval with
 * them.  Off-CPU time (run queue, blocked) outside MPI is seen at kept samples: the wall
 * time since the previous kept sample minus the CPU time used since then, times the non-MPI
 * share of that wall time, is placed on the sample's path as off-CPU time; ps_thread_close()
 * makes a thread's on-CPU, off-CPU and MPI time add up to its elapsed time exactly.
 *
 * on_sample() is a signal handler: everything it reaches is async-signal-safe -- the thread's
 * own preallocated tree, the unwinder, rdtsc, clock_gettime.  It ignores samples inside MPI (the
 * wrappers' re-entry flag), inside pathscope itself (busy, or in its code) and after the trees
 * were frozen, and
 * counts each kind.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "cct.h"
#include "record.h"
#include "unwind.h"
#include "sample.h"
#include "sample_thread.h"

int ps_sample_rate;               /* Hz, 0 = off */
const char *ps_sample_source = "off";
static int use_wall_clock;
static int use_perf;              /* the thread CPU clock is sampled by perf events */
static int adaptive;              /* ... or by perf or POSIX timers, by switch rate (auto) */
/* Choosing the timer (auto).  A thread starts on the POSIX timer: exact enough while it runs
 * in long stretches, as it does alone on a core or among ranks that yield to each other, and
 * it costs nothing per switch -- whereas any perf event in the system makes every context
 * switch of every thread pay the scheduler's perf hooks.  It moves to a perf event when it is
 * preempted at least PS_PREEMPTED_MIN times a second over PS_SLOW_CHECK_MS (other work on its
 * core: its stretches then start at ticks, where the POSIX timer misplaces samples) while it
 * is switched at most PS_SWITCHES_HIGH times a second in all; it moves back when it is
 * switched more than that over PS_SWITCH_CHECK_MS (a yielding MPI library: the perf event
 * would cost it 1% at 2 us a switch, up to 9 us in a VM), or is preempted less than half as
 * often over PS_CALM_CHECK_MS.  The slow looks keep the timer from following the phases of an
 * iteration (two timers that see short stretches differently, alternating with the program's
 * phases, gave short phases +10%).  The rates are read in the handler (getrusage).  A thread
 * on a perf event keeps its POSIX timer as a watchdog whose signals only take that look: the
 * perf event counts user time only, so in a storm of yields (kernel time) it fires a few times
 * a second at most and the thread could stay on it, paying at every switch (HPCC on a loaded
 * node: 19 perf signals in a 40 s run, MPIRandomAccess three times as slow). */
#define PS_SWITCHES_HIGH 5000
#define PS_PREEMPTED_MIN 50
#define PS_SWITCH_CHECK_MS 50
#define PS_SLOW_CHECK_MS 500
#define PS_CALM_CHECK_MS 2000
static void choose_timer(ps_thread_t *t, uint64_t now);
static int perf_failed;           /* perf events refused once: use POSIX timers from then on */
/* mpi/paths.c: the node of an untimed MPI call a sample landed in [signal-safe] */
uint32_t ps_untimed_sample_node(ps_thread_t *t, int op, void *context);

/* A sample that is not kept: its interval of CPU time is dropped, but stays part of the span
 * whose off-CPU time the next kept sample measures.  Touches only fields that nothing but this
 * handler writes while the thread runs, so it may interrupt the thread's own tree updates.
 * [signal-safe] */
static void sample_dropped(ps_thread_t *t)
{
    sample_thread_t *st = sample_of(t);
    if (t->end_ticks) return;
    st->skipped_cpu_ns += ps_time_cpu_skip(&t->time, ps_thread_cpu_ns(t->tid));
}

void ps_sample_charge(ps_thread_t *t, uint32_t node, uint64_t now, uint64_t cpu_ns)
{
    sample_thread_t *st = sample_of(t);
    uint64_t on, off;
    /* (with the collector's off-CPU reports, ps_sample_offcpu places that time instead) */
    ps_time_charge(&t->time, now, cpu_ns, st->skipped_cpu_ns, !ps_offcpu_reported, &on, &off);
    st->skipped_cpu_ns = 0;
    t->nodes[node].sample_ticks += on;
    t->nodes[node].offcpu_ticks += off;
    t->nodes[node].samples++;
    st->samples_kept++;
}

int ps_offcpu_reported;

/* The node of the interrupted context, as a sample sees it (the function it is in).
 * [signal-safe, tree claimed] */
static uint32_t sample_node(ps_thread_t *t, void *context)
{
    uint32_t node;
    ps_cct_record(t, &(ps_from_t){.how = PS_FROM_CONTEXT, .context = context}, PS_LEAF_FUNCTION, 0,
                  NULL, &node);
    return node;
}

/* The collector's off-CPU report (kernel.c): ns off the CPU since the previous report, the
 * thread now back where it stopped.  Inside a timed MPI call the time is the call's (the
 * wrapper measured it); elsewhere it goes where a sample would put it. [signal-safe, tree
 * claimed] */
void ps_sample_offcpu(ps_thread_t *t, void *context, uint64_t ns)
{
    sample_thread_t *st = sample_of(t);
    if (!ps_sample_rate || t->end_ticks) return;
    int in_wrapper = ps_in_wrapper;
    if (in_wrapper && in_wrapper < PS_IN_UNTIMED) {
        st->offcpu_reports_in_mpi++;
        return;
    }
    uint32_t node = in_wrapper ? ps_untimed_sample_node(t, in_wrapper - PS_IN_UNTIMED, context)
                               : sample_node(t, context);
    uint64_t ticks = (uint64_t)((double)ns * ps_ticks_per_ns());
    t->nodes[node].offcpu_ticks += ticks;
    ps_time_offcpu(&t->time, ticks);
    st->offcpu_reports++;
}

/* A sample of this thread at the interrupted context: unwound, weighted, added. */
static void sample_here(ps_thread_t *t, void *context, uint64_t now)
{
    uint32_t node = sample_node(t, context);
    ps_sample_charge(t, node, now, ps_thread_cpu_ns(t->tid));
}

/* The closing sample of a thread that is still running at the end of the run: the time
 * since its last sample (for a helper thread blocked in epoll_wait, most of its life) goes
 * to where it is now.  Inside MPI the time stays open: the writer closes the timeline and
 * puts it on [not unwound]. [signal-safe] */
static void close_here(ps_thread_t *t, void *context)
{
    if (!ps_in_wrapper) sample_here(t, context, ps_now());
}

/* The interrupted instruction is pathscope's own outside a tree update (busy): a probe's entry
 * stub or a hooked thunk saving registers, a handler before it claims the tree.  Its time is
 * pathscope's, dropped as inside a tree update. [signal-safe] */
static int in_own_code(void *context)
{
    const ucontext_t *uc = context;
    return ps_unwind_in_self((uintptr_t)uc->uc_mcontext.gregs[REG_RIP]);
}

static void on_sample(int sig, siginfo_t *info, void *context)
{
    int saved_errno = errno;
    ps_thread_t *t = ps_self;
    /* another thread cancels this one (thunk.c: pthread_cancel): return addresses back
     * first; while we update the tree the walker does it when it is done */
    if (ps_thunks_cancel_requested(t)) goto out;
    if (!t || t->end_ticks || !ps_sample_rate) goto out;
    sample_thread_t *st = sample_of(t);
    if (!st->close_requested) {
        int on_perf = atomic_load(&st->sampler_page) != NULL;
        /* on a thread sampled by a perf event, a POSIX timer signal is auto's watchdog: only a
         * look at the switch rate, no sample ("Choosing the timer") */
        int watchdog = on_perf && info->si_code == SI_TIMER;
        if (watchdog) { /* (not a sample: counted nowhere) */
        } else if (on_perf) {
            st->samples_perf++;
        } else if (use_wall_clock) {
            st->samples_wall++;
        } else {
            st->samples_posix++;
        }
        choose_timer(t, ps_now());
        if (watchdog) goto out;
    }
    int in_wrapper = ps_in_wrapper;
    if (in_wrapper && in_wrapper < PS_IN_UNTIMED && !st->close_requested) {
        st->samples_in_mpi++;
        sample_dropped(t);
        goto out;
    }
    if ((!st->close_requested && in_own_code(context)) || !ps_tree_claim(t, 0)) {
        st->samples_other++;
        sample_dropped(t);
        goto out;
    }
    if (st->close_requested) {
        close_here(t, context);
        st->close_requested = 0;
        st->close_done = 1;
    } else if (in_wrapper) {
        /* inside an MPI call that is counted but not timed: the sample is its time */
        uint64_t now = ps_now();
        uint32_t node = ps_untimed_sample_node(t, in_wrapper - PS_IN_UNTIMED, context);
        ps_sample_charge(t, node, now, ps_thread_cpu_ns(t->tid));
    } else {
        sample_here(t, context, ps_now());
    }
    ps_tree_release(t);
out:
    errno = saved_errno;
}

/* ---- one thread's sampler ------------------------------------------------------------------
 * A sampler holds no file descriptor while the application runs.  The perf event is kept
 * alive by a one-page read-only mapping of it (the event's control page; no data pages, so
 * the kernel writes no records), and its descriptor is closed once the event is set up: an
 * application that closes every descriptor (close_range, a loop up to OPEN_MAX), dup2()s over
 * them or opens its own files on low numbers can neither stop our sampling nor have one of
 * its descriptors ioctl'ed or closed by us.  The mapping is not inherited by fork (the kernel
 * marks it VM_DONTCOPY) and goes away at exec; unmapping it releases the event.  The POSIX
 * timer fallback holds no descriptor either.
 *
 * During the set-up (microseconds, once per thread) the descriptor lives at a high number
 * (ps_fd_adopt) and is checked before every call that takes it: ps_fd_owned() compares the
 * fstat identity, but every perf event -- and eventfd, epoll, timerfd, signalfd -- is the same
 * anonymous inode, so the event's own id (PERF_EVENT_IOC_ID, unique for the boot) is compared
 * as well.  That ioctl only reads, and it reaches only objects fstat already showed to be the
 * anonymous inode, none of which but a perf event has a '$' ioctl: a foreign object is never
 * touched.  (What remains is the window between a check and the call it guards; another
 * application thread would have to close our descriptor and get a new one at that very number
 * within it.)  If the mapping is refused (the perf_event_mlock_kb budget of an unprivileged user
 * spent), this thread and later ones use POSIX timers, and a warning says so. */
static long sys_ioctl(int fd, unsigned long request, void *arg) { return syscall(SYS_ioctl, fd, request, arg); }
static long sys_fcntl(int fd, int cmd, long arg) { return syscall(SYS_fcntl, fd, cmd, arg); }
static long page_size = 4096;

typedef struct {
    ps_ownfd_t own;
    uint64_t id; /* PERF_EVENT_IOC_ID */
} perf_fd_t;

static int perf_fd_ours(const perf_fd_t *p)
{
    uint64_t id = 0;
    return ps_fd_owned(&p->own) && sys_ioctl(p->own.fd, PERF_EVENT_IOC_ID, &id) == 0 && id == p->id;
}

static void perf_fd_release(perf_fd_t *p)
{
    if (p->own.fd >= 0 && perf_fd_ours(p)) ps_sys_close(p->own.fd);
    p->own.fd = -1;
}

/* The thread's perf event, for thread tid (0: the calling thread), pinned by its mapping. */
static void *start_perf(int tid)
{
    struct perf_event_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_TASK_CLOCK;
    attr.sample_period = 1000000000ull / (uint64_t)ps_sample_rate;
    attr.disabled = 1;
    attr.wakeup_events = 1;
    /* user mode only: allowed at perf_event_paranoid 2, and a system call is never
     * interrupted by a sample (the weights still cover the time spent in the kernel) */
    attr.exclude_kernel = 1;
    attr.exclude_hv = 1;
    int fd = (int)syscall(SYS_perf_event_open, &attr, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0) return NULL;
    perf_fd_t p;
    ps_fd_adopt(fd, &p.own);
    if (p.own.fd < 0 || sys_ioctl(p.own.fd, PERF_EVENT_IOC_ID, &p.id) != 0) {
        perf_fd_release(&p); /* (fstat failed: not ours to close any more) */
        return NULL;
    }
    void *page = MAP_FAILED;
    if (perf_fd_ours(&p))
        page = (void *)syscall(SYS_mmap, NULL, (size_t)page_size, PROT_READ, MAP_SHARED, p.own.fd, 0);
    struct f_owner_ex owner = {F_OWNER_TID, tid ? tid : (int)syscall(SYS_gettid)};
    int ok = page != MAP_FAILED &&
             perf_fd_ours(&p) && sys_fcntl(p.own.fd, F_SETOWN_EX, (long)&owner) == 0 &&
             perf_fd_ours(&p) && sys_fcntl(p.own.fd, F_SETSIG, PS_SAMPLE_SIGNAL) == 0 &&
             perf_fd_ours(&p) && sys_fcntl(p.own.fd, F_SETFL, O_ASYNC | O_NONBLOCK) == 0 &&
             perf_fd_ours(&p) && sys_ioctl(p.own.fd, PERF_EVENT_IOC_REFRESH, 0) == 0 &&
             perf_fd_ours(&p) && sys_ioctl(p.own.fd, PERF_EVENT_IOC_ENABLE, 0) == 0;
    perf_fd_release(&p);
    if (ok) return page;
    if (page != MAP_FAILED) syscall(SYS_munmap, page, (size_t)page_size);
    return NULL;
}

static int start_timer(ps_thread_t *t, int tid)
{
    sample_thread_t *st = sample_of(t);
    struct sigevent ev;
    memset(&ev, 0, sizeof ev);
    ev.sigev_notify = SIGEV_THREAD_ID;
    ev.sigev_signo = PS_SAMPLE_SIGNAL;
    ev._sigev_un._tid = tid;
    clockid_t clock = use_wall_clock ? CLOCK_MONOTONIC : ps_thread_cpu_clock(tid);
    /* the system calls themselves: no library state, safe in the handler */
    int id = -1;
    if (syscall(SYS_timer_create, clock, &ev, &id) != 0) return -1;
    long ns = 1000000000L / ps_sample_rate;
    struct itimerspec its = {{ns / 1000000000L, ns % 1000000000L}, {ns / 1000000000L, ns % 1000000000L}};
    if (syscall(SYS_timer_settime, id, 0, &its, NULL) != 0) {
        syscall(SYS_timer_delete, id);
        return -1;
    }
    st->timer_id = id;
    atomic_store(&st->has_timer, 1);
    return 0;
}

static pid_t sample_pid; /* the process whose threads we sample (0: none) */
static _Atomic int sampling_over; /* the end of the run stopped the samplers for good */
static int perf_worked;   /* a perf event was started in this process */

/* Starts t's sampler, from t itself or (restart, ps_sigprof_*) from another thread of ours.
 * posix: 1 for the POSIX timer even where perf events are used (auto). [signal-safe] */
static int sampler_start_mode(ps_thread_t *t, int restart, int posix)
{
    if (!ps_sample_rate || atomic_load(&sampling_over) || !ps_sigprof_ours_flag()) return 0;
    int self = t == ps_self;
    int tid = self ? (int)syscall(SYS_gettid) : t->tid;
    /* never a thread of another process: a tid of ours that ended may have been reused */
    if (!self && syscall(SYS_tgkill, sample_pid, tid, 0) != 0) return -1;
    if (use_perf && !perf_failed && !posix) {
        void *page = start_perf(self ? 0 : tid);
        if (page) {
            atomic_store(&sample_of(t)->sampler_page, page);
            if (!adaptive) ps_sample_source = "perf-task-clock";
            perf_worked = 1;
            /* auto: the POSIX timer stays as the watchdog of the perf event (its signals only
             * look at the switch rate): a perf event that counts user time only fires rarely
             * in a storm of yields, which run in the kernel, and so could not see it */
            if (adaptive && start_timer(t, tid) != 0) {
                ps_sample_thread_stop(t);
                return -1;
            }
            goto started;
        }
        perf_failed = 1;
        if (perf_worked && !restart) {
            static char text[200];
            ps_fmt_t f = {text, 0, sizeof text - 1, -1, 0};
            ps_fmt_str(&f, "from thread ");
            ps_fmt_u64(&f, (uint64_t)t->index);
            ps_fmt_str(&f, " on, threads are sampled with POSIX CPU-time timers (at most the "
                           "kernel's tick rate): a perf event could not be started or kept "
                           "(descriptor or locked-memory limit, perf_event_mlock_kb)");
            text[f.len] = 0;
            ps_warn("sampler-fallback", text);
        }
    }
    if (start_timer(t, tid) != 0) return -1;
    if (!adaptive || perf_failed) ps_sample_source = use_wall_clock ? "posix-wall-timer" : "posix-cpu-timer";
started:
    /* the application took SIGPROF while we were starting: it must not get our signals */
    if (!ps_sigprof_ours_flag()) ps_sample_thread_stop(t);
    return 0;
}

/* (auto: every thread starts on the POSIX timer) */
static int sampler_start(ps_thread_t *t, int restart) { return sampler_start_mode(t, restart, adaptive); }

/* auto: the thread's context switches per second since the last look decide its timer.  Runs
 * in the handler of the thread itself. [signal-safe] */
static void choose_timer(ps_thread_t *t, uint64_t now)
{
    sample_thread_t *st = sample_of(t);
    if (!adaptive || perf_failed || atomic_load(&sampling_over)) return;
    int on_perf = atomic_load(&st->sampler_page) != NULL;
    if (!on_perf && !atomic_load(&st->has_timer)) return;
    double per_ms = ps_ticks_per_ns() * 1e6;
    double fast_ms = st->mode_check_ticks ? (double)(now - st->mode_check_ticks) / per_ms : 0;
    if (st->mode_check_ticks && fast_ms < PS_SWITCH_CHECK_MS) return;
    struct rusage ru;
    if (syscall(SYS_getrusage, 1 /* RUSAGE_THREAD */, &ru) != 0) return;
    uint64_t switches = (uint64_t)ru.ru_nvcsw + (uint64_t)ru.ru_nivcsw;
    uint64_t preempted = (uint64_t)ru.ru_nivcsw;
    int change = 0, restart_slow = !st->slow_check_ticks;
    if (st->mode_check_ticks) {
        double rate = (double)(switches - st->mode_check_switches) * 1e3 / fast_ms;
        double slow_ms = (double)(now - st->slow_check_ticks) / per_ms;
        double preempt_rate = (double)(preempted - st->slow_check_preempted) * 1e3 / slow_ms;
        if (on_perf && rate > PS_SWITCHES_HIGH) {
            change = 1;
        } else if (!on_perf && slow_ms >= PS_SLOW_CHECK_MS) {
            change = rate <= PS_SWITCHES_HIGH && preempt_rate >= PS_PREEMPTED_MIN;
            restart_slow = 1;
        } else if (on_perf && slow_ms >= PS_CALM_CHECK_MS) {
            change = preempt_rate < PS_PREEMPTED_MIN / 2;
            restart_slow = 1;
        }
        if (change) {
            ps_sample_thread_stop(t);
            if (sampler_start_mode(t, 1, on_perf) == 0) st->timer_changes++;
            restart_slow = 1;
        }
    }
    st->mode_check_ticks = now;
    st->mode_check_switches = switches;
    if (restart_slow) {
        st->slow_check_ticks = now;
        st->slow_check_preempted = preempted;
    }
}

void ps_sample_thread_start(ps_thread_t *t)
{
    if (ps_sample_rate && sampler_start(t, 0) != 0) atomic_fetch_add(&ps_counters.sampler_failures, 1);
}

/* [signal-safe] */
void ps_sample_thread_stop(ps_thread_t *t)
{
    sample_thread_t *st = sample_of(t);
    /* claimed atomically: the thread itself (at its end), the writer and ps_sigprof_* may
     * all stop it */
    void *page = atomic_exchange(&st->sampler_page, NULL);
    if (page) syscall(SYS_munmap, page, (size_t)page_size); /* releases the event */
    if (atomic_exchange(&st->has_timer, 0)) syscall(SYS_timer_delete, st->timer_id);
}

/* The application took SIGPROF: no thread may send it ours. [signal-safe] */
void ps_sample_stop_all(void)
{
    int n = atomic_load(&ps_nthreads);
    for (int i = 0; i < n; i++)
        if (ps_threads[i]) ps_sample_thread_stop(ps_threads[i]);
}

/* Our handler is back: every thread still running samples again. [signal-safe] */
void ps_sample_restart_all(void)
{
    int n = atomic_load(&ps_nthreads);
    for (int i = 0; i < n; i++) {
        ps_thread_t *t = ps_threads[i];
        if (t && !t->exited && !t->end_ticks && !atomic_load(&sample_of(t)->sampler_page) &&
            !atomic_load(&sample_of(t)->has_timer))
            sampler_start(t, 1);
    }
}

/* Calls from the process we sample, not from a child made by vfork (which shares our memory
 * until it execs) or by fork. [signal-safe] */
int ps_sample_in_own_process(void) { return sample_pid && syscall(SYS_getpid) == sample_pid; }

/* Before the trees are written at a normal end (MPI_Finalize, exit): every other thread
 * still running takes a closing sample (above), so its last stretch has a location.  A
 * thread blocked in a system call that SA_RESTART does not restart (poll, epoll_wait,
 * nanosleep) sees EINTR once, at the end of the run.  Waits at most 50 ms. */
void ps_threads_close_all(void)
{
    ps_sigprof_check_end();
    if (!ps_sample_rate) return;
    if (!ps_sigprof_installed()) { /* the application took the signal over: never send it ours */
        ps_threads_stop_sampling();
        return;
    }
    int n = atomic_load(&ps_nthreads);
    pid_t pid = getpid();
    for (int i = 0; i < n; i++) {
        ps_thread_t *t = ps_threads[i];
        if (!t || t == ps_self || t->end_ticks) continue;
        sample_thread_t *st = sample_of(t);
        st->close_requested = 1;
        if (syscall(SYS_tgkill, pid, t->tid, PS_SAMPLE_SIGNAL) != 0) st->close_requested = 0;
    }
    struct timespec ms = {0, 1000000};
    for (int wait = 0; wait < 50; wait++) {
        int open = 0;
        for (int i = 0; i < n; i++) {
            ps_thread_t *t = ps_threads[i];
            if (t && sample_of(t)->close_requested && !sample_of(t)->close_done && !t->end_ticks)
                open++;
        }
        if (!open) break;
        nanosleep(&ms, NULL);
    }
    ps_threads_stop_sampling();
}

void ps_sample_forget_after_fork(void)
{
    /* the child has neither the mappings (VM_DONTCOPY) nor the timers of its parent's
     * samplers: forget them without unmapping (the addresses may be the child's own later)
     * and without timer_delete (the ids may be the child's own timers') */
    int n = atomic_load(&ps_nthreads);
    for (int i = 0; i < n; i++)
        if (ps_threads[i]) {
            sample_thread_t *st = sample_of(ps_threads[i]);
            atomic_store(&st->sampler_page, NULL);
            atomic_store(&st->has_timer, 0);
        }
    sample_pid = (pid_t)syscall(SYS_getpid);
    ps_sample_rate = 0;
}

void ps_threads_stop_sampling(void)
{
    atomic_store(&sampling_over, 1);
    int n = atomic_load(&ps_nthreads);
    for (int i = 0; i < n; i++)
        if (ps_threads[i]) ps_sample_thread_stop(ps_threads[i]);
}

/* ---- start of the process ------------------------------------------------------------- */
/* At load time, call paths on (unwind's configure went first): the sampler's set-up and our
 * SIGPROF handler; each thread's sampler starts when it registers. */
void ps_sample_init(void)
{
    page_size = sysconf(_SC_PAGESIZE);
    sample_pid = (pid_t)syscall(SYS_getpid);
    /* SIGPROF with a handler already (another profiler's library, started before us): it
     * stays theirs, and we do not sample */
    int sigprof_busy = !ps_sigprof_free_at_start();
    ps_sample_rate = atoi(ps_options.sample_rate);
    use_wall_clock = strcmp(ps_options.sample_clock, "wall") == 0;
    /* POSIX CPU-time timers fire at the scheduler tick at most: the tick is the resolution of
     * the coarse clocks (4 ms at HZ=250) */
    struct timespec tick = {0, 0};
    long tick_hz = clock_getres(CLOCK_MONOTONIC_COARSE, &tick) == 0 && tick.tv_nsec > 0 &&
                   tick.tv_sec == 0 ? 1000000000L / tick.tv_nsec : 100;
    /* auto: perf events, moving to POSIX timers while a thread is switched often -- unless
     * the rate is above the tick rate, which only perf events can do */
    int want_auto = strcmp(ps_options.sample_timer, "auto") == 0;
    use_perf = !use_wall_clock && (want_auto || strcmp(ps_options.sample_timer, "perf") == 0);
    adaptive = use_perf && want_auto && ps_sample_rate > 0 && ps_sample_rate <= tick_hz;
    if (adaptive) ps_sample_source = "auto";
    if (sigprof_busy && ps_sample_rate) {
        ps_sample_rate = 0;
        ps_warn("sigprof-taken", "SIGPROF already had a handler when pathscope started (another "
                "profiler?): pathscope did not sample, so its call paths hold MPI calls only");
    }
    if (ps_sample_rate || ps_thunks_available) { /* (thunk mode: restore requests, thunk.c) */
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_sample;
        /* nothing else runs inside our handler (an application handler calling MPI there
         * would meet a half-updated tree), except faults, which must stay synchronous */
        sigfillset(&sa.sa_mask);
        sigdelset(&sa.sa_mask, SIGSEGV);
        sigdelset(&sa.sa_mask, SIGBUS);
        sigdelset(&sa.sa_mask, SIGFPE);
        sigdelset(&sa.sa_mask, SIGILL);
        sigdelset(&sa.sa_mask, SIGTRAP); /* a probe being patched (probe/patch.c) */
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
        ps_sigprof_install_ours(&sa, (void *)on_sample);
    }
}
