/* Probed functions (issue 13, the iPath design; docs/design-probes.md): the contracts between
 * the parts, each in its own file.
 *
 *   resolver  runtime/symbols/resolve.c    SPEC -> matches with patch plans (a text line each)
 *   plan      runtime/probe/plan.c         parses a match line into ps_probe_plan_t
 *   patcher   runtime/probe/patch.c,       trampolines within +-2 GB, int3-first patching of
 *             tramp.c, enter.S             entries while other threads run, disable/restore
 *   exits     runtime/unwind/thunk.c       return-address redirection on the thunk stack
 *   source    runtime/probe/source_probe.c the probe source: entry/exit handlers, metrics per
 *                                          call path, rank-file lines, start-up probes
 *   control   runtime/live/                control socket (`pathscope probe`), live segment
 *
 * The match line (the resolver's output, also what `pathscope probe` sends on the control
 * socket), TAB-separated, every address an ELF virtual address of the module's file:
 *
 *   match SPEC_ID MODULE_ID 0xVADDR SIZE NAME FILE LINE PLAN
 *
 * PLAN, space-separated: SITE LEN ORIG NINSN then NINSN groups of five:
 *   SITE   offset of the patched bytes from VADDR (0, or 4 after an endbr64)
 *   LEN    bytes displaced (>= 5, <= PS_PROBE_MAX_DISPLACED)
 *   ORIG   the LEN original bytes at VADDR+SITE, lowercase hex
 *   group  KIND OFF LEN FIELD TARGET
 *          KIND   copy | rip (disp32 at FIELD, RIP-relative) | rel32 (call/jmp/jcc rel32 at
 *                 FIELD) | jmp8 (EB rel8) | jcc8 (7x rel8)
 *          OFF    offset of the instruction within the displaced bytes; LEN its length
 *          FIELD  offset of the 32- or 8-bit field within the instruction (0 for copy)
 *          TARGET absolute target as 0xVADDR (0x0 for copy)
 */
#ifndef PS_PROBE_H
#define PS_PROBE_H
#include <stddef.h>
#include <stdint.h>

#define PS_PROBE_MAX 4096           /* probes per process (ids 1..PS_PROBE_MAX-1, never reused) */
#define PS_PROBE_MAX_DISPLACED 32   /* bytes */
#define PS_PROBE_MAX_INSNS 16
#define PS_PROBE_NAME_MAX 256

enum { PS_INSN_COPY, PS_INSN_RIP, PS_INSN_REL32, PS_INSN_JMP8, PS_INSN_JCC8 };

typedef struct {
    uint8_t kind, off, len, field;
    uint64_t target;                /* ELF vaddr (the runtime adds the module's bias) */
} ps_probe_insn_t;

typedef struct {
    uint64_t vaddr, size;           /* the function, ELF vaddr in its module */
    uint8_t site, len, ninsn;
    uint8_t orig[PS_PROBE_MAX_DISPLACED];
    ps_probe_insn_t insn[PS_PROBE_MAX_INSNS];
} ps_probe_plan_t;

/* PLAN text -> plan; NULL on success, else what is wrong (static text). (plan.c) */
const char *ps_probe_plan_parse(const char *text, ps_probe_plan_t *p);

/* ---- the patcher (patch.c, tramp.c, enter.S) ----------------------------------------------
 * Each installed probe has a descriptor the entry stub reads (layout fixed: assembly). */
typedef struct {
    uintptr_t copy;                 /* relocated displaced instructions, then a jmp back */
    volatile uint32_t enabled;      /* 0: the stub jumps straight to copy, no handler */
    uint32_t state;                 /* PS_PATCH_* */
    uintptr_t site;                 /* run-time address of the patched bytes */
    uintptr_t tramp;                /* the probe's trampoline (its entry: what the jmp targets) */
    uint8_t len, orig[PS_PROBE_MAX_DISPLACED];
} ps_patch_t;
enum { PS_PATCH_FREE, PS_PATCH_ACTIVE, PS_PATCH_RESTORED };
extern ps_patch_t ps_patches[PS_PROBE_MAX];

/* The handler the entry stub calls for an enabled probe: id, the address of the return
 * address the call pushed (the stack pointer at the site) and rbp at the site (the caller's:
 * the walk starts there).  Runs in the application's thread with every argument register
 * saved; may not assume anything about the thread (it may be unregistered, in a signal
 * handler, inside pathscope).  Set before the first add. */
extern void (*ps_probe_entry_hook)(uint32_t id, uintptr_t *slot, uintptr_t rbp);

/* Installs probe id (1..PS_PROBE_MAX-1) from plan at module bias (run-time address = vaddr +
 * bias), enabled.  Safe while other threads run (int3 first, membarrier SYNC_CORE, the /proc
 * scan when more than one instruction is displaced; the SIGTRAP handler is installed at the
 * first such add and stays).  0 on success; else -1 and why[] says why, starting with a reason
 * key, a space, then the text for a person.  Keys: not-mapped, code-differs (memory is not
 * ORIG), own-code, already-probed ("already-probed probe N"), out-of-reach, bad-plan (a TARGET
 * disagrees with ORIG's displacement, or the id was another site's), unsafe-threads (a thread
 * blocks SIGTRAP, or may still be inside the displaced bytes after 100 ms, or no membarrier
 * SYNC_CORE), write-failed, table-full (id out of range).  Each add maps its own trampoline
 * page (an add is a batch of one).  Not [signal-safe]; callers serialise. */
int ps_patch_add(uint32_t id, const ps_probe_plan_t *plan, uintptr_t bias, char *why, size_t len);
void ps_patch_enable(uint32_t id, int on);   /* [signal-safe] a store */
/* Puts the original bytes back (the same protocol); the trampoline stays mapped (a thread may
 * still be in it) and is reused by a later ps_patch_add of the same id and site.  0 or -1 +
 * why: not-probed, not-mapped, code-differs (the site no longer holds our jump),
 * unsafe-threads (a thread blocks SIGTRAP: leave the probe disabled), write-failed. */
int ps_patch_remove(uint32_t id, char *why, size_t len);
/* A pc in a trampoline: the original address it stands for (the site for the stub, the
 * original instruction for a relocated one, site+LEN for the jmp back -- the return address
 * of a relocated call), else 0. [signal-safe] */
uintptr_t ps_patch_original_pc(uintptr_t pc);
/* Counters for the `probes` line. */
typedef struct {
    uint64_t traps;         /* threads that met an int3 during a window */
    uint64_t windows;       /* live patch windows */
    uint64_t longest_window_ns;
    uint64_t scan_waits;    /* /proc scans repeated because a thread could be inside */
    const char *writer;     /* "procmem" or "mprotect" */
} ps_patch_stats_t;
void ps_patch_stats(ps_patch_stats_t *s);
#endif
