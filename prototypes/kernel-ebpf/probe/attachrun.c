// attachrun OBJ prog1,prog2,... -- cmd args : attach the named programs of OBJ, run cmd, detach.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>
#include <bpf/libbpf.h>
int main(int argc, char **argv) {
    if (argc < 5) { fprintf(stderr, "usage: attachrun OBJ prog,... -- cmd\n"); return 2; }
    struct bpf_object *o = bpf_object__open_file(argv[1], NULL); struct bpf_program *p;
    bpf_object__for_each_program(p, o) {
        char list[512]; snprintf(list, sizeof list, ",%s,", argv[2]);
        char name[128]; snprintf(name, sizeof name, ",%s,", bpf_program__name(p));
        bpf_program__set_autoload(p, strstr(list, name) != NULL); }
    if (bpf_object__load(o)) { perror("load"); return 1; }
    struct bpf_link *l[16]; int n = 0;
    bpf_object__for_each_program(p, o) if (bpf_program__autoload(p)) {
        l[n] = bpf_program__attach(p); if (!l[n]) { perror(bpf_program__name(p)); return 1; } n++; }
    pid_t c = fork(); if (!c) { execvp(argv[4], argv + 4); _exit(127); }
    int st; waitpid(c, &st, 0);
    for (int i = 0; i < n; i++) bpf_link__destroy(l[i]);
    return 0; }
