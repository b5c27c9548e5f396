/* The resolver test's shared library (librestest.so.1): a function found with MODULE:SPEC. */
volatile int counter_lib;

__attribute__((noipa)) int lib_work(int x)
{
    counter_lib += x;
    return counter_lib;
}
