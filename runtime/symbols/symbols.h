/* What pathscope-symbolize's two modes share (symbols.c): the request lines' syntax and errors,
 * the module files opened in one offline Dwfl, their sorted function symbols and the names
 * (symbols_demangle).  symbolize.c answers `addr` requests, resolve.c answers `spec` requests
 * (--resolve).  Both exit 2 on a malformed request, 1 on other failures. */
#ifndef PS_SYMBOLS_H
#define PS_SYMBOLS_H
#include <elfutils/libdwfl.h>
#include <stdint.h>
#include <stdio.h>

#define SYMBOLS_LOOKBACK 64      /* symbols scanned backwards for an enclosing sized symbol */
#define SYMBOLS_BUILD_ID_MAX 256 /* hex digits */

enum { SYMBOLS_OK, SYMBOLS_MISSING, SYMBOLS_MISMATCH, SYMBOLS_UNREADABLE };

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

/* A request line type: its first field, its field count and what reads it. */
typedef struct {
    const char *name;
    int nfields; /* at most SYMBOLS_MAX_FIELDS */
    void (*parse)(char **field);
} symbols_line_type_t;
#define SYMBOLS_MAX_FIELDS 4

extern symbols_module_t *symbols_modules;
extern size_t symbols_nmodules;
extern symbols_image_t *symbols_images;
extern size_t symbols_nimages;

void symbols_die(const char *what);
void *symbols_alloc(void *old, size_t n, size_t size);
char *symbols_strdup(const char *s);
void symbols_bad_input(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
const char *symbols_quote(const char *s);
int symbols_unescape(char *s);
void symbols_put_text(const char *s);

/* Reads every request line; a line whose first field is none of types[0..ntypes) is an error
 * that quotes want ("module or addr"). */
void symbols_read_input(FILE *in, const symbols_line_type_t *types, int ntypes, const char *want);
size_t symbols_find_module(uint64_t id);
/* A decimal id field; what names it in the error ("module", "spec"). */
uint64_t symbols_parse_id(const char *s, const char *what);
void symbols_parse_module(char **field);
/* One offline Dwfl with every readable module file (once per path); sets the statuses. */
Dwfl *symbols_open(void);

char *symbols_demangle(const char *name);
void symbols_load_syms(symbols_image_t *im);
const symbols_sym_t *symbols_lookup_sym(symbols_image_t *im, GElf_Addr a);

/* --resolve (resolve.c): reads spec requests, writes match lines; the exit status. */
int symbols_resolve_main(void);
#endif
