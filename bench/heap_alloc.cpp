// Allocation-heavy mock simulation code for the heap-profiling benchmark (bench/heap.py).
//
//   heap_alloc [SCALE [WORK]]   (defaults 1300 and 2: about 1.4 s and 8.0e6 allocations,
//                                5.7e6 allocations per second uninstrumented on 2 cores)
//
// WORK: units of computation per allocation (see work(); 0: allocation and data filling only,
// about 9e6 allocations per second).
//
// Build: g++ -std=c++17 -O2 -g -Wall (no frame pointers).  The binary knows nothing about any
// profiler.  It runs SCALE outer iterations ("time steps"); every step runs the 11 leaf kernels
// below once each, in an order and at call depths drawn from a fixed-seed generator, so every
// run makes exactly the same allocations.  A kernel is called at depth D (20..40): main is
// frame 1, run_phase frame 2, descend<0..D-4> frames 3..D-1, the kernel frame D, and the
// allocation function (malloc, operator new, ...) is called from frame D or from inlined
// container code in it.  Every descend<N> is a distinct noinline function that keeps its frame
// (an empty asm after the call: no tail call), so the frames are real and the call paths differ
// by depth.  A kernel makes a burst of hundreds to thousands of allocations from one or two
// sites, then the next kernel runs elsewhere: call paths change slowly, the way a real code
// assembles, refines, moves particles, exchanges halos, one phase after the other.
//
// Allocation sites (each a separate kernel):
//   assemble_rows    std::vector<double> growth by push_back (new/delete, realloc-like doubling)
//   refine_octree    new OctNode: an AMR tree kept live across steps, coarsened every 8 steps
//   index_cells      std::map inserts (one node per insert), cleared at the end
//   move_particles   std::list push_back / pop_front churn, kept live across steps
//   label_fields     std::string building (names longer than the small-string buffer)
//   halo_buffers     malloc of 4..64 KiB message buffers, filled, freed
//   flux_arrays      calloc of 256..4096 doubles
//   simd_blocks      posix_memalign(64) blocks of 1..16 KiB
//   hash_neighbors   std::unordered_map inserts (nodes and bucket arrays)
//   shared_patches   std::allocate_shared patches, a ring of 2048 kept live
//   checkpoint       malloc of 128 KiB snapshot buffers, a ring of 64 kept live (the heap peak),
//                    grown once with realloc; every 16th step leaks one 40-byte record
//
// Output (stdout), one line:
//   heap_alloc: seconds=S allocations=N reallocs=R leaked=L leaked_bytes=B
//               retained_peak_bytes=P rate=A checksum=C
// seconds: wall time of the main phase (all steps and the final clean-up), CLOCK_MONOTONIC.
// allocations: exact number of allocation calls the main phase made: malloc, calloc,
//   posix_memalign and operator new calls (every container uses a counting allocator that
//   forwards to ::operator new, and every explicit call site counts itself).  realloc calls
//   are counted apart (reallocs=).  Allocations made outside the main phase (the C++ and C
//   runtimes' own start-up, stdio buffers) are not included, so a heap profiler that records
//   every allocation of the process must record at least N.
// leaked / leaked_bytes: blocks deliberately never freed (requested sizes).
// retained_peak_bytes: peak of the requested bytes held by the long-lived structures
//   (octree, particles, patches, checkpoints), not counting allocator overhead or the
//   short-lived buffers.
// rate: allocations / seconds.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

unsigned long long g_allocs;    // allocation calls (exact, see above)
unsigned long long g_reallocs;  // realloc calls
unsigned long long g_leaked, g_leaked_bytes;
long long g_retained, g_retained_peak;  // requested bytes of the long-lived structures
std::uint64_t g_checksum;
char *volatile g_leak_sink;

// Computation between allocations: WORK units per allocation, one unit a 3-point smoothing
// sweep over 16 doubles of a 4 KiB field (stays in L1).  0: allocation and data filling only.
int g_work = 2;
double g_field[512];
unsigned g_field_pos;

inline void work()
{
    for (int u = 0; u < g_work; u++) {
        unsigned base = (g_field_pos += 16) % 480 + 8;
        double *f = g_field + base;
        for (int i = 0; i < 16; i++) f[i] = 0.25 * f[i - 1] + 0.5 * f[i] + 0.25 * f[i + 1] + 1e-3;
    }
}

// Called at every allocation call the program makes (just before it).
inline void count_alloc()
{
    ++g_allocs;
    work();
}

void retain(long long bytes)
{
    g_retained += bytes;
    if (g_retained > g_retained_peak) g_retained_peak = g_retained;
}

// Every container allocation goes through ::operator new, as with std::allocator, and counts.
template <class T> struct Counted {
    using value_type = T;
    Counted() noexcept = default;
    template <class U> Counted(const Counted<U> &) noexcept {}
    T *allocate(std::size_t n)
    {
        count_alloc();
        return static_cast<T *>(::operator new(n * sizeof(T)));
    }
    void deallocate(T *p, std::size_t) noexcept { ::operator delete(p); }
};
template <class T, class U> bool operator==(const Counted<T> &, const Counted<U> &) { return true; }
template <class T, class U> bool operator!=(const Counted<T> &, const Counted<U> &) { return false; }

using String = std::basic_string<char, std::char_traits<char>, Counted<char>>;

// A small deterministic generator (xorshift64*), so every run allocates the same way.
struct Rng {
    std::uint64_t s;
    std::uint64_t next()
    {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        return s * 2685821657736338717ULL;
    }
    int range(int lo, int hi) { return lo + (int)(next() % (std::uint64_t)(hi - lo + 1)); }
};

void *checked(void *p)
{
    if (!p) {
        std::fprintf(stderr, "heap_alloc: out of memory\n");
        std::exit(1);
    }
    return p;
}

// ---- long-lived state ------------------------------------------------------------------------

struct OctNode {
    OctNode *child[8];
    double value[4];
    int level;
};

struct Particle {
    double x[3], v[3];
    int cell;
};

// a list node: the particle and two links (requested size in libstdc++)
constexpr long long LIST_NODE_BYTES = sizeof(Particle) + 2 * sizeof(void *);

struct Patch {
    double corner[3];
    double h;
    int id, level;
};

constexpr int PATCH_RING = 2048;
constexpr int CHECKPOINT_RING = 64;
constexpr std::size_t CHECKPOINT_BYTES = 128 * 1024;

struct State {
    Rng rng{0x9e3779b97f4a7c15ULL};
    int step = 0;
    std::vector<OctNode *> octree;  // all live nodes (the vector itself is not counted)
    std::list<Particle, Counted<Particle>> particles;
    std::vector<std::shared_ptr<Patch>> patches = std::vector<std::shared_ptr<Patch>>(PATCH_RING);
    int patch_next = 0;
    char *checkpoints[CHECKPOINT_RING] = {};
    std::size_t checkpoint_size[CHECKPOINT_RING] = {};
    int checkpoint_next = 0;
};

// ---- leaf kernels: each one is an allocation site ----------------------------------------

__attribute__((noinline)) void assemble_rows(State &st)
{
    // sparse matrix assembly: one vector per row, grown element by element
    double sum = 0;
    for (int r = 0; r < 48; r++) {
        std::vector<double, Counted<double>> row;
        int n = st.rng.range(16, 600);
        for (int i = 0; i < n; i++) row.push_back(0.5 * i + r);
        sum += row[n / 2] + (double)row.size();
    }
    g_checksum += (std::uint64_t)sum;
}

__attribute__((noinline)) void refine_octree(State &st)
{
    // AMR: refine random leaves (8 children each); coarsen everything every 8 steps
    if (st.step % 8 == 7) {
        for (OctNode *n : st.octree) {
            g_checksum += (std::uint64_t)n->level;
            delete n;
        }
        retain(-(long long)(st.octree.size() * sizeof(OctNode)));
        st.octree.clear();
    }
    if (st.octree.empty()) {
        count_alloc();
        st.octree.push_back(new OctNode{{}, {1, 0, 0, 0}, 0});
        retain(sizeof(OctNode));
    }
    for (int k = 0; k < 160; k++) {
        OctNode *parent = st.octree[st.rng.next() % st.octree.size()];
        if (parent->child[0] || parent->level >= 12) continue;
        for (int c = 0; c < 8; c++) {
            count_alloc();
            OctNode *n = new OctNode{{}, {parent->value[0] / 8, (double)c, 0, 0}, parent->level + 1};
            parent->child[c] = n;
            st.octree.push_back(n);
        }
        retain(8 * (long long)sizeof(OctNode));
    }
}

__attribute__((noinline)) void index_cells(State &st)
{
    // global-to-local cell index: a std::map built, queried and dropped
    std::map<int, int, std::less<int>, Counted<std::pair<const int, int>>> index;
    int n = st.rng.range(400, 1200);
    for (int i = 0; i < n; i++) index.emplace((int)(st.rng.next() % 100000), i);
    long hits = 0;
    for (int i = 0; i < 256; i++) hits += index.count((int)(st.rng.next() % 100000));
    g_checksum += (std::uint64_t)(hits + (long)index.size());
}

__attribute__((noinline)) void move_particles(State &st)
{
    // particles leave (pop_front) and arrive (push_back); the population drifts around 20000
    int leave = st.rng.range(400, 1200);
    for (int i = 0; i < leave && !st.particles.empty(); i++) {
        g_checksum += (std::uint64_t)st.particles.front().cell;
        st.particles.pop_front();
        retain(-LIST_NODE_BYTES);
    }
    int arrive = st.particles.size() < 20000 ? st.rng.range(800, 1600) : st.rng.range(200, 900);
    for (int i = 0; i < arrive; i++) {
        double r = (double)(st.rng.next() % 1000) * 1e-3;
        st.particles.push_back(Particle{{r, 1 - r, 0.5}, {0, r, -r}, (int)(st.rng.next() % 4096)});
        retain(LIST_NODE_BYTES);
    }
}

__attribute__((noinline)) void label_fields(State &st)
{
    // output variable names, log lines: strings longer than the small-string buffer
    std::size_t total = 0;
    for (int i = 0; i < 300; i++) {
        String name("velocity_component_");
        name += std::to_string(i % 3).c_str();
        name += "_on_refinement_level_";
        name += std::to_string(st.step).c_str();
        String line = name + " = " + std::to_string((int)(st.rng.next() % 1000)).c_str();
        total += line.size() + (unsigned char)line[line.size() / 2];
    }
    g_checksum += total;
}

__attribute__((noinline)) void halo_buffers(State &st)
{
    // pack / unpack buffers for a halo exchange with 26 neighbours, a few rounds
    std::uint64_t sum = 0;
    for (int round = 0; round < 8; round++) {
        char *buf[26];
        for (int n = 0; n < 26; n++) {
            std::size_t size = (std::size_t)st.rng.range(4, 64) * 1024;
            count_alloc();
            buf[n] = static_cast<char *>(checked(std::malloc(size)));
            std::memset(buf[n], n, 256);
            buf[n][size - 1] = (char)round;
            sum += (unsigned char)buf[n][size - 1];
        }
        for (int n = 0; n < 26; n++) std::free(buf[n]);
    }
    g_checksum += sum;
}

__attribute__((noinline)) void flux_arrays(State &st)
{
    double sum = 0;
    for (int f = 0; f < 120; f++) {
        std::size_t n = (std::size_t)st.rng.range(256, 4096);
        count_alloc();
        double *flux = static_cast<double *>(checked(std::calloc(n, sizeof(double))));
        for (std::size_t i = 0; i < n; i += 64) flux[i] += 0.25 * (double)i;
        sum += flux[n / 2] + flux[0];
        std::free(flux);
    }
    g_checksum += (std::uint64_t)sum;
}

__attribute__((noinline)) void simd_blocks(State &st)
{
    double sum = 0;
    for (int b = 0; b < 160; b++) {
        std::size_t bytes = (std::size_t)st.rng.range(1, 16) * 1024;
        void *p = nullptr;
        count_alloc();
        if (posix_memalign(&p, 64, bytes) != 0) checked(nullptr);
        double *d = static_cast<double *>(p);
        for (std::size_t i = 0; i < 8; i++) d[i] = (double)(b + i);
        sum += d[3];
        std::free(p);
    }
    g_checksum += (std::uint64_t)sum;
}

__attribute__((noinline)) void hash_neighbors(State &st)
{
    std::unordered_map<int, int, std::hash<int>, std::equal_to<int>,
                       Counted<std::pair<const int, int>>>
        neighbors;
    int n = st.rng.range(300, 900);
    for (int i = 0; i < n; i++) neighbors[(int)(st.rng.next() % 50000)] += i;
    long s = 0;
    for (auto &kv : neighbors) s += kv.second;
    g_checksum += (std::uint64_t)s;
}

__attribute__((noinline)) void shared_patches(State &st)
{
    // patch descriptors shared between the mesh and the solvers; a ring keeps the last 2048
    for (int i = 0; i < 400; i++) {
        double h = 1.0 / (1 + st.rng.next() % 64);
        auto p = std::allocate_shared<Patch>(Counted<Patch>(), Patch{{h, 2 * h, 3 * h}, h, i, 0});
        auto &slot = st.patches[st.patch_next];
        st.patch_next = (st.patch_next + 1) % PATCH_RING;
        if (!slot) retain(sizeof(Patch));
        else g_checksum += (std::uint64_t)slot->id;
        slot = std::move(p);
    }
}

__attribute__((noinline)) void checkpoint(State &st)
{
    // snapshots kept in a ring (the heap peak); a provenance record leaks every 16 steps
    for (int i = 0; i < 4; i++) {
        int slot = st.checkpoint_next;
        st.checkpoint_next = (slot + 1) % CHECKPOINT_RING;
        if (st.checkpoints[slot]) {
            g_checksum += (unsigned char)st.checkpoints[slot][0];
            std::free(st.checkpoints[slot]);
            retain(-(long long)st.checkpoint_size[slot]);
        }
        count_alloc();
        char *p = static_cast<char *>(checked(std::malloc(CHECKPOINT_BYTES / 2)));
        std::memset(p, i + 1, CHECKPOINT_BYTES / 2);
        ++g_reallocs;  // the snapshot turned out bigger: grow it
        p = static_cast<char *>(checked(std::realloc(p, CHECKPOINT_BYTES)));
        std::memset(p + CHECKPOINT_BYTES / 2, i, CHECKPOINT_BYTES / 2);
        st.checkpoints[slot] = p;
        st.checkpoint_size[slot] = CHECKPOINT_BYTES;
        retain(CHECKPOINT_BYTES);
    }
    if (st.step % 16 == 0) {
        count_alloc();
        char *record = static_cast<char *>(checked(std::malloc(40)));
        std::snprintf(record, 40, "checkpoint %d", st.step);
        g_checksum += (unsigned char)record[11];
        ++g_leaked;
        g_leaked_bytes += 40;
        g_leak_sink = record;  // the pointer escapes, then is overwritten: leaked
    }
}

using Kernel = void (*)(State &);
constexpr Kernel KERNELS[] = {assemble_rows, refine_octree, index_cells, move_particles,
                              label_fields,  halo_buffers,  flux_arrays, simd_blocks,
                              hash_neighbors, shared_patches, checkpoint};
constexpr int NKERNELS = sizeof KERNELS / sizeof KERNELS[0];

// ---- the descent: MAXDEPTH distinct frames ---------------------------------------------------

constexpr int MINDEPTH = 20, MAXDEPTH = 40;
constexpr int LEVELS = MAXDEPTH - 3;  // descend<0..LEVELS-1>

template <int N> __attribute__((noinline)) void descend(State &st, int below, Kernel k)
{
    if constexpr (N + 1 < LEVELS) {
        if (below > 1) descend<N + 1>(st, below - 1, k);
        else k(st);
    } else {
        k(st);
    }
    __asm__ __volatile__("" ::: "memory");  // no tail call: every level keeps its frame
}

// The kernel runs at frame `depth` (main = 1, run_phase = 2).
__attribute__((noinline)) void run_phase(State &st, int depth, Kernel k)
{
    descend<0>(st, depth - 3, k);
    __asm__ __volatile__("" ::: "memory");
}

double now()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

}  // namespace

int main(int argc, char **argv)
{
    long scale = argc > 1 ? std::atol(argv[1]) : 1300;
    g_work = argc > 2 ? std::atoi(argv[2]) : 2;
    if (scale < 1 || g_work < 0) {
        std::fprintf(stderr, "usage: heap_alloc [SCALE >= 1 [WORK >= 0]]\n");
        return 2;
    }
    State st;
    double t0 = now();
    for (st.step = 0; st.step < scale; st.step++) {
        int order[NKERNELS];
        for (int i = 0; i < NKERNELS; i++) order[i] = i;
        for (int i = NKERNELS - 1; i > 0; i--) std::swap(order[i], order[st.rng.next() % (i + 1)]);
        for (int i = 0; i < NKERNELS; i++)
            run_phase(st, st.rng.range(MINDEPTH, MAXDEPTH), KERNELS[order[i]]);
    }
    // clean-up of the long-lived state is part of the main phase
    for (OctNode *n : st.octree) delete n;
    st.octree.clear();
    st.particles.clear();
    for (auto &p : st.patches) p.reset();
    for (char *&c : st.checkpoints) {
        std::free(c);
        c = nullptr;
    }
    double seconds = now() - t0;
    for (double f : g_field) g_checksum += (std::uint64_t)f;
    std::printf("heap_alloc: seconds=%.6f allocations=%llu reallocs=%llu leaked=%llu "
                "leaked_bytes=%llu retained_peak_bytes=%lld rate=%.0f checksum=%llu\n",
                seconds, g_allocs, g_reallocs, g_leaked, g_leaked_bytes, g_retained_peak,
                (double)g_allocs / seconds, (unsigned long long)g_checksum);
    return 0;
}
