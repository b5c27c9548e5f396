/* File descriptors pathscope keeps open inside the application (the collector socket, the
 * profile directory, /proc/self/maps while it is read, a perf event while it is set up) live
 * out of the application's way and are touched only while they are still ours.
 *
 * An application may close every descriptor from 3 up (daemons, some MPI codes) and open its
 * own files, which then get our old numbers; an ioctl or close on such a number would hit the
 * application's file.  So each descriptor is moved, once, to the lowest free number at or above
 * a base far from where the application allocates (new descriptors take the lowest free
 * number), and its identity (device, inode, type) is recorded; before every later use the
 * identity is compared with fstat.  Callers that can tell apart objects sharing one inode
 * (perf events all share the anonymous inode) add their own check after ps_fd_owned().
 *
 * All three are [signal-safe]: raw system calls only (getrlimit, fcntl, fstat, close).
 */
#include <sys/resource.h>
#include <sys/stat.h>

#include "pathscope.h"

static int fd_base(void)
{
    static int base;
    if (base) return base;
    struct rlimit rl; /* (the kernel's layout on 64-bit Linux) */
    int b = 768;
    if (syscall(SYS_getrlimit, RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        rl.rlim_cur < 1024)
        b = (int)(rl.rlim_cur / 2);
    base = b > 3 ? b : 3;
    return base;
}

static int fstat_raw(int fd, struct stat *st) { return (int)syscall(SYS_fstat, fd, st); }

int ps_fd_adopt(int fd, ps_ownfd_t *own)
{
    own->fd = -1;
    if (fd < 0) return -1;
    int moved = fd < fd_base() ? (int)syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, fd_base()) : -1;
    if (moved >= 0) {
        ps_sys_close(fd);
        fd = moved;
    }
    struct stat st;
    if (fstat_raw(fd, &st) != 0) return fd;
    own->fd = fd;
    own->dev = (uint64_t)st.st_dev;
    own->ino = (uint64_t)st.st_ino;
    own->mode = (uint32_t)(st.st_mode & S_IFMT);
    return fd;
}

int ps_fd_owned(const ps_ownfd_t *own)
{
    struct stat st;
    if (own->fd < 0 || fstat_raw(own->fd, &st) != 0) return 0;
    return (uint64_t)st.st_dev == own->dev && (uint64_t)st.st_ino == own->ino &&
           (uint32_t)(st.st_mode & S_IFMT) == own->mode;
}

int ps_fd_release(ps_ownfd_t *own)
{
    int ours = ps_fd_owned(own);
    if (ours) ps_sys_close(own->fd);
    own->fd = -1;
    return ours;
}
