/* Private to pathscope-kcollect: what the collector's files share.  protocol.h is the
 * contract with the profiled processes, collector.h the data shared with the BPF programs
 * (collector.bpf.c); this is the daemon's own state.
 *
 * The files, one concern each:
 *   kc_load.c      loading the BPF programs (with or without signals, page faults) and
 *                  attaching them; the shut-down that detaches them
 *   kc_track.c     the tracked processes (the BPF programs' tgid bits, the pidfds watched),
 *                  the map scan, the harvest of exited threads into kc_archive, untracking
 *   kc_snapshot.c  the answers' output buffer and the snapshot of a process (ksys, kthread,
 *                  kend lines)
 *   kc_server.c    the socket server: requests (register, snapshot), connections, the socket
 *                  and its election (abstract name, or root's file under a lock), the loop
 *   kc_main.c      small utilities (clocks, log, arrays), the start-up sequence, main
 * Single-threaded: the state below is touched by the serving loop only.
 */
#ifndef PS_KERNEL_KC_INTERNAL_H
#define PS_KERNEL_KC_INTERNAL_H
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "collector.h"
#include "collector.skel.h"

#define KC_LINE_MAX 256              /* longest request */

/* A connection (kc_server.c); answers go to its out buffer (kc_snapshot.c: kc_outf). */
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

/* ---- kc_main.c ----------------------------------------------------------------------------- */
extern uid_t kc_uid;
extern volatile sig_atomic_t kc_stop;  /* SIGTERM or SIGINT came */

uint64_t kc_now_us(void);
uint64_t kc_now_ms(void);
__attribute__((format(printf, 1, 2))) void kc_log(const char *fmt, ...);
/* p grown to hold need elements of elem bytes (capacity *cap); NULL, p untouched, if it cannot */
void *kc_grow(void *p, size_t *cap, size_t need, size_t elem);

/* ---- kc_load.c ------------------------------------------------------------------------------ */
extern struct collector_bpf *kc_skel;
extern struct bpf_link *kc_iter_link;
extern int kc_signals;         /* the sys_exit program with signals is loaded */
extern int kc_page_faults;     /* page_fault_user is attached */

int kc_load(void);     /* 0, or -1 said on stdout */
int kc_attach(void);   /* 0, or -1 said on stdout */
void kc_shutdown(void);

/* ---- kc_track.c ----------------------------------------------------------------------------- */
extern __u64 kc_user_dropped; /* records lost on our side (memory) */
extern kc_proc_t *kc_procs;
extern size_t kc_nprocs, kc_procs_cap;

/* Exited threads' numbers moved out of the BPF hash maps (kc_harvest): the maps only have to
 * hold what exits between two harvests, however many threads a process goes through. */
#define KC_HARVEST_MS 250
typedef struct {
    pid_t tgid;
    uint32_t tid, nr;     /* nr PS_KC_REC_THREAD: blocked, runqueue, switches, page faults */
    __u64 v[4];
} kc_archived_t;
extern kc_archived_t *kc_archive;
extern size_t kc_narchive;

void kc_set_tracked(pid_t tgid, int on);
kc_proc_t *kc_find_proc(pid_t tgid);
/* Calls fn on every entry of a hash map: in batches (a snapshot must not cost one syscall per
 * entry), one key at a time on kernels without batch operations. */
typedef void kc_entry_fn(const void *key, const void *value, void *arg);
int kc_map_scan(int fd, size_t ksz, size_t vsz, kc_entry_fn *fn, void *arg);
void kc_harvest(void);
void kc_untrack(size_t i);

/* ---- kc_snapshot.c -------------------------------------------------------------------------- */
__attribute__((format(printf, 2, 3))) void kc_outf(kc_client_t *c, const char *fmt, ...);
void kc_snapshot(kc_client_t *c, pid_t tgid);

/* ---- kc_server.c ---------------------------------------------------------------------------- */
int kc_valid_name(const char *name, const char *own);
int kc_listen_abstract(int lfd, const char *name);
int kc_listen_root(int lfd, const char *name);
void kc_unlisten(int lfd);
void kc_serve(int lfd);
#endif
