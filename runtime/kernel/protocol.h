/* The contract between the node's eBPF collector (runtime/kernel/kc_*.c, the program
 * pathscope-kcollect) and the runtime inside each profiled process (runtime/kernel/kernel.c).
 *
 * Finding the collector.  One collector per node, user and batch job serves every profiled
 * process of that user (and job).  Its name is "pathscope-kernel-<uid>", followed by
 * "-job-<id>" inside a batch job (PS_KSOCK_FMT; SLURM_JOB_ID, PBS_JOBID, LSB_JOBID,
 * FLUX_JOB_ID, JOB_ID: a collector dies with the job that started it, so jobs sharing a node
 * must not share it).  Where it listens depends on the uid in the name:
 *   - uid 0: the unix stream socket PS_KSOCK_DIR/<name> (mode 0600), in a directory owned by
 *     root and writable by nobody else: no other user can take root's name, or connect;
 *   - any other uid: the abstract unix stream socket "\0<name>" (the user cannot write to
 *     PS_KSOCK_DIR, and has no directory every node is sure to offer).  Anybody can bind an
 *     abstract name first: the credential check below turns that into "no eBPF", never into
 *     talking to the squatter.
 * Binding the name is the election: a second collector finds it taken and exits with
 * PS_KCOLLECT_EXIT_LOST (for the filesystem socket, under flock() of the directory: a socket
 * file nobody listens on is a dead collector's, and is replaced).  A process that cannot
 * connect starts one:
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
 * Credentials, both ways (SO_PEERCRED, taken at connect/listen time by the kernel):
 *   - the process checks the listener right after connect, before it sends anything (its
 *     registration holds the address of its signal handler): uid 0, or its own uid unless it
 *     runs set-uid (real and effective uids differ).  Anything else is not a collector.
 *   - the collector serves its own uid and root; any other peer gets one line "error
 *     permission denied: ..." and is closed at once, never kept.  A connection that has not
 *     registered within PS_KCOLLECT_REGISTER_MS (and whose process is not tracked through
 *     another one) is closed; connections never keep the collector alive, tracked
 *     processes do.
 *
 * Bounds on the process's side: an answer line is at most PS_KLINE_MAX bytes; the answer to
 * "register" must arrive within PS_KREGISTER_MS (a collector still loading its programs
 * answers late), a whole snapshot within PS_KSNAPSHOT_MS, both deadlines taken once (a
 * collector trickling bytes does not extend them); at most PS_KSNAPSHOT_MAX bytes of a
 * snapshot are kept and PS_KSNAPSHOT_READ_MAX read.  Every field is checked (below); a
 * snapshot that does not end with its kend line within those bounds is dropped whole.
 *
 * Messages are text lines ending in '\n'.  The process sends:
 *
 *   "register <signal> <period_ns> [<handler> [<offcpu_period_ns>]]\n"
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
 *       offcpu_period_ns (optional, 0 if absent: never): per thread, a signal is also sent
 *       once the time the thread spent off the CPU (blocked or preempted) and not yet
 *       reported reaches offcpu_period_ns.  It is sent when the thread returns to user space
 *       after running again, where it stopped: at the exit of the syscall it was in, or at
 *       the switch back to it when it was preempted outside a syscall (never while a syscall
 *       is under way: the signal would interrupt it).  Its value has PS_KVAL_NR_OFFCPU as the
 *       number, the times switched out as the count and the off-CPU time as the time.  A
 *       syscall's report and an off-CPU report due at the same exit are two signals, queued
 *       in that order (the only case where a report is sent while one is pending).
 *     Answer: "ok signals\n" (paths by signals), "ok nosignals\n" (the kernel cannot
 *     send signals with a value: per-thread tables only), or "error <reason>\n".
 *
 *   "snapshot\n"
 *       Everything measured so far for the sender's process (registered on this connection
 *       or another).  Answer: lines in the rank-file format (docs/format.md), copied into
 *       the rank file unchanged once checked, in this order:
 *         "ksys\t<tid>\t<syscall name>\t<count>\t<ns>\n"        per thread and syscall
 *         "kthread\t<tid>\t<blocked_ns>\t<runqueue_ns>\t<switches>\t<user_page_faults>\n"
 *         "kend\t<missed_exits>\t<dropped>\n"                     the last line
 *       Threads that have exited are included.  Syscall names come from the kernel headers'
 *       __NR_ table ("syscall_<nr>" if unknown).  Order: the ksys lines by tid, then by
 *       syscall number, each (tid, number) once; then the kthread lines by tid, each once;
 *       then kend.  Numbers are decimal, without sign.  The process drops (and counts) lines
 *       out of that order, of threads that are not its own (neither known to pathscope nor
 *       alive in /proc/self/task), with unknown syscall names, or with numbers beyond what
 *       its lifetime allows (count, ns, switches, faults <= its age in ns + 1 s; kend's
 *       node-wide counters < 2^53).  missed_exits: syscall exits without a seen entry
 *       (syscalls in flight at registration); dropped: events lost (map full, no storage):
 *       reported, never hidden.
 *
 * The collector stops tracking a process when it exits (pidfd) and exits itself when it has
 * tracked nobody for PS_KCOLLECT_LINGER_MS (connections do not count, except one less than
 * PS_KCOLLECT_REGISTER_MS old that may still register), removing and closing its listening
 * socket first (a process that connects in that window sees its connection reset and starts
 * a new collector).
 *
 * The signal's value (si_value.sival_ptr, si_code SI_KERNEL) packs one report: */
#ifndef PS_KERNEL_PROTOCOL_H
#define PS_KERNEL_PROTOCOL_H

#define PS_KSOCK_FMT "pathscope-kernel-%u"      /* the name (see above for where it lives) */
#define PS_KSOCK_DIR "/run/pathscope"          /* root's collectors' sockets */
#define PS_KSOCK_JOB "-job-"                   /* then the job id, [A-Za-z0-9._-], <= 64 */
#define PS_KCOLLECT_NAME "pathscope-kcollect"  /* next to libpathscope.so */
#define PS_KCOLLECT_EXIT_FAILED 1
#define PS_KCOLLECT_EXIT_LOST 3
#define PS_KCOLLECT_LINGER_MS 500
#define PS_KCOLLECT_REGISTER_MS 2000           /* a connection must register within it */
#define PS_KLINE_MAX 256                       /* longest answer line, '\n' included */
#define PS_KREGISTER_MS 10000                  /* the answer to register, from connect */
#define PS_KSNAPSHOT_MS 5000                   /* a whole snapshot, from the request */
#define PS_KSNAPSHOT_MAX (16u << 20)           /* bytes of snapshot lines kept */
#define PS_KSNAPSHOT_READ_MAX (64u << 20)      /* bytes read before giving up on a snapshot */
#define PS_NR_SYSCALLS 512                     /* x86_64 syscall numbers are below 512 */

/* value bits: [0,10) syscall number; [10] unit of the time field (0 ns, 1 us);
 * [11,31) count of calls (20 bits); [31,64) time (33 bits). */
#define PS_KVAL_NR(v) ((unsigned)((v) & 0x3ff))
#define PS_KVAL_COUNT(v) ((unsigned)(((v) >> 11) & 0xfffff))
#define PS_KVAL_NS(v) (((v) >> 31) * (((v) >> 10) & 1 ? 1000ull : 1ull))
#define PS_KVAL_MAX_COUNT 0xfffffu
#define PS_KVAL_NR_OFFCPU 0x3ffu   /* an off-CPU report, not a syscall (>= PS_NR_SYSCALLS) */
#define PS_KVAL_MAX_TIME ((1ull << 33) - 1)
#endif
