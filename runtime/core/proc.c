/* Small files of /proc, read with raw system calls into the caller's storage.  [signal-safe]:
 * the peers' code (output/peers.c) asks about other ranks from fatal-signal handlers. */
#include <string.h>

#include "pathscope.h"

long ps_read_small(const char *path, char *buf, size_t cap)
{
    buf[0] = 0;
    int fd = ps_sys_open(path, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) return -1;
    long n = ps_sys_read(fd, buf, cap - 1);
    ps_sys_close(fd);
    buf[n > 0 ? n : 0] = 0;
    return n;
}

uint64_t ps_proc_start_time(int pid)
{
    char path[64], buf[1024];
    ps_fmt_t f = {path, 0, sizeof path - 1, -1, 0};
    ps_fmt_str(&f, "/proc/");
    ps_fmt_u64(&f, (uint64_t)pid);
    ps_fmt_str(&f, "/stat");
    path[f.len] = 0;
    if (ps_read_small(path, buf, sizeof buf) <= 0) return 0;
    const char *p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
    if (!p || p[1] != ' ' || p[2] == 'Z' || p[2] == 'X') return 0;
    p += 2; /* field 3, the state */
    for (int field = 3; field < 22; field++) {
        p = strchr(p, ' ');
        if (!p) return 0;
        p++;
    }
    uint64_t v = 0;
    for (; *p >= '0' && *p <= '9'; p++) v = v * 10 + (uint64_t)(*p - '0');
    return v;
}
