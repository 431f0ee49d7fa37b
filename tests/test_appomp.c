/*
 * test_appomp.c -- the application's OpenMP is left alone: the main
 * thread's ICVs (omp_get_max_threads, omp_get_dynamic,
 * omp_get_max_active_levels, omp_get_nested, omp_get_thread_limit) are the
 * same after serial and pooled work (fork, for_ranges, broadcast, external
 * on pools of width 2 and 4), and the main thread's own first `omp
 * parallel` forms omp_get_max_threads() threads; the application's regions
 * run while pools exist, and threads of the application's teams call into
 * a pool as plain threads.
 *
 * The first test must run first in the process (Check runs tests in the
 * order they were added; with CK_FORK=no they share the process): the main
 * thread opens no region before it.
 *
 * Without parallel there is no OpenMP to leave alone: the program then
 * checks that the same work runs inline on the caller.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "tt_test.h"

#if TT_PARALLEL_ENABLED
#ifndef _OPENMP
#error "test_appomp needs the OpenMP compiler flags in a parallel build"
#endif
#include <omp.h>
#endif

typedef struct work_ctx {
    tt_pool *pool;
    _Atomic long sum;
    _Atomic int calls;
    _Atomic int ext_width_bad;
} work_ctx;

static void w_job(void *arg, unsigned i, tt_exec *child)
{
    work_ctx *w = arg;
    atomic_fetch_add(&w->calls, 1);
    atomic_fetch_add(&w->sum, (long)i);
    (void)child;
}
static void w_body(void *arg, size_t b, size_t e)
{
    work_ctx *w = arg;
    atomic_fetch_add(&w->calls, 1);
    atomic_fetch_add(&w->sum, (long)(e - b));
}
static void w_bcast(void *arg, unsigned i)
{
    work_ctx *w = arg;
    atomic_fetch_add(&w->calls, 1);
    atomic_fetch_add(&w->sum, (long)i);
}
#if TT_PARALLEL_ENABLED
/* Every OpenMP region of this file is in a function named ttomp_*: under
 * TSan, accesses inside regions run by libgomp's reused threads look
 * unsynchronised (libgomp's barriers are invisible to TSan), and
 * tests/tsan.supp names that prefix. */

/* The size of an `omp parallel num_threads(width)` team. */
static int ttomp_team_of(unsigned width)
{
    int n = 0;
#pragma omp parallel num_threads(width)
    {
#pragma omp atomic
        n++;
    }
    return n;
}

/* A plain `omp parallel`: the team size and the level inside. */
static int ttomp_plain_team(int *level)
{
    int got = 0, lv = -1;
#pragma omp parallel
    {
#pragma omp single
        {
            got = omp_get_num_threads();
            lv = omp_get_level();
        }
    }
    *level = lv;
    return got;
}

/* A plain region with a worksharing loop: team size and the sum. */
static int ttomp_sum_loop(long *out)
{
    int team = 0;
    long sum = 0;
#pragma omp parallel reduction(+ : sum)
    {
#pragma omp single
        team = omp_get_num_threads();
#pragma omp for
        for (int i = 0; i < 1000; i++)
            sum += i;
    }
    *out = sum;
    return team;
}
#endif

static void w_ext(void *arg, unsigned width)
{
    work_ctx *w = arg;
    atomic_fetch_add(&w->calls, 1);
#if TT_PARALLEL_ENABLED
    int n = ttomp_team_of(width);
    if (n != (int)width)
        atomic_fetch_add(&w->ext_width_bad, 1);
#else
    if (width != 1)
        atomic_fetch_add(&w->ext_width_bad, 1);
#endif
}

/* fork, for_ranges (static and dynamic), broadcast and external on tokens
 * of `budget` (a serial
 * token when pool is NULL). Test thread only (ck_assert). */
static void do_work(tt_pool *pool, unsigned budget)
{
    work_ctx w;
    memset(&w, 0, sizeof w);
    w.pool = pool;
    tt_exec ex;
#define MINT()                                                                 \
    do {                                                                       \
        if (pool)                                                              \
            ck_assert_int_eq(tt_exec_init(&ex, pool, budget), TT_OK);          \
        else                                                                   \
            tt_exec_init_serial(&ex);                                          \
    } while (0)
    MINT();
    ck_assert_int_eq(tt_fork(&ex, 6, w_job, &w), TT_OK);
    MINT();
    ck_assert_int_eq(tt_for_ranges(&ex, 1000, 10, w_body, &w), TT_OK);
    MINT();
    ck_assert_int_eq(tt_for_ranges_dynamic(&ex, 500, 7, w_body, &w), TT_OK);
    MINT();
    unsigned bb = tt_exec_budget(&ex);
    ck_assert_int_eq(tt_broadcast(&ex, w_bcast, &w), TT_OK);
    MINT();
    ck_assert_int_eq(tt_external(&ex, w_ext, &w), TT_OK);
#undef MINT
    ck_assert_int_eq(atomic_load(&w.ext_width_bad), 0);
    ck_assert_int_eq(atomic_load(&w.sum), 15 + 1000 + 500 + (long)(bb * (bb - 1) / 2));
}

#if TT_PARALLEL_ENABLED
typedef struct app_icvs {
    int max_threads, dynamic, max_active_levels, nested, thread_limit, level, in_parallel;
} app_icvs;

static void read_app_icvs(app_icvs *v)
{
    v->max_threads = omp_get_max_threads();
    v->dynamic = omp_get_dynamic();
    v->max_active_levels = omp_get_max_active_levels();
    v->nested = omp_get_nested();
    v->thread_limit = omp_get_thread_limit();
    v->level = omp_get_level();
    v->in_parallel = omp_in_parallel();
}

#define ck_icvs_eq(a, b, when)                                                 \
    do {                                                                       \
        ck_assert_msg((a).max_threads == (b).max_threads,                      \
                      "%s: omp_get_max_threads %d -> %d", when, (a).max_threads, (b).max_threads); \
        ck_assert_msg((a).dynamic == (b).dynamic, "%s: omp_get_dynamic %d -> %d", when,         \
                      (a).dynamic, (b).dynamic);                               \
        ck_assert_msg((a).max_active_levels == (b).max_active_levels,          \
                      "%s: omp_get_max_active_levels %d -> %d", when, (a).max_active_levels,    \
                      (b).max_active_levels);                                  \
        ck_assert_msg((a).nested == (b).nested, "%s: omp_get_nested %d -> %d", when, (a).nested, \
                      (b).nested);                                             \
        ck_assert_msg((a).thread_limit == (b).thread_limit,                    \
                      "%s: omp_get_thread_limit %d -> %d", when, (a).thread_limit,            \
                      (b).thread_limit);                                       \
        ck_assert_msg((a).level == (b).level && (a).in_parallel == (b).in_parallel,           \
                      "%s: level/in_parallel changed", when);                  \
    } while (0)
#endif

/* Must be the first test of the program (see the file comment). */
START_TEST(test_app_icvs_untouched_and_first_region)
{
#if TT_PARALLEL_ENABLED
    app_icvs before, after;
    read_app_icvs(&before);
    ck_assert_int_eq(before.level, 0);

    /* serial work */
    do_work(NULL, 1);
    read_app_icvs(&after);
    ck_icvs_eq(before, after, "after serial work");

    /* pooled work on pools of width 2 and 4 */
    static const unsigned widths[] = {2, 4};
    for (size_t wi = 0; wi < TT_ARRAY_LEN(widths); wi++) {
        tt_pool *pool = th_make_pool(widths[wi]);
        for (unsigned b = 1; b <= widths[wi]; b++)
            do_work(pool, b);
        read_app_icvs(&after);
        ck_icvs_eq(before, after, "while a pool lives");
        th_free_pool(pool);
        read_app_icvs(&after);
        ck_icvs_eq(before, after, "after a pool was destroyed");
    }
    /* also a pool built with default settings */
    tt_pool *dflt = NULL;
    ck_assert_int_eq(tt_pool_create(&dflt, NULL), TT_OK);
    do_work(dflt, tt_pool_width(dflt));
    ck_assert_int_eq(tt_pool_destroy(dflt), TT_OK);
    read_app_icvs(&after);
    ck_icvs_eq(before, after, "after pooled work");

    /* the main thread's own first region forms max_threads threads */
    int want = omp_get_max_threads();
    int levels = -1;
    int got = ttomp_plain_team(&levels);
    ck_assert_msg(got == want, "the application's first omp parallel formed %d threads, "
                  "omp_get_max_threads() is %d", got, want);
    ck_assert_int_eq(levels, 1);
    /* and one with an explicit width */
    ck_assert_int_eq(ttomp_team_of(2), 2);
#else
    do_work(NULL, 1);
    tt_pool *pool = th_make_pool(4);
    ck_assert_uint_eq(tt_pool_width(pool), 1);
    do_work(pool, 4);
    th_free_pool(pool);
#endif
}
END_TEST

#if TT_PARALLEL_ENABLED
/* ICVs read on the main thread while another plain thread's full-width
 * tt_external runs its callback, whose thread's nthreads-var the library set
 * to the width (checked in the callback): the main thread's stay its own. */
typedef struct ext_hold {
    th_flag in, out;
} ext_hold;

static void ext_wait(void *arg, unsigned width)
{
    ext_hold *h = arg;
    TT_CHECK(omp_get_max_threads() == (int)width && !omp_get_dynamic(),
             "the callback's thread has max_threads %d, dynamic %d; width %u",
             omp_get_max_threads(), omp_get_dynamic(), width);
    th_flag_set(&h->in, 1);
    TT_CHECK(th_flag_wait_ge(&h->out, 1, 20), "external callback never released");
}

typedef struct ext_thread {
    tt_pool *pool;
    ext_hold h;
    int rc;
} ext_thread;

static void *ext_thread_main(void *arg)
{
    ext_thread *e = arg;
    tt_exec ex;
    e->rc = tt_exec_init(&ex, e->pool, tt_pool_width(e->pool));
    if (e->rc == TT_OK)
        e->rc = tt_external(&ex, ext_wait, &e->h);
    return NULL;
}
#endif

START_TEST(test_app_icvs_during_external)
{
#if TT_PARALLEL_ENABLED
    app_icvs before, during, after;
    read_app_icvs(&before);
    tt_pool *pool = th_make_pool(4);
    ext_thread e;
    memset(&e, 0, sizeof e);
    e.pool = pool;
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, ext_thread_main, &e), 0);
    ck_assert(th_flag_wait_ge(&e.h.in, 1, 20));
    read_app_icvs(&during);
    th_flag_set(&e.h.out, 1);
    ck_assert(th_join_timeout(t, 20));
    ck_assert_int_eq(e.rc, TT_OK);
    read_app_icvs(&after);
    ck_icvs_eq(before, during, "while a tt_external callback runs on a member");
    ck_icvs_eq(before, after, "after tt_external");
    th_free_pool(pool);
    th_assert_no_failures();
#endif
}
END_TEST

/* The application's regions while a pool exists; the application's threads
 * call into the pool as plain threads. */
typedef struct app_ctx {
    tt_pool *pool;
    _Atomic int jobs, jobs_on_members, jobs_on_app_thread, bad_rc, ext_bad;
} app_ctx;

#if TT_PARALLEL_ENABLED
typedef struct app_job_arg {
    app_ctx *c;
    pthread_t app_thread;
} app_job_arg;

static void app_job(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    (void)child;
    app_job_arg *a = arg;
    atomic_fetch_add(&a->c->jobs, 1);
    if (tt_pool_is_member(a->c->pool, NULL))
        atomic_fetch_add(&a->c->jobs_on_members, 1);
    if (pthread_equal(pthread_self(), a->app_thread))
        atomic_fetch_add(&a->c->jobs_on_app_thread, 1);
}

static void app_ext(void *arg, unsigned width)
{
    app_ctx *c = arg;
    if (ttomp_team_of(width) != (int)width)
        atomic_fetch_add(&c->ext_bad, 1);
}

/* Each thread of an application team of 2 calls into the pool as a plain
 * thread; returns the number of threads that saw something wrong. */
static int ttomp_app_calls(tt_pool *pool, app_ctx *c)
{
    int bad_team = 0;
#pragma omp parallel num_threads(2) reduction(+ : bad_team)
    {
        int me = omp_get_thread_num();
        if (tt_pool_is_member(pool, NULL))
            bad_team++;
        app_job_arg a = {c, pthread_self()};
        tt_exec ex;
        if (tt_exec_init(&ex, pool, 2) != TT_OK || tt_fork(&ex, 2, app_job, &a) != TT_OK)
            atomic_fetch_add(&c->bad_rc, 1);
        if (tt_exec_init(&ex, pool, 2) != TT_OK || tt_external(&ex, app_ext, c) != TT_OK)
            atomic_fetch_add(&c->bad_rc, 1);
        /* the thread is still in its own team afterwards */
        if (omp_get_thread_num() != me || omp_get_num_threads() != 2 || omp_get_level() != 1)
            bad_team++;
    }
    return bad_team;
}
#endif

START_TEST(test_app_regions_with_pool)
{
#if TT_PARALLEL_ENABLED
    app_icvs before, after;
    read_app_icvs(&before);
    tt_pool *pool = th_make_pool(4);
    app_ctx c;
    memset(&c, 0, sizeof c);
    c.pool = pool;
    int want = omp_get_max_threads();
    unsigned rounds = th_iters(20);
    for (unsigned r = 0; r < rounds; r++) {
        /* an application region while the pool lives: full width, and a
         * worksharing loop that sums right */
        long sum = 0;
        int team = ttomp_sum_loop(&sum);
        ck_assert_int_eq(team, want);
        ck_assert_int_eq(sum, 999 * 1000 / 2);

        /* each thread of the application's team calls into the pool */
        ck_assert_int_eq(ttomp_app_calls(pool, &c), 0);
    }
    ck_assert_int_eq(atomic_load(&c.bad_rc), 0);
    ck_assert_int_eq(atomic_load(&c.ext_bad), 0);
    ck_assert_int_eq(atomic_load(&c.jobs), (int)(rounds * 2 * 2));
    /* a plain thread's dispatched jobs run on members, never on itself */
    ck_assert_int_eq(atomic_load(&c.jobs_on_members), atomic_load(&c.jobs));
    ck_assert_int_eq(atomic_load(&c.jobs_on_app_thread), 0);
    th_free_pool(pool);
    read_app_icvs(&after);
    ck_icvs_eq(before, after, "after application regions with a pool");
#endif
}
END_TEST

START_TEST(test_app_changed_icvs_do_not_reach_pool)
{
#if TT_PARALLEL_ENABLED
    /* the application narrows its own settings; a pool built and used now
     * still gets its full width, and the application's settings stay */
    int mt = omp_get_max_threads(), dyn = omp_get_dynamic(), mal = omp_get_max_active_levels();
    omp_set_num_threads(1);
    omp_set_dynamic(1);
    omp_set_max_active_levels(1);
    tt_pool *pool = th_make_pool(4);
    ck_assert_uint_eq(tt_pool_width(pool), 4);
    do_work(pool, 4);
    ck_assert_int_eq(omp_get_max_threads(), 1);
    ck_assert_int_eq(omp_get_dynamic(), 1);
    ck_assert_int_eq(omp_get_max_active_levels(), 1);
    th_free_pool(pool);
    omp_set_num_threads(mt);
    omp_set_dynamic(dyn);
    omp_set_max_active_levels(mal);
#endif
}
END_TEST

static Suite *appomp_suite(void)
{
    Suite *s = suite_create("appomp");
    TCase *tc = th_tcase(s, "first", 60);
    tcase_add_test(tc, test_app_icvs_untouched_and_first_region);
    tc = th_tcase(s, "alongside", 120);
    tcase_add_test(tc, test_app_icvs_during_external);
    tcase_add_test(tc, test_app_regions_with_pool);
    tcase_add_test(tc, test_app_changed_icvs_do_not_reach_pool);
    return s;
}

int main(void) { return th_run_suite(appomp_suite()); }
