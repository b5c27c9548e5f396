/* pathscope-symbolize --resolve: the probe resolver (docs/design-probes.md, sections 2 and 4).
 * It turns SPECs into functions and, for each, a patch plan the runtime applies without a
 * disassembler of its own (the match line and PLAN of runtime/probe/probe.h).
 *
 * Contract:
 *  - stdin, TAB-separated, blank lines skipped:
 *      module <TAB> ID <TAB> PATH <TAB> BUILD_ID   as for the symbolizer (symbols.h)
 *      spec <TAB> ID <TAB> TEXT                    ID decimal, unique; TEXT escaped as a path
 *  - stdout, per spec in input order, then `end`:
 *      match SPEC_ID MODULE_ID 0xVADDR SIZE NAME FILE LINE PLAN   a function to patch; FILE and
 *                                         LINE its DWARF declaration (`-` and 0 without)
 *      refused SPEC_ID MODULE_ID 0xVADDR NAME KEY TEXT            one that cannot be patched
 *                                         (KEY as in docs/format.md's probe-refused line)
 *      nomatch SPEC_ID TEXT                                       nothing matched: a sentence
 *                                         naming the SPEC and where it looked
 *    A function is one (module file, address), in module order then address order: aliases
 *    give one line named by the preferred alias; modules naming the same file are answered
 *    for the first of them.
 *  - A malformed request: `pathscope-symbolize: line N: WHAT` on stderr, exit 2, nothing on
 *    stdout.  A SPEC that cannot match (bad regular expression, empty name) is a nomatch.
 *
 * SPEC: NAME (demangled, qualified, without parameters or return type: every overload, and
 * every instance when it names a function template without its arguments), NAME(PARAMS) (one
 * overload's demangled text), /REGEX/ (POSIX ERE on the demangled text, unanchored; more than
 * RESOLVE_MAX_REGEX functions is a nomatch giving the count), FILE:LINE (functions declared
 * there, else those holding the line's line-table rows), MODULE:SPEC (MODULE a path or
 * basename, version suffix optional).  The module prefix ends at the first lone `:` before any
 * `(` or `<`; `X:123` is FILE:LINE.
 */
#include "symbols.h"
#include "../probe/probe.h"

#include <Zydis/Zydis.h>
#include <dwarf.h>
#include <ctype.h>
#include <inttypes.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>

#define RESOLVE_MAX_REGEX 256 /* matches of one /REGEX/ */
#define RESOLVE_JMP_LEN 5     /* the jmp rel32 written at the site */
#define RESOLVE_WHY 256

enum { RESOLVE_NAME, RESOLVE_SIG, RESOLVE_REGEX, RESOLVE_LINE };

typedef struct {
    uint64_t id;
    char *text;
} resolve_spec_t;

/* A parsed SPEC; its strings point into buf. */
typedef struct {
    char *buf;
    const char *module; /* NULL: every module */
    const char *pattern;
    int form;
    int line;
    regex_t re;
} resolve_query_t;

/* One function found: a module and the preferred symbol at its address. */
typedef struct {
    size_t module;
    const symbols_sym_t *sym;
} resolve_hit_t;

/* Per image: the demangled names of its symbols, made once. */
typedef struct {
    char **full;      /* symbols_demangle */
    const char **sig; /* full without a return type */
    char **base;      /* sig without parameters (and qualifiers) */
} resolve_names_t;

static resolve_spec_t *resolve_specs;
static size_t resolve_nspecs, resolve_cap_specs;
static resolve_names_t *resolve_names;
static ZydisDecoder resolve_decoder;

/* ---- input -------------------------------------------------------------------------------- */

static void resolve_parse_spec(char **field)
{
    resolve_spec_t s;
    s.id = symbols_parse_id(field[1], "spec");
    for (size_t i = 0; i < resolve_nspecs; i++)
        if (resolve_specs[i].id == s.id) symbols_bad_input("duplicate spec id %" PRIu64, s.id);
    if (!symbols_unescape(field[2]))
        symbols_bad_input("bad escape in spec '%s'", symbols_quote(field[2]));
    if (!field[2][0]) symbols_bad_input("empty spec");
    s.text = symbols_strdup(field[2]);
    if (resolve_nspecs == resolve_cap_specs) {
        resolve_cap_specs = resolve_cap_specs ? 2 * resolve_cap_specs : 16;
        resolve_specs = symbols_alloc(resolve_specs, resolve_cap_specs, sizeof s);
    }
    resolve_specs[resolve_nspecs++] = s;
}

/* ---- SPEC syntax -------------------------------------------------------------------------- */

static int resolve_is_regex(const char *s)
{
    size_t n = strlen(s);
    return n >= 2 && s[0] == '/' && s[n - 1] == '/';
}

static int resolve_all_digits(const char *s)
{
    if (!*s) return 0;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s)) return 0;
    return 1;
}

/* The first `:` that is not half of a `::`, before any `(` or `<` (a parameter list or
 * template argument may hold anything); NULL when there is none. */
static char *resolve_lone_colon(char *s)
{
    for (char *p = s; *p && *p != '(' && *p != '<'; p++) {
        if (*p != ':') continue;
        if (p[1] == ':') { p++; continue; }
        return p;
    }
    return NULL;
}

/* The form of what follows a module prefix (or the whole SPEC); NULL or what is wrong. */
static const char *resolve_parse_form(resolve_query_t *q, char *s, int module_allowed)
{
    if (resolve_is_regex(s)) {
        s[strlen(s) - 1] = 0;
        q->form = RESOLVE_REGEX;
        q->pattern = s + 1;
        return regcomp(&q->re, q->pattern, REG_EXTENDED | REG_NOSUB) == 0 ? NULL
               : "is not a valid extended regular expression";
    }
    char *colon = resolve_lone_colon(s);
    if (colon && resolve_all_digits(colon + 1)) {
        *colon = 0;
        long line = strtol(colon + 1, NULL, 10);
        if (!*s) return "names no file before the line";
        if (line <= 0 || line > INT32_MAX) return "names no valid line";
        q->form = RESOLVE_LINE;
        q->pattern = s;
        q->line = (int)line;
        return NULL;
    }
    if (colon) {
        if (!module_allowed) return "has two module prefixes";
        *colon = 0;
        if (!*s) return "has an empty module name";
        q->module = s;
        return resolve_parse_form(q, colon + 1, 0);
    }
    if (!*s) return "names no function";
    q->form = strchr(s, '(') ? RESOLVE_SIG : RESOLVE_NAME;
    q->pattern = s;
    return NULL;
}

/* A module path matches MODULE by path or by basename, with or without a version suffix
 * (`liblammps.so` matches `liblammps.so.0`). */
static int resolve_module_matches(const char *path, const char *want)
{
    const char *slash = strrchr(path, '/');
    const char *name = strchr(want, '/') || !slash ? path : slash + 1;
    size_t n = strlen(want);
    if (strncmp(name, want, n) != 0) return 0;
    const char *rest = name + n;
    if (!*rest) return 1;
    if (rest[0] != '.' || !isdigit((unsigned char)rest[1])) return 0;
    for (; *rest; rest++)
        if (*rest != '.' && !isdigit((unsigned char)*rest)) return 0;
    return 1;
}

/* ---- names -------------------------------------------------------------------------------- */

/* The balanced `(` of a demangled name's parameter list (the last `)`'s partner), or NULL for a
 * name without one (C, Fortran). */
static const char *resolve_params(const char *full)
{
    const char *close = strrchr(full, ')');
    if (!close) return NULL;
    int depth = 0;
    for (size_t i = (size_t)(close - full) + 1; i-- > 0;) {
        if (full[i] == ')') depth++;
        else if (full[i] == '(' && --depth == 0) return full + i;
    }
    return NULL;
}

/* Where the name starts after a template function's return type (`void ns::f<int>(int)`): past
 * the last space outside brackets, stopping at `operator` (whose own spaces and brackets are
 * its name).  Thunks ("virtual thunk to f()") keep their text so a NAME never meets them. */
static const char *resolve_skip_return_type(const char *full, const char *end)
{
    if (strstr(full, "thunk to ")) return full;
    const char *start = full;
    int depth = 0;
    for (const char *p = full; p < end; p++) {
        if (depth == 0 && strncmp(p, "operator", 8) == 0
            && (p == full || p[-1] == ':' || p[-1] == ' '))
            break;
        if (*p == '<' || *p == '(' || *p == '[' || *p == '{') depth++;
        else if ((*p == '>' || *p == ')' || *p == ']' || *p == '}') && depth > 0) depth--;
        else if (*p == ' ' && depth == 0) start = p + 1;
    }
    return start;
}

static void resolve_load_names(size_t image)
{
    symbols_image_t *im = &symbols_images[image];
    resolve_names_t *n = &resolve_names[image];
    if (n->full) return;
    if (!im->syms_loaded) symbols_load_syms(im);
    n->full = symbols_alloc(NULL, im->nsyms, sizeof *n->full);
    n->sig = symbols_alloc(NULL, im->nsyms, sizeof *n->sig);
    n->base = symbols_alloc(NULL, im->nsyms, sizeof *n->base);
    for (size_t i = 0; i < im->nsyms; i++) {
        char *full = n->full[i] = symbols_demangle(im->syms[i].name);
        const char *params = resolve_params(full);
        const char *end = params ? params : full + strlen(full);
        const char *sig = n->sig[i] = resolve_skip_return_type(full, end);
        n->base[i] = symbols_alloc(NULL, (size_t)(end - sig) + 1, 1);
        memcpy(n->base[i], sig, (size_t)(end - sig));
        n->base[i][end - sig] = 0;
    }
}

/* NAME equals a base, or a template function's base without its arguments (`ns::scale` names
 * `ns::scale<int>` and `ns::scale<double>` as it names every overload). */
static int resolve_base_matches(const char *base, const char *name)
{
    size_t n = strlen(name);
    if (strncmp(base, name, n) != 0) return 0;
    if (!base[n]) return 1;
    if (base[n] != '<' || base[strlen(base) - 1] != '>') return 0;
    int depth = 0;
    for (const char *p = base + n; *p; p++) {
        if (*p == '<') depth++;
        else if (*p == '>' && --depth == 0) return p[1] == 0;
    }
    return 0;
}

static int resolve_name_matches(const resolve_query_t *q, const resolve_names_t *n, size_t i)
{
    switch (q->form) {
    case RESOLVE_NAME:
        /* a compiler's clone (`f(int) [clone .cold]`) is not the function as written */
        return resolve_base_matches(n->base[i], q->pattern) && !strstr(n->full[i], " [clone ");
    case RESOLVE_SIG:
        return strcmp(n->sig[i], q->pattern) == 0 || strcmp(n->full[i], q->pattern) == 0;
    default:
        return regexec(&q->re, n->full[i], 0, NULL, 0) == 0;
    }
}

/* ---- matching ----------------------------------------------------------------------------- */

typedef struct {
    resolve_hit_t *hits;
    size_t n, cap;
} resolve_hits_t;

/* The allocated section of the module file holding vaddr, with its data. */
static Elf_Scn *resolve_section(Elf *elf, GElf_Addr vaddr, GElf_Shdr *shdr)
{
    for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
        if (!gelf_getshdr(scn, shdr) || !(shdr->sh_flags & SHF_ALLOC)) continue;
        if (vaddr >= shdr->sh_addr && vaddr < shdr->sh_addr + shdr->sh_size) return scn;
    }
    return NULL;
}

/* Adds a function once; symbols outside the file's executable sections are not functions. */
static void resolve_add_hit(resolve_hits_t *h, size_t module, const symbols_sym_t *sym)
{
    symbols_image_t *im = &symbols_images[symbols_modules[module].image];
    GElf_Addr bias;
    GElf_Shdr shdr;
    Elf *elf = dwfl_module_getelf(im->mod, &bias);
    Elf_Scn *scn = elf ? resolve_section(elf, sym->start - im->bias, &shdr) : NULL;
    if (!scn || !(shdr.sh_flags & SHF_EXECINSTR) || shdr.sh_type != SHT_PROGBITS) return;
    /* aliases are neighbours in the sorted table; FILE:LINE sorts and merges its own */
    if (h->n && h->hits[h->n - 1].module == module && h->hits[h->n - 1].sym->start == sym->start)
        return;
    if (h->n == h->cap) {
        h->cap = h->cap ? 2 * h->cap : 16;
        h->hits = symbols_alloc(h->hits, h->cap, sizeof *h->hits);
    }
    h->hits[h->n].module = module;
    h->hits[h->n++].sym = sym;
}

/* The preferred alias among the symbols at syms[i]'s address: the first sized one (they are
 * sorted global, weak, local), else the first. */
static const symbols_sym_t *resolve_preferred(const symbols_image_t *im, size_t i)
{
    while (i > 0 && im->syms[i - 1].start == im->syms[i].start) i--;
    for (size_t j = i; j < im->nsyms && im->syms[j].start == im->syms[i].start; j++)
        if (im->syms[j].sized) return &im->syms[j];
    return &im->syms[i];
}

static void resolve_by_name(const resolve_query_t *q, size_t module, resolve_hits_t *h)
{
    size_t image = (size_t)symbols_modules[module].image;
    resolve_load_names(image);
    symbols_image_t *im = &symbols_images[image];
    for (size_t i = 0; i < im->nsyms; i++)
        if (resolve_name_matches(q, &resolve_names[image], i))
            resolve_add_hit(h, module, resolve_preferred(im, i));
}

static int resolve_hit_order(const void *pa, const void *pb)
{
    const resolve_hit_t *a = pa, *b = pb;
    if (a->module != b->module) return a->module < b->module ? -1 : 1;
    return (a->sym->start > b->sym->start) - (a->sym->start < b->sym->start);
}

/* A DWARF file name is the FILE of a SPEC: the same path, or a path ending in /FILE. */
static int resolve_file_matches(const char *path, const char *want)
{
    if (!path) return 0;
    size_t n = strlen(path), w = strlen(want);
    if (n < w || strcmp(path + n - w, want) != 0) return 0;
    return n == w || path[n - w - 1] == '/' || want[0] == '/';
}

typedef struct {
    const resolve_query_t *q;
    size_t module;
    Dwarf_Addr bias; /* Dwfl address = DWARF address + bias */
    resolve_hits_t *h;
} resolve_decl_walk_t;

static void resolve_add_addr(resolve_hits_t *h, size_t module, Dwarf_Addr a);

/* Concrete functions declared at FILE:LINE, looking into namespaces, modules and classes (C++
 * and Fortran put definitions there). */
static void resolve_walk_decls(resolve_decl_walk_t *w, Dwarf_Die *parent, int depth)
{
    Dwarf_Die child;
    if (depth > SYMBOLS_LOOKBACK || dwarf_child(parent, &child) != 0) return;
    do {
        int tag = dwarf_tag(&child), line;
        Dwarf_Addr entry;
        if (tag == DW_TAG_namespace || tag == DW_TAG_module || tag == DW_TAG_class_type
            || tag == DW_TAG_structure_type)
            resolve_walk_decls(w, &child, depth + 1);
        if (tag != DW_TAG_subprogram || dwarf_entrypc(&child, &entry) != 0) continue;
        if (dwarf_decl_line(&child, &line) == 0 && line == w->q->line
            && resolve_file_matches(dwarf_decl_file(&child), w->q->pattern))
            resolve_add_addr(w->h, w->module, entry + w->bias);
    } while (dwarf_siblingof(&child, &child) == 0);
}

/* FILE:LINE: the functions declared there (DW_AT_decl_file/line), else the functions holding
 * that line's line-table rows (the callers for a line that is only inlined). */
static void resolve_by_line(const resolve_query_t *q, size_t module, resolve_hits_t *h)
{
    symbols_image_t *im = &symbols_images[symbols_modules[module].image];
    size_t first = h->n;
    resolve_decl_walk_t w = {q, module, 0, h};
    Dwarf_Die *cu = NULL;
    while ((cu = dwfl_module_nextcu(im->mod, cu, &w.bias))) resolve_walk_decls(&w, cu, 0);
    Dwfl_Line **rows = NULL;
    size_t nrows = 0;
    if (h->n == first
        && dwfl_module_getsrc_file(im->mod, q->pattern, q->line, 0, &rows, &nrows) == 0) {
        for (size_t i = 0; i < nrows; i++) {
            Dwarf_Addr a;
            if (dwfl_lineinfo(rows[i], &a, NULL, NULL, NULL, NULL)) resolve_add_addr(h, module, a);
        }
        free(rows);
    }
    qsort(h->hits + first, h->n - first, sizeof *h->hits, resolve_hit_order);
    size_t k = first;
    for (size_t i = first; i < h->n; i++)
        if (k == first || h->hits[k - 1].sym->start != h->hits[i].sym->start)
            h->hits[k++] = h->hits[i];
    h->n = k;
}

/* The function symbol holding the Dwfl address a, if any. */
static void resolve_add_addr(resolve_hits_t *h, size_t module, Dwarf_Addr a)
{
    symbols_image_t *im = &symbols_images[symbols_modules[module].image];
    const symbols_sym_t *sym = symbols_lookup_sym(im, a);
    if (sym) resolve_add_hit(h, module, resolve_preferred(im, (size_t)(sym - im->syms)));
}

/* The concrete subprogram whose entry is pc, looking into namespaces, modules, classes and
 * host procedures (Fortran's contained ones). */
static int resolve_find_entry(Dwarf_Die *parent, Dwarf_Addr pc, int depth, Dwarf_Die *out)
{
    Dwarf_Die child;
    if (depth > SYMBOLS_LOOKBACK || dwarf_child(parent, &child) != 0) return 0;
    do {
        int tag = dwarf_tag(&child);
        Dwarf_Addr entry;
        if (tag == DW_TAG_subprogram && dwarf_entrypc(&child, &entry) == 0 && entry == pc) {
            *out = child;
            return 1;
        }
        if ((tag == DW_TAG_namespace || tag == DW_TAG_module || tag == DW_TAG_class_type
             || tag == DW_TAG_structure_type || tag == DW_TAG_subprogram)
            && resolve_find_entry(&child, pc, depth + 1, out))
            return 1;
    } while (dwarf_siblingof(&child, &child) == 0);
    return 0;
}

/* Where a function is declared: its DWARF subprogram's DW_AT_decl_file/line, else the
 * line-table row of its entry.  File NULL when unknown. */
static const char *resolve_decl(symbols_image_t *im, GElf_Addr a, int *line)
{
    Dwarf_Addr bias;
    Dwarf_Die *cu = dwfl_module_addrdie(im->mod, a, &bias), fn;
    if (cu && resolve_find_entry(cu, a - bias, 0, &fn) && dwarf_decl_line(&fn, line) == 0) {
        const char *file = dwarf_decl_file(&fn);
        if (file) return file;
    }
    *line = 0;
    Dwfl_Line *row = dwfl_module_getsrc(im->mod, a);
    return row ? dwfl_lineinfo(row, NULL, line, NULL, NULL, NULL) : NULL;
}

/* ---- module files ------------------------------------------------------------------------- */

static int resolve_has_symtab(Elf *elf)
{
    size_t shstrndx;
    if (!elf || elf_getshdrstrndx(elf, &shstrndx) != 0) return 0;
    for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
        GElf_Shdr shdr;
        if (!gelf_getshdr(scn, &shdr)) continue;
        const char *name = elf_strptr(elf, shstrndx, shdr.sh_name);
        if (shdr.sh_type == SHT_SYMTAB || (name && strcmp(name, ".gnu_debugdata") == 0)) return 1;
    }
    return 0;
}

/* Whether the module's names come from .dynsym alone (a stripped file, no debuginfo). */
static int resolve_stripped(const symbols_image_t *im)
{
    GElf_Addr bias;
    if (resolve_has_symtab(dwfl_module_getelf(im->mod, &bias))) return 0;
    Dwarf *dw = dwfl_module_getdwarf(im->mod, &bias);
    return !dw || !resolve_has_symtab(dwarf_getelf(dw));
}

/* ---- plans -------------------------------------------------------------------------------- */

typedef struct {
    const uint8_t *code; /* the function's bytes in the file */
    size_t size;
    uint64_t vaddr;
    ps_probe_plan_t plan;
    char why[RESOLVE_WHY];
} resolve_fn_t;

/* One instruction at offset off of the function, never reading past its end. */
static ZyanStatus resolve_decode(const resolve_fn_t *f, size_t off, ZydisDecodedInstruction *in,
                                 ZydisDecodedOperand *ops)
{
    return ZydisDecoderDecodeFull(&resolve_decoder, f->code + off, f->size - off, in, ops);
}

static const char *resolve_mnemonic(const ZydisDecodedInstruction *in)
{
    return ZydisMnemonicGetString(in->mnemonic);
}

static int resolve_is_trap(ZydisMnemonic m)
{
    return m == ZYDIS_MNEMONIC_SYSCALL || m == ZYDIS_MNEMONIC_SYSENTER || m == ZYDIS_MNEMONIC_INT
           || m == ZYDIS_MNEMONIC_INT1 || m == ZYDIS_MNEMONIC_INT3 || m == ZYDIS_MNEMONIC_INTO
           || m == ZYDIS_MNEMONIC_UD0 || m == ZYDIS_MNEMONIC_UD1 || m == ZYDIS_MNEMONIC_UD2
           || m == ZYDIS_MNEMONIC_HLT;
}

/* Branches whose short form has no rel32 twin the trampoline could use. */
static int resolve_is_unsupported(ZydisMnemonic m)
{
    return m == ZYDIS_MNEMONIC_LOOP || m == ZYDIS_MNEMONIC_LOOPE || m == ZYDIS_MNEMONIC_LOOPNE
           || m == ZYDIS_MNEMONIC_JCXZ || m == ZYDIS_MNEMONIC_JECXZ || m == ZYDIS_MNEMONIC_JRCXZ
           || m == ZYDIS_MNEMONIC_XBEGIN;
}

/* The absolute target of a relative branch or RIP-relative operand; 0 if there is none. */
static int resolve_target(const ZydisDecodedInstruction *in, const ZydisDecodedOperand *ops,
                          uint64_t at, int want_mem, uint64_t *target)
{
    for (int i = 0; i < in->operand_count_visible; i++) {
        const ZydisDecodedOperand *op = &ops[i];
        int hit = want_mem
                      ? op->type == ZYDIS_OPERAND_TYPE_MEMORY && op->mem.base == ZYDIS_REGISTER_RIP
                      : op->type == ZYDIS_OPERAND_TYPE_IMMEDIATE && op->imm.is_relative;
        if (hit) return ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(in, op, at, target));
    }
    return 0;
}

/* Kind, field and target of one displaced instruction at offset off of the function; NULL, or
 * the refusal key with f->why. */
static const char *resolve_classify(resolve_fn_t *f, size_t off, int last,
                                    const ZydisDecodedInstruction *in,
                                    const ZydisDecodedOperand *ops, ps_probe_insn_t *out)
{
    unsigned cat = in->meta.category;
    const char *mn = resolve_mnemonic(in);
    if (resolve_is_trap(in->mnemonic)) {
        snprintf(f->why, sizeof f->why, "a %s at +%zu is within the %d bytes the jump needs", mn,
                 off, RESOLVE_JMP_LEN);
        return "too-short";
    }
    if (!last && (cat == ZYDIS_CATEGORY_RET || cat == ZYDIS_CATEGORY_UNCOND_BR)) {
        snprintf(f->why, sizeof f->why,
                 "a %s at +%zu ends the code before the %d bytes the jump needs", mn, off,
                 RESOLVE_JMP_LEN);
        return "too-short";
    }
    if (!last && cat == ZYDIS_CATEGORY_CALL) {
        snprintf(f->why, sizeof f->why,
                 "the %s at +%zu returns to +%zu, inside the displaced bytes", mn, off,
                 off + in->length);
        return "returns-in-patch";
    }
    if (resolve_is_unsupported(in->mnemonic)) {
        snprintf(f->why, sizeof f->why, "the %s at +%zu cannot be relocated", mn, off);
        return "unsupported-insn";
    }
    out->kind = PS_INSN_COPY;
    out->field = 0;
    out->target = 0;
    if (!(in->attributes & ZYDIS_ATTRIB_IS_RELATIVE)) return NULL;
    uint64_t at = f->vaddr + off;
    if (in->raw.imm[0].is_relative) {
        int jmp = in->mnemonic == ZYDIS_MNEMONIC_JMP, jcc = cat == ZYDIS_CATEGORY_COND_BR;
        int call = cat == ZYDIS_CATEGORY_CALL, size = in->raw.imm[0].size;
        if (size == 32 && (jmp || jcc || call)) out->kind = PS_INSN_REL32;
        else if (size == 8 && jmp) out->kind = PS_INSN_JMP8;
        else if (size == 8 && jcc) out->kind = PS_INSN_JCC8;
        out->field = in->raw.imm[0].offset;
        if (out->kind != PS_INSN_COPY && resolve_target(in, ops, at, 0, &out->target)) return NULL;
    } else if (in->raw.disp.size == 32) {
        out->kind = PS_INSN_RIP;
        out->field = in->raw.disp.offset;
        if (resolve_target(in, ops, at, 1, &out->target)) return NULL;
    }
    snprintf(f->why, sizeof f->why,
             "the %s at +%zu is relative in a way the trampoline does not rewrite", mn, off);
    return "unsupported-insn";
}

/* The displaced instructions: whole ones from the site until at least 5 bytes. */
static const char *resolve_displace(resolve_fn_t *f)
{
    ps_probe_plan_t *p = &f->plan;
    size_t site = p->site, len = 0;
    while (len < RESOLVE_JMP_LEN) {
        ZydisDecodedInstruction in;
        ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
        size_t off = site + len;
        ZyanStatus st = resolve_decode(f, off, &in, ops);
        if (st == ZYDIS_STATUS_NO_MORE_DATA) {
            snprintf(f->why, sizeof f->why, "the function ends inside the %d bytes the jump needs",
                     RESOLVE_JMP_LEN);
            return "too-short";
        }
        if (!ZYAN_SUCCESS(st)) {
            snprintf(f->why, sizeof f->why, "the bytes at +%zu do not decode as an instruction",
                     off);
            return "unsupported-insn";
        }
        ps_probe_insn_t *out = &p->insn[p->ninsn];
        int last = len + in.length >= RESOLVE_JMP_LEN;
        const char *key = resolve_classify(f, off, last, &in, ops, out);
        if (key) return key;
        out->off = (uint8_t)len;
        out->len = in.length;
        p->ninsn++;
        len += in.length;
    }
    p->len = (uint8_t)len;
    memcpy(p->orig, f->code + site, len);
    return NULL;
}

/* A relative branch in body (the function, or a piece split off it) into (site, site + len):
 * it would land inside the jump.  A linear sweep of the symbol's bytes (data in text may decode
 * as noise).  piece: NULL for the function itself, else the piece's name for the message. */
static const char *resolve_branch_into(resolve_fn_t *f, const resolve_fn_t *body, const char *piece)
{
    uint64_t lo = f->vaddr + f->plan.site, hi = lo + f->plan.len;
    for (size_t off = 0; off < body->size;) {
        ZydisDecodedInstruction in;
        ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
        uint64_t t;
        if (!ZYAN_SUCCESS(resolve_decode(body, off, &in, ops))) {
            off++;
            continue;
        }
        if (in.raw.imm[0].is_relative && resolve_target(&in, ops, body->vaddr + off, 0, &t)
            && t > lo && t < hi) {
            snprintf(f->why, sizeof f->why, "the %s at %s+%zu jumps to +%" PRIu64
                     ", inside the %u displaced bytes", resolve_mnemonic(&in), piece ? piece : "",
                     off, t - f->vaddr, f->plan.len);
            return "jump-into-patch";
        }
        off += in.length;
    }
    return NULL;
}

static const char *resolve_plan(resolve_fn_t *f)
{
    static const uint8_t endbr64[4] = {0xf3, 0x0f, 0x1e, 0xfa};
    memset(&f->plan, 0, sizeof f->plan);
    f->plan.vaddr = f->vaddr;
    f->plan.size = f->size;
    f->plan.site = f->size >= 4 && memcmp(f->code, endbr64, 4) == 0 ? 4 : 0;
    if (f->size < (size_t)f->plan.site + RESOLVE_JMP_LEN) {
        snprintf(f->why, sizeof f->why,
                 "the function has %zu bytes%s, fewer than the %d a jump needs",
                 f->size - f->plan.site, f->plan.site ? " after its endbr64" : "", RESOLVE_JMP_LEN);
        return "too-short";
    }
    const char *key = resolve_displace(f);
    return key ? key : resolve_branch_into(f, f, NULL);
}

/* ---- output ------------------------------------------------------------------------------- */

static void resolve_put_plan(const ps_probe_plan_t *p)
{
    static const char *const kinds[] = {"copy", "rip", "rel32", "jmp8", "jcc8"};
    printf("%u %u ", p->site, p->len);
    for (unsigned i = 0; i < p->len; i++) printf("%02x", p->orig[i]);
    printf(" %u", p->ninsn);
    for (unsigned i = 0; i < p->ninsn; i++) {
        const ps_probe_insn_t *in = &p->insn[i];
        printf(" %s %u %u %u 0x%" PRIx64, kinds[in->kind], in->off, in->len, in->field, in->target);
    }
}

static void resolve_put_refused(uint64_t spec, const symbols_module_t *m, uint64_t vaddr,
                                const char *name, const char *key, const char *why)
{
    printf("refused\t%" PRIu64 "\t%" PRIu64 "\t0x%" PRIx64 "\t", spec, m->id, vaddr);
    symbols_put_text(name);
    printf("\t%s\t", key);
    symbols_put_text(why);
    fputc('\n', stdout);
}

static int resolve_is_plt(const char *section)
{
    return section && (strcmp(section, ".plt") == 0 || strcmp(section, ".plt.sec") == 0
                       || strcmp(section, ".plt.got") == 0 || strcmp(section, ".iplt") == 0);
}

/* The bytes of [vaddr, vaddr + size) in the module file, cut at the end of their section;
 * NULL when the file does not hold them.  section: the section's name, or NULL. */
static const uint8_t *resolve_bytes(symbols_image_t *im, uint64_t vaddr, size_t *size,
                                    const char **section)
{
    GElf_Addr bias;
    GElf_Shdr shdr;
    size_t shstrndx;
    Elf *elf = dwfl_module_getelf(im->mod, &bias);
    Elf_Scn *scn = elf ? resolve_section(elf, vaddr, &shdr) : NULL;
    *section = NULL;
    if (!scn) return NULL;
    if (elf_getshdrstrndx(elf, &shstrndx) == 0) *section = elf_strptr(elf, shstrndx, shdr.sh_name);
    Elf_Data *data = elf_getdata(scn, NULL);
    size_t at = (size_t)(vaddr - shdr.sh_addr);
    if (!data || !data->d_buf || at >= data->d_size) return NULL;
    if (*size > data->d_size - at) *size = data->d_size - at;
    return (const uint8_t *)data->d_buf + at;
}

/* The pieces a compiler split off the function (`f.cold`, `f.part.0`: its symbol name, a dot,
 * anything) may jump back into its first bytes too. */
static const char *resolve_check_pieces(symbols_image_t *im, const symbols_sym_t *sym,
                                        resolve_fn_t *f)
{
    size_t n = strlen(sym->name);
    for (size_t i = 0; i < im->nsyms; i++) {
        const symbols_sym_t *p = &im->syms[i];
        if (!p->sized || strncmp(p->name, sym->name, n) != 0 || p->name[n] != '.') continue;
        const char *section;
        resolve_fn_t piece = {.vaddr = p->start - im->bias, .size = (size_t)(p->end - p->start)};
        piece.code = resolve_bytes(im, piece.vaddr, &piece.size, &section);
        const char *key = piece.code ? resolve_branch_into(f, &piece, p->name) : NULL;
        if (key) return key;
    }
    return NULL;
}

/* Why the function cannot be patched (a refusal key, with f->why), or NULL with f->plan. */
static const char *resolve_function(symbols_image_t *im, const symbols_sym_t *sym, resolve_fn_t *f)
{
    GElf_Sym info;
    GElf_Addr addr;
    const char *section;
    f->size = (size_t)(sym->end - sym->start);
    f->code = resolve_bytes(im, f->vaddr, &f->size, &section);
    dwfl_module_getsym_info(im->mod, sym->index, &info, &addr, NULL, NULL, NULL);
    if (GELF_ST_TYPE(info.st_info) == STT_GNU_IFUNC) {
        snprintf(f->why, sizeof f->why, "an indirect function (STT_GNU_IFUNC): "
                 "probe the implementation it selects by name");
        return "ifunc";
    }
    if (resolve_is_plt(section)) {
        snprintf(f->why, sizeof f->why, "a PLT stub (%s): probe the function it calls", section);
        return "plt";
    }
    if (!sym->sized) {
        snprintf(f->why, sizeof f->why,
                 "the symbol has no size, so the function's extent is unknown");
        return "no-size";
    }
    if (!f->code) {
        snprintf(f->why, sizeof f->why, "the function's bytes are not in %s", im->path);
        return "no-size";
    }
    const char *key = resolve_plan(f);
    return key ? key : resolve_check_pieces(im, sym, f);
}

/* One found function: its match line, or why it cannot be patched. */
static void resolve_put_hit(uint64_t spec, const resolve_hit_t *h)
{
    const symbols_module_t *m = &symbols_modules[h->module];
    symbols_image_t *im = &symbols_images[m->image];
    resolve_fn_t f = {.vaddr = h->sym->start - im->bias};
    char *name = symbols_demangle(h->sym->name);
    const char *key = resolve_function(im, h->sym, &f);
    if (key) {
        resolve_put_refused(spec, m, f.vaddr, name, key, f.why);
        free(name);
        return;
    }
    int line = 0;
    const char *file = resolve_decl(im, h->sym->start, &line);
    printf("match\t%" PRIu64 "\t%" PRIu64 "\t0x%" PRIx64 "\t%zu\t", spec, m->id, f.vaddr, f.size);
    symbols_put_text(name);
    fputc('\t', stdout);
    symbols_put_text(file);
    printf("\t%d\t", file ? line : 0);
    resolve_put_plan(&f.plan);
    fputc('\n', stdout);
    free(name);
}

/* ---- one SPEC ----------------------------------------------------------------------------- */

/* Where a SPEC looked, for a nomatch sentence: `./app and its 14 libraries (./app has only
 * dynamic symbols: stripped?)`. */
static void resolve_put_where(const size_t *searched, size_t n)
{
    if (n == 0) { fputs("no readable module", stdout); return; }
    const symbols_module_t *first = &symbols_modules[searched[0]];
    symbols_put_text(first->path);
    if (n > 1) printf(" and its %zu %s", n - 1, n == 2 ? "library" : "libraries");
    if (resolve_stripped(&symbols_images[first->image])) {
        fputs(" (", stdout);
        symbols_put_text(first->path);
        fputs(" has only dynamic symbols: stripped?)", stdout);
    }
}

static void resolve_spec(const resolve_spec_t *s)
{
    resolve_query_t q = {.buf = symbols_strdup(s->text)};
    const char *bad = resolve_parse_form(&q, q.buf, 1);
    if (bad) {
        printf("nomatch\t%" PRIu64 "\tSPEC '", s->id);
        symbols_put_text(s->text);
        printf("' %s\n", bad);
        free(q.buf);
        return;
    }
    size_t *searched = symbols_alloc(NULL, symbols_nmodules, sizeof *searched), nsearched = 0;
    size_t given = 0;
    resolve_hits_t h = {0};
    for (size_t i = 0; i < symbols_nmodules; i++) {
        const symbols_module_t *m = &symbols_modules[i];
        if (q.module && !resolve_module_matches(m->path, q.module)) continue;
        given++;
        int seen = m->status != SYMBOLS_OK;
        for (size_t j = 0; j < nsearched && !seen; j++)
            seen = symbols_modules[searched[j]].image == m->image;
        if (seen) continue;
        searched[nsearched++] = i;
        if (q.form == RESOLVE_LINE) resolve_by_line(&q, i, &h);
        else resolve_by_name(&q, i, &h);
    }
    if (q.module && given == 0) {
        printf("nomatch\t%" PRIu64 "\tno module matches '", s->id);
        symbols_put_text(q.module);
        printf("' among the %zu modules given\n", symbols_nmodules);
    } else if (h.n == 0 || (q.form == RESOLVE_REGEX && h.n > RESOLVE_MAX_REGEX)) {
        printf("nomatch\t%" PRIu64 "\t", s->id);
        if (h.n) printf("%zu functions match '", h.n);
        else printf("no function %s '", q.form == RESOLVE_LINE ? "has code at" : "matches");
        symbols_put_text(s->text);
        fputs("' in ", stdout);
        resolve_put_where(searched, nsearched);
        if (h.n) printf(", more than %d: narrow the expression", RESOLVE_MAX_REGEX);
        fputc('\n', stdout);
    }
    for (size_t i = 0; i < h.n && (q.form != RESOLVE_REGEX || h.n <= RESOLVE_MAX_REGEX); i++)
        resolve_put_hit(s->id, &h.hits[i]);
    if (q.form == RESOLVE_REGEX) regfree(&q.re);
    free(h.hits);
    free(searched);
    free(q.buf);
}

int symbols_resolve_main(void)
{
    static const symbols_line_type_t types[] = {{"module", 4, symbols_parse_module},
                                                {"spec", 3, resolve_parse_spec}};
    symbols_read_input(stdin, types, 2, "module or spec");
    if (!ZYAN_SUCCESS(
            ZydisDecoderInit(&resolve_decoder, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64)))
        symbols_die("cannot initialise the Zydis decoder");
    Dwfl *dwfl = symbols_open();
    resolve_names = symbols_alloc(NULL, symbols_nimages, sizeof *resolve_names);
    memset(resolve_names, 0, symbols_nimages * sizeof *resolve_names);

    static char outbuf[1 << 16];
    setvbuf(stdout, outbuf, _IOFBF, sizeof outbuf);
    for (size_t i = 0; i < resolve_nspecs; i++) resolve_spec(&resolve_specs[i]);
    fputs("end\n", stdout);
    if (fflush(stdout) != 0 || ferror(stdout)) symbols_die("cannot write standard output");
    dwfl_end(dwfl);
    return 0;
}
