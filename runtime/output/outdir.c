/* The profile directory and every file the runtime creates in it.
 *
 * pathscope may run as root in a directory other users can write to (a shared scratch area),
 * and inside an application that closes descriptors it did not open.  So (docs/architecture.md,
 * "Files and directories"):
 *  - The directory and its ranks/ are opened once, at load time, as directory descriptors
 *    (never through a symbolic link), checked (owned by us or root, not writable by others
 *    unless sticky, a path short enough for every name we create under it) and moved out of
 *    the application's way (core/ownfd.c).  Before each later use their identity is checked;
 *    a descriptor the application closed is reopened by path and used only if it is the same
 *    directory.
 *  - Directories we create are created one component at a time relative to their parent's
 *    descriptor and must be ours when opened: nobody can slip a link or a directory of their
 *    own in between.  Mode 0755 under the umask: never wider than 0777 & ~umask, never
 *    writable by others.
 *  - Every file is created relative to those descriptors under an unpredictable temporary
 *    name (".NAME.<16 hex digits from getrandom>", O_CREAT|O_EXCL|O_NOFOLLOW, 0644 under the
 *    umask), written, closed, and renamed over NAME (rename replaces a link, never follows
 *    it).  Any failure (a write, the close, the rename) removes the temporary; the previous
 *    file of that name stays.  Failures are recorded per file and each rank prints its own at
 *    the end of the run.
 *  - A run never mixes with another: at start the directory may hold no profile of another
 *    run (by the `run` line of its files); PATHSCOPE_FORCE=on deletes those files instead,
 *    and never a file of this run (it is first moved aside, then checked).
 *
 * Everything here is async-signal-safe (the rank file is written from fatal-signal handlers,
 * and a program that never called MPI_Init creates its default directory there): raw system
 * calls, static storage, our own formatting.  Only ps_outdir_notice uses stdio.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pathscope.h"

/* The longest name created under a profile directory: a spawned job's rank file temporary
 * (pid at most 4194304 on Linux, rank at most INT_MAX).  The directory's absolute path plus
 * '/' plus this must fit in PATH_MAX with its NUL, so that every file can also be named by
 * path (the reader does). */
#define LONGEST_NAME "spawned-4194304/ranks/.rank-2147483647.tsv.0123456789abcdef"
#define DIR_PATH_MAX (PS_PATH_MAX - 2 - (int)(sizeof LONGEST_NAME - 1))
#define NEW_DIR_MODE 0755
#define STALE_TEMP_S 60 /* a temporary without a run line older than this is an orphan */

/* pathscope's own reasons, beside errno values (ps_error_text) */
enum {
    ERR_DIR_REMOVED = -1,
    ERR_DIR_REPLACED = -2,
    ERR_FD_TAKEN = -3,
    ERR_SYMLINK = -4,
    ERR_NOT_OURS = -5,
    ERR_OPEN_TO_OTHERS = -6,
    ERR_OTHER_RUN = -7,
    ERR_NOT_DIR = -8,
    ERR_TOO_LONG = -9,
    ERR_DIR_GONE = -10,
    ERR_COLLECTIVE = PS_ERR_COLLECTIVE,
};

/* ---- raw system calls -------------------------------------------------------------------- */
static int sys_openat(int dir, const char *name, int flags, int mode)
{
    return (int)syscall(SYS_openat, dir, name, flags, mode);
}
static int sys_mkdirat(int dir, const char *name, int mode) { return (int)syscall(SYS_mkdirat, dir, name, mode); }
static int sys_fstat(int fd, struct stat *st) { return (int)syscall(SYS_fstat, fd, st); }
static int sys_lstatat(int dir, const char *name, struct stat *st)
{
    return (int)syscall(SYS_newfstatat, dir, name, st, AT_SYMLINK_NOFOLLOW);
}
static int sys_unlinkat(int dir, const char *name) { return (int)syscall(SYS_unlinkat, dir, name, 0); }
static int sys_renameat(int dir, const char *from, const char *to)
{
    return (int)syscall(SYS_renameat, dir, from, dir, to);
}
static int sys_rename_noreplace(int dir, const char *from, const char *to)
{
    return (int)syscall(SYS_renameat2, dir, from, dir, to, 1 /* RENAME_NOREPLACE */);
}

/* ---- the two directories ----------------------------------------------------------------- */
typedef struct {
    ps_ownfd_t own;
    int opened;  /* own describes the directory (own.fd may have been lost since) */
    int error;   /* why there is none (ps_error_text) */
} dir_t;

static dir_t top = {{-1, 0, 0, 0}, 0, 0}, ranks = {{-1, 0, 0, 0}, 0, 0};
static char top_path[PS_PATH_MAX]; /* absolute: to reopen top after the application closed it */

const char *ps_error_text(int error)
{
    switch (error) {
    case ERR_DIR_REMOVED: return "the output directory was removed during the run";
    case ERR_DIR_REPLACED: return "the output directory was replaced during the run";
    case ERR_DIR_GONE: return "the output directory was moved or removed during the run";
    case ERR_FD_TAKEN: return "the application closed pathscope's file descriptor";
    case ERR_SYMLINK: return "the output location is a symbolic link";
    case ERR_NOT_OURS: return "the output directory belongs to another user";
    case ERR_OPEN_TO_OTHERS: return "the output directory is writable by others";
    case ERR_OTHER_RUN: return "the output directory holds another run's profile";
    case ERR_NOT_DIR: return "the output location is not a directory";
    case ERR_TOO_LONG: return "the output directory path is too long";
    case ERR_COLLECTIVE:
        return "not every rank could write it with MPI-IO (each rank wrote its own file in ranks/)";
    default: break;
    }
    const char *text = error > 0 ? strerrordesc_np(error) : NULL;
    return text ? text : "unknown error";
}

/* The directory's descriptor, its identity checked; reopened if the application closed it. */
static int dir_fd(dir_t *d, int *error)
{
    if (!d->opened) {
        *error = d->error ? d->error : ENOENT;
        return -1;
    }
    if (ps_fd_owned(&d->own)) return d->own.fd;
    int parent = AT_FDCWD;
    const char *name = top_path;
    if (d == &ranks) {
        parent = dir_fd(&top, error);
        if (parent < 0) return -1;
        name = "ranks";
    }
    int fd = sys_openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
    if (fd < 0) {
        *error = errno == ENOENT ? ERR_DIR_GONE : errno;
        return -1;
    }
    struct stat st;
    if (sys_fstat(fd, &st) != 0 || (uint64_t)st.st_dev != d->own.dev || (uint64_t)st.st_ino != d->own.ino) {
        ps_sys_close(fd);
        *error = ERR_DIR_REPLACED;
        return -1;
    }
    ps_ownfd_t fresh;
    fd = ps_fd_adopt(fd, &fresh);
    if (fresh.fd < 0) {
        ps_sys_close(fd);
        *error = EBADF;
        return -1;
    }
    d->own = fresh;
    return fd;
}

const char *ps_outdir_path(void) { return top.opened ? top_path : ps_outdir; }

int ps_outdir_ranks_fd(void)
{
    int error;
    return dir_fd(&ranks, &error);
}

static int removed(int dirfd)
{
    struct stat st;
    return sys_fstat(dirfd, &st) == 0 && st.st_nlink == 0;
}

/* ---- messages ---------------------------------------------------------------------------- */
static void fmt_octal(ps_fmt_t *f, unsigned v)
{
    char d[12];
    int n = 0;
    do { d[n++] = (char)('0' + (v & 7)); v >>= 3; } while (v);
    ps_fmt_char(f, '0');
    while (n) ps_fmt_char(f, d[--n]);
}

static void say_errno(ps_fmt_t *e, const char *shown, int error)
{
    ps_fmt_str(e, "cannot write to output directory '");
    ps_fmt_str(e, shown);
    ps_fmt_str(e, "': ");
    ps_fmt_str(e, ps_error_text(error));
}

static int say_symlink(ps_fmt_t *e, const char *shown)
{
    ps_fmt_str(e, "output location '");
    ps_fmt_str(e, shown);
    ps_fmt_str(e, "' is a symbolic link (pathscope does not follow links in the output directory)");
    return ERR_SYMLINK;
}

static int say_not_dir(ps_fmt_t *e, const char *shown)
{
    ps_fmt_str(e, "output location '");
    ps_fmt_str(e, shown);
    ps_fmt_str(e, "' exists and is not a directory");
    return ERR_NOT_DIR;
}

/* Owned by us or root, and not writable by others unless sticky.  0 or an error code. */
static int check_dir(int fd, const char *shown, int made_by_us, ps_fmt_t *e)
{
    struct stat st;
    if (sys_fstat(fd, &st) != 0) {
        int error = errno;
        say_errno(e, shown, error);
        return error;
    }
    uid_t me = geteuid();
    if (st.st_uid != me && (st.st_uid != 0 || made_by_us)) {
        ps_fmt_str(e, "output directory '");
        ps_fmt_str(e, shown);
        ps_fmt_str(e, "' belongs to another user (uid ");
        ps_fmt_u64(e, (uint64_t)st.st_uid);
        ps_fmt_str(e, "): pathscope writes only into directories owned by you or root");
        return ERR_NOT_OURS;
    }
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) {
        ps_fmt_str(e, "output directory '");
        ps_fmt_str(e, shown);
        ps_fmt_str(e, "' is writable by others (mode ");
        fmt_octal(e, (unsigned)(st.st_mode & 07777));
        ps_fmt_str(e, ") without the sticky bit: remove their write permission (chmod go-w) or "
                      "choose another directory");
        return ERR_OPEN_TO_OTHERS;
    }
    return 0;
}

/* ---- opening the directory --------------------------------------------------------------- */
static char walk[PS_PATH_MAX];

/* Opens path as a directory, creating the missing components.  The existing part of the path
 * is taken as it is (links in it are followed, as for any path); the last component must not
 * be a link; each component we create is created relative to its parent's descriptor and must
 * be ours when we open it.  *existed: the last component was there before.  Returns the
 * descriptor, or -1 with *error and the message in e. */
static int open_dir_path(const char *path, const char *shown, int *existed, int *error, ps_fmt_t *e)
{
    size_t n = strlen(path);
    memcpy(walk, path, n + 1);
    while (n > 1 && walk[n - 1] == '/') walk[--n] = 0;
    /* every component must fit NAME_MAX: checked before anything is created */
    for (char *p = walk; *p;) {
        size_t len = strcspn(p, "/");
        if (len > 255) {
            say_errno(e, shown, *error = ENAMETOOLONG);
            return -1;
        }
        p += len;
        while (*p == '/') p++;
    }
    int cur = sys_openat(AT_FDCWD, walk[0] == '/' ? "/" : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
    if (cur < 0) {
        say_errno(e, shown, *error = errno);
        return -1;
    }
    char *p = walk;
    while (*p == '/') p++;
    *existed = 1;
    if (!*p) return cur; /* "/" */
    for (;;) {
        char *name = p;
        size_t len = strcspn(p, "/");
        char *next = p + len;
        while (*next == '/') next++;
        int last = *next == 0;
        name[len] = 0;
        int flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC | (last ? O_NOFOLLOW : 0);
        int fd = sys_openat(cur, name, flags, 0);
        int made = 0;
        if (fd < 0 && errno == ENOENT) {
            if (sys_mkdirat(cur, name, NEW_DIR_MODE) == 0) made = 1;
            else if (errno != EEXIST) {
                *error = errno;
                ps_sys_close(cur);
                say_errno(e, shown, *error);
                return -1;
            }
            /* (EEXIST: another rank made it just now; take it as existing) */
            fd = sys_openat(cur, name, flags | (made ? O_NOFOLLOW : 0), 0);
        }
        if (fd < 0) {
            int err = errno;
            struct stat st;
            if (last && (err == ELOOP || err == ENOTDIR) && sys_lstatat(cur, name, &st) == 0)
                *error = S_ISLNK(st.st_mode) ? say_symlink(e, shown) : say_not_dir(e, shown);
            else
                say_errno(e, shown, *error = err);
            ps_sys_close(cur);
            return -1;
        }
        ps_sys_close(cur);
        cur = fd;
        if (made) {
            int rc = check_dir(cur, shown, 1, e); /* replaced between mkdir and open? */
            if (rc) {
                *error = rc;
                ps_sys_close(cur);
                return -1;
            }
        }
        if (last) {
            *existed = !made;
            return cur;
        }
        p = next;
    }
}

/* ---- other runs' files ------------------------------------------------------------------- */
enum { FILE_ABSENT, FILE_OURS, FILE_OTHER_RUN, FILE_NO_RUN };

/* Whose run a file belongs to, from its second line `run<TAB>ID`.  A file without that line
 * (format 2.2 and older, an empty temporary) or anything but a regular file: FILE_NO_RUN. */
static int file_run(int dirfd, const char *name)
{
    int fd = sys_openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0);
    if (fd < 0) return errno == ENOENT ? FILE_ABSENT : FILE_NO_RUN;
    struct stat st;
    char head[160];
    long n = 0;
    if (sys_fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) n = ps_sys_read(fd, head, sizeof head - 1);
    ps_sys_close(fd);
    head[n > 0 ? n : 0] = 0;
    const char *line = strchr(head, '\n');
    if (!line || strncmp(line + 1, "run\t", 4) != 0) return FILE_NO_RUN;
    const char *id = line + 5;
    if (strlen(id) < 33 || id[32] != '\n') return FILE_NO_RUN;
    return memcmp(id, ps_run_id, 32) == 0 ? FILE_OURS : FILE_OTHER_RUN;
}

static void random_hex(char *out, int ndigits)
{
    static const char hex[] = "0123456789abcdef";
    static uint64_t counter;
    uint64_t r[2] = {0, 0};
    if (syscall(SYS_getrandom, r, sizeof r, 1 /* GRND_NONBLOCK */) != (long)sizeof r) {
        /* no entropy yet (early boot): still unguessable enough for a name taken with O_EXCL */
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        r[0] ^= (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid() << 32 ^ ++counter;
        r[1] ^= (uint64_t)ts.tv_sec * 0xbf58476d1ce4e5b9ull ^ (uint64_t)(uintptr_t)&ts;
    }
    for (int i = 0; i < ndigits; i++) out[i] = hex[(r[i / 16] >> (4 * (i % 16))) & 15];
    out[ndigits] = 0;
}

/* ".NAME.<16 hex digits>" */
static void temp_name(char *out, size_t cap, const char *name)
{
    ps_fmt_t f = {out, 0, cap - 1, -1, 0};
    char r[17];
    random_hex(r, 16);
    ps_fmt_char(&f, '.');
    ps_fmt_str(&f, name);
    ps_fmt_char(&f, '.');
    ps_fmt_str(&f, r);
    out[f.len] = 0;
}

/* Deletes NAME if it is another run's file.  It is first moved aside under a temporary name,
 * then read: a file of this run that another rank renamed there in between is put back. */
static void remove_other_run_file(int dirfd, const char *name)
{
    char grabbed[80];
    temp_name(grabbed, sizeof grabbed, name);
    if (sys_renameat(dirfd, name, grabbed) != 0) return; /* gone already (another rank) */
    if (file_run(dirfd, grabbed) == FILE_OURS && sys_rename_noreplace(dirfd, grabbed, name) == 0) return;
    sys_unlinkat(dirfd, grabbed);
}

/* A name of our temporaries' form: deleted when it is another run's, not a regular file (we
 * create only those), or an orphan without a run line (its writer was killed before writing
 * the file's first lines, which it writes at once). */
static void remove_other_run_temp(int dirfd, const char *name)
{
    struct stat st;
    if (sys_lstatat(dirfd, name, &st) != 0) return;
    int run = S_ISREG(st.st_mode) ? file_run(dirfd, name) : FILE_OTHER_RUN;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    if (run == FILE_OTHER_RUN || (run == FILE_NO_RUN && st.st_mtim.tv_sec + STALE_TEMP_S < now.tv_sec))
        sys_unlinkat(dirfd, name);
}

static int has_prefix(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }
static int has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* rank-<digits>.tsv, optionally followed by suffix */
static int is_rank_name(const char *s, const char *suffix)
{
    if (!has_prefix(s, "rank-")) return 0;
    const char *d = s + 5;
    size_t nd = strspn(d, "0123456789");
    return nd > 0 && strncmp(d + nd, ".tsv", 4) == 0 && strcmp(d + nd + 4, suffix) == 0;
}

typedef struct { int profile, tree, ranks, symbols, rank_files; } found_t;

/* Every entry of dir, one at a time (getdents64 into a static buffer). */
struct linux_dirent64_s {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

static void scan_dir(int dirfd, int is_ranks, int force, found_t *found)
{
    static char buf[8192] __attribute__((aligned(8)));
    int fd = sys_openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
    if (fd < 0) return;
    for (;;) {
        long n = syscall(SYS_getdents64, fd, buf, sizeof buf);
        if (n <= 0) break;
        for (long off = 0; off < n;) {
            struct linux_dirent64_s *d = (struct linux_dirent64_s *)(buf + off);
            off += d->d_reclen;
            const char *name = d->d_name;
            if (is_ranks) {
                if (is_rank_name(name, "")) {
                    int run = file_run(dirfd, name);
                    if (run == FILE_OTHER_RUN || run == FILE_NO_RUN) {
                        if (force) remove_other_run_file(dirfd, name);
                        else found->rank_files++;
                    }
                } else if (force && has_prefix(name, ".rank-")) {
                    remove_other_run_temp(dirfd, name);
                } else if (force && is_rank_name(name, ".tmp")) { /* format 2.2's temporaries */
                    sys_unlinkat(dirfd, name);
                }
            } else if (strcmp(name, "profile.tsv") == 0 || strcmp(name, "tree.tsv") == 0 ||
                       strcmp(name, "ranks.tsv") == 0) {
                int run = file_run(dirfd, name);
                if (run == FILE_OTHER_RUN || run == FILE_NO_RUN) {
                    if (force) remove_other_run_file(dirfd, name);
                    else if (name[0] == 'p') found->profile = 1;
                    else if (name[0] == 't') found->tree = 1;
                    else found->ranks = 1;
                }
            } else if (strcmp(name, "symbols.tsv") == 0) {
                /* written by `pathscope report` after a run: never this run's at its start */
                if (force) sys_unlinkat(dirfd, name);
                else found->symbols = 1;
            } else if (force && (has_prefix(name, ".profile.tsv.") || has_prefix(name, ".tree.tsv.") ||
                                 has_prefix(name, ".ranks.tsv."))) {
                remove_other_run_temp(dirfd, name);
            } else if (force && (strcmp(name, "profile.tsv.tmp") == 0 || has_prefix(name, ".symbols.tsv.") ||
                                 (has_prefix(name, "symbols.tsv.") && has_suffix(name, ".tmp")))) {
                sys_unlinkat(dirfd, name);
            }
        }
    }
    ps_sys_close(fd);
}

/* 0, or ERR_OTHER_RUN with the message. */
static int check_other_runs(int topfd, int ranksfd, int force, const char *shown, ps_fmt_t *e)
{
    found_t found = {0, 0, 0, 0, 0};
    scan_dir(topfd, 0, force, &found);
    if (ranksfd >= 0) scan_dir(ranksfd, 1, force, &found);
    if (!found.profile && !found.tree && !found.ranks && !found.symbols && !found.rank_files) return 0;
    ps_fmt_str(e, "output directory '");
    ps_fmt_str(e, shown);
    ps_fmt_str(e, "' holds another run's profile (");
    const char *sep = "";
    if (found.profile) { ps_fmt_str(e, "profile.tsv"); sep = ", "; }
    if (found.tree) { ps_fmt_str(e, sep); ps_fmt_str(e, "tree.tsv"); sep = ", "; }
    if (found.ranks) { ps_fmt_str(e, sep); ps_fmt_str(e, "ranks.tsv"); sep = ", "; }
    if (found.symbols) { ps_fmt_str(e, sep); ps_fmt_str(e, "symbols.tsv"); sep = ", "; }
    if (found.rank_files) {
        ps_fmt_str(e, sep);
        ps_fmt_u64(e, (uint64_t)found.rank_files);
        ps_fmt_str(e, found.rank_files == 1 ? " rank file" : " rank files");
    }
    ps_fmt_str(e, "): choose another directory, or add --force (PATHSCOPE_FORCE=on) to delete "
                  "those files first");
    return ERR_OTHER_RUN;
}

static void set_dir(dir_t *d, int fd)
{
    if (d->opened) ps_fd_release(&d->own); /* the previous one (a spawned job's subdirectory) */
    ps_fd_adopt(fd, &d->own);
    d->opened = d->own.fd >= 0;
    d->error = d->opened ? 0 : EBADF;
}

static char shown_ranks[PS_PATH_MAX + 16];
static char abs_path[PS_PATH_MAX];

int ps_outdir_open(const char *dir, int flags, char *err, size_t errlen)
{
    ps_fmt_t e = {err, 0, errlen - 1, -1, 0};
    int error = 0, existed = 0;
    size_t n = strlen(dir);
    /* the absolute path: its length decides, and a descriptor the application closes is
     * reopened by it */
    size_t cwd_len = 0;
    if (dir[0] != '/') {
        long got = syscall(SYS_getcwd, abs_path, sizeof abs_path);
        if (got < 0 && errno != ERANGE && errno != ENAMETOOLONG) {
            say_errno(&e, dir, error = errno); /* e.g. the working directory was removed */
            err[e.len] = 0;
            return error;
        }
        cwd_len = got > 0 ? (size_t)got - 1 : PS_PATH_MAX; /* (got counts the NUL) */
    }
    size_t total = cwd_len + (cwd_len ? 1 : 0) + n;
    if (total > (size_t)DIR_PATH_MAX) {
        ps_fmt_str(&e, "output directory path too long: ");
        if (cwd_len >= PS_PATH_MAX) ps_fmt_str(&e, "more than 4095");
        else ps_fmt_u64(&e, (uint64_t)total);
        ps_fmt_str(&e, " bytes as an absolute path, at most ");
        ps_fmt_u64(&e, (uint64_t)DIR_PATH_MAX);
        ps_fmt_str(&e, " (every file pathscope writes under it must fit in PATH_MAX, 4096)");
        err[e.len] = 0;
        return ERR_TOO_LONG;
    }
    if (cwd_len) {
        abs_path[cwd_len] = '/';
        memcpy(abs_path + cwd_len + 1, dir, n + 1);
    } else {
        memcpy(abs_path, dir, n + 1);
    }
    int fd = open_dir_path(dir, dir, &existed, &error, &e);
    if (fd < 0) goto fail;
    if ((error = check_dir(fd, dir, 0, &e)) != 0) goto fail_fd;
    {
        ps_fmt_t s = {shown_ranks, 0, sizeof shown_ranks - 1, -1, 0};
        ps_fmt_str(&s, dir);
        ps_fmt_str(&s, n && dir[n - 1] == '/' ? "ranks" : "/ranks");
        shown_ranks[s.len] = 0;
    }
    int rfd = sys_openat(fd, "ranks", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
    if (rfd < 0 && errno != ENOENT) {
        int e2 = errno;
        struct stat st;
        if ((e2 == ELOOP || e2 == ENOTDIR) && sys_lstatat(fd, "ranks", &st) == 0)
            error = S_ISLNK(st.st_mode) ? say_symlink(&e, shown_ranks) : say_not_dir(&e, shown_ranks);
        else
            say_errno(&e, shown_ranks, error = e2);
        goto fail_fd;
    }
    if (rfd >= 0 && (error = check_dir(rfd, shown_ranks, 0, &e)) != 0) goto fail_both;
    if (existed && (flags & PS_OUTDIR_CHECK_RUNS) &&
        (error = check_other_runs(fd, rfd, flags & PS_OUTDIR_FORCE, dir, &e)) != 0)
        goto fail_both;
    if (rfd < 0) {
        int made = sys_mkdirat(fd, "ranks", NEW_DIR_MODE) == 0;
        if (!made && errno != EEXIST) {
            say_errno(&e, shown_ranks, error = errno);
            goto fail_fd;
        }
        rfd = sys_openat(fd, "ranks", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
        if (rfd < 0) {
            say_errno(&e, shown_ranks, error = errno);
            goto fail_fd;
        }
        if ((error = check_dir(rfd, shown_ranks, made, &e)) != 0) goto fail_both;
    }
    memcpy(top_path, abs_path, strlen(abs_path) + 1);
    set_dir(&top, fd);
    set_dir(&ranks, rfd);
    err[0] = 0;
    return 0;
fail_both:
    ps_sys_close(rfd);
fail_fd:
    ps_sys_close(fd);
fail:
    err[e.len] = 0;
    return error ? error : EIO;
}

int ps_outdir_create_fresh(char *base, size_t cap)
{
    size_t n = strlen(base);
    for (int i = 0; i < 1000; i++) {
        if (i) {
            ps_fmt_t f = {base + n, 0, cap - n - 1, -1, 0};
            ps_fmt_char(&f, '.');
            ps_fmt_u64(&f, (uint64_t)i);
            if (f.failed) return ENAMETOOLONG;
            base[n + f.len] = 0;
        }
        if (sys_mkdirat(AT_FDCWD, base, NEW_DIR_MODE) == 0) return 0;
        if (errno != EEXIST) return errno;
    }
    return EEXIST;
}

void ps_outdir_unusable(int error)
{
    top.opened = ranks.opened = 0;
    top.error = ranks.error = error ? error : EIO;
}

/* ---- files ------------------------------------------------------------------------------- */
typedef struct {
    int error;     /* of the last attempt; 0 when it succeeded */
    int reported;  /* that error was printed */
    int written;   /* a complete version exists (an earlier write of this process) */
    char shown[48];
} file_state_t;

static file_state_t files[PS_FILE_COUNT];

static void record(int file, int error)
{
    files[file].error = error;
    files[file].reported = error == 0;
    if (error) atomic_fetch_add(&ps_counters.write_errors, 1);
    else files[file].written = 1;
}

int ps_outfile_error(int file) { return files[file].error; }

int ps_outfile_begin(ps_outfile_t *o, int file, const char *name)
{
    o->file = file;
    o->fd = o->dirfd = -1;
    o->own.fd = -1;
    ps_fmt_t f = {o->name, 0, sizeof o->name - 1, -1, 0};
    ps_fmt_str(&f, name);
    o->name[f.len] = 0;
    ps_fmt_t s = {files[file].shown, 0, sizeof files[file].shown - 1, -1, 0};
    if (file == PS_FILE_RANK) ps_fmt_str(&s, "ranks/");
    ps_fmt_str(&s, name);
    files[file].shown[s.len] = 0;
    int error = 0;
    int dirfd = dir_fd(file == PS_FILE_RANK ? &ranks : &top, &error);
    if (dirfd < 0) {
        record(file, error);
        return -1;
    }
    int fd = -1;
    for (int tries = 0; tries < 16 && fd < 0; tries++) {
        temp_name(o->tmp, sizeof o->tmp, o->name);
        fd = sys_openat(dirfd, o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        error = errno;
        record(file, error == ENOENT && removed(dirfd) ? ERR_DIR_REMOVED : error);
        return -1;
    }
    o->dirfd = dirfd;
    o->fd = ps_fd_adopt(fd, &o->own);
    return o->fd;
}

int ps_outfile_end(ps_outfile_t *o, int write_error)
{
    if (o->dirfd < 0) return files[o->file].error;
    int error = write_error;
    if (!ps_fd_owned(&o->own)) {
        if (!error) error = ERR_FD_TAKEN; /* not ours any more: never close it */
    } else if (ps_sys_close(o->own.fd) != 0 && errno != EINTR && !error) {
        error = errno; /* a delayed write error (NFS, quotas) */
    }
    o->own.fd = o->fd = -1;
    int dir_error = 0;
    int dirfd = dir_fd(o->file == PS_FILE_RANK ? &ranks : &top, &dir_error);
    if (dirfd < 0) {
        record(o->file, error ? error : dir_error);
        return files[o->file].error;
    }
    if (!error && sys_renameat(dirfd, o->tmp, o->name) != 0) error = errno;
    if (error) {
        sys_unlinkat(dirfd, o->tmp);
        if (error == ENOENT && removed(dirfd)) error = ERR_DIR_REMOVED;
    }
    record(o->file, error);
    return error;
}

void ps_outfile_report(int rank)
{
    for (int i = 0; i < PS_FILE_COUNT; i++) {
        file_state_t *s = &files[i];
        if (!s->error || s->reported) continue;
        s->reported = 1;
        static char line[512];
        ps_fmt_t f = {line, 0, sizeof line - 2, -1, 0};
        ps_fmt_str(&f, "pathscope: rank ");
        ps_fmt_i64(&f, rank);
        ps_fmt_str(&f, ": profile not written: ");
        ps_fmt_str(&f, s->shown);
        ps_fmt_str(&f, ": ");
        ps_fmt_str(&f, ps_error_text(s->error));
        if (s->written) ps_fmt_str(&f, " (the version written earlier is kept)");
        line[f.len++] = '\n';
        ps_sys_write(2, line, f.len);
    }
}

/* ---- the notice at the end --------------------------------------------------------------- */
void ps_outdir_notice(int has_profile, int profile_error, const int *failed, int nfailed, int nranks)
{
    if (ps_option_on(ps_options.quiet) || !ps_outdir[0]) return;
    int tree_error = files[PS_FILE_TREE].error;
    if (!(has_profile && profile_error) && !tree_error && nfailed == 0) {
        fprintf(stderr, "pathscope: profile written to %s (view: pathscope report %s)\n", ps_outdir, ps_outdir);
        return;
    }
    static char list[8192];
    ps_fmt_t f = {list, 0, sizeof list - 4, -1, 0};
    if (has_profile && profile_error) ps_fmt_str(&f, "profile.tsv");
    if (tree_error) {
        if (f.len) ps_fmt_str(&f, ", ");
        ps_fmt_str(&f, "tree.tsv");
    }
    if (nfailed) {
        if (f.len) ps_fmt_str(&f, ", ");
        if (nfailed == 1) {
            ps_fmt_str(&f, "the rank file of rank ");
            ps_fmt_i64(&f, failed[0]);
        } else if (nfailed == nranks) {
            ps_fmt_str(&f, "the rank files of all ");
            ps_fmt_i64(&f, nranks);
            ps_fmt_str(&f, " ranks");
        } else {
            ps_fmt_str(&f, "the rank files of ranks ");
            ps_fmt_ranges_plain(&f, failed, nfailed);
        }
    }
    if (f.failed) ps_fmt_str(&f, "...");
    list[f.len] = 0;
    int nothing = nfailed == nranks && (!has_profile || profile_error) &&
                  !files[PS_FILE_TREE].written;
    if (nothing)
        fprintf(stderr, "pathscope: no profile written to %s: not written: %s\n", ps_outdir, list);
    else
        fprintf(stderr, "pathscope: profile written to %s incompletely: not written: %s (view: pathscope report %s)\n",
                ps_outdir, list, ps_outdir);
}
