/*
 * bench_tasks.c -- the task-suite kernels (tasks_kernels.h) timed, one
 * system per process (scripts/bench-tasks.sh alternates the processes):
 *
 *   bench_tasks --system S [--kernels LIST] [--reps K] [--small]
 *
 *   S: tt       a pool of all CPUs, shares isolated (the default)
 *      tt-free  the same pool with its shares declared OpenMP-free
 *               (tt_pool_attr_set_isolate_shares(false))
 *      omp      the OpenMP-task twins (untied tasks, depth cutoff: fib 10
 *               levels, nqueens 3 rows, as BOTS sets them), the
 *               two-level loop with its inner loop serialised (the default)
 *      omp-nested  the two-level loop with max-active-levels 2 (the other
 *               kernels as omp)
 *   LIST: fib,fib-port,nqueens,nqueens-port,sort,nested,irregular,
 *         irregular-dyn, inline
 *         (default all)
 *   --small  the sizes of tests/test_tasks.c (a smoke run)
 *
 * Before its timed repetitions, each kernel runs once with its result
 * checked and, on the threadteam side, the peak of bodies running at once
 * counted: a wrong result or a peak above the budget ends the program
 * (exit 1). Then one CSV row per repetition on stdout:
 *   system,width,kernel,param,rep,us
 * `inline` reports nanoseconds per fork of 2 jobs in its us column's
 * place (param says so), and its omp rows are an undeferred `omp task`
 * pair (omp) and two plain calls (omp-nested's row: plain).
 */
#include "tasks_kernels.h"

#ifdef _OPENMP
#include <omp.h>
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

static int fail(const char *what, const char *sys)
{
    fprintf(stderr, "bench_tasks: %s (%s)\n", what, sys);
    exit(1);
}

typedef struct sizes {
    int fib, fib_port, nq, nq_port;
    size_t sort, nested_unit, sparse_rows;
    unsigned nested_dom;
    long inline_depth;
} sizes;

static const sizes bench_sizes = {.fib = 32, .fib_port = 27, .nq = 12, .nq_port = 10,
                                  .sort = (size_t)1 << 22, .nested_unit = 20000,
                                  .nested_dom = 4, .sparse_rows = 400000, .inline_depth = 18};
static const sizes small_sizes = {.fib = 20, .fib_port = 16, .nq = 8, .nq_port = 7,
                                  .sort = 50000, .nested_unit = 2000, .nested_dom = 3,
                                  .sparse_rows = 20000, .inline_depth = 10};

static bool wanted(const char *list, const char *k)
{
    if (!list)
        return true;
    size_t n = strlen(k);
    for (const char *p = list; (p = strstr(p, k)) != NULL; p += n)
        if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
            return true;
    return false;
}

/* A fresh root token of the pool's width (NULL pool: the omp systems). */
static void root(tt_exec *ex, tt_pool *pool)
{
    if (tt_exec_init(ex, pool, tt_pool_width(pool)) != TT_OK)
        fail("tt_exec_init", "tt");
}

int main(int argc, char **argv)
{
    const char *sys = NULL, *list = NULL;
    int reps = 5;
    bool small = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--system") && i + 1 < argc)
            sys = argv[++i];
        else if (!strcmp(argv[i], "--kernels") && i + 1 < argc)
            list = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--small"))
            small = true;
        else {
            fprintf(stderr, "usage: bench_tasks --system tt|tt-free|omp|omp-nested "
                            "[--kernels LIST] [--reps K] [--small]\n");
            return 2;
        }
    }
    if (!sys)
        return fail("--system missing", "?");
    bool tt = !strcmp(sys, "tt") || !strcmp(sys, "tt-free");
    bool nested = !strcmp(sys, "omp-nested");
    const sizes *z = small ? &small_sizes : &bench_sizes;
    tt_pool *pool = NULL;
#ifdef _OPENMP
    unsigned width = (unsigned)omp_get_max_threads();
#else
    unsigned width = 1;
#endif
    if (tt) {
        tt_pool_attr *a;
        if (tt_pool_attr_create(&a) != TT_OK ||
            tt_pool_attr_set_isolate_shares(a, strcmp(sys, "tt-free") != 0) != TT_OK ||
            tt_pool_create(&pool, a) != TT_OK)
            return fail("pool", sys);
        tt_pool_attr_destroy(a);
        width = tt_pool_width(pool);
    }
    char param[64];
    double t0;
    tt_exec ex;

#define ROW(kernel, us) printf("%s,%u,%s,%s,%d,%.3f\n", sys, width, kernel, param, r, (us))
#define VERIFY_PEAK()                                                                        \
    do {                                                                                     \
        if (tt && tk_peak() > (int)width)                                                    \
            fail("more bodies at once than the budget", sys);                                \
    } while (0)

    /* fib and its straight port */
    for (int port = 0; port < 2; port++) {
        const char *k = port ? "fib-port" : "fib";
        if (!wanted(list, k))
            continue;
        int n = port ? z->fib_port : z->fib;
        snprintf(param, sizeof param, "n=%d", n);
        for (int r = -1; r < reps; r++) {
            tk_counting = r < 0;
            tk_peak_reset();
            long v = -1;
            t0 = now_us();
            if (tt) {
                root(&ex, pool);
                if (tk_fib_tt(&ex, n, !port, &v) != TT_OK)
                    fail("fib: entry refused", sys);
            } else {
                v = tk_fib_omp(n);
            }
            double us = now_us() - t0;
            if (v != tk_fib_expect(n))
                fail("fib: wrong result", sys);
            VERIFY_PEAK();
            if (r >= 0)
                ROW(k, us);
        }
    }
    /* nqueens and its straight port */
    for (int port = 0; port < 2; port++) {
        const char *k = port ? "nqueens-port" : "nqueens";
        if (!wanted(list, k))
            continue;
        int n = port ? z->nq_port : z->nq;
        snprintf(param, sizeof param, "n=%d", n);
        for (int r = -1; r < reps; r++) {
            tk_counting = r < 0;
            tk_peak_reset();
            long v = -1;
            t0 = now_us();
            if (tt) {
                root(&ex, pool);
                if (tk_nqueens_tt(&ex, n, !port, &v) != TT_OK)
                    fail("nqueens: entry refused", sys);
            } else {
                v = tk_nqueens_omp(n);
            }
            double us = now_us() - t0;
            if (v != tk_nqueens_expect(n))
                fail("nqueens: wrong result", sys);
            VERIFY_PEAK();
            if (r >= 0)
                ROW(k, us);
        }
    }
    /* mergesort */
    if (wanted(list, "sort")) {
        size_t n = z->sort;
        int *a = malloc(n * sizeof *a), *tmp = malloc(n * sizeof *tmp);
        if (!a || !tmp)
            return fail("sort: memory", sys);
        snprintf(param, sizeof param, "n=%zu", n);
        for (int r = -1; r < reps; r++) {
            tk_counting = r < 0;
            tk_peak_reset();
            tk_sort_fill(a, n, 42 + (uint64_t)r);
            t0 = now_us();
            if (tt) {
                root(&ex, pool);
                if (tk_sort_tt(&ex, a, tmp, n) != TT_OK)
                    fail("sort: entry refused", sys);
            } else {
                tk_sort_omp(a, tmp, n);
            }
            double us = now_us() - t0;
            if (!tk_sort_check(a, n, 42 + (uint64_t)r))
                fail("sort: not sorted", sys);
            VERIFY_PEAK();
            if (r >= 0)
                ROW("sort", us);
        }
        free(a);
        free(tmp);
    }
    /* the two-level loop */
    if (wanted(list, "nested")) {
        tk_nested k;
        if (tk_nested_init(&k, z->nested_dom, z->nested_unit) != TT_OK)
            return fail("nested: memory", sys);
        snprintf(param, sizeof param, "dom=%u;unit=%zu", z->nested_dom, z->nested_unit);
        for (int r = -1; r < reps; r++) {
            tk_counting = r < 0;
            tk_peak_reset();
            memset(k.out, 0, z->nested_unit * z->nested_dom * (z->nested_dom + 1) / 2 *
                                 sizeof *k.out);
            t0 = now_us();
            if (tt) {
                root(&ex, pool);
                if (tk_nested_tt(&ex, &k) != TT_OK)
                    fail("nested: entry refused", sys);
            } else {
                tk_nested_omp(&k, nested);
            }
            double us = now_us() - t0;
            if (!tk_nested_check(&k))
                fail("nested: wrong result", sys);
            VERIFY_PEAK();
            if (r >= 0)
                ROW("nested", us);
        }
        tk_nested_free(&k);
    }
    /* the irregular loop, static and dynamic ranges */
    for (int dyn = 0; dyn < 2; dyn++) {
        const char *kname = dyn ? "irregular-dyn" : "irregular";
        if (!wanted(list, kname))
            continue;
        tk_sparse s;
        if (tk_sparse_init(&s, z->sparse_rows, 7) != TT_OK)
            return fail("irregular: memory", sys);
        snprintf(param, sizeof param, "rows=%zu;grain=64", z->sparse_rows);
        for (int r = -1; r < reps; r++) {
            tk_counting = r < 0;
            tk_peak_reset();
            memset(s.y, 0, s.rows * sizeof *s.y);
            t0 = now_us();
            if (tt) {
                root(&ex, pool);
                int rc = dyn ? tk_sparse_tt_dynamic(&ex, &s, 64) : tk_sparse_tt(&ex, &s, 64);
                if (rc != TT_OK)
                    fail("irregular: entry refused", sys);
            } else {
                tk_sparse_omp(&s, 64);
            }
            double us = now_us() - t0;
            if (!tk_sparse_check(&s))
                fail("irregular: wrong result", sys);
            VERIFY_PEAK();
            if (r >= 0)
                ROW(kname, us);
        }
        tk_sparse_free(&s);
    }
    /* the inline entry, in ns per fork of 2 jobs */
    if (wanted(list, "inline")) {
        long d = z->inline_depth;
        double forks = (double)((1L << d) - 1);
        snprintf(param, sizeof param, "depth=%ld;ns_per_fork", d);
        for (int r = -1; r < reps; r++) {
            t0 = now_us();
            if (tt) {
                root(&ex, pool);
                if (tk_inline_tt(&ex, d) != TT_OK)
                    fail("inline: wrong count", sys);
            } else if (nested) {
                tk_inline_plain(d);
            } else {
                tk_inline_omp(d);
            }
            double us = now_us() - t0;
            if (r >= 0)
                ROW("inline", us * 1e3 / forks);
        }
    }
    if (pool && tt_pool_destroy(pool) != TT_OK)
        return fail("tt_pool_destroy", sys);
    return 0;
}
