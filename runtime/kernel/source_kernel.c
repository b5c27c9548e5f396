/* Kernel time as a source (core/source.h): system calls and libc functions at their call paths.
 * libpathscope-kernel.so and PATHSCOPE_KERNEL must agree as for the heap; the process
 * pathscope profiles registers with the node's collector (or falls back to libc). */
#define _GNU_SOURCE
#include <link.h>
#include <stdio.h>
#include <string.h>

#include "source.h"
#include "kernel.h"
#include "kernel_thread.h"

static const char *const options[] = {"kernel", "kernel_period", NULL};

void ps_kernel_write_section(ps_fmt_t *f, ps_section sec, ps_thread_t *t); /* kernel_out.c */

static const ps_node_kind_t kinds[] = {
    {.kind = PS_NODE_SYSCALL, .name = "syscall", .key_name = ps_kernel_key_name,
     .time_ns = ps_kernel_node_ns},
    {.kind = -1}};

static int kernel_shim;     /* libpathscope-kernel.so is loaded */
static int launcher_rank = -1;

static int is_kernel_shim(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    (void)data;
    const char *base = strrchr(info->dlpi_name, '/');
    return strcmp(base ? base + 1 : info->dlpi_name, "libpathscope-kernel.so") == 0;
}

static const char *kernel_configure(const ps_start_t *st)
{
    static char msg[512];
    const char *mode = ps_options.kernel;
    int wanted = strcmp(mode, "off") != 0;
    launcher_rank = st->launcher_rank;
    /* (not dlsym: a failed lookup allocates its error message, which heap profiling sees) */
    int shim = dl_iterate_phdr(is_kernel_shim, NULL);
    if (wanted && strcmp(mode, "ebpf") != 0 && !shim) {
        snprintf(msg, sizeof msg, "PATHSCOPE_KERNEL=%s needs libpathscope-kernel.so in LD_PRELOAD "
                 "next to libpathscope.so (pathscope run --kernel sets both)", mode);
        return msg;
    }
    if (!wanted && shim)
        return "libpathscope-kernel.so is preloaded but PATHSCOPE_KERNEL is off: set "
               "PATHSCOPE_KERNEL=auto or remove it from LD_PRELOAD";
    if (wanted && !ps_option_on(ps_options.paths)) {
        snprintf(msg, sizeof msg, "PATHSCOPE_KERNEL=%s needs call paths: PATHSCOPE_PATHS=off "
                 "cannot be combined with it", mode);
        return msg;
    }
    kernel_shim = shim;
    return NULL;
}

static const char *kernel_start(const ps_start_t *st)
{
    const char *note = NULL;
    const char *err = ps_kernel_init(st->first_process && ps_paths_on, kernel_shim, &note);
    if (err) return err;
    if (note && st->launcher_rank <= 0) fprintf(stderr, "pathscope: %s\n", note);
    return NULL;
}

/* A process that becomes an MPI rank is profiled whatever started it: kernel time too, when
 * a script between the launcher and the program made it a child of pathscope's first
 * process.  (MPI_Init is not a constructor: an error now is one line on stderr, no exit.) */
static void kernel_rank_start(void)
{
    if (strcmp(ps_options.kernel, "off") == 0 || ps_kernel_source != PS_KSRC_OFF || !ps_paths_on)
        return;
    const char *note = NULL;
    const char *err = ps_kernel_init(1, kernel_shim, &note);
    if (err || (note && launcher_rank <= 0))
        fprintf(stderr, "pathscope: %s\n", err ? err : note);
}

static void kernel_thread_exit(ps_thread_t *t, void *state)
{
    (void)state;
    ps_kernel_thread_end(t); /* the thread's own resource usage */
}

void ps_kernel_publish(ps_fmt_t *f); /* kernel_live.c */

const ps_source_t ps_source_kernel = {
    .name = "kernel",
    .options = options,
    .configure = kernel_configure,
    .start = kernel_start,
    .rank_start = kernel_rank_start,
    .thread_size = sizeof(kernel_thread_t),
    .thread_exit = kernel_thread_exit,
    .fork_child = ps_kernel_after_fork,
    .write = ps_kernel_write_section,
    .publish = ps_kernel_publish,
    .kinds = kinds,
};
