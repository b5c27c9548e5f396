/* The module table: the executable mappings of the process and their unwind tables
 * (.eh_frame_hdr), read from /proc/self/maps into static storage and rebuilt when an address
 * is unknown or after a dlclose (interposed here); pathscope's own code ranges (so that
 * walks can skip our frames); ps_unwind_init.  [signal-safe], except ps_unwind_init,
 * ps_unwind_code_range and ps_unwind_add_self (dl_iterate_phdr).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "procmaps.h"
#include "unwind_internal.h"

int ps_unwind_ok;

/* ---- modules: executable mappings and their .eh_frame_hdr ---------------------------------- */
#define MAX_CODE 8192
typedef struct {
    uintptr_t start, end;       /* executable mapping */
    const uint8_t *eh_frame_hdr; /* NULL: no unwind tables */
} code_t;

static code_t code_tables[2][MAX_CODE];
static int code_counts[2];
static _Atomic unsigned code_seq;  /* even: table [seq/2 % 2] is valid */
static atomic_flag code_rebuilding = ATOMIC_FLAG_INIT;
static char maps_buf[1 << 16];
static uintptr_t self_start, self_end; /* pathscope's own code */

/* The .eh_frame_hdr of the image whose ELF header is mapped at base. */
static const uint8_t *image_eh_frame_hdr(uintptr_t base)
{
    ps_elf_image_t img; /* (a copy: the image may be unmapped by another thread meanwhile) */
    if (!ps_elf_image(base, &img)) return NULL;
    for (int i = 0; i < img.phnum; i++)
        if (img.ph[i].p_type == PT_GNU_EH_FRAME) return (const uint8_t *)(img.bias + img.ph[i].p_vaddr);
    return NULL;
}

/* Changes of the loaded modules: dlclose (interposed below) bumps ps_unwind_dl_generation;
 * the table is rebuilt when its generation is older, and each thread drops its cached rules
 * (thread_caches_check, unwind_internal.h).  A newly loaded module needs no signal: its
 * addresses are unknown to the table, which triggers a rebuild (at most one per
 * REBUILD_GAP_NS for addresses that stay unknown). */
_Atomic unsigned ps_unwind_dl_generation;
static unsigned table_generation[2];
static _Atomic uint64_t last_unknown_rebuild_ns;
static _Atomic int last_rebuild_grew; /* the last rebuild for an unknown pc found new code:
                                       * modules are being loaded, the next may rebuild now */
#define REBUILD_GAP_NS 100000000ull

typedef struct {
    char path[512];
    uintptr_t base;
    int readable;
} maps_file_t;

/* One line of /proc/self/maps into the table. */
static void code_add_line(char *line, code_t *table, int *n, maps_file_t *file)
{
    ps_maps_line_t m;
    if (!ps_maps_parse_line(line, &m)) return;
    if (m.path && strncmp(m.path, file->path, sizeof file->path) != 0) {
        size_t l = strlen(m.path);
        if (l >= sizeof file->path) l = sizeof file->path - 1;
        memcpy(file->path, m.path, l);
        file->path[l] = 0;
        file->base = m.start;
        file->readable = m.readable;
    }
    if (!m.executable || *n >= MAX_CODE) return;
    table[*n].start = m.start;
    table[*n].end = m.end;
    /* anonymous code (JIT) is known, without unwind tables; never read device mappings */
    table[*n].eh_frame_hdr = m.path && m.path[0] == '/' && file->readable ? image_eh_frame_hdr(file->base)
                             : m.path && strcmp(m.path, "[vdso]") == 0 ? image_eh_frame_hdr(m.start) : NULL;
    (*n)++;
}

/* Reads /proc/self/maps (in chunks: any size) into the inactive table and publishes it.
 * Returns 0 if another thread is rebuilding (the caller counts a failure). [signal-safe] */
static int code_rebuild(void)
{
    if (atomic_flag_test_and_set(&code_rebuilding)) return 0;
    unsigned generation = atomic_load(&ps_unwind_dl_generation);
    ps_ownfd_t maps;
    if (ps_maps_open(&maps) < 0) {
        atomic_flag_clear(&code_rebuilding);
        return 0;
    }
    unsigned seq = atomic_load(&code_seq);
    int target = (int)((seq / 2 + 1) % 2);
    code_t *table = code_tables[target];
    int n = 0;
    static maps_file_t file;
    memset(&file, 0, sizeof file);
    size_t have = 0;
    for (;;) {
        long r = ps_maps_read(&maps, maps_buf + have, sizeof maps_buf - 1 - have);
        if (r <= 0) break;
        have += (size_t)r;
        maps_buf[have] = 0;
        char *line = maps_buf, *nl;
        while ((nl = strchr(line, '\n'))) {
            *nl = 0;
            code_add_line(line, table, &n, &file);
            line = nl + 1;
        }
        have = (size_t)(maps_buf + have - line); /* keep the partial last line */
        memmove(maps_buf, line, have);
        if (have >= sizeof maps_buf - 1) have = 0; /* a line longer than the buffer: skip */
    }
    ps_fd_release(&maps);
    code_counts[target] = n;
    table_generation[target] = generation;
    atomic_store(&code_seq, seq + 1); /* odd: switching */
    atomic_store(&code_seq, seq + 2);
    atomic_flag_clear(&code_rebuilding);
    return 1;
}

/* The eh_frame_hdr for pc, or NULL.  *known: 1 pc is in a mapping of the table, 0 it is
 * not, -1 the table is out of date and another thread is rebuilding it (inconclusive). */
const uint8_t *ps_unwind_code_lookup(uintptr_t pc, int *known)
{
    for (int attempt = 0; attempt < 3; attempt++) {
        unsigned seq = atomic_load(&code_seq);
        int which = (int)((seq / 2) % 2);
        if (table_generation[which] != atomic_load(&ps_unwind_dl_generation)) {
            if (!code_rebuild()) {
                *known = -1;
                return NULL;
            }
            continue;
        }
        const code_t *table = code_tables[which];
        int lo = 0, hi = code_counts[which];
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (table[mid].end <= pc) lo = mid + 1;
            else hi = mid;
        }
        const code_t *c = lo < code_counts[which] && table[lo].start <= pc ? &table[lo] : NULL;
        const uint8_t *hdr = c ? c->eh_frame_hdr : NULL;
        if (atomic_load(&code_seq) != seq) continue; /* rebuilt meanwhile: look again */
        if (!c && attempt == 0) {
            /* a module loaded since the last rebuild?  (rate-limited: JIT code stays unknown) */
            uint64_t now = ps_clock_monotonic_ns(), last = atomic_load(&last_unknown_rebuild_ns);
            int before = code_counts[which];
            if ((now - last > REBUILD_GAP_NS || atomic_load(&last_rebuild_grew)) &&
                atomic_compare_exchange_strong(&last_unknown_rebuild_ns, &last, now) && code_rebuild()) {
                unsigned seq2 = atomic_load(&code_seq);
                atomic_store(&last_rebuild_grew, code_counts[(seq2 / 2) % 2] > before);
                continue;
            }
        }
        *known = c != NULL;
        return hdr;
    }
    *known = -1;
    return NULL;
}

/* Called after every dlclose: cached tables and rules may name code that is gone. */
static void unwind_modules_changed(void) { atomic_fetch_add(&ps_unwind_dl_generation, 1); }


typedef int (*dlclose_fn)(void *);

/* Exported: unloading code must invalidate what we cached about it.  (dlopen is not wrapped:
 * it resolves paths relative to its caller, and new code is found as unknown addresses.) */
__attribute__((visibility("default"))) int dlclose(void *handle)
{
    static dlclose_fn real;
    if (!real) real = (dlclose_fn)dlsym(RTLD_NEXT, "dlclose");
    if (!real) return -1;
    int rc = real(handle);
    unwind_modules_changed();
    return rc;
}

/* ---- pathscope's own code ------------------------------------------------------------------ */
static uintptr_t self2_start, self2_end; /* the heap shim (libpathscope-heap.so) */

int ps_unwind_in_self(uintptr_t addr)
{
    return (addr >= self_start && addr < self_end) || (addr >= self2_start && addr < self2_end);
}

typedef struct {
    uintptr_t probe, start, end;
} code_range_t;

/* The executable segment containing probe (dl_iterate_phdr callback). */
static int find_code(struct dl_phdr_info *info, size_t size, void *data)
{
    code_range_t *r = data;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (r->probe >= lo && r->probe < hi) {
            r->start = lo;
            r->end = hi;
            return 1;
        }
    }
    return 0;
}

void ps_unwind_code_range(uintptr_t code, uintptr_t *start, uintptr_t *end)
{
    code_range_t r = {code, 0, 0};
    dl_iterate_phdr(find_code, &r);
    *start = r.start;
    *end = r.end;
}

void ps_unwind_add_self(uintptr_t code) { ps_unwind_code_range(code, &self2_start, &self2_end); }

int ps_unwind_init(char *err, size_t errlen)
{
    code_range_t self = {(uintptr_t)&ps_unwind_init, 0, 0};
    dl_iterate_phdr(find_code, &self);
    self_start = self.start;
    self_end = self.end;
    if (!code_rebuild()) {
        snprintf(err, errlen, "cannot read /proc/self/maps: call paths are off");
        return -1;
    }
    ps_unwind_ok = 1;
    return 0;
}
