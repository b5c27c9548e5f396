// The DROPS case of the hybrid-profiling paper (tests/e2e/test_kernel.py): output lines
// ended with std::endl, whose flush makes one write() per line.  N lines to stdout.
#include <cstdlib>
#include <iostream>

__attribute__((noinline)) void report_progress(int step)
{
    std::cout << "step " << step << std::endl;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? std::atoi(argv[1]) : 100;
    for (int i = 0; i < n; i++) report_progress(i);
    return 0;
}
