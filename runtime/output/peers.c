/* The other ranks of this job on this node, at an early end (MPI_Abort, a crash, an exit
 * without MPI_Finalize).
 *
 * Launchers kill the remaining ranks as soon as one dies, often with SIGKILL, so a rank that
 * ends the job first gets the others on its node to write their rank files, then waits for
 * them (at most 3 s), and only then dies or calls PMPI_Abort.  It asks them with a real-time
 * signal that does not kill them: their handler writes the file with status
 * `ended-by-rank R` and returns, so the launcher sees exactly the ending it would see without
 * pathscope (the MPI_Abort error code, the crashing rank's signal), not ranks killed by
 * pathscope.  (Before issue 10 they were sent SIGTERM: mpirun then exited 143 instead of the
 * application's abort code.)
 *
 * Only our job's ranks are signalled: their pids come from an exchange over every rank (the
 * MPI source's allgather inside MPI_Init: ps_peers_mine, ps_peers_adopt),
 * with each process's start time, and a request goes through a pidfd opened before checking
 * that the process with that pid is still the one that started then (a pid reused by another
 * process is never signalled), and only while its request signal is caught (a rank that
 * exec'd another program, whose action is the default one, would be killed by it).
 * The receiving handler accepts only a queued signal (SI_QUEUE) from one of its peers' pids
 * carrying the job's cookie; any other delivery of that signal goes to the handler that was
 * installed before ours (or takes the default action, as it would have).  A signal the
 * application ignores stays ignored: that rank is not asked.
 *
 * Everything reachable from ps_notify_peers() and the request handler is async-signal-safe:
 * raw system calls, static storage, no malloc, no locks, no stdio.  The table is written once,
 * inside MPI_Init, before any of it can run. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "pathscope.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

typedef struct {
    int pid;            /* 0: not on this node (or ourselves) */
    int signal;         /* its request signal, 0: it cannot be asked */
    uint64_t start;     /* its start time (clock ticks since boot, /proc/PID/stat field 22) */
} peer_t;

static peer_t *peers;         /* by world rank */
/* the control thread's watch of each peer (ps_peers_watch): its pidfd, and WATCH_* */
enum { WATCH_NOT_YET, WATCH_ON, WATCH_DONE };
typedef struct { ps_ownfd_t own; int state; } watch_t;
static watch_t *watch;        /* by world rank; touched by the control thread only */
static int npeers;            /* world size when the table was made */
static uint64_t job_cookie;   /* rank 0's random value: a request carries it */
static struct sigaction request_previous;

/* ---- /proc/PID/status, read with raw system calls ---------------------------------------- */
static long read_proc(int pid, const char *leaf, char *buf, size_t cap)
{
    char path[64];
    ps_fmt_t f = {path, 0, sizeof path - 1, -1, 0};
    ps_fmt_str(&f, "/proc/");
    ps_fmt_u64(&f, (uint64_t)pid);
    ps_fmt_char(&f, '/');
    ps_fmt_str(&f, leaf);
    path[f.len] = 0;
    return ps_read_small(path, buf, cap);
}

/* Whether process pid has a handler for sig (the SigCgt mask of /proc/PID/status). */
static int proc_catches(int pid, int sig)
{
    static char buf[4096];
    if (read_proc(pid, "status", buf, sizeof buf) <= 0) return 0;
    const char *p = strstr(buf, "\nSigCgt:");
    if (!p) return 0;
    p += 8;
    while (*p == ' ' || *p == '\t') p++;
    const char *end = p;
    while ((*end >= '0' && *end <= '9') || (*end >= 'a' && *end <= 'f')) end++;
    int digit = (sig - 1) / 4; /* from the right */
    if (end - p <= digit) return 0;
    char c = end[-1 - digit];
    int v = c <= '9' ? c - '0' : c - 'a' + 10;
    return (v >> ((sig - 1) % 4)) & 1;
}

/* ---- the request handler ------------------------------------------------------------------ */
void ps_write_for_peer(int from_rank); /* core/lifecycle.c */

static int request_sender(const siginfo_t *info)
{
    if (!peers || info->si_code != SI_QUEUE || (uint64_t)(uintptr_t)info->si_value.sival_ptr != job_cookie)
        return -1;
    for (int r = 0; r < npeers; r++)
        if (peers[r].pid && peers[r].pid == info->si_pid) return r;
    return -1;
}

static void on_peer_request(int sig, siginfo_t *info, void *context)
{
    int from = request_sender(info);
    if (from >= 0) {
        int saved_errno = errno;
        ps_write_for_peer(from);
        errno = saved_errno;
        return;
    }
    /* not ours: what would have happened without pathscope */
    struct sigaction *old = &request_previous;
    int has_handler = old->sa_flags & SA_SIGINFO ? old->sa_sigaction != NULL
                      : old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN;
    if (!has_handler) {
        signal(sig, SIG_DFL); /* (a real-time signal's default action ends the process) */
        raise(sig);           /* delivered when this handler returns */
        return;
    }
    /* the application's handler runs with the mask it asked for: the interrupted code's
     * mask, its sa_mask, and the signal itself unless SA_NODEFER (the kernel restores the
     * interrupted mask when we return) */
    sigset_t mask;
    if (context) mask = ((const ucontext_t *)context)->uc_sigmask;
    else pthread_sigmask(SIG_SETMASK, NULL, &mask);
    for (int s = 1; s < NSIG; s++)
        if (sigismember(&old->sa_mask, s) == 1) sigaddset(&mask, s);
    if (!(old->sa_flags & SA_NODEFER)) sigaddset(&mask, sig);
    pthread_sigmask(SIG_SETMASK, &mask, NULL);
    struct sigaction handler = *old;
    if (old->sa_flags & SA_RESETHAND) { /* once, then the default action */
        memset(old, 0, sizeof *old);
        old->sa_handler = SIG_DFL;
    }
    if (handler.sa_flags & SA_SIGINFO) handler.sa_sigaction(sig, info, context);
    else handler.sa_handler(sig);
}

/* The request signal: a real-time signal pathscope uses for nothing else (the kernel-time
 * collector has SIGRTMAX-2, glibc reserves the first ones). */
int ps_peer_signal(void) { return SIGRTMAX - 3; }

/* Installs the request handler in front of whatever is there, once the table is made and
 * the rank records (the end of pathscope's start inside MPI_Init), whatever
 * PATHSCOPE_SIGNALS says: it handles no fatal signal.  A peer asks only a rank whose handler
 * is installed (/proc/PID/status), so a rank still inside MPI_Init is not asked (it writes
 * its file when the launcher stops it, as every rank did before).  0 if not installed. */
int ps_peers_accept_requests(void)
{
    if (!peers) return 0;
    int sig = ps_peer_signal();
    struct sigaction cur, sa;
    if (sigaction(sig, NULL, &cur)) return 0;
    if (cur.sa_flags & SA_SIGINFO && cur.sa_sigaction == on_peer_request) return 1;
    /* ignored by the application: left so (an exec'd child inherits it ignored); the rank
     * is then never asked (its SigCgt bit is clear) */
    if (!(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == SIG_IGN) return 0;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_peer_request;
    sigfillset(&sa.sa_mask); /* nothing of ours lands in the middle of the write */
    sigdelset(&sa.sa_mask, SIGSEGV);
    sigdelset(&sa.sa_mask, SIGBUS);
    sigdelset(&sa.sa_mask, SIGFPE);
    sigdelset(&sa.sa_mask, SIGILL);
    sigdelset(&sa.sa_mask, SIGTRAP); /* a probe being patched (probe/patch.c) */
    /* an application handler's SA_RESTART and SA_ONSTACK are kept (its interrupted system
     * calls fail with EINTR or not, as without us); ours alone restarts them */
    int has_handler = cur.sa_flags & SA_SIGINFO ? cur.sa_sigaction != NULL
                      : cur.sa_handler != SIG_DFL && cur.sa_handler != SIG_IGN;
    sa.sa_flags = SA_SIGINFO | (has_handler ? cur.sa_flags & (SA_RESTART | SA_ONSTACK) : SA_RESTART);
    request_previous = cur;
    return sigaction(sig, &sa, NULL) == 0;
}

/* ---- the table, made inside MPI_Init ------------------------------------------------------ */
static uint64_t host_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* This rank's entry of the table (PS_PEER_WORDS words), to be exchanged over every rank of
 * the job (mpi/lifecycle_mpi.c: an allgather inside MPI_Init). */
enum { PID, HOST, START, SIGNAL, COOKIE, RUN0, RUN1 };
void ps_peers_mine(uint64_t mine[PS_PEER_WORDS])
{
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    memset(mine, 0, sizeof(uint64_t) * PS_PEER_WORDS);
    mine[PID] = (uint64_t)getpid();
    mine[HOST] = host_hash(host);
    mine[START] = ps_proc_start_time(getpid());
    mine[SIGNAL] = (uint64_t)ps_peer_signal(); /* (installed by ps_peers_accept_requests) */
    ps_run_id_words(&mine[RUN0], &mine[RUN1]); /* every rank adopts rank 0's run id */
    if (syscall(SYS_getrandom, &mine[COOKIE], sizeof mine[COOKIE], 0) != sizeof mine[COOKIE])
        mine[COOKIE] = ps_clock_monotonic_ns() ^ (uint64_t)getpid() << 32;
}

/* Every rank's entry (all: nranks * PS_PEER_WORDS words, by rank; mine: this rank's): the
 * ranks on this node, the job's cookie and rank 0's run id, which every rank adopts (the ids
 * derived at load time differ between nodes under launchers that give no job id, MPICH's
 * hydra).  The table is kept; 0 if it could not be made. */
int ps_peers_adopt(const uint64_t *all, int nranks, int my_rank)
{
    peer_t *table = calloc((size_t)nranks, sizeof *table);
    if (!table) return 0;
    const uint64_t *mine = all + (size_t)PS_PEER_WORDS * (size_t)my_rank;
    for (int r = 0; r < nranks; r++) {
        const uint64_t *e = all + (size_t)PS_PEER_WORDS * (size_t)r;
        if (r == my_rank || e[HOST] != mine[HOST]) continue;
        table[r].pid = (int)e[PID];
        table[r].start = e[START];
        table[r].signal = (int)e[SIGNAL];
    }
    job_cookie = all[COOKIE];
    ps_run_id_adopt(all[RUN0], all[RUN1]);
    watch = calloc((size_t)nranks, sizeof *watch);   /* (none: no watch, nothing else lost) */
    npeers = nranks;
    peers = table;
    return 1;
}

/* ---- watching them: a peer that dies while the job runs ------------------------------------
 * A rank killed by SIGKILL cannot ask anyone, and MPICH's hydra then SIGKILLs every other rank
 * within 10-40 ms: no rank kept its data (tests/e2e/test_scale_failures.py).  So the control
 * thread (live/control.c) also waits on a pidfd of every peer of the node, and when one ends
 * without a file before this rank reached MPI_Finalize -- no rank can end normally before all
 * of them reach it: pathscope's reduction at MPI_Finalize needs every rank -- this rank
 * writes its file at once, status `ended-by-rank R`, as if asked.  The launcher's kill then
 * finds it written (a race on a node with more ranks than cores). */

/* Fills p (at most max entries) with the pidfds of the peers still watched, rank_of[i] the
 * peer of p[i]; opens those not opened yet (the table appears inside MPI_Init). */
int ps_peers_watch(struct pollfd *p, int *rank_of, int max)
{
    if (!peers || !watch) return 0;
    int n = 0;
    for (int r = 0; r < npeers && n < max; r++) {
        watch_t *w = &watch[r];
        if (!peers[r].pid || w->state == WATCH_DONE) continue;
        if (w->state == WATCH_NOT_YET) {
            /* the pidfd first, then the identity (peer_ask's order): still the process that
             * started then, or it has ended already */
            int fd = (int)syscall(SYS_pidfd_open, peers[r].pid, 0);
            int gone = fd < 0 && errno == ESRCH;
            if (fd >= 0) fd = ps_fd_adopt(fd, &w->own);
            if (fd < 0 && !gone) {
                w->state = WATCH_DONE;      /* (Linux < 5.3, out of descriptors: no watch) */
                continue;
            }
            if (gone || ps_proc_start_time(peers[r].pid) != peers[r].start) {
                ps_peers_watch_ended(r);
                continue;
            }
            w->state = WATCH_ON;
        }
        if (!ps_fd_owned(&w->own)) {        /* (the application closed it: watch no more) */
            w->state = WATCH_DONE;
            continue;
        }
        p[n].fd = w->own.fd;
        p[n].events = POLLIN;
        p[n].revents = 0;
        rank_of[n++] = r;
    }
    return n;
}

int ps_rank_file_written_this_run(int rank); /* output/rankfile.c */

/* Peer r has ended (its pidfd is readable, or it was gone when first looked at).  One that
 * wrote its file ended by a way pathscope saw (a signal it caught, MPI_Abort, an exit: those
 * ask the others themselves when they should -- a launcher stopping the job stops everyone);
 * one without a file died by a signal nobody can catch, SIGKILL. */
void ps_peers_watch_ended(int r)
{
    ps_fd_release(&watch[r].own);
    watch[r].state = WATCH_DONE;
    if (ps_state == PS_RUN_MPI && !ps_rank_file_written_this_run(r)) ps_write_for_peer(r);
}

/* ---- asking and waiting -------------------------------------------------------------------- */
/* Asks peer r to write its file now: 1 if the request was sent. */
static int peer_ask(int r)
{
    const peer_t *p = &peers[r];
    if (!p->signal || !p->start) return 0;
    /* the pidfd first, then the identity check: if the process with that pid is still the
     * one that started at p->start, the pidfd refers to it (it held the pid throughout) */
    int pidfd = (int)syscall(SYS_pidfd_open, p->pid, 0);
    if (pidfd < 0 && errno != ENOSYS) return 0; /* gone */
    int sent = 0;
    if (ps_proc_start_time(p->pid) == p->start && proc_catches(p->pid, p->signal)) {
        siginfo_t si;
        memset(&si, 0, sizeof si);
        si.si_signo = p->signal;
        si.si_code = SI_QUEUE;
        si.si_pid = (pid_t)syscall(SYS_getpid);
        si.si_uid = (uid_t)syscall(SYS_getuid);
        si.si_value.sival_ptr = (void *)(uintptr_t)job_cookie;
        long rc = pidfd >= 0 ? syscall(SYS_pidfd_send_signal, pidfd, p->signal, &si, 0)
                             : syscall(SYS_rt_sigqueueinfo, p->pid, p->signal, &si); /* (Linux < 5.3) */
        sent = rc == 0;
    }
    if (pidfd >= 0) ps_sys_close(pidfd);
    return sent;
}

void ps_notify_peers(int ask)
{
    static int waiting[1 << 12], later[1 << 12];
    if (!peers || !ps_outdir[0]) return;
    int saved_errno = errno;
    int n = 0, nlater = 0;
    for (int r = 0; r < npeers && n < (int)(sizeof waiting / sizeof *waiting); r++) {
        if (!peers[r].pid) continue;
        /* asked: it answers within milliseconds.  Not asked (this rank is being stopped by the
         * launcher, which stops the others too; or exits without MPI_Finalize): it writes
         * when its own ending comes.  A peer that cannot be asked yet may still be between
         * the table's allgather and its handler (the tail of MPI_Init: on a loaded node this
         * rank can send, abort and ask before it gets there): asked again below for up to
         * PEER_LATE_NS; one that never installs the handler (it exec'd, or ignores the
         * signal) is then given up, since it would never write. */
        if (ask && !peer_ask(r)) {
            later[nlater++] = r;
            continue;
        }
        waiting[n++] = r;
    }
    /* wait (at most 3 s) until every one has written its file during this run, or is gone:
     * our death makes some launchers SIGKILL the others.  The bounds are read on the clock,
     * not counted in sleeps: on a node oversubscribed by ranks spinning in MPI a sleep of 2 ms
     * lasts far longer (1500 of them took 17-24 s with 64 MPICH ranks in a barrier on 2
     * cores, tests/e2e/test_scale_failures.py), and the launcher's own ending waits for it. */
    const uint64_t PEER_WAIT_NS = 3000000000ull, PEER_LATE_NS = 1000000000ull;
    const struct timespec sleep_step = {0, 2000000}; /* 2 ms */
    uint64_t start = ps_clock_monotonic_ns(), waited = 0;
    while (waited < PEER_WAIT_NS && n + nlater > 0) {
        for (int i = 0; i < nlater;) {
            int r = later[i];
            int done = waited >= PEER_LATE_NS || ps_proc_start_time(peers[r].pid) != peers[r].start;
            if (!done && peer_ask(r)) {
                waiting[n++] = r;
                done = 1;
            }
            if (done)
                later[i] = later[--nlater];
            else
                i++;
        }
        for (int i = 0; i < n;) {
            int r = waiting[i];
            if (ps_rank_file_written_this_run(r) || ps_proc_start_time(peers[r].pid) != peers[r].start)
                waiting[i] = waiting[--n];
            else
                i++;
        }
        if (n + nlater) nanosleep(&sleep_step, NULL);
        waited = ps_clock_monotonic_ns() - start;
    }
    errno = saved_errno;
}

/* The request signal is blocked while a final rank file is written (with the launch
 * signals): a request arriving meanwhile finds the file written. */
void ps_peer_signal_block(sigset_t *set)
{
    sigaddset(set, ps_peer_signal());
}
