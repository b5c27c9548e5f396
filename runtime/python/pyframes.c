/* The splice: a walk's evaluation frames replaced by the Python frames they run.
 *
 * The thread's PyThreadState is found once (the interpreters' thread lists, by native thread
 * id) and kept.  Each walk that met _PyEval_EvalFrameDefault then reads, from the thread's
 * own data, without the GIL:
 *   tstate->cframe->current_frame, then frame->previous ... (bounded: PS_MAX_DEPTH frames),
 *   each frame's code object, instruction pointer and is_entry flag.
 * Frames of one C-level evaluation call are linked up to the one whose is_entry is set, so
 * the chain splits into runs, one per evaluation call, innermost first -- the order of the
 * native evaluation frames in the walk.
 *
 * Reads are validated: the thread state with ps_peek unless it lies in _PyRuntime (the main
 * thread's: static, always mapped); a frame with a plain load only inside the live part of
 * one of the thread's datastack chunks (CPython unlinks a chunk from the thread state before
 * freeing it, and only this thread changes them: we interrupted it or it called us), else
 * with ps_peek (a generator's frame, a pointer not yet set); code objects only on a cache
 * miss, with ps_peek (pylines.c).  What cannot be read or matched leaves the path native and
 * is counted.  [signal-safe] */
#define _GNU_SOURCE
#include <string.h>

#include "procmaps.h"
#include "pyframes_internal.h"
#include "unwind_thread.h"

int ps_py_on;
py_found_t ps_py;

typedef struct {
    uintptr_t lo, hi;
} range_t;

static inline uint64_t word(const uint8_t *b, unsigned off)
{
    uint64_t v;
    memcpy(&v, b + off, 8);
    return v;
}

/* Where a thread state may be read with plain loads.  The main thread's lies in _PyRuntime
 * (static).  Another thread's is heap memory, which its owner frees: its thread (at its end,
 * or at PyGILState_Release -- no evaluation frame of it is on the stack then, so no walk reads
 * it), or the finalizing interpreter (which sets _PyRuntime._finalizing first).  A thread that
 * needs a state again gets a new one, which advances its interpreter's counter of thread
 * states (threads.next_unique_id).  So while the end has not begun and the counter still
 * holds the value it had when the state was last checked with ps_peek, the state found then
 * is alive: plain loads, no system call.  (The counter is read with a plain load only in the
 * main interpreter, which lies in _PyRuntime.) */
static int in_runtime(uintptr_t at, size_t len)
{
    return at >= ps_py.runtime && at + len <= ps_py.runtime_end;
}

static uint64_t state_counter(const py_thread_t *p)
{
    const py_layout_t *L = ps_py.layout;
    if (!in_runtime(p->interp, (size_t)L->is_uid + 8) ||
        !in_runtime(ps_py.runtime, (size_t)L->rt_finalizing + 8))
        return 0;
    if (__atomic_load_n((const uintptr_t *)(ps_py.runtime + L->rt_finalizing), __ATOMIC_ACQUIRE))
        return 0;
    return __atomic_load_n((const uint64_t *)(p->interp + L->is_uid), __ATOMIC_ACQUIRE);
}

/* The thread state's bytes: in place when plain loads may read it (above), else copied into
 * buf with ps_peek; NULL if unreadable.  (Fields are read in place rather than from a fresh
 * copy: a load right after a block copy waits for the copy's stores.) */
static const uint8_t *read_state(py_thread_t *p, uint8_t *buf)
{
    const py_layout_t *L = ps_py.layout;
    if (in_runtime(p->tstate, L->ts_size)) return (const uint8_t *)p->tstate;
    uint64_t now = state_counter(p);
    if (now && now == p->uid) return (const uint8_t *)p->tstate;
    if (!ps_peek(buf, p->tstate, L->ts_size)) return NULL;
    p->uid = now; /* (checked by the caller: its native thread id) */
    return buf;
}

/* The thread state whose native thread id is tid, in any interpreter (its interpreter in
 * *interp_out); 0 if none. */
static uintptr_t find_tstate(int tid, uintptr_t *interp_out)
{
    const py_layout_t *L = ps_py.layout;
    uintptr_t interp, ts;
    if (!ps_peek(&interp, ps_py.runtime + L->rt_interp_head, 8)) return 0;
    for (int i = 0; interp && i < 64; i++) {
        if (!ps_peek(&ts, interp + L->is_threads, 8)) return 0;
        for (int k = 0; ts && k < 4096; k++) {
            uint64_t native;
            if (!ps_peek(&native, ts + L->ts_native_tid, 8)) return 0;
            if (native == (uint64_t)tid) {
                *interp_out = interp;
                return ts;
            }
            if (!ps_peek(&ts, ts + L->ts_next, 8)) return 0;
        }
        if (!ps_peek(&interp, interp + L->is_next, 8)) return 0;
    }
    return 0;
}

/* The thread's state (L->ts_size bytes, in place or in buf); NULL if it has none we can
 * read. */
static const uint8_t *thread_state(ps_thread_t *t, py_thread_t *p, uint8_t *buf)
{
    const py_layout_t *L = ps_py.layout;
    const uint8_t *st;
    if (p->tstate && (st = read_state(p, buf)) && word(st, L->ts_native_tid) == (uint64_t)t->tid)
        return st;
    p->uid = 0;
    p->tstate = find_tstate(t->tid, &p->interp); /* (first time, or the state was replaced) */
    if (!p->tstate || !(st = read_state(p, buf))) return NULL;
    if (word(st, L->ts_native_tid) == (uint64_t)t->tid) return st;
    p->uid = 0;
    return NULL;
}

/* The live parts of the thread's datastack chunks: the current one up to the stack top, the
 * older ones up to the top each had when the next was pushed.  Their headers are read with
 * plain loads: a chunk is linked to the thread state once allocated and unlinked before it is
 * freed, by this thread only.  (While a chunk is being pushed the stack top still points into
 * the previous one: no range, and the frames are read with ps_peek.) */
static int live_chunks(const uint8_t *st, range_t *r)
{
    const py_layout_t *L = ps_py.layout;
    uintptr_t chunk = word(st, L->ts_chunk), top = word(st, L->ts_top);
    int n = 0;
    for (; chunk && !(chunk & 7) && n < PY_CHUNKS; n++) {
        const uint8_t *head = (const uint8_t *)chunk;
        uintptr_t size = word(head, L->ck_size), lo = chunk + L->ck_data;
        uintptr_t hi = n == 0 ? top : lo + word(head, L->ck_top) * sizeof(void *);
        if (hi < lo || hi > chunk + size) break;
        r[n] = (range_t){lo, hi};
        chunk = word(head, 0);
    }
    return n;
}

/* The frame's bytes: in place inside a live range, else copied into buf with ps_peek; NULL
 * if unreadable. */
static const uint8_t *read_frame(uintptr_t frame, uint8_t *buf, const range_t *r, int nr)
{
    const py_layout_t *L = ps_py.layout;
    if (frame & 7) return NULL;
    for (int i = 0; i < nr; i++)
        if (frame >= r[i].lo && frame + L->fr_size <= r[i].hi) return (const uint8_t *)frame;
    return ps_peek(buf, frame, L->fr_size) ? buf : NULL;
}

/* The current frame: the cframe lies on the thread's C stack (an evaluation call's local)
 * or in the thread state (its root cframe). */
static uintptr_t current_frame(ps_thread_t *t, uintptr_t tstate, const uint8_t *st)
{
    const py_layout_t *L = ps_py.layout;
    uintptr_t cframe = word(st, L->ts_cframe), at = cframe + L->cf_current, frame;
    const unwind_thread_t *u = unwind_of(t);
    /* (the stack is mapped above our own frame; below it, maybe not) */
    uintptr_t here = (uintptr_t)__builtin_frame_address(0);
    if (at >= tstate && at + 8 <= tstate + L->ts_size) return word(st, (unsigned)(at - tstate));
    if (at >= here && at + 8 <= u->stack_hi && !(at & 7)) return *(const uintptr_t *)at;
    return ps_peek(&frame, at, 8) ? frame : 0;
}

/* Reads the frame chain into p->loc/entry; returns its length, -1 if a frame was unreadable. */
static int read_chain(ps_thread_t *t, py_thread_t *p)
{
    const py_layout_t *L = ps_py.layout;
    uint8_t st_buf[512], fr_buf[128];
    const uint8_t *st = thread_state(t, p, st_buf), *fr;
    if (!st) return -1;
    range_t chunks[PY_CHUNKS + 1];
    int nc = live_chunks(st, chunks), n = 0;
    /* and the thread's stack above our frame (3.12's shim frames are evaluation calls' locals) */
    chunks[nc++] = (range_t){(uintptr_t)__builtin_frame_address(0), unwind_of(t)->stack_hi};
    uintptr_t frame = current_frame(t, p->tstate, st);
    const struct py_memo *prev = p->memo[p->memo_cur];
    int prev_n = p->memo_n[p->memo_cur], shift = 0, aligned = 0;
    p->memo_cur ^= 1;
    struct py_memo *next = p->memo[p->memo_cur];
    p->memo_n[p->memo_cur] = 0;
    for (int reads = 0; frame && n < PS_MAX_DEPTH && reads < 2 * PS_MAX_DEPTH; reads++) {
        uintptr_t here = frame;
        if (!(fr = read_frame(frame, fr_buf, chunks, nc))) return -1;
        frame = word(fr, L->fr_previous);
        if (L->entry_by_owner && fr[L->fr_entry] == 3) { /* (3.12: the shim, not a frame) */
            if (n) p->entry[n - 1] = 1;
            continue;
        }
        uintptr_t code = word(fr, L->fr_code), instr = word(fr, L->fr_prev_instr);
        int64_t at = ((int64_t)instr - (int64_t)(code + L->co_code)) / 2;
        /* the previous chain, aligned once on this frame's address when positions moved */
        int j = n + shift;
        if ((j < 0 || j >= prev_n || prev[j].frame != here) && !aligned) {
            aligned = 1;
            for (j = 0; j < prev_n && prev[j].frame != here; j++) {}
            shift = j - n;
        }
        uint32_t id;
        if (j >= 0 && j < prev_n && prev[j].frame == here && prev[j].code == code && prev[j].at == at)
            id = prev[j].id;
        else if (!(id = code && !(code & 7) ? ps_py_location(p, code, at) : 0))
            return -1;
        next[n] = (struct py_memo){here, code, at, id};
        p->memo_n[p->memo_cur] = n + 1;
        p->loc[n] = PS_PY_TAG | id;
        p->entry[n] = !L->entry_by_owner && fr[L->fr_entry] != 0;
        n++;
    }
    return frame ? -1 : n;
}

int ps_py_in_eval(uintptr_t pc)
{
    return ps_py_on && pc - ps_py.eval_lo < ps_py.eval_len;
}

int ps_py_splice(ps_thread_t *t, uintptr_t *frames, int n)
{
    int ne = 0;
    for (int i = 0; i < n; i++)
        if (frames[i] - ps_py.eval_lo < ps_py.eval_len) ne++;
    if (!ne) return n;
    py_thread_t *p = py_of(t);
    int *evals = p->evals, *start = p->start; /* (the thread's: a signal stack may be small) */
    for (int i = 0, k = 0; i < n; i++)
        if (frames[i] - ps_py.eval_lo < ps_py.eval_len) evals[k++] = i;
    int len = read_chain(t, p);
    if (len < 0) {
        p->unread++;
        return n;
    }
    /* the runs: run r is loc[start[r] .. start[r+1]), each ending with an entry frame */
    int runs = 0;
    for (int k = 0; k < len; k++) {
        if (k == 0 || p->entry[k - 1]) start[runs++] = k;
    }
    start[runs] = len;
    /* One run per evaluation frame; one evaluation frame more than runs: the innermost one
     * is entering or leaving its call (its frame not linked): it stays native.  A chain that
     * does not end with an entry frame, or any other count, is not matched. */
    int skip = ne - runs;
    if ((len && !p->entry[len - 1]) || skip < 0 || skip > 1) {
        p->unmatched++;
        return n;
    }
    int m = 0, e = skip;
    for (int i = 0; i < n; i++) {
        if (e < ne && i == evals[e]) {
            int r = e - skip;
            if (m + start[r + 1] - start[r] > PS_MAX_DEPTH) {
                p->too_deep++;
                return n;
            }
            for (int k = start[r]; k < start[r + 1]; k++) p->out[m++] = p->loc[k];
            e++;
        } else {
            if (m >= PS_MAX_DEPTH) {
                p->too_deep++;
                return n;
            }
            p->out[m++] = frames[i];
        }
    }
    if (ne > skip) {
        /* positions from the root outside the outermost replaced frame are unchanged */
        int outside = n - 1 - evals[ne - 1];
        if (t->walk_same_outer > outside) t->walk_same_outer = outside;
        p->spliced++;
    }
    memcpy(frames, p->out, sizeof *frames * (size_t)m);
    return m;
}
