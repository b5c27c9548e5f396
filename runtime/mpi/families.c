/* Hooks for the operation families of mpi_semantics.py: what one completed MPI call adds to
 * the statistics of its communicator.
 *
 * Point-to-point bytes are what was actually sent (count x type size at the send) and
 * received (MPI_Get_count on the completed status, never the posted buffer size).  Messages to
 * or from MPI_PROC_NULL move nothing and are not counted as messages.  Every send and receive
 * also updates the communicator's sent/received message and byte totals, which the report
 * checks for consistency (sum over ranks of sent == sum of received).
 */
#include "mpi_internal.h"

/* Datatype sizes, cached: asking MPI costs 3 to 17 ns per send (docs/benchmarks.md).  A
 * direct-mapped cache keyed by handle; MPI_Type_free evicts the handle (it may be reused for a
 * type of another size).  Not used under MPI_THREAD_MULTIPLE. */
#define TYPE_CACHE 256
static struct { MPI_Datatype type; uint64_t size; } type_cache[TYPE_CACHE];

static unsigned type_slot(MPI_Datatype type)
{
    uintptr_t k = (uintptr_t)type;
    return (unsigned)((k ^ (k >> 7) ^ (k >> 15)) & (TYPE_CACHE - 1));
}

static uint64_t type_size(MPI_Datatype type)
{
    unsigned slot = type_slot(type);
    if (!ps_threaded && type_cache[slot].type == type && type != MPI_DATATYPE_NULL)
        return type_cache[slot].size;
#if MPI_VERSION >= 4
    MPI_Count size = 0;
    if (PMPI_Type_size_c(type, &size) != MPI_SUCCESS || size < 0) return 0;
#else
    int size = 0;
    if (PMPI_Type_size(type, &size) != MPI_SUCCESS || size < 0) return 0;
#endif
    if (!ps_threaded) {
        type_cache[slot].type = type;
        type_cache[slot].size = (uint64_t)size;
    }
    return (uint64_t)size;
}

uint64_t ps_type_bytes(MPI_Datatype type, MPI_Count count)
{
    if (type == MPI_DATATYPE_NULL || count <= 0) return 0;
    return type_size(type) * (uint64_t)count;
}

void ps_on_type_free(int op, uint64_t dt, MPI_Datatype before)
{
    ps_record(PS_COMM_NONE, op, dt, 0, 0);
    unsigned slot = type_slot(before);
    if (type_cache[slot].type == before) type_cache[slot].type = MPI_DATATYPE_NULL;
}

/* Cancelled receives move nothing; asking MPI about every status costs time, so only once
 * MPI_Cancel has been called at all. */
static volatile int cancel_seen;

void ps_on_cancel(int op, uint64_t dt)
{
    cancel_seen = 1;
    ps_record(PS_COMM_NONE, op, dt, 0, 0);
}

static uint64_t status_bytes(const MPI_Status *status)
{
#if MPI_VERSION >= 4
    MPI_Count n = 0;
    PMPI_Get_count_c(status, MPI_BYTE, &n);
#else
    int n = 0;
    PMPI_Get_count(status, MPI_BYTE, &n);
#endif
    return n > 0 ? (uint64_t)n : 0;
}

static void count_sent(int comm_id, uint64_t bytes)
{
    ps_comm_t *c = ps_comms[comm_id];
    ps_lock();
    c->sent_msgs++;
    c->sent_bytes += bytes;
    ps_unlock();
}

static void count_received(int comm_id, uint64_t bytes)
{
    ps_comm_t *c = ps_comms[comm_id];
    ps_lock();
    c->recv_msgs++;
    c->recv_bytes += bytes;
    ps_unlock();
}

/* 1 if the status is of a message received (not from MPI_PROC_NULL, not cancelled) */
static inline int status_message(const MPI_Status *status, uint64_t *bytes)
{
    *bytes = 0;
    if (status->MPI_SOURCE == MPI_PROC_NULL) return 0;
    if (cancel_seen) {
        int cancelled = 0;
        PMPI_Test_cancelled(status, &cancelled);
        if (cancelled) return 0;
    }
    *bytes = status_bytes(status);
    return 1;
}

/* A completed receive: the status tells the source and the byte count. */
uint64_t ps_received(int comm_id, const MPI_Status *status)
{
    uint64_t bytes;
    if (!status_message(status, &bytes)) return 0;
    if (!ps_paused) count_received(comm_id, bytes);
    return bytes;
}

int ps_status_message(const MPI_Status *status, uint64_t *bytes)
{
    return status_message(status, bytes);
}

void ps_count_received(int comm_id, uint64_t bytes)
{
    if (!ps_paused) count_received(comm_id, bytes);
}

void ps_sent(int comm_id, int dest, uint64_t bytes)
{
    if (dest != MPI_PROC_NULL && !ps_paused) count_sent(comm_id, bytes);
}

void ps_add_bytes(int comm_id, int op, uint64_t bytes)
{
    if (ps_paused) return;
    ps_lock();
    ps_stat_t *s = ps_stat_slot(comm_id, op);
    if (s) {
        s->bytes += bytes;
        s->hist[ps_hist_bin(bytes)]++;
    }
    ps_unlock();
}

/* One call on a communicator that returned a request to track until its completion. */
static void record_and_track(int id, int op, uint64_t dt, MPI_Request req, int kind)
{
    ps_record(id, op, dt, 0, 0);
    ps_req_add(req, id, op, kind, 0, NULL);
}

void ps_on_none(int op, uint64_t dt) { ps_record(PS_COMM_NONE, op, dt, 0, 0); }
void ps_on_comm(int op, uint64_t dt, MPI_Comm comm) { ps_record(ps_comm_lookup(comm), op, dt, 0, 0); }
void ps_on_win(int op, uint64_t dt, MPI_Win win) { ps_record(ps_win_lookup(win), op, dt, 0, 0); }
void ps_on_file(int op, uint64_t dt, MPI_File file) { ps_record(ps_file_lookup(file), op, dt, 0, 0); }

void ps_on_send(int op, uint64_t dt, MPI_Count count, MPI_Datatype type, int dest, MPI_Comm comm)
{
    int id = ps_comm_lookup(comm);
    uint64_t bytes = dest == MPI_PROC_NULL ? 0 : ps_type_bytes(type, count);
    ps_record(id, op, dt, bytes, 1);
    ps_sent(id, dest, bytes);
}

void ps_on_isend(int op, uint64_t dt, MPI_Count count, MPI_Datatype type, int dest, MPI_Comm comm,
                 MPI_Request req)
{
    ps_on_send(op, dt, count, type, dest, comm);
    ps_req_add_p2p(req, ps_comm_lookup(comm), op, PS_REQ_SEND, 0,
                   dest == MPI_PROC_NULL ? PS_REQ_NO_SEND : 0);
}

void ps_on_send_init(int op, uint64_t dt, MPI_Count count, MPI_Datatype type, int dest,
                     MPI_Comm comm, MPI_Request req)
{
    int id = ps_comm_lookup(comm);
    uint64_t bytes = dest == MPI_PROC_NULL ? 0 : ps_type_bytes(type, count);
    ps_record(id, op, dt, 0, 0);
    ps_req_add_p2p(req, id, op, PS_REQ_PSEND, bytes, dest == MPI_PROC_NULL ? PS_REQ_NO_SEND : 0);
}

void ps_on_recv(int op, uint64_t dt, MPI_Comm comm, const MPI_Status *status)
{
    int id = ps_comm_lookup(comm);
    ps_record(id, op, dt, ps_received(id, status), 1);
}

/* Matched probes: the message handle remembers its communicator until it is received. */
void ps_on_mprobe(int op, uint64_t dt, MPI_Comm comm, MPI_Message msg)
{
    int id = ps_comm_lookup(comm);
    ps_record(id, op, dt, 0, 0);
    if (msg != MPI_MESSAGE_NULL && msg != MPI_MESSAGE_NO_PROC)
        ps_req_add((MPI_Request)(uintptr_t)msg, id, op, PS_REQ_OTHER, 0, NULL);
}

static int message_comm(MPI_Message msg)
{
    if (msg == MPI_MESSAGE_NULL || msg == MPI_MESSAGE_NO_PROC) return PS_COMM_NONE;
    MPI_Request key = (MPI_Request)(uintptr_t)msg;
    ps_lock();
    ps_req_t *r = ps_req_find(key);
    int id = r ? r->comm_id : PS_COMM_NONE;
    if (r) ps_req_remove(key);
    ps_unlock();
    return id;
}

void ps_on_mrecv(int op, uint64_t dt, MPI_Message msg_before, const MPI_Status *status)
{
    int id = message_comm(msg_before);
    ps_record(id, op, dt, ps_received(id, status), 1);
}

/* Nonblocking and persistent receives remember what they can receive at most (the posted
 * capacity): if the request is freed before a completion call sees it complete, that bound is
 * all that is known of its message (completion.c: ps_req_freed). */
static void track_receive(int id, int op, uint64_t dt, MPI_Count count, MPI_Datatype type,
                          int source, MPI_Request req, int kind)
{
    ps_record(id, op, dt, 0, 0);
    int peerless = source == MPI_PROC_NULL ? PS_REQ_NO_RECV : 0;
    ps_req_add_p2p(req, id, op, kind, peerless ? 0 : ps_type_bytes(type, count), peerless);
}

void ps_on_irecv(int op, uint64_t dt, MPI_Count count, MPI_Datatype type, int source, MPI_Comm comm,
                 MPI_Request req)
{
    track_receive(ps_comm_lookup(comm), op, dt, count, type, source, req, PS_REQ_RECV);
}

void ps_on_imrecv(int op, uint64_t dt, MPI_Count count, MPI_Datatype type, MPI_Message msg_before,
                  MPI_Request req)
{
    int source = msg_before == MPI_MESSAGE_NO_PROC ? MPI_PROC_NULL : 0;
    track_receive(message_comm(msg_before), op, dt, count, type, source, req, PS_REQ_RECV);
}

void ps_on_recv_init(int op, uint64_t dt, MPI_Count count, MPI_Datatype type, int source,
                     MPI_Comm comm, MPI_Request req)
{
    track_receive(ps_comm_lookup(comm), op, dt, count, type, source, req, PS_REQ_PRECV);
}

void ps_on_sendrecv(int op, uint64_t dt, MPI_Count count, MPI_Datatype type, int dest,
                    MPI_Comm comm, const MPI_Status *status)
{
    int id = ps_comm_lookup(comm);
    uint64_t out = dest == MPI_PROC_NULL ? 0 : ps_type_bytes(type, count);
    uint64_t in = ps_received(id, status);
    ps_sent(id, dest, out);
    ps_record(id, op, dt, out + in, 1);
}

void ps_on_isendrecv(int op, uint64_t dt, MPI_Count count, MPI_Datatype type, int dest,
                     MPI_Count recvcount, MPI_Datatype recvtype, int source, MPI_Comm comm,
                     MPI_Request req)
{
    int id = ps_comm_lookup(comm);
    uint64_t out = dest == MPI_PROC_NULL ? 0 : ps_type_bytes(type, count);
    ps_sent(id, dest, out);
    ps_record(id, op, dt, out, 1);
    /* the received part is counted at completion */
    int peerless = (dest == MPI_PROC_NULL ? PS_REQ_NO_SEND : 0) |
                   (source == MPI_PROC_NULL ? PS_REQ_NO_RECV : 0);
    ps_req_add_p2p(req, id, op, PS_REQ_SENDRECV,
                   source == MPI_PROC_NULL ? 0 : ps_type_bytes(recvtype, recvcount), peerless);
}

void ps_on_coll(int op, uint64_t dt, MPI_Comm comm, uint64_t bytes)
{
    ps_record(ps_comm_lookup(comm), op, dt, bytes, 1);
}

void ps_on_icoll(int op, uint64_t dt, MPI_Comm comm, uint64_t bytes, MPI_Request req)
{
    int id = ps_comm_lookup(comm);
    ps_record(id, op, dt, bytes, 1);
    ps_req_add(req, id, op, PS_REQ_COLL, 0, NULL);
}

void ps_on_coll_init(int op, uint64_t dt, MPI_Comm comm, uint64_t bytes, MPI_Request req)
{
    int id = ps_comm_lookup(comm);
    ps_record(id, op, dt, 0, 0);
    ps_req_add(req, id, op, PS_REQ_PCOLL, bytes, NULL);
}

void ps_on_rma(int op, uint64_t dt, MPI_Win win, MPI_Count count, MPI_Datatype type)
{
    ps_record(ps_win_lookup(win), op, dt, ps_type_bytes(type, count), 1);
}

void ps_on_rma_req(int op, uint64_t dt, MPI_Win win, MPI_Count count, MPI_Datatype type,
                   MPI_Request req)
{
    int id = ps_win_lookup(win);
    ps_record(id, op, dt, ps_type_bytes(type, count), 1);
    ps_req_add(req, id, op, PS_REQ_OTHER, 0, NULL);
}

void ps_on_win_create(int op, uint64_t dt, MPI_Comm comm, MPI_Win win)
{
    int id = ps_comm_lookup(comm);
    ps_record(id, op, dt, 0, 0);
    ps_win_register(win, id);
}

void ps_on_win_free(int op, uint64_t dt, MPI_Win win_before)
{
    ps_record(ps_win_lookup(win_before), op, dt, 0, 0);
    ps_win_forget(win_before);
}

void ps_on_file_open(int op, uint64_t dt, MPI_Comm comm, MPI_File file)
{
    int id = ps_comm_lookup(comm);
    ps_record(id, op, dt, 0, 0);
    ps_file_register(file, id);
}

void ps_on_file_close(int op, uint64_t dt, MPI_File file_before)
{
    ps_record(ps_file_lookup(file_before), op, dt, 0, 0);
    ps_file_forget(file_before);
}

void ps_on_comm_free(int op, uint64_t dt, MPI_Comm comm_before)
{
    ps_record(ps_comm_lookup(comm_before), op, dt, 0, 0);
    ps_comm_forget(comm_before);
}

/* Default family with a returned request (e.g. MPI_File_iwrite, MPI_Grequest_start): the
 * request is tracked so that its completion is attributed to the same communicator. */
void ps_on_comm_req(int op, uint64_t dt, MPI_Comm comm, MPI_Request req)
{
    record_and_track(ps_comm_lookup(comm), op, dt, req, PS_REQ_OTHER);
}

void ps_on_win_req(int op, uint64_t dt, MPI_Win win, MPI_Request req)
{
    record_and_track(ps_win_lookup(win), op, dt, req, PS_REQ_OTHER);
}

void ps_on_file_req(int op, uint64_t dt, MPI_File file, MPI_Request req)
{
    record_and_track(ps_file_lookup(file), op, dt, req, PS_REQ_OTHER);
}

void ps_on_none_req(int op, uint64_t dt, MPI_Request req)
{
    record_and_track(PS_COMM_NONE, op, dt, req, PS_REQ_OTHER);
}

/* MPI_Request_get_status: the call goes to the request's communicator; a receive it sees
 * complete is not counted yet (the request stays; a wait or test will report it again), but
 * what it received is remembered, so that freeing the request afterwards counts it exactly. */
void ps_on_request_get_status(int op, uint64_t dt, MPI_Request req, int flag,
                              const MPI_Status *status)
{
    int id = PS_COMM_NONE;
    if (req != MPI_REQUEST_NULL) {
        ps_lock();
        ps_req_t *r = ps_req_find(req);
        int recv = 0, seen = 0;
        if (r) {
            id = r->comm_id;
            recv = r->kind == PS_REQ_RECV || r->kind == PS_REQ_SENDRECV || r->kind == PS_REQ_PRECV;
            seen = r->status_seen || (ps_req_persistent(r->kind) && !r->started);
        }
        ps_unlock();
        if (r && flag && recv && !seen) {
            uint64_t bytes;
            int message = ps_status_message(status, &bytes); /* may ask MPI: not under the lock */
            ps_lock();
            r = ps_req_find(req);
            if (r) {
                r->status_seen = message ? 1 : 2;
                r->seen_bytes = bytes;
            }
            ps_unlock();
        }
    }
    ps_record(id, op, dt, 0, 0);
}
