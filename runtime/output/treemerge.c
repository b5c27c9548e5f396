/* The call trees of the ranks as mergeable blocks (docs/format.md, "tree.tsv"; the design:
 * docs/design-scale.md).  Three steps, none of them MPI's (runtime/mpi/treereduce.c moves
 * the blocks between ranks):
 *
 *   ps_tree_encode  one rank's rank-file text (the data contract every source already
 *                   writes) -> a block: the rank's records as one tree, its threads summed;
 *   ps_tree_merge   two blocks of adjacent rank ranges -> one block, in one linear pass;
 *   ps_tree_write   the block of all ranks -> tree.tsv.
 *
 * Reading the rank file rather than the sources' memory keeps this one mechanism for every
 * source: a new line type is one entry in the tables below, and the reduced values are by
 * construction what a reader of the rank files computes (the tests compare them exactly).
 *
 * A record is a node of one tree under a `top` node: the `root`s of the application's and
 * of the MPI runtime's threads with their call trees, and flat records for per-rank scalars,
 * strings, warnings and probe definitions.  A record's key is (kind, module, address, name),
 * all by content, so that ranks with different module tables or address-space layouts agree;
 * a payload (a warning's text, a probe's file and line) rides along, the lowest rank's kept.
 *
 * A block is a byte string: the nodes in depth-first order, children sorted by key, each
 * node's header giving the length of its subtree, so that merging two blocks walks both
 * child lists side by side.  A column holds, over the block's ranks, the sum, the number of
 * ranks where it is not 0, the smallest and largest non-zero values with their lowest ranks,
 * the lowest rank where it is 0, and a power-of-two sketch: merging is exact because blocks
 * are contiguous rank ranges merged lower one first.  Not signal-safe (allocates): it runs in
 * MPI_Finalize only.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../core/pathscope.h"

/* ---- columns ---------------------------------------------------------------------------- */
/* The analysis registry's stored metrics (python/pathscope/metrics.py, same names), then the
 * per-rank inclusive values, then the flat records' own. */
enum {
    C_VISITS, C_SAMPLE_NS, C_SAMPLES, C_MPI_NS, C_BYTES, C_ALLOCS, C_ALLOC_BYTES, C_FREES,
    C_FREED_BYTES, C_PEAK_BYTES, C_ENTRIES, C_SYSCALLS, C_KERNEL_NS, C_OFFCPU_NS,
    C_PROBE_CALLS, C_PROBE_TIME, C_PROBE_SELF, C_PROBE_CPU, C_PROBE_LOST, C_PROBE_UNTIMED,
    C_PROBE_EXC, C_PROBE_OPEN, C_SYSCALLS_EST, C_KERNEL_NS_EST, C_INCL_TIME, C_INCL_MPI,
    C_INCL_OFFCPU,
    C_NODE_COLUMNS,                        /* the columns of call-tree nodes end here */
    C_VALUE = C_NODE_COLUMNS, C_RANKS, C_COUNT, NCOL
};
_Static_assert(C_NODE_COLUMNS == PS_TREE_NODE_COLUMNS, "pathscope.h: PS_TREE_NODE_COLUMNS");
static const char *const col_names[NCOL] = {
    "visits", "sample_ns", "samples", "mpi_ns", "bytes", "allocs", "alloc_bytes", "frees",
    "freed_bytes", "peak_bytes", "entries", "syscalls", "kernel_ns", "offcpu_ns",
    "probe_calls", "probe_time", "probe_self_time", "probe_cpu_time", "probe_lost_exits",
    "probe_untimed_calls", "probe_exception_exits", "probe_open_calls", "syscalls_estimated",
    "kernel_ns_estimated", "incl_time",
    "incl_mpi", "incl_offcpu", "value", "ranks", "count"};

#define NO_RANK UINT32_MAX

/* ---- line fields ------------------------------------------------------------------------ */
#define MAX_FIELDS 24
typedef struct { const char *p; uint32_t n; } str_t;
typedef struct { str_t f[MAX_FIELDS]; int n; } line_t;

static int split(const char *p, const char *end, line_t *l)
{
    l->n = 0;
    const char *s = p;
    for (const char *q = p;; q++) {
        if (q == end || *q == '\t') {
            if (l->n == MAX_FIELDS) return -1;
            l->f[l->n++] = (str_t){s, (uint32_t)(q - s)};
            if (q == end) return 0;
            s = q + 1;
        }
    }
}

static int is(str_t s, const char *lit) { return s.n == strlen(lit) && memcmp(s.p, lit, s.n) == 0; }

static int starts(str_t s, const char *lit)
{
    size_t n = strlen(lit);
    return s.n >= n && memcmp(s.p, lit, n) == 0;
}

/* A decimal field; "-" and anything else that is not a number give 0 (the `pnode` line's
 * fields of metrics not asked for). */
static uint64_t num(str_t s)
{
    uint64_t v = 0;
    for (uint32_t i = 0; i < s.n; i++) {
        if (s.p[i] < '0' || s.p[i] > '9') return 0;
        v = v * 10 + (uint64_t)(s.p[i] - '0');
    }
    return v;
}

static uint64_t hexnum(str_t s)
{
    uint64_t v = 0;
    uint32_t i = s.n > 2 && s.p[0] == '0' && s.p[1] == 'x' ? 2 : 0;
    for (; i < s.n; i++) {
        char c = s.p[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return 0;
        v = v * 16 + (uint64_t)d;
    }
    return v;
}

/* ---- a growable byte buffer -------------------------------------------------------------- */
typedef struct { uint8_t *p; size_t len, cap; int failed; } buf_t;

static void *buf_room(buf_t *b, size_t n)
{
    if (b->failed) return NULL;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n) cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) { b->failed = 1; return NULL; }
        b->p = p;
        b->cap = cap;
    }
    void *at = b->p + b->len;
    b->len += n;
    return at;
}

static void buf_put(buf_t *b, const void *src, size_t n)
{
    if (!n) return;                        /* (src may be NULL then: an empty payload) */
    void *at = buf_room(b, n);
    if (at) memcpy(at, src, n);
}

/* ---- the rank's own tree while it is read ------------------------------------------------- */
/* Strings live in the rank text (mapped for the whole encode) or in the tree's arena (a
 * module's path and build id joined, a probe's file and line, scalar names): a str_t either
 * way. */
typedef struct {
    str_t kind, mod, name, payload;
    uint64_t addr;
    uint32_t parent, first, next;          /* children: a list; sorted when encoded */
    uint8_t has_addr;
    uint64_t v[NCOL];
} lnode_t;

typedef struct chunk { struct chunk *next; size_t used, cap; char data[]; } chunk_t;

typedef struct {
    lnode_t *n;
    uint32_t count, cap;
    uint32_t *hash;                        /* (parent, key) -> node index + 1; 0 empty */
    uint32_t hcap;
    chunk_t *arena;                        /* strings made while reading */
    int failed;
} ltree_t;

static uint64_t str_hash(uint64_t h, str_t s)
{
    for (uint32_t i = 0; i < s.n; i++) h = (h ^ (uint8_t)s.p[i]) * 1099511628211ull;
    return (h ^ 0xff) * 1099511628211ull;
}

static uint64_t key_hash(uint32_t parent, str_t kind, str_t mod, uint64_t addr, str_t name)
{
    uint64_t h = 1469598103934665603ull ^ parent;
    h = str_hash(str_hash(str_hash(h, kind), mod), name);
    return (h ^ addr) * 1099511628211ull;
}

static int str_eq(str_t a, str_t b) { return a.n == b.n && (!a.n || memcmp(a.p, b.p, a.n) == 0); }

static int rehash(ltree_t *t)
{
    uint32_t cap = t->hcap ? t->hcap * 2 : 1024;
    uint32_t *h = calloc(cap, sizeof *h);
    if (!h) return -1;
    for (uint32_t i = 0; i < t->count; i++) {
        const lnode_t *n = &t->n[i];
        uint64_t k = key_hash(n->parent, n->kind, n->mod, n->addr, n->name);
        uint32_t s = (uint32_t)k & (cap - 1);
        while (h[s]) s = (s + 1) & (cap - 1);
        h[s] = i + 1;
    }
    free(t->hash);
    t->hash = h;
    t->hcap = cap;
    return 0;
}

/* The child of parent with this key, made if new; UINT32_MAX when out of memory. */
static uint32_t child(ltree_t *t, uint32_t parent, str_t kind, str_t mod, int has_addr,
                      uint64_t addr, str_t name)
{
    if (t->failed) return UINT32_MAX;
    if ((t->count + 1) * 2 > t->hcap && rehash(t) != 0) { t->failed = 1; return UINT32_MAX; }
    uint64_t k = key_hash(parent, kind, mod, addr, name);
    uint32_t s = (uint32_t)k & (t->hcap - 1);
    for (; t->hash[s]; s = (s + 1) & (t->hcap - 1)) {
        lnode_t *n = &t->n[t->hash[s] - 1];
        if (n->parent == parent && n->addr == addr && n->has_addr == has_addr &&
            str_eq(n->kind, kind) && str_eq(n->mod, mod) && str_eq(n->name, name))
            return t->hash[s] - 1;
    }
    if (t->count == t->cap) {
        uint32_t cap = t->cap ? t->cap * 2 : 1024;
        lnode_t *n = realloc(t->n, cap * sizeof *n);
        if (!n) { t->failed = 1; return UINT32_MAX; }
        t->n = n;
        t->cap = cap;
    }
    uint32_t i = t->count++;
    lnode_t *n = &t->n[i];
    memset(n, 0, sizeof *n);
    *n = (lnode_t){.kind = kind, .mod = mod, .name = name, .addr = addr, .parent = parent,
                   .first = UINT32_MAX, .next = UINT32_MAX, .has_addr = (uint8_t)has_addr};
    if (parent != UINT32_MAX) {
        n->next = t->n[parent].first;
        t->n[parent].first = i;
    }
    t->hash[s] = i + 1;
    return i;
}

static const str_t NONE = {"", 0};
#define LIT(s) ((str_t){s, sizeof s - 1})

/* A flat record under top: kind, name, one column. */
static void flat(ltree_t *t, str_t kind, str_t mod, str_t name, int col, uint64_t v)
{
    uint32_t i = child(t, 0, kind, mod, 0, 0, name);
    if (i != UINT32_MAX) t->n[i].v[col] += v;
}

/* a + sep + b as a string of its own, in the tree's arena (chunks that never move) */
static str_t joined(ltree_t *t, str_t a, const char *sep, str_t b)
{
    size_t ns = strlen(sep), n = a.n + ns + b.n;
    if (!t->arena || t->arena->used + n > t->arena->cap) {
        size_t cap = n > 65536 ? n : 65536;
        chunk_t *c = malloc(sizeof *c + cap);
        if (!c) { t->failed = 1; return NONE; }
        c->next = t->arena;
        c->used = 0;
        c->cap = cap;
        t->arena = c;
    }
    char *at = t->arena->data + t->arena->used;
    if (a.n) memcpy(at, a.p, a.n);
    memcpy(at + a.n, sep, ns);
    if (b.n) memcpy(at + a.n + ns, b.p, b.n);
    t->arena->used += n;
    return (str_t){at, (uint32_t)n};
}

/* ---- reading a rank file ------------------------------------------------------------------ */
#define MAX_MODULES 65536
#define MAX_PROBES 65536
#define MAX_THREADS_READ 65536

typedef struct { str_t mod, name, payload; uint64_t addr; } lprobe_t;

typedef struct {
    uint32_t *ids;     /* node id -> local node */
    uint32_t count, cap;
    uint32_t root;     /* the app or runtime root */
} lthread_t;

typedef struct {
    ltree_t t;
    str_t *modules;    /* module id -> "path\tbuild id" */
    int *runtime_mod;  /* module id -> the MPI runtime's */
    lprobe_t *probes;
    lthread_t *threads;
    uint32_t nthreads;
} reading_t;

/* Modules whose threads the MPI library or its runtime started (the reader's list,
 * python/pathscope/cct.py RUNTIME_MODULES: a prefix of the file name). */
static int runtime_module(str_t path)
{
    static const char *const prefixes[] = {
        "libmpi", "libopen-pal", "libopen-rte", "libpmix", "libpmi", "libmpich", "libevent",
        "libucs", "libucp", "libuct", "libfabric", "libpsm", "libhwloc", "mca_", "libprrte",
        "libprte", "libhcoll", "libxpmem"};
    uint32_t base = path.n;
    while (base > 0 && path.p[base - 1] != '/') base--;
    str_t file = {path.p + base, path.n - base};
    for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++)
        if (starts(file, prefixes[i])) return 1;
    return 0;
}

static lthread_t *thread_of(reading_t *r, uint64_t index)
{
    return index < r->nthreads && r->threads[index].ids ? &r->threads[index] : NULL;
}

static uint32_t node_of(reading_t *r, uint64_t thread, str_t id)
{
    lthread_t *th = thread_of(r, thread);
    uint64_t i = num(id);
    return th && i < th->count ? th->ids[i] : UINT32_MAX;
}

static int read_thread(reading_t *r, const line_t *l)
{
    if (l->n < 10) return 0;
    uint64_t index = num(l->f[1]);
    if (index >= MAX_THREADS_READ) return -1;
    if (index >= r->nthreads) {
        uint32_t n = (uint32_t)index + 1;
        lthread_t *th = realloc(r->threads, n * sizeof *th);
        if (!th) return -1;
        memset(th + r->nthreads, 0, (n - r->nthreads) * sizeof *th);
        r->threads = th;
        r->nthreads = n;
    }
    uint64_t mod = num(l->f[9]);
    int runtime = !is(l->f[9], "-") && mod < MAX_MODULES && r->runtime_mod[mod];
    lthread_t *th = &r->threads[index];
    th->root = child(&r->t, 0, LIT("root"), NONE, 0, 0, runtime ? LIT("runtime") : LIT("app"));
    th->count = 0;
    th->cap = (uint32_t)(num(l->f[8]) + 1);
    th->ids = calloc(th->cap, sizeof *th->ids);
    if (!th->ids || th->root == UINT32_MAX) return -1;
    /* per-rank sums over the threads: thread.* (application) or runtime.* */
    static const struct { int field; const char *name; } cols[] = {
        {3, "elapsed_ns"}, {4, "samples_kept"}, {5, "samples_in_mpi"}, {6, "samples_other"},
        {7, "unwind_failures"}, {8, "nodes"}, {11, "walks_reused"}, {12, "cpu_ns"}};
    str_t prefix = runtime ? LIT("runtime") : LIT("thread");
    for (size_t i = 0; i < sizeof cols / sizeof *cols; i++)
        if (cols[i].field < l->n)
            flat(&r->t, LIT("scalar"), NONE,
                 joined(&r->t, prefix, ".", (str_t){cols[i].name, (uint32_t)strlen(cols[i].name)}),
                 C_VALUE, num(l->f[cols[i].field]));
    flat(&r->t, LIT("scalar"), NONE, joined(&r->t, prefix, ".", LIT("count")), C_VALUE, 1);
    return 0;
}

static int is_code_kind(str_t k) { return is(k, "call") || is(k, "fn") || is(k, "pc"); }

static int read_node(reading_t *r, const line_t *l)
{
    if (l->n < 12) return -1;
    uint64_t thread = num(l->f[1]), id = num(l->f[2]);
    lthread_t *th = thread_of(r, thread);
    if (!th || id >= th->cap) return -1;
    str_t kind = l->f[4], mod = NONE, name = NONE;
    uint64_t addr = 0;
    int has_addr = 0;
    uint32_t parent;
    if (is(l->f[3], "-")) {
        parent = UINT32_MAX;       /* the thread's root */
    } else {
        parent = node_of(r, thread, l->f[3]);
        if (parent == UINT32_MAX) return -1;
    }
    uint64_t modid = num(l->f[5]);
    int known_mod = !is(l->f[5], "-") && modid < MAX_MODULES && r->modules[modid].p;
    if (is_code_kind(kind)) {
        if (known_mod) mod = r->modules[modid];
        addr = hexnum(l->f[6]);
        has_addr = 1;
    } else if (is(kind, "probe")) {
        uint64_t pid = num(l->f[6]);
        if (pid >= MAX_PROBES || !r->probes[pid].name.p) return -1;
        mod = r->probes[pid].mod;
        addr = r->probes[pid].addr;
        name = r->probes[pid].name;
        has_addr = 1;
    } else if (!is(kind, "root") && !is(kind, "failed") && !is(kind, "not_unwound")) {
        name = l->f[6];
        if (known_mod) mod = r->modules[modid];
    }
    uint32_t i = parent == UINT32_MAX ? th->root
                                      : child(&r->t, parent, kind, mod, has_addr, addr, name);
    if (i == UINT32_MAX) return -1;
    if (is(kind, "probe")) {
        lprobe_t *p = &r->probes[num(l->f[6])];
        r->t.n[i].payload = p->payload;
    }
    th->ids[id] = i;
    if (id >= th->count) th->count = (uint32_t)id + 1;
    uint64_t *v = r->t.n[i].v;
    /* the registry's kind rule: a system call's and a probe's calls are their own metrics */
    if (is(kind, "syscall")) {
        v[C_SYSCALLS] += num(l->f[7]);
        if (l->n > 13) v[C_KERNEL_NS] += num(l->f[13]);
    } else if (is(kind, "probe")) {
        v[C_PROBE_CALLS] += num(l->f[7]);
    } else {
        static const int cols[] = {C_VISITS, C_SAMPLE_NS, C_SAMPLES, C_MPI_NS, C_BYTES,
                                   C_ENTRIES, -1, C_OFFCPU_NS};
        for (int c = 0; c < 8 && 7 + c < l->n; c++)
            if (cols[c] >= 0) v[cols[c]] += num(l->f[7 + c]);
    }
    return 0;
}

/* `hnode`, `pnode`, `knode`, `pcomm`: values of a node read before */
static int read_node_part(reading_t *r, const line_t *l)
{
    if (l->n < 4) return -1;
    uint32_t i = node_of(r, num(l->f[1]), l->f[2]);
    if (i == UINT32_MAX) return -1;
    if (is(l->f[0], "pcomm")) {
        if (l->n < 7) return -1;
        uint32_t c = child(&r->t, i, LIT("pcomm"), NONE, 0, 0, l->f[3]);
        if (c == UINT32_MAX) return -1;
        r->t.n[c].v[C_VISITS] += num(l->f[4]);
        r->t.n[c].v[C_MPI_NS] += num(l->f[5]);
        r->t.n[c].v[C_BYTES] += num(l->f[6]);
        return 0;
    }
    static const int hnode[] = {C_ALLOCS, C_ALLOC_BYTES, C_FREES, C_FREED_BYTES, C_PEAK_BYTES};
    /* pnode: incl, excl, cpu, 4 rusage fields (not registry metrics), lost, untimed, exc, open */
    static const int pnode[] = {C_PROBE_TIME, C_PROBE_SELF, C_PROBE_CPU, -1, -1, -1, -1,
                                C_PROBE_LOST, C_PROBE_UNTIMED, C_PROBE_EXC, C_PROBE_OPEN};
    static const int knode[] = {C_SYSCALLS_EST, C_KERNEL_NS_EST};
    int is_h = is(l->f[0], "hnode"), is_k = is(l->f[0], "knode");
    const int *cols = is_h ? hnode : is_k ? knode : pnode;
    int ncols = is_h ? 5 : is_k ? 2 : 11;
    uint64_t *v = r->t.n[i].v;
    for (int c = 0; c < ncols && 3 + c < l->n; c++)
        if (cols[c] >= 0) v[cols[c]] += num(l->f[3 + c]);
    return 0;
}

/* A summary line's numeric fields as scalars LINE.NAME (names: docs/format.md). */
static void read_summary(reading_t *r, const line_t *l, int first, const char *const *names)
{
    for (int i = 0; names[i]; i++)
        if (names[i][0] && first + i < l->n)
            flat(&r->t, LIT("scalar"), NONE,
                 joined(&r->t, l->f[0], ".", (str_t){names[i], (uint32_t)strlen(names[i])}),
                 C_VALUE, num(l->f[first + i]));
}

static const char *const heap_fields[] = {
    "allocations", "bytes", "frees", "bytes_freed", "peak_bytes", "peak_ns", "live_bytes",
    "allocations_no_path", "frees_no_path", "frees_unknown", NULL};
static const char *const probes_fields[] = {
    "", "", "", "added", "removed", "refused", "traps", "windows", "longest_window_ns",
    "rescans", "passed", "lost_exits", "", "fast_entries", NULL};
static const char *const walks_fields[] = {
    "", "walks", "reused", "checked", "agreed", "thunk_errors", "restored", NULL};
static const char *const kthread_fields[] = {
    "", "blocked_ns", "runnable_ns", "switches", "faults", NULL};

static int read_line(reading_t *r, const line_t *l)
{
    str_t type = l->f[0];
    ltree_t *t = &r->t;
    if (l->n == 2 && (is(type, "wall_ns") || is(type, "mpi_ns") || is(type, "mpi_share_ppm") || is(type, "thread_multiple") ||
                      starts(type, "counter_"))) {
        flat(t, LIT("scalar"), NONE, type, C_VALUE, num(l->f[1]));
    } else if (l->n == 2 && (is(type, "status") || is(type, "program") || is(type, "command") ||
                             is(type, "mpi_library") || is(type, "tool_version") ||
                             is(type, "host"))) {
        flat(t, LIT("string"), l->f[1], type, C_RANKS, 1);
    } else if (is(type, "python") && l->n >= 4) {
        /* (2.13) "VERSION on|off NOTE": the report says which ranks read no Python frames */
        flat(t, LIT("string"), joined(t, joined(t, l->f[1], " ", l->f[2]), " ", l->f[3]), type,
             C_RANKS, 1);
    } else if (is(type, "warning") && l->n >= 5) {
        uint32_t i = child(t, 0, LIT("warning"), NONE, 0, 0, l->f[1]);
        if (i == UINT32_MAX) return -1;
        t->n[i].payload = l->f[4];
        t->n[i].v[C_RANKS] += 1;
        t->n[i].v[C_COUNT] += num(l->f[2]);
    } else if (is(type, "module") && l->n >= 4) {
        uint64_t id = num(l->f[1]);
        if (id >= MAX_MODULES) return -1;
        r->modules[id] = joined(t, l->f[2], "\t", l->f[3]);
        r->runtime_mod[id] = runtime_module(l->f[2]);
    } else if (is(type, "probe") && l->n >= 12) {
        uint64_t id = num(l->f[1]), mod = num(l->f[2]);
        if (id >= MAX_PROBES) return -1;
        lprobe_t *p = &r->probes[id];
        p->mod = !is(l->f[2], "-") && mod < MAX_MODULES && r->modules[mod].p ? r->modules[mod] : NONE;
        p->addr = hexnum(l->f[3]);
        p->name = l->f[9];
        p->payload = joined(t, l->f[10], "\t", l->f[11]);
        uint32_t i = child(t, 0, LIT("probedef"), p->mod, 1, p->addr, p->name);
        if (i == UINT32_MAX) return -1;
        t->n[i].payload = p->payload;
    } else if (is(type, "thread")) {
        return read_thread(r, l);
    } else if (is(type, "node")) {
        return read_node(r, l);
    } else if (is(type, "hnode") || is(type, "pnode") || is(type, "knode") || is(type, "pcomm")) {
        return read_node_part(r, l);
    } else if (is(type, "heap")) {
        read_summary(r, l, 2, heap_fields);
    } else if (is(type, "probes")) {
        read_summary(r, l, 1, probes_fields);
    } else if (is(type, "walks")) {
        read_summary(r, l, 1, walks_fields);
    } else if (is(type, "kthread")) {
        read_summary(r, l, 1, kthread_fields);
    } else if (is(type, "ksys") && l->n >= 5) {
        flat(t, LIT("scalar"), NONE, joined(t, LIT("ksys.calls"), ".", l->f[2]), C_VALUE, num(l->f[3]));
        flat(t, LIT("scalar"), NONE, joined(t, LIT("ksys.ns"), ".", l->f[2]), C_VALUE, num(l->f[4]));
    }
    return t->failed ? -1 : 0;
}

/* Inclusive values per rank, as a reader computes them (python/pathscope/calltree.py): the
 * node's sample_ns + mpi_ns plus its children's, pcomm parts and flat records left out. */
static void add_inclusive(ltree_t *t)
{
    for (uint32_t i = t->count; i-- > 1;) {
        lnode_t *n = &t->n[i];
        if (n->parent == 0 && !is(n->kind, "root")) continue;      /* flat records */
        if (is(n->kind, "pcomm")) continue;
        n->v[C_INCL_TIME] += n->v[C_SAMPLE_NS] + n->v[C_MPI_NS];
        n->v[C_INCL_MPI] += n->v[C_MPI_NS];
        n->v[C_INCL_OFFCPU] += n->v[C_OFFCPU_NS];
        if (n->parent == 0) continue;
        lnode_t *p = &t->n[n->parent];
        p->v[C_INCL_TIME] += n->v[C_INCL_TIME];
        p->v[C_INCL_MPI] += n->v[C_INCL_MPI];
        p->v[C_INCL_OFFCPU] += n->v[C_INCL_OFFCPU];
    }
}

/* ---- the block encoding -------------------------------------------------------------------- */
/* node: u64 subtree bytes, u32 children, u16 kind/mod/name/payload lengths, u8 has_addr,
 * u8 columns, u64 address, the four strings; per column: u8 column, u8 bins, u32 nonzero,
 * u32 zero_lo, u32 min_rank, u32 max_rank, u64 sum, min, max, then bins x (u8 bin, u32 count). */
#define HDR 34
#define COLHDR 42
#define BIN 5

typedef struct {
    uint8_t col, nbins;
    uint32_t nonzero, zero_lo, min_rank, max_rank;
    uint64_t sum, min, max;
    uint8_t bin[65];
    uint32_t count[65];
} stat_t;

typedef struct {
    const uint8_t *at;
    uint64_t size;
    uint32_t nchildren;
    str_t kind, mod, name, payload;
    uint8_t has_addr, ncols;
    uint64_t addr;
    const uint8_t *cols, *children;
} view_t;

static uint16_t rd16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static uint32_t rd32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t rd64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }

static view_t view(const uint8_t *p)
{
    view_t v = {.at = p, .size = rd64(p), .nchildren = rd32(p + 8)};
    uint16_t kl = rd16(p + 12), ml = rd16(p + 14), nl = rd16(p + 16), pl = rd16(p + 18);
    v.has_addr = p[20];
    v.ncols = p[21];
    v.addr = rd64(p + 22);
    const char *s = (const char *)p + HDR;
    v.kind = (str_t){s, kl};
    v.mod = (str_t){s + kl, ml};
    v.name = (str_t){s + kl + ml, nl};
    v.payload = (str_t){s + kl + ml + nl, pl};
    v.cols = p + HDR + kl + ml + nl + pl;
    const uint8_t *c = v.cols;
    for (int i = 0; i < v.ncols; i++) c += COLHDR + (size_t)c[1] * BIN;
    v.children = c;
    return v;
}

static stat_t col_read(const uint8_t **c)
{
    const uint8_t *p = *c;
    stat_t s = {.col = p[0], .nbins = p[1], .nonzero = rd32(p + 2), .zero_lo = rd32(p + 6),
                .min_rank = rd32(p + 10), .max_rank = rd32(p + 14), .sum = rd64(p + 18),
                .min = rd64(p + 26), .max = rd64(p + 34)};
    for (int b = 0; b < s.nbins; b++) {
        s.bin[b] = p[COLHDR + b * BIN];
        s.count[b] = rd32(p + COLHDR + b * BIN + 1);
    }
    *c = p + COLHDR + (size_t)s.nbins * BIN;
    return s;
}

static void col_put(buf_t *b, const stat_t *s)
{
    uint8_t *p = buf_room(b, COLHDR + (size_t)s->nbins * BIN);
    if (!p) return;
    p[0] = s->col;
    p[1] = s->nbins;
    memcpy(p + 2, &s->nonzero, 4);
    memcpy(p + 6, &s->zero_lo, 4);
    memcpy(p + 10, &s->min_rank, 4);
    memcpy(p + 14, &s->max_rank, 4);
    memcpy(p + 18, &s->sum, 8);
    memcpy(p + 26, &s->min, 8);
    memcpy(p + 34, &s->max, 8);
    for (int i = 0; i < s->nbins; i++) {
        p[COLHDR + i * BIN] = s->bin[i];
        memcpy(p + COLHDR + i * BIN + 1, &s->count[i], 4);
    }
}

/* The header of a node; returns its offset (the subtree size and column count are patched
 * when known). */
static size_t hdr_put(buf_t *b, str_t kind, str_t mod, str_t name, str_t payload,
                      int has_addr, uint64_t addr, uint32_t nchildren)
{
    size_t at = b->len;
    uint8_t *p = buf_room(b, HDR);
    if (!p) return at;
    str_t *s[] = {&kind, &mod, &name, &payload};
    for (int i = 0; i < 4; i++)            /* (a longer command line is cut, alike on every rank) */
        if (s[i]->n > UINT16_MAX) s[i]->n = UINT16_MAX;
    uint64_t zero = 0;
    uint16_t l[4] = {(uint16_t)kind.n, (uint16_t)mod.n, (uint16_t)name.n, (uint16_t)payload.n};
    memcpy(p, &zero, 8);
    memcpy(p + 8, &nchildren, 4);
    memcpy(p + 12, l, 8);
    p[20] = (uint8_t)has_addr;
    p[21] = 0;
    memcpy(p + 22, &addr, 8);
    memset(p + 30, 0, HDR - 30);
    buf_put(b, kind.p, kind.n);
    buf_put(b, mod.p, mod.n);
    buf_put(b, name.p, name.n);
    buf_put(b, payload.p, payload.n);
    return at;
}

static void hdr_finish(buf_t *b, size_t at, uint8_t ncols, uint32_t nchildren)
{
    if (b->failed) return;
    uint64_t size = b->len - at;
    memcpy(b->p + at, &size, 8);
    memcpy(b->p + at + 8, &nchildren, 4);
    b->p[at + 21] = ncols;
}

static int str_cmp(str_t a, str_t b)
{
    int c = a.n && b.n ? memcmp(a.p, b.p, a.n < b.n ? a.n : b.n) : 0;
    return c ? c : (a.n > b.n) - (a.n < b.n);
}

static int key_cmp(str_t ak, str_t am, uint64_t aa, str_t an, str_t bk, str_t bm, uint64_t ba,
                   str_t bn)
{
    int c = str_cmp(ak, bk);
    if (!c) c = str_cmp(am, bm);
    if (!c) c = (aa > ba) - (aa < ba);
    if (!c) c = str_cmp(an, bn);
    return c;
}

static const ltree_t *sort_tree;

static int lnode_cmp(const void *x, const void *y)
{
    const lnode_t *a = &sort_tree->n[*(const uint32_t *)x], *b = &sort_tree->n[*(const uint32_t *)y];
    return key_cmp(a->kind, a->mod, a->addr, a->name, b->kind, b->mod, b->addr, b->name);
}

static int bin_of(uint64_t v) { return 64 - __builtin_clzll(v); }  /* v >= 1: 1..64 */

static void encode_node(const ltree_t *t, uint32_t i, uint32_t rank, buf_t *b)
{
    const lnode_t *n = &t->n[i];
    uint32_t nchildren = 0;
    for (uint32_t c = n->first; c != UINT32_MAX; c = t->n[c].next) nchildren++;
    size_t at = hdr_put(b, n->kind, n->mod, n->name, n->payload, n->has_addr, n->addr, nchildren);
    uint8_t ncols = 0;
    for (int c = 0; c < NCOL; c++) {
        uint64_t v = n->v[c];
        if (!v) continue;
        stat_t s = {.col = (uint8_t)c, .nbins = 1, .nonzero = 1, .zero_lo = NO_RANK,
                    .min_rank = rank, .max_rank = rank, .sum = v, .min = v, .max = v};
        s.bin[0] = (uint8_t)bin_of(v);
        s.count[0] = 1;
        col_put(b, &s);
        ncols++;
    }
    if (nchildren) {
        uint32_t *kids = malloc(nchildren * sizeof *kids);
        if (!kids) { b->failed = 1; return; }
        uint32_t k = 0;
        for (uint32_t c = n->first; c != UINT32_MAX; c = t->n[c].next) kids[k++] = c;
        sort_tree = t;
        qsort(kids, nchildren, sizeof *kids, lnode_cmp);
        for (k = 0; k < nchildren && !b->failed; k++) encode_node(t, kids[k], rank, b);
        free(kids);
    }
    hdr_finish(b, at, ncols, nchildren);
}

static void ltree_free(reading_t *r)
{
    free(r->t.n);
    free(r->t.hash);
    for (chunk_t *c = r->t.arena, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    for (uint32_t i = 0; i < r->nthreads; i++) free(r->threads[i].ids);
    free(r->threads);
    free(r->modules);
    free(r->runtime_mod);
    free(r->probes);
}

int ps_tree_encode(const char *text, size_t len, int rank, ps_tblock_t *out)
{
    reading_t r;
    memset(&r, 0, sizeof r);
    memset(out, 0, sizeof *out);
    r.modules = calloc(MAX_MODULES, sizeof *r.modules);
    r.runtime_mod = calloc(MAX_MODULES, sizeof *r.runtime_mod);
    r.probes = calloc(MAX_PROBES, sizeof *r.probes);
    int error = !r.modules || !r.runtime_mod || !r.probes;
    if (!error) child(&r.t, UINT32_MAX, LIT("top"), NONE, 0, 0, NONE);
    const char *p = text, *end = text + len;
    while (!error && p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) break;                    /* a cut line: the writer did not finish it */
        line_t l;
        if (split(p, nl, &l) == 0 && read_line(&r, &l) != 0) error = 1;
        p = nl + 1;
    }
    error |= r.t.failed;
    buf_t b = {0};
    if (!error) {
        add_inclusive(&r.t);
        encode_node(&r.t, 0, (uint32_t)rank, &b);
        error = b.failed;
    }
    ltree_free(&r);
    if (error) { free(b.p); return -1; }
    *out = (ps_tblock_t){b.p, b.len, (uint32_t)rank, (uint32_t)rank + 1};
    return 0;
}

/* ---- merging two blocks ---------------------------------------------------------------- */
/* a: the lower block's statistics (or NULL: 0 on all its ranks, from lo_a), b the upper's. */
static stat_t col_merge(const stat_t *a, uint32_t lo_a, const stat_t *b, uint32_t lo_b)
{
    stat_t z = {0};
    stat_t r = {.col = a ? a->col : b->col};
    const stat_t *x = a ? a : &z, *y = b ? b : &z;
    r.sum = x->sum + y->sum;
    r.nonzero = x->nonzero + y->nonzero;
    uint32_t zx = a ? a->zero_lo : lo_a, zy = b ? b->zero_lo : lo_b;
    r.zero_lo = zx != NO_RANK ? zx : zy;
    /* extremes of the non-zero values; on ties the lower block's (its ranks are lower) */
    if (x->nonzero && (!y->nonzero || x->min <= y->min)) { r.min = x->min; r.min_rank = x->min_rank; }
    else { r.min = y->min; r.min_rank = y->min_rank; }
    if (x->nonzero && (!y->nonzero || x->max >= y->max)) { r.max = x->max; r.max_rank = x->max_rank; }
    else { r.max = y->max; r.max_rank = y->max_rank; }
    int i = 0, j = 0;
    while (i < x->nbins || j < y->nbins) {
        int take_x = j >= y->nbins || (i < x->nbins && x->bin[i] <= y->bin[j]);
        int take_y = i >= x->nbins || (j < y->nbins && y->bin[j] <= x->bin[i]);
        r.bin[r.nbins] = take_x ? x->bin[i] : y->bin[j];
        r.count[r.nbins] = (take_x ? x->count[i++] : 0) + (take_y ? y->count[j++] : 0);
        r.nbins++;
    }
    return r;
}

typedef struct { uint32_t lo_a, lo_b; } blocks_t;

static void merge_node(const uint8_t *pa, const uint8_t *pb, const blocks_t *k, buf_t *out)
{
    view_t a = pa ? view(pa) : (view_t){0}, b = pb ? view(pb) : (view_t){0};
    const view_t *key = pa ? &a : &b;
    /* payload: the lower block's (its lowest rank's) */
    size_t at = hdr_put(out, key->kind, key->mod, key->name, pa ? a.payload : b.payload,
                        key->has_addr, key->addr, 0);
    const uint8_t *ca = a.cols, *cb = b.cols;
    int ia = 0, ib = 0;
    uint8_t ncols = 0;
    stat_t sa, sb;
    int have_a = 0, have_b = 0;
    for (;;) {
        if (!have_a && ia < (pa ? a.ncols : 0)) { sa = col_read(&ca); ia++; have_a = 1; }
        if (!have_b && ib < (pb ? b.ncols : 0)) { sb = col_read(&cb); ib++; have_b = 1; }
        if (!have_a && !have_b) break;
        int use_a = have_a && (!have_b || sa.col <= sb.col);
        int use_b = have_b && (!have_a || sb.col <= sa.col);
        stat_t m = col_merge(use_a ? &sa : NULL, k->lo_a, use_b ? &sb : NULL, k->lo_b);
        col_put(out, &m);
        ncols++;
        if (use_a) have_a = 0;
        if (use_b) have_b = 0;
    }
    /* children: two sorted lists */
    const uint8_t *xa = pa ? a.children : NULL, *xb = pb ? b.children : NULL;
    uint32_t na = pa ? a.nchildren : 0, nb = pb ? b.nchildren : 0, n = 0;
    while ((na || nb) && !out->failed) {
        int c;
        if (!na) c = 1;
        else if (!nb) c = -1;
        else {
            view_t u = view(xa), w = view(xb);
            c = key_cmp(u.kind, u.mod, u.addr, u.name, w.kind, w.mod, w.addr, w.name);
        }
        const uint8_t *ua = c <= 0 ? xa : NULL, *ub = c >= 0 ? xb : NULL;
        merge_node(ua, ub, k, out);
        if (ua) { xa += rd64(xa); na--; }
        if (ub) { xb += rd64(xb); nb--; }
        n++;
    }
    hdr_finish(out, at, ncols, n);
}

int ps_tree_merge(const ps_tblock_t *a, const ps_tblock_t *b, ps_tblock_t *out)
{
    memset(out, 0, sizeof *out);
    if (a->hi != b->lo) return -1;
    buf_t o = {0};
    /* the result is never longer than both inputs: each node, column and bin at most once */
    o.p = malloc(a->len + b->len);
    if (!o.p) return -1;
    o.cap = a->len + b->len;
    blocks_t k = {a->lo, b->lo};
    merge_node(a->data, b->data, &k, &o);
    if (o.failed) { free(o.p); return -1; }
    *out = (ps_tblock_t){o.p, o.len, a->lo, b->hi};
    return 0;
}

/* The statistics of one column of a node (all 0 when it has none). */
static stat_t col_of(const view_t *v, int col)
{
    const uint8_t *c = v->cols;
    for (int i = 0; i < v->ncols; i++) {
        stat_t s = col_read(&c);
        if (s.col == col) return s;
    }
    return (stat_t){.col = (uint8_t)col, .zero_lo = 0};
}

/* ---- the per-rank vectors of the heaviest paths (--per-rank summary) ---------------------- */
/* A path is named across ranks by a hash of its nodes' keys from the root down: every rank
 * computes it alike on its own block. */
static uint64_t path_hash(uint64_t parent, const view_t *v)
{
    uint64_t h = str_hash(str_hash(str_hash(parent * 1099511628211ull + 1, v->kind), v->mod), v->name);
    return (h ^ v->addr ^ ((uint64_t)v->has_addr << 63)) * 1099511628211ull;
}

static uint32_t node_cols(const view_t *v)
{
    uint32_t mask = 0;
    const uint8_t *c = v->cols;
    for (int i = 0; i < v->ncols; i++) {
        stat_t s = col_read(&c);
        if (s.col < C_NODE_COLUMNS && s.nonzero) mask |= 1u << s.col;
    }
    return mask;
}

typedef struct { uint64_t weight; ps_tpath_t path; } ranked_t;
typedef struct { ranked_t *v; size_t n, cap; } ranking_t;

static void rank_paths(const uint8_t *p, uint64_t parent, ranking_t *r)
{
    view_t v = view(p);
    if (is(v.kind, "pcomm")) return;
    uint64_t h = path_hash(parent, &v);
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 1024;
        ranked_t *m = realloc(r->v, cap * sizeof *m);
        if (!m) return;                    /* (fewer candidates: still the heaviest seen) */
        r->v = m;
        r->cap = cap;
    }
    r->v[r->n++] = (ranked_t){col_of(&v, C_INCL_TIME).sum, {h, node_cols(&v)}};
    const uint8_t *x = v.children;
    for (uint32_t i = 0; i < v.nchildren; i++, x += rd64(x)) rank_paths(x, h, r);
}

static int heavier(const void *a, const void *b)
{
    const ranked_t *x = a, *y = b;
    if (x->weight != y->weight) return x->weight < y->weight ? 1 : -1;
    return (x->path.hash > y->path.hash) - (x->path.hash < y->path.hash);
}

int ps_tree_top_paths(const ps_tblock_t *all, ps_tpath_t *out, int max)
{
    view_t top = view(all->data);
    ranking_t r = {0};
    const uint8_t *x = top.children;
    for (uint32_t i = 0; i < top.nchildren; i++, x += rd64(x))
        if (is(view(x).kind, "root")) rank_paths(x, 0, &r);
    qsort(r.v, r.n, sizeof *r.v, heavier);
    int n = 0;
    for (size_t i = 0; i < r.n && n < max; i++)
        if (r.v[i].path.cols) out[n++] = r.v[i].path;
    free(r.v);
    return n;
}

static int path_values(const uint8_t *p, uint64_t parent, const ps_tpath_t *paths, int n,
                       const size_t *offset, uint64_t *out)
{
    view_t v = view(p);
    if (is(v.kind, "pcomm")) return 0;
    uint64_t h = path_hash(parent, &v);
    for (int i = 0; i < n; i++) {
        if (paths[i].hash != h) continue;
        size_t k = offset[i];
        for (int c = 0; c < C_NODE_COLUMNS; c++)
            if (paths[i].cols & (1u << c)) out[k++] = col_of(&v, c).sum;  /* (its own value) */
    }
    const uint8_t *x = v.children;
    for (uint32_t i = 0; i < v.nchildren; i++, x += rd64(x))
        path_values(x, h, paths, n, offset, out);
    return 0;
}

size_t ps_tree_path_width(const ps_tpath_t *paths, int n)
{
    size_t w = 0;
    for (int i = 0; i < n; i++) w += (size_t)__builtin_popcount(paths[i].cols);
    return w;
}

void ps_tree_path_values(const ps_tblock_t *own, const ps_tpath_t *paths, int n, uint64_t *out)
{
    size_t offset[PS_RANKVEC_PATHS + 1] = {0};
    for (int i = 0; i < n && i < PS_RANKVEC_PATHS; i++)
        offset[i + 1] = offset[i] + (size_t)__builtin_popcount(paths[i].cols);
    memset(out, 0, offset[n] * sizeof *out);   /* a path the rank does not have: 0 */
    view_t top = view(own->data);
    const uint8_t *x = top.children;
    for (uint32_t i = 0; i < top.nchildren; i++, x += rd64(x))
        if (is(view(x).kind, "root")) path_values(x, 0, paths, n, offset, out);
}

/* ---- tree.tsv ------------------------------------------------------------------------------ */
static void put_str(ps_fmt_t *f, str_t s)
{
    for (uint32_t i = 0; i < s.n; i++) ps_fmt_char(f, s.p[i]);
}

static void put_field(ps_fmt_t *f, str_t s)
{
    ps_fmt_char(f, '\t');
    if (s.n) put_str(f, s);
    else ps_fmt_char(f, '-');
}

/* One value over ranks [0, p), docs/format.md "tree.tsv": `=V` when every rank has V; else
 * SUM,MIN,MIN_RANK,MAX,MAX_RANK,NONZERO,BINS with NONZERO empty when it is p (MIN > 0) and BINS
 * the ranks of each non-empty bin below MAX's, `K:COUNT`, or COUNT alone where K is one above
 * the bin before (before the first: MIN's bin, when MIN > 0); MAX's bin holds the rest.  What
 * a reader can work out from the other fields is not written: the file's size does not grow
 * with the rank count beyond the digits of the sums and ranks. */
static int uniform(const stat_t *s, uint32_t p)
{
    return s->nonzero == p ? s->min == s->max : !s->nonzero;
}

/* Two encoded columns with the same statistics (all but the column byte; the bin counts first,
 * so that the compare stays within the shorter one). */
static int same_stats(const uint8_t *a, const uint8_t *b)
{
    return a[1] == b[1] && memcmp(a + 1, b + 1, COLHDR - 1 + (size_t)a[1] * BIN) == 0;
}

static void put_stats(ps_fmt_t *f, const stat_t *s, uint32_t p)
{
    int all = s->nonzero == p;
    uint64_t min = all ? s->min : 0, max = s->nonzero ? s->max : 0;
    if (uniform(s, p)) {
        ps_fmt_char(f, '=');
        ps_fmt_u64(f, min);
        return;
    }
    ps_fmt_u64(f, s->sum);
    ps_fmt_char(f, ',');
    ps_fmt_u64(f, min);
    ps_fmt_char(f, ',');
    ps_fmt_u64(f, all ? s->min_rank : s->zero_lo);
    ps_fmt_char(f, ',');
    ps_fmt_u64(f, max);
    ps_fmt_char(f, ',');
    ps_fmt_u64(f, s->max_rank);
    ps_fmt_char(f, ',');
    if (!all) ps_fmt_u64(f, s->nonzero);
    ps_fmt_char(f, ',');
    int before = min ? bin_of(min) - 1 : -1;      /* -1: the first bin is named */
    for (int i = 0; i + 1 < s->nbins; i++) {      /* the last, MAX's bin, is implied */
        if (i) ps_fmt_char(f, ';');
        if (s->bin[i] != before + 1) {
            ps_fmt_u64(f, s->bin[i]);
            ps_fmt_char(f, ':');
        }
        ps_fmt_u64(f, s->count[i]);
        before = s->bin[i];
    }
}

typedef struct {
    str_t *mods;
    uint32_t nmods, cap;
    uint32_t used;     /* columns seen: a bit each */
    uint32_t next_id;
    const ps_rankvec_t *rv;
    int64_t ids[PS_RANKVEC_PATHS];   /* node id of each rankvec path, -1 until written */
} out_t;

static int mod_id(out_t *o, str_t m, int add)
{
    for (uint32_t i = 0; i < o->nmods; i++)
        if (str_eq(o->mods[i], m)) return (int)i;
    if (!add) return -1;
    if (o->nmods == o->cap) {
        uint32_t cap = o->cap ? o->cap * 2 : 64;
        str_t *p = realloc(o->mods, cap * sizeof *p);
        if (!p) return -1;
        o->mods = p;
        o->cap = cap;
    }
    o->mods[o->nmods] = m;
    return (int)o->nmods++;
}

/* First pass over the call trees: the modules they name, the columns they use. */
static void scan_tree(const uint8_t *p, out_t *o)
{
    view_t v = view(p);
    if (v.mod.n) mod_id(o, v.mod, 1);
    const uint8_t *c = v.cols;
    for (int i = 0; i < v.ncols; i++) o->used |= 1u << col_read(&c).col;
    const uint8_t *x = v.children;
    for (uint32_t i = 0; i < v.nchildren; i++, x += rd64(x)) scan_tree(x, o);
}

static void put_mod(ps_fmt_t *f, out_t *o, str_t m)
{
    ps_fmt_char(f, '\t');
    int id = m.n ? mod_id(o, m, 0) : -1;
    if (id < 0) ps_fmt_char(f, '-');
    else ps_fmt_u64(f, (uint64_t)id);
}

static void write_nodes(ps_fmt_t *f, const uint8_t *p, int64_t parent, uint64_t parent_hash,
                        out_t *o, uint32_t nranks)
{
    view_t v = view(p);
    uint32_t id = o->next_id++;
    uint64_t h = is(v.kind, "pcomm") ? 0 : path_hash(parent_hash, &v);
    for (int i = 0; o->rv && h && i < o->rv->n; i++)
        if (o->rv->paths[i].hash == h && o->ids[i] < 0) o->ids[i] = id;
    ps_fmt_str(f, "node\t");
    ps_fmt_u64(f, id);
    ps_fmt_char(f, '\t');
    if (parent < 0) ps_fmt_char(f, '-');
    else ps_fmt_u64(f, (uint64_t)parent);
    put_field(f, v.kind);
    put_mod(f, o, v.mod);
    ps_fmt_char(f, '\t');
    if (v.has_addr) ps_fmt_hex(f, v.addr);
    else ps_fmt_char(f, '-');
    put_field(f, v.name);
    const uint8_t *c = v.cols, *shown[C_NODE_COLUMNS];
    int nshown = 0;
    for (int i = 0; i < v.ncols; i++) {
        const uint8_t *at = c;
        stat_t s = col_read(&c);
        if (!s.nonzero || s.col >= C_NODE_COLUMNS) continue;
        ps_fmt_char(f, '\t');
        ps_fmt_str(f, col_names[s.col]);
        ps_fmt_char(f, '=');
        const uint8_t *same = NULL;  /* an earlier column of the line with these statistics */
        for (int j = 0; j < nshown && !same && !uniform(&s, nranks); j++)
            if (same_stats(at, shown[j])) same = shown[j];
        if (same) {
            ps_fmt_char(f, '@');
            ps_fmt_str(f, col_names[same[0]]);
        } else {
            put_stats(f, &s, nranks);
        }
        shown[nshown++] = at;
    }
    ps_fmt_char(f, '\n');
    const uint8_t *x = v.children;
    for (uint32_t i = 0; i < v.nchildren; i++, x += rd64(x)) write_nodes(f, x, id, h, o, nranks);
}

/* rankvec NODE COLUMN v0,v1,...: the gathered values, rank by rank */
static void write_rankvecs(ps_fmt_t *f, const out_t *o, uint32_t nranks)
{
    const ps_rankvec_t *rv = o->rv;
    size_t width = ps_tree_path_width(rv->paths, rv->n), k = 0;
    for (int i = 0; i < rv->n; i++) {
        for (int c = 0; c < C_NODE_COLUMNS; c++) {
            if (!(rv->paths[i].cols & (1u << c))) continue;
            if (o->ids[i] >= 0) {
                ps_fmt_str(f, "rankvec\t");
                ps_fmt_u64(f, (uint64_t)o->ids[i]);
                ps_fmt_char(f, '\t');
                ps_fmt_str(f, col_names[c]);
                for (uint32_t r = 0; r < nranks; r++) {
                    ps_fmt_char(f, r ? ',' : '\t');
                    ps_fmt_u64(f, rv->values[(size_t)r * width + k]);
                }
                ps_fmt_char(f, '\n');
            }
            k++;
        }
    }
}

void ps_tree_write(ps_fmt_t *f, const ps_tblock_t *all, const ps_treecost_t *cost,
                   const ps_rankvec_t *rv)
{
    uint32_t nranks = all->hi - all->lo;
    view_t top = view(all->data);
    out_t o = {0};
    o.rv = rv && rv->n > 0 ? rv : NULL;
    for (int i = 0; i < PS_RANKVEC_PATHS; i++) o.ids[i] = -1;
    const uint8_t *x = top.children;
    for (uint32_t i = 0; i < top.nchildren; i++, x += rd64(x)) {
        view_t v = view(x);
        if (is(v.kind, "root")) scan_tree(x, &o);
        else if (is(v.kind, "probedef") && v.mod.n) mod_id(&o, v.mod, 1);
    }
    ps_fmt_str(f, "pathscope-tree\t" PS_FORMAT_VERSION "\nrun\t");
    ps_fmt_str(f, ps_run_id);
    ps_fmt_str(f, "\nranks\t");
    ps_fmt_u64(f, nranks);
    if (cost) {
        uint64_t v[4] = {cost->ns, cost->rounds, all->len, cost->peak_bytes};
        ps_fmt_char(f, '\n');
        ps_fmt_line_u64(f, "reduction", v, 4);
        f->len--;                          /* (its newline: the next line starts with one) */
    }
    ps_fmt_str(f, "\ncolumns");
    for (int c = 0; c < C_NODE_COLUMNS; c++)
        if (o.used & (1u << c)) { ps_fmt_char(f, '\t'); ps_fmt_str(f, col_names[c]); }
    ps_fmt_char(f, '\n');
    for (uint32_t i = 0; i < o.nmods; i++) {
        ps_fmt_str(f, "module\t");
        ps_fmt_u64(f, i);
        ps_fmt_char(f, '\t');
        put_str(f, o.mods[i]);             /* path TAB build id */
        ps_fmt_char(f, '\n');
    }
    /* the flat records, in key order: probedef, scalar, string, warning */
    uint32_t probe_id = 0;
    x = top.children;
    for (uint32_t i = 0; i < top.nchildren; i++, x += rd64(x)) {
        view_t v = view(x);
        if (is(v.kind, "string")) {
            stat_t s = col_of(&v, C_RANKS);
            ps_fmt_str(f, "string");
            put_field(f, v.name);
            ps_fmt_char(f, '\t');
            ps_fmt_u64(f, s.sum);
            put_field(f, v.mod);
        } else if (is(v.kind, "warning")) {
            ps_fmt_str(f, "warning");
            put_field(f, v.name);
            ps_fmt_char(f, '\t');
            ps_fmt_u64(f, col_of(&v, C_RANKS).sum);
            ps_fmt_char(f, '\t');
            ps_fmt_u64(f, col_of(&v, C_COUNT).sum);
            put_field(f, v.payload);
        } else if (is(v.kind, "scalar")) {
            stat_t s = col_of(&v, C_VALUE);
            ps_fmt_str(f, "scalar");
            put_field(f, v.name);
            ps_fmt_char(f, '\t');
            put_stats(f, &s, nranks);
        } else if (is(v.kind, "probedef")) {
            ps_fmt_str(f, "probe\t");
            ps_fmt_u64(f, probe_id++);
            put_mod(f, &o, v.mod);
            ps_fmt_char(f, '\t');
            ps_fmt_hex(f, v.addr);
            put_field(f, v.name);
            ps_fmt_char(f, '\t');
            put_str(f, v.payload);         /* file TAB line */
        } else {
            continue;
        }
        ps_fmt_char(f, '\n');
    }
    x = top.children;
    for (uint32_t i = 0; i < top.nchildren; i++, x += rd64(x))
        if (is(view(x).kind, "root")) write_nodes(f, x, -1, 0, &o, nranks);
    if (o.rv) write_rankvecs(f, &o, nranks);
    ps_fmt_str(f, "end\n");
    free(o.mods);
}
