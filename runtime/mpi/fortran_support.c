/* Fortran side of the MPI source: what the generated Fortran wrappers (build/<mpi>/gen/
 * ps_fortran.c, from gen_fortran.py) need, and the hand-written Fortran wrappers whose C twins
 * are hand-written too (lifecycle_mpi.c, completion.c): MPI_INIT, MPI_INIT_THREAD,
 * MPI_FINALIZE, MPI_ABORT, MPI_PCONTROL and the request completion family.
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
 * (MPI_WAITANY, MPI_WAITSOME...) are 1-based (but see ibase() for MPICH 4.0's mpi_f08).
 */
#include <ctype.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mpi_internal.h"
#include "wrap.h"

#ifdef MPI_F_STATUS_SIZE
#define PS_F_STATUS_SIZE MPI_F_STATUS_SIZE
#else
#define PS_F_STATUS_SIZE ((int)(sizeof(MPI_Status) / sizeof(MPI_Fint)))
#endif
#define PS_F_OK(e) (!(e) || *(e) == MPI_SUCCESS)
#define LOCAL_N 64 /* requests handled without allocation */

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

#define PS_F_TARGET(T, var, lname) \
    T fn = __atomic_load_n(&var, __ATOMIC_RELAXED); \
    if (__builtin_expect(!fn, 0)) { \
        fn = (T)ps_f_resolve(lname); \
        __atomic_store_n(&var, fn, __ATOMIC_RELAXED); \
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

static inline MPI_Fint *status_ignore(void)
{
    if (__builtin_expect(!ps_f_sentinels_ok, 0)) ps_f_sentinels_slow();
    return MPI_F_STATUS_IGNORE;
}

static inline MPI_Fint *statuses_ignore(void)
{
    if (__builtin_expect(!ps_f_sentinels_ok, 0)) ps_f_sentinels_slow();
    return MPI_F_STATUSES_IGNORE;
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

/* Each hand-written wrapper is a body_<name>(fn, f08, f08, args...) taking the library's entry
 * point; PS_F_ENTRIES defines its exported entry points: the four manglings forwarding to
 * pmpi_<name>_, and the mpi_f08 one, mpi_<name>_f08_, forwarding to pmpi_<name>_f08_ (Open MPI
 * 4) or to the library's own mpi_<name>_f08_ (MPICH 4, whose non-buffer mpi_f08 procedures call
 * the C PMPI_ functions directly and have no profiling twins).  mpi_f08 handles are the address
 * of their one INTEGER and TYPE(MPI_Status) has the INTEGER status layout in both; IERROR is
 * OPTIONAL there, so we pass one of ours when it is absent, to learn the outcome.  f08 selects
 * the binding's MPI_STATUS(ES)_IGNORE and index base (MPICH 4.0's mpi_f08 Waitany, Testany,
 * Waitsome, Testsome return 0-based indices: pmodels/mpich#6270, fixed in 4.1). */
#if defined(OPEN_MPI) && OMPI_MAJOR_VERSION == 4
#define PS_F08 1
#endif
#if defined(MPICH_NUMVERSION) && MPICH_NUMVERSION >= 40000000
#define PS_F08 1
#define PS_F08_MPICH 1
#endif

static inline MPI_Fint *ign(int f08)
{
#ifdef PS_F08_MPICH
    if (f08) return (MPI_Fint *)MPI_F08_STATUS_IGNORE;
#endif
    (void)f08;
    return status_ignore();
}

static inline MPI_Fint *igns(int f08)
{
#ifdef PS_F08_MPICH
    if (f08) return (MPI_Fint *)MPI_F08_STATUSES_IGNORE;
#endif
    (void)f08;
    return statuses_ignore();
}

static inline int ibase(int f08)
{
#if defined(PS_F08_MPICH) && MPICH_NUMVERSION < 40100000
    if (f08) return 0;
#endif
    (void)f08;
    return 1;
}

/* the generated mpi_f08 wrappers' MPI_STATUS_IGNORE */
MPI_Fint *ps_f08_status_ignore(void) { return ign(1); }

#define PS_F08_TARGET(T, var, lname) \
    T fn = __atomic_load_n(&var, __ATOMIC_RELAXED); \
    if (__builtin_expect(!fn, 0)) { \
        fn = (T)ps_f_resolve_f08(lname); \
        __atomic_store_n(&var, fn, __ATOMIC_RELAXED); \
    }

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

/* ---- request completion ---------------------------------------------------------------- */

typedef struct {
    MPI_Request before_local[LOCAL_N], *before;
    MPI_Fint status_local[LOCAL_N * PS_F_STATUS_SIZE], *statuses;
} fbatch_t;

/* Remembers the requests as C handles and, for MPI_STATUSES_IGNORE, substitutes our own
 * statuses (*fstatuses is updated: pass it on to the library). */
static int fbatch_open(fbatch_t *b, int n, const MPI_Fint *freqs, MPI_Fint **fstatuses,
                       int f08)
{
    if (n < 0) n = 0;
    b->before = n <= LOCAL_N ? b->before_local : malloc(sizeof(MPI_Request) * (size_t)n);
    b->statuses = NULL;
    if (!b->before) return -1;
    for (int i = 0; i < n; i++) b->before[i] = PMPI_Request_f2c(freqs[i]);
    if (fstatuses && *fstatuses == igns(f08)) {
        b->statuses = n <= LOCAL_N ? b->status_local
                                   : malloc(sizeof(MPI_Fint) * PS_F_STATUS_SIZE * (size_t)n);
        if (!b->statuses) {
            if (b->before != b->before_local) free(b->before);
            return -1;
        }
        *fstatuses = b->statuses;
    }
    return 0;
}

static void fbatch_close(fbatch_t *b)
{
    if (b->before != b->before_local) free(b->before);
    if (b->statuses && b->statuses != b->status_local) free(b->statuses);
}

/* One completed request, its status as the library left it in Fortran form. */
static void complete_f(MPI_Request before, const MPI_Fint *fstatus)
{
    if (before == MPI_REQUEST_NULL) return;
    MPI_Status st;
    PMPI_Status_f2c((MPI_Fint *)fstatus, &st);
    ps_complete_one(before, &st, NULL);
}

/* A call that returned MPI_ERR_IN_STATUS: statuses[k] belongs to request indices[k] - base
 * (k when indices is NULL); as ps_complete_in_status (completion.c). */
static void complete_in_status_f(const MPI_Request *before, int n, const MPI_Fint *statuses,
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

/* The request a failed MPI_WAIT, MPI_TEST, MPI_WAITANY or MPI_TESTANY was about. */
static void complete_failed_f(MPI_Request before, const MPI_Fint *after)
{
    ps_complete_failed(before, PMPI_Request_f2c(*after));
}

typedef void (*ft_wait)(MPI_Fint *, MPI_Fint *, MPI_Fint *);
static void body_wait(ft_wait fn, int f08, MPI_Fint *request, MPI_Fint *status, MPI_Fint *ierr)
{
    if (!ps_wrap_enter()) { fn(request, status, ierr); return; }
    MPI_Request before = PMPI_Request_f2c(*request);
    MPI_Fint st[PS_F_STATUS_SIZE + 2];
    if (status == ign(f08)) status = st;
    int comm = ps_first_comm(&before, 1);
    uint64_t t0 = ps_now();
    fn(request, status, ierr);
    uint64_t dt = ps_now() - t0;
    if (PS_F_OK(ierr)) complete_f(before, status);
    else complete_failed_f(before, request);
    ps_record(comm, PS_OP_MPI_Wait, dt, 0, 0);
    ps_wrap_leave();
}
PS_F_ENTRIES(wait, ft_wait, (MPI_Fint *request, MPI_Fint *status, MPI_Fint *ierr),
             (fn, f08, request, status, ierr), ierr, "MPI_WAIT")

typedef void (*ft_test)(MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *);
static void body_test(ft_test fn, int f08, MPI_Fint *request, MPI_Fint *flag, MPI_Fint *status,
                      MPI_Fint *ierr)
{
    if (!ps_wrap_enter()) { fn(request, flag, status, ierr); return; }
    MPI_Request before = PMPI_Request_f2c(*request);
    MPI_Fint st[PS_F_STATUS_SIZE + 2];
    if (status == ign(f08)) status = st;
    int comm = ps_first_comm(&before, 1);
    int timed = ps_poll_timed(); /* a poll: sampled timing (wrap.h) */
    uint64_t t0 = timed ? ps_now() : 0;
    fn(request, flag, status, ierr);
    uint64_t dt = timed ? ps_poll_estimate(t0, ps_now()) : 0;
    if (!PS_F_OK(ierr)) complete_failed_f(before, request);
    else if (*flag) complete_f(before, status);
    ps_record(comm, PS_OP_MPI_Test, dt, 0, 0);
    ps_wrap_leave();
}
PS_F_ENTRIES(test, ft_test, (MPI_Fint *request, MPI_Fint *flag, MPI_Fint *status, MPI_Fint *ierr),
             (fn, f08, request, flag, status, ierr), ierr, "MPI_TEST")

typedef void (*ft_waitall)(MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *);
static void body_waitall(ft_waitall fn, int f08, MPI_Fint *count, MPI_Fint *reqs, MPI_Fint *statuses,
                         MPI_Fint *ierr)
{
    if (!ps_wrap_enter()) { fn(count, reqs, statuses, ierr); return; }
    fbatch_t b;
    int n = *count;
    if (fbatch_open(&b, n, reqs, &statuses, f08)) {
        ps_wrap_leave();
        atomic_fetch_add(&ps_counters.alloc_failures, 1);
        fn(count, reqs, statuses, ierr);
        return;
    }
    int comm = ps_first_comm(b.before, n);
    uint64_t t0 = ps_now();
    fn(count, reqs, statuses, ierr);
    uint64_t dt = ps_now() - t0;
    if (PS_F_OK(ierr))
        for (int i = 0; i < n; i++) complete_f(b.before[i], statuses + (size_t)i * PS_F_STATUS_SIZE);
    else if (*ierr == MPI_ERR_IN_STATUS)
        complete_in_status_f(b.before, n, statuses, NULL, 0, n);
    ps_record(comm, PS_OP_MPI_Waitall, dt, 0, 0);
    fbatch_close(&b);
    ps_wrap_leave();
}
PS_F_ENTRIES(waitall, ft_waitall,
             (MPI_Fint *count, MPI_Fint *reqs, MPI_Fint *statuses, MPI_Fint *ierr),
             (fn, f08, count, reqs, statuses, ierr), ierr, "MPI_WAITALL")

typedef void (*ft_testall)(MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *);
static void body_testall(ft_testall fn, int f08, MPI_Fint *count, MPI_Fint *reqs, MPI_Fint *flag,
                         MPI_Fint *statuses, MPI_Fint *ierr)
{
    if (!ps_wrap_enter()) { fn(count, reqs, flag, statuses, ierr); return; }
    fbatch_t b;
    int n = *count;
    if (fbatch_open(&b, n, reqs, &statuses, f08)) {
        ps_wrap_leave();
        atomic_fetch_add(&ps_counters.alloc_failures, 1);
        fn(count, reqs, flag, statuses, ierr);
        return;
    }
    int comm = ps_first_comm(b.before, n);
    int timed = ps_poll_timed(); /* a poll: sampled timing (wrap.h) */
    uint64_t t0 = timed ? ps_now() : 0;
    fn(count, reqs, flag, statuses, ierr);
    uint64_t dt = timed ? ps_poll_estimate(t0, ps_now()) : 0;
    if (PS_F_OK(ierr) && *flag)
        for (int i = 0; i < n; i++) complete_f(b.before[i], statuses + (size_t)i * PS_F_STATUS_SIZE);
    else if (!PS_F_OK(ierr) && *ierr == MPI_ERR_IN_STATUS)
        complete_in_status_f(b.before, n, statuses, NULL, 0, n);
    ps_record(comm, PS_OP_MPI_Testall, dt, 0, 0);
    fbatch_close(&b);
    ps_wrap_leave();
}
PS_F_ENTRIES(testall, ft_testall,
             (MPI_Fint *count, MPI_Fint *reqs, MPI_Fint *flag, MPI_Fint *statuses, MPI_Fint *ierr),
             (fn, f08, count, reqs, flag, statuses, ierr), ierr, "MPI_TESTALL")

/* Waitany / Testany: index is 1-based, MPI_UNDEFINED when no request was active.  After an
 * error, the index names the request that failed. */
static void any_done(const fbatch_t *b, int n, const MPI_Fint *index, const MPI_Fint *status,
                     int base, const MPI_Fint *reqs, int ok)
{
    if (*index == MPI_UNDEFINED || *index < base || *index >= n + base) return;
    if (ok) complete_f(b->before[*index - base], status);
    else complete_failed_f(b->before[*index - base], &reqs[*index - base]);
}

typedef void (*ft_waitany)(MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *);
static void body_waitany(ft_waitany fn, int f08, MPI_Fint *count, MPI_Fint *reqs, MPI_Fint *index,
                         MPI_Fint *status, MPI_Fint *ierr)
{
    if (!ps_wrap_enter()) { fn(count, reqs, index, status, ierr); return; }
    fbatch_t b;
    int n = *count;
    if (fbatch_open(&b, n, reqs, NULL, f08)) {
        ps_wrap_leave();
        atomic_fetch_add(&ps_counters.alloc_failures, 1);
        fn(count, reqs, index, status, ierr);
        return;
    }
    MPI_Fint st[PS_F_STATUS_SIZE + 2];
    if (status == ign(f08)) status = st;
    int comm = ps_first_comm(b.before, n);
    uint64_t t0 = ps_now();
    fn(count, reqs, index, status, ierr);
    uint64_t dt = ps_now() - t0;
    any_done(&b, n, index, status, ibase(f08), reqs, PS_F_OK(ierr));
    ps_record(comm, PS_OP_MPI_Waitany, dt, 0, 0);
    fbatch_close(&b);
    ps_wrap_leave();
}
PS_F_ENTRIES(waitany, ft_waitany,
             (MPI_Fint *count, MPI_Fint *reqs, MPI_Fint *index, MPI_Fint *status, MPI_Fint *ierr),
             (fn, f08, count, reqs, index, status, ierr), ierr, "MPI_WAITANY")

typedef void (*ft_testany)(MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
                           MPI_Fint *);
static void body_testany(ft_testany fn, int f08, MPI_Fint *count, MPI_Fint *reqs, MPI_Fint *index,
                         MPI_Fint *flag, MPI_Fint *status, MPI_Fint *ierr)
{
    if (!ps_wrap_enter()) { fn(count, reqs, index, flag, status, ierr); return; }
    fbatch_t b;
    int n = *count;
    if (fbatch_open(&b, n, reqs, NULL, f08)) {
        ps_wrap_leave();
        atomic_fetch_add(&ps_counters.alloc_failures, 1);
        fn(count, reqs, index, flag, status, ierr);
        return;
    }
    MPI_Fint st[PS_F_STATUS_SIZE + 2];
    if (status == ign(f08)) status = st;
    int comm = ps_first_comm(b.before, n);
    int timed = ps_poll_timed(); /* a poll: sampled timing (wrap.h) */
    uint64_t t0 = timed ? ps_now() : 0;
    fn(count, reqs, index, flag, status, ierr);
    uint64_t dt = timed ? ps_poll_estimate(t0, ps_now()) : 0;
    if (!PS_F_OK(ierr) || *flag) any_done(&b, n, index, status, ibase(f08), reqs, PS_F_OK(ierr));
    ps_record(comm, PS_OP_MPI_Testany, dt, 0, 0);
    fbatch_close(&b);
    ps_wrap_leave();
}
PS_F_ENTRIES(testany, ft_testany,
             (MPI_Fint *count, MPI_Fint *reqs, MPI_Fint *index, MPI_Fint *flag, MPI_Fint *status,
              MPI_Fint *ierr),
             (fn, f08, count, reqs, index, flag, status, ierr), ierr, "MPI_TESTANY")

/* Waitsome / Testsome: outcount completed, their 1-based indices and statuses in order. */
typedef void (*ft_some)(MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *);
static void some(ft_some fn, int f08, int op, MPI_Fint *incount, MPI_Fint *reqs, MPI_Fint *outcount,
                 MPI_Fint *indices, MPI_Fint *statuses, MPI_Fint *ierr)
{
    if (!ps_wrap_enter()) { fn(incount, reqs, outcount, indices, statuses, ierr); return; }
    fbatch_t b;
    int n = *incount;
    if (fbatch_open(&b, n, reqs, &statuses, f08)) {
        ps_wrap_leave();
        atomic_fetch_add(&ps_counters.alloc_failures, 1);
        fn(incount, reqs, outcount, indices, statuses, ierr);
        return;
    }
    int comm = ps_first_comm(b.before, n);
    uint64_t t0 = ps_now();
    fn(incount, reqs, outcount, indices, statuses, ierr);
    uint64_t dt = ps_now() - t0;
    if (PS_F_OK(ierr) && *outcount != MPI_UNDEFINED) {
        for (int k = 0, base = ibase(f08); k < *outcount; k++)
            if (indices[k] >= base && indices[k] < n + base)
                complete_f(b.before[indices[k] - base], statuses + (size_t)k * PS_F_STATUS_SIZE);
    } else if (!PS_F_OK(ierr) && *ierr == MPI_ERR_IN_STATUS && *outcount != MPI_UNDEFINED)
        complete_in_status_f(b.before, n, statuses, indices, ibase(f08), *outcount);
    ps_record(comm, op, dt, 0, 0);
    fbatch_close(&b);
    ps_wrap_leave();
}

static void body_waitsome(ft_some fn, int f08, MPI_Fint *incount, MPI_Fint *reqs, MPI_Fint *outcount,
                          MPI_Fint *indices, MPI_Fint *statuses, MPI_Fint *ierr)
{
    some(fn, f08, PS_OP_MPI_Waitsome, incount, reqs, outcount, indices, statuses, ierr);
}
PS_F_ENTRIES(waitsome, ft_some,
             (MPI_Fint *incount, MPI_Fint *reqs, MPI_Fint *outcount, MPI_Fint *indices,
              MPI_Fint *statuses, MPI_Fint *ierr),
             (fn, f08, incount, reqs, outcount, indices, statuses, ierr), ierr, "MPI_WAITSOME")

static void body_testsome(ft_some fn, int f08, MPI_Fint *incount, MPI_Fint *reqs, MPI_Fint *outcount,
                          MPI_Fint *indices, MPI_Fint *statuses, MPI_Fint *ierr)
{
    some(fn, f08, PS_OP_MPI_Testsome, incount, reqs, outcount, indices, statuses, ierr);
}
PS_F_ENTRIES(testsome, ft_some,
             (MPI_Fint *incount, MPI_Fint *reqs, MPI_Fint *outcount, MPI_Fint *indices,
              MPI_Fint *statuses, MPI_Fint *ierr),
             (fn, f08, incount, reqs, outcount, indices, statuses, ierr), ierr, "MPI_TESTSOME")

/* Persistent requests: as MPI_Start / MPI_Startall in completion.c. */
typedef void (*ft_start)(MPI_Fint *, MPI_Fint *);
static void body_start(ft_start fn, int f08, MPI_Fint *request, MPI_Fint *ierr)
{
    if (!ps_wrap_enter()) { fn(request, ierr); return; }
    MPI_Request before = PMPI_Request_f2c(*request);
    int comm = ps_first_comm(&before, 1);
    uint64_t t0 = ps_now();
    fn(request, ierr);
    uint64_t dt = ps_now() - t0;
    ps_record(comm, PS_OP_MPI_Start, dt, 0, 0);
    if (PS_F_OK(ierr)) ps_req_started(before, PS_OP_MPI_Start);
    ps_wrap_leave();
}
PS_F_ENTRIES(start, ft_start, (MPI_Fint *request, MPI_Fint *ierr), (fn, f08, request, ierr), ierr,
             "MPI_START")

typedef void (*ft_startall)(MPI_Fint *, MPI_Fint *, MPI_Fint *);
static void body_startall(ft_startall fn, int f08, MPI_Fint *count, MPI_Fint *reqs, MPI_Fint *ierr)
{
    if (!ps_wrap_enter()) { fn(count, reqs, ierr); return; }
    fbatch_t b;
    int n = *count;
    if (fbatch_open(&b, n, reqs, NULL, f08)) {
        ps_wrap_leave();
        atomic_fetch_add(&ps_counters.alloc_failures, 1);
        fn(count, reqs, ierr);
        return;
    }
    int comm = ps_first_comm(b.before, n);
    uint64_t t0 = ps_now();
    fn(count, reqs, ierr);
    uint64_t dt = ps_now() - t0;
    ps_record(comm, PS_OP_MPI_Startall, dt, 0, 0);
    if (PS_F_OK(ierr))
        for (int i = 0; i < n; i++) ps_req_started(b.before[i], PS_OP_MPI_Startall);
    fbatch_close(&b);
    ps_wrap_leave();
}
PS_F_ENTRIES(startall, ft_startall, (MPI_Fint *count, MPI_Fint *reqs, MPI_Fint *ierr),
             (fn, f08, count, reqs, ierr), ierr, "MPI_STARTALL")

typedef void (*ft_request_free)(MPI_Fint *, MPI_Fint *);
static void body_request_free(ft_request_free fn, int f08, MPI_Fint *request, MPI_Fint *ierr)
{
    if (!ps_wrap_enter()) { fn(request, ierr); return; }
    MPI_Request before = PMPI_Request_f2c(*request);
    int comm = ps_first_comm(&before, 1);
    uint64_t t0 = ps_now();
    fn(request, ierr);
    uint64_t dt = ps_now() - t0;
    ps_record(comm, PS_OP_MPI_Request_free, dt, 0, 0);
    if (PS_F_OK(ierr)) ps_req_freed(before);
    ps_wrap_leave();
}
PS_F_ENTRIES(request_free, ft_request_free, (MPI_Fint *request, MPI_Fint *ierr),
             (fn, f08, request, ierr), ierr, "MPI_REQUEST_FREE")
