// sctrace: prototype collector. Forks a command (or watches given pids), filters on their
// tgids, attaches the chosen variant, waits for the end, dumps the maps.
//   sctrace [-a tp|raw|btf] [-T] [-H] [-k] [-F] [-S] [-x] [-P pindir] [-p pid,...] [-- cmd args]
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <errno.h>
#include <signal.h>
#include <time.h>
#include <poll.h>
#include <dirent.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <bpf/libbpf.h>
#include <bpf/bpf.h>
#include "sctrace.h"
#include "sctrace.skel.h"

#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL
#endif
#include <fcntl.h>

static const char *scname[NR_SC] = {
#include "scnames.inc"
};
static double now_s(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static int verbose_libbpf(enum libbpf_print_level l, const char *f, va_list ap) {
    return l == LIBBPF_DEBUG ? 0 : vfprintf(stderr, f, ap); }
static volatile sig_atomic_t stop;
static void on_sig(int s) { (void)s; stop = 1; }

static void track(struct sctrace_bpf *skel, __u32 tgid, int on)
{
    __u32 one = 1;
    if (on) { skel->bss->tgid_bits[tgid >> 6] |= 1ull << (tgid & 63);
              bpf_map_update_elem(bpf_map__fd(skel->maps.tgids), &tgid, &one, BPF_ANY); }
    else    { skel->bss->tgid_bits[tgid >> 6] &= ~(1ull << (tgid & 63));
              bpf_map_delete_elem(bpf_map__fd(skel->maps.tgids), &tgid); }
}

/* threads still alive: read their task storage with a pidfd key (PIDFD_THREAD, Linux >= 6.9) */
static int dump_live(struct sctrace_bpf *skel, __u32 tgid, int quiet)
{
    char path[64]; snprintf(path, sizeof path, "/proc/%u/task", tgid);
    DIR *d = opendir(path); if (!d) return 0;
    struct dirent *e; int n = 0;
    static struct tstate st;
    while ((e = readdir(d))) {
        int tid = atoi(e->d_name); if (tid <= 0) continue;
        int fd = syscall(SYS_pidfd_open, tid, tid == (int)tgid ? 0 : PIDFD_THREAD);
        if (fd < 0) { fprintf(stderr, "pidfd_open(%d): %s\n", tid, strerror(errno)); continue; }
        if (bpf_map_lookup_elem(bpf_map__fd(skel->maps.tstore), &fd, &st) == 0) {
            n++;
            if (!quiet) for (int i = 0; i < NR_SC; i++) if (st.sc[i].count)
                printf("  live tid %d %-16s %10llu %12.1f us\n", tid, scname[i] ? scname[i] : "?",
                       (unsigned long long)st.sc[i].count, st.sc[i].ns / 1e3);
        }
        close(fd);
    }
    closedir(d);
    return n;
}

int main(int argc, char **argv)
{
    const char *att = "raw", *pindir = NULL; int ts_hash = 0, st_hash = 0, stack = 0, fhash = 0,
        sched = 0, exclude = 0, quiet = 0; char *pids = NULL; long sigp = 0; const char *sockpath = NULL, *outdir = NULL;
    int o;
    while ((o = getopt(argc, argv, "+a:THkFSxqP:p:s:u:o:")) != -1) switch (o) {
        case 'a': att = optarg; break;       case 'T': ts_hash = 1; break;
        case 'H': st_hash = 1; break;        case 'k': stack = 1; break;
        case 'F': fhash = 1; break;          case 'S': sched = 1; break;
        case 'x': exclude = 1; break;        case 'q': quiet = 1; break;
        case 'u': sockpath = optarg; break;
        case 'o': outdir = optarg; break;
        case 's': sigp = atol(optarg); break;
        case 'P': pindir = optarg; break;    case 'p': pids = optarg; break;
        default: fprintf(stderr, "usage: see source\n"); return 2; }
    libbpf_set_print(verbose_libbpf);

    double t0 = now_s();
    struct sctrace_bpf *skel = sctrace_bpf__open();
    if (!skel) { fprintf(stderr, "open: %s\n", strerror(errno)); return 1; }
    skel->rodata->ts_storage = !ts_hash;
    skel->rodata->stats_storage = !st_hash;
    skel->rodata->with_stack = stack;
    skel->rodata->filter_hash = fhash;
    skel->rodata->sig_period_ns = sigp; skel->rodata->sig_no = 37; /* SIGRTMIN+3 */
    int a_tp = !strcmp(att, "tp"), a_raw = !strcmp(att, "raw"), a_btf = !strcmp(att, "btf");
    bpf_program__set_autoload(skel->progs.tp_enter, a_tp);  bpf_program__set_autoload(skel->progs.tp_exit, a_tp);
    bpf_program__set_autoload(skel->progs.raw_enter, a_raw); bpf_program__set_autoload(skel->progs.raw_exit, a_raw);
    bpf_program__set_autoload(skel->progs.btf_enter, a_btf); bpf_program__set_autoload(skel->progs.btf_exit, a_btf);
    bpf_program__set_autoload(skel->progs.on_switch, sched);
    bpf_program__set_autoload(skel->progs.on_pf_user, sched);
    if (!stack) bpf_map__set_max_entries(skel->maps.stacks, 1);
    if (!ts_hash) bpf_map__set_max_entries(skel->maps.entries, 1);
    int err = sctrace_bpf__load(skel);
    if (err) {
        /* the clean "no privileges" test: EPERM from bpf(BPF_PROG_LOAD / BPF_MAP_CREATE) */
        fprintf(stderr, "pathscope: kernel collection unavailable: loading BPF failed: %s%s\n",
                strerror(-err), err == -EPERM ? " (needs root or CAP_BPF+CAP_PERFMON)" : "");
        return 3;
    }
    double t1 = now_s();

    /* start the command stopped on a pipe, so that it runs only once we are attached */
    int gate[2]; pid_t child = 0; pipe(gate);
    __u32 tg[64]; int ntg = 0;
    if (optind < argc) {
        child = fork();
        if (!child) { char c; close(gate[1]); if (read(gate[0], &c, 1) != 1) _exit(127);
                      execvp(argv[optind], argv + optind); perror("exec"); _exit(127); }
        tg[ntg++] = child;
    }
    for (char *s = pids ? strtok(pids, ",") : NULL; s; s = strtok(NULL, ",")) tg[ntg++] = atoi(s);
    for (int i = 0; i < ntg; i++) track(skel, exclude ? 1 /* init: never a syscall here */ : tg[i], 1);

    if (pindir) {   /* let others (ranks, a second process) add tgids */
        char p[256]; snprintf(p, sizeof p, "%s/tgids", pindir);
        if (bpf_map__pin(skel->maps.tgids, p)) fprintf(stderr, "pin %s: %s\n", p, strerror(errno));
        snprintf(p, sizeof p, "%s/bss", pindir);
        if (bpf_map__pin(skel->maps.bss, p)) fprintf(stderr, "pin %s: %s\n", p, strerror(errno));
    }
    err = sctrace_bpf__attach(skel);
    if (err) { fprintf(stderr, "attach: %s\n", strerror(-err)); return 1; }
    double t2 = now_s();
    if (!quiet) fprintf(stderr, "sctrace: attach=%s ts=%s stats=%s stack=%d filter=%s sched+pf=%d %s; load %.1f ms, attach %.1f ms\n",
            att, ts_hash ? "hash" : "task", st_hash ? "hash" : "task", stack, fhash ? "hash" : "bitmap",
            sched, exclude ? "TARGET FILTERED OUT" : "", (t1 - t0) * 1e3, (t2 - t1) * 1e3);

    signal(SIGINT, on_sig); signal(SIGTERM, on_sig);
    if (child) { write(gate[1], "g", 1); close(gate[1]); }
    /* wait until every tracked process has ended: one pidfd each, poll (no SIGCHLD needed for non-children) */
    struct pollfd pf[64]; int live = 0;
    for (int i = 0; i < ntg; i++) {
        pf[i].fd = syscall(SYS_pidfd_open, tg[i], 0); pf[i].events = POLLIN;
        if (pf[i].fd < 0) fprintf(stderr, "pidfd_open(%u): %s\n", tg[i], strerror(errno)); else live++;
    }
    /* daemon mode: ranks connect to a unix socket; SO_PEERCRED says who they are (no trust in
       what they send); we start tracking, open a pidfd, then acknowledge so the rank goes on. */
    int lfd = -1, lockfd = -1; double idle_since = now_s();
    if (sockpath) {
        char lp[512]; snprintf(lp, sizeof lp, "%s.lock", sockpath);
        lockfd = open(lp, O_RDWR | O_CREAT, 0666);
        struct sockaddr_un a = { .sun_family = AF_UNIX }; strncpy(a.sun_path, sockpath, sizeof a.sun_path - 1);
        lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        unlink(sockpath);
        if (bind(lfd, (void *)&a, sizeof a) || listen(lfd, 256)) { perror("bind/listen"); return 1; }
        chmod(sockpath, 0666);
        fprintf(stderr, "sctrace: serving %s\n", sockpath);
    }
    for (;;) {
        if (stop) break;
        if (sockpath) {
            int c;
            while ((c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC)) >= 0) {
                struct ucred cr; socklen_t l = sizeof cr;
                if (!getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &l) && ntg < 64) {
                    tg[ntg] = cr.pid; track(skel, cr.pid, 1);
                    pf[ntg].fd = syscall(SYS_pidfd_open, cr.pid, 0); pf[ntg].events = POLLIN;
                    if (pf[ntg].fd >= 0) { live++; ntg++; }
                    fprintf(stderr, "sctrace: registered tgid %d (uid %d)\n", cr.pid, cr.uid);
                }
                write(c, "k", 1); close(c);
            }
            if (!live) {
                /* last rank gone (or none yet): exit only under the election lock, after a last look
                   at the socket, so that a rank cannot connect to a collector that is leaving */
                if (ntg == 0 && now_s() - idle_since < 30) { usleep(10000); continue; }
                flock(lockfd, LOCK_EX);
                if ((c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC)) >= 0) {   /* late rank: keep going */
                    struct ucred cr; socklen_t l = sizeof cr; getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &l);
                    tg[ntg] = cr.pid; track(skel, cr.pid, 1);
                    pf[ntg].fd = syscall(SYS_pidfd_open, cr.pid, 0); pf[ntg].events = POLLIN; live++; ntg++;
                    write(c, "k", 1); close(c); flock(lockfd, LOCK_UN); continue;
                }
                unlink(sockpath); close(lfd); flock(lockfd, LOCK_UN);
                break;
            }
        } else if (!live) break;
        if (poll(pf, ntg, sockpath ? 20 : 1000) < 0) continue;
        for (int i = 0; i < ntg; i++) if (pf[i].fd >= 0 && (pf[i].revents & POLLIN)) {
            close(pf[i].fd); pf[i].fd = -1; live--;
            if (tg[i] == (__u32)child) { int st; waitpid(child, &st, 0); }
            if (sockpath) fprintf(stderr, "sctrace: tgid %u ended\n", tg[i]);
        }
    }
    if (stop) {   /* collector stopped before the processes: read live threads too */
        int n = 0; for (int i = 0; i < ntg; i++) n += dump_live(skel, tg[i], quiet);
        fprintf(stderr, "sctrace: read task storage of %d live threads through pidfds\n", n);
    }
    if (getenv("SCTRACE_PROGSTATS")) {   /* needs sysctl kernel.bpf_stats_enabled=1 */
        struct bpf_program *p;
        bpf_object__for_each_program(p, skel->obj) {
            if (bpf_program__fd(p) < 0) continue;
            struct bpf_prog_info info = {0}; __u32 len = sizeof info;
            if (bpf_obj_get_info_by_fd(bpf_program__fd(p), &info, &len) == 0 && info.run_cnt)
                fprintf(stderr, "  prog %-12s runs %10llu  avg %6.1f ns\n", bpf_program__name(p),
                        (unsigned long long)info.run_cnt, (double)info.run_time_ns / info.run_cnt);
        }
    }
    sctrace_bpf__detach(skel);   /* tax on the rest of the machine ends here */

    /* dump */
    struct sc_key k, nk; struct sc_stat v; int fd = bpf_map__fd(skel->maps.stats);
    unsigned long long tot = 0, keys = 0; double tns = 0;
    void *prev = NULL;
    while (bpf_map_get_next_key(fd, prev, &nk) == 0) {
        k = nk; prev = &k;
        if (bpf_map_lookup_elem(fd, &k, &v)) continue;
        keys++; tot += v.count; tns += v.ns;
        if (outdir) {
            char fn[512]; snprintf(fn, sizeof fn, "%s/kernel-%u.tsv", outdir, k.tgid);
            FILE *f = fopen(fn, "a");
            if (f) { fprintf(f, "syscall\t%u\t%s\t%llu\t%llu\n", k.tid, k.nr < NR_SC && scname[k.nr] ? scname[k.nr] : "?",
                             (unsigned long long)v.count, (unsigned long long)v.ns); fclose(f); }
        }
        if (!quiet && (v.count >= 100 || v.ns > 1000000 || !stack))
            printf("tgid %u tid %u %-16s stack %5d  count %9llu  time %12.1f us\n", k.tgid, k.tid,
                   k.nr < NR_SC && scname[k.nr] ? scname[k.nr] : "?", k.stackid,
                   (unsigned long long)v.count, v.ns / 1e3);
        if (stack && v.count >= 1000 && !quiet) {
            __u64 ips[MAX_STACK] = {0};
            if (bpf_map_lookup_elem(bpf_map__fd(skel->maps.stacks), &k.stackid, ips) == 0)
                for (int i = 0; i < MAX_STACK && ips[i]; i++) printf("      #%d 0x%llx\n", i, (unsigned long long)ips[i]);
        }
    }
    if (sigp) {
        struct sample_key sk, *psk = NULL, nsk; struct sc_sample sv; unsigned long long n = 0; double ns = 0;
        int sfd = bpf_map__fd(skel->maps.samples);
        while (bpf_map_get_next_key(sfd, psk, &nsk) == 0) { sk = nsk; psk = &sk;
            if (!bpf_map_lookup_elem(sfd, &sk, &sv)) { n++; ns += sv.ns; } }
        fprintf(stderr, "sctrace: %llu signal samples sent, %.1f ms of syscall time attributed, %.1f ms unattributed (before the handler), drops %llu\n",
                n, ns / 1e6, skel->bss->unattributed_ns / 1e6, (unsigned long long)skel->bss->drops_samples);
    }
    __u32 tid, *pt = NULL, ptid; struct thread_tot tt; fd = bpf_map__fd(skel->maps.threads);
    while (bpf_map_get_next_key(fd, pt, &ptid) == 0) {
        tid = ptid; pt = &tid;
        if (!bpf_map_lookup_elem(fd, &tid, &tt) && !quiet)
            printf("thread tgid %u tid %u: offcpu(blocked) %.1f us, runqueue %.1f us, switches %llu, user page faults %llu\n",
                   tt.tgid, tid, tt.offcpu_ns / 1e3, tt.runq_ns / 1e3, (unsigned long long)tt.nswitch,
                   (unsigned long long)tt.pf_user);
    }
    fprintf(stderr, "sctrace: %llu keys, %llu syscalls, %.1f ms in syscalls; drops stats=%llu entry=%llu stack=%llu flush=%llu missed_exit=%llu\n",
            keys, tot, tns / 1e6, (unsigned long long)skel->bss->drops_stats, (unsigned long long)skel->bss->drops_entry,
            (unsigned long long)skel->bss->drops_stack, (unsigned long long)skel->bss->drops_flush,
            (unsigned long long)skel->bss->missed_exit);
    if (pindir) { char p[256]; snprintf(p, sizeof p, "%s/tgids", pindir); unlink(p); snprintf(p, sizeof p, "%s/bss", pindir); unlink(p); }
    sctrace_bpf__destroy(skel);
    return 0;
}
