/* Reading the unwind tables: DWARF pointer encodings, the FDE search through .eh_frame_hdr,
 * the CFA program interpreter (the rule at an address) and the CFA expression machine; and
 * the search for modules with an unwinder of their own, which thunk mode refuses.  Reads only
 * mapped unwind tables, and the thread's stack between the bounds it is given.  [signal-safe],
 * except ps_unwind_own_unwinder (dl_iterate_phdr).
 */
#define _GNU_SOURCE
#include <elf.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

#include "unwind_internal.h"

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
/* Finds the FDE covering pc through the binary-search table of .eh_frame_hdr. */
int ps_unwind_fde_find(const uint8_t *hdr, uintptr_t pc, fde_t *f)
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
int ps_unwind_cfa_run(const fde_t *f, uintptr_t pc, cfa_state_t *st)
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

/* ---- CFA expressions ---------------------------------------------------------------------- */
/* The few DWARF operations CFA expressions use (PLT stubs, realigned frames). */
int ps_unwind_eval_cfa_expr(uintptr_t pc, uintptr_t sp, uintptr_t rbp, uintptr_t lo, uintptr_t hi,
                            uintptr_t *cfa)
{
    int known = 0;
    const uint8_t *hdr = ps_unwind_code_lookup(pc, &known);
    fde_t f;
    cfa_state_t st;
    if (!hdr || !ps_unwind_fde_find(hdr, pc, &f) || !ps_unwind_cfa_run(&f, pc, &st) || st.cfa_reg != -1) return 0;
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
