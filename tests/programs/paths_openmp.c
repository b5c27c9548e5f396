/* An OpenMP program (no MPI): every OpenMP thread is sampled (tests/e2e/test_paths.py). */
#include <omp.h>
#include <stdio.h>

static volatile double sink;

__attribute__((noinline)) double omp_work(long n)
{
    double x = 0;
    for (long i = 0; i < n; i++) x += (double)i * 0.5;
    return x;
}

int main(void)
{
    double total = 0;
#pragma omp parallel num_threads(2) reduction(+ : total)
    total += omp_work(150000000L);
    sink = total;
    printf("threads=2 total=%g\n", total);
    return 0;
}
