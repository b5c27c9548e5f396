/* MPI_Comm_spawn: the parent job (any size) spawns one copy of this program; rank 0 of the
 * parent broadcasts one int to the child over the intercommunicator, then both disconnect.
 * argv[0] must be an absolute path. */
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
  MPI_Comm parent, inter; int rank, x = 5;
  MPI_Init(&argc, &argv); MPI_Comm_get_parent(&parent); MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (parent == MPI_COMM_NULL) {
    MPI_Comm_spawn(argv[0], MPI_ARGV_NULL, 1, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter, MPI_ERRCODES_IGNORE);
    MPI_Bcast(&x, 1, MPI_INT, rank == 0 ? MPI_ROOT : MPI_PROC_NULL, inter);
    MPI_Comm_disconnect(&inter);
  } else {
    MPI_Bcast(&x, 1, MPI_INT, 0, parent);
    MPI_Comm_disconnect(&parent);
  }
  MPI_Finalize(); return 0;
}
