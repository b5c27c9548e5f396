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
#include <ctype.h>
#include <dwarf.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* From libstdc++ (the Itanium C++ ABI); declared here because <cxxabi.h> is C++ only. */
extern char *__cxa_demangle(const char *mangled, char *out, size_t *len, int *status);

#define SYMBOLS_VERSION "2.0"
#define SYMBOLS_MAX_DEPTH 64     /* DWARF scope nesting we follow */
#define SYMBOLS_LOOKBACK 64      /* symbols scanned backwards for an enclosing sized symbol */
#define SYMBOLS_BUILD_ID_MAX 256 /* hex digits */

enum { SYMBOLS_CALL, SYMBOLS_FN, SYMBOLS_PC };
static const char *const symbols_kind_names[] = {"call", "fn", "pc"};

enum { SYMBOLS_OK, SYMBOLS_MISSING, SYMBOLS_MISMATCH, SYMBOLS_UNREADABLE };
static const char *const symbols_status_names[] = {"ok", "missing", "build-id-mismatch",
                                                    "unreadable"};

typedef struct {
    GElf_Addr start, end; /* Dwfl addresses; a sizeless symbol ends with its section */
    const char *name;     /* owned by libdw */
    unsigned rank;        /* 0 global, 1 weak, 2 local: the preferred alias sorts first */
    unsigned sized;
    int index;
} symbols_sym_t;

/* One file reported to Dwfl, shared by the modules that name the same path. */
typedef struct {
    const char *path;
    Dwfl_Module *mod;
    GElf_Addr bias; /* Dwfl address = ELF virtual address + bias */
    symbols_sym_t *syms;
    size_t nsyms;
    int syms_loaded;
} symbols_image_t;

typedef struct {
    uint64_t id;
    char *path;     /* unescaped */
    char *build_id; /* lower-case hex, NULL for `-` */
    int status;
    int image; /* index in symbols_images, -1 when nothing is resolved */
} symbols_module_t;

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

static symbols_module_t *symbols_modules;
static size_t symbols_nmodules, symbols_cap_modules;
static symbols_image_t *symbols_images;
static size_t symbols_nimages;
static symbols_request_t *symbols_requests;
static size_t symbols_nrequests, symbols_cap_requests;
static long symbols_lineno;

/* ---- small helpers ------------------------------------------------------------------------ */

static void symbols_die(const char *what)
{
    fprintf(stderr, "pathscope-symbolize: %s\n", what);
    exit(1);
}

static void *symbols_alloc(void *old, size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size) symbols_die("out of memory");
    void *p = realloc(old, n && size ? n * size : 1);
    if (!p) symbols_die("out of memory");
    return p;
}

static char *symbols_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(symbols_alloc(NULL, n, 1), s, n);
}

/* A bad request: the message names the input line; nothing has been written to stdout. */
static void symbols_bad_input(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "pathscope-symbolize: line %ld: ", symbols_lineno);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(2);
}

/* An input field quoted in an error message: escaped and cut to 60 characters. */
static const char *symbols_quote(const char *s)
{
    static char buf[256];
    size_t n = 0;
    for (; *s && n < 60; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '\\') n += (size_t)snprintf(buf + n, sizeof buf - n, "\\\\");
        else if (c < 0x20 || c == 0x7f) n += (size_t)snprintf(buf + n, sizeof buf - n, "\\x%02x", c);
        else buf[n++] = (char)c;
    }
    if (*s) n += (size_t)snprintf(buf + n, sizeof buf - n, "...");
    buf[n] = 0;
    return buf;
}

/* Undoes the format's escaping in place; returns 0 on an unknown or cut escape. */
static int symbols_unescape(char *s)
{
    char *w = s;
    for (; *s; s++) {
        if (*s != '\\') { *w++ = *s; continue; }
        s++;
        if (*s == 't') *w++ = '\t';
        else if (*s == 'n') *w++ = '\n';
        else if (*s == '\\') *w++ = '\\';
        else return 0;
    }
    *w = 0;
    return 1;
}

/* ---- output ------------------------------------------------------------------------------- */

/* A text field: escaped, `-` when unknown or empty. */
static void symbols_put_text(const char *s)
{
    if (!s || !*s) { fputc('-', stdout); return; }
    for (; *s; s++) {
        if (*s == '\t') fputs("\\t", stdout);
        else if (*s == '\n') fputs("\\n", stdout);
        else if (*s == '\\') fputs("\\\\", stdout);
        else fputc(*s, stdout);
    }
}

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

static size_t symbols_find_module(uint64_t id)
{
    static size_t last;
    if (last < symbols_nmodules && symbols_modules[last].id == id) return last;
    for (size_t i = 0; i < symbols_nmodules; i++)
        if (symbols_modules[i].id == id) return last = i;
    return SIZE_MAX;
}

static uint64_t symbols_parse_id(const char *s)
{
    uint64_t v = 0;
    size_t n = strlen(s);
    int ok = n >= 1 && n <= 18;
    for (size_t i = 0; ok && i < n; i++) {
        ok = s[i] >= '0' && s[i] <= '9';
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (!ok) symbols_bad_input("bad module id '%s'", symbols_quote(s));
    return v;
}

static void symbols_parse_module(char **field)
{
    symbols_module_t m = {0};
    m.id = symbols_parse_id(field[1]);
    if (symbols_find_module(m.id) != SIZE_MAX)
        symbols_bad_input("duplicate module id %" PRIu64, m.id);
    if (!symbols_unescape(field[2])) symbols_bad_input("bad escape in path '%s'", symbols_quote(field[2]));
    if (!field[2][0]) symbols_bad_input("empty path");
    if (strcmp(field[3], "-") != 0) {
        size_t n = strlen(field[3]);
        int ok = n >= 2 && n % 2 == 0 && n <= SYMBOLS_BUILD_ID_MAX;
        for (size_t i = 0; ok && i < n; i++) ok = isxdigit((unsigned char)field[3][i]);
        if (!ok) symbols_bad_input("bad build id '%s'", symbols_quote(field[3]));
        m.build_id = symbols_strdup(field[3]);
        for (char *c = m.build_id; *c; c++) *c = (char)tolower((unsigned char)*c);
    }
    m.path = symbols_strdup(field[2]);
    m.image = -1;
    if (symbols_nmodules == symbols_cap_modules) {
        symbols_cap_modules = symbols_cap_modules ? 2 * symbols_cap_modules : 16;
        symbols_modules = symbols_alloc(symbols_modules, symbols_cap_modules, sizeof m);
    }
    symbols_modules[symbols_nmodules++] = m;
}

static void symbols_parse_addr(char **field)
{
    symbols_request_t r = {0};
    uint64_t id = symbols_parse_id(field[1]);
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

static void symbols_read_input(FILE *in)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, in)) >= 0) {
        symbols_lineno++;
        if (len > 0 && line[len - 1] == '\n') line[--len] = 0;
        if ((size_t)len != strlen(line)) symbols_bad_input("NUL byte in line");
        if (len == 0) continue;
        char *field[4];
        int n = 0;
        for (char *p = line;; p++) {
            char *tab = strchr(p, '\t');
            if (n < 4) field[n] = p;
            n++;
            if (!tab) break;
            *tab = 0;
            p = tab;
        }
        if (strcmp(field[0], "module") != 0 && strcmp(field[0], "addr") != 0)
            symbols_bad_input("unknown line type '%s' (want module or addr)", symbols_quote(field[0]));
        if (n != 4) symbols_bad_input("%s line has %d fields, want 4", field[0], n);
        if (field[0][0] == 'm') symbols_parse_module(field);
        else symbols_parse_addr(field);
    }
    if (ferror(in)) symbols_die("cannot read standard input");
    free(line);
}

/* ---- names -------------------------------------------------------------------------------- */

static char *symbols_demangle_unversioned(const char *name);

/* C++ (Itanium ABI) and gfortran module procedures (__mod_MOD_proc -> mod::proc); anything
 * else, including a Fortran external's trailing underscore, is kept as it is.  A symbol
 * version (`pthread_cond_wait@@GLIBC_2.3.2` in glibc's .symtab) is dropped. */
static char *symbols_demangle(const char *name)
{
    const char *at = strchr(name, '@');
    if (!at || at == name) return symbols_demangle_unversioned(name);
    char *base = symbols_alloc(NULL, (size_t)(at - name) + 1, 1);
    memcpy(base, name, (size_t)(at - name));
    base[at - name] = 0;
    char *d = symbols_demangle_unversioned(base);
    free(base);
    return d;
}

static char *symbols_demangle_unversioned(const char *name)
{
    if (name[0] == '_' && name[1] == 'Z') {
        int status = -1;
        char *d = __cxa_demangle(name, NULL, NULL, &status);
        if (d && status == 0) return d;
        free(d);
    }
    if (name[0] == '_' && name[1] == '_') {
        const char *sep = strstr(name + 2, "_MOD_");
        if (sep && sep > name + 2 && sep[5]) {
            size_t nmod = (size_t)(sep - name - 2), nproc = strlen(sep + 5);
            char *d = symbols_alloc(NULL, nmod + nproc + 3, 1);
            memcpy(d, name + 2, nmod);
            memcpy(d + nmod, "::", 2);
            memcpy(d + nmod + 2, sep + 5, nproc + 1);
            return d;
        }
    }
    return symbols_strdup(name);
}

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

/* ---- symbol table ------------------------------------------------------------------------- */

static int symbols_sym_order(const void *pa, const void *pb)
{
    const symbols_sym_t *a = pa, *b = pb;
    if (a->start != b->start) return a->start < b->start ? -1 : 1;
    if (a->rank != b->rank) return a->rank < b->rank ? -1 : 1;
    return (a->index > b->index) - (a->index < b->index);
}

/* Copies the module's function symbols (.symtab, else .dynsym, plus MiniDebugInfo) once and
 * sorts them: dwfl_module_addrinfo scans the whole table on every call. */
static void symbols_load_syms(symbols_image_t *im)
{
    im->syms_loaded = 1;
    int n = dwfl_module_getsymtab(im->mod);
    if (n <= 0) return;
    im->syms = symbols_alloc(NULL, (size_t)n, sizeof *im->syms);
    for (int i = 1; i < n; i++) {
        GElf_Sym sym;
        GElf_Addr addr;
        GElf_Word shndx;
        Elf *elf = NULL;
        Dwarf_Addr bias = 0;
        const char *name = dwfl_module_getsym_info(im->mod, i, &sym, &addr, &shndx, &elf, &bias);
        int type = GELF_ST_TYPE(sym.st_info), bind = GELF_ST_BIND(sym.st_info);
        if (!name || !*name || (type != STT_FUNC && type != STT_GNU_IFUNC)) continue;
        if (shndx == SHN_UNDEF || shndx >= SHN_LORESERVE) continue;
        symbols_sym_t *s = &im->syms[im->nsyms];
        s->start = addr;
        s->name = name;
        s->index = i;
        s->rank = bind == STB_LOCAL ? 2 : bind == STB_WEAK ? 1 : 0;
        s->sized = sym.st_size > 0;
        if (s->sized) {
            s->end = addr + sym.st_size;
        } else {
            /* A sizeless symbol covers up to the end of its section. */
            GElf_Shdr shdr_mem, *shdr = NULL;
            Elf_Scn *scn = elf ? elf_getscn(elf, shndx) : NULL;
            if (scn) shdr = gelf_getshdr(scn, &shdr_mem);
            if (!shdr || !(shdr->sh_flags & SHF_ALLOC)) continue;
            s->end = shdr->sh_addr + shdr->sh_size + bias;
            if (s->end <= addr) continue;
        }
        im->nsyms++;
    }
    qsort(im->syms, im->nsyms, sizeof *im->syms, symbols_sym_order);
}

/* The function symbol containing the Dwfl address a: the innermost sized symbol that contains
 * it (the preferred alias), else the nearest sizeless one below it in the same section. */
static const symbols_sym_t *symbols_lookup_sym(symbols_image_t *im, GElf_Addr a)
{
    if (!im->syms_loaded) symbols_load_syms(im);
    size_t lo = 0, hi = im->nsyms;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (im->syms[mid].start <= a) lo = mid + 1;
        else hi = mid;
    }
    if (lo == 0) return NULL;
    const symbols_sym_t *found = NULL;
    for (size_t i = lo, seen = 0; i-- > 0 && seen < SYMBOLS_LOOKBACK; seen++) {
        const symbols_sym_t *s = &im->syms[i];
        if (found && s->start != found->start) break;
        if (s->sized && a < s->end) found = s;
    }
    if (found) return found;
    GElf_Addr top = im->syms[lo - 1].start;
    for (size_t i = lo; i-- > 0 && im->syms[i].start == top;)
        if (!im->syms[i].sized && a < im->syms[i].end) found = &im->syms[i];
    return found;
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

/* ---- modules ------------------------------------------------------------------------------ */

static char *symbols_debuginfo_path;
static const Dwfl_Callbacks symbols_callbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = &symbols_debuginfo_path,
};

/* Reports every readable module file to dwfl (once per path) and sets the statuses. */
static void symbols_open_modules(Dwfl *dwfl)
{
    symbols_images = symbols_alloc(NULL, symbols_nmodules, sizeof *symbols_images);
    dwfl_report_begin(dwfl);
    for (size_t i = 0; i < symbols_nmodules; i++) {
        symbols_module_t *m = &symbols_modules[i];
        struct stat st;
        m->status = SYMBOLS_UNREADABLE;
        for (size_t j = 0; j < symbols_nimages; j++)
            if (strcmp(symbols_images[j].path, m->path) == 0) { m->image = (int)j; break; }
        if (m->image >= 0) continue;
        if (m->path[0] == '[') continue; /* [vdso], [heap], ...: not files */
        if (stat(m->path, &st) != 0) {
            if (errno == ENOENT || errno == ENOTDIR) m->status = SYMBOLS_MISSING;
            continue;
        }
        if (!S_ISREG(st.st_mode)) continue;
        Dwfl_Module *mod = dwfl_report_offline(dwfl, m->path, m->path, -1);
        if (!mod) continue;
        symbols_image_t *im = &symbols_images[symbols_nimages];
        memset(im, 0, sizeof *im);
        im->path = m->path;
        im->mod = mod;
        m->image = (int)symbols_nimages++;
    }
    if (dwfl_report_end(dwfl, NULL, NULL) != 0) symbols_die(dwfl_errmsg(-1));

    for (size_t i = 0; i < symbols_nimages; i++)
        if (!dwfl_module_getelf(symbols_images[i].mod, &symbols_images[i].bias))
            symbols_images[i].mod = NULL;
    for (size_t i = 0; i < symbols_nmodules; i++) {
        symbols_module_t *m = &symbols_modules[i];
        if (m->image < 0) continue;
        symbols_image_t *im = &symbols_images[m->image];
        if (!im->mod) { m->image = -1; continue; }
        m->status = SYMBOLS_OK;
        if (!m->build_id) continue;
        const unsigned char *bits;
        GElf_Addr vaddr;
        int n = dwfl_module_build_id(im->mod, &bits, &vaddr);
        size_t len = strlen(m->build_id);
        int same = n > 0 && (size_t)n * 2 == len;
        for (int k = 0; same && k < n; k++) {
            char hex[3];
            snprintf(hex, sizeof hex, "%02x", bits[k]);
            same = memcmp(hex, m->build_id + 2 * k, 2) == 0;
        }
        if (!same) { m->status = SYMBOLS_MISMATCH; m->image = -1; }
    }
}

int main(int argc, char **argv)
{
    if (argc > 1) {
        fprintf(stderr, "usage: %s < requests > symbols.tsv\n", argv[0]);
        return 2;
    }
    symbols_read_input(stdin);

    /* No network look-ups from a report: only the local debuginfo search. */
    unsetenv("DEBUGINFOD_URLS");
    Dwfl *dwfl = dwfl_begin(&symbols_callbacks);
    if (!dwfl) symbols_die(dwfl_errmsg(-1));
    symbols_open_modules(dwfl);

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
