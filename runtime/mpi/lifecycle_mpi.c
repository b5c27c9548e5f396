/* MPI lifecycle: the hand-written MPI_Init, MPI_Init_thread, MPI_Finalize, MPI_Abort and
 * MPI_Pcontrol wrappers, and the path that notices MPI initialised without our wrappers
 * (e.g. a Fortran binding calling PMPI_Init directly).
 *
 * Start: MPI_COMM_WORLD and MPI_COMM_SELF are registered, rank 0 chooses the profile
 * directory and broadcasts it (collective, safe inside MPI_Init where every rank is).
 * End: inside MPI_Finalize, before PMPI_Finalize, each rank writes its own file, then the
 * ranks reduce their data over a private duplicate of MPI_COMM_WORLD and rank 0 writes the
 * run's profile.tsv.  Finalize called from an atexit handler works the same way.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "mpi_internal.h"
#include "wrap.h"
#include "source.h"
#include "ending.h"

void *ps_f_in_place;
int ps_poll_sample = PS_POLL_SAMPLE;
__thread uint32_t ps_poll_rng __attribute__((tls_model("initial-exec")));
char ps_mpi_library[256]; /* first line of MPI_Get_library_version, read at start */
MPI_Comm ps_world_comm = MPI_COMM_WORLD;
MPI_Group ps_world_group = MPI_GROUP_NULL;
int ps_sessions_only;
void ps_rank_file_host(void);

/* Opens the profile directory chosen inside MPI_Init (the default one, a spawned job's).  A
 * problem cannot stop the program any more (MPI_Init is not a constructor): the directory is
 * marked unusable and each rank reports its files as not written, with the reason, at the
 * end. */
static void use_outdir(const char *dir, int error)
{
    static char err[PS_PATH_MAX + 512];
    if (!error) error = ps_outdir_open(dir, 0, err, sizeof err);
    if (error) ps_outdir_unusable(error);
    ps_set_outdir(dir);
}

static void default_outdir(int agree_over_world)
{
    struct { char dir[PS_PATH_MAX]; int error; } chosen;
    memset(&chosen, 0, sizeof chosen);
    if (ps_world_rank == 0 || !agree_over_world) {
        char stamp[32];
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
        if (agree_over_world) {
            /* a new directory of rank 0's (mkdir, so never someone else's), .1, .2, ... if
             * the name is taken */
            snprintf(chosen.dir, sizeof chosen.dir, "pathscope-%s-%s", ps_program_name(), stamp);
            chosen.error = ps_outdir_create_fresh(chosen.dir, sizeof chosen.dir);
        } else {
            /* no collective possible: use the launcher's job id so that all ranks agree */
            const char *job = getenv("PMIX_NAMESPACE");
            if (!job) job = getenv("SLURM_JOB_ID");
            if (!job) job = stamp;
            snprintf(chosen.dir, sizeof chosen.dir, "pathscope-%s-%s", ps_program_name(), job);
        }
    }
    MPI_Request req;
    if (agree_over_world &&
        PMPI_Ibcast(&chosen, (int)sizeof chosen, MPI_BYTE, 0, ps_world_comm, &req) == MPI_SUCCESS)
        ps_wait_idle(&req);
    use_outdir(chosen.dir, chosen.error);
}

/* A job started by MPI_Comm_spawn inherits the parent's output directory: it writes into
 * DIR/spawned-<pid of its rank 0>/ so that its ranks do not overwrite the parent's. */
static void spawned_outdir(void)
{
    MPI_Comm parent = MPI_COMM_NULL;
    PMPI_Comm_get_parent(&parent);
    if (parent == MPI_COMM_NULL) return;
    long id = (long)getpid();
    MPI_Request req;
    if (PMPI_Ibcast(&id, 1, MPI_LONG, 0, ps_world_comm, &req) == MPI_SUCCESS) ps_wait_idle(&req);
    char dir[PS_PATH_MAX + 32];
    /* (the path the parent's directory was opened by: the program may have changed its
     * working directory since) */
    snprintf(dir, sizeof dir, "%s/spawned-%ld", ps_outdir_path(), id);
    use_outdir(dir, 0);
}

static void resolve_fortran_sentinels(void)
{
    static const char *names[] = {"mpi_fortran_in_place_", "MPIR_F_MPI_IN_PLACE"};
    void *p = dlsym(RTLD_DEFAULT, names[0]);
    if (p) { ps_f_in_place = p; return; }
    void **pp = dlsym(RTLD_DEFAULT, names[1]); /* MPICH keeps a pointer to the common block */
    if (pp && *pp) ps_f_in_place = *pp;
}

/* The peers' table (output/peers.c), collective over MPI_COMM_WORLD: every rank's entry.  A
 * rank without memory for it says so first, so that no rank waits in an allgather another
 * one skipped; then no rank has a table (an early end is not waited for, as without it). */
static void peers_exchange(void)
{
    uint64_t mine[PS_PEER_WORDS];
    ps_peers_mine(mine);
    uint64_t *all = malloc(sizeof(uint64_t) * PS_PEER_WORDS * (size_t)ps_world_size);
    int ok = all != NULL, all_ok = 0;
    MPI_Request req;
    if (PMPI_Iallreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, ps_world_comm, &req) != MPI_SUCCESS ||
        ps_wait_idle(&req) != 0)
        all_ok = 0;
    if (all_ok) {
        if (PMPI_Iallgather(mine, PS_PEER_WORDS, MPI_UINT64_T, all, PS_PEER_WORDS, MPI_UINT64_T,
                            ps_world_comm, &req) == MPI_SUCCESS)
            ps_wait_idle(&req);
        if (!ps_peers_adopt(all, ps_world_size, ps_world_rank)) all_ok = 0;
    }
    if (!all_ok) atomic_fetch_add(&ps_counters.alloc_failures, 1);
    free(all);
}

/* A launcher that started more processes than MPI joined into this world: under srun, a --mpi
 * plugin the MPI library does not speak (MPICH with pmix or none) makes every process a world
 * of its own, each writing rank 0 of "its" job into the same directory.  Said once per rank,
 * with the numbers, at the end (warning lines, stderr). */
static void launch_check(void)
{
    int started = ps_launcher_size();
    if (started <= ps_world_size) return;
    static char text[320];
    snprintf(text, sizeof text,
             "the launcher started %d processes but MPI_COMM_WORLD has %d: the MPI library did "
             "not join them into one job (under srun: a --mpi plugin this MPI does not use, see "
             "the user guide, Under Slurm), so each profiles as a job of its own and their rank "
             "files collide", started, ps_world_size);
    ps_warn("world-smaller-than-launch", text);
}

static void mpi_start(int provided, int agree_over_world)
{
    if (!ps_option_on(ps_options.mpi)) { ps_state = PS_RUN_FINISHED; return; }
    int outer = ps_in_wrapper;
    ps_in_wrapper = 1;
    PMPI_Comm_rank(ps_world_comm, &ps_world_rank);
    PMPI_Comm_size(ps_world_comm, &ps_world_size);
    launch_check();
    ps_threaded = provided == MPI_THREAD_MULTIPLE;
    ps_poll_sample = strcmp(ps_options.poll_timing, "every") == 0 ? 1 : PS_POLL_SAMPLE;
    ps_rank_file_host();
    {
        char lib[MPI_MAX_LIBRARY_VERSION_STRING] = "";
        int len = 0;
        PMPI_Get_library_version(lib, &len);
        lib[strcspn(lib, "\n")] = 0;
        snprintf(ps_mpi_library, sizeof ps_mpi_library, "%s", lib);
    }
    ps_registry_init();
    ps_paths_configure();
    if (!ps_outdir[0]) default_outdir(agree_over_world);
    else if (agree_over_world && !ps_sessions_only) spawned_outdir();
    if (agree_over_world) peers_exchange();
    ps_signals_install();
    resolve_fortran_sentinels();
    ps_sources_rank_start(); /* kernel time: a rank that was not pathscope's first process */
    ps_in_wrapper = outer;
    ps_state = PS_RUN_MPI;
    if (agree_over_world) {
        int ps_peers_accept_requests(void);
        ps_peers_accept_requests(); /* (last: a request is answered from now on) */
    }
}

void ps_mpi_after_init(int provided) { mpi_start(provided, 1); }

int ps_wrap_enter_slow(void)
{
    if (ps_state != PS_RUN_STARTED) return 0;
    int init = 0, fin = 0;
    PMPI_Initialized(&init);
    PMPI_Finalized(&fin);
    if (!init || fin) return 0;
    int provided = MPI_THREAD_SINGLE;
    PMPI_Query_thread(&provided);
    mpi_start(provided, 0);
    return ps_state == PS_RUN_MPI;
}

/* MPI_Init's own time is MPI time: samples inside it are ignored, and it is recorded (on the
 * pseudo communicator "-") once recording has started.  The wrapper stays marked as one
 * (ps_in_wrapper) until the time is recorded: a sample kept after PMPI_Init returned but
 * before the record (in PMPI_Query_thread, in our start-up collectives) would put the whole
 * of MPI_Init's wall time on its own node as well, and the thread's timeline would hold it
 * twice (issue 16: the rank whose computation vanished). */
static void record_init(int op, uint64_t dt)
{
    if (ps_state == PS_RUN_MPI) ps_record(PS_COMM_NONE, op, dt, 0, 0);
}

int MPI_Init(int *argc, char ***argv)
{
    int outer = ps_in_wrapper;
    ps_in_wrapper = 1;
    uint64_t t0 = ps_now();
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS && ps_state == PS_RUN_STARTED && !outer) {
        int provided = MPI_THREAD_SINGLE;
        PMPI_Query_thread(&provided);
        ps_mpi_after_init(provided);
        record_init(PS_OP_MPI_Init, ps_now() - t0); /* our own start-up collectives included */
    }
    ps_in_wrapper = outer;
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int outer = ps_in_wrapper;
    ps_in_wrapper = 1;
    uint64_t t0 = ps_now();
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS && ps_state == PS_RUN_STARTED && !outer) {
        ps_mpi_after_init(*provided);
        record_init(PS_OP_MPI_Init_thread, ps_now() - t0);
    }
    ps_in_wrapper = outer;
    return rc;
}

/* The end of the run, before PMPI_Finalize: shared by MPI_Finalize and the Fortran
 * mpi_finalize_ wrapper (fortran_support.c). */
void ps_mpi_finalize_begin(void)
{
    if (ps_state == PS_RUN_STARTED) ps_wrap_enter_slow();
    if (ps_state == PS_RUN_MPI && !ps_in_wrapper) {
        ps_in_wrapper = 1;
        ps_lock();
        ps_fold_all(); /* communicators whose last request completed after the last creation */
        ps_unlock();
        ps_state = PS_RUN_FINISHED; /* calls made by our reduction are not recorded */
        ps_run_end(PS_END_FINALIZE, "complete"); /* (mpi's end hook: the reduction) */
        ps_in_wrapper = 0;
    }
}

int MPI_Finalize(void)
{
    ps_mpi_finalize_begin();
    return PMPI_Finalize();
}

#if MPI_VERSION >= 4
/* ---- the sessions model (MPI-4) ------------------------------------------------------------
 * A program that never calls MPI_Init starts its run at its first MPI_Session_init: the
 * session's mpi://WORLD process set gives the world ranks (its group), and a communicator of
 * our own made from it (collective over the set, as every process initialises a session)
 * carries our start-up exchange and the end's reduction in place of MPI_COMM_WORLD.  The run
 * ends at that session's MPI_Session_finalize, before the library's, and our communicator is
 * freed there: objects of a finalized session cannot be used.  MPI_Session_init is MPI time
 * like MPI_Init. */
static MPI_Session our_session = MPI_SESSION_NULL;

static int session_thread_level(MPI_Session session)
{
    MPI_Info info = MPI_INFO_NULL;
    char value[64] = "";
    int len = (int)sizeof value, flag = 0;
    if (PMPI_Session_get_info(session, &info) != MPI_SUCCESS) return MPI_THREAD_SINGLE;
    PMPI_Info_get_string(info, "mpi_thread_support_level", &len, value, &flag);
    PMPI_Info_free(&info);
    return flag && strcmp(value, "MPI_THREAD_MULTIPLE") == 0 ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE;
}

static void sessions_start(MPI_Session session)
{
    MPI_Group world;
    MPI_Comm comm;
    if (PMPI_Group_from_session_pset(session, "mpi://WORLD", &world) != MPI_SUCCESS) return;
    if (PMPI_Comm_create_from_group(world, "org.pathscope.world", MPI_INFO_NULL, MPI_ERRORS_RETURN,
                                    &comm) != MPI_SUCCESS) {
        PMPI_Group_free(&world);
        return;
    }
    ps_world_group = world;
    ps_world_comm = comm;
    ps_sessions_only = 1;
    our_session = session;
    mpi_start(session_thread_level(session), 1);
}

int MPI_Session_init(MPI_Info info, MPI_Errhandler errhandler, MPI_Session *session)
{
    int outer = ps_in_wrapper;
    ps_in_wrapper = 1;
    uint64_t t0 = ps_now();
    int rc = PMPI_Session_init(info, errhandler, session);
    if (rc == MPI_SUCCESS && !outer) {
        ps_session_opened(*session);
        if (ps_state == PS_RUN_STARTED) sessions_start(*session);
        if (ps_state == PS_RUN_MPI) ps_record(PS_COMM_NONE, PS_OP_MPI_Session_init, ps_now() - t0, 0, 0);
    }
    ps_in_wrapper = outer;
    return rc;
}

int MPI_Session_finalize(MPI_Session *session)
{
    int outer = ps_in_wrapper;
    if (outer) return PMPI_Session_finalize(session);
    ps_session_closed(*session);
    if (ps_sessions_only && *session == our_session && ps_state == PS_RUN_MPI) {
        ps_mpi_finalize_begin();
        PMPI_Comm_free(&ps_world_comm);
        PMPI_Group_free(&ps_world_group);
        our_session = MPI_SESSION_NULL;
        return PMPI_Session_finalize(session);
    }
    ps_in_wrapper = 1;
    uint64_t t0 = ps_now();
    int rc = PMPI_Session_finalize(session);
    if (ps_state == PS_RUN_MPI) ps_record(PS_COMM_NONE, PS_OP_MPI_Session_finalize, ps_now() - t0, 0, 0);
    ps_in_wrapper = outer;
    return rc;
}
#endif

/* Before PMPI_Abort: shared by MPI_Abort and the Fortran mpi_abort_ wrapper.  The other
 * ranks of this node are asked to write their files, without being stopped: PMPI_Abort then
 * ends the job exactly as without pathscope (the launcher reports errorcode). */
void ps_mpi_abort_begin(int errorcode)
{
    if (ps_state == PS_RUN_MPI) {
        char status[48];
        snprintf(status, sizeof status, "abort %d", errorcode);
        ps_run_end(PS_END_ABORT, status);
    }
}

int MPI_Abort(MPI_Comm comm, int errorcode)
{
    ps_mpi_abort_begin(errorcode);
    return PMPI_Abort(comm, errorcode);
}

/* MPI_Pcontrol(0) pauses recording, any other level resumes it.  Communicator creation and
 * request tracking continue while paused, so names and waits stay right afterwards. */
int MPI_Pcontrol(const int level, ...)
{
    ps_paused = level == 0;
    PMPI_Pcontrol(level);
    if (ps_state == PS_RUN_MPI) ps_record(PS_COMM_NONE, PS_OP_MPI_Pcontrol, 0, 0, 0);
    return MPI_SUCCESS;
}
