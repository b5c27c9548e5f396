/* Sampling and threads (sample.c). */
#ifndef PS_SAMPLE_H
#define PS_SAMPLE_H
#include <signal.h>
#include "cct.h"

#define PS_SAMPLE_SIGNAL SIGPROF
extern int ps_sample_rate;           /* Hz, 0 = off */
extern const char *ps_sample_source; /* perf-task-clock, posix-cpu-timer, posix-wall-timer, off */
extern int ps_paths_on;              /* unwinding and trees active in this process */
void ps_sample_init(void);           /* at load time, call paths on (source_sample.c) */
void ps_sample_forget_after_fork(void); /* in a fork child [signal-safe] */
void ps_sample_thread_start(ps_thread_t *t);
void ps_sample_thread_stop(ps_thread_t *t);
void ps_threads_stop_sampling(void);
void ps_threads_close_all(void);     /* closing samples at a normal end (not signal-safe) */
void ps_sample_stop_all(void);       /* [signal-safe] */
void ps_sample_restart_all(void);    /* [signal-safe] */
int ps_sample_in_own_process(void);  /* not a vfork or fork child [signal-safe] */
/* Off-CPU time from the kernel collector's reports (kernel.c) instead of the wall-clock
 * evidence at samples: set once the collector has agreed to send them. */
extern int ps_offcpu_reported;
void ps_sample_offcpu(ps_thread_t *t, void *context, uint64_t ns); /* [signal-safe, tree claimed] */

/* SIGPROF and the application (sigprof.c) */
int ps_sigprof_free_at_start(void);  /* no handler installed yet (SIG_DFL or SIG_IGN) */
/* Installs our handler with the C library's own sigaction and starts watching the
 * application's changes of SIGPROF. */
void ps_sigprof_install_ours(const struct sigaction *sa, void *handler);
int ps_sigprof_real_sigaction(int sig, const struct sigaction *act, struct sigaction *old); /* [signal-safe] */
int ps_sigprof_ours_flag(void);      /* the application has not taken SIGPROF (as far as we saw) [signal-safe] */
int ps_sigprof_installed(void);      /* our handler is installed now (asks the kernel) [signal-safe] */
void ps_sigprof_check_end(void);     /* end of the run: a change we did not see? [signal-safe] */
/* SIGTRAP kept (the probes' patcher, runtime/probe/patch.c, once its handler is installed):
 * from then on the application's sigaction, signal, ... calls for SIGTRAP go to keeper
 * instead of the C library -- it keeps the application's disposition to chain to, and answers
 * with it as the previous one -- so the handler that moves threads out of a patch window stays
 * installed whatever the application does.  [signal-safe] */
typedef int (*ps_sigtrap_keeper_fn)(const struct sigaction *act, struct sigaction *old);
void ps_signal_keep_sigtrap(ps_sigtrap_keeper_fn keeper);
#endif
