/*
 * jacobi.c -- a Jacobi stencil with a threadteam team scope (OpenMP twin:
 * jacobi_omp.c, `parallel` + `for` with its implicit barriers).
 *
 * tt_team_scope reserves the threads once; its section runs on all of them
 * at once, each sweeping its own rows, and tt_section_barrier separates the
 * sweeps. A failed call inside the scope ends it with tt_scope_fail, whose
 * code tt_team_scope returns.
 *
 *   cc -O2 -fopenmp jacobi.c -o jacobi $(pkg-config --cflags --libs threadteam)
 */
#include <threadteam.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct grid {
    size_t n;        /* n x n points; the top row is held at 1, the rest of the edge at 0 */
    unsigned sweeps;
    double *u, *v;   /* the current and the next iterate */
} grid;

/* One Jacobi sweep of rows [lo, hi) (interior rows only): from u into v. */
static void sweep_rows(size_t n, const double *u, double *v, size_t lo, size_t hi)
{
    for (size_t i = lo; i < hi; i++)
        for (size_t j = 1; j + 1 < n; j++)
            v[i * n + j] = 0.25 * (u[(i - 1) * n + j] + u[(i + 1) * n + j] +
                                   u[i * n + j - 1] + u[i * n + j + 1]);
}

/* The section: every participant sweeps its block of rows, then waits at the
 * barrier for the others before the next sweep reads their rows. */
static void jacobi_section(void *arg, tt_section *s)
{
    const grid *g = arg;
    size_t rows = g->n - 2, r = tt_section_rank(s), p = tt_section_size(s);
    size_t lo = 1 + rows * r / p, hi = 1 + rows * (r + 1) / p;
    double *u = g->u, *v = g->v;
    for (unsigned k = 0; k < g->sweeps; k++) {
        sweep_rows(g->n, u, v, lo, hi);
        if (tt_section_barrier(s) != TT_OK)
            return; /* the scope failed: the barrier waits for nobody */
        double *t = u; /* every participant swaps its own copies */
        u = v;
        v = t;
    }
}

static void jacobi_scope(void *arg, tt_scope *scope)
{
    int rc = tt_scope_run(scope, jacobi_section, arg);
    if (rc != TT_OK)
        tt_scope_fail(scope, rc); /* tt_team_scope will return rc */
}

static grid make_grid(size_t n, unsigned sweeps)
{
    grid g = {n, sweeps, calloc(n * n, sizeof(double)), calloc(n * n, sizeof(double))};
    for (size_t j = 0; g.u && g.v && j < n; j++)
        g.u[j] = g.v[j] = 1.0; /* the top row */
    return g;
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 512;
    unsigned sweeps = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10) : 200;
    grid g = make_grid(n, sweeps), ref = make_grid(n, sweeps);
    if (n < 3 || !g.u || !g.v || !ref.u || !ref.v)
        return 2;

    tt_pool *pool;
    tt_exec ex;
    int rc = tt_pool_create(&pool, NULL);
    if (rc == TT_OK)
        rc = tt_exec_init(&ex, pool, tt_pool_width(pool));
    if (rc == TT_OK)
        rc = tt_team_scope(&ex, jacobi_scope, &g);
    if (rc == TT_OK)
        rc = tt_pool_destroy(pool);
    if (rc != TT_OK) {
        fprintf(stderr, "jacobi: %s\n", tt_strerror(rc));
        return 2;
    }
    /* Check: the same sweeps serially give the same bits. */
    for (unsigned k = 0; k < sweeps; k++) {
        sweep_rows(n, ref.u, ref.v, 1, n - 1);
        double *t = ref.u;
        ref.u = ref.v;
        ref.v = t;
    }
    double *out = sweeps % 2 ? g.v : g.u; /* where the last sweep wrote */
    int ok = memcmp(out, ref.u, n * n * sizeof(double)) == 0;
    double total = 0.0; /* a checked summary, summed serially */
    for (size_t i = 0; i < n * n; i++)
        total += out[i];
    printf("jacobi %zux%zu, %u sweeps: sum of u %.17g\n", n, n, sweeps, total);
    printf("result: %.17g\n", total);
    printf("jacobi: %s\n", ok ? "ok" : "WRONG (differs from the serial sweeps)");
    return ok ? 0 : 1;
}
