/*
 * test_external.c -- tt_external, the one door through which a width is
 * handed to outside OpenMP code: inside the callback an `omp parallel`
 * (with num_threads(width) or plain) forms exactly `width` threads, no more
 * than the budget run under the root, the member's OpenMP settings are
 * restored afterwards, budget 1 runs inline with width 1, the reserved
 * slots keep other roots off, and a measure of what one call costs against
 * the same region opened directly (printed, not asserted).
 *
 * Without parallel (--disable-parallel) every call is inline with width 1.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "tt_test.h"

#include "test_hooks.h"

#if TT_PARALLEL_ENABLED
#ifndef _OPENMP
#error "test_external needs the OpenMP compiler flags in a parallel build"
#endif
#include <omp.h>
#endif

typedef struct ext_rec {
    tt_pool *pool;
    pthread_t caller;
    _Atomic int calls;
    _Atomic int width_seen;
    _Atomic int on_caller;
    _Atomic int member; /* member index of the call, -1 when none */
    _Atomic int max_threads_in, dynamic_in;
    _Atomic int team_explicit, team_plain; /* omp_get_num_threads in regions */
    _Atomic int team_bad;
    th_live *live; /* threads of the root inside regions (may be NULL) */
    unsigned spin_us;
} ext_rec;

static void ext_rec_init(ext_rec *r, tt_pool *pool, th_live *live)
{
    memset(r, 0, sizeof *r);
    r->pool = pool;
    r->caller = pthread_self();
    r->live = live;
    r->spin_us = 200;
    atomic_store(&r->member, -2);
}

#if TT_PARALLEL_ENABLED
/* Every OpenMP region of this file is in a function named ttomp_*: under
 * TSan, accesses inside regions run by libgomp's reused threads look
 * unsynchronised (libgomp's barriers are invisible to TSan), and
 * tests/tsan.supp names that prefix. Returns the team size. */
static int ttomp_explicit(ext_rec *r, unsigned width)
{
    int n = -1;
#pragma omp parallel num_threads(width)
    {
        if (r->live)
            th_live_enter(r->live);
        th_spin_us(r->spin_us);
#pragma omp barrier
        if (omp_get_thread_num() == 0)
            n = omp_get_num_threads();
        if (r->live)
            th_live_leave(r->live);
    }
    return n;
}

static int ttomp_plain(ext_rec *r)
{
    int n = -1;
#pragma omp parallel
    {
        if (r->live)
            th_live_enter(r->live);
        th_spin_us(r->spin_us);
        if (omp_get_thread_num() == 0)
            n = omp_get_num_threads();
        if (r->live)
            th_live_leave(r->live);
    }
    return n;
}
#endif

/* The callback: what an OpenMP library would do with the width. */
static void ext_fn(void *arg, unsigned width)
{
    ext_rec *r = arg;
    atomic_fetch_add(&r->calls, 1);
    atomic_store(&r->width_seen, (int)width);
    atomic_store(&r->on_caller, pthread_equal(pthread_self(), r->caller));
    unsigned k = 0;
    atomic_store(&r->member, r->pool && tt_pool_is_member(r->pool, &k) ? (int)k : -1);
#if TT_PARALLEL_ENABLED
    atomic_store(&r->max_threads_in, omp_get_max_threads());
    atomic_store(&r->dynamic_in, omp_get_dynamic());
    int n_explicit = ttomp_explicit(r, width);
    int n_plain = ttomp_plain(r);
    atomic_store(&r->team_explicit, n_explicit);
    atomic_store(&r->team_plain, n_plain);
    if (n_explicit != (int)width || n_plain != (int)width)
        atomic_fetch_add(&r->team_bad, 1);
#else
    if (r->live) {
        th_live_enter(r->live);
        th_live_leave(r->live);
    }
    atomic_store(&r->team_explicit, 1);
    atomic_store(&r->team_plain, 1);
#endif
}

static void check_ext(ext_rec *r, unsigned width, bool plain_caller, const char *msg)
{
    ck_assert_msg(atomic_load(&r->calls) == 1, "%s: %d calls", msg, atomic_load(&r->calls));
    ck_assert_msg(atomic_load(&r->width_seen) == (int)width, "%s: width %d, want %u", msg,
                  atomic_load(&r->width_seen), width);
    ck_assert_msg(atomic_load(&r->team_explicit) == (int)width,
                  "%s: omp parallel num_threads(%u) formed %d threads", msg, width,
                  atomic_load(&r->team_explicit));
    ck_assert_msg(atomic_load(&r->team_plain) == (int)width,
                  "%s: a plain omp parallel formed %d threads, want %u", msg,
                  atomic_load(&r->team_plain), width);
#if TT_PARALLEL_ENABLED
    ck_assert_msg(atomic_load(&r->max_threads_in) == (int)width,
                  "%s: omp_get_max_threads() is %d in the callback, want %u", msg,
                  atomic_load(&r->max_threads_in), width);
    ck_assert_msg(atomic_load(&r->dynamic_in) == 0, "%s: dynamic on in the callback", msg);
#endif
    if (width == 1) {
        ck_assert_msg(atomic_load(&r->on_caller), "%s: budget 1 did not run inline", msg);
    } else if (plain_caller) {
        /* A plain thread runs the callee itself: at the pool's width as its
         * own top-level region, narrower as participant 0 of its region. */
        ck_assert_msg(atomic_load(&r->on_caller), "%s: did not run on the plain caller", msg);
    }
}

START_TEST(test_external_widths)
{
    static const unsigned widths[] = {2, 4};
    unsigned rounds = th_iters(5);
    for (size_t wi = 0; wi < TT_ARRAY_LEN(widths); wi++) {
        tt_pool *pool = th_make_pool(widths[wi]);
        unsigned w = tt_pool_width(pool);
        for (unsigned round = 0; round < rounds; round++) {
            for (unsigned b = 1; b <= w + 1; b++) {
                th_live live;
                th_live_init(&live);
                ext_rec r;
                ext_rec_init(&r, pool, &live);
                tt_exec ex;
                ck_assert_int_eq(tt_exec_init(&ex, pool, b), TT_OK);
                unsigned eb = tt_exec_budget(&ex);
                ck_assert_int_eq(tt_external(&ex, ext_fn, &r), TT_OK);
                char msg[64];
                snprintf(msg, sizeof msg, "width %u budget %u", w, eb);
                check_ext(&r, eb, true, msg);
                ck_assert_msg(th_live_max(&live) <= (int)eb, "%s: %d threads at once", msg,
                              th_live_max(&live));
#if TT_LEDGER_ENABLED
                tt_ledger_root root = tt_exec_ledger_root(&ex);
                ck_assert_uint_le(tt_ledger_max_live(root), eb);
                ck_assert_uint_eq(tt_ledger_live(root), 0);
#endif
                ck_assert_int_eq(tt_external(&ex, ext_fn, &r), TT_ECONSUMED);
            }
        }
        th_free_pool(pool);
    }
}
END_TEST

START_TEST(test_external_serial_and_budget1)
{
    tt_pool *pool = th_make_pool(4);
#if TT_PARALLEL_ENABLED
    int mt = omp_get_max_threads(), dyn = omp_get_dynamic();
    int mal = omp_get_max_active_levels();
#endif
    ext_rec r;
    tt_exec ex;
    ext_rec_init(&r, pool, NULL);
    tt_exec_init_serial(&ex);
    ck_assert_int_eq(tt_external(&ex, ext_fn, &r), TT_OK);
    check_ext(&r, 1, true, "serial token");
    ext_rec_init(&r, pool, NULL);
    ck_assert_int_eq(tt_exec_init(&ex, pool, 1), TT_OK);
    ck_assert_int_eq(tt_external(&ex, ext_fn, &r), TT_OK);
    check_ext(&r, 1, true, "budget 1");
    ck_assert_int_eq(atomic_load(&r.member), -1);
#if TT_PARALLEL_ENABLED
    /* the caller's own settings are back */
    ck_assert_int_eq(omp_get_max_threads(), mt);
    ck_assert_int_eq(omp_get_dynamic(), dyn);
    ck_assert_int_eq(omp_get_max_active_levels(), mal);
#endif
    th_free_pool(pool);
}
END_TEST

/* From members: tt_external on fork children runs on the member itself,
 * with the child's budget as the width; all under one root stay within
 * its budget. */
typedef struct ext_jobs {
    tt_pool *pool;
    th_live *live;
    ext_rec recs[8];
    _Atomic int rc[8];
    _Atomic unsigned budget[8];
    pthread_t thread[8];
    _Atomic int member[8];
} ext_jobs;

static void job_external(void *arg, unsigned i, tt_exec *child)
{
    ext_jobs *e = arg;
    unsigned k = 0;
    atomic_store(&e->member[i], tt_pool_is_member(e->pool, &k) ? (int)k : -1);
    e->thread[i] = pthread_self();
    atomic_store(&e->budget[i], tt_exec_budget(child));
    ext_rec *r = &e->recs[i];
    memset(r, 0, sizeof *r);
    r->pool = e->pool;
    r->caller = pthread_self();
    r->live = e->live;
    r->spin_us = 200;
    /* this job gives its slot to the callback's threads */
    atomic_store(&e->rc[i], tt_external(child, ext_fn, r));
}

START_TEST(test_external_from_members)
{
    tt_pool *pool = th_make_pool(8);
    static const unsigned cases[][2] = {{8, 2}, {8, 4}, {6, 4}, {4, 2}, {8, 3}, {8, 8}};
    unsigned rounds = th_iters(5);
    for (unsigned round = 0; round < rounds; round++) {
        for (size_t c = 0; c < TT_ARRAY_LEN(cases); c++) {
            th_live live;
            th_live_init(&live);
            ext_jobs *e = calloc(1, sizeof *e);
            ck_assert_ptr_nonnull(e);
            e->pool = pool;
            e->live = &live;
            tt_exec ex;
            ck_assert_int_eq(tt_exec_init(&ex, pool, cases[c][0]), TT_OK);
            unsigned rb = tt_exec_budget(&ex);
            unsigned jobs = cases[c][1];
            ck_assert_int_eq(tt_fork(&ex, jobs, job_external, e), TT_OK);
            unsigned sum = 0;
            for (unsigned j = 0; j < jobs; j++) {
                char msg[64];
                snprintf(msg, sizeof msg, "root %u, job %u of %u", rb, j, jobs);
                ck_assert_msg(atomic_load(&e->rc[j]) == TT_OK, "%s: %s", msg,
                              tt_status_name(atomic_load(&e->rc[j])));
                unsigned cb = atomic_load(&e->budget[j]);
                sum += cb;
                check_ext(&e->recs[j], cb, false, msg);
                /* a member's tt_external runs on that member */
                if (atomic_load(&e->member[j]) >= 0)
                    ck_assert_msg(atomic_load(&e->recs[j].on_caller),
                                  "%s: a member's tt_external ran elsewhere", msg);
            }
            if (jobs <= rb)
                ck_assert_uint_eq(sum, rb);
            ck_assert_msg(th_live_max(&live) <= (int)rb,
                          "root %u, %u jobs: %d threads of the root ran at once", rb, jobs,
                          th_live_max(&live));
#if TT_LEDGER_ENABLED
            tt_ledger_root root = tt_exec_ledger_root(&ex);
            ck_assert_msg(tt_ledger_max_live(root) <= rb, "ledger: %u live for budget %u",
                          tt_ledger_max_live(root), rb);
            ck_assert_uint_eq(tt_ledger_live(root), 0);
#endif
            free(e);
        }
    }
    th_free_pool(pool);
}
END_TEST

#if TT_PARALLEL_ENABLED
/* OpenMP settings of the member that runs a job. */
typedef struct icvs {
    int max_threads, dynamic, max_active_levels, level, active_level, thread_limit, nested;
} icvs;

static void read_icvs(icvs *v)
{
    v->max_threads = omp_get_max_threads();
    v->dynamic = omp_get_dynamic();
    v->max_active_levels = omp_get_max_active_levels();
    v->level = omp_get_level();
    v->active_level = omp_get_active_level();
    v->thread_limit = omp_get_thread_limit();
    v->nested = omp_get_nested();
}

static bool icvs_eq(const icvs *a, const icvs *b)
{
    return a->max_threads == b->max_threads && a->dynamic == b->dynamic &&
           a->max_active_levels == b->max_active_levels && a->level == b->level &&
           a->active_level == b->active_level && a->thread_limit == b->thread_limit &&
           a->nested == b->nested;
}

typedef struct icv_ctx {
    tt_pool *pool;
    icvs of[8];
    _Atomic int seen[8];
    _Atomic int nested_team[8]; /* threads of an omp parallel in the job */
    _Atomic int bad;
} icv_ctx;

static void job_read_icvs(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    (void)child;
    icv_ctx *c = arg;
    unsigned k = 0;
    if (!tt_pool_is_member(c->pool, &k) || k >= 8) {
        atomic_fetch_add(&c->bad, 1);
        return;
    }
    read_icvs(&c->of[k]);
    _Atomic int n = 0;
#pragma omp parallel
    atomic_fetch_add(&n, 1);
    atomic_store(&c->nested_team[k], atomic_load(&n));
    atomic_fetch_add(&c->seen[k], 1);
}

/* Record the ICVs of every member (a full-width fork from a plain thread
 * puts job k on member k). */
static void read_member_icvs(tt_pool *pool, icv_ctx *c)
{
    memset(c, 0, sizeof *c);
    c->pool = pool;
    unsigned w = tt_pool_width(pool);
    tt_exec ex;
    ck_assert_int_eq(tt_exec_init(&ex, pool, w), TT_OK);
    ck_assert_int_eq(tt_fork(&ex, w, job_read_icvs, c), TT_OK);
    ck_assert_int_eq(atomic_load(&c->bad), 0);
    for (unsigned k = 0; k < w; k++)
        ck_assert_int_eq(atomic_load(&c->seen[k]), 1);
}

typedef struct twice_ctx {
    tt_pool *pool;
    icvs before, after_first;
    ext_rec r1, r2;
    _Atomic int rc1, rc2;
} twice_ctx;

static void ext_noop(void *arg, unsigned width)
{
    ext_rec *r = arg;
    ext_fn(r, width);
    /* change the settings inside, as a careless library would */
    omp_set_num_threads(1);
    omp_set_dynamic(1);
    omp_set_max_active_levels(1);
}

/* In a job: two tt_external calls on reborrows of the child; the member's
 * settings are the same before, between and after. */
static void job_external_twice(void *arg, unsigned i, tt_exec *child)
{
    twice_ctx *t = &((twice_ctx *)arg)[i];
    read_icvs(&t->before);
    tt_exec c1, c2;
    tt_exec_reborrow(child, &c1);
    atomic_store(&t->rc1, tt_external(&c1, ext_noop, &t->r1));
    read_icvs(&t->after_first);
    tt_exec_reborrow(child, &c2);
    atomic_store(&t->rc2, tt_external(&c2, ext_fn, &t->r2));
}
#endif

typedef struct caller_icv_ctx {
    int max_threads, dynamic, active_ok; /* what the callee saw on entry */
} caller_icv_ctx;

/* Reads what the callee is handed, then changes all three settings the
 * external writes, to values that differ from both of the caller's
 * configurations below. */
static void ext_change_settings(void *arg, unsigned width)
{
    (void)width;
    caller_icv_ctx *c = arg;
    c->max_threads = omp_get_max_threads();
    c->dynamic = omp_get_dynamic();
    c->active_ok = omp_get_max_active_levels() > omp_get_active_level();
    omp_set_num_threads(7);
    omp_set_dynamic(!omp_get_dynamic());
    omp_set_max_active_levels(3);
}

/* A full-width external from the main thread (the quick frame) hands the
 * callee its width with dynamic adjustment off, and the caller's settings
 * are what they were after it, whatever the callee set: where they already
 * matched the callee's (nothing to write on the way in) and where they did
 * not. */
START_TEST(test_external_restores_caller_settings)
{
#if TT_PARALLEL_ENABLED
    tt_pool *pool = th_make_pool(4);
    int w = (int)tt_pool_width(pool);
    const int nthreads[2] = {w, w + 1}, dynamic[2] = {0, 1}, mal[2] = {1, 4};
    /* Put back after (under CK_FORK=no the next test runs in this process). */
    icvs orig;
    read_icvs(&orig);
    for (int k = 0; k < 2; k++) {
        omp_set_num_threads(nthreads[k]);
        omp_set_dynamic(dynamic[k]);
        omp_set_max_active_levels(mal[k]);
        icvs before, after;
        read_icvs(&before);
        caller_icv_ctx c = {0};
        tt_exec ex;
        ck_assert_int_eq(tt_exec_init(&ex, pool, (unsigned)w), TT_OK);
        ck_assert_int_eq(tt_external(&ex, ext_change_settings, &c), TT_OK);
        ck_assert_int_eq(c.max_threads, w);
        ck_assert_int_eq(c.dynamic, 0);
        ck_assert_int_eq(c.active_ok, 1);
        read_icvs(&after);
        ck_assert_msg(icvs_eq(&before, &after),
                      "configuration %d: the callee's settings stayed behind (max threads %d, "
                      "dynamic %d, max active levels %d; before %d, %d, %d)",
                      k, after.max_threads, after.dynamic, after.max_active_levels,
                      before.max_threads, before.dynamic, before.max_active_levels);
    }
    omp_set_num_threads(orig.max_threads);
    omp_set_dynamic(orig.dynamic);
    omp_set_max_active_levels(orig.max_active_levels);
    th_free_pool(pool);
#endif
}
END_TEST

START_TEST(test_external_restores_member_settings)
{
#if TT_PARALLEL_ENABLED
    tt_pool *pool = th_make_pool(4);
    unsigned w = tt_pool_width(pool);
    icv_ctx *before = malloc(sizeof *before), *after = malloc(sizeof *after);
    ck_assert_ptr_nonnull(before);
    ck_assert_ptr_nonnull(after);
    read_member_icvs(pool, before);

    /* from a plain thread (runs on a member), twice, with budgets 2 and 4 */
    for (unsigned b = 2; b <= 4; b += 2) {
        for (int rep = 0; rep < 2; rep++) {
            ext_rec r;
            ext_rec_init(&r, pool, NULL);
            r.spin_us = 10;
            tt_exec ex;
            ck_assert_int_eq(tt_exec_init(&ex, pool, b), TT_OK);
            ck_assert_int_eq(tt_external(&ex, rep ? ext_noop : ext_fn, &r), TT_OK);
            check_ext(&r, b, true, "plain caller");
        }
    }
    /* from members: two per job */
    twice_ctx *t = calloc(2, sizeof *t);
    ck_assert_ptr_nonnull(t);
    for (int j = 0; j < 2; j++) {
        t[j].pool = pool;
        t[j].r1.pool = t[j].r2.pool = pool;
        t[j].r1.spin_us = t[j].r2.spin_us = 10;
    }
    tt_exec ex;
    ck_assert_int_eq(tt_exec_init(&ex, pool, 4), TT_OK);
    ck_assert_int_eq(tt_fork(&ex, 2, job_external_twice, t), TT_OK);
    for (int j = 0; j < 2; j++) {
        ck_assert_int_eq(atomic_load(&t[j].rc1), TT_OK);
        ck_assert_int_eq(atomic_load(&t[j].rc2), TT_OK);
        ck_assert_msg(icvs_eq(&t[j].before, &t[j].after_first),
                      "job %d: the member's OpenMP settings changed across tt_external "
                      "(max_threads %d->%d, dynamic %d->%d, max_active_levels %d->%d)",
                      j, t[j].before.max_threads, t[j].after_first.max_threads,
                      t[j].before.dynamic, t[j].after_first.dynamic,
                      t[j].before.max_active_levels, t[j].after_first.max_active_levels);
        /* both calls saw width 2 and formed teams of 2 */
        ck_assert_int_eq(atomic_load(&t[j].r1.team_explicit), 2);
        ck_assert_int_eq(atomic_load(&t[j].r2.team_explicit), 2);
        ck_assert_int_eq(atomic_load(&t[j].r2.team_plain), 2);
    }
    free(t);

    /* a later fork sees every member as it was */
    read_member_icvs(pool, after);
    for (unsigned k = 0; k < w; k++)
        ck_assert_msg(icvs_eq(&before->of[k], &after->of[k]),
                      "member %u: settings before %d/%d/%d, after %d/%d/%d (max_threads, "
                      "dynamic, max_active_levels)",
                      k, before->of[k].max_threads, before->of[k].dynamic,
                      before->of[k].max_active_levels, after->of[k].max_threads,
                      after->of[k].dynamic, after->of[k].max_active_levels);
    /* a member outside tt_external serialises a nested region, as any
     * OpenMP team member does by default (no hidden oversubscription) */
    for (unsigned k = 0; k < w; k++) {
        ck_assert_msg(atomic_load(&before->nested_team[k]) == 1 &&
                          atomic_load(&after->nested_team[k]) == 1,
                      "member %u: an omp parallel in a job had %d threads before, %d after "
                      "tt_external (expected 1)",
                      k, atomic_load(&before->nested_team[k]), atomic_load(&after->nested_team[k]));
    }
    free(before);
    free(after);
    th_free_pool(pool);
#else
    tt_pool *pool = th_make_pool(4);
    ck_assert_uint_eq(tt_pool_width(pool), 1);
    th_free_pool(pool);
#endif
}
END_TEST

/* The token's width slots stay reserved while the callback runs: another
 * root that needs those members waits. */
typedef struct reserve_ctx {
    tt_pool *pool;
    th_flag in_callback, other_started;
    _Atomic int overlap;
    _Atomic int other_jobs;
    int rc_other;
} reserve_ctx;

static void ext_hold(void *arg, unsigned width)
{
    (void)width;
    reserve_ctx *c = arg;
    th_flag_set(&c->in_callback, 1);
    /* hold for a while; the other root must not start meanwhile */
    for (int i = 0; i < 40; i++) {
        th_sleep_us(1000);
        if (atomic_load(&c->other_jobs) > 0)
            atomic_store(&c->overlap, 1);
    }
    th_flag_set(&c->in_callback, 2);
}

static void job_other(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    (void)child;
    reserve_ctx *c = arg;
    atomic_fetch_add(&c->other_jobs, 1);
    if (th_flag_get(&c->in_callback) == 1)
        atomic_store(&c->overlap, 1);
}

static TT_TEST_UNUSED void *other_root(void *arg)
{
    reserve_ctx *c = arg;
    tt_exec ex;
    c->rc_other = tt_exec_init(&ex, c->pool, 2);
    th_flag_set(&c->other_started, 1);
    if (c->rc_other == TT_OK)
        c->rc_other = tt_fork(&ex, 2, job_other, c);
    return NULL;
}

typedef struct ext_thread_args {
    reserve_ctx *c;
    int rc;
} ext_thread_args;

static TT_TEST_UNUSED void *ext_root(void *arg)
{
    ext_thread_args *a = arg;
    tt_exec ex;
    a->rc = tt_exec_init(&ex, a->c->pool, 4);
    if (a->rc == TT_OK)
        a->rc = tt_external(&ex, ext_hold, a->c);
    return NULL;
}

START_TEST(test_external_reserves_width)
{
#if TT_PARALLEL_ENABLED
    tt_pool *pool = th_make_pool(4);
    reserve_ctx c;
    memset(&c, 0, sizeof c);
    c.pool = pool;
    ext_thread_args a = {&c, -1};
    pthread_t ta, tb;
    /* a full-width tt_external holds the pool; then another root asks */
    ck_assert_int_eq(pthread_create(&ta, NULL, ext_root, &a), 0);
    ck_assert(th_flag_wait_ge(&c.in_callback, 1, 20));
    ck_assert_int_eq(pthread_create(&tb, NULL, other_root, &c), 0);
    ck_assert(th_join_timeout(ta, 30));
    ck_assert(th_join_timeout(tb, 30));
    ck_assert_int_eq(a.rc, TT_OK);
    ck_assert_int_eq(c.rc_other, TT_OK);
    ck_assert_int_eq(atomic_load(&c.other_jobs), 2);
    ck_assert_msg(atomic_load(&c.overlap) == 0,
                  "another root ran on the pool while a full-width tt_external held it");
    th_free_pool(pool);
#else
    tt_pool *pool = th_make_pool(4);
    ck_assert_uint_eq(tt_pool_width(pool), 1);
    th_free_pool(pool);
#endif
}
END_TEST

/* ------------------------------------------------------------------------ */
/* What one call costs (printed for the docs; not asserted)                  */
/* ------------------------------------------------------------------------ */

#if TT_PARALLEL_ENABLED
static _Atomic int g_sink;

static void ttomp_region(unsigned width)
{
#pragma omp parallel num_threads(width)
    {
        atomic_fetch_add(&g_sink, 1);
    }
}

static void ext_region(void *arg, unsigned width)
{
    (void)arg;
    ttomp_region(width);
}

static void ext_empty(void *arg, unsigned width)
{
    (void)arg;
    (void)width;
    atomic_fetch_add(&g_sink, 1);
}
#endif

/* ------------------------------------------------------------------------ */
/* The quick frame of a full-width external                                  */
/* ------------------------------------------------------------------------ */
/* A plain thread's tt_external at its pool's width takes the quick frame
 * (the slots as a mask of the one slot word, no placement arrays; test hook
 * tt__test_last_external_quick), and keeps every rule of the general path:
 * the pool's slots are held while the callee runs (another thread's root
 * waits), the callee's threads that call back into the pool are known as
 * its own (they run without waiting), an external nested in the callee or
 * made while the slots are taken takes the general path. */
#if TT_PARALLEL_ENABLED
typedef struct quick_ctx {
    tt_pool *pool;
    _Atomic int inner_quick; /* the nested external's hook, -1 none   */
    _Atomic int callback_rc; /* the callee's own root from its thread */
    _Atomic int region_rc;   /* roots from the callee's region        */
    _Atomic int inner_rc;
    _Atomic int jobs;
} quick_ctx;

static void quick_job(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    (void)child;
    quick_ctx *c = arg;
    atomic_fetch_add(&c->jobs, 1);
}

static void quick_inner(void *arg, unsigned width)
{
    quick_ctx *c = arg;
    if (width != 1)
        atomic_store(&c->inner_rc, -100);
    atomic_fetch_add(&c->jobs, 1);
}

static void ttomp_quick_region(quick_ctx *c, unsigned width)
{
#pragma omp parallel num_threads(width)
    {
        tt_exec ex;
        int rc = tt_exec_init(&ex, c->pool, width);
        if (rc == TT_OK)
            rc = tt_fork(&ex, 2, quick_job, c);
        if (rc != TT_OK)
            atomic_store(&c->region_rc, rc);
    }
}

static void quick_callee(void *arg, unsigned width)
{
    quick_ctx *c = arg;
    /* The caller's own thread, outside any region: a root on the pool. */
    tt_exec ex;
    int rc = tt_exec_init(&ex, c->pool, width);
    if (rc == TT_OK)
        rc = tt_fork(&ex, 2, quick_job, c);
    atomic_store(&c->callback_rc, rc);
    /* A nested external: the callee's thread, one thread wide. */
    rc = tt_exec_init(&ex, c->pool, width);
    if (rc == TT_OK)
        rc = tt_external(&ex, quick_inner, c);
    if (rc != TT_OK)
        atomic_store(&c->inner_rc, rc);
    atomic_store(&c->inner_quick, tt__test_last_external_quick());
    ttomp_quick_region(c, width);
}
#endif

/* One width per loop index: under TSan, a callee's region thread made for
 * an earlier pool reads the next pool's fields through libgomp's barriers,
 * which TSan does not see; each index runs in a process of its own. */
static const unsigned quick_widths[] = {2, 4};

START_TEST(test_external_quick_frame)
{
#if TT_PARALLEL_ENABLED
    {
        tt_pool *pool = th_make_pool(quick_widths[_i]);
        unsigned w = tt_pool_width(pool);
        for (unsigned round = 0; round < th_iters(20); round++) {
            quick_ctx c;
            memset(&c, 0, sizeof c);
            c.pool = pool;
            atomic_store(&c.inner_quick, -1);
            tt_exec ex;
            ck_assert_int_eq(tt_exec_init(&ex, pool, w), TT_OK);
            ck_assert_int_eq(tt_external(&ex, quick_callee, &c), TT_OK);
            ck_assert_int_eq(tt__test_last_external_quick(), 1);
            ck_assert_int_eq(atomic_load(&c.callback_rc), TT_OK);
            ck_assert_int_eq(atomic_load(&c.inner_rc), TT_OK);
            ck_assert_int_eq(atomic_load(&c.region_rc), TT_OK);
            ck_assert_int_eq(atomic_load(&c.inner_quick), 0);
            ck_assert_int_eq(atomic_load(&c.jobs), 2 + 1 + 2 * (int)w);
            ck_assert_int_eq(tt_external(&ex, quick_callee, &c), TT_ECONSUMED);
            /* Narrower: the general path. */
            if (w > 2) {
                ck_assert_int_eq(tt_exec_init(&ex, pool, w - 1), TT_OK);
                ck_assert_int_eq(tt_external(&ex, ext_empty, NULL), TT_OK);
                ck_assert_int_eq(tt__test_last_external_quick(), 0);
            }
        }
        /* The slots taken by another thread's full-width external: this
         * one waits on the general path, and the two never overlap. */
        reserve_ctx rc;
        memset(&rc, 0, sizeof rc);
        rc.pool = pool;
        ext_thread_args held = {&rc, -1}; /* ext_root: a budget of 4, clamped to the width */
        pthread_t t;
        ck_assert_int_eq(pthread_create(&t, NULL, ext_root, &held), 0);
        ck_assert(th_flag_wait_ge(&rc.in_callback, 1, 20));
        tt_exec ex;
        ck_assert_int_eq(tt_exec_init(&ex, pool, w), TT_OK);
        ck_assert_int_eq(tt_external(&ex, ext_empty, NULL), TT_OK);
        ck_assert_int_eq(tt__test_last_external_quick(), 0);
        ck_assert_int_eq(th_flag_get(&rc.in_callback), 2);
        ck_assert(th_join_timeout(t, 30));
        ck_assert_int_eq(held.rc, TT_OK);
        th_free_pool(pool);
    }
#endif
}
END_TEST

START_TEST(test_external_overhead)
{
#if TT_PARALLEL_ENABLED
    tt_pool *pool = th_make_pool_spin(2, 300000, 1000000); /* default-like waits */
    unsigned w = tt_pool_width(pool);
    unsigned n = th_iters(400);
    /* warm up both */
    for (int i = 0; i < 20; i++) {
        ttomp_region(w);
        tt_exec ex;
        ck_assert_int_eq(tt_exec_init(&ex, pool, w), TT_OK);
        ck_assert_int_eq(tt_external(&ex, ext_region, NULL), TT_OK);
    }
    /* the entry alone first (a callback that opens no region), then the
     * region opened directly, then the same region through tt_external */
    uint64_t t0 = th_now_ns();
    for (unsigned i = 0; i < n; i++) {
        tt_exec ex;
        ck_assert_int_eq(tt_exec_init(&ex, pool, w), TT_OK);
        ck_assert_int_eq(tt_external(&ex, ext_empty, NULL), TT_OK);
    }
    uint64_t t1 = th_now_ns();
    for (unsigned i = 0; i < n; i++)
        ttomp_region(w);
    uint64_t t2 = th_now_ns();
    for (unsigned i = 0; i < n; i++) {
        tt_exec ex;
        ck_assert_int_eq(tt_exec_init(&ex, pool, w), TT_OK);
        ck_assert_int_eq(tt_external(&ex, ext_region, NULL), TT_OK);
    }
    uint64_t t3 = th_now_ns();
    double empty = (double)(t1 - t0) / n / 1000.0;
    double direct = (double)(t2 - t1) / n / 1000.0;
    double via = (double)(t3 - t2) / n / 1000.0;
    printf("external overhead: width %u, %u calls: omp parallel num_threads(%u) opened directly "
           "on the calling thread %.2f us; the same region through tt_external %.2f us "
           "(+%.2f us per call); tt_external with an empty callback %.2f us (%s run)\n",
           w, n, w, direct, via, via - direct, empty, th_test_quick() ? "quick" : "native");
    fflush(stdout);
    th_free_pool(pool);
    ck_assert_int_gt(atomic_load(&g_sink), 0);
#else
    printf("external overhead: not measured (built without parallel)\n");
#endif
}
END_TEST

/* Issue 39, item 3: the application's nesting settings (max-active-levels
 * above one, as OMP_MAX_ACTIVE_LEVELS=2 or OMP_NESTED=true give, and a
 * list of team sizes) must not reach the callee: a callee whose region
 * opens a nested one runs `width` threads in all, never more. Set here
 * through the API on the application's thread; env_matrix.sh runs the
 * same check under the environment variables. */
typedef struct nest_rec {
    th_live live;
    _Atomic int inner_max;
    _Atomic int outer_bad;
} nest_rec;

#if TT_PARALLEL_ENABLED
static void ttomp_nesting_callee(nest_rec *r, unsigned width)
{
    _Atomic int outer = 0;
#pragma omp parallel
    {
        atomic_fetch_add(&outer, 1);
#pragma omp parallel num_threads(2)
        {
            th_live_enter(&r->live);
            int n = omp_get_num_threads();
            int m = atomic_load(&r->inner_max);
            while (n > m && !atomic_compare_exchange_weak(&r->inner_max, &m, n))
                ;
            th_spin_us(300);
            th_live_leave(&r->live);
        }
    }
    if (atomic_load(&outer) != (int)width)
        atomic_fetch_add(&r->outer_bad, 1);
}
#endif

static void nesting_callee(void *arg, unsigned width)
{
#if TT_PARALLEL_ENABLED
    ttomp_nesting_callee(arg, width);
#else
    (void)arg;
    (void)width;
#endif
}

static void nesting_job(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    int rc = tt_external(child, nesting_callee, arg);
    TT_CHECK(rc == TT_OK, "external in a share: %s", tt_status_name(rc));
}

START_TEST(test_external_caps_application_nesting)
{
#if TT_PARALLEL_ENABLED
    omp_set_nested(1);
    omp_set_max_active_levels(4);
#endif
    for (unsigned w = 2; w <= 4; w += 2) {
        tt_pool *pool = th_make_pool(w);
        unsigned W = tt_pool_width(pool);
        for (unsigned it = 0; it < th_iters(5); it++) {
            /* A full-width root on this thread, then two half-width ones in
             * members' shares. */
            nest_rec r = {0};
            th_live_init(&r.live);
            tt_exec ex;
            ck_assert_int_eq(tt_exec_init(&ex, pool, W), TT_OK);
            ck_assert_int_eq(tt_external(&ex, nesting_callee, &r), TT_OK);
            ck_assert_msg(th_live_max(&r.live) <= (int)W,
                          "a width-%u external ran %d threads under nesting settings", W,
                          th_live_max(&r.live));
            ck_assert_int_eq(atomic_load(&r.outer_bad), 0);
            if (W >= 4) {
                nest_rec q = {0};
                th_live_init(&q.live);
                ck_assert_int_eq(tt_exec_init(&ex, pool, W), TT_OK);
                ck_assert_int_eq(tt_fork(&ex, 2, nesting_job, &q), TT_OK);
                th_assert_no_failures();
                ck_assert_msg(th_live_max(&q.live) <= (int)W,
                              "two width-%u externals ran %d threads under nesting settings",
                              W / 2, th_live_max(&q.live));
                ck_assert_int_eq(atomic_load(&q.outer_bad), 0);
            }
        }
#if TT_PARALLEL_ENABLED
        /* The application keeps its own settings. */
        ck_assert_int_eq(omp_get_max_active_levels(), 4);
#endif
        th_free_pool(pool);
    }
}
END_TEST

/* Issue 39, item 4: a participant that a scope pinned to one CPU gets its
 * own mask back for a tt_external's callee (the threads of the callee's
 * region start from it), and is pinned again after. */
typedef struct pin_ext {
    _Atomic int min_in_callee[2];
    _Atomic int before[2], after[2];
} pin_ext;

typedef struct pin_call {
    pin_ext *pe;
    unsigned job;
} pin_call;

static int mask_count(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    sched_getaffinity(0, sizeof set, &set);
    return CPU_COUNT(&set);
}

static void note_min(_Atomic int *m, int v)
{
    int cur = atomic_load(m);
    while (v < cur && !atomic_compare_exchange_weak(m, &cur, v))
        ;
}

#if TT_PARALLEL_ENABLED
static void ttomp_pin_callee(pin_call *k, unsigned width)
{
#pragma omp parallel num_threads(width)
    note_min(&k->pe->min_in_callee[k->job], mask_count());
}
#endif

static void pin_callee(void *arg, unsigned width)
{
    pin_call *k = arg;
#if TT_PARALLEL_ENABLED
    ttomp_pin_callee(k, width);
#else
    (void)width;
    note_min(&k->pe->min_in_callee[k->job], mask_count());
#endif
}

static void pin_job(void *arg, unsigned i, tt_exec *child)
{
    pin_ext *pe = arg;
    pin_call k = {pe, i};
    atomic_store(&pe->before[i], mask_count());
    int rc = tt_external(child, pin_callee, &k);
    TT_CHECK(rc == TT_OK, "external in a scope-fork job: %s", tt_status_name(rc));
    atomic_store(&pe->after[i], mask_count());
}

static void pin_fork_scope(void *arg, tt_scope *scope)
{
    int rc = tt_scope_fork(scope, 2, pin_job, arg);
    TT_CHECK(rc == TT_OK, "scope fork: %s", tt_status_name(rc));
}

START_TEST(test_external_restores_pinned_mask)
{
    int ncpu = mask_count();
    if (!TT_PARALLEL_ENABLED || ncpu < 2)
        return;
    unsetenv("LIKWID_PIN");
    for (int dedicated = 0; dedicated <= 1; dedicated++) {
        tt_pool_attr *a;
        ck_assert_int_eq(tt_pool_attr_create(&a), TT_OK);
        tt_pool_attr_set_threads(a, 4);
        tt_pool_attr_set_pin_participants(a, true);
        if (dedicated)
            tt_pool_attr_set_thread_name(a, "tt-pin");
        tt_pool *p;
        ck_assert_int_eq(tt_pool_create(&p, a), TT_OK);
        tt_pool_attr_destroy(a);
        for (unsigned it = 0; it < th_iters(5); it++) {
            pin_ext pe = {.min_in_callee = {1 << 20, 1 << 20}};
            tt_exec ex;
            ck_assert_int_eq(tt_exec_init(&ex, p, 4), TT_OK);
            ck_assert_int_eq(tt_team_scope(&ex, pin_fork_scope, &pe), TT_OK);
            th_assert_no_failures();
            /* Job 1 runs on participant 2, pinned to one CPU. */
            ck_assert_int_eq(atomic_load(&pe.before[1]), 1);
            for (int j = 0; j < 2; j++) {
                ck_assert_msg(atomic_load(&pe.min_in_callee[j]) == ncpu,
                              "job %d (mask of %d CPUs): a callee thread had %d of %d CPUs", j,
                              atomic_load(&pe.before[j]), atomic_load(&pe.min_in_callee[j]),
                              ncpu);
                ck_assert_int_eq(atomic_load(&pe.after[j]), atomic_load(&pe.before[j]));
            }
        }
        ck_assert_int_eq(tt_pool_destroy(p), TT_OK);
    }
}
END_TEST

static Suite *external_suite(void)
{
    Suite *s = suite_create("external");
    TCase *tc = th_tcase(s, "width", 120);
    tcase_add_test(tc, test_external_widths);
    tcase_add_test(tc, test_external_serial_and_budget1);
    tcase_add_test(tc, test_external_from_members);
    tc = th_tcase(s, "settings", 60);
    tcase_add_test(tc, test_external_restores_member_settings);
    tcase_add_test(tc, test_external_restores_caller_settings);
    tcase_add_test(tc, test_external_reserves_width);
    tcase_add_test(tc, test_external_caps_application_nesting);
    tcase_add_test(tc, test_external_restores_pinned_mask);
    tcase_add_loop_test(tc, test_external_quick_frame, 0, (int)TT_ARRAY_LEN(quick_widths));
    tc = th_tcase(s, "overhead", 120);
    tcase_add_test(tc, test_external_overhead);
    return s;
}

int main(void) { return th_run_suite(external_suite()); }
