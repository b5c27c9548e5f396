/* Trampolines (docs/design-probes.md section 2): a page within +-2 GB of a probed site and of
 * every target its displaced instructions reach, found in the gaps of /proc/self/maps and
 * mapped with MAP_FIXED_NOREPLACE (never MAP_FIXED: another thread may map there meanwhile).
 * The page is written while PROT_READ|PROT_WRITE, then becomes PROT_READ|PROT_EXEC and is
 * never written again (W^X); it is never unmapped either, since a thread may still run in
 * it.  An add is a batch of one, so a page holds one probe, in its 128-byte slot 1.
 *
 * ps_patch_original_pc runs in signal handlers: it reads only the insert-only page table and
 * the per-probe instruction maps, which are written before the page is published. */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <fcntl.h>

#include "patch_internal.h"
#include "procmaps.h"

#define REACH ((uint64_t)1 << 31)
#define LOWEST_MAP ((uintptr_t)0x10000)          /* vm.mmap_min_addr's default */
#define HIGHEST_MAP ((uintptr_t)0x7ffffffff000)  /* the top of the 47-bit user space */

/* Per probe: where each relocated instruction starts (from the copy) and where its original
 * did (from the site); entry n is the jmp back, standing for site+LEN. */
static struct {
    uint8_t n, new_off[PS_PROBE_MAX_INSNS + 1], orig_off[PS_PROBE_MAX_INSNS + 1];
} insn_map[PS_PROBE_MAX];

/* Our trampoline pages: an insert-only open-addressing set of page addresses. */
#define PAGE_SET 8192
static _Atomic uintptr_t page_set[PAGE_SET];

static unsigned page_hash(uintptr_t page)
{
    return (unsigned)((page >> 12) * 0x9E3779B1u) % PAGE_SET;
}

static void page_set_add(uintptr_t page)
{
    unsigned h = page_hash(page);
    while (atomic_load_explicit(&page_set[h], memory_order_relaxed)) h = (h + 1) % PAGE_SET;
    atomic_store_explicit(&page_set[h], page, memory_order_release);
}

static int page_set_has(uintptr_t page)
{
    for (unsigned h = page_hash(page);; h = (h + 1) % PAGE_SET) {
        uintptr_t k = atomic_load_explicit(&page_set[h], memory_order_acquire);
        if (k == page) return 1;
        if (k == 0) return 0;
    }
}

/* ---- /proc/self/maps, line by line ---------------------------------------------------- */
typedef struct {
    uintptr_t start, end;
    int prot;
} map_t;

static int parse_map(const char *line, map_t *m)
{
    const char *p = line;
    m->start = ps_maps_parse_hex(&p);
    if (*p++ != '-') return 0;
    m->end = ps_maps_parse_hex(&p);
    if (p[0] != ' ' || !p[1] || !p[2] || !p[3]) return 0;
    m->prot = (p[1] == 'r' ? PROT_READ : 0) | (p[2] == 'w' ? PROT_WRITE : 0) |
              (p[3] == 'x' ? PROT_EXEC : 0);
    return 1;
}

/* Calls fn for every mapping in address order until it returns nonzero; -1 if unreadable.
 * Lines are at most a path (4096) plus 100 bytes: a 16 KB buffer always holds a whole one. */
static int maps_each(int (*fn)(const map_t *, void *), void *arg)
{
    static char buf[16384];
    int fd = (int)PS_RAW(SYS_open, "/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    size_t have = 0;
    int stop = 0;
    for (long n; !stop && (n = PS_RAW(SYS_read, fd, buf + have, sizeof buf - 1 - have)) > 0;) {
        have += (size_t)n;
        buf[have] = '\0';
        char *line = buf, *nl;
        while (!stop && (nl = strchr(line, '\n'))) {
            *nl = '\0';
            map_t m;
            if (parse_map(line, &m)) stop = fn(&m, arg);
            line = nl + 1;
        }
        have -= (size_t)(line - buf);
        memmove(buf, line, have);
    }
    PS_RAW(SYS_close, fd);
    return 0;
}

typedef struct {
    uintptr_t addr, end;
    int found, prot;
} holder_t;

static int find_holder(const map_t *m, void *arg)
{
    holder_t *h = arg;
    if (h->addr < m->start || h->addr >= m->end) return 0;
    h->found = h->end <= m->end;
    h->prot = m->prot;
    return 1;
}

int ps_text_mapping(uintptr_t addr, size_t n, int *prot)
{
    holder_t h = {addr, addr + n, 0, 0};
    if (maps_each(find_holder, &h) < 0) return 0;
    *prot = h.prot;
    return h.found;
}

/* ---- a page in reach ------------------------------------------------------------------ */
typedef struct {
    uintptr_t lo, hi, near; /* page starts allowed: [lo, hi]; prefer near the site */
    uintptr_t prev_end, best;
} gap_search_t;

static uintptr_t distance(uintptr_t a, uintptr_t b) { return a > b ? a - b : b - a; }

static void consider_gap(gap_search_t *g, uintptr_t start, uintptr_t end)
{
    if (end < start + PS_TRAMP_PAGE) return;
    uintptr_t last = end - PS_TRAMP_PAGE;
    uintptr_t lo = start > g->lo ? start : g->lo, hi = last < g->hi ? last : g->hi;
    if (lo > hi) return;
    uintptr_t pick = g->near < lo   ? lo
                     : g->near > hi ? hi
                                    : g->near & ~(uintptr_t)(PS_TRAMP_PAGE - 1);
    if (pick < lo) pick = lo; /* (near rounded down out of the gap) */
    if (!g->best || distance(pick, g->near) < distance(g->best, g->near)) g->best = pick;
}

static int gap_before(const map_t *m, void *arg)
{
    gap_search_t *g = arg;
    if (m->start > g->prev_end) consider_gap(g, g->prev_end, m->start);
    if (m->end > g->prev_end) g->prev_end = m->end;
    return 0;
}

/* A free page in [lo, hi], mapped read-write; 0 if there is none. */
static uintptr_t map_page_in(uintptr_t lo, uintptr_t hi, uintptr_t near)
{
    for (int attempt = 0; attempt < 8; attempt++) {
        gap_search_t g = {lo, hi, near, LOWEST_MAP, 0};
        if (maps_each(gap_before, &g) < 0) return 0;
        consider_gap(&g, g.prev_end, HIGHEST_MAP);
        if (!g.best) return 0;
        long r = PS_RAW(SYS_mmap, g.best, PS_TRAMP_PAGE, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        if ((uintptr_t)r == g.best) return g.best;
        if (r >= 0) PS_RAW(SYS_munmap, r, PS_TRAMP_PAGE); /* a kernel before 4.17: a mere hint */
        else if (r != -EEXIST) return 0;
        /* else another thread mapped there since we read the map: read it again */
    }
    return 0;
}

/* The page starts from which every rel32 in the page reaches every point in pts. */
static int reach_window(const uintptr_t *pts, int n, uintptr_t *lo, uintptr_t *hi)
{
    uintptr_t min = UINTPTR_MAX, max = 0;
    for (int i = 0; i < n; i++) {
        if (pts[i] < min) min = pts[i];
        if (pts[i] > max) max = pts[i];
    }
    uintptr_t l = max > REACH + LOWEST_MAP ? max - REACH + PS_TRAMP_PAGE : LOWEST_MAP;
    uintptr_t h = min + REACH - 2 * PS_TRAMP_PAGE;
    *lo = (l + PS_TRAMP_PAGE - 1) & ~(uintptr_t)(PS_TRAMP_PAGE - 1);
    *hi = (h < HIGHEST_MAP ? h : HIGHEST_MAP) & ~(uintptr_t)(PS_TRAMP_PAGE - 1);
    return *lo <= *hi;
}

/* ---- writing the trampoline ----------------------------------------------------------- */
static void put32(uint8_t *at, int32_t v) { memcpy(at, &v, 4); }

static int32_t get_disp(const uint8_t *at, int bytes)
{
    if (bytes == 1) return (int8_t)at[0];
    int32_t v;
    memcpy(&v, at, 4);
    return v;
}

/* Writes the relocated copy of plan's instructions at out (to run at out_addr), then the jmp
 * back (at most 16 * 6 + 5 bytes: every instruction a widened jcc8). */
static void relocate(const ps_probe_plan_t *p, uintptr_t site, uintptr_t bias, uint8_t *out,
                       uintptr_t out_addr, uint32_t id)
{
    size_t n = 0;
    for (int i = 0; i < p->ninsn; i++) {
        const ps_probe_insn_t *in = &p->insn[i];
        const uint8_t *src = p->orig + in->off;
        uintptr_t target = (uintptr_t)in->target + bias, at = out_addr + n;
        insn_map[id].new_off[i] = (uint8_t)n;
        insn_map[id].orig_off[i] = in->off;
        if (in->kind == PS_INSN_JMP8) {
            out[n] = 0xe9;
            put32(out + n + 1, (int32_t)(target - (at + 5)));
            n += 5;
        } else if (in->kind == PS_INSN_JCC8) {
            out[n] = 0x0f;
            out[n + 1] = (uint8_t)(0x80 | (src[0] & 0x0f));
            put32(out + n + 2, (int32_t)(target - (at + 6)));
            n += 6;
        } else {
            memcpy(out + n, src, in->len);
            if (in->kind != PS_INSN_COPY)
                put32(out + n + in->field, (int32_t)(target - (at + in->len)));
            n += in->len;
        }
    }
    insn_map[id].n = p->ninsn;
    insn_map[id].new_off[p->ninsn] = (uint8_t)n;
    insn_map[id].orig_off[p->ninsn] = p->len;
    out[n] = 0xe9;
    put32(out + n + 1, (int32_t)(site + p->len - (out_addr + n + 5)));
}

/* The points the trampoline must reach: the site, the jmp back, every target.  -1 if a
 * target disagrees with the displacement in the original bytes (a plan for other code). */
static int plan_points(const ps_probe_plan_t *p, uintptr_t site, uintptr_t bias, uintptr_t *pts)
{
    int n = 0;
    pts[n++] = site;
    pts[n++] = site + p->len;
    for (int i = 0; i < p->ninsn; i++) {
        const ps_probe_insn_t *in = &p->insn[i];
        if (in->kind == PS_INSN_COPY) continue;
        int bytes = in->kind == PS_INSN_JMP8 || in->kind == PS_INSN_JCC8 ? 1 : 4;
        uintptr_t end = site + in->off + in->len;
        intptr_t disp = get_disp(p->orig + in->off + in->field, bytes);
        if (end + (uintptr_t)disp != in->target + bias) return -1;
        pts[n++] = (uintptr_t)in->target + bias;
    }
    return n;
}

int ps_tramp_build(uint32_t id, const ps_probe_plan_t *plan, uintptr_t site, uintptr_t bias,
                   ps_patch_t *d, char *why, size_t len)
{
    uintptr_t pts[PS_PROBE_MAX_INSNS + 2], lo, hi;
    int npts = plan_points(plan, site, bias, pts);
    if (npts < 0) {
        ps_probe_say(why, len, "bad-plan a TARGET disagrees with the displacement in ORIG");
        return -1;
    }
    uintptr_t page = reach_window(pts, npts, &lo, &hi) ? map_page_in(lo, hi, site) : 0;
    if (!page) {
        ps_probe_say(why, len,
                     "out-of-reach no free page within 2 GB of the function and its targets");
        return -1;
    }
    uint8_t *p = (uint8_t *)page, *t = p + PS_TRAMP_SLOT;
    uintptr_t common = (uintptr_t)&ps_probe_entry_common, tramp = page + PS_TRAMP_SLOT;
    memcpy(p, &common, 8);
    memcpy(p + 8, &id, 4);
    static const uint8_t endbr64[4] = {0xf3, 0x0f, 0x1e, 0xfa};
    memcpy(t, endbr64, 4);
    static const uint8_t keep_r11[5] = {0x4c, 0x89, 0x5c, 0x24, 0xf8}; /* mov %r11, -8(%rsp) */
    memcpy(t + 4, keep_r11, 5);
    t[9] = 0x41; /* mov $id, %r11d */
    t[10] = 0xbb;
    put32(t + 11, (int32_t)id);
    t[15] = 0xff; /* jmp *common(%rip) */
    t[16] = 0x25;
    put32(t + 17, (int32_t)(page - (tramp + 21)));
    memset(t + 21, 0xcc, PS_TRAMP_STUB - 21);
    relocate(plan, site, bias, t + PS_TRAMP_STUB, tramp + PS_TRAMP_STUB, id);
    if (PS_RAW(SYS_mprotect, page, PS_TRAMP_PAGE, PROT_READ | PROT_EXEC) != 0) {
        PS_RAW(SYS_munmap, page, PS_TRAMP_PAGE);
        ps_probe_say(why, len, "write-failed cannot make the trampoline page executable");
        return -1;
    }
    page_set_add(page);
    d->tramp = tramp;
    d->copy = tramp + PS_TRAMP_STUB;
    return 0;
}

uintptr_t ps_patch_original_pc(uintptr_t pc)
{
    uintptr_t page = pc & ~(uintptr_t)(PS_TRAMP_PAGE - 1);
    if (!page_set_has(page)) return 0;
    uint32_t id;
    memcpy(&id, (const void *)(page + 8), 4);
    const ps_patch_t *d = &ps_patches[id];
    uintptr_t off = pc - (page + PS_TRAMP_SLOT);
    if (id == 0 || id >= PS_PROBE_MAX || off >= PS_TRAMP_BYTES) return 0;
    if (off < PS_TRAMP_STUB) return d->site;
    off -= PS_TRAMP_STUB;
    int n = insn_map[id].n;
    for (int i = 0; i < n; i++)
        if (off < insn_map[id].new_off[i + 1]) return d->site + insn_map[id].orig_off[i];
    return d->site + insn_map[id].orig_off[n];
}
