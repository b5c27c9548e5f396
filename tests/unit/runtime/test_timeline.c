/* Unit tests of a thread's timeline (core/timeline.c), in ticks chosen here: the guard that
 * keeps a thread's MPI time within its elapsed time (MPI time measured beyond the wall time
 * it fell in goes to mpi_ticks_excess, and the nodes' MPI times are scaled to what was kept),
 * and the closing identity on-CPU + off-CPU + MPI = elapsed.
 */
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cct.h"
#include "timeline.h"
#include "check.h"

static ps_thread_t *new_thread(uint64_t start)
{
    ps_thread_t *t = calloc(1, sizeof *t);
    t->nodes = calloc(4, sizeof *t->nodes);
    if (!t || !t->nodes) abort();
    t->tid = (int)syscall(SYS_gettid);
    t->max_nodes = 4;
    t->nnodes = 3;
    t->not_unwound_node = 2;
    t->start_ticks = start;
    ps_time_start(&t->time, start, 0);
    return t;
}

/* MPI time within the wall time: nothing cut, scale 1. */
static void test_within(void)
{
    ps_thread_t *t = new_thread(1000);
    ps_time_mpi(&t->time, 300);
    uint64_t on = 9, off = 9;
    ps_time_charge(&t->time, 1500, 0, 0, 0, &on, &off); /* no CPU time: on 0 */
    CHECK_INT(on, 0);
    CHECK_INT(t->time.mpi_ticks_total, 300);
    CHECK_INT(t->time.mpi_ticks_excess, 0);
    ps_time_mpi(&t->time, 100);
    ps_thread_close(t, 2000);
    CHECK_INT(t->time.mpi_ticks_total, 400);
    CHECK(t->time.mpi_scale == 1.0);
    /* the rest of the 1000 ticks is off-CPU time no sample saw */
    CHECK_INT(t->nodes[2].offcpu_ticks, 600);
}

/* 300 ticks of MPI time measured in 200 ticks of wall time (a call timed across a kept
 * sample): 100 cut there; 50 more in the last 200 ticks are kept.  MPI 250 of 400 elapsed,
 * the nodes' MPI times scaled by 250 / 350. */
static void test_beyond_at_a_sample(void)
{
    ps_thread_t *t = new_thread(1000);
    ps_time_mpi(&t->time, 300);
    uint64_t on, off;
    ps_time_charge(&t->time, 1200, 0, 0, 1, &on, &off);
    CHECK_INT(t->time.mpi_ticks_total, 300); /* as measured; 100 of it beyond the wall time */
    CHECK_INT(t->time.mpi_ticks_excess, 100);
    CHECK_INT(off, 0); /* all of the interval was MPI time */
    ps_time_mpi(&t->time, 50);
    ps_thread_close(t, 1400);
    CHECK_INT(t->time.mpi_ticks_total, 350);
    CHECK_INT(t->time.mpi_ticks_excess, 100);
    CHECK(t->time.mpi_scale > 250.0 / 350 - 1e-12 && t->time.mpi_scale < 250.0 / 350 + 1e-12);
    CHECK_INT(t->nodes[2].offcpu_ticks, 150);
    CHECK_INT(t->time.mpi_ticks_total - t->time.mpi_ticks_excess + t->time.offcpu_total +
              t->time.oncpu_total, t->end_ticks - t->start_ticks);
}

/* More MPI time than the thread lived (the vanished computation: a whole MPI_Init counted
 * twice): MPI is cut to the elapsed time, never beyond. */
static void test_beyond_at_close(void)
{
    ps_thread_t *t = new_thread(5000);
    ps_time_mpi(&t->time, 800);
    ps_thread_close(t, 5500);
    CHECK_INT(t->time.mpi_ticks_total - t->time.mpi_ticks_excess, 500);
    CHECK_INT(t->time.mpi_ticks_excess, 300);
    CHECK_INT(t->nodes[2].offcpu_ticks, 0);
}

/* A clock read that goes back (another CPU's TSC): an interval of 0, never a huge one. */
static void test_clock_back(void)
{
    ps_thread_t *t = new_thread(1000);
    uint64_t on, off;
    ps_time_mpi(&t->time, 10);
    ps_time_charge(&t->time, 900, 0, 0, 1, &on, &off);
    CHECK_INT(t->time.mpi_ticks_total, 10);
    CHECK_INT(t->time.mpi_ticks_excess, 10);
    CHECK_INT(t->time.last_ticks, 1000); /* the timeline does not move back */
    ps_thread_close(t, 950);
    CHECK_INT(t->end_ticks, 1000);
    CHECK_INT(t->time.mpi_ticks_total - t->time.mpi_ticks_excess, 0);
}

int main(void)
{
    test_within();
    test_beyond_at_a_sample();
    test_beyond_at_close();
    test_clock_back();
    return failures != 0;
}
