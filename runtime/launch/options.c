/* pathscope-run's command line and option checks: the flags of `pathscope run` made from
 * options.def the way python/pathscope/cli.py (_flag_for) makes them, and the value checks of
 * python/pathscope/options.py (check_value, validate_environment).  Only the spellings argparse
 * reads the same way in every Python version are parsed here (--flag VALUE, --flag=VALUE,
 * -o DIR, -oDIR, the bare flags); anything else, and every value that would be refused, is
 * handed to the Python CLI (run_hand_over), which words the error. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run.h"

const run_option run_options[] = {
#define PS_OPTION(field, env, kind, def, accepted, doc) {#field, env, kind, def, accepted},
#include "options.def"
#undef PS_OPTION
};
const unsigned run_option_count = sizeof run_options / sizeof run_options[0];

/* cli.py's exceptions to `--<field>`: keep these four equal to its RUN_SETS_ITSELF,
 * SHORT_FLAGS, LONG_FLAGS and BARE_FLAG_VALUE (tests/python/test_launcher.py starts the program
 * without Python for every flag the Python parser has). */
static const char *const set_by_run[] = {"command", "pid"};
#define SHORT_FLAG_FIELD "output"
#define SHORT_FLAG "-o"
#define RENAMED_FIELD "live"
#define RENAMED_FLAG "--live-interval"
#define BARE_FIELD "kernel"
#define BARE_VALUE "auto"
/* --mpi chooses the runtime build (cli.py's library_mpi); not an options.def row */
#define LIBRARY_FLAG "--mpi"
#define LIBRARY_CHOICES "auto|openmpi|mpich"
#define LIBRARY_FLAG_INDEX (-1)

/* One flag of `pathscope run`. */
typedef struct {
    char name[64];           /* the long spelling */
    const char *short_name;  /* or NULL */
    int option;              /* its row of run_options, or LIBRARY_FLAG_INDEX */
    const char *constant;    /* a flag without a value: the value it sets; else NULL */
    const char *bare;        /* a flag whose value may be left out: the value then; else NULL */
} run_flag;

static int field_is(const run_option *o, const char *field) { return strcmp(o->field, field) == 0; }

static int set_by_run_itself(const run_option *o)
{
    for (size_t i = 0; i < sizeof set_by_run / sizeof set_by_run[0]; i++)
        if (field_is(o, set_by_run[i])) return 1;
    return 0;
}

/* "--" + field with '_' as '-', after prefix ("" or "no-"). */
static void flag_name(char *out, size_t size, const char *prefix, const char *field)
{
    int n = snprintf(out, size, "--%s%s", prefix, field);
    for (char *p = out + 2; n > 0 && *p; p++)
        if (*p == '_') *p = '-';
}

/* The flags: --mpi, then one per option of the table that run does not set itself. */
static unsigned flags_make(run_flag *flags)
{
    unsigned n = 0;
    flags[n++] = (run_flag){LIBRARY_FLAG, NULL, LIBRARY_FLAG_INDEX, NULL, NULL};
    for (unsigned i = 0; i < run_option_count; i++) {
        const run_option *o = &run_options[i];
        if (set_by_run_itself(o)) continue;
        run_flag *f = &flags[n++];
        *f = (run_flag){"", NULL, (int)i, NULL, NULL};
        if (o->kind == PS_KIND_BOOL) {
            int on = strcmp(o->def, "on") == 0;
            f->constant = on ? "off" : "on";
            flag_name(f->name, sizeof f->name, on ? "no-" : "", o->field);
            continue;
        }
        if (field_is(o, RENAMED_FIELD)) snprintf(f->name, sizeof f->name, "%s", RENAMED_FLAG);
        else flag_name(f->name, sizeof f->name, "", o->field);
        if (field_is(o, SHORT_FLAG_FIELD)) f->short_name = SHORT_FLAG;
        if (field_is(o, BARE_FIELD)) f->bare = BARE_VALUE;
    }
    return n;
}

/* ---- values ---------------------------------------------------------------------------------- */

/* value is one of the '|'-separated words of accepted. */
static int one_of(const char *accepted, const char *value, size_t value_len)
{
    for (const char *p = accepted;;) {
        size_t len = strcspn(p, "|");
        if (len == value_len && strncmp(p, value, len) == 0) return 1;
        if (!p[len]) return 0;
        p = p + len + 1;
    }
}

/* options.py _int_accepted: ASCII digits only, at most 9, within one alternative. */
static int int_accepted(const char *accepted, const char *value)
{
    size_t n = strlen(value);
    if (n == 0 || n > 9 || strspn(value, "0123456789") != n) return 0;
    long number = strtol(value, NULL, 10);
    for (const char *p = accepted;;) {
        char *end;
        long low = strtol(p, &end, 10), high = *end == '-' ? strtol(end + 1, &end, 10) : low;
        if (low <= number && number <= high) return 1;
        p = strchr(p, '|');
        if (!p) return 0;
        p++;
    }
}

/* options.py _list_accepted: comma-separated KEY=VALUE items, or nothing. */
static int list_accepted(const char *accepted, const char *value)
{
    const char *equals = strchr(accepted, '=');
    if (!equals || !*value) return !*value;
    char keys[512];
    snprintf(keys, sizeof keys, "%.*s", (int)(equals - accepted), accepted);
    for (const char *p = value;;) {
        size_t len = strcspn(p, ","), key_len = strcspn(p, "=");
        if (key_len >= len || !one_of(keys, p, key_len) ||
            !one_of(equals + 1, p + key_len + 1, len - key_len - 1))
            return 0;
        if (!p[len]) return 1;
        p += len + 1;
    }
}

static int value_accepted(const run_option *o, const char *value)
{
    switch (o->kind) {
    case PS_KIND_PATH: return 1;
    case PS_KIND_INT: return int_accepted(o->accepted, value);
    case PS_KIND_LIST: return list_accepted(o->accepted, value);
    default: return one_of(o->accepted, value, strlen(value));
    }
}

/* argparse's `not value.strip()`, erring towards blank: bytes of non-ASCII characters count as
 * blank (some are Unicode white space) as do the ASCII ones str.strip removes. */
static int blank(const char *value)
{
    for (const unsigned char *p = (const unsigned char *)value; *p; p++)
        if (*p < 0x80 && !strchr(" \t\n\v\f\r\x1c\x1d\x1e\x1f", *p)) return 0;
    return 1;
}

/* ---- the command line ---------------------------------------------------------------------- */

static const run_flag *flag_find(const run_flag *flags, unsigned n, const char *name, size_t len)
{
    for (unsigned i = 0; i < n; i++)
        if ((strlen(flags[i].name) == len && strncmp(flags[i].name, name, len) == 0) ||
            (flags[i].short_name && strlen(flags[i].short_name) == len &&
             strncmp(flags[i].short_name, name, len) == 0))
            return &flags[i];
    return NULL;
}

/* The flag token own[*i] names, with its value (which may be own[*i + 1]: *i then moves). */
static const run_flag *flag_read(const run_flag *flags, unsigned n, char **own, int count,
                                 int *i, const char **value)
{
    const char *token = own[*i], *explicit = NULL;
    size_t len;
    if (strncmp(token, "--", 2) == 0) {
        len = strcspn(token, "=");
        if (token[len]) explicit = token + len + 1;
    } else if (strncmp(token, SHORT_FLAG, 2) == 0) {
        len = 2;
        if (token[2]) explicit = token + 2;
        if (explicit && (explicit[0] == '-' || strchr(explicit, '=')))
            run_hand_over("a short flag spelled in a way argparse reads differently");
    } else {
        run_hand_over("an argument that is not a flag of pathscope run");
    }
    const run_flag *f = flag_find(flags, n, token, len);
    if (!f) run_hand_over("an unknown, abbreviated or help flag");
    if (f->constant) {
        if (explicit) run_hand_over("a value given to a flag that takes none");
        *value = f->constant;
        return f;
    }
    int next_is_value = *i + 1 < count && own[*i + 1][0] != '-';
    if (explicit) *value = explicit;
    else if (next_is_value) *value = own[++*i];
    else if (f->bare) *value = f->bare;
    else run_hand_over("a flag without its value");
    if (blank(*value)) run_hand_over("an empty value");
    return f;
}

void run_parse_command_line(int argc, char **argv, run_command *cmd)
{
    int dashes = 0;
    while (dashes < argc && strcmp(argv[dashes], "--") != 0) dashes++;
    if (dashes == argc) run_hand_over("no '--' before the program");
    if (dashes + 1 == argc) run_hand_over("no program after '--'");
    static run_flag flags[64];
    if (run_option_count + 1 > sizeof flags / sizeof flags[0]) run_hand_over("too many options");
    unsigned n = flags_make(flags);
    static const char *values[64];
    int seen[64] = {0};
    *cmd = (run_command){values, NULL, "auto", argv + dashes + 1};
    for (int i = 0; i < dashes; i++) {
        const char *value;
        const run_flag *f = flag_read(flags, n, argv, dashes, &i, &value);
        if (seen[f - flags]++) run_hand_over("a flag given twice");
        if (f->option == LIBRARY_FLAG_INDEX) {
            if (!one_of(LIBRARY_CHOICES, value, strlen(value))) run_hand_over("an unknown --mpi");
            cmd->mpi = value;
        } else if (field_is(&run_options[f->option], SHORT_FLAG_FIELD)) {
            cmd->output = value;
        } else {
            values[f->option] = value;
        }
    }
}

/* ---- checks and settings ------------------------------------------------------------------- */

void run_options_check_environment(const char *const *ignore, unsigned n_ignore)
{
    extern char **environ;
    for (unsigned i = 0; i < run_option_count; i++) {
        const char *value = run_env_get(run_options[i].env);
        if (value && !value_accepted(&run_options[i], value))
            run_hand_over("a PATHSCOPE_* variable with a value its option refuses");
    }
    for (char **e = environ; *e; e++) {
        if (strncmp(*e, "PATHSCOPE_", 10) != 0) continue;
        size_t len = strcspn(*e, "=");
        int known = 0;
        for (unsigned i = 0; i < run_option_count && !known; i++)
            known = strlen(run_options[i].env) == len && !strncmp(run_options[i].env, *e, len);
        for (unsigned i = 0; i < n_ignore && !known; i++)
            known = strlen(ignore[i]) == len && !strncmp(ignore[i], *e, len);
        if (!known) run_hand_over("an unknown PATHSCOPE_* variable");
    }
}

void run_options_check_settings(const run_command *cmd)
{
    for (unsigned i = 0; i < run_option_count; i++)
        if (cmd->values[i] && !value_accepted(&run_options[i], cmd->values[i]))
            run_hand_over("a flag with a value its option refuses");
}

/* The flags' values override the environment's, in table order (as Python's settings). */
void run_options_apply_settings(const run_command *cmd)
{
    for (unsigned i = 0; i < run_option_count; i++)
        if (cmd->values[i]) run_env_set(run_options[i].env, cmd->values[i]);
}
