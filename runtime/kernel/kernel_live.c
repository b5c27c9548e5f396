/* Kernel time's section of the live segment (core/source.h: publish; live/live.h): the 32
 * system calls (eBPF: summed over the threads' syscall nodes) or libc functions (libc: the
 * threads' exact tables) with the most time, read without locks. */
#include "source.h"
#include "kernel.h"
#include "kernel_thread.h"
#include "live.h"

#define SYSCALL_KEYS 1024   /* system-call numbers below this are summed */

static uint64_t calls[PS_KLIBC_N > SYSCALL_KEYS ? PS_KLIBC_N : SYSCALL_KEYS];
static uint64_t ns[PS_KLIBC_N > SYSCALL_KEYS ? PS_KLIBC_N : SYSCALL_KEYS];

static ps_thread_t *thread_at(int i) { return __atomic_load_n(&ps_threads[i], __ATOMIC_ACQUIRE); }

/* libc: each thread's table, one entry per function (ticks). */
static int sum_libc(int nthreads)
{
    for (int i = 0; i < nthreads; i++) {
        ps_thread_t *t = thread_at(i);
        ps_kstat_t *k = t ? __atomic_load_n(&kernel_of(t)->kstat, __ATOMIC_ACQUIRE) : NULL;
        for (int id = 0; k && id < PS_KLIBC_N; id++) {
            calls[id] += ps_live_load64(&k[id].count);
            ns[id] += ps_live_ns(ps_live_load64(&k[id].ticks));
        }
    }
    return PS_KLIBC_N;
}

/* eBPF: the syscall nodes of the trees (visits: calls, kernel_time: ns). */
static int sum_ebpf(int nthreads)
{
    for (int i = 0; i < nthreads; i++) {
        ps_thread_t *t = thread_at(i);
        if (!t || !t->nodes) continue;
        uint32_t nn = __atomic_load_n(&t->nnodes, __ATOMIC_ACQUIRE);
        for (uint32_t id = 1; id < nn && id < t->max_nodes; id++) {
            const ps_node_t *node = &t->nodes[id];
            uint64_t key = ps_live_load64(&node->key);
            if (ps_live_load32(&node->kind) != PS_NODE_SYSCALL || key >= SYSCALL_KEYS) continue;
            calls[key] += ps_live_load64(&node->visits);
            ns[key] += ps_live_load64(&node->kernel_time);
        }
    }
    return SYSCALL_KEYS;
}

void ps_kernel_publish(ps_fmt_t *f)
{
    if (ps_kernel_source == PS_KSRC_OFF) return;
    int libc = ps_kernel_source == PS_KSRC_LIBC;
    int nthreads = atomic_load(&ps_nthreads);
    if (nthreads > PS_MAX_THREADS) nthreads = PS_MAX_THREADS;
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) calls[i] = ns[i] = 0;
    int nkeys = libc ? sum_libc(nthreads) : sum_ebpf(nthreads);
    ps_live_item_t items[PS_LIVE_SYS_MAX];
    ps_live_top_t top = {items, 0, PS_LIVE_SYS_MAX};
    for (int key = 0; key < nkeys; key++)
        if (calls[key]) ps_live_top_add(&top, ns[key], (uint64_t)key, 0);
    ps_live_top_sort(&top);
    char name[24];
    for (int k = 0; k < top.n; k++) {
        uint64_t key = items[k].a;
        ps_fmt_str(f, "sys\t");
        ps_fmt_tsv(f, ps_kernel_key_name(libc ? PS_KLIBC_KEY + key : key, name)); ps_fmt_tab(f);
        ps_fmt_u64(f, calls[key]); ps_fmt_tab(f);
        ps_fmt_u64(f, ns[key]); ps_fmt_char(f, '\n');
    }
}
