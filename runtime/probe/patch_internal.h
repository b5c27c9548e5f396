/* What the patcher's files share (patch.c, tramp.c, enter.S): the trampoline layout, the
 * patcher's raw system calls, and the reading of /proc/self/maps it needs. */
#ifndef PS_PATCH_INTERNAL_H
#define PS_PATCH_INTERNAL_H
#include <stddef.h>
#include <stdint.h>

#include "probe.h"

/* A trampoline page: the pointer to ps_probe_entry_common at offset 0 (the stubs jump through
 * it: no reach needed to libpathscope), the probe's id at 8, the probe at PS_TRAMP_SLOT.
 * A probe: its stub (PS_TRAMP_STUB bytes: endbr64; mov %r11,-8(%rsp); mov $ID,%r11d;
 * jmp *common(%rip); int3 filler), then the relocated instructions and the jmp back, all in
 * PS_TRAMP_BYTES (the longest: 16 two-byte short jumps widened to 6 bytes, and the jmp back:
 * 101).  The stub keeps the caller's r11 in the red zone (a caller compiled with -fipa-ra may
 * expect it unchanged) without moving rsp, so the whole stub unwinds as the site. */
#define PS_TRAMP_PAGE 4096
#define PS_TRAMP_SLOT 128
#define PS_TRAMP_BYTES 128
#define PS_TRAMP_STUB 24

void ps_probe_entry_common(void); /* enter.S */
/* Which vector registers enter.S saves: 0 xmm, 1 ymm, 2 zmm (patch.c sets it from CPUID). */

/* Text is written with mprotect R|W|X, write, restore: set once /proc/self/mem refused a
 * write (Linux 6.12's proc_mem.force_override=never), or by a test. (patch.c) */
extern int ps_patch_writer_mprotect;

/* Maps, writes and seals probe id's trampoline for plan at site (run-time address), within
 * +-2 GB of the site and of every target; fills d->tramp and d->copy.  0, or -1 with why
 * ("out-of-reach ...", "bad-plan ...").  (tramp.c) */
int ps_tramp_build(uint32_t id, const ps_probe_plan_t *plan, uintptr_t site, uintptr_t bias,
                   ps_patch_t *d, char *why, size_t len);

/* The mapping holding [addr, addr+n): 1 and its protection (PROT_*), or 0 if no single
 * mapping holds it. (tramp.c) */
int ps_text_mapping(uintptr_t addr, size_t n, int *prot);

/* System calls as inline `syscall` instructions: a probe on libc's wrappers cannot trap the
 * patcher.  They return -errno on failure. */
static inline long ps_raw_syscall(long nr, long a, long b, long c, long d, long e, long f)
{
    long ret;
    register long r10 __asm__("r10") = d, r8 __asm__("r8") = e, r9 __asm__("r9") = f;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "0"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return ret;
}
#define PS_RAW(...) ps_raw_syscall_n(__VA_ARGS__, 0, 0, 0, 0, 0, 0, 0)
#define ps_raw_syscall_n(nr, a, b, c, d, e, f, ...) \
    ps_raw_syscall(nr, (long)(a), (long)(b), (long)(c), (long)(d), (long)(e), (long)(f))

/* Copies text into why (cut to len, NUL-terminated): the refusals' fixed texts. */
static inline void ps_probe_say(char *why, size_t len, const char *text)
{
    size_t n = 0;
    if (len == 0) return;
    while (text[n] && n + 1 < len) {
        why[n] = text[n];
        n++;
    }
    why[n] = '\0';
}
#endif
