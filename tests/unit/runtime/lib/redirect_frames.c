/* Frames outside pathscope's code for test_unwind_redirect: the test executable links every
 * runtime object, so its own frames count as pathscope's, which walks skip and thunk mode never
 * redirects.  Built with frame pointers: a frame's slot is at rbp + 8, its caller's rbp at rbp.
 * The runtime's functions come as pointers (its symbols are hidden). */
#include <stdint.h>

typedef int (*redirect_fn)(uintptr_t *slot);
typedef int (*walk_fn)(uintptr_t ra, uintptr_t sp, uintptr_t rbp, uintptr_t *out, int max, int *complete);

/* The path of its caller, as an interposed allocator sees it (ps_unwind_from). */
__attribute__((noinline)) int frames_walk(walk_fn walk, uintptr_t *out, int max, int *complete)
{
    uintptr_t *fp = __builtin_frame_address(0);
    return walk(fp[1], (uintptr_t)(fp + 2), fp[0], out, max, complete);
}

/* A probed function: redirects its own return slot (redirect may be NULL), then walks. */
__attribute__((noinline)) int frames_probed(redirect_fn redirect, walk_fn walk, uintptr_t *out,
                                            int max, int *complete, int *index)
{
    uintptr_t *fp = __builtin_frame_address(0);
    *index = redirect ? redirect(fp + 1) : -1;
    return frames_walk(walk, out, max, complete) + 0;
}

__attribute__((noinline)) int frames_outer(redirect_fn redirect, walk_fn walk, uintptr_t *out,
                                           int max, int *complete, int *index)
{
    return frames_probed(redirect, walk, out, max, complete, index) + 0;
}
