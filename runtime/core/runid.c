/* The run identity: 32 hex digits written into every file of a profile (docs/format.md, "Run
 * identity"), so that a profile directory never mixes two runs.
 *
 * Every process of a job must find the same id without talking to the others, at load time
 * (before main: a rank that crashes before MPI_Init writes its file with it), so it is
 * derived from what the launcher gives all ranks of one launch alike:
 *   Open MPI        OMPI_MCA_orte_precondition_transports (random per job), else
 *   PMIx            PMIX_NAMESPACE (Open MPI 5/PRRTE, Slurm with PMIx)
 *   Slurm           SLURM_JOB_ID + SLURM_STEP_ID (one step = one srun)
 *   Flux            FLUX_JOB_ID
 *   MPICH's hydra   sets no job id: the proxy that started the ranks of this node (the peer of
 *                   PMI_FD, else the parent process) and its start time, with the host name
 *   PBS, LSF        PBS_JOBID, LSB_JOBID (per batch job, not per launch: the last resort)
 * Those are used only by launched processes (a rank variable is set); they differ between
 * nodes only for hydra, and inside MPI_Init every rank adopts rank 0's id anyway.  A process
 * started by no launcher takes the id of the run's first process (PATHSCOPE_PID, itself if
 * it is that process): a hash of the boot id, host name, that process's pid and start time,
 * so a script's children agree with it and no variable needs to be passed on.
 *
 * Load time only (getenv, /proc reads); ps_run_id is then read from signal handlers.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "pathscope.h"

char ps_run_id[33];

/* Two independent 64-bit FNV-1a lanes, each finished with the splitmix64 mixer: not a
 * cryptographic hash (the id is no secret), but every input bit reaches every output bit. */
typedef struct { uint64_t a, b; } hash128_t;

static void hash_bytes(hash128_t *h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h->a = (h->a ^ p[i]) * 1099511628211ull;
        h->b = (h->b ^ p[i]) * 0x100000001b3ull ^ (h->b >> 29);
    }
}

static void hash_str(hash128_t *h, const char *s)
{
    hash_bytes(h, s, strlen(s) + 1); /* with the NUL: "ab"+"c" differs from "a"+"bc" */
}

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static void set_id(uint64_t hi, uint64_t lo)
{
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 16; i++) {
        ps_run_id[i] = hex[(hi >> (60 - 4 * i)) & 15];
        ps_run_id[16 + i] = hex[(lo >> (60 - 4 * i)) & 15];
    }
    ps_run_id[32] = 0;
}

void ps_run_id_adopt(uint64_t hi, uint64_t lo) { set_id(hi, lo); }

void ps_run_id_words(uint64_t *hi, uint64_t *lo)
{
    uint64_t w[2] = {0, 0};
    for (int i = 0; i < 32; i++) {
        char c = ps_run_id[i];
        uint64_t d = (uint64_t)(c >= 'a' ? c - 'a' + 10 : c - '0');
        w[i / 16] = (w[i / 16] << 4) | d;
    }
    *hi = w[0];
    *lo = w[1];
}

/* A process for ever: its pid and start time (with the boot id). */
static void hash_process(hash128_t *h, long pid)
{
    char who[64];
    snprintf(who, sizeof who, "%ld %llu", pid, (unsigned long long)ps_proc_start_time((int)pid));
    hash_str(h, who);
}

static void hash_host(hash128_t *h)
{
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    hash_str(h, host);
}

/* MPICH's hydra: the proxy holds the other end of every local rank's PMI_FD socket pair. */
static long hydra_proxy_pid(void)
{
    const char *v = getenv("PMI_FD");
    if (v && *v) {
        struct ucred cred;
        socklen_t len = sizeof cred;
        if (getsockopt(atoi(v), SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.pid > 0)
            return (long)cred.pid;
    }
    return (long)getppid();
}

void ps_run_id_init(int launched, long target_pid)
{
    hash128_t h = {1469598103934665603ull, 0x6c62272e07bb0142ull};
    hash_str(&h, "pathscope-run-1");
    const char *v;
    if (launched && (v = getenv("OMPI_MCA_orte_precondition_transports")) && *v) {
        hash_str(&h, "ompi");
        hash_str(&h, v);
    } else if (launched && (v = getenv("PMIX_NAMESPACE")) && *v) {
        hash_str(&h, "pmix");
        hash_str(&h, v);
    } else if (launched && (v = getenv("SLURM_JOB_ID")) && *v) {
        const char *step = getenv("SLURM_STEP_ID"), *cluster = getenv("SLURM_CLUSTER_NAME");
        hash_str(&h, "slurm");
        hash_str(&h, v);
        hash_str(&h, step ? step : "");
        hash_str(&h, cluster ? cluster : "");
    } else if (launched && (v = getenv("FLUX_JOB_ID")) && *v) {
        hash_str(&h, "flux");
        hash_str(&h, v);
    } else if (launched && (getenv("PMI_FD") || getenv("PMI_RANK"))) {
        hash_str(&h, "hydra");
        hash_host(&h);
        hash_process(&h, hydra_proxy_pid());
    } else if (launched && ((v = getenv("PBS_JOBID")) || (v = getenv("LSB_JOBID")))) {
        const char *index = getenv("LSB_JOBINDEX");
        hash_str(&h, "batch");
        hash_str(&h, v);
        hash_str(&h, index ? index : "");
    } else if (launched) {
        hash_str(&h, "parent"); /* an unknown launcher: its ranks on this node share a parent */
        hash_host(&h);
        hash_process(&h, (long)getppid());
    } else {
        char boot[64];
        ps_read_small("/proc/sys/kernel/random/boot_id", boot, sizeof boot);
        hash_str(&h, "first-process");
        hash_str(&h, boot);
        hash_host(&h);
        hash_process(&h, target_pid > 0 ? target_pid : (long)getpid());
    }
    set_id(mix64(h.a), mix64(h.b ^ 0x9e3779b97f4a7c15ull));
}
