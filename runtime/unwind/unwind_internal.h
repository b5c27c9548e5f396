/* Private to runtime/unwind/: what the unwinder's files share.
 *
 * The stack walker: pathscope's own DWARF call-frame-information (CFI) unwinder for x86_64.
 *
 * Why our own and not libunwind: (1) async-signal safety -- libunwind keeps per-thread state
 * in __thread variables of a shared library, whose first use in a thread (and the first use
 * after any dlopen of a library with TLS) goes through __tls_get_addr, which may call malloc:
 * a sample that interrupted malloc then corrupts the heap (we saw exactly that, in a Fortran
 * test under Open MPI); (2) speed -- a walk here is a few loads per frame from a per-thread
 * rule cache; (3) no symbols of ours in the application (libunwind.so also defines _Unwind_*
 * and backtrace).
 *
 * How: the unwind tables every x86_64 binary carries (.eh_frame, indexed by .eh_frame_hdr,
 * PT_GNU_EH_FRAME) say, for every instruction, how to find the caller's frame: the canonical
 * frame address (CFA) as rsp or rbp plus an offset, where the return address and the saved
 * rbp are.  The first time a thread meets an address we run the CFI program up to it and
 * cache the resulting rule (or "cannot unwind here") in the thread's rule cache; after that a
 * frame costs a cache probe and two loads.  Rules that are DWARF expressions (PLT stubs,
 * realigned stacks) are evaluated each time by a small stack machine.
 *
 * The walk ends where the CFI says the return address is undefined (_start, the thread start
 * in clone3): that is a complete walk.  It stops early -- an incomplete walk, reported as
 * [failed unwind] with the frames found -- on code without CFI, on unsupported CFI, and when
 * a computed frame leaves the thread's stack or does not move up it.
 *
 * Everything here is async-signal-safe: modules are found by reading /proc/self/maps with
 * open/read into static storage and the ELF headers in memory (no dl_iterate_phdr, no locks
 * that a signal could deadlock on: one thread rebuilds the table, the others wait for nothing
 * and count a failure); memory is read only inside the thread's stack or inside mapped
 * modules' unwind tables.
 *
 * The files, one concern each:
 *   modules.c    the table of executable mappings and their .eh_frame_hdr, rebuilt from
 *                /proc/self/maps (dlclose, interposed there, invalidates it); pathscope's own
 *                code; ps_unwind_init
 *   cfi.c        DWARF encodings, the FDE search, the CFA program interpreter and the CFA
 *                expression machine; modules with an unwinder of their own (thunk mode)
 *   rules.c      the per-thread rule cache (the miss path of rule_at below) and the
 *                per-thread function range cache (ps_unwind_function_start)
 *   unwind_thread.h  the per-thread state all of them use (unwind_thread_t, by slot)
 *   walk.c       the walker, with exact reuse of the previous walk; the thread's stack bounds
 *   traversal.c  the traversal modes (full, reuse, heuristic, thunk) around the walker, thunk
 *                installation (ps_unwind_commit) and the entry points (caller, from, signal)
 *   thunk.c      the thunk stacks
 * Hot-path helpers (a rule cache probe, the cache generation check) are static inline here.
 */
#ifndef PS_UNWIND_INTERNAL_H
#define PS_UNWIND_INTERNAL_H
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "unwind.h"
#include "unwind_thread.h"

/* ---- modules.c ------------------------------------------------------------------------------ */
/* bumped by every dlclose: the module table and the threads' caches are out of date */
extern _Atomic unsigned ps_unwind_dl_generation;

/* The eh_frame_hdr for pc, or NULL.  *known: 1 pc is in a mapping of the table, 0 it is
 * not, -1 the table is out of date and another thread is rebuilding it (inconclusive). */
const uint8_t *ps_unwind_code_lookup(uintptr_t pc, int *known);

/* A thread's caches are dropped when the modules changed since it filled them. */
static inline void thread_caches_check(unwind_thread_t *u)
{
    unsigned generation = atomic_load(&ps_unwind_dl_generation);
    if (u->unwind_generation == generation) return;
    memset(u->rules, 0, sizeof u->rules);
    u->nranges = 0;
    u->unwind_generation = generation;
}

/* ---- cfi.c ---------------------------------------------------------------------------------- */
#define DW_RBP 6
#define DW_RSP 7
#define DW_RA 16
#define NO_SAVE 0x7fff

typedef struct {
    int cfa_reg;             /* DW_RSP or DW_RBP; -1: CFA is an expression */
    int64_t cfa_off;
    const uint8_t *cfa_expr; /* when cfa_reg == -1 */
    uint64_t cfa_expr_len;
    int rbp_saved;           /* rbp at CFA + rbp_off (or rbp + rbp_off: rbp_from_rbp) */
    int64_t rbp_off;
    int rbp_from_rbp;        /* DW_CFA_expression rbp = [DW_OP_breg6 N] (realigned frames) */
    int ra_undefined;        /* the outermost frame */
    int ra_off_ok;           /* return address at CFA - 8 */
} cfa_state_t;

typedef struct {
    uintptr_t pc_begin, pc_end;
    const uint8_t *insns, *insns_end;        /* the FDE's program */
    const uint8_t *cie_insns, *cie_insns_end;
    uint64_t code_align;
    int64_t data_align;
    uint64_t ra_reg;
} fde_t;

/* Finds the FDE covering pc through the binary-search table of .eh_frame_hdr. */
int ps_unwind_fde_find(const uint8_t *hdr, uintptr_t pc, fde_t *f);
/* Runs the CFI program (CIE initial instructions, then the FDE's) up to pc. */
int ps_unwind_cfa_run(const fde_t *f, uintptr_t pc, cfa_state_t *st);
/* The CFA of a RULE_EXPR frame at pc: the few DWARF operations CFA expressions use (PLT
 * stubs, realigned frames).  Reads memory only within [lo, hi). */
int ps_unwind_eval_cfa_expr(uintptr_t pc, uintptr_t sp, uintptr_t rbp, uintptr_t lo, uintptr_t hi,
                            uintptr_t *cfa);

/* ---- rules.c: the per-thread rule cache ----------------------------------------------------- */
/* RULE_RETURNED: a thunk's code before its frame is set up (thunk.c): the frame returned, its
 * slot (just below sp) still holds the thunk, which stands for the return address; only for
 * the interrupted instruction of a sample, the first frame. */
enum { RULE_EMPTY = 0, RULE_RSP, RULE_RBP, RULE_EXPR, RULE_END, RULE_NONE, RULE_RETURNED };

typedef struct {
    uintptr_t pc;
    int32_t cfa_off;
    int16_t rbp_off;   /* NO_SAVE: rbp unchanged */
    uint8_t kind;
    uint8_t flags;     /* RULE_RBP_FROM_RBP: rbp saved at rbp + rbp_off, not CFA + rbp_off */
} rule_entry_t;
#define RULE_RBP_FROM_RBP 1

_Static_assert(sizeof(rule_entry_t) == 16, "rule entries are 16 bytes");
_Static_assert(sizeof(rule_entry_t) * PS_RULE_CACHE <= sizeof(((unwind_thread_t *)0)->rules),
               "rule cache fits unwind_thread_t.rules");

/* The rule at pc computed into e, rule_at's cache entry for it (rules.c). */
const rule_entry_t *ps_unwind_rule_compute(rule_entry_t *e, uintptr_t pc);

/* Finds or computes the rule at pc.  For RULE_EXPR the FDE is searched again by the caller.
 * Inline: the walker probes the cache at every frame; a miss is computed in rules.c. */
static inline const rule_entry_t *rule_at(unwind_thread_t *u, uintptr_t pc)
{
    rule_entry_t *cache = (rule_entry_t *)u->rules;
    rule_entry_t *e = &cache[(pc ^ (pc >> 12)) & (PS_RULE_CACHE - 1)];
    if (e->pc == pc && e->kind != RULE_EMPTY) return e;
    return ps_unwind_rule_compute(e, pc);
}

/* ---- walk.c --------------------------------------------------------------------------------- */
/* One frame of a recorded walk (u->walk_prev, u->walk_cur): what exact reuse compares
 * (walk.c: reuse_previous) and where thunk mode installs thunks (traversal.c). */
typedef struct {
    uintptr_t lookup, sp, rbp; /* the frame's state; lookup = pc (first frame) or pc - 1 */
    uintptr_t pc;              /* what the walk output for it */
    uintptr_t rbp_slot;        /* where its rule read the caller's rbp, or 0 */
    uintptr_t flags;           /* FRAME_USES_RBP: its CFA came from rbp; FRAME_NEEDS_RBP: the
                                * walk from this frame on depends on the rbp it started with */
} frame_rec_t;
#define FRAME_USES_RBP 1
#define FRAME_NEEDS_RBP 2
#define FRAME_ALIASED 4  /* pc is in a trampoline: the walk output its original (ps_unwind_alias) */

/* The original of a pc in a probe's trampoline (ps_unwind_set_alias), else 0. */
uintptr_t ps_unwind_alias(uintptr_t pc);

/* Walks from (pc, sp, rbp); pc is exact for the first frame (first_exact), a return address
 * for the others.  Writes pcs/return addresses innermost first.  flags: WALK_REUSE may reuse
 * the previous walk (WALK_TRUST: on the heuristic's evidence), WALK_KEEP keeps this walk for
 * the next one.  u is the walking thread's state; its thread's walk_seq and walk_same_outer
 * (u->thread) are the link to the tree insertion (core/cct.h). */
#define WALK_REUSE 1
#define WALK_TRUST 2
#define WALK_KEEP 4
#define WALK_THUNK 8 /* stop at the first thunk: the rest comes from the thunk stack */
int ps_unwind_walk(unwind_thread_t *u, uintptr_t pc, uintptr_t sp, uintptr_t rbp, int first_exact,
                   uintptr_t *out, int max, int *complete, int flags);
/* At thread registration (not in a signal handler), before the slot is set: the stack bounds
 * walks stay within, the thread's thunk stack. */
void ps_unwind_thread_init(unwind_thread_t *u);

/* ---- thunk.c -------------------------------------------------------------------------------- */
/* The thunks' code where the returned frame's slot still holds its thunk, its entry live
 * (RULE_RETURNED): the thunks and the traversal thunks' common part up to its pop (top = i),
 * the hooked part up to ps_thunk_hooked_framed, which has CFI from there on. */
extern char ps_thunk_returned_end[], ps_thunk_hooked_common[], ps_thunk_hooked_framed[],
    ps_thunk_hooked_end[];
static inline int ps_thunk_unframed(uintptr_t pc)
{
    return (pc >= (uintptr_t)ps_thunk_code && pc < (uintptr_t)ps_thunk_returned_end) ||
           (pc >= (uintptr_t)ps_thunk_hooked_common && pc < (uintptr_t)ps_thunk_hooked_framed);
}
/* pc in a thunk's code, where the thunk still uses its entry e[i] */
static inline int ps_thunk_running(uintptr_t pc)
{
    return (pc >= (uintptr_t)ps_thunk_code && pc < (uintptr_t)ps_thunk_returned_end) ||
           (pc >= (uintptr_t)ps_thunk_hooked_common && pc < (uintptr_t)ps_thunk_hooked_end);
}
void ps_thunks_restore(unwind_thread_t *u, int suspend); /* u may be NULL [signal-safe] */
/* The thread ends or leaves its stack: restored, no thunks any more, open hooked entries
 * reported as how (PS_EXIT_*). [signal-safe] */
void ps_thunks_end(unwind_thread_t *u, int how);
/* Pops e[from..top), reporting hooked entries as how (PS_EXIT_*): their frames are gone.
 * [signal-safe] */
void ps_thunks_close(unwind_thread_t *u, uint32_t from, int how);
#endif
