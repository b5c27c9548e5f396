/* Calls counted by thunks (tests/e2e/test_traversal.py): in thunk mode every call that a walk
 * sees start counts once on its call site.  f is called 1000 times from main and allocates
 * twice per call (one walk sees each call start); h is called 20 times, g 50 times per h;
 * spin is called 2000 times and never allocates (only samples see its calls, those during
 * which a sample landed in step: a lower bound). */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) void f(void)
{
    void *volatile a = malloc(16);
    void *volatile b = malloc(32);
    free(a);
    free(b);
}

__attribute__((noinline)) void g(void)
{
    void *volatile a = malloc(8);
    free(a);
}

__attribute__((noinline)) void h(void)
{
    for (int i = 0; i < 50; i++) g();
}

__attribute__((noinline)) double step(int i)
{
    volatile double x = i * 0.5;
    return x;
}

/* (samples land in step: the innermost frame of a sample gets no thunk, its caller does) */
__attribute__((noinline)) double spin(int n)
{
    double x = 0;
    for (int i = 0; i < n; i++) x += step(i);
    return x;
}

/* one caller per loop, so that the folded export (by names) keeps the call sites apart */
__attribute__((noinline)) void run_f(void)
{
    for (int i = 0; i < 1000; i++) f();
}

__attribute__((noinline)) void run_h(void)
{
    for (int i = 0; i < 20; i++) h();
}

__attribute__((noinline)) double run_spin(void)
{
    double sum = 0;
    for (int i = 0; i < 2000; i++) sum += spin(100000);
    return sum;
}

int main(void)
{
    run_f();
    run_h();
    double sum = run_spin();
    printf("truth f=1000 g=1000 h=20 spin=2000 (%g)\n", sum);
    return 0;
}
