// One program per (attach type x feature) to find what this kernel accepts.
// probe.c loads them one at a time and prints load/attach results.
#include "../vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "GPL";

struct { __uint(type, BPF_MAP_TYPE_TASK_STORAGE); __uint(map_flags, BPF_F_NO_PREALLOC);
         __type(key, int); __type(value, __u64); } tstore SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 1024); __type(key, __u32); __type(value, __u64); } h SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_PERCPU_HASH); __uint(max_entries, 1024); __type(key, __u32); __type(value, __u64); } pch SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_LRU_HASH); __uint(max_entries, 1024); __type(key, __u32); __type(value, __u64); } lru SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_LRU_PERCPU_HASH); __uint(max_entries, 1024); __type(key, __u32); __type(value, __u64); } lrupc SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 1); __type(key, __u32); __type(value, __u64); } arr SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY); __uint(max_entries, 1); __type(key, __u32); __type(value, __u64); } pca SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_STACK_TRACE); __uint(max_entries, 1024); __uint(key_size, 4); __uint(value_size, 127*8); } stacks SEC(".maps");

#define TS_BODY { __u64 *v = bpf_task_storage_get(&tstore, bpf_get_current_task_btf(), 0, BPF_LOCAL_STORAGE_GET_F_CREATE); if (v) *v += 1; return 0; }
#define MAP_BODY(m) { __u32 k = bpf_get_current_pid_tgid(); __u64 one = 1, *v = bpf_map_lookup_elem(&m, &k); if (v) *v += 1; else bpf_map_update_elem(&m, &k, &one, BPF_ANY); return 0; }
#define ARR_BODY(m) { __u32 k = 0; __u64 *v = bpf_map_lookup_elem(&m, &k); if (v) *v += 1; return 0; }

SEC("tracepoint/raw_syscalls/sys_enter") int tp_plain(struct trace_event_raw_sys_enter *ctx) { return 0; }
SEC("tracepoint/raw_syscalls/sys_enter") int tp_taskstorage(void *ctx) TS_BODY
SEC("tracepoint/raw_syscalls/sys_enter") int tp_hash(void *ctx) MAP_BODY(h)
SEC("tracepoint/raw_syscalls/sys_enter") int tp_percpu_hash(void *ctx) MAP_BODY(pch)
SEC("tracepoint/raw_syscalls/sys_enter") int tp_lru(void *ctx) MAP_BODY(lru)
SEC("tracepoint/raw_syscalls/sys_enter") int tp_lru_percpu(void *ctx) MAP_BODY(lrupc)
SEC("tracepoint/raw_syscalls/sys_enter") int tp_array(void *ctx) ARR_BODY(arr)
SEC("tracepoint/raw_syscalls/sys_enter") int tp_percpu_array(void *ctx) ARR_BODY(pca)
SEC("tracepoint/raw_syscalls/sys_enter") int tp_stackid(void *ctx) { bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK); return 0; }

SEC("raw_tracepoint/sys_enter") int rawtp_plain(struct bpf_raw_tracepoint_args *ctx) { return 0; }
SEC("raw_tracepoint/sys_enter") int rawtp_taskstorage(void *ctx) TS_BODY
SEC("raw_tracepoint/sys_enter") int rawtp_hash(void *ctx) MAP_BODY(h)
SEC("raw_tracepoint/sys_enter") int rawtp_percpu_hash(void *ctx) MAP_BODY(pch)
SEC("raw_tracepoint/sys_enter") int rawtp_lru(void *ctx) MAP_BODY(lru)
SEC("raw_tracepoint/sys_enter") int rawtp_array(void *ctx) ARR_BODY(arr)
SEC("raw_tracepoint/sys_enter") int rawtp_stackid(void *ctx) { bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK); return 0; }

SEC("tp_btf/sys_enter") int BPF_PROG(tpbtf_plain, struct pt_regs *regs, long id) { return 0; }
SEC("tp_btf/sys_enter") int BPF_PROG(tpbtf_taskstorage, struct pt_regs *regs, long id) TS_BODY
SEC("tp_btf/sys_enter") int BPF_PROG(tpbtf_hash, struct pt_regs *regs, long id) MAP_BODY(h)
SEC("tp_btf/sys_enter") int BPF_PROG(tpbtf_array, struct pt_regs *regs, long id) ARR_BODY(arr)
SEC("tp_btf/sys_enter") int BPF_PROG(tpbtf_stackid, struct pt_regs *regs, long id) { bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK); return 0; }

SEC("fentry/vfs_read") int BPF_PROG(fentry_vfs_read) { return 0; }
SEC("fexit/vfs_read") int BPF_PROG(fexit_vfs_read) { return 0; }
SEC("kprobe/vfs_read") int kprobe_vfs_read(void *ctx) { return 0; }

SEC("tracepoint/sched/sched_switch") int tp_sched_switch(struct trace_event_raw_sched_switch *ctx) { return 0; }
SEC("raw_tracepoint/sched_switch") int rawtp_sched_switch(void *ctx) { return 0; }
SEC("tp_btf/sched_switch") int BPF_PROG(tpbtf_sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{ __u64 *v = bpf_task_storage_get(&tstore, prev, 0, BPF_LOCAL_STORAGE_GET_F_CREATE); if (v) *v += 1; return 0; }
SEC("tracepoint/exceptions/page_fault_user") int tp_pf_user(void *ctx) { return 0; }
SEC("tp_btf/page_fault_user") int BPF_PROG(tpbtf_pf_user, unsigned long address, struct pt_regs *regs, unsigned long err) { return 0; }
SEC("raw_tracepoint/page_fault_user") int rawtp_pf_user(void *ctx) { return 0; }
SEC("tracepoint/raw_syscalls/sys_exit") int tp_plain_exit(void *ctx) { return 0; }
SEC("raw_tracepoint/sys_exit") int rawtp_plain_exit(void *ctx) { return 0; }
SEC("tp_btf/sys_exit") int BPF_PROG(tpbtf_plain_exit, struct pt_regs *regs, long ret) { return 0; }
