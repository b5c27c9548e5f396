"""What each MPI operation means to pathscope: the one declarative table the wrapper
generator (gen_wrappers.py) applies.

Parameter names are the MPI standard's (as carried by pympistandard); the generator renames
the parameters of every wrapper to them, so the hook expressions below can use them whatever
the installed mpi.h calls them.

In hook expressions: OP is the operation's id, DT the ticks spent in the PMPI call, LARGE is 1
for the MPI-4 large-count "_c" variant and 0 otherwise.  A family entry is
  (pre-statements, hook-expression)
pre-statements run before the PMPI call (e.g. remembering a handle the call overwrites, or
substituting our own status for MPI_STATUS_IGNORE so that received bytes are known).
Functions absent from this table get the default family chosen from their parameters: the
first input communicator, else window, else file, else no communicator ("-").
"""

STATUS = "MPI_Status ps_status; if (status == MPI_STATUS_IGNORE) status = &ps_status;"
MSG_BEFORE = "MPI_Message ps_msg_before = *message;"

# Operations whose wrappers are written by hand in both languages (runtime/mpi/lifecycle_mpi.c,
# fortran_support.c): they start and end the run.
LIFECYCLE = {"MPI_Init", "MPI_Init_thread", "MPI_Finalize", "MPI_Abort", "MPI_Pcontrol"}

# The request completion family: operation -> (kind, shape, the standard's parameters in order,
# without ierror).  These wrappers need the request handles as they were before the call (MPI
# overwrites completed ones with MPI_REQUEST_NULL) and real statuses even when the caller
# passes MPI_STATUS(ES)_IGNORE; what they record is the completion bookkeeping of completion.c.
#   kind  "wait"   timed; completes what the call reports
#         "test"   a poll (sampled timing, like POLLS); completes only what its flag reports
#                  (Testsome has no flag: its outcount says)
#         "start"  starts persistent requests (ps_req_started), recorded before
#         "free"   MPI_Request_free (ps_req_freed), recorded before
#   shape "one"    request (+ flag, status)
#         "all"    count, array_of_requests (+ flag, array_of_statuses): all of them
#         "any"    count, array_of_requests, index (+ flag), status: the one at index
#         "some"   incount, array_of_requests, outcount, array_of_indices, array_of_statuses
# The time of the call goes to the communicator of the first request pathscope knows.  The
# Fortran wrappers are generated from this table (gen_fortran.py); the C ones are in
# completion.c, which owns the bookkeeping both call.
COMPLETION = {
    "MPI_Wait": ("wait", "one", ("request", "status")),
    "MPI_Test": ("test", "one", ("request", "flag", "status")),
    "MPI_Waitall": ("wait", "all", ("count", "array_of_requests", "array_of_statuses")),
    "MPI_Testall": ("test", "all", ("count", "array_of_requests", "flag", "array_of_statuses")),
    "MPI_Waitany": ("wait", "any", ("count", "array_of_requests", "index", "status")),
    "MPI_Testany": ("test", "any", ("count", "array_of_requests", "index", "flag", "status")),
    "MPI_Waitsome": ("wait", "some", ("incount", "array_of_requests", "outcount",
                                      "array_of_indices", "array_of_statuses")),
    "MPI_Testsome": ("test", "some", ("incount", "array_of_requests", "outcount",
                                      "array_of_indices", "array_of_statuses")),
    "MPI_Start": ("start", "one", ("request",)),
    "MPI_Startall": ("start", "all", ("count", "array_of_requests")),
    "MPI_Request_free": ("free", "one", ("request",)),
}

# The MPI-4 sessions model's start and end (lifecycle_mpi.c): a program that never calls
# MPI_Init starts its run at its first MPI_Session_init.  C only: their Fortran wrappers are
# generated (they count), so a Fortran program of sessions alone is not profiled.
SESSIONS = {"MPI_Session_init", "MPI_Session_finalize"}

# Operations without a generated C wrapper.
HAND_WRITTEN = LIFECYCLE | set(COMPLETION) | SESSIONS

# Never wrapped: pure handle conversions and address arithmetic that pathscope itself uses and
# that cost more to wrap than they do to run.  They are still listed (as "not wrapped") in the
# build's coverage report.
NOT_WRAPPED_PREFIXES = ("MPI_Aint_add", "MPI_Aint_diff")
NOT_WRAPPED_SUFFIXES = ("_f2c", "_c2f", "_f2f08", "_f082f", "_c2f08", "_f082c")


# Polls: timed one call in 16 at random, scaled (runtime/mpi/wrap.h, ps_poll_timed).  The
# MPI_Test family (COMPLETION, kind "test") follows the same rule.
POLLS = {"MPI_Iprobe", "MPI_Improbe"}

# Local queries: counted but not timed.  They take a few nanoseconds, less than reading the
# clock twice (about 40 ns inside a wrapper in the VMs we measure on), so timing them would
# multiply their cost for a number nobody needs; their time is reported as 0.
COUNT_ONLY = {
    "MPI_Comm_rank", "MPI_Comm_size", "MPI_Comm_remote_size", "MPI_Comm_test_inter",
    "MPI_Wtime", "MPI_Wtick", "MPI_Initialized", "MPI_Finalized", "MPI_Query_thread",
    "MPI_Is_thread_main", "MPI_Get_version", "MPI_Get_count", "MPI_Get_elements",
    "MPI_Get_elements_x", "MPI_Type_size", "MPI_Type_size_x", "MPI_Type_get_extent",
    "MPI_Type_get_extent_x", "MPI_Type_get_true_extent", "MPI_Type_get_true_extent_x",
    "MPI_Group_size", "MPI_Group_rank", "MPI_Topo_test", "MPI_Cartdim_get", "MPI_Cart_rank",
    "MPI_Cart_coords", "MPI_Cart_get", "MPI_Comm_get_attr", "MPI_Attr_get", "MPI_Comm_get_name",
    "MPI_Test_cancelled", "MPI_Status_set_elements", "MPI_Status_set_elements_x",
    "MPI_Status_set_cancelled", "MPI_Aint_add", "MPI_Aint_diff",
}


# Collective volume rules: expression giving this rank's contribution (runtime/mpi/volume.c
# documents each rule next to its code).
COLLECTIVE_VOLUME = {
    "Barrier": "0",
    "Bcast": "ps_vol_bcast(count, datatype, root, comm)",
    "Gather": "ps_vol_gather(sendbuf, sendcount, sendtype, recvcount, recvtype, root, comm)",
    "Scatter": "ps_vol_scatter(sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm)",
    "Gatherv": "ps_vol_gatherv(sendbuf, sendcount, sendtype, recvcounts, recvtype, root, comm, LARGE)",
    "Scatterv": "ps_vol_scatterv(sendcounts, sendtype, recvbuf, recvcount, recvtype, root, comm, LARGE)",
    "Allgather": "ps_vol_allgather(sendbuf, sendcount, sendtype, recvcount, recvtype, comm)",
    "Allgatherv": "ps_vol_allgatherv(sendbuf, sendcount, sendtype, recvcounts, recvtype, comm, LARGE)",
    "Alltoall": "ps_vol_alltoall(sendbuf, sendcount, sendtype, recvcount, recvtype, comm)",
    "Alltoallv": "ps_vol_alltoallv(sendbuf, sendcounts, sendtype, recvcounts, recvtype, comm, LARGE)",
    "Alltoallw": "ps_vol_alltoallw(sendbuf, sendcounts, sendtypes, recvcounts, recvtypes, comm, LARGE)",
    "Reduce": "ps_vol_reduce(count, datatype, comm)",
    "Allreduce": "ps_vol_reduce(count, datatype, comm)",
    "Reduce_scatter_block": "ps_vol_reduce_scatter_block(recvcount, datatype, comm)",
    "Reduce_scatter": "ps_vol_reduce_scatter(recvcounts, datatype, comm, LARGE)",
    "Scan": "ps_vol_scan(count, datatype, comm)",
    "Exscan": "ps_vol_scan(count, datatype, comm)",
    "Neighbor_allgather": "ps_vol_neighbor(sendcount, sendtype, comm)",
    "Neighbor_allgatherv": "ps_vol_neighbor(sendcount, sendtype, comm)",
    "Neighbor_alltoall": "ps_vol_neighbor(sendcount, sendtype, comm)",
    "Neighbor_alltoallv": "ps_vol_neighbor_v(sendcounts, sendtype, comm, LARGE)",
    "Neighbor_alltoallw": "ps_vol_neighbor_w(sendcounts, sendtypes, comm, LARGE)",
}


def _build_families():
    fam = {}
    for name in ("MPI_Send", "MPI_Bsend", "MPI_Ssend", "MPI_Rsend"):
        fam[name] = ("", "ps_on_send(OP, DT, count, datatype, dest, comm)")
    for name in ("MPI_Isend", "MPI_Ibsend", "MPI_Issend", "MPI_Irsend"):
        fam[name] = ("", "ps_on_isend(OP, DT, count, datatype, dest, comm, *request)")
    for name in ("MPI_Send_init", "MPI_Bsend_init", "MPI_Ssend_init", "MPI_Rsend_init"):
        fam[name] = ("", "ps_on_send_init(OP, DT, count, datatype, dest, comm, *request)")
    fam["MPI_Recv"] = (STATUS, "ps_on_recv(OP, DT, comm, status)")
    fam["MPI_Mrecv"] = (MSG_BEFORE + " " + STATUS, "ps_on_mrecv(OP, DT, ps_msg_before, status)")
    # nonblocking and persistent receives keep their posted capacity (count x type size): a
    # request freed before its completion is seen is counted with it (completion.c)
    fam["MPI_Irecv"] = ("", "ps_on_irecv(OP, DT, count, datatype, source, comm, *request)")
    fam["MPI_Imrecv"] = (MSG_BEFORE, "ps_on_imrecv(OP, DT, count, datatype, ps_msg_before, *request)")
    fam["MPI_Recv_init"] = ("", "ps_on_recv_init(OP, DT, count, datatype, source, comm, *request)")
    # MPI-4 partitioned communication: persistent requests moving partitions x count elements
    fam["MPI_Psend_init"] = ("", "ps_on_send_init(OP, DT, (MPI_Count)partitions * count, datatype, dest, comm, *request)")
    fam["MPI_Precv_init"] = ("", "ps_on_recv_init(OP, DT, (MPI_Count)partitions * count, datatype, source, comm, *request)")
    fam["MPI_Sendrecv"] = (STATUS, "ps_on_sendrecv(OP, DT, sendcount, sendtype, dest, comm, status)")
    fam["MPI_Sendrecv_replace"] = (STATUS, "ps_on_sendrecv(OP, DT, count, datatype, dest, comm, status)")
    fam["MPI_Isendrecv"] = ("", "ps_on_isendrecv(OP, DT, sendcount, sendtype, dest, recvcount, recvtype, source, comm, *request)")
    fam["MPI_Isendrecv_replace"] = ("", "ps_on_isendrecv(OP, DT, count, datatype, dest, count, datatype, source, comm, *request)")
    fam["MPI_Mprobe"] = ("", "ps_on_mprobe(OP, DT, comm, *message)")
    fam["MPI_Improbe"] = ("", "ps_on_mprobe(OP, DT, comm, *flag ? *message : MPI_MESSAGE_NULL)")

    for base, vol in COLLECTIVE_VOLUME.items():
        fam["MPI_" + base] = ("", f"ps_on_coll(OP, DT, comm, {vol})")
        fam["MPI_I" + base[0].lower() + base[1:]] = ("", f"ps_on_icoll(OP, DT, comm, {vol}, *request)")
        fam["MPI_" + base + "_init"] = ("", f"ps_on_coll_init(OP, DT, comm, {vol}, *request)")

    # Communicator creation: letters are documented in docs/format.md.
    fam["MPI_Comm_dup"] = ("", "ps_on_comm_create(OP, DT, comm, *newcomm, 'd', 0, 1, \"\")")
    fam["MPI_Comm_dup_with_info"] = ("", "ps_on_comm_create(OP, DT, comm, *newcomm, 'e', 0, 1, \"\")")
    fam["MPI_Comm_idup"] = ("", "ps_on_comm_idup(OP, DT, comm, newcomm, *request)")
    fam["MPI_Comm_idup_with_info"] = ("", "ps_on_comm_idup(OP, DT, comm, newcomm, *request)")
    fam["MPI_Comm_split"] = ("", "ps_on_comm_create(OP, DT, comm, *newcomm, 's', 1, 1, \"\")")
    fam["MPI_Comm_split_type"] = ("", "ps_on_comm_create(OP, DT, comm, *newcomm, 't', 1, 1, \"\")")
    fam["MPI_Comm_create"] = ("", "ps_on_comm_create(OP, DT, comm, *newcomm, 'c', 1, 1, \"\")")
    fam["MPI_Comm_create_group"] = ("", "ps_on_comm_create(OP, DT, comm, *newcomm, 'g', 1, 0, \"\")")
    fam["MPI_Cart_create"] = ("", "ps_on_cart_create(OP, DT, comm_old, ndims, dims, periods, reorder, *comm_cart)")
    fam["MPI_Cart_sub"] = ("", "ps_on_comm_create(OP, DT, comm, *newcomm, 'b', 1, 1, \"\")")
    fam["MPI_Graph_create"] = ("", "ps_on_graph_create(OP, DT, comm_old, nnodes, reorder, *comm_graph)")
    fam["MPI_Dist_graph_create"] = ("", "ps_on_dist_graph_create(OP, DT, comm_old, reorder, *comm_dist_graph, 'x')")
    fam["MPI_Dist_graph_create_adjacent"] = ("", "ps_on_dist_graph_create(OP, DT, comm_old, reorder, *comm_dist_graph, 'y')")
    fam["MPI_Intercomm_create"] = ("", "ps_on_intercomm_create(OP, DT, local_comm, local_leader, peer_comm, *newintercomm)")
    fam["MPI_Intercomm_merge"] = ("", "ps_on_comm_create(OP, DT, intercomm, *newintracomm, 'm', 0, 1, \"\")")
    fam["MPI_Comm_create_from_group"] = ("", "ps_on_comm_from_group(OP, DT, group, *newcomm, 'f')")
    fam["MPI_Intercomm_create_from_groups"] = ("", "ps_on_comm_from_group(OP, DT, local_group, *newintercomm, 'k')")
    fam["MPI_Group_from_session_pset"] = ("", "ps_on_group_from_pset(OP, DT, session, *newgroup)")
    fam["MPI_Comm_spawn"] = ("", "ps_on_comm_dpm(OP, DT, comm, *intercomm, 'p')")
    fam["MPI_Comm_spawn_multiple"] = ("", "ps_on_comm_dpm(OP, DT, comm, *intercomm, 'p')")
    fam["MPI_Comm_connect"] = ("", "ps_on_comm_dpm(OP, DT, comm, *newcomm, 'o')")
    fam["MPI_Comm_accept"] = ("", "ps_on_comm_dpm(OP, DT, comm, *newcomm, 'q')")
    fam["MPI_Comm_join"] = ("", "ps_on_comm_dpm(OP, DT, MPI_COMM_NULL, *intercomm, 'j')")
    fam["MPI_Comm_free"] = ("MPI_Comm ps_before = *comm;", "ps_on_comm_free(OP, DT, ps_before)")
    fam["MPI_Comm_disconnect"] = ("MPI_Comm ps_before = *comm;", "ps_on_comm_free(OP, DT, ps_before)")

    # One-sided: windows remember their communicator.
    fam["MPI_Win_create"] = ("", "ps_on_win_create(OP, DT, comm, *win)")
    fam["MPI_Win_allocate"] = ("", "ps_on_win_create(OP, DT, comm, *win)")
    fam["MPI_Win_allocate_shared"] = ("", "ps_on_win_create(OP, DT, comm, *win)")
    fam["MPI_Win_create_dynamic"] = ("", "ps_on_win_create(OP, DT, comm, *win)")
    fam["MPI_Win_free"] = ("MPI_Win ps_before = *win;", "ps_on_win_free(OP, DT, ps_before)")
    for name in ("MPI_Put", "MPI_Get", "MPI_Accumulate", "MPI_Get_accumulate"):
        fam[name] = ("", "ps_on_rma(OP, DT, win, origin_count, origin_datatype)")
    for name in ("MPI_Rput", "MPI_Rget", "MPI_Raccumulate", "MPI_Rget_accumulate"):
        fam[name] = ("", "ps_on_rma_req(OP, DT, win, origin_count, origin_datatype, *request)")
    fam["MPI_Fetch_and_op"] = ("", "ps_on_rma(OP, DT, win, 1, datatype)")
    fam["MPI_Compare_and_swap"] = ("", "ps_on_rma(OP, DT, win, 1, datatype)")

    # Datatype sizes are cached (families.c): a freed handle must leave the cache.
    fam["MPI_Type_free"] = ("MPI_Datatype ps_before = *datatype;", "ps_on_type_free(OP, DT, ps_before)")
    # a completed receive seen here and freed afterwards is counted exactly (completion.c)
    fam["MPI_Request_get_status"] = (STATUS, "ps_on_request_get_status(OP, DT, request, *flag, status)")
    fam["MPI_Cancel"] = ("", "ps_on_cancel(OP, DT)")

    # MPI-IO: files remember their communicator.
    fam["MPI_File_open"] = ("", "ps_on_file_open(OP, DT, comm, *fh)")
    fam["MPI_File_close"] = ("MPI_File ps_before = *fh;", "ps_on_file_close(OP, DT, ps_before)")
    return fam


FAMILIES = _build_families()


# Unwind groups (selective unwinding, PATHSCOPE_UNWIND): every operation belongs to one group;
# a group is either unwound at every call (`path`) or counted without a call path (`count`).
# The defaults keep the cheap, frequent local queries from paying a stack walk: an
# application calling MPI_Comm_rank a million times pays a counter increment each.
UNWIND_GROUPS = ("env", "topo", "poll", "p2p", "coll", "rma", "io", "other")
UNWIND_DEFAULT_COUNT = ("env", "topo", "poll")
TOPOLOGY_QUERIES = {
    "MPI_Topo_test", "MPI_Cartdim_get", "MPI_Cart_get", "MPI_Cart_rank", "MPI_Cart_coords",
    "MPI_Cart_shift", "MPI_Cart_map", "MPI_Graphdims_get", "MPI_Graph_get", "MPI_Graph_map",
    "MPI_Graph_neighbors_count", "MPI_Graph_neighbors", "MPI_Dist_graph_neighbors_count",
    "MPI_Dist_graph_neighbors",
}
POLL_OPS = {"MPI_Test", "MPI_Testany", "MPI_Testsome", "MPI_Testall", "MPI_Iprobe", "MPI_Improbe"}
_P2P_WORDS = ("send", "recv", "probe", "wait", "start", "request", "cancel", "buffer")


def unwind_group(name: str) -> str:
    """The unwind group of an MPI operation (large-count `_c` twins share their base's)."""
    base = name[:-2] if name.endswith("_c") else name
    if base in TOPOLOGY_QUERIES:
        return "topo"
    if base in COUNT_ONLY:
        return "env"
    if base in POLL_OPS:
        return "poll"
    stem = base[4:]
    for coll in COLLECTIVE_VOLUME:
        if stem in (coll, "I" + coll[0].lower() + coll[1:], coll + "_init"):
            return "coll"
    if stem.startswith("File_") or stem.startswith("Register_datarep"):
        return "io"
    if stem.startswith("Win_") or stem in ("Put", "Get", "Accumulate", "Get_accumulate", "Rput",
                                           "Rget", "Raccumulate", "Rget_accumulate",
                                           "Fetch_and_op", "Compare_and_swap"):
        return "rma"
    low = stem.lower()
    if any(w in low for w in _P2P_WORDS) or low.startswith("pready") or low.startswith("parrived"):
        return "p2p"
    return "other"
