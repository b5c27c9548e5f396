/* What pathscope-symbolize's two modes share: see symbols.h. */
#include "symbols.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* From libstdc++ (the Itanium C++ ABI); declared here because <cxxabi.h> is C++ only. */
extern char *__cxa_demangle(const char *mangled, char *out, size_t *len, int *status);

symbols_module_t *symbols_modules;
size_t symbols_nmodules;
static size_t symbols_cap_modules;
symbols_image_t *symbols_images;
size_t symbols_nimages;
static long symbols_lineno;

/* ---- small helpers ------------------------------------------------------------------------ */

void symbols_die(const char *what)
{
    fprintf(stderr, "pathscope-symbolize: %s\n", what);
    exit(1);
}

void *symbols_alloc(void *old, size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size) symbols_die("out of memory");
    void *p = realloc(old, n && size ? n * size : 1);
    if (!p) symbols_die("out of memory");
    return p;
}

char *symbols_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(symbols_alloc(NULL, n, 1), s, n);
}

/* A bad request: the message names the input line; nothing has been written to stdout. */
void symbols_bad_input(const char *fmt, ...)
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
const char *symbols_quote(const char *s)
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
int symbols_unescape(char *s)
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
void symbols_put_text(const char *s)
{
    if (!s || !*s) { fputc('-', stdout); return; }
    for (; *s; s++) {
        if (*s == '\t') fputs("\\t", stdout);
        else if (*s == '\n') fputs("\\n", stdout);
        else if (*s == '\\') fputs("\\\\", stdout);
        else fputc(*s, stdout);
    }
}

/* ---- input -------------------------------------------------------------------------------- */

size_t symbols_find_module(uint64_t id)
{
    static size_t last;
    if (last < symbols_nmodules && symbols_modules[last].id == id) return last;
    for (size_t i = 0; i < symbols_nmodules; i++)
        if (symbols_modules[i].id == id) return last = i;
    return SIZE_MAX;
}

uint64_t symbols_parse_id(const char *s, const char *what)
{
    uint64_t v = 0;
    size_t n = strlen(s);
    int ok = n >= 1 && n <= 18;
    for (size_t i = 0; ok && i < n; i++) {
        ok = s[i] >= '0' && s[i] <= '9';
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (!ok) symbols_bad_input("bad %s id '%s'", what, symbols_quote(s));
    return v;
}

void symbols_parse_module(char **field)
{
    symbols_module_t m = {0};
    m.id = symbols_parse_id(field[1], "module");
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

/* A request line's fields are split on TABs; the type's parser checks them. */
void symbols_read_input(FILE *in, const symbols_line_type_t *types, int ntypes, const char *want)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, in)) >= 0) {
        symbols_lineno++;
        if (len > 0 && line[len - 1] == '\n') line[--len] = 0;
        if ((size_t)len != strlen(line)) symbols_bad_input("NUL byte in line");
        if (len == 0) continue;
        char *field[SYMBOLS_MAX_FIELDS];
        int n = 0;
        for (char *p = line;; p++) {
            char *tab = strchr(p, '\t');
            if (n < SYMBOLS_MAX_FIELDS) field[n] = p;
            n++;
            if (!tab) break;
            *tab = 0;
            p = tab;
        }
        int t = 0;
        while (t < ntypes && strcmp(field[0], types[t].name) != 0) t++;
        if (t == ntypes)
            symbols_bad_input("unknown line type '%s' (want %s)", symbols_quote(field[0]), want);
        if (n != types[t].nfields)
            symbols_bad_input("%s line has %d fields, want %d", field[0], n, types[t].nfields);
        types[t].parse(field);
    }
    if (ferror(in)) symbols_die("cannot read standard input");
    free(line);
}

/* ---- names -------------------------------------------------------------------------------- */

static char *symbols_demangle_unversioned(const char *name);

/* C++ (Itanium ABI) and gfortran module procedures (__mod_MOD_proc -> mod::proc); anything
 * else, including a Fortran external's trailing underscore, is kept as it is.  A symbol
 * version (`pthread_cond_wait@@GLIBC_2.3.2` in glibc's .symtab) is dropped. */
char *symbols_demangle(const char *name)
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
void symbols_load_syms(symbols_image_t *im)
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
const symbols_sym_t *symbols_lookup_sym(symbols_image_t *im, GElf_Addr a)
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

Dwfl *symbols_open(void)
{
    /* No network look-ups from a report: only the local debuginfo search. */
    unsetenv("DEBUGINFOD_URLS");
    Dwfl *dwfl = dwfl_begin(&symbols_callbacks);
    if (!dwfl) symbols_die(dwfl_errmsg(-1));
    symbols_open_modules(dwfl);
    return dwfl;
}
