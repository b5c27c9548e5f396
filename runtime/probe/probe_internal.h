/* The probe source's shared state (runtime/probe/): the table of probes, the refusals kept
 * for the rank file, counters.  Written by the thread that adds or removes probes (start-up,
 * then the control thread: serialised by ps_probe_lock), read by the handlers and writers. */
#ifndef PS_PROBE_INTERNAL_H
#define PS_PROBE_INTERNAL_H
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include "probe.h"
#include "source.h"

enum { PROBE_FREE, PROBE_ACTIVE, PROBE_DISABLED, PROBE_REMOVED, PROBE_UNLOADED };
extern const char *const ps_probe_state_names[];
enum { PROBE_TIME, PROBE_CPU, PROBE_RUSAGE };

typedef struct {
    volatile uint32_t state;
    uintptr_t addr;                   /* run-time entry */
    uint64_t vaddr, size;
    uint64_t added, removed;          /* ticks; removed 0: not removed */
    int line;
    char spec[256], name[PS_PROBE_NAME_MAX], file[256], module[512];
} probe_t;

#define PS_PROBE_REFUSALS 256
typedef struct {
    char spec[256], module[512], key[32], text[512];
    uintptr_t addr;                   /* run-time address, 0: none */
    uint64_t vaddr;                   /* its ELF virtual address */
} probe_refusal_t;

extern probe_t ps_probe_table[PS_PROBE_MAX];
extern uint32_t ps_probe_count;       /* ids 1..ps_probe_count-1 are used */
extern probe_refusal_t ps_probe_refusals[PS_PROBE_REFUSALS];
extern uint32_t ps_probe_nrefusals, ps_probe_refused, ps_probe_added, ps_probe_removed;
extern int ps_probe_metrics;          /* PROBE_* */
extern int ps_probe_timed;            /* exits are timed (redirection available) */
extern const char *ps_probe_untimed_why;
extern _Atomic uint64_t ps_probe_passed; /* calls passed through (ours, unknown thread) */
extern pthread_mutex_t ps_probe_lock;

/* Handlers (enter.c). */
void ps_probe_handlers_init(void);
void ps_probe_thread_exit(ps_thread_t *t, void *state);  /* [signal-safe] */
/* The entry fast path (from enter.S; 1: recorded, 0: take the slow path) and the exit hook
 * (unwind.h): general registers only. [signal-safe] */
__attribute__((visibility("hidden"))) int ps_probe_enter_fast(uint32_t id, uintptr_t *slot);
__attribute__((visibility("hidden"))) void ps_probe_exit(ps_thread_t *t, int index, int how);
/* The extra inclusive/exclusive ticks of node's calls still open in t at now (the writers). */
void ps_probe_open_extra(ps_thread_t *t, uint32_t node, uint64_t now, uint64_t *incl,
                         uint64_t *excl, uint64_t *open);
/* Totals of probe id over every thread: calls, inclusive and exclusive ticks. */
void ps_probe_totals(uint32_t id, uint64_t *calls, uint64_t *incl, uint64_t *excl);

/* Adding and removing (source_probe.c). */
/* Resolver lines (module, spec, match, refused, nomatch) -> probes; answers on rq when given.
 * Returns the number of SPECs that matched nothing, the first one's text in nomatch. */
int ps_probe_apply(char **lines, int n, ps_request_t *rq, char *nomatch, size_t len);
#endif
