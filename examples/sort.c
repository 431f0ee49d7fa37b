/*
 * sort.c -- divide and conquer with threadteam: a merge sort whose two
 * halves run as the two jobs of tt_fork (OpenMP twin: sort_omp.c, tasks).
 *
 * Each job gets a child token holding its share of the parent's budget;
 * it forks again with that token, so the recursion never runs more than
 * the pool's width of threads at once, at any depth.
 *
 *   cc -O2 -fopenmp sort.c -o sort $(pkg-config --cflags --libs threadteam)
 */
#include <threadteam.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CUTOFF 8192 /* below this, sort serially */

typedef struct sort_job {
    double *a, *tmp;
    size_t n;
    int rc; /* the first error of a sub-sort, TT_OK when none */
} sort_job;

static int cmp(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static int msort(tt_exec *ex, double *a, double *tmp, size_t n);

/* Job i sorts half i with its child token. */
static void half_job(void *arg, unsigned i, tt_exec *child)
{
    sort_job *h = &((sort_job *)arg)[i];
    h->rc = msort(child, h->a, h->tmp, h->n);
}

/* Sort a[0..n) using the budget of `ex` (which it uses up, or leaves). */
static int msort(tt_exec *ex, double *a, double *tmp, size_t n)
{
    if (n < CUTOFF || tt_exec_budget(ex) == 1) {
        qsort(a, n, sizeof *a, cmp);
        return TT_OK;
    }
    size_t m = n / 2;
    sort_job halves[2] = {{a, tmp, m, TT_OK}, {a + m, tmp + m, n - m, TT_OK}};
    int rc = tt_fork(ex, 2, half_job, halves); /* both halves, then return */
    if (rc == TT_OK)
        rc = halves[0].rc ? halves[0].rc : halves[1].rc;
    if (rc != TT_OK)
        return rc;
    /* Merge the two sorted halves through tmp. */
    size_t i = 0, j = m, k = 0;
    while (i < m && j < n)
        tmp[k++] = a[j] < a[i] ? a[j++] : a[i++];
    while (i < m)
        tmp[k++] = a[i++];
    while (j < n)
        tmp[k++] = a[j++];
    memcpy(a, tmp, n * sizeof *a);
    return TT_OK;
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 2000000;
    double *a = malloc(n * sizeof *a), *tmp = malloc(n * sizeof *a), *ref = malloc(n * sizeof *a);
    if (n < 2 || !a || !tmp || !ref)
        return 2;
    unsigned seed = 12345; /* the same numbers as sort_omp.c */
    for (size_t i = 0; i < n; i++)
        ref[i] = a[i] = (double)(seed = seed * 1103515245u + 12345u) / 4294967296.0;

    tt_pool *pool;
    tt_exec ex;
    int rc = tt_pool_create(&pool, NULL);
    if (rc == TT_OK)
        rc = tt_exec_init(&ex, pool, tt_pool_width(pool));
    if (rc == TT_OK)
        rc = msort(&ex, a, tmp, n);
    if (rc == TT_OK)
        rc = tt_pool_destroy(pool);
    if (rc != TT_OK) {
        fprintf(stderr, "sort: %s\n", tt_strerror(rc));
        return 2;
    }
    /* Check: the same numbers as a serial qsort, in the same order. */
    qsort(ref, n, sizeof *ref, cmp);
    int ok = memcmp(a, ref, n * sizeof *a) == 0;
    printf("sorted %zu numbers: first %.17g, middle %.17g, last %.17g\n", n, a[0], a[n / 2],
           a[n - 1]);
    printf("result: %.17g\n", a[n / 2]);
    printf("sort: %s\n", ok ? "ok" : "WRONG (differs from qsort)");
    free(a);
    free(tmp);
    free(ref);
    return ok ? 0 : 1;
}
