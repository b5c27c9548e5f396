/* The recording call's out-of-line part (record.h has the sequence). */
#include "record.h"

/* A sample's leaf: the function the innermost frame is in (its entry address, PS_NODE_FN),
 * or that frame's pc (PS_NODE_PC) when the unwind tables know no function there, or a
 * Python frame (PS_NODE_PY) when the walk's innermost frame was the interpreter's, below the
 * call sites of t->scratch[1..n); an incomplete walk hangs below [failed unwind] and counts.
 * No frame at all: [failed unwind] itself. [signal-safe, tree claimed] */
uint32_t ps_cct_function_leaf(ps_thread_t *t, int n, int complete)
{
    uint32_t node = t->failed_node;
    if (n > 0 && (t->scratch[0] & PS_PY_TAG)) {
        /* a Python frame innermost (the sample interrupted the interpreter): the leaf */
        node = ps_cct_insert_path(t, complete ? 0 : t->failed_node, t->scratch, n, PS_NODE_CALL);
    } else if (n > 0) {
        uintptr_t start = ps_unwind_function_start(t, t->scratch[0]);
        int kind = start ? PS_NODE_FN : PS_NODE_PC;
        if (start) t->scratch[0] = start;
        node = ps_cct_insert_path(t, complete ? 0 : t->failed_node, t->scratch, n, kind);
    }
    if (!complete) t->unwind_failures++;
    return node;
}
