/* Python frames as a component (core/source.h): no records of its own.  At start-up it looks
 * for a CPython interpreter in the process (its exported symbols, dlsym: the interpreter is
 * the executable or a libpython loaded with it), picks the layout of its version from the
 * table below, and turns the splice on (pyframes.c); it owns the node kind `py` and writes
 * the `python` line.  An unknown version, PATHSCOPE_PYTHON_FRAMES=off or thunk traversal
 * leave paths native, said on that line. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

#include "pyframes_internal.h"
#include "unwind.h"

static const char *const options[] = {"python_frames", NULL};

/* The layouts, from the CPython headers of each version (Include/internal: pycore_runtime.h,
 * pycore_interp.h, pycore_pystate.h, pycore_frame.h, pycore_code.h; offsetof() compiled with
 * Py_BUILD_CORE against Debian's python3.11-dev 3.11.2 and pyenv's 3.12.1).  These structures
 * did not change within 3.11 and 3.12 releases. */
static const py_layout_t layouts[] = {
    {.minor = 11, .rt_interp_head = 40, .rt_finalizing = 24, .is_next = 0, .is_uid = 8, .is_threads = 16, .ts_next = 8,
     .ts_cframe = 56, .ts_native_tid = 160, .ts_chunk = 296, .ts_top = 304, .ts_size = 360,
     .cf_current = 8, .fr_code = 32, .fr_previous = 48, .fr_prev_instr = 56, .fr_entry = 68,
     .fr_size = 80, .entry_by_owner = 0, .co_firstlineno = 72, .co_filename = 112,
     .co_qualname = 128, .co_linetable = 136, .co_code = 184, .co_head = 184, .ck_size = 8,
     .ck_top = 16, .ck_data = 24, .st_state = 32, .st_ascii_data = 48, .st_utf8_len = 48,
     .st_utf8 = 56, .by_size = 16, .by_data = 32},
    {.minor = 12, .rt_interp_head = 40, .rt_finalizing = 24, .is_next = 0, .is_uid = 64, .is_threads = 72, .ts_next = 8,
     .ts_cframe = 56, .ts_native_tid = 144, .ts_chunk = 232, .ts_top = 240, .ts_size = 288,
     .cf_current = 0, .fr_code = 0, .fr_previous = 8, .fr_prev_instr = 56, .fr_entry = 70,
     .fr_size = 80, .entry_by_owner = 1, .co_firstlineno = 68, .co_filename = 112,
     .co_qualname = 128, .co_linetable = 136, .co_code = 192, .co_head = 192, .ck_size = 8,
     .ck_top = 16, .ck_data = 24, .st_state = 32, .st_ascii_data = 40, .st_utf8_len = 40,
     .st_utf8 = 48, .by_size = 16, .by_data = 32},
};

static int detected;   /* a CPython interpreter is in the process */

/* The address and size of an exported symbol; 0 if absent. */
static uintptr_t symbol(const char *name, uintptr_t *size)
{
    void *addr = dlsym(RTLD_DEFAULT, name);
    Dl_info info;
    const ElfW(Sym) *sym = NULL;
    if (size) *size = addr && dladdr1(addr, &info, (void **)&sym, RTLD_DL_SYMENT) && sym ? sym->st_size : 0;
    return (uintptr_t)addr;
}

/* The interpreter's version: Py_Version (3.11 on), else the text of Py_GetVersion(). */
static int python_version(char *text, size_t len)
{
    const unsigned long *hex = (const unsigned long *)symbol("Py_Version", NULL);
    if (hex) {
        snprintf(text, len, "%lu.%lu.%lu", *hex >> 24, *hex >> 16 & 255, *hex >> 8 & 255);
        return (int)(*hex >> 16 & 255) + (*hex >> 24 == 3 ? 0 : 1000);
    }
    const char *(*get)(void) = (const char *(*)(void))symbol("Py_GetVersion", NULL);
    const char *v = get ? get() : "?";
    size_t n = strcspn(v, " ");
    snprintf(text, len, "%.*s", (int)(n < len ? n : len - 1), v);
    return -1; /* (older than 3.11: no layout) */
}

static const char *python_configure(const ps_start_t *st)
{
    (void)st;
    uintptr_t eval_len, runtime_len;
    uintptr_t eval = symbol("_PyEval_EvalFrameDefault", &eval_len);
    if (!ps_paths_on || !eval) return NULL;
    detected = 1;
    int minor = python_version(ps_py.version, sizeof ps_py.version);
    for (size_t i = 0; i < sizeof layouts / sizeof *layouts; i++)
        if (layouts[i].minor == minor) ps_py.layout = &layouts[i];
    ps_py.runtime = symbol("_PyRuntime", &runtime_len);
    ps_py.runtime_end = ps_py.runtime + runtime_len;
    ps_py.code_type = symbol("PyCode_Type", NULL);
    ps_py.eval_lo = eval;
    ps_py.eval_len = eval_len;
    if (!ps_option_on(ps_options.python_frames))
        ps_py.off_why = "PATHSCOPE_PYTHON_FRAMES=off";
    else if (!ps_py.layout)
        ps_py.off_why = "unknown CPython version";
    else if (!ps_py.runtime || !runtime_len || !ps_py.code_type || !eval_len)
        ps_py.off_why = "the interpreter's symbols are incomplete";
    else if (ps_traversal_mode == PS_TRAVERSAL_THUNK)
        ps_py.off_why = "thunk traversal";
    else if (ps_py_locations_init())
        ps_py.off_why = "no memory for the locations table";
    else
        ps_py_on = 1;
    return NULL;
}

static void python_write(ps_fmt_t *f, ps_section sec, ps_thread_t *t)
{
    (void)t;
    if (sec != PS_SEC_RANK || !detected) return;
    uint64_t sum[4] = {0};
    for (int i = 0; i < ps_write_nthreads(); i++) {
        if (!ps_threads[i] || !ps_py_on) continue;
        const py_thread_t *p = py_of(ps_threads[i]);
        sum[0] += p->spliced;
        sum[1] += p->unmatched;
        sum[2] += p->unread;
        sum[3] += p->too_deep;
    }
    ps_fmt_str(f, "python\t");
    ps_fmt_tsv(f, ps_py.version); ps_fmt_tab(f);
    ps_fmt_str(f, ps_py_on ? "on" : "off"); ps_fmt_tab(f);
    ps_fmt_str(f, ps_py.off_why ? ps_py.off_why : "-");
    for (int i = 0; i < 4; i++) {
        ps_fmt_tab(f);
        ps_fmt_u64(f, sum[i]);
    }
    ps_fmt_tab(f);
    ps_fmt_u64(f, atomic_load(&ps_py_nlocations) - 1); ps_fmt_tab(f);
    ps_fmt_u64(f, ps_py_locations_full); ps_fmt_char(f, '\n');
}

/* Python paths are many more than a native program's (every function and line of every
 * module on the way to a call, a test suite's thousands of tests): the heap profiler's tree
 * size (mapped without reserve: only the nodes used cost memory). */
static uint32_t python_tree_nodes(void) { return ps_py_on ? 1u << 20 : 0; }

static const ps_node_kind_t kinds[] = {
    {.kind = PS_NODE_PY, .name = "py", .key_name = ps_py_location_name}, {.kind = -1}};

const ps_source_t ps_source_python = {
    .name = "python",
    .options = options,
    .configure = python_configure,
    .thread_size = sizeof(py_thread_t),
    .tree_nodes = python_tree_nodes,
    .write = python_write,
    .kinds = kinds,
};
