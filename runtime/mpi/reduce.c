/* End-of-run reduction inside the job, over a private duplicate of MPI_COMM_WORLD:
 * a binomial tree (ceil(log2 p) rounds) merges per-(communicator name, operation) records, so
 * what reaches rank 0 grows with the number of distinct communicators and operations, not
 * with the number of ranks.  Merging: calls and bytes add up; per-rank times give sum, min,
 * max and the ranks at min and max.  Communicator descriptions are de-duplicated by name and
 * their point-to-point counters add up.  The pseudo communicator "*" carries each rank's
 * per-operation total over all communicators (the classic mpiP view).
 * Rank 0 then writes profile.tsv (docs/format.md), with the ranks whose rank file could not be
 * written, and prints the one notice of the run: what was written and what was not. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mpi_internal.h"

#define MEMBERS_MAX 2048
#define HOST_MAX 128 /* host names longer than 127 bytes are cut in profile.tsv */

typedef struct {
    char comm[PS_NAME_MAX];
    int32_t op, nranks, rank_min, rank_max;
    uint64_t calls, bytes, t_sum, t_min, t_max;
    uint64_t hist[PS_HIST_BINS];
} op_rec_t;

typedef struct {
    char name[PS_NAME_MAX], parent[PS_NAME_MAX], topo[PS_TOPO_MAX], members[MEMBERS_MAX];
    int32_t size, remote_size, creator_op, freed_all;
    uint64_t sent_msgs, sent_bytes, recv_msgs, recv_bytes;
    uint64_t freed_sends, freed_recvs, freed_recv_capacity, failed_requests;
    uint64_t folded, memberships; /* a folded row (memberships > 0 on every rank) */
} comm_rec_t;

typedef struct { op_rec_t *ops; int nops; comm_rec_t *comms; int ncomms; } set_t;

static int cmp_op(const void *a, const void *b)
{
    const op_rec_t *x = a, *y = b;
    int c = strcmp(x->comm, y->comm);
    return c ? c : (x->op > y->op) - (x->op < y->op);
}

static int cmp_comm(const void *a, const void *b)
{
    return strcmp(((const comm_rec_t *)a)->name, ((const comm_rec_t *)b)->name);
}

static void merge_op(op_rec_t *into, const op_rec_t *r)
{
    into->calls += r->calls;
    into->bytes += r->bytes;
    into->t_sum += r->t_sum;
    if (r->t_min < into->t_min || (r->t_min == into->t_min && r->rank_min < into->rank_min)) {
        into->t_min = r->t_min;
        into->rank_min = r->rank_min;
    }
    if (r->t_max > into->t_max || (r->t_max == into->t_max && r->rank_max < into->rank_max)) {
        into->t_max = r->t_max;
        into->rank_max = r->rank_max;
    }
    into->nranks += r->nranks;
    for (int b = 0; b < PS_HIST_BINS; b++) into->hist[b] += r->hist[b];
}

/* ---- member lists of folded rows: the union over the ranks ---- */
typedef struct { int64_t lo, hi; } span_t;
#define SPANS_MAX (MEMBERS_MAX / 2 + 1)

static int cmp_span(const void *a, const void *b)
{
    const span_t *x = a, *y = b;
    return (x->lo > y->lo) - (x->lo < y->lo);
}

static int64_t parse_int(const char **p)
{
    int neg = **p == '-';
    if (neg) (*p)++;
    int64_t v = 0;
    while (**p >= '0' && **p <= '9') v = v * 10 + (*(*p)++ - '0');
    return neg ? -v : v;
}

/* One group of a member list ("0-3,6,8-12:2"), up to '|' or the end; "-" is empty.  A
 * stepped run becomes its single ranks (at most cap spans in all).  *p is left after the
 * group and its '|'. */
static int parse_group(const char **p, span_t *out, int n, int cap)
{
    if (**p == '-' && ((*p)[1] == 0 || (*p)[1] == '|')) (*p)++;
    while (**p && **p != '|' && **p != '.' && n < cap) {
        span_t sp;
        int64_t step = 0;
        sp.lo = sp.hi = parse_int(p);
        if (**p == '-') {
            (*p)++;
            sp.hi = parse_int(p);
        }
        if (**p == ':') {
            (*p)++;
            step = parse_int(p);
        }
        if (step > 1)
            for (int64_t v = sp.lo; v <= sp.hi && n < cap; v += step) out[n++] = (span_t){v, v};
        else
            out[n++] = sp;
        if (**p == ',') (*p)++;
        else if (**p && **p != '|' && **p != '.') break; /* malformed: stop there */
    }
    while (**p && **p != '|') (*p)++;
    if (**p == '|') (*p)++;
    return n;
}

/* spans sorted and joined, written as ps_fmt_ranges writes a sorted list (the same text
 * as the reader's union, python/pathscope/merge.py); returns the rank count (f failed, the
 * list to be cut, when there is no memory for it) */
static int64_t spans_write(ps_fmt_t *f, span_t *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_span);
    int64_t count = 0;
    int m = 0;
    for (int i = 0; i < n; m++) {
        span_t cur = v[i++];
        while (i < n && v[i].lo <= cur.hi + 1) {
            if (v[i].hi > cur.hi) cur.hi = v[i].hi;
            i++;
        }
        v[m] = cur;
        count += cur.hi - cur.lo + 1;
    }
    int *ranks = count ? malloc((size_t)count * sizeof *ranks) : NULL;
    if (count && !ranks) { f->failed = 1; return count; }
    int64_t k = 0;
    for (int i = 0; i < m; i++)
        for (int64_t r = v[i].lo; r <= v[i].hi; r++) ranks[k++] = (int)r;
    ps_fmt_ranges(f, ranks, (int)count);
    free(ranks);
    return count;
}

/* into's members become the union of both lists, group by group; sizes follow. */
static void unite_members(comm_rec_t *into, const comm_rec_t *r)
{
    static span_t spans[2][2 * SPANS_MAX];
    int n[2] = {0, 0};
    int cut = strstr(into->members, "...") || strstr(r->members, "...");
    const char *lists[2] = {into->members, r->members};
    for (int k = 0; k < 2; k++) {
        const char *p = lists[k];
        n[0] = parse_group(&p, spans[0], n[0], 2 * SPANS_MAX);
        if (*p || strchr(lists[k], '|')) n[1] = parse_group(&p, spans[1], n[1], 2 * SPANS_MAX);
    }
    int inter = strchr(into->members, '|') || strchr(r->members, '|');
    char buf[MEMBERS_MAX + 8];
    ps_fmt_t f = {buf, 0, MEMBERS_MAX - 4, -1, 0};
    into->size = (int32_t)spans_write(&f, spans[0], n[0]);
    if (inter) {
        char rest[MEMBERS_MAX + 8];
        ps_fmt_t g = {rest, 0, MEMBERS_MAX - 4, -1, 0};
        into->remote_size = (int32_t)spans_write(&g, spans[1], n[1]);
        ps_fmt_char(&f, '|');
        for (size_t i = 0; i < g.len; i++) ps_fmt_char(&f, rest[i]);
        f.failed |= g.failed;
    }
    buf[f.len] = 0;
    snprintf(into->members, sizeof into->members, "%s%s", buf, cut || f.failed ? "..." : "");
}

static void merge_comm(comm_rec_t *into, const comm_rec_t *r)
{
    if (into->memberships) { /* a folded row: see docs/format.md, Merge rules */
        unite_members(into, r);
        if (strcmp(into->topo, r->topo) != 0) snprintf(into->topo, sizeof into->topo, "mixed");
        into->folded += r->folded;
        into->memberships += r->memberships;
    }
    into->sent_msgs += r->sent_msgs;
    into->sent_bytes += r->sent_bytes;
    into->recv_msgs += r->recv_msgs;
    into->recv_bytes += r->recv_bytes;
    into->freed_sends += r->freed_sends;
    into->freed_recvs += r->freed_recvs;
    into->freed_recv_capacity += r->freed_recv_capacity;
    into->failed_requests += r->failed_requests;
    into->freed_all = into->freed_all && r->freed_all;
}

/* sort + combine equal keys in place */
static void normalise(set_t *s)
{
    int n = 0;
    qsort(s->ops, (size_t)s->nops, sizeof *s->ops, cmp_op);
    for (int i = 0; i < s->nops; i++) {
        if (n && cmp_op(&s->ops[n - 1], &s->ops[i]) == 0) merge_op(&s->ops[n - 1], &s->ops[i]);
        else s->ops[n++] = s->ops[i];
    }
    s->nops = n;
    n = 0;
    qsort(s->comms, (size_t)s->ncomms, sizeof *s->comms, cmp_comm);
    for (int i = 0; i < s->ncomms; i++) {
        if (n && cmp_comm(&s->comms[n - 1], &s->comms[i]) == 0) merge_comm(&s->comms[n - 1], &s->comms[i]);
        else s->comms[n++] = s->comms[i];
    }
    s->ncomms = n;
}

/* lowest world rank of a group; members outside this job (MPI_UNDEFINED) sort last */
static int lowest(const int *v, int n)
{
    int low = INT32_MAX;
    for (int i = 0; i < n; i++) if (v[i] >= 0 && v[i] < low) low = v[i];
    return low;
}

/* returns 1 when the remote group was put first */
static int members_string(char *out, size_t cap, const ps_comm_t *c)
{
    int swapped = 0;
    char buf[MEMBERS_MAX + 8];
    ps_fmt_t f = {buf, 0, MEMBERS_MAX - 4, -1, 0};
    if (!c->members) ps_fmt_char(&f, '-');
    else {
        /* intercommunicators: the group holding the lowest world rank first, so that both
         * sides describe the communicator the same way */
        const int *a = c->members, *b = c->members + c->size;
        int na = c->size, nb = c->remote_size;
        if (c->is_inter && nb > 0 && (na == 0 || lowest(b, nb) < lowest(a, na))) {
            const int *t = a; a = b; b = t;
            int tn = na; na = nb; nb = tn;
            swapped = 1;
        }
        ps_fmt_ranges(&f, a, na);
        if (c->is_inter) { ps_fmt_char(&f, '|'); ps_fmt_ranges(&f, b, nb); }
    }
    buf[f.len] = 0;
    snprintf(out, cap, "%s%s", buf, f.failed ? "..." : "");
    return swapped;
}

/* MPI_COMM_SELF ("S.<world rank>"), a communicator of each rank, when this rank made no
 * call on it: left out of profile.tsv, which would otherwise list one empty row per rank
 * (its rank file keeps it).  Communicators made from it are others. */
static int unused_self(const ps_comm_t *cm)
{
    if (cm->name[0] != 'S' || cm->name[1] != '.' || !cm->name[2] ||
        strspn(cm->name + 2, "0123456789") != strlen(cm->name + 2))
        return 0;
    for (int op = 0; op < PS_NUM_OPS; op++)
        if (cm->ops[op]) return 0;
    return !cm->sent_msgs && !cm->recv_msgs && !cm->freed_recvs && !cm->failed_requests;
}

static set_t collect_local(void)
{
    set_t s = {0};
    s.ops = calloc((size_t)ps_ncomms * 8 + PS_NUM_OPS + 1, sizeof *s.ops);
    s.comms = calloc((size_t)ps_ncomms + 1, sizeof *s.comms);
    int cap = ps_ncomms * 8 + PS_NUM_OPS + 1;
    uint64_t *total = calloc(PS_NUM_OPS, sizeof *total), *calls = calloc(PS_NUM_OPS, sizeof *calls),
             *bytes = calloc(PS_NUM_OPS, sizeof *bytes);
    int *seen = calloc(PS_NUM_OPS, sizeof *seen);
    for (int c = 0; c < ps_ncomms; c++) {
        ps_comm_t *cm = ps_comms[c];
        if (cm->state == PS_SLOT_FREE || unused_self(cm)) continue;
        comm_rec_t *cr = &s.comms[s.ncomms++];
        snprintf(cr->name, sizeof cr->name, "%s", cm->name);
        snprintf(cr->parent, sizeof cr->parent, "%s", cm->parent_id >= 0 ? ps_comms[cm->parent_id]->name : "-");
        snprintf(cr->topo, sizeof cr->topo, "%s",
                 cm->topo_mixed ? "mixed" : cm->topo[0] ? cm->topo : "-");
        int swapped = members_string(cr->members, sizeof cr->members, cm);
        cr->size = swapped ? cm->remote_size : cm->size;
        cr->remote_size = swapped ? cm->size : cm->remote_size;
        cr->creator_op = cm->creator_op;
        cr->freed_all = cm->freed;
        cr->sent_msgs = cm->sent_msgs;
        cr->sent_bytes = cm->sent_bytes;
        cr->recv_msgs = cm->recv_msgs;
        cr->recv_bytes = cm->recv_bytes;
        cr->freed_sends = cm->freed_sends;
        cr->freed_recvs = cm->freed_recvs;
        cr->freed_recv_capacity = cm->freed_recv_capacity;
        cr->failed_requests = cm->failed_requests;
        cr->folded = cm->folded;
        cr->memberships = cm->memberships;
        for (int op = 0; op < PS_NUM_OPS; op++) {
            ps_stat_t *st = cm->ops[op];
            if (!st) continue;
            if (s.nops + 1 >= cap) {
                cap *= 2;
                s.ops = realloc(s.ops, sizeof *s.ops * (size_t)cap);
            }
            op_rec_t *r = &s.ops[s.nops++];
            memset(r, 0, sizeof *r);
            snprintf(r->comm, sizeof r->comm, "%s", cm->name);
            r->op = op;
            r->nranks = 1;
            r->rank_min = r->rank_max = ps_world_rank;
            r->calls = st->calls;
            r->bytes = st->bytes;
            r->t_sum = r->t_min = r->t_max = ps_ticks_to_ns(st->ticks);
            memcpy(r->hist, st->hist, sizeof r->hist);
            total[op] += r->t_sum;
            calls[op] += st->calls;
            bytes[op] += st->bytes;
            seen[op] = 1;
        }
    }
    for (int op = 0; op < PS_NUM_OPS; op++) {
        if (!seen[op]) continue;
        if (s.nops + 1 >= cap) {
            cap *= 2;
            s.ops = realloc(s.ops, sizeof *s.ops * (size_t)cap);
        }
        op_rec_t *r = &s.ops[s.nops++];
        memset(r, 0, sizeof *r);
        strcpy(r->comm, "*");
        r->op = op;
        r->nranks = 1;
        r->rank_min = r->rank_max = ps_world_rank;
        r->calls = calls[op];
        r->bytes = bytes[op];
        r->t_sum = r->t_min = r->t_max = total[op];
        for (int c = 0; c < ps_ncomms; c++)
            if (ps_comms[c]->ops[op])
                for (int b = 0; b < PS_HIST_BINS; b++) r->hist[b] += ps_comms[c]->ops[op]->hist[b];
    }
    free(total); free(calls); free(bytes); free(seen);
    normalise(&s);
    return s;
}

static void send_set(const set_t *s, int to, MPI_Comm comm)
{
    int n[2] = {s->nops, s->ncomms};
    ps_send_idle(n, 2, MPI_INT, to, 1, comm);
    ps_send_idle(s->ops, (int)(sizeof *s->ops) * s->nops, MPI_BYTE, to, 2, comm);
    ps_send_idle(s->comms, (int)(sizeof *s->comms) * s->ncomms, MPI_BYTE, to, 3, comm);
}

static void recv_merge(set_t *s, int from, MPI_Comm comm)
{
    int n[2];
    ps_recv_idle(n, 2, MPI_INT, from, 1, comm);
    s->ops = realloc(s->ops, sizeof *s->ops * (size_t)(s->nops + n[0] + 1));
    s->comms = realloc(s->comms, sizeof *s->comms * (size_t)(s->ncomms + n[1] + 1));
    ps_recv_idle(s->ops + s->nops, (int)(sizeof *s->ops) * n[0], MPI_BYTE, from, 2, comm);
    ps_recv_idle(s->comms + s->ncomms, (int)(sizeof *s->comms) * n[1], MPI_BYTE, from, 3, comm);
    s->nops += n[0];
    s->ncomms += n[1];
    normalise(s);
}

static void field_u64(ps_fmt_t *f, uint64_t v)
{
    ps_fmt_char(f, '\t');
    ps_fmt_u64(f, v);
}

static void field_i64(ps_fmt_t *f, int64_t v)
{
    ps_fmt_char(f, '\t');
    ps_fmt_i64(f, v);
}

static void field_tsv(ps_fmt_t *f, const char *s)
{
    ps_fmt_char(f, '\t');
    ps_fmt_tsv(f, s);
}

static const char *sort_hosts; /* (qsort has no context argument) */

static int by_host(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    int c = strcmp(sort_hosts + (size_t)x * HOST_MAX, sort_hosts + (size_t)y * HOST_MAX);
    return c ? c : (x > y) - (x < y);
}

/* Without per-rank files (--per-rank summary, none) the ranks' times are tree.tsv's
 * statistics, and profile.tsv keeps of each rank only its host: one `host` line per host
 * with its ranks as ranges, so that the file does not grow with the ranks.  0 or -1. */
static int host_lines(ps_fmt_t *f, const char *hosts, int nranks)
{
    int *order = malloc((size_t)nranks * sizeof *order);
    if (!order) return -1;
    for (int r = 0; r < nranks; r++) order[r] = r;
    sort_hosts = hosts;
    qsort(order, (size_t)nranks, sizeof *order, by_host);
    for (int i = 0, j; i < nranks; i = j) {
        const char *host = hosts + (size_t)order[i] * HOST_MAX;
        for (j = i + 1; j < nranks && strcmp(hosts + (size_t)order[j] * HOST_MAX, host) == 0; j++) {}
        ps_fmt_str(f, "host");
        field_tsv(f, host);
        ps_fmt_char(f, '\t');
        ps_fmt_ranges(f, order + i, j - i);
        ps_fmt_char(f, '\n');
    }
    free(order);
    return 0;
}

/* Rank 0 writes profile.tsv through the profile directory's descriptor (output/outdir.c):
 * a temporary renamed into place, nothing left behind on failure.  rank_errors: each rank's
 * rank-file result, listed as `write_failed` lines.  Returns 0 or the error. */
static int write_profile(const set_t *s, const char *hosts, const uint64_t *per_rank, int nranks)
{
    static ps_outfile_t out;
    int fd = ps_outfile_begin(&out, PS_FILE_PROFILE, "profile.tsv");
    if (fd < 0) return ps_outfile_error(PS_FILE_PROFILE);
    size_t cap = 1 << 16;
    char *buf = malloc(cap);
    if (!buf) return ps_outfile_end(&out, ENOMEM);
    ps_fmt_t fmt = {buf, 0, cap, fd, 0}, *f = &fmt;
    extern char ps_mpi_library[];
    ps_fmt_str(f, "pathscope-profile\t" PS_FORMAT_VERSION "\n");
    ps_fmt_str(f, "run\t");
    ps_fmt_str(f, ps_run_id);
    ps_fmt_char(f, '\n');
    ps_fmt_flush(f); /* the run line first: a temporary always says whose it is */
    ps_fmt_str(f, "tool_version\t" PS_VERSION "\n");
    ps_fmt_str(f, "program"); field_tsv(f, ps_program_name()); ps_fmt_char(f, '\n');
    ps_fmt_str(f, "command");
    field_tsv(f, ps_options.command[0] ? ps_options.command : ps_program_name());
    ps_fmt_char(f, '\n');
    ps_fmt_str(f, "mpi_library"); field_tsv(f, ps_mpi_library); ps_fmt_char(f, '\n');
    ps_fmt_str(f, "nranks"); field_i64(f, ps_world_size); ps_fmt_char(f, '\n');
    ps_fmt_str(f, "start_unix_ns"); field_u64(f, ps_start_realtime_ns); ps_fmt_char(f, '\n');
    if (ps_per_rank_all()) {
        for (int r = 0; r < nranks; r++) {
            ps_fmt_str(f, "rank"); field_i64(f, r);
            field_tsv(f, hosts + (size_t)r * HOST_MAX);
            field_u64(f, per_rank[3 * r]);
            field_u64(f, per_rank[3 * r + 1]);
            ps_fmt_char(f, '\n');
        }
    } else if (host_lines(f, hosts, nranks) != 0) {
        free(buf);
        return ps_outfile_end(&out, ENOMEM);
    }
    for (int r = 0; r < nranks; r++) {
        int error = (int)(int64_t)per_rank[3 * r + 2];
        if (!error) continue;
        char name[40];
        snprintf(name, sizeof name, "ranks/rank-%06d.tsv", r);
        ps_fmt_str(f, "write_failed"); field_i64(f, r);
        field_tsv(f, name);
        field_tsv(f, ps_error_text(error));
        ps_fmt_char(f, '\n');
    }
    for (int i = 0; i < s->ncomms; i++) {
        const comm_rec_t *c = &s->comms[i];
        ps_fmt_str(f, "comm"); field_tsv(f, c->name);
        field_i64(f, c->size);
        field_i64(f, c->remote_size);
        field_tsv(f, c->parent);
        field_tsv(f, c->creator_op >= 0 ? ps_op_names[c->creator_op] : "-");
        field_i64(f, c->freed_all);
        ps_fmt_char(f, '\t');
        ps_fmt_str(f, c->members);
        field_tsv(f, c->topo);
        field_u64(f, c->sent_msgs);
        field_u64(f, c->sent_bytes);
        field_u64(f, c->recv_msgs);
        field_u64(f, c->recv_bytes);
        field_u64(f, c->freed_sends);
        field_u64(f, c->freed_recvs);
        field_u64(f, c->freed_recv_capacity);
        field_u64(f, c->failed_requests);
        field_u64(f, c->folded);
        field_u64(f, c->memberships);
        ps_fmt_char(f, '\n');
    }
    for (int i = 0; i < s->nops; i++) {
        const op_rec_t *r = &s->ops[i];
        ps_fmt_str(f, "op"); field_tsv(f, r->comm);
        ps_fmt_char(f, '\t');
        ps_fmt_str(f, ps_op_names[r->op]);
        field_u64(f, r->calls);
        field_u64(f, r->bytes);
        field_u64(f, r->t_sum);
        field_u64(f, r->t_min);
        field_i64(f, r->rank_min);
        field_u64(f, r->t_max);
        field_i64(f, r->rank_max);
        field_i64(f, r->nranks);
        ps_fmt_char(f, '\t');
        int first = 1;
        for (int b = 0; b < PS_HIST_BINS; b++) {
            if (!r->hist[b]) continue;
            if (!first) ps_fmt_char(f, ',');
            ps_fmt_u64(f, (uint64_t)b);
            ps_fmt_char(f, ':');
            ps_fmt_u64(f, r->hist[b]);
            first = 0;
        }
        if (first) ps_fmt_char(f, '-');
        ps_fmt_char(f, '\n');
    }
    ps_fmt_str(f, "end\n");
    ps_fmt_flush(f);
    int error = ps_outfile_end(&out, f->failed);
    free(buf);
    return error;
}

void ps_reduce_and_write(void)
{
    MPI_Comm comm;
    MPI_Request req;
    if (PMPI_Comm_idup(ps_world_comm, &comm, &req) != MPI_SUCCESS || ps_wait_idle(&req) != 0) {
        ps_rank_text_done(0, 0); /* no reduction at all: the rank file, whatever --per-rank says */
        ps_outfile_report(ps_world_rank);
        return;
    }
    PMPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    /* the call trees first, and ranks.tsv: a rank whose text is in neither (as --per-rank
     * asks) writes its file now, and profile.tsv below says whether that worked */
    int reduced = ps_tree_reduce(comm);
    ps_rank_text_done(reduced, ps_per_rank_all() && ps_ranks_file_write(comm));
    set_t s = collect_local();
    int rank = ps_world_rank, size = ps_world_size;
    for (int mask = 1; mask < size; mask <<= 1) {
        if (rank & mask) {
            send_set(&s, rank - mask, comm);
            break;
        }
        if (rank + mask < size) recv_merge(&s, rank + mask, comm);
    }
    char host[HOST_MAX] = "";
    gethostname(host, sizeof host - 1);
    char *hosts = rank == 0 ? calloc((size_t)size, HOST_MAX) : NULL;
    /* per rank: wall time, MPI time, and how its rank file went (written just before) */
    uint64_t mine[3] = {ps_wall_ns(), 0, (uint64_t)(int64_t)ps_outfile_error(PS_FILE_RANK)};
    mine[1] = ps_ticks_to_ns(ps_rank_mpi_ticks());
    uint64_t *per_rank = rank == 0 ? calloc((size_t)size * 3, sizeof(uint64_t)) : NULL;
    if (PMPI_Igather(host, HOST_MAX, MPI_CHAR, hosts, HOST_MAX, MPI_CHAR, 0, comm, &req) ==
        MPI_SUCCESS)
        ps_wait_idle(&req);
    if (PMPI_Igather(mine, 3, MPI_UINT64_T, per_rank, 3, MPI_UINT64_T, 0, comm, &req) ==
        MPI_SUCCESS)
        ps_wait_idle(&req);
    ps_outfile_report(rank); /* this rank's own failures, before the notice */
    if (rank == 0 && hosts && per_rank) {
        int profile_error = write_profile(&s, hosts, per_rank, size);
        ps_outfile_report(rank);
        int *failed = calloc((size_t)size, sizeof(int)), nfailed = 0;
        for (int r = 0; failed && r < size; r++)
            if (per_rank[3 * r + 2]) failed[nfailed++] = r;
        ps_outdir_notice(1, profile_error, failed, nfailed, size);
        free(failed);
    }
    free(hosts);
    free(per_rank);
    free(s.ops);
    free(s.comms);
    PMPI_Comm_free(&comm);
}
