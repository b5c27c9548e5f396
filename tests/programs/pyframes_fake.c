/* A program that looks like a CPython pathscope has no layout for (tests/e2e/test_pyframes.py):
 * it exports the interpreter's symbols -- the evaluation function, _PyRuntime, PyCode_Type and
 * Py_Version 3.13.0 -- and spends half a second of CPU time in its "evaluation function".  Its
 * profile must keep native paths and say why. */
#include <time.h>

const unsigned long Py_Version = 0x030D00F0; /* 3.13.0 final */
char _PyRuntime[4096];
char PyCode_Type[512];

__attribute__((noinline)) long _PyEval_EvalFrameDefault(double seconds)
{
    volatile long x = 0;
    clock_t end = clock() + (clock_t)(seconds * CLOCKS_PER_SEC);
    while (clock() < end) x++;
    return x;
}

int main(void)
{
    return _PyEval_EvalFrameDefault(0.5) < 0;
}
