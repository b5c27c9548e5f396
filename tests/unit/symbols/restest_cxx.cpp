// C++ part of the resolver test: overloads of a method (one const), a function template with
// two instances (their demangled names carry a return type) in a namespace.
namespace ns {

volatile int sink;

struct Shape {
    int v;
    int area(int x);
    int area(double x);
    int area(int x) const;
};

__attribute__((noipa)) int Shape::area(int x)
{
    sink = x;
    return v * x;
}

__attribute__((noipa)) int Shape::area(double x)
{
    sink = (int)x;
    return v + (int)x;
}

__attribute__((noipa)) int Shape::area(int x) const
{
    sink = -x;
    return v - x;
}

template <typename T> __attribute__((noipa)) T scale(T x)
{
    sink = (int)x;
    return x * 3;
}
template int scale<int>(int);
template double scale<double>(double);

} // namespace ns

int main(int argc, char **)
{
    ns::Shape s{argc};
    const ns::Shape &c = s;
    return s.area(argc) + s.area(2.0) + c.area(argc) + ns::scale<int>(argc)
           + (int)ns::scale<double>(argc) == 12345;
}
