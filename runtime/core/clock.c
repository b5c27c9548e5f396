/* Clock: rdtsc where the TSC is invariant (constant_tsc + nonstop_tsc), else CLOCK_MONOTONIC.
 * The tick rate is calibrated against CLOCK_MONOTONIC over the whole run (start to "now"),
 * so no calibration delay is paid at start-up. */
#include "pathscope.h"

#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int ps_clock_uses_tsc;
static uint64_t clock_tsc0, clock_ns0;

/* (ps_now's fallback without an invariant TSC, reached from the probes' fast entry and exit,
 * which save the general registers only: runtime/probe/enter.c) */
__attribute__((target("general-regs-only"), no_sanitize("address", "undefined")))
uint64_t ps_clock_monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int clock_cpu_has_invariant_tsc(void)
{
#if defined(__x86_64__)
    static char buf[16384];
    int fd = open("/proc/cpuinfo", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = 0;
    return strstr(buf, " constant_tsc") && strstr(buf, " nonstop_tsc");
#else
    return 0;
#endif
}

/* The TSC and CLOCK_MONOTONIC read together: the TSC between two reads of the clock, retried
 * (a few times, a bounded cost) while the thread was preempted between them, which on a
 * loaded node (more ranks than cores) can be milliseconds and would skew a calibration over
 * a short span.  *ns is the midpoint of the two reads. [signal-safe] */
static uint64_t clock_pair(uint64_t *ns)
{
    uint64_t best_gap = UINT64_MAX, best_t = 0;
    for (int i = 0; i < 4; i++) {
        uint64_t a = ps_clock_monotonic_ns(), t = ps_now(), b = ps_clock_monotonic_ns();
        if (b - a < best_gap) {
            best_gap = b - a;
            best_t = t;
            *ns = a + (b - a) / 2;
        }
        if (best_gap < 20000) break; /* under 20 us: not preempted */
    }
    return best_t;
}

void ps_clock_init(void)
{
    ps_clock_uses_tsc = clock_cpu_has_invariant_tsc();
    if (ps_clock_uses_tsc) clock_tsc0 = clock_pair(&clock_ns0);
    else clock_tsc0 = clock_ns0 = ps_clock_monotonic_ns();
}

double ps_ticks_per_ns(void)
{
    if (!ps_clock_uses_tsc) return 1.0;
    uint64_t ns, t = clock_pair(&ns);
    if (ns - clock_ns0 < 1000000) { /* under 1 ms: calibrate briefly */
        struct timespec d = {0, 2000000};
        nanosleep(&d, NULL);
        t = clock_pair(&ns);
    }
    return (double)(t - clock_tsc0) / (double)(ns - clock_ns0);
}

uint64_t ps_ticks_to_ns(uint64_t ticks)
{
    static double rate;
    if (!ps_clock_uses_tsc) return ticks;
    if (rate == 0.0) rate = ps_ticks_per_ns();
    return (uint64_t)((double)ticks / rate);
}
