/* The frame that called an interposed function (the heap and kernel-time shims): its pc (our
 * return address), its stack pointer (just above our return-address slot) and its rbp (saved
 * by our prologue: __builtin_frame_address makes the function keep one).  The stack walk
 * starts there (ps_unwind_from), without walking pathscope's own frames. */
#ifndef PS_CALLER_H
#define PS_CALLER_H
#include <stdint.h>

#define PS_CALLER(name)                                                                     \
    uintptr_t name[3];                                                                      \
    do {                                                                                    \
        uintptr_t *fp_ = __builtin_frame_address(0);                                        \
        name[0] = fp_[1];                                                                   \
        name[1] = (uintptr_t)(fp_ + 2);                                                     \
        name[2] = fp_[0];                                                                   \
    } while (0)
#endif
