// C++ part of the symbolizer test: demangled names of a method, a template instance and an
// inline function (from DWARF's linkage name).  Lines are found by MARK.
namespace ns {

struct Klass {
    int v;
    int method(int x);
};

__attribute__((noipa)) int Klass::method(int x)
{
    return v + x;
}

template <typename T> __attribute__((noipa)) T twice(T x)
{
    return x + x;
}

inline __attribute__((always_inline)) int helper(Klass &k, int x)
{
    return k.method(x) + 1; // MARK:helper-calls-method
}

__attribute__((noipa)) int caller(Klass &k, int x)
{
    return helper(k, x) * 2; // MARK:caller-calls-helper
}

} // namespace ns

int main(int argc, char **)
{
    ns::Klass k{argc};
    int a = ns::caller(k, argc);
    double b = ns::twice<double>(argc);
    return a + (int)b == 12345;
}
