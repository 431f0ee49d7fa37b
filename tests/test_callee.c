/*
 * test_callee.c -- a tt_external callee's threads are recognised without
 * user-settable state.
 *
 * A tt_external that holds a pool's slots waits for its callee; a thread of
 * the callee's own regions that enters the same pool must not wait for those
 * slots (it would wait for itself), and no other thread may skip the wait
 * (the width caps every root together). On 784228d the callee was
 * recognised by a mark in its default allocator, an ICV anyone may set:
 *
 *  - an application that set its own default allocator got no mark, and
 *    then every thread inside a parallel region was taken for a callee and
 *    skipped the slot wait: 4 threads ran pool work on a width-2 pool
 *    (test_app_default_allocator_keeps_the_cap);
 *  - a callee that set its own default allocator lost the mark, and its
 *    threads calling back into the pool waited for the slots the external
 *    held: a hang (test_callee_sets_default_allocator).
 *
 * Pool work is counted in user code, the callee's threads included. The
 * OpenMP regions of this file are in functions named ttomp_* (TSan cannot
 * see libgomp's hand-offs; tests/tsan.supp names the prefix).
 */
#include "tt_test.h"

#ifdef _OPENMP
#include <dlfcn.h>
#include <omp.h>

typedef struct shared_count {
    tt_pool *pool;
    th_live live;
    _Atomic unsigned jobs;
    _Atomic int stop;
    unsigned width;
    omp_allocator_handle_t app; /* the application's default allocator */
} shared_count;

static void count_job(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    (void)child;
    shared_count *c = arg;
    th_live_enter(&c->live);
    atomic_fetch_add(&c->jobs, 1);
    th_spin_us(200);
    th_live_leave(&c->live);
}

/* The callee replaces its default allocator, then each of its threads
 * enters the pool (a root of the full width): the threads hold the
 * external's width already, so they must run (inline), never wait. */
static void ttomp_callee_own_allocator(void *arg, unsigned width)
{
    shared_count *c = arg;
    omp_allocator_handle_t mine = omp_init_allocator(omp_default_mem_space, 0, NULL);
    omp_allocator_handle_t before = omp_get_default_allocator();
    omp_set_default_allocator(mine);
#pragma omp parallel num_threads(width)
    {
        tt_exec ex;
        int rc = tt_exec_init(&ex, c->pool, c->width);
        if (rc == TT_OK)
            rc = tt_fork(&ex, 2, count_job, c);
        TT_CHECK(rc == TT_OK, "callee thread's fork: %s", tt_status_name(rc));
    }
    omp_set_default_allocator(before);
    omp_destroy_allocator(mine);
}

/* Under LLVM's libomp a callee is marked by the allocator mark alone (the
 * thread-limit tag is libgomp's: backend_omp.c, omp_callee_call), so a
 * callee that replaces its default allocator is not recognised there. */
static bool callee_tag_missing(void)
{
    if (!dlsym(RTLD_DEFAULT, "__kmpc_fork_call"))
        return false;
    printf("test_callee: skipped (LLVM libomp: no thread-limit tag, a callee that replaces "
           "its default allocator is not recognised)\n");
    return true;
}

/* GCC-compiled code on libomp (make check-libomp-app preloads libomp under
 * the GCC build's programs): this program names the allocator routines at
 * libgomp's symbol version OMP_5.0.1, which libomp 14 does not define, so
 * its own omp_init_allocator / omp_set_default_allocator / omp_alloc land
 * in libgomp while its regions and the library run on libomp. The
 * application's allocator is then not the one the library's runtime sees,
 * and what these tests check does not exist in the process. (A clang
 * program has no such split: tests/libomp_app.c.) */
static bool allocator_calls_split(const char *test)
{
    Dl_info a, l;
    if (!dladdr((void *)&omp_init_allocator, &a) || !dladdr((void *)&omp_get_level, &l) ||
        a.dli_fbase == l.dli_fbase)
        return false;
    printf("test_callee: %s skipped: this program's allocator calls land in %s, its other "
           "OpenMP calls in %s (GCC-compiled code on libomp, which lacks the OMP_5.0.1 "
           "symbols)\n",
           test, a.dli_fname ? a.dli_fname : "?", l.dli_fname ? l.dli_fname : "?");
    return true;
}

START_TEST(test_callee_sets_default_allocator)
{
    if (callee_tag_missing())
        return;
    omp_set_max_active_levels(4);
    unsigned w = 2;
    shared_count c = {.pool = th_make_pool(w), .width = w};
    th_live_init(&c.live);
    for (int r = 0; r < 20; r++) {
        tt_exec ex;
        ck_assert_int_eq(tt_exec_init(&ex, c.pool, w), TT_OK);
        ck_assert_int_eq(tt_external(&ex, ttomp_callee_own_allocator, &c), TT_OK);
    }
    ck_assert_uint_eq(atomic_load(&c.jobs), 20 * w * 2);
    ck_assert_int_le(th_live_max(&c.live), (int)w);
    th_free_pool(c.pool);
    th_assert_no_failures();
}
END_TEST

/* The same from a member's nested external (the callee's region nested in
 * a member). */
static void member_external_job(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    int rc = tt_external(child, ttomp_callee_own_allocator, arg);
    TT_CHECK(rc == TT_OK, "member's external: %s", tt_status_name(rc));
}

START_TEST(test_callee_sets_default_allocator_nested)
{
    if (callee_tag_missing())
        return;
    omp_set_max_active_levels(4);
    unsigned w = 4;
    shared_count c = {.pool = th_make_pool(w), .width = 2};
    th_live_init(&c.live);
    for (int r = 0; r < 10; r++) {
        tt_exec ex;
        ck_assert_int_eq(tt_exec_init(&ex, c.pool, w), TT_OK);
        ck_assert_int_eq(tt_fork(&ex, 2, member_external_job, &c), TT_OK);
    }
    ck_assert_uint_gt(atomic_load(&c.jobs), 0);
    ck_assert_int_le(th_live_max(&c.live), (int)w);
    th_free_pool(c.pool);
    th_assert_no_failures();
}
END_TEST

/* A callee that keeps the pool's whole width busy for a while. */
static void ttomp_callee_busy(void *arg, unsigned width)
{
    shared_count *c = arg;
#pragma omp parallel num_threads(width)
    {
        th_live_enter(&c->live);
        th_spin_us(3000);
        th_live_leave(&c->live);
    }
}

static void *external_thread(void *arg)
{
    shared_count *c = arg;
    /* The application's default allocator is in force here too. */
    omp_set_default_allocator(c->app);
    while (!atomic_load(&c->stop)) {
        tt_exec ex;
        int rc = tt_exec_init(&ex, c->pool, c->width);
        if (rc == TT_OK)
            rc = tt_external(&ex, ttomp_callee_busy, c);
        TT_CHECK(rc == TT_OK, "external: %s", tt_status_name(rc));
    }
    return NULL;
}

START_TEST(test_app_default_allocator_keeps_the_cap)
{
    if (allocator_calls_split("test_app_default_allocator_keeps_the_cap"))
        return;
    /* The application's own default allocator, inherited by its regions. */
    omp_alloctrait_t tr[] = {{omp_atk_alignment, 64}};
    omp_allocator_handle_t app = omp_init_allocator(omp_default_mem_space, 1, tr);
    omp_allocator_handle_t before = omp_get_default_allocator();
    omp_set_default_allocator(app);
    unsigned w = 2;
    shared_count c = {.pool = th_make_pool(w), .width = w, .app = app};
    th_live_init(&c.live);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, external_thread, &c), 0);
    omp_set_dynamic(0);
    uint64_t end = th_now_ns() + 300000000ull;
#pragma omp parallel num_threads(2) shared(c, end)
    {
        /* Threads of the application's own region, not callees: they
         * wait for slots while the external holds them. */
        while (th_now_ns() < end) {
            tt_exec ex;
            int rc = tt_exec_init(&ex, c.pool, 1);
            if (rc == TT_OK)
                rc = tt_fork(&ex, 1, count_job, &c);
            TT_CHECK(rc == TT_OK, "application thread's fork: %s", tt_status_name(rc));
        }
    }
    atomic_store(&c.stop, 1);
    pthread_join(t, NULL);
    /* The allocator itself still works as the application set it. */
    void *p = omp_alloc(100, omp_null_allocator);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq((uintptr_t)p % 64, 0);
    omp_free(p, omp_null_allocator);
    omp_set_default_allocator(before);
    omp_destroy_allocator(app);
    ck_assert_uint_gt(atomic_load(&c.jobs), 0);
    ck_assert_msg(th_live_max(&c.live) <= (int)w, "%d threads ran pool work on a width-%u pool",
                  th_live_max(&c.live), w);
    th_free_pool(c.pool);
    th_assert_no_failures();
}
END_TEST

/* Inside the callee, the application's default allocator is in force as it
 * was (the library's mark forwards every allocation to it). */
typedef struct alloc_seen {
    _Atomic unsigned misaligned, calls;
} alloc_seen;

static void ttomp_callee_allocates(void *arg, unsigned width)
{
    alloc_seen *a = arg;
#pragma omp parallel num_threads(width)
    {
        for (int i = 0; i < 8; i++) {
            void *p = omp_alloc(24, omp_null_allocator);
            if (!p || (uintptr_t)p % 256 != 0)
                atomic_fetch_add(&a->misaligned, 1);
            omp_free(p, omp_null_allocator);
            atomic_fetch_add(&a->calls, 1);
        }
    }
}

START_TEST(test_callee_sees_app_allocator)
{
    if (allocator_calls_split("test_callee_sees_app_allocator"))
        return;
    omp_alloctrait_t tr[] = {{omp_atk_alignment, 256}};
    omp_allocator_handle_t app = omp_init_allocator(omp_default_mem_space, 1, tr);
    omp_allocator_handle_t before = omp_get_default_allocator();
    omp_set_default_allocator(app);
    tt_pool *p = th_make_pool(2);
    alloc_seen a = {0};
    tt_exec ex;
    ck_assert_int_eq(tt_exec_init(&ex, p, 2), TT_OK);
    ck_assert_int_eq(tt_external(&ex, ttomp_callee_allocates, &a), TT_OK);
    ck_assert_uint_eq(atomic_load(&a.calls), 16);
    ck_assert_uint_eq(atomic_load(&a.misaligned), 0);
    ck_assert(omp_get_default_allocator() == app);
    th_free_pool(p);
    omp_set_default_allocator(before);
    omp_destroy_allocator(app);
}
END_TEST

/* Three threads make full-width externals on two pools (two of them take
 * turns on one pool, the third runs beside them on the other), each
 * switching its default allocator between two from call to call (an entry
 * of the library's table of marks forwards to one allocator: a switch
 * takes another entry, a repeat the thread's last one). Each callee's
 * threads enter their pool: they must run, never wait for the slots their
 * own external holds (a wrong mark, or one two externals share, hangs
 * here, caught by the join's timeout), while the other thread's externals
 * on that pool wait for them (the width holds). */
typedef struct turns {
    shared_count c[2];
    omp_allocator_handle_t alloc[2];
    bool switch_alloc;
    _Atomic unsigned externals;
} turns;

typedef struct turns_arg {
    turns *t;
    int pool;
} turns_arg;

static void ttomp_callee_enters(void *arg, unsigned width)
{
    shared_count *c = arg;
#pragma omp parallel num_threads(width)
    {
        tt_exec ex;
        int rc = tt_exec_init(&ex, c->pool, 1);
        if (rc == TT_OK)
            rc = tt_fork(&ex, 1, count_job, c);
        TT_CHECK(rc == TT_OK, "callee thread's fork: %s", tt_status_name(rc));
    }
}

static void *turns_thread(void *arg)
{
    turns_arg *a = arg;
    turns *t = a->t;
    shared_count *c = &t->c[a->pool];
    omp_allocator_handle_t before = omp_get_default_allocator();
    for (int r = 0; r < 40; r++) {
        if (t->switch_alloc)
            omp_set_default_allocator(t->alloc[(r / 2) % 2]);
        tt_exec ex;
        int rc = tt_exec_init(&ex, c->pool, c->width);
        if (rc == TT_OK)
            rc = tt_external(&ex, ttomp_callee_enters, c);
        TT_CHECK(rc == TT_OK, "external: %s", tt_status_name(rc));
        if (rc == TT_OK)
            atomic_fetch_add(&t->externals, 1);
    }
    if (t->switch_alloc)
        omp_set_default_allocator(before);
    return NULL;
}

START_TEST(test_callees_of_threads_at_once)
{
    omp_set_max_active_levels(4);
    omp_set_dynamic(0);
    unsigned w = 2;
    turns t;
    memset(&t, 0, sizeof t);
    for (int p = 0; p < 2; p++) {
        t.c[p].pool = th_make_pool(w);
        t.c[p].width = w;
        th_live_init(&t.c[p].live);
    }
    /* (Not where this program's allocator calls land in another runtime.) */
    t.switch_alloc = !allocator_calls_split("test_callees_of_threads_at_once: switching");
    if (t.switch_alloc) {
        omp_alloctrait_t tr[] = {{omp_atk_alignment, 128}};
        t.alloc[0] = omp_init_allocator(omp_default_mem_space, 1, tr);
        t.alloc[1] = omp_default_mem_alloc;
    }
    pthread_t th[3];
    turns_arg args[3] = {{&t, 0}, {&t, 1}, {&t, 0}};
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, turns_thread, &args[i]), 0);
    for (int i = 0; i < 3; i++)
        ck_assert_msg(th_join_timeout(th[i], 50), "thread %d: hung", i);
    ck_assert_uint_eq(atomic_load(&t.externals), 3 * 40);
    ck_assert_uint_eq(atomic_load(&t.c[0].jobs), 2 * 40 * w);
    ck_assert_uint_eq(atomic_load(&t.c[1].jobs), 40 * w);
    for (int p = 0; p < 2; p++) {
        ck_assert_msg(th_live_max(&t.c[p].live) <= (int)w,
                      "%d threads ran pool work on a width-%u pool", th_live_max(&t.c[p].live), w);
        th_free_pool(t.c[p].pool);
    }
    if (t.switch_alloc)
        omp_destroy_allocator(t.alloc[0]);
    th_assert_no_failures();
}
END_TEST
#endif

static Suite *callee_suite(void)
{
    Suite *s = suite_create("callee");
    TCase *tc = th_tcase(s, "core", 60);
#if defined(_OPENMP) && TT_PARALLEL_ENABLED
    tcase_add_test(tc, test_callee_sets_default_allocator);
    tcase_add_test(tc, test_callee_sets_default_allocator_nested);
    tcase_add_test(tc, test_app_default_allocator_keeps_the_cap);
    tcase_add_test(tc, test_callee_sees_app_allocator);
    tcase_add_test(tc, test_callees_of_threads_at_once);
#else
    (void)tc;
#endif
    return s;
}

int main(void) { return th_run_suite(callee_suite()); }
