/*
 * blas.c -- calling an OpenMP library (OpenBLAS's dgemm) from threadteam
 * (OpenMP twin: blas_omp.c, which just calls it).
 *
 * tt_external hands the callback `width` threads of the token's budget:
 * OpenBLAS's own `omp parallel` inside gets exactly that many and no more,
 * so a BLAS call can share the machine with other threadteam work.
 *
 *   cc -O2 -fopenmp blas.c -o blas $(pkg-config --cflags --libs threadteam) -lopenblas
 * (this tree builds it only when configure found OpenBLAS's OpenMP build;
 * otherwise the program only says so and exits 77, "skipped").
 */
#include <threadteam.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef TT_EXAMPLE_OPENBLAS
int main(void)
{
    printf("blas: skipped (built without OpenBLAS)\n");
    return 77;
}
#else
#include <cblas.h>

typedef struct gemm {
    int n;
    const double *a, *b;
    double *c;
    unsigned width; /* what tt_external gave */
} gemm;

/* The callback: OpenBLAS opens its region here with `width` threads. */
static void call_dgemm(void *arg, unsigned width)
{
    gemm *g = arg;
    g->width = width;
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, g->n, g->n, g->n, 1.0, g->a, g->n,
                g->b, g->n, 0.0, g->c, g->n);
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 300;
    double *a = malloc(sizeof(double) * n * n), *b = malloc(sizeof(double) * n * n);
    double *c = malloc(sizeof(double) * n * n);
    if (n < 1 || !a || !b || !c)
        return 2;
    for (int i = 0; i < n * n; i++) {
        a[i] = (double)(i % 7) - 3.0; /* small integers: the products are exact */
        b[i] = (double)(i % 5) - 2.0;
    }
    tt_pool *pool;
    tt_exec ex;
    gemm g = {n, a, b, c, 0};
    int rc = tt_pool_create(&pool, NULL);
    if (rc == TT_OK)
        rc = tt_exec_init(&ex, pool, tt_pool_width(pool));
    if (rc == TT_OK)
        rc = tt_external(&ex, call_dgemm, &g);
    if (rc == TT_OK)
        rc = tt_pool_destroy(pool);
    if (rc != TT_OK) {
        fprintf(stderr, "blas: %s\n", tt_strerror(rc));
        return 2;
    }
    /* Check every element against the plain triple loop (exact here). */
    int bad = 0;
    double trace = 0.0;
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++) {
            double s = 0.0;
            for (int k = 0; k < n; k++)
                s += a[i * n + k] * b[k * n + j];
            bad += s != c[i * n + j];
        }
        trace += c[i * n + i];
    }
    printf("dgemm %dx%d on %u threads: trace %.17g\n", n, n, g.width, trace);
    printf("result: %.17g\n", trace);
    printf("blas: %s\n", bad ? "WRONG (differs from the triple loop)" : "ok");
    free(a);
    free(b);
    free(c);
    return bad ? 1 : 0;
}
#endif
