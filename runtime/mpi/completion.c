/* Hand-written wrappers of the request completion family (Wait*, Test*, Start*, Request_free):
 * they need the request handles as they were before the call (MPI overwrites completed ones
 * with MPI_REQUEST_NULL) and real statuses even when the caller passes MPI_STATUS(ES)_IGNORE,
 * so that received bytes come from the completed status.  The caller's arguments reach MPI
 * unchanged otherwise, and its return value is MPI's.
 *
 * Time of a completion call goes to the communicator of the first request in the list that
 * pathscope knows (docs/format.md); bytes of completed receives go to the (communicator,
 * operation that created the request) pair, e.g. (cart, MPI_Irecv).
 *
 * What counts as a completion, exactly:
 *  - a nonblocking request completes once, when a wait or test returns it completed (its
 *    handle becomes MPI_REQUEST_NULL); a persistent one each time it was started and a wait or
 *    test returns it completed.  A wait or test on an inactive persistent request (never
 *    started, or completed and not started again) returns at once with an empty status: it
 *    moved nothing and is not counted (ps_req_t.started).
 *  - MPI_Request_free of a request that is still outstanding releases the handle while the
 *    operation goes on: MPI never reports its completion.  A send was counted when it was
 *    posted (or started); a receive's message will arrive unseen, with at most the posted
 *    capacity: it is counted in the communicator's freed_recvs and freed_recv_capacity, not as
 *    received (ps_req_freed).  Seen by MPI_Request_get_status first, it is counted exactly.
 *  - A call that fails (e.g. a truncated receive, MPI_ERR_IN_STATUS) may still complete some
 *    of its requests: those that ended with MPI_SUCCESS are counted as usual, those that ended
 *    with an error are dropped and counted in their communicator's failed_requests (no
 *    message counted).
 */
#include <stdlib.h>
#include <string.h>

#include "mpi_internal.h"
#include "wrap.h"

#define LOCAL_N 64 /* requests handled without allocation */

typedef struct {
    MPI_Request before_local[LOCAL_N], *before;
    MPI_Status status_local[LOCAL_N], *statuses;
} batch_t;

static int batch_open(batch_t *b, int n, const MPI_Request *reqs, MPI_Status **user_statuses)
{
    b->before = n <= LOCAL_N ? b->before_local : malloc(sizeof(MPI_Request) * (size_t)n);
    b->statuses = NULL;
    if (!b->before) return -1;
    /* a plain loop: for the one or two handles of a typical poll, memcpy's "rep movsq" costs
     * ~30 ns in a cache-missing loop (docs/benchmarks.md) */
    for (int i = 0; i < n; i++) b->before[i] = reqs[i];
    if (*user_statuses == MPI_STATUSES_IGNORE) {
        b->statuses = n <= LOCAL_N ? b->status_local : malloc(sizeof(MPI_Status) * (size_t)(n ? n : 1));
        if (!b->statuses) {
            if (b->before != b->before_local) free(b->before);
            return -1;
        }
        *user_statuses = b->statuses;
    }
    return 0;
}

static void batch_close(batch_t *b)
{
    if (b->before != b->before_local) free(b->before);
    if (b->statuses && b->statuses != b->status_local) free(b->statuses);
}

/* comm id of the first known request: where the call's time goes.  A poll loop asks for
 * the same request millions of times, so the last answer is kept while the request table is
 * unchanged (single-threaded runs only: ps_req_generation is bumped by every add/remove). */
static struct { MPI_Request req; uint64_t generation; int comm; } first_comm_cache;

static int first_comm(const MPI_Request *reqs, int n)
{
    int id = PS_COMM_NONE;
    for (int i = 0; i < n; i++) {
        if (reqs[i] == MPI_REQUEST_NULL) continue;
        if (!ps_threaded && reqs[i] == first_comm_cache.req &&
            first_comm_cache.generation == ps_req_generation)
            return first_comm_cache.comm;
        ps_lock();
        ps_req_t *r = ps_req_find(reqs[i]);
        if (r) id = r->comm_id;
        ps_unlock();
        if (!r) continue;
        if (!ps_threaded) {
            first_comm_cache.req = reqs[i];
            first_comm_cache.generation = ps_req_generation;
            first_comm_cache.comm = id;
        }
        break;
    }
    return id;
}

void ps_complete_one(MPI_Request before, const MPI_Status *status, int *unused)
{
    (void)unused;
    if (before == MPI_REQUEST_NULL) return;
    ps_lock();
    ps_req_t *r = ps_req_find(before);
    if (!r) {
        ps_unlock();
        atomic_fetch_add(&ps_counters.unknown_requests, 1);
        return;
    }
    if (ps_req_persistent(r->kind)) {
        if (!r->started) { /* inactive: MPI returned an empty status, nothing moved */
            ps_unlock();
            return;
        }
        r->started = 0;
        r->status_seen = 0;
    }
    ps_req_t copy = *r;
    if (!ps_req_persistent(r->kind)) ps_req_remove(before);
    ps_unlock();
    if (copy.kind == PS_REQ_RECV || copy.kind == PS_REQ_SENDRECV || copy.kind == PS_REQ_PRECV) {
        uint64_t bytes = ps_received(copy.comm_id, status);
        ps_add_bytes(copy.comm_id, copy.op, bytes);
    } else if (copy.kind == PS_REQ_IDUP) {
        ps_idup_complete(&copy);
    }
}

/* A request whose operation ended with an error: no message is counted for it. */
void ps_complete_failed(MPI_Request before, MPI_Request after)
{
    if (before == MPI_REQUEST_NULL) return;
    ps_lock();
    ps_req_t *r = ps_req_find(before);
    int ended = 0, comm = PS_COMM_NONE;
    if (r && ps_req_persistent(r->kind)) {
        ended = r->started;
        comm = r->comm_id;
        r->started = 0;
        r->status_seen = 0;
    } else if (r && after == MPI_REQUEST_NULL) {
        ended = 1;
        comm = r->comm_id;
        ps_req_remove(before);
    }
    if (ended && !ps_paused) ps_comms[comm]->failed_requests++;
    ps_unlock();
}

void ps_complete_in_status(const MPI_Request *before, const MPI_Status *statuses,
                           const int *indices, int n)
{
    for (int k = 0; k < n; k++) {
        int i = indices ? indices[k] : k;
        int err = statuses[k].MPI_ERROR;
        if (err == MPI_SUCCESS) ps_complete_one(before[i], &statuses[k], NULL);
        else if (err != MPI_ERR_PENDING) ps_complete_failed(before[i], MPI_REQUEST_NULL);
    }
}

/* MPI_Request_free succeeded on a request: see the top of the file. */
void ps_req_freed(MPI_Request before)
{
    if (before == MPI_REQUEST_NULL) return;
    ps_lock();
    ps_req_t *r = ps_req_find(before);
    if (!r) {
        ps_unlock();
        return;
    }
    ps_req_t copy = *r;
    ps_req_remove(before);
    ps_unlock();
    int outstanding = ps_req_persistent(copy.kind) ? copy.started : 1;
    if (!outstanding || ps_paused) return;
    int sends = copy.kind == PS_REQ_SEND || copy.kind == PS_REQ_PSEND || copy.kind == PS_REQ_SENDRECV;
    int recvs = copy.kind == PS_REQ_RECV || copy.kind == PS_REQ_PRECV || copy.kind == PS_REQ_SENDRECV;
    if (recvs && copy.status_seen) { /* complete, as MPI_Request_get_status said: exact */
        if (copy.status_seen == 1) {
            ps_count_received(copy.comm_id, copy.seen_bytes);
            ps_add_bytes(copy.comm_id, copy.op, copy.seen_bytes);
        }
        recvs = 0;
    }
    ps_comm_t *c = ps_comms[copy.comm_id];
    ps_lock();
    if (sends && !(copy.peerless & PS_REQ_NO_SEND)) c->freed_sends++;
    if (recvs && !(copy.peerless & PS_REQ_NO_RECV)) {
        c->freed_recvs++;
        c->freed_recv_capacity += copy.bytes;
    }
    ps_unlock();
}

int MPI_Wait(MPI_Request *request, MPI_Status *status)
{
    if (!ps_wrap_enter()) return PMPI_Wait(request, status);
    MPI_Request before = *request;
    MPI_Status st;
    if (status == MPI_STATUS_IGNORE) status = &st;
    int comm = first_comm(&before, 1);
    uint64_t t0 = ps_now();
    int rc = PMPI_Wait(request, status);
    uint64_t dt = ps_now() - t0;
    if (rc == MPI_SUCCESS) ps_complete_one(before, status, NULL);
    else ps_complete_failed(before, *request);
    ps_record(comm, PS_OP_MPI_Wait, dt, 0, 0);
    ps_wrap_leave();
    return rc;
}

int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status)
{
    if (!ps_wrap_enter()) return PMPI_Test(request, flag, status);
    MPI_Request before = *request;
    MPI_Status st;
    if (status == MPI_STATUS_IGNORE) status = &st;
    int comm = first_comm(&before, 1);
    int timed = ps_poll_timed(); /* a poll: sampled timing (wrap.h) */
    uint64_t t0 = timed ? ps_now() : 0;
    int rc = PMPI_Test(request, flag, status);
    uint64_t dt = timed ? ps_poll_estimate(t0, ps_now()) : 0;
    if (rc == MPI_SUCCESS) {
        if (*flag) ps_complete_one(before, status, NULL);
    } else {
        ps_complete_failed(before, *request);
    }
    ps_record(comm, PS_OP_MPI_Test, dt, 0, 0);
    ps_wrap_leave();
    return rc;
}

int MPI_Waitall(int count, MPI_Request array_of_requests[], MPI_Status array_of_statuses[])
{
    batch_t b;
    if (!ps_wrap_enter()) return PMPI_Waitall(count, array_of_requests, array_of_statuses);
    if (batch_open(&b, count, array_of_requests, &array_of_statuses)) {
        ps_wrap_leave();
        atomic_fetch_add(&ps_counters.alloc_failures, 1);
        return PMPI_Waitall(count, array_of_requests, array_of_statuses);
    }
    int comm = first_comm(b.before, count);
    uint64_t t0 = ps_now();
    int rc = PMPI_Waitall(count, array_of_requests, array_of_statuses);
    uint64_t dt = ps_now() - t0;
    if (rc == MPI_SUCCESS)
        for (int i = 0; i < count; i++) ps_complete_one(b.before[i], &array_of_statuses[i], NULL);
    else if (rc == MPI_ERR_IN_STATUS)
        ps_complete_in_status(b.before, array_of_statuses, NULL, count);
    ps_record(comm, PS_OP_MPI_Waitall, dt, 0, 0);
    batch_close(&b);
    ps_wrap_leave();
    return rc;
}

int MPI_Testall(int count, MPI_Request array_of_requests[], int *flag,
                MPI_Status array_of_statuses[])
{
    batch_t b;
    if (!ps_wrap_enter()) return PMPI_Testall(count, array_of_requests, flag, array_of_statuses);
    if (batch_open(&b, count, array_of_requests, &array_of_statuses)) {
        ps_wrap_leave();
        atomic_fetch_add(&ps_counters.alloc_failures, 1);
        return PMPI_Testall(count, array_of_requests, flag, array_of_statuses);
    }
    int comm = first_comm(b.before, count);
    int timed = ps_poll_timed(); /* a poll: sampled timing (wrap.h) */
    uint64_t t0 = timed ? ps_now() : 0;
    int rc = PMPI_Testall(count, array_of_requests, flag, array_of_statuses);
    uint64_t dt = timed ? ps_poll_estimate(t0, ps_now()) : 0;
    if (rc == MPI_SUCCESS && *flag)
        for (int i = 0; i < count; i++) ps_complete_one(b.before[i], &array_of_statuses[i], NULL);
    else if (rc == MPI_ERR_IN_STATUS)
        ps_complete_in_status(b.before, array_of_statuses, NULL, count);
    ps_record(comm, PS_OP_MPI_Testall, dt, 0, 0);
    batch_close(&b);
    ps_wrap_leave();
    return rc;
}

int MPI_Waitany(int count, MPI_Request array_of_requests[], int *index, MPI_Status *status)
{
    batch_t b;
    MPI_Status *none = MPI_STATUSES_IGNORE;
    MPI_Status st;
    if (!ps_wrap_enter()) return PMPI_Waitany(count, array_of_requests, index, status);
    if (batch_open(&b, count, array_of_requests, &none)) {
        ps_wrap_leave();
        atomic_fetch_add(&ps_counters.alloc_failures, 1);
        return PMPI_Waitany(count, array_of_requests, index, status);
    }
    if (status == MPI_STATUS_IGNORE) status = &st;
    int comm = first_comm(b.before, count);
    uint64_t t0 = ps_now();
    int rc = PMPI_Waitany(count, array_of_requests, index, status);
    uint64_t dt = ps_now() - t0;
    if (*index != MPI_UNDEFINED && *index >= 0 && *index < count) {
        if (rc == MPI_SUCCESS) ps_complete_one(b.before[*index], status, NULL);
        else ps_complete_failed(b.before[*index], array_of_requests[*index]);
    }
    ps_record(comm, PS_OP_MPI_Waitany, dt, 0, 0);
    batch_close(&b);
    ps_wrap_leave();
    return rc;
}

int MPI_Testany(int count, MPI_Request array_of_requests[], int *index, int *flag,
                MPI_Status *status)
{
    batch_t b;
    MPI_Status *none = MPI_STATUSES_IGNORE;
    MPI_Status st;
    if (!ps_wrap_enter()) return PMPI_Testany(count, array_of_requests, index, flag, status);
    if (batch_open(&b, count, array_of_requests, &none)) {
        ps_wrap_leave();
        atomic_fetch_add(&ps_counters.alloc_failures, 1);
        return PMPI_Testany(count, array_of_requests, index, flag, status);
    }
    if (status == MPI_STATUS_IGNORE) status = &st;
    int comm = first_comm(b.before, count);
    int timed = ps_poll_timed(); /* a poll: sampled timing (wrap.h) */
    uint64_t t0 = timed ? ps_now() : 0;
    int rc = PMPI_Testany(count, array_of_requests, index, flag, status);
    uint64_t dt = timed ? ps_poll_estimate(t0, ps_now()) : 0;
    if (*index != MPI_UNDEFINED && *index >= 0 && *index < count) {
        if (rc == MPI_SUCCESS) {
            if (*flag) ps_complete_one(b.before[*index], status, NULL);
        } else {
            ps_complete_failed(b.before[*index], array_of_requests[*index]);
        }
    }
    ps_record(comm, PS_OP_MPI_Testany, dt, 0, 0);
    batch_close(&b);
    ps_wrap_leave();
    return rc;
}

static int some(int test, int incount, MPI_Request reqs[], int *outcount, int indices[],
                MPI_Status statuses[])
{
    batch_t b;
    if (batch_open(&b, incount, reqs, &statuses)) {
        atomic_fetch_add(&ps_counters.alloc_failures, 1);
        return test ? PMPI_Testsome(incount, reqs, outcount, indices, statuses)
                    : PMPI_Waitsome(incount, reqs, outcount, indices, statuses);
    }
    int comm = first_comm(b.before, incount);
    int timed = !(test) || ps_poll_timed(); /* polls: sampled timing (wrap.h) */
    uint64_t t0 = timed ? ps_now() : 0;
    int rc = test ? PMPI_Testsome(incount, reqs, outcount, indices, statuses)
                  : PMPI_Waitsome(incount, reqs, outcount, indices, statuses);
    uint64_t dt = !timed ? 0 : test ? ps_poll_estimate(t0, ps_now()) : ps_now() - t0;
    if (rc == MPI_SUCCESS && *outcount != MPI_UNDEFINED)
        for (int k = 0; k < *outcount; k++) ps_complete_one(b.before[indices[k]], &statuses[k], NULL);
    else if (rc == MPI_ERR_IN_STATUS && *outcount != MPI_UNDEFINED)
        ps_complete_in_status(b.before, statuses, indices, *outcount);
    ps_record(comm, test ? PS_OP_MPI_Testsome : PS_OP_MPI_Waitsome, dt, 0, 0);
    batch_close(&b);
    return rc;
}

int MPI_Waitsome(int incount, MPI_Request array_of_requests[], int *outcount,
                 int array_of_indices[], MPI_Status array_of_statuses[])
{
    if (!ps_wrap_enter())
        return PMPI_Waitsome(incount, array_of_requests, outcount, array_of_indices, array_of_statuses);
    int rc = some(0, incount, array_of_requests, outcount, array_of_indices, array_of_statuses);
    ps_wrap_leave();
    return rc;
}

int MPI_Testsome(int incount, MPI_Request array_of_requests[], int *outcount,
                 int array_of_indices[], MPI_Status array_of_statuses[])
{
    if (!ps_wrap_enter())
        return PMPI_Testsome(incount, array_of_requests, outcount, array_of_indices, array_of_statuses);
    int rc = some(1, incount, array_of_requests, outcount, array_of_indices, array_of_statuses);
    ps_wrap_leave();
    return rc;
}

/* Persistent requests: a start moves the bytes fixed at *_init time. Sends and collectives
 * count their bytes on the (communicator, MPI_Start/MPI_Startall) row; receives at completion. */
static void started(MPI_Request req, int op)
{
    ps_lock();
    ps_req_t *r = ps_req_find(req);
    ps_req_t copy = r ? *r : (ps_req_t){0};
    if (r && ps_req_persistent(r->kind)) {
        r->started = 1;
        r->status_seen = 0;
    }
    ps_unlock();
    if (!r) {
        atomic_fetch_add(&ps_counters.unknown_requests, 1);
        return;
    }
    if (copy.kind == PS_REQ_PSEND) {
        int none = copy.peerless & PS_REQ_NO_SEND;
        ps_add_bytes(copy.comm_id, op, none ? 0 : copy.bytes);
        ps_sent(copy.comm_id, none ? MPI_PROC_NULL : 0, none ? 0 : copy.bytes);
    } else if (copy.kind == PS_REQ_PCOLL) {
        ps_add_bytes(copy.comm_id, op, copy.bytes);
    }
}

/* For the Fortran completion wrappers (fortran_support.c). */
int ps_first_comm(const MPI_Request *reqs, int n) { return first_comm(reqs, n); }
void ps_req_started(MPI_Request req, int op) { started(req, op); }

int MPI_Start(MPI_Request *request)
{
    if (!ps_wrap_enter()) return PMPI_Start(request);
    MPI_Request before = *request;
    int comm = first_comm(&before, 1);
    uint64_t t0 = ps_now();
    int rc = PMPI_Start(request);
    uint64_t dt = ps_now() - t0;
    ps_record(comm, PS_OP_MPI_Start, dt, 0, 0);
    if (rc == MPI_SUCCESS) started(before, PS_OP_MPI_Start);
    ps_wrap_leave();
    return rc;
}

int MPI_Startall(int count, MPI_Request array_of_requests[])
{
    if (!ps_wrap_enter()) return PMPI_Startall(count, array_of_requests);
    int comm = first_comm(array_of_requests, count);
    uint64_t t0 = ps_now();
    int rc = PMPI_Startall(count, array_of_requests);
    uint64_t dt = ps_now() - t0;
    ps_record(comm, PS_OP_MPI_Startall, dt, 0, 0);
    if (rc == MPI_SUCCESS)
        for (int i = 0; i < count; i++) started(array_of_requests[i], PS_OP_MPI_Startall);
    ps_wrap_leave();
    return rc;
}

int MPI_Request_free(MPI_Request *request)
{
    if (!ps_wrap_enter()) return PMPI_Request_free(request);
    MPI_Request before = *request;
    int comm = first_comm(&before, 1);
    uint64_t t0 = ps_now();
    int rc = PMPI_Request_free(request);
    uint64_t dt = ps_now() - t0;
    ps_record(comm, PS_OP_MPI_Request_free, dt, 0, 0);
    if (rc == MPI_SUCCESS) ps_req_freed(before);
    ps_wrap_leave();
    return rc;
}
