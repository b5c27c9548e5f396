/* Async-signal-safe text output: everything here uses only write(2) and the caller's buffer,
 * so the rank writer can run from a fatal-signal handler as well as from MPI_Finalize. */
#include "pathscope.h"

#include <errno.h>
#include <unistd.h>

void ps_fmt_flush(ps_fmt_t *f)
{
    size_t off = 0;
    if (f->fd < 0) return;
    if (f->failed) { f->len = 0; return; } /* the file is discarded: stop writing */
    while (off < f->len) {
        ssize_t n = ps_sys_write(f->fd, f->buf + off, f->len - off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            f->failed = n < 0 && errno ? errno : EIO; /* ENOSPC, EDQUOT, EIO, ... */
            break;
        }
        off += (size_t)n;
    }
    f->len = 0;
}

void ps_fmt_char(ps_fmt_t *f, char c)
{
    if (f->len == f->cap) {
        if (f->fd < 0) { f->failed = 1; return; }
        ps_fmt_flush(f);
    }
    f->buf[f->len++] = c;
}

void ps_fmt_str(ps_fmt_t *f, const char *s)
{
    while (*s) ps_fmt_char(f, *s++);
}

void ps_fmt_tsv(ps_fmt_t *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '\t') { ps_fmt_char(f, '\\'); ps_fmt_char(f, 't'); }
        else if (*s == '\n') { ps_fmt_char(f, '\\'); ps_fmt_char(f, 'n'); }
        else if (*s == '\\') { ps_fmt_char(f, '\\'); ps_fmt_char(f, '\\'); }
        else ps_fmt_char(f, *s);
    }
}

void ps_fmt_u64(ps_fmt_t *f, uint64_t v)
{
    char tmp[24];
    int n = 0;
    do { tmp[n++] = (char)('0' + v % 10); v /= 10; } while (v);
    while (n) ps_fmt_char(f, tmp[--n]);
}

void ps_fmt_hex(ps_fmt_t *f, uint64_t v)
{
    char tmp[20];
    int n = 0;
    do {
        tmp[n++] = "0123456789abcdef"[v & 15];
        v >>= 4;
    } while (v);
    ps_fmt_str(f, "0x");
    while (n) ps_fmt_char(f, tmp[--n]);
}

void ps_fmt_line_u64(ps_fmt_t *f, const char *key, const uint64_t *v, int n)
{
    ps_fmt_str(f, key);
    for (int i = 0; i < n; i++) {
        ps_fmt_tab(f);
        ps_fmt_u64(f, v[i]);
    }
    ps_fmt_char(f, '\n');
}

void ps_fmt_i64(ps_fmt_t *f, int64_t v)
{
    if (v < 0) { ps_fmt_char(f, '-'); ps_fmt_u64(f, (uint64_t)(-(v + 1)) + 1); }
    else ps_fmt_u64(f, (uint64_t)v);
}

/* Length of the run at v[i]: consecutive ranks (a-b) or (format 2.11) at least three
 * non-negative ranks a fixed step >= 2 apart (a-b:s), so that the communicators of a
 * regular split (every second rank, a grid's column) are described in a few characters at
 * any rank count.  *step is 1 for consecutive ranks, 0 for a single rank. */
static int run_at(const int *v, int n, int i, int strides, int *step)
{
    int j = i;
    while (j + 1 < n && v[j + 1] == v[j] + 1) j++;
    if (j > i) { *step = 1; return j - i + 1; }
    if (strides && i + 2 < n && v[i] >= 0 && v[i + 1] > v[i] + 1 && v[i + 2] - v[i + 1] == v[i + 1] - v[i]) {
        int s = v[i + 1] - v[i];
        for (j = i + 2; j + 1 < n && v[j + 1] - v[j] == s; j++) {}
        *step = s;
        return j - i + 1;
    }
    *step = 0;
    return 1;
}

static void fmt_runs(ps_fmt_t *f, const int *v, int n, int strides)
{
    if (n == 0) { ps_fmt_char(f, '-'); return; }
    for (int i = 0, len, step; i < n; i += len) {
        len = run_at(v, n, i, strides, &step);
        if (i) ps_fmt_char(f, ',');
        ps_fmt_i64(f, v[i]);
        if (step) { ps_fmt_char(f, '-'); ps_fmt_i64(f, v[i + len - 1]); }
        if (step > 1) { ps_fmt_char(f, ':'); ps_fmt_i64(f, step); }
    }
}

void ps_fmt_ranges(ps_fmt_t *f, const int *v, int n) { fmt_runs(f, v, n, 1); }

/* for messages people read: no steps */
void ps_fmt_ranges_plain(ps_fmt_t *f, const int *v, int n) { fmt_runs(f, v, n, 0); }

void ps_fmt_seconds(ps_fmt_t *f, uint64_t ns)
{
    uint64_t tenths = (ns + 50000000ull) / 100000000ull;
    ps_fmt_u64(f, tenths / 10);
    ps_fmt_char(f, '.');
    ps_fmt_u64(f, tenths % 10);
    ps_fmt_str(f, " s");
}
