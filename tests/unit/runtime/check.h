/* The runtime unit tests' checks: each failed check prints where and what, main returns
 * failures != 0.  A test that cannot run here exits with PS_SKIP (ctest: SKIP_RETURN_CODE). */
#ifndef PS_UNIT_CHECK_H
#define PS_UNIT_CHECK_H
#include <stdio.h>
#include <string.h>

#define PS_SKIP 77

static int failures;

#define CHECK(cond)                                                                       \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "%s:%d: failed: %s\n", __FILE__, __LINE__, #cond);            \
            failures++;                                                                   \
        }                                                                                 \
    } while (0)
#define CHECK_INT(got, want)                                                              \
    do {                                                                                  \
        long long got_ = (long long)(got), want_ = (long long)(want);                     \
        if (got_ != want_) {                                                              \
            fprintf(stderr, "%s:%d: %s: got %lld, want %lld\n", __FILE__, __LINE__, #got, \
                    got_, want_);                                                         \
            failures++;                                                                   \
        }                                                                                 \
    } while (0)
#define CHECK_STR(got, want)                                                              \
    do {                                                                                  \
        const char *got_ = (got), *want_ = (want);                                        \
        if (strcmp(got_, want_) != 0) {                                                   \
            fprintf(stderr, "%s:%d: %s: got '%s', want '%s'\n", __FILE__, __LINE__, #got, \
                    got_, want_);                                                         \
            failures++;                                                                   \
        }                                                                                 \
    } while (0)
#endif
