/*
 * cg.c -- an OpenMP application that calls threadteam kernels: conjugate
 * gradients on the 2-D Poisson matrix (5-point stencil, n x n grid,
 * Dirichlet boundary), right-hand side all ones.
 *
 * Two solvers of the same algorithm, step for step:
 *   omp  all OpenMP: every phase is an `omp parallel` region of the main
 *        thread (matvec, dot products, the fused update).
 *   tt   the same application with threadteam kernels between its own
 *        OpenMP regions: the matvec is a tt_fork of two jobs (the two
 *        halves of the grid), each running tt_for_ranges over its rows with
 *        its child token; the dot product p.q is a tt_reduce_sum_d; the
 *        fused update x += a p, r -= a q with the norm r.r is one more
 *        tt_reduce_sum_d (its body updates its block and returns the
 *        block's r.r); p = r + b p stays the application's own
 *        `omp parallel for` on the main thread.
 * tt_reduce_sum_d cuts [0, len) into blocks that depend on len and grain
 * only and adds the blocks' partials in a fixed tree, so its result is the
 * same bits at every thread count. The omp solver writes the same blocks
 * and the same tree out by hand (omp_dot, tree_sum: what `reduction(+:)`
 * cannot promise), so both solvers do the same floating-point operations:
 * their residual histories agree to the last bit, and --check asserts it
 * (to a tolerance of 1e-12 relative, and the same iteration count), and
 * that the true residual |b - A x| / |b| of each solution meets the
 * tolerance.
 *
 * The threadteam kernels make no OpenMP call (plain loops over the grid),
 * so the solver declares its pool's shares OpenMP-free
 * (tt_pool_attr_set_isolate_shares(false)): the library then does not open
 * a nested one-thread region around each participant's share, which on a
 * 2-vCPU KVM guest costs two futex system calls per participant per call
 * (docs/design/placement.md). --isolated keeps the default, to measure it:
 * n = 256, 470 iterations, per solve, medians of three runs of 5 (host
 * vm): 75.3 ms isolated, 71.6 OpenMP-free, 68.8 all OpenMP.
 *
 * usage: cg [--n N] [--tol T] [--maxit K] [--mode both|tt|omp] [--check]
 *           [--reps R] [--csv] [--isolated]
 *   --check   run both solvers, compare them, exit 1 on a mismatch (default
 *             mode of `make check`, through tests/test_cg.sh)
 *   --reps R  solve R times (after one warm-up solve) and print the phase
 *             times of each solve: total, matvec, dots, update (ms); with
 *             --csv one line per solve: mode,n,iters,total_ms,matvec_ms,
 *             dots_ms,update_ms (scripts/bench-cg.sh runs the modes in
 *             alternating processes and takes medians)
 *   --isolated  the default pool, whose shares are isolated (see above)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <threadteam.h>

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* The reductions' blocks: grain = ceil(len / NBLK), so at most NBLK. */
#define NBLK 64
#define MAX_RANKS 256

typedef struct cg {
    size_t n, len;       /* grid side, unknowns */
    size_t grain, nb;    /* reduction grain and blocks (nb = len / grain) */
    double *x, *r, *p, *q;
    double blk[NBLK];    /* block partial sums (omp solver) */
    double alpha, beta, rr, rr_new;
    double t_matvec, t_dots, t_update; /* seconds */
    tt_pool *pool;
    unsigned width;
} cg;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Block b of tt_reduce_sum_d's partition (threadteam.h): nb blocks whose
 * sizes differ by at most one, the larger first. */
static void blk_range(const cg *s, size_t b, size_t *lo, size_t *hi)
{
    size_t q = s->len / s->nb, r = s->len % s->nb;
    *lo = b * q + (b < r ? b : r);
    *hi = *lo + q + (b < r ? 1 : 0);
}

/* tt_reduce_sum_d's fixed tree over the block partials (threadteam.h):
 * for s = 1, 2, 4 ..., blk[b] += blk[b + s] for b a multiple of 2s. */
static double tree_sum(double *blk, size_t nb)
{
    for (size_t st = 1; st < nb; st *= 2)
        for (size_t b = 0; b + st < nb; b += 2 * st)
            blk[b] += blk[b + st];
    return blk[0];
}

/* q[g] = (A p)[g] for rows [lo, hi). */
static void stencil_rows(const cg *s, const double *p, double *q, size_t lo, size_t hi)
{
    size_t n = s->n;
    for (size_t g = lo; g < hi; g++) {
        size_t ix = g % n, iy = g / n;
        double v = 4.0 * p[g];
        if (ix > 0)
            v -= p[g - 1];
        if (ix + 1 < n)
            v -= p[g + 1];
        if (iy > 0)
            v -= p[g - n];
        if (iy + 1 < n)
            v -= p[g + n];
        q[g] = v;
    }
}

/* The dot product p.q over [lo, hi) (a tt_reduce_d_fn). */
static double dot_pq(void *arg, size_t lo, size_t hi)
{
    const cg *s = arg;
    double t = 0.0;
    for (size_t i = lo; i < hi; i++)
        t += s->p[i] * s->q[i];
    return t;
}

/* x += a p, r -= a q over [lo, hi); returns r.r there (a tt_reduce_d_fn). */
static double update_rr(void *arg, size_t lo, size_t hi)
{
    cg *s = arg;
    double t = 0.0;
    for (size_t i = lo; i < hi; i++) {
        s->x[i] += s->alpha * s->p[i];
        s->r[i] -= s->alpha * s->q[i];
        t += s->r[i] * s->r[i];
    }
    return t;
}

/* ------------------------------------------------------------------------ */
/* The all-OpenMP phases                                                     */
/* ------------------------------------------------------------------------ */

static void omp_matvec(cg *s)
{
    long len = (long)s->len;
#pragma omp parallel for schedule(static)
    for (long g = 0; g < len; g++)
        stencil_rows(s, s->p, s->q, (size_t)g, (size_t)g + 1);
}

/* p.q with the blocks and the tree of tt_reduce_sum_d, by hand. */
static double omp_dot(cg *s)
{
    long nb = (long)s->nb;
#pragma omp parallel for schedule(static)
    for (long b = 0; b < nb; b++) {
        size_t lo, hi;
        blk_range(s, (size_t)b, &lo, &hi);
        s->blk[b] = dot_pq(s, lo, hi);
    }
    return tree_sum(s->blk, s->nb);
}

/* p = r + b p: the application's own region, in both solvers. */
static void omp_update_p(cg *s)
{
    long len = (long)s->len;
#pragma omp parallel for schedule(static)
    for (long i = 0; i < len; i++)
        s->p[i] = s->r[i] + s->beta * s->p[i];
}

static void omp_update(cg *s)
{
    long nb = (long)s->nb;
#pragma omp parallel for schedule(static)
    for (long b = 0; b < nb; b++) {
        size_t lo, hi;
        blk_range(s, (size_t)b, &lo, &hi);
        s->blk[b] = update_rr(s, lo, hi);
    }
    s->rr_new = tree_sum(s->blk, s->nb);
    s->beta = s->rr_new / s->rr;
    omp_update_p(s);
}

/* ------------------------------------------------------------------------ */
/* The threadteam phases                                                     */
/* ------------------------------------------------------------------------ */

typedef struct half {
    cg *s;
    size_t off;
} half;

static void tt_matvec_rows(void *arg, size_t begin, size_t end)
{
    half *h = arg;
    stencil_rows(h->s, h->s->p, h->s->q, h->off + begin, h->off + end);
}

static void tt_matvec_job(void *arg, unsigned i, tt_exec *child)
{
    cg *s = arg;
    size_t mid = s->len / 2;
    half h = {s, i == 0 ? 0 : mid};
    size_t rows = i == 0 ? mid : s->len - mid;
    int rc = tt_for_ranges(child, rows, 4 * s->n, tt_matvec_rows, &h);
    if (rc != TT_OK) {
        fprintf(stderr, "cg: tt_for_ranges: %s\n", tt_strerror(rc));
        exit(2);
    }
}

static void check_rc(int rc, const char *what)
{
    if (rc != TT_OK) {
        fprintf(stderr, "cg: %s: %s\n", what, tt_strerror(rc));
        exit(2);
    }
}

/* ------------------------------------------------------------------------ */
/* The solver                                                                */
/* ------------------------------------------------------------------------ */

/* Solve A x = 1 from x = 0; returns the iterations; hist[k] = |r_k| / |b|. */
static unsigned solve(cg *s, bool use_tt, double tol, unsigned maxit, double *hist)
{
    for (size_t i = 0; i < s->len; i++) {
        s->x[i] = 0.0;
        s->r[i] = 1.0;
        s->p[i] = 1.0;
    }
    s->t_matvec = s->t_dots = s->t_update = 0.0;
    s->rr = (double)s->len;
    double bnorm = sqrt((double)s->len);
    unsigned k = 0;
    hist[0] = 1.0;
    while (k < maxit && sqrt(s->rr) / bnorm > tol) {
        double t0 = now_s();
        if (use_tt) {
            tt_exec ex;
            check_rc(tt_exec_init(&ex, s->pool, s->width), "tt_exec_init");
            check_rc(tt_fork(&ex, 2, tt_matvec_job, s), "tt_fork");
        } else {
            omp_matvec(s);
        }
        double t1 = now_s();
        double pq;
        if (use_tt) {
            tt_exec ex;
            check_rc(tt_exec_init(&ex, s->pool, s->width), "tt_exec_init");
            check_rc(tt_reduce_sum_d(&ex, s->len, s->grain, dot_pq, s, &pq), "tt_reduce_sum_d");
        } else {
            pq = omp_dot(s);
        }
        s->alpha = s->rr / pq;
        double t2 = now_s();
        if (use_tt) {
            tt_exec ex;
            check_rc(tt_exec_init(&ex, s->pool, s->width), "tt_exec_init");
            check_rc(tt_reduce_sum_d(&ex, s->len, s->grain, update_rr, s, &s->rr_new),
                     "tt_reduce_sum_d");
            s->beta = s->rr_new / s->rr;
            omp_update_p(s); /* the application's own region */
        } else {
            omp_update(s);
        }
        double t3 = now_s();
        s->rr = s->rr_new;
        k++;
        hist[k] = sqrt(s->rr) / bnorm;
        s->t_matvec += t1 - t0;
        s->t_dots += t2 - t1;
        s->t_update += t3 - t2;
    }
    return k;
}

/* |1 - A x| / |1|, computed serially. */
static double true_residual(cg *s)
{
    stencil_rows(s, s->x, s->q, 0, s->len);
    double t = 0.0;
    for (size_t i = 0; i < s->len; i++)
        t += (1.0 - s->q[i]) * (1.0 - s->q[i]);
    return sqrt(t / (double)s->len);
}

int main(int argc, char **argv)
{
    size_t n = 256;
    double tol = 1e-8;
    unsigned maxit = 5000, reps = 0;
    const char *mode = "both";
    bool check = false, csv = false, isolated = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--n") && i + 1 < argc)
            n = (size_t)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--tol") && i + 1 < argc)
            tol = strtod(argv[++i], NULL);
        else if (!strcmp(argv[i], "--maxit") && i + 1 < argc)
            maxit = (unsigned)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--mode") && i + 1 < argc)
            mode = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = (unsigned)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--check"))
            check = true;
        else if (!strcmp(argv[i], "--csv"))
            csv = true;
        else if (!strcmp(argv[i], "--isolated"))
            isolated = true;
        else {
            fprintf(stderr, "usage: cg [--n N] [--tol T] [--maxit K] [--mode both|tt|omp] "
                            "[--check] [--reps R] [--csv] [--isolated]\n");
            return 2;
        }
    }
    if (n < 4 || maxit < 1) {
        fprintf(stderr, "cg: n must be at least 4, maxit at least 1\n");
        return 2;
    }
    bool run_tt = strcmp(mode, "omp") != 0, run_omp = strcmp(mode, "tt") != 0;
    if (check)
        run_tt = run_omp = true;

    cg s;
    memset(&s, 0, sizeof s);
    s.n = n;
    s.len = n * n;
    s.grain = (s.len + NBLK - 1) / NBLK;
    s.nb = s.len / s.grain; /* tt_reduce_sum_d's block count, <= NBLK */
    s.x = malloc(s.len * sizeof(double));
    s.r = malloc(s.len * sizeof(double));
    s.p = malloc(s.len * sizeof(double));
    s.q = malloc(s.len * sizeof(double));
    double *hist_tt = malloc((maxit + 1) * sizeof(double));
    double *hist_omp = malloc((maxit + 1) * sizeof(double));
    if (!s.x || !s.r || !s.p || !s.q || !hist_tt || !hist_omp)
        return 2;
    /* The kernels' shares make no OpenMP call: declared so (see above). */
    tt_pool_attr *pa = NULL;
    if (!isolated) {
        check_rc(tt_pool_attr_create(&pa), "tt_pool_attr_create");
        check_rc(tt_pool_attr_set_isolate_shares(pa, false), "tt_pool_attr_set_isolate_shares");
    }
    check_rc(tt_pool_create(&s.pool, pa), "tt_pool_create");
    if (pa)
        tt_pool_attr_destroy(pa);
    s.width = tt_pool_width(s.pool);
#ifdef _OPENMP
    int omp_threads = omp_get_max_threads();
#else
    int omp_threads = 1;
#endif

    unsigned it_tt = 0, it_omp = 0;
    bool same_bits = true;
    double res_tt = 0, res_omp = 0;
    unsigned runs = reps ? reps + 1 : 1; /* with --reps: one warm-up solve first */
    for (unsigned rep = 0; rep < runs; rep++) {
        for (int m = 0; m < 2; m++) {
            bool tt = m == 0;
            if ((tt && !run_tt) || (!tt && !run_omp))
                continue;
            double t0 = now_s();
            unsigned it = solve(&s, tt, tol, maxit, tt ? hist_tt : hist_omp);
            double total = now_s() - t0;
            double res = true_residual(&s);
            if (tt) {
                it_tt = it;
                res_tt = res;
            } else {
                it_omp = it;
                res_omp = res;
            }
            if (reps && rep == 0)
                continue;
            if (csv)
                printf("%s,%zu,%u,%.3f,%.3f,%.3f,%.3f\n", tt ? "tt" : "omp", n, it, total * 1e3,
                       s.t_matvec * 1e3, s.t_dots * 1e3, s.t_update * 1e3);
            else
                printf("cg %-3s n=%zu (%zu unknowns), pool width %u, omp threads %d: %u iterations, "
                       "|b-Ax|/|b| = %.3g; %.2f ms: matvec %.2f, dots %.2f, update %.2f\n",
                       tt ? "tt" : "omp", n, s.len, s.width, omp_threads, it, res, total * 1e3,
                       s.t_matvec * 1e3, s.t_dots * 1e3, s.t_update * 1e3);
        }
    }

    int status = 0;
    if (run_tt && (it_tt >= maxit || res_tt > 10 * tol)) {
        fprintf(stderr, "cg: tt solver did not converge (%u iterations, residual %.3g)\n", it_tt,
                res_tt);
        status = 1;
    }
    if (run_omp && (it_omp >= maxit || res_omp > 10 * tol)) {
        fprintf(stderr, "cg: omp solver did not converge (%u iterations, residual %.3g)\n", it_omp,
                res_omp);
        status = 1;
    }
    if (check) {
        if (it_tt != it_omp) {
            fprintf(stderr, "cg: iteration counts differ: tt %u, omp %u\n", it_tt, it_omp);
            status = 1;
        }
        unsigned kmax = it_tt < it_omp ? it_tt : it_omp;
        for (unsigned k = 0; k <= kmax; k++) {
            if (memcmp(&hist_tt[k], &hist_omp[k], sizeof(double)) != 0)
                same_bits = false;
            double d = fabs(hist_tt[k] - hist_omp[k]);
            if (d > 1e-12 * hist_omp[k]) {
                fprintf(stderr, "cg: residual norms differ at iteration %u: tt %.17g, omp %.17g\n",
                        k, hist_tt[k], hist_omp[k]);
                status = 1;
                break;
            }
        }
        if (status == 0)
            printf("cg check: same %u iterations, residual histories agree (1e-12; "
                   "bit for bit: %s), |b-Ax|/|b| tt %.3g omp %.3g: ok\n",
                   it_tt, same_bits ? "yes" : "no", res_tt, res_omp);
    }
    check_rc(tt_pool_destroy(s.pool), "tt_pool_destroy");
    free(s.x);
    free(s.r);
    free(s.p);
    free(s.q);
    free(hist_tt);
    free(hist_omp);
    return status;
}
