/* The socket server of pathscope-kcollect: the requests (register, snapshot), the
 * connections (accepting only our uid's and root's, reading lines, writing answers), the
 * socket and its election (another user's: an abstract name; root's: a file in a directory of
 * root's, under its lock, with stale sockets swept), and the serving loop, which also
 * harvests, untracks exited processes and ends after PS_KCOLLECT_LINGER_MS with nobody left.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "kc_internal.h"

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77 /* Linux 6.5 */
#endif

#define KC_SIG_MIN 32                /* the kernel's real-time signals */
#define KC_SIG_MAX 64

static int kc_dirfd = -1;      /* root: PS_KSOCK_DIR, where the socket file is */
static const char *kc_name;

static kc_client_t **kc_clients;
static size_t kc_nclients, kc_clients_cap;

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

/* ---- the socket ---------------------------------------------------------------------------- */

/* NAME is ours (protocol.h): PS_KSOCK_FMT with our uid, then nothing or "-job-" and 1 to 64
 * characters of [A-Za-z0-9._-] (root's becomes a file name: no '/', no "..") */
int kc_valid_name(const char *name, const char *own)
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
int kc_listen_abstract(int lfd, const char *name)
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
int kc_listen_root(int lfd, const char *name)
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
void kc_unlisten(int lfd)
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

void kc_serve(int lfd)
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
