/*
 * test_crews.c -- where a root runs, and that every place conserves slots.
 *
 * The "one set of threads" mapping: a root made outside any parallel region
 * runs on the caller's own OpenMP team; a private crew runs the roots of a
 * dedicated pool, roots entered from inside another parallel region (an
 * application region, a member of another pool) and roots in a fork() child
 * of a multi-threaded parent. Each case here counts the tasks of user code
 * that run at once (th_live, in the jobs themselves, not the library's
 * ledger) and checks it against the budget, and checks where the work ran.
 * The width caps concurrent roots together: two roots from two threads of
 * one application region, each asking the whole width, never run more than
 * the width at once, and both complete.
 * Last, the probe threads that turn a refused thread start into TT_EAGAIN
 * must not be refused by a large static TLS (OpenBLAS has 60 KiB of it).
 */
#include "tt_test.h"

#include <sys/resource.h>
#include <sys/wait.h>
#if TT_PARALLEL_ENABLED
#include <omp.h>
#endif

typedef struct tree {
    tt_pool *pool;
    th_live live;
    pthread_t caller;
    _Atomic int on_caller, on_member, leaves, calls;
} tree;

static void leaf(void *arg, size_t b, size_t e)
{
    tree *t = arg;
    th_live_enter(&t->live);
    atomic_fetch_add(&t->calls, 1);
    if (pthread_equal(pthread_self(), t->caller))
        atomic_fetch_add(&t->on_caller, 1);
    if (tt_pool_is_member(t->pool, NULL))
        atomic_fetch_add(&t->on_member, 1);
    atomic_fetch_add(&t->leaves, (int)(e - b));
    th_spin_us(30);
    th_live_leave(&t->live);
}

static void job2(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    TT_CHECK(tt_for_ranges(child, 8, 1, leaf, arg) == TT_OK, "ranges in a job");
}

static void job1(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    TT_CHECK(tt_fork(child, 2, job2, arg) == TT_OK, "nested fork");
}

/* A fork tree of depth 3 under a root of `budget` from the calling thread. */
static void run_tree(tree *t, tt_pool *p, unsigned budget)
{
    memset(t, 0, sizeof *t);
    t->pool = p;
    t->caller = pthread_self();
    th_live_init(&t->live);
    tt_exec ex;
    TT_CHECK(tt_exec_init(&ex, p, budget) == TT_OK, "mint");
    TT_CHECK(tt_fork(&ex, 3, job1, t) == TT_OK, "root fork");
    TT_CHECK(atomic_load(&t->leaves) == 3 * 2 * 8, "%d leaf indices", atomic_load(&t->leaves));
    TT_CHECK(th_live_max(&t->live) <= (int)budget, "%d tasks at once under a budget of %u",
             th_live_max(&t->live), budget);
}

START_TEST(test_caller_team_root)
{
    tt_pool *p = th_make_pool(2);
    tree t;
    run_tree(&t, p, 2);
    th_assert_no_failures();
#if TT_PARALLEL_ENABLED
    /* participant 0 is the caller, and every leaf ran on a member (the
     * caller is one while it leads the region) */
    ck_assert_int_gt(atomic_load(&t.on_caller), 0);
    ck_assert_int_eq(atomic_load(&t.on_member), atomic_load(&t.calls));
#endif
    th_free_pool(p);
}
END_TEST

START_TEST(test_dedicated_pool)
{
    tt_pool *p = TT_TEST_POOL(.width = 3, .name = "ttcrew");
    for (unsigned b = 1; b <= 3; b++) {
        tree t;
        run_tree(&t, p, b);
        th_assert_no_failures();
#if TT_PARALLEL_ENABLED
        /* the caller enters the private crew and waits: no share on it */
        if (b > 1)
            ck_assert_int_eq(atomic_load(&t.on_caller), 0);
#endif
    }
#if TT_PARALLEL_ENABLED
    int n = 0;
    th_find_thread_named("ttcrew0", &n);
    ck_assert_int_ge(n, 1);
#endif
    th_free_pool(p);
}
END_TEST

#if TT_PARALLEL_ENABLED
/* Both threads of an application region mint roots of the whole width: the
 * roots run on the private crew (nothing on their callers), complete, and
 * stay within their budgets. */
START_TEST(test_roots_inside_app_region)
{
    tt_pool *p = th_make_pool(2);
    tree t[2];
    _Atomic int done = 0;
    unsigned rounds = th_iters(20);
#pragma omp parallel num_threads(2)
    {
        int k = omp_get_thread_num();
        for (unsigned r = 0; r < rounds; r++) {
            run_tree(&t[k], p, 2);
            TT_CHECK(atomic_load(&t[k].on_caller) == 0,
                     "a root from inside an application region ran a share on its caller");
            TT_CHECK(atomic_load(&t[k].on_member) > 0, "no leaf on the private crew");
        }
        atomic_fetch_add(&done, 1);
    }
    th_assert_no_failures();
    ck_assert_int_eq(atomic_load(&done), 2);
    th_free_pool(p);
}
END_TEST

/* The pool's width caps concurrent roots together: a counter shared by the
 * leaves of two roots from two threads never exceeds the width. Both from
 * inside one application region (private crew), and from two plain threads
 * (each opens a region on its own team). */
static th_live shared_live;
static _Atomic int shared_leaves;
static void shared_leaf(void *arg, size_t b, size_t e)
{
    (void)arg;
    (void)b;
    (void)e;
    th_live_enter(&shared_live);
    atomic_fetch_add(&shared_leaves, 1);
    th_spin_us(50);
    th_live_leave(&shared_live);
}

static void shared_rounds(tt_pool *p, unsigned rounds)
{
    for (unsigned r = 0; r < rounds; r++) {
        tt_exec ex;
        TT_CHECK(tt_exec_init(&ex, p, 2) == TT_OK, "mint");
        TT_CHECK(tt_for_ranges(&ex, 2, 1, shared_leaf, NULL) == TT_OK, "ranges");
    }
}

typedef struct plain_arg {
    tt_pool *pool;
    unsigned rounds;
} plain_arg;

static void *plain_main(void *arg)
{
    plain_arg *a = arg;
    shared_rounds(a->pool, a->rounds);
    return NULL;
}

START_TEST(test_width_caps_concurrent_roots)
{
    tt_pool *p = th_make_pool(2);
    unsigned rounds = th_iters(100);
    th_live_init(&shared_live);
    atomic_store(&shared_leaves, 0);
#pragma omp parallel num_threads(2)
    shared_rounds(p, rounds);
    th_assert_no_failures();
    ck_assert_int_eq(atomic_load(&shared_leaves), (int)(2 * 2 * rounds));
    ck_assert_int_le(th_live_max(&shared_live), 2);

    th_live_init(&shared_live);
    atomic_store(&shared_leaves, 0);
    plain_arg pa = {p, rounds};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, plain_main, &pa), 0);
    for (int i = 0; i < 2; i++)
        ck_assert(th_join_timeout(th[i], 60));
    th_assert_no_failures();
    ck_assert_int_eq(atomic_load(&shared_leaves), (int)(2 * 2 * rounds));
    ck_assert_int_le(th_live_max(&shared_live), 2);
    th_free_pool(p);
}
END_TEST

/* A member of pool A mints a root on pool B: B's private crew runs it. */
typedef struct cross {
    tt_pool *a, *b;
    tree t[4];
    _Atomic int a_thread_ran_b;
} cross;

static void a_job(void *arg, unsigned i, tt_exec *child)
{
    (void)child;
    cross *c = arg;
    run_tree(&c->t[i], c->b, 2);
    if (atomic_load(&c->t[i].on_caller) != 0)
        atomic_fetch_add(&c->a_thread_ran_b, 1);
}

START_TEST(test_root_from_member_of_other_pool)
{
    cross c;
    memset(&c, 0, sizeof c);
    c.a = th_make_pool(2);
    c.b = th_make_pool(2);
    for (unsigned r = 0; r < th_iters(10); r++) {
        tt_exec ex;
        ck_assert_int_eq(tt_exec_init(&ex, c.a, 2), TT_OK);
        ck_assert_int_eq(tt_fork(&ex, 2, a_job, &c), TT_OK);
    }
    th_assert_no_failures();
    ck_assert_int_eq(atomic_load(&c.a_thread_ran_b), 0);
    th_free_pool(c.a);
    th_free_pool(c.b);
}
END_TEST

/* In a fork() child of a multi-threaded parent, roots run on a private crew
 * (the parent's libgomp team does not exist there) and conserve slots. */
static void *parked(void *arg)
{
    th_flag *f = arg;
    th_flag_wait_ge(f, 1, 60);
    return NULL;
}

START_TEST(test_fork_child_root)
{
#if defined(__SANITIZE_ADDRESS__)
    /* AddressSanitizer's allocator locks can be copied held into the child
     * of a multi-threaded parent (its first malloc then hangs): the fork
     * cases run in the other builds. */
    fprintf(stderr, "test_fork_child_root: skipped under AddressSanitizer\n");
    return;
#endif
    /* make the parent multi-threaded, with a libgomp team of its own too */
    tt_pool *pp = th_make_pool(2);
    tree warm;
    run_tree(&warm, pp, 2);
    th_flag f = {0};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, parked, &f), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        alarm(30);
        tt_pool *p = NULL;
        if (tt_pool_create(&p, NULL) != TT_OK)
            _exit(2);
        tree t;
        run_tree(&t, p, tt_pool_width(p));
        if (th_failures())
            _exit(3);
        if (tt_pool_width(p) > 1 && atomic_load(&t.on_caller) != 0)
            _exit(4); /* a share ran on the caller: not the private crew */
        if (tt_pool_destroy(p) != TT_OK)
            _exit(5);
        _exit(0);
    }
    int st = 0;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    th_flag_set(&f, 1);
    pthread_join(th, NULL);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "fork child: status 0x%x", st);
    th_assert_no_failures();
    th_free_pool(pp);
}
END_TEST
#endif

/* A static TLS as large as OpenBLAS's does not make the thread probes
 * (which run whenever RLIMIT_NPROC is finite) refuse a pool. */
/* Not static: the program's TLS segment must really hold it (readelf -l
 * shows a 96 KiB TLS segment), as libopenblas.so's holds 60 KiB. */
__thread char tt_test_big_tls[96 << 10];

START_TEST(test_probe_with_large_static_tls)
{
    tt_test_big_tls[0] = 1;
    tt_test_big_tls[sizeof tt_test_big_tls - 1] = 1;
    struct rlimit old, rl;
    ck_assert_int_eq(getrlimit(RLIMIT_NPROC, &old), 0);
    rl = old;
    if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > 100000)
        rl.rlim_cur = 100000;
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_cur > rl.rlim_max)
        rl.rlim_cur = rl.rlim_max;
    ck_assert_int_eq(setrlimit(RLIMIT_NPROC, &rl), 0);
    tt_pool_attr *a = NULL;
    ck_assert_int_eq(tt_pool_attr_create(&a), TT_OK);
    ck_assert_int_eq(tt_pool_attr_set_threads(a, 2), TT_OK);
    ck_assert_int_eq(tt_pool_attr_set_thread_name(a, "tttls"), TT_OK);
    tt_pool *p = NULL;
    int rc = tt_pool_create(&p, a);
    tt_pool_attr_destroy(a);
    setrlimit(RLIMIT_NPROC, &old);
    ck_assert_msg(rc == TT_OK, "a dedicated pool under a finite RLIMIT_NPROC with 96 KiB of "
                               "static TLS: %s", tt_status_name(rc));
    tree t;
    run_tree(&t, p, 2);
    th_assert_no_failures();
    ck_assert_int_eq(tt_pool_destroy(p), TT_OK);
}
END_TEST

static Suite *crews_suite(void)
{
    Suite *s = suite_create("crews");
    TCase *tc = th_tcase(s, "crews", 60);
    tcase_add_test(tc, test_caller_team_root);
    tcase_add_test(tc, test_dedicated_pool);
#if TT_PARALLEL_ENABLED
    tcase_add_test(tc, test_roots_inside_app_region);
    tcase_add_test(tc, test_width_caps_concurrent_roots);
    tcase_add_test(tc, test_root_from_member_of_other_pool);
    tcase_add_test(tc, test_fork_child_root);
#endif
    tcase_add_test(tc, test_probe_with_large_static_tls);
    return s;
}

int main(void) { return th_run_suite(crews_suite()); }
