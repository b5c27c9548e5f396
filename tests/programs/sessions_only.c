/* An MPI program of the sessions model only (MPI 4; tests/e2e/test_sessions.py): no MPI_Init,
 * no MPI_COMM_WORLD.  One session (MPICH 4.0.2 crashes in a second MPI_Session_init after a
 * finalize); from its world process set's group two communicators (tags a and b), 10
 * allreduces on a and 4 on b, a split of a into even and odd ranks with 3 broadcasts each,
 * everything freed, the session finalized.  Ranks print their rank and the size. */
#include <mpi.h>
#include <stdio.h>

#if MPI_VERSION >= 4
static void allreduces(MPI_Comm comm, int n)
{
    double v = 1;
    for (int i = 0; i < n; i++) MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_SUM, comm);
}

int main(void)
{
    MPI_Session session;
    MPI_Group world;
    MPI_Comm a, b, half;
    MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_ARE_FATAL, &session);
    MPI_Group_from_session_pset(session, "mpi://WORLD", &world);
    MPI_Comm_create_from_group(world, "org.pathscope.test.a", MPI_INFO_NULL, MPI_ERRORS_ARE_FATAL, &a);
    MPI_Comm_create_from_group(world, "org.pathscope.test.b", MPI_INFO_NULL, MPI_ERRORS_ARE_FATAL, &b);
    int rank, size;
    MPI_Comm_rank(a, &rank);
    MPI_Comm_size(a, &size);
    allreduces(a, 10);
    allreduces(b, 4);
    MPI_Comm_split(a, rank % 2, rank, &half);
    double v = rank;
    for (int i = 0; i < 3; i++) MPI_Bcast(&v, 1, MPI_DOUBLE, 0, half);
    MPI_Comm_free(&half);
    MPI_Comm_free(&b);
    MPI_Comm_free(&a);
    MPI_Group_free(&world);
    MPI_Session_finalize(&session);
    printf("sessions rank=%d size=%d\n", rank, size);
    return 0;
}
#else
int main(void)
{
    puts("sessions: this MPI has no MPI 4 sessions");
    return 77;
}
#endif
