/* Communicator registry: handle -> communicator record, window/file -> communicator, and the
 * per-(communicator, operation) statistics.  MPI_Comm_free drops the handle mapping; the
 * record keeps its data by folding into a row of its kind (fold.c), and its slot is reused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_internal.h"

ps_comm_t *ps_comms[PS_MAX_COMMS];
int ps_ncomms;
int ps_comm_counter;
atomic_flag ps_big_lock = ATOMIC_FLAG_INIT;

/* Open-addressing map from a handle value to an id; linear probing, backward-shift delete. */
#define MAP_BITS 17
#define MAP_SIZE (1u << MAP_BITS)
typedef struct { uintptr_t key; int id; int used; } map_entry_t;
typedef struct { map_entry_t e[MAP_SIZE]; unsigned n; } handle_map_t;

static handle_map_t comm_map, win_map, file_map;

static inline unsigned map_hash(uintptr_t k)
{
    k ^= k >> 33; k *= 0xff51afd7ed558ccdull; k ^= k >> 29;
    return (unsigned)k & (MAP_SIZE - 1);
}

static int map_get(handle_map_t *m, uintptr_t key)
{
    for (unsigned i = map_hash(key);; i = (i + 1) & (MAP_SIZE - 1)) {
        if (!m->e[i].used) return -1;
        if (m->e[i].key == key) return m->e[i].id;
    }
}

static int map_put(handle_map_t *m, uintptr_t key, int id)
{
    unsigned i = map_hash(key);
    for (;; i = (i + 1) & (MAP_SIZE - 1)) {
        if (!m->e[i].used) break;
        if (m->e[i].key == key) { m->e[i].id = id; return 0; }
    }
    if (m->n + 1 >= MAP_SIZE / 2) return -1;
    m->e[i] = (map_entry_t){key, id, 1};
    m->n++;
    return 0;
}

static void map_del(handle_map_t *m, uintptr_t key)
{
    unsigned i = map_hash(key);
    for (;; i = (i + 1) & (MAP_SIZE - 1)) {
        if (!m->e[i].used) return;
        if (m->e[i].key == key) break;
    }
    m->e[i].used = 0;
    m->n--;
    for (unsigned j = (i + 1) & (MAP_SIZE - 1); m->e[j].used; j = (j + 1) & (MAP_SIZE - 1)) {
        unsigned home = map_hash(m->e[j].key);
        /* move e[j] into the hole when its home slot is not in (i, j] cyclically */
        if ((j > i && (home <= i || home > j)) || (j < i && (home <= i && home > j))) {
            m->e[i] = m->e[j];
            m->e[j].used = 0;
            i = j;
        }
    }
}

#define HKEY(h) ((uintptr_t)(h))

/* Fast path for the commonest communicator. */
static MPI_Comm world_handle_cache;
static int world_id_cache = -1;

static int registry_new_record(const char *name, int parent_id, int creator_op, const char *topo)
{
    ps_fold_pending(); /* records whose last request completed since: their slots are free */
    int id = ps_slot_take(parent_id, PS_SLOT_COMM);
    if (id < 0) return -1;
    ps_comm_t *c = ps_comms[id];
    c->creator_op = creator_op;
    strncpy(c->name, name, PS_NAME_MAX - 1);
    if (topo) strncpy(c->topo, topo, PS_TOPO_MAX - 1);
    return id;
}

/* Unknown and reserved communicators are named "?<rank>.<k>": k counts them on this rank. */
static int unknown_serial;

static void unknown_name(char name[48])
{
    name[0] = '?';
    ps_fmt_t f = {name + 1, 0, 40, -1, 0};
    ps_fmt_u64(&f, (uint64_t)ps_world_rank);
    ps_fmt_char(&f, '.');
    ps_fmt_u64(&f, (uint64_t)unknown_serial++);
    name[1 + f.len] = 0;
}

/* Fills size, rank, members (world ranks) of a registered communicator. */
static void registry_fill_members(ps_comm_t *c, MPI_Comm comm)
{
    MPI_Group world_group, local, remote = MPI_GROUP_NULL;
    int inter = 0;
    PMPI_Comm_test_inter(comm, &inter);
    PMPI_Comm_size(comm, &c->size);
    PMPI_Comm_rank(comm, &c->my_rank);
    c->is_inter = inter;
    if (inter) PMPI_Comm_remote_size(comm, &c->remote_size);
    int total = c->size + c->remote_size;
    if (total > c->members_cap) { /* a reused slot keeps its buffer when it is large enough */
        int *old = c->members;
        c->members = NULL;
        c->members_cap = 0;
        free(old);
        c->members = calloc((size_t)total, sizeof(int));
        if (c->members) c->members_cap = total;
    }
    int *idx = calloc((size_t)total, sizeof(int));
    if (!c->members || !idx) {
        atomic_fetch_add(&ps_counters.alloc_failures, 1);
        free(idx);
        return;
    }
    for (int i = 0; i < total; i++) idx[i] = i < c->size ? i : i - c->size;
    world_group = ps_world_group;
    if (world_group == MPI_GROUP_NULL) PMPI_Comm_group(MPI_COMM_WORLD, &world_group);
    PMPI_Comm_group(comm, &local);
    PMPI_Group_translate_ranks(local, c->size, idx, world_group, c->members);
    if (inter) {
        PMPI_Comm_remote_group(comm, &remote);
        PMPI_Group_translate_ranks(remote, c->remote_size, idx + c->size, world_group,
                                   c->members + c->size);
        PMPI_Group_free(&remote);
    }
    PMPI_Group_free(&local);
    if (world_group != ps_world_group) PMPI_Group_free(&world_group);
    free(idx);
}

int ps_comm_register_named(MPI_Comm newcomm, const char *name, int own_at, int parent_id,
                           int creator_op, const char *topo)
{
    ps_lock();
    int id = registry_new_record(name, parent_id, creator_op, topo);
    if (id >= 0) {
        ps_comm_set_own(ps_comms[id], own_at);
        if (map_put(&comm_map, HKEY(newcomm), id)) atomic_fetch_add(&ps_counters.comm_table_full, 1);
        if (newcomm == MPI_COMM_WORLD) { world_handle_cache = newcomm; world_id_cache = id; }
    }
    ps_unlock();
    if (id >= 0) registry_fill_members(ps_comms[id], newcomm);
    return id;
}

int ps_comm_register(MPI_Comm newcomm, const char *name, int parent_id, int creator_op,
                     const char *topo)
{
    return ps_comm_register_named(newcomm, name, -1, parent_id, creator_op, topo);
}

/* MPI_Comm_idup: the new handle exists when the call returns, but the communicator may not be
 * used, not even queried (MPICH asserts in MPI_Comm_group on a pending intercommunicator), until
 * the request completes.  Its record is reserved at the call without any MPI query, so that
 * calls on the handle in between (mpi4py calls MPI_Comm_set_errhandler right after Idup) are
 * attributed to it instead of registering an unknown communicator; ps_comm_finish names it and
 * fills its members at completion.  Until then it has an unknown-style name "?<rank>.<k>" and
 * a reference (the idup's), so that it cannot fold before it has its name. */
int ps_comm_reserve(MPI_Comm newcomm, int parent_id, int creator_op)
{
    char name[48];
    ps_lock();
    unknown_name(name);
    int id = registry_new_record(name, parent_id, creator_op, NULL);
    if (id >= 0) {
        ps_comm_ref(id);
        if (map_put(&comm_map, HKEY(newcomm), id)) atomic_fetch_add(&ps_counters.comm_table_full, 1);
    }
    ps_unlock();
    return id;
}

void ps_comm_finish(int id, MPI_Comm comm, const char *name, int own_at)
{
    ps_comm_t *c = ps_comms[id];
    ps_lock();
    snprintf(c->name, PS_NAME_MAX, "%s", name);
    ps_comm_set_own(c, own_at);
    ps_unlock();
    registry_fill_members(c, comm);
    ps_lock();
    ps_comm_unref(id);
    ps_unlock();
}

void ps_registry_init(void)
{
    char name[32];
    registry_new_record("-", -1, -1, NULL); /* id 0: no communicator */
    if (ps_sessions_only) { /* no MPI_COMM_WORLD, MPI_COMM_SELF or parent in this model */
        ps_comm_counter = 0;
        return;
    }
    ps_comm_register(MPI_COMM_WORLD, "W", -1, -1, NULL);
    /* MPI_COMM_SELF is a different communicator on each rank: "S.<world rank>". */
    name[0] = 'S'; name[1] = '.';
    {
        ps_fmt_t f = {name + 2, 0, sizeof name - 3, -1, 0};
        ps_fmt_u64(&f, (uint64_t)ps_world_rank);
        name[2 + f.len] = 0;
    }
    ps_comm_register(MPI_COMM_SELF, name, -1, -1, NULL);
    ps_comm_counter = 1; /* mpisee counts the communicators a process is part of, from W */
    MPI_Comm parent = MPI_COMM_NULL;
    PMPI_Comm_get_parent(&parent);
    if (parent != MPI_COMM_NULL) ps_comm_register(parent, "P", -1, -1, NULL);
}

int ps_comm_lookup(MPI_Comm comm)
{
    if (comm == world_handle_cache && world_id_cache >= 0) return world_id_cache;
    if (comm == MPI_COMM_NULL) return PS_COMM_NONE;
    ps_lock();
    int id = map_get(&comm_map, HKEY(comm));
    ps_unlock();
    if (id >= 0) return id;
    /* A communicator we did not see being created (e.g. made by a library before we were
     * initialised): give it a rank-local name so its data is still kept. */
    atomic_fetch_add(&ps_counters.unknown_comms, 1);
    char name[48];
    ps_lock();
    unknown_name(name);
    ps_unlock();
    id = ps_comm_register(comm, name, -1, -1, NULL);
    return id < 0 ? PS_COMM_NONE : id;
}

void ps_comm_forget(MPI_Comm comm)
{
    ps_lock();
    int id = map_get(&comm_map, HKEY(comm));
    map_del(&comm_map, HKEY(comm));
    if (id >= 0) ps_comm_freed(id);
    ps_unlock();
}

int ps_win_lookup(MPI_Win win)
{
    ps_lock();
    int id = map_get(&win_map, HKEY(win));
    ps_unlock();
    return id < 0 ? PS_COMM_NONE : id;
}

/* A window or file names its communicator's record until it is freed or closed (MPI lets
 * the communicator be freed first): the record folds only then. */
static void handle_register(handle_map_t *m, uintptr_t key, int comm_id)
{
    ps_lock();
    int before = map_get(m, key);
    if (map_put(m, key, comm_id) == 0) {
        if (before >= 0) ps_comm_unref(before);
        ps_comm_ref(comm_id);
    }
    ps_unlock();
}

static void handle_forget(handle_map_t *m, uintptr_t key)
{
    ps_lock();
    int id = map_get(m, key);
    map_del(m, key);
    if (id >= 0) ps_comm_unref(id);
    ps_unlock();
}

void ps_win_register(MPI_Win win, int comm_id) { handle_register(&win_map, HKEY(win), comm_id); }

void ps_win_forget(MPI_Win win) { handle_forget(&win_map, HKEY(win)); }

int ps_file_lookup(MPI_File file)
{
    ps_lock();
    int id = map_get(&file_map, HKEY(file));
    ps_unlock();
    return id < 0 ? PS_COMM_NONE : id;
}

void ps_file_register(MPI_File file, int comm_id) { handle_register(&file_map, HKEY(file), comm_id); }

void ps_file_forget(MPI_File file) { handle_forget(&file_map, HKEY(file)); }

/* Called with ps_lock held (or single-threaded). */
ps_stat_t *ps_stat_slot(int comm_id, int op)
{
    ps_comm_t *c = ps_comms[comm_id];
    ps_stat_t *s = c->ops[op];
    if (__builtin_expect(s == NULL, 0)) {
        s = calloc(1, sizeof *s);
        if (!s) {
            atomic_fetch_add(&ps_counters.alloc_failures, 1);
            return NULL;
        }
        c->ops[op] = s;
    }
    return s;
}

/* ---- requests ------------------------------------------------------------------------ */
#define REQ_BITS 16
#define REQ_SIZE (1u << REQ_BITS)
static ps_req_t req_table[REQ_SIZE];
static unsigned req_count;
uint64_t ps_req_generation;

static inline unsigned req_hash(uintptr_t k) { return map_hash(k) & (REQ_SIZE - 1); }

static void req_add(MPI_Request req, int comm_id, int op, int kind, uint64_t bytes, void *idup,
                    int peerless)
{
    if (req == MPI_REQUEST_NULL) return;
    uintptr_t key = HKEY(req);
    ps_lock();
    unsigned i = req_hash(key);
    for (;; i = (i + 1) & (REQ_SIZE - 1)) {
        if (!req_table[i].active || req_table[i].key == key) break;
    }
    ps_req_generation++;
    if (req_table[i].active) {
        req_table[i].refs++; /* a shared handle: see ps_req_t.refs */
        ps_unlock();
        return;
    }
    if (req_count + 1 >= REQ_SIZE * 3 / 4) {
        atomic_fetch_add(&ps_counters.request_table_full, 1);
        ps_unlock();
        return;
    }
    req_count++;
    ps_comm_ref(comm_id); /* a request may outlive MPI_Comm_free of its communicator */
    req_table[i] = (ps_req_t){.key = key, .comm_id = comm_id, .op = op, .kind = kind,
                              .active = 1, .refs = 1, .peerless = (unsigned char)peerless,
                              .bytes = bytes, .idup = idup};
    ps_unlock();
}

void ps_req_add(MPI_Request req, int comm_id, int op, int kind, uint64_t bytes, void *idup)
{
    req_add(req, comm_id, op, kind, bytes, idup, 0);
}

void ps_req_add_p2p(MPI_Request req, int comm_id, int op, int kind, uint64_t bytes, int peerless)
{
    req_add(req, comm_id, op, kind, bytes, NULL, peerless);
}

/* Lookups run under the caller's ps_lock() when threaded. */
ps_req_t *ps_req_find(MPI_Request req)
{
    uintptr_t key = HKEY(req);
    for (unsigned i = req_hash(key);; i = (i + 1) & (REQ_SIZE - 1)) {
        if (!req_table[i].active) return NULL;
        if (req_table[i].key == key) return &req_table[i];
    }
}

void ps_req_remove(MPI_Request req)
{
    uintptr_t key = HKEY(req);
    unsigned i = req_hash(key);
    for (;; i = (i + 1) & (REQ_SIZE - 1)) {
        if (!req_table[i].active) return;
        if (req_table[i].key == key) break;
    }
    ps_req_generation++;
    if (--req_table[i].refs > 0) return;
    req_table[i].active = 0;
    req_count--;
    ps_comm_unref(req_table[i].comm_id); /* its folding waits for the next registration */
    for (unsigned j = (i + 1) & (REQ_SIZE - 1); req_table[j].active; j = (j + 1) & (REQ_SIZE - 1)) {
        unsigned home = req_hash(req_table[j].key);
        if ((j > i && (home <= i || home > j)) || (j < i && (home <= i && home > j))) {
            req_table[i] = req_table[j];
            req_table[j].active = 0;
            i = j;
        }
    }
}
