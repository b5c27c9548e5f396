/* The stack walker: pathscope's own DWARF call-frame-information (CFI) unwinder for x86_64.
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
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
#include <ucontext.h>
#include <unistd.h>

#include "procmaps.h"
#include "unwind.h"

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

/* Changes of the loaded modules: dlclose (interposed below) bumps dl_generation; the table
 * is rebuilt when its generation is older, and each thread drops its cached rules.  A newly
 * loaded module needs no signal: its addresses are unknown to the table, which triggers a
 * rebuild (at most one per REBUILD_GAP_NS for addresses that stay unknown). */
static _Atomic unsigned dl_generation;
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
    unsigned generation = atomic_load(&dl_generation);
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
static const uint8_t *code_lookup(uintptr_t pc, int *known)
{
    for (int attempt = 0; attempt < 3; attempt++) {
        unsigned seq = atomic_load(&code_seq);
        int which = (int)((seq / 2) % 2);
        if (table_generation[which] != atomic_load(&dl_generation)) {
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
static void unwind_modules_changed(void) { atomic_fetch_add(&dl_generation, 1); }

/* A thread's caches are dropped when the modules changed since it filled them. */
static inline void thread_caches_check(ps_thread_t *t)
{
    unsigned generation = atomic_load(&dl_generation);
    if (t->unwind_generation == generation) return;
    memset(t->rules, 0, sizeof t->rules);
    t->nranges = 0;
    t->unwind_generation = generation;
}

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

/* ---- DWARF encodings ---------------------------------------------------------------------- */
#define DW_EH_PE_omit 0xff
static uint64_t read_uleb(const uint8_t **p, const uint8_t *end)
{
    uint64_t v = 0;
    int shift = 0;
    while (*p < end) {
        uint8_t b = *(*p)++;
        if (shift < 64) v |= (uint64_t)(b & 0x7f) << shift;
        shift += 7;
        if (!(b & 0x80)) break;
    }
    return v;
}

static int64_t read_sleb(const uint8_t **p, const uint8_t *end)
{
    uint64_t v = 0;
    int shift = 0;
    uint8_t b = 0;
    while (*p < end) {
        b = *(*p)++;
        if (shift < 64) v |= (uint64_t)(b & 0x7f) << shift;
        shift += 7;
        if (!(b & 0x80)) break;
    }
    if (shift < 64 && (b & 0x40)) v |= ~(uint64_t)0 << shift;
    return (int64_t)v;
}

/* Decodes a pointer of encoding enc at *p; data = base for DW_EH_PE_datarel.  Returns 0 on an
 * encoding we do not read (indirect, textrel, funcrel). */
static int read_encoded(const uint8_t **p, const uint8_t *end, uint8_t enc, uintptr_t data,
                        uintptr_t *out)
{
    if (enc == DW_EH_PE_omit) return 0;
    const uint8_t *start = *p;
    uintptr_t v;
    switch (enc & 0x0f) {
    case 0x00: if (end - *p < 8) return 0; memcpy(&v, *p, 8); *p += 8; break;
    case 0x01: v = (uintptr_t)read_uleb(p, end); break;
    case 0x02: { uint16_t x; if (end - *p < 2) return 0; memcpy(&x, *p, 2); *p += 2; v = x; break; }
    case 0x03: { uint32_t x; if (end - *p < 4) return 0; memcpy(&x, *p, 4); *p += 4; v = x; break; }
    case 0x04: if (end - *p < 8) return 0; memcpy(&v, *p, 8); *p += 8; break;
    case 0x09: v = (uintptr_t)read_sleb(p, end); break;
    case 0x0a: { int16_t x; if (end - *p < 2) return 0; memcpy(&x, *p, 2); *p += 2; v = (uintptr_t)(intptr_t)x; break; }
    case 0x0b: { int32_t x; if (end - *p < 4) return 0; memcpy(&x, *p, 4); *p += 4; v = (uintptr_t)(intptr_t)x; break; }
    case 0x0c: if (end - *p < 8) return 0; memcpy(&v, *p, 8); *p += 8; break;
    default: return 0;
    }
    switch (enc & 0x70) {
    case 0x00: break;
    case 0x10: v += (uintptr_t)start; break;
    case 0x30: v += data; break;
    default: return 0;
    }
    if (enc & 0x80) return 0; /* indirect */
    *out = v;
    return 1;
}

/* ---- modules with an unwinder of their own (thunk mode refuses them) ----------------------
 * Thunks are safe because pathscope restores the return addresses before the C++ unwinder
 * runs, which it sees by interposing _Unwind_RaiseException & co.  A module linked with a
 * static libgcc (-static-libgcc, -static) calls its own copy instead.  Such a module has
 * exception code (CIEs with a personality routine) but does not import _Unwind_Resume, which
 * every landing pad of a dynamically linked one calls.  (A module with try/catch but no
 * cleanup at all is refused too: the safe side.) */
static int module_has_personality(const ElfW(Phdr) *ph, int phnum, uintptr_t bias)
{
    const uint8_t *hdr = NULL;
    for (int i = 0; i < phnum; i++)
        if (ph[i].p_type == PT_GNU_EH_FRAME) hdr = (const uint8_t *)(bias + ph[i].p_vaddr);
    if (!hdr || hdr[0] != 1) return 0;
    const uint8_t *p = hdr + 4;
    uintptr_t eh_frame;
    if (!read_encoded(&p, hdr + 64, hdr[1], (uintptr_t)hdr, &eh_frame)) return 0;
    uintptr_t end = 0; /* the end of the segment holding .eh_frame */
    for (int i = 0; i < phnum; i++) {
        uintptr_t lo = bias + ph[i].p_vaddr, hi = lo + ph[i].p_filesz;
        if (ph[i].p_type == PT_LOAD && eh_frame >= lo && eh_frame < hi) end = hi;
    }
    for (const uint8_t *e = (const uint8_t *)eh_frame; (uintptr_t)e + 9 <= end;) {
        uint32_t len;
        memcpy(&len, e, 4);
        if (len == 0 || len == 0xffffffffu) break; /* the terminator (64-bit lengths: not in x86-64 .eh_frame) */
        uint32_t id;
        memcpy(&id, e + 4, 4);
        if (id == 0 && strchr((const char *)e + 9, 'P')) return 1; /* CIE: version, augmentation */
        e += 4 + (uintptr_t)len;
    }
    return 0;
}

static int module_imports(const ElfW(Dyn) *dyn, const char *want)
{
    const ElfW(Sym) *symtab = NULL;
    const char *strtab = NULL;
    const uint32_t *hash = NULL, *gnu = NULL;
    for (; dyn->d_tag != DT_NULL; dyn++) {
        if (dyn->d_tag == DT_SYMTAB) symtab = (const ElfW(Sym) *)dyn->d_un.d_ptr;
        else if (dyn->d_tag == DT_STRTAB) strtab = (const char *)dyn->d_un.d_ptr;
        else if (dyn->d_tag == DT_HASH) hash = (const uint32_t *)dyn->d_un.d_ptr;
        else if (dyn->d_tag == DT_GNU_HASH) gnu = (const uint32_t *)dyn->d_un.d_ptr;
    }
    if (!symtab || !strtab) return 0;
    uint32_t nsyms = 0;
    if (hash) {
        nsyms = hash[1];
    } else if (gnu) { /* the highest symbol index reachable from the buckets */
        uint32_t nbuckets = gnu[0], symoffset = gnu[1], bloom = gnu[2];
        const uint32_t *buckets = gnu + 4 + bloom * (sizeof(ElfW(Addr)) / 4);
        const uint32_t *chains = buckets + nbuckets;
        for (uint32_t b = 0; b < nbuckets; b++)
            if (buckets[b] >= nsyms) nsyms = buckets[b];
        if (nsyms >= symoffset)
            while (!(chains[nsyms - symoffset] & 1)) nsyms++;
        nsyms++;
    }
    for (uint32_t i = 1; i < nsyms; i++)
        if (symtab[i].st_shndx == SHN_UNDEF && strcmp(strtab + symtab[i].st_name, want) == 0)
            return 1;
    return 0;
}

typedef struct {
    char *name;
    size_t len;
    int found;
} own_unwinder_t;

static int find_own_unwinder(struct dl_phdr_info *info, size_t size, void *data)
{
    own_unwinder_t *o = data;
    const char *path = info->dlpi_name && info->dlpi_name[0] ? info->dlpi_name : "(the program)";
    static const char *const known[] = {"linux-vdso", "ld-linux", "/libc.so", "/libgcc_s.so",
                                        "libpathscope", "/libunwind.so", NULL};
    for (int i = 0; known[i]; i++)
        if (strstr(path, known[i])) return 0;
    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    if (!module_has_personality(info->dlpi_phdr, info->dlpi_phnum, info->dlpi_addr)) return 0;
    if (dyn && module_imports(dyn, "_Unwind_Resume")) return 0;
    snprintf(o->name, o->len, "%s", path);
    o->found = 1;
    return 1;
}

int ps_unwind_own_unwinder(char *name, size_t len)
{
    own_unwinder_t o = {name, len, 0};
    dl_iterate_phdr(find_own_unwinder, &o);
    return o.found;
}

/* ---- FDE search and the CFA program ------------------------------------------------------- */
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
static int fde_find(const uint8_t *hdr, uintptr_t pc, fde_t *f)
{
    if (hdr[0] != 1) return 0;
    uint8_t ptr_enc = hdr[1], count_enc = hdr[2], table_enc = hdr[3];
    const uint8_t *p = hdr + 4, *far = hdr + (1 << 30);
    uintptr_t eh_frame, count;
    if (!read_encoded(&p, far, ptr_enc, (uintptr_t)hdr, &eh_frame)) return 0;
    if (!read_encoded(&p, far, count_enc, (uintptr_t)hdr, &count) || !count) return 0;
    if (table_enc != 0x3b) return 0; /* datarel sdata4: what every toolchain writes */
    const int32_t *table = (const int32_t *)p;
    size_t lo = 0, hi = count;
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if ((uintptr_t)hdr + (uintptr_t)(intptr_t)table[2 * mid] <= pc) lo = mid;
        else hi = mid;
    }
    uintptr_t first = (uintptr_t)hdr + (uintptr_t)(intptr_t)table[2 * lo];
    if (pc < first) return 0;
    const uint8_t *fde = hdr + table[2 * lo + 1];
    /* FDE: length, CIE pointer, pc_begin, pc_range, [augmentation data], instructions */
    uint32_t len32;
    memcpy(&len32, fde, 4);
    if (len32 < 12 || len32 == 0xffffffffu) return 0;
    const uint8_t *fde_end = fde + 4 + len32;
    int32_t cie_ptr;
    memcpy(&cie_ptr, fde + 4, 4);
    const uint8_t *cie = fde + 4 - cie_ptr;
    memcpy(&len32, cie, 4);
    if (len32 < 8 || len32 == 0xffffffffu) return 0;
    const uint8_t *cie_end = cie + 4 + len32;
    const uint8_t *c = cie + 8; /* after length and CIE id */
    uint8_t version = *c++;
    const char *aug = (const char *)c;
    size_t aug_len = strnlen(aug, (size_t)(cie_end - c));
    c += aug_len + 1;
    if (aug[0] && aug[0] != 'z') return 0;
    f->code_align = read_uleb(&c, cie_end);
    f->data_align = read_sleb(&c, cie_end);
    f->ra_reg = version == 1 ? *c++ : read_uleb(&c, cie_end);
    uint8_t fde_enc = 0x00;
    int has_aug_data = aug[0] == 'z';
    if (has_aug_data) {
        uint64_t alen = read_uleb(&c, cie_end);
        const uint8_t *adata = c, *aend = c + alen;
        for (size_t i = 1; i < aug_len; i++) {
            if (adata >= aend) return 0;
            switch (aug[i]) {
            case 'R': fde_enc = *adata++; break;
            case 'L': adata++; break;
            case 'P': {
                uint8_t penc = *adata++;
                uintptr_t ignored;
                if (!read_encoded(&adata, aend, penc & 0x7f, 0, &ignored)) return 0;
                break;
            }
            case 'S': break;
            default: return 0;
            }
        }
        c = aend;
    }
    f->cie_insns = c;
    f->cie_insns_end = cie_end;
    const uint8_t *q = fde + 8;
    uintptr_t pc_begin, pc_range;
    if (!read_encoded(&q, fde_end, fde_enc, 0, &pc_begin)) return 0;
    if (!read_encoded(&q, fde_end, fde_enc & 0x0f, 0, &pc_range)) return 0;
    if (has_aug_data) {
        uint64_t alen = read_uleb(&q, fde_end);
        q += alen;
    }
    f->pc_begin = pc_begin;
    f->pc_end = pc_begin + pc_range;
    f->insns = q;
    f->insns_end = fde_end;
    return pc >= f->pc_begin && pc < f->pc_end;
}

#define STATE_STACK 8

/* Runs the CFI program (CIE initial instructions, then the FDE's) up to pc. */
static int cfa_run(const fde_t *f, uintptr_t pc, cfa_state_t *st)
{
    cfa_state_t initial, stack[STATE_STACK];
    int depth = 0;
    memset(st, 0, sizeof *st);
    st->cfa_reg = DW_RSP;
    st->cfa_off = 8;
    initial = *st;
    for (int pass = 0; pass < 2; pass++) {
        const uint8_t *p = pass ? f->insns : f->cie_insns, *end = pass ? f->insns_end : f->cie_insns_end;
        uintptr_t loc = f->pc_begin;
        if (pass) initial = *st;
        while (p < end) {
            uint8_t op = *p++;
            uint64_t reg, off;
            if ((op & 0xc0) == 0x40) { /* advance_loc */
                loc += (op & 0x3f) * f->code_align;
                if (pass && loc > pc) return 1;
                continue;
            }
            switch (op & 0xc0) {
            case 0x80: /* offset */
                reg = op & 0x3f;
                off = read_uleb(&p, end);
                if (reg == DW_RBP) { st->rbp_saved = 1; st->rbp_from_rbp = 0; st->rbp_off = (int64_t)off * f->data_align; }
                if (reg == f->ra_reg) st->ra_off_ok = (int64_t)off * f->data_align == -8;
                continue;
            case 0xc0: /* restore */
                reg = op & 0x3f;
                if (reg == DW_RBP) { st->rbp_saved = initial.rbp_saved; st->rbp_off = initial.rbp_off; st->rbp_from_rbp = initial.rbp_from_rbp; }
                if (reg == f->ra_reg) { st->ra_off_ok = initial.ra_off_ok; st->ra_undefined = initial.ra_undefined; }
                continue;
            }
            switch (op) {
            case 0x00: break; /* nop */
            case 0x01: { /* set_loc */
                uintptr_t to;
                if (!read_encoded(&p, end, 0x00, 0, &to)) return 0;
                if (pass && to > pc) return 1;
                loc = to;
                break;
            }
            case 0x02: loc += *p++ * f->code_align; if (pass && loc > pc) return 1; break;
            case 0x03: { uint16_t d; memcpy(&d, p, 2); p += 2; loc += d * f->code_align; if (pass && loc > pc) return 1; break; }
            case 0x04: { uint32_t d; memcpy(&d, p, 4); p += 4; loc += d * f->code_align; if (pass && loc > pc) return 1; break; }
            case 0x05: /* offset_extended */
            case 0x11: /* offset_extended_sf */
                reg = read_uleb(&p, end);
                {
                    int64_t o = op == 0x05 ? (int64_t)read_uleb(&p, end) : read_sleb(&p, end);
                    if (reg == DW_RBP) { st->rbp_saved = 1; st->rbp_from_rbp = 0; st->rbp_off = o * f->data_align; }
                    if (reg == f->ra_reg) st->ra_off_ok = o * f->data_align == -8;
                }
                break;
            case 0x06: /* restore_extended */
                reg = read_uleb(&p, end);
                if (reg == DW_RBP) { st->rbp_saved = initial.rbp_saved; st->rbp_off = initial.rbp_off; st->rbp_from_rbp = initial.rbp_from_rbp; }
                if (reg == f->ra_reg) { st->ra_off_ok = initial.ra_off_ok; st->ra_undefined = initial.ra_undefined; }
                break;
            case 0x07: /* undefined */
                reg = read_uleb(&p, end);
                if (reg == f->ra_reg) st->ra_undefined = 1;
                if (reg == DW_RBP) st->rbp_saved = 0;
                break;
            case 0x08: /* same_value */
                reg = read_uleb(&p, end);
                if (reg == DW_RBP) st->rbp_saved = 0;
                break;
            case 0x09: /* register */
                reg = read_uleb(&p, end);
                read_uleb(&p, end);
                if (reg == DW_RBP || reg == f->ra_reg) return 0;
                break;
            case 0x0a: /* remember_state */
                if (depth >= STATE_STACK) return 0;
                stack[depth++] = *st;
                break;
            case 0x0b: /* restore_state */
                if (!depth) return 0;
                *st = stack[--depth];
                break;
            case 0x0c: /* def_cfa */
                st->cfa_reg = (int)read_uleb(&p, end);
                st->cfa_off = (int64_t)read_uleb(&p, end);
                break;
            case 0x0d: st->cfa_reg = (int)read_uleb(&p, end); break;   /* def_cfa_register */
            case 0x0e: st->cfa_off = (int64_t)read_uleb(&p, end); break; /* def_cfa_offset */
            case 0x0f: /* def_cfa_expression */
                st->cfa_expr_len = read_uleb(&p, end);
                if (st->cfa_expr_len > (uint64_t)(end - p)) return 0;
                st->cfa_expr = p;
                st->cfa_reg = -1;
                p += st->cfa_expr_len;
                break;
            case 0x10: /* expression */
            case 0x16: /* val_expression */
                reg = read_uleb(&p, end);
                off = read_uleb(&p, end);
                if (off > (uint64_t)(end - p)) return 0;
                if (op == 0x10 && reg == DW_RBP && off >= 2 && p[0] == 0x76) {
                    /* rbp saved at [DW_OP_breg6 N]: GCC's realigned frames */
                    const uint8_t *q = p + 1;
                    int64_t n = read_sleb(&q, p + off);
                    if (q != p + off) return 0;
                    st->rbp_saved = 1;
                    st->rbp_from_rbp = 1;
                    st->rbp_off = n;
                } else if (reg == DW_RBP || reg == f->ra_reg) {
                    return 0;
                }
                p += off;
                break;
            case 0x12: /* def_cfa_sf */
                st->cfa_reg = (int)read_uleb(&p, end);
                st->cfa_off = read_sleb(&p, end) * f->data_align;
                break;
            case 0x13: st->cfa_off = read_sleb(&p, end) * f->data_align; break; /* def_cfa_offset_sf */
            case 0x14: /* val_offset */
            case 0x15: /* val_offset_sf */
                reg = read_uleb(&p, end);
                if (op == 0x14) read_uleb(&p, end);
                else read_sleb(&p, end);
                if (reg == DW_RBP || reg == f->ra_reg) return 0;
                break;
            case 0x2e: read_uleb(&p, end); break; /* GNU_args_size */
            case 0x2f: /* GNU_negative_offset_extended */
                reg = read_uleb(&p, end);
                off = read_uleb(&p, end);
                if (reg == DW_RBP) { st->rbp_saved = 1; st->rbp_from_rbp = 0; st->rbp_off = -(int64_t)off * f->data_align; }
                if (reg == f->ra_reg) st->ra_off_ok = -(int64_t)off * f->data_align == -8;
                break;
            default:
                return 0;
            }
        }
    }
    return 1;
}

/* ---- the per-thread rule cache ------------------------------------------------------------ */
enum { RULE_EMPTY = 0, RULE_RSP, RULE_RBP, RULE_EXPR, RULE_END, RULE_NONE };

typedef struct {
    uintptr_t pc;
    int32_t cfa_off;
    int16_t rbp_off;   /* NO_SAVE: rbp unchanged */
    uint8_t kind;
    uint8_t flags;     /* RULE_RBP_FROM_RBP: rbp saved at rbp + rbp_off, not CFA + rbp_off */
} rule_entry_t;
#define RULE_RBP_FROM_RBP 1

_Static_assert(sizeof(rule_entry_t) == 16, "rule entries are 16 bytes");
_Static_assert(sizeof(rule_entry_t) * PS_RULE_CACHE <= sizeof(((ps_thread_t *)0)->rules),
               "rule cache fits ps_thread_t.rules");

/* Finds or computes the rule at pc.  For RULE_EXPR the FDE is searched again by the caller. */
static const rule_entry_t *rule_at(ps_thread_t *t, uintptr_t pc)
{
    rule_entry_t *cache = (rule_entry_t *)t->rules;
    rule_entry_t *e = &cache[(pc ^ (pc >> 12)) & (PS_RULE_CACHE - 1)];
    if (e->pc == pc && e->kind != RULE_EMPTY) return e;
    static const rule_entry_t none = {0, 0, NO_SAVE, RULE_NONE, 0};
    int known = 0;
    const uint8_t *hdr = code_lookup(pc, &known);
    if (known < 0) return &none; /* inconclusive: do not cache */
    e->pc = pc;
    e->kind = RULE_NONE;
    e->rbp_off = NO_SAVE;
    e->cfa_off = 0;
    e->flags = 0;
    fde_t f;
    cfa_state_t st;
    if (!hdr || !fde_find(hdr, pc, &f) || !cfa_run(&f, pc, &st)) return e;
    if (st.ra_undefined) {
        e->kind = RULE_END;
        return e;
    }
    if (!st.ra_off_ok) return e;
    if (st.rbp_saved) {
        if (st.rbp_off < -32768 || st.rbp_off > 32767) return e;
        e->rbp_off = (int16_t)st.rbp_off;
        if (st.rbp_from_rbp) e->flags |= RULE_RBP_FROM_RBP;
    }
    if (st.cfa_reg == -1) {
        e->kind = RULE_EXPR;
        return e;
    }
    if ((st.cfa_reg != DW_RSP && st.cfa_reg != DW_RBP) || st.cfa_off < 0 || st.cfa_off > INT32_MAX)
        return e;
    e->kind = st.cfa_reg == DW_RSP ? RULE_RSP : RULE_RBP;
    e->cfa_off = (int32_t)st.cfa_off;
    return e;
}

/* The few DWARF operations CFA expressions use (PLT stubs, realigned frames). */
static int eval_cfa_expr(uintptr_t pc, uintptr_t sp, uintptr_t rbp, uintptr_t lo, uintptr_t hi,
                         uintptr_t *cfa)
{
    int known = 0;
    const uint8_t *hdr = code_lookup(pc, &known);
    fde_t f;
    cfa_state_t st;
    if (!hdr || !fde_find(hdr, pc, &f) || !cfa_run(&f, pc, &st) || st.cfa_reg != -1) return 0;
    uintptr_t stack[16];
    int n = 0;
    const uint8_t *p = st.cfa_expr, *end = p + st.cfa_expr_len;
    while (p < end) {
        uint8_t op = *p++;
        if (n >= 15) return 0;
        if (op >= 0x30 && op <= 0x4f) { stack[n++] = op - 0x30; continue; } /* lit0..31 */
        if (op >= 0x70 && op <= 0x8f) {                                        /* bregN */
            int reg = op - 0x70;
            int64_t off = read_sleb(&p, end);
            uintptr_t base = reg == DW_RSP ? sp : reg == DW_RBP ? rbp : reg == DW_RA ? pc : 0;
            if (reg != DW_RSP && reg != DW_RBP && reg != DW_RA) return 0;
            stack[n++] = base + (uintptr_t)off;
            continue;
        }
        switch (op) {
        case 0x06: /* deref */
            if (n < 1 || stack[n - 1] < lo || stack[n - 1] + 8 > hi) return 0;
            stack[n - 1] = *(const uintptr_t *)stack[n - 1];
            break;
        case 0x08: if (p >= end) return 0; stack[n++] = *p++; break;  /* const1u */
        case 0x09: if (p >= end) return 0; stack[n++] = (uintptr_t)(intptr_t)(int8_t)*p++; break;
        case 0x10: stack[n++] = (uintptr_t)read_uleb(&p, end); break; /* constu */
        case 0x11: stack[n++] = (uintptr_t)read_sleb(&p, end); break; /* consts */
        case 0x1a: if (n < 2) return 0; stack[n - 2] &= stack[n - 1]; n--; break; /* and */
        case 0x22: if (n < 2) return 0; stack[n - 2] += stack[n - 1]; n--; break; /* plus */
        case 0x1c: if (n < 2) return 0; stack[n - 2] -= stack[n - 1]; n--; break; /* minus */
        case 0x24: if (n < 2) return 0; stack[n - 2] <<= stack[n - 1]; n--; break; /* shl */
        case 0x2a: if (n < 2) return 0; stack[n - 2] = (intptr_t)stack[n - 2] >= (intptr_t)stack[n - 1]; n--; break; /* ge */
        case 0x23: if (n < 1) return 0; stack[n - 1] += (uintptr_t)read_uleb(&p, end); break;
        default: return 0;
        }
    }
    if (n != 1) return 0;
    *cfa = stack[0];
    return 1;
}

/* ---- walking ------------------------------------------------------------------------------ */
/* Exact reuse of the previous walk.  A walk is a deterministic function of the starting
 * registers (pc, sp, rbp), the unwind rules (fixed while no module is unloaded) and the stack
 * words it reads: each frame's return-address slot and, where a rule restores rbp, its save
 * slot.  So when a frame of this walk has the same (lookup pc, sp, rbp) as a frame of the
 * previous one, and every slot the previous walk read from there on still holds the value
 * it read then, the rest of the walk is the same -- no guess, no false positive (compare the
 * heuristic of Perks et al., which trusts return address and stack pointer alone).  Checking
 * is one independent load per frame instead of a dependent chain of two; a loop calling MPI
 * repeatedly from the same place pays it for all but the few frames of the wrapper. */
typedef struct {
    uintptr_t lookup, sp, rbp; /* the frame's state; lookup = pc (first frame) or pc - 1 */
    uintptr_t pc;              /* what the walk output for it */
    uintptr_t rbp_slot;        /* where its rule read the caller's rbp, or 0 */
    uintptr_t flags;           /* FRAME_USES_RBP: its CFA came from rbp; FRAME_NEEDS_RBP: the
                                * walk from this frame on depends on the rbp it started with */
} frame_rec_t;
#define FRAME_USES_RBP 1
#define FRAME_NEEDS_RBP 2

static inline int reuse_previous(ps_thread_t *t, int *j, uintptr_t lookup, uintptr_t sp,
                                 uintptr_t rbp, uintptr_t *out, int n, int max, int *complete,
                                 int trust)
{
    const frame_rec_t *prev = (const frame_rec_t *)t->walk_prev;
    int m = t->walk_prev_n;
    while (*j < m && prev[*j].sp < sp) (*j)++;
    if (*j >= m || prev[*j].sp != sp || prev[*j].lookup != lookup) return 0;
    /* rbp matters only if a frame from here on uses it before one restores it from memory
     * (a loop counter kept in rbp by the innermost function would otherwise prevent every
     * match above it) */
    if ((prev[*j].flags & FRAME_NEEDS_RBP) && prev[*j].rbp != rbp) return 0;
    int count = m - *j - 1; /* frames after the matching one */
    if (n + 1 + count > max) return 0;
    /* heuristic mode (trust): the "second match" only -- the next frame's return address is
     * still in its slot; exact mode: every slot the previous walk read */
    int last = trust && *j + 2 < m ? *j + 2 : m;
    for (int k = *j; k + 1 < last; k++) {
        if (*(const uintptr_t *)(prev[k + 1].sp - 8) != prev[k + 1].pc) return 0;
        /* a restored rbp matters only to a walk that depends on it */
        if (prev[k].rbp_slot && (prev[k + 1].flags & FRAME_NEEDS_RBP) &&
            (prev[k].rbp_slot < sp || *(const uintptr_t *)prev[k].rbp_slot != prev[k + 1].rbp))
            return 0;
    }
    for (int k = 0; k < count; k++) out[n + 1 + k] = prev[*j + 1 + k].pc;
    *complete = t->walk_prev_complete;
    return count + 1; /* the matching frame and those after it */
}

/* The walk recorded in walk_cur (n frames) becomes the one the next walk is compared with. */
static void keep_walk(ps_thread_t *t, int n, int complete)
{
    uint64_t *swap = t->walk_prev;
    t->walk_prev = t->walk_cur;
    t->walk_cur = swap;
    t->walk_prev_n = n;
    t->walk_prev_complete = complete;
    t->walk_prev_generation = t->unwind_generation;
    t->walk_prev_seq = t->walk_seq;
}

/* Walks from (pc, sp, rbp); pc is exact for the first frame (first_exact), a return address
 * for the others.  Writes pcs/return addresses innermost first.  flags: WALK_REUSE may reuse
 * the previous walk (WALK_TRUST: on the heuristic's evidence), WALK_KEEP keeps this walk for
 * the next one. */
#define WALK_REUSE 1
#define WALK_TRUST 2
#define WALK_KEEP 4
#define WALK_THUNK 8 /* stop at the first thunk: the rest comes from the thunk stack */
static int walk(ps_thread_t *t, uintptr_t pc, uintptr_t sp, uintptr_t rbp, int first_exact,
                uintptr_t *out, int max, int *complete, int flags)
{
    /* every frame we read lies above the starting stack pointer: below it (down to the
     * rlimit-based bound of the main thread) the stack may not be mapped */
    uintptr_t lo = t->stack_lo > sp ? t->stack_lo : sp, hi = t->stack_hi;
    int n = 0, j = 0, reusable = flags & WALK_REUSE, trust = flags & WALK_TRUST;
    int keepable = 1; /* no CFA expression met: the walk can be compared with the next */
    *complete = 0;
    t->thunk_hit = -1;
    thread_caches_check(t);
    if (t->walk_prev_generation != t->unwind_generation) t->walk_prev_n = 0;
    frame_rec_t *cur = (frame_rec_t *)t->walk_cur;
    if (max > PS_MAX_DEPTH) max = PS_MAX_DEPTH;
    for (int exact = first_exact; n < max; exact = 0) {
        uintptr_t lookup = exact ? pc : pc - 1;
        if (reusable) {
            int reused = reuse_previous(t, &j, lookup, sp, rbp, out, n, max, complete, trust);
            if (reused) {
                t->walk_reused++;
                /* the frames after the matching one are the kept walk's (the matching frame
                 * itself may differ: an exact pc against a return address) */
                if (t->walk_prev_seq + 1 == t->walk_seq) t->walk_same_outer = reused - 1;
                /* a match at the kept walk's first frame: all of it is this walk's outside */
                if (j == 0) t->walk_prev_seq = t->walk_seq;
                out[n] = pc;
                if ((n > 2 || j > 0) && (flags & WALK_KEEP)) {
                    /* a late match: this walk (its own frames, then the previous walk's from
                     * the match on) is what the next walk should be compared with */
                    const frame_rec_t *prev = (const frame_rec_t *)t->walk_prev;
                    memcpy(&cur[n], &prev[j], sizeof *cur * (size_t)reused);
                    cur[n].rbp = rbp;
                    keep_walk(t, n + reused, *complete);
                }
                return n + reused;
            }
        }
        out[n] = pc;
        cur[n].lookup = lookup;
        cur[n].sp = sp;
        cur[n].rbp = rbp;
        cur[n].pc = pc;
        cur[n].rbp_slot = 0;
        cur[n].flags = 0;
        n++;
        const rule_entry_t *r = rule_at(t, lookup);
        uintptr_t cfa;
        switch (r->kind) {
        case RULE_RSP: cfa = sp + (uintptr_t)r->cfa_off; break;
        case RULE_RBP: cfa = rbp + (uintptr_t)r->cfa_off; cur[n - 1].flags = FRAME_USES_RBP; break;
        case RULE_EXPR:
            reusable = keepable = 0; /* its expression may read memory we do not record */
            if (!eval_cfa_expr(lookup, sp, rbp, lo, hi, &cfa)) goto end;
            break;
        case RULE_END: *complete = 1; goto end;
        default: goto end;
        }
        if (cfa <= sp || cfa > hi || cfa - 8 < lo) goto end;
        uintptr_t ra = *(const uintptr_t *)(cfa - 8);
        if (r->rbp_off != NO_SAVE) {
            uintptr_t at = (r->flags & RULE_RBP_FROM_RBP ? rbp : cfa) + (uintptr_t)(intptr_t)r->rbp_off;
            if (at < lo || at + 8 > hi) goto end;
            rbp = *(const uintptr_t *)at;
            cur[n - 1].rbp_slot = at;
            if (r->flags & RULE_RBP_FROM_RBP) cur[n - 1].flags = FRAME_USES_RBP;
        }
        if (!ra) goto end;
        int ti = ps_thunk_index(ra);
        if (__builtin_expect(ti >= 0, 0)) {
            /* a slot we redirected (thunk.c): its entry holds the return address */
            const ps_thunks_t *th = &t->thunks;
            if ((uint32_t)ti >= th->top || th->e[ti].slot != cfa - 8) {
                t->thunk_errors++;
                goto end;
            }
            if (flags & WALK_THUNK) {
                if (n + ti + 1 > max) goto end;
                for (int k = ti; k >= 0; k--) out[n++] = th->e[k].ra;
                t->thunk_hit = ti;
                t->thunk_owner = n - ti - 2; /* the frame whose slot held it */
                *complete = 1;
                return n;
            }
            ra = th->e[ti].ra;
        }
        pc = ra;
        sp = cfa;
    }
end:
    /* this walk becomes the one the next walk may reuse */
    if ((flags & WALK_KEEP) && keepable && n > 1) {
        /* which frames' walks depend on the rbp they started with: a frame that uses rbp, or
         * one that passes it on unchanged to a frame that depends on it */
        int needs = 0;
        for (int k = n - 1; k >= 0; k--) {
            if (cur[k].flags & FRAME_USES_RBP) needs = 1;
            else if (cur[k].rbp_slot) needs = 0;
            if (needs) cur[k].flags |= FRAME_NEEDS_RBP;
        }
        keep_walk(t, n, *complete);
    }
    return n;
}

/* The thread's stack, so that no walk reads outside it. */
void ps_unwind_thread_init(ps_thread_t *t)
{
    ps_thunk_self = &t->thunks;
    pthread_attr_t attr;
    void *addr = NULL;
    size_t size = 0;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
        pthread_attr_getstack(&attr, &addr, &size);
        pthread_attr_destroy(&attr);
    }
    t->stack_lo = (uintptr_t)addr;
    t->stack_hi = (uintptr_t)addr + size;
}

static uintptr_t self2_start, self2_end; /* the heap shim (libpathscope-heap.so) */

int ps_unwind_in_self(uintptr_t addr)
{
    return (addr >= self_start && addr < self_end) || (addr >= self2_start && addr < self2_end);
}

/* ---- traversal modes ------------------------------------------------------------------------
 * full       every walk from scratch
 * reuse      exact reuse of the previous walk (above): no false positive by construction
 * heuristic  Perks et al.: a frame with the previous walk's (return address, stack pointer)
 *            plus a "second match" of the next return address in its slot is trusted for
 *            the rest; against drift, every HEURISTIC_FULL_EVERY-th walk and every walk after
 *            a gap of HEURISTIC_GAP_NS without one is a full walk (which the next may reuse)
 * Every ps_traversal_check-th walk of a thread is repeated as a full walk and compared: the
 * agreement rate is written with the thread (docs/format.md). */
int ps_traversal_mode = PS_TRAVERSAL_REUSE;
unsigned ps_traversal_check = 1000;
const char *const ps_traversal_names[] = {"full", "reuse", "heuristic", "thunk"};
const char *ps_traversal_requested;

#define HEURISTIC_FULL_EVERY 64
#define HEURISTIC_GAP_NS 10000000.0
static uint64_t heuristic_gap_ticks;

/* After a complete walk of n frames in thunk mode: the slots of the frames walked afresh are
 * to get thunks, outermost first, from the frame inside the thunk met (or the outermost
 * frame) down to the first frame of the application (our own innermost frames return right
 * away; the innermost frame of a sample is at an arbitrary instruction, maybe reading its
 * own return address: left alone).  They are noted here and installed by ps_unwind_commit()
 * once the caller has put the path into the tree, so that each new entry -- a call that
 * started since the last walk -- can count one entry on its call-site node. */
static void thunks_prepare(ps_thread_t *t, int n, int sync)
{
    ps_thunks_t *th = &t->thunks;
    th->npend = 0;
    if (th->suspended) return;
    const frame_rec_t *cur = (const frame_rec_t *)t->walk_cur;
    int owner, index;
    if (t->thunk_hit >= 0) {
        owner = t->thunk_owner;  /* frames 0 .. owner-1 have fresh slots */
        index = t->thunk_hit + 1;
    } else {
        owner = n - 1;           /* the outermost frame has no slot */
        index = 0;
    }
    int first = sync ? 0 : 1;
    while (first < owner && ps_unwind_in_self(cur[first].pc)) first++;
    th->pend_base = (uint32_t)index;
    th->pend_seq = t->walk_seq;
    for (int k = owner - 1; k >= first && index < PS_MAX_DEPTH; k--, index++) {
        uint32_t i = th->npend++;
        th->pend[i].slot = cur[k + 1].sp - 8;
        th->pend[i].ra = cur[k + 1].pc;
        th->pend[i].outer = (uint32_t)(n - 2 - k); /* frame k+1's position from the root */
    }
}

void ps_unwind_commit(ps_thread_t *t)
{
    ps_thunks_t *th = &t->thunks;
    if (!ps_thunks_available || th->suspended || th->pend_seq != t->walk_seq) return;
    th->pend_seq = 0;
    int counted = t->last_keys_seq == t->walk_seq; /* last_nodes holds this walk's path */
    uint32_t index = th->pend_base;
    th->top = index;             /* entries above the thunk met are stale */
    for (uint32_t i = 0; i < th->npend; i++, index++) {
        uintptr_t *slot = (uintptr_t *)th->pend[i].slot, ra = th->pend[i].ra;
        if (*slot != ra) break; /* (cannot happen: the walk read it) */
        /* a frame whose thunk was put back and is met again is the same call */
        int again = index < th->restored_top && th->e[index].slot == (uintptr_t)slot &&
                    th->e[index].ra == ra;
        th->e[index].slot = (uintptr_t)slot;
        th->e[index].ra = ra;
        th->top = index + 1;
        atomic_signal_fence(memory_order_seq_cst); /* the entry before the slot */
        *slot = ps_thunk_address((int)index);
        uint32_t outer = th->pend[i].outer;
        if (counted && !again && (int)outer < t->last_n) t->nodes[t->last_nodes[outer]].entries++;
    }
    th->restored_top = 0; /* (after a restore there is no thunk: this walk covered them all) */
    if (t->thunk_restore_request) { /* a cancel request came in meanwhile (thunk.c) */
        ps_thunks_restore(t, 1);
        t->thunk_restore_request = 0;
    }
}

static int walk_mode(ps_thread_t *t, uintptr_t pc, uintptr_t sp, uintptr_t rbp, int first_exact,
                     uintptr_t *out, int max, int *complete, int sync)
{
    int flags;
    switch (ps_traversal_mode) {
    case PS_TRAVERSAL_FULL: flags = 0; break;
    case PS_TRAVERSAL_THUNK: flags = WALK_THUNK; break;
    case PS_TRAVERSAL_HEURISTIC: {
        uint64_t now = ps_now();
        if (!heuristic_gap_ticks) heuristic_gap_ticks = (uint64_t)(ps_ticks_per_ns() * HEURISTIC_GAP_NS);
        int fresh = ++t->walks_since_full >= HEURISTIC_FULL_EVERY || now - t->walk_last_ticks > heuristic_gap_ticks;
        t->walk_last_ticks = now;
        if (fresh) t->walks_since_full = 0;
        flags = fresh ? WALK_KEEP : WALK_REUSE | WALK_TRUST | WALK_KEEP;
        break;
    }
    default: flags = WALK_REUSE | WALK_KEEP; break;
    }
    t->walk_seq++;
    t->walk_same_outer = 0;
    int n = walk(t, pc, sp, rbp, first_exact, out, max, complete, flags);
    if (flags == WALK_THUNK) {
        if (t->thunk_hit >= 0) {
            t->walk_reused++;
            t->walk_same_outer = t->thunk_hit + 1; /* those frames have not returned since */
        }
        if (*complete && ps_thunks_available) thunks_prepare(t, n, sync);
        if (t->thunk_restore_request) { /* a cancel request came in meanwhile (thunk.c) */
            ps_thunks_restore(t, 1);
            t->thunk_restore_request = 0;
        }
    }
    t->walks++;
    if (ps_traversal_check && t->walk_check_countdown-- <= 1) {
        t->walk_check_countdown = ps_traversal_check;
        int c = 0;
        int m = walk(t, pc, sp, rbp, first_exact, t->check_buf, max, &c, 0);
        t->walk_checks++;
        if (m == n && c == *complete && memcmp(out, t->check_buf, sizeof *out * (size_t)n) == 0)
            t->walk_agree++;
    }
    return n;
}

__attribute__((noinline)) int ps_unwind_caller(uintptr_t *out, int max, int *complete)
{
    *complete = 0;
    ps_thread_t *t = ps_self;
    if (!ps_unwind_ok || !t) return 0;
    uintptr_t pc, sp, rbp;
    __asm__ __volatile__("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2"
                         : "=r"(pc), "=r"(sp), "=r"(rbp));
    int n = walk_mode(t, pc, sp, rbp, 1, out, max, complete, 1);
    int skip = 0;
    while (skip < n && ps_unwind_in_self(out[skip])) skip++;
    n -= skip;
    if (n <= 0) {
        *complete = 0;
        return 0;
    }
    if (skip) memmove(out, out + skip, sizeof *out * (size_t)n);
    return n;
}

int ps_unwind_from(uintptr_t ra, uintptr_t sp, uintptr_t rbp, uintptr_t *out, int max, int *complete)
{
    *complete = 0;
    ps_thread_t *t = ps_self;
    if (!ps_unwind_ok || !t) return 0;
    int ti = ps_thunk_index(ra);
    if (ti < 0) return walk_mode(t, ra, sp, rbp, 0, out, max, complete, 1);
    /* the allocator was reached by a sibling call (`return malloc(n)`): it returns through the
     * slot of the function that jumped to it, which holds that function's thunk */
    ps_thunks_t *th = &t->thunks;
    if ((uint32_t)ti >= th->top || th->e[ti].slot != sp - 8) {
        t->thunk_errors++;
        return 0;
    }
    int n = walk_mode(t, th->e[ti].ra, sp, rbp, 0, out, max, complete, 1);
    if (th->top < (uint32_t)ti + 1) th->top = (uint32_t)ti + 1; /* the slot still needs it */
    return n;
}

int ps_unwind_signal(void *ucontext, uintptr_t *out, int max, int *complete)
{
    *complete = 0;
    ps_thread_t *t = ps_self;
    if (!ps_unwind_ok || !t) return 0;
    const ucontext_t *uc = ucontext;
    return walk_mode(t, (uintptr_t)uc->uc_mcontext.gregs[REG_RIP], (uintptr_t)uc->uc_mcontext.gregs[REG_RSP],
                     (uintptr_t)uc->uc_mcontext.gregs[REG_RBP], 1, out, max, complete, 0);
}

/* Function entries come from the FDE covering pc (pc_begin), cached per thread in a sorted
 * range table so that a function is searched once. */
uintptr_t ps_unwind_function_start(ps_thread_t *t, uintptr_t pc)
{
    thread_caches_check(t);
    int lo = 0, hi = t->nranges;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (t->ranges[mid].end <= pc) lo = mid + 1;
        else hi = mid;
    }
    if (lo < t->nranges && t->ranges[lo].start <= pc && pc < t->ranges[lo].end)
        return t->ranges[lo].start;
    int known = 0;
    const uint8_t *hdr = code_lookup(pc, &known);
    fde_t f;
    if (!hdr || !fde_find(hdr, pc, &f)) return 0;
    if (t->nranges < PS_RANGE_CACHE) {
        memmove(&t->ranges[lo + 1], &t->ranges[lo], sizeof t->ranges[0] * (size_t)(t->nranges - lo));
        t->ranges[lo].start = f.pc_begin;
        t->ranges[lo].end = f.pc_end;
        t->nranges++;
    }
    return f.pc_begin;
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
