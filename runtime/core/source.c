/* The registry of measurement sources (source.h): a constant table built from sources.def, so
 * nothing is registered at run time and signal handlers may iterate it. */
#include <stdio.h>
#include <string.h>

#include "source.h"

const ps_source_t *const ps_sources[PS_NSOURCES] = {
#define PS_SOURCE(name) &ps_source_##name,
#include "sources.def"
#undef PS_SOURCE
};

void *ps_thread_states[PS_NSOURCES][PS_MAX_THREADS];

/* The options.def fields that belong to no source. */
const char *const ps_core_options[] = {"output", "force", "signals", "paths", "quiet", "pid",
                                       "command", "per_rank", NULL};

const char *ps_sources_configure(const ps_start_t *st)
{
    for (int i = 0; i < PS_NSOURCES; i++) {
        const char *err = ps_sources[i]->configure ? ps_sources[i]->configure(st) : NULL;
        if (err) return err;
    }
    return NULL;
}

const char *ps_sources_start(const ps_start_t *st)
{
    for (int i = 0; i < PS_NSOURCES; i++) {
        const char *err = ps_sources[i]->start ? ps_sources[i]->start(st) : NULL;
        if (err) return err;
    }
    return NULL;
}

void ps_sources_rank_start(void)
{
    for (int i = 0; i < PS_NSOURCES; i++)
        if (ps_sources[i]->rank_start) ps_sources[i]->rank_start();
}

void ps_sources_fork_child(void)
{
    for (int i = 0; i < PS_NSOURCES; i++)
        if (ps_sources[i]->fork_child) ps_sources[i]->fork_child();
}

void ps_sources_end(ps_end_how how, ps_end_phase phase)
{
    for (int i = 0; i < PS_NSOURCES; i++)
        if (ps_sources[i]->end) ps_sources[i]->end(how, phase);
}

int ps_sources_rewrite_at_exit(void)
{
    int any = 0;
    for (int i = 0; i < PS_NSOURCES; i++)
        if (ps_sources[i]->rewrite_at_exit && ps_sources[i]->rewrite_at_exit()) any = 1;
    return any;
}

void ps_sources_write(ps_fmt_t *f, ps_section sec, ps_thread_t *t)
{
    for (int i = 0; i < PS_NSOURCES; i++)
        if (ps_sources[i]->write) ps_sources[i]->write(f, sec, t);
}

const ps_node_kind_t *ps_node_kind_of(int kind)
{
    for (int i = 0; i < PS_NSOURCES; i++)
        for (const ps_node_kind_t *k = ps_sources[i]->kinds; k && k->kind >= 0; k++)
            if (k->kind == kind) return k;
    return NULL;
}

const char *ps_node_kind_name(int kind)
{
    const ps_node_kind_t *k = ps_node_kind_of(kind);
    return k ? k->name : NULL;
}
