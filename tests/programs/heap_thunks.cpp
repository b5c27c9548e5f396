// Everything that can break thunk stacks (PATHSCOPE_TRAVERSAL=thunk, runtime/unwind/thunk.c),
// for tests/e2e/test_traversal.py.  Serial apart from the thread scenarios; no MPI.
//
// Every scenario starts in an extern "C" root function, goes down through distinct noinline
// frames (chain<N>: the template makes each level and each scenario its own function) and
// allocates at every level on the way down and back up, so that the frames involved carry
// thunks when the disruptive event happens:
//   exceptions  thrown through thunked frames and caught several frames up; destructors that
//               allocate in the landing pads; rethrow (throw;); nested try/catch in a
//               handler; std::exception_ptr rethrown from deep frames
//   dtor_catch  a destructor that throws, catches and allocates while another exception
//               unwinds its frame; the outer unwinding then resumes (_Unwind_Resume)
//   longjmp     longjmp and siglongjmp out of deep frames, and back into a shallower point
//               repeatedly in a loop
//   signals     SIGALRM (raise() and setitimer) interrupting deep allocation loops; the
//               handler allocates, and one variant siglongjmps out of it
//   backtrace   backtrace() from deep frames after thunks exist: every frame must be there
//               (twice: the first call loads the unwinder, which allocates)
//   fork        the child returns through thunked frames, allocating, and exits 0
//   threads     4 threads allocating concurrently in deep frames: one leaves through
//               pthread_exit (destructors allocate during the forced unwinding), one hands
//               its blocks to another that frees them, the main thread frees a thread's block
//   cancel      pthread_cancel of a thread blocked 10 frames down: every destructor runs
//   coroutine   swapcontext between the thread's stack and a makecontext stack, both
//               allocating in deep frames (a thread that switched never uses thunks again)
//   cancel_main the main thread cancelled 10 frames down; another thread checks and exits
//               (only when named: it ends the program)
// Arguments name the scenarios to run (in the order above); default all but cancel_main.
// Each scenario checks its results (values caught, destructors run, jumps taken, frames
// found) and its allocation count against the count its structure implies.  Output, one line
// per scenario:  scenario NAME root=FUNCTION allocs=N
// N counts the app_malloc/app_new calls whose call path runs through FUNCTION (root=- : on
// the coroutine's own stack, which the unwinder does not walk); then "heap_thunks: ok".
// Exit status 1 on any wrong result.
#include <atomic>
#include <cerrno>
#include <csetjmp>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <execinfo.h>
#include <pthread.h>
#include <stdexcept>
#include <string>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
#define KEEP() __asm__ __volatile__("" ::: "memory") /* no tail calls, nothing merged */

static int g_failures;
static void fail(const char *what, long got, long want)
{
    fprintf(stderr, "heap_thunks: FAILED %s: got %ld, expected %ld\n", what, got, want);
    g_failures++;
}
#define CHECK_EQ(what, got, want)                                   \
    do {                                                            \
        long g_ = (long)(got), w_ = (long)(want);                   \
        if (g_ != w_) fail(what, g_, w_);                           \
    } while (0)

// ---- the allocations the scenarios count ---------------------------------------------------
static void *volatile g_sink;
static thread_local long t_own;              // this thread's app allocations
static thread_local long *t_count = nullptr; // where app_malloc/app_new count (nullptr: t_own)
static thread_local volatile sig_atomic_t g_in_alloc; // in touch(): no allocating handler

static inline void counted() { (t_count ? *t_count : t_own)++; }

struct Blob {
    char data[48];
};

extern "C" NOINLINE void *app_malloc(size_t n)
{
    counted();
    void *p = malloc(n);
    g_sink = p;
    KEEP();
    return p;
}

extern "C" NOINLINE void app_free(void *p)
{
    free(p);
    KEEP();
}

extern "C" NOINLINE Blob *app_new()
{
    counted();
    Blob *b = new Blob;
    g_sink = b;
    KEEP();
    return b;
}

// two allocations (malloc and new), both freed
extern "C" NOINLINE void touch()
{
    g_in_alloc = g_in_alloc + 1;
    void *p = app_malloc(24);
    Blob *b = app_new();
    app_free(p);
    delete b;
    g_in_alloc = g_in_alloc - 1;
    KEEP();
}
static constexpr long TOUCH = 2;

// ---- deep call chains ----------------------------------------------------------------------
// chain<N>: N+1 noinline frames, each touching before and after the next; t_ra[N] is the
// return address of chain<N> (read on entry, before any thunk can be there).
static thread_local void *t_ra[32];

template <int N, class F> NOINLINE void chain(F &f)
{
    t_ra[N] = __builtin_return_address(0);
    touch();
    if constexpr (N == 0) f();
    else chain<N - 1>(f);
    touch();
    KEEP();
}
static constexpr long chain_allocs(int n) { return 2 * TOUCH * (n + 1); } // completed normally
static constexpr long chain_left(int n) { return TOUCH * (n + 1); }       // left by a jump/throw

// ---- a) exceptions --------------------------------------------------------------------------
static long g_guards_made, g_guards_done;

struct Guard { // its destructor allocates: in the landing pads while an exception unwinds
    Guard() { g_guards_made++; }
    ~Guard()
    {
        g_guards_done++;
        touch();
    }
};

struct Err {
    int code;
    std::string text; // longer than the small-string buffer: the exception allocates too
};

template <int N, class F> NOINLINE void echain(F &f)
{
    Guard g;
    touch();
    if constexpr (N == 0) f();
    else echain<N - 1>(f);
    touch();
    KEEP();
}
static constexpr long echain_thrown(int n) { return 2 * TOUCH * (n + 1); } // unwound

[[noreturn]] NOINLINE static void throw_err(int code)
{
    touch();
    throw Err{code, std::string(64, 'x')};
}

// A destructor with its own try/catch: runs while an exception unwinds its frame and throws,
// catches and allocates before the outer unwinding resumes.
static long g_nested_caught;
struct NestedGuard {
    ~NestedGuard()
    {
        try {
            auto thrower = [] { throw_err(7); };
            chain<3>(thrower);
        } catch (Err &e) {
            g_nested_caught += e.code;
            touch();
        }
        touch();
    }
};

template <int N, class F> NOINLINE void nchain(F &f) // a NestedGuard in the middle frame
{
    touch();
    if constexpr (N == 0) f();
    else if constexpr (N == 3) {
        NestedGuard ng;
        nchain<N - 1>(f);
    } else nchain<N - 1>(f);
    touch();
    KEEP();
}

static std::exception_ptr g_saved;

extern "C" NOINLINE void scen_exceptions()
{
    long before = t_own, want = 0;
    g_guards_made = g_guards_done = 0;

    // a1: thrown 10 frames down, caught 5 frames below the root; normal calls afterwards
    int caught = 0;
    auto a1 = [&] {
        try {
            auto thrower = [] { throw_err(1); };
            echain<9>(thrower);
        } catch (Err &e) {
            caught += e.code;
            touch();
        }
        auto after = [] { touch(); };
        chain<6>(after);
    };
    chain<4>(a1);
    want += chain_allocs(4) + TOUCH + echain_thrown(9) + TOUCH + chain_allocs(6) + TOUCH;

    // a2: caught in the middle, allocates, rethrown (throw;) and caught further up
    int rethrown = 0;
    auto a2 = [&] {
        try {
            auto mid = [&] {
                try {
                    auto thrower = [] { throw_err(2); };
                    echain<5>(thrower);
                } catch (Err &e) {
                    touch();
                    rethrown++;
                    throw;
                }
            };
            echain<4>(mid);
        } catch (Err &e) {
            caught += e.code;
            touch();
        }
    };
    chain<3>(a2);
    want += chain_allocs(3) + TOUCH + echain_thrown(5) + TOUCH + echain_thrown(4) + TOUCH;

    // a3: nested try/catch in a handler: a new exception thrown and caught inside the catch
    auto a3 = [&] {
        try {
            auto thrower = [] { throw_err(3); };
            echain<3>(thrower);
        } catch (Err &outer) {
            touch();
            try {
                auto thrower = [] { throw std::runtime_error("inner"); };
                echain<4>(thrower);
            } catch (std::runtime_error &inner) {
                caught += 10;
                touch();
            }
            touch();
            caught += outer.code;
        }
    };
    chain<5>(a3);
    want += chain_allocs(5) + TOUCH + echain_thrown(3) + 3 * TOUCH + echain_thrown(4);

    // a4: std::exception_ptr kept after the catch, rethrown later from deep frames
    auto a4 = [&] {
        try {
            auto thrower = [] { throw_err(4); };
            echain<4>(thrower);
        } catch (...) {
            g_saved = std::current_exception();
            touch();
        }
        try {
            auto rethrower = [] { touch(); std::rethrow_exception(g_saved); };
            echain<6>(rethrower);
        } catch (Err &e) {
            caught += e.code;
            touch();
        }
        g_saved = nullptr;
    };
    chain<3>(a4);
    want += chain_allocs(3) + TOUCH + echain_thrown(4) + TOUCH + TOUCH + echain_thrown(6) + TOUCH;

    CHECK_EQ("exceptions: codes caught", caught, 1 + 2 + 13 + 4);
    CHECK_EQ("exceptions: rethrown", rethrown, 1);
    CHECK_EQ("exceptions: guards destroyed", g_guards_done, g_guards_made);
    CHECK_EQ("exceptions: guards", g_guards_made, 10 + 6 + 5 + 4 + 5 + 5 + 7);
    CHECK_EQ("exceptions: allocations", t_own - before, want);
    printf("scenario exceptions root=scen_exceptions allocs=%ld\n", t_own - before);
}

// a5: a destructor with its own try/catch runs while an exception unwinds its frame: the
// inner exception is thrown, caught (__cxa_begin_catch) and followed by allocations before
// the outer unwinding resumes (_Unwind_Resume) through the frames above
extern "C" NOINLINE void scen_dtor_catch()
{
    long before = t_own, want = 0;
    int caught = 0;
    g_nested_caught = 0;
    auto a5 = [&] {
        try {
            auto thrower = [] { throw_err(5); };
            nchain<6>(thrower);
        } catch (Err &e) {
            caught += e.code;
            touch();
        }
        auto after = [] { touch(); };
        chain<4>(after);
    };
    chain<3>(a5);
    // nchain<6> unwound: touches on the way down (7) and the thrower's; the NestedGuard:
    // chain<3> left by the throw, its thrower's touch, the catch's and the one after it
    want += chain_allocs(3) + TOUCH + 7 * TOUCH + chain_left(3) + 3 * TOUCH + TOUCH +
            chain_allocs(4) + TOUCH;

    CHECK_EQ("dtor_catch: codes caught", caught, 5);
    CHECK_EQ("dtor_catch: caught in the destructor", g_nested_caught, 7);
    CHECK_EQ("dtor_catch: allocations", t_own - before, want);
    printf("scenario dtor_catch root=scen_dtor_catch allocs=%ld\n", t_own - before);
}

// ---- b) longjmp -----------------------------------------------------------------------------
static jmp_buf g_jmp;
static sigjmp_buf g_sigjmp;

template <int N> NOINLINE void ljchain(int how) // touches, then jumps from the bottom
{
    touch();
    if constexpr (N == 0) {
        if (how == 0) longjmp(g_jmp, 5);
        siglongjmp(g_sigjmp, 6);
    } else {
        ljchain<N - 1>(how);
    }
    touch();
    KEEP();
}

NOINLINE static void ljdeep(int depth, int how)
{
    switch (depth) {
    case 8: ljchain<8>(how); break;
    case 11: ljchain<11>(how); break;
    default: ljchain<14>(how); break;
    }
    KEEP();
}

extern "C" NOINLINE void scen_longjmp()
{
    long before = t_own, want = 0;
    volatile int got = 0;
    // b1: longjmp from 10 frames below the setjmp, which is 5 frames below the root
    auto b1 = [&] {
        int r = setjmp(g_jmp);
        if (r == 0) {
            auto down = [] { touch(); ljchain<9>(0); };
            chain<2>(down);
            got = -100; // not reached
        } else {
            got = got + r;
            touch();
            auto after = [] { touch(); };
            chain<5>(after);
        }
    };
    chain<4>(b1);
    want += chain_allocs(4) + chain_left(2) + TOUCH + TOUCH * 10 + TOUCH + chain_allocs(5) + TOUCH;

    // b2: siglongjmp likewise
    auto b2 = [&] {
        if (sigsetjmp(g_sigjmp, 1) == 0) {
            auto down = [] { touch(); ljchain<11>(1); };
            chain<3>(down);
            got = -100;
        } else {
            got = got + 100;
            touch();
        }
    };
    chain<6>(b2);
    want += chain_allocs(6) + chain_left(3) + TOUCH + TOUCH * 12 + TOUCH;

    // b3: back into the same shallower point again and again, from different depths
    static volatile int rounds;
    static const int depths[] = {8, 14, 11, 8, 14, 8, 11, 14};
    rounds = 0;
    auto b3 = [&] {
        int r = setjmp(g_jmp);
        if (r) rounds = rounds + 1;
        touch();
        if (rounds < 8) ljdeep(depths[rounds], 0);
        touch();
    };
    chain<3>(b3);
    long b3_levels = 0;
    for (int d : depths) b3_levels += d + 1;
    want += chain_allocs(3) + 8 * TOUCH + TOUCH * b3_levels + 2 * TOUCH;

    CHECK_EQ("longjmp: values", got, 5 + 100);
    CHECK_EQ("longjmp: rounds", rounds, 8);
    CHECK_EQ("longjmp: allocations", t_own - before, want);
    printf("scenario longjmp root=scen_longjmp allocs=%ld\n", t_own - before);
}

// ---- c) signals -----------------------------------------------------------------------------
static long g_handler_allocs;
static volatile sig_atomic_t g_alarm_mode; // 0 allocate and return, 1 allocate and siglongjmp
static volatile sig_atomic_t g_alarms, g_deferred, g_pending;

extern "C" NOINLINE void handler_alloc() // in the handler: counted apart
{
    long *saved = t_count;
    t_count = &g_handler_allocs;
    app_free(app_malloc(40));
    delete app_new();
    t_count = saved;
    KEEP();
}

extern "C" void on_alarm(int)
{
    if (g_in_alloc) { // interrupted an allocation: try again when it is over
        g_deferred = g_deferred + 1;
        g_pending = 1;
        return;
    }
    g_pending = 0;
    g_alarms = g_alarms + 1;
    handler_alloc();
    if (g_alarm_mode == 1) {
        struct itimerval off = {{0, 0}, {0, 0}}; /* no second alarm before the jump lands */
        setitimer(ITIMER_REAL, &off, nullptr);
        siglongjmp(g_sigjmp, 1);
    }
}

static double now_s()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void timer_every_us(long us)
{
    struct itimerval it = {{0, us}, {0, us}};
    setitimer(ITIMER_REAL, &it, nullptr);
}

// the timer off and any alarm still pending dropped (ignoring a signal discards it)
static void timer_off(const struct sigaction *handler)
{
    timer_every_us(0);
    signal(SIGALRM, SIG_IGN);
    sigaction(SIGALRM, handler, nullptr);
}

// allocate until `alarms` handlers have run (or 2 s); returns the loop's rounds
NOINLINE static long alloc_until_alarms(int alarms)
{
    long n = 0;
    double t0 = now_s();
    while (g_alarms < alarms && now_s() - t0 < 2.0) {
        touch();
        n++;
        if (g_pending) raise(SIGALRM); // deferred: now outside the allocation
    }
    return n;
}

extern "C" NOINLINE void scen_signals()
{
    long before = t_own, want = 0;
    g_handler_allocs = 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, nullptr);

    // c1: raise() between allocations 10 frames down; the handler allocates and returns
    g_alarm_mode = 0;
    g_alarms = 0;
    auto c1 = [] {
        for (int i = 0; i < 20; i++) {
            touch();
            if (i % 5 == 0) raise(SIGALRM);
        }
    };
    chain<9>(c1);
    want += chain_allocs(9) + 20 * TOUCH;
    CHECK_EQ("signals: raised", g_alarms, 4);

    // c2: setitimer interrupts a deep allocation loop (the handler allocates outside touch())
    g_alarms = 0;
    g_deferred = 0;
    static volatile long c2_rounds;
    auto c2 = [] {
        timer_every_us(300);
        c2_rounds = alloc_until_alarms(5);
        timer_every_us(0);
    };
    chain<8>(c2);
    timer_off(&sa);
    want += chain_allocs(8) + TOUCH * c2_rounds;
    if (g_alarms < 5) fail("signals: timer alarms", g_alarms, 5);

    // c3: the handler siglongjmps out, from raise() 9 frames below the sigsetjmp, 5 times
    g_alarm_mode = 1;
    g_alarms = 0;
    static volatile int jumps;
    jumps = 0;
    auto c3 = [&] {
        if (sigsetjmp(g_sigjmp, 1)) jumps = jumps + 1;
        touch();
        if (jumps < 5) {
            auto down = [] {
                touch();
                raise(SIGALRM);
                fail("signals: returned from a jumping handler", 1, 0);
            };
            chain<8>(down);
        }
    };
    chain<4>(c3);
    want += chain_allocs(4) + 6 * TOUCH + 5 * (chain_left(8) + TOUCH);
    CHECK_EQ("signals: jumps out of the handler", jumps, 5);

    // c4: the timer's handler siglongjmps out of a deep allocation loop, 3 times
    static volatile long c4_rounds;
    c4_rounds = 0;
    jumps = 0;
    g_alarms = 0;
    g_pending = 0;
    auto c4 = [&] {
        if (sigsetjmp(g_sigjmp, 1)) jumps = jumps + 1;
        touch();
        if (jumps < 3) {
            auto loop = [] {
                timer_every_us(300); // armed at the bottom: every jump leaves all 8 frames
                c4_rounds = c4_rounds + alloc_until_alarms(1000000);
            };
            chain<7>(loop);
            fail("signals: the timer never jumped", 0, 1);
        }
        timer_every_us(0);
    };
    chain<3>(c4);
    timer_off(&sa);
    // the loop's rounds are counted when it returns, which it never does: count touches
    long c4_allocs = t_own - before - want - chain_allocs(3) - 4 * TOUCH - 3 * chain_left(7);
    if (c4_allocs < 0 || c4_allocs % TOUCH) fail("signals: timer-jump allocations", c4_allocs, 0);
    want += chain_allocs(3) + 4 * TOUCH + 3 * chain_left(7) + c4_allocs;
    CHECK_EQ("signals: timer jumps", jumps, 3);

    signal(SIGALRM, SIG_DFL);
    CHECK_EQ("signals: allocations", t_own - before, want);
    // handler: 2 per alarm that ran it (c1 4, c2 >= 5, c3 5, c4 3)
    if (g_handler_allocs < 2 * (4 + 5 + 5 + 3) || g_handler_allocs % 2)
        fail("signals: handler allocations", g_handler_allocs, 2 * 17);
    printf("scenario signals root=scen_signals allocs=%ld\n", t_own - before);
    printf("scenario signal-handler root=on_alarm allocs=%ld\n", g_handler_allocs);
}

// ---- g) backtrace ---------------------------------------------------------------------------
static int bt_has(void **trace, int n, void *ra)
{
    for (int i = 0; i < n; i++)
        if (trace[i] == ra) return 1;
    return 0;
}

extern "C" NOINLINE void scen_backtrace()
{
    long before = t_own;
    void *root_ra = __builtin_return_address(0);
    static int found[2], frames[2];
    static void *root;
    root = root_ra;
    for (int round = 0; round < 2; round++) {
        static int r;
        r = round;
        auto body = [] {
            touch();
            void *trace[128];
            int n = backtrace(trace, 128);
            int ok = 0;
            for (int lvl = 0; lvl <= 9; lvl++) ok += bt_has(trace, n, t_ra[lvl]);
            ok += bt_has(trace, n, root);
            found[r] = ok;
            frames[r] = n;
            touch();
        };
        chain<9>(body);
    }
    for (int round = 0; round < 2; round++) {
        char what[64];
        snprintf(what, sizeof what, "backtrace %d: frames of the chain found", round + 1);
        CHECK_EQ(what, found[round], 11);
        if (frames[round] < 13) fail("backtrace: frames", frames[round], 13);
    }
    CHECK_EQ("backtrace: allocations", t_own - before, 2 * (chain_allocs(9) + 2 * TOUCH));
    printf("scenario backtrace root=scen_backtrace allocs=%ld\n", t_own - before);
}

// ---- e) fork --------------------------------------------------------------------------------
extern "C" NOINLINE void scen_fork()
{
    long before = t_own;
    static pid_t child, parent;
    parent = getpid();
    fflush(stdout);
    fflush(stderr);
    auto body = [] {
        touch();
        child = fork();
        if (child < 0) fail("fork", errno, 0);
        auto more = [] { touch(); };
        chain<4>(more); // both processes: down and up again, then up through chain<9>
        touch();
    };
    chain<9>(body);
    long mine = t_own - before;
    if (getpid() != parent) { // the child, back at the root through the thunked frames
        // (its count started in the parent: the way down and the touch before fork)
        _exit(mine == 2 * chain_left(9) + 3 * TOUCH + chain_allocs(4) ? 0 : 3);
    }
    int status = 0;
    pid_t w;
    do w = waitpid(child, &status, 0);
    while (w < 0 && errno == EINTR);
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    CHECK_EQ("fork: child exit", code, 0);
    CHECK_EQ("fork: allocations", mine, chain_allocs(9) + 2 * TOUCH + chain_allocs(4) + TOUCH);
    printf("scenario fork root=scen_fork allocs=%ld\n", mine);
}

// ---- d) threads -----------------------------------------------------------------------------
static pthread_barrier_t g_start;
static std::atomic<long> g_thread_allocs{0};
static long g_exit_guards;

// a ring of blocks from the producer to the consumer
static void *g_ring[64];
static int g_head, g_tail;
static pthread_mutex_t g_ring_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_ring_cond = PTHREAD_COND_INITIALIZER;
static const int PRODUCED = 300;

NOINLINE static void ring_put(void *p)
{
    pthread_mutex_lock(&g_ring_lock);
    while ((g_head + 1) % 64 == g_tail) pthread_cond_wait(&g_ring_cond, &g_ring_lock);
    g_ring[g_head] = p;
    g_head = (g_head + 1) % 64;
    pthread_cond_broadcast(&g_ring_cond);
    pthread_mutex_unlock(&g_ring_lock);
}

NOINLINE static void *ring_get()
{
    pthread_mutex_lock(&g_ring_lock);
    while (g_head == g_tail) pthread_cond_wait(&g_ring_cond, &g_ring_lock);
    void *p = g_ring[g_tail];
    g_tail = (g_tail + 1) % 64;
    pthread_cond_broadcast(&g_ring_cond);
    pthread_mutex_unlock(&g_ring_lock);
    return p;
}

struct ExitGuard { // destroyed by pthread_exit's forced unwinding: allocates there
    ~ExitGuard()
    {
        g_exit_guards++;
        touch();
        g_thread_allocs += TOUCH;
    }
};

template <int N> NOINLINE void exit_chain()
{
    ExitGuard g;
    touch();
    if constexpr (N == 0) {
        g_thread_allocs += t_own;
        pthread_exit((void *)0x1234);
    } else {
        exit_chain<N - 1>();
    }
    touch();
    KEEP();
}

extern "C" NOINLINE void *thr_main(void *arg)
{
    long role = (long)arg;
    pthread_barrier_wait(&g_start);
    void *result = nullptr;
    if (role == 0) { // allocates, returns a block that the main thread frees
        auto body = [] {
            for (int i = 0; i < 100; i++) touch();
        };
        chain<9>(body);
        result = app_malloc(100);
    } else if (role == 1) { // pthread_exit 10 frames down, destructors allocating
        auto body = [] {
            for (int i = 0; i < 50; i++) touch();
            exit_chain<9>();
        };
        chain<3>(body);
    } else if (role == 2) { // producer
        auto body = [] {
            for (int i = 0; i < PRODUCED; i++) {
                ring_put(app_malloc(64 + i % 32));
                if (i % 10 == 0) touch();
            }
        };
        chain<8>(body);
    } else { // consumer: frees the producer's blocks
        auto body = [] {
            for (int i = 0; i < PRODUCED; i++) {
                app_free(ring_get());
                if (i % 10 == 0) touch();
            }
        };
        chain<10>(body);
    }
    g_thread_allocs += t_own;
    return result;
}

extern "C" NOINLINE void scen_threads()
{
    long before = t_own;
    g_thread_allocs = 0;
    g_exit_guards = 0;
    pthread_barrier_init(&g_start, nullptr, 4);
    pthread_t th[4];
    for (long i = 0; i < 4; i++) pthread_create(&th[i], nullptr, thr_main, (void *)i);
    void *ret[4];
    for (int i = 0; i < 4; i++) pthread_join(th[i], &ret[i]);
    pthread_barrier_destroy(&g_start);
    CHECK_EQ("threads: pthread_exit value", (long)ret[1], 0x1234);
    if (!ret[0]) fail("threads: returned block", 0, 1);
    app_free(ret[0]); // freed by another thread than the one that allocated it
    CHECK_EQ("threads: exit guards", g_exit_guards, 10);
    long want = (chain_allocs(9) + 100 * TOUCH + 1) +                       // role 0
                (chain_left(3) + 50 * TOUCH + TOUCH * 10 + TOUCH * 10) +    // role 1
                (chain_allocs(8) + PRODUCED + TOUCH * (PRODUCED / 10)) +    // role 2
                (chain_allocs(10) + TOUCH * (PRODUCED / 10));               // role 3
    CHECK_EQ("threads: allocations", g_thread_allocs.load(), want);
    CHECK_EQ("threads: main thread allocations", t_own - before, 0);
    printf("scenario threads root=thr_main allocs=%ld\n", g_thread_allocs.load());
}

// ---- pthread_cancel ------------------------------------------------------------------------
// glibc's forced unwinding for a cancellation calls libgcc's _Unwind_ForcedUnwind through its
// own pointer, not through the symbol: the destructors of the frames must all run anyway.
static std::atomic<long> g_cancel_allocs{0};
static std::atomic<int> g_cancel_guards{0}, g_cancel_ready{0};
static pthread_t g_main_thread;

struct CancelGuard {
    ~CancelGuard()
    {
        g_cancel_guards++;
        touch();
        g_cancel_allocs += TOUCH;
    }
};

template <int N> NOINLINE void cancel_chain()
{
    CancelGuard g;
    touch();
    if constexpr (N == 0) {
        g_cancel_allocs += t_own;
        g_cancel_ready = 1;
        for (;;) pause(); // a cancellation point
    } else {
        cancel_chain<N - 1>();
    }
    touch();
    KEEP();
}

static void wait_ready()
{
    struct timespec ms = {0, 1000000};
    for (int i = 0; i < 2000 && !g_cancel_ready; i++) nanosleep(&ms, nullptr);
}

extern "C" NOINLINE void *cancel_thr(void *)
{
    cancel_chain<9>();
    return nullptr;
}

extern "C" NOINLINE void scen_cancel() // a thread cancelled 10 frames down
{
    g_cancel_allocs = 0;
    g_cancel_guards = 0;
    g_cancel_ready = 0;
    pthread_t t;
    pthread_create(&t, nullptr, cancel_thr, nullptr);
    wait_ready();
    pthread_cancel(t);
    void *ret = nullptr;
    pthread_join(t, &ret);
    CHECK_EQ("cancel: cancelled", ret == PTHREAD_CANCELED, 1);
    CHECK_EQ("cancel: destructors", g_cancel_guards.load(), 10);
    CHECK_EQ("cancel: allocations", g_cancel_allocs.load(), 2 * TOUCH * 10);
    printf("scenario cancel root=cancel_thr allocs=%ld\n", g_cancel_allocs.load());
}

// The main thread cancelled 10 frames down (only when named: it ends the program): the
// thread that cancelled it checks, prints and exits.
extern "C" NOINLINE void *main_canceller(void *)
{
    wait_ready();
    pthread_cancel(g_main_thread);
    pthread_join(g_main_thread, nullptr);
    CHECK_EQ("cancel_main: destructors", g_cancel_guards.load(), 10);
    CHECK_EQ("cancel_main: allocations", g_cancel_allocs.load(), 2 * TOUCH * 10);
    printf("scenario cancel_main root=scen_cancel_main allocs=%ld\n", g_cancel_allocs.load());
    printf(g_failures ? "heap_thunks: %d failures\n" : "heap_thunks: ok\n", g_failures);
    exit(g_failures ? 1 : 0);
}

extern "C" NOINLINE void scen_cancel_main()
{
    g_main_thread = pthread_self();
    pthread_t t;
    pthread_create(&t, nullptr, main_canceller, nullptr);
    cancel_chain<9>();
}

// ---- f) coroutine ---------------------------------------------------------------------------
static ucontext_t g_main_ctx, g_co_ctx;
static long g_co_allocs;
static volatile int g_co_done;
static const int SWITCHES = 20;

extern "C" NOINLINE void coro_entry()
{
    t_count = &g_co_allocs;
    auto body = [] {
        for (int i = 0; i < SWITCHES; i++) {
            touch();
            swapcontext(&g_co_ctx, &g_main_ctx);
            t_count = &g_co_allocs; // back on this stack
            touch();
        }
    };
    chain<8>(body);
    g_co_done = 1;
    t_count = nullptr; // uc_link: back to the main stack
}

extern "C" NOINLINE void scen_coroutine()
{
    long before = t_own;
    size_t size = 1 << 18;
    void *stack = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (stack == MAP_FAILED) {
        fail("coroutine: stack", errno, 0);
        return;
    }
    getcontext(&g_co_ctx);
    g_co_ctx.uc_stack.ss_sp = stack;
    g_co_ctx.uc_stack.ss_size = size;
    g_co_ctx.uc_link = &g_main_ctx;
    makecontext(&g_co_ctx, coro_entry, 0);
    static int resumed;
    resumed = 0;
    auto body = [] {
        while (!g_co_done) {
            touch();
            swapcontext(&g_main_ctx, &g_co_ctx);
            t_count = nullptr; // back on the thread's stack
            resumed++;
            touch();
        }
    };
    chain<9>(body);
    munmap(stack, size);
    CHECK_EQ("coroutine: switches", resumed, SWITCHES + 1);
    CHECK_EQ("coroutine: allocations on its stack", g_co_allocs,
             chain_allocs(8) + 2 * TOUCH * SWITCHES);
    CHECK_EQ("coroutine: allocations", t_own - before,
             chain_allocs(9) + 2 * TOUCH * (SWITCHES + 1));
    printf("scenario coroutine root=scen_coroutine allocs=%ld\n", t_own - before);
    printf("scenario coroutine-stack root=- allocs=%ld\n", g_co_allocs);
}

static const struct {
    const char *name;
    void (*run)();
} scenarios[] = {{"exceptions", scen_exceptions}, {"dtor_catch", scen_dtor_catch},
                 {"longjmp", scen_longjmp},       {"signals", scen_signals},
                 {"backtrace", scen_backtrace},   {"fork", scen_fork},
                 {"threads", scen_threads},       {"cancel", scen_cancel},
                 {"coroutine", scen_coroutine},   {"cancel_main", scen_cancel_main}};
static const int DEFAULT = 9; // all but cancel_main, which ends the program

// heap_thunks [SCENARIO...]: the scenarios named (in this order), default all
int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        int known = 0;
        for (const auto &sc : scenarios) known |= strcmp(argv[i], sc.name) == 0;
        if (!known) {
            fprintf(stderr, "heap_thunks: unknown scenario '%s'\n", argv[i]);
            return 2;
        }
    }
    for (const auto &sc : scenarios) {
        int run = argc == 1 && &sc - scenarios < DEFAULT;
        for (int i = 1; i < argc; i++) run |= strcmp(argv[i], sc.name) == 0;
        if (run) {
            sc.run();
            fflush(stdout);
        }
    }
    if (g_failures) {
        printf("heap_thunks: %d failures\n", g_failures);
        return 1;
    }
    printf("heap_thunks: ok\n");
    return 0;
}
