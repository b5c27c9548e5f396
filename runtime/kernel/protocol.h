/* The contract between the node's eBPF collector (runtime/kernel/collector.c, the program
 * pathscope-kcollect) and the runtime inside each profiled process (runtime/kernel/kernel.c).
 *
 * Finding the collector.  One collector per node, user and batch job serves every profiled
 * process of that user (and job): it listens on the abstract unix stream socket
 * "\0pathscope-kernel-<uid>", followed by "-job-<id>" inside a batch job (PS_KSOCK_FMT;
 * SLURM_JOB_ID, PBS_JOBID, LSB_JOBID, FLUX_JOB_ID, JOB_ID: a collector dies with the job
 * that started it, so jobs sharing a node must not share it).  Binding that name is the
 * election: a second collector gets EADDRINUSE and exits with PS_KCOLLECT_EXIT_LOST.  A
 * process that cannot connect starts one:
 *
 *     pathscope-kcollect --serve NAME     (stdin /dev/null, stdout a pipe, stderr inherited)
 *
 * which binds and listens, loads and attaches its BPF programs, and then either
 *   - forks: the child serves in its own session (setsid, stdio on /dev/null, every other
 *     inherited descriptor closed); the parent writes "ready\n" on stdout and exits 0, or
 *   - writes one line "<reason>\n" on stdout (no "pathscope:" prefix; e.g. "loading the BPF
 *     programs failed: Operation not permitted (needs root or CAP_BPF and CAP_PERFMON)") and
 *     exits PS_KCOLLECT_EXIT_FAILED, or
 *   - exits PS_KCOLLECT_EXIT_LOST (another collector won the name): connect again.
 *
 * Messages are text lines ending in '\n'.  The process sends:
 *
 *   "register <signal> <period_ns> [<handler>]\n"
 *       Track the sender (its pid from SO_PEERCRED, all its threads, present and future).
 *       signal: the real-time signal the collector may send to the sender's threads to
 *       attribute syscall time to call paths (0: never signal).  The collector signals a
 *       thread only while that signal has a handler (not SIG_DFL/SIG_IGN; with handler, the
 *       decimal address of the sender's own handler: exactly that one), is not blocked and
 *       is not already pending, so a process that execs, blocks it or installs a handler of
 *       its own over pathscope's is never hurt.
 *       period_ns: per thread and syscall number, a signal is sent once the time not yet
 *       reported reaches period_ns (0: after every syscall), and also at the first
 *       completion of each syscall number in each thread.
 *     Answer: "ok signals\n" (paths by signals), "ok nosignals\n" (the kernel cannot
 *     send signals with a value: per-thread tables only), or "error <reason>\n".
 *
 *   "snapshot\n"
 *       Everything measured so far for the sender's process.  Answer: lines in the rank-file
 *       format (docs/format.md), copied into the rank file unchanged, then "end" line:
 *         "ksys\t<tid>\t<syscall name>\t<count>\t<ns>\n"        per thread and syscall
 *         "kthread\t<tid>\t<blocked_ns>\t<runqueue_ns>\t<switches>\t<user_page_faults>\n"
 *         "kend\t<missed_exits>\t<dropped>\n"                     the last line
 *       Threads that have exited are included.  Syscall names come from the kernel headers'
 *       __NR_ table ("syscall_<nr>" if unknown).  missed_exits: syscall exits without a seen
 *       entry (syscalls in flight at registration); dropped: events lost (map full, no
 *       storage) — reported, never hidden.
 *
 * The collector stops tracking a process when it exits (pidfd) and exits itself when it has
 * tracked nobody for PS_KCOLLECT_LINGER_MS, closing its listening socket first (a process
 * that connects in that window sees its connection reset and starts a new collector).
 *
 * The signal's value (si_value.sival_ptr, si_code SI_KERNEL) packs one report: */
#ifndef PS_KERNEL_PROTOCOL_H
#define PS_KERNEL_PROTOCOL_H

#define PS_KSOCK_FMT "pathscope-kernel-%u"      /* abstract name, after a leading '\0' */
#define PS_KSOCK_JOB "-job-"                   /* then the job id, [A-Za-z0-9._-], <= 64 */
#define PS_KCOLLECT_NAME "pathscope-kcollect"  /* next to libpathscope.so */
#define PS_KCOLLECT_EXIT_FAILED 1
#define PS_KCOLLECT_EXIT_LOST 3
#define PS_KCOLLECT_LINGER_MS 500
#define PS_NR_SYSCALLS 512                     /* x86_64 syscall numbers are below 512 */

/* value bits: [0,10) syscall number; [10] unit of the time field (0 ns, 1 us);
 * [11,31) count of calls (20 bits); [31,64) time (33 bits). */
#define PS_KVAL_NR(v) ((unsigned)((v) & 0x3ff))
#define PS_KVAL_COUNT(v) ((unsigned)(((v) >> 11) & 0xfffff))
#define PS_KVAL_NS(v) (((v) >> 31) * (((v) >> 10) & 1 ? 1000ull : 1ull))
#define PS_KVAL_MAX_COUNT 0xfffffu
#define PS_KVAL_MAX_TIME ((1ull << 33) - 1)
#endif
