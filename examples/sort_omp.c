/*
 * sort_omp.c -- the OpenMP twin of sort.c: the same merge sort with
 * `omp task` for the halves (inside one `parallel` + `single`).
 *
 *   cc -O2 -fopenmp sort_omp.c -o sort_omp
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CUTOFF 8192

static int cmp(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static void msort(double *a, double *tmp, size_t n)
{
    if (n < CUTOFF) {
        qsort(a, n, sizeof *a, cmp);
        return;
    }
    size_t m = n / 2;
#pragma omp task
    msort(a, tmp, m);
#pragma omp task
    msort(a + m, tmp + m, n - m);
#pragma omp taskwait
    size_t i = 0, j = m, k = 0;
    while (i < m && j < n)
        tmp[k++] = a[j] < a[i] ? a[j++] : a[i++];
    while (i < m)
        tmp[k++] = a[i++];
    while (j < n)
        tmp[k++] = a[j++];
    memcpy(a, tmp, n * sizeof *a);
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 2000000;
    double *a = malloc(n * sizeof *a), *tmp = malloc(n * sizeof *a), *ref = malloc(n * sizeof *a);
    if (n < 2 || !a || !tmp || !ref)
        return 2;
    unsigned seed = 12345;
    for (size_t i = 0; i < n; i++)
        ref[i] = a[i] = (double)(seed = seed * 1103515245u + 12345u) / 4294967296.0;

#pragma omp parallel
#pragma omp single
    msort(a, tmp, n);

    qsort(ref, n, sizeof *ref, cmp);
    int ok = memcmp(a, ref, n * sizeof *a) == 0;
    printf("sorted %zu numbers: first %.17g, middle %.17g, last %.17g\n", n, a[0], a[n / 2],
           a[n - 1]);
    printf("result: %.17g\n", a[n / 2]);
    printf("sort_omp: %s\n", ok ? "ok" : "WRONG (differs from qsort)");
    free(a);
    free(tmp);
    free(ref);
    return ok ? 0 : 1;
}
