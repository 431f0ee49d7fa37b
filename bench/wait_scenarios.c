/*
 * wait_scenarios.c -- how team threads wait, the way callers use them.
 *
 * The threadteam driver of the wait benchmarks; omp/wait_omp.c runs the
 * same scenarios on raw OpenMP (built as wait_omp_gomp and wait_omp_llvm),
 * and scripts/bench.sh runs the three alternating, in separate processes,
 * and prints them side by side (`make bench`).
 *
 * Scenarios (a "section" is tt_scope_run of a section in which every
 * participant does calibrated busy work; "team held" means one
 * tt_team_scope around all calls of a repetition):
 *
 *   sections  a call is 200 sections of 5, 20 or 50 us, team held;
 *             reports the call and the overhead per section over the serial
 *             time of sections * work (measured in this process before any
 *             thread exists, so the calibration's error cancels); also 200
 *             empty sections (work 0: the dispatch alone, as EPCC measures
 *             it), because at 20 and 50 us the jitter of the work itself
 *             (the slower of the participants, every section) is larger
 *             than any runtime's dispatch on a KVM guest
 *   gaps      a call is 10 sections of 5 us, team held; the caller sleeps
 *             0 / 100 us / 1 ms / 10 ms before each call; reports the first
 *             section (wake latency: start of the call to the end of the
 *             first section) and the call
 *   acquire   a call is 50 sections of 20 us:
 *               team     a persistent team (tt_pool_into_team) and a
 *                        tt_team_lead token per call, whose tt_team_scope
 *                        runs the sections
 *               pool     the pool held, tt_exec_init + tt_team_scope per
 *                        call (members acquired per call)
 *               newpool  tt_pool_create (default settings, so its team
 *                        comes from the process-wide cache) + scope +
 *                        tt_pool_destroy per call; reports the scope
 *                        ("call") and build to destroy ("build_destroy")
 *   nested    a call is 100 tt_scope_split of the team into width/2 pairs,
 *             each pair one 20 us section on its sub-scope, team held
 *
 * Every value is the mean per call over --calls calls of one repetition;
 * the table gives median and p10 / p90 over --reps repetitions. Under every
 * row, "waits per call": join and barrier sleeps, member parks and the
 * preemptions the waiters saw (tt_pool_wait_counts, deltas over the timed
 * calls divided by the calls).
 *
 * Options (the same for wait_omp_gomp and wait_omp_llvm):
 *   --scenario LIST  sections,gaps,acquire,nested or all (default all)
 *   --widths LIST    team widths, e.g. 4,8, oversubscribed ones included;
 *                    default: all CPUs of the affinity set and three
 *                    quarters of them (at least 2)
 *   --calls N        calls per repetition (default per scenario)
 *   --reps N         repetitions (default 11)
 *   --warmup N       untimed calls before the repetitions (default 2)
 *   --load K:P       K child processes, each busy P % of every 10 ms, for
 *                    the whole run; they die with this process
 *   --csv FILE       append one row per repetition (scripts/bench.sh
 *                    aggregates them)
 *   --label TEXT     label of the CSV rows
 *   --work LIST      sections: work per section in us (default 0,5,20,50)
 *   --gaps LIST      gaps: sleeps in us (default 0,100,1000,10000)
 *   --max-seconds S  stop the repetitions of a configuration after S
 *                    seconds once it has 3 (default 5; 0: no cap)
 *   --quiet          no table on stdout
 *
 * With --with-likwid (TT_HAVE_LIKWID) every scenario is a LIKWID marker
 * region named after it: likwid-perfctr -m -g GROUP -C 0 ./wait_scenarios.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "bench_common.h"
#include "threadteam.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct tt_ctx {
    tt_pool *pool;       /* the held pool (NULL for newpool)            */
    tt_team *team;       /* acquire/team: the persistent team           */
    tt_pool_attr *attr;  /* acquire/newpool: settings of each new pool  */
} tt_ctx;

/* What a scope runs: the calls of one repetition, or one call. */
typedef struct tt_job {
    const bc_call *c;
    unsigned calls;
    uint64_t total_ns, first_ns;
    _Atomic int err;
} tt_job;

static void report(const char *what, int rc)
{
    fprintf(stderr, "threadteam: %s: %s (%s)\n", what, tt_strerror(rc), tt_status_name(rc));
}

static void section_work(void *arg, tt_section *s)
{
    (void)s;
    bc_spin(*(const uint64_t *)arg);
}

static void note(tt_job *j, int rc, const char *what)
{
    if (rc != TT_OK) {
        int expected = 0;
        if (atomic_compare_exchange_strong(&j->err, &expected, rc))
            report(what, rc);
    }
}

static void split_part(void *arg, unsigned part, tt_scope *sub)
{
    (void)part;
    tt_job *j = arg;
    note(j, tt_scope_run(sub, section_work, (void *)&j->c->iters), "tt_scope_run (pair)");
}

/* The calls of a job inside one team scope. */
static void scope_calls(void *arg, tt_scope *scope)
{
    tt_job *j = arg;
    const bc_call *c = j->c;
    void *work = (void *)&c->iters;
    if (tt_scope_size(scope) != c->width) {
        fprintf(stderr, "threadteam: a scope of %u participants for width %u\n",
                tt_scope_size(scope), c->width);
        atomic_store(&j->err, 1);
        return;
    }
    switch (c->scenario) {
    case BC_GAPS:
        for (unsigned k = 0; k < j->calls; k++) {
            bc_sleep_us(c->gap_us);
            uint64_t t0 = bc_now_ns();
            note(j, tt_scope_run(scope, section_work, work), "tt_scope_run");
            uint64_t t1 = bc_now_ns();
            for (unsigned s = 1; s < c->sections; s++)
                note(j, tt_scope_run(scope, section_work, work), "tt_scope_run");
            uint64_t t2 = bc_now_ns();
            j->first_ns += t1 - t0;
            j->total_ns += t2 - t0;
        }
        break;
    case BC_NESTED: {
        unsigned parts = c->width / 2 ? c->width / 2 : 1;
        uint64_t t0 = bc_now_ns();
        for (unsigned k = 0; k < j->calls; k++)
            for (unsigned s = 0; s < c->sections; s++)
                note(j, tt_scope_split(scope, parts, split_part, j), "tt_scope_split");
        j->total_ns += bc_now_ns() - t0;
        break;
    }
    default: {
        uint64_t t0 = bc_now_ns();
        for (unsigned k = 0; k < j->calls; k++)
            for (unsigned s = 0; s < c->sections; s++)
                note(j, tt_scope_run(scope, section_work, work), "tt_scope_run");
        j->total_ns += bc_now_ns() - t0;
        break;
    }
    }
}

static int make_attr(unsigned width, tt_pool_attr **attr)
{
    int rc = tt_pool_attr_create(attr);
    if (rc == TT_OK)
        rc = tt_pool_attr_set_threads(*attr, width);
    if (rc != TT_OK)
        report("tt_pool_attr", rc);
    return rc;
}

static int make_pool(unsigned width, tt_pool **pool)
{
    tt_pool_attr *attr = NULL;
    int rc = make_attr(width, &attr);
    if (rc == TT_OK) {
        rc = tt_pool_create(pool, attr);
        if (rc != TT_OK)
            report("tt_pool_create", rc);
    }
    tt_pool_attr_destroy(attr);
    return rc;
}

static void *tt_open(const bc_call *c)
{
    tt_ctx *x = calloc(1, sizeof *x);
    if (!x)
        return NULL;
    int rc = TT_OK;
    if (c->scenario == BC_ACQUIRE && c->variant == BC_ACQ_NEWPOOL) {
        rc = make_attr(c->width, &x->attr);
    } else {
        rc = make_pool(c->width, &x->pool);
        if (rc == TT_OK && c->scenario == BC_ACQUIRE && c->variant == BC_ACQ_TEAM) {
            rc = tt_pool_into_team(x->pool, c->width, &x->team);
            if (rc != TT_OK)
                report("tt_pool_into_team", rc);
        }
    }
    if (rc != TT_OK) {
        if (x->pool)
            tt_pool_destroy(x->pool);
        tt_pool_attr_destroy(x->attr);
        free(x);
        return NULL;
    }
    return x;
}

static void tt_close(void *ctx, const bc_call *c)
{
    (void)c;
    tt_ctx *x = ctx;
    if (x->team)
        x->pool = tt_team_into_pool(x->team);
    if (x->pool) {
        int rc = tt_pool_destroy(x->pool);
        if (rc != TT_OK)
            report("tt_pool_destroy", rc);
    }
    tt_pool_attr_destroy(x->attr);
    free(x);
}

static void counts(const tt_pool *p, tt_wait_counts *w)
{
    memset(w, 0, sizeof *w);
    if (p)
        tt_pool_wait_counts(p, w);
}

static void add_delta(bc_waits *acc, const tt_wait_counts *a, const tt_wait_counts *b)
{
    acc->join_sleeps += (double)(b->join_sleeps - a->join_sleeps);
    acc->barrier_sleeps += (double)(b->barrier_sleeps - a->barrier_sleeps);
    acc->member_parks += (double)(b->member_parks - a->member_parks);
    acc->preemptions += (double)(b->preemptions - a->preemptions);
}

static int tt_rep(void *ctx, const bc_call *c, bc_rep *out)
{
    tt_ctx *x = ctx;
    tt_job j;
    memset(&j, 0, sizeof j);
    j.c = c;
    bc_waits w = {0, 0, 0, 0};
    tt_wait_counts a, b;
    tt_exec ex;
    int rc;

    if (c->scenario != BC_ACQUIRE) {
        /* Team held: one scope around all calls of the repetition. */
        j.calls = c->calls;
        counts(x->pool, &a);
        rc = tt_exec_init(&ex, x->pool, c->width);
        if (rc == TT_OK)
            rc = tt_team_scope(&ex, scope_calls, &j);
        counts(x->pool, &b);
        if (rc != TT_OK) {
            report("tt_team_scope", rc);
            return 1;
        }
        add_delta(&w, &a, &b);
        if (c->scenario == BC_GAPS)
            out->first_us = (double)j.first_ns / 1000.0 / c->calls;
        out->call_us = (double)j.total_ns / 1000.0 / c->calls;
    } else {
        /* One scope per call. */
        j.calls = 1;
        uint64_t calls_ns = 0, build_ns = 0;
        const tt_pool *cp = x->team ? tt_team_pool(x->team) : x->pool;
        counts(cp, &a);
        for (unsigned k = 0; k < c->calls && !atomic_load(&j.err); k++) {
            uint64_t tb = bc_now_ns(), t0, t1;
            tt_pool *np = NULL;
            switch (c->variant) {
            case BC_ACQ_TEAM:
                t0 = bc_now_ns();
                rc = tt_team_lead(x->team, c->width, &ex);
                if (rc == TT_OK)
                    rc = tt_team_scope(&ex, scope_calls, &j);
                t1 = bc_now_ns();
                break;
            case BC_ACQ_POOL:
                t0 = bc_now_ns();
                rc = tt_exec_init(&ex, x->pool, c->width);
                if (rc == TT_OK)
                    rc = tt_team_scope(&ex, scope_calls, &j);
                t1 = bc_now_ns();
                break;
            default: /* new pool per call */
                rc = tt_pool_create(&np, x->attr);
                if (rc != TT_OK) {
                    report("tt_pool_create", rc);
                    return 1;
                }
                tt_wait_counts na, nb;
                counts(np, &na);
                t0 = bc_now_ns();
                rc = tt_exec_init(&ex, np, c->width);
                if (rc == TT_OK)
                    rc = tt_team_scope(&ex, scope_calls, &j);
                t1 = bc_now_ns();
                counts(np, &nb);
                add_delta(&w, &na, &nb);
                int drc = tt_pool_destroy(np);
                if (drc != TT_OK) {
                    report("tt_pool_destroy", drc);
                    return 1;
                }
                break;
            }
            uint64_t te = bc_now_ns();
            if (rc != TT_OK) {
                report("tt_team_scope (acquire)", rc);
                return 1;
            }
            calls_ns += t1 - t0;
            build_ns += te - tb;
        }
        if (c->variant != BC_ACQ_NEWPOOL) {
            counts(cp, &b);
            add_delta(&w, &a, &b);
        } else {
            out->build_us = (double)build_ns / 1000.0 / c->calls;
        }
        out->call_us = (double)calls_ns / 1000.0 / c->calls;
    }
    if (atomic_load(&j.err))
        return 1;
    w.join_sleeps /= c->calls;
    w.barrier_sleeps /= c->calls;
    w.member_parks /= c->calls;
    w.preemptions /= c->calls;
    out->waits = w;
    return 0;
}

static const char usage[] =
    "usage: wait_scenarios [options]\n"
    "How threadteam's team threads wait (see the header comment of bench/wait_scenarios.c).\n";

int main(int argc, char **argv)
{
    const bc_driver d = {"threadteam", BC_ACQ_COUNT, tt_open, tt_close, tt_rep};
    return bc_main(argc, argv, &d, usage);
}
