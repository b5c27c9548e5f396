// Load and attach each program of probe.bpf.o alone; print the outcome.
#include <stdio.h>
#include <string.h>
#include <errno.h>
#include <stdarg.h>
#include <bpf/libbpf.h>
static char logbuf[1 << 16]; static size_t loglen;
static int pr(enum libbpf_print_level l, const char *f, va_list ap) {
    if (l == LIBBPF_DEBUG) return 0;
    int n = vsnprintf(logbuf + loglen, sizeof logbuf - loglen, f, ap);
    if (n > 0 && loglen + n < sizeof logbuf) loglen += n; return 0; }
int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "probe.bpf.o";
    libbpf_set_print(pr);
    struct bpf_object *o = bpf_object__open_file(path, NULL);
    if (!o) { perror("open"); return 1; }
    int n = 0; struct bpf_program *p; char names[64][64];
    bpf_object__for_each_program(p, o) strcpy(names[n++], bpf_program__name(p));
    bpf_object__close(o);
    for (int i = 0; i < n; i++) {
        loglen = 0; logbuf[0] = 0;
        o = bpf_object__open_file(path, NULL);
        bpf_object__for_each_program(p, o) bpf_program__set_autoload(p, !strcmp(bpf_program__name(p), names[i]));
        p = bpf_object__find_program_by_name(o, names[i]);
        int err = bpf_object__load(o);
        if (err) {
            printf("%-22s LOAD FAIL %d (%s)\n", names[i], err, strerror(-err));
        } else {
            struct bpf_link *l = bpf_program__attach(p);
            if (!l) printf("%-22s load ok, ATTACH FAIL %d (%s)\n", names[i], -errno, strerror(errno));
            else { printf("%-22s load ok, attach ok\n", names[i]); bpf_link__destroy(l); }
        }
        // print the last useful lines of libbpf's log (verifier message)
        if (loglen) { char *s = logbuf; char *last[4] = {0}; int k = 0;
            for (char *t = strtok(s, "\n"); t; t = strtok(NULL, "\n")) { last[k % 4] = t; k++; }
            for (int j = k > 4 ? k - 4 : 0; j < k; j++) printf("    | %s\n", last[j % 4]); }
        bpf_object__close(o);
    }
    return 0;
}
