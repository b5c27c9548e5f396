/* The smallest MPI program: what bench/launch.py starts on many ranks, so that the job's time
 * is the launch itself (mpirun, pathscope run, the runtime's start and end), not the work. */
#include <mpi.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
