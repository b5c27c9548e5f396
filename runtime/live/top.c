/* The top-N helper of the publish hooks (live.h): a min-heap of the heaviest items seen, so a
 * pass over a tree of any size keeps N items and costs log N per heavier one. */
#include "live.h"

static void top_swap(ps_live_item_t *a, ps_live_item_t *b)
{
    ps_live_item_t t = *a;
    *a = *b;
    *b = t;
}

static void top_sift_down(ps_live_item_t *v, int n, int i)
{
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && v[l].weight < v[m].weight) m = l;
        if (r < n && v[r].weight < v[m].weight) m = r;
        if (m == i) return;
        top_swap(&v[i], &v[m]);
        i = m;
    }
}

void ps_live_top_add(ps_live_top_t *top, uint64_t weight, uint64_t a, uint64_t b)
{
    ps_live_item_t *v = top->items;
    if (top->n < top->cap) {
        int i = top->n++;
        v[i] = (ps_live_item_t){weight, a, b};
        while (i > 0 && v[(i - 1) / 2].weight > v[i].weight) {
            top_swap(&v[i], &v[(i - 1) / 2]);
            i = (i - 1) / 2;
        }
    } else if (top->cap > 0 && weight > v[0].weight) {
        v[0] = (ps_live_item_t){weight, a, b};
        top_sift_down(v, top->n, 0);
    }
}

void ps_live_top_sort(ps_live_top_t *top)
{
    /* heap sort on the min-heap: the lightest goes to the end each time */
    for (int n = top->n; n > 1; n--) {
        top_swap(&top->items[0], &top->items[n - 1]);
        top_sift_down(top->items, n - 1, 0);
    }
}
