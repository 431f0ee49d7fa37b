/*
 * test_waits.c -- waits that must not wait.
 *
 * A member never waits for members: the members it would wait for may be
 * held by its own root until this very job returns. A thread of a
 * tt_external callee's region never waits for the slots that tt_external
 * holds. And tt_external hands its callee the members it holds, never its
 * budget when it holds fewer. Each case below would stall (a second, until
 * the acquire timeout) or deadlock (an infinite timeout) if it waited; the
 * Check timeout and the elapsed-time bounds catch that.
 */
#include "tt_test.h"

#if TT_PARALLEL_ENABLED
#include <omp.h>
#endif

/* 1. A member mints a root and opens a team scope: refused at once (or
 * run, when members are free), never a wait, even with no timeout. */
typedef struct mscope {
    tt_pool *pool;
    _Atomic int ok, refused, bad;
    _Atomic uint64_t worst_ns;
} mscope;

static void empty_scope(void *arg, tt_scope *s)
{
    (void)arg;
    (void)s;
}

static void mscope_job(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    (void)child;
    mscope *m = arg;
    tt_exec r;
    TT_CHECK(tt_exec_init(&r, m->pool, tt_pool_width(m->pool)) == TT_OK, "mint in a member");
    uint64_t t0 = tt_now_ns();
    int rc = tt_team_scope(&r, empty_scope, NULL);
    uint64_t dt = tt_now_ns() - t0;
    uint64_t w = atomic_load(&m->worst_ns);
    while (dt > w && !atomic_compare_exchange_weak(&m->worst_ns, &w, dt))
        ;
    if (rc == TT_OK)
        atomic_fetch_add(&m->ok, 1);
    else if (rc == TT_REFUSED_UNAVAILABLE)
        atomic_fetch_add(&m->refused, 1);
    else
        atomic_fetch_add(&m->bad, 1);
    if (rc != TT_OK)
        tt_exec_finish(&r);
}

static void member_scope_case(bool dedicated)
{
    mscope m;
    memset(&m, 0, sizeof m);
    m.pool = TT_TEST_POOL(.width = 2, .acquire_ns = UINT64_MAX, .name = dedicated ? "ttwait" : NULL);
    for (unsigned r = 0; r < tt_iters(20); r++) {
        tt_exec ex;
        ck_assert_int_eq(tt_exec_init(&ex, m.pool, 2), TT_OK);
        ck_assert_int_eq(tt_fork(&ex, 2, mscope_job, &m), TT_OK);
    }
    tt_assert_no_failures();
    ck_assert_int_eq(atomic_load(&m.bad), 0);
#if TT_PARALLEL_ENABLED
    /* every member held by the root: a member's scope of 2 is refused */
    ck_assert_int_gt(atomic_load(&m.refused), 0);
#endif
    ck_assert_msg(atomic_load(&m.worst_ns) < 500000000ull * (uint64_t)tt_timeout_mult(),
                  "a member's team scope took %.3f s to answer",
                  (double)atomic_load(&m.worst_ns) * 1e-9);
    tt_free_pool(m.pool);
}

START_TEST(test_member_scope_never_waits)
{
    member_scope_case(false);
    member_scope_case(true);
}
END_TEST

#if TT_PARALLEL_ENABLED
/* 2. Head of line: a plain thread queues for all the slots while a root of
 * a dedicated pool holds two of three; a member of that root opens a team
 * scope of two, for which one slot is free: it takes it at once instead of
 * queueing behind the plain thread (which waits for this very root). */
typedef struct hol {
    tt_pool *pool;
    tt_flag queued;
    int scope_rc;
    int plain_rc;
    tt_exec plain;
} hol;

static void *plain_main(void *arg)
{
    hol *h = arg;
    tt_flag_set(&h->queued, 1);
    h->plain_rc = tt_team_scope(&h->plain, empty_scope, NULL);
    return NULL;
}

static void hol_job(void *arg, unsigned i, tt_exec *child)
{
    (void)child;
    hol *h = arg;
    if (i != 0)
        return;
    tt_flag_wait_ge(&h->queued, 1, 30);
    tt_sleep_us(20000); /* the plain thread is in the slots' queue now */
    tt_exec r;
    TT_CHECK(tt_exec_init(&r, h->pool, 2) == TT_OK, "mint in a member");
    h->scope_rc = tt_team_scope(&r, empty_scope, NULL);
}

START_TEST(test_member_not_behind_plain_thread)
{
    hol h;
    memset(&h, 0, sizeof h);
    h.pool = TT_TEST_POOL(.width = 3, .acquire_ns = UINT64_MAX, .name = "ttwait");
    ck_assert_int_eq(tt_exec_init(&h.plain, h.pool, 3), TT_OK);
    tt_exec ex;
    ck_assert_int_eq(tt_exec_init(&ex, h.pool, 2), TT_OK);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, plain_main, &h), 0);
    uint64_t t0 = tt_now_ns();
    ck_assert_int_eq(tt_fork(&ex, 2, hol_job, &h), TT_OK);
    double s = (double)(tt_now_ns() - t0) * 1e-9;
    ck_assert(tt_join_timeout(t, 60));
    ck_assert_int_eq(h.scope_rc, TT_OK);
    ck_assert_int_eq(h.plain_rc, TT_OK);
    ck_assert_msg(s < 5.0 * tt_timeout_mult(), "the root took %.2f s", s);
    tt_free_pool(h.pool);
}
END_TEST

/* 3. A vendor library calling back: the threads of tt_external's callee
 * region enter the same pool (whose slots that tt_external holds). Their
 * forks run inline, their broadcasts are refused, nothing waits, and no
 * more than the width runs user code at once. */
typedef struct cb {
    tt_pool *pool;
    tt_live live;
    _Atomic int forks_ok, bcast_refused, bad, jobs;
} cb;

static void cb_job(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    (void)child;
    cb *c = arg;
    tt_live_enter(&c->live);
    atomic_fetch_add(&c->jobs, 1);
    tt_spin_us(20);
    tt_live_leave(&c->live);
}

static void cb_bcast(void *arg, unsigned i) { cb_job(arg, i, NULL); }

static void cb_callee(void *arg, unsigned width)
{
    cb *c = arg;
#pragma omp parallel num_threads(width)
    {
        /* Both callee threads run user code at once (the barrier makes the
         * counter see it), then leave it while their entries' jobs count. */
        tt_live_enter(&c->live);
#pragma omp barrier
        tt_live_leave(&c->live);
        tt_exec r;
        if (tt_exec_init(&r, c->pool, tt_pool_width(c->pool)) == TT_OK) {
            int rc = tt_fork(&r, 4, cb_job, c);
            if (rc == TT_OK)
                atomic_fetch_add(&c->forks_ok, 1);
            else
                atomic_fetch_add(&c->bad, 1);
        }
        if (tt_exec_init(&r, c->pool, tt_pool_width(c->pool)) == TT_OK) {
            int rc = tt_broadcast(&r, cb_bcast, c);
            if (rc == TT_REFUSED_UNAVAILABLE)
                atomic_fetch_add(&c->bcast_refused, 1);
            else if (rc != TT_OK)
                atomic_fetch_add(&c->bad, 1);
            if (rc != TT_OK)
                tt_exec_finish(&r);
        }
    }
}

START_TEST(test_external_callee_calls_back)
{
    cb c;
    memset(&c, 0, sizeof c);
    tt_live_init(&c.live);
    c.pool = TT_TEST_POOL(.width = 2, .acquire_ns = UINT64_MAX);
    for (unsigned r = 0; r < tt_iters(20); r++) {
        tt_exec ex;
        ck_assert_int_eq(tt_exec_init(&ex, c.pool, 2), TT_OK);
        ck_assert_int_eq(tt_external(&ex, cb_callee, &c), TT_OK);
    }
    ck_assert_int_eq(atomic_load(&c.bad), 0);
    ck_assert_int_eq(atomic_load(&c.forks_ok), (int)(2 * tt_iters(20)));
    ck_assert_int_eq(atomic_load(&c.jobs), (int)(2 * 4 * tt_iters(20)));
    ck_assert_int_eq(atomic_load(&c.bcast_refused), (int)(2 * tt_iters(20)));
    /* The callee's two threads met at a barrier: 2 at once; the inline
     * jobs of their forks never add a third. */
    ck_assert_int_eq(tt_live_max(&c.live), 2);
    tt_free_pool(c.pool);
}
END_TEST

/* 4. tt_external on a member's nested root hands the callee the members
 * it holds: with every member held by the enclosing root, that is 1, and
 * the callee's region has one thread; user code never exceeds the budget. */
typedef struct mext {
    tt_pool *pool;
    tt_live live;
    _Atomic int widths_bad, region_bad, calls;
} mext;

static void mext_callee(void *arg, unsigned width)
{
    mext *m = arg;
    atomic_fetch_add(&m->calls, 1);
    if (width != 1)
        atomic_fetch_add(&m->widths_bad, 1);
    _Atomic int n = 0;
#pragma omp parallel
    {
        atomic_fetch_add(&n, 1);
        tt_live_enter(&m->live);
        tt_spin_us(20);
        tt_live_leave(&m->live);
    }
    if (atomic_load(&n) != (int)width)
        atomic_fetch_add(&m->region_bad, 1);
}

static void mext_job(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    (void)child;
    mext *m = arg;
    tt_exec r;
    TT_CHECK(tt_exec_init(&r, m->pool, 2) == TT_OK, "mint");
    TT_CHECK(tt_external(&r, mext_callee, m) == TT_OK, "external in a member");
}

START_TEST(test_external_member_root_width)
{
    mext m;
    memset(&m, 0, sizeof m);
    tt_live_init(&m.live);
    m.pool = tt_make_pool(2);
    for (unsigned r = 0; r < tt_iters(20); r++) {
        tt_exec ex;
        ck_assert_int_eq(tt_exec_init(&ex, m.pool, 2), TT_OK);
        ck_assert_int_eq(tt_fork(&ex, 2, mext_job, &m), TT_OK);
    }
    tt_assert_no_failures();
    ck_assert_int_eq(atomic_load(&m.calls), (int)(2 * tt_iters(20)));
    ck_assert_int_eq(atomic_load(&m.widths_bad), 0);
    ck_assert_int_eq(atomic_load(&m.region_bad), 0);
    ck_assert_int_le(tt_live_max(&m.live), 2);
    tt_free_pool(m.pool);
}
END_TEST
#endif

static Suite *waits_suite(void)
{
    Suite *s = suite_create("waits");
    TCase *tc = tt_tcase(s, "no-wait", 60);
    tcase_add_test(tc, test_member_scope_never_waits);
#if TT_PARALLEL_ENABLED
    tcase_add_test(tc, test_member_not_behind_plain_thread);
    tcase_add_test(tc, test_external_callee_calls_back);
    tcase_add_test(tc, test_external_member_root_width);
#endif
    return s;
}

int main(void) { return tt_run_suite(waits_suite()); }
