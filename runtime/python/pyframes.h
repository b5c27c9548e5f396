/* Python frames in call paths (runtime/python; docs/architecture.md, "Python frames").
 *
 * In a CPython process every walk that met the interpreter's evaluation function
 * (_PyEval_EvalFrameDefault) gets, in place of each such native frame, the Python frames
 * that call of it runs (file.py:function:line, innermost first), read from the thread's own
 * frame chain.  A spliced frame is PS_PY_TAG | its location id: the tree inserts it as a
 * node of kind PS_NODE_PY keyed by the id, and the rank file names it by the location's text.
 * [signal-safe] */
#ifndef PS_PYFRAMES_H
#define PS_PYFRAMES_H
#include <stdint.h>
#include "cct.h"

#define PS_PY_TAG ((uintptr_t)1 << 63) /* no user-space code address has it */

extern int ps_py_on; /* a known CPython was found and Python frames are wanted */

/* Replaces the evaluation frames among frames[0..n) (innermost first, capacity
 * PS_MAX_DEPTH) by the Python frames they run; returns the new count.  Leaves the path as it
 * was (counting why) when the frame chain cannot be read or matched.  Lowers
 * t->walk_same_outer to the frames outside the outermost frame replaced. [signal-safe] */
int ps_py_splice(ps_thread_t *t, uintptr_t *frames, int n);
/* 1 if Python frames are on and pc is in the evaluation function: one activation of it runs
 * many Python frames and lines, so "the same caller activation, the same path" (the probes'
 * entry fast path) does not hold for a call it makes. [signal-safe] */
int ps_py_in_eval(uintptr_t pc);
#endif
