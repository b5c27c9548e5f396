/* Runs whose profile directory misbehaves (tests/e2e/test_outdir_safety.py): outdir <mode> [arg]
 *   remove DIR   rank 0 removes DIR and everything in it between two barriers, then every
 *                rank calls MPI_Finalize (where pathscope writes its files) and returns 0
 *   exit N       one MPI_Barrier, MPI_Finalize, then returns N
 * Every mode prints "outdir: rank R done" on stdout after MPI_Finalize, so a test sees that
 * the program ran to its end. */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "exit";
    int rank, status = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Barrier(MPI_COMM_WORLD);
    if (strcmp(mode, "remove") == 0 && argc > 2) {
        if (rank == 0 && nftw(argv[2], remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
            perror("outdir: remove");
        MPI_Barrier(MPI_COMM_WORLD);
    } else if (strcmp(mode, "exit") == 0 && argc > 2) {
        status = atoi(argv[2]);
    }
    MPI_Finalize();
    printf("outdir: rank %d done\n", rank);
    return status;
}
