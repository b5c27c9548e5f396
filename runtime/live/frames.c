/* The code modules of the live view: ids for the frames of `hot` lines (ps_live_frame) and
 * the `module` lines that name them (path and build id, for pathscope-symbolize).
 *
 * Built from the loader's list (dl_iterate_phdr) in the control thread, and rebuilt only
 * when the loader's counts of loaded and unloaded objects changed.  Ids are never reused:
 * a module keeps its id for the life of the process, so a reader may cache them; after
 * LIVE_MODULES paths, later ones have no id ("-:0xADDR").
 */
#define _GNU_SOURCE
#include <elf.h>
#include <link.h>
#include <string.h>
#include <unistd.h>

#include "live.h"

#define LIVE_MODULES 256
#define LIVE_RANGES 1024
#define LIVE_MODULE_PATH 1024

typedef struct {
    char path[LIVE_MODULE_PATH];
    char build_id[41];
} live_module_t;

typedef struct {
    uintptr_t start, end, bias;
    int module;
} live_range_t;

static live_module_t modules[LIVE_MODULES];
static int nmodules;
static live_range_t ranges[LIVE_RANGES];
static int nranges;
static unsigned long long seen_adds, seen_subs;

static int module_id(const char *path)
{
    for (int i = 0; i < nmodules; i++)
        if (strcmp(modules[i].path, path) == 0) return i;
    if (nmodules == LIVE_MODULES) return -1;
    size_t n = strlen(path);
    if (n >= LIVE_MODULE_PATH) n = LIVE_MODULE_PATH - 1;
    memcpy(modules[nmodules].path, path, n);
    modules[nmodules].path[n] = 0;
    modules[nmodules].build_id[0] = 0;
    return nmodules++;
}

/* The GNU build id in the notes of a loaded object (mapped: the loader holds it). */
static void read_build_id(const struct dl_phdr_info *info, char out[41])
{
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE) continue;
        const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr), *end = p + ph->p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
            const char *name = p + sizeof *nh;
            const unsigned char *desc = (const unsigned char *)name + ((nh->n_namesz + 3) & ~3u);
            const char *next = (const char *)desc + ((nh->n_descsz + 3) & ~3u);
            if (next > end || next <= p) break;
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && nh->n_descsz <= 20 &&
                memcmp(name, "GNU", 4) == 0) {
                for (unsigned j = 0; j < nh->n_descsz; j++) {
                    out[2 * j] = hex[desc[j] >> 4];
                    out[2 * j + 1] = hex[desc[j] & 15];
                }
                out[2 * nh->n_descsz] = 0;
                return;
            }
            p = next;
        }
    }
}

static int add_object(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    (void)data;
    static char exe[LIVE_MODULE_PATH];
    const char *path = info->dlpi_name;
    if (!path[0]) { /* the program itself */
        if (!exe[0]) {
            ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
            exe[n > 0 ? n : 0] = 0;
        }
        path = exe;
    }
    int id = -1;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X) || nranges == LIVE_RANGES) continue;
        if (id < 0 && (id = module_id(path)) < 0) return 0;
        if (!modules[id].build_id[0]) read_build_id(info, modules[id].build_id);
        live_range_t *r = &ranges[nranges++];
        r->start = info->dlpi_addr + ph->p_vaddr;
        r->end = r->start + ph->p_memsz;
        r->bias = info->dlpi_addr;
        r->module = id;
    }
    return 0;
}

static int read_counts(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)data;
    if (size < offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) return 1;
    seen_adds = info->dlpi_adds;
    seen_subs = info->dlpi_subs;
    return 1; /* the counts are the same in every entry: the first is enough */
}

static void sort_ranges(void)
{
    for (int i = 1; i < nranges; i++) {
        live_range_t r = ranges[i];
        int j = i;
        for (; j > 0 && ranges[j - 1].start > r.start; j--) ranges[j] = ranges[j - 1];
        ranges[j] = r;
    }
}

/* Once per publish, before any frame is written. */
void ps_live_modules_refresh(void)
{
    unsigned long long adds = seen_adds, subs = seen_subs;
    dl_iterate_phdr(read_counts, NULL);
    if (nranges && adds == seen_adds && subs == seen_subs) return;
    nranges = 0;
    dl_iterate_phdr(add_object, NULL);
    sort_ranges();
}

void ps_live_modules_write(ps_fmt_t *f)
{
    for (int i = 0; i < nmodules; i++) {
        ps_fmt_str(f, "module\t");
        ps_fmt_u64(f, (uint64_t)i); ps_fmt_tab(f);
        ps_fmt_tsv(f, modules[i].path); ps_fmt_tab(f);
        ps_fmt_str(f, modules[i].build_id[0] ? modules[i].build_id : "-"); ps_fmt_char(f, '\n');
    }
}

static void hex(ps_fmt_t *f, uintptr_t v)
{
    static const char digits[] = "0123456789abcdef";
    char tmp[20];
    int n = 0;
    do { tmp[n++] = digits[v & 15]; v >>= 4; } while (v);
    ps_fmt_str(f, "0x");
    while (n) ps_fmt_char(f, tmp[--n]);
}

void ps_live_frame(ps_fmt_t *f, uintptr_t addr)
{
    int lo = 0, hi = nranges;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (ranges[mid].end <= addr) lo = mid + 1;
        else hi = mid;
    }
    if (lo < nranges && ranges[lo].start <= addr) {
        ps_fmt_u64(f, (uint64_t)ranges[lo].module); ps_fmt_char(f, ':');
        hex(f, addr - ranges[lo].bias);
    } else {
        ps_fmt_str(f, "-:");
        hex(f, addr);
    }
}
