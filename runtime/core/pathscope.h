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

#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define PS_FORMAT_VERSION "2.14"
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
 * ps_ticks_to_ns() takes its rate at its first call, calibrated from the library's load to
 * then: call it first at the end of the run, where the calibration is longest. */
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
const char *ps_program_name(void);
/* Writes this rank's file; status is "complete", "abort N", "signal N", "signal N before-init",
 * "exit-without-finalize", "ended-by-rank R".  Callers hold the final writer.
 * [signal-safe] */
void ps_write_rank_file(const char *status);
void ps_write_rank_file_final(const char *status); /* at MPI_Finalize (rankfile.c) */
/* One writer of a final rank file at a time (MPI_Finalize, MPI_Abort, fatal signals, a peer's
 * request, the destructor): claim (waiting at most 3 s if wait) and release. [signal-safe] */
int ps_final_writer_claim(int wait);
void ps_final_writer_release(void);
/* Before this rank ends the job (output/peers.c): wait (at most 3 s) until the other ranks on
 * this node have written their files, so that our end does not make the launcher SIGKILL
 * them half-way; with ask (a crash or MPI_Abort here) first ask them, with a signal that
 * does not kill them (their handler writes the file and returns). [signal-safe] */
void ps_notify_peers(int ask);
void ps_peer_signal_block(sigset_t *set); /* adds the peers' request signal to set */
int ps_peer_signal(void);                 /* that signal (SIGRTMAX-3) */
/* The table of the job's ranks on this node, made once from an exchange over every rank (the
 * MPI source does it inside MPI_Init): this rank's entry, then every rank's. */
#define PS_PEER_WORDS 7
void ps_peers_mine(uint64_t mine[PS_PEER_WORDS]);
int ps_peers_adopt(const uint64_t *all, int nranks, int my_rank);
/* The control thread's watch of the node's other ranks (output/peers.c): pidfds to poll
 * (struct pollfd), and what to do when one is readable. */
struct pollfd;
int ps_peers_watch(struct pollfd *p, int *rank_of, int max);
void ps_peers_watch_ended(int rank);
void ps_signals_install(void); /* (re)install the fatal-signal handlers in front */
void ps_set_outdir(const char *dir); /* choose the profile directory (not signal-safe) */

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
    int failed;      /* nonzero: output lost (a write to fd failed: its errno) */
} ps_fmt_t;
void ps_fmt_str(ps_fmt_t *f, const char *s);        /* [signal-safe] */
void ps_fmt_tsv(ps_fmt_t *f, const char *s);        /* [signal-safe] escapes \t \n \\ */
void ps_fmt_u64(ps_fmt_t *f, uint64_t v);           /* [signal-safe] */
void ps_fmt_i64(ps_fmt_t *f, int64_t v);            /* [signal-safe] */
void ps_fmt_hex(ps_fmt_t *f, uint64_t v);           /* "0x1a2b" [signal-safe] */
void ps_fmt_char(ps_fmt_t *f, char c);              /* [signal-safe] */
void ps_fmt_flush(ps_fmt_t *f);                     /* [signal-safe] */
void ps_fmt_ranges(ps_fmt_t *f, const int *v, int n); /* "0-3,6,8-12:2" [signal-safe] */
void ps_fmt_ranges_plain(ps_fmt_t *f, const int *v, int n); /* "0-3,6,8,10,12" [signal-safe] */
void ps_fmt_seconds(ps_fmt_t *f, uint64_t ns);      /* "1.2 s" [signal-safe] */
/* The rank files' field separator; and a whole line of unsigned fields, "KEY\tV0\tV1...\n"
 * [signal-safe] */
static inline void ps_fmt_tab(ps_fmt_t *f) { ps_fmt_char(f, '\t'); }
void ps_fmt_line_u64(ps_fmt_t *f, const char *key, const uint64_t *v, int n);

/* ---- warnings (core/warn.c): reported at the end, never printed where they happen ------- */
/* Records a warning: key a stable [a-z0-9-]+ identifier, text one sentence for the user.  A
 * repeated key only counts; the first text and time are kept.  [signal-safe] */
void ps_warn(const char *key, const char *text);
/* The number of processes the launcher says it started (OMPI_COMM_WORLD_SIZE, PMI_SIZE,
 * PMIX_SIZE, SLURM_NTASKS), -1 if none says. */
int ps_launcher_size(void);
int ps_warn_count(const char *key);       /* how often key was recorded [signal-safe] */
void ps_warn_write(ps_fmt_t *f);          /* the rank file's `warning` lines [signal-safe] */
void ps_warn_print(void);                 /* "pathscope: rank R: TEXT" on stderr unless quiet [signal-safe] */

/* ---- descriptors pathscope keeps open in the application (core/ownfd.c) ----------------- */
typedef struct {
    int fd; /* -1: none */
    uint32_t mode;
    uint64_t dev, ino;
} ps_ownfd_t;
/* Moves fd out of the application's way (close-on-exec, at a high number) and records its
 * identity; returns the descriptor to use from now on (own->fd is -1 if fstat failed).
 * [signal-safe] */
int ps_fd_adopt(int fd, ps_ownfd_t *own);
int ps_fd_owned(const ps_ownfd_t *own);   /* still the object we opened? [signal-safe] */
int ps_fd_release(ps_ownfd_t *own);       /* close if still ours (returns 1), forget [signal-safe] */

/* ---- /proc (core/proc.c) --------------------------------------------------------------- */
/* Reads a small file NUL-terminated into buf ("" and -1 if unreadable). [signal-safe] */
long ps_read_small(const char *path, char *buf, size_t cap);
/* Start time of process pid in clock ticks since boot (/proc/PID/stat field 22): with the pid
 * and the boot it names one process for ever.  0: gone, a zombie, or unreadable. [signal-safe] */
uint64_t ps_proc_start_time(int pid);

/* ---- run identity (core/runid.c) -------------------------------------------------------- */
/* 32 lowercase hex digits, the same in every rank of one job: derived at load time from the
 * launcher's job identity, replaced by rank 0's inside MPI_Init (docs/format.md, "Run
 * identity").  target_pid: the first process of the run (PATHSCOPE_PID). */
extern char ps_run_id[33];
void ps_run_id_init(int launched, long target_pid);
void ps_run_id_adopt(uint64_t hi, uint64_t lo); /* rank 0's, inside MPI_Init */
void ps_run_id_words(uint64_t *hi, uint64_t *lo);

/* ---- the profile directory and the files in it (output/outdir.c) ----------------------- */
/* ps_outdir_open: opens (creating what is missing) the profile directory and its ranks/ once
 * as directory descriptors and checks them: not a symbolic link, owned by us or root, not
 * writable by others unless sticky, a path short enough for every file we create under it.
 * With PS_OUTDIR_CHECK_RUNS it also refuses a directory holding another run's files, or
 * with PS_OUTDIR_FORCE deletes them.  Returns 0, or an error code (ps_error_text) with one
 * line in err (nothing created when the directory is refused).  [signal-safe] */
#define PS_OUTDIR_CHECK_RUNS 1
#define PS_OUTDIR_FORCE 2
int ps_outdir_open(const char *dir, int flags, char *err, size_t errlen);
/* Creates a new directory named base (or base.1, base.2, ... if taken) in the working
 * directory and opens it; the name used is left in base.  0 or an errno.  [signal-safe] */
int ps_outdir_create_fresh(char *base, size_t cap);
/* The directory could not be opened (inside MPI_Init): every file is reported as not
 * written for this reason (an errno). */
void ps_outdir_unusable(int error);
int ps_outdir_ranks_fd(void); /* ranks/ (identity checked) or -1 [signal-safe] */
const char *ps_outdir_path(void); /* the directory's absolute path, as opened */

/* One file of the profile: created under an unpredictable temporary name next to its final
 * name (O_EXCL|O_NOFOLLOW), renamed into place when complete, removed on failure (the
 * previous version of the file stays).  Failures are recorded per file and printed by
 * ps_outfile_report() at the end of the run.  [signal-safe] */
enum { PS_FILE_RANK, PS_FILE_PROFILE, PS_FILE_TREE, PS_FILE_RANKS, PS_FILE_COUNT };
/* an error of ranks.tsv (mpi/ranksfile.c): some rank could not open or write it */
#define PS_ERR_COLLECTIVE (-11)
typedef struct {
    int file;           /* PS_FILE_* */
    int dirfd, fd;
    char name[40];      /* the final name in its directory */
    char tmp[64];
    ps_ownfd_t own;
} ps_outfile_t;
int ps_outfile_begin(ps_outfile_t *o, int file, const char *name); /* fd, or -1 (recorded) */
int ps_outfile_end(ps_outfile_t *o, int write_error);              /* 0 or the errno */
int ps_outfile_error(int file);     /* errno of the file's last failed write, 0 if none */
void ps_outfile_report(int rank);   /* "pathscope: rank R: profile not written: ..." once per failure */
const char *ps_error_text(int error); /* strerror, and pathscope's own reasons [signal-safe] */
/* The end-of-run notice, unless quiet (not signal-safe): has_profile when the run writes a
 * profile.tsv, profile_error its error; failed: the ranks whose rank file was not written. */
void ps_outdir_notice(int has_profile, int profile_error, const int *failed, int nfailed, int nranks);

/* ---- the call trees reduced over the ranks (output/treemerge.c, mpi/treereduce.c) ------ */
/* A block: the records of world ranks [lo, hi) as one encoded tree (treemerge.c says how). */
typedef struct { uint8_t *data; size_t len; uint32_t lo, hi; } ps_tblock_t;
/* One rank's block from its rank-file text; 0, or -1 (out of memory, a line that breaks the
 * format).  Not signal-safe (allocates). */
int ps_tree_encode(const char *text, size_t len, int rank, ps_tblock_t *out);
/* a and b of adjacent ranges (a->hi == b->lo) merged into out (a new allocation); 0 or -1. */
int ps_tree_merge(const ps_tblock_t *a, const ps_tblock_t *b, ps_tblock_t *out);
/* What the reduction cost rank 0 (tree.tsv's `reduction` line): ns from its start to the
 * last merge, rounds, the most bytes of blocks it held at once. */
typedef struct { uint64_t ns, rounds, peak_bytes; } ps_treecost_t;
/* --per-rank summary: every rank's value of every column of the heaviest paths (by inclusive
 * time over the ranks).  A path is named by a hash of its keys from its root. */
#define PS_RANKVEC_PATHS 64
#define PS_TREE_NODE_COLUMNS 27   /* the columns of call-tree nodes (treemerge.c) */
typedef struct { uint64_t hash; uint32_t cols; } ps_tpath_t;   /* cols: a bit per column */
int ps_tree_top_paths(const ps_tblock_t *all, ps_tpath_t *out, int max);   /* how many */
size_t ps_tree_path_width(const ps_tpath_t *paths, int n);    /* values per rank */
/* this rank's values of those paths' columns (0 where it has no such path), from its own block */
void ps_tree_path_values(const ps_tblock_t *own, const ps_tpath_t *paths, int n, uint64_t *out);
typedef struct {
    const ps_tpath_t *paths;
    int n;
    const uint64_t *values;   /* [rank][width] */
} ps_rankvec_t;
/* tree.tsv's lines for the block of all ranks, [0, P); cost NULL: no `reduction` line; rv
 * NULL: no `rankvec` lines. */
void ps_tree_write(ps_fmt_t *f, const ps_tblock_t *all, const ps_treecost_t *cost,
                   const ps_rankvec_t *rv);
/* The rank file's text as written at MPI_Finalize (rankfile.c keeps it in a memory file for
 * the reduction): its bytes (NULL if none) and length. */
const char *ps_rank_text(size_t *len);
/* The reduction is over (reduced: tree.tsv was written; collected: the text is in ranks.tsv):
 * the text goes to ranks/ unless it was collected, or reduced and --per-rank is not all (then
 * no later ending writes a rank file either), and is released.  0 or the errno of the rank
 * file's write. */
int ps_rank_text_done(int reduced, int collected);
/* MPI_Finalize's text is kept and in none of the files yet: a signal's ending or a peer's
 * request writes it to ranks/ (ps_write_rank_file).  [signal-safe] */
int ps_rank_text_pending(void);
int ps_per_rank_all(void);           /* --per-rank all: every rank keeps its own file */

#endif
