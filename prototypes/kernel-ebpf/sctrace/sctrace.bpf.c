// Syscall time per (thread, syscall[, user stack]) for a set of tgids.
// Variants chosen at load time through .rodata (const volatile) and autoload:
//   attach: tracepoint / raw_tracepoint / tp_btf  (three program pairs, one autoloaded)
//   ts_storage:    entry timestamp in task storage (1) or per-tid hash (0)
//   stats_storage: per-syscall totals in task storage, flushed at thread exit (1) or hash (0)
//   with_stack:    bpf_get_stackid(BPF_F_USER_STACK) at entry, totals keyed by stack (hash)
//   filter_hash:   tgid filter through a hash map (1) or a bitmap in .bss (0)
#include "../vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "sctrace.h"

char LICENSE[] SEC("license") = "GPL";

const volatile bool ts_storage = 1;
const volatile bool stats_storage = 1;
const volatile bool with_stack = 0;
const volatile bool filter_hash = 0;
const volatile __u64 sig_period_ns = 0;   /* >0: signal the thread every this much syscall time */
const volatile __u32 sig_no = 0;

__u64 tgid_bits[TGID_BITS_WORDS];   /* .bss, written by user space through the mmap'ed skeleton */
__u64 unattributed_ns, drops_samples, drops_stats, drops_entry, drops_stack, drops_flush, missed_exit;

struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 1024);
         __type(key, __u32); __type(value, __u32); } tgids SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_TASK_STORAGE); __uint(map_flags, BPF_F_NO_PREALLOC);
         __type(key, int); __type(value, struct tstate); } tstore SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 65536);
         __type(key, __u32); __type(value, struct entry); } entries SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 262144);
         __type(key, struct sc_key); __type(value, struct sc_stat); } stats SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 65536);
         __type(key, __u32); __type(value, struct thread_tot); } threads SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 262144);
         __type(key, struct sample_key); __type(value, struct sc_sample); } samples SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_STACK_TRACE); __uint(max_entries, 16384);
         __uint(key_size, 4); __uint(value_size, MAX_STACK * 8); } stacks SEC(".maps");

static __always_inline bool tracked(__u32 tgid)
{
    if (filter_hash)
        return bpf_map_lookup_elem(&tgids, &tgid) != 0;
    __u32 w = (tgid >> 6) & (TGID_BITS_WORDS - 1);   /* tgid < 2^22 = PID_MAX_LIMIT */
    return (tgid_bits[w] >> (tgid & 63)) & 1;
}

static __always_inline struct tstate *tstate_get(struct task_struct *t)
{
    return bpf_task_storage_get(&tstore, t, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
}

static __always_inline int on_enter(void *ctx, long nr)
{
    __u64 pt = bpf_get_current_pid_tgid();
    __u32 tgid = pt >> 32, tid = (__u32)pt;
    if (!tracked(tgid)) return 0;
    __s32 sid = -1;
    if (with_stack) {
        sid = bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK);
        if (sid < 0) __sync_fetch_and_add(&drops_stack, 1);
    }
    if (ts_storage) {
        struct tstate *s = tstate_get(bpf_get_current_task_btf());
        if (!s) { __sync_fetch_and_add(&drops_entry, 1); return 0; }
        s->nr = nr; s->stackid = sid; s->tgid = tgid;
        s->ts = bpf_ktime_get_ns();
    } else {
        struct entry e = { .ts = bpf_ktime_get_ns(), .nr = nr, .stackid = sid };
        if (bpf_map_update_elem(&entries, &tid, &e, BPF_ANY))
            __sync_fetch_and_add(&drops_entry, 1);
    }
    return 0;
}

static __always_inline void add_hash(__u32 tid, __u32 tgid, __u32 nr, __s32 sid, __u64 d)
{
    struct sc_key k = { .tid = tid, .nr = nr, .stackid = sid, .tgid = tgid };
    struct sc_stat *v = bpf_map_lookup_elem(&stats, &k);
    if (v) { v->count++; v->ns += d; return; }   /* only this thread writes this key */
    struct sc_stat n = { 1, d };
    if (bpf_map_update_elem(&stats, &k, &n, BPF_NOEXIST)) __sync_fetch_and_add(&drops_stats, 1);
}

static __always_inline int on_exit(void)
{
    __u64 pt = bpf_get_current_pid_tgid();
    __u32 tgid = pt >> 32, tid = (__u32)pt;
    if (!tracked(tgid)) return 0;          /* reject foreign processes before anything else */
    __u64 now = bpf_ktime_get_ns();
    __u64 ts; __u32 nr; __s32 sid;
    struct tstate *s = 0;
    if (ts_storage) {
        s = bpf_task_storage_get(&tstore, bpf_get_current_task_btf(), 0, 0);
        if (!s || !s->ts) { __sync_fetch_and_add(&missed_exit, 1); return 0; }
        ts = s->ts; nr = s->nr; sid = s->stackid; s->ts = 0;
    } else {
        struct entry *e = bpf_map_lookup_elem(&entries, &tid);
        if (!e || !e->ts) { __sync_fetch_and_add(&missed_exit, 1); return 0; }
        ts = e->ts; nr = e->nr; sid = e->stackid; e->ts = 0;
    }
    __u64 d = now - ts;
    if (stats_storage && !with_stack) {
        if (!s) s = tstate_get(bpf_get_current_task_btf());
        if (!s) { __sync_fetch_and_add(&drops_stats, 1); return 0; }
        if (nr < NR_SC) { s->sc[nr].count++; s->sc[nr].ns += d; }
        if (sig_period_ns) {
            s->acc_ns += d; s->acc_cnt++;
            __u32 *reg;
            if (s->acc_ns >= sig_period_ns &&
                (!(reg = bpf_map_lookup_elem(&tgids, &tgid)) || *reg != 2)) {
                /* process has not said that its handler is installed: never signal it */
                __sync_fetch_and_add(&unattributed_ns, s->acc_ns); s->acc_ns = 0; s->acc_cnt = 0;
            } else if (s->acc_ns >= sig_period_ns) {
                /* ask the thread itself to unwind: the signal is delivered on the way back to
                   user space, right after this syscall, so its context is the call site */
                struct sample_key sk = { tid, (__u32)s->seq++ };
                struct sc_sample sv = { .nr = nr, .ns = s->acc_ns, .count = s->acc_cnt };
                if (bpf_map_update_elem(&samples, &sk, &sv, BPF_ANY)) __sync_fetch_and_add(&drops_samples, 1);
                s->acc_ns = 0; s->acc_cnt = 0;
                bpf_send_signal_thread(sig_no);
            }
        }
    } else {
        add_hash(tid, tgid, nr, sid, d);
    }
    return 0;
}

/* classic tracepoint: argument block marshalled by the perf/trace event code */
SEC("tracepoint/raw_syscalls/sys_enter")
int tp_enter(struct trace_event_raw_sys_enter *ctx) { return on_enter(ctx, ctx->id); }
SEC("tracepoint/raw_syscalls/sys_exit")
int tp_exit(void *ctx) { return on_exit(); }

/* raw tracepoint: raw arguments (regs, id) */
SEC("raw_tracepoint/sys_enter")
int raw_enter(struct bpf_raw_tracepoint_args *ctx) { return on_enter(ctx, ctx->args[1]); }
SEC("raw_tracepoint/sys_exit")
int raw_exit(struct bpf_raw_tracepoint_args *ctx) { return on_exit(); }

/* BTF-typed raw tracepoint */
SEC("tp_btf/sys_enter")
int BPF_PROG(btf_enter, struct pt_regs *regs, long id) { return on_enter(ctx, id); }
SEC("tp_btf/sys_exit")
int BPF_PROG(btf_exit, struct pt_regs *regs, long ret) { return on_exit(); }

/* off-CPU time per thread: blocked vs waiting in the run queue */
SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
             unsigned int prev_state)
{
    __u64 now = 0;
    if (tracked(prev->tgid)) {
        struct tstate *s = tstate_get(prev);
        if (s) { now = bpf_ktime_get_ns(); s->off_ts = now; s->off_runnable = prev_state == 0; s->tgid = prev->tgid; }
    }
    if (tracked(next->tgid)) {
        struct tstate *s = bpf_task_storage_get(&tstore, next, 0, 0);
        if (s && s->off_ts) {
            if (!now) now = bpf_ktime_get_ns();
            __u64 d = now - s->off_ts;
            if (s->off_runnable) s->runq_ns += d; else s->offcpu_ns += d;
            s->nswitch++; s->off_ts = 0;
        }
    }
    return 0;
}

SEC("tp_btf/page_fault_user")
int BPF_PROG(on_pf_user, unsigned long address, struct pt_regs *regs, unsigned long err)
{
    __u64 pt = bpf_get_current_pid_tgid();
    if (!tracked(pt >> 32)) return 0;
    struct tstate *s = tstate_get(bpf_get_current_task_btf());
    if (s) s->pf_user++;
    return 0;
}

/* thread exit: move task-storage totals into hash maps before the storage is freed */
struct flush_ctx { struct tstate *s; __u32 tid, tgid; };
static long flush_one(__u32 i, struct flush_ctx *c)
{
    if (i >= NR_SC) return 1;
    struct sc_stat *st = &c->s->sc[i];
    if (st->count) {
        struct sc_key k = { .tid = c->tid, .nr = i, .stackid = -1, .tgid = c->tgid };
        if (bpf_map_update_elem(&stats, &k, st, BPF_ANY)) __sync_fetch_and_add(&drops_flush, 1);
    }
    return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_exit_task, struct task_struct *p)
{
    struct task_struct *t = bpf_get_current_task_btf();
    if (!tracked(t->tgid)) return 0;
    struct tstate *s = bpf_task_storage_get(&tstore, t, 0, 0);
    if (!s) return 0;
    __u32 tid = t->pid;
    struct thread_tot tt = { .tgid = t->tgid, .offcpu_ns = s->offcpu_ns, .runq_ns = s->runq_ns,
                             .nswitch = s->nswitch, .pf_user = s->pf_user };
    if (bpf_map_update_elem(&threads, &tid, &tt, BPF_ANY)) __sync_fetch_and_add(&drops_flush, 1);
    if (stats_storage && !with_stack) {
        struct flush_ctx c = { s, tid, t->tgid };
        bpf_loop(NR_SC, flush_one, &c, 0);
    }
    return 0;
}
