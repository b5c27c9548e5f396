/* Fortran side of the MPI source: the helpers of the generated Fortran wrappers (build/<mpi>/
 * gen/ps_fortran.c, from gen_fortran.py; declared in fortran.h) and the hand-written Fortran
 * wrappers whose C twins are hand-written too (lifecycle_mpi.c): MPI_INIT, MPI_INIT_THREAD,
 * MPI_FINALIZE, MPI_ABORT and MPI_PCONTROL.  The request completion family is generated from
 * mpi_semantics.COMPLETION; what it shares (the batch of requests, the completion bookkeeping
 * on Fortran statuses) is here.
 *
 * Every Fortran wrapper forwards the call unchanged to the MPI library's own Fortran profiling
 * entry point (pmpi_wait_ ...), so the library keeps handling every Fortran sentinel; the only
 * argument ever replaced is MPI_STATUS(ES)_IGNORE, by a buffer of ours, so that the bytes of
 * completed receives can be read from the status.  Each wrapper is exported under the four
 * usual manglings: mpi_wait_, mpi_wait__, mpi_wait, MPI_WAIT, and under the mpi_f08 name
 * mpi_wait_f08_ (Open MPI 4, MPICH 4: see PS_F_ENTRIES below).
 *
 * Handles: Fortran INTEGER handles are converted with PMPI_*_f2c; requests BEFORE the call
 * (the library overwrites completed ones with MPI_REQUEST_NULL), so they find the entry the
 * posting wrapper added to the request table under the same C handle.  Fortran indices
 * (MPI_WAITANY, MPI_WAITSOME...) are 1-based (but see ps_f_index_base in fortran.h).
 */
#include <ctype.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fortran.h"
#include "mpi_internal.h"
#include "wrap.h"

/* ---- resolving the library's Fortran entry points -------------------------------------- */

/* Address of the MPI library's Fortran procedure "lname" (e.g. "send"): its profiling entry
 * point pmpi_send_ (or the other manglings), else the next mpi_send_ after ours.  Never NULL:
 * a Fortran wrapper was called, so the program is linked with the library's Fortran bindings;
 * if they cannot be found the link is broken and we stop with one clear line. */
void *ps_f_resolve(const char *lname)
{
    char name[128], upper[128];
    size_t n = strlen(lname);
    if (n > 100) n = 100;
    for (size_t i = 0; i < n; i++) upper[i] = (char)toupper((unsigned char)lname[i]);
    upper[n] = 0;
    static const char *const forms[] = {"pmpi_%.100s_", "pmpi_%.100s__", "pmpi_%.100s"};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        snprintf(name, sizeof name, forms[i], lname);
        void *p = dlsym(RTLD_DEFAULT, name);
        if (p) return p;
    }
    snprintf(name, sizeof name, "PMPI_%s", upper);
    void *p = dlsym(RTLD_DEFAULT, name);
    if (p) return p;
    snprintf(name, sizeof name, "mpi_%.100s_", lname);
    p = dlsym(RTLD_NEXT, name);
    if (p) return p;
    char msg[256];
    int len = snprintf(msg, sizeof msg,
                       "pathscope: fatal: MPI library has no Fortran entry point pmpi_%.100s_ "
                       "for MPI_%s (Fortran bindings not linked?)\n", lname, upper);
    if (len > 0) {
        ssize_t w = write(2, msg, (size_t)len < sizeof msg ? (size_t)len : sizeof msg - 1);
        (void)w;
    }
    abort();
}

/* Open MPI 4 mpi_f08: mpi_<lname>_f08_ -> pmpi_<lname>_f08_ (else the next mpi_<lname>_f08_). */
void *ps_f_resolve_f08(const char *lname)
{
    char name[128];
    snprintf(name, sizeof name, "pmpi_%.100s_f08_", lname);
    void *p = dlsym(RTLD_DEFAULT, name);
    if (p) return p;
    snprintf(name, sizeof name, "mpi_%.100s_f08_", lname);
    p = dlsym(RTLD_NEXT, name);
    if (p) return p;
    char msg[256];
    int len = snprintf(msg, sizeof msg,
                       "pathscope: fatal: MPI library has no mpi_f08 entry point "
                       "pmpi_%.100s_f08_ (mpi_f08 bindings not linked?)\n", lname);
    if (len > 0) {
        ssize_t w = write(2, msg, (size_t)len < sizeof msg ? (size_t)len : sizeof msg - 1);
        (void)w;
    }
    abort();
}

/* The four manglings of one wrapper. */
#define PS_F_EXPORT(fw, args, lower, upper) \
    extern void fw##_0 args __asm__(lower "_") __attribute__((alias(#fw), visibility("default"))); \
    extern void fw##_1 args __asm__(lower "__") __attribute__((alias(#fw), visibility("default"))); \
    extern void fw##_2 args __asm__(lower) __attribute__((alias(#fw), visibility("default"))); \
    extern void fw##_3 args __asm__(upper) __attribute__((alias(#fw), visibility("default")));

/* ---- Fortran sentinels ----------------------------------------------------------------- */

int ps_f_sentinels_ok;

/* MPICH fills in MPI_F_STATUS(ES)_IGNORE and its Fortran MPI_IN_PLACE address on the first
 * call through its Fortran bindings (normally MPI_INIT).  If a Fortran wrapper runs before
 * that (C main program, Fortran routine), do what each MPICH binding does first. */
void ps_f_sentinels_slow(void)
{
    if (!MPI_F_STATUS_IGNORE || !MPI_F_STATUSES_IGNORE) {
        int *need = dlsym(RTLD_DEFAULT, "MPIR_F_NeedInit");
        void (*initf)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "mpirinitf_");
        if (need && *need && initf) {
            initf();
            *need = 0;
        }
    }
    if (!ps_f_in_place) {
        void *p = dlsym(RTLD_DEFAULT, "mpi_fortran_in_place_");
        if (p) ps_f_in_place = p;
        void **pp = dlsym(RTLD_DEFAULT, "MPIR_F_MPI_IN_PLACE");
        if (!p && pp && *pp) ps_f_in_place = *pp;
    }
    if (MPI_F_STATUS_IGNORE && MPI_F_STATUSES_IGNORE) ps_f_sentinels_ok = 1;
}

int ps_f_is_in_place(const void *buf)
{
    if (__builtin_expect(!ps_f_sentinels_ok, 0)) ps_f_sentinels_slow();
    return buf == MPI_IN_PLACE || (ps_f_in_place && buf == ps_f_in_place);
}

/* ---- helpers of the generated wrappers ------------------------------------------------- */

/* Converts n Fortran datatype handles into local (or a new array when n > nlocal); *out is
 * what to free if != local.  0 if memory ran out (counted). */
int ps_f_types(const void *f, int n, MPI_Datatype *local, int nlocal, MPI_Datatype **out)
{
    const MPI_Fint *ft = f;
    MPI_Datatype *t = local;
    if (n > nlocal) {
        t = malloc(sizeof(MPI_Datatype) * (size_t)n);
        if (!t) {
            atomic_fetch_add(&ps_counters.alloc_failures, 1);
            *out = NULL;
            return 0;
        }
    }
    for (int i = 0; i < n; i++) t[i] = PMPI_Type_f2c(ft[i]);
    *out = t;
    return 1;
}

/* ---- entry points ---------------------------------------------------------------------- */

/* Each hand-written wrapper is a body_<name>(fn, f08, args...) taking the library's entry
 * point; PS_F_ENTRIES defines its exported entry points: the four manglings forwarding to
 * pmpi_<name>_, and the mpi_f08 one, mpi_<name>_f08_, forwarding to pmpi_<name>_f08_ (Open MPI
 * 4) or to the library's own mpi_<name>_f08_ (MPICH 4, whose non-buffer mpi_f08 procedures call
 * the C PMPI_ functions directly and have no profiling twins).  mpi_f08 handles are the address
 * of their one INTEGER and TYPE(MPI_Status) has the INTEGER status layout in both; IERROR is
 * OPTIONAL there, so we pass one of ours when it is absent, to learn the outcome.  f08 selects
 * the binding's MPI_STATUS(ES)_IGNORE and index base (fortran.h).  The generated wrappers
 * (gen_fortran.py) have the same two entry points. */

/* the generated mpi_f08 wrappers' MPI_STATUS_IGNORE */
MPI_Fint *ps_f08_status_ignore(void) { return ps_f_ign(1); }

#ifdef PS_F08
#define PS_F08_ENTRY(name, T, params, args, ierr) \
    static T fp08_##name; \
    static void ps_fw08_##name params \
    { \
        PS_F08_TARGET(T, fp08_##name, #name) \
        const int f08 = 1; \
        MPI_Fint ps_e = MPI_SUCCESS; \
        if (!ierr) ierr = &ps_e; \
        body_##name args; \
    } \
    extern void ps_fw08_##name##_0 params __asm__("mpi_" #name "_f08_") \
        __attribute__((alias("ps_fw08_" #name), visibility("default")));
#else
#define PS_F08_ENTRY(name, T, params, args, ierr)
#endif

#define PS_F_ENTRIES(name, T, params, args, ierr, upper) \
    static T fp_##name; \
    static void ps_fw_##name params \
    { \
        PS_F_TARGET(T, fp_##name, #name) \
        const int f08 = 0; \
        body_##name args; \
    } \
    PS_F_EXPORT(ps_fw_##name, params, "mpi_" #name, upper) \
    PS_F08_ENTRY(name, T, params, args, ierr)

/* ---- lifecycle ------------------------------------------------------------------------- */

/* After the library's MPI_INIT(_THREAD): start pathscope unless a C wrapper already did (MPICH's
 * Fortran bindings call the C MPI_Init, Open MPI's call PMPI_Init). provided < 0: ask MPI. */
static void after_init(const MPI_Fint *ierr, int provided)
{
    if (!PS_F_OK(ierr) || ps_state != PS_RUN_STARTED) return;
    int init = 0, fin = 0;
    PMPI_Initialized(&init);
    PMPI_Finalized(&fin);
    if (!init || fin) return;
    if (provided < 0) {
        provided = MPI_THREAD_SINGLE;
        PMPI_Query_thread(&provided);
    }
    ps_mpi_after_init(provided);
    ps_f_sentinels_slow();
}

typedef void (*ft_init)(MPI_Fint *);
static void body_init(ft_init fn, int f08, MPI_Fint *ierr)
{
    fn(ierr);
    after_init(ierr, -1);
}
PS_F_ENTRIES(init, ft_init, (MPI_Fint *ierr), (fn, f08, ierr), ierr, "MPI_INIT")

typedef void (*ft_init_thread)(MPI_Fint *, MPI_Fint *, MPI_Fint *);
static void body_init_thread(ft_init_thread fn, int f08, MPI_Fint *required, MPI_Fint *provided,
                             MPI_Fint *ierr)
{
    fn(required, provided, ierr);
    after_init(ierr, PS_F_OK(ierr) ? (int)*provided : -1);
}
PS_F_ENTRIES(init_thread, ft_init_thread,
             (MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierr),
             (fn, f08, required, provided, ierr), ierr, "MPI_INIT_THREAD")

/* The same end of run as MPI_Finalize (lifecycle_mpi.c), before the library's finalize. */
typedef void (*ft_finalize)(MPI_Fint *);
static void body_finalize(ft_finalize fn, int f08, MPI_Fint *ierr)
{
    ps_mpi_finalize_begin();
    fn(ierr);
}
PS_F_ENTRIES(finalize, ft_finalize, (MPI_Fint *ierr), (fn, f08, ierr), ierr, "MPI_FINALIZE")

typedef void (*ft_abort)(MPI_Fint *, MPI_Fint *, MPI_Fint *);
static void body_abort(ft_abort fn, int f08, MPI_Fint *comm, MPI_Fint *errorcode, MPI_Fint *ierr)
{
    ps_mpi_abort_begin((int)*errorcode);
    fn(comm, errorcode, ierr);
}
PS_F_ENTRIES(abort, ft_abort, (MPI_Fint *comm, MPI_Fint *errorcode, MPI_Fint *ierr),
             (fn, f08, comm, errorcode, ierr), ierr, "MPI_ABORT")

/* MPI_PCONTROL(LEVEL): as the C MPI_Pcontrol.  It calls the C PMPI_Pcontrol directly (the
 * Fortran binding would only do that, or, in MPICH, reach our C wrapper and count twice). */
static void ps_fw_pcontrol(MPI_Fint *level)
{
    ps_paused = *level == 0;
    PMPI_Pcontrol((int)*level);
    if (ps_state == PS_RUN_MPI) ps_record(PS_COMM_NONE, PS_OP_MPI_Pcontrol, 0, 0, 0);
}
PS_F_EXPORT(ps_fw_pcontrol, (MPI_Fint *), "mpi_pcontrol", "MPI_PCONTROL")
#ifdef PS_F08
extern void ps_fw08_pcontrol(MPI_Fint *) __asm__("mpi_pcontrol_f08_")
    __attribute__((alias("ps_fw_pcontrol"), visibility("default")));
#endif

/* ---- request completion: the helpers of the generated wrappers (fortran.h) --------------- */

int ps_f_batch_open(ps_f_batch_t *b, int n, const MPI_Fint *freqs, MPI_Fint **fstatuses, int f08)
{
    if (n < 0) n = 0;
    b->before = n <= PS_F_LOCAL_REQUESTS ? b->before_local
                                         : malloc(sizeof(MPI_Request) * (size_t)n);
    b->statuses = NULL;
    if (!b->before) return -1;
    for (int i = 0; i < n; i++) b->before[i] = PMPI_Request_f2c(freqs[i]);
    if (fstatuses && *fstatuses == ps_f_igns(f08)) {
        b->statuses = n <= PS_F_LOCAL_REQUESTS
                          ? b->status_local
                          : malloc(sizeof(MPI_Fint) * PS_F_STATUS_SIZE * (size_t)n);
        if (!b->statuses) {
            if (b->before != b->before_local) free(b->before);
            return -1;
        }
        *fstatuses = b->statuses;
    }
    return 0;
}

void ps_f_batch_close(ps_f_batch_t *b)
{
    if (b->before != b->before_local) free(b->before);
    if (b->statuses && b->statuses != b->status_local) free(b->statuses);
}

void ps_f_complete(MPI_Request before, const MPI_Fint *fstatus)
{
    if (before == MPI_REQUEST_NULL) return;
    MPI_Status st;
    PMPI_Status_f2c((MPI_Fint *)fstatus, &st);
    ps_complete_one(before, &st, NULL);
}

void ps_f_complete_failed(MPI_Request before, const MPI_Fint *after)
{
    ps_complete_failed(before, PMPI_Request_f2c(*after));
}

void ps_f_complete_all(const MPI_Request *before, int n, const MPI_Fint *statuses)
{
    for (int i = 0; i < n; i++) ps_f_complete(before[i], statuses + (size_t)i * PS_F_STATUS_SIZE);
}

void ps_f_complete_index(const MPI_Request *before, int n, const MPI_Fint *index,
                         const MPI_Fint *fstatus, int base, const MPI_Fint *freqs, int ok)
{
    if (*index == MPI_UNDEFINED || *index < base || *index >= n + base) return;
    if (ok) ps_f_complete(before[*index - base], fstatus);
    else ps_f_complete_failed(before[*index - base], &freqs[*index - base]);
}

void ps_f_complete_some(const MPI_Request *before, int n, const MPI_Fint *indices, int base,
                        int count, const MPI_Fint *statuses)
{
    for (int k = 0; k < count; k++)
        if (indices[k] >= base && indices[k] < n + base)
            ps_f_complete(before[indices[k] - base], statuses + (size_t)k * PS_F_STATUS_SIZE);
}

void ps_f_complete_in_status(const MPI_Request *before, int n, const MPI_Fint *statuses,
                             const MPI_Fint *indices, int base, int count)
{
    for (int k = 0; k < count; k++) {
        int i = indices ? indices[k] - base : k;
        if (i < 0 || i >= n) continue;
        MPI_Status st;
        PMPI_Status_f2c((MPI_Fint *)statuses + (size_t)k * PS_F_STATUS_SIZE, &st);
        ps_complete_in_status(&before[i], &st, NULL, 1);
    }
}
