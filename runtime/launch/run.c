/* pathscope-run: `pathscope run` without Python, for every rank of a job.
 *
 *     pathscope-run PYTHON [run options] -- PROGRAM [ARGS...]
 *
 * bin/pathscope starts this for `pathscope run` (PYTHON: the interpreter it would have used).
 * It is the Python CLI's `run` (python/pathscope/cli.py, launch.py) for every command line
 * that starts the program: the same flags (made from the same table, options.def), the same
 * checks, the same environment for the program, then execve.  Everything else -- --help, an
 * abbreviated flag, and every command line that Python would refuse -- is handed unchanged to
 * `PYTHON -m pathscope run ...`, which prints the one error line (or the help) as it always
 * did.  So the error lines are Python's by construction, in whatever Python version argparse
 * words them, and a job whose ranks all start costs no interpreter start in any rank.
 *
 * The rule that keeps the two equal: this program may hand over a command line Python would
 * accept (it then runs a little slower), never start one Python would refuse.  Every check
 * below is at least as strict as its Python counterpart, and anything not understood here is
 * handed over.  It prints nothing itself (except when PYTHON cannot be started) and creates
 * nothing: the runtime library creates the output directory at load time.
 *
 * Runs as root on many sites: no shell (ldd is started with an argument vector), every read is
 * bounded, no file is created.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run.h"

extern char **environ;

/* The command line as given, for the hand-over. */
static int given_argc;
static char **given_argv;

/* Replaces this process with the Python CLI on the unchanged command line and environment
 * (reason: why, for the one line printed if that interpreter cannot be started). */
_Noreturn void run_hand_over(const char *reason)
{
    const char *python = given_argv[1];
    char **argv = calloc((size_t)given_argc + 3, sizeof *argv);
    if (argv) {
        argv[0] = (char *)python;
        argv[1] = "-m";
        argv[2] = "pathscope";
        argv[3] = "run";
        for (int i = 2; i < given_argc; i++) argv[i + 2] = given_argv[i];
        execvp(python, argv);
    }
    fprintf(stderr, "pathscope: cannot start the Python CLI %s: %s (needed for this command "
            "line: %s)\n", python, strerror(errno), reason);
    exit(2);
}

/* ---- the program's environment: environ, edited in place, new names appended ------------- */

static char **env;
static size_t env_count, env_cap;

static size_t env_name_length(const char *entry) { return strcspn(entry, "="); }

/* The index of name in env, or -1. */
static long env_find(const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < env_count; i++)
        if (env_name_length(env[i]) == n && strncmp(env[i], name, n) == 0) return (long)i;
    return -1;
}

const char *run_env_get(const char *name)
{
    long i = env_find(name);
    return i < 0 ? NULL : env[i] + strlen(name) + 1;
}

/* name=value, where name was (as Python's dict keeps a key's place) or at the end. */
void run_env_set(const char *name, const char *value)
{
    char *entry;
    if (asprintf(&entry, "%s=%s", name, value) < 0) run_hand_over("out of memory");
    long i = env_find(name);
    if (i >= 0) {
        env[i] = entry;
        return;
    }
    if (env_count + 2 > env_cap) {
        env_cap = env_cap * 2 + 16;
        env = realloc(env, env_cap * sizeof *env);
        if (!env) run_hand_over("out of memory");
    }
    env[env_count++] = entry;
    env[env_count] = NULL;
}

static void env_remove(const char *name)
{
    long i = env_find(name);
    if (i < 0) return;
    memmove(env + i, env + i + 1, (env_count - (size_t)i) * sizeof *env);
    env_count--;
}

/* A copy of environ.  Python's os.environ keeps one value per name and drops entries without
 * '=': such an environment is left to Python rather than imitated. */
static void env_load(void)
{
    env_cap = 64;
    env = calloc(env_cap, sizeof *env);
    if (!env) run_hand_over("out of memory");
    for (char **e = environ; *e; e++) {
        if (!strchr(*e, '=')) run_hand_over("an environment entry without '='");
        char name[PATH_MAX];
        size_t n = env_name_length(*e);
        if (n >= sizeof name) run_hand_over("an environment variable name too long");
        memcpy(name, *e, n);
        name[n] = 0;
        if (env_find(name) >= 0) run_hand_over("an environment variable set twice");
        if (env_count + 2 > env_cap) {
            env_cap = env_cap * 2 + 64;
            env = realloc(env, env_cap * sizeof *env);
            if (!env) run_hand_over("out of memory");
        }
        env[env_count++] = *e;
        env[env_count] = NULL;
    }
}

/* ---- PATHSCOPE_COMMAND: shlex.join of the program's argv ---------------------------------- */

/* shlex.quote: as is when every byte is an ASCII word character or one of @%+=:,./-. */
static int shell_safe(const char *s)
{
    if (!*s) return 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (!(*p < 0x80 && (p[0] == '_' || (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') ||
                            (*p >= 'A' && *p <= 'Z') || strchr("@%+=:,./-", *p))))
            return 0;
    return 1;
}

static char *shell_join(char *const *argv)
{
    size_t size = 1;
    for (char *const *a = argv; *a; a++) size += 5 * strlen(*a) + 3;
    char *out = malloc(size), *o = out;
    if (!out) run_hand_over("out of memory");
    for (char *const *a = argv; *a; a++) {
        if (a != argv) *o++ = ' ';
        if (shell_safe(*a)) {
            o = stpcpy(o, *a);
            continue;
        }
        *o++ = '\'';
        for (const char *p = *a; *p; p++) {
            if (*p == '\'') o = stpcpy(o, "'\"'\"'"); /* close, a quoted quote, reopen */
            else *o++ = *p;
        }
        *o++ = '\'';
    }
    *o = 0;
    return out;
}

/* ---- LD_PRELOAD ------------------------------------------------------------------------------ */

/* library first, then the current entries (':' or ' ' separated) except empty ones and it. */
static void preload_prepend(const char *library)
{
    const char *current = run_env_get("LD_PRELOAD");
    size_t n = strlen(library);
    char *out = malloc(n + 2 + (current ? strlen(current) : 0)), *o = out;
    if (!out) run_hand_over("out of memory");
    o = stpcpy(o, library);
    for (const char *p = current; p && *p;) {
        size_t len = strcspn(p, ": ");
        if (len && !(len == n && strncmp(p, library, n) == 0)) {
            *o++ = ':';
            memcpy(o, p, len);
            o += len;
        }
        p += len;
        if (*p) p++;
    }
    *o = 0;
    run_env_set("LD_PRELOAD", out);
}

/* ---- the program ----------------------------------------------------------------------------- */

static int is_executable_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && !S_ISDIR(st.st_mode) && access(path, X_OK) == 0;
}

/* What Python's resolve_program returns: a name with '/' as given if it is an executable
 * non-directory; else the first PATH entry holding one (shutil.which: an unset PATH is
 * confstr's /bin:/usr/bin, an empty one finds nothing, an empty entry is the working
 * directory). */
static char *program_resolve(const char *name)
{
    if (!*name) run_hand_over("an empty program name");
    if (strchr(name, '/')) {
        if (!is_executable_file(name)) run_hand_over("the program is missing or not executable");
        return (char *)name;
    }
    const char *p = run_env_get("PATH");
    if (!p) p = "/bin:/usr/bin";
    if (!*p) run_hand_over("PATH is empty");
    for (;;) {
        size_t len = strcspn(p, ":");
        char *candidate;
        const char *slash = len && p[len - 1] != '/' ? "/" : "";
        if (asprintf(&candidate, "%.*s%s%s", (int)len, p, slash, name) < 0)
            run_hand_over("out of memory");
        if (is_executable_file(candidate)) return candidate;
        free(candidate);
        if (!p[len]) break;
        p += len + 1;
    }
    run_hand_over("the program is not on PATH");
}

/* ---- the output directory (launch.py, prepare_output_directory) --------------------------- */

#define LONGEST_OUTPUT_NAME "spawned-4194304/ranks/.rank-2147483647.tsv.0123456789abcdef"
#define OUTPUT_PATH_MAX (4096 - 2 - (sizeof LONGEST_OUTPUT_NAME - 1))

/* Path(os.getcwd(), directory) as pathlib spells it: absolute, no empty or '.' components
 * (".." kept).  A leading "//" (which pathlib keeps) is left to Python. */
static char *output_absolute(const char *directory)
{
    if (strncmp(directory, "//", 2) == 0 && directory[2] != '/')
        run_hand_over("an output path starting with //");
    char cwd[PATH_MAX];
    if (directory[0] != '/' && !getcwd(cwd, sizeof cwd)) run_hand_over("no working directory");
    size_t size = strlen(directory) + (directory[0] == '/' ? 0 : strlen(cwd)) + 3;
    char *out = malloc(size), *o = out;
    if (!out) run_hand_over("out of memory");
    const char *parts[2] = {directory[0] == '/' ? "" : cwd, directory};
    for (int k = 0; k < 2; k++)
        for (const char *p = parts[k]; *p;) {
            size_t len = strcspn(p, "/");
            if (len > 255) run_hand_over("an output path component over 255 bytes");
            if (len && !(len == 1 && *p == '.')) {
                *o++ = '/';
                memcpy(o, p, len);
                o += len;
            }
            p += len;
            if (*p) p++;
        }
    if (o == out) *o++ = '/';
    *o = 0;
    if (strlen(out) > OUTPUT_PATH_MAX) run_hand_over("an output path too long");
    return out;
}

/* The runtime's rules for an existing output directory (or its ranks/): a directory, not a
 * link, ours or root's, not writable by others unless sticky.  0: absent. */
static int output_entry_ok(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno == ENOENT) return 0;
        run_hand_over("the output directory cannot be examined");
    }
    if (!S_ISDIR(st.st_mode)) run_hand_over("the output location is a link or not a directory");
    if (st.st_uid != geteuid() && st.st_uid != 0)
        run_hand_over("the output directory belongs to another user");
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
        run_hand_over("the output directory is writable by others");
    return 1;
}

/* The nearest existing ancestor of absolute must be a directory we may create entries in. */
static void output_parent_check(char *absolute)
{
    char *parent = strdup(absolute);
    if (!parent) run_hand_over("out of memory");
    for (;;) {
        char *slash = strrchr(parent, '/');
        slash[slash == parent ? 1 : 0] = 0;
        struct stat st;
        if (stat(parent, &st) == 0) {
            if (!S_ISDIR(st.st_mode) || access(parent, W_OK | X_OK) != 0)
                run_hand_over("the output directory cannot be created");
            free(parent);
            return;
        }
        if (errno != ENOENT || strcmp(parent, "/") == 0)
            run_hand_over("the output directory's parent cannot be examined");
    }
}

static char *output_prepare(const char *directory)
{
    char *absolute = output_absolute(directory);
    if (output_entry_ok(absolute)) {
        char *ranks;
        if (asprintf(&ranks, "%s%sranks", absolute, strcmp(absolute, "/") ? "/" : "") < 0)
            run_hand_over("out of memory");
        output_entry_ok(ranks);
        free(ranks);
    } else {
        output_parent_check(absolute);
    }
    return absolute;
}

/* ---- the runtime library (launch.py, choose_library and detect_mpi) ----------------------- */

static int is_regular_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Whether a variable's name starts with prefix (but not with the two exceptions, if given). */
static int env_has_prefix(const char *prefix, const char *except1, const char *except2)
{
    for (size_t i = 0; i < env_count; i++)
        if (starts_with(env[i], prefix) && !(except1 && starts_with(env[i], except1)) &&
            !(except2 && starts_with(env[i], except2)))
            return 1;
    return 0;
}

static const char *mpi_detect(const char *executable)
{
    if (run_env_get("OMPI_COMM_WORLD_RANK")) return "openmpi";
    if (env_has_prefix("HYDRA_", NULL, NULL)) return "mpich";
    int pmi = run_env_get("PMI_RANK") || run_env_get("PMI_FD");
    if (pmi && !run_env_get("SLURM_PROCID")) return "mpich";
    if (env_has_prefix("OMPI_", "OMPI_MCA_", "OMPI_ALLOW_RUN_AS_ROOT")) return "openmpi";
    const char *linked = run_mpi_from_ldd(executable);
    if (linked) return linked;
    return pmi ? "mpich" : "openmpi";
}

/* The real path of $PATHSCOPE_HOME and whether it is an installed prefix. */
static char *home_root(int *installed)
{
    const char *home = run_env_get("PATHSCOPE_HOME");
    if (!home || !*home) run_hand_over("PATHSCOPE_HOME is not set");
    char *root = realpath(home, NULL), *share;
    if (!root) run_hand_over("PATHSCOPE_HOME cannot be resolved");
    if (asprintf(&share, "%s/share/pathscope", root) < 0) run_hand_over("out of memory");
    struct stat st;
    *installed = stat(share, &st) == 0 && S_ISDIR(st.st_mode);
    free(share);
    return root;
}

static char *library_choose(const char *mpi, const char *executable)
{
    const char *override = run_env_get("PATHSCOPE_LIB");
    char *path;
    if (override && *override) {
        if (!is_regular_file(override)) run_hand_over("PATHSCOPE_LIB is not a file");
        path = realpath(override, NULL);
        if (!path) run_hand_over("PATHSCOPE_LIB cannot be resolved");
        return path;
    }
    if (strcmp(mpi, "auto") == 0) mpi = mpi_detect(executable);
    int installed;
    char *root = home_root(&installed);
    if (asprintf(&path, installed ? "%s/lib/pathscope/%s/libpathscope.so"
                                  : "%s/build/%s/libpathscope.so", root, mpi) < 0)
        run_hand_over("out of memory");
    if (!is_regular_file(path)) run_hand_over("the runtime library is missing");
    return path;
}

/* Preloads the shim named name from library's directory (before everything else). */
static void shim_prepend(const char *library, const char *name)
{
    char *shim;
    const char *slash = strrchr(library, '/');
    if (asprintf(&shim, "%.*s/%s", (int)(slash - library), library, name) < 0)
        run_hand_over("out of memory");
    if (!is_regular_file(shim)) run_hand_over("a shim library is missing");
    preload_prepend(shim);
}

/* ---- the launch (launch.py, plan_launch and execute) ------------------------------------ */

static void run_launch(const run_command *cmd)
{
    /* the CLI's own variables: read here, never seen by the program (the runtime rejects them) */
    static const char *const cli_variables[] = {"PATHSCOPE_HOME", "PATHSCOPE_LIB",
                                                "PATHSCOPE_SYMBOLIZER"};
    const unsigned n_cli = sizeof cli_variables / sizeof cli_variables[0];
    run_options_check_environment(cli_variables, n_cli);
    run_options_check_settings(cmd);
    char *executable = program_resolve(cmd->program[0]);
    const char *output = cmd->output;
    if (!output) {
        const char *from_env = run_env_get("PATHSCOPE_OUTPUT");
        output = from_env && *from_env ? from_env : NULL;
    }
    if (!output && access(".", W_OK) != 0) run_hand_over("the working directory is not writable");
    char *library = library_choose(cmd->mpi, executable);
    for (unsigned i = 0; i < n_cli; i++) env_remove(cli_variables[i]);
    preload_prepend(library);
    run_env_set("PATHSCOPE_COMMAND", shell_join(cmd->program));
    run_options_apply_settings(cmd);
    const char *kernel = run_env_get("PATHSCOPE_KERNEL"), *heap = run_env_get("PATHSCOPE_HEAP");
    if (kernel && strcmp(kernel, "off") != 0) shim_prepend(library, "libpathscope-kernel.so");
    if (heap && strcmp(heap, "on") == 0) shim_prepend(library, "libpathscope-heap.so");
    if (output) run_env_set("PATHSCOPE_OUTPUT", output_prepare(output));
    execve(executable, cmd->program, env);
    run_hand_over("execve failed");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs("pathscope-run: started by bin/pathscope for `pathscope run` "
              "(usage: pathscope-run PYTHON [options] -- PROGRAM [ARGS...])\n", stderr);
        return 2;
    }
    given_argc = argc;
    given_argv = argv;
    env_load();
    run_command cmd;
    run_parse_command_line(argc - 2, argv + 2, &cmd);
    run_launch(&cmd);
}
