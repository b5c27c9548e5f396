/* Process lifecycle: option validation at load time, the profile directory, fatal-signal and
 * exit handling.  Runs inside the application: the constructor may print one error line and
 * exit(2) for invalid configuration (before main, so before any computation); nothing else
 * here prints except the final one-line notice.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pathscope.h"

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
static volatile sig_atomic_t rank_file_written_final;

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
    fprintf(stderr, "pathscope: ");
    fprintf(stderr, fmt, a, b);
    fputc('\n', stderr);
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

/* Every PATHSCOPE_* variable must be a known option with a valid value. */
static void options_load(void)
{
    extern char **environ;
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const char *v = getenv(option_table[i].env);
        snprintf(option_table[i].value, PS_PATH_MAX, "%s", v ? v : option_table[i].def);
        if (v && option_table[i].kind != PS_KIND_PATH && !accepted_value(option_table[i].accepted, v))
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

static int mkdir_p(const char *path)
{
    char tmp[PS_PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(tmp, 0777) && errno != EEXIST) return -1;
        *p = '/';
    }
    if (mkdir(tmp, 0777) && errno != EEXIST) return -1;
    return 0;
}

/* Creates dir and dir/ranks and checks that we can write there. */
int ps_prepare_outdir(const char *dir, char *err, size_t errlen)
{
    char ranks[PS_PATH_MAX + 8];
    struct stat st;
    if (stat(dir, &st) == 0 && !S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "output location '%s' exists and is not a directory", dir);
        return -1;
    }
    snprintf(ranks, sizeof ranks, "%s/ranks", dir);
    if (mkdir_p(ranks) || access(ranks, W_OK)) {
        snprintf(err, errlen, "cannot write to output directory '%s': %s", dir, strerror(errno));
        return -1;
    }
    return 0;
}

void ps_set_outdir(const char *dir) { snprintf(ps_outdir, sizeof ps_outdir, "%s", dir); }

static void read_program_name(void)
{
    char buf[PS_PATH_MAX];
    int fd = open("/proc/self/cmdline", O_RDONLY);
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

/* ---- fatal signals ---------------------------------------------------------------------- */
static const int fatal_signals[] = {SIGTERM, SIGINT, SIGSEGV, SIGBUS, SIGFPE, SIGABRT, SIGQUIT};
#define N_FATAL (sizeof fatal_signals / sizeof fatal_signals[0])
static struct sigaction previous_action[N_FATAL];

static void on_fatal_signal(int sig, siginfo_t *info, void *context)
{
    /* One thread writes; a second fatal signal (another thread, or the launcher repeating
     * itself) waits for that write to finish instead of killing the process half-way. */
    static atomic_int writer; /* 0 idle, 1 writing, 2 written */
    static volatile sig_atomic_t passes[65];
    int idle = 0;
    if (atomic_compare_exchange_strong(&writer, &idle, 1)) {
        int before_init = ps_state == PS_RUN_STARTED && launcher_rank >= 0 && ps_outdir[0];
        if ((ps_state == PS_RUN_MPI || before_init) && !rank_file_written_final) {
            static char status[64] = "signal ";
            ps_fmt_t f = {status + 7, 0, 40, -1, 0};
            ps_fmt_u64(&f, (uint64_t)sig);
            if (before_init) {
                ps_fmt_str(&f, " before-init"); /* MPI_Init had not returned: no data yet */
                ps_world_rank = launcher_rank;
            }
            status[7 + f.len] = 0;
            ps_write_rank_file(status);
            ps_notify_peers(sig != SIGTERM && sig != SIGINT && sig != SIGQUIT);
        }
        atomic_store(&writer, 2);
    } else {
        struct timespec ms = {0, 1000000};
        for (int i = 0; i < 3000 && atomic_load(&writer) == 1; i++) nanosleep(&ms, NULL);
    }
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
        sa.sa_flags = SA_SIGINFO; /* stays installed: a second signal in another thread waits */
        previous_action[i] = cur;
        sigaction(fatal_signals[i], &sa, NULL);
    }
}

/* Runs after every atexit handler (library destructors run from _dl_fini), so an
 * MPI_Finalize called from the application's atexit handler has already been seen. */
__attribute__((destructor)) static void pathscope_fini(void)
{
    if (ps_state == PS_RUN_MPI && !rank_file_written_final) {
        ps_write_rank_file("exit-without-finalize");
        /* a rank leaving without MPI_Finalize makes some launchers kill the others */
        ps_notify_peers(0);
    }
}

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
    if (ps_options.output[0]) {
        char err[PS_PATH_MAX + 128];
        if (ps_prepare_outdir(ps_options.output, err, sizeof err)) die_config("%s%s", err, "");
        ps_set_outdir(ps_options.output);
    } else if (access(".", W_OK)) {
        die_config("cannot write the profile to the working directory: %s (set PATHSCOPE_OUTPUT or "
                   "pathscope run -o DIR)%s", strerror(errno), "");
    }
    ps_signals_install();
}

void ps_mark_final_written(void) { rank_file_written_final = 1; }
