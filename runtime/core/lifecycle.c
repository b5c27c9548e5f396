/* Process lifecycle: option validation at load time, the profile directory, fatal-signal and
 * exit handling.  Runs inside the application: the constructor may print one error line and
 * exit(2) for invalid configuration (before main, so before any computation); nothing else
 * here prints except the final one-line notice.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pathscope.h"
#include "cct.h"
#include "source.h"
#include "ending.h"

ps_options_t ps_options;
volatile int ps_state = PS_RUN_STARTED;
volatile int ps_paused;
int ps_threaded;
int ps_world_rank = -1, ps_world_size = 0;
char ps_outdir[PS_PATH_MAX];
uint64_t ps_start_ns, ps_start_realtime_ns, ps_end_ns;

uint64_t ps_wall_ns(void) { return (ps_end_ns ? ps_end_ns : ps_clock_monotonic_ns()) - ps_start_ns; }
ps_counters_t ps_counters;
__thread int ps_in_wrapper __attribute__((tls_model("initial-exec")));

static char program_name[256] = "program";
static int launcher_rank = -1; /* the rank the launcher told us, before MPI_Init */
static int launcher_size = -1; /* and the number of processes it started */
/* A process that never calls MPI_Init writes a one-rank profile at its end when it is the
 * process pathscope was started for: the first to load the library (PATHSCOPE_PID), not its
 * children, not launchers. */
static int nompi_target;
static char nompi_outdir[PS_PATH_MAX];

typedef struct {
    const char *env, *def, *accepted;
    ps_option_kind kind;
    char *value;
} option_desc_t;

static option_desc_t option_table[] = {
#define PS_OPTION(field, env, kind, def, accepted, doc) {env, def, accepted, kind, ps_options.field},
#include "options.def"
#undef PS_OPTION
};
#define N_OPTIONS (sizeof option_table / sizeof option_table[0])

int ps_option_on(const char *value) { return strcmp(value, "on") == 0; }

const char *ps_program_name(void) { return program_name; }

static void die_config(const char *fmt, const char *a, const char *b)
{
    /* one write: the ranks of a job refuse at the same moment, into one stream */
    static char line[2 * PS_PATH_MAX + 1024];
    int n = snprintf(line, sizeof line - 1, "pathscope: ");
    int m = snprintf(line + n, sizeof line - 1 - (size_t)n, fmt, a, b);
    n += m > 0 ? m : 0;
    if (n > (int)sizeof line - 2) n = (int)sizeof line - 2;
    line[n++] = '\n';
    ssize_t w = write(2, line, (size_t)n);
    (void)w;
    exit(2);
}

static int accepted_value(const char *accepted, const char *v)
{
    size_t n = strlen(v);
    for (const char *p = accepted; p && *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && strncmp(p, v, n) == 0) return 1;
        p = bar ? bar + 1 : NULL;
    }
    return 0;
}

static int accepted_int(const char *accepted, const char *v)
{
    if (!*v || strspn(v, "0123456789") != strlen(v) || strlen(v) > 9) return 0;
    long x = atol(v);
    for (const char *p = accepted; p && *p;) {
        long lo = atol(p), hi = lo;
        const char *bar = strchr(p, '|'), *dash = strchr(p, '-');
        if (dash && (!bar || dash < bar)) hi = atol(dash + 1);
        if (x >= lo && x <= hi) return 1;
        p = bar ? bar + 1 : NULL;
    }
    return 0;
}

/* "key=value,key=value" with keys and values from accepted "k1|k2=v1|v2". */
static int accepted_list(const char *accepted, const char *v)
{
    const char *eq = strchr(accepted, '=');
    if (!eq) return 0;
    char keys[512], item[256];
    snprintf(keys, sizeof keys, "%.*s", (int)(eq - accepted), accepted);
    for (const char *p = v; p && *p;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        snprintf(item, sizeof item, "%.*s", (int)len, p);
        char *sep = strchr(item, '=');
        if (!sep) return 0;
        *sep = 0;
        if (!accepted_value(keys, item) || !accepted_value(eq + 1, sep + 1)) return 0;
        p = comma ? comma + 1 : NULL;
    }
    return 1;
}

static int option_value_ok(const option_desc_t *o, const char *v)
{
    switch (o->kind) {
    case PS_KIND_PATH: return 1;
    case PS_KIND_INT: return accepted_int(o->accepted, v);
    case PS_KIND_LIST: return accepted_list(o->accepted, v);
    default: return accepted_value(o->accepted, v);
    }
}

/* Every PATHSCOPE_* variable must be a known option with a valid value. */
static void options_load(void)
{
    extern char **environ;
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const char *v = getenv(option_table[i].env);
        snprintf(option_table[i].value, PS_PATH_MAX, "%s", v ? v : option_table[i].def);
        if (v && !option_value_ok(&option_table[i], v))
        {
            char what[256];
            snprintf(what, sizeof what, "%s (accepted: %s)", option_table[i].env,
                     option_table[i].accepted);
            die_config("invalid value '%s' for %s", v, what);
        }
    }
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, "PATHSCOPE_", 10) != 0) continue;
        size_t len = strcspn(*e, "=");
        int known = 0;
        for (size_t i = 0; i < N_OPTIONS; i++)
            if (strlen(option_table[i].env) == len && strncmp(option_table[i].env, *e, len) == 0) known = 1;
        if (!known) {
            char name[128], list[1024] = "";
            snprintf(name, sizeof name, "%.*s", (int)len, *e);
            for (size_t i = 0; i < N_OPTIONS; i++)
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
                         option_table[i].env);
            die_config("unknown option %s (known: %s)", name, list);
        }
    }
}

void ps_set_outdir(const char *dir) { snprintf(ps_outdir, sizeof ps_outdir, "%s", dir); }

static void read_program_name(void)
{
    char buf[PS_PATH_MAX];
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return;
    buf[n] = 0;
    const char *base = strrchr(buf, '/');
    snprintf(program_name, sizeof program_name, "%s", base ? base + 1 : buf);
    /* an interpreter running a script: name the script (python3 app.py -> app.py) */
    size_t first = strlen(buf) + 1;
    if ((strncmp(program_name, "python", 6) == 0) && (ssize_t)first < n && buf[first] != '-') {
        base = strrchr(buf + first, '/');
        snprintf(program_name, sizeof program_name, "%s", base ? base + 1 : buf + first);
    }
}

static void after_fork_in_child(void);

/* The profile of a program that never initialised MPI: one rank (the launcher's rank if a
 * launcher started it, else 0), in a new directory named at start (or its .1, .2, ... if that
 * name was taken since).  [signal-safe]: raw system calls and string copies only. */
void ps_nompi_prepare(void)
{
    if (!ps_outdir[0]) {
        static char name[PS_PATH_MAX], err[PS_PATH_MAX + 256];
        size_t n = strlen(nompi_outdir);
        if (n + 8 >= sizeof name) return;
        memcpy(name, nompi_outdir, n + 1);
        int rc = ps_outdir_create_fresh(name, sizeof name);
        if (rc == 0) rc = ps_outdir_open(name, 0, err, sizeof err);
        if (rc) ps_outdir_unusable(rc); /* reported with the rank file at the end */
        memcpy(ps_outdir, name, strlen(name) + 1);
    }
    ps_world_rank = launcher_rank >= 0 ? launcher_rank : 0;
    if (ps_world_size <= 0) ps_world_size = launcher_size > ps_world_rank ? launcher_size : 1;
}

int ps_reported_rank(void) { return ps_world_rank >= 0 ? ps_world_rank : launcher_rank >= 0 ? launcher_rank : 0; }
int ps_launcher_rank(void) { return launcher_rank; }
int ps_nompi_target(void) { return nompi_target; }

/* ---- fatal signals ---------------------------------------------------------------------- */
static const int fatal_signals[] = {SIGTERM, SIGINT, SIGSEGV, SIGBUS, SIGFPE, SIGABRT, SIGQUIT};
#define N_FATAL (sizeof fatal_signals / sizeof fatal_signals[0])
static struct sigaction previous_action[N_FATAL];

/* Another rank of this node is ending the job (MPI_Abort or a crash) and asks for our file
 * before the launcher kills us: written with status "ended-by-rank R", and the process goes
 * on (until the launcher stops it, or to MPI_Finalize, which writes the file again).  A file
 * already written, or being written, is left alone. [signal-safe: the request handler] */
void ps_write_for_peer(int from_rank)
{
    char status[40] = "ended-by-rank "; /* (on this handler's stack: requests may overlap) */
    ps_fmt_t f = {status + 14, 0, 20, -1, 0};
    ps_fmt_u64(&f, (uint64_t)from_rank);
    status[14 + f.len] = 0;
    ps_run_end(PS_END_PEER, status);
}

static void on_fatal_signal(int sig, siginfo_t *info, void *context)
{
    static volatile sig_atomic_t passes[65];
    ps_run_end_signal(sig, info); /* the rank file, once; a second signal waits for it */
    /* Hand the signal on to the handler that was there before us (the application's or the
     * MPI library's).  If it returns we return too (a graceful-shutdown handler), except for
     * a fault that comes back: then the default action. */
    int synchronous = sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE;
    for (size_t i = 0; i < N_FATAL; i++) {
        if (fatal_signals[i] != sig) continue;
        struct sigaction *old = &previous_action[i];
        if (synchronous && passes[sig]++) break;
        if (old->sa_flags & SA_SIGINFO) {
            if (old->sa_sigaction) { old->sa_sigaction(sig, info, context); return; }
        } else if (old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN) {
            old->sa_handler(sig);
            return;
        }
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Installs our handler in front of whatever is there; called at load time and again after
 * MPI_Init (MPI libraries install their own crash handlers, which we then chain to). */
void ps_signals_install(void)
{
    if (!ps_option_on(ps_options.signals)) return;
    for (size_t i = 0; i < N_FATAL; i++) {
        struct sigaction sa, cur;
        sigaction(fatal_signals[i], NULL, &cur);
        if (cur.sa_flags & SA_SIGINFO && cur.sa_sigaction == on_fatal_signal) continue;
        if (!(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == SIG_IGN) continue; /* nohup */
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_fatal_signal;
        sigemptyset(&sa.sa_mask);
        for (size_t j = 0; j < N_FATAL; j++) sigaddset(&sa.sa_mask, fatal_signals[j]);
        ps_peer_signal_block(&sa.sa_mask);
        sa.sa_flags = SA_SIGINFO; /* stays installed: a second signal in another thread waits */
        previous_action[i] = cur;
        sigaction(fatal_signals[i], &sa, NULL);
    }
}

/* Runs after every atexit handler (library destructors run from _dl_fini), so an
 * MPI_Finalize called from the application's atexit handler has already been seen. */
__attribute__((destructor)) static void pathscope_fini(void)
{
    if (ps_state == PS_RUN_FINISHED && ps_sources_rewrite_at_exit())
        ps_run_end(PS_END_EXIT_REWRITE, "complete");
    else if (ps_state == PS_RUN_STARTED && nompi_target)
        ps_run_end(PS_END_EXIT_NOMPI, "complete");
    else if (ps_state == PS_RUN_MPI)
        ps_run_end(PS_END_EXIT, "exit-without-finalize");
}

int ps_launcher_size(void) { return launcher_size; }

__attribute__((constructor)) static void pathscope_init(void)
{
    ps_clock_init();
    ps_start_ns = ps_clock_monotonic_ns();
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ps_start_realtime_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    read_program_name();
    options_load();
    static const char *rank_vars[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof rank_vars / sizeof *rank_vars && launcher_rank < 0; i++)
        if (getenv(rank_vars[i])) launcher_rank = atoi(getenv(rank_vars[i]));
    static const char *size_vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_NTASKS"};
    for (size_t i = 0; i < sizeof size_vars / sizeof *size_vars && launcher_size < 0; i++)
        if (getenv(size_vars[i])) launcher_size = atoi(getenv(size_vars[i]));
    char self[32];
    snprintf(self, sizeof self, "%ld", (long)getpid());
    if (!ps_options.pid[0]) {
        setenv("PATHSCOPE_PID", self, 1); /* children inherit it: they are not the target */
        snprintf(ps_options.pid, sizeof ps_options.pid, "%s", self);
    }
    int first_process = strcmp(ps_options.pid, self) == 0;
    ps_run_id_init(launcher_rank >= 0, atol(ps_options.pid));
    if (ps_options.output[0]) {
        /* Checked (and another run's files refused or, with PATHSCOPE_FORCE, deleted) by the
         * run's first process, before the program starts.  Its children (a script's
         * commands) only open the directory: a problem there is reported with their files,
         * never turned into an exit status of theirs. */
        static char err[PS_PATH_MAX + 512];
        const char *dir = getenv("PATHSCOPE_OUTPUT"); /* (not cut to the option buffer) */
        int flags = first_process ? PS_OUTDIR_CHECK_RUNS : 0;
        if (first_process && ps_option_on(ps_options.force)) flags |= PS_OUTDIR_FORCE;
        int rc = ps_outdir_open(dir && *dir ? dir : ps_options.output, flags, err, sizeof err);
        if (rc && first_process) die_config("%s%s", err, "");
        if (rc) ps_outdir_unusable(rc);
        ps_set_outdir(ps_options.output);
    } else if (access(".", W_OK)) {
        die_config("cannot write the profile to the working directory: %s (set PATHSCOPE_OUTPUT or "
                   "pathscope run -o DIR)%s", strerror(errno), "");
    }
    ps_signals_install();
    void ps_rank_file_host(void);
    ps_rank_file_host();
    pthread_atfork(NULL, NULL, after_fork_in_child);
    /* The sources, in registry order (sources.def): configure validates (the first error
     * wins: sample's, then heap's, then kernel's) and sets up; unwind's turns call paths on
     * (ps_paths_on).  Then the main thread is registered (its sampler starts) and the sources
     * start (heap recording, kernel time). */
    ps_start_t st = {.first_process = first_process, .launcher_rank = launcher_rank,
                     .paths_wanted = ps_threads_init()};
    const char *err = ps_sources_configure(&st);
    if (err) die_config("%s%s", err, "");
    if (ps_paths_on) ps_thread_register(); /* the main thread; its sampler starts here */
    nompi_target = ps_paths_on && first_process;
    err = ps_sources_start(&st);
    if (err) die_config("%s%s", err, "");
    if (nompi_target && !ps_outdir[0]) {
        char stamp[32];
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
        snprintf(nompi_outdir, sizeof nompi_outdir, "pathscope-%s-%s", ps_program_name(), stamp);
        struct stat st;
        for (int i = 1; stat(nompi_outdir, &st) == 0; i++)
            snprintf(nompi_outdir, sizeof nompi_outdir, "pathscope-%s-%s.%d", ps_program_name(), stamp, i);
    }
}

/* A child made by fork() (without exec) is not the process we profile: it must never write
 * (it would overwrite its parent's rank file) and its inherited samplers belong to the
 * parent's threads. */
static void after_fork_in_child(void)
{
    ps_mark_final_written();
    nompi_target = 0;
    ps_state = PS_RUN_FINISHED;
    ps_cct_frozen = 1;
    ps_paths_on = 0;
    ps_sources_fork_child(); /* sample forgets its parent's samplers, heap its rewrite, ... */
}
