// Heap profiling of C++ (tests/e2e/test_heap.py): operator new / new[] / delete reach the
// C library's malloc and free, so their paths end in operator new;malloc.  Exact counts.
#include <cstdio>
#include <memory>
#include <vector>

struct Particle {
    double x[4];
};

__attribute__((noinline)) void make_particles()
{
    for (int i = 0; i < 300; i++) {
        Particle *p = new Particle();
        asm volatile("" : : "r"(p) : "memory");
        delete p;
    }
}

__attribute__((noinline)) void make_arrays()
{
    for (int i = 0; i < 200; i++) {
        int *a = new int[25];
        asm volatile("" : : "r"(a) : "memory");
        delete[] a;
    }
}

__attribute__((noinline)) void grow_vector()
{
    std::vector<double> v;
    v.reserve(16);        // one allocation of 128 bytes
    for (int i = 0; i < 16; i++) v.push_back(i);
    asm volatile("" : : "r"(v.data()) : "memory");
}

int main()
{
    make_particles();
    make_arrays();
    grow_vector();
    // (regular expressions for the folded paths, without spaces; operator new[] may tail-call
    // operator new)
    std::printf("truth path=;make_particles\\(\\);operator.new\\(unsigned.long\\);malloc$ 300 %zu\n",
                300 * sizeof(Particle));
    std::printf("truth path=;make_arrays\\(\\);operator.new.*;malloc$ 200 20000\n");
    std::printf("truth path=;grow_vector\\(\\);.*reserve.*;operator.new.*;malloc$ 1 128\n");
    return 0;
}
