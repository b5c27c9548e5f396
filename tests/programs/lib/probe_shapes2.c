/* The second file of probe_shapes: a static function named like probe_shapes.c's `helper`. */
#include "probe_shapes.h"

__attribute__((noinline, noclone)) static void helper(long spin_us)
{
    shapes_spin(spin_us);
}

void shapes2_run(int calls, long spin_us, struct shapes_total *total)
{
    for (int i = 0; i < calls; i++)
        SHAPES_TIMED(*total, helper(spin_us));
}
