/* What the Fortran wrappers share: the hand-written ones (fortran_support.c) and the generated
 * ones (build/<mpi>/gen/ps_fortran.c, from gen_fortran.py).  Definitions in fortran_support.c.
 *
 * A Fortran wrapper forwards the call unchanged to the MPI library's own Fortran entry point
 * (PS_F_TARGET: pmpi_wait_ ..., resolved once); the only argument it may replace is
 * MPI_STATUS(ES)_IGNORE, by a buffer of ours, so that the bytes of completed receives can be
 * read from the status.  Handles are converted with PMPI_*_f2c, requests BEFORE the call (the
 * library overwrites completed ones with MPI_REQUEST_NULL).
 */
#ifndef PS_FORTRAN_H
#define PS_FORTRAN_H
#include "mpi_internal.h"

_Static_assert(sizeof(MPI_Fint) == sizeof(int), "Fortran INTEGER arrays are passed as int arrays");
#ifdef MPI_F_STATUS_SIZE
#define PS_F_STATUS_SIZE MPI_F_STATUS_SIZE
#else
#define PS_F_STATUS_SIZE ((int)(sizeof(MPI_Status) / sizeof(MPI_Fint)))
#endif
#define PS_F_OK(e) (!(e) || *(e) == MPI_SUCCESS) /* IERROR is OPTIONAL in mpi_f08 */

/* mpi_f08 wrappers (gen_fortran.py, comment above F08_EXTRA): Open MPI 4 (all) and MPICH 4
 * (procedures without a choice buffer) */
#if defined(OPEN_MPI) && OMPI_MAJOR_VERSION == 4
#define PS_F08_OMPI 1
#endif
#if defined(MPICH_NUMVERSION) && MPICH_NUMVERSION >= 40000000
#define PS_F08_MPICH 1
#endif
#if defined(PS_F08_OMPI) || defined(PS_F08_MPICH)
#define PS_F08 1
#endif

/* ---- the library's entry points -------------------------------------------------------- */

void *ps_f_resolve(const char *lname);     /* pmpi_<lname>_ (never NULL: aborts instead) */
void *ps_f_resolve_f08(const char *lname); /* pmpi_<lname>_f08_ or the next mpi_<lname>_f08_ */

/* fn: the library's entry point for wrapper variable var, resolved on first use */
#define PS_F_TARGET(T, var, lname) \
    T fn = __atomic_load_n(&var, __ATOMIC_RELAXED); \
    if (__builtin_expect(!fn, 0)) { \
        fn = (T)ps_f_resolve(lname); \
        __atomic_store_n(&var, fn, __ATOMIC_RELAXED); \
    }
#define PS_F08_TARGET(T, var, lname) \
    T fn = __atomic_load_n(&var, __ATOMIC_RELAXED); \
    if (__builtin_expect(!fn, 0)) { \
        fn = (T)ps_f_resolve_f08(lname); \
        __atomic_store_n(&var, fn, __ATOMIC_RELAXED); \
    }

/* ---- Fortran sentinels ----------------------------------------------------------------- */

extern int ps_f_sentinels_ok;
void ps_f_sentinels_slow(void); /* MPICH fills its Fortran sentinels in lazily */
int ps_f_is_in_place(const void *buf);
MPI_Fint *ps_f08_status_ignore(void); /* the mpi_f08 binding's MPI_STATUS_IGNORE */

static inline MPI_Fint *ps_f_status_ignore(void)
{
    if (__builtin_expect(!ps_f_sentinels_ok, 0)) ps_f_sentinels_slow();
    return MPI_F_STATUS_IGNORE;
}

static inline MPI_Fint *ps_f_statuses_ignore(void)
{
    if (__builtin_expect(!ps_f_sentinels_ok, 0)) ps_f_sentinels_slow();
    return MPI_F_STATUSES_IGNORE;
}

/* f08 selects the binding: MPICH's mpi_f08 has its own MPI_STATUS(ES)_IGNORE, and MPICH 4.0's
 * mpi_f08 Waitany, Testany, Waitsome, Testsome return 0-based indices (pmodels/mpich#6270,
 * fixed in 4.1); 1-based everywhere else. */
static inline MPI_Fint *ps_f_ign(int f08)
{
#ifdef PS_F08_MPICH
    if (f08) return (MPI_Fint *)MPI_F08_STATUS_IGNORE;
#endif
    (void)f08;
    return ps_f_status_ignore();
}

static inline MPI_Fint *ps_f_igns(int f08)
{
#ifdef PS_F08_MPICH
    if (f08) return (MPI_Fint *)MPI_F08_STATUSES_IGNORE;
#endif
    (void)f08;
    return ps_f_statuses_ignore();
}

static inline int ps_f_index_base(int f08)
{
#if defined(PS_F08_MPICH) && MPICH_NUMVERSION < 40100000
    if (f08) return 0;
#endif
    (void)f08;
    return 1;
}

/* ---- argument conversion ---------------------------------------------------------------- */

#define PS_F_LOCAL_TYPES 32
int ps_f_types(const void *f, int n, MPI_Datatype *local, int nlocal, MPI_Datatype **out);

/* ---- request completion (the generated wrappers of mpi_semantics.COMPLETION) ------------- */

#define PS_F_LOCAL_REQUESTS 64 /* requests handled without allocation */

/* The requests of a call as C handles before the call, and our statuses when the caller
 * passed MPI_STATUSES_IGNORE. */
typedef struct {
    MPI_Request before_local[PS_F_LOCAL_REQUESTS], *before;
    MPI_Fint status_local[PS_F_LOCAL_REQUESTS * PS_F_STATUS_SIZE], *statuses;
} ps_f_batch_t;

/* -1 if memory ran out (nothing to close).  fstatuses NULL: the call has no status array;
 * else *fstatuses is replaced by ours if it is MPI_STATUSES_IGNORE: pass it on to the library. */
int ps_f_batch_open(ps_f_batch_t *b, int n, const MPI_Fint *freqs, MPI_Fint **fstatuses,
                    int f08);
void ps_f_batch_close(ps_f_batch_t *b);

/* One request completed, its status in Fortran form (ps_complete_one). */
void ps_f_complete(MPI_Request before, const MPI_Fint *fstatus);
/* The request a failed call was about; after: its Fortran handle after the call. */
void ps_f_complete_failed(MPI_Request before, const MPI_Fint *after);
/* All n requests completed, status i for request i. */
void ps_f_complete_all(const MPI_Request *before, int n, const MPI_Fint *statuses);
/* Waitany / Testany returned: index (base-based, MPI_UNDEFINED when no request was active)
 * completed, or failed when !ok. */
void ps_f_complete_index(const MPI_Request *before, int n, const MPI_Fint *index,
                         const MPI_Fint *fstatus, int base, const MPI_Fint *freqs, int ok);
/* Waitsome / Testsome: count completed, indices[k] (base-based) with status k. */
void ps_f_complete_some(const MPI_Request *before, int n, const MPI_Fint *indices, int base,
                        int count, const MPI_Fint *statuses);
/* MPI_ERR_IN_STATUS: status k belongs to request indices[k] - base (k when indices is NULL);
 * as ps_complete_in_status. */
void ps_f_complete_in_status(const MPI_Request *before, int n, const MPI_Fint *statuses,
                             const MPI_Fint *indices, int base, int count);

#endif
