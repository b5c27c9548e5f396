/* From a code object and an instruction to a location `file.py:function:line`: the
 * per-thread cache, the reading of the code object (only on a cache miss: ps_peek, never a
 * plain load, since a code object met through a frame being set up may be gone), the line
 * table, and the process's locations table, which the rank file names `py` nodes from.
 * [signal-safe] */
#define _GNU_SOURCE
#include <string.h>

#include "procmaps.h"
#include "pyframes_internal.h"

#define PY_NAME_MAX 232
#define PY_LOCATIONS 65536          /* locations per process: 16 MB reserved, touched as used */
#define PY_LOC_HASH (PY_LOCATIONS * 2)

typedef struct {
    uintptr_t code;
    int32_t line;
    char name[PY_NAME_MAX];
} py_loc_t;

static py_loc_t *locations;         /* [0] unused: id 0 is "none" */
static _Atomic uint32_t *loc_hash;  /* ids by (code, line); 0 = empty */
_Atomic uint32_t ps_py_nlocations = 1;
uint64_t ps_py_locations_full;

int ps_py_locations_init(void)
{
    locations = ps_map_zeroed(sizeof *locations * PY_LOCATIONS);
    loc_hash = ps_map_zeroed(sizeof *loc_hash * PY_LOC_HASH);
    return locations && loc_hash ? 0 : -1;
}

const char *ps_py_location_name(uintptr_t id, char buf[24])
{
    (void)buf;
    return id && id < atomic_load(&ps_py_nlocations) ? locations[id].name : "?";
}

/* ---- the line table (Objects/locations.md, 3.11 and 3.12) -------------------------------- */
static int varint(const uint8_t *t, uint32_t len, uint32_t *i, uint32_t *v)
{
    uint32_t r = 0;
    for (int shift = 0;; shift += 6) {
        if (*i >= len || shift > 30) return 0;
        uint8_t b = t[(*i)++];
        r |= (uint32_t)(b & 63) << shift;
        if (!(b & 64)) break;
    }
    *v = r;
    return 1;
}

static int svarint(const uint8_t *t, uint32_t len, uint32_t *i, int *v)
{
    uint32_t u;
    if (!varint(t, len, i, &u)) return 0;
    *v = u & 1 ? -(int)(u >> 1) : (int)(u >> 1);
    return 1;
}

int ps_py_line_of(const uint8_t *table, uint32_t len, int firstlineno, int64_t addr)
{
    if (addr < 0) return firstlineno; /* (not started: its definition's line, as CPython says) */
    int line = firstlineno;
    int64_t end = 0;
    for (uint32_t i = 0; i < len;) {
        uint8_t b = table[i++];
        if (!(b & 0x80)) return -1; /* (not an entry's first byte: not a line table) */
        int code = (b >> 3) & 15, delta = 0, has_line = code != 15;
        uint32_t skip;
        end += ((b & 7) + 1) * 2;
        if (code == 14) { /* long form: line delta, end line, column, end column */
            if (!svarint(table, len, &i, &delta) || !varint(table, len, &i, &skip) ||
                !varint(table, len, &i, &skip) || !varint(table, len, &i, &skip))
                return -1;
        } else if (code == 13) { /* no columns */
            if (!svarint(table, len, &i, &delta)) return -1;
        } else if (code >= 10 && code <= 12) { /* one line: delta code-10, two columns */
            delta = code - 10;
            i += 2;
        } else if (code < 10) { /* short form: same line, one byte of columns */
            i += 1;
        }
        line += delta;
        if (addr < end) return has_line ? line : -1;
    }
    return -1;
}

/* ---- reading the code object -------------------------------------------------------------- */
/* The text of a str object at addr into out (at most max-1 bytes, NUL-terminated), TABs and
 * line ends (which a TSV field cannot hold) and backslashes (which it would escape) replaced;
 * 0 if unreadable. */
static int read_str(uintptr_t addr, char *out, size_t max)
{
    const py_layout_t *L = ps_py.layout;
    uint8_t head[80];
    if (!addr || !ps_peek(head, addr, L->st_utf8 + 8)) return 0;
    uint64_t length;
    uint32_t state;
    uintptr_t text;
    memcpy(&state, head + L->st_state, 4);
    int compact = state >> 5 & 1, ascii = state >> 6 & 1;
    if (compact && ascii) {
        memcpy(&length, head + 16, 8); /* PyASCIIObject.length */
        text = addr + L->st_ascii_data;
    } else if (compact) {
        memcpy(&length, head + L->st_utf8_len, 8);
        memcpy(&text, head + L->st_utf8, 8);
        if (!text) return 0; /* (no UTF-8 form made yet: nothing to copy without encoding) */
    } else {
        return 0;
    }
    size_t n = length < max - 1 ? (size_t)length : max - 1;
    if (!ps_peek(out, text, n)) return 0;
    out[n] = 0;
    for (size_t i = 0; i < n; i++)
        if (out[i] == '\t' || out[i] == '\n' || out[i] == '\r' || out[i] == '\\') out[i] = ' ';
    return 1;
}

static uint32_t hash_of(uintptr_t code, int64_t x)
{
    uint64_t h = ((uint64_t)code ^ (uint64_t)x * 0x9E3779B97F4A7C15ull) * 0xBF58476D1CE4E5B9ull;
    return (uint32_t)(h ^ h >> 31);
}

/* The id of (code, line) named name in the process's table, added if new; 0 when full.  An
 * entry is complete before its id is published in the hash (compare-and-swap): a thread
 * racing for the same key finds it whole or adds its own (an unused entry, harmless). */
static uint32_t intern(uintptr_t code, int line, const char *name)
{
    uint32_t mine = 0;
    for (uint32_t h = hash_of(code, line), probes = 0; probes < PY_LOC_HASH; probes++, h++) {
        _Atomic uint32_t *slot = &loc_hash[h & (PY_LOC_HASH - 1)];
        uint32_t id = atomic_load(slot);
        if (!id) {
            if (!mine) {
                mine = atomic_fetch_add(&ps_py_nlocations, 1);
                if (mine >= PY_LOCATIONS) {
                    atomic_store(&ps_py_nlocations, PY_LOCATIONS);
                    ps_py_locations_full++;
                    return 0;
                }
                py_loc_t *l = &locations[mine];
                l->code = code;
                l->line = line;
                memcpy(l->name, name, strnlen(name, PY_NAME_MAX - 1)); /* (zeroed: NUL-terminated) */
            }
            if (atomic_compare_exchange_strong(slot, &id, mine)) return mine;
        }
        if (locations[id].code == code && locations[id].line == line) return id;
    }
    return 0;
}

/* Reads the code object (checking that it is one) and makes its location at instr. */
static uint32_t resolve(py_thread_t *p, uintptr_t code, int64_t instr)
{
    const py_layout_t *L = ps_py.layout;
    uint8_t head[256];
    uintptr_t type, filename, qualname, table;
    int32_t first;
    if (L->co_head > sizeof head || !ps_peek(head, code, L->co_head)) return 0;
    memcpy(&type, head + 8, 8);
    if (type != ps_py.code_type) return 0;
    memcpy(&first, head + L->co_firstlineno, 4);
    memcpy(&filename, head + L->co_filename, 8);
    memcpy(&qualname, head + L->co_qualname, 8);
    memcpy(&table, head + L->co_linetable, 8);
    int line = -1;
    uint64_t size;
    if (table && ps_peek(&size, table + L->by_size, 8)) {
        uint32_t n = size < sizeof p->table ? (uint32_t)size : (uint32_t)sizeof p->table;
        if (ps_peek(p->table, table + L->by_data, n)) line = ps_py_line_of(p->table, n, first, instr * 2);
    }
    if (line < 0) line = first; /* (no line for this instruction: its function's) */
    char file[160], fn[96], name[PY_NAME_MAX];
    if (!read_str(filename, file, sizeof file)) strcpy(file, "?");
    if (!read_str(qualname, fn, sizeof fn)) strcpy(fn, "?");
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    /* (by hand: snprintf is not async-signal-safe) */
    size_t at = 0;
    for (const char *parts[] = {base, ":", fn, ":"}, **s = parts; s < parts + 4; s++)
        for (const char *c = *s; *c && at < sizeof name - 12; c++) name[at++] = *c;
    char digits[12];
    int nd = 0;
    for (unsigned v = (unsigned)(line < 0 ? 0 : line); nd == 0 || v; v /= 10) digits[nd++] = (char)('0' + v % 10);
    while (nd) name[at++] = digits[--nd];
    name[at] = 0;
    return intern(code, line, name);
}

uint32_t ps_py_location(py_thread_t *p, uintptr_t code, int64_t instr)
{
    uint32_t i = hash_of(code, instr) & (PY_CACHE - 1);
    if (p->cache[i].code == code && p->cache[i].instr == instr && p->cache[i].id) return p->cache[i].id;
    uint32_t id = resolve(p, code, instr);
    if (id) {
        p->cache[i].code = code;
        p->cache[i].instr = instr;
        p->cache[i].id = id;
    }
    return id;
}
