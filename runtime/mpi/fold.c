/* Folding freed communicators: a program may create millions of short-lived communicators
 * (200,001 over a run, 201 alive at once, in issue 14), so a record cannot live for the whole
 * run.  When a communicator is freed and nothing names it any more (no request, window, file
 * or pending idup: `refs`), its record folds into a row of its kind and its slot is reused --
 * unless the number M in its name is at most PATHSCOPE_COMM_KEEP (256): a program's first
 * communicators (all of them, in most programs) keep their names.  M is the same on every
 * member, so they all decide alike; a process joins at most that many communicators with such
 * an M (its own count never exceeds M), so the records kept stay bounded.
 *
 * A row is a record of its own (state PS_SLOT_ROW) named like the communicators it stands for
 * with their number replaced by '*': "W_d5", "W_d9" -> "W_d*"; "W_s7.2" -> "W_s*.2" (the lowest
 * parent rank stays: it tells the groups of a split apart); unknown "?1.9" -> "?1.*".  The
 * prefix before the own part is the parent's name, so a row hangs below its parent: rows are
 * found by name among the parent's rows.  When a parent folds, its children move below its
 * row: communicators keep their names, rows are renamed after the parent's row ("W_d5_s*.0"
 * -> "W_d*_s*.0") and merged with a row of that name already there.  So the rows a rank ends
 * with depend only on which communicators it freed, not on the order it freed them in, and
 * every member of a communicator names its row alike (docs/format.md, "Folded communicators").
 * W, MPI_COMM_SELF and the parent of a spawned job have no own part and never fold.
 *
 * A row adds up its communicators' statistics and point-to-point counters, counts them
 * (`memberships`: all of them; `folded`: those whose lowest world rank is this rank, so that
 * the sum over ranks counts each communicator once), keeps the union of their members, and
 * takes over their entries in the threads' call trees (ps_pcomm_t, found through
 * `pcomm_refs`).
 *
 * Every function here runs with ps_lock() held (or single-threaded), inside the wrappers:
 * it may allocate.  Readers without the lock (the live segment, a fatal-signal writer) may see
 * a fold half done: a slot's record is never freed, only emptied, and a merged-away statistics
 * block is freed after it was unlinked. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_internal.h"
#include "mpi_thread.h"
#include "../core/cct.h"

int ps_comm_keep = 256;
static int free_slots[PS_MAX_COMMS], nfree;
static int pending[PS_MAX_COMMS], npending; /* freed; their last reference went since */
static int root_comms = -1, root_rows = -1; /* records without a parent */

/* ---- the tree of records ------------------------------------------------------------------ */

static int *children_head(int parent, int state)
{
    if (parent < 0) return state == PS_SLOT_ROW ? &root_rows : &root_comms;
    ps_comm_t *p = ps_comms[parent];
    return state == PS_SLOT_ROW ? &p->first_row : &p->first_comm;
}

static void tree_link(int id)
{
    ps_comm_t *c = ps_comms[id];
    int *head = children_head(c->parent_id, c->state);
    c->prev_sibling = -1;
    c->next_sibling = *head;
    if (*head >= 0) ps_comms[*head]->prev_sibling = id;
    *head = id;
}

static void tree_unlink(int id)
{
    ps_comm_t *c = ps_comms[id];
    if (c->prev_sibling >= 0) ps_comms[c->prev_sibling]->next_sibling = c->next_sibling;
    else *children_head(c->parent_id, c->state) = c->next_sibling;
    if (c->next_sibling >= 0) ps_comms[c->next_sibling]->prev_sibling = c->prev_sibling;
    c->prev_sibling = c->next_sibling = -1;
}

/* ---- slots -------------------------------------------------------------------------------- */

int ps_slot_take(int parent_id, int state)
{
    int id;
    if (nfree) {
        id = free_slots[--nfree];
    } else if (ps_ncomms < PS_MAX_COMMS) {
        ps_comm_t *c = calloc(1, sizeof *c);
        if (!c) {
            atomic_fetch_add(&ps_counters.alloc_failures, 1);
            return -1;
        }
        id = ps_ncomms;
        __atomic_store_n(&ps_comms[id], c, __ATOMIC_RELEASE);
        __atomic_store_n(&ps_ncomms, id + 1, __ATOMIC_RELEASE);
    } else {
        atomic_fetch_add(&ps_counters.comm_table_full, 1);
        return -1;
    }
    ps_comm_t *c = ps_comms[id];
    c->id = id;
    c->parent_id = parent_id;
    c->creator_op = -1;
    c->own_at = -1;
    c->state = state;
    c->first_comm = c->first_row = -1;
    tree_link(id);
    return id;
}

/* An emptied record goes back to the free slots; its buffers stay for the next one. */
static void slot_release(int id)
{
    ps_comm_t *c = ps_comms[id];
    tree_unlink(id);
    int *members = c->members, cap = c->members_cap, refs_cap = c->pcomm_refs_cap;
    uint64_t *refs = c->pcomm_refs;
    c->state = PS_SLOT_FREE;
    memset(c, 0, sizeof *c);
    c->members = members;
    c->members_cap = cap;
    c->pcomm_refs = refs;
    c->pcomm_refs_cap = refs_cap;
    c->id = id;
    c->prev_sibling = c->next_sibling = -1;
    free_slots[nfree++] = id;
}

void ps_comm_set_own(ps_comm_t *c, int own_at)
{
    c->own_at = own_at;
    const char *parent = c->parent_id >= 0 ? ps_comms[c->parent_id]->name : NULL;
    c->prefix_is_parent = own_at >= 0 && parent && strlen(parent) == (size_t)own_at &&
                          strncmp(c->name, parent, (size_t)own_at) == 0;
}

/* ---- names -------------------------------------------------------------------------------- */

/* The name of the row a record (a communicator or a row being moved) belongs to, and the
 * length of its prefix; 0 when it has no own part and never folds. */
static int row_name(const ps_comm_t *c, char out[PS_NAME_MAX], int *own_at)
{
    ps_fmt_t f = {out, 0, PS_NAME_MAX - 1, -1, 0};
    if (c->own_at < 0) {
        if (c->name[0] != '?') return 0;
        /* unknown to pathscope: rank-local, below no parent */
        const char *dot = strchr(c->name, '.');
        size_t len = dot ? (size_t)(dot - c->name) : strlen(c->name);
        for (size_t i = 0; i < len; i++) ps_fmt_char(&f, c->name[i]);
        *own_at = (int)f.len;
        ps_fmt_str(&f, ".*");
        out[f.len] = 0;
        return 1;
    }
    if (c->prefix_is_parent && c->parent_id >= 0) {
        ps_fmt_str(&f, ps_comms[c->parent_id]->name);
    } else {
        for (int i = 0; i < c->own_at && c->name[i]; i++) ps_fmt_char(&f, c->name[i]);
    }
    *own_at = (int)f.len;
    /* the own part: '_', the operation's letter, its number (or '*'), then ".L" if any */
    const char *own = c->name + c->own_at;
    if (own[0] && own[1]) {
        ps_fmt_char(&f, own[0]);
        ps_fmt_char(&f, own[1]);
        own += 2;
        while ((*own >= '0' && *own <= '9') || *own == '*') own++;
        ps_fmt_char(&f, '*');
    }
    ps_fmt_str(&f, own);
    out[f.len] = 0;
    return 1;
}

static int row_find(int parent, const char *name, int except)
{
    for (int r = *children_head(parent, PS_SLOT_ROW); r >= 0; r = ps_comms[r]->next_sibling)
        if (r != except && strcmp(ps_comms[r]->name, name) == 0) return r;
    return -1;
}

static void row_set_name(ps_comm_t *row, const char *name, int own_at)
{
    memcpy(row->name, name, PS_NAME_MAX); /* both PS_NAME_MAX, terminated */
    row->own_at = own_at;
}

/* A row's name changed: so do those of its rows named after it, recursively. */
static void rows_rename(int id)
{
    char name[PS_NAME_MAX];
    int own_at;
    for (int r = ps_comms[id]->first_row; r >= 0; r = ps_comms[r]->next_sibling) {
        ps_comm_t *row = ps_comms[r];
        if (!row->prefix_is_parent || !row_name(row, name, &own_at)) continue;
        row_set_name(row, name, own_at);
        rows_rename(r);
    }
}

/* ---- merging a record into a row ---------------------------------------------------------- */

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* a (sorted, na) united with b (any order, nb) into out; returns the count */
static int unite(const int *a, int na, const int *b, int nb, int *out, int *scratch)
{
    if (nb) memcpy(scratch, b, sizeof *b * (size_t)nb);
    qsort(scratch, (size_t)nb, sizeof *scratch, cmp_int);
    int i = 0, j = 0, n = 0;
    while (i < na || j < nb) {
        int v = j >= nb || (i < na && a[i] <= scratch[j]) ? a[i] : scratch[j];
        while (i < na && a[i] == v) i++;
        while (j < nb && scratch[j] == v) j++;
        out[n++] = v;
    }
    return n;
}

/* The row's members: the union of its communicators' local groups, then of their remote
 * groups (intercommunicators), each sorted. */
static void merge_members(ps_comm_t *row, const ps_comm_t *c)
{
    if (!c->members) return;
    int total = row->size + row->remote_size + c->size + c->remote_size;
    int *out = malloc(sizeof(int) * (size_t)(total ? total : 1));
    int *scratch = malloc(sizeof(int) * (size_t)(total ? total : 1));
    if (!out || !scratch) {
        atomic_fetch_add(&ps_counters.alloc_failures, 1);
        free(out);
        free(scratch);
        return;
    }
    const int *old = row->members;
    int local = unite(old, row->size, c->members, c->size, out, scratch);
    int remote = unite(old ? old + row->size : NULL, row->remote_size, c->members + c->size,
                       c->remote_size, out + local, scratch);
    free(scratch);
    int *prev = row->members;
    row->members = out;
    row->members_cap = total;
    row->size = local;
    row->remote_size = remote;
    row->is_inter = row->is_inter || c->is_inter;
    free(prev);
}

static int leads(const ps_comm_t *c)
{
    if (!c->members) return c->my_rank == 0 && !c->is_inter;
    int low = INT_MAX;
    for (int i = 0; i < c->size + c->remote_size; i++)
        if (c->members[i] >= 0 && c->members[i] < low) low = c->members[i];
    return low == ps_world_rank;
}

static void merge_stats(ps_comm_t *row, ps_comm_t *c)
{
    for (int op = 0; op < PS_NUM_OPS; op++) {
        ps_stat_t *s = c->ops[op];
        if (!s) continue;
        __atomic_store_n(&c->ops[op], NULL, __ATOMIC_RELEASE);
        ps_stat_t *into = row->ops[op];
        if (!into) {
            __atomic_store_n(&row->ops[op], s, __ATOMIC_RELEASE);
            continue;
        }
        into->calls += s->calls;
        into->ticks += s->ticks;
        into->bytes += s->bytes;
        for (int b = 0; b < PS_HIST_BINS; b++) into->hist[b] += s->hist[b];
        free(s);
    }
}

static void merge_record(ps_comm_t *row, ps_comm_t *c)
{
    int first = row->memberships == 0;
    merge_stats(row, c);
    if (first) memcpy(row->topo, c->topo, sizeof row->topo);
    else if (strcmp(row->topo, c->topo) != 0) row->topo_mixed = 1;
    row->topo_mixed |= c->topo_mixed;
    if (c->state == PS_SLOT_ROW) {
        row->folded += c->folded;
        row->memberships += c->memberships;
    } else {
        row->folded += (uint64_t)leads(c);
        row->memberships++;
    }
    row->sent_msgs += c->sent_msgs;
    row->sent_bytes += c->sent_bytes;
    row->recv_msgs += c->recv_msgs;
    row->recv_bytes += c->recv_bytes;
    row->freed_sends += c->freed_sends;
    row->freed_recvs += c->freed_recvs;
    row->freed_recv_capacity += c->freed_recv_capacity;
    row->failed_requests += c->failed_requests;
    merge_members(row, c);
}

/* The threads' tree entries of record `from` move to record `to`. */
static void move_pcomms(int to, int from)
{
    ps_comm_t *c = ps_comms[from];
    for (int k = 0; k < c->npcomm_refs; k++) {
        int index = (int)(c->pcomm_refs[k] >> 32);
        uint32_t node = (uint32_t)c->pcomm_refs[k];
        ps_thread_t *t = index < PS_MAX_THREADS ? ps_threads[index] : NULL;
        if (!t) continue;
        mpi_thread_t *m = mpi_of(t);
        ps_pcomm_t *p = ps_mpi_pcomm_find(m, node, from);
        if (!p) continue;
        ps_pcomm_t moved = *p;
        ps_mpi_pcomm_remove(m, p); /* first: the entry for `to` then always finds room */
        int added = 0;
        ps_pcomm_t *q = ps_mpi_pcomm(m, node, to, &added);
        if (!q) continue;
        q->calls += moved.calls;
        q->ticks += moved.ticks;
        q->bytes += moved.bytes;
        if (added) ps_pcomm_note(to, index, node);
    }
    c->npcomm_refs = 0;
}

static void fold_into(int row, int id);

/* The children of `from` (folding into `to`) move below `to`. */
static void adopt_children(int to, int from)
{
    ps_comm_t *f = ps_comms[from];
    while (f->first_comm >= 0) {
        int x = f->first_comm;
        tree_unlink(x);
        ps_comms[x]->parent_id = to;
        tree_link(x);
    }
    while (f->first_row >= 0) {
        int r = f->first_row;
        tree_unlink(r);
        ps_comm_t *row = ps_comms[r];
        row->parent_id = to;
        char name[PS_NAME_MAX];
        int own_at = row->own_at;
        if (row->prefix_is_parent) row_name(row, name, &own_at);
        else memcpy(name, row->name, sizeof name);
        int same = row_find(to, name, -1);
        if (same >= 0) {
            row->state = PS_SLOT_ROW;
            tree_link(r); /* fold_into unlinks it again */
            fold_into(same, r);
            continue;
        }
        row_set_name(row, name, own_at);
        tree_link(r);
        rows_rename(r);
    }
}

/* Record id (a freed communicator or a row) goes into row; its slot is freed. */
static void fold_into(int row, int id)
{
    merge_record(ps_comms[row], ps_comms[id]);
    move_pcomms(row, id);
    adopt_children(row, id);
    slot_release(id);
}

/* M, the number of a communicator's own part ("_d17" -> 17); -1 for an unknown one. */
static long own_number(const ps_comm_t *c)
{
    if (c->own_at < 0 || !c->name[c->own_at] || !c->name[c->own_at + 1]) return -1;
    return strtol(c->name + c->own_at + 2, NULL, 10);
}

static void fold(int id)
{
    ps_comm_t *c = ps_comms[id];
    char name[PS_NAME_MAX];
    int own_at;
    if (c->own_at >= 0 && own_number(c) <= ps_comm_keep) return; /* keeps its name */
    if (!row_name(c, name, &own_at)) return;
    int parent = c->own_at < 0 ? -1 : c->parent_id;
    int row = row_find(parent, name, -1);
    if (row < 0) {
        row = ps_slot_take(parent, PS_SLOT_ROW);
        if (row < 0) return; /* counted: the communicator keeps its own record */
        ps_comm_t *r = ps_comms[row];
        row_set_name(r, name, own_at);
        r->prefix_is_parent = c->prefix_is_parent;
        r->creator_op = c->creator_op;
        r->freed = 1;
    }
    fold_into(row, id);
}

/* ---- when records fold -------------------------------------------------------------------- */

void ps_comm_freed(int id)
{
    ps_comm_t *c = ps_comms[id];
    c->freed = 1;
    if (c->refs == 0 && c->state == PS_SLOT_COMM) fold(id);
}

void ps_comm_ref(int id)
{
    if (id >= 0) ps_comms[id]->refs++;
}

/* Not folded here: the caller may still use the id it read from a request (completion.c),
 * so the record folds at the next registration (ps_fold_pending). */
void ps_comm_unref(int id)
{
    if (id < 0) return;
    ps_comm_t *c = ps_comms[id];
    if (--c->refs == 0 && c->freed && c->state == PS_SLOT_COMM && npending < PS_MAX_COMMS)
        pending[npending++] = id;
}

static void fold_if_unreferenced(int id)
{
    ps_comm_t *c = ps_comms[id];
    if (c->state == PS_SLOT_COMM && c->freed && c->refs == 0) fold(id);
}

void ps_fold_pending(void)
{
    while (npending) fold_if_unreferenced(pending[--npending]);
}

/* MPI_Finalize: anything freed and unreferenced, pending or not. */
void ps_fold_all(void)
{
    npending = 0;
    for (int id = 0; id < ps_ncomms; id++) fold_if_unreferenced(id);
}

void ps_pcomm_note(int comm_id, int thread_index, uint32_t node)
{
    ps_comm_t *c = ps_comms[comm_id];
    if (c->npcomm_refs == c->pcomm_refs_cap) {
        int cap = c->pcomm_refs_cap ? c->pcomm_refs_cap * 2 : 8;
        uint64_t *grown = realloc(c->pcomm_refs, sizeof *grown * (size_t)cap);
        if (!grown) {
            atomic_fetch_add(&ps_counters.alloc_failures, 1);
            return;
        }
        c->pcomm_refs = grown;
        c->pcomm_refs_cap = cap;
    }
    c->pcomm_refs[c->npcomm_refs++] = (uint64_t)(uint32_t)thread_index << 32 | node;
}
