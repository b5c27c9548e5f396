/* Collective communication volumes: each rank records its own contribution to the lower bound
 * on the total volume defined in the appendix of the mpisee paper (Vardas et al.), so that the
 * sum over the ranks of a communicator equals that bound.  Notation: p = communicator size,
 * m = this rank's local buffer in bytes (count x type size), m_i = rank i's buffer, m_i^j the
 * block rank i sends to rank j, n_i = number of (out-)neighbours of rank i.
 *
 * MPI_IN_PLACE: where the send buffer is MPI_IN_PLACE the send count and type are ignored by
 * MPI, so m is taken from the receive side instead (documented per rule).
 * Intercommunicators: p is the local group size, except in the all-to-all rules, where a rank
 * addresses the remote group (and MPI sizes the count arrays by it).
 */
#include "mpi_internal.h"

static int comm_size(MPI_Comm comm)
{
    int p = 1;
    PMPI_Comm_size(comm, &p);
    return p;
}

/* Number of peers a rank addresses in all-to-all patterns: the remote group on an
 * intercommunicator (MPI sizes the count arrays by it), else the communicator. */
int ps_peer_count(MPI_Comm comm)
{
    int inter = 0, p = 1;
    PMPI_Comm_test_inter(comm, &inter);
    if (inter) PMPI_Comm_remote_size(comm, &p);
    else PMPI_Comm_size(comm, &p);
    return p;
}

static int comm_rank(MPI_Comm comm)
{
    int r = 0;
    PMPI_Comm_rank(comm, &r);
    return r;
}

static MPI_Count count_at(const void *counts, int i, int large)
{
    return large ? ((const MPI_Count *)counts)[i] : ((const int *)counts)[i];
}

static int is_in_place(const void *buf)
{
    return buf == MPI_IN_PLACE || (ps_f_in_place && buf == ps_f_in_place);
}

/* Bcast, total (p-1)m: the root contributes 0, every other rank the m it receives. */
uint64_t ps_vol_bcast(MPI_Count count, MPI_Datatype type, int root, MPI_Comm comm)
{
    return comm_rank(comm) == root ? 0 : ps_type_bytes(type, count);
}

/* Gather, total pm: every rank contributes its m (the root's in-place block: recvcount). */
uint64_t ps_vol_gather(const void *sendbuf, MPI_Count scount, MPI_Datatype stype,
                       MPI_Count rcount, MPI_Datatype rtype, int root, MPI_Comm comm)
{
    if (is_in_place(sendbuf) && comm_rank(comm) == root) return ps_type_bytes(rtype, rcount);
    return ps_type_bytes(stype, scount);
}

/* Scatter, total pm: every rank contributes the m it receives (the root in place: sendcount). */
uint64_t ps_vol_scatter(MPI_Count scount, MPI_Datatype stype, const void *recvbuf,
                        MPI_Count rcount, MPI_Datatype rtype, int root, MPI_Comm comm)
{
    if (is_in_place(recvbuf) && comm_rank(comm) == root) return ps_type_bytes(stype, scount);
    return ps_type_bytes(rtype, rcount);
}

/* Gatherv, total sum_i m_i: rank i contributes m_i (root in place: recvcounts[root]). */
uint64_t ps_vol_gatherv(const void *sendbuf, MPI_Count scount, MPI_Datatype stype,
                        const void *rcounts, MPI_Datatype rtype, int root, MPI_Comm comm, int large)
{
    if (is_in_place(sendbuf) && comm_rank(comm) == root)
        return ps_type_bytes(rtype, count_at(rcounts, root, large));
    return ps_type_bytes(stype, scount);
}

/* Scatterv, total sum_i m_i: rank i contributes the m_i it receives (root in place:
 * sendcounts[root]). */
uint64_t ps_vol_scatterv(const void *scounts, MPI_Datatype stype, const void *recvbuf,
                         MPI_Count rcount, MPI_Datatype rtype, int root, MPI_Comm comm, int large)
{
    if (is_in_place(recvbuf) && comm_rank(comm) == root)
        return ps_type_bytes(stype, count_at(scounts, root, large));
    return ps_type_bytes(rtype, rcount);
}

/* Allgather, total pm: every rank contributes its m (in place: recvcount x recvtype). */
uint64_t ps_vol_allgather(const void *sendbuf, MPI_Count scount, MPI_Datatype stype,
                          MPI_Count rcount, MPI_Datatype rtype, MPI_Comm comm)
{
    (void)comm;
    if (is_in_place(sendbuf)) return ps_type_bytes(rtype, rcount);
    return ps_type_bytes(stype, scount);
}

/* Allgatherv, total sum_i m_i: rank i contributes m_i (in place: recvcounts[i]). */
uint64_t ps_vol_allgatherv(const void *sendbuf, MPI_Count scount, MPI_Datatype stype,
                           const void *rcounts, MPI_Datatype rtype, MPI_Comm comm, int large)
{
    if (is_in_place(sendbuf)) return ps_type_bytes(rtype, count_at(rcounts, comm_rank(comm), large));
    return ps_type_bytes(stype, scount);
}

/* Alltoall, total p*p*m: every rank sends m to each of the p ranks, contributing p*m
 * (in place: recvcount x recvtype). */
uint64_t ps_vol_alltoall(const void *sendbuf, MPI_Count scount, MPI_Datatype stype,
                         MPI_Count rcount, MPI_Datatype rtype, MPI_Comm comm)
{
    uint64_t m = is_in_place(sendbuf) ? ps_type_bytes(rtype, rcount) : ps_type_bytes(stype, scount);
    return (uint64_t)ps_peer_count(comm) * m;
}

/* Alltoallv, total sum_i sum_j m_i^j: rank i contributes sum_j sendcounts[j] x sendtype
 * (in place: the receive counts). */
uint64_t ps_vol_alltoallv(const void *sendbuf, const void *scounts, MPI_Datatype stype,
                          const void *rcounts, MPI_Datatype rtype, MPI_Comm comm, int large)
{
    int p = ps_peer_count(comm), in_place = is_in_place(sendbuf);
    uint64_t sum = 0;
    for (int j = 0; j < p; j++)
        sum += in_place ? ps_type_bytes(rtype, count_at(rcounts, j, large))
                        : ps_type_bytes(stype, count_at(scounts, j, large));
    return sum;
}

/* Alltoallw, total sum_i sum_j m_i^j: as Alltoallv with one type per peer. */
uint64_t ps_vol_alltoallw(const void *sendbuf, const void *scounts, const MPI_Datatype *stypes,
                          const void *rcounts, const MPI_Datatype *rtypes, MPI_Comm comm, int large)
{
    int p = ps_peer_count(comm), in_place = is_in_place(sendbuf);
    uint64_t sum = 0;
    for (int j = 0; j < p; j++)
        sum += in_place ? ps_type_bytes(rtypes[j], count_at(rcounts, j, large))
                        : ps_type_bytes(stypes[j], count_at(scounts, j, large));
    return sum;
}

/* Reduce and Allreduce, total pm: every rank contributes its m. */
uint64_t ps_vol_reduce(MPI_Count count, MPI_Datatype type, MPI_Comm comm)
{
    (void)comm;
    return ps_type_bytes(type, count);
}

/* Reduce_scatter_block, total pm with m the local buffer of p x recvcount elements: every
 * rank contributes p x recvcount x type size. */
uint64_t ps_vol_reduce_scatter_block(MPI_Count rcount, MPI_Datatype type, MPI_Comm comm)
{
    return (uint64_t)comm_size(comm) * ps_type_bytes(type, rcount);
}

/* Reduce_scatter, total sum_i m_i with m_i rank i's local buffer of sum_j recvcounts[j]
 * elements: every rank contributes that sum x type size. */
uint64_t ps_vol_reduce_scatter(const void *rcounts, MPI_Datatype type, MPI_Comm comm, int large)
{
    int p = comm_size(comm);
    uint64_t sum = 0;
    for (int j = 0; j < p; j++) sum += ps_type_bytes(type, count_at(rcounts, j, large));
    return sum;
}

/* Scan and Exscan, total (p-1)m: every rank but the last passes its m on; the last rank
 * (p-1) contributes 0. */
uint64_t ps_vol_scan(MPI_Count count, MPI_Datatype type, MPI_Comm comm)
{
    return comm_rank(comm) == comm_size(comm) - 1 ? 0 : ps_type_bytes(type, count);
}

/* Out-degree of this rank in the communicator's virtual topology (Cartesian: 2 x ndims). */
int ps_out_degree(MPI_Comm comm)
{
    int status = MPI_UNDEFINED;
    PMPI_Topo_test(comm, &status);
    if (status == MPI_CART) {
        int ndims = 0;
        PMPI_Cartdim_get(comm, &ndims);
        return 2 * ndims;
    }
    if (status == MPI_GRAPH) {
        int n = 0;
        PMPI_Graph_neighbors_count(comm, comm_rank(comm), &n);
        return n;
    }
    if (status == MPI_DIST_GRAPH) {
        int in = 0, out = 0, weighted = 0;
        PMPI_Dist_graph_neighbors_count(comm, &in, &out, &weighted);
        return out;
    }
    return 0;
}

/* Neighbor_allgather(v) and Neighbor_alltoall, total sum_i n_i m: rank i contributes n_i x m. */
uint64_t ps_vol_neighbor(MPI_Count scount, MPI_Datatype stype, MPI_Comm comm)
{
    return (uint64_t)ps_out_degree(comm) * ps_type_bytes(stype, scount);
}

/* Neighbor_alltoallv, total sum_i sum_j (n_i - 1) m_i^j, exactly as the paper's appendix
 * states it: rank i contributes (n_i - 1) x sum over its n_i blocks (0 when n_i <= 1). */
uint64_t ps_vol_neighbor_v(const void *scounts, MPI_Datatype stype, MPI_Comm comm, int large)
{
    int n = ps_out_degree(comm);
    uint64_t sum = 0;
    for (int j = 0; j < n; j++) sum += ps_type_bytes(stype, count_at(scounts, j, large));
    return n > 1 ? (uint64_t)(n - 1) * sum : 0;
}

/* Neighbor_alltoallw: as Neighbor_alltoallv with one type per neighbour. */
uint64_t ps_vol_neighbor_w(const void *scounts, const MPI_Datatype *stypes, MPI_Comm comm,
                           int large)
{
    int n = ps_out_degree(comm);
    uint64_t sum = 0;
    for (int j = 0; j < n; j++) sum += ps_type_bytes(stypes[j], count_at(scounts, j, large));
    return n > 1 ? (uint64_t)(n - 1) * sum : 0;
}
