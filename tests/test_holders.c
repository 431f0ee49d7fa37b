/*
 * test_holders.c -- a thread that holds slots of a pool never waits for
 * slots of that pool (issue 39, items 1, 2 and 6).
 *
 *  - A scope leader that is no member of the pool (a scope on a dedicated
 *    pool, a scope opened from inside the application's own `omp
 *    parallel`, a persistent team's leader, a reborrowed scope token) and
 *    whose callback makes roots of budget 1 and 2 on the same pool and
 *    enters them: each runs (inline, or on slots free now) or is refused at
 *    once, and none waits for the slots its own scope holds.
 *  - tt_external on a token with team authority (tt_scope_reborrow,
 *    tt_team_lead): the callee's `omp parallel` threads, each making a root
 *    of the pool, run inline and never wait for the slots the scope holds.
 *  - tt_can_broadcast says what tt_broadcast then does, in every such
 *    place and inside a full-width external's callee.
 *
 * A deadlock fails through the tcase timeout (th_tcase's watchdog). In the
 * serial build every pool has width 1 and every entry runs inline: the
 * same calls must all run.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "tt_test.h"

#if TT_PARALLEL_ENABLED
#ifndef _OPENMP
#error "test_holders needs the OpenMP compiler flags in a parallel build"
#endif
#include <omp.h>
#endif

enum { N_IDX = 10 };

typedef struct probe {
    tt_pool *pool;
    /* The hand-off into and out of the callee's own region, stated in
     * atomics: libgomp's (uninstrumented) region start and end order it
     * already, but ThreadSanitizer cannot see them. */
    _Atomic int handoff, handback;
    _Atomic unsigned hits[N_IDX];
    _Atomic int calls;
    _Atomic int bad;
} probe;

static void count_range(void *arg, size_t b, size_t e)
{
    probe *p = arg;
    for (size_t i = b; i < e; i++)
        atomic_fetch_add(&p->hits[i], 1);
}

static void count_job(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    (void)child;
    probe *p = arg;
    atomic_fetch_add(&p->calls, 1);
}

static void count_bcast(void *arg, unsigned i)
{
    (void)i;
    probe *p = arg;
    atomic_fetch_add(&p->calls, 1);
}

static void ext_noop(void *arg, unsigned width)
{
    probe *p = arg;
    TT_CHECK(width >= 1, "external width %u", width);
    atomic_fetch_add(&p->calls, 1);
}

static void scope_noop(void *arg, tt_scope *scope)
{
    (void)scope;
    probe *p = arg;
    atomic_fetch_add(&p->calls, 1);
}

/* tt_can_broadcast and tt_broadcast on one budget-`b` root: the one says
 * what the other does. */
static void check_broadcast_agrees(probe *p, unsigned b)
{
    tt_exec ex;
    TT_CHECK(tt_exec_init(&ex, p->pool, b) == TT_OK, "init");
    bool can = tt_can_broadcast(&ex);
    int before = atomic_load(&p->calls);
    int rc = tt_broadcast(&ex, count_bcast, p);
    int ran = atomic_load(&p->calls) - before;
    TT_CHECK(can == (rc == TT_OK), "tt_can_broadcast %d but tt_broadcast %s (budget %u)", can,
             tt_status_name(rc), b);
    TT_CHECK(rc == TT_OK || rc == TT_REFUSED_UNAVAILABLE || rc == TT_REFUSED_CALLER_IN_POOL, "broadcast: %s", tt_status_name(rc));
    if (rc == TT_OK)
        TT_CHECK(ran == (int)tt_exec_budget(&ex) || ran >= 1, "broadcast ran %d calls", ran);
    if (rc != TT_OK)
        tt_exec_finish(&ex);
}

/* What a holder of the pool's slots does with roots of its own pool. Every
 * call returns (none waits for the holder's own slots); the ranges cover
 * every index once per call. */
static void use_pool(probe *p)
{
    for (unsigned b = 1; b <= 2; b++) {
        for (unsigned i = 0; i < N_IDX; i++)
            atomic_store(&p->hits[i], 0);
        tt_exec ex;
        TT_CHECK(tt_exec_init(&ex, p->pool, b) == TT_OK, "init");
        int rc = tt_for_ranges(&ex, N_IDX, 1, count_range, p);
        TT_CHECK(rc == TT_OK, "ranges at budget %u: %s", b, tt_status_name(rc));
        for (unsigned i = 0; i < N_IDX; i++)
            TT_CHECK(atomic_load(&p->hits[i]) == 1, "index %u hit %u times", i,
                     atomic_load(&p->hits[i]));

        TT_CHECK(tt_exec_init(&ex, p->pool, b) == TT_OK, "init");
        rc = tt_fork(&ex, 3, count_job, p);
        TT_CHECK(rc == TT_OK, "fork at budget %u: %s", b, tt_status_name(rc));

        TT_CHECK(tt_exec_init(&ex, p->pool, b) == TT_OK, "init");
        rc = tt_external(&ex, ext_noop, p);
        TT_CHECK(rc == TT_OK, "external at budget %u: %s", b, tt_status_name(rc));

        /* A scope needs all its members at once: it runs, or is refused at
         * once (the pool's acquire timeout is far beyond the tcase's). */
        TT_CHECK(tt_exec_init(&ex, p->pool, b) == TT_OK, "init");
        rc = tt_team_scope(&ex, scope_noop, p);
        TT_CHECK(rc == TT_OK || rc == TT_REFUSED_UNAVAILABLE, "scope at budget %u: %s", b,
                 tt_status_name(rc));
        if (rc != TT_OK)
            tt_exec_finish(&ex);

        check_broadcast_agrees(p, b);
    }
    /* A team from the pool the holder holds: made of members free now, or
     * refused at once (another team may own the pool already). */
    tt_team *team = NULL;
    int rc = tt_pool_into_team(p->pool, tt_pool_width(p->pool), &team);
    TT_CHECK(rc == TT_OK || rc == TT_REFUSED_UNAVAILABLE || rc == TT_EBUSY, "into team: %s",
             tt_status_name(rc));
    if (rc == TT_OK)
        TT_CHECK(tt_team_into_pool(team) == p->pool, "into pool");
}

static void scope_uses_pool(void *arg, tt_scope *scope)
{
    (void)scope;
    use_pool(arg);
}

static tt_pool *waiting_pool(unsigned width, const char *name)
{
    /* The acquire timeout is forever: a wait for the holder's own slots
     * hangs, and the tcase timeout reports it. */
    return TT_TEST_POOL(.width = width, .acquire_ns = UINT64_MAX, .name = name);
}

static void run_scope(probe *p, unsigned budget)
{
    tt_exec ex;
    TT_CHECK(tt_exec_init(&ex, p->pool, budget) == TT_OK, "init");
    int rc = tt_team_scope(&ex, scope_uses_pool, p);
    TT_CHECK(rc == TT_OK, "outer scope: %s", tt_status_name(rc));
}

START_TEST(scope_on_dedicated_pool)
{
    probe p = {.pool = waiting_pool(2, "tt-hold")};
    for (unsigned it = 0; it < th_iters(20); it++)
        run_scope(&p, 2);
    th_assert_no_failures();
    th_free_pool(p.pool);
}
END_TEST

START_TEST(scope_on_default_pool)
{
    probe p = {.pool = waiting_pool(2, NULL)};
    for (unsigned it = 0; it < th_iters(20); it++)
        run_scope(&p, 2);
    th_assert_no_failures();
    th_free_pool(p.pool);
}
END_TEST

#if TT_PARALLEL_ENABLED
static void ttomp_scope_in_app_region(probe *p)
{
#pragma omp parallel num_threads(2)
    {
#pragma omp master
        run_scope(p, 2);
    }
}
#endif

START_TEST(scope_from_app_region)
{
    probe p = {.pool = waiting_pool(2, NULL)};
    for (unsigned it = 0; it < th_iters(20); it++) {
#if TT_PARALLEL_ENABLED
        ttomp_scope_in_app_region(&p);
#else
        run_scope(&p, 2);
#endif
    }
    th_assert_no_failures();
    th_free_pool(p.pool);
}
END_TEST

/* A reborrowed scope token's own scope: the leader runs the callback. */
static void scope_reborrows(void *arg, tt_scope *scope)
{
    probe *p = arg;
    tt_exec child;
    tt_scope_reborrow(scope, &child);
    int rc = tt_team_scope(&child, scope_uses_pool, p);
    TT_CHECK(rc == TT_OK, "reborrowed scope: %s", tt_status_name(rc));
}

START_TEST(reborrowed_scope_token)
{
    for (int dedicated = 0; dedicated <= 1; dedicated++) {
        probe p = {.pool = waiting_pool(2, dedicated ? "tt-hold" : NULL)};
        for (unsigned it = 0; it < th_iters(10); it++) {
            tt_exec ex;
            ck_assert_int_eq(tt_exec_init(&ex, p.pool, 2), TT_OK);
            ck_assert_int_eq(tt_team_scope(&ex, scope_reborrows, &p), TT_OK);
        }
        th_assert_no_failures();
        th_free_pool(p.pool);
    }
}
END_TEST

START_TEST(persistent_team_leader)
{
    for (int dedicated = 0; dedicated <= 1; dedicated++) {
        probe p = {.pool = waiting_pool(2, dedicated ? "tt-hold" : NULL)};
        tt_team *team = NULL;
        ck_assert_int_eq(tt_pool_into_team(p.pool, tt_pool_width(p.pool), &team), TT_OK);
        for (unsigned it = 0; it < th_iters(10); it++) {
            tt_exec ex;
            ck_assert_int_eq(tt_team_lead(team, 2, &ex), TT_OK);
            /* The leader holds the team's slots between its entries too. */
            use_pool(&p);
            ck_assert_int_eq(tt_team_scope(&ex, scope_uses_pool, &p), TT_OK);
        }
        ck_assert_ptr_eq(tt_team_into_pool(team), p.pool);
        th_assert_no_failures();
        th_free_pool(p.pool);
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* tt_external on a token with team authority                               */
/* ------------------------------------------------------------------------ */

static void ttomp_thread_uses_pool(probe *p)
{
    tt_exec ex;
    TT_CHECK(tt_exec_init(&ex, p->pool, 1) == TT_OK, "init");
    int rc = tt_for_ranges(&ex, N_IDX, 1, count_range, p);
    TT_CHECK(rc == TT_OK, "callee thread's ranges: %s", tt_status_name(rc));
    TT_CHECK(tt_exec_init(&ex, p->pool, 2) == TT_OK, "init");
    rc = tt_for_ranges(&ex, N_IDX, 1, count_range, p);
    TT_CHECK(rc == TT_OK, "callee thread's budget-2 ranges: %s", tt_status_name(rc));
    check_broadcast_agrees(p, 2);
}

#if TT_PARALLEL_ENABLED
static void ttomp_callee(probe *p, unsigned width)
{
    atomic_store_explicit(&p->handoff, 1, memory_order_release);
#pragma omp parallel num_threads(width)
    {
        (void)atomic_load_explicit(&p->handoff, memory_order_acquire);
        ttomp_thread_uses_pool(p);
        atomic_fetch_add_explicit(&p->handback, 1, memory_order_release);
    }
    (void)atomic_load_explicit(&p->handback, memory_order_acquire);
}
#endif

static void callee(void *arg, unsigned width)
{
    probe *p = arg;
    atomic_fetch_add(&p->calls, 1);
#if TT_PARALLEL_ENABLED
    ttomp_callee(p, width);
#else
    (void)width;
    ttomp_thread_uses_pool(p);
#endif
}

static void scope_external(void *arg, tt_scope *scope)
{
    probe *p = arg;
    tt_exec child;
    tt_scope_reborrow(scope, &child);
    int rc = tt_external(&child, callee, p);
    TT_CHECK(rc == TT_OK, "external on a scope token: %s", tt_status_name(rc));
}

START_TEST(external_on_scope_token)
{
    for (int dedicated = 0; dedicated <= 1; dedicated++) {
        /* A probe of its own for each pool, never reused: the callee's
         * threads read it in the application's own region, whose end
         * ThreadSanitizer cannot see, so a rewrite of the same memory
         * after it would read as a race. */
        static probe probes[2];
        probe *pp = &probes[dedicated];
        pp->pool = waiting_pool(2, dedicated ? "tt-hold" : NULL);
        for (unsigned it = 0; it < th_iters(20); it++) {
            tt_exec ex;
            ck_assert_int_eq(tt_exec_init(&ex, pp->pool, 2), TT_OK);
            ck_assert_int_eq(tt_team_scope(&ex, scope_external, pp), TT_OK);
        }
        th_assert_no_failures();
        th_free_pool(pp->pool);
    }
}
END_TEST

START_TEST(external_on_lead_token)
{
    for (int dedicated = 0; dedicated <= 1; dedicated++) {
        /* A probe of its own for each pool, never reused: the callee's
         * threads read it in the application's own region, whose end
         * ThreadSanitizer cannot see, so a rewrite of the same memory
         * after it would read as a race. */
        static probe probes[2];
        probe *pp = &probes[dedicated];
        pp->pool = waiting_pool(2, dedicated ? "tt-hold" : NULL);
        tt_team *team = NULL;
        ck_assert_int_eq(tt_pool_into_team(pp->pool, tt_pool_width(pp->pool), &team), TT_OK);
        for (unsigned it = 0; it < th_iters(20); it++) {
            tt_exec ex;
            ck_assert_int_eq(tt_team_lead(team, 2, &ex), TT_OK);
            ck_assert_int_eq(tt_external(&ex, callee, pp), TT_OK);
        }
        ck_assert_ptr_eq(tt_team_into_pool(team), pp->pool);
        th_assert_no_failures();
        th_free_pool(pp->pool);
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* tt_can_broadcast inside a full-width external's callee                   */
/* ------------------------------------------------------------------------ */

START_TEST(can_broadcast_in_full_width_callee)
{
    for (int dedicated = 0; dedicated <= 1; dedicated++) {
        /* A probe of its own for each pool, never reused: the callee's
         * threads read it in the application's own region, whose end
         * ThreadSanitizer cannot see, so a rewrite of the same memory
         * after it would read as a race. */
        static probe probes[2];
        probe *pp = &probes[dedicated];
        pp->pool = waiting_pool(2, dedicated ? "tt-hold" : NULL);
        for (unsigned it = 0; it < th_iters(20); it++) {
            tt_exec ex;
            ck_assert_int_eq(tt_exec_init(&ex, pp->pool, tt_pool_width(pp->pool)), TT_OK);
            ck_assert_int_eq(tt_external(&ex, callee, pp), TT_OK);
        }
        th_assert_no_failures();
        th_free_pool(pp->pool);
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* A member's team scope is refused at once                                 */
/* ------------------------------------------------------------------------ */

typedef struct member_scope {
    tt_pool *pool;
    th_tbarrier bar;
    _Atomic int refused, ran;
    _Atomic uint64_t worst_ns;
} member_scope;

static void member_scope_job(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    (void)child;
    member_scope *m = arg;
    /* Both jobs run at once, each on a member holding its slot. */
    TT_CHECK(th_tbarrier_wait(&m->bar, 20) >= 0, "barrier");
    tt_exec ex;
    TT_CHECK(tt_exec_init(&ex, m->pool, 2) == TT_OK, "init");
    uint64_t t0 = th_now_ns();
    int rc = tt_team_scope(&ex, scope_noop, &(probe){0});
    uint64_t dt = th_now_ns() - t0;
    if (rc == TT_REFUSED_UNAVAILABLE) {
        atomic_fetch_add(&m->refused, 1);
        tt_exec_finish(&ex);
    } else {
        TT_CHECK(rc == TT_OK, "member's scope: %s", tt_status_name(rc));
        atomic_fetch_add(&m->ran, 1);
    }
    uint64_t w = atomic_load(&m->worst_ns);
    while (dt > w && !atomic_compare_exchange_weak(&m->worst_ns, &w, dt))
        ;
    TT_CHECK(th_tbarrier_wait(&m->bar, 20) >= 0, "barrier");
}

START_TEST(member_scope_refused_at_once)
{
    if (th_expect_width(2) < 2)
        return; /* the serial build: no members */
    for (int dedicated = 0; dedicated <= 1; dedicated++) {
        /* An acquire timeout of 10 s: a member that waited for it would
         * show in the time its refusal took. */
        member_scope m = {.pool = TT_TEST_POOL(.width = 2, .acquire_ns = 10000000000ull,
                                               .name = dedicated ? "tt-hold" : NULL)};
        for (unsigned it = 0; it < th_iters(10); it++) {
            th_tbarrier_init(&m.bar, 2);
            tt_exec ex;
            ck_assert_int_eq(tt_exec_init(&ex, m.pool, 2), TT_OK);
            ck_assert_int_eq(tt_fork(&ex, 2, member_scope_job, &m), TT_OK);
            th_tbarrier_destroy(&m.bar);
        }
        th_assert_no_failures();
        ck_assert_int_eq(atomic_load(&m.ran), 0);
        ck_assert_uint_lt(atomic_load(&m.worst_ns), 1000000000ull);
        th_free_pool(m.pool);
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* tt_team_lead by a slot holder on a team that lends its members           */
/* ------------------------------------------------------------------------ */

typedef struct lead_in_job {
    tt_team *team;
    _Atomic int rc;
} lead_in_job;

static void lead_job(void *arg, unsigned i, tt_exec *child)
{
    (void)child;
    lead_in_job *l = arg;
    if (i != 0)
        return;
    tt_exec ex;
    int rc = tt_team_lead(l->team, 2, &ex);
    atomic_store(&l->rc, rc);
    if (rc == TT_OK)
        tt_exec_finish(&ex);
}

/* A team with idle_serves_pool lends its members to the pool's roots while
 * no leader holds it. A fork of budget 2 takes both; its job 0, on the
 * caller that holds one of them, asks to lead the team: the members it
 * would wait for are its own fork's. It is refused at once (it hung
 * before). */
START_TEST(lending_team_lead_by_holder)
{
    tt_pool_attr *a = NULL;
    ck_assert_int_eq(tt_pool_attr_create(&a), TT_OK);
    ck_assert_int_eq(tt_pool_attr_set_threads(a, 2), TT_OK);
    ck_assert_int_eq(tt_pool_attr_set_idle_serves_pool(a, true), TT_OK);
    ck_assert_int_eq(tt_pool_attr_set_acquire_timeout(a, UINT64_MAX), TT_OK);
    tt_pool *pool = NULL;
    ck_assert_int_eq(tt_pool_create(&pool, a), TT_OK);
    tt_pool_attr_destroy(a);
    if (tt_pool_width(pool) < 2) {
        ck_assert_int_eq(tt_pool_destroy(pool), TT_OK);
        return; /* the serial build: no member to lend */
    }
    tt_team *team = NULL;
    ck_assert_int_eq(tt_pool_into_team(pool, 2, &team), TT_OK);
    for (unsigned it = 0; it < th_iters(10); it++) {
        lead_in_job l = {.team = team, .rc = -1};
        tt_exec ex;
        ck_assert_int_eq(tt_exec_init(&ex, pool, 2), TT_OK);
        ck_assert_int_eq(tt_fork(&ex, 2, lead_job, &l), TT_OK);
        ck_assert_msg(atomic_load(&l.rc) == TT_REFUSED_UNAVAILABLE,
                      "tt_team_lead from a fork job holding the lent members: %s",
                      tt_status_name(atomic_load(&l.rc)));
        /* Outside the fork the same call leads. */
        tt_exec lead;
        ck_assert_int_eq(tt_team_lead(team, 2, &lead), TT_OK);
        tt_exec_finish(&lead);
    }
    ck_assert_ptr_eq(tt_team_into_pool(team), pool);
    ck_assert_int_eq(tt_pool_destroy(pool), TT_OK);
}
END_TEST

static Suite *holders_suite(void)
{
    Suite *s = suite_create("holders");
    TCase *tc = th_tcase(s, "scope_leaders", 30);
    tcase_add_test(tc, scope_on_dedicated_pool);
    tcase_add_test(tc, scope_on_default_pool);
    tcase_add_test(tc, scope_from_app_region);
    tcase_add_test(tc, reborrowed_scope_token);
    tcase_add_test(tc, persistent_team_leader);
    tcase_add_test(tc, lending_team_lead_by_holder);
    tc = th_tcase(s, "team_externals", 30);
    tcase_add_test(tc, external_on_scope_token);
    tcase_add_test(tc, external_on_lead_token);
    tc = th_tcase(s, "broadcast_rule", 30);
    tcase_add_test(tc, can_broadcast_in_full_width_callee);
    tc = th_tcase(s, "member_scope", 60);
    tcase_add_test(tc, member_scope_refused_at_once);
    return s;
}

int main(void) { return th_run_suite(holders_suite()); }
