/* Sampling and threads (sample.c). */
#ifndef PS_SAMPLE_H
#define PS_SAMPLE_H
#include <signal.h>
#include "cct.h"

#define PS_SAMPLE_SIGNAL SIGPROF
extern int ps_sample_rate;           /* Hz, 0 = off */
extern const char *ps_sample_source; /* perf-task-clock, posix-cpu-timer, posix-wall-timer, off */
extern int ps_paths_on;              /* unwinding and trees active in this process */
void ps_sample_init(void);           /* at load time, after the options */
void ps_sample_thread_start(ps_thread_t *t);
void ps_sample_thread_stop(ps_thread_t *t);
void ps_threads_stop_sampling(void);
void ps_threads_close_all(void);     /* closing samples at a normal end (not signal-safe) */
#endif
