/* Data shared by the BPF programs (collector.bpf.c) and the daemon (kc_*.c) of
 * pathscope-kcollect.  The wire protocol towards the profiled processes is protocol.h; nothing
 * here is seen by them.
 *
 * Where the numbers live:
 *  - while a thread runs: its task storage (struct ps_kc_thread), read by the task iterator,
 *    which writes struct ps_kc_rec records;
 *  - once it has exited: the hash maps ps_kc_exited_sys and ps_kc_exited_threads, filled by
 *    the sched_process_exit program; every 250 ms the daemon moves what they hold into its
 *    own memory (kc_track.c: kc_harvest), so they only need room for the threads that exit
 *    in between, and forgets a process's numbers when the process is gone.
 */
#ifndef PS_KERNEL_COLLECTOR_H
#define PS_KERNEL_COLLECTOR_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif
#include "protocol.h"

/* One bit per tgid up to PID_MAX_LIMIT (2^22 on 64-bit), in .bss: 512 KiB. */
#define PS_KC_TGID_WORDS (1u << 16)
#define PS_KC_MAX_PROCS 4096          /* processes tracked at once */
#define PS_KC_MAX_EXITED_SYS 262144   /* (tgid, tid, nr) of exited threads */
#define PS_KC_MAX_EXITED_THREADS 65536
#define PS_KC_NR_RT_SIGRETURN 15      /* x86_64; checked against <asm/unistd_64.h> */

/* Pending time is packed into 33 bits of microseconds at most (PS_KVAL_*). */
#define PS_KC_MAX_PENDING_NS (PS_KVAL_MAX_TIME * 1000ull)

/* One syscall number in one thread.  pend_*: the part no signal has reported yet. */
struct ps_kc_sc {
    __u64 count;
    __u64 ns;
    __u64 pend_ns;
    __u32 pend_count;
    __u32 pad;
};

/* Per-thread state (task storage).  sig and period_ns are a copy of the process's entry in
 * ps_kc_procs, refreshed when cfg_epoch differs from the global one. */
struct ps_kc_thread {
    __u64 entry_ts;   /* ktime at sys_enter, 0 when no syscall is in flight */
    __u32 entry_nr;
    __u32 cfg_epoch;
    __u64 period_ns;
    __u64 handler;    /* signal only while this is the signal's handler (0: any) */
    __u32 sig;        /* 0: never signal this thread */
    __u32 flushed;    /* copied into the exited maps: the iterator skips it */
    __u64 off_ts;     /* ktime when switched out, 0 while on a CPU */
    __u32 off_runnable;
    __u32 off_pend_count; /* times switched out since the last off-CPU report */
    __u64 off_pend_ns;    /* time off the CPU not yet reported */
    __u64 off_period_ns;  /* report off-CPU time once this much is pending (0: never) */
    __u64 blocked_ns, runqueue_ns, switches, page_faults;
    struct ps_kc_sc sc[PS_NR_SYSCALLS];
};

/* ps_kc_procs: what a process asked for at registration, keyed by tgid. */
struct ps_kc_proc {
    __u32 sig;
    __u32 pad;
    __u64 period_ns;
    __u64 handler;    /* the handler's address in the process, 0: any handler will do */
    __u64 off_period_ns;
};

struct ps_kc_sys_key {
    __u32 tgid, tid, nr, pad;
};
struct ps_kc_sys_val {
    __u64 count, ns;
};
struct ps_kc_thread_key {
    __u32 tgid, tid;
};
#define PS_KC_NR_WORDS (PS_NR_SYSCALLS / 64)
struct ps_kc_thread_val {
    __u64 blocked_ns, runqueue_ns, switches, page_faults;
    /* the numbers this thread has entries for in ps_kc_exited_sys: a snapshot looks those up
     * instead of walking the whole map */
    __u64 nrs[PS_KC_NR_WORDS];
};

/* What the task iterator writes: per live thread one record with nr == PS_KC_REC_THREAD
 * (v: blocked_ns, runqueue_ns, switches, page_faults), then one per syscall number that has
 * completed at least once (v[0] count, v[1] ns). */
#define PS_KC_REC_THREAD 0xffffffffu
struct ps_kc_rec {
    __u32 tid;
    __u32 nr;
    __u64 v[4];
};

#endif
