/* The end of the run: one routine, ps_run_end(), for the seven ways a run ends (MPI_Finalize,
 * MPI_Abort, a fatal signal, a peer's request, and the destructor's three: the heap's
 * rewrite, a process that never called MPI_Init, a rank that never called MPI_Finalize).
 * Each way is a fixed script of core steps (below); at each of the four phases every
 * source's end hook runs (core/source.h) and decides what it does for that ending.
 *
 * [signal-safe] for PS_END_SIGNAL and PS_END_PEER (the fatal-signal handler and the peers'
 * request handler): their scripts use only atomics, raw system calls and static buffers, and
 * the sources' end hooks are [signal-safe] for them.  The others may wait and allocate
 * (closing samples, the MPI reduction). */
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "pathscope.h"
#include "ending.h"

/* One writer of a final rank file at a time, whichever ending runs it: they share the
 * writer's static buffers.  0 idle, 1 writing. */
static atomic_int final_writer;

/* Claims the writer; when it is busy, waits (at most 3 s) if wait is set.  1: claimed.
 * [signal-safe] */
int ps_final_writer_claim(int wait)
{
    struct timespec ms = {0, 1000000};
    for (int i = 0;; i++) {
        int idle = 0;
        if (atomic_compare_exchange_strong(&final_writer, &idle, 1)) return 1;
        if (!wait || i >= 3000) return 0;
        nanosleep(&ms, NULL);
    }
}

void ps_final_writer_release(void) { atomic_store(&final_writer, 0); }

static volatile sig_atomic_t rank_file_written_final;
static volatile sig_atomic_t fatal_written; /* by a fatal signal: later ones do not rewrite */
static volatile sig_atomic_t peer_written;  /* on a peer's request (output/peers.c) */

void ps_mark_final_written(void) { rank_file_written_final = 1; }

/* The signals a launcher sends to stop a job, blocked while a final rank file is written:
 * delivered afterwards, they find the file complete. */
void ps_block_async_signals(sigset_t *saved)
{
    sigset_t block;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGQUIT);
    ps_peer_signal_block(&block); /* a peer's request finds the file written */
    pthread_sigmask(SIG_BLOCK, &block, saved);
}

typedef enum {
    END,               /* end of a script */
    END_TIME,          /* ps_end_ns: the run's wall time stops */
    NOMPI_PREPARE,     /* a process without MPI: its directory and rank */
    HOOKS_BEGIN, HOOKS_BLOCKED, HOOKS_HELD, HOOKS_DONE, /* the sources' end hooks */
    BLOCK, UNBLOCK,    /* the launch signals (ps_block_async_signals) */
    CLAIM_WAIT,        /* the writer, waiting at most 3 s; written even if the wait failed */
    CLAIM_OR_STOP,     /* the writer if idle, else stop (a request answered later, or never) */
    CLAIM_OR_WAIT_STOP,/* the writer if idle, else wait for the other write, then stop */
    GUARD_UNWRITTEN,   /* stop if a final file was written */
    GUARD_PEER,        /* stop unless an MPI run whose file nobody wrote */
    GUARD_SIGNAL,      /* same, also before MPI_Init or without MPI; sets the status */
    STATE_FINISHED,    /* ps_state: nothing is recorded any more */
    WRITE,             /* the rank file */
    MARK_FINAL, MARK_FATAL, MARK_PEER,
    REPORT,            /* "pathscope: rank R: profile not written: ..." */
    NOTIFY_ASK, NOTIFY_WAIT, NOTIFY_SIGNAL, /* ps_notify_peers(1 / 0 / a crash) */
    RELEASE,           /* the writer, if claimed; a stop before it skips to it */
    NOTICE,            /* the one-line notice of a process without MPI (launcher rank <= 0) */
    WARN_PRINT,
} end_step;

static const end_step *const scripts[] = {
    [PS_END_FINALIZE] = (const end_step[]){
        END_TIME, HOOKS_BEGIN, BLOCK, HOOKS_BLOCKED, CLAIM_WAIT, WRITE, MARK_FINAL, HOOKS_HELD,
        RELEASE, UNBLOCK, HOOKS_DONE, REPORT, WARN_PRINT, END},
    [PS_END_ABORT] = (const end_step[]){
        HOOKS_BEGIN, BLOCK, HOOKS_BLOCKED, CLAIM_WAIT, STATE_FINISHED, WRITE, MARK_FINAL,
        HOOKS_HELD, REPORT, NOTIFY_ASK, RELEASE, UNBLOCK, HOOKS_DONE, END},
    [PS_END_SIGNAL] = (const end_step[]){
        CLAIM_OR_WAIT_STOP, NOMPI_PREPARE, GUARD_SIGNAL, HOOKS_BEGIN, HOOKS_BLOCKED, WRITE,
        HOOKS_HELD, REPORT, MARK_FATAL, NOTIFY_SIGNAL, RELEASE, HOOKS_DONE, END},
    [PS_END_PEER] = (const end_step[]){
        CLAIM_OR_STOP, GUARD_PEER, HOOKS_BEGIN, HOOKS_BLOCKED, WRITE, HOOKS_HELD, MARK_PEER,
        RELEASE, HOOKS_DONE, END},
    [PS_END_EXIT] = (const end_step[]){
        GUARD_UNWRITTEN, HOOKS_BEGIN, BLOCK, HOOKS_BLOCKED, CLAIM_WAIT, WRITE, HOOKS_HELD,
        REPORT, MARK_FINAL, NOTIFY_WAIT, RELEASE, UNBLOCK, HOOKS_DONE, END},
    [PS_END_EXIT_NOMPI] = (const end_step[]){
        GUARD_UNWRITTEN, END_TIME, NOMPI_PREPARE, HOOKS_BEGIN, BLOCK, HOOKS_BLOCKED, CLAIM_WAIT,
        WRITE, MARK_FINAL, HOOKS_HELD, RELEASE, UNBLOCK, HOOKS_DONE, REPORT, NOTICE,
        WARN_PRINT, END},
    [PS_END_EXIT_REWRITE] = (const end_step[]){
        HOOKS_BEGIN, BLOCK, HOOKS_BLOCKED, CLAIM_WAIT, WRITE, HOOKS_HELD, RELEASE, UNBLOCK,
        HOOKS_DONE, REPORT, END},
};

/* The process never called MPI_Init and is the one pathscope was started for. */
static int nompi_now(void)
{
    return ps_state == PS_RUN_STARTED && ps_nompi_target() && ps_launcher_rank() < 0;
}

static int nothing_written(void) { return !rank_file_written_final && !fatal_written && !peer_written; }

/* status: the file's; for GUARD_SIGNAL, "signal N" to complete; crash: NOTIFY_SIGNAL asks. */
static void run_end(ps_end_how how, const char *status, int crash)
{
    static char signal_status[64]; /* (written with the writer held) */
    sigset_t saved;
    int claimed = 0, stop = 0;
    for (const end_step *s = scripts[how]; *s != END; s++) {
        if (stop && *s != RELEASE) continue; /* a stop skips to the release, and ends there */
        switch (*s) {
        case END: break;
        case END_TIME: ps_end_ns = ps_clock_monotonic_ns(); break;
        case NOMPI_PREPARE:
            /* (the signal's script: only when it is that process) */
            if (how != PS_END_SIGNAL || nompi_now()) ps_nompi_prepare();
            break;
        case HOOKS_BEGIN: ps_sources_end(how, PS_END_BEGIN); break;
        case HOOKS_BLOCKED: ps_sources_end(how, PS_END_BLOCKED); break;
        case HOOKS_HELD: ps_sources_end(how, PS_END_HELD); break;
        case HOOKS_DONE: ps_sources_end(how, PS_END_DONE); break;
        case BLOCK: ps_block_async_signals(&saved); break;
        case UNBLOCK: pthread_sigmask(SIG_SETMASK, &saved, NULL); break;
        case CLAIM_WAIT: claimed = ps_final_writer_claim(1); break;
        case CLAIM_OR_STOP:
            claimed = ps_final_writer_claim(0);
            stop = !claimed;
            break;
        case CLAIM_OR_WAIT_STOP:
            /* a second fatal signal (another thread, or the launcher repeating itself) waits
             * for the first one's write instead of killing the process half-way */
            claimed = ps_final_writer_claim(0);
            if (!claimed && ps_final_writer_claim(1)) ps_final_writer_release();
            stop = !claimed;
            break;
        case GUARD_UNWRITTEN: stop = rank_file_written_final; break;
        /* (MPI_Finalize's text not yet in the reduced files is written too) */
        case GUARD_PEER:
            stop = !((ps_state == PS_RUN_MPI && nothing_written()) || ps_rank_text_pending());
            break;
        case GUARD_SIGNAL: {
            int before_init = ps_state == PS_RUN_STARTED && ps_launcher_rank() >= 0 && ps_outdir[0];
            stop = !((ps_state == PS_RUN_MPI || before_init || nompi_now()) && nothing_written()) &&
                   !ps_rank_text_pending();
            if (stop) break;
            ps_fmt_t f = {signal_status, 0, sizeof signal_status - 1, -1, 0};
            ps_fmt_str(&f, status);
            if (before_init) {
                ps_fmt_str(&f, " before-init"); /* MPI_Init had not returned: no MPI data */
                ps_world_rank = ps_launcher_rank();
            }
            signal_status[f.len] = 0;
            status = signal_status;
            break;
        }
        case STATE_FINISHED: ps_state = PS_RUN_FINISHED; break;
        case WRITE:
            if (how == PS_END_FINALIZE) ps_write_rank_file_final(status);
            else ps_write_rank_file(status);
            break;
        case MARK_FINAL: rank_file_written_final = 1; break;
        case MARK_FATAL: fatal_written = 1; break;
        case MARK_PEER: peer_written = 1; break;
        case REPORT: ps_outfile_report(ps_reported_rank()); break;
        /* a crash or an abort here: the others on this node write theirs now (the launcher is
         * about to kill them); a launch signal stops them too, and a rank leaving without
         * MPI_Finalize makes some launchers kill the others: they write when their own
         * ending comes, we wait for them */
        case NOTIFY_ASK: ps_notify_peers(1); break;
        case NOTIFY_WAIT: ps_notify_peers(0); break;
        case NOTIFY_SIGNAL: ps_notify_peers(crash); break;
        case RELEASE:
            if (claimed) ps_final_writer_release();
            claimed = 0;
            if (stop) return;
            break;
        case NOTICE:
            if (ps_launcher_rank() <= 0) {
                int me = ps_reported_rank();
                ps_outdir_notice(0, 0, &me, ps_outfile_error(PS_FILE_RANK) ? 1 : 0, 1);
            }
            break;
        case WARN_PRINT: ps_warn_print(); break;
        }
    }
}

void ps_run_end(ps_end_how how, const char *status) { run_end(how, status, 1); }

/* Whether a stop signal (TERM, INT, QUIT) is the launcher stopping the whole job, which stops
 * the other ranks too (each writes its own file): sent by the kernel (a terminal's ^C reaches
 * the process group) or by our parent, the launcher's process that started this rank (mpirun,
 * orted, hydra_pmi_proxy, slurmstepd: `pathscope run` execs the program).  From anyone else
 * (`kill PID`, a watchdog) it ends this rank alone, and the launcher then kills the others at
 * once -- MPICH's hydra with SIGKILL, which lost every other rank's file at 64 ranks
 * (tests/e2e/test_scale_failures.py) -- so this rank asks them first, as a crash does.
 * [signal-safe] */
static int stop_from_launcher(const siginfo_t *info)
{
    return !info || info->si_code > 0 || info->si_pid == getppid();
}

void ps_run_end_signal(int sig, const siginfo_t *info)
{
    char status[32] = "signal ";
    ps_fmt_t f = {status + 7, 0, sizeof status - 8, -1, 0};
    ps_fmt_u64(&f, (uint64_t)sig);
    status[7 + f.len] = 0;
    int stop = sig == SIGTERM || sig == SIGINT || sig == SIGQUIT;
    run_end(PS_END_SIGNAL, status, !stop || !stop_from_launcher(info));
}
