/* libprobe_shapes_lib.so: a function of a shared library for probe_shapes. */
#include "probe_shapes.h"

__attribute__((noinline)) void shapes_lib_work(long spin_us)
{
    shapes_spin(spin_us);
}
