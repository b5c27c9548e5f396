/* Time in the operating-system kernel (PATHSCOPE_KERNEL), per thread and per call path.
 *
 * Two sources, one representation.  Either the node's eBPF collector (pathscope-kcollect,
 * protocol.h) counts every system call of every thread of the process exactly and, now and
 * then, signals the thread right after a syscall with what it has not yet reported, so that
 * the runtime's own unwinder puts that time on the call path that made the call; or, where
 * eBPF is not allowed, libpathscope-kernel.so interposes the libc functions below, times them
 * in the process and attributes them the same way.  Either way a system call (or libc
 * function) appears as a leaf of kind PS_NODE_SYSCALL below the frames that called the
 * function making it, and every thread gets an exact table (syscall | count | time).
 *
 * Attribution is sampled by time: per thread and call, once the time not yet attributed
 * reaches PATHSCOPE_KERNEL_PERIOD microseconds (and at the first call), it all goes to the
 * path of the call that crossed the threshold.  Period 0 attributes every call: exact.
 * What no report carried (the calls after a thread's last report of a system call) is spread
 * at the end of the run over the paths that thread's reports of it reached, in proportion,
 * and marked as estimated (kernel_estimate.c).
 */
#ifndef PS_KERNEL_H
#define PS_KERNEL_H
#include <stdint.h>
#include "../core/cct.h"
#include "../core/pathscope.h"
#include "protocol.h"

/* The libc functions of the in-process source: X(symbol-id, "name in the profile"). */
#define PS_KLIBC_FUNCTIONS(X)                                                               \
    X(read, "read") X(write, "write") X(pread, "pread") X(pwrite, "pwrite")                 \
    X(readv, "readv") X(writev, "writev") X(open, "open") X(openat, "openat")               \
    X(creat, "creat") X(close, "close") X(fsync, "fsync") X(fdatasync, "fdatasync")         \
    X(lseek, "lseek") X(stat, "stat") X(fstat, "fstat") X(lstat, "lstat")                   \
    X(fstatat, "fstatat") X(statx, "statx") X(access, "access") X(unlink, "unlink")         \
    X(mkdir, "mkdir") X(ftruncate, "ftruncate") X(ioctl, "ioctl")                          \
    X(nanosleep, "nanosleep") X(clock_nanosleep, "clock_nanosleep") X(usleep, "usleep")     \
    X(sleep, "sleep") X(poll, "poll") X(ppoll, "ppoll") X(select, "select")                 \
    X(pselect, "pselect") X(epoll_wait, "epoll_wait") X(epoll_pwait, "epoll_pwait")         \
    X(mmap, "mmap") X(munmap, "munmap") X(mprotect, "mprotect") X(madvise, "madvise")       \
    X(sched_yield, "sched_yield") X(getppid, "getppid") X(getpid, "getpid")                 \
    X(send, "send") X(sendto, "sendto") X(sendmsg, "sendmsg") X(recv, "recv")               \
    X(recvfrom, "recvfrom") X(recvmsg, "recvmsg") X(accept, "accept") X(connect, "connect")

enum {
#define PS_KLIBC_ENUM(id, name) PS_KLIBC_##id,
    PS_KLIBC_FUNCTIONS(PS_KLIBC_ENUM)
#undef PS_KLIBC_ENUM
    PS_KLIBC_N
};
/* Node keys: syscall numbers (eBPF) below PS_NR_SYSCALLS, libc functions from PS_KLIBC_KEY. */
#define PS_KLIBC_KEY 4096

enum { PS_KSRC_OFF, PS_KSRC_EBPF, PS_KSRC_LIBC };
extern int ps_kernel_source;

/* Per thread and libc function (libc source): exact totals and what is not yet attributed. */
typedef struct ps_kstat {
    uint64_t count, ticks;
    uint64_t pend_count, pend_ticks;
} ps_kstat_t;

/* Per thread and syscall number (eBPF): what reports that reached no path carried (the thread
 * was inside pathscope, or the call was pathscope's own): kept off the estimates. */
typedef struct ps_kdrop {
    uint64_t count, ns;
} ps_kdrop_t;

/* An estimate the rank file added to a syscall node (kernel_estimate.c): undone before the
 * next write recomputes it. */
typedef struct ps_kest {
    uint32_t node;
    uint64_t count, time; /* time: the node's unit (ns eBPF, ticks libc) */
} ps_kest_t;

/* At load time, in the process pathscope profiles (target) or not: connects to or starts the
 * node's collector, or activates the libc wrappers (shim_loaded: libpathscope-kernel.so is
 * preloaded).  Returns NULL, or an error for one line ("PATHSCOPE_KERNEL=ebpf: ..."); *note
 * is set to the reason eBPF was not used when auto fell back to libc (printed once by the
 * caller). */
const char *ps_kernel_init(int target, int shim_loaded, const char **note);
void ps_kernel_after_fork(void); /* in a fork child: not ours to report [signal-safe] */
/* The name of a syscall leaf's key. [signal-safe] */
const char *ps_kernel_key_name(uintptr_t key, char buf[24]);
/* A thread's end, in the thread: its own resource usage. [signal-safe] */
void ps_kernel_thread_end(ps_thread_t *t);
/* Before a rank file's warnings are written: asks the collector for this process's tables
 * (eBPF), within the bounds of protocol.h; what goes wrong becomes a warning. [signal-safe] */
void ps_kernel_fetch(void);
/* Rank-file lines: kernel, ksys, kthread, kos, kend (docs/format.md); the tables ps_kernel_fetch
 * got. [signal-safe] */
void ps_kernel_write(ps_fmt_t *f);
uint64_t ps_kernel_node_ns(const ps_node_t *n); /* a syscall node's time, ns [signal-safe] */
/* The eBPF snapshot's checked lines (ps_kernel_fetch), NULL when its tables did not arrive;
 * and the number of a syscall named s[0..n), -1 if none. [signal-safe] */
const char *ps_kernel_snapshot(size_t *len);
int ps_kernel_syscall_number(const char *s, size_t n);
/* The trees frozen, before a rank file's call paths are written: spreads what no report
 * carried over the reported paths (kernel_estimate.c); then, per thread after its node lines,
 * the knode lines that say how much of each syscall node is estimated. [signal-safe] */
void ps_kernel_estimate(void);
void ps_kernel_write_estimates(ps_fmt_t *f, ps_thread_t *t);
#endif
