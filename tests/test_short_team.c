/*
 * test_short_team.c -- a width OpenMP can never give is refused when the
 * pool is built; a team that comes out short at an entry never fails a
 * fork or ranges entry and never consumes a token it refuses.
 *
 * A region's team can come out short after the pool was built (dynamic
 * adjustment, threads exhausted); the suite makes it so with a test hook
 * of the OpenMP backend (tt__test_region_cap: the most threads a root's
 * region asks for). On 784228d a short region fell back to the private
 * crew, and where that failed the entry returned TT_ESHORTTEAM (on no
 * Errors line), ran no job and consumed the token.
 */
#include "tt_test.h"
#include "test_hooks.h"

#ifdef _OPENMP
#include <omp.h>
#endif

#if TT_PARALLEL_ENABLED

typedef struct counted {
    th_live live;
    _Atomic unsigned jobs;
    _Atomic unsigned char seen[1000];
} counted;

static void count_job(void *arg, unsigned i, tt_exec *child)
{
    counted *c = arg;
    th_live_enter(&c->live);
    atomic_fetch_add(&c->seen[i], 1);
    atomic_fetch_add(&c->jobs, 1);
    /* A nested entry of the job must run too (on this thread). */
    tt_exec sub;
    int rc = tt_fork(tt_exec_reborrow(child, &sub), 1, NULL, NULL);
    TT_CHECK(rc == TT_EINVAL, "NULL job: %s", tt_status_name(rc));
    th_spin_us(50);
    th_live_leave(&c->live);
}

static void count_body(void *arg, size_t b, size_t e)
{
    counted *c = arg;
    th_live_enter(&c->live);
    for (size_t i = b; i < e; i++)
        atomic_fetch_add(&c->seen[i], 1);
    th_spin_us(50);
    th_live_leave(&c->live);
}

static void bcast_fn(void *arg, unsigned i)
{
    (void)i;
    atomic_fetch_add(&((counted *)arg)->jobs, 1);
}

static void scope_fn(void *arg, tt_scope *s)
{
    (void)s;
    atomic_fetch_add(&((counted *)arg)->jobs, 1);
}
#endif

START_TEST(test_short_team_fork_and_ranges_run_everything)
{
#if TT_PARALLEL_ENABLED
    tt_pool *p = th_make_pool(4);
    for (unsigned cap = 1; cap <= 3; cap++) {
        tt__test_region_cap(cap);
        counted *c = calloc(1, sizeof *c);
        th_live_init(&c->live);
        tt_exec ex;
        ck_assert_int_eq(tt_exec_init(&ex, p, 4), TT_OK);
        ck_assert_int_eq(tt_fork(&ex, 10, count_job, c), TT_OK);
        ck_assert_uint_eq(atomic_load(&c->jobs), 10);
        for (int i = 0; i < 10; i++)
            ck_assert_uint_eq(atomic_load(&c->seen[i]), 1);
        ck_assert_int_le(th_live_max(&c->live), (int)cap);
        ck_assert_int_eq(tt_fork(&ex, 1, count_job, c), TT_ECONSUMED);

        memset((void *)c->seen, 0, sizeof c->seen);
        th_live_init(&c->live);
        ck_assert_int_eq(tt_exec_init(&ex, p, 4), TT_OK);
        ck_assert_int_eq(tt_for_ranges(&ex, 1000, 1, count_body, c), TT_OK);
        for (int i = 0; i < 1000; i++)
            ck_assert_uint_eq(atomic_load(&c->seen[i]), 1);
        ck_assert_int_le(th_live_max(&c->live), (int)cap);
        free(c);
    }
    tt__test_region_cap(0);
    ck_assert_int_eq(tt_pool_destroy(p), TT_OK);
    th_assert_no_failures();
#endif
}
END_TEST

START_TEST(test_short_team_refusals_consume_nothing)
{
#if TT_PARALLEL_ENABLED
    tt_pool *p = th_make_pool(2);
    counted c;
    memset(&c, 0, sizeof c);
    tt__test_region_cap(1);
    tt_exec ex;
    ck_assert_int_eq(tt_exec_init(&ex, p, 2), TT_OK);
    ck_assert_int_eq(tt_broadcast(&ex, bcast_fn, &c), TT_REFUSED_UNAVAILABLE);
    ck_assert_int_eq(tt_team_scope(&ex, scope_fn, &c), TT_REFUSED_UNAVAILABLE);
    ck_assert_uint_eq(atomic_load(&c.jobs), 0);
    /* Nothing consumed: the same token works once the team is whole. */
    tt__test_region_cap(0);
    ck_assert_int_eq(tt_broadcast(&ex, bcast_fn, &c), TT_OK);
    ck_assert_uint_eq(atomic_load(&c.jobs), 2);
    ck_assert_int_eq(tt_broadcast(&ex, bcast_fn, &c), TT_ECONSUMED);
    ck_assert_int_eq(tt_exec_init(&ex, p, 2), TT_OK);
    tt__test_region_cap(1);
    ck_assert_int_eq(tt_team_scope(&ex, scope_fn, &c), TT_REFUSED_UNAVAILABLE);
    tt__test_region_cap(0);
    ck_assert_int_eq(tt_team_scope(&ex, scope_fn, &c), TT_OK);
    ck_assert_uint_eq(atomic_load(&c.jobs), 3);
    ck_assert_int_eq(tt_pool_destroy(p), TT_OK);
#endif
}
END_TEST

/* OMP_MAX_ACTIVE_LEVELS=0 serialises every region: a pool wider than 1 can
 * never get its team and is refused when built (the building thread's
 * max-active-levels-var is set here as the variable would set it). */
START_TEST(test_width_never_given_is_refused)
{
#if TT_PARALLEL_ENABLED && defined(_OPENMP)
    int mal = omp_get_max_active_levels(), nt = omp_get_max_threads();
    omp_set_num_threads(2);
    omp_set_max_active_levels(0);
    tt_pool_attr *a;
    ck_assert_int_eq(tt_pool_attr_create(&a), TT_OK);
    ck_assert_int_eq(tt_pool_attr_set_threads(a, 2), TT_OK);
    tt_pool *p = NULL;
    ck_assert_int_eq(tt_pool_create(&p, a), TT_ERANGE);
    ck_assert_ptr_null(p);
    /* The default width is then 1: that pool works. */
    ck_assert_int_eq(tt_pool_create(&p, NULL), TT_OK);
    ck_assert_uint_eq(tt_pool_width(p), 1);
    ck_assert_int_eq(tt_pool_destroy(p), TT_OK);
    omp_set_max_active_levels(mal);
    omp_set_num_threads(nt);
    ck_assert_int_eq(tt_pool_create(&p, a), TT_OK);
    ck_assert_int_eq(tt_pool_destroy(p), TT_OK);
    tt_pool_attr_destroy(a);
#endif
}
END_TEST

static Suite *short_suite(void)
{
    Suite *s = suite_create("short_team");
    TCase *tc = th_tcase(s, "core", 120);
    tcase_add_test(tc, test_short_team_fork_and_ranges_run_everything);
    tcase_add_test(tc, test_short_team_refusals_consume_nothing);
    tcase_add_test(tc, test_width_never_given_is_refused);
    return s;
}

int main(void) { return th_run_suite(short_suite()); }
