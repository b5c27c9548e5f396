/* Unit tests of exits of redirected frames that C++ exceptions unwind (thunk.c: the interposed
 * _Unwind_RaiseException and _Unwind_Resume_or_Rethrow put the return addresses back, which
 * libgcc needs; the interposed __cxa_begin_catch reports the frames below the catching one as
 * UNWOUND and gives the live ones their thunks back).  Exact events, innermost first: a throw
 * through two redirected frames caught above them; caught inside a redirected frame (whose
 * exit stays a RETURN, with its return value); a rethrow; a destructor that calls a redirected
 * function while the exception unwinds.
 */
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <stdexcept>

#include "check.h"

/* unwind.h's API (the C headers use _Atomic, which C++ cannot include) */
extern "C" {
typedef struct ps_thread ps_thread_t;
extern __thread ps_thread_t *ps_self __attribute__((tls_model("initial-exec")));
ps_thread_t *ps_thread_register(void);
int ps_unwind_init(char *err, size_t errlen);
const char *ps_unwind_redirect_setup(void);
int ps_unwind_redirect(ps_thread_t *t, uintptr_t *slot);
typedef void (*ps_unwind_exit_fn)(ps_thread_t *t, int index, int how);
void ps_unwind_set_exit_hook(ps_unwind_exit_fn fn);
}
enum { PS_EXIT_RETURN, PS_EXIT_UNWOUND, PS_EXIT_LOST };

#define SELF_SLOT() (static_cast<uintptr_t *>(__builtin_frame_address(0)) + 1)
#define REDIRECT() ps_unwind_redirect(ps_self, SELF_SLOT())

static struct {
    int index, how;
} events[64];
static int nevents;

/* (an exit hook runs with only the general registers saved: unwind.h) */
__attribute__((target("general-regs-only"))) static void record_exit(ps_thread_t *, int index, int how)
{
    if (nevents < 64) events[nevents] = {index, how};
    nevents++;
}

#define CHECK_EVENT(k, index_, how_)                                                      \
    do {                                                                                  \
        CHECK_INT(events[k].index, (index_));                                             \
        CHECK_INT(events[k].how, (how_));                                                 \
    } while (0)

__attribute__((noipa)) static void throwing(int want)
{
    CHECK_INT(REDIRECT(), want);
    throw std::runtime_error("thrown");
}
__attribute__((noipa)) static void passing(void)
{
    CHECK_INT(REDIRECT(), 0);
    throwing(1);
}

static void test_caught_above(void)
{
    nevents = 0;
    int caught = 0;
    try {
        passing();
    } catch (const std::runtime_error &) {
        caught = 1;
        CHECK_INT(nevents, 2); /* at the catch */
    }
    CHECK_INT(caught, 1);
    CHECK_INT(nevents, 2);
    CHECK_EVENT(0, 1, PS_EXIT_UNWOUND);
    CHECK_EVENT(1, 0, PS_EXIT_UNWOUND);
}

__attribute__((noipa)) static double catching(double x)
{
    CHECK_INT(REDIRECT(), 0);
    try {
        throwing(1);
    } catch (const std::runtime_error &) {
        x *= 2;
    }
    return x + 0.25;
}

static void test_caught_inside(void)
{
    nevents = 0;
    CHECK(catching(1.5) == 3.25); /* its thunk was re-armed: its exit returns the value */
    CHECK_INT(nevents, 2);
    CHECK_EVENT(0, 1, PS_EXIT_UNWOUND);
    CHECK_EVENT(1, 0, PS_EXIT_RETURN);
}

__attribute__((noipa)) static void rethrowing(void)
{
    CHECK_INT(REDIRECT(), 0);
    try {
        throwing(1);
    } catch (const std::runtime_error &) {
        CHECK_INT(nevents, 1);
        throw;
    }
}

static void test_rethrow(void)
{
    nevents = 0;
    try {
        rethrowing();
    } catch (const std::runtime_error &) {
    }
    CHECK_INT(nevents, 2);
    CHECK_EVENT(0, 1, PS_EXIT_UNWOUND);
    CHECK_EVENT(1, 0, PS_EXIT_UNWOUND);
}

__attribute__((noipa)) static int plain(void) { return REDIRECT(); }

struct Guard {
    int *index;
    ~Guard() { *index = plain(); } /* runs while the exception unwinds */
};

__attribute__((noipa)) static void guarded(int *index)
{
    CHECK_INT(REDIRECT(), 0);
    Guard g{index};
    throwing(1);
}

static void test_destructor(void)
{
    nevents = 0;
    int index = -1;
    try {
        guarded(&index);
    } catch (const std::runtime_error &) {
    }
    /* the destructor's call takes the place of the frame the exception left */
    CHECK_INT(index, 1);
    CHECK_INT(nevents, 3);
    CHECK_EVENT(0, 1, PS_EXIT_UNWOUND);
    CHECK_EVENT(1, 1, PS_EXIT_RETURN);
    CHECK_EVENT(2, 0, PS_EXIT_UNWOUND);
}

int main(void)
{
    char err[256];
    if (ps_unwind_init(err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    CHECK(ps_thread_register() != NULL);
    const char *why = ps_unwind_redirect_setup();
    if (why) {
        fprintf(stderr, "redirection unavailable here: %s\n", why);
        return PS_SKIP;
    }
    ps_unwind_set_exit_hook(record_exit);
    test_caught_above();
    test_caught_inside();
    test_rethrow();
    test_destructor();
    test_caught_above(); /* (nothing left over) */
    return failures != 0;
}
