/* Unit tests of the async-signal-safe formatter and the histogram binning (ctest). */
#include <stdio.h>
#include <string.h>

#include "mpi_internal.h"

static int failures;
#define CHECK_STR(got, want)                                                              \
    do {                                                                                  \
        if (strcmp((got), (want)) != 0) {                                                 \
            fprintf(stderr, "%s:%d: got '%s', want '%s'\n", __FILE__, __LINE__, (got), (want)); \
            failures++;                                                                   \
        }                                                                                 \
    } while (0)
#define CHECK_INT(got, want)                                                              \
    do {                                                                                  \
        if ((long long)(got) != (long long)(want)) {                                      \
            fprintf(stderr, "%s:%d: got %lld, want %lld\n", __FILE__, __LINE__,           \
                    (long long)(got), (long long)(want));                                 \
            failures++;                                                                   \
        }                                                                                 \
    } while (0)

static const char *ranges(const int *v, int n)
{
    static char buf[256];
    ps_fmt_t f = {buf, 0, sizeof buf - 1, -1, 0};
    ps_fmt_ranges(&f, v, n);
    buf[f.len] = 0;
    return buf;
}

int main(void)
{
    int a[] = {0, 1, 2, 3}, b[] = {0, 2, 3, 4, 7, 9, 10}, c[] = {5}, d[] = {3, 2, 1};
    CHECK_STR(ranges(a, 4), "0-3");
    CHECK_STR(ranges(b, 7), "0,2-4,7,9-10");
    CHECK_STR(ranges(c, 1), "5");
    CHECK_STR(ranges(d, 3), "3,2,1"); /* rank order is kept, not sorted */
    CHECK_STR(ranges(a, 0), "-");
    /* (2.11) three or more ranks a fixed step apart; two are listed; the step must be >= 2 */
    int e[] = {0, 2, 4, 6, 7, 8, 12}, g[] = {1, 5, 9, 13}, h[] = {0, 3, 4, 5};
    int k[] = {-32766, 0, 32766, 65532}, m[] = {8, 6, 4, 2}, p2[] = {0, 4, 8, 9, 13, 17, 21};
    CHECK_STR(ranges(e, 7), "0-6:2,7-8,12");
    CHECK_STR(ranges(g, 4), "1-13:4");
    CHECK_STR(ranges(h, 4), "0,3-5");
    CHECK_STR(ranges(k, 4), "-32766,0-65532:32766"); /* MPI_UNDEFINED never starts a step */
    CHECK_STR(ranges(m, 4), "8,6,4,2");                /* steps go up only */
    CHECK_STR(ranges(p2, 7), "0-8:4,9-21:4");

    char buf[96];
    ps_fmt_t f = {buf, 0, sizeof buf - 1, -1, 0};
    ps_fmt_u64(&f, 18446744073709551615ull);
    ps_fmt_char(&f, ' ');
    ps_fmt_i64(&f, -9223372036854775807ll - 1);
    ps_fmt_char(&f, ' ');
    ps_fmt_tsv(&f, "a\tb\nc\\");
    ps_fmt_char(&f, ' ');
    ps_fmt_hex(&f, 0);
    ps_fmt_char(&f, ' ');
    ps_fmt_hex(&f, 0x7fab12ull);
    buf[f.len] = 0;
    CHECK_STR(buf, "18446744073709551615 -9223372036854775808 a\\tb\\nc\\\\ 0x0 0x7fab12");

    /* a buffer without a file descriptor fails instead of overflowing */
    char tiny[4];
    ps_fmt_t t = {tiny, 0, sizeof tiny, -1, 0};
    ps_fmt_str(&t, "overflow");
    CHECK_INT(t.failed, 1);
    CHECK_INT(t.len, 4);

    /* histogram bins: 0 -> 0; [2^(k-1), 2^k) -> k; the last bin is open-ended */
    CHECK_INT(ps_hist_bin(0), 0);
    CHECK_INT(ps_hist_bin(1), 1);
    CHECK_INT(ps_hist_bin(2), 2);
    CHECK_INT(ps_hist_bin(3), 2);
    CHECK_INT(ps_hist_bin(4), 3);
    CHECK_INT(ps_hist_bin(400), 9);
    CHECK_INT(ps_hist_bin(1ull << 40), 41);
    CHECK_INT(ps_hist_bin(~0ull), PS_HIST_BINS - 1);

    if (failures) fprintf(stderr, "%d failure(s)\n", failures);
    return failures != 0;
}
