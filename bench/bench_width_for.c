/*
 * bench_width_for.c -- does the one rule earn its keep?
 *
 * A kernel of a known amount of busy work (1 us to 10 ms, calibrated on this
 * host) runs as tt_for_ranges over its work units in three ways, side by
 * side in one process: in blocks of calls, each block in its own steady
 * state after a warm-up, five rounds whose order of the modes rotates:
 *
 *   serial  a serial token (tt_exec_init_serial): inline, no dispatch;
 *   full    a root token of the whole pool (budget = pool width);
 *   picked  the same root narrowed to tt_width_for(&ex, work, 1).
 *
 * Each time is a whole call from a plain thread (minting included), the
 * median over the repetitions. The rule earns its keep when `picked` is
 * within 10 % of the better of `serial` and `full` at every size; the
 * program prints a Markdown table and that verdict, and exits 1 when the
 * verdict is no (3 when it could not run).
 *
 *   bench_width_for [--threads N] [--sizes-us 1,2,5,...] [--time-ms T]
 *                   [--tolerance PCT]
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "threadteam.h"
#include "bench_common.h"


static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t median(uint64_t *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_u64);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}


/* ------------------------------------------------------------------------ */
/* Busy work: a dependent chain of integer operations per unit               */
/* ------------------------------------------------------------------------ */

static volatile uint64_t sink;

static void spin_units(size_t n)
{
    uint64_t x = 0x243f6a8885a308d3ull;
    for (size_t i = 0; i < n; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        x ^= x >> 29;
        __asm__ __volatile__("" : "+r"(x));
    }
    sink = x;
}

static void work_body(void *arg, size_t begin, size_t end)
{
    (void)arg;
    spin_units(end - begin);
}

/* Nanoseconds per unit: the median of many timed runs of ~2 ms each. */
static double calibrate_units(void)
{
    size_t n = 100000;
    for (;;) {
        uint64_t t0 = bc_now_ns();
        spin_units(n);
        uint64_t dt = bc_now_ns() - t0;
        if (dt >= 2000000)
            break;
        n *= 2;
    }
    uint64_t t[31];
    for (int i = 0; i < 31; i++) {
        uint64_t t0 = bc_now_ns();
        spin_units(n);
        t[i] = bc_now_ns() - t0;
    }
    return (double)median(t, 31) / (double)n;
}

/* ------------------------------------------------------------------------ */

enum { M_SERIAL = 0, M_FULL, M_PICKED, M_COUNT };

typedef struct run {
    tt_pool *pool;
    unsigned width;
    size_t units;
    uint64_t est_ns;
    unsigned picked; /* the width tt_width_for chose, last time */
} run;

static uint64_t one_call(run *r, int mode)
{
    tt_exec ex;
    uint64_t t0 = bc_now_ns();
    int rc;
    if (mode == M_SERIAL) {
        tt_exec_init_serial(&ex);
        rc = tt_for_ranges(&ex, r->units, 1, work_body, NULL);
    } else {
        rc = tt_exec_init(&ex, r->pool, r->width);
        if (rc == TT_OK && mode == M_PICKED) {
            r->picked = tt_width_for(&ex, r->est_ns, 1);
            tt_exec_limit(&ex, r->picked);
        }
        if (rc == TT_OK)
            rc = tt_for_ranges(&ex, r->units, 1, work_body, NULL);
    }
    uint64_t t1 = bc_now_ns();
    if (rc != TT_OK) {
        fprintf(stderr, "bench_width_for: an entry failed: %s\n", tt_strerror(rc));
        exit(3);
    }
    return t1 - t0;
}

static unsigned parse_list(const char *s, double *out, unsigned max)
{
    unsigned n = 0;
    const char *p = s;
    while (*p && n < max) {
        char *e;
        double v = strtod(p, &e);
        if (e == p || v <= 0) {
            fprintf(stderr, "bench_width_for: bad list '%s'\n", s);
            exit(2);
        }
        out[n++] = v;
        p = *e == ',' ? e + 1 : e;
    }
    return n;
}

int main(int argc, char **argv)
{
    unsigned threads = 0;
    double sizes_us[64] = { 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000 };
    unsigned nsizes = 13;
    double time_ms = 400, tolerance = 10;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = (unsigned)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--sizes-us") && i + 1 < argc)
            nsizes = parse_list(argv[++i], sizes_us, 64);
        else if (!strcmp(argv[i], "--time-ms") && i + 1 < argc)
            time_ms = strtod(argv[++i], NULL);
        else if (!strcmp(argv[i], "--tolerance") && i + 1 < argc)
            tolerance = strtod(argv[++i], NULL);
        else {
            fprintf(stderr, "usage: %s [--threads N] [--sizes-us 1,2,5] [--time-ms T] "
                            "[--tolerance PCT]\n",
                    argv[0]);
            return 2;
        }
    }

    tt_pool_attr *attr;
    if (tt_pool_attr_create(&attr) != TT_OK)
        return 3;
    tt_pool_attr_set_threads(attr, threads);
    tt_pool *pool;
    int rc = tt_pool_create(&pool, attr);
    tt_pool_attr_destroy(attr);
    if (rc != TT_OK) {
        fprintf(stderr, "bench_width_for: tt_pool_create: %s\n", tt_strerror(rc));
        return 3;
    }
    const unsigned width = tt_pool_width(pool);
    if (width < 2) {
        fprintf(stderr, "bench_width_for: the pool has width %u; nothing to compare\n", width);
        return 3;
    }

    const double ns_per_unit = calibrate_units();
    tt_dispatch_costs dc;
    tt_pool_dispatch_costs(pool, &dc);
    bool from_file = false;
    tt_dispatch_costs_env_status(&from_file, NULL);
    char row[TT_DISPATCH_COSTS_TEXT_MAX];
    tt_dispatch_costs_format(&dc, TT_HOST_CLASS_COUNT, row, sizeof row);

    printf("# bench_width_for: threadteam %s, class %s, %u CPUs, pool width %u\n",
           TT_VERSION_STRING, tt_host_class_name(tt_host_class_detect()), bc_affinity_cpus(),
           width);
    printf("# busy work: %.3f ns per unit; dispatch costs in force (%s):\n", ns_per_unit,
           from_file ? TT_DISPATCH_COSTS_ENV : "built-in row");
    for (char *line = strtok(row, "\n"); line; line = strtok(NULL, "\n"))
        printf("#   %s\n", line);
    printf("# kind of the calls: outside (a plain thread); D(%u) = %llu ns; TT_PAYS = %d\n",
           width, (unsigned long long)tt_width_costs_at(&dc.outside, width), TT_PAYS);
    printf("# medians over the repetitions; one section per call\n\n");
    printf("| work (us) | reps | width picked | serial (us) | full width %u (us) | picked (us) "
           "| picked / best |\n",
           width);
    printf("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    fflush(stdout);

    bool all_ok = true;
    double worst = 0;
    for (unsigned s = 0; s < nsizes; s++) {
        run r = { pool, width, 0, 0, 0 };
        r.est_ns = (uint64_t)(sizes_us[s] * 1000.0 + 0.5);
        r.units = (size_t)((double)r.est_ns / ns_per_unit + 0.5);
        if (r.units == 0)
            r.units = 1;
        /* Enough repetitions for about time_ms per size, all modes together. */
        double per_rep_ns = 3.0 * (double)r.est_ns + 3.0 * 20000.0;
        size_t reps = (size_t)(time_ms * 1e6 / per_rep_ns);
        if (reps < 31)
            reps = 31;
        if (reps > 20001)
            reps = 20001;
        uint64_t *t[M_COUNT];
        for (int m = 0; m < M_COUNT; m++) {
            t[m] = malloc(reps * sizeof(uint64_t));
            if (!t[m])
                return 3;
        }
        /* Blocks: each mode runs a block of calls in its own steady state
         * (as a kernel called again and again at that size), after a warm-up
         * longer than the members' idle spin; the rounds rotate the order
         * of the modes, so a drift of the host falls on all of them. */
        const unsigned rounds = 5;
        size_t done[M_COUNT] = { 0, 0, 0 };
        unsigned picked_min = width, picked_max = 1;
        for (unsigned rd = 0; rd < rounds; rd++) {
            for (int j = 0; j < M_COUNT; j++) {
                int m = (int)((rd + (unsigned)j) % M_COUNT);
                uint64_t warm_end = bc_now_ns() + 3000000;
                for (int w = 0; w < 3 || bc_now_ns() < warm_end; w++)
                    one_call(&r, m);
                size_t n = reps * (rd + 1) / rounds - reps * rd / rounds;
                for (size_t i = 0; i < n; i++) {
                    t[m][done[m]++] = one_call(&r, m);
                    if (m == M_PICKED) {
                        if (r.picked < picked_min)
                            picked_min = r.picked;
                        if (r.picked > picked_max)
                            picked_max = r.picked;
                    }
                }
            }
        }
        uint64_t med[M_COUNT];
        for (int m = 0; m < M_COUNT; m++) {
            med[m] = median(t[m], reps);
            free(t[m]);
        }
        uint64_t best = med[M_SERIAL] < med[M_FULL] ? med[M_SERIAL] : med[M_FULL];
        double ratio = (double)med[M_PICKED] / (double)best;
        bool ok = ratio <= 1.0 + tolerance / 100.0;
        all_ok = all_ok && ok;
        if (ratio > worst)
            worst = ratio;
        char picked[32];
        if (picked_min == picked_max)
            snprintf(picked, sizeof picked, "%u", picked_min);
        else
            snprintf(picked, sizeof picked, "%u..%u", picked_min, picked_max);
        printf("| %g | %zu | %s | %.2f | %.2f | %.2f | %.3f%s |\n", sizes_us[s], reps, picked,
               med[M_SERIAL] / 1000.0, med[M_FULL] / 1000.0, med[M_PICKED] / 1000.0, ratio,
               ok ? "" : " **over**");
        fflush(stdout);
    }
    printf("\nverdict: the picked width is %s %g %% of the better of serial and full width at "
           "every size (worst ratio %.3f)\n",
           all_ok ? "within" : "NOT within", tolerance, worst);
    tt_pool_destroy(pool);
    return all_ok ? 0 : 1;
}
