/* An MPI program that runs until the test tells it to stop (tests/e2e/test_live.py): every
 * rank calls MPI_Allreduce on MPI_COMM_WORLD in a loop until the file argv[1] exists (at most
 * 60 s), then MPI_Finalize. */
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, stop = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int i = 0; !stop && i < 6000; i++) {
        int mine = rank == 0 && argc > 1 && access(argv[1], F_OK) == 0, any = 0;
        MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        stop = any;
        usleep(10000);
    }
    MPI_Finalize();
    return 0;
}
