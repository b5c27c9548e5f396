/* Unit test of the source registry (runtime/core/source.c, sources.def and the descriptors
 * runtime/<folder>/source_<name>.c): names unique, node kinds unique and none of core's, every
 * options.def field owned by exactly one source or by core.  Only the descriptors' data is
 * read; no hook is called. */
#include <stdio.h>
#include <string.h>

#include "source.h"

static int failures;
#define FAIL(...)                                              \
    do {                                                       \
        fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);        \
        fprintf(stderr, __VA_ARGS__);                          \
        fputc('\n', stderr);                                   \
        failures++;                                            \
    } while (0)

static const char *const option_fields[] = {
#define PS_OPTION(field, env, kind, def, accepted, doc) #field,
#include "options.def"
#undef PS_OPTION
    NULL};

static int is_option(const char *field)
{
    for (const char *const *f = option_fields; *f; f++)
        if (strcmp(*f, field) == 0) return 1;
    return 0;
}

static int owners_of(const char *field)
{
    int n = 0;
    for (const char *const *o = ps_core_options; *o; o++) n += strcmp(*o, field) == 0;
    for (int i = 0; i < PS_NSOURCES; i++)
        for (const char *const *o = ps_sources[i]->options; o && *o; o++) n += strcmp(*o, field) == 0;
    return n;
}

static void check_names(void)
{
    static const char *const expected[] = {"unwind", "python", "sample", "heap", "kernel", "mpi",
                                           "probe", "live"};
    if (PS_NSOURCES != 8) FAIL("%d sources, expected 8", PS_NSOURCES);
    for (int i = 0; i < PS_NSOURCES; i++) {
        const char *name = ps_sources[i]->name;
        if (!name || !*name) {
            FAIL("source %d has no name", i);
            continue;
        }
        if (i < 8 && strcmp(name, expected[i]) != 0)
            FAIL("source %d is %s, expected %s (sources.def order)", i, name, expected[i]);
        for (int j = 0; j < i; j++)
            if (ps_sources[j]->name && strcmp(ps_sources[j]->name, name) == 0)
                FAIL("two sources are named %s", name);
    }
}

static void check_kinds(void)
{
    static const int core_kinds[] = {PS_NODE_ROOT, PS_NODE_CALL, PS_NODE_FN, PS_NODE_PC,
                                     PS_NODE_FAILED, PS_NODE_NOT_UNWOUND};
    int seen = 0;
    for (int i = 0; i < PS_NSOURCES; i++)
        for (const ps_node_kind_t *k = ps_sources[i]->kinds; k && k->kind >= 0; k++) {
            seen++;
            if (!k->name || !*k->name) {
                FAIL("source %s: node kind %d has no name", ps_sources[i]->name, k->kind);
                continue;
            }
            for (size_t c = 0; c < sizeof core_kinds / sizeof *core_kinds; c++)
                if (k->kind == core_kinds[c])
                    FAIL("source %s adds node kind %d, which is core's", ps_sources[i]->name, k->kind);
            if (ps_node_kind_of(k->kind) != k)
                FAIL("node kind %d is added twice (%s)", k->kind, k->name);
            for (int j = 0; j < PS_NSOURCES; j++)
                for (const ps_node_kind_t *q = ps_sources[j]->kinds; q && q->kind >= 0; q++)
                    if (q != k && q->name && strcmp(q->name, k->name) == 0)
                        FAIL("node kind name %s is used twice", k->name);
        }
    if (seen != 5)
        FAIL("%d node kinds added by sources, expected 5 (py, mpi, heap, syscall, probe)", seen);
    /* the rank file's kind numbers are fixed by format 2.x */
    if (!ps_node_kind_name(PS_NODE_MPI) || strcmp(ps_node_kind_name(PS_NODE_MPI), "mpi") != 0)
        FAIL("kind %d is not named mpi", PS_NODE_MPI);
    if (!ps_node_kind_name(PS_NODE_HEAP) || strcmp(ps_node_kind_name(PS_NODE_HEAP), "heap") != 0)
        FAIL("kind %d is not named heap", PS_NODE_HEAP);
    if (!ps_node_kind_name(PS_NODE_SYSCALL) ||
        strcmp(ps_node_kind_name(PS_NODE_SYSCALL), "syscall") != 0)
        FAIL("kind %d is not named syscall", PS_NODE_SYSCALL);
    if (!ps_node_kind_name(PS_NODE_PROBE) || strcmp(ps_node_kind_name(PS_NODE_PROBE), "probe") != 0)
        FAIL("kind %d is not named probe", PS_NODE_PROBE);
    if (!ps_node_kind_name(PS_NODE_PY) || strcmp(ps_node_kind_name(PS_NODE_PY), "py") != 0)
        FAIL("kind %d is not named py", PS_NODE_PY);
    if (ps_node_kind_name(PS_NODE_CALL)) FAIL("a source names core's kind %d", PS_NODE_CALL);
}

static void check_options(void)
{
    for (const char *const *o = ps_core_options; *o; o++)
        if (!is_option(*o)) FAIL("core owns %s, which options.def does not define", *o);
    for (int i = 0; i < PS_NSOURCES; i++)
        for (const char *const *o = ps_sources[i]->options; o && *o; o++)
            if (!is_option(*o))
                FAIL("source %s owns %s, which options.def does not define", ps_sources[i]->name, *o);
    for (const char *const *f = option_fields; *f; f++) {
        int n = owners_of(*f);
        if (n != 1) FAIL("option %s has %d owners (core and sources), not one", *f, n);
    }
}

int main(void)
{
    check_names();
    check_kinds();
    check_options();
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("sources: all checks passed\n");
    return 0;
}
