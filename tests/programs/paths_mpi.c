/* Call-path accuracy test (tests/e2e/test_paths.py).
 *
 *   compute_a and compute_b run the same loop body, compute_a twice as many iterations;
 *   exchange_x and exchange_y reach MPI_Allreduce from two different functions (NX and NY
 *   calls of 8 doubles each); the last rank spins in delay() before a barrier, so the others
 *   wait in MPI_Barrier for that long; MPI_Comm_rank is called NRANKQ times (counted only by
 *   default); no_cfi_call() is assembly without unwind information: the MPI_Barrier and the
 *   computation reached through it cannot be unwound past it ([failed unwind]).
 *
 * The program measures its own phases with clock_gettime and prints them ("truth" lines),
 * so the test compares the profile with the time each phase really took on this machine.
 * Usage: paths_mpi [SCALE [SLOW]] (iterations are SCALE * 1e7; default 20).  SLOW (a
 * percentage, default 0) adds that many iterations to compute_b alone: the slowdown
 * tests/e2e/test_diff_runs.py injects between two runs for `pathscope diff` to find. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define NX 30
#define NY 70
#define NRANKQ 100000

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static volatile double sink;

static inline __attribute__((always_inline)) void spin(long n)
{
    double x = 0;
    for (long i = 0; i < n; i++) x += (double)i * 0.5;
    sink = x;
}

__attribute__((noinline)) void compute_a(long n) { spin(2 * n); }
__attribute__((noinline)) void compute_b(long n) { spin(n); }
__attribute__((noinline)) void delay(long n) { spin(n); }
__attribute__((noinline)) void behind_no_cfi(void)
{
    spin(20000000);
    MPI_Barrier(MPI_COMM_WORLD);
}

/* Calls fn with the frame pointer cleared and no CFI: unwinders cannot pass this frame. */
void no_cfi_call(void (*fn)(void));
__asm__(".text\n.globl no_cfi_call\n.type no_cfi_call,@function\nno_cfi_call:\n"
        "  push %rbp\n  xor %ebp, %ebp\n  call *%rdi\n  pop %rbp\n  ret\n"
        ".size no_cfi_call, .-no_cfi_call\n");

__attribute__((noinline)) void exchange_x(double *v)
{
    for (int i = 0; i < NX; i++) MPI_Allreduce(MPI_IN_PLACE, v, 8, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
}

__attribute__((noinline)) void exchange_y(double *v)
{
    for (int i = 0; i < NY; i++) MPI_Allreduce(MPI_IN_PLACE, v, 8, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size, r;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long n = (argc > 1 ? atol(argv[1]) : 20) * 10000000L;
    long slow = argc > 2 ? atol(argv[2]) : 0;
    for (int i = 0; i < NRANKQ - 1; i++) MPI_Comm_rank(MPI_COMM_WORLD, &r);
    double v[8] = {0};
    double t0 = now();
    compute_a(n);
    double t1 = now();
    compute_b(n + n / 100 * slow);
    double t2 = now();
    exchange_x(v);
    exchange_y(v);
    double t3 = now();
    if (rank == size - 1) delay(n);
    double t4 = now();
    MPI_Barrier(MPI_COMM_WORLD);
    double t5 = now();
    no_cfi_call(behind_no_cfi);
    printf("truth rank=%d compute_a=%.6f compute_b=%.6f delay=%.6f barrier=%.6f\n", rank, t1 - t0,
           t2 - t1, t4 - t3, t5 - t4);
    MPI_Finalize();
    return 0;
}
