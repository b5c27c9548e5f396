#include "../vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
char LICENSE[] SEC("license") = "GPL";
SEC("fentry/vfs_read") int BPF_PROG(fentry_vfs_read) { return 0; }
