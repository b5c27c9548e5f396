/* pathscope-symbolize: the end-of-run symbolizer behind symbols.tsv (docs/format.md,
 * "Call paths (format 2.0)").  A standalone tool, never loaded into a profiled process and
 * never calling MPI.
 *
 * Contract:
 *  - stdin, one request per line, TAB-separated (blank lines are skipped):
 *      module <TAB> ID <TAB> PATH <TAB> BUILD_ID     ID decimal, unique; PATH as mapped, with
 *                                                     \t \n \\ escaped as in the rank files;
 *                                                     BUILD_ID hex or `-`
 *      addr <TAB> ID <TAB> 0xHEX <TAB> KIND          ID of an earlier module line; KIND is
 *                                                     call, fn or pc; the address is the ELF
 *                                                     virtual address in the module's file
 *  - stdout: symbols.tsv exactly — the header, one `module` line per module (input order) with
 *    its status, the `frame` lines of every distinct (module, address, kind) sorted by module
 *    (input order), address and kind, then `end`.
 *  - A malformed request prints `pathscope-symbolize: line N: WHAT` on stderr and exits 2
 *    before anything is written to stdout; other failures (memory, output) exit 1.  Module
 *    files that are missing, unreadable or of another build only set the module's status.
 *  - Resolution uses one offline Dwfl for all modules: the symbol table gives level 0 (our own
 *    sorted copy of it, so that thousands of look-ups stay fast), DWARF gives the inlined
 *    levels and the lines; separate debuginfo is found by the standard elfutils search.
 */
#include "symbols.h"

#include <ctype.h>
#include <dwarf.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define SYMBOLS_VERSION "2.0"
#define SYMBOLS_MAX_DEPTH 64     /* DWARF scope nesting we follow */

enum { SYMBOLS_CALL, SYMBOLS_FN, SYMBOLS_PC };
static const char *const symbols_kind_names[] = {"call", "fn", "pc"};
static const char *const symbols_status_names[] = {"ok", "missing", "build-id-mismatch",
                                                    "unreadable"};

typedef struct {
    size_t module; /* index in symbols_modules */
    uint64_t addr;
    int kind;
} symbols_request_t;

typedef struct {
    char *function; /* demangled, malloc'd; NULL for unknown */
    const char *file;
    int line; /* 0 for unknown */
} symbols_frame_t;

static symbols_request_t *symbols_requests;
static size_t symbols_nrequests, symbols_cap_requests;

/* ---- output ------------------------------------------------------------------------------- */

static void symbols_put_frame(const symbols_request_t *r, int level, const symbols_frame_t *f)
{
    printf("frame\t%" PRIu64 "\t0x%" PRIx64 "\t%s\t%d\t", symbols_modules[r->module].id, r->addr,
           symbols_kind_names[r->kind], level);
    symbols_put_text(f->function);
    fputc('\t', stdout);
    symbols_put_text(f->file);
    if (f->line > 0) printf("\t%d\n", f->line);
    else fputs("\t-\n", stdout);
}

/* ---- input -------------------------------------------------------------------------------- */

static void symbols_parse_addr(char **field)
{
    symbols_request_t r = {0};
    uint64_t id = symbols_parse_id(field[1], "module");
    r.module = symbols_find_module(id);
    if (r.module == SIZE_MAX) symbols_bad_input("unknown module id %" PRIu64, id);
    const char *a = field[2];
    size_t n = strlen(a);
    int ok = n >= 3 && n <= 18 && a[0] == '0' && (a[1] == 'x' || a[1] == 'X');
    for (size_t i = 2; ok && i < n; i++) ok = isxdigit((unsigned char)a[i]);
    if (!ok) symbols_bad_input("bad address '%s'", symbols_quote(a));
    r.addr = strtoull(a + 2, NULL, 16);
    for (r.kind = 0; r.kind < 3; r.kind++)
        if (strcmp(field[3], symbols_kind_names[r.kind]) == 0) break;
    if (r.kind == 3) symbols_bad_input("bad kind '%s' (want call, fn or pc)", symbols_quote(field[3]));
    if (symbols_nrequests == symbols_cap_requests) {
        symbols_cap_requests = symbols_cap_requests ? 2 * symbols_cap_requests : 256;
        symbols_requests = symbols_alloc(symbols_requests, symbols_cap_requests, sizeof r);
    }
    symbols_requests[symbols_nrequests++] = r;
}

/* ---- names -------------------------------------------------------------------------------- */

/* A DWARF function's name: the linkage name (demangled) when there is one, else DW_AT_name,
 * following abstract origins and specifications. */
static char *symbols_die_name(Dwarf_Die *die)
{
    Dwarf_Attribute attr;
    const char *s = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &attr));
    if (!s) s = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr));
    if (s && *s) return symbols_demangle(s);
    s = dwarf_diename(die);
    return s && *s ? symbols_demangle(s) : NULL;
}

/* ---- DWARF scopes ------------------------------------------------------------------------- */

/* The child scope of parent that contains pc.  Namespaces and Fortran modules are looked
 * through; with deep set, so are functions that do not contain pc (nested and contained
 * procedures have their code outside their host's ranges). */
static int symbols_find_scope(Dwarf_Die *parent, Dwarf_Addr pc, int deep, int depth, Dwarf_Die *out)
{
    Dwarf_Die child;
    if (depth >= SYMBOLS_MAX_DEPTH || dwarf_child(parent, &child) != 0) return 0;
    do {
        switch (dwarf_tag(&child)) {
        case DW_TAG_subprogram:
        case DW_TAG_inlined_subroutine:
        case DW_TAG_entry_point:
        case DW_TAG_lexical_block:
        case DW_TAG_try_block:
        case DW_TAG_catch_block:
        case DW_TAG_with_stmt:
            if (dwarf_haspc(&child, pc) > 0) { *out = child; return 1; }
            if (deep && symbols_find_scope(&child, pc, deep, depth + 1, out)) return 1;
            break;
        case DW_TAG_namespace:
        case DW_TAG_module:
            if (symbols_find_scope(&child, pc, deep, depth + 1, out)) return 1;
            break;
        default:
            break;
        }
    } while (dwarf_siblingof(&child, &child) == 0);
    return 0;
}

/* The concrete scopes containing pc, outermost first; returns how many. */
static int symbols_scope_chain(Dwarf_Die *cu, Dwarf_Addr pc, Dwarf_Die *chain)
{
    if (!symbols_find_scope(cu, pc, 0, 0, &chain[0]) && !symbols_find_scope(cu, pc, 1, 0, &chain[0]))
        return 0;
    int n = 1;
    while (n < SYMBOLS_MAX_DEPTH && symbols_find_scope(&chain[n - 1], pc, 0, 0, &chain[n])) n++;
    return n;
}

/* Where an inlined subroutine was called from (DW_AT_call_file / DW_AT_call_line). */
static void symbols_call_site(Dwarf_Die *inlined, symbols_frame_t *f)
{
    Dwarf_Attribute attr;
    Dwarf_Word v;
    Dwarf_Die cu;
    Dwarf_Files *files;
    size_t nfiles;
    f->file = NULL;
    f->line = 0;
    if (dwarf_formudata(dwarf_attr(inlined, DW_AT_call_line, &attr), &v) == 0 && v <= INT32_MAX)
        f->line = (int)v;
    if (dwarf_formudata(dwarf_attr(inlined, DW_AT_call_file, &attr), &v) == 0
        && dwarf_diecu(inlined, &cu, NULL, NULL) && dwarf_getsrcfiles(&cu, &files, &nfiles) == 0
        && v < nfiles)
        f->file = dwarf_filesrc(files, v, NULL, NULL);
}

/* ---- resolution --------------------------------------------------------------------------- */

/* Resolves one request and writes its frame lines (none when no function is known). */
static void symbols_resolve_address(const symbols_request_t *r)
{
    const symbols_module_t *m = &symbols_modules[r->module];
    if (m->status != SYMBOLS_OK) return;
    symbols_image_t *im = &symbols_images[m->image];
    if (r->kind == SYMBOLS_CALL && r->addr == 0) return;
    GElf_Addr a = r->addr - (r->kind == SYMBOLS_CALL) + im->bias;

    symbols_frame_t frames[SYMBOLS_MAX_DEPTH + 1];
    Dwarf_Die chain[SYMBOLS_MAX_DEPTH], *inlined[SYMBOLS_MAX_DEPTH];
    int nchain = 0, ninlined = 0, sub = -1;
    Dwarf_Addr dwbias = 0;
    Dwarf_Die *cu = dwfl_module_addrdie(im->mod, a, &dwbias);
    if (cu) nchain = symbols_scope_chain(cu, a - dwbias, chain);
    for (int i = 0; i < nchain; i++) {
        int tag = dwarf_tag(&chain[i]);
        if (tag == DW_TAG_subprogram || tag == DW_TAG_entry_point) { sub = i; ninlined = 0; }
        else if (tag == DW_TAG_inlined_subroutine && r->kind != SYMBOLS_FN) inlined[ninlined++] = &chain[i];
    }

    /* A sizeless symbol only guesses its extent: DWARF's function, when known, wins. */
    const symbols_sym_t *sym = symbols_lookup_sym(im, a);
    frames[0].function = NULL;
    if (sub >= 0 && (!sym || !sym->sized)) frames[0].function = symbols_die_name(&chain[sub]);
    if (!frames[0].function && sym) frames[0].function = symbols_demangle(sym->name);
    if (!frames[0].function) return;
    for (int i = 0; i < ninlined; i++) {
        frames[i + 1].function = symbols_die_name(inlined[i]);
        symbols_call_site(inlined[i], &frames[i]); /* level i called level i + 1 here */
    }
    symbols_frame_t *last = &frames[ninlined];
    last->file = NULL;
    last->line = 0;
    Dwfl_Line *line = dwfl_module_getsrc(im->mod, a);
    if (line) last->file = dwfl_lineinfo(line, NULL, &last->line, NULL, NULL, NULL);
    for (int i = 0; i <= ninlined; i++) {
        symbols_put_frame(r, i, &frames[i]);
        free(frames[i].function);
    }
}

static int symbols_request_order(const void *pa, const void *pb)
{
    const symbols_request_t *a = pa, *b = pb;
    if (a->module != b->module) return a->module < b->module ? -1 : 1;
    if (a->addr != b->addr) return a->addr < b->addr ? -1 : 1;
    return (a->kind > b->kind) - (a->kind < b->kind);
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--resolve") == 0) return symbols_resolve_main();
    if (argc > 1) {
        fprintf(stderr, "usage: %s [--resolve] < requests > output\n", argv[0]);
        return 2;
    }
    static const symbols_line_type_t types[] = {{"module", 4, symbols_parse_module},
                                                {"addr", 4, symbols_parse_addr}};
    symbols_read_input(stdin, types, 2, "module or addr");
    Dwfl *dwfl = symbols_open();

    static char outbuf[1 << 16];
    setvbuf(stdout, outbuf, _IOFBF, sizeof outbuf);
    printf("pathscope-symbols\t%s\n", SYMBOLS_VERSION);
    for (size_t i = 0; i < symbols_nmodules; i++) {
        const symbols_module_t *m = &symbols_modules[i];
        printf("module\t%" PRIu64 "\t", m->id);
        symbols_put_text(m->path);
        printf("\t%s\t%s\n", m->build_id ? m->build_id : "-", symbols_status_names[m->status]);
    }
    if (symbols_nrequests)
        qsort(symbols_requests, symbols_nrequests, sizeof *symbols_requests, symbols_request_order);
    for (size_t i = 0; i < symbols_nrequests; i++)
        if (i == 0 || symbols_request_order(&symbols_requests[i - 1], &symbols_requests[i]) != 0)
            symbols_resolve_address(&symbols_requests[i]);
    fputs("end\n", stdout);
    if (fflush(stdout) != 0 || ferror(stdout)) symbols_die("cannot write standard output");

    dwfl_end(dwfl);
    return 0;
}
