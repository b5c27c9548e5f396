/* How runs start and end: lifecycle <mode>.  Every mode first does the same known traffic:
 * one MPI_Bcast of 4 ints from rank 0 and one MPI_Barrier on MPI_COMM_WORLD, so that every
 * rank has data to lose.
 *   normal        MPI_Finalize, ranks finishing at different times (rank r sleeps r x 150 ms)
 *   init_thread   MPI_Init_thread(MPI_THREAD_MULTIPLE)
 *   atexit        MPI_Finalize called from an atexit handler registered before MPI_Init,
 *                 after one more MPI_Allreduce made from that handler
 *   nofinalize    returns from main without MPI_Finalize (rank files only)
 *   abort         rank 1 calls MPI_Abort(MPI_COMM_WORLD, 7), the others wait in a barrier
 *   segv          rank 2 dereferences a null pointer, the others wait in a barrier
 *   hang          every rank sleeps (the test sends SIGTERM/SIGINT to the launcher)
 *   hang_term     as hang, but SIGTERM ends no rank (a launcher must follow with SIGKILL):
 *                 every rank installs a SIGTERM handler that returns (a program that shuts
 *                 down in its own time) before MPI_Init (pathscope's, installed again by
 *                 MPI_Init, chains to it), and rank 3 then ignores SIGTERM once it hangs
 *                 (which replaces pathscope's handler)
 *   preinit       returns from main before MPI_Init (e.g. a bad argument): no MPI at all
 *   abort_apphandler  every rank installs its own handler for SIGRTMAX-3 (pathscope's request
 *                 signal between the ranks of a node) before MPI_Init, queues that signal to
 *                 itself after the barrier (value 42) and prints what its handler saw
 *                 ("lifecycle: rank R handler saw N signal(s), value V"), then as abort
 *   stray_rtsig   rank 0 sends itself SIGRTMAX-3 with kill() (default action: it dies)
 *   ignored_rtsig every rank ignores SIGRTMAX-3 before MPI_Init and sends it to itself after
 *                 the barrier ("lifecycle: rank R ignored it"), then as abort
 * Two modes for many ranks (tests/e2e/test_scale_failures.py) add known traffic after the
 * Bcast and Barrier: MPI_Comm_split of W by rank parity (W_s1.0: even ranks, W_s1.1: odd),
 * 3 Barriers and 2 Allreduces of 1 int on W, then 2 Allreduces of 2 ints and 1 Barrier on the
 * split.  Then every rank R writes its pid to PREFIX.R, and every rank but V waits in an
 * MPI_Barrier on W that never completes:
 *   victim V PREFIX   rank V sleeps (the test kills it by its pid)
 *   culprit V PREFIX  rank V waits for the file PREFIX.go (the test makes it once every rank
 *                 wrote its pid), then calls MPI_Abort(MPI_COMM_WORLD, 7)
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t app_signals, app_value = -1;

static void app_handler(int sig, siginfo_t *info, void *context)
{
    (void)sig;
    (void)context;
    app_signals++;
    app_value = info->si_value.sival_int;
}

static void term_handler(int sig) { (void)sig; }

/* The scale modes' known traffic. */
static void scale_traffic(int rank)
{
    MPI_Comm half;
    int one = 1, sum = 0, two[2] = {1, rank}, sums[2];
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    for (int i = 0; i < 3; i++) MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < 2; i++) MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    for (int i = 0; i < 2; i++) MPI_Allreduce(two, sums, 2, MPI_INT, MPI_SUM, half);
    MPI_Barrier(half);
}

/* After the traffic every rank writes its pid to PREFIX.R (whole, then renamed: the test never
 * reads half a pid): once all are there, every rank has made all its calls of the traffic.
 * Rank `chosen` then sleeps (victim) or, once the test creates PREFIX.go, calls MPI_Abort
 * (culprit); the others wait in a barrier that never completes. */
static void scale_end(const char *mode, int rank, int chosen, const char *prefix)
{
    char name[4096], tmp[4100];
    snprintf(name, sizeof name, "%s.%d", prefix, rank);
    snprintf(tmp, sizeof tmp, "%s.tmp", name);
    FILE *f = fopen(tmp, "w");
    if (f) {
        fprintf(f, "%d\n", (int)getpid());
        fclose(f);
        rename(tmp, name);
    }
    if (rank != chosen) {
        MPI_Barrier(MPI_COMM_WORLD);
        return;
    }
    if (strcmp(mode, "culprit") == 0) {
        snprintf(name, sizeof name, "%s.go", prefix);
        while (access(name, F_OK) != 0) usleep(10000);
        MPI_Abort(MPI_COMM_WORLD, 7);
    }
    for (;;) sleep(1);
}

static void late_finalize(void)
{
    int one = 1, sum = 0;
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "normal";
    int rank, provided, v[4] = {1, 2, 3, 4};
    if (strcmp(mode, "preinit") == 0) return 0;
    if (strcmp(mode, "atexit") == 0) atexit(late_finalize);
    if (strcmp(mode, "ignored_rtsig") == 0) signal(SIGRTMAX - 3, SIG_IGN);
    if (strcmp(mode, "hang_term") == 0) signal(SIGTERM, term_handler);
    if (strcmp(mode, "abort_apphandler") == 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = app_handler;
        sa.sa_flags = SA_SIGINFO;
        sigaction(SIGRTMAX - 3, &sa, NULL);
    }
    if (strcmp(mode, "init_thread") == 0) {
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
        if (provided != MPI_THREAD_MULTIPLE) fprintf(stderr, "lifecycle: provided %d\n", provided);
    } else {
        MPI_Init(&argc, &argv);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    /* (before the barrier: once rank 0 says it hangs, rank 3 ignores SIGTERM) */
    if (strcmp(mode, "hang_term") == 0 && rank == 3) signal(SIGTERM, SIG_IGN);
    MPI_Bcast(v, 4, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);

    if (strcmp(mode, "normal") == 0 || strcmp(mode, "init_thread") == 0) {
        usleep((useconds_t)rank * 150000);
        MPI_Finalize();
    } else if (strcmp(mode, "atexit") == 0) {
        return 0;
    } else if (strcmp(mode, "nofinalize") == 0) {
        return 0;
    } else if (strcmp(mode, "abort") == 0) {
        if (rank == 1) MPI_Abort(MPI_COMM_WORLD, 7);
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Finalize();
    } else if (strcmp(mode, "abort_apphandler") == 0) {
        union sigval v = {.sival_int = 42};
        sigqueue(getpid(), SIGRTMAX - 3, v);
        for (int i = 0; i < 5000 && !app_signals; i++) usleep(1000); /* (maybe another thread) */
        printf("lifecycle: rank %d handler saw %d signal(s), value %d\n", rank, (int)app_signals,
               (int)app_value);
        fflush(stdout);
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 1) MPI_Abort(MPI_COMM_WORLD, 7);
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Finalize();
    } else if (strcmp(mode, "ignored_rtsig") == 0) {
        kill(getpid(), SIGRTMAX - 3);
        printf("lifecycle: rank %d ignored it\n", rank);
        fflush(stdout);
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 1) MPI_Abort(MPI_COMM_WORLD, 7);
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Finalize();
    } else if (strcmp(mode, "stray_rtsig") == 0) {
        if (rank == 0) kill(getpid(), SIGRTMAX - 3);
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Finalize();
    } else if (strcmp(mode, "segv") == 0) {
        if (rank == 2) {
            volatile int *p = NULL;
            *p = 1;
        }
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Finalize();
    } else if ((strcmp(mode, "victim") == 0 || strcmp(mode, "culprit") == 0) && argc > 3) {
        scale_traffic(rank);
        scale_end(mode, rank, atoi(argv[2]), argv[3]);
        MPI_Finalize();
    } else if (strcmp(mode, "hang") == 0 || strcmp(mode, "hang_term") == 0) {
        if (rank == 0) fprintf(stdout, "lifecycle: hanging\n");
        fflush(stdout);
        for (;;) sleep(1);
    }
    return 0;
}
