/* Inside runtime/python: the CPython layouts (per version, a table), what start-up found, the
 * locations table and the per-thread state.
 *
 *   source_python.c  the component: option, detection at start-up (dlsym of the interpreter's
 *                    exported symbols), the `python` line, the node kind `py`
 *   pyframes.c       the splice: thread state, frame chain, matching runs to native frames
 *   pylines.c        code object -> location: the line table, the names, the locations table
 */
#ifndef PS_PYFRAMES_INTERNAL_H
#define PS_PYFRAMES_INTERNAL_H
#include <stdatomic.h>
#include <stdint.h>
#include "pyframes.h"
#include "source.h"

/* Byte offsets into CPython's structures for one minor version, from its internal headers
 * (Include/internal/pycore_*.h; the table in source_python.c says how they were taken). */
typedef struct {
    int minor;                      /* 3.minor */
    uint16_t rt_interp_head;        /* _PyRuntimeState.interpreters.head */
    uint16_t rt_finalizing;         /* _PyRuntimeState._finalizing (set: the end has begun) */
    uint16_t is_next, is_threads;   /* PyInterpreterState.next, .threads.head */
    uint16_t is_uid;                /* PyInterpreterState.threads.next_unique_id */
    uint16_t ts_next, ts_cframe, ts_native_tid, ts_chunk, ts_top, ts_size;
    uint16_t cf_current;            /* _PyCFrame.current_frame */
    uint16_t fr_code, fr_previous, fr_prev_instr, fr_entry, fr_size;
    uint8_t entry_by_owner;          /* 0 (3.11): fr_entry is the bool is_entry; 1 (3.12): it
                                      * is the owner byte, and an evaluation call's first frame
                                      * is the one below a shim frame owned by the C stack (3) */
    uint16_t co_firstlineno, co_filename, co_qualname, co_linetable, co_code, co_head;
    uint16_t ck_size, ck_top, ck_data; /* _PyStackChunk (previous at 0) */
    uint16_t st_state, st_ascii_data, st_utf8_len, st_utf8; /* str: PyASCIIObject.state, its
                                       * size (ASCII text follows), PyCompactUnicodeObject */
    uint16_t by_size, by_data;        /* bytes: ob_size, ob_sval */
} py_layout_t;

/* What start-up found (source_python.c), read-only afterwards. */
typedef struct {
    const py_layout_t *layout;
    uintptr_t runtime, runtime_end;   /* _PyRuntime: static, always mapped (the main thread's
                                       * state lies in it) */
    uintptr_t eval_lo, eval_len;      /* _PyEval_EvalFrameDefault's code */
    uintptr_t code_type;              /* &PyCode_Type */
    char version[32];                 /* "3.11.2" */
    const char *off_why;              /* why frames are off, or NULL */
} py_found_t;
extern py_found_t ps_py;

#define PY_CACHE 512        /* (code, instruction) -> location, per thread (power of 2) */
#define PY_CHUNKS 16        /* datastack chunks checked per walk */

typedef struct {
    uintptr_t tstate;                 /* the thread's PyThreadState, once found; 0: not yet */
    uintptr_t interp;                 /* its interpreter */
    uint64_t uid;                     /* the interpreter's thread-state counter when tstate was
                                       * last checked with ps_peek (0: never) */
    struct {
        uintptr_t code;
        int64_t instr;
        uint32_t id;
    } cache[PY_CACHE];
    struct py_memo {                  /* the last two chains read (alternating): a frame at */
        uintptr_t frame, code;        /* the same address running the same code at the same */
        int64_t at;                   /* instruction has the same location id, found in */
        uint32_t id;                  /* order, without the cache's scattered lookups */
    } memo[2][PS_MAX_DEPTH];
    int memo_n[2], memo_cur;
    uintptr_t loc[PS_MAX_DEPTH];      /* the chain read: location ids, innermost first */
    uint8_t entry[PS_MAX_DEPTH];      /* ... and whether each is an evaluation call's first */
    uintptr_t out[PS_MAX_DEPTH];
    int evals[PS_MAX_DEPTH];          /* the walk's evaluation frames (their positions) */
    int start[PS_MAX_DEPTH + 1];      /* where each run of the chain starts */
    /* counted, written with the `python` line (summed over threads) */
    uint64_t spliced, unmatched, unread, too_deep;
    uint8_t table[16384];             /* a line table being read (longer ones: their start) */
} py_thread_t;

static inline py_thread_t *py_of(const ps_thread_t *t) /* [signal-safe] */
{
    return ps_thread_state(t, PS_SRC_python);
}

/* The location of a frame running code at instruction instr (code units; -1: not started):
 * its id in the locations table (cached per thread), 0 if the code object cannot be read.
 * [signal-safe] */
uint32_t ps_py_location(py_thread_t *p, uintptr_t code, int64_t instr);
/* The locations table (pylines.c): mapped at start-up; its text by id. */
int ps_py_locations_init(void);
const char *ps_py_location_name(uintptr_t id, char buf[24]);
extern _Atomic uint32_t ps_py_nlocations;
extern uint64_t ps_py_locations_full;
/* Line of the instruction at byte offset addr in a 3.11/3.12 location table (Objects/
 * locations.md) of len bytes starting at firstlineno; -1 if it has none. */
int ps_py_line_of(const uint8_t *table, uint32_t len, int firstlineno, int64_t addr);
#endif
