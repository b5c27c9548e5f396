/* The unwinder as a source (core/source.h): a component without records of its own; it owns the
 * per-thread walk state and the traversal/walks lines.  Its configure decides whether call
 * paths work in this process (ps_paths_on) and which traversal mode walks use. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "source.h"
#include "unwind_internal.h"
#include "sample.h"

static const char *const options[] = {"traversal", "traversal_check", NULL};

void ps_unwind_write(ps_fmt_t *f, ps_section sec, ps_thread_t *t);         /* unwind_out.c */
void ps_unwind_thread_cols(const ps_thread_t *t, ps_thread_cols_t *cols); /* unwind_out.c */
/* PATHSCOPE_TRAVERSAL; thunk mode is refused for the reasons that make redirection (exits of
 * probed functions) unavailable (thunk.c: ps_unwind_redirect_setup). */
static void choose_traversal(void)
{
    for (int m = 0; m < PS_TRAVERSAL_NMODES; m++)
        if (strcmp(ps_options.traversal, ps_traversal_names[m]) == 0) ps_traversal_mode = m;
    ps_traversal_check = (unsigned)atoi(ps_options.traversal_check);
    const char *why = ps_unwind_redirect_setup();
    if (ps_traversal_mode == PS_TRAVERSAL_THUNK) {
        static char refused[PS_PATH_MAX + 64];
        if (why) {
            snprintf(refused, sizeof refused, "thunk (refused: %s)", why);
            ps_traversal_requested = refused;
            ps_traversal_mode = PS_TRAVERSAL_REUSE;
        } else {
            ps_thunks_available = ps_thunks_in_use = 1;
        }
    }
}

/* Call paths, when asked for, need the unwinder: without it (counted) MPI is still measured. */
static const char *unwind_configure(const ps_start_t *st)
{
    if (!st->paths_wanted) return NULL;
    char err[256];
    if (ps_unwind_init(err, sizeof err)) {
        atomic_fetch_add(&ps_counters.unwind_unavailable, 1);
        return NULL;
    }
    ps_paths_on = 1;
    choose_traversal();
    return NULL;
}

/* The thread's stack bounds and thunk stack; the previous walk's two record buffers.  (Its
 * slot is not set yet: the state given.) */
static int unwind_thread_init(ps_thread_t *t, void *state)
{
    unwind_thread_t *u = state;
    u->thread = t;
    ps_unwind_thread_init(u);
    u->walk_prev = u->walk_buf[0];
    u->walk_cur = u->walk_buf[1];
    return 0;
}

const ps_source_t ps_source_unwind = {
    .name = "unwind",
    .options = options,
    .configure = unwind_configure,
    .thread_size = sizeof(unwind_thread_t),
    .thread_init = unwind_thread_init,
    .write = ps_unwind_write,
    .thread_cols = ps_unwind_thread_cols,
};
