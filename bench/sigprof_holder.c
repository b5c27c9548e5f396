/* Preloaded by bench/probe.py's pathscope-paths variant: a SIGPROF handler installed before
 * libpathscope.so starts, which makes the runtime turn exit timing off (its thunks need
 * SIGPROF for restores at cancellation), so probes count calls per path only.  No option does
 * this; the benchmark uses it to split a probed call's cost into the path and the exit. */
#include <signal.h>

static void ignore(int sig)
{
    (void)sig;
}

/* Preloaded after libpathscope.so (pathscope run puts its library first), so the loader runs
 * this constructor before the runtime's. */
__attribute__((constructor)) static void hold_sigprof(void)
{
    signal(SIGPROF, ignore);
}
