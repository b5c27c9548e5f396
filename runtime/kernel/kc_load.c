/* Loading and attaching the BPF programs of pathscope-kcollect: the richest variant the
 * kernel takes (signals with bpf_send_signal_task, the page-fault tracepoint), the hooks in an
 * order that never counts a thread without flushing it at its exit, the task iterator; and
 * the shut-down that detaches them all.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kc_internal.h"

_Static_assert(SYS_rt_sigreturn == PS_KC_NR_RT_SIGRETURN, "rt_sigreturn's number");

struct collector_bpf *kc_skel;
struct bpf_link *kc_iter_link;
int kc_signals;         /* the sys_exit program with signals is loaded */
int kc_page_faults;     /* page_fault_user is attached */

/* ---- loading and attaching ----------------------------------------------------------------- */

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
int kc_load(void)
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

int kc_attach(void)
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

void kc_shutdown(void)
{
    bpf_link__destroy(kc_iter_link);
    kc_iter_link = NULL;
    collector_bpf__destroy(kc_skel);   /* detaches everything */
    kc_skel = NULL;
}
