/*
 * sum_omp.c -- the OpenMP twin of sum.c: `parallel for reduction(+:s)`.
 * Its last bits may change with the number of threads (the order in which
 * the threads' partial sums are added is not fixed).
 *
 *   cc -O2 -fopenmp sum_omp.c -o sum_omp -lm && ./sum_omp [n]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 10000000;
    double *x = malloc(n * sizeof *x);
    if (n < 1000 || !x)
        return 2;
    for (size_t i = 0; i < n; i++)
        x[i] = 1.0 / (double)(i + 1);

    double sum = 0.0;
    long len = (long)n;
#pragma omp parallel for reduction(+ : sum)
    for (long i = 0; i < len; i++)
        sum += x[i];
    free(x);

    double dn = (double)n;
    double expect = log(dn) + 0.57721566490153286 + 1.0 / (2 * dn) - 1.0 / (12 * dn * dn);
    printf("sum of 1/i for i = 1..%zu: %.17g\n", n, sum);
    printf("result: %.17g\n", sum);
    if (fabs(sum - expect) > 1e-9 * expect) {
        fprintf(stderr, "sum_omp: wrong result, expected about %.17g\n", expect);
        return 1;
    }
    printf("sum_omp: ok\n");
    return 0;
}
