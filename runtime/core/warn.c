/* Runtime warnings: things the user must hear about that happen inside the application (a
 * sampler that stopped, a signal handler the application took over, ...).  They are recorded
 * where they happen and reported at the end of the run: one `warning` line per key in the
 * rank file (docs/format.md), one stderr line per key from each rank.
 *
 * Everything here is [signal-safe]: a fixed table, slots claimed with atomics, no malloc, no
 * locks, no stdio.  A thread (or a signal handler on top of it) never waits for a slot another
 * is filling: it takes a new slot, and the writers merge slots of the same key.
 */
#include <string.h>
#include <unistd.h>

#include "pathscope.h"

#define PS_WARN_SLOTS 32
#define PS_WARN_KEY 40
#define PS_WARN_TEXT 320

enum { SLOT_FREE, SLOT_FILLING, SLOT_READY };

typedef struct {
    _Atomic int state;
    _Atomic uint64_t count;
    uint64_t first_ns;
    char key[PS_WARN_KEY];
    char text[PS_WARN_TEXT];
} warn_slot_t;

static warn_slot_t slots[PS_WARN_SLOTS];
static _Atomic uint64_t warnings_lost; /* the table was full */

static void copy_bounded(char *dst, size_t cap, const char *src)
{
    size_t n = 0;
    for (; src[n] && n + 1 < cap; n++) dst[n] = src[n];
    dst[n] = 0;
}

void ps_warn(const char *key, const char *text)
{
    for (int i = 0; i < PS_WARN_SLOTS; i++) {
        warn_slot_t *s = &slots[i];
        if (atomic_load(&s->state) == SLOT_READY && strncmp(s->key, key, PS_WARN_KEY - 1) == 0) {
            atomic_fetch_add(&s->count, 1);
            return;
        }
    }
    for (int i = 0; i < PS_WARN_SLOTS; i++) {
        warn_slot_t *s = &slots[i];
        int expected = SLOT_FREE;
        if (!atomic_compare_exchange_strong(&s->state, &expected, SLOT_FILLING)) continue;
        copy_bounded(s->key, sizeof s->key, key);
        copy_bounded(s->text, sizeof s->text, text);
        s->first_ns = ps_clock_monotonic_ns() - ps_start_ns;
        atomic_store(&s->count, 1);
        atomic_store(&s->state, SLOT_READY);
        return;
    }
    atomic_fetch_add(&warnings_lost, 1);
}

/* The first ready slot of each key, with the counts of its duplicates added. */
static uint64_t merged_count(int i)
{
    for (int j = 0; j < i; j++)
        if (atomic_load(&slots[j].state) == SLOT_READY && strcmp(slots[j].key, slots[i].key) == 0)
            return 0; /* reported with slot j */
    uint64_t n = atomic_load(&slots[i].count);
    for (int j = i + 1; j < PS_WARN_SLOTS; j++)
        if (atomic_load(&slots[j].state) == SLOT_READY && strcmp(slots[j].key, slots[i].key) == 0)
            n += atomic_load(&slots[j].count);
    return n;
}

void ps_warn_write(ps_fmt_t *f)
{
    for (int i = 0; i < PS_WARN_SLOTS; i++) {
        if (atomic_load(&slots[i].state) != SLOT_READY) continue;
        uint64_t n = merged_count(i);
        if (!n) continue;
        ps_fmt_str(f, "warning\t");
        ps_fmt_tsv(f, slots[i].key);
        ps_fmt_char(f, '\t');
        ps_fmt_u64(f, n);
        ps_fmt_char(f, '\t');
        ps_fmt_u64(f, slots[i].first_ns);
        ps_fmt_char(f, '\t');
        ps_fmt_tsv(f, slots[i].text);
        ps_fmt_char(f, '\n');
    }
    uint64_t lost = atomic_load(&warnings_lost);
    if (lost) {
        ps_fmt_str(f, "warning\twarnings-lost\t");
        ps_fmt_u64(f, lost);
        ps_fmt_str(f, "\t0\tmore distinct warnings than the runtime can keep: some were dropped\n");
    }
}

void ps_warn_print(void)
{
    if (ps_option_on(ps_options.quiet)) return;
    char line[PS_WARN_TEXT + 64];
    for (int i = 0; i < PS_WARN_SLOTS; i++) {
        if (atomic_load(&slots[i].state) != SLOT_READY || !merged_count(i)) continue;
        ps_fmt_t f = {line, 0, sizeof line - 1, -1, 0};
        ps_fmt_str(&f, "pathscope: rank ");
        ps_fmt_i64(&f, ps_world_rank < 0 ? 0 : ps_world_rank);
        ps_fmt_str(&f, ": ");
        ps_fmt_str(&f, slots[i].text);
        ps_fmt_char(&f, '\n');
        ps_sys_write(2, line, f.len);
    }
}

int ps_warn_count(const char *key)
{
    int n = 0;
    for (int i = 0; i < PS_WARN_SLOTS; i++)
        if (atomic_load(&slots[i].state) == SLOT_READY && strcmp(slots[i].key, key) == 0)
            n += (int)atomic_load(&slots[i].count);
    return n;
}
