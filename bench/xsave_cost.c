/* What saving and restoring the FPU/vector state costs here, by instruction (docs/benchmarks.md
 * section M: the exit thunk of a probed call saves it all with xsave/xrstor).
 *
 *   xsave_cost
 *
 * Prints ns per save+restore pair, the best of 15 timed loops of 200,000 pairs each, for
 * fxsave/fxrstor, and xsave/xsaveopt/xsavec with xrstor under the all-ones mask (every state
 * component XCR0 enables, as the thunk asks) and under narrower masks; each pair runs once
 * with the AVX-512 state in its initial form and once after a 512-bit register was written
 * (as it is in a probed program: the entry stub restores zmm0-7), since the processor may skip
 * components in their initial state.  Then a legacy-SSE (non-VEX) instruction, as pathscope's
 * C code has, with and without a vzeroupper first.  Also the size of the save area XCR0 asks for (CPUID
 * leaf 0xd) and a pair of rdtsc reads for scale.  Built with -mavx512f; needs an AVX-512
 * processor with XSAVEC. */
#include <cpuid.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#define PAIRS 200000
#define TRIES 15

static char area[16384] __attribute__((aligned(64)));
static char zmm_data[64] __attribute__((aligned(64)));

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* makes the upper halves of the vector state "in use" (not initial) before each pair */
static inline void dirty_zmm(int dirty)
{
    if (dirty) __asm__ volatile("vmovdqa64 %0, %%zmm1" ::"m"(zmm_data) : "xmm1");
}

#define MEASURE(label, save, restore)                                                          \
    for (int dirty = 0; dirty < 2; dirty++) {                                                  \
        double best = 1e18;                                                                    \
        for (int t = 0; t < TRIES; t++) {                                                      \
            double t0 = now_ns();                                                              \
            for (int i = 0; i < PAIRS; i++) {                                                  \
                dirty_zmm(dirty);                                                              \
                save;                                                                          \
                restore;                                                                       \
            }                                                                                  \
            double ns = (now_ns() - t0) / PAIRS;                                               \
            if (ns < best) best = ns;                                                          \
        }                                                                                      \
        printf("%-44s %-14s %7.1f ns\n", label, dirty ? "zmm in use" : "zmm initial", best); \
    }

/* one save and the restore, under the mask hi:lo */
#define XPAIR(insn, lo, hi)                                                                    \
    __asm__ volatile(insn " %0\n\txrstor %0" ::"m"(area), "a"(lo), "d"(hi) : "memory")

int main(void)
{
    unsigned a, b, c, d;
    __cpuid_count(0xd, 0, a, b, c, d);
    printf("XCR0 low word %#x: save area %u bytes\n", a, b);
    const uint32_t all = 0xffffffffu, avx512 = 0xe7, avx = 0x7;
    MEASURE("fxsave + fxrstor (x87, SSE: 512 B)", __asm__ volatile("fxsave %0" ::"m"(area) : "memory"),
            __asm__ volatile("fxrstor %0" ::"m"(area) : "memory"));
    MEASURE("xsave + xrstor, all components (the thunk)", XPAIR("xsave", all, all), (void)0);
    MEASURE("xsaveopt + xrstor, all components", XPAIR("xsaveopt", all, all), (void)0);
    MEASURE("xsavec + xrstor, all components", XPAIR("xsavec", all, all), (void)0);
    MEASURE("xsave + xrstor, x87 SSE AVX AVX-512", XPAIR("xsave", avx512, 0u), (void)0);
    MEASURE("xsave + xrstor, x87 SSE AVX", XPAIR("xsave", avx, 0u), (void)0);
    /* pathscope's C code is built for baseline x86-64: its SSE instructions are legacy
     * (non-VEX) encodings, which may pay a transition when the upper state is in use */
    MEASURE("legacy SSE movq to xmm0, back with VEX", __asm__ volatile("movq %%rax, %%xmm0" ::: "xmm0"),
            __asm__ volatile("vmovq %%xmm0, %%rax" ::: "rax"));
    MEASURE("the same after vzeroupper", __asm__ volatile("vzeroupper\n\tmovq %%rax, %%xmm0" ::: "xmm0"),
            __asm__ volatile("vmovq %%xmm0, %%rax" ::: "rax"));
    MEASURE("rdtsc twice", __asm__ volatile("rdtsc" ::: "rax", "rdx"),
            __asm__ volatile("rdtsc" ::: "rax", "rdx"));
    return 0;
}
