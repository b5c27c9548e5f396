/* The live component (runtime/live/): the control channel (control.c) and the live segment
 * (publish.c), and what the sources' publish hooks use (core/source.h: publish).
 *
 * Contract for the publish hooks: they run in the control thread, never in a signal handler,
 * while the application's threads go on.  They read the threads' trees and their own tables
 * without locks: every value read once with an aligned 64-bit (or 32-bit) load, array sizes
 * read first and every index checked against them; values of one node may be a few ns apart.
 * They write into the ps_fmt_t given (fd -1): when the data area is full it sets failed and
 * drops the rest, and the publisher cuts the data back to its last whole line.
 */
#ifndef PS_LIVE_H
#define PS_LIVE_H
#include <stdint.h>
#include "pathscope.h"

#define PS_LIVE_HOT_MAX 64      /* sample: leaves */
#define PS_LIVE_FRAMES 8        /* sample: frames per leaf, innermost first */
#define PS_LIVE_MPI_MAX 128     /* mpi: (communicator, operation) pairs */
#define PS_LIVE_SYS_MAX 32      /* kernel: system calls or libc functions */

/* A load of a value another thread writes (whole, not torn: naturally aligned). */
static inline uint64_t ps_live_load64(const void *p)
{
    return __atomic_load_n((const uint64_t *)p, __ATOMIC_RELAXED);
}
static inline uint32_t ps_live_load32(const void *p)
{
    return __atomic_load_n((const uint32_t *)p, __ATOMIC_RELAXED);
}

/* Ticks (ps_now) to ns at the rate calibrated for this publish: ps_ticks_to_ns() must not be
 * called here, it fixes its rate at its first call (meant for the end of the run). */
uint64_t ps_live_ns(uint64_t ticks);

/* "MODID:0xVADDR": the module (its `module` line in this publish's live section) and the
 * address as an ELF virtual address in it; "-:0xADDR" outside every module. */
void ps_live_frame(ps_fmt_t *f, uintptr_t addr);

/* The N heaviest items seen: a min-heap over items[0 .. n), cap items given by the caller. */
typedef struct {
    uint64_t weight;
    uint64_t a, b;   /* what the caller needs to write the item (thread and node, ...) */
} ps_live_item_t;
typedef struct {
    ps_live_item_t *items;
    int n, cap;
} ps_live_top_t;
void ps_live_top_add(ps_live_top_t *top, uint64_t weight, uint64_t a, uint64_t b);
void ps_live_top_sort(ps_live_top_t *top); /* heaviest first (the heap is gone) */
#endif
