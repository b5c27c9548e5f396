/* The one stack walker of pathscope: every source (MPI wrappers, samples) asks it for the
 * current call path.  Addresses only; names come at the end (runtime/symbols).  Our own
 * DWARF CFI unwinder (unwind_internal.h says why and how, and which file holds what);
 * everything here is async-signal-safe.
 */
#ifndef PS_UNWIND_H
#define PS_UNWIND_H
#include <stdint.h>
#include "cct.h"

extern int ps_unwind_ok; /* the module table could be read */
int ps_unwind_init(char *err, size_t errlen); /* at load time; 0 on success */

/* The call path of pathscope's caller (our own frames skipped), return addresses, innermost
 * first.  Returns the number of frames; *complete is 1 when the walk reached the thread's
 * first frame (where the unwind tables say the return address is undefined: _start, the
 * thread start in clone3). [signal-safe] */
int ps_unwind_caller(uintptr_t *out, int max, int *complete);

/* From a frame given by its return address ra (the instruction after its call), stack pointer
 * and rbp (the allocator shim's caller): out[0] = ra, then the return addresses outside it.
 * [signal-safe] */
int ps_unwind_from(uintptr_t ra, uintptr_t sp, uintptr_t rbp, uintptr_t *out, int max, int *complete);

/* From a signal handler: out[0] is the interrupted instruction, then return addresses.
 * [signal-safe] */
int ps_unwind_signal(void *ucontext, uintptr_t *out, int max, int *complete);

/* Entry of the function containing pc (from the unwind tables); 0 if unknown.  Keeps a
 * per-thread range cache, so only the first sample in a function pays the table search.
 * [signal-safe] */
uintptr_t ps_unwind_function_start(ps_thread_t *t, uintptr_t pc);

int ps_unwind_in_self(uintptr_t addr); /* in pathscope's own code [signal-safe] */
/* Code the unwind tables do not know that stands for code they do: fn(pc) is the original
 * address of a pc in a probe's trampoline (probe.h: ps_patch_original_pc), else 0.  A walk
 * looks a frame that has no rule up there and outputs the original -- the same path as
 * without the probe.  Set once, before the first probe is added. [fn: signal-safe] */
void ps_unwind_set_alias(uintptr_t (*fn)(uintptr_t pc));
void ps_unwind_add_self(uintptr_t code); /* the library around code is ours too (the heap shim) */
/* The executable range of the loaded module containing code (0, 0 if none). */
void ps_unwind_code_range(uintptr_t code, uintptr_t *start, uintptr_t *end);

/* How walks reuse the previous one (PATHSCOPE_TRAVERSAL; traversal.c describes the modes), and
 * every how many walks one is checked against a full walk (PATHSCOPE_TRAVERSAL_CHECK). */
enum { PS_TRAVERSAL_FULL, PS_TRAVERSAL_REUSE, PS_TRAVERSAL_HEURISTIC, PS_TRAVERSAL_THUNK,
       PS_TRAVERSAL_NMODES };
extern int ps_traversal_mode;
extern unsigned ps_traversal_check;
extern const char *const ps_traversal_names[PS_TRAVERSAL_NMODES];

/* Thunk mode: after a walk's path went into the tree (the caller's last ps_cct_insert_path
 * from the root), its frames get their thunks, and calls that started since the last walk
 * count an entry on their call-site nodes.  Without it nothing is installed. [signal-safe] */
void ps_unwind_commit(ps_thread_t *t);

/* Thunk stacks (thunk.c): 256 traversal thunks, then 256 hooked thunks (exits), 16 bytes each. */
extern char ps_thunk_code[], ps_thunk_code_end[];
extern int ps_thunks_available; /* traversal (thunk mode) may install thunks */
extern int ps_thunks_in_use;    /* thunk mode or redirections: the interposers restore slots */
static inline uintptr_t ps_thunk_address(int i) { return (uintptr_t)ps_thunk_code + 16 * (uintptr_t)i; }
static inline uintptr_t ps_thunk_hooked_address(int i) { return ps_thunk_address(i + PS_MAX_DEPTH); }
static inline int ps_thunk_index(uintptr_t ra) /* either kind; -1: not a thunk */
{
    uintptr_t off = ra - (uintptr_t)ps_thunk_code;
    return off < (uintptr_t)(ps_thunk_code_end - ps_thunk_code) ? (int)(off / 16) % PS_MAX_DEPTH : -1;
}

/* Exits of probed functions: pushes {slot, *slot} on the thread's thunk stack and writes hooked
 * thunk i's address into *slot; returns i, or -1 (redirection unavailable in this process or
 * thread, stack full, slot outside the thread's stack, t not the calling thread).  Entries found dead first (their slot
 * is below the new one, or is the new one without its thunk: the frame vanished by longjmp)
 * are reported to the hook as PS_EXIT_LOST (PS_EXIT_UNWOUND while an exception unwinds).  A
 * slot that holds thunk k of its own entry (a tail call through a redirected frame) keeps it
 * as the saved return address: the return runs i's exit, then k's.  In thunk mode, the slot
 * continues the thunks of a walk committed just before (ps_unwind_commit) -- the probed
 * function's caller's walk -- so that later walks may stop at it.  Call it inside a tree update
 * (ps_tree_enter: busy): a sample's commit between the push and the slot's write would take
 * the entry. [signal-safe] */
int ps_unwind_redirect(ps_thread_t *t, uintptr_t *slot);
/* The probes' entry fast path (runtime/probe/enter.c; docs/design-probes.md, section 7).  A
 * probed call made again from the same call site, in the same activation of its caller, has
 * the same call path.  "The same activation" is what a thunk on the caller's own return slot
 * proves: it stays there until the caller returns (then the thunk pops it) or the slot is
 * overwritten by another call's return address (longjmp, then a new frame).
 *  - ps_unwind_caller_slot: the return-address slot of the frame that made the call whose
 *    return address is ra, with sp and rbp as at the callee's first instruction; 0 where the
 *    unwind rule needs more than the CFA (an expression) or is unknown.
 *  - ps_unwind_anchor: before ps_unwind_redirect(t, slot): makes sure the caller's slot
 *    aslot holds the thunk of the entry just below the one the redirect will push -- a new
 *    traversal entry if needed (in any traversal mode: walks translate it like any) -- and
 *    returns its index and seq, or -1 (nothing changed but the dead entries reported).
 *  - ps_unwind_redirect_fast: the next entry from the same call site: if entry anchor is on
 *    top, with the same seq, and its slot still holds its thunk, redirects slot (the call's
 *    return) above it, returning the new index (as ps_unwind_redirect); -1 if anything
 *    differs (take the slow path).
 * Inside a tree update (ps_tree_claim), like ps_unwind_redirect. [signal-safe] */
uintptr_t ps_unwind_caller_slot(ps_thread_t *t, uintptr_t ra, uintptr_t sp, uintptr_t rbp);
int ps_unwind_anchor(ps_thread_t *t, uintptr_t *slot, uintptr_t aslot, uint64_t *seq);
int ps_unwind_redirect_fast(ps_thread_t *t, uintptr_t *slot, uint32_t anchor, uintptr_t aslot,
                            uint64_t seq);
enum { PS_EXIT_RETURN, PS_EXIT_UNWOUND, PS_EXIT_LOST };
/* Called by the hooked thunk at the frame's return (RETURN; with the caller-saved general
 * registers saved, nothing else: the hook must be compiled for the general registers only,
 * -mgeneral-regs-only, and call nothing that is not), at a catch for frames an exception unwound and at the thread's end
 * (pthread_exit, cancellation) for the frames still open (UNWOUND), and for dead entries
 * (LOST: longjmp, a stack switch).  One hook per process, set before the first redirect;
 * setting it makes the interposers restore slots.  [signal-safe] */
typedef void (*ps_unwind_exit_fn)(ps_thread_t *t, int index, int how);
void ps_unwind_set_exit_hook(ps_unwind_exit_fn fn);
int ps_unwind_redirect_available(void); /* 0: why in ps_unwind_redirect_why() */
const char *ps_unwind_redirect_why(void);
/* Decides whether redirection is available (at start-up, once the module table is read): not
 * under the reasons that refuse thunk mode, returned (static storage) or NULL. */
const char *ps_unwind_redirect_setup(void);
/* How the hooked thunks and the probes' entry (runtime/probe/enter.S) save the x87 and vector
 * state around their C code: ps_xsave_kind 0 FXSAVE (no XSAVE; 512 bytes), 1 XSAVE, 2 XSAVEC,
 * of the components in ps_xsave_mask (EDX:EAX), in a 64-aligned area of ps_xsave_size bytes
 * whose header the caller zeroes.  Set by ps_xsave_choose (idempotent; by
 * ps_unwind_redirect_setup, and by the patcher before its first probe). */
extern __attribute__((visibility("hidden"))) uint32_t ps_xsave_kind, ps_xsave_size;
extern __attribute__((visibility("hidden"))) uint64_t ps_xsave_mask;
void ps_xsave_choose(void);
/* In the thread's SIGPROF handler: 1 if another thread's pthread_cancel asked this one to
 * put its return addresses back (the signal was that request): from now on no thunks, and the
 * slots are restored now -- or, when the signal interrupted a tree update (busy), by the
 * walker once done.  0: not asked. [signal-safe] */
int ps_thunks_cancel_requested(ps_thread_t *t);
int ps_thunks_shadow_stack(void);
/* A loaded module with C++ exception code and an unwinder of its own (a static libgcc):
 * 1 and its path in name. */
int ps_unwind_own_unwinder(char *name, size_t len);
extern const char *ps_traversal_requested; /* the mode asked for, when it could not be used */
#endif
