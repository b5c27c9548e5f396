/* Unit tests of exits by return-address redirection (thunk.c: ps_unwind_redirect and the
 * hooked thunks; docs/design-probes.md, section 3), on this thread registered as the runtime
 * registers threads: the exit hook sees every return with its index, in LIFO order (recursion,
 * a full thunk stack, a tail call); return values in every register the x86-64 return
 * convention uses, and caller-saved registers (xmm8-15, zmm16, k1 too), survive a hook that
 * clobbers every general register a callee may (the hook itself touches no other: unwind.h); frames left by longjmp are reported LOST; backtrace() sees real return addresses
 * and the slot gets its thunk back; pthread_exit reports open frames UNWOUND, swapcontext
 * LOST; walks through a redirected frame give the same path as without, in every traversal
 * mode, and thunk mode stops at a probe's thunk that continues a committed walk; walks
 * from a hooked thunk's code and from its exit hook reach the caller, and a return address in
 * a trampoline walks as its original (ps_unwind_set_alias), a walk from an epilogue does not
 * read rbp's popped save slot; the refusals.  (Exceptions: test_unwind_redirect_exc.cpp.)
 */
#include <execinfo.h>
#include <immintrin.h>
#include <pthread.h>
#include <ucontext.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "unwind_internal.h"

/* the frame's return-address slot (noipa functions use a frame pointer: see the builtin) */
#define SELF_SLOT() ((uintptr_t *)__builtin_frame_address(0) + 1)
#define REDIRECT() ps_unwind_redirect(ps_self, SELF_SLOT())

#define MAX_EVENTS 600
static struct {
    int index, how;
} events[MAX_EVENTS];
static int nevents;
__attribute__((used)) static int have_avx512; /* (read by preserve_probe, below) */

/* Records the exit.  An exit hook runs with only the general registers saved (unwind.h), so it
 * is compiled for them alone; it clobbers every one a callee may. */
__attribute__((target("general-regs-only"))) static void record_exit(ps_thread_t *t, int index,
                                                                     int how)
{
    CHECK(t == ps_self);
    __asm__ volatile("movq $-1, %%rax\n\tmovq $-1, %%rcx\n\tmovq $-1, %%rdx\n\t"
                     "movq $-1, %%rsi\n\tmovq $-1, %%rdi\n\tmovq $-1, %%r8\n\t"
                     "movq $-1, %%r9\n\tmovq $-1, %%r10\n\tmovq $-1, %%r11"
                     ::: "rax", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11");
    if (nevents < MAX_EVENTS) {
        events[nevents].index = index;
        events[nevents].how = how;
    }
    nevents++;
}

static unwind_thread_t *self_unwind(void) { return unwind_of(ps_self); }

#define CHECK_EVENT(k, index_, how_)                                                      \
    do {                                                                                  \
        CHECK_INT(events[k].index, (index_));                                             \
        CHECK_INT(events[k].how, (how_));                                                 \
    } while (0)

/* ---- return values ------------------------------------------------------------------------ */
typedef struct { long a, b; } pair_t;       /* rax:rdx */
typedef struct { double x, y; } vec2_t;     /* xmm0:xmm1 */
static int last_index;

__attribute__((noipa)) static int ret_int(int x) { last_index = REDIRECT(); return x * 3 + 1; }
__attribute__((noipa)) static double ret_double(double x) { last_index = REDIRECT(); return x / 8; }
__attribute__((noipa)) static pair_t ret_pair(long a)
{
    last_index = REDIRECT();
    return (pair_t){a + 1, -a};
}
__attribute__((noipa)) static vec2_t ret_vec2(double x)
{
    last_index = REDIRECT();
    return (vec2_t){x * 2, x - 1};
}
__attribute__((noipa)) static __int128 ret_int128(long a)
{
    last_index = REDIRECT();
    return ((__int128)a << 64) | 0x1234;
}
__attribute__((noipa)) static long double ret_long_double(long double x)
{
    last_index = REDIRECT();
    return x / 3;
}
__attribute__((noipa)) static _Complex long double ret_complex_ld(long double x)
{
    last_index = REDIRECT();
    return x + 2.0iL * x; /* st0:st1 */
}

/* ymm0, all 256 bits */
__attribute__((noipa, target("avx"))) static __m256d ret_m256(double x)
{
    last_index = REDIRECT();
    return _mm256_set_pd(x, x + 1, x + 2, x + 3);
}
__attribute__((target("avx"))) static int m256_preserved(void)
{
    double d[4];
    _mm256_storeu_pd(d, ret_m256(1.0));
    return d[0] == 4 && d[1] == 3 && d[2] == 2 && d[3] == 1;
}

static void test_return_values(void)
{
    nevents = 0;
    CHECK_INT(ret_int(14), 43);
    CHECK_INT(last_index, 0);
    CHECK(ret_double(3.0) == 0.375);
    pair_t p = ret_pair(41);
    CHECK_INT(p.a, 42);
    CHECK_INT(p.b, -41);
    vec2_t v = ret_vec2(2.5);
    CHECK(v.x == 5.0 && v.y == 1.5);
    __int128 w = ret_int128(7);
    CHECK_INT((long)(w >> 64), 7);
    CHECK_INT((long)(w & 0xffff), 0x1234);
    long double third = ret_long_double(1.0L);
    CHECK(third == 1.0L / 3);
    _Complex long double z = ret_complex_ld(1.5L);
    CHECK(__real__ z == 1.5L && __imag__ z == 3.0L);
    int avx = !!__builtin_cpu_supports("avx");
    if (avx) CHECK(m256_preserved());
    CHECK_INT(nevents, 7 + avx);
    for (int k = 0; k < 7 + avx; k++) CHECK_EVENT(k, 0, PS_EXIT_RETURN);
    CHECK_INT(self_unwind()->thunks.top, 0);
    /* the x87 stack is empty again: eight pushes fit (an extra value would make the eighth a
     * stack overflow, a NaN) */
    long double a = 1, b = 2, c = 3, d = 4, e = 5, f = 6, g = 7, h = 8;
    __asm__ volatile("" : "+t"(a));
    CHECK(a + b * (c + d * (e + f * (g + h))) == 1 + 2 * (3 + 4 * (5 + 6 * 15.0L)));
}

/* Registers a caller may keep across a call it knows to leave them alone (GCC's -fipa-ra):
 * preserve_probe redirects its own slot, sets rcx, rsi, rdi, r8, r9, xmm8-15 (and zmm16 and k1
 * with AVX-512) and returns; its caller stores them right after the return: out[0..4] the
 * general ones, out[5..12] xmm8-15, out[13..20] zmm16, out[21] k1.  record_exit clobbers the
 * general ones. */
__attribute__((used)) static int redirect_slot(uintptr_t *slot) { return ps_unwind_redirect(ps_self, slot); }
void preserve_check(uint64_t *out);
__asm__(".text\n"
        "preserve_probe:\n"
        "subq $8, %rsp\n"
        "leaq 8(%rsp), %rdi\n"
        "call redirect_slot\n"
        "addq $8, %rsp\n"
        "movq $0x1111, %rcx\n"
        "movq $0x2222, %rsi\n"
        "movq $0x3333, %rdi\n"
        "movq $0x4444, %r8\n"
        "movq $0x5555, %r9\n"
        "movq $0x30008, %rax\n movq %rax, %xmm8\n"
        "movq $0x30009, %rax\n movq %rax, %xmm9\n"
        "movq $0x3000a, %rax\n movq %rax, %xmm10\n"
        "movq $0x3000b, %rax\n movq %rax, %xmm11\n"
        "movq $0x3000c, %rax\n movq %rax, %xmm12\n"
        "movq $0x3000d, %rax\n movq %rax, %xmm13\n"
        "movq $0x3000e, %rax\n movq %rax, %xmm14\n"
        "movq $0x3000f, %rax\n movq %rax, %xmm15\n"
        "cmpl $0, have_avx512(%rip)\n"
        "je 1f\n"
        "movq $0x30016, %rax\n"
        "vpbroadcastq %rax, %zmm16\n"
        "movq $0x30001, %rax\n"
        "kmovq %rax, %k1\n"
        "1:\n"
        "ret\n"
        "preserve_check:\n"
        "pushq %rbx\n"
        "movq %rdi, %rbx\n"
        "call preserve_probe\n"
        "movq %rcx, 0(%rbx)\n"
        "movq %rsi, 8(%rbx)\n"
        "movq %rdi, 16(%rbx)\n"
        "movq %r8, 24(%rbx)\n"
        "movq %r9, 32(%rbx)\n"
        "movq %xmm8, 40(%rbx)\n"
        "movq %xmm9, 48(%rbx)\n"
        "movq %xmm10, 56(%rbx)\n"
        "movq %xmm11, 64(%rbx)\n"
        "movq %xmm12, 72(%rbx)\n"
        "movq %xmm13, 80(%rbx)\n"
        "movq %xmm14, 88(%rbx)\n"
        "movq %xmm15, 96(%rbx)\n"
        "cmpl $0, have_avx512(%rip)\n"
        "je 2f\n"
        "vmovdqu64 %zmm16, 104(%rbx)\n"
        "kmovq %k1, 168(%rbx)\n"
        "2:\n"
        "popq %rbx\n"
        "ret\n");

static void test_registers(void)
{
    uint64_t regs[22] = {0};
    have_avx512 = __builtin_cpu_supports("avx512f") != 0;
    nevents = 0;
    preserve_check(regs);
    CHECK_INT(nevents, 1);
    CHECK_EVENT(0, 0, PS_EXIT_RETURN);
    for (int k = 0; k < 5; k++) CHECK_INT(regs[k], 0x1111 * (k + 1));
    for (int k = 5; k < 13; k++) CHECK_INT(regs[k], 0x30008 + k - 5);
    for (int k = 13; k < 21; k++) CHECK_INT(regs[k], have_avx512 ? 0x30016 : 0);
    CHECK_INT(regs[21], have_avx512 ? 0x30001 : 0);
}

/* ---- nesting -------------------------------------------------------------------------------- */
__attribute__((noipa)) static int recurse(int depth, int level)
{
    int i = REDIRECT();
    CHECK_INT(i, level < PS_MAX_DEPTH ? level : -1);
    return level + 1 < depth ? recurse(depth, level + 1) + 1 : 1;
}

static void test_recursion(void)
{
    nevents = 0;
    CHECK_INT(recurse(100, 0), 100);
    CHECK_INT(nevents, 100);
    for (int k = 0; k < 100; k++) CHECK_EVENT(k, 99 - k, PS_EXIT_RETURN); /* innermost first */
    /* a full thunk stack: the 257th frame is not redirected, the others still are */
    nevents = 0;
    CHECK_INT(recurse(PS_MAX_DEPTH + 1, 0), PS_MAX_DEPTH + 1);
    CHECK_INT(nevents, PS_MAX_DEPTH);
    CHECK_EVENT(0, PS_MAX_DEPTH - 1, PS_EXIT_RETURN);
    CHECK_EVENT(PS_MAX_DEPTH - 1, 0, PS_EXIT_RETURN);
}

/* ---- tail calls ------------------------------------------------------------------------------ */
/* tail_caller redirects its slot, then jumps to tail_target, which returns through the same
 * slot, already holding thunk 0: its entry keeps that thunk as the return address. */
static uintptr_t *tail_slot;
static uintptr_t outside[8]; /* the path outside the test's frames (which walks skip) */
static int noutside;
__attribute__((noipa)) static int tail_target(int x)
{
    CHECK(SELF_SLOT() == tail_slot); /* (else the compiler made a call: no tail call tested) */
    int i = REDIRECT();
    CHECK_INT(self_unwind()->thunks.e[i].ra, ps_thunk_hooked_address(0));
    /* a walk translates the slot through both entries */
    uintptr_t out[PS_MAX_DEPTH];
    int complete = 0;
    CHECK_INT(ps_unwind_caller(out, PS_MAX_DEPTH, &complete), noutside);
    CHECK(complete && memcmp(out, outside, sizeof *out * (size_t)noutside) == 0);
    CHECK_INT(self_unwind()->thunk_errors, 0);
    return i * 10 + x;
}
__attribute__((noipa, optimize("optimize-sibling-calls"))) static int tail_caller(int x)
{
    tail_slot = SELF_SLOT();
    CHECK_INT(REDIRECT(), 0);
    return tail_target(x);
}

static void test_tail_call(void)
{
    int complete = 0;
    noutside = ps_unwind_caller(outside, 8, &complete);
    CHECK(noutside > 0 && complete);
    nevents = 0;
    CHECK_INT(tail_caller(3), 13);
    CHECK_INT(nevents, 2); /* the target's exit, then the caller's */
    CHECK_EVENT(0, 1, PS_EXIT_RETURN);
    CHECK_EVENT(1, 0, PS_EXIT_RETURN);
    CHECK_INT(self_unwind()->thunks.top, 0);
}

/* ---- longjmp -------------------------------------------------------------------------------- */
static jmp_buf jump_target;

__attribute__((noipa)) static void jump_inner(void)
{
    CHECK_INT(REDIRECT(), 1);
    longjmp(jump_target, 1);
}
__attribute__((noipa)) static void jump_outer(void)
{
    CHECK_INT(REDIRECT(), 0);
    jump_inner();
}
__attribute__((noipa)) static int plain(void) { return REDIRECT(); }

/* a redirected frame that catches a longjmp from inside: its own exit comes after the loss */
__attribute__((noipa)) static int catching(void)
{
    int i = REDIRECT();
    jmp_buf *saved = &jump_target;
    if (!setjmp(*saved)) jump_inner();
    return i;
}

static void test_longjmp(void)
{
    nevents = 0;
    if (!setjmp(jump_target)) jump_outer();
    CHECK_INT(nevents, 0);                      /* vanished without their exits */
    CHECK_INT(self_unwind()->thunks.top, 2);
    CHECK_INT(plain(), 0);                      /* the next redirect finds them dead */
    CHECK_INT(nevents, 3);
    CHECK_EVENT(0, 1, PS_EXIT_LOST);
    CHECK_EVENT(1, 0, PS_EXIT_LOST);
    CHECK_EVENT(2, 0, PS_EXIT_RETURN);
    nevents = 0;
    CHECK_INT(catching(), 0);                   /* jump_inner took index 1 */
    CHECK_INT(nevents, 2);
    CHECK_EVENT(0, 1, PS_EXIT_LOST);            /* found by catching's own exit */
    CHECK_EVENT(1, 0, PS_EXIT_RETURN);
    CHECK_INT(self_unwind()->thunks.top, 0);
}

/* ---- backtrace ------------------------------------------------------------------------------ */
__attribute__((noipa)) static int traced(void **buffer, int *armed)
{
    uintptr_t *slot = SELF_SLOT();
    int i = ps_unwind_redirect(ps_self, slot);
    int n = backtrace(buffer, 16);
    *armed = *slot == ps_thunk_hooked_address(i); /* its thunk is back */
    return n;
}

static void test_backtrace(void)
{
    void *buffer[16];
    int armed = 0;
    nevents = 0;
    int n = traced(buffer, &armed);
    CHECK(n >= 3);
    CHECK_INT(armed, 1);
    for (int k = 0; k < n; k++) CHECK_INT(ps_thunk_index((uintptr_t)buffer[k]), -1);
    CHECK_INT(nevents, 1);
    CHECK_EVENT(0, 0, PS_EXIT_RETURN);
}

/* ---- the thread's end, a stack switch ---------------------------------------------------------- */
/* Each in a thread of its own, registered as the runtime registers threads: pthread_exit from
 * inside two redirected frames reports both UNWOUND; swapcontext reports the open one LOST
 * and the thread redirects no more. */
static ps_thread_t *other_thread;

__attribute__((noipa)) static void exiting(int level)
{
    CHECK_INT(REDIRECT(), level);
    if (level == 1) pthread_exit(NULL);
    if (level < 1) exiting(level + 1);
}

static void *exit_thread(void *arg)
{
    other_thread = ps_thread_register();
    exiting(0);
    return arg;
}

static ucontext_t main_context, side_context;
static void side(void) { swapcontext(&side_context, &main_context); }

__attribute__((noipa)) static int switching(void)
{
    int i = REDIRECT();
    CHECK_INT(i, 0);
    swapcontext(&main_context, &side_context); /* and back */
    CHECK_INT(REDIRECT(), -1);                /* not on this thread any more */
    return i;
}

static void *switch_thread(void *arg)
{
    static char side_stack[64 * 1024];
    other_thread = ps_thread_register();
    getcontext(&side_context);
    side_context.uc_stack.ss_sp = side_stack;
    side_context.uc_stack.ss_size = sizeof side_stack;
    side_context.uc_link = NULL;
    makecontext(&side_context, side, 0);
    CHECK_INT(switching(), 0);
    return arg;
}

static void run_thread(void *(*fn)(void *))
{
    pthread_t th;
    nevents = 0;
    CHECK_INT(pthread_create(&th, NULL, fn, NULL), 0);
    CHECK_INT(pthread_join(th, NULL), 0);
}

static void test_thread_end(void)
{
    run_thread(exit_thread);
    CHECK_INT(nevents, 2);
    CHECK_EVENT(0, 1, PS_EXIT_UNWOUND);
    CHECK_EVENT(1, 0, PS_EXIT_UNWOUND);
    CHECK_INT(unwind_of(other_thread)->thunks.top, 0);
    run_thread(switch_thread);
    CHECK_INT(nevents, 1); /* (the frame's return then runs no thunk) */
    CHECK_EVENT(0, 0, PS_EXIT_LOST);
}

/* ---- walks through a redirected frame -------------------------------------------------------- */
typedef int (*redirect_fn)(uintptr_t *slot);
typedef int (*walk_fn)(uintptr_t ra, uintptr_t sp, uintptr_t rbp, uintptr_t *out, int max, int *complete);
int frames_outer(redirect_fn redirect, walk_fn walk, uintptr_t *out, int max, int *complete, int *index);

static int redirect_only(uintptr_t *slot) { return ps_unwind_redirect(ps_self, slot); }

/* As a probe's entry in thunk mode: the caller's walk is committed, then the slot redirected. */
static int redirect_after_walk(uintptr_t *slot)
{
    uintptr_t out[PS_MAX_DEPTH];
    int complete = 0;
    /* rbp at the probed function's entry: it saved its caller's just below the slot */
    int n = ps_unwind_from(*slot, (uintptr_t)(slot + 1), slot[-1], out, PS_MAX_DEPTH, &complete);
    CHECK(n > 3 && complete);
    ps_unwind_commit(ps_self);
    return ps_unwind_redirect(ps_self, slot);
}

/* Walks through frames_outer, frames_probed (redirected by each case's function) and
 * frames_walk, all from one call site: the first case, without redirection, gives the path
 * the others must give.  The thunk-mode cases check where the walk stopped: with no thunk
 * outside, nowhere; a probe's thunk without a commit before it is not chained (walked
 * through), so a walk stops at the traversal thunk a walk from here committed (in libc's
 * frames: the test's own frames count as pathscope's); a probe's walk committed before its
 * redirect makes its thunk chained, and the walk stops right there. */
static void test_walks(void)
{
    static const struct {
        int mode;
        redirect_fn redirect;
        int commit_here; /* a walk from here committed first */
        int stopped;     /* thunk mode: the walk stopped at a thunk; -1 the probe's */
    } cases[] = {
        {PS_TRAVERSAL_FULL, NULL, 0, 0},
        {PS_TRAVERSAL_FULL, redirect_only, 0, 0},
        {PS_TRAVERSAL_REUSE, redirect_only, 0, 0},
        {PS_TRAVERSAL_REUSE, redirect_only, 0, 0},
        {PS_TRAVERSAL_HEURISTIC, redirect_only, 0, 0},
        {PS_TRAVERSAL_HEURISTIC, redirect_only, 0, 0},
        {PS_TRAVERSAL_THUNK, redirect_only, 0, 0},
        {PS_TRAVERSAL_THUNK, redirect_only, 1, 1},
        {PS_TRAVERSAL_THUNK, redirect_after_walk, 0, -1},
        {PS_TRAVERSAL_THUNK, redirect_after_walk, 0, -1},
    };
    uintptr_t want[PS_MAX_DEPTH], got[PS_MAX_DEPTH];
    int n_want = 0;
    unwind_thread_t *u = self_unwind();
    for (int c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++) {
        ps_traversal_mode = cases[c].mode;
        int complete = 0, index = -1;
        if (cases[c].commit_here) {
            CHECK(ps_unwind_caller(got, PS_MAX_DEPTH, &complete) > 0 && complete);
            ps_unwind_commit(ps_self);
            CHECK(u->thunks.top > 0 && !u->thunks.hooked[u->thunks.top - 1]);
        }
        nevents = 0;
        int n = frames_outer(cases[c].redirect, ps_unwind_from, got, PS_MAX_DEPTH, &complete,
                             &index);
        CHECK(complete);
        if (c == 0) {
            n_want = n;
            memcpy(want, got, sizeof *want * (size_t)n);
            CHECK(n > 4);
            continue;
        }
        CHECK_INT(n, n_want);
        CHECK(memcmp(got, want, sizeof *want * (size_t)n_want) == 0);
        CHECK_INT(nevents, 1);
        CHECK_EVENT(0, index, PS_EXIT_RETURN);
        if (cases[c].mode != PS_TRAVERSAL_THUNK) continue;
        CHECK_INT(u->thunk_stopped, cases[c].stopped != 0);
        CHECK_INT(u->thunk_hit, index); /* the innermost thunk met */
        CHECK_INT(u->thunks.hooked[index], 1);
        CHECK_INT(u->thunks.chained[index], cases[c].stopped < 0);
    }
    CHECK_INT(u->thunk_errors, 0);
    ps_traversal_mode = PS_TRAVERSAL_REUSE;
}

/* ---- walks from a thunk's code and through trampolines -------------------------------------- */
static int from_thunk_index;
static uintptr_t from_thunk_out[PS_MAX_DEPTH];
static int from_thunk_n, from_thunk_complete;

/* An exit hook that walks, as a sample in it would: through the hooked part (its CFI) to the
 * probed function's caller, frames_outer. */
static void walking_exit(ps_thread_t *t, int index, int how)
{
    from_thunk_index = index;
    from_thunk_n = ps_unwind_caller(from_thunk_out, PS_MAX_DEPTH, &from_thunk_complete);
    CHECK(from_thunk_n > 0 && from_thunk_out[0] == unwind_of(t)->thunks.e[index].ra);
}

/* The state right after the probed function returned into its thunk, at pc in the thunk's
 * code before its frame is set up (RULE_RETURNED): frame 0 is pc, then the caller's path. */
static void check_walk_returned(uintptr_t pc, uintptr_t *slot, const uintptr_t *want, int n_want)
{
    uintptr_t got[PS_MAX_DEPTH];
    int complete = 0;
    int n = ps_unwind_walk(self_unwind(), pc, (uintptr_t)(slot + 1), slot[-1], 1, got,
                           PS_MAX_DEPTH, &complete, 0);
    CHECK(complete);
    CHECK_INT(n, n_want + 1);
    CHECK(got[0] == pc && memcmp(got + 1, want, sizeof *want * (size_t)n_want) == 0);
}

/* An epilogue as compilers write it: rbp popped, its CFI still saying "saved at CFA-16". */
void epilogue_ret(void);
__asm__(".text\n"
        "epilogue_fn:\n"
        ".cfi_startproc\n"
        "pushq %rbp\n"
        ".cfi_adjust_cfa_offset 8\n"
        ".cfi_offset %rbp, -16\n"
        "popq %rbp\n"
        ".cfi_adjust_cfa_offset -8\n"
        "epilogue_ret:\n"
        "ret\n"
        ".cfi_endproc\n");

/* At epilogue_ret of a function called from the probed function's caller (its return address
 * at slot): the popped save slot is not read, rbp is the caller's. */
static void check_walk_epilogue(uintptr_t *slot, const uintptr_t *want, int n_want)
{
    uintptr_t got[PS_MAX_DEPTH];
    int complete = 0;
    int n = ps_unwind_walk(self_unwind(), (uintptr_t)epilogue_ret, (uintptr_t)slot, slot[-1], 1,
                           got, PS_MAX_DEPTH, &complete, 0);
    CHECK(complete);
    CHECK_INT(n, n_want + 1);
    CHECK(memcmp(got + 1, want, sizeof *want * (size_t)n_want) == 0);
}

static uintptr_t fake_trampoline[8], fake_original;
/* the second word of fake_trampoline stands for fake_original (a relocated call's return) */
static uintptr_t fake_alias(uintptr_t pc) { return pc == (uintptr_t)&fake_trampoline[1] ? fake_original : 0; }

static int redirect_and_walk_from_thunk(uintptr_t *slot)
{
    uintptr_t want[PS_MAX_DEPTH], got[PS_MAX_DEPTH];
    int complete = 0;
    int n_want = ps_unwind_from(*slot, (uintptr_t)(slot + 1), slot[-1], want, PS_MAX_DEPTH, &complete);
    CHECK(n_want > 3 && complete);
    /* a return address in a trampoline: the original's rule and output, also when reused */
    fake_original = *slot;
    ps_unwind_set_alias(fake_alias);
    for (int k = 0; k < 2; k++) {
        int n = ps_unwind_from((uintptr_t)&fake_trampoline[1], (uintptr_t)(slot + 1), slot[-1],
                               got, PS_MAX_DEPTH, &complete);
        CHECK(complete && n == n_want && memcmp(got, want, sizeof *want * (size_t)n) == 0);
    }
    ps_unwind_set_alias(NULL);
    check_walk_epilogue(slot, want, n_want);
    int index = ps_unwind_redirect(ps_self, slot);
    check_walk_returned(ps_thunk_hooked_address(index), slot, want, n_want);
    check_walk_returned((uintptr_t)ps_thunk_hooked_common, slot, want, n_want);
    return index;
}

static void test_walks_from_thunks(void)
{
    ps_traversal_mode = PS_TRAVERSAL_REUSE;
    ps_unwind_set_exit_hook(walking_exit);
    uintptr_t out[PS_MAX_DEPTH];
    int complete = 0, index = -1;
    from_thunk_n = 0;
    frames_outer(redirect_and_walk_from_thunk, ps_unwind_from, out, PS_MAX_DEPTH, &complete, &index);
    CHECK_INT(from_thunk_index, index);
    CHECK(from_thunk_complete && from_thunk_n > 3);
    CHECK_INT(self_unwind()->thunk_errors, 0);
    ps_unwind_set_exit_hook(record_exit);
}

/* ---- refusals ------------------------------------------------------------------------------- */
static void test_refusals(void)
{
    static uintptr_t outside; /* (a static: not on the stack) */
    CHECK_INT(ps_unwind_redirect(ps_self, &outside), -1); /* not on the thread's stack */
    CHECK_INT(ps_unwind_redirect(NULL, SELF_SLOT()), -1);
    static ps_thread_t other; /* another thread's: its thunks would use ours */
    CHECK_INT(ps_unwind_redirect(&other, SELF_SLOT()), -1);
    unwind_thread_t *u = self_unwind();
    u->thunks.suspended = 2; /* the thread switched stacks */
    CHECK_INT(ps_unwind_redirect(ps_self, SELF_SLOT()), -1);
    u->thunks.suspended = 0;
    CHECK_INT(u->thunks.top, 0);
}

int main(void)
{
    char err[256];
    if (ps_unwind_init(err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    CHECK_INT(ps_unwind_redirect_available(), 0); /* not decided yet */
    CHECK_STR(ps_unwind_redirect_why(), "call paths are off (no unwinder)");
    CHECK(ps_thread_register() != NULL);
    const char *why = ps_unwind_redirect_setup();
    if (why) {
        fprintf(stderr, "redirection unavailable here: %s\n", why);
        return PS_SKIP;
    }
    CHECK_INT(ps_unwind_redirect_available(), 1);
    CHECK(ps_unwind_redirect_why() == NULL);
    CHECK_INT(ps_thunks_in_use, 0);
    CHECK_INT(ps_unwind_redirect(ps_self, SELF_SLOT()), -1); /* no hook yet */
    ps_unwind_set_exit_hook(record_exit);
    CHECK_INT(ps_thunks_in_use, 1);
    ps_thunks_available = 1; /* (thunk mode, for test_walks) */
    test_refusals();
    test_return_values();
    test_registers();
    test_recursion();
    test_tail_call();
    test_longjmp();
    test_backtrace();
    test_thread_end();
    test_walks();
    test_walks_from_thunks();
    return failures != 0;
}
