/*
 * bench_roots.c -- what a root costs against the `omp parallel` the same
 * thread would open: a token minted per call and a W-job tt_fork of
 * sub-microsecond jobs, against `omp parallel num_threads(W)` running the
 * same jobs. One system per process (scripts/bench-roots.sh alternates the
 * processes and takes medians).
 *
 *   bench_roots --system omp|tt|tt-free [--where LIST] [--width W]
 *               [--job-ns N | --iters I] [--reps K] [--calls C]
 *               [--max-seconds S] [--small]
 *   bench_roots --job-ns N --print-iters   the calibrated iterations, then exit
 *
 *   --system   omp      the raw region: `omp parallel num_threads(W)`, its
 *                       data block a function parameter, as real code has
 *              tt       a pool of W slots, shares isolated (the default):
 *                       tt_exec_init(&ex, pool, W) + tt_fork(&ex, W, ...)
 *              tt-free  the same pool with its shares declared OpenMP-free
 *                       (tt_pool_attr_set_isolate_shares(false))
 *   --where    comma-separated, default main,second,fresh; run in the
 *              order second, main, fresh whatever the list's order:
 *              second   main starts one pthread that makes every root and
 *                       only joins it (main has opened no region before)
 *              main     the main thread makes the roots
 *              fresh    one new pthread per sample timing its first root
 *                       against the first `omp parallel` of a new thread;
 *                       the main thread has made one root before (an
 *                       application has); 5 samples per repetition
 *   --width W  jobs = budget = region threads (default 2)
 *   --job-ns N one job's time: root_kernel's iterations are calibrated
 *              once at start so that a call takes about N ns (default 400)
 *   --iters I  that many iterations instead (scripts/bench-roots.sh
 *              calibrates once and gives every process the same count)
 *   --reps K   repetitions (default 7; --small 3)
 *   --calls C  roots per repetition for main and second (default 2000;
 *              --small 200), after one untimed repetition
 *   --max-seconds S  per configuration (default 3; 0: none): past it, the
 *              repetition under way ends after its current call (fresh:
 *              after its 5 samples) and no other starts; stderr says so
 *
 * Both sides run one kernel, root_kernel(a, k): a dependent floating-point
 * chain of a->iters steps whose result goes to a->out[k * 8] (one cache
 * line per k) beside a count of its calls. After every root the caller
 * checks all W lines (result and count) and ends the program (exit 1) on
 * a wrong one; every return code of the library is checked the same way.
 *
 * Prints one line per configuration:
 *   roots WHERE us_per_call p50 p90 fast slow_share
 * main, second: the median over the repetitions of the mean per call, and
 * the median and the 90th percentile of the single calls' times; fresh: the
 * median over the repetitions of each one's median sample, and the median
 * and 90th percentile of all samples. `fast` and `slow_share` split the
 * single calls (samples) in two at 5 times their 10th percentile: the
 * median of those below, and the share above. Under
 * OMP_WAIT_POLICY=passive on a guest, a root's wake-up of its member is
 * bimodal (a few microseconds, or tens when the host had halted the idle
 * vCPU), and with about half of the calls in each mode the median of all
 * calls lands in either from one process to the next. On stderr, the job's
 * calibration.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "config.h"
#include "threadteam.h"

#include "bench_common.h"

#include <omp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What a job reads: the same block on both sides. */
typedef struct kernel_arg {
    uint64_t iters;
    double *out; /* W cache lines: [k * 8] the result, [k * 8 + 1] the count */
} kernel_arg;

void root_kernel(const kernel_arg *a, unsigned k);

/* The one kernel of both sides. Not inlined, so that each side calls the
 * same code wherever its caller sits. */
__attribute__((noinline)) void root_kernel(const kernel_arg *a, unsigned k)
{
    double x = 0.0;
    for (uint64_t i = 0; i < a->iters; i++)
        x = x * 0.9999999 + 1e-3;
    double *o = a->out + (size_t)k * 8;
    o[0] = x;
    o[1] += 1.0;
}

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "bench_roots: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    exit(1);
}

static void need_ok(int rc, const char *what)
{
    if (rc != TT_OK)
        die(what, tt_strerror(rc));
}

/* The raw region, with its data block a parameter. */
static __attribute__((noinline)) void raw_root(const kernel_arg *a, unsigned W)
{
#pragma omp parallel num_threads(W)
    root_kernel(a, (unsigned)omp_get_thread_num());
}

static void tt_job(void *arg, unsigned i, tt_exec *child)
{
    (void)child;
    root_kernel(arg, i);
}

static __attribute__((noinline)) void tt_root(tt_pool *pool, const kernel_arg *a, unsigned W)
{
    tt_exec ex;
    need_ok(tt_exec_init(&ex, pool, W), "tt_exec_init");
    need_ok(tt_fork(&ex, W, tt_job, (void *)a), "tt_fork");
}

typedef struct bench {
    tt_pool *pool; /* NULL: the raw region */
    unsigned W;
    kernel_arg arg;
    double expected; /* the chain's result */
    double done;     /* roots run since the counts were last reset */
    int reps, calls;
    double *rep_us;
    double *calls_us; /* every timed call (or sample) */
    int ncalls;
    double max_s;         /* --max-seconds (0: none) */
    uint64_t deadline_ns; /* this configuration's (0: none) */
    bool cut;             /* the deadline stopped it */
} bench;

static void one_root(const bench *b)
{
    if (b->pool)
        tt_root(b->pool, &b->arg, b->W);
    else
        raw_root(&b->arg, b->W);
}

/* After each root: every one of the W jobs ran once with the right result. */
static void verify(bench *b, const char *where)
{
    b->done += 1.0;
    for (unsigned k = 0; k < b->W; k++) {
        const double *o = b->arg.out + (size_t)k * 8;
        if (o[0] != b->expected || o[1] != b->done) {
            fprintf(stderr,
                    "bench_roots: %s: job %u of %u: result %.17g (expected %.17g), run %.0f "
                    "times in %.0f roots\n",
                    where, k, b->W, o[0], b->expected, o[1], b->done);
            exit(1);
        }
    }
}

static void reset_counts(bench *b)
{
    for (unsigned k = 0; k < b->W; k++)
        b->arg.out[(size_t)k * 8 + 1] = 0.0;
    b->done = 0.0;
}

#define SLOW_OVER_P10 5.0

static void report(bench *b, const char *where, int nrep)
{
    if (b->cut)
        fprintf(stderr, "bench_roots: %s: %d of %d repetitions (--max-seconds %g)\n", where,
                nrep, b->reps, b->max_s);
    bc_stats reps = bc_stats_of(b->rep_us, (size_t)nrep);
    bc_stats all = bc_stats_of(b->calls_us, (size_t)b->ncalls); /* sorts calls_us */
    /* The two modes of a bimodal run (see the file's comment): calls above
     * SLOW_OVER_P10 times the 10th percentile are the slow mode. */
    size_t fast = 0;
    while (fast < (size_t)b->ncalls && b->calls_us[fast] <= SLOW_OVER_P10 * all.p10)
        fast++;
    double fast_median = fast ? bc_stats_of(b->calls_us, fast).median : all.median;
    double slow_share = b->ncalls ? (double)((size_t)b->ncalls - fast) / b->ncalls : 0.0;
    printf("roots %s %.3f %.3f %.3f %.3f %.3f\n", where, reps.median, all.median, all.p90,
           fast_median, slow_share);
    fflush(stdout);
    b->ncalls = 0;
}

/* Past the configuration's deadline (--max-seconds), a loop stops after its
 * current call: a busy host gets fewer repetitions, not a run many times
 * longer. */
static bool past(const bench *b)
{
    return b->deadline_ns && bc_now_ns() > b->deadline_ns;
}

static void start_clock(bench *b)
{
    b->deadline_ns = b->max_s > 0 ? bc_now_ns() + (uint64_t)(b->max_s * 1e9) : 0;
    b->cut = false;
}

/* main and second: reps x calls roots on the calling thread, one untimed
 * repetition first. */
static void steady(bench *b, const char *where)
{
    start_clock(b);
    int nrep = 0;
    for (int r = -1; r < b->reps; r++) {
        double sum = 0;
        int k = 0;
        while (k < b->calls) {
            uint64_t t0 = bc_now_ns();
            one_root(b);
            uint64_t t1 = bc_now_ns();
            verify(b, where);
            double us = (double)(t1 - t0) * 1e-3;
            sum += us;
            k++;
            if (r >= 0)
                b->calls_us[b->ncalls++] = us;
            if (past(b)) {
                b->cut = true;
                break;
            }
        }
        if (r >= 0)
            b->rep_us[nrep++] = sum / k;
        if (b->cut && r >= 0) { /* cut in the untimed one: one timed call */
            b->cut = nrep < b->reps || k < b->calls; /* said when cut short */
            break;
        }
    }
    report(b, where, nrep);
}

static void *second_main(void *arg)
{
    steady(arg, "second");
    return NULL;
}

typedef struct fresh_sample {
    bench *b;
    double us;
} fresh_sample;

static void *fresh_main(void *arg)
{
    fresh_sample *s = arg;
    uint64_t t0 = bc_now_ns();
    one_root(s->b);
    uint64_t t1 = bc_now_ns();
    s->us = (double)(t1 - t0) * 1e-3;
    return NULL;
}

#define FRESH_PER_REP 5

/* fresh: one new thread per sample (one untimed first), each timing its
 * first root; a repetition's value is the median of its 5 samples. */
static void fresh(bench *b)
{
    double group[FRESH_PER_REP];
    int nrep = 0;
    start_clock(b);
    for (int i = -1; i < b->reps * FRESH_PER_REP; i++) {
        fresh_sample s = {b, 0};
        reset_counts(b);
        pthread_t th;
        if (pthread_create(&th, NULL, fresh_main, &s) != 0)
            die("pthread_create failed", NULL);
        pthread_join(th, NULL);
        verify(b, "fresh");
        if (i < 0)
            continue;
        b->calls_us[b->ncalls++] = s.us;
        group[i % FRESH_PER_REP] = s.us;
        if (i % FRESH_PER_REP == FRESH_PER_REP - 1) {
            b->rep_us[nrep++] = bc_stats_of(group, FRESH_PER_REP).median;
            if (past(b) && nrep < b->reps) {
                b->cut = true;
                break;
            }
        }
    }
    report(b, "fresh", nrep);
}

/* Iterations of root_kernel that take about job_ns on this thread: the
 * fastest of several timed runs of a long chain. */
static uint64_t calibrate(double job_ns, double *per_call_ns)
{
    double out[16] __attribute__((aligned(64))) = {0};
    kernel_arg a = {.iters = 20000, .out = out};
    double best = 1e300;
    for (int i = 0; i < 30; i++) {
        uint64_t t0 = bc_now_ns();
        root_kernel(&a, 0);
        double d = (double)(bc_now_ns() - t0);
        if (d < best)
            best = d;
    }
    double per_iter = best / (double)a.iters;
    uint64_t iters = per_iter > 0 ? (uint64_t)(job_ns / per_iter + 0.5) : 0;
    a.iters = iters;
    best = 1e300;
    for (int i = 0; i < 2000; i++) {
        uint64_t t0 = bc_now_ns();
        root_kernel(&a, 0);
        double d = (double)(bc_now_ns() - t0);
        if (d < best)
            best = d;
    }
    *per_call_ns = best;
    return iters;
}

static bool listed(const char *list, const char *w)
{
    size_t n = strlen(w);
    for (const char *p = list; (p = strstr(p, w)) != NULL; p += n)
        if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
            return true;
    return false;
}

static int usage(void)
{
    fprintf(stderr, "usage: bench_roots --system omp|tt|tt-free [--where main,second,fresh] "
                    "[--width W] [--job-ns N | --iters I] [--reps K] [--calls C] [--max-seconds S] "
                    "[--small]\n"
                    "       bench_roots [--job-ns N] --print-iters\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *sys = NULL, *where = "main,second,fresh";
    long width = 2, reps = 0, calls = 0;
    double job_ns = 400, max_s = 3;
    long long iters_opt = -1;
    bool small = false, print_iters = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--system") && i + 1 < argc)
            sys = argv[++i];
        else if (!strcmp(argv[i], "--where") && i + 1 < argc)
            where = argv[++i];
        else if (!strcmp(argv[i], "--width") && i + 1 < argc)
            width = atol(argv[++i]);
        else if (!strcmp(argv[i], "--job-ns") && i + 1 < argc)
            job_ns = atof(argv[++i]);
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc)
            iters_opt = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atol(argv[++i]);
        else if (!strcmp(argv[i], "--calls") && i + 1 < argc)
            calls = atol(argv[++i]);
        else if (!strcmp(argv[i], "--max-seconds") && i + 1 < argc)
            max_s = atof(argv[++i]);
        else if (!strcmp(argv[i], "--small"))
            small = true;
        else if (!strcmp(argv[i], "--print-iters"))
            print_iters = true;
        else
            return usage();
    }
    if (width < 1 || width > 256 || job_ns < 0 || reps < 0 || reps > 1000 || calls < 0 ||
        calls > 10000000 || max_s < 0)
        return usage();
    if (!reps)
        reps = small ? 3 : 7;
    if (!calls)
        calls = small ? 200 : 2000;

    /* The calibration runs before any other thread exists. */
    double call_ns = 0;
    uint64_t iters;
    if (iters_opt >= 0) {
        iters = (uint64_t)iters_opt;
    } else {
        iters = calibrate(job_ns, &call_ns);
    }
    if (print_iters) {
        printf("%llu\n", (unsigned long long)iters);
        fprintf(stderr, "bench_roots: job %.0f ns: %llu iterations (a call %.0f ns here)\n",
                job_ns, (unsigned long long)iters, call_ns);
        return 0;
    }
    if (!sys)
        return usage();
    bool tt = !strcmp(sys, "tt"), tt_free = !strcmp(sys, "tt-free");
    if (!tt && !tt_free && strcmp(sys, "omp"))
        return usage();
    for (const char *p = where; *p;) {
        size_t n = strcspn(p, ",");
        if (!((n == 4 && !strncmp(p, "main", 4)) || (n == 6 && !strncmp(p, "second", 6)) ||
              (n == 5 && !strncmp(p, "fresh", 5))))
            return usage();
        p += n + (p[n] == ',');
    }

    bench b = {.W = (unsigned)width, .reps = (int)reps, .calls = (int)calls, .max_s = max_s};
    b.arg.iters = iters;
    b.arg.out = aligned_alloc(64, (size_t)b.W * 64);
    b.rep_us = calloc((size_t)reps, sizeof *b.rep_us);
    size_t ncap = (size_t)reps * (size_t)(calls > FRESH_PER_REP ? calls : FRESH_PER_REP);
    b.calls_us = calloc(ncap, sizeof *b.calls_us);
    if (!b.arg.out || !b.rep_us || !b.calls_us)
        die("out of memory", NULL);
    memset(b.arg.out, 0, (size_t)b.W * 64);
    /* The chain's result, from the same code on this thread. */
    {
        double out[16] __attribute__((aligned(64))) = {0};
        kernel_arg a = {.iters = iters, .out = out};
        root_kernel(&a, 0);
        b.expected = out[0];
    }
    if (tt || tt_free) {
        tt_pool_attr *pa;
        need_ok(tt_pool_attr_create(&pa), "tt_pool_attr_create");
        need_ok(tt_pool_attr_set_threads(pa, b.W), "tt_pool_attr_set_threads");
        need_ok(tt_pool_attr_set_isolate_shares(pa, tt), "tt_pool_attr_set_isolate_shares");
        need_ok(tt_pool_create(&b.pool, pa), "tt_pool_create");
        tt_pool_attr_destroy(pa);
        if (tt_pool_width(b.pool) != b.W)
            die("the pool's width is not --width", NULL);
    }
    fprintf(stderr, "bench_roots: %s, width %u, job %llu iterations%s", sys, b.W,
            (unsigned long long)iters, iters_opt >= 0 ? "\n" : "");
    if (iters_opt < 0)
        fprintf(stderr, " (%.0f ns asked, a call %.0f ns here)\n", job_ns, call_ns);

    /* second first: the main thread has opened no region yet. */
    if (listed(where, "second")) {
        pthread_t th;
        if (pthread_create(&th, NULL, second_main, &b) != 0)
            die("pthread_create failed", NULL);
        pthread_join(th, NULL);
    }
    if (listed(where, "main"))
        steady(&b, "main");
    if (listed(where, "fresh")) {
        /* The main thread has made a root before (an application has). */
        one_root(&b);
        verify(&b, "fresh (main's root)");
        fresh(&b);
    }
    if (b.pool)
        need_ok(tt_pool_destroy(b.pool), "tt_pool_destroy");
    free(b.arg.out);
    free(b.rep_us);
    free(b.calls_us);
    return 0;
}
