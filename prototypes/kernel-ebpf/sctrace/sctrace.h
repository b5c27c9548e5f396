/* Shared between sctrace.bpf.c and sctrace.c */
#ifndef SCTRACE_H
#define SCTRACE_H
#define NR_SC 512            /* x86_64 syscall numbers are < 512 */
#define TGID_BITS_WORDS 65536 /* bitmap for pid_max up to 4,194,304 (PID_MAX_LIMIT) */
#define MAX_STACK 64

struct sc_stat { __u64 count, ns; };

/* per-thread state (task storage): entry timestamp + (optionally) all per-syscall totals */
struct tstate {
    __u64 ts;             /* entry timestamp of the current syscall, 0 = none */
    __u32 nr;             /* syscall number at entry */
    __s32 stackid;        /* user stack id at entry (with_stack) */
    __u64 off_ts;         /* switched out at */
    __u32 off_runnable;   /* switched out while runnable (preempted) */
    __u32 tgid;
    __u64 offcpu_ns, runq_ns, nswitch, pf_user;
    __u64 acc_ns, acc_cnt, seq;   /* syscall time since the last signal sample */
    struct sc_stat sc[NR_SC];
};

struct entry { __u64 ts; __u32 nr; __s32 stackid; };   /* per-tid hash variant */
struct sc_key { __u32 tid; __u32 nr; __s32 stackid; __u32 tgid; };
struct thread_tot { __u32 tgid; __u32 pad; __u64 offcpu_ns, runq_ns, nswitch, pf_user; };
struct sample_key { __u32 tid; __u32 seq; };
struct sc_sample { __u32 nr; __u32 pad; __u64 ns, count; };
#endif
