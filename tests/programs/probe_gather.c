/* The MILC case for probed functions: one function waited in from two call sites.
 *
 *   probe_gather [ITERATIONS [K [SECOND_MS]]]     (defaults 10, 1, K; an even number of ranks)
 *
 * Even ranks gather, odd ranks serve.  Gatherer G's gather() posts r1 from its right
 * neighbour G+1 and r2 from its left neighbour G-1 (modulo the size; both serve), then calls
 * wait_one(&r1) and wait_one(&r2): one function (noinline, it calls MPI_Wait) reached from two
 * call sites of one caller.  Each iteration starts with a barrier; then every server sleeps
 * 20*K ms, sends the message of its left gatherer's r1, sleeps SECOND_MS ms more and sends the
 * message of its right gatherer's r2.  So the first wait lasts about 20*K ms and the second
 * about SECOND_MS ms (K ms by default: the first wait takes ~20 times the second; SECOND_MS 0
 * sends r2's message at once).  gather() does nothing else that takes time: its exclusive time
 * is the two clock reads around each call.
 *
 * Each rank prints one line on stdout (its own clock_gettime totals, ns, around each call):
 *   probe_gather rank=R role=gather iterations=N site1_calls=N site1_ns=T1 site2_calls=N
 *                site2_ns=T2 gather_calls=N gather_ns=TG          (one line)
 *   probe_gather rank=R role=serve iterations=N
 * The binary knows nothing about pathscope. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

struct site_total {
    long calls;
    long long ns;
};

static struct site_total site1, site2, gather_total;

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) /* resumed after a signal (a profiler's sampler) */
        ;
}

__attribute__((noinline, noclone)) void wait_one(MPI_Request *request)
{
    MPI_Wait(request, MPI_STATUS_IGNORE);
}

__attribute__((noinline, noclone)) void gather(int left, int right, int *from_right,
                                               int *from_left)
{
    MPI_Request r1, r2;
    MPI_Irecv(from_right, 1, MPI_INT, right, 1, MPI_COMM_WORLD, &r1);
    MPI_Irecv(from_left, 1, MPI_INT, left, 2, MPI_COMM_WORLD, &r2);
    /* two call sites of wait_one in this function, each timed by the clock reads around it */
    long long t0 = now_ns();
    wait_one(&r1);
    long long t1 = now_ns();
    wait_one(&r2);
    long long t2 = now_ns();
    site1.ns += t1 - t0;
    site1.calls++;
    site2.ns += t2 - t1;
    site2.calls++;
}

static void serve(int left, int right, long k, long second_ms, int value)
{
    sleep_ms(20 * k);
    MPI_Send(&value, 1, MPI_INT, left, 1, MPI_COMM_WORLD);
    sleep_ms(second_ms);
    MPI_Send(&value, 1, MPI_INT, right, 2, MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long iterations = argc > 1 ? atol(argv[1]) : 10;
    long k = argc > 2 ? atol(argv[2]) : 1;
    long second_ms = argc > 3 ? atol(argv[3]) : k;
    if (size % 2 != 0 || iterations < 1 || k < 0 || second_ms < 0) {
        if (rank == 0)
            fprintf(stderr, "usage: probe_gather [ITERATIONS [K [SECOND_MS]]] on an even "
                            "number of ranks (got %d)\n", size);
        MPI_Finalize();
        return 2;
    }
    int left = (rank - 1 + size) % size, right = (rank + 1) % size;
    int from_right = -1, from_left = -1;
    for (long i = 0; i < iterations; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank % 2 == 1) {
            serve(left, right, k, second_ms, rank);
            continue;
        }
        long long t0 = now_ns();
        gather(left, right, &from_right, &from_left);
        gather_total.ns += now_ns() - t0;
        gather_total.calls++;
        if (from_right != right || from_left != left) {
            fprintf(stderr, "probe_gather: rank %d got %d and %d, expected %d and %d\n", rank,
                    from_right, from_left, right, left);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    if (rank % 2 == 0)
        printf("probe_gather rank=%d role=gather iterations=%ld site1_calls=%ld site1_ns=%lld "
               "site2_calls=%ld site2_ns=%lld gather_calls=%ld gather_ns=%lld\n",
               rank, iterations, site1.calls, site1.ns, site2.calls, site2.ns,
               gather_total.calls, gather_total.ns);
    else
        printf("probe_gather rank=%d role=serve iterations=%ld\n", rank, iterations);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
