/* The answers of pathscope-kcollect: a client's output buffer (bounded: a client that reads
 * nothing gets nothing more), and the snapshot of a process -- live threads from the task
 * iterator, exited ones from the maps and kc_archive, merged and written as the ksys,
 * kthread and kend lines of protocol.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kc_internal.h"
#include "sysnames.h"

#define KC_OUT_MAX (64u << 20)       /* answers a client does not read: drop it beyond this */

/* ---- answers ------------------------------------------------------------------------------ */

static void kc_out(kc_client_t *c, const char *s, size_t n)
{
    if (c->out_len + n > KC_OUT_MAX) { /* the client reads nothing: it gets nothing more */
        c->eof = 1;
        c->in_len = 0;
        return;
    }
    char *p = kc_grow(c->out, &c->out_cap, c->out_len + n, 1);
    if (!p) {
        kc_user_dropped++;
        return;
    }
    c->out = p;
    memcpy(c->out + c->out_len, s, n);
    c->out_len += n;
}

__attribute__((format(printf, 2, 3))) void kc_outf(kc_client_t *c, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    kc_out(c, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

/* ---- snapshots ---------------------------------------------------------------------------- */

typedef struct {
    uint32_t tid, nr;
    __u64 v[4];
    int exited;
} kc_rec_t;

typedef struct {
    pid_t tgid;
    kc_rec_t *recs;
    size_t n, cap;
} kc_snap_t;

static void kc_snap_add(kc_snap_t *sn, uint32_t tid, uint32_t nr, const __u64 *v, int nv,
                        int exited)
{
    kc_rec_t *p = kc_grow(sn->recs, &sn->cap, sn->n + 1, sizeof *p);
    if (!p) {
        kc_user_dropped++;
        return;
    }
    sn->recs = p;
    kc_rec_t *r = &sn->recs[sn->n++];
    *r = (kc_rec_t){.tid = tid, .nr = nr, .exited = exited};
    memcpy(r->v, v, (size_t)nv * sizeof *v);
}

/* An exited thread: its totals, and its syscalls looked up by the numbers it lists. */
static void kc_snap_exited_thread(const void *key, const void *value, void *arg)
{
    const struct ps_kc_thread_key *k = key;
    const struct ps_kc_thread_val *v = value;
    kc_snap_t *sn = arg;
    if (k->tgid != (uint32_t)sn->tgid) return;
    __u64 tv[4] = {v->blocked_ns, v->runqueue_ns, v->switches, v->page_faults};
    kc_snap_add(sn, k->tid, PS_KC_REC_THREAD, tv, 4, 1);
    int fd = bpf_map__fd(kc_skel->maps.ps_kc_exited_sys);
    for (uint32_t nr = 0; nr < PS_NR_SYSCALLS; nr++) {
        if (!(v->nrs[nr / 64] >> (nr % 64) & 1)) continue;
        struct ps_kc_sys_key sk = {.tgid = k->tgid, .tid = k->tid, .nr = nr};
        struct ps_kc_sys_val sv;
        if (bpf_map_lookup_elem(fd, &sk, &sv)) continue;
        __u64 vv[2] = {sv.count, sv.ns};
        kc_snap_add(sn, k->tid, nr, vv, 2, 1);
    }
}

/* By tid; within a thread the exited records first (they win over the live ones), each
 * source with its thread record first, then by syscall number. */
static int kc_rec_cmp(const void *a, const void *b)
{
    const kc_rec_t *x = a, *y = b;
    if (x->tid != y->tid) return x->tid < y->tid ? -1 : 1;
    if (x->exited != y->exited) return x->exited ? -1 : 1;
    if (x->nr == y->nr) return 0;
    if (x->nr == PS_KC_REC_THREAD) return -1;
    if (y->nr == PS_KC_REC_THREAD) return 1;
    return x->nr < y->nr ? -1 : 1;
}

static int kc_read_iter(kc_snap_t *sn)
{
    kc_skel->bss->ps_kc_iter_tgid = (uint32_t)sn->tgid;
    int fd = bpf_iter_create(bpf_link__fd(kc_iter_link));
    if (fd < 0) return -errno;
    struct ps_kc_rec buf[256];
    size_t have = 0;
    for (;;) {
        ssize_t n = read(fd, (char *)buf + have, sizeof buf - have);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            int err = -errno;
            close(fd);
            return err;
        }
        if (n == 0) break;
        have += (size_t)n;
        size_t whole = have / sizeof buf[0];
        for (size_t i = 0; i < whole; i++)
            kc_snap_add(sn, buf[i].tid, buf[i].nr, buf[i].v, 4, 0);
        have -= whole * sizeof buf[0];
        memmove(buf, (char *)buf + whole * sizeof buf[0], have);
    }
    close(fd);
    return 0;
}

void kc_snapshot(kc_client_t *c, pid_t tgid)
{
    uint64_t t0 = kc_now_us();
    kc_snap_t sn = {.tgid = tgid};
    /* live threads first, then the exited ones: a thread that exits in between is seen twice
     * (its final numbers in the maps win), never missed */
    int err = kc_read_iter(&sn);
    if (!err)
        err = kc_map_scan(bpf_map__fd(kc_skel->maps.ps_kc_exited_threads),
                          sizeof(struct ps_kc_thread_key), sizeof(struct ps_kc_thread_val),
                          kc_snap_exited_thread, &sn);
    if (err) {
        kc_outf(c, "error snapshot failed: %s\n", strerror(-err));
        free(sn.recs);
        return;
    }
    for (size_t i = 0; i < kc_narchive; i++)
        if (kc_archive[i].tgid == tgid)
            kc_snap_add(&sn, kc_archive[i].tid, kc_archive[i].nr, kc_archive[i].v, 4, 1);
    qsort(sn.recs, sn.n, sizeof *sn.recs, kc_rec_cmp);
    /* the same exited thread in the archive and the maps (a reused tid, or a harvest between
     * its exits): one record, the sum */
    size_t merged = 0;
    for (size_t i = 0; i < sn.n; i++) {
        kc_rec_t *last = merged ? &sn.recs[merged - 1] : NULL;
        if (last && last->exited && sn.recs[i].exited && last->tid == sn.recs[i].tid &&
            last->nr == sn.recs[i].nr) {
            for (int j = 0; j < 4; j++) last->v[j] += sn.recs[i].v[j];
        } else {
            sn.recs[merged++] = sn.recs[i];
        }
    }
    sn.n = merged;

    /* ksys lines of every thread, then the kthread lines */
    /* (protocol.h: each (tid, number) once, in order; the process drops repeats) */
    char name[24];
    for (int pass = 0; pass < 2; pass++) {
        uint32_t exited_tid = 0;
        int have_exited = 0;
        uint64_t last = 0; /* tid << 10 | nr of the last line, + 1 */
        for (size_t i = 0; i < sn.n; i++) {
            const kc_rec_t *r = &sn.recs[i];
            if (r->exited) {
                exited_tid = r->tid;
                have_exited = 1;
            } else if (have_exited && exited_tid == r->tid) {
                continue;   /* the same thread, seen alive before it exited */
            }
            uint64_t key = ((uint64_t)r->tid << 10 | (pass ? 0 : r->nr)) + 1;
            if (pass == 0 && r->nr != PS_KC_REC_THREAD && r->v[0] && key > last) {
                kc_outf(c, "ksys\t%" PRIu32 "\t%s\t%llu\t%llu\n", r->tid,
                        ps_syscall_name(r->nr, name), r->v[0], r->v[1]);
                last = key;
            } else if (pass == 1 && r->nr == PS_KC_REC_THREAD && key > last) {
                kc_outf(c, "kthread\t%" PRIu32 "\t%llu\t%llu\t%llu\t%llu\n", r->tid, r->v[0],
                        r->v[1], r->v[2], kc_page_faults ? r->v[3] : 0);
                last = key;
            }
        }
    }
    kc_outf(c, "kend\t%llu\t%llu\n",
            __atomic_load_n(&kc_skel->bss->ps_kc_missed_exits, __ATOMIC_RELAXED),
            __atomic_load_n(&kc_skel->bss->ps_kc_dropped, __ATOMIC_RELAXED) + kc_user_dropped);
    kc_log("snapshot of %d: %zu records in %" PRIu64 " us (signals sent %llu, failed %llu)",
           (int)tgid, sn.n, kc_now_us() - t0,
           (unsigned long long)kc_skel->bss->ps_kc_signals,
           (unsigned long long)kc_skel->bss->ps_kc_signal_errors);
    free(sn.recs);
}
