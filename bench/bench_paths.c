/*
 * bench_paths.c -- the paths an OpenMP code takes first, against the raw
 * OpenMP a user would write instead. One system per process
 * (scripts/bench-paths.sh alternates them and takes medians).
 *
 *   --system omp|tt  raw OpenMP, or threadteam
 *   --scenario S     ranges     axpy over N doubles, a token per call on
 *                               the main thread and tt_for_ranges, against
 *                               `omp parallel for` (--n 1000,100000,1000000)
 *                    scope      a token per call and a team scope whose
 *                               one section splits an axpy over N doubles
 *                               by rank (--n, default as ranges), against
 *                               `omp parallel` with the same split
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
 *                    S-free     any of the above on a pool whose shares are
 *                               declared OpenMP-free (rows named S-free)
 *                    other-thread  roots off the main thread: param
 *                               `first` is a fresh pthread's first root
 *                               (tt_exec_init + a W-job tt_fork) against
 *                               the first `omp parallel` that thread opens,
 *                               one new thread per sample (`first-scope`:
 *                               its first tt_team_scope of one section,
 *                               against the same); `steady` is a
 *                               second thread's roots, one after another,
 *                               against its own `omp parallel` regions;
 *                               --gap-ns N spins N ns before each steady
 *                               root on both sides (the application's own
 *                               code between two regions)
 * Prints one line per configuration: `scenario param us_per_call p50 p90`:
 * the median over --reps repetitions of --calls calls each, then the median
 * and the 90th percentile of the single calls' times (each call timed).
 *
 * Load helpers (scripts/bench-paths.sh starts them, one process each):
 *   --busy P         busy P % of every 10 ms, until killed
 *   --cotenant P     an OpenMP process (all CPUs) that, for P % of every
 *                    10 ms, runs 20 us of work per thread between barriers
 *                    (`omp barrier` in one held region), and sleeps the rest
 * Width: omp_get_max_threads() (all CPUs unless OMP_NUM_THREADS says).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "config.h"
#include "threadteam.h"

#include <pthread.h>
#include <stdatomic.h>

#include <omp.h>
#include <stdbool.h>
#if TT_HAVE_OPENBLAS
#include <cblas.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Weak: present in this checkout's library, absent from revisions older
 * than share isolation that scripts/bench-ab.sh builds this file against
 * (the declaration in threadteam.h, where there is one, is the same). */
extern int tt_pool_attr_set_isolate_shares(tt_pool_attr *attr, bool on) __attribute__((weak));

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

/* The 90th percentile (nearest rank) of v[0..n); sorts v. */
static double p90(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    int k = (9 * n + 9) / 10; /* ceil(0.9 n) */
    return v[k > 0 ? k - 1 : 0];
}

/* Per-call samples of one configuration. */
typedef struct samples {
    double *v;
    int n, cap;
} samples;

static void sample(samples *s, double us)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 4096;
        s->v = realloc(s->v, (size_t)s->cap * sizeof *s->v);
    }
    s->v[s->n++] = us;
}

/* Set by a scenario name ending in -free: the pool's shares are declared
 * OpenMP-free, and every row's scenario name carries the suffix. */
static bool free_shares;
/* --gap-ns: ns of the calling thread's own work before each steady root of
 * the other-thread scenario (0: back to back). */
static double gap_ns;

/* Print `scenario param rep_median p50 p90` and forget the samples. */
static void report(const char *scen, const char *param, double *rep_us, int reps, samples *s)
{
    double m = median(rep_us, reps);
    double p50 = s->n ? median(s->v, s->n) : m;
    double q = s->n ? p90(s->v, s->n) : m;
    printf("%s%s %s %.3f %.3f %.3f\n", scen, free_shares ? "-free" : "", param, m, p50, q);
    fflush(stdout);
    s->n = 0;
}

/* --busy P: a load process, busy P % of every 10 ms. */
static int busy_main(int pct)
{
    for (;;) {
        double t0 = now_us();
        work_us(100.0 * pct);
        double rest = 10000.0 - (now_us() - t0);
        if (rest > 0) {
            struct timespec ts = {0, (long)(rest * 1000.0)};
            nanosleep(&ts, NULL);
        }
    }
    return 0;
}

/* --cotenant P: another OpenMP application meeting at barriers. */
static int cotenant_main(int pct)
{
#pragma omp parallel
    for (;;) {
        double t0 = now_us();
        while (now_us() - t0 < 100.0 * pct) {
            work_us(20.0);
#pragma omp barrier
        }
        double rest = 10000.0 - (now_us() - t0);
        if (rest > 0) {
            struct timespec ts = {0, (long)(rest * 1000.0)};
            nanosleep(&ts, NULL);
        }
#pragma omp barrier
    }
    return 0;
}

/* other-thread: a root, or the raw region, opened on the calling thread. */
static _Atomic unsigned sink;

static void tiny_job(void *arg, unsigned i, tt_exec *child)
{
    (void)arg;
    (void)child;
    atomic_fetch_add_explicit(&sink, i, memory_order_relaxed);
}

typedef struct other {
    bool tt;
    bool scope; /* first-scope: a team scope of one section, not a fork */
    tt_pool *pool;
    unsigned W;
    int calls, reps;
    double first_us; /* first: the one call's time           */
    double *rep_us;  /* steady: the mean of each repetition  */
    samples *s;      /* steady: every call                   */
} other;

/* A timed call that fails would time nothing: stop the run (one branch on
 * the code, outside the callbacks). */
static void need_ok(int rc, const char *what)
{
    if (rc != TT_OK) {
        fprintf(stderr, "bench_paths: %s: %s\n", what, tt_strerror(rc));
        exit(1);
    }
}

static void tiny_section(void *arg, tt_section *sec)
{
    tiny_job(arg, tt_section_rank(sec), NULL);
}

static void tiny_scope(void *arg, tt_scope *scope)
{
    need_ok(tt_scope_run(scope, tiny_section, arg), "tt_scope_run");
}

static void one_root(const other *o)
{
    if (o->tt) {
        tt_exec ex;
        need_ok(tt_exec_init(&ex, o->pool, o->W), "tt_exec_init");
        if (o->scope)
            need_ok(tt_team_scope(&ex, tiny_scope, NULL), "tt_team_scope");
        else
            need_ok(tt_fork(&ex, o->W, tiny_job, NULL), "tt_fork");
    } else {
#pragma omp parallel num_threads(o->W)
        tiny_job(NULL, (unsigned)omp_get_thread_num(), NULL);
    }
}

static void *first_main(void *arg)
{
    other *o = arg;
    double t0 = now_us();
    one_root(o);
    o->first_us = now_us() - t0;
    return NULL;
}

/* One fresh thread per sample, reps x 5 samples, each timing its first
 * root (a team scope when `scope`); the rep medians are the medians of
 * each group of 5. Reports the row; false when a thread could not start. */
static bool fresh_firsts(other *o, bool scope)
{
    int nf = o->reps * 5;
    double *firsts = calloc((size_t)nf, sizeof *firsts);
    if (!firsts)
        return false;
    o->scope = scope;
    for (int i = -1; i < nf; i++) {
        pthread_t th;
        if (pthread_create(&th, NULL, first_main, o) != 0) {
            fprintf(stderr, "bench_paths: pthread_create failed\n");
            free(firsts);
            return false;
        }
        pthread_join(th, NULL);
        if (i >= 0) {
            firsts[i] = o->first_us;
            sample(o->s, o->first_us);
        }
    }
    o->scope = false;
    for (int r = 0; r < o->reps; r++)
        o->rep_us[r] = median(firsts + 5 * r, 5);
    report("other-thread", scope ? "first-scope" : "first", o->rep_us, o->reps, o->s);
    free(firsts);
    return true;
}

static void *steady_main(void *arg)
{
    other *o = arg;
    for (int r = -1; r < o->reps; r++) {
        double t0 = now_us(), sum = 0;
        for (int k = 0; k < o->calls; k++) {
            if (gap_ns > 0) {
                /* Not timed: the application's own work between roots. */
                double until = now_us() + gap_ns * 1e-3;
                while (now_us() < until)
                    ;
            }
            double a = now_us();
            one_root(o);
            double d = now_us() - a;
            sum += d;
            if (r >= 0)
                sample(o->s, d);
        }
        (void)t0;
        if (r >= 0)
            o->rep_us[r] = sum / o->calls;
    }
    return NULL;
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

/* The scope scenario: one section in which participant r of s runs its
 * part of the axpy (the split of `omp for schedule(static)`). */
typedef struct scope_axpy {
    axpy *p;
    size_t n;
} scope_axpy;

static void axpy_part(axpy *p, size_t n, unsigned r, unsigned s)
{
    axpy_body(p, n * r / s, n * (r + 1) / s);
}

static void section_axpy(void *arg, tt_section *sec)
{
    scope_axpy *a = arg;
    axpy_part(a->p, a->n, tt_section_rank(sec), tt_section_size(sec));
}

static void scope_axpy_fn(void *arg, tt_scope *scope)
{
    need_ok(tt_scope_run(scope, section_axpy, arg), "tt_scope_run");
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
        else if (!strcmp(argv[i], "--gap-ns") && i + 1 < argc)
            gap_ns = atof(argv[++i]);
        else if (!strcmp(argv[i], "--calls") && i + 1 < argc)
            calls = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--busy") && i + 1 < argc)
            return busy_main(atoi(argv[++i]));
        else if (!strcmp(argv[i], "--cotenant") && i + 1 < argc)
            return cotenant_main(atoi(argv[++i]));
        else if (!strcmp(argv[i], "--n") && i + 1 < argc) {
            nsizes = 0;
            for (char *t = strtok(argv[++i], ","); t && nsizes < 8; t = strtok(NULL, ","))
                sizes[nsizes++] = (size_t)strtoull(t, NULL, 10);
        } else {
            fprintf(stderr, "usage: bench_paths --system omp|tt --scenario "
                            "ranges|scope|coexist|alternate|external|other-thread[-free]"
                            " [--n LIST] [--reps N] [--calls N] [--gap-ns N]\n"
                            "       bench_paths --busy P | --cotenant P   (load helpers)\n");
            return 2;
        }
    }
    bool tt = !strcmp(system, "tt");
    if (reps < 1 || reps > 1000)
        reps = 11;
    double *rep_us = calloc((size_t)reps, sizeof *rep_us);
    samples smp = {0};
    tt_pool *pool = NULL;
    /* S-free: scenario S on a pool whose owner declared its shares
     * OpenMP-free (tt_pool_attr_set_isolate_shares(false)): no nested
     * one-thread region per participant. The omp side ignores the suffix,
     * so each -free row has its own baseline from the same alternation. */
    static char base[64];
    size_t sl = strlen(scenario);
    if (sl > 5 && sl < sizeof base && !strcmp(scenario + sl - 5, "-free")) {
        free_shares = true;
        memcpy(base, scenario, sl - 5);
        base[sl - 5] = 0;
        scenario = base;
    }
    tt_pool_attr *pa = NULL;
    /* scripts/bench-ab.sh links this file against older revisions too:
     * one without the attribute (before share isolation, where every
     * share ran as a free one does now) runs S-free as S, labelled S-free. */
    bool declare_free = free_shares && tt_pool_attr_set_isolate_shares;
    if (tt && declare_free &&
        (tt_pool_attr_create(&pa) != TT_OK || tt_pool_attr_set_isolate_shares(pa, false) != TT_OK)) {
        fprintf(stderr, "bench_paths: attributes failed\n");
        return 1;
    }
    if (tt && tt_pool_create(&pool, pa) != TT_OK) {
        fprintf(stderr, "bench_paths: tt_pool_create failed\n");
        return 1;
    }
    tt_pool_attr_destroy(pa);
    unsigned W = (unsigned)omp_get_max_threads();

    if (!strcmp(scenario, "ranges") || !strcmp(scenario, "scope")) {
        /* The same axpy and timing for both: a tt_for_ranges against `omp
         * parallel for`, or a team scope of one section against `omp
         * parallel` with the same split. */
        bool scope = !strcmp(scenario, "scope");
        for (int s = 0; s < nsizes; s++) {
            size_t n = sizes[s];
            double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
            for (size_t i = 0; i < n; i++) {
                x[i] = (double)i;
                y[i] = 1.0;
            }
            axpy p = {.a = 1e-9, .x = x, .y = y};
            scope_axpy sa = {&p, n};
            int c = calls ? calls : (n <= 1000 ? 4000 : n <= 100000 ? 800 : 100);
            for (int r = -1; r < reps; r++) {
                double t0 = now_us();
                for (int k = 0; k < c; k++) {
                    double a = now_us();
                    if (tt) {
                        tt_exec ex;
                        need_ok(tt_exec_init(&ex, pool, W), "tt_exec_init");
                        if (scope)
                            need_ok(tt_team_scope(&ex, scope_axpy_fn, &sa), "tt_team_scope");
                        else
                            need_ok(tt_for_ranges(&ex, n, 1, axpy_body, &p), "tt_for_ranges");
                    } else if (scope) {
#pragma omp parallel
                        axpy_part(&p, n, (unsigned)omp_get_thread_num(),
                                  (unsigned)omp_get_num_threads());
                    } else {
#pragma omp parallel for schedule(static)
                        for (size_t i = 0; i < n; i++)
                            y[i] += p.a * x[i];
                    }
                    if (r >= 0)
                        sample(&smp, now_us() - a);
                }
                if (r >= 0)
                    rep_us[r] = (now_us() - t0) / c;
            }
            char param[32];
            snprintf(param, sizeof param, "n=%zu", n);
            report(scenario, param, rep_us, reps, &smp);
            free(x);
            free(y);
        }
    } else if (!strcmp(scenario, "coexist") || !strcmp(scenario, "alternate")) {
        bool alt = !strcmp(scenario, "alternate");
        if (tt) {
            /* used once: its idle state is what the application lives with */
            tt_exec ex;
            need_ok(tt_exec_init(&ex, pool, W), "tt_exec_init");
            need_ok(tt_for_ranges(&ex, W, 1, work_body, NULL), "tt_for_ranges");
        }
        int c = calls ? calls : 2000;
        for (int r = -1; r < reps; r++) {
            double t0 = now_us();
            for (int k = 0; k < c; k++) {
                double a = now_us();
#pragma omp parallel
                work_us(5.0);
                if (alt) {
                    if (tt) {
                        tt_exec ex;
                        need_ok(tt_exec_init(&ex, pool, W), "tt_exec_init");
                        need_ok(tt_for_ranges(&ex, W, 1, work_body, NULL), "tt_for_ranges");
                    } else {
#pragma omp parallel
                        work_us(5.0);
                    }
                }
                if (r >= 0)
                    sample(&smp, now_us() - a);
            }
            if (r >= 0)
                rep_us[r] = (now_us() - t0) / c;
        }
        report(scenario, "5us", rep_us, reps, &smp);
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
                    double a0 = now_us();
                    if (tt) {
                        tt_exec ex;
                        need_ok(tt_exec_init(&ex, pool, W), "tt_exec_init");
                        need_ok(tt_external(&ex, gemm_call, &g), "tt_external");
                    } else {
                        gemm_call(&g, W);
                    }
                    if (r >= 0)
                        sample(&smp, now_us() - a0);
                }
                if (r >= 0)
                    rep_us[r] = (now_us() - t0) / cnt;
            }
            char param[32];
            snprintf(param, sizeof param, "n=%d", n);
            report("external", param, rep_us, reps, &smp);
            free(a);
            free(b);
            free(c);
        }
#else
        fprintf(stderr, "bench_paths: built without OpenBLAS (configure did not find its "
                        "OpenMP build): no external scenario\n");
        return 3;
#endif
    } else if (!strcmp(scenario, "other-thread")) {
        /* The main thread has run one root (or region) first, as an
         * application would have: its team is what the other threads live
         * beside. */
        other o = {.tt = tt, .pool = pool, .W = W, .reps = reps, .rep_us = rep_us, .s = &smp};
        one_root(&o);
        /* first: one fresh thread per sample, reps x 5 samples;
         * first-scope: the same with a team scope of one section (raw
         * OpenMP: the same first `omp parallel`) */
        if (!fresh_firsts(&o, false) || !fresh_firsts(&o, true))
            return 1;
        /* steady: one second thread, reps x calls roots */
        o.calls = calls ? calls : 2000;
        pthread_t th;
        if (pthread_create(&th, NULL, steady_main, &o) != 0) {
            fprintf(stderr, "bench_paths: pthread_create failed\n");
            return 1;
        }
        pthread_join(th, NULL);
        report("other-thread", "steady", rep_us, reps, &smp);
    } else {
        fprintf(stderr, "bench_paths: unknown scenario %s\n", scenario);
        return 2;
    }
    if (pool)
        tt_pool_destroy(pool);
    free(rep_us);
    free(smp.v);
    return 0;
}
