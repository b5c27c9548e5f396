/* Syscall names (sysnames.h).  No stdio: the runtime calls this from signal handlers. */
#include "sysnames.h"

const char *ps_syscall_name(unsigned nr, char buf[24])
{
    if (nr < PS_NR_SYSCALLS && ps_syscall_names[nr]) return ps_syscall_names[nr];
    static const char prefix[] = "syscall_";
    char digits[10]; /* a 32-bit number has at most 10 */
    int n = 0, len = 0;
    do {
        digits[n++] = (char)('0' + nr % 10);
        nr /= 10;
    } while (nr);
    for (const char *p = prefix; *p; p++) buf[len++] = *p;
    while (n) buf[len++] = digits[--n];
    buf[len] = '\0';
    return buf;
}
