/*
 * stencil.c - pathscope demo mini-app: 2-D Jacobi heat solver.
 *
 *   usage: stencil [N] [iterations]        (defaults: N=512, iterations=200)
 *
 * An N x N plate (interior points; the surrounding walls are ghost cells) is
 * relaxed with a 5-point Jacobi stencil for the steady heat equation with a
 * temperature-dependent conductivity k(u) = exp(2u).  The top wall is held at
 * T=1, the other walls at T=0, and vertical heater rods (one per grid column)
 * add a source term whose power is set by a thermostat at the top of each
 * rod.  The plate is block-decomposed on a 2-D Cartesian process grid.
 *
 * Communication structure (see README.md for the full list):
 *   cart      = MPI_Cart_create(MPI_COMM_WORLD, dims from MPI_Dims_create,
 *               non-periodic, reorder=1)
 *               - halo exchange every iteration: MPI_Irecv/MPI_Isend to the
 *                 existing neighbours (rows contiguous, columns through an
 *                 MPI_Type_vector), then MPI_Waitall
 *               - every MONITOR_EVERY iterations (and after the last one):
 *                 MPI_Allreduce(MAX) of the residual max|u_new - u|
 *   row_comm  = MPI_Cart_sub(cart, {0,1}) - one per process row
 *               - monitor step: MPI_Reduce(MAX) of the per-grid-row peak
 *                 temperature to the row leader (process column 0), which
 *                 tracks how deep the heat front has penetrated
 *   col_comm  = MPI_Cart_sub(cart, {1,0}) - one per process column
 *               - monitor step: the top process row reads the thermostats and
 *                 MPI_Bcast's the new heater power down the process column
 *   report    = MPI_Comm_dup(MPI_COMM_WORLD)
 *               - once at the end: MPI_Gather of per-rank timings to rank 0
 *
 * Every floating-point result is computed point-wise in the same order and
 * only combined with MAX reductions, so the printed residual, probe value and
 * front depth are bit-identical for any number of ranks.
 */

#include <mpi.h>

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define DEFAULT_N 512
#define DEFAULT_ITERS 200
#define MONITOR_EVERY 10    /* iterations between monitor steps            */
#define T_TOP 1.0           /* temperature of the heated top wall          */
#define ROD_MAX_POWER 40.0  /* heater rod power at a cold thermostat       */
#define ROD_SETPOINT 0.25   /* thermostat set point                        */
#define FRONT_LEVEL 0.05    /* a grid row is "reached" when its peak > this */
#define CONDUCTIVITY_BETA 2.0 /* conductivity k(u) = exp(beta * u)      */

enum { TAG_UP = 10, TAG_DOWN = 11, TAG_LEFT = 12, TAG_RIGHT = 13 };
enum { REC_TOTAL, REC_COMPUTE, REC_HALO, REC_MONITOR, REC_FRONT, REC_PROBE,
       REC_LEN };

/* Block distribution of n points over p parts: part c gets [*start, +len). */
static void block_range(int n, int p, int c, int *start, int *len)
{
    int base = n / p, rem = n % p;
    *len = base + (c < rem ? 1 : 0);
    *start = c * base + (c < rem ? c : rem);
}

static int parse_positive(const char *s, const char *what, int verbose, int *out)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < 1 || v > INT_MAX / 4) {
        if (verbose)
            fprintf(stderr, "stencil: invalid %s '%s'\n", what, s);
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* Thermostat of one heater rod: full power when cold, off above set point. */
static double rod_power(double t_sensor)
{
    double f = (ROD_SETPOINT - t_sensor) / ROD_SETPOINT;
    if (f < 0.0)
        f = 0.0;
    if (f > 1.0)
        f = 1.0;
    return ROD_MAX_POWER * f;
}

/*
 * One Jacobi sweep of the nonlinear heat equation  -div(k(u) grad u) = q
 * with k(u) = exp(CONDUCTIVITY_BETA * u), over a (ny+2) x (nx+2) array.
 * k is scratch space of the same shape; src[i] is 2 h^2 q for local column i
 * (1-based, like the grid).  Face conductivities are (k_c + k_nb) / 2; the
 * factor 2 is folded into src.  If monitor is set, also returns
 * max|unew - u| and fills rowmax[0..ny-1] with the peak of each local row.
 */
static double sweep(int nx, int ny, const double *restrict u,
                    double *restrict unew, double *restrict k,
                    const double *restrict src, int monitor,
                    double *restrict rowmax)
{
    const size_t w = (size_t)nx + 2;
    const size_t cells = ((size_t)ny + 2) * w;
    for (size_t c = 0; c < cells; c++)
        k[c] = exp(CONDUCTIVITY_BETA * u[c]);

    double res = 0.0;
    for (size_t j = 1; j <= (size_t)ny; j++) {
        const double *un = u + (j - 1) * w, *uc = u + j * w, *us = u + (j + 1) * w;
        const double *kn = k + (j - 1) * w, *kc = k + j * w, *ks = k + (j + 1) * w;
        double *out = unew + j * w;
        for (size_t i = 1; i <= (size_t)nx; i++) {
            double fn = kc[i] + kn[i], fs = kc[i] + ks[i];
            double fw = kc[i] + kc[i - 1], fe = kc[i] + kc[i + 1];
            double num = (fn * un[i] + fs * us[i]) + (fw * uc[i - 1] + fe * uc[i + 1]);
            out[i] = (num + src[i]) / ((fn + fs) + (fw + fe));
        }
        if (monitor) {
            double rmax = 0.0;
            for (size_t i = 1; i <= (size_t)nx; i++) {
                double d = fabs(out[i] - uc[i]);
                if (d > res)
                    res = d;
                if (out[i] > rmax)
                    rmax = out[i];
            }
            rowmax[j - 1] = rmax;
        }
    }
    return res;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);

    int wrank, wsize;
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);

    int n = DEFAULT_N, iters = DEFAULT_ITERS;
    int bad = 0;
    if (argc > 1 && parse_positive(argv[1], "grid size N", wrank == 0, &n) != 0)
        bad = 1;
    if (argc > 2 && parse_positive(argv[2], "iteration count", wrank == 0, &iters) != 0)
        bad = 1;
    if (argc > 3)
        bad = 1;
    if (bad) {
        if (wrank == 0)
            fprintf(stderr, "usage: %s [N] [iterations]\n", argv[0]);
        MPI_Finalize();
        return 1;
    }

    /* Communicator used only for the final report (library-style dup). */
    MPI_Comm report;
    MPI_Comm_dup(MPI_COMM_WORLD, &report);

    /* 2-D Cartesian process grid: dim 0 = process rows (y), dim 1 = columns (x). */
    int dims[2] = {0, 0}, periods[2] = {0, 0};
    MPI_Dims_create(wsize, 2, dims);
    MPI_Comm cart;
    MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 1, &cart);

    int crank, coords[2];
    MPI_Comm_rank(cart, &crank);
    MPI_Cart_coords(cart, crank, 2, coords);

    int up, down, left, right;
    MPI_Cart_shift(cart, 0, 1, &up, &down);
    MPI_Cart_shift(cart, 1, 1, &left, &right);

    MPI_Comm row_comm, col_comm;
    int keep_x[2] = {0, 1}, keep_y[2] = {1, 0};
    MPI_Cart_sub(cart, keep_x, &row_comm); /* same process row    */
    MPI_Cart_sub(cart, keep_y, &col_comm); /* same process column */

    if (n < dims[0] || n < dims[1]) {
        if (wrank == 0)
            fprintf(stderr, "stencil: N=%d too small for a %dx%d process grid\n",
                    n, dims[0], dims[1]);
        MPI_Comm_free(&col_comm);
        MPI_Comm_free(&row_comm);
        MPI_Comm_free(&cart);
        MPI_Comm_free(&report);
        MPI_Finalize();
        return 1;
    }

    int y0, ny, x0, nx;
    block_range(n, dims[0], coords[0], &y0, &ny);
    block_range(n, dims[1], coords[1], &x0, &nx);
    const int w = nx + 2;
    const size_t cells = (size_t)(ny + 2) * (size_t)w;

    double *u = calloc(cells, sizeof *u);
    double *unew = calloc(cells, sizeof *unew);
    double *k = malloc(cells * sizeof *k);                /* conductivity       */
    double *src = calloc((size_t)nx + 2, sizeof *src);    /* 2h^2 q per column  */
    double *power = calloc((size_t)nx, sizeof *power);    /* rod power, bcast   */
    double *rowmax = calloc((size_t)ny, sizeof *rowmax);  /* local row peaks    */
    double *bandmax = calloc((size_t)ny, sizeof *bandmax);/* reduced row peaks  */
    if (!u || !unew || !k || !src || !power || !rowmax || !bandmax) {
        fprintf(stderr, "stencil: rank %d: out of memory\n", wrank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }

    /* Dirichlet walls live in the ghost cells of boundary ranks. */
    if (up == MPI_PROC_NULL)
        for (int i = 0; i < w; i++)
            u[i] = unew[i] = T_TOP;

    const double h = 1.0 / (n + 1);
    const double h2 = h * h;
    for (int i = 0; i < nx; i++) {
        power[i] = rod_power(0.0); /* plate starts cold */
        src[i + 1] = 2.0 * h2 * power[i];
    }

    /* Column halo: ny doubles with a stride of one local row. */
    MPI_Datatype col_t;
    MPI_Type_vector(ny, 1, w, MPI_DOUBLE, &col_t);
    MPI_Type_commit(&col_t);

    double t_compute = 0.0, t_halo = 0.0, t_monitor = 0.0;
    double residual = 0.0;
    int front = -1; /* deepest global row reached (row leaders only) */

    double t_start = MPI_Wtime();
    for (int it = 0; it < iters; it++) {
        /* ---- halo exchange on the Cartesian communicator ---- */
        double t0 = MPI_Wtime();
        MPI_Request req[8];
        MPI_Status st[8];
        int nreq = 0;
        if (up != MPI_PROC_NULL)
            MPI_Irecv(&u[1], nx, MPI_DOUBLE, up, TAG_DOWN, cart, &req[nreq++]);
        if (down != MPI_PROC_NULL)
            MPI_Irecv(&u[(size_t)(ny + 1) * w + 1], nx, MPI_DOUBLE, down, TAG_UP,
                      cart, &req[nreq++]);
        if (left != MPI_PROC_NULL)
            MPI_Irecv(&u[(size_t)w], 1, col_t, left, TAG_RIGHT, cart, &req[nreq++]);
        if (right != MPI_PROC_NULL)
            MPI_Irecv(&u[(size_t)w + nx + 1], 1, col_t, right, TAG_LEFT, cart,
                      &req[nreq++]);
        if (up != MPI_PROC_NULL)
            MPI_Isend(&u[(size_t)w + 1], nx, MPI_DOUBLE, up, TAG_UP, cart,
                      &req[nreq++]);
        if (down != MPI_PROC_NULL)
            MPI_Isend(&u[(size_t)ny * w + 1], nx, MPI_DOUBLE, down, TAG_DOWN, cart,
                      &req[nreq++]);
        if (left != MPI_PROC_NULL)
            MPI_Isend(&u[(size_t)w + 1], 1, col_t, left, TAG_LEFT, cart,
                      &req[nreq++]);
        if (right != MPI_PROC_NULL)
            MPI_Isend(&u[(size_t)w + nx], 1, col_t, right, TAG_RIGHT, cart,
                      &req[nreq++]);
        MPI_Waitall(nreq, req, st);
        double t1 = MPI_Wtime();
        t_halo += t1 - t0;

        /* ---- compute ---- */
        int monitor = ((it + 1) % MONITOR_EVERY == 0) || (it + 1 == iters);
        double local_res = sweep(nx, ny, u, unew, k, src, monitor, rowmax);
        double *tmp = u;
        u = unew;
        unew = tmp;
        double t2 = MPI_Wtime();
        t_compute += t2 - t1;

        if (!monitor)
            continue;

        /* ---- monitor step ---- */
        /* 1. global residual over the whole process grid */
        MPI_Allreduce(&local_res, &residual, 1, MPI_DOUBLE, MPI_MAX, cart);

        /* 2. peak temperature of every grid row -> row leader (column 0) */
        MPI_Reduce(rowmax, bandmax, ny, MPI_DOUBLE, MPI_MAX, 0, row_comm);
        if (coords[1] == 0)
            for (int j = 0; j < ny; j++)
                if (bandmax[j] > FRONT_LEVEL && y0 + j > front)
                    front = y0 + j;

        /* 3. thermostats sit in the top process row; new rod power is
         *    broadcast down each process column */
        if (coords[0] == 0)
            for (int i = 0; i < nx; i++)
                power[i] = rod_power(u[(size_t)w + 1 + i]);
        MPI_Bcast(power, nx, MPI_DOUBLE, 0, col_comm);
        for (int i = 0; i < nx; i++)
            src[i + 1] = 2.0 * h2 * power[i];

        t_monitor += MPI_Wtime() - t2;
    }
    double t_total = MPI_Wtime() - t_start;

    /* Probe value at the centre of the plate (owned by exactly one rank). */
    int pc = n / 2;
    double probe = -1.0;
    if (pc >= y0 && pc < y0 + ny && pc >= x0 && pc < x0 + nx)
        probe = u[(size_t)(pc - y0 + 1) * w + (pc - x0 + 1)];

    /* ---- final report: gather per-rank records on the dup'ed world ---- */
    double rec[REC_LEN] = {t_total, t_compute, t_halo, t_monitor, (double)front,
                           probe};
    int rsize, rrank;
    MPI_Comm_size(report, &rsize);
    MPI_Comm_rank(report, &rrank);
    double *all = NULL;
    if (rrank == 0) {
        all = malloc((size_t)rsize * REC_LEN * sizeof *all);
        if (!all)
            MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Gather(rec, REC_LEN, MPI_DOUBLE, all, REC_LEN, MPI_DOUBLE, 0, report);

    if (rrank == 0) {
        double mx[REC_LEN], mn[REC_LEN];
        for (int f = 0; f < REC_LEN; f++)
            mx[f] = mn[f] = all[f];
        for (int r = 1; r < rsize; r++)
            for (int f = 0; f < REC_LEN; f++) {
                double v = all[(size_t)r * REC_LEN + f];
                if (v > mx[f])
                    mx[f] = v;
                if (v < mn[f])
                    mn[f] = v;
            }
        printf("stencil: N=%d iterations=%d ranks=%d grid=%dx%d "
               "residual=%.17g probe=%.17g front=%d wall=%.3fs\n",
               n, iters, rsize, dims[0], dims[1], residual, mx[REC_PROBE],
               (int)mx[REC_FRONT], mx[REC_TOTAL]);
        printf("stencil: per-rank seconds compute %.3f..%.3f  halo %.3f..%.3f  "
               "monitor %.3f..%.3f\n",
               mn[REC_COMPUTE], mx[REC_COMPUTE], mn[REC_HALO], mx[REC_HALO],
               mn[REC_MONITOR], mx[REC_MONITOR]);
        fflush(stdout);
        free(all);
    }

    MPI_Type_free(&col_t);
    free(bandmax);
    free(rowmax);
    free(power);
    free(src);
    free(k);
    free(unew);
    free(u);
    MPI_Comm_free(&col_comm);
    MPI_Comm_free(&row_comm);
    MPI_Comm_free(&cart);
    MPI_Comm_free(&report);
    MPI_Finalize();
    return 0;
}
