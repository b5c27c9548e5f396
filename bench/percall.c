/* Per-call cost of the MPI wrappers: one operation in a tight loop, timed from the outside.
 *
 *   percall OP ITERATIONS [WARMUP]
 *
 * OP is one of
 *   comm_rank  MPI_Comm_rank(MPI_COMM_WORLD) (any number of ranks; each rank times its own loop)
 *   pingpong   8-byte MPI_Send/MPI_Recv between ranks 0 and 1 (needs 2 ranks); one iteration
 *              is one round trip = 2 calls per rank, so ns/call = round-trip time / 2
 *   allreduce  8-byte MPI_Allreduce (MPI_DOUBLE, MPI_SUM) on MPI_COMM_WORLD
 *   exchange   8-byte MPI_Irecv + MPI_Isend + MPI_Waitall(2) between ranks 0 and 1 (needs 2
 *              ranks): the nonblocking pattern; one iteration = 3 calls per rank
 *   test       MPI_Test on a receive that stays pending (a polling loop; run on 1 rank)
 *   test_gups  MPI_Test as above, then one random read-modify-write in a 512 MiB table: the
 *              loop of HPCC's MPIRandomAccess (poll, update, poll, ...)
 *   testany_gups  the same with MPI_Testany(1, ...), which is what HPCC calls
 *   rdtsc      reference: one rdtsc instruction (the cost of one tick read in a timed wrapper)
 *   clock      reference: one clock_gettime(CLOCK_MONOTONIC)
 *   gups       reference: the random update of test_gups alone
 *   gups_rdtsc reference: the random update preceded by two rdtsc (what a timed wrapper adds
 *              to test_gups, without MPI or pathscope)
 *
 * The same binary is run with and without pathscope preloaded (bench/percall.py); it knows
 * nothing about pathscope.  After WARMUP iterations and a barrier, the ITERATIONS are run in
 * CHUNKS equal chunks, each timed with clock_gettime (two clock reads per chunk of thousands
 * of calls: negligible).  Rank 0 prints one line:
 *   percall op=OP iterations=N ranks=P ns_per_call=MEDIAN mean_ns_per_call=MEAN min_ns_per_call=MIN
 * MEDIAN is the median chunk's ns/call: on a shared machine a chunk in which the process was
 * descheduled is an outlier that the median ignores, while a constant per-call cost (what a
 * wrapper adds) is in every chunk.  MEAN is the whole loop's time / calls (slowest rank).
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHUNKS 101

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static volatile int sink_int;
static volatile uint64_t sink_u64;
static volatile double sink_double;

static void loop_comm_rank(long n)
{
    int r = 0;
    for (long i = 0; i < n; i++) {
        MPI_Comm_rank(MPI_COMM_WORLD, &r);
        sink_int = r;
    }
}

static void loop_pingpong(long n, int rank)
{
    double buf = 0.0;
    for (long i = 0; i < n; i++) {
        if (rank == 0) {
            MPI_Send(&buf, 1, MPI_DOUBLE, 1, 7, MPI_COMM_WORLD);
            MPI_Recv(&buf, 1, MPI_DOUBLE, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Recv(&buf, 1, MPI_DOUBLE, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(&buf, 1, MPI_DOUBLE, 0, 7, MPI_COMM_WORLD);
        }
    }
    sink_double = buf;
}

static void loop_allreduce(long n)
{
    double in = 1.0, out = 0.0;
    for (long i = 0; i < n; i++) MPI_Allreduce(&in, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    sink_double = out;
}

static void loop_exchange(long n, int rank)
{
    double in = 0.0, out = 1.0;
    MPI_Request r[2];
    int partner = rank ^ 1;
    if (rank > 1) return;
    for (long i = 0; i < n; i++) {
        MPI_Irecv(&in, 1, MPI_DOUBLE, partner, 8, MPI_COMM_WORLD, &r[0]);
        MPI_Isend(&out, 1, MPI_DOUBLE, partner, 8, MPI_COMM_WORLD, &r[1]);
        MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
    }
    sink_double = in;
}

/* A pending receive for the polling loops: posted on MPI_COMM_SELF with a tag nobody sends
 * until the end of the run. */
static MPI_Request pending = MPI_REQUEST_NULL;
static double pending_buf;

static void loop_test(long n)
{
    int flag = 0;
    for (long i = 0; i < n; i++) MPI_Test(&pending, &flag, MPI_STATUS_IGNORE);
    sink_int = flag;
}

#define GUPS_BITS 26 /* 2^26 words = 512 MiB: far beyond any cache and TLB reach */
static uint64_t *gups_table, gups_ran = 1;

static inline void gups_update(void)
{
    gups_ran = (gups_ran << 1) ^ ((int64_t)gups_ran < 0 ? 7 : 0);
    gups_table[gups_ran & ((1ull << GUPS_BITS) - 1)] ^= gups_ran;
}

static inline uint64_t read_tsc(void)
{
#if defined(__x86_64__)
    uint32_t lo, hi;
    __asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
    return ((uint64_t)hi << 32) | lo;
#else
    return 0;
#endif
}

static void loop_gups(long n, int with_test, int with_rdtsc)
{
    int flag = 0, index = 0;
    uint64_t acc = 0;
    for (long i = 0; i < n; i++) {
        if (with_test == 1) MPI_Test(&pending, &flag, MPI_STATUS_IGNORE);
        else if (with_test == 2) MPI_Testany(1, &pending, &index, &flag, MPI_STATUS_IGNORE);
        if (with_rdtsc) {
            uint64_t t0 = read_tsc();
            acc += read_tsc() - t0;
        }
        gups_update();
    }
    sink_u64 = acc + (uint64_t)flag;
}

static void loop_rdtsc(long n)
{
#if defined(__x86_64__)
    uint64_t acc = 0;
    for (long i = 0; i < n; i++) {
        uint32_t lo, hi;
        __asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
        acc += ((uint64_t)hi << 32) | lo;
    }
    sink_u64 = acc;
#else
    (void)n;
#endif
}

static void loop_clock(long n)
{
    struct timespec ts;
    uint64_t acc = 0;
    for (long i = 0; i < n; i++) {
        clock_gettime(CLOCK_MONOTONIC, &ts);
        acc += (uint64_t)ts.tv_nsec;
    }
    sink_u64 = acc;
}

static void run(const char *op, long n, int rank)
{
    if (!strcmp(op, "comm_rank")) loop_comm_rank(n);
    else if (!strcmp(op, "pingpong")) loop_pingpong(n, rank);
    else if (!strcmp(op, "allreduce")) loop_allreduce(n);
    else if (!strcmp(op, "exchange")) loop_exchange(n, rank);
    else if (!strcmp(op, "test")) loop_test(n);
    else if (!strcmp(op, "test_gups")) loop_gups(n, 1, 0);
    else if (!strcmp(op, "testany_gups")) loop_gups(n, 2, 0);
    else if (!strcmp(op, "gups")) loop_gups(n, 0, 0);
    else if (!strcmp(op, "gups_rdtsc")) loop_gups(n, 0, 1);
    else if (!strcmp(op, "rdtsc")) loop_rdtsc(n);
    else loop_clock(n);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *ops[] = {"comm_rank", "pingpong", "allreduce", "exchange", "test", "test_gups",
                         "testany_gups", "rdtsc", "clock", "gups", "gups_rdtsc"};
    int known = 0;
    if (argc >= 3)
        for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) known |= !strcmp(argv[1], ops[i]);
    if (!known || ((!strcmp(argv[1], "pingpong") || !strcmp(argv[1], "exchange")) && size < 2)) {
        if (rank == 0)
            fprintf(stderr, "usage: percall comm_rank|pingpong|allreduce|exchange|test|test_gups|"
                            "testany_gups|rdtsc|clock|gups|gups_rdtsc ITERATIONS [WARMUP] "
                            "(pingpong and exchange need 2 ranks)\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const char *op = argv[1];
    long n = atol(argv[2]);
    long warmup = argc > 3 ? atol(argv[3]) : n / 10;

    if (n < CHUNKS) n = CHUNKS;
    long chunk = n / CHUNKS;
    n = chunk * CHUNKS;
    double calls_per_iter = !strcmp(op, "pingpong") ? 2.0 : !strcmp(op, "exchange") ? 3.0 : 1.0;
    if (!strncmp(op, "test", 4))
        MPI_Irecv(&pending_buf, 1, MPI_DOUBLE, 0, 99, MPI_COMM_SELF, &pending);
    if (strstr(op, "gups")) {
        gups_table = malloc(sizeof(uint64_t) << GUPS_BITS);
        if (!gups_table) MPI_Abort(MPI_COMM_WORLD, 3);
        memset(gups_table, 1, sizeof(uint64_t) << GUPS_BITS); /* fault every page in now */
    }

    MPI_Barrier(MPI_COMM_WORLD);
    run(op, warmup, rank);
    MPI_Barrier(MPI_COMM_WORLD);
    static double per_call[CHUNKS];
    double total = 0.0;
    for (int c = 0; c < CHUNKS; c++) {
        double t0 = now_ns();
        run(op, chunk, rank);
        double t = now_ns() - t0;
        total += t;
        per_call[c] = t / ((double)chunk * calls_per_iter);
    }
    double tmax = 0.0;
    MPI_Reduce(&total, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (pending != MPI_REQUEST_NULL) { /* complete the pending receive: a clean finish */
        double last = 0.0;
        MPI_Send(&last, 1, MPI_DOUBLE, 0, 99, MPI_COMM_SELF);
        MPI_Wait(&pending, MPI_STATUS_IGNORE);
    }
    free(gups_table);
    qsort(per_call, CHUNKS, sizeof *per_call, cmp_double);
    if (rank == 0)
        printf("percall op=%s iterations=%ld ranks=%d ns_per_call=%.3f mean_ns_per_call=%.3f "
               "min_ns_per_call=%.3f\n", op, n, size, per_call[CHUNKS / 2],
               tmax / ((double)n * calls_per_iter), per_call[0]);
    MPI_Finalize();
    return 0;
}
