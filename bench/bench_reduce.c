/*
 * bench_reduce.c -- tt_reduce_sum_d against `#pragma omp parallel for
 * reduction(+:s)` on an array of doubles, at the same width (the
 * process's omp_get_max_threads(), which is also the pool's default).
 *
 * One process runs one system (threadteam's pool and the application's own
 * OpenMP team never share a process here, as in bench_ranges):
 *
 *   bench_reduce --system tt|tt-free|omp [--lens LIST] [--reps N] [--grain G]
 *
 * and prints one CSV line per repetition:
 *   system,width,len,rep,us_per_call
 * where a repetition is the mean of `calls` calls (about 2 ms of work,
 * at least one call). scripts/bench-reduce.sh alternates the two systems in
 * separate processes and prints medians, p90 and the ratio tt / omp.
 *
 * The threadteam side mints a token per call (tt_exec_init at the pool's
 * width, then tt_reduce_sum_d with grain --grain, default 2048); the
 * OpenMP side runs one parallel region per call. Both bodies are the same
 * plain loop (no -ffast-math: neither vectorises the additions).
 *
 * tt-free is tt on a pool whose owner declared its shares OpenMP-free
 * (tt_pool_attr_set_isolate_shares(false)): no nested one-thread region
 * per participant. The body here contains no OpenMP, so both are correct;
 * the pair shows what the isolated default costs (the specification's rule:
 * where isolation cannot meet a path target, the target holds for
 * OpenMP-free pools and the isolated cost is reported beside it).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "threadteam.h"

#include <omp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static double block_sum(void *arg, size_t begin, size_t end)
{
    const double *x = arg;
    double s = 0.0;
    for (size_t i = begin; i < end; i++)
        s += x[i];
    return s;
}

static double omp_sum(const double *x, size_t n)
{
    double s = 0.0;
    long len = (long)n;
#pragma omp parallel for reduction(+ : s) schedule(static)
    for (long i = 0; i < len; i++)
        s += x[i];
    return s;
}

int main(int argc, char **argv)
{
    const char *system = NULL;
    char lens_buf[256] = "1000,10000,100000,1000000,10000000";
    unsigned reps = 15;
    size_t grain = 2048;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--system") && i + 1 < argc)
            system = argv[++i];
        else if (!strcmp(argv[i], "--lens") && i + 1 < argc)
            snprintf(lens_buf, sizeof lens_buf, "%s", argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = (unsigned)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--grain") && i + 1 < argc)
            grain = strtoul(argv[++i], NULL, 10);
        else
            system = NULL, i = argc;
    }
    bool free_shares = system && !strcmp(system, "tt-free");
    int tt = system && (!strcmp(system, "tt") || free_shares);
    if (!system || (!tt && strcmp(system, "omp")) || reps == 0 || grain == 0) {
        fprintf(stderr, "usage: bench_reduce --system tt|tt-free|omp [--lens LIST] [--reps N] "
                        "[--grain G]\n");
        return 2;
    }
    tt_pool *pool = NULL;
    unsigned width = (unsigned)omp_get_max_threads();
    if (tt) {
        tt_pool_attr *pa = NULL;
        int rc = TT_OK;
        if (free_shares) {
            rc = tt_pool_attr_create(&pa);
            if (rc == TT_OK)
                rc = tt_pool_attr_set_isolate_shares(pa, false);
        }
        if (rc == TT_OK)
            rc = tt_pool_create(&pool, pa);
        if (pa)
            tt_pool_attr_destroy(pa);
        if (rc != TT_OK) {
            fprintf(stderr, "bench_reduce: tt_pool_create: %s\n", tt_strerror(rc));
            return 2;
        }
        width = tt_pool_width(pool);
    }
    double sink = 0.0;
    for (char *tok = strtok(lens_buf, ","); tok; tok = strtok(NULL, ",")) {
        size_t len = strtoul(tok, NULL, 10);
        double *x = malloc((len ? len : 1) * sizeof *x);
        if (!x)
            return 2;
        for (size_t i = 0; i < len; i++)
            x[i] = 1.0 / (double)(i + 1);
        /* About 2 ms of additions per repetition at ~1 ns each. */
        unsigned calls = len >= 2000000 ? 1u : (unsigned)(2000000 / (len ? len : 1));
        for (unsigned r = 0; r <= reps; r++) { /* repetition 0 warms up */
            double t0 = now_us();
            for (unsigned c = 0; c < calls; c++) {
                double s;
                if (tt) {
                    tt_exec ex;
                    int rc = tt_exec_init(&ex, pool, width);
                    if (rc == TT_OK)
                        rc = tt_reduce_sum_d(&ex, len, grain, block_sum, x, &s);
                    if (rc != TT_OK) {
                        fprintf(stderr, "bench_reduce: %s\n", tt_strerror(rc));
                        return 2;
                    }
                } else {
                    s = omp_sum(x, len);
                }
                sink += s;
            }
            double us = (now_us() - t0) / calls;
            if (r > 0)
                printf("%s,%u,%zu,%u,%.3f\n", system, width, len, r, us);
        }
        free(x);
    }
    if (pool && tt_pool_destroy(pool) != TT_OK)
        return 2;
    fprintf(stderr, "bench_reduce: sink %g\n", sink);
    return 0;
}
