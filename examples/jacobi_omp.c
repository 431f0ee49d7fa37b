/*
 * jacobi_omp.c -- the OpenMP twin of jacobi.c: one `omp parallel` region
 * for all sweeps; the implicit barrier of each `omp for` separates them.
 *
 *   cc -O2 -fopenmp jacobi_omp.c -o jacobi_omp
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void sweep_rows(size_t n, const double *u, double *v, size_t lo, size_t hi)
{
    for (size_t i = lo; i < hi; i++)
        for (size_t j = 1; j + 1 < n; j++)
            v[i * n + j] = 0.25 * (u[(i - 1) * n + j] + u[(i + 1) * n + j] +
                                   u[i * n + j - 1] + u[i * n + j + 1]);
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 512;
    unsigned sweeps = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10) : 200;
    double *u = calloc(n * n, sizeof *u), *v = calloc(n * n, sizeof *v);
    double *ru = calloc(n * n, sizeof *u), *rv = calloc(n * n, sizeof *v);
    if (n < 3 || !u || !v || !ru || !rv)
        return 2;
    for (size_t j = 0; j < n; j++)
        u[j] = v[j] = ru[j] = rv[j] = 1.0; /* the top row */
    double *out = sweeps % 2 ? v : u;

#pragma omp parallel firstprivate(u, v)
    for (unsigned k = 0; k < sweeps; k++) {
        long rows = (long)n - 1;
#pragma omp for schedule(static)
        for (long i = 1; i < rows; i++)
            sweep_rows(n, u, v, (size_t)i, (size_t)i + 1);
        double *t = u; /* every thread swaps its own copies */
        u = v;
        v = t;
    }

    for (unsigned k = 0; k < sweeps; k++) {
        sweep_rows(n, ru, rv, 1, n - 1);
        double *t = ru;
        ru = rv;
        rv = t;
    }
    int ok = memcmp(out, ru, n * n * sizeof(double)) == 0;
    double total = 0.0; /* a checked summary, summed serially */
    for (size_t i = 0; i < n * n; i++)
        total += out[i];
    printf("jacobi_omp %zux%zu, %u sweeps: sum of u %.17g\n", n, n, sweeps, total);
    printf("result: %.17g\n", total);
    printf("jacobi_omp: %s\n", ok ? "ok" : "WRONG (differs from the serial sweeps)");
    return ok ? 0 : 1;
}
