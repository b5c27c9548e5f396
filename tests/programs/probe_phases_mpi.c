/* Phases of an MPI program gated by a FIFO, for probes added and removed while it runs.
 *
 *   probe_phases_mpi FIFO [PHASES [SLEEP_MS]]          (defaults 3 phases, 2 ms)
 *
 * counted() (noinline) is called from two call sites: from plain_site() directly and from
 * mpi_site(), which also calls MPI_Allreduce.  In phase P (1, 2, ...) rank R calls
 * plain_site() 3 + 2*R + P times and mpi_site() 12 + P times; so counted() runs 15 + 2*R + 2*P
 * times (the two sites' counts differ on up to 5 ranks).  Before its K-th mpi_site() call,
 * rank K % size sleeps SLEEP_MS ms (outside mpi_site): the other ranks wait that long in the
 * Allreduce, so mpi_site's time is almost all MPI time.
 *
 * After each phase every rank prints, flushed:
 *   probe_phases_mpi rank=R phase=P plain=N mpi=M counted=N+M allreduce_ok=1
 * Then, except after the last phase, rank 0 reads one line from FIFO (opened anew for each
 * phase: it waits for a writer) and all ranks meet in MPI_Barrier: a test adds or removes
 * probes while the job waits there.  The binary knows nothing about pathscope. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long counted_calls;

__attribute__((noinline, noclone)) int counted(int x)
{
    counted_calls++;
    return x * 7 + 1;
}

__attribute__((noinline, noclone)) int plain_site(int x)
{
    return counted(x) + 1;
}

__attribute__((noinline, noclone)) int mpi_site(int x)
{
    int mine = counted(x), sum = 0;
    MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    return sum;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) /* resumed after a signal (a profiler's sampler) */
        ;
}

/* Rank 0 waits for one line on fifo; then everyone goes on together. */
static void gate(int rank, const char *fifo)
{
    if (rank == 0) {
        FILE *f = fopen(fifo, "r");
        char line[64];
        if (f == NULL || fgets(line, sizeof line, f) == NULL) {
            fprintf(stderr, "probe_phases_mpi: cannot read a line from %s\n", fifo);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        fclose(f);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int phases = argc > 2 ? atoi(argv[2]) : 3;
    long sleep = argc > 3 ? atol(argv[3]) : 2;
    if (argc < 2 || phases < 1 || sleep < 0) {
        if (rank == 0)
            fprintf(stderr, "usage: probe_phases_mpi FIFO [PHASES [SLEEP_MS]]\n");
        MPI_Finalize();
        return 2;
    }
    long k = 0;
    for (int phase = 1; phase <= phases; phase++) {
        long before = counted_calls, plain = 3 + 2 * rank + phase, mpi = 12 + phase;
        int ok = 1;
        for (long i = 0; i < plain; i++)
            ok &= plain_site((int)i) == (int)i * 7 + 2;
        for (long i = 0; i < mpi; i++, k++) {
            if (k % size == rank)
                sleep_ms(sleep);
            ok &= mpi_site(phase) == size * (phase * 7 + 1);
        }
        printf("probe_phases_mpi rank=%d phase=%d plain=%ld mpi=%ld counted=%ld "
               "allreduce_ok=%d\n", rank, phase, plain, mpi, counted_calls - before, ok);
        fflush(stdout);
        if (phase < phases)
            gate(rank, argv[1]);
    }
    MPI_Finalize();
    return 0;
}
