/* Unit test of the live view's top-N helper (runtime/live/live.h): the N heaviest of a stream,
 * heaviest first, with what each item carries. */
#include <stdio.h>

#include "live.h"

static int failures;
#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #cond);         \
            failures++;                                                        \
        }                                                                      \
    } while (0)

int main(void)
{
    ps_live_item_t items[5];
    ps_live_top_t top = {items, 0, 5};
    /* 0..99 in a scrambled order (37 is prime to 100): the top five are 99..95 */
    for (uint64_t i = 0; i < 100; i++) {
        uint64_t w = (i * 37) % 100;
        ps_live_top_add(&top, w, w + 1000, i);
    }
    ps_live_top_sort(&top);
    CHECK(top.n == 5);
    for (int k = 0; k < 5; k++) {
        CHECK(items[k].weight == (uint64_t)(99 - k));
        CHECK(items[k].a == items[k].weight + 1000);
        CHECK((items[k].b * 37) % 100 == items[k].weight);
    }
    /* fewer items than the capacity: all of them, sorted; ties kept */
    ps_live_top_t few = {items, 0, 5};
    ps_live_top_add(&few, 3, 0, 0);
    ps_live_top_add(&few, 7, 1, 0);
    ps_live_top_add(&few, 3, 2, 0);
    ps_live_top_sort(&few);
    CHECK(few.n == 3 && items[0].weight == 7 && items[1].weight == 3 && items[2].weight == 3);
    /* capacity 0 keeps nothing */
    ps_live_top_t none = {items, 0, 0};
    ps_live_top_add(&none, 9, 0, 0);
    CHECK(none.n == 0);
    if (failures) fprintf(stderr, "%d failures\n", failures);
    return failures != 0;
}
