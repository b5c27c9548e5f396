/* Reading our own process image: lines of /proc/self/maps and ELF images in memory.
 * Shared by the unwinder (module table, .eh_frame_hdr) and the rank-file writer (modules,
 * load bias, build ids).  Everything here is async-signal-safe: string parsing, and copies of
 * ELF headers that cannot fault even when another thread unmaps the image meanwhile. */
#ifndef PS_PROCMAPS_H
#define PS_PROCMAPS_H
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "pathscope.h"

typedef struct {
    uintptr_t start, end;
    int readable, executable;
    const char *path; /* "/...", "[vdso]", ...; NULL for anonymous mappings */
} ps_maps_line_t;

static inline uintptr_t ps_maps_parse_hex(const char **p)
{
    uintptr_t v = 0;
    for (;; (*p)++) {
        char c = **p;
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return v;
        v = v * 16 + (uintptr_t)d;
    }
}

/* One line of /proc/self/maps ("start-end perms offset dev inode [path]"); 0 if malformed. */
static inline int ps_maps_parse_line(const char *line, ps_maps_line_t *m)
{
    const char *p = line;
    m->start = ps_maps_parse_hex(&p);
    if (*p != '-') return 0;
    p++;
    m->end = ps_maps_parse_hex(&p);
    if (*p != ' ' || strlen(p) < 5) return 0;
    p++;
    m->readable = p[0] == 'r';
    m->executable = p[2] == 'x';
    const char *path = strchr(p, '/'), *bracket = strchr(p, '[');
    m->path = !path || (bracket && bracket < path) ? bracket : path;
    return 1;
}

/* Copies n bytes of our own memory at addr into dst without ever faulting; 1 if all of them
 * were readable.  Another thread may unmap a library (dlclose, e.g. the MPI library unloading
 * its components in MPI_Finalize) between our reading /proc/self/maps and our reading its
 * ELF headers: a plain load would then crash the application (issue 10, the --heap exit
 * crash).  process_vm_readv on our own process (always permitted for oneself) fails with
 * EFAULT instead; where a seccomp filter refuses it, pread of /proc/self/mem; where both are
 * refused, a plain copy (the old behaviour, racy).  [signal-safe; errno is preserved] */
static int ps_peek_method; /* 0 not chosen yet, 1 process_vm_readv, 2 /proc/self/mem, 3 plain */
static inline int ps_peek(void *dst, uintptr_t addr, size_t n)
{
    int saved_errno = errno, ok = 0;
    if (ps_peek_method <= 1) {
        struct iovec local = {dst, n}, remote = {(void *)addr, n};
        long r = syscall(SYS_process_vm_readv, syscall(SYS_getpid), &local, 1UL, &remote, 1UL, 0UL);
        if (r == (long)n) ok = 1;
        if (r >= 0 || errno == EFAULT) ps_peek_method = 1;
        else if (ps_peek_method == 0) ps_peek_method = 2; /* ENOSYS, EPERM: refused */
        if (ps_peek_method == 1) {
            errno = saved_errno;
            return ok;
        }
    }
    if (ps_peek_method == 2) {
        int fd = ps_sys_open("/proc/self/mem", O_RDONLY | O_CLOEXEC, 0);
        if (fd >= 0) {
            ok = syscall(SYS_pread64, fd, dst, n, (off_t)addr) == (long)n;
            ps_sys_close(fd);
        } else {
            ps_peek_method = 3;
        }
    }
    if (ps_peek_method == 3) {
        memcpy(dst, (const void *)addr, n);
        ok = 1;
    }
    errno = saved_errno;
    return ok;
}

/* A copy of an ELF image's program headers, read with ps_peek. */
#define PS_ELF_MAX_PHDRS 48
typedef struct {
    uintptr_t bias; /* load bias: run-time address minus ELF virtual address */
    int phnum;      /* program headers copied (at most PS_ELF_MAX_PHDRS) */
    ElfW(Phdr) ph[PS_ELF_MAX_PHDRS];
} ps_elf_image_t;

/* The ELF image whose header is mapped at base: its load bias and a copy of its program
 * headers.  0 if there is no valid ELF header there (or it was unmapped meanwhile). */
static inline int ps_elf_image(uintptr_t base, ps_elf_image_t *img)
{
    ElfW(Ehdr) eh;
    if (!ps_peek(&eh, base, sizeof eh) || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
        eh.e_phoff > 4096 || eh.e_phentsize != sizeof(ElfW(Phdr)))
        return 0;
    img->phnum = eh.e_phnum < PS_ELF_MAX_PHDRS ? eh.e_phnum : PS_ELF_MAX_PHDRS;
    if (!ps_peek(img->ph, base + eh.e_phoff, sizeof(ElfW(Phdr)) * (size_t)img->phnum)) return 0;
    uintptr_t min_vaddr = UINTPTR_MAX;
    for (int i = 0; i < img->phnum; i++)
        if (img->ph[i].p_type == PT_LOAD && img->ph[i].p_vaddr < min_vaddr) min_vaddr = img->ph[i].p_vaddr;
    if (min_vaddr == UINTPTR_MAX) return 0;
    img->bias = eh.e_type == ET_DYN ? base - (min_vaddr & ~(uintptr_t)4095) : 0;
    return 1;
}
/* The memory map, opened for reading [signal-safe].  /proc/thread-self (Linux 3.17+) first:
 * once the main thread has exited (pthread_exit in main), /proc/self/maps reads as empty.
 * The descriptor lives only while we read, but that may be in a signal handler while other
 * threads of the application close and open files: it is moved to a high number (ps_fd_adopt),
 * read only while ps_fd_owned() and closed with ps_fd_release(). */
static inline int ps_maps_open(ps_ownfd_t *own)
{
    int fd = ps_sys_open("/proc/thread-self/maps", O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) fd = ps_sys_open("/proc/self/maps", O_RDONLY | O_CLOEXEC, 0);
    own->fd = -1;
    if (fd >= 0) ps_fd_adopt(fd, own);
    return own->fd;
}

/* read() from the map while the descriptor is still ours; -1 otherwise. [signal-safe] */
static inline long ps_maps_read(const ps_ownfd_t *own, void *buf, size_t n)
{
    return ps_fd_owned(own) ? ps_sys_read(own->fd, buf, n) : -1;
}
#endif
