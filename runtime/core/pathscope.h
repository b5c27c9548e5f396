/* pathscope runtime: internal interfaces shared by the core, the sources and the writer.
 *
 * Contract for everything declared here:
 *  - Functions marked [signal-safe] may be called from a signal handler: they use no malloc,
 *    no locks, no stdio.  Everything else may allocate but never prints or exits from a hot
 *    path: problems are counted in ps_counters and reported at the end of the run.
 *  - The runtime is C11 and depends only on libc and the MPI library it was built against.
 */
#ifndef PATHSCOPE_H
#define PATHSCOPE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define PS_FORMAT_VERSION "2.3"
#define PS_VERSION "0.1.0"
#define PS_PATH_MAX 4096

/* ---- options (core/options.def is the one table) ---------------------------------------- */
typedef enum { PS_KIND_PATH, PS_KIND_BOOL, PS_KIND_ENUM, PS_KIND_INT, PS_KIND_LIST } ps_option_kind;

typedef struct {
#define PS_OPTION(field, env, kind, def, accepted, doc) char field[PS_PATH_MAX];
#include "options.def"
#undef PS_OPTION
} ps_options_t;

extern ps_options_t ps_options;
int ps_option_on(const char *value); /* "on" -> 1 */

/* ---- clock ----------------------------------------------------------------------------- */
/* Ticks come from the invariant TSC where the CPU has one, else from CLOCK_MONOTONIC in ns.
 * ps_ticks_to_ns() is exact only after ps_clock_finish(); it is calibrated over the whole run. */
extern int ps_clock_uses_tsc;
static inline uint64_t ps_now(void)
{
#if defined(__x86_64__)
    if (ps_clock_uses_tsc) {
        uint32_t lo, hi;
        __asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
        return ((uint64_t)hi << 32) | lo;
    }
#endif
    extern uint64_t ps_clock_monotonic_ns(void);
    return ps_clock_monotonic_ns();
}
void ps_clock_init(void);
uint64_t ps_clock_monotonic_ns(void);    /* [signal-safe] */
double ps_ticks_per_ns(void);            /* [signal-safe] calibrated from start to now */
uint64_t ps_ticks_to_ns(uint64_t ticks); /* [signal-safe] */

/* ---- run state ------------------------------------------------------------------------- */
typedef enum {
    PS_RUN_STARTED = 0,  /* library loaded, MPI not (yet) initialised */
    PS_RUN_MPI = 1,      /* MPI initialised and recording (unless paused) */
    PS_RUN_FINISHED = 2, /* MPI_Finalize reached: wrappers pass through */
} ps_run_state;

extern volatile int ps_state;   /* ps_run_state */
extern volatile int ps_paused;  /* MPI_Pcontrol(0) */
extern int ps_threaded;         /* MPI_THREAD_MULTIPLE was granted: take the lock */
extern int ps_world_rank, ps_world_size;
extern char ps_outdir[PS_PATH_MAX];
extern uint64_t ps_start_ns, ps_start_realtime_ns;
extern uint64_t ps_end_ns; /* monotonic time at MPI_Finalize entry, 0 before */
uint64_t ps_wall_ns(void); /* library load to MPI_Finalize entry (or now) [signal-safe] */

/* Problems counted instead of printed; the writer reports them. */
typedef struct {
    _Atomic uint64_t unknown_requests;   /* completion of a request we never saw created */
    _Atomic uint64_t request_table_full; /* a request could not be tracked */
    _Atomic uint64_t comm_table_full;    /* a communicator could not be registered */
    _Atomic uint64_t unknown_comms;      /* a call on a communicator we never saw created */
    _Atomic uint64_t alloc_failures;
    _Atomic uint64_t write_errors;
    _Atomic uint64_t sampler_failures;   /* a thread's sampling timer could not be started */
    _Atomic uint64_t unwind_unavailable; /* the unwinder could not start (no /proc/self/maps): no call paths */
} ps_counters_t;
extern ps_counters_t ps_counters;

/* Per-thread re-entry guard: a wrapper called from inside another wrapper (e.g. a Fortran
 * binding that calls the C MPI_ function, or MPI calling itself) passes straight through. */
extern __thread int ps_in_wrapper __attribute__((tls_model("initial-exec")));
/* ps_in_wrapper >= PS_IN_UNTIMED: inside the untimed (counted-only) MPI operation
 * ps_in_wrapper - PS_IN_UNTIMED; a sample landing there is that call's time. */
#define PS_IN_UNTIMED 2

/* lifecycle.c */
void ps_lifecycle_ensure_init(void);
const char *ps_program_name(void);
/* Writes this rank's file; status is "complete", "abort N", "signal N", "signal N before-init",
 * "exit-without-finalize".
 * [signal-safe] */
void ps_write_rank_file(const char *status);
/* Before this rank dies: wait (at most 3 s) until the other ranks on this node have written
 * their files, so that our death does not make the launcher SIGKILL them half-way; with
 * send_signal (a crash or MPI_Abort here) first ask them with SIGTERM. [signal-safe] */
void ps_notify_peers(int send_signal);
void ps_signals_install(void); /* (re)install the fatal-signal handlers in front */
void ps_set_outdir(const char *dir); /* choose the profile directory (not signal-safe) */
int ps_prepare_outdir(const char *dir, char *err, size_t errlen);

/* ---- raw system calls ------------------------------------------------------------------ */
/* Code that may run in a signal handler calls the kernel directly: the libc entry points
 * open/read/write/close/rename can be interposed by other tools (I/O tracers such as Darshan
 * take locks and allocate in theirs).  [signal-safe] */
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>
static inline int ps_sys_open(const char *path, int flags, int mode)
{
    return (int)syscall(SYS_openat, AT_FDCWD, path, flags, mode);
}
static inline long ps_sys_read(int fd, void *buf, size_t n) { return syscall(SYS_read, fd, buf, n); }
static inline long ps_sys_write(int fd, const void *buf, size_t n) { return syscall(SYS_write, fd, buf, n); }
static inline int ps_sys_close(int fd) { return (int)syscall(SYS_close, fd); }
static inline int ps_sys_rename(const char *from, const char *to)
{
    return (int)syscall(SYS_renameat, AT_FDCWD, from, AT_FDCWD, to);
}

/* ---- async-signal-safe text formatting (core/fmt.c) ---------------------------------- */
typedef struct {
    char *buf;
    size_t len, cap;
    int fd;          /* when >= 0, full buffers are flushed to fd */
    int failed;
} ps_fmt_t;
void ps_fmt_str(ps_fmt_t *f, const char *s);        /* [signal-safe] */
void ps_fmt_tsv(ps_fmt_t *f, const char *s);        /* [signal-safe] escapes \t \n \\ */
void ps_fmt_u64(ps_fmt_t *f, uint64_t v);           /* [signal-safe] */
void ps_fmt_i64(ps_fmt_t *f, int64_t v);            /* [signal-safe] */
void ps_fmt_char(ps_fmt_t *f, char c);              /* [signal-safe] */
void ps_fmt_flush(ps_fmt_t *f);                     /* [signal-safe] */
void ps_fmt_ranges(ps_fmt_t *f, const int *v, int n); /* "0-3,6,8-9" [signal-safe] */

#endif
