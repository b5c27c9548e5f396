/* The processes pathscope-kcollect tracks: the tgid bits that let their syscalls into the
 * BPF programs, the hash-map scan, the harvest that moves exited threads' numbers out of the
 * maps into kc_archive every KC_HARVEST_MS, and the clean-up once a process has exited.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kc_internal.h"

__u64 kc_user_dropped; /* records lost on our side (memory) */
kc_proc_t *kc_procs;
size_t kc_nprocs, kc_procs_cap;
kc_archived_t *kc_archive;
size_t kc_narchive;
static size_t kc_archive_cap;

/* ---- tracking ------------------------------------------------------------------------------ */

void kc_set_tracked(pid_t tgid, int on)
{
    __u64 *word = &kc_skel->bss->ps_kc_tgid_bits[((uint32_t)tgid >> 6) % PS_KC_TGID_WORDS];
    __u64 bit = 1ull << (tgid & 63);
    if (on) __atomic_fetch_or(word, bit, __ATOMIC_SEQ_CST);
    else __atomic_fetch_and(word, ~bit, __ATOMIC_SEQ_CST);
}

kc_proc_t *kc_find_proc(pid_t tgid)
{
    for (size_t i = 0; i < kc_nprocs; i++)
        if (kc_procs[i].tgid == tgid) return &kc_procs[i];
    return NULL;
}


int kc_map_scan(int fd, size_t ksz, size_t vsz, kc_entry_fn *fn, void *arg)
{
    uint32_t n = 1024, count, in_tok = 0, out_tok = 0;
    int first = 1;
    char *keys = NULL, *vals = NULL;
    for (;;) {
        char *k = realloc(keys, n * ksz), *v = k ? realloc(vals, n * vsz) : NULL;
        if (k) keys = k;
        if (v) vals = v;
        if (!k || !v) {
            free(keys);
            free(vals);
            return -ENOMEM;
        }
        count = n;
        int err = bpf_map_lookup_batch(fd, first ? NULL : &in_tok, &out_tok, keys, vals, &count,
                                       NULL);
        if (err && errno == ENOSPC) { /* one hash bucket holds more than n entries */
            n *= 2;
            continue;
        }
        if (err && errno != ENOENT) {
            err = -errno;
            free(keys);
            free(vals);
            if (err != -EINVAL && err != -ENOTSUP && err != -EOPNOTSUPP && err != -524) return err;
            break;   /* no batch operations: the slow way below */
        }
        for (uint32_t i = 0; i < count; i++) fn(keys + i * ksz, vals + i * vsz, arg);
        if (err) { /* ENOENT: that was the last batch */
            free(keys);
            free(vals);
            return 0;
        }
        in_tok = out_tok;
        first = 0;
    }
    char key[256], next[256], val[256];
    if (ksz > sizeof key || vsz > sizeof val) return -EINVAL;
    void *prev = NULL;
    while (bpf_map_get_next_key(fd, prev, next) == 0) {
        memcpy(key, next, ksz);
        prev = key;
        if (bpf_map_lookup_elem(fd, key, val) == 0) fn(key, val, arg);
    }
    return 0;
}

typedef struct {
    pid_t tgid;
    size_t ksz;
    char *keys;
    size_t n, cap;
} kc_keys_t;

/* Both kinds of keys of the exited maps start with the tgid. */
_Static_assert(offsetof(struct ps_kc_sys_key, tgid) == 0 &&
               offsetof(struct ps_kc_thread_key, tgid) == 0, "keys start with the tgid");

static void kc_collect_key(const void *key, const void *value, void *arg)
{
    kc_keys_t *ks = arg;
    (void)value;
    if (*(const __u32 *)key != (uint32_t)ks->tgid) return;
    char *p = kc_grow(ks->keys, &ks->cap, ks->n + 1, ks->ksz);
    if (!p) return;
    ks->keys = p;
    memcpy(ks->keys + ks->n++ * ks->ksz, key, ks->ksz);
}

/* A whole scan, not the lists of numbers in the thread entries: entries whose thread entry
 * could not be stored are deleted too. */
static void kc_delete_exited(int fd, pid_t tgid, size_t ksz, size_t vsz)
{
    kc_keys_t ks = {.tgid = tgid, .ksz = ksz};
    kc_map_scan(fd, ksz, vsz, kc_collect_key, &ks);
    for (size_t i = 0; i < ks.n; i++) bpf_map_delete_elem(fd, ks.keys + i * ksz);
    free(ks.keys);
}

/* ---- harvest: exited threads out of the maps ------------------------------------------- */

static void kc_archive_add(pid_t tgid, uint32_t tid, uint32_t nr, const __u64 *v, int nv)
{
    kc_archived_t *p = kc_grow(kc_archive, &kc_archive_cap, kc_narchive + 1, sizeof *p);
    if (!p) {
        kc_user_dropped++;
        return;
    }
    kc_archive = p;
    kc_archived_t *a = &kc_archive[kc_narchive++];
    *a = (kc_archived_t){.tgid = tgid, .tid = tid, .nr = nr};
    memcpy(a->v, v, (size_t)nv * sizeof *v);
}

typedef struct {
    struct ps_kc_thread_key *keys;
    size_t n, cap;
} kc_thread_keys_t;

static void kc_collect_thread_key(const void *key, const void *value, void *arg)
{
    (void)value;
    kc_thread_keys_t *ks = arg;
    struct ps_kc_thread_key *p = kc_grow(ks->keys, &ks->cap, ks->n + 1, sizeof *p);
    if (!p) return;
    ks->keys = p;
    ks->keys[ks->n++] = *(const struct ps_kc_thread_key *)key;
}

/* Takes every exited thread out of the maps into kc_archive: its thread entry first (written
 * last by sched_process_exit, so its syscall entries are complete), then those entries, each
 * with one lookup-and-delete: a thread that exits meanwhile with a reused tid either lands in
 * what we take or creates new entries for the next harvest; nothing is counted twice. */
void kc_harvest(void)
{
    int tfd = bpf_map__fd(kc_skel->maps.ps_kc_exited_threads);
    int sfd = bpf_map__fd(kc_skel->maps.ps_kc_exited_sys);
    kc_thread_keys_t ks = {0};
    kc_map_scan(tfd, sizeof(struct ps_kc_thread_key), sizeof(struct ps_kc_thread_val),
                kc_collect_thread_key, &ks);
    for (size_t i = 0; i < ks.n; i++) {
        struct ps_kc_thread_key k = ks.keys[i];
        struct ps_kc_thread_val tv;
        if (bpf_map_lookup_and_delete_elem(tfd, &k, &tv)) continue;
        __u64 v[4] = {tv.blocked_ns, tv.runqueue_ns, tv.switches, tv.page_faults};
        kc_archive_add((pid_t)k.tgid, k.tid, PS_KC_REC_THREAD, v, 4);
        for (uint32_t nr = 0; nr < PS_NR_SYSCALLS; nr++) {
            if (!(tv.nrs[nr / 64] >> (nr % 64) & 1)) continue;
            struct ps_kc_sys_key sk = {.tgid = k.tgid, .tid = k.tid, .nr = nr};
            struct ps_kc_sys_val sv;
            if (bpf_map_lookup_and_delete_elem(sfd, &sk, &sv)) continue;
            __u64 vv[2] = {sv.count, sv.ns};
            kc_archive_add((pid_t)k.tgid, k.tid, nr, vv, 2);
        }
    }
    if (ks.n) kc_log("harvest: %zu exited threads (%zu archived records)", ks.n, kc_narchive);
    free(ks.keys);
}

static void kc_archive_forget(pid_t tgid)
{
    size_t kept = 0;
    for (size_t i = 0; i < kc_narchive; i++)
        if (kc_archive[i].tgid != tgid) kc_archive[kept++] = kc_archive[i];
    kc_narchive = kept;
}

/* The process has exited: every thread has flushed its numbers (sched_process_exit runs
 * before the exit is signalled on the pidfd), and nobody will ask for them any more. */
void kc_untrack(size_t i)
{
    pid_t tgid = kc_procs[i].tgid;
    kc_set_tracked(tgid, 0);
    uint32_t key = (uint32_t)tgid;
    bpf_map_delete_elem(bpf_map__fd(kc_skel->maps.ps_kc_procs), &key);
    kc_delete_exited(bpf_map__fd(kc_skel->maps.ps_kc_exited_sys), tgid,
                     sizeof(struct ps_kc_sys_key), sizeof(struct ps_kc_sys_val));
    kc_delete_exited(bpf_map__fd(kc_skel->maps.ps_kc_exited_threads), tgid,
                     sizeof(struct ps_kc_thread_key), sizeof(struct ps_kc_thread_val));
    kc_archive_forget(tgid);
    close(kc_procs[i].pidfd);
    kc_procs[i] = kc_procs[--kc_nprocs];
    kc_log("process %d exited: no longer tracked (%zu tracked)", (int)tgid, kc_nprocs);
}
