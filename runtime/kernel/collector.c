/* pathscope-kcollect: the node's eBPF collector, one per user, serving every profiled process
 * of that user over the abstract socket of protocol.h (which is the contract: election,
 * start-up, requests and answers).
 *
 *   pathscope-kcollect --serve
 *
 * Environment (debugging only):
 *   PS_KCOLLECT_LOG=FILE       append what the daemon does, and libbpf's messages, to FILE
 *   PS_KCOLLECT_NOSIGNALS=1    load the sys_exit program without signals ("ok nosignals")
 *
 * The BPF programs are attached through links owned by this process only (nothing is pinned),
 * so whatever way it ends, even SIGKILL, the kernel detaches them: the syscall hooks never tax
 * the node for longer than the daemon lives.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "collector.h"
#include "collector.skel.h"
#include "sysnames.h"

_Static_assert(SYS_rt_sigreturn == PS_KC_NR_RT_SIGRETURN, "rt_sigreturn's number");

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77 /* Linux 6.5 */
#endif

#define KC_LINE_MAX 256              /* longest request */
#define KC_OUT_MAX (64u << 20)       /* answers a client does not read: drop it beyond this */
#define KC_SIG_MIN 32                /* the kernel's real-time signals */
#define KC_SIG_MAX 64

typedef struct {
    int fd;
    uint64_t since_ms;   /* accepted at */
    struct ucred cred;   /* at connect time */
    pid_t registered;    /* tgid registered on this connection, 0 before */
    int eof;             /* the client will send nothing more: close once the answers are out */
    int discarding;      /* inside an overlong line: skip up to its '\n' */
    size_t in_len;
    char in[KC_LINE_MAX];
    char *out;
    size_t out_off, out_len, out_cap;
} kc_client_t;

typedef struct {
    pid_t tgid;
    int pidfd;
} kc_proc_t;

static struct collector_bpf *kc_skel;
static struct bpf_link *kc_iter_link;
static int kc_signals;         /* the sys_exit program with signals is loaded */
static int kc_page_faults;     /* page_fault_user is attached */
static uid_t kc_uid;
static int kc_log_fd = -1;
static int kc_dirfd = -1;      /* root: PS_KSOCK_DIR, where the socket file is */
static const char *kc_name;
static __u64 kc_user_dropped; /* records lost on our side (memory) */
static volatile sig_atomic_t kc_stop;

static kc_client_t **kc_clients;
static size_t kc_nclients, kc_clients_cap;
static kc_proc_t *kc_procs;
static size_t kc_nprocs, kc_procs_cap;

/* Exited threads' numbers moved out of the BPF hash maps (kc_harvest): the maps only have to
 * hold what exits between two harvests, however many threads a process goes through. */
#define KC_HARVEST_MS 250
typedef struct {
    pid_t tgid;
    uint32_t tid, nr;     /* nr PS_KC_REC_THREAD: blocked, runqueue, switches, page faults */
    __u64 v[4];
} kc_archived_t;
static kc_archived_t *kc_archive;
static size_t kc_narchive, kc_archive_cap;

/* ---- small utilities ----------------------------------------------------------------------- */

static uint64_t kc_now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000 + (uint64_t)t.tv_nsec / 1000;
}

static uint64_t kc_now_ms(void)
{
    return kc_now_us() / 1000;
}

static void kc_vlog(const char *fmt, va_list ap)
{
    if (kc_log_fd < 0) return;
    char *msg;
    if (vasprintf(&msg, fmt, ap) < 0) return;
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    size_t len = strlen(msg);
    dprintf(kc_log_fd, "%lld.%06ld [%d] %s%s", (long long)t.tv_sec, t.tv_nsec / 1000,
            (int)getpid(), msg, len && msg[len - 1] == '\n' ? "" : "\n");
    free(msg);
}

__attribute__((format(printf, 1, 2))) static void kc_log(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    kc_vlog(fmt, ap);
    va_end(ap);
}

/* libbpf talks on stderr by default, which is the profiled job's: only the log hears it
 * (verifier logs included, which is why a failed load is worth a PS_KCOLLECT_LOG). */
static int kc_libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
    if (level != LIBBPF_DEBUG) kc_vlog(fmt, ap);
    return 0;
}

static void *kc_grow(void *p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return p;
    size_t n = *cap ? *cap : 16;
    while (n < need) n *= 2;
    void *q = realloc(p, n * elem);
    if (q) *cap = n;
    return q;
}

static void kc_close_inherited(void)
{
    if (close_range(3, ~0u, 0) == 0) return;
    /* before Linux 5.9 */
    struct rlimit rl;
    long max = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
                   ? (long)rl.rlim_cur : 65536;
    for (long fd = 3; fd < max; fd++) close((int)fd);
}

/* ---- tracking ------------------------------------------------------------------------------ */

static void kc_set_tracked(pid_t tgid, int on)
{
    __u64 *word = &kc_skel->bss->ps_kc_tgid_bits[((uint32_t)tgid >> 6) % PS_KC_TGID_WORDS];
    __u64 bit = 1ull << (tgid & 63);
    if (on) __atomic_fetch_or(word, bit, __ATOMIC_SEQ_CST);
    else __atomic_fetch_and(word, ~bit, __ATOMIC_SEQ_CST);
}

static kc_proc_t *kc_find_proc(pid_t tgid)
{
    for (size_t i = 0; i < kc_nprocs; i++)
        if (kc_procs[i].tgid == tgid) return &kc_procs[i];
    return NULL;
}

/* Calls fn on every entry of a hash map: in batches (a snapshot must not cost one syscall per
 * entry), one key at a time on kernels without batch operations. */
typedef void kc_entry_fn(const void *key, const void *value, void *arg);

static int kc_map_scan(int fd, size_t ksz, size_t vsz, kc_entry_fn *fn, void *arg)
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
static void kc_harvest(void)
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
static void kc_untrack(size_t i)
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

__attribute__((format(printf, 2, 3))) static void kc_outf(kc_client_t *c, const char *fmt, ...)
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

static void kc_snapshot(kc_client_t *c, pid_t tgid)
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

/* ---- requests ------------------------------------------------------------------------------ */

/* Strict unsigned decimal: digits only, no sign, no overflow. */
static int kc_parse_u64(const char *s, const char **end, uint64_t *out)
{
    uint64_t v = 0;
    if (*s < '0' || *s > '9') return -1;
    for (; *s >= '0' && *s <= '9'; s++) {
        if (v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10) return -1;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *end = s;
    *out = v;
    return 0;
}

static int kc_peer_pidfd(kc_client_t *c)
{
    /* the peer as it was at connect(): immune to pid reuse */
    int fd;
    socklen_t len = sizeof fd;
    if (getsockopt(c->fd, SOL_SOCKET, SO_PEERPIDFD, &fd, &len) == 0) return fd;
    return (int)syscall(SYS_pidfd_open, c->cred.pid, 0);
}

static void kc_register(kc_client_t *c, const char *args)
{
    uint64_t sig, period, handler = 0, off_period = 0;
    const char *p = args;
    if (kc_parse_u64(p, &p, &sig) || *p++ != ' ' || kc_parse_u64(p, &p, &period) ||
        (*p == ' ' && (p++, kc_parse_u64(p, &p, &handler))) ||
        (*p == ' ' && (p++, kc_parse_u64(p, &p, &off_period))) || *p) {
        kc_outf(c, "error malformed request: register <signal> <period_ns> [<handler> "
                   "[<offcpu_period_ns>]]\n");
        return;
    }
    if (sig != 0 && (sig < KC_SIG_MIN || sig > KC_SIG_MAX)) {
        kc_outf(c, "error signal %" PRIu64 " is not a real-time signal (%d..%d) or 0\n", sig,
                KC_SIG_MIN, KC_SIG_MAX);
        return;
    }
    if (c->registered) {
        kc_outf(c, "error already registered on this connection\n");
        return;
    }
    pid_t tgid = c->cred.pid;
    if (tgid <= 0) {
        kc_outf(c, "error the peer's pid is unknown (another pid namespace?)\n");
        return;
    }
    kc_proc_t *proc = kc_find_proc(tgid);
    int created = !proc;   /* else: registered before, on another connection (exec) */
    if (created) {
        if (kc_nprocs >= PS_KC_MAX_PROCS) {
            kc_outf(c, "error too many processes tracked (%d)\n", PS_KC_MAX_PROCS);
            return;
        }
        kc_proc_t *p2 = kc_grow(kc_procs, &kc_procs_cap, kc_nprocs + 1, sizeof *p2);
        if (!p2) {
            kc_outf(c, "error out of memory\n");
            return;
        }
        kc_procs = p2;
        int pidfd = kc_peer_pidfd(c);
        if (pidfd < 0) {
            kc_outf(c, "error cannot watch process %d: %s\n", (int)tgid, strerror(errno));
            return;
        }
        proc = &kc_procs[kc_nprocs++];
        *proc = (kc_proc_t){.tgid = tgid, .pidfd = pidfd};
    }
    /* the process's entry first, then the epoch that makes threads read it again, then the bit
     * that lets its syscalls in: no thread can cache a stale entry */
    struct ps_kc_proc v = {.sig = (uint32_t)sig, .period_ns = period, .handler = handler,
                           .off_period_ns = off_period};
    uint32_t key = (uint32_t)tgid;
    if (bpf_map_update_elem(bpf_map__fd(kc_skel->maps.ps_kc_procs), &key, &v, BPF_ANY)) {
        kc_outf(c, "error cannot register process %d: %s\n", (int)tgid, strerror(errno));
        if (created) {
            close(proc->pidfd);
            kc_nprocs--;
        }
        return;
    }
    __atomic_fetch_add(&kc_skel->bss->ps_kc_cfg_epoch, 1, __ATOMIC_SEQ_CST);
    kc_set_tracked(tgid, 1);
    c->registered = tgid;
    kc_log("registered process %d (uid %u): signal %" PRIu64 ", period %" PRIu64 " ns, "
           "off-CPU period %" PRIu64 " ns", (int)tgid, (unsigned)c->cred.uid, sig, period,
           off_period);
    kc_outf(c, kc_signals ? "ok signals\n" : "ok nosignals\n");
}

static void kc_request(kc_client_t *c, char *line)
{
    if (c->cred.uid != kc_uid && c->cred.uid != 0) {
        kc_outf(c, "error permission denied: this collector serves uid %u\n", (unsigned)kc_uid);
        return;
    }
    if (!strncmp(line, "register ", 9)) {
        kc_register(c, line + 9);
    } else if (!strcmp(line, "snapshot")) {
        if (!kc_find_proc(c->cred.pid)) kc_outf(c, "error not registered\n");
        else kc_snapshot(c, c->cred.pid);
    } else {
        kc_outf(c, "error unknown request\n");
    }
}

/* ---- connections --------------------------------------------------------------------------- */

/* Returns the errno that ended the accepting (EAGAIN: no connection left). */
static int kc_accept(int lfd)
{
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
            int err = errno;
            if (err == EINTR || err == ECONNABORTED) continue;
            if (err != EAGAIN) kc_log("accept: %s", strerror(err));
            return err;
        }
        kc_client_t *c = calloc(1, sizeof *c);
        kc_client_t **cs = kc_grow(kc_clients, &kc_clients_cap, kc_nclients + 1, sizeof *cs);
        socklen_t len = sizeof c->cred;
        if (!c || !cs || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c->cred, &len)) {
            free(c);
            close(fd);
            if (cs) kc_clients = cs;
            continue;
        }
        kc_clients = cs;
        if (c->cred.uid != kc_uid && c->cred.uid != 0) {
            /* another user: one line, and closed before it can cost anything (a connection
             * kept would keep the node-wide programs attached) */
            char msg[96];
            int n = snprintf(msg, sizeof msg, "error permission denied: this collector serves "
                             "uid %u\n", (unsigned)kc_uid);
            if (send(fd, msg, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) { /* (best effort) */ }
            kc_log("refused pid %d uid %u", (int)c->cred.pid, (unsigned)c->cred.uid);
            free(c);
            close(fd);
            continue;
        }
        c->fd = fd;
        c->since_ms = kc_now_ms();
        kc_clients[kc_nclients++] = c;
        kc_log("connection from pid %d uid %u", (int)c->cred.pid, (unsigned)c->cred.uid);
    }
}

static void kc_drop_client(size_t i)
{
    kc_client_t *c = kc_clients[i];
    kc_log("connection from pid %d closed", (int)c->cred.pid);
    close(c->fd);
    free(c->out);
    free(c);
    kc_clients[i] = kc_clients[--kc_nclients];
}

/* Returns 0 when the connection is to be closed. */
static int kc_client_read(kc_client_t *c)
{
    for (;;) {
        ssize_t n = recv(c->fd, c->in + c->in_len, sizeof c->in - c->in_len, 0);
        if (n < 0) return errno == EAGAIN || errno == EINTR;
        if (n == 0) {
            c->eof = 1;
            return 1;
        }
        c->in_len += (size_t)n;
        char *nl;
        while (!c->eof && (nl = memchr(c->in, '\n', c->in_len))) {
            *nl = '\0';
            if (!c->discarding) kc_request(c, c->in);
            c->discarding = 0;
            size_t used = (size_t)(nl + 1 - c->in);
            memmove(c->in, nl + 1, c->in_len - used);
            c->in_len -= used;
        }
        if (c->in_len == sizeof c->in) {
            if (!c->discarding) kc_outf(c, "error request too long\n");
            c->discarding = 1;
            c->in_len = 0;
        }
        if (c->eof) return 1;
    }
}

/* Returns 0 when the connection is to be closed. */
static int kc_client_write(kc_client_t *c)
{
    while (c->out_off < c->out_len) {
        ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
        if (n < 0) return errno == EAGAIN || errno == EINTR;
        c->out_off += (size_t)n;
    }
    c->out_off = c->out_len = 0;
    return !c->eof;
}

/* ---- start-up ------------------------------------------------------------------------------ */

/* EPERM is the kernel refusing us; EACCES too, unless we are root (then it is the verifier). */
static int kc_unprivileged(int err)
{
    return err == EPERM || (err == EACCES && geteuid() != 0);
}

static const char *kc_hint(int err)
{
    return kc_unprivileged(err) ? " (needs root or CAP_BPF and CAP_PERFMON)" : "";
}

/* Loads the programs: with signals if the kernel has bpf_send_signal_task, with page faults if
 * it has that tracepoint; a failed load leaves the object unusable, so each try reopens it. */
static int kc_load(void)
{
    int want_signals = !getenv("PS_KCOLLECT_NOSIGNALS");
    int err = 0;
    for (int signals = want_signals; signals >= 0; signals--) {
        for (int pf = 1; pf >= 0; pf--) {
            struct collector_bpf *skel = collector_bpf__open();
            if (!skel) {
                err = errno;
                printf("opening the BPF programs failed: %s\n", strerror(err));
                return -1;
            }
            bpf_program__set_autoload(skel->progs.ps_sys_exit, signals);
            bpf_program__set_autoload(skel->progs.ps_sys_exit_nosig, !signals);
            bpf_program__set_autoload(skel->progs.ps_sched_switch, signals);
            bpf_program__set_autoload(skel->progs.ps_sched_switch_nosig, !signals);
            bpf_program__set_autoload(skel->progs.ps_page_fault_user, pf);
            /* libbpf (>= 1.0) raises RLIMIT_MEMLOCK itself where the kernel still charges BPF
             * memory to it (before 5.11) */
            err = -collector_bpf__load(skel);
            if (!err) {
                kc_skel = skel;
                kc_signals = signals;
                kc_page_faults = pf;
                kc_log("loaded: signals %s, page faults %s", signals ? "yes" : "no",
                       pf ? "yes" : "no");
                return 0;
            }
            collector_bpf__destroy(skel);
            kc_log("load (signals %d, page faults %d) failed: %s", signals, pf, strerror(err));
            if (kc_unprivileged(err)) goto fail;   /* no variant will do better */
        }
    }
fail:
    printf("loading the BPF programs failed: %s%s\n", strerror(err), kc_hint(err));
    return -1;
}

static int kc_attach_one(struct bpf_program *prog, struct bpf_link **link, int optional)
{
    if (!bpf_program__autoload(prog)) return 0;
    *link = bpf_program__attach(prog);
    if (*link) return 0;
    int err = errno;
    kc_log("attaching %s failed: %s", bpf_program__name(prog), strerror(err));
    if (optional) return 0;
    printf("attaching %s failed: %s%s\n", bpf_program__name(prog), strerror(err), kc_hint(err));
    return -1;
}

static int kc_attach(void)
{
    struct collector_bpf *s = kc_skel;
    /* the scheduler and exit hooks before the syscall hooks: no thread is ever counted
     * without being flushed at its exit */
    if (kc_attach_one(s->progs.ps_thread_exit, &s->links.ps_thread_exit, 0) ||
        kc_attach_one(s->progs.ps_exec, &s->links.ps_exec, 0) ||
        kc_attach_one(s->progs.ps_sched_switch, &s->links.ps_sched_switch, 0) ||
        kc_attach_one(s->progs.ps_sched_switch_nosig, &s->links.ps_sched_switch_nosig, 0) ||
        kc_attach_one(s->progs.ps_page_fault_user, &s->links.ps_page_fault_user, 1) ||
        kc_attach_one(s->progs.ps_sys_exit, &s->links.ps_sys_exit, 0) ||
        kc_attach_one(s->progs.ps_sys_exit_nosig, &s->links.ps_sys_exit_nosig, 0) ||
        kc_attach_one(s->progs.ps_sys_enter, &s->links.ps_sys_enter, 0))
        return -1;
    if (kc_page_faults && !s->links.ps_page_fault_user) kc_page_faults = 0;
    kc_iter_link = bpf_program__attach_iter(s->progs.ps_iter_threads, NULL);
    if (!kc_iter_link) {
        int err = errno;
        printf("attaching the task iterator failed: %s%s\n", strerror(err), kc_hint(err));
        return -1;
    }
    return 0;
}

static void kc_shutdown(void)
{
    bpf_link__destroy(kc_iter_link);
    kc_iter_link = NULL;
    collector_bpf__destroy(kc_skel);   /* detaches everything */
    kc_skel = NULL;
}

static void kc_on_signal(int sig)
{
    (void)sig;
    kc_stop = 1;
}

/* ---- the socket ---------------------------------------------------------------------------- */

/* NAME is ours (protocol.h): PS_KSOCK_FMT with our uid, then nothing or "-job-" and 1 to 64
 * characters of [A-Za-z0-9._-] (root's becomes a file name: no '/', no "..") */
static int kc_valid_name(const char *name, const char *own)
{
    size_t n = strlen(own);
    if (!name || strncmp(name, own, n)) return 0;
    if (!name[n]) return 1;
    const char *job = name + n + strlen(PS_KSOCK_JOB);
    if (strncmp(name + n, PS_KSOCK_JOB, strlen(PS_KSOCK_JOB)) || !*job || strlen(job) > 64)
        return 0;
    for (const char *p = job; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '.' || *p == '_' || *p == '-'))
            return 0;
    return 1;
}

/* Another user's: the abstract name.  Returns 0, PS_KCOLLECT_EXIT_LOST or (said on stdout)
 * PS_KCOLLECT_EXIT_FAILED. */
static int kc_listen_abstract(int lfd, const char *name)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    int len = snprintf(addr.sun_path + 1, sizeof addr.sun_path - 1, "%s", name);
    socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)len);
    if (bind(lfd, (struct sockaddr *)&addr, alen)) {
        if (errno == EADDRINUSE) return PS_KCOLLECT_EXIT_LOST;
        printf("binding the socket failed: %s\n", strerror(errno));
        return PS_KCOLLECT_EXIT_FAILED;
    }
    /* connections made while we load wait in the backlog */
    if (listen(lfd, SOMAXCONN)) {
        printf("listening on the socket failed: %s\n", strerror(errno));
        return PS_KCOLLECT_EXIT_FAILED;
    }
    return 0;
}

/* fd is a directory of root's that nobody else may write to (then nobody else can have put
 * or can replace anything in it). */
static int kc_root_only_dir(int fd, const char *path)
{
    struct stat st;
    if (fstat(fd, &st)) {
        printf("cannot check %s: %s\n", path, strerror(errno));
        return 0;
    }
    if (!S_ISDIR(st.st_mode) || st.st_uid != 0 || (st.st_mode & 022)) {
        printf("%s is not a directory that only root can write to (owner uid %u, mode %03o): "
               "not using it\n", path, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
        return 0;
    }
    return 1;
}

/* Takes the directory's lock (the election's critical section takes milliseconds); 0 or -1. */
static int kc_lock_dir(void)
{
    for (int i = 0; i < 500; i++) {
        if (flock(kc_dirfd, LOCK_EX | LOCK_NB) == 0) return 0;
        if (errno != EWOULDBLOCK && errno != EINTR) break;
        struct timespec ms = {0, 10000000};
        nanosleep(&ms, NULL);
    }
    printf("cannot lock %s: %s\n", PS_KSOCK_DIR, errno == EWOULDBLOCK ? "held for 5 s" : strerror(errno));
    return -1;
}

/* Sockets of root's collectors killed without their clean-up (SIGKILL: a batch system ending
 * a job) stay behind in PS_KSOCK_DIR: the winner of an election, still holding the lock,
 * removes those nobody listens on.  A probe that reaches a live collector only costs it a
 * connection that ends at once. */
static void kc_sweep_stale(const char *ours)
{
    int fd = dup(kc_dirfd);
    DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
    if (!dir) {
        if (fd >= 0) close(fd);
        return;
    }
    char prefix[32];
    int plen = snprintf(prefix, sizeof prefix, PS_KSOCK_FMT, 0u);
    struct dirent *e;
    while ((e = readdir(dir))) {
        struct stat st;
        if (strncmp(e->d_name, prefix, (size_t)plen) || !strcmp(e->d_name, ours) ||
            fstatat(kc_dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISSOCK(st.st_mode))
            continue;
        struct sockaddr_un addr = {.sun_family = AF_UNIX};
        int len = snprintf(addr.sun_path, sizeof addr.sun_path, PS_KSOCK_DIR "/%s", e->d_name);
        if (len < 0 || (size_t)len >= sizeof addr.sun_path) continue;
        int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (probe < 0) break;
        if (connect(probe, (struct sockaddr *)&addr,
                    (socklen_t)(offsetof(struct sockaddr_un, sun_path) + (size_t)len + 1)) &&
            errno == ECONNREFUSED && unlinkat(kc_dirfd, e->d_name, 0) == 0)
            kc_log("removed the stale socket %s", addr.sun_path);
        close(probe);
    }
    closedir(dir);
}

/* Root's: the socket file PS_KSOCK_DIR/NAME, mode 0600, in a directory of root's only (no
 * other user can bind, replace or connect to it).  The election, under the directory's lock:
 * bind; if the file exists, a collector answering on it wins; a file nobody listens on is a
 * dead collector's (SIGKILL leaves it behind) and is replaced. */
static int kc_listen_root(int lfd, const char *name)
{
    char parent[] = PS_KSOCK_DIR;
    char *base = strrchr(parent, '/');
    *base++ = '\0';
    int pfd = open(parent[0] ? parent : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (pfd < 0) {
        printf("cannot open %s: %s\n", parent, strerror(errno));
        return PS_KCOLLECT_EXIT_FAILED;
    }
    if (!kc_root_only_dir(pfd, parent)) return PS_KCOLLECT_EXIT_FAILED;
    if (mkdirat(pfd, base, 0755) && errno != EEXIST) {
        printf("cannot create %s: %s\n", PS_KSOCK_DIR, strerror(errno));
        return PS_KCOLLECT_EXIT_FAILED;
    }
    kc_dirfd = openat(pfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    close(pfd);
    if (kc_dirfd < 0) {
        printf("cannot open %s: %s\n", PS_KSOCK_DIR, strerror(errno));
        return PS_KCOLLECT_EXIT_FAILED;
    }
    if (!kc_root_only_dir(kc_dirfd, PS_KSOCK_DIR)) return PS_KCOLLECT_EXIT_FAILED;
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    int len = snprintf(addr.sun_path, sizeof addr.sun_path, PS_KSOCK_DIR "/%s", name);
    if (len < 0 || (size_t)len >= sizeof addr.sun_path) {
        printf("the socket path %s/%s is too long\n", PS_KSOCK_DIR, name);
        return PS_KCOLLECT_EXIT_FAILED;
    }
    socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + (size_t)len + 1);
    if (kc_lock_dir()) return PS_KCOLLECT_EXIT_FAILED;
    int result = PS_KCOLLECT_EXIT_FAILED;
    for (int attempt = 0; attempt < 2; attempt++) {
        mode_t old = umask(0177); /* the file is made 0600: no window with a wider mode */
        int bound = bind(lfd, (struct sockaddr *)&addr, alen);
        int err = errno;
        umask(old);
        if (bound == 0) {
            /* listening before the lock goes: a rival's probe finds us alive */
            if (listen(lfd, SOMAXCONN) == 0) {
                kc_name = name;
                result = 0;
                kc_sweep_stale(name);
            } else {
                printf("listening on the socket failed: %s\n", strerror(errno));
                unlinkat(kc_dirfd, name, 0);
            }
            break;
        }
        if (err != EADDRINUSE) {
            printf("binding the socket %s failed: %s\n", addr.sun_path, strerror(err));
            break;
        }
        int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        int alive = probe >= 0 && (connect(probe, (struct sockaddr *)&addr, alen) == 0 ||
                                   errno == EAGAIN);
        if (probe >= 0) close(probe);
        if (alive) {
            result = PS_KCOLLECT_EXIT_LOST;
            break;
        }
        if (unlinkat(kc_dirfd, name, 0) && errno != ENOENT) {
            printf("cannot remove the stale socket %s: %s\n", addr.sun_path, strerror(errno));
            break;
        }
        kc_log("removed the stale socket %s", addr.sun_path);
    }
    flock(kc_dirfd, LOCK_UN);
    return result;
}

/* The end: nobody may connect any more.  Root's file goes first, under the lock (it is still
 * ours: nobody replaces a file a collector listens on). */
static void kc_unlisten(int lfd)
{
    if (kc_dirfd >= 0 && kc_name) {
        int locked = kc_lock_dir() == 0;
        unlinkat(kc_dirfd, kc_name, 0);
        close(lfd);
        if (locked) flock(kc_dirfd, LOCK_UN);
        return;
    }
    close(lfd);
}

/* ---- serving ------------------------------------------------------------------------------- */

static void kc_serve(int lfd)
{
    struct pollfd *pfds = NULL;
    size_t pfds_cap = 0;
    uint64_t idle_since = kc_now_ms();
    uint64_t paused_until = 0;   /* accept() ran out of descriptors */
    uint64_t next_harvest = kc_now_ms() + KC_HARVEST_MS;
    sigset_t during_poll;
    sigemptyset(&during_poll);

    while (!kc_stop) {
        /* a connection that has not registered in time is closed; one that still may keeps
         * the collector up (it is a process starting), nothing else but tracked processes */
        uint64_t now_pending = kc_now_ms();
        int64_t next_expiry = -1;
        for (size_t i = kc_nclients; i-- > 0;) {
            kc_client_t *c = kc_clients[i];
            if (c->registered || kc_find_proc(c->cred.pid)) continue;
            uint64_t expiry = c->since_ms + PS_KCOLLECT_REGISTER_MS;
            if (now_pending >= expiry) {
                kc_log("connection from pid %d did not register within %d ms", (int)c->cred.pid,
                       PS_KCOLLECT_REGISTER_MS);
                kc_drop_client(i);
            } else if (next_expiry < 0 || (int64_t)(expiry - now_pending) < next_expiry) {
                next_expiry = (int64_t)(expiry - now_pending);
            }
        }
        size_t n = 1 + kc_nclients + kc_nprocs;
        struct pollfd *p = kc_grow(pfds, &pfds_cap, n, sizeof *p);
        if (!p) {
            kc_log("out of memory");
            break;
        }
        pfds = p;
        uint64_t now = kc_now_ms();
        pfds[0] = (struct pollfd){.fd = now >= paused_until ? lfd : -1, .events = POLLIN};
        for (size_t i = 0; i < kc_nclients; i++) {
            kc_client_t *c = kc_clients[i];
            pfds[1 + i] = (struct pollfd){.fd = c->fd, .events = (c->eof ? 0 : POLLIN) |
                                                              (c->out_len ? POLLOUT : 0)};
        }
        for (size_t i = 0; i < kc_nprocs; i++)
            pfds[1 + kc_nclients + i] = (struct pollfd){.fd = kc_procs[i].pidfd, .events = POLLIN};

        if (kc_nprocs && now >= next_harvest) {
            kc_harvest();
            next_harvest = now + KC_HARVEST_MS;
        }
        int64_t timeout = paused_until > now ? (int64_t)(paused_until - now) : -1;
        if (kc_nprocs) {
            int64_t to_harvest = next_harvest > now ? (int64_t)(next_harvest - now) : 0;
            if (timeout < 0 || to_harvest < timeout) timeout = to_harvest;
        }
        if (next_expiry >= 0 && (timeout < 0 || next_expiry < timeout)) timeout = next_expiry;
        if (kc_nprocs == 0 && next_expiry < 0) {
            if (!idle_since) idle_since = now;
            int64_t left = (int64_t)(idle_since + PS_KCOLLECT_LINGER_MS) - (int64_t)now;
            if (left <= 0) {
                /* a last look: someone connecting right now is served, not reset */
                size_t before = kc_nclients;
                kc_accept(lfd);
                if (kc_nclients == before) break;
                continue;
            }
            if (timeout < 0 || left < timeout) timeout = left;
        } else {
            idle_since = 0;
        }
        struct timespec ts = {.tv_sec = timeout / 1000, .tv_nsec = timeout % 1000 * 1000000};
        /* SIGTERM/SIGINT are blocked except inside ppoll: none is lost between the check of
         * kc_stop and the wait */
        if (ppoll(pfds, n, timeout < 0 ? NULL : &ts, &during_poll) < 0) {
            if (errno == EINTR) continue;
            kc_log("ppoll: %s", strerror(errno));
            break;
        }

        /* clients and processes by descriptor: the arrays change while we go */
        size_t nclients = kc_nclients, nprocs = kc_nprocs;
        for (size_t i = nprocs; i-- > 0;) {
            struct pollfd *pf = &pfds[1 + nclients + i];
            if (!pf->revents) continue;
            for (size_t j = 0; j < kc_nprocs; j++)
                if (kc_procs[j].pidfd == pf->fd) {
                    kc_untrack(j);
                    break;
                }
        }
        for (size_t i = nclients; i-- > 0;) {
            struct pollfd *pf = &pfds[1 + i];
            if (!pf->revents) continue;
            size_t j = 0;
            while (j < kc_nclients && kc_clients[j]->fd != pf->fd) j++;
            if (j == kc_nclients) continue;
            kc_client_t *c = kc_clients[j];
            int keep = 1;
            if (pf->revents & (POLLIN | POLLHUP | POLLERR)) keep = kc_client_read(c);
            if (keep && c->out_len) keep = kc_client_write(c);
            if (keep && c->eof && !c->out_len) keep = 0;
            if (!keep) kc_drop_client(j);
        }
        if (pfds[0].revents & POLLIN) {
            int err = kc_accept(lfd);
            if (err == EMFILE || err == ENFILE) paused_until = kc_now_ms() + 100;
        }
    }
    free(pfds);
}

/* The BPF programs see the kernel's (initial namespace's) pids; SO_PEERCRED gives ours. In a
 * nested pid namespace they differ: /proc/self/status lists one NSpid per level. */
static int kc_nested_pid_namespace(void)
{
    FILE *f = fopen("/proc/self/status", "re");
    if (!f) return 0;
    char line[256];
    int nested = 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "NSpid:", 6)) {
            int fields = 0;
            for (char *tok = strtok(line + 6, " \t\n"); tok; tok = strtok(NULL, " \t\n")) fields++;
            nested = fields > 1;
        }
    fclose(f);
    return nested;
}

int main(int argc, char **argv)
{
    /* --serve NAME: the socket name the runtime computed (protocol.h); it must be ours */
    char own[64];
    snprintf(own, sizeof own, PS_KSOCK_FMT, (unsigned)getuid());
    const char *name = argc == 3 ? argv[2] : argc == 2 ? own : NULL;
    if (argc < 2 || argc > 3 || strcmp(argv[1], "--serve") || !kc_valid_name(name, own)) {
        fprintf(stderr, "usage: %s --serve [%s[-job-ID]]   (started by the pathscope runtime, "
                "see protocol.h)\n", PS_KCOLLECT_NAME, own);
        return 2;
    }
    /* Every descriptor from here on is ours; the child closes nothing it needs. */
    kc_close_inherited();
    const char *log = getenv("PS_KCOLLECT_LOG");
    if (log && *log) kc_log_fd = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    libbpf_set_print(kc_libbpf_print);
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0);

    /* The name is the election: bind before anything costly. */
    kc_uid = getuid();
    int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (lfd < 0) {
        printf("creating the socket failed: %s\n", strerror(errno));
        return PS_KCOLLECT_EXIT_FAILED;
    }
    int elected = kc_uid == 0 ? kc_listen_root(lfd, name) : kc_listen_abstract(lfd, name);
    if (elected) return elected;
    kc_log("collector for uid %u starting on %s%s", (unsigned)kc_uid,
           kc_uid == 0 ? PS_KSOCK_DIR "/" : "@", name);

    if (kc_nested_pid_namespace()) {
        printf("pathscope-kcollect runs in a nested pid namespace (a container): the process "
               "ids it would be given are not the kernel's\n");
        kc_unlisten(lfd);
        return PS_KCOLLECT_EXIT_FAILED;
    }
    if (kc_load() || kc_attach()) {
        if (kc_skel) kc_shutdown();
        kc_unlisten(lfd);
        return PS_KCOLLECT_EXIT_FAILED;
    }
    /* one descriptor per client and one per process: room for every rank on a big node */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }

    pid_t child = fork();
    if (child < 0) {
        printf("fork failed: %s\n", strerror(errno));
        kc_shutdown();
        kc_unlisten(lfd);
        return PS_KCOLLECT_EXIT_FAILED;
    }
    if (child > 0) {
        /* the child holds the links now: our copies go with us */
        printf("ready\n");
        _exit(0);
    }

    setsid();
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) {
        dup2(null, 0);
        dup2(null, 1);
        dup2(null, 2);
        if (null > 2) close(null);
    }
    if (chdir("/")) { /* only so as not to pin the job's directory */ }

    sigset_t block;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    sigprocmask(SIG_BLOCK, &block, NULL);
    struct sigaction sa = {.sa_handler = kc_on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    kc_log("serving (signals %s, page faults %s)", kc_signals ? "yes" : "no",
           kc_page_faults ? "yes" : "no");
    kc_serve(lfd);
    /* newcomers must start a collector of their own, not talk to a detached one */
    kc_unlisten(lfd);
    kc_shutdown();
    kc_log("exiting%s", kc_stop ? " on a signal" : ": nobody to serve");
    return 0;
}
