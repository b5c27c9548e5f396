/* The smallest MPI program: what bench/launch.py starts on many ranks, so that the job's time
 * is the launch itself (mpirun, pathscope run, the runtime's start and end), not the work.
 * `launch_hello stamp` (bench/ending.py): rank 0 prints the wall clock once every rank has
 * reached the barrier before MPI_Finalize ("launch_hello: finalize at NS", ns since the
 * epoch), so the end of the run can be timed from there to the launcher's exit. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

int main(int argc, char **argv)
{
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0 && argc > 1 && strcmp(argv[1], "stamp") == 0) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        printf("launch_hello: finalize at %lld\n", (long long)now.tv_sec * 1000000000LL + now.tv_nsec);
        fflush(stdout);
    }
    MPI_Finalize();
    return 0;
}
