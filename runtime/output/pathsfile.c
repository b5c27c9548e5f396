/* The call-path part of the rank file (docs/format.md, "Call paths"): modules, threads and
 * tree nodes; every source adds its own lines through its descriptor (core/source.h): after
 * counter_tree_full (PS_SEC_HEAD: sampler, unwind groups), after the modules (PS_SEC_RANK:
 * traversal, heap, kernel) and after each thread's nodes (PS_SEC_THREAD: walks, hnode, pcomm).
 *
 * Called from ps_write_rank_body(), which may run in a fatal-signal handler: everything
 * here is async-signal-safe -- /proc/self/maps is read with open/read into static storage,
 * ELF headers and build-id notes are read from the loaded images in memory, no malloc. */
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <string.h>
#include <unistd.h>

#include "../core/cct.h"
#include "../core/procmaps.h"
#include "../core/source.h"

extern int ps_paths_on; /* call paths active in this process (sample/sample.c) */

#define MAX_MAPPINGS 2048
#define MAX_MODULES 4096

typedef struct {
    uintptr_t start, end;
    int module;
} mapping_t;

typedef struct {
    const char *path; /* into maps_text */
    uintptr_t base;   /* lowest mapped address of the file */
    uintptr_t bias;   /* load bias: runtime address - ELF virtual address */
    char build_id[41];
    int executable;   /* has an executable mapping: written */
    int readable;     /* its lowest mapping is readable (the ELF header) */
} module_t;

static char maps_text[1 << 23]; /* 8 MiB: virtual until touched */
static mapping_t mappings[MAX_MAPPINGS];
static module_t modules[MAX_MODULES];
static int nmappings, nmodules;

/* Bias and build id of an image loaded at base (its ELF header is mapped there). */
static void read_image(module_t *m, int readable)
{
    m->bias = 0;
    m->build_id[0] = 0;
    static ps_elf_image_t img; /* copies (ps_peek): another thread may unmap the image meanwhile */
    static char notes[1024];
    if (!readable || !ps_elf_image(m->base, &img)) return;
    m->bias = img.bias;
    for (int i = 0; i < img.phnum; i++) {
        if (img.ph[i].p_type != PT_NOTE) continue;
        size_t size = img.ph[i].p_memsz < sizeof notes ? img.ph[i].p_memsz : sizeof notes;
        if (!ps_peek(notes, m->bias + img.ph[i].p_vaddr, size)) continue;
        const char *p = notes, *end = notes + size;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
            const char *name = p + sizeof *nh;
            const unsigned char *desc = (const unsigned char *)name + ((nh->n_namesz + 3) & ~3u);
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && nh->n_descsz <= 20 &&
                (const char *)desc + nh->n_descsz <= end && memcmp(name, "GNU", 4) == 0) {
                static const char hex[] = "0123456789abcdef";
                for (unsigned j = 0; j < nh->n_descsz; j++) {
                    m->build_id[2 * j] = hex[desc[j] >> 4];
                    m->build_id[2 * j + 1] = hex[desc[j] & 15];
                }
                m->build_id[2 * nh->n_descsz] = 0;
                return;
            }
            if (nh->n_namesz > size || nh->n_descsz > size) break;
            p = (const char *)desc + ((nh->n_descsz + 3) & ~3u);
        }
    }
}

/* Once per process: a second write (heap profiling rewrites the file at exit) keeps the
 * modules of the first, which include those the MPI library unloads in MPI_Finalize. */
static void load_mappings(void)
{
    static int loaded;
    if (loaded) return;
    loaded = 1;
    nmappings = nmodules = 0;
    ps_ownfd_t maps;
    if (ps_maps_open(&maps) < 0) return;
    size_t len = 0;
    for (;;) {
        long r = ps_maps_read(&maps, maps_text + len, sizeof maps_text - 1 - len);
        if (r <= 0) break;
        len += (size_t)r;
    }
    ps_fd_release(&maps);
    maps_text[len] = 0;
    /* first pass: one module per path, at its lowest mapping */
    for (char *line = maps_text; *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        ps_maps_line_t ml;
        const char *path = ps_maps_parse_line(line, &ml) ? ml.path : NULL;
        uintptr_t start = ml.start, end = ml.end;
        if (path) {
            int id = -1;
            for (int i = 0; i < nmodules; i++)
                if (strcmp(modules[i].path, path) == 0) { id = i; break; }
            if (id < 0 && nmodules < MAX_MODULES) {
                id = nmodules++;
                modules[id].path = path;
                modules[id].base = start;
                modules[id].executable = 0;
                modules[id].readable = ml.readable;
                modules[id].bias = 0;
                modules[id].build_id[0] = 0;
            }
            if (id >= 0 && ml.executable && nmappings < MAX_MAPPINGS) {
                mappings[nmappings].start = start;
                mappings[nmappings].end = end;
                mappings[nmappings].module = id;
                nmappings++;
                /* only code files: never touch device or data mappings (GPU, InfiniBand) */
                if (!modules[id].executable) read_image(&modules[id], modules[id].readable);
                modules[id].executable = 1;
            }
        }
        if (!nl) break;
        line = nl + 1;
    }
}

static int module_of(uintptr_t addr)
{
    int lo = 0, hi = nmappings;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (mappings[mid].end <= addr) lo = mid + 1;
        else hi = mid;
    }
    return lo < nmappings && mappings[lo].start <= addr ? mappings[lo].module : -1;
}

int ps_paths_module_of(uintptr_t addr) { return module_of(addr); }

/* Core's node kinds; the others are named by the source that adds them (its kinds table). */
static const char *const core_kind_names[] = {
    [PS_NODE_ROOT] = "root", [PS_NODE_CALL] = "call", [PS_NODE_FN] = "fn", [PS_NODE_PC] = "pc",
    [PS_NODE_FAILED] = "failed", [PS_NODE_NOT_UNWOUND] = "not_unwound"};
#define N_CORE_KINDS (sizeof core_kind_names / sizeof *core_kind_names)

static int nthreads_written; /* ps_write_nthreads() */

int ps_write_nthreads(void) { return nthreads_written; }

static void write_thread(ps_fmt_t *f, ps_thread_t *t)
{
    ps_fmt_str(f, "thread\t");
    ps_fmt_u64(f, (uint64_t)t->index); ps_fmt_tab(f);
    ps_fmt_u64(f, (uint64_t)t->tid); ps_fmt_tab(f);
    ps_fmt_u64(f, ps_ticks_to_ns(t->end_ticks - t->start_ticks)); ps_fmt_tab(f);
    ps_thread_cols_t cols = {0};
    for (int s = 0; s < PS_NSOURCES; s++)
        if (ps_sources[s]->thread_cols) ps_sources[s]->thread_cols(t, &cols);
    ps_fmt_u64(f, cols.samples_kept); ps_fmt_tab(f);
    ps_fmt_u64(f, cols.samples_in_mpi); ps_fmt_tab(f);
    ps_fmt_u64(f, cols.samples_other); ps_fmt_tab(f);
    ps_fmt_u64(f, t->unwind_failures); ps_fmt_tab(f);
    ps_fmt_u64(f, t->nnodes); ps_fmt_tab(f);
    if (t->start_routine) {
        int m = module_of(t->start_routine);
        if (m >= 0) {
            ps_fmt_u64(f, (uint64_t)m); ps_fmt_tab(f);
            ps_fmt_hex(f, t->start_routine - modules[m].bias);
        } else {
            ps_fmt_str(f, "-\t");
            ps_fmt_hex(f, t->start_routine);
        }
    } else {
        ps_fmt_str(f, "-\t-");
    }
    ps_fmt_tab(f);
    ps_fmt_u64(f, cols.walk_reused); ps_fmt_tab(f);
    ps_fmt_u64(f, t->end_cpu_ns > t->start_cpu_ns ? t->end_cpu_ns - t->start_cpu_ns : 0);
    ps_fmt_char(f, '\n');
    for (uint32_t id = 0; id < t->nnodes; id++) {
        ps_node_t *n = &t->nodes[id];
        ps_fmt_str(f, "node\t");
        ps_fmt_u64(f, (uint64_t)t->index); ps_fmt_tab(f);
        ps_fmt_u64(f, id); ps_fmt_tab(f);
        if (id) ps_fmt_u64(f, n->parent);
        else ps_fmt_char(f, '-');
        ps_fmt_tab(f);
        const ps_node_kind_t *sk = ps_node_kind_of((int)n->kind);
        const char *kind_name = sk ? sk->name : n->kind < N_CORE_KINDS ? core_kind_names[n->kind] : NULL;
        ps_fmt_str(f, kind_name ? kind_name : "root"); ps_fmt_tab(f);
        if (n->kind == PS_NODE_CALL || n->kind == PS_NODE_FN || n->kind == PS_NODE_PC) {
            int m = module_of(n->key);
            if (m >= 0) {
                ps_fmt_u64(f, (uint64_t)m); ps_fmt_tab(f);
                ps_fmt_hex(f, n->key - modules[m].bias);
            } else {
                ps_fmt_str(f, "-\t");
                ps_fmt_hex(f, n->key);
            }
        } else if (sk && sk->key_name) {
            char name[24];
            ps_fmt_str(f, "-\t");
            ps_fmt_str(f, sk->key_name(n->key, name));
        } else {
            ps_fmt_str(f, "-\t-");
        }
        ps_fmt_tab(f);
        ps_fmt_u64(f, n->visits); ps_fmt_tab(f);
        /* the closing scales (core/timeline.c: ps_thread_close): one rounding for the node's time */
        double on_scale = t->end_ticks ? t->time.oncpu_scale : 1.0, off_scale = t->end_ticks ? t->time.offcpu_scale : 1.0;
        double off = (double)n->offcpu_ticks * off_scale;
        uint64_t sampled = (uint64_t)((double)n->sample_ticks * on_scale + off + 0.5);
        uint64_t sample_ns = ps_ticks_to_ns(sampled), offcpu_ns = ps_ticks_to_ns((uint64_t)(off + 0.5));
        ps_fmt_u64(f, sample_ns); ps_fmt_tab(f);
        ps_fmt_u64(f, n->samples); ps_fmt_tab(f);
        double mpi_scale = t->end_ticks ? t->time.mpi_scale : 1.0;
        ps_fmt_u64(f, ps_ticks_to_ns((uint64_t)((double)n->mpi_ticks * mpi_scale + 0.5))); ps_fmt_tab(f);
        ps_fmt_u64(f, n->bytes); ps_fmt_tab(f);
        ps_fmt_u64(f, n->entries); ps_fmt_tab(f);
        ps_fmt_u64(f, sk && sk->time_ns ? sk->time_ns(n) : 0); ps_fmt_tab(f);
        ps_fmt_u64(f, offcpu_ns < sample_ns ? offcpu_ns : sample_ns); ps_fmt_char(f, '\n');
    }
    ps_sources_write(f, PS_SEC_THREAD, t);
}

void ps_write_paths(ps_fmt_t *f)
{
    if (!ps_paths_on) return;
    ps_threads_freeze(); /* samplers keep running (stopped at normal ends only): frozen trees
                          * make their samples no-ops, and stopping a POSIX timer may free() */
    uint64_t now = ps_now();
    int nthreads = atomic_load(&ps_nthreads);
    nthreads_written = nthreads;
    uint64_t full = 0, beyond = 0;
    ps_sources_write(f, PS_SEC_FROZEN, NULL); /* (mpi: the counted calls) */
    for (int i = 0; i < nthreads; i++)
        if (ps_threads[i]) {
            ps_thread_close(ps_threads[i], now);
            full += ps_threads[i]->tree_full;
            beyond += ps_threads[i]->time.mpi_ticks_excess;
        }
    ps_fmt_str(f, "counter_tree_full\t"); ps_fmt_u64(f, full); ps_fmt_char(f, '\n');
    ps_fmt_str(f, "counter_mpi_ns_beyond_elapsed\t"); ps_fmt_u64(f, ps_ticks_to_ns(beyond));
    ps_fmt_char(f, '\n');
    ps_sources_write(f, PS_SEC_HEAD, NULL);
    load_mappings();
    for (int m = 0; m < nmodules; m++) {
        if (!modules[m].executable) continue;
        ps_fmt_str(f, "module\t");
        ps_fmt_u64(f, (uint64_t)m); ps_fmt_tab(f);
        ps_fmt_tsv(f, modules[m].path); ps_fmt_tab(f);
        ps_fmt_str(f, modules[m].build_id[0] ? modules[m].build_id : "-");
        ps_fmt_char(f, '\n');
    }
    ps_sources_write(f, PS_SEC_RANK, NULL);
    for (int i = 0; i < nthreads; i++)
        if (ps_threads[i]) write_thread(f, ps_threads[i]);
}
