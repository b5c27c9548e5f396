/* Unit tests of the probe patcher (runtime/probe: plan.c, tramp.c, enter.S, patch.c) on
 * functions written here in assembly, one per prologue kind the resolver plans for: push/mov,
 * endbr64 (site 4), RIP-relative mov/lea, jcc8 and jmp8 leaving the patch (widened), a call
 * rel32 as the last displaced instruction, vector arguments.  Each is probed with a counting
 * hook that clobbers what C code may clobber: the call counts are exact, the results are the
 * unprobed ones, removal puts back the exact bytes.  Then the same with a second thread (the
 * live protocol), the refusals with their texts, and 8 threads calling a function while the
 * main thread adds and removes its probe 1,000 times.
 *
 * The plans are written here by hand, with this file's addresses (bias 0).  In this test
 * pathscope's "own code" is the test program itself only once the unwinder is initialised,
 * which the environment keeps off (PATHSCOPE_PATHS=off) until test_own_code.
 */
#define _GNU_SOURCE
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "probe.h"
#include "patch_internal.h"
#include "unwind.h"

/* ---- the probed functions ---------------------------------------------------------------- */
__asm__(".text\n"
        ".p2align 4\n"
        ".globl f_push\n"
        "f_push:\n" /* rdi+rsi+rdx+rcx+r8+r9 + (rsp & 15 after the push: 0) */
        "  push %rbp\n"
        "  mov %rsp, %rbp\n"
        "  lea (%rdi,%rsi), %rax\n"
        "  add %rdx, %rax\n"
        "  add %rcx, %rax\n"
        "  add %r8, %rax\n"
        "  add %r9, %rax\n"
        "  mov %rsp, %rdx\n"
        "  and $15, %edx\n"
        "  add %rdx, %rax\n"
        "  pop %rbp\n"
        "  ret\n"
        ".p2align 4\n"
        ".globl f_endbr\n"
        "f_endbr:\n" /* rdi + 1 */
        "  endbr64\n"
        "  push %rbx\n"
        "  mov %rdi, %rbx\n"
        "  lea 1(%rbx), %rax\n"
        "  pop %rbx\n"
        "  ret\n"
        ".p2align 4\n"
        ".globl f_rip\n"
        "f_rip:\n" /* rdi + 1000 + 20000 */
        "  mov f_rip_data(%rip), %rax\n"
        "  lea f_rip_data2(%rip), %rdx\n"
        "  add (%rdx), %rax\n"
        "  add %rdi, %rax\n"
        "  ret\n"
        ".p2align 4\n"
        ".globl f_rip1\n"
        "f_rip1:\n" /* rdi + 1000; one displaced instruction */
        "  mov f_rip_data(%rip), %rax\n"
        "  add %rdi, %rax\n"
        "  ret\n"
        ".p2align 4\n"
        ".globl f_jcc\n"
        ".globl f_jcc_zero\n"
        "f_jcc:\n" /* rdi ? rdi + 10 : 99 */
        "  test %rdi, %rdi\n"
        "  je f_jcc_zero\n"
        "  lea 10(%rdi), %rax\n"
        "  ret\n"
        "f_jcc_zero:\n"
        "  mov $99, %eax\n"
        "  ret\n"
        ".p2align 4\n"
        ".globl f_jmp\n"
        ".globl f_jmp_to\n"
        "f_jmp:\n" /* edi + 3 */
        "  mov %edi, %eax\n"
        "  nop\n"
        "  jmp f_jmp_to\n"
        "  int3\n"
        "f_jmp_to:\n"
        "  add $3, %eax\n"
        "  ret\n"
        ".p2align 4\n"
        ".globl f_call\n"
        ".globl f_helper\n"
        ".hidden f_helper\n"
        "f_call:\n" /* 2 rdi + 7, through f_helper, which keeps its return address */
        "  push %rbx\n"
        "  mov %rdi, %rbx\n"
        "  call f_helper\n"
        "  add %rbx, %rax\n"
        "  pop %rbx\n"
        "  ret\n"
        "f_helper:\n"
        "  mov (%rsp), %rax\n"
        "  mov %rax, f_helper_ra(%rip)\n"
        "  lea 7(%rdi), %rax\n"
        "  ret\n"
        ".p2align 4\n"
        ".globl f_dbl\n"
        "f_dbl:\n" /* xmm0 + xmm1 */
        "  push %rbp\n"
        "  mov %rsp, %rbp\n"
        "  addsd %xmm1, %xmm0\n"
        "  pop %rbp\n"
        "  ret\n"
        ".p2align 4\n"
        ".globl f_upper\n"
        "f_upper:\n" /* the upper 128 bits of ymm0 */
        "  push %rbp\n"
        "  mov %rsp, %rbp\n"
        "  vextractf128 $1, %ymm0, %xmm0\n"
        "  pop %rbp\n"
        "  ret\n"
        ".p2align 4\n"
        ".globl f_far\n"
        "f_far:\n" /* never run: calls 2 GB ahead and 2 GB back */
        "  .byte 0xe8\n"
        "  .long 0x7ffffff0\n"
        "  .byte 0xe8\n"
        "  .long -0x7ffffff0\n"
        "  ret\n"
        ".data\n"
        ".p2align 3\n"
        ".globl f_rip_data\n"
        ".globl f_rip_data2\n"
        ".globl f_helper_ra\n"
        "f_rip_data: .quad 1000\n"
        "f_rip_data2: .quad 20000\n"
        "f_helper_ra: .quad 0\n"
        ".text\n");

long f_push(long, long, long, long, long, long);
long f_endbr(long);
long f_rip(long);
long f_rip1(long);
long f_jcc(long);
int f_jmp(int);
long f_call(long);
double f_dbl(double, double);
__m128 f_upper(__m256);
void f_far(void);
extern char f_jcc_zero[], f_jmp_to[], f_helper[], f_rip_data[], f_rip_data2[];
extern uintptr_t f_helper_ra;

/* ---- the counting hook ------------------------------------------------------------------ */
static _Atomic uint64_t hook_calls;
static _Atomic uint32_t hook_last_id, hook_misaligned;
static __thread unsigned hooked_now; /* hook calls in this thread since the caller reset it */
static volatile size_t clobber_size = 4096;
static int have_avx;
__attribute__((used)) static int have_avx512; /* (read by keep_check, below) */

/* Counts, and clobbers what a C hook may: glibc's memset, the upper halves of the vector
 * registers (vzeroupper, as glibc's AVX2 string functions end), floating point, every
 * caller-saved general register. */
static void count_hook(uint32_t id, uintptr_t *slot, uintptr_t rbp)
{
    static __thread char scratch[4096];
    atomic_fetch_add(&hook_calls, 1);
    atomic_store(&hook_last_id, id);
    hooked_now++;
    if (((uintptr_t)slot & 15) != 8) atomic_fetch_add(&hook_misaligned, 1);
    memset(scratch, (int)id, clobber_size);
    if (have_avx) __asm__ volatile("vzeroupper");
    volatile double d = 3.25;
    d = d * d;
    __asm__ volatile("" ::: "rax", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11", "xmm0",
                     "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "memory");
    __asm__ volatile("xorps %%xmm8, %%xmm8\n\txorps %%xmm9, %%xmm9\n\txorps %%xmm10, %%xmm10\n\t"
                     "xorps %%xmm11, %%xmm11\n\txorps %%xmm12, %%xmm12\n\txorps %%xmm13, %%xmm13\n\t"
                     "xorps %%xmm14, %%xmm14\n\txorps %%xmm15, %%xmm15\n\tmov $-1, %%r11"
                     ::: "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "r11");
    if (have_avx512) /* (not in the clobber list: GCC does not use them without -mavx512f) */
        __asm__ volatile("vpxord %zmm16, %zmm16, %zmm16\n\tkxorq %k1, %k1, %k1");
}

/* ---- plans ------------------------------------------------------------------------------- */
/* "SITE LEN ORIG " from memory, then groups (NINSN and the groups). */
static const char *plan_text(uintptr_t fn, int site, int len, const char *groups)
{
    static char text[512];
    int n = snprintf(text, sizeof text, "%d %d ", site, len);
    for (int i = 0; i < len; i++) n += snprintf(text + n, sizeof text - n, "%02x", ((uint8_t *)fn)[site + i]);
    snprintf(text + n, sizeof text - n, " %s", groups);
    return text;
}

static int parse(uintptr_t fn, const char *text, ps_probe_plan_t *p)
{
    memset(p, 0, sizeof *p);
    p->vaddr = fn;
    p->size = 64;
    const char *err = ps_probe_plan_parse(text, p);
    if (err) fprintf(stderr, "plan for %#lx: %s\n", (unsigned long)fn, err);
    return err == NULL;
}

typedef struct {
    const char *name;
    uintptr_t fn;
    int site, len;
    char groups[256];
} probe_case_t;

static int ncases;
static probe_case_t cases[16];

static void add_case(const char *name, void *fn, int site, int len, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void add_case(const char *name, void *fn, int site, int len, const char *fmt, ...)
{
    probe_case_t *c = &cases[ncases++];
    c->name = name;
    c->fn = (uintptr_t)fn;
    c->site = site;
    c->len = len;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->groups, sizeof c->groups, fmt, ap);
    va_end(ap);
}

static void make_cases(void)
{
    const char *c3 = "3 copy 0 1 0 0x0 copy 1 3 0 0x0 copy 4 4 0 0x0";
    add_case("push/mov", (void *)f_push, 0, 8, "%s", c3);
    add_case("endbr64", (void *)f_endbr, 4, 8, "%s", c3);
    add_case("rip mov+lea", (void *)f_rip, 0, 14, "2 rip 0 7 3 0x%lx rip 7 7 3 0x%lx",
             (unsigned long)f_rip_data, (unsigned long)f_rip_data2);
    add_case("rip mov", (void *)f_rip1, 0, 7, "1 rip 0 7 3 0x%lx", (unsigned long)f_rip_data);
    add_case("jcc8", (void *)f_jcc, 0, 5, "2 copy 0 3 0 0x0 jcc8 3 2 1 0x%lx", (unsigned long)f_jcc_zero);
    add_case("jmp8", (void *)f_jmp, 0, 5, "3 copy 0 2 0 0x0 copy 2 1 0 0x0 jmp8 3 2 1 0x%lx",
             (unsigned long)f_jmp_to);
    add_case("call rel32", (void *)f_call, 0, 9, "3 copy 0 1 0 0x0 copy 1 3 0 0x0 rel32 4 5 1 0x%lx",
             (unsigned long)f_helper);
    add_case("vector args", (void *)f_dbl, 0, 8, "%s", c3);
    add_case("ymm arg", (void *)f_upper, 0, 10, "3 copy 0 1 0 0x0 copy 1 3 0 0x0 copy 4 6 0 0x0");
}

/* Calls case i's function twice, checks the results; returns the hook calls it caused. */
__attribute__((target("avx"))) static uint64_t call_case(int i)
{
    uint64_t before = atomic_load(&hook_calls);
    switch (i) {
    case 0:
        CHECK_INT(f_push(1, 2, 3, 4, 5, 6), 21);
        CHECK_INT(f_push(10, 20, 30, 40, 50, 60), 210);
        break;
    case 1:
        CHECK_INT(f_endbr(41), 42);
        CHECK_INT(f_endbr(-1), 0);
        break;
    case 2:
        CHECK_INT(f_rip(5), 21005);
        CHECK_INT(f_rip(0), 21000);
        break;
    case 3:
        CHECK_INT(f_rip1(5), 1005);
        CHECK_INT(f_rip1(-1000), 0);
        break;
    case 4:
        CHECK_INT(f_jcc(5), 15);
        CHECK_INT(f_jcc(0), 99);
        break;
    case 5:
        CHECK_INT(f_jmp(5), 8);
        CHECK_INT(f_jmp(-3), 0);
        break;
    case 6:
        CHECK_INT(f_call(5), 17);
        CHECK_INT(f_call(100), 207);
        break;
    case 7:
        CHECK(f_dbl(1.5, 2.25) == 3.75);
        CHECK(f_dbl(-8.0, 0.5) == -7.5);
        break;
    default: {
        float out[4];
        _mm_storeu_ps(out, f_upper(_mm256_set_ps(8, 7, 6, 5, 4, 3, 2, 1)));
        CHECK(out[0] == 5 && out[1] == 6 && out[2] == 7 && out[3] == 8);
        _mm_storeu_ps(out, f_upper(_mm256_set_ps(-1, -2, -3, -4, 0, 0, 0, 0)));
        CHECK(out[0] == -4 && out[1] == -3 && out[2] == -2 && out[3] == -1);
        break;
    }
    }
    return atomic_load(&hook_calls) - before;
}

/* ---- plan parsing ------------------------------------------------------------------------ */
static void check_parse_error(const char *text, const char *want)
{
    ps_probe_plan_t p;
    const char *got = ps_probe_plan_parse(text, &p);
    CHECK_STR(got ? got : "(accepted)", want);
}

static void test_plan_parse(void)
{
    ps_probe_plan_t p;
    memset(&p, 0, sizeof p);
    p.vaddr = 0x1000;
    CHECK(ps_probe_plan_parse("4 9 53e8aabbccdd4889fb 3 copy 0 1 0 0x0 rel32 1 5 1 0x1fedcba98 "
                              "copy 6 3 0 0x0", &p) == NULL);
    CHECK_INT(p.vaddr, 0x1000);
    CHECK_INT(p.site, 4);
    CHECK_INT(p.len, 9);
    CHECK_INT(p.ninsn, 3);
    CHECK_INT(p.orig[1], 0xe8);
    CHECK_INT(p.orig[8], 0xfb);
    CHECK_INT(p.insn[1].kind, PS_INSN_REL32);
    CHECK_INT(p.insn[1].off, 1);
    CHECK_INT(p.insn[1].len, 5);
    CHECK_INT(p.insn[1].field, 1);
    CHECK_INT(p.insn[1].target, 0x1fedcba98);
    CHECK_INT(p.insn[2].kind, PS_INSN_COPY);
    CHECK_INT(p.insn[2].off, 6);
    CHECK(ps_probe_plan_parse("0 5 48850f74aa 2 copy 0 3 0 0x0 jcc8 3 2 1 0xffffffffffffffff", &p) == NULL);
    CHECK_INT(p.insn[1].kind, PS_INSN_JCC8);
    CHECK(p.insn[1].target == UINT64_MAX);
    CHECK(ps_probe_plan_parse("0 7 488b0500000000 1 rip 0 7 3 0x10", &p) == NULL);
    CHECK(ps_probe_plan_parse("0 6 0f8400000000 1 rel32 0 6 2 0x10", &p) == NULL);

    check_parse_error("", "SITE: not 0 or 4");
    check_parse_error("2 5 5589e54883 1 copy 0 5 0 0x0", "SITE: not 0 or 4");
    check_parse_error("00004 5", "SITE: not 0 or 4");
    check_parse_error("0 4 5589e548 1 copy 0 4 0 0x0", "LEN: not a number from 5 to 32");
    check_parse_error("0 33 55", "LEN: not a number from 5 to 32");
    check_parse_error("0 -5 55", "LEN: not a number from 5 to 32");
    check_parse_error("0 5 5589E54883 1 copy 0 5 0 0x0", "ORIG: not LEN bytes of lowercase hex");
    check_parse_error("0 5 5589e5488 1 copy 0 5 0 0x0", "ORIG: not LEN bytes of lowercase hex");
    check_parse_error("0 5 5589e5488301 1 copy 0 5 0 0x0", "ORIG: not LEN bytes of lowercase hex");
    check_parse_error("0 5 5589e54883 0", "NINSN: not a number from 1 to 16");
    check_parse_error("0 5 5589e54883 17 copy", "NINSN: not a number from 1 to 16");
    check_parse_error("0 5 5589e54883 1 move 0 5 0 0x0", "KIND: not copy, rip, rel32, jmp8 or jcc8");
    check_parse_error("0 5 5589e54883 1 copy 256 5 0 0x0", "OFF: not a number below 256");
    check_parse_error("0 5 5589e54883 2 copy 0 1 0 0x0 copy 2 3 0 0x0",
                      "OFF: the instructions do not follow each other from 0");
    check_parse_error("0 5 5589e54883 1 copy 0 0 0 0x0", "LEN: instruction length not 1 to 15");
    check_parse_error("0 5 5589e54883 1 copy 0 16 0 0x0", "LEN: instruction length not 1 to 15");
    check_parse_error("0 5 5589e54883 1 copy 0 6 0 0x0", "LEN: an instruction goes beyond the displaced bytes");
    check_parse_error("0 5 5589e54883 1 copy 0 5 15 0x0", "FIELD: not a number below 15");
    check_parse_error("0 5 5589e54883 1 copy 0 4 0 0x0", "NINSN: the instructions do not cover LEN bytes");
    check_parse_error("0 5 5589e54883 1 copy 0 5 0 0X0",
                      "TARGET: not 0x and lowercase hex, or text after the last group");
    check_parse_error("0 5 5589e54883 1 copy 0 5 0 0x0 ", 
                      "TARGET: not 0x and lowercase hex, or text after the last group");
    check_parse_error("0 5 5589e54883 1 copy 0 5 0 0x10000000000000000",
                      "TARGET: not 0x and lowercase hex, or text after the last group");
    check_parse_error("0 5 5589e54883 2 copy 0 1 0 0xA copy 1 4 0 0x0", "TARGET: not 0x and lowercase hex");
    check_parse_error("0 5 5589e54883 1 copy 0 5 0 0x1", "copy: FIELD and TARGET must be 0");
    check_parse_error("0 7 488b0500000000 1 rip 0 7 4 0x10", "rip: FIELD+4 beyond the instruction, or no TARGET");
    check_parse_error("0 7 488b0500000000 1 rip 0 7 3 0x0", "rip: FIELD+4 beyond the instruction, or no TARGET");
    check_parse_error("0 5 e900000000 1 rel32 0 5 2 0x10", "rel32: not a call, jmp or jcc with rel32 at FIELD");
    check_parse_error("0 5 ea00000000 1 rel32 0 5 1 0x10", "rel32: not a call, jmp or jcc with rel32 at FIELD");
    check_parse_error("0 5 909090eb00 2 copy 0 3 0 0x0 jmp8 3 2 1 0x0", "jmp8: not EB rel8");
    check_parse_error("0 5 909090ea00 2 copy 0 3 0 0x0 jmp8 3 2 1 0x10", "jmp8: not EB rel8");
    check_parse_error("0 5 9090907f00 2 copy 0 3 0 0x0 jcc8 3 2 0 0x10", "jcc8: not 7x rel8");
    check_parse_error("0 5 9090908000 2 copy 0 3 0 0x0 jcc8 3 2 1 0x10", "jcc8: not 7x rel8");
}

/* ---- one function probed, called, unprobed ----------------------------------------------- */
static void probe_one(int i, uint32_t id)
{
    const probe_case_t *c = &cases[i];
    ps_probe_plan_t p;
    char why[256] = "";
    uint8_t saved[PS_PROBE_MAX_DISPLACED];
    uintptr_t site = c->fn + (uintptr_t)c->site;
    if (!parse(c->fn, plan_text(c->fn, c->site, c->len, c->groups), &p)) {
        failures++;
        return;
    }
    memcpy(saved, (void *)site, c->len);
    CHECK_INT(call_case(i), 0);
    int rc = ps_patch_add(id, &p, 0, why, sizeof why);
    if (rc != 0) fprintf(stderr, "%s: %s\n", c->name, why);
    CHECK_INT(rc, 0);
    const ps_patch_t *d = &ps_patches[id];
    CHECK_INT(*(uint8_t *)site, 0xe9);
    int32_t rel;
    memcpy(&rel, (const void *)(site + 1), sizeof rel); /* (unaligned) */
    CHECK_INT((int32_t)(d->tramp - (site + 5)), rel);
    CHECK(d->tramp - site + (1ul << 31) < (1ul << 32)); /* within +-2 GB */
    int prot = 0;
    CHECK(ps_text_mapping(d->tramp, 1, &prot) && prot == (PROT_READ | PROT_EXEC));
    CHECK_INT(ps_patch_original_pc(d->tramp), site);
    CHECK_INT(ps_patch_original_pc(d->copy - 1), site);
    CHECK_INT(ps_patch_original_pc(d->copy), site + p.insn[0].off);
    CHECK_INT(call_case(i), 2);
    CHECK_INT(atomic_load(&hook_last_id), id);
    if (i == 6) /* the relocated call's return address: in the trampoline, standing for site+9 */
        CHECK_INT(ps_patch_original_pc(f_helper_ra), site + 9);
    ps_patch_enable(id, 0);
    CHECK_INT(call_case(i), 0);
    ps_patch_enable(id, 1);
    CHECK_INT(call_case(i), 2);
    rc = ps_patch_remove(id, why, sizeof why);
    if (rc != 0) fprintf(stderr, "%s: remove: %s\n", c->name, why);
    CHECK_INT(rc, 0);
    CHECK(memcmp(saved, (void *)site, c->len) == 0);
    CHECK_INT(call_case(i), 0);
    uintptr_t tramp = d->tramp; /* a re-add reuses the trampoline */
    CHECK_INT(ps_patch_add(id, &p, 0, why, sizeof why), 0);
    CHECK_INT(d->tramp, tramp);
    CHECK_INT(call_case(i), 2);
    CHECK_INT(ps_patch_remove(id, why, sizeof why), 0);
    CHECK(memcmp(saved, (void *)site, c->len) == 0);
}

static void test_prologues(uint32_t first_id)
{
    for (int i = 0; i < 8 + have_avx; i++) probe_one(i, first_id + (uint32_t)i); /* 8: ymm0 */
    CHECK_INT(atomic_load(&hook_misaligned), 0);
}

/* ---- registers a caller keeps across the probed call ------------------------------------- */
/* A caller compiled with -fipa-ra may keep values in call-clobbered registers across a call to
 * a function it knows leaves them alone: keep_check sets xmm8-15, r11 (which the stub
 * uses) and zmm16 and k1 with AVX-512, calls the probed f_keep, which touches none of them,
 * and stores them after the return into out[0..7] (xmm8-15), out[8..15] (zmm16), out[16] (k1)
 * and out[17] (r11).  count_hook clobbers them all. */
void keep_check(uint64_t *out);
void f_keep(void);
__asm__(".text\n"
        ".p2align 4\n"
        "f_keep:\n"
        "  push %rbp\n"
        "  mov %rsp, %rbp\n"
        "  xor %eax, %eax\n"
        "  pop %rbp\n"
        "  ret\n"
        "keep_check:\n"
        "  push %rbx\n"
        "  mov %rdi, %rbx\n"
        "  mov $0x20008, %rax\n  movq %rax, %xmm8\n"
        "  mov $0x20009, %rax\n  movq %rax, %xmm9\n"
        "  mov $0x2000a, %rax\n  movq %rax, %xmm10\n"
        "  mov $0x2000b, %rax\n  movq %rax, %xmm11\n"
        "  mov $0x2000c, %rax\n  movq %rax, %xmm12\n"
        "  mov $0x2000d, %rax\n  movq %rax, %xmm13\n"
        "  mov $0x2000e, %rax\n  movq %rax, %xmm14\n"
        "  mov $0x2000f, %rax\n  movq %rax, %xmm15\n"
        "  cmpl $0, have_avx512(%rip)\n"
        "  je 1f\n"
        "  mov $0x20016, %rax\n"
        "  vpbroadcastq %rax, %zmm16\n"
        "  mov $0x20001, %rax\n"
        "  kmovq %rax, %k1\n"
        "1:\n"
        "  mov $0x2000b, %r11\n"
        "  call f_keep\n"
        "  mov %r11, 136(%rbx)\n"
        "  movq %xmm8, 0(%rbx)\n"
        "  movq %xmm9, 8(%rbx)\n"
        "  movq %xmm10, 16(%rbx)\n"
        "  movq %xmm11, 24(%rbx)\n"
        "  movq %xmm12, 32(%rbx)\n"
        "  movq %xmm13, 40(%rbx)\n"
        "  movq %xmm14, 48(%rbx)\n"
        "  movq %xmm15, 56(%rbx)\n"
        "  cmpl $0, have_avx512(%rip)\n"
        "  je 2f\n"
        "  vmovdqu64 %zmm16, 64(%rbx)\n"
        "  kmovq %k1, 128(%rbx)\n"
        "2:\n"
        "  pop %rbx\n"
        "  ret\n");

static void test_kept_registers(uint32_t id)
{
    ps_probe_plan_t p;
    char why[256] = "";
    if (!parse((uintptr_t)f_keep, plan_text((uintptr_t)f_keep, 0, 6, "3 copy 0 1 0 0x0 copy 1 3 0 0x0 copy 4 2 0 0x0"), &p)) {
        failures++;
        return;
    }
    int rc = ps_patch_add(id, &p, 0, why, sizeof why);
    if (rc != 0) fprintf(stderr, "keep: %s\n", why);
    CHECK_INT(rc, 0);
    uint64_t out[18] = {0}, calls = atomic_load(&hook_calls);
    keep_check(out);
    CHECK_INT(atomic_load(&hook_calls), calls + 1);
    for (int k = 0; k < 8; k++) CHECK_INT(out[k], 0x20008 + k);
    for (int k = 8; k < 16; k++) CHECK_INT(out[k], have_avx512 ? 0x20016 : 0);
    CHECK_INT(out[16], have_avx512 ? 0x20001 : 0);
    CHECK_INT(out[17], 0x2000b);
    ps_patch_enable(id, 0); /* the stub's r11 is given back on the way past a disabled probe too */
    memset(out, 0, sizeof out);
    keep_check(out);
    CHECK_INT(atomic_load(&hook_calls), calls + 1);
    CHECK_INT(out[17], 0x2000b);
    CHECK_INT(ps_patch_remove(id, why, sizeof why), 0);
}

/* ---- a second thread: idle (clear: blocked in a system call) or blocking SIGTRAP ---------- */
static pthread_t other;
static int other_pipe[2], other_tid;

static void *other_main(void *arg)
{
    if (arg) {
        sigset_t s;
        sigemptyset(&s);
        sigaddset(&s, SIGTRAP);
        pthread_sigmask(SIG_BLOCK, &s, NULL);
        pthread_setname_np(pthread_self(), "trapblocker");
    }
    __atomic_store_n(&other_tid, gettid(), __ATOMIC_RELEASE);
    char ch;
    while (read(other_pipe[0], &ch, 1) < 0) {}
    return NULL;
}

static void other_start(int blocks_sigtrap)
{
    other_tid = 0;
    CHECK_INT(pipe(other_pipe), 0);
    pthread_create(&other, NULL, other_main, blocks_sigtrap ? (void *)1 : NULL);
    while (!__atomic_load_n(&other_tid, __ATOMIC_ACQUIRE)) sched_yield();
}

static void other_stop(void)
{
    CHECK_INT(write(other_pipe[1], "x", 1), 1);
    pthread_join(other, NULL);
    close(other_pipe[0]);
    close(other_pipe[1]);
}

/* ---- refusals ----------------------------------------------------------------------------- */
static void test_refusals(void)
{
    ps_probe_plan_t p, q;
    char why[256], want[256];
    uintptr_t fn = (uintptr_t)f_push;
    parse(fn, plan_text(fn, 0, 8, "3 copy 0 1 0 0x0 copy 1 3 0 0x0 copy 4 4 0 0x0"), &p);

    q = p;
    q.orig[2] ^= 1;
    CHECK_INT(ps_patch_add(100, &q, 0, why, sizeof why), -1);
    snprintf(want, sizeof want, "code-differs the bytes at 0x%lx are not the plan's", fn);
    CHECK_STR(why, want);

    CHECK_INT(ps_patch_add(101, &p, 0, why, sizeof why), 0);
    CHECK_INT(ps_patch_add(102, &p, 0, why, sizeof why), -1);
    CHECK_STR(why, "already-probed probe 101");
    CHECK_INT(ps_patch_add(101, &p, 0, why, sizeof why), -1);
    CHECK_STR(why, "already-probed probe 101");
    CHECK_INT(ps_patch_remove(101, why, sizeof why), 0);
    CHECK_INT(ps_patch_remove(101, why, sizeof why), -1);
    CHECK_STR(why, "not-probed probe 101 is not installed");
    /* another id at the site of a removed probe: a trampoline of its own */
    uint64_t hooks = atomic_load(&hook_calls);
    CHECK_INT(ps_patch_add(107, &p, 0, why, sizeof why), 0);
    CHECK(ps_patches[107].tramp != ps_patches[101].tramp);
    CHECK_INT(f_push(1, 2, 3, 4, 5, 6), 21);
    CHECK_INT(atomic_load(&hook_calls) - hooks, 1);
    CHECK_INT(atomic_load(&hook_last_id), 107);
    CHECK_INT(ps_patch_remove(107, why, sizeof why), 0);
    CHECK_INT(ps_patch_original_pc(fn), 0);
    CHECK_INT(ps_patch_add(PS_PROBE_MAX, &p, 0, why, sizeof why), -1);
    CHECK_STR(why, "table-full probe ids are 1 to 4095");

    uintptr_t far = (uintptr_t)f_far;
    char groups[128];
    snprintf(groups, sizeof groups, "2 rel32 0 5 1 0x%lx rel32 5 5 1 0x%lx",
             (unsigned long)(far + 5 + 0x7ffffff0), (unsigned long)(far + 10 - 0x7ffffff0));
    parse(far, plan_text(far, 0, 10, groups), &q);
    CHECK_INT(ps_patch_add(103, &q, 0, why, sizeof why), -1);
    CHECK_STR(why, "out-of-reach no free page within 2 GB of the function and its targets");
    q.insn[0].target += 1;
    CHECK_INT(ps_patch_add(104, &q, 0, why, sizeof why), -1);
    CHECK_STR(why, "bad-plan a TARGET disagrees with the displacement in ORIG");

    void *data = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    memcpy(data, (void *)fn, 8);
    q = p;
    q.vaddr = (uintptr_t)data;
    CHECK_INT(ps_patch_add(105, &q, 0, why, sizeof why), -1);
    snprintf(want, sizeof want, "not-mapped no executable mapping holds 0x%lx", (unsigned long)data);
    CHECK_STR(why, want);
    munmap(data, 4096);

    other_start(1);
    CHECK_INT(ps_patch_add(106, &p, 0, why, sizeof why), -1);
    snprintf(want, sizeof want, "unsafe-threads thread %d (trapblocker) blocks SIGTRAP", other_tid);
    CHECK_STR(why, want);
    other_stop();
    CHECK_INT(f_push(1, 1, 1, 1, 1, 1), 6);
}

/* ---- 8 threads calling while the probe comes and goes ------------------------------------ */
#define STORM_THREADS 8
#define STORM_CYCLES 1000

/* phase 4k+1: adding, 4k+2: installed, 4k+3: removing, 4k+4: removed */
static _Atomic unsigned phase;
static _Atomic int storm_stop, storm_started;
static _Atomic uint64_t storm_calls, storm_hooked, storm_bad, storm_missed, storm_unexpected;

static void *storm_worker(void *arg)
{
    uint64_t calls = 0, hooked = 0, bad = 0, missed = 0, unexpected = 0;
    atomic_fetch_add(&storm_started, 1);
    while (!atomic_load_explicit(&storm_stop, memory_order_relaxed)) {
        unsigned p0 = atomic_load(&phase);
        hooked_now = 0;
        long r = f_push(1, 2, 3, 4, 5, (long)calls & 7);
        unsigned p1 = atomic_load(&phase);
        bad += r != 15 + ((long)calls & 7) || hooked_now > 1;
        hooked += hooked_now;
        missed += p0 == p1 && p0 % 4 == 2 && hooked_now == 0;
        unexpected += p0 == p1 && p0 % 4 == 0 && hooked_now != 0;
        calls++;
        if ((calls & 63) == 0 && arg) usleep(100); /* bursts: the scan sees it in a system call */
        if ((calls & 255) == 0) atomic_fetch_add_explicit(&storm_calls, 256, memory_order_relaxed);
    }
    atomic_fetch_add(&storm_calls, calls & 255);
    atomic_fetch_add(&storm_hooked, hooked);
    atomic_fetch_add(&storm_bad, bad);
    atomic_fetch_add(&storm_missed, missed);
    atomic_fetch_add(&storm_unexpected, unexpected);
    return NULL;
}

/* Lets the workers run a little (some calls in every phase, most cycles). */
static void let_run(void)
{
    uint64_t start = atomic_load_explicit(&storm_calls, memory_order_relaxed);
    for (int i = 0; i < 20 && atomic_load_explicit(&storm_calls, memory_order_relaxed) == start; i++)
        usleep(50);
}

static double monotonic_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void test_storm(uint32_t id)
{
    ps_probe_plan_t p;
    char why[256];
    uintptr_t fn = (uintptr_t)f_push;
    uint8_t saved[8];
    memcpy(saved, (void *)fn, 8);
    parse(fn, plan_text(fn, 0, 8, "3 copy 0 1 0 0x0 copy 1 3 0 0x0 copy 4 4 0 0x0"), &p);
    pthread_t t[STORM_THREADS];
    uint64_t hooks_before = atomic_load(&hook_calls);
    double t0 = monotonic_s();
    /* 1 thread calls without pause (cleared by its run time), 7 in bursts */
    for (int i = 0; i < STORM_THREADS; i++) pthread_create(&t[i], NULL, storm_worker, i < 1 ? NULL : t);
    while (atomic_load(&storm_started) < STORM_THREADS) usleep(100);
    int retries = 0, failed = 0;
    for (unsigned k = 0; k < STORM_CYCLES && !failed; k++) {
        atomic_store(&phase, 4 * k + 1);
        int rc;
        /* (a worker preempted inside the prologue for 100 ms on a loaded machine: try again) */
        while ((rc = ps_patch_add(id, &p, 0, why, sizeof why)) != 0 &&
               strncmp(why, "unsafe-threads", 14) == 0 && retries < 50) {
            retries++;
            usleep(1000);
        }
        if (rc != 0) {
            fprintf(stderr, "storm: add %u: %s\n", k, why);
            failed = 1;
        }
        atomic_store(&phase, 4 * k + 2);
        let_run();
        atomic_store(&phase, 4 * k + 3);
        if (!failed && ps_patch_remove(id, why, sizeof why) != 0) {
            fprintf(stderr, "storm: remove %u: %s\n", k, why);
            failed = 1;
        }
        atomic_store(&phase, 4 * k + 4);
        let_run();
    }
    atomic_store(&storm_stop, 1);
    for (int i = 0; i < STORM_THREADS; i++) pthread_join(t[i], NULL);
    ps_patch_stats_t st;
    ps_patch_stats(&st);
    fprintf(stderr, "storm: %.1f s, %lu calls, %lu hooked, %d add retries; %lu windows (longest %lu us), "
            "%lu traps, %lu scan waits, writer %s\n", (monotonic_s() - t0),
            (unsigned long)storm_calls, (unsigned long)storm_hooked, retries,
            (unsigned long)st.windows, (unsigned long)(st.longest_window_ns / 1000),
            (unsigned long)st.traps, (unsigned long)st.scan_waits, st.writer);
    CHECK_INT(failed, 0);
    CHECK_INT(atomic_load(&hook_calls) - hooks_before, storm_hooked); /* one hook per hooked call */
    CHECK_INT(storm_bad, 0);         /* right results, never two hooks for one call */
    CHECK_INT(storm_missed, 0);      /* every call while installed was hooked */
    CHECK_INT(storm_unexpected, 0);  /* no call while removed was */
    CHECK(storm_hooked > 0 && storm_hooked < storm_calls);
    CHECK(st.traps > 0 && st.scan_waits > 0); /* (threads did meet windows; the scan waited) */
    CHECK(memcmp(saved, (void *)fn, 8) == 0);
}

/* The fallback writer, live: the text page is R|X again afterwards. */
static void test_mprotect_writer(void)
{
    ps_patch_stats_t st;
    int prot = 0;
    ps_patch_writer_mprotect = 1;
    probe_one(0, 40);
    probe_one(6, 41);
    ps_patch_stats(&st);
    CHECK_STR(st.writer, "mprotect");
    CHECK(ps_text_mapping((uintptr_t)f_push, 1, &prot) && prot == (PROT_READ | PROT_EXEC));
    ps_patch_writer_mprotect = 0;
}

/* The thread that patches may block SIGTRAP (the control thread blocks every signal): it
 * unblocks it for the window; its mask is the same afterwards. */
static void test_caller_blocks_sigtrap(void)
{
    sigset_t trap, before, after;
    sigemptyset(&trap);
    sigaddset(&trap, SIGTRAP);
    pthread_sigmask(SIG_BLOCK, &trap, &before);
    probe_one(3, 42);
    pthread_sigmask(SIG_SETMASK, NULL, &after);
    CHECK_INT(sigismember(&after, SIGTRAP), 1);
    pthread_sigmask(SIG_SETMASK, &before, NULL);
}

/* Traps that are not ours reach the handler installed before ours (here, before the first
 * live add): a SIGTRAP sent, and an int3 at no probe's site (execution goes on after it). */
static volatile sig_atomic_t app_traps;
static void app_on_sigtrap(int sig) { app_traps++; }

static void test_chained_traps(void)
{
    raise(SIGTRAP);
    __asm__ volatile("int3");
    CHECK_INT(app_traps, 2);
}

static void test_own_code(void)
{
    char err[256], why[256], want[256];
    ps_probe_plan_t p;
    uintptr_t fn = (uintptr_t)f_push;
    if (ps_unwind_init(err, sizeof err) != 0) return;
    parse(fn, plan_text(fn, 0, 8, "3 copy 0 1 0 0x0 copy 1 3 0 0x0 copy 4 4 0 0x0"), &p);
    CHECK_INT(ps_patch_add(200, &p, 0, why, sizeof why), -1);
    snprintf(want, sizeof want, "own-code 0x%lx is in pathscope's own code", fn);
    CHECK_STR(why, want);
}

int main(void)
{
    signal(SIGTRAP, app_on_sigtrap);
    ps_probe_entry_hook = count_hook;
    have_avx = __builtin_cpu_supports("avx") != 0;
    have_avx512 = __builtin_cpu_supports("avx512f") != 0;
    make_cases();
    test_plan_parse();
    test_prologues(1); /* one thread: written directly */
    ps_patch_stats_t st;
    ps_patch_stats(&st);
    CHECK_INT(st.windows, 0);
    CHECK_STR(st.writer, "procmem");
    test_kept_registers(15);
    other_start(0); /* one more, idle: the live protocol */
    test_prologues(20);
    ps_patch_stats(&st);
    CHECK_INT(st.windows, 4 * (8 + have_avx)); /* add, remove, add, remove each */
    CHECK_INT(st.traps, 0);
    test_chained_traps();
    test_mprotect_writer();
    test_caller_blocks_sigtrap();
    other_stop();
    test_refusals();
    test_storm(300);
    test_own_code();
    if (failures) fprintf(stderr, "test_probe_patch: %d failures\n", failures);
    return failures != 0;
}
