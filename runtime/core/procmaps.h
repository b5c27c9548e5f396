/* Reading our own process image: lines of /proc/self/maps and ELF images in memory.
 * Shared by the unwinder (module table, .eh_frame_hdr) and the rank-file writer (modules,
 * load bias, build ids).  Everything here is async-signal-safe: string parsing and reads of
 * ELF headers that are mapped. */
#ifndef PS_PROCMAPS_H
#define PS_PROCMAPS_H
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <string.h>

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

/* The ELF image whose header is mapped at base: its load bias (run-time address minus ELF
 * virtual address) and program headers.  0 if there is no valid ELF header. */
static inline int ps_elf_image(uintptr_t base, uintptr_t *bias, const ElfW(Phdr) **ph, int *phnum)
{
    const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)base;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_phoff > 4096) return 0;
    *ph = (const ElfW(Phdr) *)(base + eh->e_phoff);
    *phnum = eh->e_phnum;
    uintptr_t min_vaddr = UINTPTR_MAX;
    for (int i = 0; i < *phnum; i++)
        if ((*ph)[i].p_type == PT_LOAD && (*ph)[i].p_vaddr < min_vaddr) min_vaddr = (*ph)[i].p_vaddr;
    if (min_vaddr == UINTPTR_MAX) return 0;
    *bias = eh->e_type == ET_DYN ? base - (min_vaddr & ~(uintptr_t)4095) : 0;
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
