/* Probed functions as a source (core/source.h; docs/design-probes.md): functions the user
 * names (PATHSCOPE_PROBE, or `pathscope probe` while the program runs) get their entries
 * patched (patch.c) and their calls measured per call path (enter.c).
 *
 * Names are never resolved here: the resolver (`pathscope-symbolize --resolve`, a program of
 * its own: libdw, the demangler and the disassembler stay out of the application) turns SPECs
 * into match lines with patch plans.  At start-up this source runs it on the loaded modules;
 * later the CLI runs it and sends the same lines over the control socket (runtime/live).
 * Either way ps_probe_apply takes the resolver's input lines (module, spec) and its output
 * lines (match, refused, nomatch) and installs what matched. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <dlfcn.h>
#include <signal.h>
#include <stdarg.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "probe_internal.h"
#include "probe_thread.h"
#include "procmaps.h"
#include "../unwind/unwind.h"

static const char *const options[] = {"probe", "probe_metrics", NULL};
const char *const ps_probe_state_names[] = {"free", "active", "disabled", "removed", "unloaded"};

probe_t ps_probe_table[PS_PROBE_MAX];
uint32_t ps_probe_count = 1;
probe_refusal_t ps_probe_refusals[PS_PROBE_REFUSALS];
uint32_t ps_probe_nrefusals, ps_probe_refused, ps_probe_added, ps_probe_removed;
int ps_probe_metrics, ps_probe_timed;
const char *ps_probe_untimed_why = "";
pthread_mutex_t ps_probe_lock = PTHREAD_MUTEX_INITIALIZER;

void ps_probe_write(ps_fmt_t *f, ps_section sec, ps_thread_t *t);   /* probe_out.c */
const char *ps_probe_key_name(uintptr_t key, char buf[24]);        /* probe_out.c */
void ps_probe_publish(ps_fmt_t *f);                                 /* probe_out.c */

static const ps_node_kind_t kinds[] = {
    {.kind = PS_NODE_PROBE, .name = "probe", .key_name = ps_probe_key_name}, {.kind = -1}};

#define RESOLVER_NAME "pathscope-symbolize"
#define RESOLVER_OUTPUT_MAX (16u << 20)
#define RESOLVER_TIMEOUT_MS 120000
#define MAX_SPECS 64
#define MAX_MODULES 1024

static int print_refusals; /* start-up refusals go to stderr */

/* ---- SPEC lists ------------------------------------------------------------------------- */
/* Splits a comma-separated SPEC list in place: commas inside /REGEX/, <...> and (...) belong
 * to the SPEC.  Returns the number of SPECs, -1 if there are too many. */
static int split_specs(char *list, char **specs, int max)
{
    int n = 0, depth = 0, regex = 0;
    char *start = list;
    for (char *p = list;; p++) {
        if (*p == '/' && (p == start || regex)) regex = !regex;
        else if (!regex && (*p == '<' || *p == '(')) depth++;
        else if (!regex && (*p == '>' || *p == ')') && depth > 0) depth--;
        if (*p && (*p != ',' || depth || regex)) continue;
        int end = !*p;
        *p = 0;
        if (*start) {
            if (n == max) return -1;
            specs[n++] = start;
        }
        if (end) return n;
        start = p + 1;
    }
}

/* ---- the resolver's input: loaded modules and SPECs --------------------------------------- */
typedef struct {
    char *text;
    size_t len, cap;
} buf_t;

static int buf_add(buf_t *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 65536;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->text, cap);
        if (!p) return -1;
        b->text = p;
        b->cap = cap;
    }
    memcpy(b->text + b->len, s, n);
    b->len += n;
    b->text[b->len] = 0;
    return 0;
}

static int buf_addf(buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int buf_addf(buf_t *b, const char *fmt, ...)
{
    char line[PS_PATH_MAX + 256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof line) return -1;
    return buf_add(b, line, (size_t)n);
}

/* The whole of /proc/self/maps into text (NUL-terminated); -1 if it cannot be read. */
static int read_maps(buf_t *text)
{
    ps_ownfd_t maps;
    if (ps_maps_open(&maps) < 0) return -1;
    char chunk[65536];
    for (long r; (r = ps_maps_read(&maps, chunk, sizeof chunk)) > 0;)
        if (buf_add(text, chunk, (size_t)r)) break;
    ps_fd_release(&maps);
    return text->text ? 0 : -1;
}

/* The executable file-backed modules of /proc/self/maps, one `module` line each (a path with
 * a TAB or newline in it is left out: the resolver's lines could not carry it). */
static int module_lines(buf_t *b)
{
    buf_t text = {0};
    if (read_maps(&text)) return -1;
    int n = 0;
    const char *seen[MAX_MODULES];
    for (char *line = text.text; line && *line && n < MAX_MODULES;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        ps_maps_line_t ml;
        if (ps_maps_parse_line(line, &ml) && ml.executable && ml.path && ml.path[0] == '/' &&
            !strpbrk(ml.path, "\t\\")) {
            int dup = 0;
            for (int i = 0; i < n && !dup; i++) dup = strcmp(seen[i], ml.path) == 0;
            if (!dup) {
                seen[n] = ml.path;
                buf_addf(b, "module\t%d\t%s\t-\n", n, ml.path);
                n++;
            }
        }
        line = nl ? nl + 1 : NULL;
    }
    free(text.text);
    return n;
}

/* The directory of libpathscope.so: the resolver is installed next to it (and in bin/). */
static int resolver_path(char *path, size_t len)
{
    const char *chosen = getenv("PATHSCOPE_SYMBOLIZER");
    if (chosen && *chosen) {
        snprintf(path, len, "%s", chosen);
        return access(path, X_OK) == 0 ? 0 : -1;
    }
    Dl_info info;
    if (!dladdr((void *)&resolver_path, &info) || !info.dli_fname) return -1;
    snprintf(path, len, "%s", info.dli_fname);
    char *slash = strrchr(path, '/');
    size_t dir = slash ? (size_t)(slash + 1 - path) : 0;
    snprintf(path + dir, len - dir, "%s", RESOLVER_NAME);
    return access(path, X_OK) == 0 ? 0 : -1;
}

/* Runs the resolver on input; its stdout (bounded, within the timeout) in *out.  NULL, or an
 * error line. */
static const char *run_resolver(const buf_t *input, buf_t *out)
{
    static char err[PS_PATH_MAX + 128];
    char path[PS_PATH_MAX];
    if (resolver_path(path, sizeof path)) {
        snprintf(err, sizeof err, "the resolver %s was not found next to libpathscope.so (set "
                 "PATHSCOPE_SYMBOLIZER to its path)", RESOLVER_NAME);
        return err;
    }
    int in[2], outp[2];
    if (pipe2(in, O_CLOEXEC)) return "pipe failed";
    if (pipe2(outp, O_CLOEXEC)) {
        close(in[0]);
        close(in[1]);
        return "pipe failed";
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, outp[1], 1);
    char *argv[] = {path, "--resolve", NULL};
    char *envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL}; /* (no LD_PRELOAD) */
    pid_t pid;
    int rc = posix_spawn(&pid, path, &fa, NULL, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(outp[1]);
    if (rc) {
        close(in[1]);
        close(outp[0]);
        snprintf(err, sizeof err, "cannot start %s: %s", path, strerror(rc));
        return err;
    }
    /* write and read together (either side may fill its pipe), within the deadline */
    size_t sent = 0;
    const char *why = NULL;
    uint64_t deadline = ps_clock_monotonic_ns() + (uint64_t)RESOLVER_TIMEOUT_MS * 1000000u;
    fcntl(in[1], F_SETFL, O_NONBLOCK);
    for (int open_out = 1; open_out;) {
        struct pollfd p[2] = {{outp[0], POLLIN, 0}, {sent < input->len ? in[1] : -1, POLLOUT, 0}};
        uint64_t now = ps_clock_monotonic_ns();
        if (now >= deadline) { why = "the resolver did not answer within 120 s"; break; }
        if (poll(p, 2, (int)((deadline - now) / 1000000u) + 1) < 0 && errno != EINTR) break;
        if (p[1].revents && sent < input->len) {
            ssize_t w = write(in[1], input->text + sent, input->len - sent);
            if (w > 0) sent += (size_t)w;
            else if (errno != EAGAIN && errno != EINTR) sent = input->len;
            if (sent == input->len) close(in[1]);
        }
        if (p[0].revents) {
            char chunk[65536];
            ssize_t r = read(outp[0], chunk, sizeof chunk);
            if (r > 0 && out->len + (size_t)r > RESOLVER_OUTPUT_MAX) {
                why = "the resolver's answer exceeds 16 MiB";
                break;
            }
            if (r > 0) buf_add(out, chunk, (size_t)r);
            else if (r == 0 || (errno != EINTR && errno != EAGAIN)) open_out = 0;
        }
    }
    if (sent < input->len) close(in[1]);
    close(outp[0]);
    if (why) kill(pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    if (why) return why;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        snprintf(err, sizeof err, "%s --resolve failed (status %d)", path, status);
        return err;
    }
    return NULL;
}

/* ---- applying resolver lines ------------------------------------------------------------ */
typedef struct {
    int id;
    const char *path;
    int looked, mapped;          /* its load bias was looked for; found */
    uintptr_t bias;
} module_ref_t;

typedef struct {
    module_ref_t modules[MAX_MODULES];
    int nmodules;
    buf_t maps;                  /* /proc/self/maps, read at the first bias looked for */
    struct { int id; const char *text; } specs[MAX_SPECS * 4];
    int nspecs;
    int nomatch;                 /* nomatch lines seen */
} apply_ctx_t;

static module_ref_t *module_ref(apply_ctx_t *c, int id)
{
    for (int i = 0; i < c->nmodules; i++)
        if (c->modules[i].id == id) return &c->modules[i];
    return NULL;
}

static const char *spec_text(const apply_ctx_t *c, int id)
{
    for (int i = 0; i < c->nspecs; i++)
        if (c->specs[i].id == id) return c->specs[i].text;
    return "?";
}

/* The load bias of the module mapped from path (its lowest mapping holds the ELF header). */
/* The load bias of module m, from its lowest mapping (which holds the ELF header); 1 if it is
 * mapped.  Looked up once per request. */
static int module_bias(apply_ctx_t *c, module_ref_t *m)
{
    if (m->looked) return m->mapped;
    m->looked = 1;
    if (!c->maps.text && read_maps(&c->maps)) return 0;
    for (const char *line = c->maps.text; *line;) {
        const char *nl = strchr(line, '\n');
        size_t n = nl ? (size_t)(nl - line) : strlen(line);
        char copy[PS_PATH_MAX + 128];
        snprintf(copy, sizeof copy, "%.*s", (int)n, line);
        ps_maps_line_t ml;
        if (ps_maps_parse_line(copy, &ml) && ml.path && strcmp(ml.path, m->path) == 0) {
            ps_elf_image_t img;
            m->mapped = ml.readable && ps_elf_image(ml.start, &img);
            m->bias = m->mapped ? img.bias : 0;
            return m->mapped;
        }
        if (!nl) break;
        line = nl + 1;
    }
    return 0;
}

static void refusal(const char *spec, const char *module, uintptr_t addr, uintptr_t bias,
                    const char *key, const char *text, ps_request_t *rq, const char *name)
{
    ps_probe_refused++;
    if (ps_probe_nrefusals < PS_PROBE_REFUSALS) {
        probe_refusal_t *r = &ps_probe_refusals[ps_probe_nrefusals++];
        snprintf(r->spec, sizeof r->spec, "%s", spec);
        snprintf(r->module, sizeof r->module, "%s", module ? module : "-");
        snprintf(r->key, sizeof r->key, "%s", key);
        snprintf(r->text, sizeof r->text, "%s", text);
        r->addr = addr;
        r->vaddr = addr - bias;
    }
    if (rq) {
        char line[2048];
        snprintf(line, sizeof line, "refused\t%s\t%s\t%s\t%s", spec, name ? name : "-", key, text);
        ps_reply(rq, line);
    } else if (print_refusals) {
        fprintf(stderr, "pathscope: --probe '%s': %s not probed (%s): %s\n", spec,
                name ? name : "-", key, text);
    }
}

/* Functions whose entry we never patch: they keep or use their own return address (setjmp,
 * getcontext, vfork: a redirected return would come back to a dead frame) or run before or
 * beneath everything else (the dynamic loader, pathscope itself).  (Names as the resolver
 * gives them: demangled, parameters of C functions absent.) */
static const char *denied(const char *name, const char *module)
{
    static const char *const names[] = {"setjmp", "_setjmp", "__sigsetjmp", "sigsetjmp",
        "__setjmp", "getcontext", "vfork", "__vfork", "__libc_start_main", "dlopen", "dlmopen",
        "dlsym", "dlvsym", "_dl_catch_exception", "__cxa_begin_catch", NULL};
    for (int i = 0; names[i]; i++)
        if (strcmp(name, names[i]) == 0)
            return "it keeps or uses its own return address, or pathscope relies on it";
    const char *base = strrchr(module, '/');
    base = base ? base + 1 : module;
    if (strncmp(base, "libpathscope", 12) == 0) return "it is pathscope's own code";
    if (strncmp(base, "ld-linux", 8) == 0) return "it is the dynamic loader's code";
    return NULL;
}

/* Splits a TAB-separated line in place into at most max fields; returns their number. */
static int fields(char *line, char **f, int max)
{
    int n = 0;
    for (char *p = line; n < max;) {
        f[n++] = p;
        p = strchr(p, '\t');
        if (!p) break;
        *p++ = 0;
    }
    return n;
}

/* One `match` line: a new probe (or a refusal). */
static void apply_match(apply_ctx_t *c, char **f, ps_request_t *rq)
{
    const char *spec = spec_text(c, atoi(f[1]));
    module_ref_t *m = module_ref(c, atoi(f[2]));
    const char *path = m ? m->path : NULL;
    uint64_t vaddr = strtoull(f[3], NULL, 16), size = strtoull(f[4], NULL, 10);
    if (!m || !module_bias(c, m)) {
        refusal(spec, path, 0, 0, "not-mapped", "the module is not mapped in this process", rq, f[5]);
        return;
    }
    uintptr_t bias = m->bias;
    const char *deny = denied(f[5], path);
    if (deny) {
        refusal(spec, path, vaddr + bias, bias, "denied", deny, rq, f[5]);
        return;
    }
    ps_probe_plan_t plan;
    const char *bad = ps_probe_plan_parse(f[8], &plan);
    if (bad) {
        refusal(spec, path, vaddr + bias, bias, "bad-plan", bad, rq, f[5]);
        return;
    }
    plan.vaddr = vaddr;
    plan.size = size;
    for (uint32_t id = 1; id < ps_probe_count; id++) {
        const probe_t *p = &ps_probe_table[id];
        if (p->addr == vaddr + bias && (p->state == PROBE_ACTIVE || p->state == PROBE_DISABLED)) {
            char text[64];
            snprintf(text, sizeof text, "already probed (probe %u)", id);
            refusal(spec, path, vaddr + bias, bias, "already-probed", text, rq, f[5]);
            return;
        }
    }
    if (ps_probe_count >= PS_PROBE_MAX) {
        refusal(spec, path, vaddr + bias, bias, "table-full", "4095 probes were added already", rq, f[5]);
        return;
    }
    uint32_t id = ps_probe_count;
    probe_t *p = &ps_probe_table[id];
    memset(p, 0, sizeof *p);
    p->addr = vaddr + bias;
    p->vaddr = vaddr;
    p->size = size;
    p->line = atoi(f[7]);
    snprintf(p->spec, sizeof p->spec, "%s", spec);
    snprintf(p->name, sizeof p->name, "%s", f[5]);
    snprintf(p->file, sizeof p->file, "%s", f[6]);
    snprintf(p->module, sizeof p->module, "%s", path);
    static int hooked;
    if (!hooked) {
        /* (only once something is probed: the hooks make the unwinder's interposers restore
         * and re-arm return slots at every exception, which no other run needs) */
        hooked = 1;
        ps_probe_handlers_init();
        ps_unwind_set_alias(ps_patch_original_pc); /* samples in trampolines */
    }
    char why[512];
    if (ps_patch_add(id, &plan, bias, why, sizeof why)) {
        char *space = strchr(why, ' ');
        if (space) *space++ = 0;
        refusal(spec, path, vaddr + bias, bias, why, space ? space : why, rq, f[5]);
        return;
    }
    p->added = ps_now();
    p->state = PROBE_ACTIVE;
    ps_probe_count++;
    ps_probe_added++;
    if (rq) {
        char line[2048];
        snprintf(line, sizeof line, "ok\tadded\t%u\t%s\t%s\t%s:%d", id, p->name, p->module,
                 p->file, p->line);
        ps_reply(rq, line);
    }
}

int ps_probe_apply(char **lines, int n, ps_request_t *rq, char *nomatch, size_t len)
{
    static apply_ctx_t c;
    memset(&c, 0, sizeof c);
    for (int i = 0; i < n; i++) {
        char *f[10];
        int nf = fields(lines[i], f, 10);
        if (strcmp(f[0], "module") == 0 && nf >= 3 && c.nmodules < MAX_MODULES) {
            c.modules[c.nmodules++] = (module_ref_t){.id = atoi(f[1]), .path = f[2]};
        } else if (strcmp(f[0], "spec") == 0 && nf >= 3 && c.nspecs < MAX_SPECS * 4) {
            c.specs[c.nspecs].id = atoi(f[1]);
            c.specs[c.nspecs++].text = f[2];
        } else if (strcmp(f[0], "match") == 0 && nf >= 9) {
            apply_match(&c, f, rq);
        } else if (strcmp(f[0], "refused") == 0 && nf >= 7) {
            module_ref_t *m = module_ref(&c, atoi(f[2]));
            int mapped = m && module_bias(&c, m);
            uint64_t vaddr = strtoull(f[3], NULL, 16);
            refusal(spec_text(&c, atoi(f[1])), m ? m->path : NULL, mapped ? vaddr + m->bias : 0,
                    mapped ? m->bias : 0, f[5], f[6], rq, f[4]);
        } else if (strcmp(f[0], "nomatch") == 0 && nf >= 3) {
            if (!c.nomatch++ && nomatch) snprintf(nomatch, len, "%s", f[2]);
            if (rq) {
                char line[1100];
                snprintf(line, sizeof line, "error\t%s", f[2]);
                ps_reply(rq, line);
            }
        } else if (strcmp(f[0], "end") != 0 && rq) {
            char line[256];
            snprintf(line, sizeof line, "error\tmalformed line %d of the request", i + 2);
            ps_reply(rq, line);
            break;
        }
    }
    free(c.maps.text);
    return c.nomatch;
}

/* ---- start-up probes ---------------------------------------------------------------------- */
/* Resolves specs on the modules loaded now and installs what matched.  NULL, or the error
 * line for core (a SPEC that matches nothing ends the run before it starts). */
static const char *probe_specs(char **specs, int n)
{
    static char err[1200];
    buf_t in = {0}, out = {0};
    const char *why = NULL;
    if (module_lines(&in) < 0) why = "cannot read /proc/self/maps";
    for (int i = 0; !why && i < n; i++)
        if (buf_addf(&in, "spec\t%d\t%s\n", i, specs[i])) why = "a SPEC is too long";
    if (!why) why = run_resolver(&in, &out);
    if (!why) {
        buf_t all = {0};
        buf_add(&all, in.text, in.len);
        buf_add(&all, out.text ? out.text : "", out.len);
        char **lines = malloc(sizeof *lines * (all.len / 2 + 2));
        int nl = 0;
        for (char *p = all.text; lines && p && *p;) {
            char *e = strchr(p, '\n');
            if (e) *e = 0;
            lines[nl++] = p;
            p = e ? e + 1 : NULL;
        }
        char nomatch[1024];
        pthread_mutex_lock(&ps_probe_lock);
        int missing = ps_probe_apply(lines, nl, NULL, nomatch, sizeof nomatch);
        pthread_mutex_unlock(&ps_probe_lock);
        if (missing) { /* (the resolver's text names the SPEC and where it looked) */
            snprintf(err, sizeof err, "--probe: %s", nomatch);
            why = err;
        }
        free(lines);
        free(all.text);
    }
    free(in.text);
    free(out.text);
    return why;
}

static const char *probe_configure(const ps_start_t *st)
{
    (void)st;
    const char *m = ps_options.probe_metrics;
    ps_probe_metrics = strcmp(m, "cpu") == 0 ? PROBE_CPU : strcmp(m, "rusage") == 0 ? PROBE_RUSAGE
                                                                                  : PROBE_TIME;
    if (ps_options.probe[0] && !ps_option_on(ps_options.paths))
        return "PATHSCOPE_PROBE needs call paths: PATHSCOPE_PATHS=off cannot be combined with it";
    return NULL;
}

/* The start-up SPECs (PATHSCOPE_PROBE) are resolved in the process pathscope was started for
 * (where a SPEC matching nothing ends the run before it starts) and, in any other process,
 * once it becomes an MPI rank: a command the program runs (a shell from system()) inherits
 * the environment but is not what the user named functions of. */
static char startup_list[PS_PATH_MAX];
static int startup_pending;

static const char *startup_probes(void)
{
    startup_pending = 0;
    char *specs[MAX_SPECS];
    int n = split_specs(startup_list, specs, MAX_SPECS);
    if (n < 0) return "PATHSCOPE_PROBE: more than 64 SPECs";
    return n ? probe_specs(specs, n) : NULL;
}

static const char *probe_start(const ps_start_t *st)
{
    print_refusals = st->launcher_rank <= 0; /* (once per job, not once per rank) */
    if (!ps_paths_on) return NULL;
    ps_probe_timed = ps_unwind_redirect_available();
    if (!ps_probe_timed) ps_probe_untimed_why = ps_unwind_redirect_why();
    if (!ps_options.probe[0] || !st->paths_wanted) return NULL;
    snprintf(startup_list, sizeof startup_list, "%s", ps_options.probe);
    startup_pending = 1;
    return st->first_process ? startup_probes() : NULL;
}

static void probe_rank_start(void)
{
    if (!startup_pending) return;
    const char *err = startup_probes();
    if (err && print_refusals) fprintf(stderr, "pathscope: %s\n", err);
}

/* ---- control requests ---------------------------------------------------------------------- */
static void list_probes(ps_request_t *rq)
{
    for (uint32_t id = 1; id < ps_probe_count; id++) {
        const probe_t *p = &ps_probe_table[id];
        uint64_t calls, incl, excl;
        ps_probe_totals(id, &calls, &incl, &excl);
        char line[2048];
        snprintf(line, sizeof line, "probe\t%u\t%s\t%llu\t%llu\t%llu\t%s\t%s\t%s:%d\t%s", id,
                 ps_probe_state_names[p->state], (unsigned long long)calls,
                 (unsigned long long)ps_ticks_to_ns(incl), (unsigned long long)ps_ticks_to_ns(excl),
                 p->name, p->module, p->file, p->line, p->spec);
        ps_reply(rq, line);
    }
}

static void remove_probes(const char *what, ps_request_t *rq)
{
    char *end;
    unsigned long want = strtoul(what, &end, 10);
    int by_id = *what && !*end, found = 0;
    for (uint32_t id = 1; id < ps_probe_count; id++) {
        probe_t *p = &ps_probe_table[id];
        if (by_id ? id != want : strcmp(p->spec, what) != 0) continue;
        if (p->state != PROBE_ACTIVE && p->state != PROBE_DISABLED) continue;
        found = 1;
        char why[512], line[1024];
        ps_patch_enable(id, 0);
        if (ps_patch_remove(id, why, sizeof why)) {
            p->state = PROBE_DISABLED; /* (the stub passes calls through) */
            snprintf(line, sizeof line, "error\tprobe %u disabled, its bytes not restored: %s", id, why);
        } else {
            p->state = PROBE_REMOVED;
            p->removed = ps_now();
            ps_probe_removed++;
            snprintf(line, sizeof line, "ok\tremoved\t%u\t%s", id, p->name);
        }
        ps_reply(rq, line);
    }
    if (!found) {
        char line[600];
        snprintf(line, sizeof line, "error\tno active probe %s '%s'", by_id ? "has the id" : "comes from SPEC", what);
        ps_reply(rq, line);
    }
}

static void probe_command(ps_request_t *rq)
{
    const char *req = rq->lines[0];
    if (!ps_paths_on) {
        ps_reply(rq, "error\tcall paths are off in this process (PATHSCOPE_PATHS=off): no probes");
        return;
    }
    pthread_mutex_lock(&ps_probe_lock);
    if (strcmp(req, "probe add") == 0) ps_probe_apply(rq->lines + 1, rq->nlines - 1, rq, NULL, 0);
    else if (strncmp(req, "probe remove\t", 13) == 0) remove_probes(req + 13, rq);
    else if (strcmp(req, "probe list") == 0) list_probes(rq);
    else ps_reply(rq, "error\tunknown probe request (probe add, probe remove<TAB>ID|SPEC, probe list)");
    pthread_mutex_unlock(&ps_probe_lock);
}

const ps_source_t ps_source_probe = {
    .name = "probe",
    .options = options,
    .configure = probe_configure,
    .start = probe_start,
    .rank_start = probe_rank_start,
    .thread_size = sizeof(probe_thread_t),
    .thread_exit = ps_probe_thread_exit,
    .write = ps_probe_write,
    .kinds = kinds,
    .command = probe_command,
    .publish = ps_probe_publish,
};
