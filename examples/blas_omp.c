/*
 * blas_omp.c -- the OpenMP twin of blas.c: the dgemm called directly; its
 * threads are OpenBLAS's own (OMP_NUM_THREADS of them).
 *
 *   cc -O2 -fopenmp blas_omp.c -o blas_omp -lopenblas
 */
#include <stdio.h>
#include <stdlib.h>

#ifndef TT_EXAMPLE_OPENBLAS
int main(void)
{
    printf("blas_omp: skipped (built without OpenBLAS)\n");
    return 77;
}
#else
#include <cblas.h>

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 300;
    double *a = malloc(sizeof(double) * n * n), *b = malloc(sizeof(double) * n * n);
    double *c = malloc(sizeof(double) * n * n);
    if (n < 1 || !a || !b || !c)
        return 2;
    for (int i = 0; i < n * n; i++) {
        a[i] = (double)(i % 7) - 3.0;
        b[i] = (double)(i % 5) - 2.0;
    }
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, a, n, b, n, 0.0, c, n);
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
    printf("dgemm %dx%d: trace %.17g\n", n, n, trace);
    printf("result: %.17g\n", trace);
    printf("blas_omp: %s\n", bad ? "WRONG (differs from the triple loop)" : "ok");
    free(a);
    free(b);
    free(c);
    return bad ? 1 : 0;
}
#endif
