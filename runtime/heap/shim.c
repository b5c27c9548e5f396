/* libpathscope-heap.so: the application's malloc family, handed to libpathscope.so
 * (heap/heap.c).  Preloaded only for `pathscope run --heap`, so that without it the
 * application's allocator is not touched at all.
 *
 * Bootstrapping from the first instruction: the first call (from the dynamic loader, the C
 * library's start-up or a constructor, whichever comes first) resolves the real allocator
 * with dlsym(RTLD_NEXT) and pathscope's entry points with dlsym(RTLD_DEFAULT).  dlsym may
 * itself allocate: those calls are served from a static arena, which is never freed.  If
 * libpathscope.so is not loaded, the shim passes everything to the real allocator and says
 * so once.  Only the functions below leave this library (shim.map). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "heap.h"
#include "../core/caller.h"

enum { UNRESOLVED, RESOLVING, READY, PASS_THROUGH };
static volatile int state = UNRESOLVED;
static ps_heap_real_t real;
static void *(*core_alloc)(int, size_t, size_t, int, const uintptr_t *);
static void (*core_free)(void *);
static void *(*core_realloc)(int, void *, size_t, const uintptr_t *);
static size_t (*core_usable)(void *);

/* allocations made while resolving: each with its size in the 16 bytes before it */
static char arena[1 << 16] __attribute__((aligned(16)));
static size_t arena_used;

static void *arena_alloc(size_t n)
{
    size_t need = 16 + ((n + 15) & ~(size_t)15);
    if (n > sizeof arena || arena_used + need > sizeof arena) return NULL;
    char *p = arena + arena_used + 16;
    *(size_t *)(p - 16) = n;
    arena_used += need;
    return p;
}

static inline int in_arena(const void *p)
{
    return (const char *)p >= arena && (const char *)p < arena + sizeof arena;
}

static void say(const char *msg)
{
    syscall(SYS_write, 2, msg, strlen(msg));
}

static void resolve(void)
{
    if (state != UNRESOLVED) return;
    state = RESOLVING;
    real.malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
    real.free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
    real.calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
    real.realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
    real.memalign = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "memalign");
    real.usable_size = (size_t (*)(void *))dlsym(RTLD_NEXT, "malloc_usable_size");
    void (*attach)(const ps_heap_real_t *, uintptr_t) =
        (void (*)(const ps_heap_real_t *, uintptr_t))dlsym(RTLD_DEFAULT, "pathscope_heap_attach");
    core_alloc = (void *(*)(int, size_t, size_t, int, const uintptr_t *))dlsym(RTLD_DEFAULT,
                                                                        "pathscope_heap_alloc");
    core_free = (void (*)(void *))dlsym(RTLD_DEFAULT, "pathscope_heap_free");
    core_realloc = (void *(*)(int, void *, size_t, const uintptr_t *))dlsym(RTLD_DEFAULT,
                                                                          "pathscope_heap_realloc");
    core_usable = (size_t (*)(void *))dlsym(RTLD_DEFAULT, "pathscope_heap_usable_size");
    if (!real.malloc || !real.free || !real.calloc || !real.realloc || !real.memalign ||
        !real.usable_size) {
        say("pathscope: libpathscope-heap.so cannot find the C library's allocator\n");
        _exit(2);
    }
    if (!attach || !core_alloc || !core_free || !core_realloc || !core_usable) {
        say("pathscope: libpathscope-heap.so needs libpathscope.so in LD_PRELOAD: heap profiling is off\n");
        state = PASS_THROUGH;
        return;
    }
    attach(&real, (uintptr_t)&resolve);
    state = READY;
}

/* called by libpathscope.so's start-up, in case nothing allocated before it */
void pathscope_heap_shim_init(void) { resolve(); }

static void *slow_alloc(int fn, size_t n, size_t align, int zero, const uintptr_t *caller)
{
    resolve();
    if (state == RESOLVING) return arena_alloc(n); /* (align <= 16: dlsym's needs) */
    if (state == PASS_THROUGH)
        return align > 16 ? real.memalign(align, n) : zero ? real.calloc(1, n) : real.malloc(n);
    return core_alloc(fn, n, align, zero, caller);
}

static inline void *alloc(int fn, size_t n, size_t align, int zero, const uintptr_t *caller)
{
    if (__builtin_expect(state == READY, 1)) return core_alloc(fn, n, align, zero, caller);
    return slow_alloc(fn, n, align, zero, caller);
}

void *malloc(size_t n)
{
    PS_CALLER(caller);
    return alloc(PS_HEAP_MALLOC, n, 0, 0, caller);
}

void *calloc(size_t n, size_t m)
{
    size_t total;
    if (__builtin_mul_overflow(n, m, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    PS_CALLER(caller);
    return alloc(PS_HEAP_CALLOC, total, 0, 1, caller);
}

void free(void *p)
{
    if (!p || in_arena(p)) return;
    if (__builtin_expect(state == READY, 1)) core_free(p);
    else if (real.free) real.free(p);
}

static void *do_realloc(int fn, void *p, size_t n, const uintptr_t *caller)
{
    if (p && in_arena(p)) { /* from the arena: moved to a real block */
        size_t old = *(size_t *)((char *)p - 16);
        void *q = alloc(fn, n, 0, 0, caller);
        if (q) memcpy(q, p, old < n ? old : n);
        return q;
    }
    if (__builtin_expect(state == READY, 1)) return core_realloc(fn, p, n, caller);
    resolve();
    if (state == RESOLVING) return p ? NULL : arena_alloc(n);
    if (state == PASS_THROUGH) return real.realloc(p, n);
    return core_realloc(fn, p, n, caller);
}

void *realloc(void *p, size_t n)
{
    PS_CALLER(caller);
    return do_realloc(PS_HEAP_REALLOC, p, n, caller);
}

void *reallocarray(void *p, size_t n, size_t m)
{
    size_t total;
    if (__builtin_mul_overflow(n, m, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    PS_CALLER(caller);
    return do_realloc(PS_HEAP_REALLOCARRAY, p, total, caller);
}

static size_t power_of_two_at_least(size_t a) /* 0: there is none */
{
    size_t p = 16;
    while (p < a && p) p <<= 1;
    return p;
}

int posix_memalign(void **out, size_t align, size_t n)
{
    if (align < sizeof(void *) || (align & (align - 1))) return EINVAL;
    int saved = errno;
    PS_CALLER(caller);
    void *p = alloc(PS_HEAP_POSIX_MEMALIGN, n, align, 0, caller);
    errno = saved; /* posix_memalign reports through its result only */
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}

/* aligned_alloc and memalign: any alignment, rounded up to a power of two */
static inline void *rounded_aligned(int fn, size_t align, size_t n, const uintptr_t *caller)
{
    size_t a = power_of_two_at_least(align);
    if (!a) {
        errno = EINVAL;
        return NULL;
    }
    return alloc(fn, n, a, 0, caller);
}

void *aligned_alloc(size_t align, size_t n)
{
    PS_CALLER(caller);
    return rounded_aligned(PS_HEAP_ALIGNED_ALLOC, align, n, caller);
}

void *memalign(size_t align, size_t n)
{
    PS_CALLER(caller);
    return rounded_aligned(PS_HEAP_MEMALIGN, align, n, caller);
}

void *valloc(size_t n)
{
    PS_CALLER(caller);
    return alloc(PS_HEAP_VALLOC, n, (size_t)sysconf(_SC_PAGESIZE), 0, caller);
}

void *pvalloc(size_t n)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (n > SIZE_MAX - page) {
        errno = ENOMEM;
        return NULL;
    }
    PS_CALLER(caller);
    return alloc(PS_HEAP_PVALLOC, (n + page - 1) & ~(page - 1), page, 0, caller);
}

size_t malloc_usable_size(void *p)
{
    if (!p) return 0;
    if (in_arena(p)) return *(size_t *)((char *)p - 16);
    if (state == READY) return core_usable(p);
    return real.usable_size ? real.usable_size(p) : 0;
}
