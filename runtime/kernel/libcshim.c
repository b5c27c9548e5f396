/* libpathscope-kernel.so: the in-process source of kernel time (kernel.h).  Preloaded with
 * `pathscope run --kernel` (PATHSCOPE_KERNEL auto or libc), so that without it the
 * application's libc calls are not touched.  Every function here passes straight through
 * until libpathscope.so activates it (only when eBPF is not used): then each call is timed
 * with the clock pathscope uses and handed over with its caller's frame.
 *
 * What this cannot see: system calls the C library makes internally (printf's write, the
 * loader's mmap), calls through syscall(2) and inline system calls; the eBPF source sees all
 * of them.  Only the functions below leave this library (libcshim.map). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "kernel.h"
#include "../core/caller.h"

typedef void (*core_fn)(int, uint64_t, const uintptr_t *);
static core_fn volatile core; /* NULL: pass through */
static int use_tsc;
static __thread int depth __attribute__((tls_model("initial-exec")));

/* called by libpathscope.so when the libc source is the one in use */
void pathscope_kernel_shim_init(core_fn fn, int tsc)
{
    use_tsc = tsc;
    core = fn;
}

static void *resolve(const char *name)
{
    void *p = dlsym(RTLD_NEXT, name);
    if (!p) { /* cannot happen with a C library that has the function: fail like a missing one */
        static const char msg[] = "pathscope: libpathscope-kernel.so: a libc function is missing\n";
        syscall(SYS_write, 2, msg, sizeof msg - 1);
        syscall(SYS_exit_group, 127);
    }
    return p;
}

static inline uint64_t now(void)
{
    if (use_tsc) {
        uint32_t lo, hi;
        __asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
        return ((uint64_t)hi << 32) | lo;
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void done(int id, uint64_t t0, const uintptr_t *caller)
{
    int saved = errno;
    depth++; /* pathscope's own calls (the unwinder reading /proc) pass through */
    core(id, t0, caller);
    depth--;
    errno = saved;
}

/* Every wrapper's C library function, resolved at load time (shim_resolve_all): a lazy
 * dlsym inside an application's signal handler (write() is async-signal-safe, and often the
 * first call of it) could deadlock on the loader's lock.  Each WRAP puts its entry into the
 * section ps_kshim, which the constructor walks. */
typedef struct {
    const char *name;
    void *volatile *slot;
} shim_entry_t;

#define SHIM_ENTRY(name)                                                                    \
    static void *volatile real_##name;                                                      \
    static const shim_entry_t entry_##name                                                  \
        __attribute__((used, section("ps_kshim"), aligned(sizeof(void *)))) = {#name,        \
                                                                              &real_##name}

/* The real function, resolved now if the constructor has not run yet (a call from another
 * library's constructor). */
#define REAL(name, type)                                                                    \
    ((type)(__builtin_expect(real_##name != NULL, 1) ? real_##name                          \
                                                     : (real_##name = resolve(#name))))

/* One interposed function: name with parameter list params and argument list args, under
 * the profile's name of id. */
#define WRAP(id, ret, name, params, args)                                                   \
    SHIM_ENTRY(name);                                                                       \
    ret name params                                                                         \
    {                                                                                       \
        ret(*real) params = REAL(name, ret(*) params);                                      \
        if (__builtin_expect(!core || depth, 1)) return real args;                          \
        PS_CALLER(c_);                                                                      \
        uint64_t t0_ = now();                                                               \
        ret r_ = real args;                                                                 \
        done(PS_KLIBC_##id, t0_, c_);                                                       \
        return r_;                                                                          \
    }

WRAP(read, ssize_t, read, (int fd, void *b, size_t n), (fd, b, n))
WRAP(write, ssize_t, write, (int fd, const void *b, size_t n), (fd, b, n))
WRAP(pread, ssize_t, pread, (int fd, void *b, size_t n, off_t o), (fd, b, n, o))
WRAP(pread, ssize_t, pread64, (int fd, void *b, size_t n, off64_t o), (fd, b, n, o))
WRAP(pwrite, ssize_t, pwrite, (int fd, const void *b, size_t n, off_t o), (fd, b, n, o))
WRAP(pwrite, ssize_t, pwrite64, (int fd, const void *b, size_t n, off64_t o), (fd, b, n, o))
WRAP(readv, ssize_t, readv, (int fd, const struct iovec *v, int n), (fd, v, n))
WRAP(writev, ssize_t, writev, (int fd, const struct iovec *v, int n), (fd, v, n))
WRAP(creat, int, creat, (const char *p, mode_t m), (p, m))
WRAP(creat, int, creat64, (const char *p, mode_t m), (p, m))
WRAP(close, int, close, (int fd), (fd))
WRAP(fsync, int, fsync, (int fd), (fd))
WRAP(fdatasync, int, fdatasync, (int fd), (fd))
WRAP(lseek, off_t, lseek, (int fd, off_t o, int w), (fd, o, w))
WRAP(lseek, off64_t, lseek64, (int fd, off64_t o, int w), (fd, o, w))
WRAP(stat, int, stat, (const char *restrict p, struct stat *restrict s), (p, s))
WRAP(stat, int, stat64, (const char *restrict p, struct stat64 *restrict s), (p, s))
WRAP(fstat, int, fstat, (int fd, struct stat *s), (fd, s))
WRAP(fstat, int, fstat64, (int fd, struct stat64 *s), (fd, s))
WRAP(lstat, int, lstat, (const char *restrict p, struct stat *restrict s), (p, s))
WRAP(lstat, int, lstat64, (const char *restrict p, struct stat64 *restrict s), (p, s))
WRAP(fstatat, int, fstatat, (int d, const char *restrict p, struct stat *restrict s, int f), (d, p, s, f))
WRAP(fstatat, int, fstatat64, (int d, const char *restrict p, struct stat64 *restrict s, int f), (d, p, s, f))
WRAP(statx, int, statx, (int d, const char *restrict p, int f, unsigned m, struct statx *restrict s), (d, p, f, m, s))
WRAP(access, int, access, (const char *p, int m), (p, m))
WRAP(unlink, int, unlink, (const char *p), (p))
WRAP(mkdir, int, mkdir, (const char *p, mode_t m), (p, m))
WRAP(ftruncate, int, ftruncate, (int fd, off_t l), (fd, l))
WRAP(ftruncate, int, ftruncate64, (int fd, off64_t l), (fd, l))
WRAP(nanosleep, int, nanosleep, (const struct timespec *r, struct timespec *m), (r, m))
WRAP(clock_nanosleep, int, clock_nanosleep, (clockid_t c, int f, const struct timespec *r, struct timespec *m), (c, f, r, m))
WRAP(usleep, int, usleep, (useconds_t u), (u))
WRAP(sleep, unsigned, sleep, (unsigned s), (s))
WRAP(poll, int, poll, (struct pollfd *p, nfds_t n, int t), (p, n, t))
WRAP(ppoll, int, ppoll, (struct pollfd *p, nfds_t n, const struct timespec *t, const sigset_t *s), (p, n, t, s))
WRAP(select, int, select, (int n, fd_set *restrict r, fd_set *restrict w, fd_set *restrict e, struct timeval *restrict t), (n, r, w, e, t))
WRAP(pselect, int, pselect, (int n, fd_set *restrict r, fd_set *restrict w, fd_set *restrict e, const struct timespec *restrict t, const sigset_t *restrict s), (n, r, w, e, t, s))
WRAP(epoll_wait, int, epoll_wait, (int fd, struct epoll_event *e, int n, int t), (fd, e, n, t))
WRAP(epoll_pwait, int, epoll_pwait, (int fd, struct epoll_event *e, int n, int t, const sigset_t *s), (fd, e, n, t, s))
WRAP(mmap, void *, mmap, (void *a, size_t n, int p, int f, int fd, off_t o), (a, n, p, f, fd, o))
WRAP(mmap, void *, mmap64, (void *a, size_t n, int p, int f, int fd, off64_t o), (a, n, p, f, fd, o))
WRAP(munmap, int, munmap, (void *a, size_t n), (a, n))
WRAP(mprotect, int, mprotect, (void *a, size_t n, int p), (a, n, p))
WRAP(madvise, int, madvise, (void *a, size_t n, int adv), (a, n, adv))
WRAP(sched_yield, int, sched_yield, (void), ())
WRAP(getppid, pid_t, getppid, (void), ())
WRAP(getpid, pid_t, getpid, (void), ())
WRAP(send, ssize_t, send, (int fd, const void *b, size_t n, int f), (fd, b, n, f))
WRAP(sendto, ssize_t, sendto, (int fd, const void *b, size_t n, int f, __CONST_SOCKADDR_ARG a, socklen_t l), (fd, b, n, f, a, l))
WRAP(sendmsg, ssize_t, sendmsg, (int fd, const struct msghdr *m, int f), (fd, m, f))
WRAP(recv, ssize_t, recv, (int fd, void *b, size_t n, int f), (fd, b, n, f))
WRAP(recvfrom, ssize_t, recvfrom, (int fd, void *restrict b, size_t n, int f, __SOCKADDR_ARG a, socklen_t *restrict l), (fd, b, n, f, a, l))
WRAP(recvmsg, ssize_t, recvmsg, (int fd, struct msghdr *m, int f), (fd, m, f))
WRAP(accept, int, accept, (int fd, __SOCKADDR_ARG a, socklen_t *restrict l), (fd, a, l))
WRAP(connect, int, connect, (int fd, __CONST_SOCKADDR_ARG a, socklen_t l), (fd, a, l))

/* The variadic ones: the optional argument is read when the flags say it is there. */
static inline int open_needs_mode(int flags)
{
    return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE;
}

#define WRAP_OPEN(name, id, params, args, flagvar)                                          \
    SHIM_ENTRY(name);                                                                       \
    int name params                                                                         \
    {                                                                                       \
        int (*real)(PS_OPEN_PARAMS_##id) = REAL(name, int (*)(PS_OPEN_PARAMS_##id));        \
        mode_t mode = 0;                                                                    \
        if (open_needs_mode(flagvar)) {                                                     \
            va_list ap;                                                                     \
            va_start(ap, flagvar);                                                          \
            mode = (mode_t)va_arg(ap, int);                                                 \
            va_end(ap);                                                                     \
        }                                                                                   \
        if (__builtin_expect(!core || depth, 1)) return real args;                          \
        PS_CALLER(c_);                                                                      \
        uint64_t t0_ = now();                                                               \
        int r_ = real args;                                                                 \
        done(PS_KLIBC_##id, t0_, c_);                                                       \
        return r_;                                                                          \
    }
#define PS_OPEN_PARAMS_open const char *, int, ...
#define PS_OPEN_PARAMS_openat int, const char *, int, ...
WRAP_OPEN(open, open, (const char *p, int flags, ...), (p, flags, mode), flags)
WRAP_OPEN(open64, open, (const char *p, int flags, ...), (p, flags, mode), flags)
WRAP_OPEN(openat, openat, (int d, const char *p, int flags, ...), (d, p, flags, mode), flags)
WRAP_OPEN(openat64, openat, (int d, const char *p, int flags, ...), (d, p, flags, mode), flags)

SHIM_ENTRY(ioctl);
int ioctl(int fd, unsigned long request, ...)
{
    int (*real)(int, unsigned long, ...) = REAL(ioctl, int (*)(int, unsigned long, ...));
    va_list ap;
    va_start(ap, request);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    if (__builtin_expect(!core || depth, 1)) return real(fd, request, arg);
    PS_CALLER(c_);
    uint64_t t0 = now();
    int r = real(fd, request, arg);
    done(PS_KLIBC_ioctl, t0, c_);
    return r;
}

/* The fortified entry points (_FORTIFY_SOURCE, the default of several distributions'
 * compilers) under the names of the functions they check. */
WRAP(read, ssize_t, __read_chk, (int fd, void *b, size_t n, size_t bl), (fd, b, n, bl))
WRAP(pread, ssize_t, __pread_chk, (int fd, void *b, size_t n, off_t o, size_t bl), (fd, b, n, o, bl))
WRAP(pread, ssize_t, __pread64_chk, (int fd, void *b, size_t n, off64_t o, size_t bl), (fd, b, n, o, bl))
WRAP(recv, ssize_t, __recv_chk, (int fd, void *b, size_t n, size_t bl, int f), (fd, b, n, bl, f))
WRAP(recvfrom, ssize_t, __recvfrom_chk, (int fd, void *restrict b, size_t n, size_t bl, int f, __SOCKADDR_ARG a, socklen_t *restrict l), (fd, b, n, bl, f, a, l))
WRAP(poll, int, __poll_chk, (struct pollfd *p, nfds_t n, int t, size_t pl), (p, n, t, pl))
WRAP(ppoll, int, __ppoll_chk, (struct pollfd *p, nfds_t n, const struct timespec *t, const sigset_t *s, size_t pl), (p, n, t, s, pl))
WRAP(open, int, __open_2, (const char *p, int f), (p, f))
WRAP(open, int, __open64_2, (const char *p, int f), (p, f))
WRAP(openat, int, __openat_2, (int d, const char *p, int f), (d, p, f))
WRAP(openat, int, __openat64_2, (int d, const char *p, int f), (d, p, f))

extern const shim_entry_t __start_ps_kshim[], __stop_ps_kshim[];

__attribute__((constructor)) static void shim_resolve_all(void)
{
    for (const shim_entry_t *e = __start_ps_kshim; e < __stop_ps_kshim; e++)
        if (!*e->slot) *e->slot = resolve(e->name);
}
