/*
 * sum.c -- a parallel sum with threadteam (OpenMP twin: sum_omp.c).
 *
 * tt_reduce_sum_d cuts [0, n) into blocks that depend on n and the grain
 * only, sums each block in one task, and adds the block sums in a fixed
 * order. So the result is the same bits with 1 thread or with all of them,
 * which `reduction(+:s)` does not promise. This program checks that too.
 *
 *   cc -O2 -fopenmp sum.c -o sum $(pkg-config --cflags --libs threadteam) -lm
 *   ./sum [n]
 */
#include <threadteam.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The body: the sum of one block x[begin..end). No atomics needed. */
static double block_sum(void *arg, size_t begin, size_t end)
{
    const double *x = arg;
    double s = 0.0;
    for (size_t i = begin; i < end; i++)
        s += x[i];
    return s;
}

static void check(int rc, const char *what)
{
    if (rc != TT_OK) {
        fprintf(stderr, "sum: %s: %s\n", what, tt_strerror(rc));
        exit(2);
    }
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 10000000;
    double *x = malloc(n * sizeof *x);
    if (n < 1000 || !x)
        return 2;
    for (size_t i = 0; i < n; i++)
        x[i] = 1.0 / (double)(i + 1); /* the harmonic series */

    tt_pool *pool;
    check(tt_pool_create(&pool, NULL), "tt_pool_create"); /* width: OMP_NUM_THREADS */
    unsigned width = tt_pool_width(pool);

    /* A token is a budget of threads; an entry (here the reduction) uses it
     * up, so each sum gets a fresh one. First with every thread ... */
    tt_exec ex;
    double sum, sum1;
    check(tt_exec_init(&ex, pool, width), "tt_exec_init");
    check(tt_reduce_sum_d(&ex, n, 4096, block_sum, x, &sum), "tt_reduce_sum_d");
    /* ... then with one thread: the same bits. */
    check(tt_exec_init(&ex, pool, 1), "tt_exec_init");
    check(tt_reduce_sum_d(&ex, n, 4096, block_sum, x, &sum1), "tt_reduce_sum_d");
    check(tt_pool_destroy(pool), "tt_pool_destroy");
    free(x);

    /* H(n) = ln n + gamma + 1/(2n) - 1/(12 n^2) + ... */
    double dn = (double)n;
    double expect = log(dn) + 0.57721566490153286 + 1.0 / (2 * dn) - 1.0 / (12 * dn * dn);
    printf("sum of 1/i for i = 1..%zu on %u threads: %.17g\n", n, width, sum);
    printf("result: %.17g\n", sum);
    if (memcmp(&sum, &sum1, sizeof sum) != 0) {
        fprintf(stderr, "sum: 1 thread gave %.17g, not the same bits\n", sum1);
        return 1;
    }
    if (fabs(sum - expect) > 1e-9 * expect) {
        fprintf(stderr, "sum: wrong result, expected about %.17g\n", expect);
        return 1;
    }
    printf("sum: ok (same bits on 1 and %u threads)\n", width);
    return 0;
}
