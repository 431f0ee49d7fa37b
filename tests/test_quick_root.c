/*
 * test_quick_root.c -- the quick root (lib/exec_root.c): a plain thread's
 * fork of one job per slot and its plain split run with one line of the
 * caller's memory for the region's threads. The path must keep every
 * promise of the general one: each job and index runs once, at most the
 * budget at once across every root of the pool, a job's child token names
 * its member (nested entries run and find their member), tt_fork_fail
 * ends the fork with its code, a team that comes out short runs the tasks
 * on the threads it got, an `omp parallel` in a share of an OpenMP-free
 * pool gets one thread, and a thread that holds anything of the pool takes
 * the general path. The test hook tt__test_last_root_quick says which path
 * a root took, so that the assertions are about the quick one.
 */
#include "tt_test.h"
#include "test_hooks.h"

#include <dlfcn.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#if TT_PARALLEL_ENABLED

typedef struct quick_run {
    tt_pool *pool;
    unsigned width;
    th_live live; /* jobs running now, across every root of the pool */
    _Atomic unsigned seen[64];
    _Atomic unsigned bad;
    int fail_job;     /* job that calls tt_fork_fail, or -1 */
    int fail_code;
    bool nested;      /* each job makes entries on its child */
    bool omp_inside;  /* each job opens an omp parallel */
    bool any_budget;  /* jobs' children may hold more than 1 (fewer jobs than slots) */
    unsigned spin_us; /* each job's length */
    _Atomic unsigned omp_wide; /* an omp parallel in a job got more than one thread */
} quick_run;

static void nested_job(void *arg, unsigned i, tt_exec *child)
{
    (void)child;
    _Atomic unsigned *n = arg;
    atomic_fetch_add(n, 1u << (i * 4));
}

static void nested_range(void *arg, size_t b, size_t e)
{
    _Atomic unsigned *n = arg;
    atomic_fetch_add(n, (unsigned)(e - b));
}

static void quick_job(void *arg, unsigned i, tt_exec *child)
{
    quick_run *q = arg;
    int live = th_live_enter(&q->live);
    if (live > (int)q->width)
        atomic_fetch_add(&q->bad, 1);
    atomic_fetch_add(&q->seen[i], 1);
    /* A job's child has budget 1 and belongs to the job's thread. */
    if (!q->any_budget && tt_exec_budget(child) != 1)
        atomic_fetch_add(&q->bad, 1);
    if (q->nested) {
        /* Nested entries on the child run (inline, on this thread) and
         * find the member the child names. */
        _Atomic unsigned n = 0;
        tt_exec sub;
        TT_CHECK(tt_fork(tt_exec_reborrow(child, &sub), 3, nested_job, &n) == TT_OK, "fork");
        TT_CHECK(atomic_load(&n) == 0x111, "nested jobs %x", atomic_load(&n));
        atomic_store(&n, 0);
        TT_CHECK(tt_for_ranges(tt_exec_reborrow(child, &sub), 1000, 1, nested_range, &n) ==
                     TT_OK,
                 "ranges");
        TT_CHECK(atomic_load(&n) == 1000, "nested range %u", atomic_load(&n));
        unsigned member = 99;
        TT_CHECK(tt_pool_is_member(q->pool, &member) && member < q->width,
                 "job %u: member %u", i, member);
    }
#ifdef _OPENMP
    if (q->omp_inside) {
        unsigned got = 0;
#pragma omp parallel num_threads(4) shared(got)
        {
#pragma omp master
            got = (unsigned)omp_get_num_threads();
        }
        if (got != 1)
            atomic_fetch_add(&q->omp_wide, 1);
    }
#endif
    th_spin_us(q->spin_us);
    if ((int)i == q->fail_job)
        TT_CHECK(tt_fork_fail(child, q->fail_code) == TT_OK, "tt_fork_fail");
    th_live_leave(&q->live);
}

static tt_pool *make_pool(unsigned width, bool isolate)
{
    tt_pool_attr *a;
    ck_assert_int_eq(tt_pool_attr_create(&a), TT_OK);
    ck_assert_int_eq(tt_pool_attr_set_threads(a, width), TT_OK);
    ck_assert_int_eq(tt_pool_attr_set_isolate_shares(a, isolate), TT_OK);
    tt_pool *p;
    ck_assert_int_eq(tt_pool_create(&p, a), TT_OK);
    tt_pool_attr_destroy(a);
    return p;
}

/* One root of `width` jobs on q's pool; returns tt_fork's code. */
static int one_fork(quick_run *q, unsigned budget, unsigned jobs)
{
    tt_exec ex;
    int rc = tt_exec_init(&ex, q->pool, budget);
    if (rc == TT_OK)
        rc = tt_fork(&ex, jobs, quick_job, q);
    return rc;
}

START_TEST(test_quick_fork_runs_each_job_once)
{
    unsigned iters = th_iters(300);
    for (unsigned width = 2; width <= 4; width++) {
        for (int iso = 0; iso < 2; iso++) {
            quick_run q = {.width = width, .fail_job = -1, .nested = true, .spin_us = 20};
            th_live_init(&q.live);
            q.pool = make_pool(width, iso);
            for (unsigned r = 0; r < iters; r++) {
                ck_assert_int_eq(one_fork(&q, width, width), TT_OK);
                ck_assert_int_eq(tt__test_last_root_quick(), 1);
            }
            for (unsigned j = 0; j < width; j++)
                ck_assert_uint_eq(atomic_load(&q.seen[j]), iters);
            ck_assert_uint_eq(atomic_load(&q.bad), 0);
            ck_assert_int_le(th_live_max(&q.live), (int)width);
            th_assert_no_failures();
            tt_pool_destroy(q.pool);
        }
    }
}
END_TEST

/* What the quick path does not take, it leaves to the general one: more or
 * fewer jobs than the budget, a reborrowed token, a budget of 1. */
START_TEST(test_quick_fork_leaves_other_shapes)
{
    quick_run q = {.width = 3, .fail_job = -1, .spin_us = 20};
    th_live_init(&q.live);
    q.pool = make_pool(3, false);
    ck_assert_int_eq(one_fork(&q, 3, 3), TT_OK);
    ck_assert_int_eq(tt__test_last_root_quick(), 1);
    ck_assert_int_eq(one_fork(&q, 3, 5), TT_OK); /* more jobs than the budget */
    ck_assert_int_eq(tt__test_last_root_quick(), 0);
    q.any_budget = true;
    ck_assert_int_eq(one_fork(&q, 3, 2), TT_OK); /* fewer: shares of 2 and 1 */
    q.any_budget = false;
    ck_assert_int_eq(tt__test_last_root_quick(), 0);
    tt_exec ex, sub;
    ck_assert_int_eq(tt_exec_init(&ex, q.pool, 3), TT_OK);
    ck_assert_int_eq(tt_fork(tt_exec_reborrow(&ex, &sub), 3, quick_job, &q), TT_OK);
    ck_assert_int_eq(tt__test_last_root_quick(), 0);
    ck_assert_uint_eq(atomic_load(&q.seen[0]), 4);
    ck_assert_uint_eq(atomic_load(&q.seen[4]), 1);
    ck_assert_uint_eq(atomic_load(&q.bad), 0);
    tt_pool_destroy(q.pool);
}
END_TEST

/* tt_fork_fail from any job of a quick root is the fork's code; the other
 * jobs, started already, run to their end. */
START_TEST(test_quick_fork_fail)
{
    quick_run q = {.width = 2, .fail_code = 42, .spin_us = 20};
    th_live_init(&q.live);
    q.pool = make_pool(2, false);
    for (int victim = 0; victim < 2; victim++) {
        q.fail_job = victim;
        for (unsigned r = 0; r < th_iters(50); r++) {
            ck_assert_int_eq(one_fork(&q, 2, 2), 42);
            ck_assert_int_eq(tt__test_last_root_quick(), 1);
        }
    }
    ck_assert_uint_eq(atomic_load(&q.seen[0]), atomic_load(&q.seen[1]));
    tt_pool_destroy(q.pool);
}
END_TEST

/* A team that came out short: both jobs on the one thread the region got,
 * one after the other; after a failure the next job does not start. */
START_TEST(test_quick_fork_short_team)
{
    quick_run q = {.width = 2, .fail_job = -1, .spin_us = 20};
    th_live_init(&q.live);
    q.pool = make_pool(2, true);
    tt__test_region_cap(1);
    for (unsigned r = 0; r < 20; r++)
        ck_assert_int_eq(one_fork(&q, 2, 2), TT_OK);
    ck_assert_uint_eq(atomic_load(&q.seen[0]), 20);
    ck_assert_uint_eq(atomic_load(&q.seen[1]), 20);
    ck_assert_int_eq(th_live_max(&q.live), 1);
    q.fail_job = 0;
    q.fail_code = 7;
    ck_assert_int_eq(one_fork(&q, 2, 2), 7);
    ck_assert_int_eq(tt__test_last_root_quick(), 1);
    ck_assert_uint_eq(atomic_load(&q.seen[0]), 21);
    ck_assert_uint_eq(atomic_load(&q.seen[1]), 20); /* never started */
    tt__test_region_cap(0);
    tt_pool_destroy(q.pool);
}
END_TEST

/* Several threads make quick roots on one pool at once: the width caps
 * them all together (the slots), and every job of every root runs. */
typedef struct many {
    quick_run *q;
    unsigned roots;
    _Atomic unsigned quick;
} many;

static void *many_main(void *arg)
{
    many *m = arg;
    for (unsigned r = 0; r < m->roots; r++) {
        TT_CHECK(one_fork(m->q, m->q->width, m->q->width) == TT_OK, "fork");
        atomic_fetch_add(&m->quick, (unsigned)tt__test_last_root_quick());
    }
    return NULL;
}

START_TEST(test_quick_roots_from_threads_share_the_width)
{
    quick_run q = {.width = 2, .fail_job = -1, .spin_us = 20};
    th_live_init(&q.live);
    q.pool = make_pool(2, false);
    many m = {.q = &q, .roots = th_iters(200)};
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, many_main, &m), 0);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    th_assert_no_failures();
    ck_assert_uint_eq(atomic_load(&q.seen[0]), 3 * m.roots);
    ck_assert_uint_eq(atomic_load(&q.seen[1]), 3 * m.roots);
    ck_assert_uint_eq(atomic_load(&q.bad), 0);
    ck_assert_int_le(th_live_max(&q.live), 2);
    /* Most roots found the slots free; the others waited on the general
     * path, first come first served. */
    ck_assert_uint_gt(atomic_load(&m.quick), 0);
    tt_pool_destroy(q.pool);
}
END_TEST

/* An `omp parallel` in a share of an OpenMP-free pool gets one thread,
 * whatever the application allowed for nesting (the region's threads
 * start confined: backend region_line). */
START_TEST(test_quick_share_omp_parallel_one_thread)
{
#ifdef _OPENMP
    int mal = omp_get_max_active_levels();
    omp_set_max_active_levels(4);
    quick_run q = {.width = 2, .fail_job = -1, .omp_inside = true, .spin_us = 20};
    th_live_init(&q.live);
    q.pool = make_pool(2, false);
    for (unsigned r = 0; r < th_iters(50); r++) {
        ck_assert_int_eq(one_fork(&q, 2, 2), TT_OK);
        ck_assert_int_eq(tt__test_last_root_quick(), 1);
    }
    ck_assert_uint_eq(atomic_load(&q.omp_wide), 0);
    /* The caller's own setting is back. */
    ck_assert_int_eq(omp_get_max_active_levels(), 4);
    tt_pool_destroy(q.pool);
    omp_set_max_active_levels(mal);
#endif
}
END_TEST

typedef struct cover {
    _Atomic unsigned char hits[4096];
    th_live live;
    unsigned width;
    _Atomic unsigned bad;
} cover;

static void cover_range(void *arg, size_t b, size_t e)
{
    cover *c = arg;
    if (th_live_enter(&c->live) > (int)c->width)
        atomic_fetch_add(&c->bad, 1);
    for (size_t i = b; i < e; i++)
        atomic_fetch_add(&c->hits[i], 1);
    th_live_leave(&c->live);
}

/* tt_for_ranges' plain split: every index once, at most the budget at
 * once, for lengths and grains that give 2 to the width's ranges. */
START_TEST(test_quick_ranges_cover_once)
{
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    for (unsigned width = 2; width <= 4; width++) {
        tt_pool *p = make_pool(width, width % 2);
        for (unsigned r = 0; r < th_iters(100); r++) {
            cover *c = calloc(1, sizeof *c);
            ck_assert_ptr_nonnull(c);
            th_live_init(&c->live);
            c->width = width;
            size_t len = 2 + th_rng_below(&seed, 4000);
            size_t grain = 1 + th_rng_below(&seed, (unsigned)len / 2);
            tt_exec ex;
            ck_assert_int_eq(tt_exec_init(&ex, p, width), TT_OK);
            ck_assert_int_eq(tt_for_ranges(&ex, len, grain, cover_range, c), TT_OK);
            ck_assert_int_eq(tt__test_last_root_quick(), 1);
            for (size_t i = 0; i < len; i++)
                ck_assert_uint_eq(c->hits[i], 1);
            ck_assert_uint_eq(atomic_load(&c->bad), 0);
            free(c);
        }
        tt_pool_destroy(p);
    }
}
END_TEST

/* The end order of a main-thread root follows the cost of a wake call
 * (lib/wait.c, tt__wake_dear): the caller-first step where a wake is dear,
 * the barrier alone where it is cheap. In a throttled process (more
 * threads than CPUs) the caller's join where a wake is dear; where it is
 * cheap, the join only after a root long enough for a wake-up chain
 * (TT__CHAIN_NS), for TT__JOIN_HOLD_NS. */
START_TEST(test_root_end_order_follows_wake_cost)
{
    if (th_affinity_cpus() < 2 || th_test_quick())
        return; /* a pool of 2 on 1 CPU: every order is the barrier's;
                 * valgrind: every root is long */
    tt__test_runnable_hook(true, 1, 2);
    uint32_t threads = tt__test_threads_hook(2);
    uint64_t wake = tt__test_wake_ns_hook(10000);
    quick_run q = {.width = 2, .fail_job = -1};
    th_live_init(&q.live);
    q.pool = make_pool(2, false);
    bool passive = tt_pool_spin_polls(q.pool) == 0;
    bool libomp = dlsym(RTLD_DEFAULT, "__kmpc_fork_call") != NULL; /* no wake call */
    ck_assert_int_eq(one_fork(&q, 2, 2), TT_OK);
    ck_assert_int_eq(one_fork(&q, 2, 2), TT_OK);
    ck_assert_int_eq(tt__test_last_region_end(), passive || libomp ? 0 : 2);
    tt__test_wake_ns_hook(50);
    ck_assert_int_eq(one_fork(&q, 2, 2), TT_OK);
    ck_assert_int_eq(tt__test_last_region_end(), 0);
    /* Throttled, a wake dear: the join, then the caller-first step. */
    tt__test_threads_hook(1000);
    tt__test_wake_ns_hook(10000);
    ck_assert_int_eq(one_fork(&q, 2, 2), TT_OK);
    ck_assert_int_eq(tt__test_last_region_end(), passive ? 0 : 1);
    /* A cheap wake: the barrier alone while roots are short (a busy
     * machine may make one long: then the join follows, as below). */
    tt__test_wake_ns_hook(50);
    int short_end = -1;
    for (int r = 0; r < 20 && short_end != 0; r++) {
        ck_assert_int_eq(one_fork(&q, 2, 2), TT_OK);
        short_end = tt__test_last_region_end();
        ck_assert_msg(short_end == 0 || short_end == 3, "order %d", short_end);
    }
    /* Roots of 200 us are watched: after TT__CHAIN_ROOTS of them in a row
     * the roots keep the join. */
    q.spin_us = 200;
    for (int r = 0; r < 3; r++)
        ck_assert_int_eq(one_fork(&q, 2, 2), TT_OK);
    q.spin_us = 0;
    ck_assert_int_eq(one_fork(&q, 2, 2), TT_OK);
    ck_assert_int_eq(tt__test_last_region_end(), passive ? 0 : 3);
    ck_assert_uint_eq(atomic_load(&q.seen[1]), atomic_load(&q.seen[0]));
    tt_pool_destroy(q.pool);
    tt__test_wake_ns_hook(wake);
    tt__test_threads_hook(threads);
    tt__test_runnable_hook(false, 0, 0);
}
END_TEST

#endif /* TT_PARALLEL_ENABLED */

static Suite *quick_suite(void)
{
    Suite *s = suite_create("quick_root");
    TCase *tc = th_tcase(s, "core", 120);
#if TT_PARALLEL_ENABLED
    tcase_add_test(tc, test_quick_fork_runs_each_job_once);
    tcase_add_test(tc, test_quick_fork_leaves_other_shapes);
    tcase_add_test(tc, test_quick_fork_fail);
    tcase_add_test(tc, test_quick_fork_short_team);
    tcase_add_test(tc, test_quick_roots_from_threads_share_the_width);
    tcase_add_test(tc, test_quick_share_omp_parallel_one_thread);
    tcase_add_test(tc, test_quick_ranges_cover_once);
    tcase_add_test(tc, test_root_end_order_follows_wake_cost);
#else
    (void)tc;
#endif
    return s;
}

int main(void) { return th_run_suite(quick_suite()); }
