/* Exactness of the unwinder's reuse of the previous walk (tests/e2e/test_paths.py): two
 * functions with identical frames (same size, so the same stack pointers) call the same
 * function, which calls MPI_Allreduce; they alternate, then run in bursts.  A walk that trusted
 * return address and stack pointer of the inner frames alone would charge one caller's calls
 * to the other (the false positive of Perks et al.); the counts must come out exact:
 * rotate_a 3000 + 700 calls, rotate_b 3000 + 300 per rank. */
#include <mpi.h>

__attribute__((noinline)) void inner(double *v)
{
    MPI_Allreduce(MPI_IN_PLACE, v, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    __asm__ __volatile__("" ::: "memory");
}

__attribute__((noinline)) void rotate_a(double *v) { inner(v); __asm__ __volatile__("" ::: "memory"); }
__attribute__((noinline)) void rotate_b(double *v) { inner(v); __asm__ __volatile__("" ::: "memory"); }

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    double v = 1.0;
    for (int i = 0; i < 3000; i++) {
        rotate_a(&v);
        rotate_b(&v);
    }
    for (int i = 0; i < 700; i++) rotate_a(&v);
    for (int i = 0; i < 300; i++) rotate_b(&v);
    MPI_Finalize();
    return 0;
}
