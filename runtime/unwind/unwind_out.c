/* The unwinder's part of the rank file (docs/format.md, "Call paths"): the `traversal` line,
 * each thread's `walks` line and the thread line's reused walks.  Reached from the rank-file
 * writer through the descriptor (source_unwind.c), which may run in a fatal-signal handler:
 * [signal-safe], no malloc. */
#include "source.h"
#include "unwind.h"
#include "unwind_thread.h"


static void write_traversal(ps_fmt_t *f)
{
    ps_fmt_str(f, "traversal\t");
    ps_fmt_str(f, ps_traversal_names[ps_traversal_mode]); ps_fmt_tab(f);
    ps_fmt_u64(f, ps_traversal_check); ps_fmt_tab(f);
    ps_fmt_tsv(f, ps_traversal_requested ? ps_traversal_requested : "-"); ps_fmt_char(f, '\n');
}

static void write_walks(ps_fmt_t *f, const ps_thread_t *t)
{
    const unwind_thread_t *u = unwind_of(t);
    ps_fmt_line_u64(f, "walks", (const uint64_t[]){(uint64_t)t->index, u->walks, u->walk_reused,
                                                    u->walk_checks, u->walk_agree, u->thunk_errors,
                                                    u->thunk_restores}, 7);
}

void ps_unwind_write(ps_fmt_t *f, ps_section sec, ps_thread_t *t)
{
    if (sec == PS_SEC_RANK) write_traversal(f);
    else if (sec == PS_SEC_THREAD) write_walks(f, t);
}

void ps_unwind_thread_cols(const ps_thread_t *t, ps_thread_cols_t *cols)
{
    cols->walk_reused = unwind_of(t)->walk_reused;
}
