/* Writing probes into the text of the running process (docs/design-probes.md section 2).
 *
 * A probe replaces LEN bytes at a function's entry with `jmp rel32` to its trampoline (then
 * int3 filler).  Text is written through /proc/self/mem (a forced copy-on-write: the page's
 * protection never changes), else by mprotect R|W|X, write, restore.  With one thread the
 * bytes are written at once.  With more, no thread is stopped; the bytes change int3 first,
 * as the kernel's text_poke_bp:
 *   1. 0xCC at the site, membarrier SYNC_CORE: from now on a thread reaches the displaced
 *      bytes only if it was inside already;
 *   2. when they are more than one instruction: wait until no thread can be inside
 *      (/proc/self/task/TID/syscall and schedstat, wait_outside);
 *   3. bytes 1..LEN-1, sync; 4. byte 0, sync.
 * A thread meeting the int3 in between takes SIGTRAP; on_sigtrap moves it to where the new
 * code leads (the trampoline when adding, the relocated copy when removing).  Removal is the
 * same without step 2: no thread is ever inside a jmp.
 *
 * A thread that blocks SIGTRAP would die on the int3 (the kernel forces synchronous signals),
 * so a live write is refused while one exists.  Open MPI 4.1 and MPICH 4.0 helper threads
 * block nothing (measured, step 1 of the design).
 *
 * Once installed, the handler stays: the application's later sigaction/signal calls for
 * SIGTRAP are kept here instead of reaching the kernel (sample/sigprof.c interposes them;
 * keep_app_sigtrap below), and a trap that is not ours goes to the disposition the
 * application last set -- so an application that installs its own SIGTRAP handler, as
 * debuggers' helpers and some language runtimes do, neither loses its traps nor receives ours.
 *
 * Callers serialise ps_patch_add/remove.  on_sigtrap is async-signal-safe: it reads
 * ps_patches and one byte of text, and writes the interrupted context. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>

#include "pathscope.h"
#include "patch_internal.h"
#include "sample.h"
#include "unwind.h"

_Static_assert(offsetof(ps_patch_t, copy) == 0 && offsetof(ps_patch_t, enabled) == 8 &&
                   sizeof(ps_patch_t) == 72, "enter.S reads ps_patch_t with these offsets");

ps_patch_t ps_patches[PS_PROBE_MAX];
void (*ps_probe_entry_hook)(uint32_t id, uintptr_t *slot, uintptr_t rbp);
int ps_patch_writer_mprotect;

#define MAX_THREADS 4096
#define SCAN_LIMIT_MS 100
/* On a CPU this long since step 1: not stuck in the few displaced instructions.  Run time
 * grows only while the thread executes (a fault that sleeps for I/O adds none); the only way
 * to spend 200 µs of CPU there is a fault on a displaced instruction handled on the CPU that
 * long, which a prologue's stack and data accesses do not take (1 ms before: windows of tens
 * of ms on an oversubscribed node, where a thread gets its CPU time slowly). */
#define RUN_CLEARS_NS 200000
/* A thread may sit preempted inside the displaced instructions longer than SCAN_LIMIT_MS on a
 * crowded node (8 spinning threads beside other load on 2 cores: 0.5-1.7% of adds).  The
 * int3 is taken out again, the threads run on, and the window is opened anew after
 * RETRY_PAUSE_MS, up to WINDOW_TRIES times before the add is refused (unsafe-threads). */
#define WINDOW_TRIES 8
#define RETRY_PAUSE_MS 10
#define CANNOT_WRITE "/proc/self/mem and mprotect refused"

static struct {
    ps_ownfd_t mem;                 /* /proc/self/mem */
    int membarrier;                 /* 0 not tried, 1 registered, -1 unavailable */
    int sigtrap;                    /* the handler is installed */
    /* the application's disposition (before ours, then what it set since): app[app_cur],
     * written by keep_app_sigtrap into the other one, then switched */
    struct sigaction app[2];
    _Atomic int app_cur;
    uint32_t top;                   /* highest id ever added */
    _Atomic uint64_t traps;
    uint64_t windows, longest_window_ns, scan_waits;
} pt = {.mem = {.fd = -1}};

/* why = the refusal (a key, a space, the text): returns -1 for the caller to return. */
__attribute__((format(printf, 3, 4))) static int refuse(char *why, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, len, fmt, ap);
    va_end(ap);
    return -1;
}

static uint64_t monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(void)
{
    struct timespec ts = {0, 1000000};
    PS_RAW(SYS_nanosleep, &ts, 0);
}

/* ---- the SIGTRAP handler ---------------------------------------------------------------- */
/* The probe whose site is at addr (an active one first: its trampoline is the way in). */
static ps_patch_t *patch_at(uintptr_t addr)
{
    ps_patch_t *found = NULL;
    for (uint32_t i = 1; i <= pt.top; i++) {
        ps_patch_t *d = &ps_patches[i];
        if (d->site != addr || d->tramp == 0 || d->state == PS_PATCH_FREE) continue;
        if (d->state == PS_PATCH_ACTIVE) return d;
        found = d;
    }
    return found;
}

/* The application's SIGTRAP calls once our handler is installed (sample.h). [signal-safe] */
static int keep_app_sigtrap(const struct sigaction *act, struct sigaction *old)
{
    int cur = atomic_load(&pt.app_cur);
    if (old) *old = pt.app[cur];
    if (act) {
        pt.app[!cur] = *act;
        atomic_store(&pt.app_cur, !cur);
    }
    return 0;
}

/* A SIGTRAP that is not a probe's: what the application's disposition would have done, with
 * its mask and flags (SA_SIGINFO, SA_RESETHAND). */
static void chain_sigtrap(int sig, siginfo_t *si, void *uc)
{
    const struct sigaction *app = &pt.app[atomic_load(&pt.app_cur)];
    if (app->sa_handler != SIG_DFL && app->sa_handler != SIG_IGN) {
        struct sigaction handler = *app;
        if (handler.sa_flags & SA_RESETHAND) {
            struct sigaction dfl;
            memset(&dfl, 0, sizeof dfl);
            dfl.sa_handler = SIG_DFL;
            keep_app_sigtrap(&dfl, NULL);
        }
        sigset_t saved, mask = handler.sa_mask;
        if (!(handler.sa_flags & SA_NODEFER)) sigaddset(&mask, SIGTRAP);
        pthread_sigmask(SIG_BLOCK, &mask, &saved);
        if (handler.sa_flags & SA_SIGINFO) handler.sa_sigaction(sig, si, uc);
        else handler.sa_handler(sig);
        pthread_sigmask(SIG_SETMASK, &saved, NULL);
        return;
    }
    if (app->sa_handler == SIG_IGN && si->si_code <= 0) return; /* sent, not a trap */
    /* End as without us: default disposition, the signal again (delivered on return). */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    ps_sigprof_real_sigaction(SIGTRAP, &dfl, NULL);
    PS_RAW(SYS_tgkill, PS_RAW(SYS_getpid), PS_RAW(SYS_gettid), SIGTRAP);
}

/* An int3 leaves RIP after itself.  In a window (the site still holds 0xCC) the thread goes
 * where the new code will lead; after it, back to the site, which holds the finished code. */
static void on_sigtrap(int sig, siginfo_t *si, void *ucv)
{
    ucontext_t *uc = ucv;
    uintptr_t rip = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
    ps_patch_t *d = si->si_code == SI_KERNEL ? patch_at(rip - 1) : NULL;
    if (!d) {
        chain_sigtrap(sig, si, ucv);
        return;
    }
    atomic_fetch_add_explicit(&pt.traps, 1, memory_order_relaxed);
    uint8_t now = *(volatile const uint8_t *)(rip - 1);
    uintptr_t to = now != 0xcc ? rip - 1 : d->state == PS_PATCH_ACTIVE ? d->tramp : d->copy;
    uc->uc_mcontext.gregs[REG_RIP] = (greg_t)to;
}

/* Installed once and never removed: a thread trapped in a window may deliver after it.
 * SA_NODEFER: a thread in the handler would otherwise show SIGTRAP in SigBlk, and one
 * preempted there would make the next add refuse (unsafe-threads). */
static int sigtrap_install(void)
{
    if (pt.sigtrap) return 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigtrap;
    sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    if (ps_sigprof_real_sigaction(SIGTRAP, &sa, &pt.app[0]) != 0) return -1;
    atomic_store(&pt.app_cur, 0);
    ps_signal_keep_sigtrap(keep_app_sigtrap);
    pt.sigtrap = 1;
    return 0;
}

/* ---- writing text ----------------------------------------------------------------------- */
static int mem_fd(void)
{
    if (pt.mem.fd >= 0 && ps_fd_owned(&pt.mem)) return pt.mem.fd;
    int fd = (int)PS_RAW(SYS_open, "/proc/self/mem", O_RDWR | O_CLOEXEC);
    if (fd >= 0) ps_fd_adopt(fd, &pt.mem);
    return pt.mem.fd;
}

static int write_mprotect(uintptr_t addr, const uint8_t *src, size_t n)
{
    int prot;
    if (!ps_text_mapping(addr, n, &prot)) return -1;
    uintptr_t first = addr & ~(uintptr_t)4095, end = (addr + n + 4095) & ~(uintptr_t)4095;
    if (PS_RAW(SYS_mprotect, first, end - first, PROT_READ | PROT_WRITE | PROT_EXEC) != 0)
        return -1;
    /* (no signal handler of this thread may run the half-written bytes) */
    uint64_t all = ~(uint64_t)0, saved;
    PS_RAW(SYS_rt_sigprocmask, SIG_BLOCK, &all, &saved, 8);
    volatile uint8_t *dst = (volatile uint8_t *)addr;
    for (size_t i = 0; i < n; i++) dst[i] = src[i];
    PS_RAW(SYS_rt_sigprocmask, SIG_SETMASK, &saved, NULL, 8);
    return PS_RAW(SYS_mprotect, first, end - first, prot) == 0 ? 0 : -1;
}

/* One write of n bytes (n == 1: a single store, atomic for other threads). */
static int text_write(uintptr_t addr, const uint8_t *src, size_t n)
{
    if (!ps_patch_writer_mprotect) {
        int fd = mem_fd();
        if (fd >= 0 && PS_RAW(SYS_pwrite64, fd, src, n, addr) == (long)n) return 0;
        ps_patch_writer_mprotect = 1; /* proc_mem.force_override=never, or no /proc */
    }
    return write_mprotect(addr, src, n);
}

static int text_read(uintptr_t addr, uint8_t *dst, size_t n, int prot)
{
    int fd = mem_fd();
    if (fd >= 0 && PS_RAW(SYS_pread64, fd, dst, n, addr) == (long)n) return 0;
    if (!(prot & PROT_READ)) return -1;
    memcpy(dst, (const void *)addr, n);
    return 0;
}

static int sync_cores(void)
{
    return PS_RAW(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0) == 0 ? 0 : -1;
}

/* ---- the threads, from /proc/self/task ---------------------------------------------------- */
struct dirent64_raw {
    uint64_t ino;
    int64_t off;
    unsigned short reclen;
    unsigned char type;
    char name[];
};

/* The thread ids, at most max; the count (more than max: there are more), -1 unreadable. */
static int task_list(int *tids, int max)
{
    int fd = (int)PS_RAW(SYS_open, "/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -1;
    char buf[4096] __attribute__((aligned(8)));
    int n = 0;
    for (long got; (got = PS_RAW(SYS_getdents64, fd, buf, sizeof buf)) > 0;)
        for (long off = 0; off < got;) {
            const struct dirent64_raw *e = (const void *)(buf + off);
            off += e->reclen;
            if (e->name[0] < '0' || e->name[0] > '9') continue;
            if (n < max) tids[n] = (int)strtol(e->name, NULL, 10);
            n++;
        }
    PS_RAW(SYS_close, fd);
    return n;
}

/* /proc/self/task/TID/NAME into buf, NUL-terminated: its length, -1 if unreadable (-2: the
 * thread is gone). */
static long task_read(int tid, const char *name, char *buf, size_t cap)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/%s", tid, name);
    int fd = (int)PS_RAW(SYS_open, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return fd == -ENOENT || fd == -ESRCH ? -2 : -1;
    long n = PS_RAW(SYS_read, fd, buf, cap - 1);
    PS_RAW(SYS_close, fd);
    if (n < 0) return n == -ESRCH ? -2 : -1;
    buf[n] = '\0';
    return n;
}

static void task_comm(int tid, char *comm, size_t cap)
{
    if (task_read(tid, "comm", comm, cap) <= 0) snprintf(comm, cap, "?");
    comm[strcspn(comm, "\n")] = '\0';
}

/* A thread that blocks SIGTRAP (SigBlk bit 4): it would die on our int3.  0 if none.  Not
 * the calling thread: it unblocks SIGTRAP for the window (write_live). */
static int sigtrap_blocker_now(const int *tids, int n)
{
    char status[4096];
    int self = (int)PS_RAW(SYS_gettid);
    for (int i = 0; i < n; i++) {
        if (tids[i] == self || task_read(tids[i], "status", status, sizeof status) < 0) continue;
        const char *blk = strstr(status, "\nSigBlk:\t");
        if (blk && (strtoull(blk + 9, NULL, 16) >> (SIGTRAP - 1)) & 1) return tids[i];
    }
    return 0;
}

/* glibc blocks every signal in a thread while it starts and while it exits (pthread_create,
 * start_thread's end): microseconds, and such a thread is in glibc, not in a probed function.
 * So a blocker counts only if it still blocks SIGTRAP BLOCKER_TRIES ms later. */
#define BLOCKER_TRIES 10
static int sigtrap_blocker(const int *tids, int n)
{
    int tid = sigtrap_blocker_now(tids, n);
    for (int i = 0; tid && i < BLOCKER_TRIES; i++) {
        sleep_ms();
        tid = sigtrap_blocker_now(tids, n);
    }
    return tid;
}

/* ---- step 2: no thread inside the displaced bytes --------------------------------------- */
typedef struct {
    int tid, clear;
    uint64_t run0; /* schedstat run time at the first look (after the int3 was synced) */
} look_t;

static uint64_t run_ns(int tid)
{
    char buf[128];
    return task_read(tid, "schedstat", buf, sizeof buf) > 0 ? strtoull(buf, NULL, 10) : 0;
}

/* Clear: gone, blocked in a system call, stopped at a pc outside (site, site+len), or on a
 * CPU RUN_CLEARS_NS since the first look. */
static int thread_clear(look_t *t, uintptr_t site, size_t len, int first)
{
    char buf[256];
    long n = task_read(t->tid, "syscall", buf, sizeof buf);
    if (n == -2) return 1;
    if (n > 0 && strncmp(buf, "running", 7) != 0) {
        if (buf[0] != '-') return 1; /* "NR args sp pc": in a system call */
        const char *last = strrchr(buf, ' ');
        uintptr_t pc = last ? (uintptr_t)strtoull(last + 1, NULL, 16) : 0;
        if (last && (pc <= site || pc >= site + len)) return 1;
    }
    uint64_t run = run_ns(t->tid);
    if (first) t->run0 = run;
    return !first && run >= t->run0 + RUN_CLEARS_NS;
}

/* Waits until no thread can be inside (site, site+len); 0, or the tid of one that may be. */
static int wait_outside(uintptr_t site, size_t len)
{
    static int tids[MAX_THREADS];
    static look_t look[MAX_THREADS];
    int n = task_list(tids, MAX_THREADS), self = (int)PS_RAW(SYS_gettid), waiting = 0;
    for (int i = 0; i < n; i++) {
        look[i] = (look_t){tids[i], tids[i] == self, 0};
        if (!look[i].clear) look[i].clear = thread_clear(&look[i], site, len, 1);
        waiting += !look[i].clear;
    }
    uint64_t deadline = monotonic_ns() + SCAN_LIMIT_MS * 1000000ull; /* (wall time) */
    while (waiting && monotonic_ns() < deadline) {
        sleep_ms();
        pt.scan_waits++;
        waiting = 0;
        for (int i = 0; i < n; i++) {
            if (!look[i].clear) look[i].clear = thread_clear(&look[i], site, len, 0);
            waiting += !look[i].clear;
        }
    }
    for (int i = 0; i < n; i++)
        if (!look[i].clear) return look[i].tid;
    return 0;
}

/* ---- the protocol ------------------------------------------------------------------------- */
/* The window itself (write_live); the calling thread may meet the int3 too, in a libc
 * function it calls while that function is being probed. */
static int write_window(uintptr_t site, const uint8_t *old, const uint8_t *new, size_t len,
                        int scan, char *why, size_t wlen);

/* Replaces the len bytes at site (now old[]) by new[] while other threads run.  0, or -1 with
 * why; on failure the site holds old[] again.  The calling thread unblocks SIGTRAP meanwhile
 * (the control thread blocks every signal). */
static int write_live(uintptr_t site, const uint8_t *old, const uint8_t *new, size_t len,
                      int scan, char *why, size_t wlen)
{
    uint64_t trap = (uint64_t)1 << (SIGTRAP - 1), saved;
    PS_RAW(SYS_rt_sigprocmask, SIG_UNBLOCK, &trap, &saved, 8);
    int rc = write_window(site, old, new, len, scan, why, wlen);
    PS_RAW(SYS_rt_sigprocmask, SIG_SETMASK, &saved, NULL, 8);
    return rc;
}

static int write_window(uintptr_t site, const uint8_t *old, const uint8_t *new, size_t len,
                        int scan, char *why, size_t wlen)
{
    static const uint8_t int3 = 0xcc;
    uint64_t t0;
    for (int attempt = 1;; attempt++) {
        t0 = monotonic_ns();
        pt.windows++;
        if (text_write(site, &int3, 1) != 0) {
            return refuse(why, wlen, "write-failed cannot write the text (%s)", CANNOT_WRITE);
        }
        sync_cores();
        int inside = scan ? wait_outside(site, len) : 0;
        if (!inside) break;
        text_write(site, old, 1);
        sync_cores();
        if (attempt == WINDOW_TRIES) {
            char comm[32];
            task_comm(inside, comm, sizeof comm);
            return refuse(why, wlen, "unsafe-threads thread %d (%s) may be inside the displaced "
                          "instructions", inside, comm);
        }
        for (int i = 0; i < RETRY_PAUSE_MS; i++) sleep_ms();
    }
    int bad = text_write(site + 1, new + 1, len - 1) != 0;
    sync_cores();
    bad |= text_write(site, new, 1) != 0;
    sync_cores();
    uint64_t took = monotonic_ns() - t0;
    if (took > pt.longest_window_ns) pt.longest_window_ns = took;
    return bad ? refuse(why, wlen, "write-failed cannot write the text (%s)", CANNOT_WRITE) : 0;
}

/* Checks the threads for a live write: 0 none other (write directly), 1 live, -1 refused. */
static int threads_ready(char *why, size_t len)
{
    static int tids[MAX_THREADS];
    int n = task_list(tids, MAX_THREADS);
    if (n == 1) return 0;
    if (n < 0 || n > MAX_THREADS)
        return refuse(why, len, "unsafe-threads cannot list the threads in /proc/self/task");
    int blocker = sigtrap_blocker(tids, n);
    if (blocker) {
        char comm[32];
        task_comm(blocker, comm, sizeof comm);
        return refuse(why, len, "unsafe-threads thread %d (%s) blocks SIGTRAP", blocker, comm);
    }
    if (pt.membarrier == 0) {
        long r = PS_RAW(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0);
        pt.membarrier = r == 0 ? 1 : -1;
    }
    if (pt.membarrier < 0)
        return refuse(why, len, "unsafe-threads membarrier SYNC_CORE is not available (Linux 4.16+)");
    if (sigtrap_install() != 0)
        return refuse(why, len, "unsafe-threads cannot install the SIGTRAP handler");
    return 1;
}

static int write_text(uintptr_t site, const uint8_t *old, const uint8_t *new, size_t len,
                      int scan, char *why, size_t wlen)
{
    int live = threads_ready(why, wlen);
    if (live < 0) return -1;
    if (live) return write_live(site, old, new, len, scan, why, wlen);
    if (text_write(site, new, len) == 0) return 0;
    return refuse(why, wlen, "write-failed cannot write the text (%s)", CANNOT_WRITE);
}

/* The jump to the trampoline, int3 filler after it. */
static void jump_bytes(const ps_patch_t *d, uint8_t *out)
{
    int32_t rel = (int32_t)(d->tramp - (d->site + 5));
    memset(out, 0xcc, d->len);
    out[0] = 0xe9;
    memcpy(out + 1, &rel, 4);
}

/* The refusals that need no writing. */
static int add_check(uint32_t id, const ps_probe_plan_t *plan, uintptr_t site, char *why,
                     size_t len)
{
    uint8_t now[PS_PROBE_MAX_DISPLACED];
    int prot;
    if (ps_unwind_in_self(site))
        return refuse(why, len, "own-code 0x%lx is in pathscope's own code", site);
    if (!ps_text_mapping(site, plan->len, &prot) || !(prot & PROT_EXEC) ||
        text_read(site, now, plan->len, prot) != 0)
        return refuse(why, len, "not-mapped no executable mapping holds 0x%lx", site);
    for (uint32_t i = 1; i <= pt.top; i++)
        if (i != id && ps_patches[i].state == PS_PATCH_ACTIVE && ps_patches[i].site == site)
            return refuse(why, len, "already-probed probe %u", i);
    if (memcmp(now, plan->orig, plan->len) != 0)
        return refuse(why, len, "code-differs the bytes at 0x%lx are not the plan's", site);
    const ps_patch_t *d = &ps_patches[id];
    if (d->tramp && d->site != site)
        return refuse(why, len, "bad-plan probe %u was another function's", id);
    return 0;
}

int ps_patch_add(uint32_t id, const ps_probe_plan_t *plan, uintptr_t bias, char *why, size_t len)
{
    if (id == 0 || id >= PS_PROBE_MAX)
        return refuse(why, len, "table-full probe ids are 1 to %d", PS_PROBE_MAX - 1);
    ps_patch_t *d = &ps_patches[id];
    uintptr_t site = (uintptr_t)plan->vaddr + plan->site + bias;
    if (d->state == PS_PATCH_ACTIVE) return refuse(why, len, "already-probed probe %u", id);
    if (add_check(id, plan, site, why, len) != 0) return -1;
    if (pt.top == 0) ps_xsave_choose(); /* for enter.S */
    if (id > pt.top) pt.top = id;
    if (!d->tramp || d->len != plan->len || memcmp(d->orig, plan->orig, plan->len) != 0) {
        if (d->tramp) return refuse(why, len, "bad-plan probe %u had other bytes", id);
        d->site = site; /* before the page is published: ps_patch_original_pc reads it */
        if (ps_tramp_build(id, plan, site, bias, d, why, len) != 0) return -1;
        d->len = plan->len;
        memcpy(d->orig, plan->orig, plan->len);
    }
    uint32_t before = d->state;
    uint8_t jump[PS_PROBE_MAX_DISPLACED];
    jump_bytes(d, jump);
    d->enabled = 1;
    __atomic_store_n(&d->state, PS_PATCH_ACTIVE, __ATOMIC_RELEASE);
    if (write_text(site, d->orig, jump, d->len, plan->ninsn > 1, why, len) == 0) return 0;
    d->state = before;
    return -1;
}

void ps_patch_enable(uint32_t id, int on)
{
    if (id > 0 && id < PS_PROBE_MAX) ps_patches[id].enabled = on != 0;
}

int ps_patch_remove(uint32_t id, char *why, size_t len)
{
    ps_patch_t *d = id > 0 && id < PS_PROBE_MAX ? &ps_patches[id] : NULL;
    if (!d || d->state != PS_PATCH_ACTIVE)
        return refuse(why, len, "not-probed probe %u is not installed", id);
    uint8_t jump[PS_PROBE_MAX_DISPLACED], now[PS_PROBE_MAX_DISPLACED];
    int prot;
    jump_bytes(d, jump);
    if (!ps_text_mapping(d->site, d->len, &prot) || text_read(d->site, now, d->len, prot) != 0)
        return refuse(why, len, "not-mapped no executable mapping holds 0x%lx", d->site);
    if (memcmp(now, jump, d->len) != 0)
        return refuse(why, len, "code-differs the bytes at 0x%lx are not our jump", d->site);
    __atomic_store_n(&d->state, PS_PATCH_RESTORED, __ATOMIC_RELEASE);
    if (write_text(d->site, jump, d->orig, d->len, 0, why, len) == 0) return 0;
    d->state = PS_PATCH_ACTIVE;
    return -1;
}

void ps_patch_stats(ps_patch_stats_t *s)
{
    s->traps = atomic_load_explicit(&pt.traps, memory_order_relaxed);
    s->windows = pt.windows;
    s->longest_window_ns = pt.longest_window_ns;
    s->scan_waits = pt.scan_waits;
    s->writer = ps_patch_writer_mprotect ? "mprotect" : "procmem";
}
