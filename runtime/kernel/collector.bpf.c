/* The BPF side of pathscope-kcollect: syscall counts and times, off-CPU time and user page
 * faults per thread of the registered processes, and signals that let a process attribute its
 * syscall time to call paths (protocol.h).
 *
 * Cost model: sys_enter and sys_exit run for every syscall of every process on the node, so
 * both reject untracked processes with one bit test before doing anything else; tracked threads
 * then touch only their own task storage (no hash look-up per syscall, no locks: a thread's
 * storage is written by that thread, or by the scheduler hooks while it is switched out).
 */
#include "vmlinux.h"

#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "collector.h"

char LICENSE[] SEC("license") = "GPL";

#define PF_EXITING 0x00000004

/* Linux 6.13+.  Weak, so that the object still loads (with ps_sys_exit_nosig) on a kernel
 * without it. */
extern int bpf_send_signal_task(struct task_struct *task, int sig, enum pid_type type,
                                __u64 value) __ksym __weak;

/* Written by the daemon through the mmap'ed .bss. */
__u64 ps_kc_tgid_bits[PS_KC_TGID_WORDS];
__u32 ps_kc_cfg_epoch;   /* bumped after each change of ps_kc_procs */
__u32 ps_kc_iter_tgid;   /* the process the task iterator reports */

/* Read by the daemon. */
__u64 ps_kc_missed_exits; /* sys_exit without the entry state (in flight at registration) */
__u64 ps_kc_dropped;      /* storage or map entry we could not get: numbers lost */
__u64 ps_kc_signals;      /* reports sent */
__u64 ps_kc_signal_errors;

struct {
    __uint(type, BPF_MAP_TYPE_TASK_STORAGE);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __type(key, int);
    __type(value, struct ps_kc_thread);
} ps_kc_threads SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, PS_KC_MAX_PROCS);
    __type(key, __u32);
    __type(value, struct ps_kc_proc);
} ps_kc_procs SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __uint(max_entries, PS_KC_MAX_EXITED_SYS);
    __type(key, struct ps_kc_sys_key);
    __type(value, struct ps_kc_sys_val);
} ps_kc_exited_sys SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __uint(max_entries, PS_KC_MAX_EXITED_THREADS);
    __type(key, struct ps_kc_thread_key);
    __type(value, struct ps_kc_thread_val);
} ps_kc_exited_threads SEC(".maps");

static __always_inline int ps_tracked(__u32 tgid)
{
    /* pid_max <= PID_MAX_LIMIT = 2^22: the mask only keeps the verifier happy */
    return (ps_kc_tgid_bits[(tgid >> 6) & (PS_KC_TGID_WORDS - 1)] >> (tgid & 63)) & 1;
}

static __always_inline struct ps_kc_thread *ps_state(struct task_struct *t, int create)
{
    return bpf_task_storage_get(&ps_kc_threads, t, 0,
                                create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
}

/* ---- syscalls ------------------------------------------------------------------------- */

SEC("tp_btf/sys_enter")
int BPF_PROG(ps_sys_enter, struct pt_regs *regs, long id)
{
    struct task_struct *t = bpf_get_current_task_btf();
    if (!ps_tracked(t->tgid)) return 0;
    struct ps_kc_thread *s = ps_state(t, 1);
    if (!s) {
        __sync_fetch_and_add(&ps_kc_dropped, 1);
        return 0;
    }
    s->entry_nr = (__u32)id;
    s->entry_ts = bpf_ktime_get_ns();
    return 0;
}

/* The value of one report (protocol.h, PS_KVAL_*): ns if the time fits in 33 bits, else us. */
static __always_inline __u64 ps_pack(__u32 nr, __u32 count, __u64 ns)
{
    __u64 unit = 0, time = ns;
    if (time > PS_KVAL_MAX_TIME) {
        unit = 1;
        time = ns / 1000;
        if (time > PS_KVAL_MAX_TIME) time = PS_KVAL_MAX_TIME;
    }
    return (__u64)nr | unit << 10 | (__u64)count << 11 | time << 31;
}

/* Only a signal the thread will handle right away: a handler is installed (a process that
 * never installed one, reset it or exec'ed is not hurt), the signal is not blocked (e.g. we are
 * inside the handler already) and not already pending (reports are not queued up). */
static __always_inline int ps_deliverable(struct task_struct *t, __u32 sig, __u64 expected,
                                          int own_pending)
{
    if (sig - 1 >= 64) return 0;
    __u64 bit = 1ull << (sig - 1);
    /* own_pending: the one pending is the report this same exit just sent (a second one then
     * queues behind it: both are handled before the thread goes on) */
    __u64 pending = own_pending ? 0 : t->pending.signal.sig[0] | t->signal->shared_pending.signal.sig[0];
    if ((t->blocked.sig[0] | pending) & bit)
        return 0;
    /* variable index into a kernel structure: only through a probe read */
    void *handler = 0;
    if (bpf_probe_read_kernel(&handler, sizeof handler,
                              &t->sighand->action[sig - 1].sa.sa_handler))
        return 0;
    /* the handler pathscope registered, not one the application installed over it */
    if (expected) return (__u64)(unsigned long)handler == expected;
    return (unsigned long)handler > 1;   /* SIG_DFL 0, SIG_IGN 1 */
}

/* The process's signal and period, copied once per thread and registration. */
static __always_inline void ps_refresh_config(struct ps_kc_thread *s, __u32 tgid)
{
    __u32 epoch = ps_kc_cfg_epoch;
    if (s->cfg_epoch == epoch) return;
    struct ps_kc_proc *p = bpf_map_lookup_elem(&ps_kc_procs, &tgid);
    s->sig = p ? p->sig : 0;
    s->period_ns = p ? p->period_ns : 0;
    s->handler = p ? p->handler : 0;
    s->off_period_ns = p ? p->off_period_ns : 0;
    s->cfg_epoch = epoch;
}

/* Reports the off-CPU time pending in thread t, if a period of it has accumulated: the signal
 * is delivered when t next returns to user space, where it stopped running (the instruction
 * it was preempted at, or the call site of the syscall it blocked in).  Called for the current
 * task at its syscall exits, and by the scheduler for the task it switches to when that task
 * is not inside a syscall (a pending signal would make a syscall still under way give up
 * with EINTR).  The caller has refreshed s's configuration.  Returns 1 if a signal went. */
static __always_inline int ps_report_offcpu(struct task_struct *t, struct ps_kc_thread *s,
                                            int own_pending)
{
    if (!s->sig || !s->off_period_ns || s->off_pend_ns < s->off_period_ns) return 0;
    if (!ps_deliverable(t, s->sig, s->handler, own_pending)) return 0;
    if (bpf_send_signal_task(t, s->sig, PIDTYPE_PID,
                             ps_pack(PS_KVAL_NR_OFFCPU, s->off_pend_count, s->off_pend_ns))) {
        __sync_fetch_and_add(&ps_kc_signal_errors, 1);
        return 0;
    }
    __sync_fetch_and_add(&ps_kc_signals, 1);
    s->off_pend_count = 0;
    s->off_pend_ns = 0;
    return 1;
}

static __always_inline int ps_exit(int signals)
{
    struct task_struct *t = bpf_get_current_task_btf();
    __u32 tgid = t->tgid;
    if (!ps_tracked(tgid)) return 0;
    __u64 now = bpf_ktime_get_ns();
    struct ps_kc_thread *s = ps_state(t, 0);
    if (!s || !s->entry_ts) {
        __sync_fetch_and_add(&ps_kc_missed_exits, 1);
        return 0;
    }
    __u64 d = now - s->entry_ts;
    __u32 nr = s->entry_nr;
    s->entry_ts = 0;
    if (nr >= PS_NR_SYSCALLS) return 0;   /* x32 or invalid numbers: no name, no slot */
    struct ps_kc_sc *c = &s->sc[nr];
    c->count++;
    c->ns += d;
    if (!signals) return 0;

    ps_refresh_config(s, tgid);
    /* rt_sigreturn ends our own handler: reporting it would signal again, forever */
    if (!s->sig || nr == PS_KC_NR_RT_SIGRETURN) return 0;
    /* A report holds at most PS_KVAL_MAX_COUNT calls and 2^33-1 us; while the signal cannot
     * be delivered, calls beyond that stay in the totals only (unattributed, not lost). */
    if (c->pend_count >= PS_KVAL_MAX_COUNT || c->pend_ns + d > PS_KC_MAX_PENDING_NS)
        return ps_report_offcpu(t, s, 0);
    c->pend_count++;
    c->pend_ns += d;
    /* pend_count == count: nothing of this number reported yet (its first completion, or every
     * completion since has been undeliverable) */
    if (c->pend_ns < s->period_ns && c->pend_count != c->count &&
        c->pend_count < PS_KVAL_MAX_COUNT)
        return ps_report_offcpu(t, s, 0);
    if (!ps_deliverable(t, s->sig, s->handler, 0))
        return 0;   /* keep accumulating: try at a later exit */
    /* delivered on the way back to user space, right after this syscall: the handler's
     * interrupted context is the call site */
    if (bpf_send_signal_task(t, s->sig, PIDTYPE_PID, ps_pack(nr, c->pend_count, c->pend_ns))) {
        __sync_fetch_and_add(&ps_kc_signal_errors, 1);
        return 0;
    }
    __sync_fetch_and_add(&ps_kc_signals, 1);
    c->pend_count = 0;
    c->pend_ns = 0;
    /* off-CPU time due as well (the thread blocked in this syscall): its report queues behind
     * the syscall's, both delivered here */
    ps_report_offcpu(t, s, 1);
    return 0;
}

/* Loaded when the kernel has bpf_send_signal_task (the daemon picks one of the two). */
SEC("tp_btf/sys_exit")
int BPF_PROG(ps_sys_exit, struct pt_regs *regs, long ret)
{
    return ps_exit(1);
}

SEC("tp_btf/sys_exit")
int BPF_PROG(ps_sys_exit_nosig, struct pt_regs *regs, long ret)
{
    return ps_exit(0);
}

/* ---- scheduler and page faults ---------------------------------------------------------- */

/* Off-CPU time: blocked when the thread went to sleep, run queue when it was preempted while
 * runnable (a preempted task stays on the run queue whatever its state says).  With signals,
 * the time also accumulates towards the thread's next off-CPU report (ps_report_offcpu). */
static __always_inline int ps_switch(struct task_struct *prev, struct task_struct *next,
                                     unsigned int prev_state, bool preempt, int signals)
{
    __u64 now = 0;
    if (ps_tracked(prev->tgid)) {
        struct ps_kc_thread *s = ps_state(prev, 1);
        if (s) {
            now = bpf_ktime_get_ns();
            s->off_ts = now;
            s->off_runnable = preempt || prev_state == 0;
        } else if (!(prev->flags & PF_EXITING)) {   /* exiting tasks get no new storage */
            __sync_fetch_and_add(&ps_kc_dropped, 1);
        }
    }
    __u32 tgid = next->tgid;
    if (ps_tracked(tgid)) {
        struct ps_kc_thread *s = ps_state(next, 0);
        if (s && s->off_ts) {
            if (!now) now = bpf_ktime_get_ns();
            __u64 d = now - s->off_ts;
            if (s->off_runnable) s->runqueue_ns += d;
            else s->blocked_ns += d;
            s->switches++;
            s->off_ts = 0;
            if (!signals) return 0;
            ps_refresh_config(s, tgid);
            if (!s->off_period_ns) return 0;
            /* a report holds at most PS_KVAL_MAX_COUNT switches and 2^33-1 us: beyond that
             * the time stays in the totals only */
            if (s->off_pend_count < PS_KVAL_MAX_COUNT && s->off_pend_ns + d <= PS_KC_MAX_PENDING_NS) {
                s->off_pend_count++;
                s->off_pend_ns += d;
            }
            if (!s->entry_ts) ps_report_offcpu(next, s, 0);
        }
    }
    return 0;
}

/* Loaded when the kernel has bpf_send_signal_task (the daemon picks one of the two). */
SEC("tp_btf/sched_switch")
int BPF_PROG(ps_sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
             unsigned int prev_state)
{
    return ps_switch(prev, next, prev_state, preempt, 1);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(ps_sched_switch_nosig, bool preempt, struct task_struct *prev,
             struct task_struct *next, unsigned int prev_state)
{
    return ps_switch(prev, next, prev_state, preempt, 0);
}

/* Optional: the daemon carries on without it (page faults then read 0). */
SEC("tp_btf/page_fault_user")
int BPF_PROG(ps_page_fault_user, unsigned long address, struct pt_regs *regs,
             unsigned long error_code)
{
    struct task_struct *t = bpf_get_current_task_btf();
    if (!ps_tracked(t->tgid)) return 0;
    struct ps_kc_thread *s = ps_state(t, 1);
    if (s) s->page_faults++;
    else __sync_fetch_and_add(&ps_kc_dropped, 1);
    return 0;
}

/* ---- exec and exit ---------------------------------------------------------------------- */

struct ps_clear_ctx {
    struct ps_kc_thread *s;
};

static long ps_clear_pending(__u32 i, struct ps_clear_ctx *x)
{
    if (i >= PS_NR_SYSCALLS) return 1;
    x->s->sc[i].pend_count = 0;
    x->s->sc[i].pend_ns = 0;
    return 0;
}

/* The new image has not asked for signals (its handlers are reset anyway, but it may install
 * one of its own for the same number): no signals until it registers again, and nothing of the
 * old image is reported to it. */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(ps_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
    __u32 tgid = p->tgid;
    if (!ps_tracked(tgid)) return 0;
    struct ps_kc_proc *proc = bpf_map_lookup_elem(&ps_kc_procs, &tgid);
    if (proc) proc->sig = 0;
    struct ps_kc_thread *s = ps_state(p, 0);
    if (s) {
        s->cfg_epoch = ps_kc_cfg_epoch - 1;   /* look the process up again */
        s->off_pend_count = 0;
        s->off_pend_ns = 0;
        struct ps_clear_ctx x = {.s = s};
        bpf_loop(PS_NR_SYSCALLS, ps_clear_pending, &x, 0);
    }
    return 0;
}

struct ps_flush_ctx {
    struct ps_kc_thread *s;
    __u32 tgid, tid;
    __u64 nrs[PS_KC_NR_WORDS];   /* the numbers now in ps_kc_exited_sys */
};

static long ps_flush_sc(__u32 i, struct ps_flush_ctx *f)
{
    if (i >= PS_NR_SYSCALLS) return 1;
    struct ps_kc_sc *c = &f->s->sc[i];
    if (!c->count) return 0;
    struct ps_kc_sys_key k = {.tgid = f->tgid, .tid = f->tid, .nr = i};
    /* a tid the process reuses adds to the earlier thread's line */
    struct ps_kc_sys_val *v = bpf_map_lookup_elem(&ps_kc_exited_sys, &k);
    if (v) {
        __sync_fetch_and_add(&v->count, c->count);
        __sync_fetch_and_add(&v->ns, c->ns);
    } else {
        struct ps_kc_sys_val n = {.count = c->count, .ns = c->ns};
        if (bpf_map_update_elem(&ps_kc_exited_sys, &k, &n, BPF_NOEXIST)) {
            __sync_fetch_and_add(&ps_kc_dropped, 1);
            return 0;
        }
    }
    f->nrs[i / 64] |= 1ull << (i % 64);
    return 0;
}

/* The task storage goes with the task: keep its numbers for the snapshots. */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(ps_thread_exit, struct task_struct *p)
{
    __u32 tgid = p->tgid;
    if (!ps_tracked(tgid)) return 0;
    struct ps_kc_thread *s = ps_state(p, 0);
    if (!s) return 0;
    struct ps_flush_ctx f = {.s = s, .tgid = tgid, .tid = p->pid};
    bpf_loop(PS_NR_SYSCALLS, ps_flush_sc, &f, 0);
    struct ps_kc_thread_key k = {.tgid = tgid, .tid = p->pid};
    struct ps_kc_thread_val *v = bpf_map_lookup_elem(&ps_kc_exited_threads, &k);
    if (v) {
        __sync_fetch_and_add(&v->blocked_ns, s->blocked_ns);
        __sync_fetch_and_add(&v->runqueue_ns, s->runqueue_ns);
        __sync_fetch_and_add(&v->switches, s->switches);
        __sync_fetch_and_add(&v->page_faults, s->page_faults);
        for (int w = 0; w < PS_KC_NR_WORDS; w++) __sync_fetch_and_or(&v->nrs[w], f.nrs[w]);
    } else {
        struct ps_kc_thread_val n = {.blocked_ns = s->blocked_ns, .runqueue_ns = s->runqueue_ns,
                                     .switches = s->switches, .page_faults = s->page_faults};
        __builtin_memcpy(n.nrs, f.nrs, sizeof n.nrs);
        if (bpf_map_update_elem(&ps_kc_exited_threads, &k, &n, BPF_NOEXIST))
            __sync_fetch_and_add(&ps_kc_dropped, 1);
    }
    s->flushed = 1;
    return 0;
}

/* ---- snapshots ------------------------------------------------------------------------- */

struct ps_iter_ctx {
    struct seq_file *seq;
    struct ps_kc_thread *s;
    __u32 tid;
};

static long ps_iter_sc(__u32 i, struct ps_iter_ctx *x)
{
    if (i >= PS_NR_SYSCALLS) return 1;
    struct ps_kc_sc *c = &x->s->sc[i];
    if (!c->count) return 0;
    struct ps_kc_rec r = {.tid = x->tid, .nr = i, .v = {c->count, c->ns}};
    bpf_seq_write(x->seq, &r, sizeof r);
    return 0;
}

/* The live threads of ps_kc_iter_tgid; exited ones are in the hash maps. */
SEC("iter/task")
int ps_iter_threads(struct bpf_iter__task *ctx)
{
    struct task_struct *t = ctx->task;
    if (!t || t->tgid != ps_kc_iter_tgid) return 0;
    struct ps_kc_thread *s = ps_state(t, 0);
    if (!s || s->flushed) return 0;
    struct ps_kc_rec r = {.tid = t->pid, .nr = PS_KC_REC_THREAD,
                          .v = {s->blocked_ns, s->runqueue_ns, s->switches, s->page_faults}};
    struct seq_file *seq = ctx->meta->seq;
    bpf_seq_write(seq, &r, sizeof r);
    struct ps_iter_ctx x = {.seq = seq, .s = s, .tid = t->pid};
    bpf_loop(PS_NR_SYSCALLS, ps_iter_sc, &x, 0);
    return 0;
}
