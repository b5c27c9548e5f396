/* pathscope MPI source: communicator registry, request table, per-(communicator, operation)
 * statistics and the hooks the generated wrappers call.
 *
 * Contract: the hooks run in the application's thread, after the PMPI call returned, with
 * ps_in_wrapper set (so MPI calls made here do not recurse into our wrappers).  They may
 * allocate (never from a signal handler).  When MPI_THREAD_MULTIPLE was granted every
 * update of shared state happens under ps_lock().  Nothing here prints or exits.
 */
#ifndef PS_MPI_INTERNAL_H
#define PS_MPI_INTERNAL_H

#include <mpi.h>
#include <stdint.h>

#include "pathscope.h"
#include "ps_ops.h" /* generated: enum of every wrapped operation, PS_NUM_OPS, ps_op_names[] */

#define PS_NAME_MAX 200
#define PS_TOPO_MAX 160
#define PS_HIST_BINS 48 /* bin 0: 0 bytes; bin k>0: [2^(k-1), 2^k) bytes; last bin open-ended */
#define PS_MAX_COMMS 65536 /* slots alive at once: freed communicators fold (fold.c) */
#define PS_COMM_NONE 0 /* pseudo communicator "-": operations bound to no communicator */

typedef struct {
    uint64_t calls, ticks, bytes;
    uint64_t hist[PS_HIST_BINS];
    /* at the end only: what the call trees hold of these (paths.c: ps_paths_complete_counted) */
    struct { uint64_t calls, ticks, bytes; } in_trees;
} ps_stat_t;

typedef struct {
    char name[PS_NAME_MAX];
    char topo[PS_TOPO_MAX]; /* topology constructor details, "" if none */
    int id, parent_id, creator_op;
    int creations;          /* creating calls made on this communicator (same on all members) */
    int size, remote_size, is_inter;
    int my_rank;            /* this process's rank in the communicator */
    int *members;           /* world ranks: local group, then remote group for intercomms */
    int freed;
    uint64_t sent_msgs, sent_bytes, recv_msgs, recv_bytes; /* point-to-point, for the check */
    /* requests released by MPI_Request_free before a completion call saw them complete: the
     * sends are counted in sent_* already (at their post or start); the receives' messages
     * arrive unseen, so they are counted here, with their posted capacity as a bound */
    uint64_t freed_sends, freed_recvs, freed_recv_capacity;
    /* requests of the application that ended with an error (a truncated receive, a
     * generalized request whose query function failed): no message counted for them */
    uint64_t failed_requests;
    ps_stat_t *ops[PS_NUM_OPS];
    /* ---- folding (fold.c) ---- */
    int state;              /* PS_SLOT_FREE, PS_SLOT_COMM or PS_SLOT_ROW */
    int own_at;             /* where the name's own part ("_d5", "_s7.2") starts; -1: none */
    int prefix_is_parent;   /* the name before own_at is the parent's: follows its folding */
    int refs;               /* requests, windows, files, a pending idup naming this record:
                             * freed and 0 is when it folds */
    int first_comm, first_row; /* children: communicators, folded rows (ids, -1: none) */
    int prev_sibling, next_sibling;
    int members_cap;        /* ints allocated at members */
    /* a folded row: the communicators it stands for whose lowest world rank is this rank
     * (summed over the ranks: each counted once), and all those this rank was in */
    uint64_t folded, memberships;
    int topo_mixed;         /* a folded row whose communicators had different topologies */
    /* the thread-tree entries (paths.c: ps_pcomm_t) that name this record, as
     * thread index << 32 | node, so that folding moves them too */
    uint64_t *pcomm_refs;
    int npcomm_refs, pcomm_refs_cap;
} ps_comm_t;

enum { PS_SLOT_FREE = 0, PS_SLOT_COMM, PS_SLOT_ROW };

extern ps_comm_t *ps_comms[PS_MAX_COMMS];
extern int ps_ncomms;
extern int ps_comm_counter; /* communicators this process belongs to (mpisee's count) */

/* ---- locking (only when MPI_THREAD_MULTIPLE) ------------------------------------------- */
extern atomic_flag ps_big_lock;
static inline void ps_lock(void)
{
    if (ps_threaded)
        while (atomic_flag_test_and_set_explicit(&ps_big_lock, memory_order_acquire)) { }
}
static inline void ps_unlock(void)
{
    if (ps_threaded) atomic_flag_clear_explicit(&ps_big_lock, memory_order_release);
}

/* ---- registry (registry.c) ------------------------------------------------------------- */
int ps_comm_lookup(MPI_Comm comm);        /* id, registering an unknown communicator */
int ps_win_lookup(MPI_Win win);           /* id of the window's communicator */
int ps_file_lookup(MPI_File file);        /* id of the file's communicator */
void ps_comm_forget(MPI_Comm comm);       /* MPI_Comm_free/disconnect: keep data, drop handle */
void ps_win_register(MPI_Win win, int comm_id);
void ps_win_forget(MPI_Win win);
void ps_file_register(MPI_File file, int comm_id);
void ps_file_forget(MPI_File file);
/* Registers newcomm under a name (mpisee scheme, naming.c) and returns its id. */
int ps_comm_register(MPI_Comm newcomm, const char *name, int parent_id, int creator_op,
                     const char *topo);
/* The same, for a name made of a prefix (own_at bytes: the parent's name, "G", "J", a peer's)
 * and the communicator's own part: the name its folded row takes (fold.c). */
int ps_comm_register_named(MPI_Comm newcomm, const char *name, int own_at, int parent_id,
                           int creator_op, const char *topo);
void ps_registry_init(void); /* W, S.<rank>, parent intercomm of spawned jobs */
/* MPI_Comm_idup: reserve the new handle's record at the call (no MPI query on it), name it
 * and fill its members when the request completes. */
int ps_comm_reserve(MPI_Comm newcomm, int parent_id, int creator_op);
void ps_comm_finish(int id, MPI_Comm comm, const char *name, int own_at);

/* ---- folding freed communicators (fold.c; every call with ps_lock held) ----------------- */
/* A new record in a free slot (or a new one), linked below its parent; -1 if the table is
 * full.  Records freed earlier whose last reference went meanwhile are folded first. */
int ps_slot_take(int parent_id, int state);
extern int ps_comm_keep;       /* PATHSCOPE_COMM_KEEP: freed communicators with M at most
                                * this keep their own record */
void ps_comm_freed(int id);    /* MPI_Comm_free / disconnect: fold now or when unreferenced */
void ps_comm_ref(int id);      /* a request, window, file names it */
void ps_comm_unref(int id);
void ps_fold_pending(void);    /* fold what became unreferenced since the last call */
void ps_fold_all(void);        /* MPI_Finalize: fold every freed, unreferenced record */
void ps_pcomm_note(int comm_id, int thread_index, uint32_t node); /* a new ps_pcomm_t entry */
void ps_comm_set_own(ps_comm_t *c, int own_at); /* own_at and prefix_is_parent of a named record */

ps_stat_t *ps_stat_slot(int comm_id, int op); /* allocates on first use, NULL if out of memory */

static inline int ps_hist_bin(uint64_t bytes)
{
    if (!bytes) return 0;
    int b = 64 - __builtin_clzll(bytes);
    return b < PS_HIST_BINS ? b : PS_HIST_BINS - 1;
}

extern int ps_paths_on; /* core: call paths active */
void ps_path_record(int comm_id, int op, uint64_t dt, uint64_t bytes, int count_bytes); /* paths.c */
void ps_paths_configure(void);
uint64_t ps_rank_mpi_ticks(void); /* mpi_out.c: the rank's time in MPI calls [signal-safe] */
/* After MPI_Finalize's rank file (mpi's end hook): merges the ranks' records over
 * MPI_COMM_WORLD's duplicate and rank 0 writes profile.tsv (reduce.c). */
void ps_reduce_and_write(void);
int ps_tree_reduce(MPI_Comm comm); /* treereduce.c: 1 when tree.tsv was written */
/* ranksfile.c, --per-rank all: every rank's text into ranks.tsv with MPI-IO; 1 when it is
 * there whole (every rank learns it) */
int ps_ranks_file_write(MPI_Comm comm);
/* idle.c: pathscope's own communication, waiting by tests and sleeps (not spinning); 0 or -1
 * (an MPI error) */
int ps_wait_idle(MPI_Request *req);
int ps_wait_idle_status(MPI_Request *req, MPI_Status *status);
int ps_send_idle(const void *buf, int n, MPI_Datatype type, int to, int tag, MPI_Comm comm);
int ps_recv_idle(void *buf, int n, MPI_Datatype type, int from, int tag, MPI_Comm comm);

/* The one recording primitive: one call of op on the communicator, dt ticks, bytes moved. */
static inline void ps_record(int comm_id, int op, uint64_t dt, uint64_t bytes, int count_bytes)
{
    if (ps_paused) return;
    ps_lock();
    ps_stat_t *s = ps_stat_slot(comm_id, op);
    if (s) {
        s->calls++;
        s->ticks += dt;
        if (count_bytes) {
            s->bytes += bytes;
            s->hist[ps_hist_bin(bytes)]++;
        }
    }
    ps_unlock();
    if (ps_paths_on) ps_path_record(comm_id, op, dt, bytes, count_bytes);
}

/* ---- requests (registry.c: the table; completion.c: what completing or freeing one adds) */
typedef enum {
    PS_REQ_SEND = 1,   /* bytes counted at post */
    PS_REQ_RECV,       /* bytes counted at completion from the status */
    PS_REQ_SENDRECV,   /* MPI_Isendrecv(_replace): sent part counted at post, received part at
                        * completion, as PS_REQ_RECV */
    PS_REQ_COLL,       /* nonblocking collective: bytes counted at post */
    PS_REQ_PSEND,      /* persistent send: bytes counted at each start */
    PS_REQ_PRECV,      /* persistent receive: bytes at each completion */
    PS_REQ_PCOLL,      /* persistent collective: bytes at each start */
    PS_REQ_IDUP,       /* MPI_Comm_idup: name the new communicator at completion */
    PS_REQ_OTHER,      /* anything else on a communicator (e.g. Ibarrier-like, RMA R*) */
} ps_req_kind;

static inline int ps_req_persistent(int kind)
{
    return kind == PS_REQ_PSEND || kind == PS_REQ_PRECV || kind == PS_REQ_PCOLL;
}

/* ps_req_t.peerless: which side of the request has MPI_PROC_NULL as its peer (no message) */
#define PS_REQ_NO_SEND 1
#define PS_REQ_NO_RECV 2

typedef struct {
    uintptr_t key;
    int comm_id, op, kind, active;
    int refs; /* MPI libraries hand out one shared handle for operations that completed at
               * once (Open MPI's ompi_request_empty, MPICH's lightweight requests): several
               * live operations can share a key, each completion drops one reference */
    unsigned char peerless;    /* PS_REQ_NO_SEND | PS_REQ_NO_RECV */
    unsigned char started;     /* persistent: started and not completed since (active) */
    unsigned char status_seen; /* MPI_Request_get_status saw it complete: 1 with a message of
                                * seen_bytes, 2 without one (MPI_PROC_NULL, cancelled) */
    uint64_t bytes;   /* persistent send or collective: bytes moved by each start; receives:
                       * the posted capacity (count x type size), what can arrive at most */
    uint64_t seen_bytes;
    void *idup;       /* PS_REQ_IDUP: naming state (naming.c) */
} ps_req_t;

extern uint64_t ps_req_generation; /* changes whenever the request table does */
void ps_req_add(MPI_Request req, int comm_id, int op, int kind, uint64_t bytes, void *idup);
/* the same for point-to-point requests: peerless = PS_REQ_NO_SEND | PS_REQ_NO_RECV */
void ps_req_add_p2p(MPI_Request req, int comm_id, int op, int kind, uint64_t bytes, int peerless);
ps_req_t *ps_req_find(MPI_Request req);
void ps_req_remove(MPI_Request req);

/* ---- hooks called by the generated wrappers (families.c) ------------------------------- */
uint64_t ps_type_bytes(MPI_Datatype type, MPI_Count count);
void ps_on_type_free(int op, uint64_t dt, MPI_Datatype before);
void ps_on_cancel(int op, uint64_t dt);
void ps_on_comm(int op, uint64_t dt, MPI_Comm comm);
void ps_on_none(int op, uint64_t dt);
void ps_on_win(int op, uint64_t dt, MPI_Win win);
void ps_on_file(int op, uint64_t dt, MPI_File file);
void ps_on_comm_req(int op, uint64_t dt, MPI_Comm comm, MPI_Request req);
void ps_on_win_req(int op, uint64_t dt, MPI_Win win, MPI_Request req);
void ps_on_file_req(int op, uint64_t dt, MPI_File file, MPI_Request req);
void ps_on_none_req(int op, uint64_t dt, MPI_Request req);
void ps_on_send(int op, uint64_t dt, MPI_Count count, MPI_Datatype type, int dest, MPI_Comm comm);
void ps_on_isend(int op, uint64_t dt, MPI_Count count, MPI_Datatype type, int dest, MPI_Comm comm,
                 MPI_Request req);
void ps_on_send_init(int op, uint64_t dt, MPI_Count count, MPI_Datatype type, int dest,
                     MPI_Comm comm, MPI_Request req);
void ps_on_recv(int op, uint64_t dt, MPI_Comm comm, const MPI_Status *status);
void ps_on_mrecv(int op, uint64_t dt, MPI_Message msg_before, const MPI_Status *status);
void ps_on_irecv(int op, uint64_t dt, MPI_Count count, MPI_Datatype type, int source, MPI_Comm comm,
                 MPI_Request req);
void ps_on_imrecv(int op, uint64_t dt, MPI_Count count, MPI_Datatype type, MPI_Message msg_before,
                  MPI_Request req);
void ps_on_recv_init(int op, uint64_t dt, MPI_Count count, MPI_Datatype type, int source,
                     MPI_Comm comm, MPI_Request req);
void ps_on_sendrecv(int op, uint64_t dt, MPI_Count count, MPI_Datatype type, int dest,
                    MPI_Comm comm, const MPI_Status *status);
void ps_on_isendrecv(int op, uint64_t dt, MPI_Count count, MPI_Datatype type, int dest,
                     MPI_Count recvcount, MPI_Datatype recvtype, int source, MPI_Comm comm,
                     MPI_Request req);
void ps_on_mprobe(int op, uint64_t dt, MPI_Comm comm, MPI_Message msg);
void ps_on_coll(int op, uint64_t dt, MPI_Comm comm, uint64_t bytes);
void ps_on_icoll(int op, uint64_t dt, MPI_Comm comm, uint64_t bytes, MPI_Request req);
void ps_on_coll_init(int op, uint64_t dt, MPI_Comm comm, uint64_t bytes, MPI_Request req);
void ps_on_rma(int op, uint64_t dt, MPI_Win win, MPI_Count count, MPI_Datatype type);
void ps_on_rma_req(int op, uint64_t dt, MPI_Win win, MPI_Count count, MPI_Datatype type,
                   MPI_Request req);
void ps_on_win_create(int op, uint64_t dt, MPI_Comm comm, MPI_Win win);
void ps_on_win_free(int op, uint64_t dt, MPI_Win win_before);
void ps_on_file_open(int op, uint64_t dt, MPI_Comm comm, MPI_File file);
void ps_on_file_close(int op, uint64_t dt, MPI_File file_before);
void ps_on_comm_free(int op, uint64_t dt, MPI_Comm comm_before);
void ps_on_request_get_status(int op, uint64_t dt, MPI_Request req, int flag,
                              const MPI_Status *status);

/* Collective volume rules (volume.c): this rank's contribution to the lower-bound volume.
 * 'large' selects MPI_Count/MPI_Aint arrays (the MPI-4 _c functions) over int arrays. */
/* How many entries the all-to-all and neighbourhood rules read from count and type arrays;
 * the Fortran wrappers convert exactly that many datatype handles. */
int ps_peer_count(MPI_Comm comm); /* remote group size on intercommunicators */
int ps_out_degree(MPI_Comm comm); /* out-neighbours in the virtual topology */
uint64_t ps_vol_bcast(MPI_Count count, MPI_Datatype type, int root, MPI_Comm comm);
uint64_t ps_vol_gather(const void *sendbuf, MPI_Count scount, MPI_Datatype stype,
                       MPI_Count rcount, MPI_Datatype rtype, int root, MPI_Comm comm);
uint64_t ps_vol_scatter(MPI_Count scount, MPI_Datatype stype, const void *recvbuf,
                        MPI_Count rcount, MPI_Datatype rtype, int root, MPI_Comm comm);
uint64_t ps_vol_gatherv(const void *sendbuf, MPI_Count scount, MPI_Datatype stype,
                        const void *rcounts, MPI_Datatype rtype, int root, MPI_Comm comm, int large);
uint64_t ps_vol_scatterv(const void *scounts, MPI_Datatype stype, const void *recvbuf,
                         MPI_Count rcount, MPI_Datatype rtype, int root, MPI_Comm comm, int large);
uint64_t ps_vol_allgather(const void *sendbuf, MPI_Count scount, MPI_Datatype stype,
                          MPI_Count rcount, MPI_Datatype rtype, MPI_Comm comm);
uint64_t ps_vol_allgatherv(const void *sendbuf, MPI_Count scount, MPI_Datatype stype,
                           const void *rcounts, MPI_Datatype rtype, MPI_Comm comm, int large);
uint64_t ps_vol_alltoall(const void *sendbuf, MPI_Count scount, MPI_Datatype stype,
                         MPI_Count rcount, MPI_Datatype rtype, MPI_Comm comm);
uint64_t ps_vol_alltoallv(const void *sendbuf, const void *scounts, MPI_Datatype stype,
                          const void *rcounts, MPI_Datatype rtype, MPI_Comm comm, int large);
uint64_t ps_vol_alltoallw(const void *sendbuf, const void *scounts, const MPI_Datatype *stypes,
                          const void *rcounts, const MPI_Datatype *rtypes, MPI_Comm comm, int large);
uint64_t ps_vol_reduce(MPI_Count count, MPI_Datatype type, MPI_Comm comm);
uint64_t ps_vol_reduce_scatter_block(MPI_Count rcount, MPI_Datatype type, MPI_Comm comm);
uint64_t ps_vol_reduce_scatter(const void *rcounts, MPI_Datatype type, MPI_Comm comm, int large);
uint64_t ps_vol_scan(MPI_Count count, MPI_Datatype type, MPI_Comm comm);
uint64_t ps_vol_neighbor(MPI_Count scount, MPI_Datatype stype, MPI_Comm comm);
uint64_t ps_vol_neighbor_v(const void *scounts, MPI_Datatype stype, MPI_Comm comm, int large);
uint64_t ps_vol_neighbor_w(const void *scounts, const MPI_Datatype *stypes, MPI_Comm comm,
                           int large);

/* ---- communicator creation (naming.c) -------------------------------------------------- */
/* letter: the creating operation's letter (docs/format.md); multi: may create several
 * communicators at once (adds '.' + lowest parent rank); collective_over_parent: 0 only for
 * MPI_Comm_create_group, whose counter maximum is taken over the new communicator. */
void ps_on_comm_create(int op, uint64_t dt, MPI_Comm parent, MPI_Comm newcomm, char letter,
                       int multi, int collective_over_parent, const char *topo);
void ps_on_cart_create(int op, uint64_t dt, MPI_Comm parent, int ndims, const int dims[],
                       const int periods[], int reorder, MPI_Comm newcomm);
void ps_on_graph_create(int op, uint64_t dt, MPI_Comm parent, int nnodes, int reorder,
                        MPI_Comm newcomm);
void ps_on_dist_graph_create(int op, uint64_t dt, MPI_Comm parent, int reorder, MPI_Comm newcomm,
                             char letter);
void ps_on_intercomm_create(int op, uint64_t dt, MPI_Comm local_comm, int local_leader,
                            MPI_Comm peer_comm, MPI_Comm newcomm);
void ps_on_comm_idup(int op, uint64_t dt, MPI_Comm parent, MPI_Comm *newcomm, MPI_Request req);
void ps_on_comm_from_group(int op, uint64_t dt, MPI_Group group, MPI_Comm newcomm, char letter);
/* The world pathscope's own collectives run on: MPI_COMM_WORLD, or in a program of the MPI-4
 * sessions model alone (ps_sessions_only) a communicator of its own made from the first
 * session's mpi://WORLD process set, whose group (ps_world_group) gives world ranks. */
extern MPI_Comm ps_world_comm;
extern MPI_Group ps_world_group;
extern int ps_sessions_only;
#if MPI_VERSION >= 4
/* naming.c: sessions and the groups of their process sets, so that a communicator made from
 * such a group is named under its session ("S0_f2.0"). */
int ps_session_opened(MPI_Session session);   /* its index: 0, 1, ... in order of init */
void ps_session_closed(MPI_Session session);
void ps_on_group_from_pset(int op, uint64_t dt, MPI_Session session, MPI_Group group);
#endif
void ps_on_comm_dpm(int op, uint64_t dt, MPI_Comm parent, MPI_Comm newcomm, char letter);
void ps_idup_complete(ps_req_t *r); /* called by the completion wrappers */

uint64_t ps_received(int comm_id, const MPI_Status *status); /* also counts the message */
/* 1 if the status is of a received message (not MPI_PROC_NULL, not cancelled); its bytes */
int ps_status_message(const MPI_Status *status, uint64_t *bytes);
void ps_count_received(int comm_id, uint64_t bytes); /* one more message received */
void ps_sent(int comm_id, int dest, uint64_t bytes);
void ps_add_bytes(int comm_id, int op, uint64_t bytes); /* bytes + histogram, no call */

/* Completion of requests (completion.c) */
void ps_complete_one(MPI_Request before, const MPI_Status *status, int *first_comm);
int ps_first_comm(const MPI_Request *reqs, int n); /* comm id of the first known request */
void ps_req_started(MPI_Request req, int op);      /* a persistent request was started */
void ps_req_freed(MPI_Request before);             /* MPI_Request_free succeeded on it */
/* A completion call returned an error.  ps_complete_failed: the request the call was about
 * (MPI_Wait, MPI_Test, the index of MPI_Waitany/Testany) ended with an error if MPI released
 * its handle (after == MPI_REQUEST_NULL) or it is persistent.  ps_complete_in_status
 * (MPI_ERR_IN_STATUS of Waitall, Testall, Waitsome, Testsome): status k belongs to request
 * indices[k] (k when indices is NULL); MPI_SUCCESS in its error field is a normal completion,
 * MPI_ERR_PENDING none, anything else an operation that ended with an error. */
void ps_complete_failed(MPI_Request before, MPI_Request after);
void ps_complete_in_status(const MPI_Request *before, const MPI_Status *statuses,
                           const int *indices, int n);

/* Fortran sentinel addresses (fortran_support.c), resolved at init */
extern void *ps_f_in_place;

/* Start and end of MPI (lifecycle_mpi.c) */
void ps_mpi_after_init(int provided);
void ps_mpi_finalize_begin(void);  /* MPI_Finalize / mpi_finalize_, before PMPI_Finalize */
void ps_mpi_abort_begin(int errorcode); /* MPI_Abort / mpi_abort_, before PMPI_Abort */

#endif
