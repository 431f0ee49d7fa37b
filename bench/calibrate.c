/*
 * calibrate.c -- measure the dispatch costs of this host and print them as a
 * row of the cost file format (docs/design/cost-model.md).
 *
 * For each kind of token and each width w it times one parallel section of
 * w tasks, call after call, in the steady state, and takes the median:
 *
 *   outside  a plain thread: tt_exec_init(budget w) + tt_for_ranges(w
 *            ranges) per call, on a pool of width w;
 *   in_pool  a member: tt_for_ranges(w ranges) on a reborrow of a fork
 *            child of budget w (the outer root has budget 2w-1 and forks
 *            two jobs, so job 0 holds w members and job 1 the rest, idle),
 *            on a pool of width 2w-1;
 *   team     the leader of a held team scope: tt_scope_run_with(width w),
 *            on a pool of width w.
 *
 * What a section costs depends on how long its tasks run: a waiter that
 * spins through an empty section sleeps through one whose tasks run a few
 * microseconds when its spin is throttled (an oversubscribed scope, a plain
 * thread's join on a pool as wide as the CPUs), and then the wake is part of
 * the cost. The cost that matters is the one at the break-even point, where
 * a kernel's decision flips: there est / w + D = est, so each task carries
 * D / (w - 1) of work. So every task does that much busy work, found by
 * iteration from empty tasks (3 to 8 steps, at most 100 us a task), and
 * the anchor is the median call time minus the time of that work alone on
 * the calling thread. --task-us U fixes the work instead (0: empty tasks).
 *
 * The rounds interleave kinds and widths, so a drift of the host's load
 * falls on all of them; every block starts with a warm-up longer than the
 * members' idle spin. Output goes to stdout (the row, with comments saying
 * how it was measured); progress goes to stderr.
 *
 *   calibrate [--widths 2,4,8] [--reps N] [--rounds N] [--warmup-ms N]
 *             [--task-us U] [--class NAME]
 *   calibrate > /etc/threadteam/costs     # then TT_DISPATCH_COSTS_FILE=...
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

enum { K_TEAM = 0, K_IN_POOL, K_OUTSIDE, K_COUNT };
static const char *const kind_names[K_COUNT] = { "team", "in_pool", "outside" };

#define MAX_WIDTHS TT_WIDTH_COSTS_MAX_ANCHORS


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


static void die(const char *what, int rc)
{
    fprintf(stderr, "calibrate: %s: %s\n", what, tt_strerror(rc));
    exit(1);
}

/* ------------------------------------------------------------------------ */
/* Busy work (the same chain as bench_width_for's)                           */
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

static double ns_per_unit;

static void calibrate_units(void)
{
    size_t n = 100000;
    for (;;) {
        uint64_t t0 = bc_now_ns();
        spin_units(n);
        if (bc_now_ns() - t0 >= 2000000)
            break;
        n *= 2;
    }
    uint64_t t[21];
    for (int i = 0; i < 21; i++) {
        uint64_t t0 = bc_now_ns();
        spin_units(n);
        t[i] = bc_now_ns() - t0;
    }
    ns_per_unit = (double)median(t, 21) / (double)n;
}

/* The time of one task's work, run on this thread (median of 51). */
static uint64_t task_time(size_t units)
{
    if (units == 0)
        return 0;
    uint64_t t[51];
    for (int i = 0; i < 51; i++) {
        uint64_t t0 = bc_now_ns();
        spin_units(units);
        t[i] = bc_now_ns() - t0;
    }
    return median(t, 51);
}

/* ------------------------------------------------------------------------ */
/* One block of measurements: warm up, then `reps` timed calls               */
/* ------------------------------------------------------------------------ */

typedef struct block {
    uint64_t warmup_ns;
    unsigned reps;
    uint64_t *out; /* reps call times */
    unsigned width;
    size_t units;  /* busy work of each task */
    int rc;
} block;

static void work_range(void *arg, size_t begin, size_t end)
{
    (void)begin;
    (void)end;
    spin_units(((const block *)arg)->units);
}

static void work_section(void *arg, tt_section *s)
{
    (void)s;
    spin_units(((const block *)arg)->units);
}

/* Time b->reps calls of `once` after b->warmup_ns of untimed ones, into
 * b->out. The same loop serves the three kinds; `once` is one call. */
typedef int (*once_fn)(void *ctx, block *b);

static int timed_reps(block *b, once_fn once, void *ctx)
{
    uint64_t end = bc_now_ns() + b->warmup_ns;
    bool warm = false;
    for (unsigned k = 0; k < b->reps;) {
        uint64_t t0 = bc_now_ns();
        int rc = once(ctx, b);
        uint64_t t1 = bc_now_ns();
        if (rc)
            return rc;
        if (warm)
            b->out[k++] = t1 - t0;
        else
            warm = t1 >= end;
    }
    return TT_OK;
}

/* outside: a plain thread, a root token minted per call (minting is part
 * of the call). */
static int outside_once(void *ctx, block *b)
{
    tt_exec ex;
    int rc = tt_exec_init(&ex, ctx, b->width);
    return rc ? rc : tt_for_ranges(&ex, b->width, 1, work_range, b);
}

static int measure_outside(tt_pool *pool, block *b)
{
    return timed_reps(b, outside_once, pool);
}

/* in_pool: job 0 of a two-job fork loops nested entries on its child. */
static int in_pool_once(void *ctx, block *b)
{
    tt_exec c;
    tt_exec_reborrow(ctx, &c);
    return tt_for_ranges(&c, b->width, 1, work_range, b);
}

static void in_pool_job(void *arg, unsigned i, tt_exec *child)
{
    block *b = arg;
    if (i != 0)
        return;
    if (tt_exec_budget(child) != b->width) {
        b->rc = TT_EINVAL;
        return;
    }
    b->rc = timed_reps(b, in_pool_once, child);
}

static int measure_in_pool(tt_pool *pool, block *b)
{
    tt_exec ex;
    int rc = tt_exec_init(&ex, pool, 2 * b->width - 1);
    if (rc)
        return rc;
    b->rc = -1;
    rc = tt_fork(&ex, 2, in_pool_job, b);
    if (rc)
        return rc;
    return b->rc < 0 ? TT_EINVAL : b->rc;
}

/* team: the leader of a held scope runs sections of width w. */
static int team_once(void *ctx, block *b)
{
    return tt_scope_run_with(ctx, b->width, work_section, b);
}

static void team_fn(void *arg, tt_scope *scope)
{
    block *b = arg;
    if (tt_scope_size(scope) != b->width) {
        b->rc = TT_REFUSED_UNAVAILABLE;
        return;
    }
    b->rc = timed_reps(b, team_once, scope);
}

static int measure_team(tt_pool *pool, block *b)
{
    tt_exec ex;
    int rc = tt_exec_init(&ex, pool, b->width);
    if (rc)
        return rc;
    b->rc = -1;
    rc = tt_team_scope(&ex, team_fn, b);
    if (rc)
        return rc;
    return b->rc < 0 ? TT_EINVAL : b->rc;
}

/* ------------------------------------------------------------------------ */

static unsigned parse_widths(const char *s, unsigned *w)
{
    unsigned n = 0;
    const char *p = s;
    while (*p) {
        char *e;
        unsigned long v = strtoul(p, &e, 10);
        if (e == p || v < 2 || v > 4096 || n == MAX_WIDTHS || (n && v <= w[n - 1]) ||
            (*e && *e != ',')) {
            fprintf(stderr, "calibrate: bad --widths '%s' (increasing widths >= 2, at most %d)\n",
                    s, MAX_WIDTHS);
            exit(2);
        }
        w[n++] = (unsigned)v;
        p = *e == ',' ? e + 1 : e;
    }
    return n;
}

static tt_pool *make_pool(unsigned width)
{
    tt_pool_attr *attr;
    int rc = tt_pool_attr_create(&attr);
    if (rc)
        die("tt_pool_attr_create", rc);
    tt_pool_attr_set_threads(attr, width);
    tt_pool *pool;
    rc = tt_pool_create(&pool, attr);
    tt_pool_attr_destroy(attr);
    if (rc)
        die("tt_pool_create", rc);
    if (tt_pool_width(pool) != width) {
        fprintf(stderr, "calibrate: a pool of width %u came out %u wide (built without "
                        "OpenMP?)\n",
                width, tt_pool_width(pool));
        exit(1);
    }
    return pool;
}

/* One block on a pool of its own; a default pool's threads come from the
 * process-wide cache after the first block of that width. */
static int measure(int kind, block *b)
{
    tt_pool *pool = make_pool(kind == K_IN_POOL ? 2 * b->width - 1 : b->width);
    int rc;
    switch (kind) {
    case K_OUTSIDE:
        rc = measure_outside(pool, b);
        break;
    case K_IN_POOL:
        rc = measure_in_pool(pool, b);
        break;
    default:
        rc = measure_team(pool, b);
    }
    int drc = tt_pool_destroy(pool);
    return rc ? rc : drc;
}

static size_t units_for(uint64_t ns) { return (size_t)((double)ns / ns_per_unit + 0.5); }

int main(int argc, char **argv)
{
    unsigned widths[MAX_WIDTHS], nw = 0;
    unsigned reps = 2000, rounds = 7;
    uint64_t warmup_ms = 20;
    double task_us = -1; /* < 0: the break-even share, by iteration */
    tt_host_class cls = tt_host_class_detect();
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--widths") && i + 1 < argc) {
            nw = parse_widths(argv[++i], widths);
        } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            reps = (unsigned)strtoul(argv[++i], NULL, 10);
        } else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
            rounds = (unsigned)strtoul(argv[++i], NULL, 10);
        } else if (!strcmp(argv[i], "--warmup-ms") && i + 1 < argc) {
            warmup_ms = strtoull(argv[++i], NULL, 10);
        } else if (!strcmp(argv[i], "--task-us") && i + 1 < argc) {
            task_us = strtod(argv[++i], NULL);
        } else if (!strcmp(argv[i], "--class") && i + 1 < argc) {
            if (tt_host_class_from_name(argv[++i], &cls) != TT_OK) {
                fprintf(stderr, "calibrate: unknown class '%s'\n", argv[i]);
                return 2;
            }
        } else {
            fprintf(stderr, "usage: %s [--widths 2,4,8] [--reps N] [--rounds N] "
                            "[--warmup-ms N] [--task-us U] [--class NAME]\n",
                    argv[0]);
            return 2;
        }
    }
    if (reps < 40 || rounds < 1 || task_us > 1e6) {
        fprintf(stderr, "calibrate: --reps at least 40, --rounds at least 1, --task-us at most "
                        "1e6\n");
        return 2;
    }
    const unsigned cpus = bc_affinity_cpus();
    bool oversubscribed_default = false;
    if (nw == 0) {
        static const unsigned ladder[] = { 2,  3,  4,  6,   8,   12,  16,  24,
                                           32, 48, 64, 96, 128, 192, 256, 384, 512 };
        for (size_t i = 0; i < sizeof ladder / sizeof *ladder && nw < MAX_WIDTHS; i++)
            if (ladder[i] <= cpus)
                widths[nw++] = ladder[i];
        if (nw < 2) {
            /* One width cannot give a slope: measure up to 4 anyway. */
            nw = 0;
            for (unsigned w = 2; w <= 4; w++)
                widths[nw++] = w;
            oversubscribed_default = true;
        }
    }

    /* in_pool needs a pool of 2w-1; keep it within the CPUs when at least
     * two widths allow that. */
    bool in_pool_ok[MAX_WIDTHS];
    unsigned n_in_pool = 0;
    for (unsigned j = 0; j < nw; j++)
        if (2 * widths[j] - 1 <= cpus)
            n_in_pool++;
    for (unsigned j = 0; j < nw; j++)
        in_pool_ok[j] = n_in_pool >= 2 ? 2 * widths[j] - 1 <= cpus : true;

    calibrate_units();

    fprintf(stderr, "calibrate: class %s, %u CPUs, widths", tt_host_class_name(cls), cpus);
    for (unsigned j = 0; j < nw; j++)
        fprintf(stderr, " %u", widths[j]);
    fprintf(stderr, ", %u rounds of %u calls; %.3f ns per unit of work\n", rounds, reps,
            ns_per_unit);

    /* The work of each task, per (kind, width): --task-us when given;
     * otherwise the break-even share D / (w - 1), found by iteration from
     * empty tasks (D grows with the task while the waiter's spin covers
     * less of it), at most 100 us a task. */
    size_t units[K_COUNT][MAX_WIDTHS];
    uint64_t task_ns[K_COUNT][MAX_WIDTHS];
    unsigned iterations[K_COUNT][MAX_WIDTHS];
    bool measured[K_COUNT][MAX_WIDTHS];
    memset(measured, 0, sizeof measured);
    memset(task_ns, 0, sizeof task_ns);
    memset(iterations, 0, sizeof iterations);
    int team_rc = TT_OK;
    const unsigned it_reps = reps / 2 > 200 ? reps / 2 : reps;
    uint64_t *tmp = calloc(it_reps, sizeof(uint64_t));
    if (!tmp)
        die("calloc", TT_ENOMEM);
    for (unsigned j = 0; j < nw; j++) {
        for (int k = 0; k < K_COUNT; k++) {
            if (k == K_IN_POOL && !in_pool_ok[j])
                continue;
            if (task_us >= 0) {
                units[k][j] = units_for(task_us * 1000.0);
                measured[k][j] = true;
                continue;
            }
            size_t u = 0;
            uint64_t alone = 0;
            for (unsigned it = 0; it < 8; it++) {
                block b = { warmup_ms * 1000000ull, it_reps, tmp, widths[j], u, 0 };
                int rc = measure(k, &b);
                if (rc && k == K_TEAM) {
                    team_rc = rc; /* no scope: the team row stays generic */
                    break;
                }
                if (rc)
                    die(kind_names[k], rc);
                uint64_t call = median(tmp, it_reps);
                uint64_t d = call > alone ? call - alone : 0;
                uint64_t want = d / (widths[j] - 1);
                if (want > 100000)
                    want = 100000;
                size_t nu = units_for(want);
                size_t diff = nu > u ? nu - u : u - nu;
                bool converged = it > 1 && (diff * 10 <= nu || diff <= units_for(200));
                fprintf(stderr, "calibrate: %s w=%u step %u: tasks of %llu ns -> D %llu ns\n",
                        kind_names[k], widths[j], it + 1, (unsigned long long)alone,
                        (unsigned long long)d);
                u = nu;
                alone = task_time(u);
                measured[k][j] = true;
                iterations[k][j] = it + 1;
                if (converged)
                    break;
            }
            units[k][j] = u;
        }
    }
    free(tmp);

    uint64_t *samples[K_COUNT][MAX_WIDTHS];
    const size_t total = (size_t)reps * rounds;
    for (int k = 0; k < K_COUNT; k++)
        for (unsigned j = 0; j < nw; j++) {
            samples[k][j] = measured[k][j] ? calloc(total, sizeof(uint64_t)) : NULL;
            if (measured[k][j] && !samples[k][j])
                die("calloc", TT_ENOMEM);
        }
    for (unsigned r = 0; r < rounds; r++) {
        for (unsigned jj = 0; jj < nw; jj++) {
            /* alternate the order of widths and kinds between rounds */
            unsigned j = r % 2 ? nw - 1 - jj : jj;
            for (int kk = 0; kk < K_COUNT; kk++) {
                int k = (kk + (int)r) % K_COUNT;
                if (!measured[k][j])
                    continue;
                block b = { warmup_ms * 1000000ull, reps, samples[k][j] + (size_t)r * reps,
                            widths[j], units[k][j], 0 };
                int rc = measure(k, &b);
                if (rc)
                    die(kind_names[k], rc);
                /* the work of one task alone, in the conditions of this block */
                task_ns[k][j] += task_time(units[k][j]);
            }
        }
        fprintf(stderr, "calibrate: round %u of %u done\n", r + 1, rounds);
    }

    tt_dispatch_costs dc;
    tt_dispatch_costs_for_class(TT_HOST_GENERIC, &dc);
    tt_width_costs *rows[K_COUNT] = { &dc.team, &dc.in_pool, &dc.outside };
    bool row_measured[K_COUNT];
    char notes[K_COUNT][MAX_WIDTHS][128];
    for (int k = 0; k < K_COUNT; k++) {
        unsigned aw[MAX_WIDTHS];
        uint64_t ac[MAX_WIDTHS];
        unsigned n = 0;
        for (unsigned j = 0; j < nw; j++) {
            notes[k][j][0] = '\0';
            if (!measured[k][j])
                continue;
            uint64_t *s = samples[k][j];
            qsort(s, total, sizeof *s, cmp_u64);
            const uint64_t t = task_ns[k][j] / rounds;
            uint64_t p10 = s[total / 10], p50 = s[total / 2], p90 = s[total * 9 / 10];
            uint64_t d = p50 > t ? p50 - t : 0;
            char steps[32] = "fixed";
            if (task_us < 0)
                snprintf(steps, sizeof steps, "%u steps", iterations[k][j]);
            snprintf(notes[k][j], sizeof notes[k][j],
                     "w=%u: tasks of %llu ns (%s); call p10 %llu, median %llu, p90 %llu ns",
                     widths[j], (unsigned long long)t, steps, (unsigned long long)p10,
                     (unsigned long long)p50, (unsigned long long)p90);
            aw[n] = widths[j];
            ac[n] = d;
            n++;
        }
        row_measured[k] = n > 0;
        if (n > 0 && tt_width_costs_from_anchors(n, aw, ac, rows[k]) != TT_OK) {
            fprintf(stderr, "calibrate: %s: the measured anchors do not form a row\n",
                    kind_names[k]);
            return 1;
        }
    }

    char host[128] = "unknown";
    gethostname(host, sizeof host - 1);
    printf("# threadteam dispatch costs, measured by bench/calibrate (threadteam %s)\n",
           TT_VERSION_STRING);
    printf("# host %s: %u CPUs in the affinity set, class %s\n", host, cpus,
           tt_host_class_name(tt_host_class_detect()));
    printf("# ns per parallel section, steady state: the median call time over %u calls\n"
           "# (%u rounds of %u, %llu ms of warm-up per block) minus the time of one task\n"
           "# alone; %s\n",
           rounds * reps, rounds, reps, (unsigned long long)warmup_ms,
           task_us >= 0 ? "every task does the busy work given by --task-us"
                        : "each task does the break-even share D/(w-1) of busy work, found by\n"
                          "# iteration from empty tasks (at most 100 us)");
    printf("#   team:    tt_scope_run_with(w) on a held team scope, pool of width w\n"
           "#   in_pool: tt_for_ranges(w) on a fork child of budget w, pool of width 2w-1\n"
           "#   outside: tt_exec_init + tt_for_ranges(w) from a plain thread, pool of width "
           "w\n");
    if (oversubscribed_default)
        printf("# this host has fewer than 3 CPUs: widths above %u are oversubscribed, "
               "measured\n# so that the row has a slope\n",
               cpus);
    for (int k = 0; k < K_COUNT; k++) {
        if (!row_measured[k]) {
            printf("# %s: not measured (%s); the generic row stands in\n", kind_names[k],
                   k == K_TEAM ? tt_strerror(team_rc) : "no width fits");
            continue;
        }
        for (unsigned j = 0; j < nw; j++)
            if (notes[k][j][0])
                printf("# %-7s %s%s\n", kind_names[k], notes[k][j],
                       (k == K_IN_POOL ? 2 * widths[j] - 1 : widths[j]) > cpus
                           ? " (pool oversubscribed)"
                           : "");
    }
    char buf[TT_DISPATCH_COSTS_TEXT_MAX];
    int rc = tt_dispatch_costs_format(&dc, cls, buf, sizeof buf);
    if (rc)
        die("tt_dispatch_costs_format", rc);
    fputs(buf, stdout);

    for (int k = 0; k < K_COUNT; k++)
        for (unsigned j = 0; j < nw; j++)
            free(samples[k][j]);
    return 0;
}
