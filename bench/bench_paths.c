/*
 * bench_paths.c -- the paths an OpenMP code takes first, against the raw
 * OpenMP a user would write instead. One system per process
 * (scripts/bench-paths.sh alternates them and takes medians).
 *
 *   --system omp|tt  raw OpenMP, or threadteam
 *   --scenario S     ranges     axpy over N doubles, a token per call on
 *                               the main thread and tt_for_ranges, against
 *                               `omp parallel for` (--n 1000,100000,1000000)
 *                    coexist    the application's own `omp parallel` with
 *                               5 us of work per thread: omp = no pool;
 *                               tt = the same regions with a default pool
 *                               alive and idle (built and used once)
 *                    alternate  those regions alternating with a parallel
 *                               call of 5 us per thread: omp = a second
 *                               `omp parallel`; tt = a tt_for_ranges on a
 *                               token per call
 *                    external   OpenBLAS's dgemm (OpenMP build, linked
 *                               normally), n x n (--n 32,64,128,256,512):
 *                               omp = the direct call at the same width;
 *                               tt = through tt_external on a token of the
 *                               pool's full width, minted per call
 *                               (built only when configure found OpenBLAS)
 * Prints one line per configuration: `scenario param us_per_call`, the
 * median over --reps repetitions of --calls calls each.
 * Width: omp_get_max_threads() (all CPUs unless OMP_NUM_THREADS says).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "config.h"
#include "threadteam.h"

#include <omp.h>
#include <stdbool.h>
#if TT_HAVE_OPENBLAS
#include <cblas.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

static void work_us(double us)
{
    double t0 = now_us();
    while (now_us() - t0 < us)
        ;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

typedef struct axpy {
    double a;
    const double *x;
    double *y;
} axpy;

static void axpy_body(void *arg, size_t b, size_t e)
{
    axpy *p = arg;
    for (size_t i = b; i < e; i++)
        p->y[i] += p->a * p->x[i];
}

#if TT_HAVE_OPENBLAS
typedef struct gemm {
    int n;
    const double *a, *b;
    double *c;
} gemm;

static void gemm_call(void *arg, unsigned width)
{
    (void)width; /* OpenBLAS takes omp_get_max_threads(), which is width */
    gemm *g = arg;
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, g->n, g->n, g->n, 1.0, g->a, g->n, g->b,
                g->n, 0.0, g->c, g->n);
}
#endif

static void work_body(void *arg, size_t b, size_t e)
{
    (void)arg;
    (void)b;
    (void)e;
    work_us(5.0);
}

int main(int argc, char **argv)
{
    const char *system = "omp", *scenario = "ranges";
    int reps = 11, calls = 0;
    size_t sizes[8] = {1000, 100000, 1000000};
    int nsizes = 3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--system") && i + 1 < argc)
            system = argv[++i];
        else if (!strcmp(argv[i], "--scenario") && i + 1 < argc)
            scenario = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--calls") && i + 1 < argc)
            calls = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--n") && i + 1 < argc) {
            nsizes = 0;
            for (char *t = strtok(argv[++i], ","); t && nsizes < 8; t = strtok(NULL, ","))
                sizes[nsizes++] = (size_t)strtoull(t, NULL, 10);
        } else {
            fprintf(stderr, "usage: bench_paths --system omp|tt --scenario ranges|coexist|alternate"
                            " [--n LIST] [--reps N] [--calls N]\n");
            return 2;
        }
    }
    bool tt = !strcmp(system, "tt");
    if (reps < 1 || reps > 1000)
        reps = 11;
    double *rep_us = calloc((size_t)reps, sizeof *rep_us);
    tt_pool *pool = NULL;
    if (tt && tt_pool_create(&pool, NULL) != TT_OK) {
        fprintf(stderr, "bench_paths: tt_pool_create failed\n");
        return 1;
    }
    unsigned W = (unsigned)omp_get_max_threads();

    if (!strcmp(scenario, "ranges")) {
        for (int s = 0; s < nsizes; s++) {
            size_t n = sizes[s];
            double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
            for (size_t i = 0; i < n; i++) {
                x[i] = (double)i;
                y[i] = 1.0;
            }
            axpy p = {.a = 1e-9, .x = x, .y = y};
            int c = calls ? calls : (n <= 1000 ? 4000 : n <= 100000 ? 800 : 100);
            for (int r = -1; r < reps; r++) {
                double t0 = now_us();
                for (int k = 0; k < c; k++) {
                    if (tt) {
                        tt_exec ex;
                        tt_exec_init(&ex, pool, W);
                        tt_for_ranges(&ex, n, 1, axpy_body, &p);
                    } else {
#pragma omp parallel for schedule(static)
                        for (size_t i = 0; i < n; i++)
                            y[i] += p.a * x[i];
                    }
                }
                if (r >= 0)
                    rep_us[r] = (now_us() - t0) / c;
            }
            printf("ranges n=%zu %.3f\n", n, median(rep_us, reps));
            free(x);
            free(y);
        }
    } else if (!strcmp(scenario, "coexist") || !strcmp(scenario, "alternate")) {
        bool alt = !strcmp(scenario, "alternate");
        if (tt) {
            /* used once: its idle state is what the application lives with */
            tt_exec ex;
            tt_exec_init(&ex, pool, W);
            tt_for_ranges(&ex, W, 1, work_body, NULL);
        }
        int c = calls ? calls : 2000;
        for (int r = -1; r < reps; r++) {
            double t0 = now_us();
            for (int k = 0; k < c; k++) {
#pragma omp parallel
                work_us(5.0);
                if (alt) {
                    if (tt) {
                        tt_exec ex;
                        tt_exec_init(&ex, pool, W);
                        tt_for_ranges(&ex, W, 1, work_body, NULL);
                    } else {
#pragma omp parallel
                        work_us(5.0);
                    }
                }
            }
            if (r >= 0)
                rep_us[r] = (now_us() - t0) / c;
        }
        printf("%s 5us %.3f\n", scenario, median(rep_us, reps));
    } else if (!strcmp(scenario, "external")) {
#if TT_HAVE_OPENBLAS
        if (nsizes == 3 && sizes[0] == 1000) {
            static const size_t ns[] = {32, 64, 128, 256, 512};
            nsizes = 5;
            for (int i = 0; i < 5; i++)
                sizes[i] = ns[i];
        }
        for (int s = 0; s < nsizes; s++) {
            int n = (int)sizes[s];
            size_t nn = (size_t)n * (size_t)n;
            double *a = malloc(nn * sizeof *a), *b = malloc(nn * sizeof *b),
                   *c = malloc(nn * sizeof *c);
            for (size_t i = 0; i < nn; i++) {
                a[i] = (double)(i % 7) * 0.5;
                b[i] = (double)(i % 5) * 0.25;
            }
            gemm g = {n, a, b, c};
            double flops = 2.0 * n * (double)n * n;
            int cnt = calls ? calls : (int)(2e8 / flops) + 3;
            if (cnt > 20000)
                cnt = 20000;
            for (int r = -1; r < reps; r++) {
                double t0 = now_us();
                for (int k = 0; k < cnt; k++) {
                    if (tt) {
                        tt_exec ex;
                        tt_exec_init(&ex, pool, W);
                        tt_external(&ex, gemm_call, &g);
                    } else {
                        gemm_call(&g, W);
                    }
                }
                if (r >= 0)
                    rep_us[r] = (now_us() - t0) / cnt;
            }
            printf("external n=%d %.3f\n", n, median(rep_us, reps));
            free(a);
            free(b);
            free(c);
        }
#else
        fprintf(stderr, "bench_paths: built without OpenBLAS (configure did not find its "
                        "OpenMP build): no external scenario\n");
        return 3;
#endif
    } else {
        fprintf(stderr, "bench_paths: unknown scenario %s\n", scenario);
        return 2;
    }
    if (pool)
        tt_pool_destroy(pool);
    free(rep_us);
    return 0;
}
