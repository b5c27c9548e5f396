/* The end of the run (ending.c): one routine for every way a run ends. */
#ifndef PS_ENDING_H
#define PS_ENDING_H
#include <signal.h>
#include "source.h"

/* Writes the final rank file the way `how` ends the run, with status as the file's status
 * ("complete", "abort 3", "ended-by-rank 2", "exit-without-finalize"), and calls every
 * source's end hook at each phase.  The caller checks what only it knows (MPI_Finalize: the
 * run is an MPI run and this is not a nested call; MPI_Abort: an MPI run; the destructor: the
 * heap's rewrite is due); the script checks that nothing was written yet where that matters.
 * [signal-safe] for PS_END_PEER. */
void ps_run_end(ps_end_how how, const char *status);
/* PS_END_SIGNAL from the fatal-signal handler (info: the handler's): status "signal N"
 * (" before-init" when MPI_Init had not returned); a crash, or a TERM, INT or QUIT that is not
 * the launcher stopping the job, asks the other ranks of this node to write theirs now.
 * [signal-safe] */
void ps_run_end_signal(int sig, const siginfo_t *info);
void ps_mark_final_written(void);           /* a fork child never writes [signal-safe] */
void ps_block_async_signals(sigset_t *saved); /* the launch signals and the peers' request */

/* lifecycle.c, for the scripts [signal-safe] */
int ps_launcher_rank(void);    /* the rank the launcher told us, -1 if none */
int ps_nompi_target(void);     /* a process that never called MPI_Init writes its own profile */
void ps_nompi_prepare(void);   /* its directory and rank */
int ps_reported_rank(void);    /* the rank this process reports as */
#endif
