/* Shared by probe_shapes.c, lib/probe_shapes2.c and lib/probe_shapes_lib.c (the shared
 * library): the clock and the per-function totals each caller keeps around its calls. */
#ifndef PROBE_SHAPES_H
#define PROBE_SHAPES_H
#include <time.h>

struct shapes_total {
    long calls;
    long long ns;
};

static inline long long shapes_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Busy for us microseconds of wall time (a probe must see the time inside the function). */
static inline void shapes_spin(long us)
{
    long long end = shapes_now_ns() + us * 1000LL;
    while (shapes_now_ns() < end)
        ;
}

/* One call, timed by its caller: the clock reads sit right around it. */
#define SHAPES_TIMED(total, call)                                                              \
    do {                                                                                       \
        long long t0_ = shapes_now_ns();                                                       \
        call;                                                                                  \
        (total).ns += shapes_now_ns() - t0_;                                                   \
        (total).calls++;                                                                       \
    } while (0)

/* lib/probe_shapes2.c: calls its own static helper `calls` times */
void shapes2_run(int calls, long spin_us, struct shapes_total *total);
/* lib/probe_shapes_lib.c, in libprobe_shapes_lib.so */
void shapes_lib_work(long spin_us);

#endif
