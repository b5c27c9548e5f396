/* MPI-4 communicator creation from a group (sessions model), next to the world model:
 * MPI_Comm_create_from_group on the group of the "mpi://WORLD" process set, then one
 * MPI_Allreduce of one int on it.  Built everywhere; does nothing where MPI < 4. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
#if MPI_VERSION >= 4
    MPI_Session session;
    MPI_Group group;
    MPI_Comm comm;
    int one = 1, sum = 0;
    MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &session);
    MPI_Group_from_session_pset(session, "mpi://WORLD", &group);
    MPI_Comm_create_from_group(group, "org.pathscope.test", MPI_INFO_NULL, MPI_ERRORS_RETURN, &comm);
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, comm);
    if (sum != 4) fprintf(stderr, "sessions: sum %d\n", sum);
    MPI_Comm_free(&comm);
    MPI_Group_free(&group);
    MPI_Session_finalize(&session);
#endif
    MPI_Finalize();
    return 0;
}
