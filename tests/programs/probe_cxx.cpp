// C++ shapes of probed functions: overloads, a template, exceptions.
//
//   probe_cxx [ROUNDS]                                          (default 10)
//
// Every round calls:
//   f(int) 3 times and f(double) 4 times          (two overloads of one name)
//   twice<int> 2 times and twice<double> 5 times  (two instantiations of one template)
//   throw_outer 1 time: it calls throw_inner, which throws; the exception leaves both and is
//     caught in main (two probed frames left by an exception, no normal return)
//   catch_inside 1 time: it throws and catches within itself, then returns normally
// All of them are noinline.  It prints on stdout, once at the end:
//   probe_cxx rounds=N f_int=3N f_double=4N twice_int=2N twice_double=5N throw_outer=N
//             throw_inner=N caught_above=N catch_inside=N caught_inside=N      (one line)
// the calls it made and the exceptions caught where it expected them, counted by the program
// itself; the exit status is 1 if a check failed.  The binary knows nothing about pathscope.
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace {
struct Counts {
    long f_int, f_double, twice_int, twice_double, throw_outer, throw_inner, caught_above,
        catch_inside, caught_inside;
};
Counts counts;
volatile double sink;
}  // namespace

__attribute__((noinline)) void f(int x)
{
    counts.f_int++;
    sink = sink + x;
}

__attribute__((noinline)) void f(double x)
{
    counts.f_double++;
    sink = sink + x;
}

template <typename T>
__attribute__((noinline)) T twice(T x)
{
    if constexpr (std::is_same_v<T, int>)
        counts.twice_int++;
    else
        counts.twice_double++;
    return x + x;
}

__attribute__((noinline)) void throw_inner(int round)
{
    counts.throw_inner++;
    throw std::runtime_error("round " + std::to_string(round));
}

__attribute__((noinline)) void throw_outer(int round)
{
    counts.throw_outer++;
    throw_inner(round);
    sink = sink + 1;  // never reached: keeps the call from being a tail call
}

__attribute__((noinline)) void catch_inside(int round)
{
    counts.catch_inside++;
    try {
        if (round >= 0)
            throw std::logic_error("inside");
    } catch (const std::logic_error &) {
        counts.caught_inside++;
    }
}

int main(int argc, char **argv)
{
    long rounds = argc > 1 ? std::atol(argv[1]) : 10;
    if (argc > 2 || rounds < 1) {
        std::fprintf(stderr, "usage: probe_cxx [ROUNDS] (ROUNDS >= 1)\n");
        return 2;
    }
    for (long r = 0; r < rounds; r++) {
        for (int i = 0; i < 3; i++)
            f(i);
        for (int i = 0; i < 4; i++)
            f(i + 0.5);
        for (int i = 0; i < 2; i++)
            sink = sink + twice(i);
        for (int i = 0; i < 5; i++)
            sink = sink + twice(i + 0.25);
        try {
            throw_outer(static_cast<int>(r));
        } catch (const std::runtime_error &) {
            counts.caught_above++;
        }
        catch_inside(static_cast<int>(r));
    }
    const Counts &c = counts;
    std::printf("probe_cxx rounds=%ld f_int=%ld f_double=%ld twice_int=%ld twice_double=%ld "
                "throw_outer=%ld throw_inner=%ld caught_above=%ld catch_inside=%ld "
                "caught_inside=%ld\n", rounds, c.f_int, c.f_double, c.twice_int, c.twice_double,
                c.throw_outer, c.throw_inner, c.caught_above, c.catch_inside, c.caught_inside);
    bool ok = c.f_int == 3 * rounds && c.f_double == 4 * rounds && c.twice_int == 2 * rounds &&
              c.twice_double == 5 * rounds && c.throw_outer == rounds &&
              c.throw_inner == rounds && c.caught_above == rounds && c.catch_inside == rounds &&
              c.caught_inside == rounds;
    return ok ? 0 : 1;
}
