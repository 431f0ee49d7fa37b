/*
 * test_attr.c -- pool attributes and the pool accessors: defaults, every
 * setter/getter round trip, invalid inputs refused (and nothing changed),
 * widths (0 = the caller's nthreads-var, its OpenMP default; absurd widths
 * TT_ERANGE with *pool NULL and no thread left), pools built with a thread
 * name (visible in /proc/self/task/<tid>/comm with the member index while
 * the pool lives, gone after the destroy), with an on_start hook (once per
 * member, indices 0..w-1, distinct threads, before any work), with a stack
 * size, with a QoS.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "tt_test.h"

#include <limits.h>
#if TT_PARALLEL_ENABLED
#include <omp.h>
#endif

#define ck_rc(got, want)                                                       \
    ck_assert_msg((got) == (want), "%s: got %s, want %s", #got, tt_status_name(got),     \
                  tt_status_name(want))

START_TEST(test_attr_defaults)
{
    ck_rc(tt_pool_attr_create(NULL), TT_EINVAL);
    tt_pool_attr *a = NULL;
    ck_rc(tt_pool_attr_create(&a), TT_OK);
    ck_assert_ptr_nonnull(a);
    unsigned th = 99;
    ck_rc(tt_pool_attr_get_threads(a, &th), TT_OK);
    ck_assert_uint_eq(th, 0);
    const char *name = "x";
    ck_rc(tt_pool_attr_get_thread_name(a, &name), TT_OK);
    ck_assert_ptr_null(name);
    size_t st = 0;
    ck_rc(tt_pool_attr_get_stack_size(a, &st), TT_OK);
    ck_assert_uint_eq(st, (size_t)16 << 20);
    tt_on_start_fn fn = (tt_on_start_fn)1;
    void *arg = (void *)1;
    ck_rc(tt_pool_attr_get_on_start(a, &fn, &arg), TT_OK);
    ck_assert_ptr_null((void *)(uintptr_t)fn);
    ck_assert_ptr_null(arg);
    tt_qos q = TT_QOS_USER_INTERACTIVE;
    ck_rc(tt_pool_attr_get_qos(a, &q), TT_OK);
    ck_assert_int_eq(q, TT_QOS_DEFAULT);
    uint64_t ns = 0;
    ck_rc(tt_pool_attr_get_idle_spin(a, &ns), TT_OK);
    ck_assert_uint_eq(ns, 1000000u);
    bool on = true;
    ck_rc(tt_pool_attr_get_idle_serves_pool(a, &on), TT_OK);
    ck_assert(!on);
    ck_rc(tt_pool_attr_get_acquire_timeout(a, &ns), TT_OK);
    ck_assert_uint_eq(ns, 1000000000u);
    uint64_t polls = 0;
    ck_rc(tt_pool_attr_get_spin_polls(a, &polls), TT_OK);
    /* unset, it reads OpenMP's settings (test_waits checks those) */
    if (!getenv("OMP_WAIT_POLICY") && !getenv("GOMP_SPINCOUNT")) {
#if defined(__aarch64__)
        ck_assert_uint_eq(polls, (uint64_t)1 << 21);
#else
        ck_assert_uint_eq(polls, 300000u);
#endif
    }
    on = true;
    ck_rc(tt_pool_attr_get_pin_participants(a, &on), TT_OK);
    ck_assert(!on);
    tt_pool_attr_destroy(a);
    tt_pool_attr_destroy(NULL);
}
END_TEST

static void hook_a(void *arg, unsigned m)
{
    (void)arg;
    (void)m;
}

START_TEST(test_attr_round_trips)
{
    tt_pool_attr *a = NULL;
    ck_rc(tt_pool_attr_create(&a), TT_OK);
    static const unsigned ths[] = {0, 1, 2, 7, 4096, UINT_MAX};
    for (size_t i = 0; i < TT_ARRAY_LEN(ths); i++) {
        unsigned v = 12345;
        ck_rc(tt_pool_attr_set_threads(a, ths[i]), TT_OK);
        ck_rc(tt_pool_attr_get_threads(a, &v), TT_OK);
        ck_assert_uint_eq(v, ths[i]);
    }
    /* the name is copied */
    char buf[32];
    strcpy(buf, "ttname");
    ck_rc(tt_pool_attr_set_thread_name(a, buf), TT_OK);
    strcpy(buf, "changed");
    const char *name = NULL;
    ck_rc(tt_pool_attr_get_thread_name(a, &name), TT_OK);
    ck_assert_ptr_nonnull(name);
    ck_assert_str_eq(name, "ttname");
    ck_assert_ptr_ne(name, buf);
    ck_rc(tt_pool_attr_set_thread_name(a, "a-much-longer-thread-name"), TT_OK);
    ck_rc(tt_pool_attr_get_thread_name(a, &name), TT_OK);
    ck_assert_str_eq(name, "a-much-longer-thread-name");
    ck_rc(tt_pool_attr_set_thread_name(a, NULL), TT_OK); /* clears */
    ck_rc(tt_pool_attr_get_thread_name(a, &name), TT_OK);
    ck_assert_ptr_null(name);

    static const size_t sts[] = {(size_t)64 << 10, (size_t)1 << 20, (size_t)64 << 20};
    for (size_t i = 0; i < TT_ARRAY_LEN(sts); i++) {
        size_t v = 0;
        ck_rc(tt_pool_attr_set_stack_size(a, sts[i]), TT_OK);
        ck_rc(tt_pool_attr_get_stack_size(a, &v), TT_OK);
        ck_assert_uint_eq(v, sts[i]);
    }

    int token = 7;
    tt_on_start_fn fn = NULL;
    void *arg = NULL;
    ck_rc(tt_pool_attr_set_on_start(a, hook_a, &token), TT_OK);
    ck_rc(tt_pool_attr_get_on_start(a, &fn, &arg), TT_OK);
    ck_assert(fn == hook_a);
    ck_assert_ptr_eq(arg, &token);
    ck_rc(tt_pool_attr_set_on_start(a, NULL, &token), TT_OK); /* clears */
    ck_rc(tt_pool_attr_get_on_start(a, &fn, &arg), TT_OK);
    ck_assert(fn == NULL);

    static const tt_qos qs[] = {TT_QOS_DEFAULT, TT_QOS_BACKGROUND, TT_QOS_UTILITY,
                                TT_QOS_USER_INITIATED, TT_QOS_USER_INTERACTIVE};
    for (size_t i = 0; i < TT_ARRAY_LEN(qs); i++) {
        tt_qos v = (tt_qos)-1;
        ck_rc(tt_pool_attr_set_qos(a, qs[i]), TT_OK);
        ck_rc(tt_pool_attr_get_qos(a, &v), TT_OK);
        ck_assert_int_eq(v, qs[i]);
    }

    static const uint64_t u64s[] = {0, 1, 1000, 123456789, UINT64_MAX};
    for (size_t i = 0; i < TT_ARRAY_LEN(u64s); i++) {
        uint64_t v = 42;
        ck_rc(tt_pool_attr_set_idle_spin(a, u64s[i]), TT_OK);
        ck_rc(tt_pool_attr_get_idle_spin(a, &v), TT_OK);
        ck_assert_uint_eq(v, u64s[i]);
        ck_rc(tt_pool_attr_set_acquire_timeout(a, u64s[i]), TT_OK);
        ck_rc(tt_pool_attr_get_acquire_timeout(a, &v), TT_OK);
        ck_assert_uint_eq(v, u64s[i]);
        ck_rc(tt_pool_attr_set_spin_polls(a, u64s[i]), TT_OK);
        ck_rc(tt_pool_attr_get_spin_polls(a, &v), TT_OK);
        ck_assert_uint_eq(v, u64s[i]);
    }
    for (int b = 1; b >= 0; b--) {
        bool v = !b;
        ck_rc(tt_pool_attr_set_idle_serves_pool(a, b), TT_OK);
        ck_rc(tt_pool_attr_get_idle_serves_pool(a, &v), TT_OK);
        ck_assert(v == (bool)b);
        v = !b;
        ck_rc(tt_pool_attr_set_pin_participants(a, b), TT_OK);
        ck_rc(tt_pool_attr_get_pin_participants(a, &v), TT_OK);
        ck_assert(v == (bool)b);
    }
    tt_pool_attr_destroy(a);
}
END_TEST

START_TEST(test_attr_invalid)
{
    /* NULL attribute object: every setter and getter */
    unsigned u;
    const char *s;
    size_t z;
    tt_on_start_fn fn;
    void *arg;
    tt_qos q;
    uint64_t v;
    bool b;
    ck_rc(tt_pool_attr_set_threads(NULL, 2), TT_EINVAL);
    ck_rc(tt_pool_attr_get_threads(NULL, &u), TT_EINVAL);
    ck_rc(tt_pool_attr_set_thread_name(NULL, "x"), TT_EINVAL);
    ck_rc(tt_pool_attr_get_thread_name(NULL, &s), TT_EINVAL);
    ck_rc(tt_pool_attr_set_stack_size(NULL, (size_t)1 << 20), TT_EINVAL);
    ck_rc(tt_pool_attr_get_stack_size(NULL, &z), TT_EINVAL);
    ck_rc(tt_pool_attr_set_on_start(NULL, hook_a, NULL), TT_EINVAL);
    ck_rc(tt_pool_attr_get_on_start(NULL, &fn, &arg), TT_EINVAL);
    ck_rc(tt_pool_attr_set_qos(NULL, TT_QOS_UTILITY), TT_EINVAL);
    ck_rc(tt_pool_attr_get_qos(NULL, &q), TT_EINVAL);
    ck_rc(tt_pool_attr_set_idle_spin(NULL, 1), TT_EINVAL);
    ck_rc(tt_pool_attr_get_idle_spin(NULL, &v), TT_EINVAL);
    ck_rc(tt_pool_attr_set_idle_serves_pool(NULL, true), TT_EINVAL);
    ck_rc(tt_pool_attr_get_idle_serves_pool(NULL, &b), TT_EINVAL);
    ck_rc(tt_pool_attr_set_acquire_timeout(NULL, 1), TT_EINVAL);
    ck_rc(tt_pool_attr_get_acquire_timeout(NULL, &v), TT_EINVAL);
    ck_rc(tt_pool_attr_set_spin_polls(NULL, 1), TT_EINVAL);
    ck_rc(tt_pool_attr_get_spin_polls(NULL, &v), TT_EINVAL);
    ck_rc(tt_pool_attr_set_pin_participants(NULL, true), TT_EINVAL);
    ck_rc(tt_pool_attr_get_pin_participants(NULL, &b), TT_EINVAL);

    tt_pool_attr *a = NULL;
    ck_rc(tt_pool_attr_create(&a), TT_OK);
    /* NULL outputs */
    ck_rc(tt_pool_attr_get_threads(a, NULL), TT_EINVAL);
    ck_rc(tt_pool_attr_get_thread_name(a, NULL), TT_EINVAL);
    ck_rc(tt_pool_attr_get_stack_size(a, NULL), TT_EINVAL);
    ck_rc(tt_pool_attr_get_on_start(a, NULL, &arg), TT_EINVAL);
    ck_rc(tt_pool_attr_get_on_start(a, &fn, NULL), TT_EINVAL);
    ck_rc(tt_pool_attr_get_qos(a, NULL), TT_EINVAL);
    ck_rc(tt_pool_attr_get_idle_spin(a, NULL), TT_EINVAL);
    ck_rc(tt_pool_attr_get_idle_serves_pool(a, NULL), TT_EINVAL);
    ck_rc(tt_pool_attr_get_acquire_timeout(a, NULL), TT_EINVAL);
    ck_rc(tt_pool_attr_get_spin_polls(a, NULL), TT_EINVAL);
    ck_rc(tt_pool_attr_get_pin_participants(a, NULL), TT_EINVAL);

    /* invalid values are refused and change nothing */
    ck_rc(tt_pool_attr_set_thread_name(a, "keep"), TT_OK);
    ck_rc(tt_pool_attr_set_thread_name(a, ""), TT_EINVAL);
    ck_rc(tt_pool_attr_get_thread_name(a, &s), TT_OK);
    ck_assert_str_eq(s, "keep");

    ck_rc(tt_pool_attr_set_stack_size(a, (size_t)2 << 20), TT_OK);
    static const size_t small[] = {0, 1, 4096, ((size_t)64 << 10) - 1};
    for (size_t i = 0; i < TT_ARRAY_LEN(small); i++)
        ck_rc(tt_pool_attr_set_stack_size(a, small[i]), TT_EINVAL);
    ck_rc(tt_pool_attr_get_stack_size(a, &z), TT_OK);
    ck_assert_uint_eq(z, (size_t)2 << 20);

    ck_rc(tt_pool_attr_set_qos(a, TT_QOS_UTILITY), TT_OK);
    ck_rc(tt_pool_attr_set_qos(a, (tt_qos)(TT_QOS_USER_INTERACTIVE + 1)), TT_EINVAL);
    ck_rc(tt_pool_attr_set_qos(a, (tt_qos)-1), TT_EINVAL);
    ck_rc(tt_pool_attr_set_qos(a, (tt_qos)1000), TT_EINVAL);
    ck_rc(tt_pool_attr_get_qos(a, &q), TT_OK);
    ck_assert_int_eq(q, TT_QOS_UTILITY);
    tt_pool_attr_destroy(a);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Pools: widths and accessors                                               */
/* ------------------------------------------------------------------------ */

static tt_pool *make_with_threads(unsigned threads, int *rc_out)
{
    tt_pool_attr *a = NULL;
    ck_rc(tt_pool_attr_create(&a), TT_OK);
    ck_rc(tt_pool_attr_set_threads(a, threads), TT_OK);
    ck_rc(tt_pool_attr_set_spin_polls(a, th_test_spin_polls()), TT_OK);
    tt_pool *p = (tt_pool *)(uintptr_t)0xdeadbeef; /* must be overwritten */
    *rc_out = tt_pool_create(&p, a);
    tt_pool_attr_destroy(a);
    return p;
}

START_TEST(test_pool_width_zero_is_all_cpus)
{
    int rc;
    tt_pool *p = make_with_threads(0, &rc);
    ck_rc(rc, TT_OK);
    ck_assert_uint_eq(tt_pool_width(p), th_expect_width(th_affinity_cpus()));
    ck_rc(tt_pool_destroy(p), TT_OK);
    /* NULL attributes: the defaults, width = CPUs too */
    p = NULL;
    ck_rc(tt_pool_create(&p, NULL), TT_OK);
    ck_assert_uint_eq(tt_pool_width(p), th_expect_width(th_affinity_cpus()));
    ck_rc(tt_pool_destroy(p), TT_OK);
    ck_rc(tt_pool_create(NULL, NULL), TT_EINVAL);
}
END_TEST

/* A thread narrowed to one CPU builds a pool of width 0 (the default). */
typedef struct narrow_args {
    int rc;
    unsigned width;
    unsigned cpus;
} narrow_args;

static void *narrow_main(void *arg)
{
    narrow_args *n = arg;
    cpu_set_t set;
    CPU_ZERO(&set);
    sched_getaffinity(0, sizeof set, &set);
    int first = th_first_cpu_of(&set, -1);
    if (first >= 0)
        (void)th_bind_to_cpu(first);
    n->cpus = th_affinity_cpus();
    tt_pool_attr *a = NULL;
    tt_pool_attr_create(&a);
    tt_pool_attr_set_threads(a, 0);
    tt_pool *p = NULL;
    n->rc = tt_pool_create(&p, a);
    tt_pool_attr_destroy(a);
    n->width = tt_pool_width(p);
    if (p)
        tt_pool_destroy(p);
    return NULL;
}

/* The default width is the building thread's nthreads-var
 * (omp_get_max_threads), not its affinity set: a thread narrowed to one
 * CPU (as libgomp's OMP_PROC_BIND narrows the initial thread) still builds
 * a pool as wide as the application's own regions. */
START_TEST(test_pool_width_zero_ignores_narrowed_affinity)
{
    narrow_args n = {-1, 0, 0};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, narrow_main, &n), 0);
    ck_assert(th_join_timeout(t, 30));
    ck_assert_uint_eq(n.cpus, 1);
    ck_rc(n.rc, TT_OK);
#if TT_PARALLEL_ENABLED
    ck_assert_uint_eq(n.width, (unsigned)omp_get_max_threads());
#else
    ck_assert_uint_eq(n.width, 1);
#endif
}
END_TEST

#if TT_PARALLEL_ENABLED
static void *width3_main(void *arg)
{
    unsigned *w = arg;
    omp_set_num_threads(3);
    tt_pool *p = NULL;
    if (tt_pool_create(&p, NULL) == TT_OK) {
        *w = tt_pool_width(p);
        tt_pool_destroy(p);
    }
    return NULL;
}
#endif

START_TEST(test_pool_default_width_is_max_threads)
{
    tt_pool *p = NULL;
    ck_rc(tt_pool_create(&p, NULL), TT_OK);
#if TT_PARALLEL_ENABLED
    ck_assert_uint_eq(tt_pool_width(p), (unsigned)omp_get_max_threads());
    /* another thread's nthreads-var gives its pools their width */
    unsigned w = 0;
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, width3_main, &w), 0);
    ck_assert(th_join_timeout(t, 30));
    ck_assert_uint_eq(w, 3);
#else
    ck_assert_uint_eq(tt_pool_width(p), 1);
#endif
    ck_rc(tt_pool_destroy(p), TT_OK);
}
END_TEST

START_TEST(test_pool_absurd_widths)
{
    int before = th_count_threads_settled();
    static const unsigned absurd[] = {1u << 30, UINT_MAX, (1u << 30) + 7};
    for (size_t i = 0; i < TT_ARRAY_LEN(absurd); i++) {
        int rc;
        tt_pool *p = make_with_threads(absurd[i], &rc);
#if TT_PARALLEL_ENABLED
        ck_assert_msg(rc == TT_ERANGE, "width %u: %s", absurd[i], tt_status_name(rc));
        ck_assert_ptr_null(p);
#else
        /* without parallel every pool has width 1 */
        ck_rc(rc, TT_OK);
        ck_assert_uint_eq(tt_pool_width(p), 1);
        ck_rc(tt_pool_destroy(p), TT_OK);
#endif
    }
    /* no thread left running */
    ck_assert_int_eq(th_wait_thread_count(before, 5), before);
}
END_TEST

typedef struct cnt {
    _Atomic int n;
} cnt;
static void job_cnt(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    (void)child;
    atomic_fetch_add(&((cnt *)arg)->n, 1);
}

START_TEST(test_pool_accessors)
{
    ck_assert_uint_eq(tt_pool_width(NULL), 0);
    ck_assert_uint_eq(tt_pool_spin_polls(NULL), 0);
    ck_assert(!tt_pool_pin_participants(NULL));
    ck_rc(tt_pool_release_idle(NULL), TT_EINVAL);
    ck_assert_uint_eq(tt_pool_member_stack_size(NULL), 0);
    unsigned k = 77;
    ck_assert(!tt_pool_is_member(NULL, &k));
    tt_wait_counts wc;
    ck_rc(tt_pool_wait_counts(NULL, &wc), TT_EINVAL);

    tt_pool_attr *a = NULL;
    ck_rc(tt_pool_attr_create(&a), TT_OK);
    ck_rc(tt_pool_attr_set_threads(a, 3), TT_OK);
    ck_rc(tt_pool_attr_set_spin_polls(a, 4321), TT_OK);
    ck_rc(tt_pool_attr_set_pin_participants(a, true), TT_OK);
    tt_pool *p = NULL;
    ck_rc(tt_pool_create(&p, a), TT_OK);
    /* changing or dropping the attribute object does not touch the pool */
    ck_rc(tt_pool_attr_set_spin_polls(a, 1), TT_OK);
    ck_rc(tt_pool_attr_set_pin_participants(a, false), TT_OK);
    tt_pool_attr_destroy(a);
    ck_assert_uint_eq(tt_pool_width(p), th_expect_width(3));
    ck_assert_uint_eq(tt_pool_spin_polls(p), 4321);
    ck_assert(tt_pool_pin_participants(p));
    ck_assert(!tt_pool_is_member(p, &k)); /* this thread is not a member */
    ck_assert_uint_eq(k, 77);
    ck_rc(tt_pool_wait_counts(p, NULL), TT_EINVAL);
    ck_rc(tt_pool_wait_counts(p, &wc), TT_OK);
    ck_rc(tt_pool_release_idle(p), TT_OK);
    /* the pool works after release_idle */
    tt_exec ex;
    ck_rc(tt_exec_init(&ex, p, 3), TT_OK);
    cnt c = {0};
    ck_rc(tt_fork(&ex, 3, job_cnt, &c), TT_OK);
    ck_assert_int_eq(atomic_load(&c.n), 3);
    /* a default pool has no private crew: its roots run on this thread's
     * own OpenMP team, whose stacks are libgomp's */
    ck_assert_uint_eq(tt_pool_member_stack_size(p), 0);
#if !TT_PARALLEL_ENABLED

    ck_assert_uint_eq(wc.join_sleeps + wc.barrier_sleeps + wc.member_parks + wc.preemptions +
                          wc.starving + wc.wakes,
                      0);
#endif
    ck_rc(tt_pool_destroy(p), TT_OK);
}
END_TEST

/* The pool works with waits that sleep at once. */

/* Job 0 of two gets a share of 2 and forks in it: its second member waits
 * in its mailbox for that work. */
static void job_nested_cnt(void *arg, unsigned i, tt_exec *child)
{
    cnt *c = arg;
    if (i == 0) {
        th_sleep_us(300); /* the second member of the share waits meanwhile */
        ck_rc(tt_fork(child, 2, job_cnt, c), TT_OK);
    } else {
        atomic_fetch_add(&c->n, 2);
    }
}

START_TEST(test_pool_no_spin)
{
    tt_pool *p = th_make_pool_spin(3, 0, 0);
    cnt c = {0};
    for (int r = 0; r < 50; r++) {
        tt_exec ex;
        ck_rc(tt_exec_init(&ex, p, 3), TT_OK);
        ck_rc(tt_fork(&ex, 2, job_nested_cnt, &c), TT_OK);
        if (r == 25)
            ck_rc(tt_pool_release_idle(p), TT_OK);
        th_sleep_us(500);
    }
    ck_assert_int_eq(atomic_load(&c.n), 200);
    tt_wait_counts wc;
    ck_rc(tt_pool_wait_counts(p, &wc), TT_OK);
#if TT_PARALLEL_ENABLED
    /* Members that never spin park for every piece of work. (The pool
     * must really be built with spin 0 and idle spin 0: a test helper that
     * took 0 for "the suite's default" made these members spin, and beside
     * spinning processes their spins then always caught the work: 0 parks,
     * about one run in five. docs/design/testing.md, "The flake study".) */
    ck_assert_msg(wc.member_parks > 0,
                  "no member parked: parks %llu, join sleeps %llu, barrier sleeps %llu, "
                  "preemptions %llu, starving %llu, wakes %llu",
                  (unsigned long long)wc.member_parks, (unsigned long long)wc.join_sleeps,
                  (unsigned long long)wc.barrier_sleeps, (unsigned long long)wc.preemptions,
                  (unsigned long long)wc.starving, (unsigned long long)wc.wakes);
#endif
    th_free_pool(p);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Dedicated members: name, on_start, stack size, QoS                        */
/* ------------------------------------------------------------------------ */

typedef struct name_ctx {
    const char *prefix;
    unsigned width;
    _Atomic int bad;
    _Atomic int seen[16];
    _Atomic pid_t tid[16];
} name_ctx;

static void job_check_name(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    (void)child;
    name_ctx *c = arg;
    char comm[64];
    pid_t tid = th_gettid();
    if (!th_thread_comm(tid, comm, sizeof comm)) {
        atomic_fetch_add(&c->bad, 1);
        return;
    }
    /* the name ends with the member index */
    size_t n = strlen(comm);
    size_t d = n;
    while (d > 0 && comm[d - 1] >= '0' && comm[d - 1] <= '9')
        d--;
    if (d == n) {
        TT_CHECK(0, "member thread name '%s' has no index", comm);
        atomic_fetch_add(&c->bad, 1);
        return;
    }
    unsigned idx = (unsigned)atoi(comm + d);
    if (idx < 16) {
        atomic_fetch_add(&c->seen[idx], 1);
        atomic_store(&c->tid[idx], tid);
    }
}

typedef struct member_job {
    tt_pool *pool;
    name_ctx *c;
} member_job;

static TT_TEST_UNUSED void job_check_name_member(void *arg, unsigned i, tt_exec *child)
{
    member_job *m = arg;
    unsigned k = 99;
    if (!tt_pool_is_member(m->pool, &k)) {
        TT_CHECK(0, "a job of a plain thread's full fork ran off the pool");
        return;
    }
    TT_CHECK(k == i, "job %u of a full fork ran on member %u", i, k);
    char comm[64], want[32];
    if (!th_thread_comm(th_gettid(), comm, sizeof comm)) {
        TT_CHECK(0, "cannot read the member's name");
        return;
    }
    /* name + index, truncated to 15 bytes keeping the index */
    char idx[12];
    int il = snprintf(idx, sizeof idx, "%u", k);
    size_t pl = strlen(m->c->prefix);
    if (pl + (size_t)il > 15)
        pl = 15 - (size_t)il;
    snprintf(want, sizeof want, "%.*s%s", (int)pl, m->c->prefix, idx);
    TT_CHECK(strcmp(comm, want) == 0, "member %u is named '%s', want '%s'", k, comm, want);
    job_check_name(m->c, i, child);
}

static void check_named_pool(const char *prefix, unsigned width)
{
    int before = th_count_threads_settled();
    tt_pool_attr *a = NULL;
    ck_rc(tt_pool_attr_create(&a), TT_OK);
    ck_rc(tt_pool_attr_set_threads(a, width), TT_OK);
    ck_rc(tt_pool_attr_set_thread_name(a, prefix), TT_OK);
    ck_rc(tt_pool_attr_set_spin_polls(a, th_test_spin_polls()), TT_OK);
    tt_pool *p = NULL;
    ck_rc(tt_pool_create(&p, a), TT_OK);
    tt_pool_attr_destroy(a);
    unsigned w = tt_pool_width(p);
    ck_assert_uint_eq(w, th_expect_width(width));
#if TT_PARALLEL_ENABLED
    /* every member index appears once in /proc/self/task/.../comm */
    for (unsigned k = 0; k < w; k++) {
        char idx[12], want[32];
        int il = snprintf(idx, sizeof idx, "%u", k);
        size_t pl = strlen(prefix);
        if (pl + (size_t)il > 15)
            pl = 15 - (size_t)il;
        snprintf(want, sizeof want, "%.*s%s", (int)pl, prefix, idx);
        int count = 0;
        pid_t tid = th_find_thread_named(want, &count);
        ck_assert_msg(tid != 0 && count == 1, "no single thread named '%s' (%d found)", want,
                      count);
    }
    ck_assert_int_eq(th_count_threads(), before + (int)w);
    /* and each member knows its index: job k of a full fork is member k */
    name_ctx c;
    memset(&c, 0, sizeof c);
    c.prefix = prefix;
    c.width = w;
    member_job m = {p, &c};
    tt_exec ex;
    ck_rc(tt_exec_init(&ex, p, w), TT_OK);
    ck_rc(tt_fork(&ex, w, job_check_name_member, &m), TT_OK);
    th_assert_no_failures();
    ck_assert_int_eq(atomic_load(&c.bad), 0);
    for (unsigned k = 0; k < w && k < 16; k++)
        ck_assert_int_eq(atomic_load(&c.seen[k]), 1);
    ck_rc(tt_pool_destroy(p), TT_OK);
    /* dedicated members are joined: when the destroy returns they are gone */
    for (unsigned k = 0; k < w && k < 16; k++)
        ck_assert_msg(!th_tid_alive(atomic_load(&c.tid[k])),
                      "member %u (tid %d) still exists after tt_pool_destroy", k,
                      (int)atomic_load(&c.tid[k]));
    /* the members' exit is checked by tid where the test has them; the
     * joined host thread can still be listed in /proc for a moment */
    ck_assert_int_eq(th_wait_thread_count(before, 5), before);
#else
    ck_assert_int_eq(th_count_threads(), before);
    ck_rc(tt_pool_destroy(p), TT_OK);
#endif
}

START_TEST(test_pool_thread_names)
{
    check_named_pool("ttname", 3);
    check_named_pool("abcdefghijklmnopq", 12); /* truncated, index kept */
    check_named_pool("w", 2);
}
END_TEST

typedef struct start_ctx {
    _Atomic int calls;
    _Atomic int per_index[32];
    _Atomic pid_t tid[32];
    _Atomic int bad_index;
    _Atomic int work_before;
    _Atomic int work_started;
} start_ctx;

static void on_start_rec(void *arg, unsigned member)
{
    start_ctx *c = arg;
    atomic_fetch_add(&c->calls, 1);
    if (atomic_load(&c->work_started))
        atomic_fetch_add(&c->work_before, 1);
    if (member >= 32) {
        atomic_fetch_add(&c->bad_index, 1);
        return;
    }
    atomic_fetch_add(&c->per_index[member], 1);
    atomic_store(&c->tid[member], th_gettid());
}

typedef struct on_start_job {
    tt_pool *pool;
    start_ctx *c;
    _Atomic int mismatch;
} on_start_job;

static void job_match_on_start(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    (void)child;
    on_start_job *j = arg;
    unsigned k = 0;
    if (!tt_pool_is_member(j->pool, &k) || k >= 32 || atomic_load(&j->c->tid[k]) != th_gettid())
        atomic_fetch_add(&j->mismatch, 1);
}

START_TEST(test_pool_on_start)
{
    static const unsigned widths[] = {1, 2, 5};
    for (size_t wi = 0; wi < TT_ARRAY_LEN(widths); wi++) {
        start_ctx *c = calloc(1, sizeof *c);
        ck_assert_ptr_nonnull(c);
        tt_pool_attr *a = NULL;
        ck_rc(tt_pool_attr_create(&a), TT_OK);
        ck_rc(tt_pool_attr_set_threads(a, widths[wi]), TT_OK);
        ck_rc(tt_pool_attr_set_on_start(a, on_start_rec, c), TT_OK);
        ck_rc(tt_pool_attr_set_spin_polls(a, th_test_spin_polls()), TT_OK);
        tt_pool *p = NULL;
        ck_rc(tt_pool_create(&p, a), TT_OK);
        tt_pool_attr_destroy(a);
        unsigned w = tt_pool_width(p);
        atomic_store(&c->work_started, 1);
        if (w > 1) {
            /* once per member, indices 0..w-1, on distinct threads */
            ck_assert_int_eq(atomic_load(&c->calls), (int)w);
            ck_assert_int_eq(atomic_load(&c->bad_index), 0);
            for (unsigned k = 0; k < w; k++) {
                ck_assert_int_eq(atomic_load(&c->per_index[k]), 1);
                for (unsigned j = 0; j < k; j++)
                    ck_assert_int_ne(atomic_load(&c->tid[j]), atomic_load(&c->tid[k]));
                ck_assert_int_ne(atomic_load(&c->tid[k]), th_gettid());
            }
            /* member k of the pool is the thread whose hook got k */
            on_start_job j = {p, c, 0};
            tt_exec ex;
            ck_rc(tt_exec_init(&ex, p, w), TT_OK);
            ck_rc(tt_fork(&ex, w, job_match_on_start, &j), TT_OK);
            ck_assert_int_eq(atomic_load(&j.mismatch), 0);
        }
        /* a width-1 pool has no member thread: nothing to start; the hook
         * must not run later either */
        ck_assert_int_eq(atomic_load(&c->work_before), 0);
        ck_rc(tt_pool_destroy(p), TT_OK);
        for (unsigned k = 0; k < w && w > 1; k++)
            ck_assert_msg(!th_tid_alive(atomic_load(&c->tid[k])),
                          "on_start thread %u still alive after tt_pool_destroy", k);
        free(c);
    }
}
END_TEST

/* The host thread (member 0) has the stack size asked for. */
typedef struct stack_job {
    tt_pool *pool;
    _Atomic size_t stack_of[8];
} stack_job;

static TT_TEST_UNUSED void job_stack(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    (void)child;
    stack_job *s = arg;
    unsigned k = 0;
    if (!tt_pool_is_member(s->pool, &k) || k >= 8)
        return;
    pthread_attr_t pa;
    size_t sz = 0;
    if (pthread_getattr_np(pthread_self(), &pa) == 0) {
        pthread_attr_getstacksize(&pa, &sz);
        pthread_attr_destroy(&pa);
    }
    atomic_store(&s->stack_of[k], sz);
}

START_TEST(test_pool_stack_size)
{
    static const size_t sizes[] = {(size_t)256 << 10, (size_t)1 << 20, (size_t)24 << 20};
    for (size_t si = 0; si < TT_ARRAY_LEN(sizes); si++) {
        int before = th_count_threads_settled();
        tt_pool_attr *a = NULL;
        ck_rc(tt_pool_attr_create(&a), TT_OK);
        ck_rc(tt_pool_attr_set_threads(a, 2), TT_OK);
        ck_rc(tt_pool_attr_set_stack_size(a, sizes[si]), TT_OK);
        ck_rc(tt_pool_attr_set_spin_polls(a, th_test_spin_polls()), TT_OK);
        tt_pool *p = NULL;
        ck_rc(tt_pool_create(&p, a), TT_OK);
        tt_pool_attr_destroy(a);
#if TT_PARALLEL_ENABLED
        stack_job s;
        memset(&s, 0, sizeof s);
        s.pool = p;
        tt_exec ex;
        ck_rc(tt_exec_init(&ex, p, 2), TT_OK);
        ck_rc(tt_fork(&ex, 2, job_stack, &s), TT_OK);
        size_t s0 = atomic_load(&s.stack_of[0]);
        ck_assert_msg(s0 >= sizes[si] && s0 < sizes[si] + ((size_t)1 << 20),
                      "member 0 has a stack of %zu bytes, asked for %zu", s0, sizes[si]);
        size_t ms = tt_pool_member_stack_size(p);
        ck_assert_msg(ms > 0 && ms <= s0, "tt_pool_member_stack_size %zu, member 0 has %zu", ms,
                      s0);
        ck_assert_uint_eq(ms, atomic_load(&s.stack_of[0]) < atomic_load(&s.stack_of[1])
                                  ? atomic_load(&s.stack_of[0])
                                  : atomic_load(&s.stack_of[1]));
#else
        ck_assert_uint_eq(tt_pool_member_stack_size(p), 0);
#endif
        ck_rc(tt_pool_destroy(p), TT_OK);
        /* a stack size makes the members dedicated: joined by the destroy */
        /* the members' exit is checked by tid where the test has them; the
         * joined host thread can still be listed in /proc for a moment */
        ck_assert_int_eq(th_wait_thread_count(before, 5), before);
    }
    /* A default pool's member 0 is the calling thread (participant 0 of its
     * own team's region): its stack is the caller's own. */
#if TT_PARALLEL_ENABLED
    tt_pool_attr *a = NULL;
    ck_rc(tt_pool_attr_create(&a), TT_OK);
    ck_rc(tt_pool_attr_set_threads(a, 2), TT_OK);
    tt_pool *p = NULL;
    ck_rc(tt_pool_create(&p, a), TT_OK);
    tt_pool_attr_destroy(a);
    stack_job s;
    memset(&s, 0, sizeof s);
    s.pool = p;
    tt_exec ex;
    ck_rc(tt_exec_init(&ex, p, 2), TT_OK);
    ck_rc(tt_fork(&ex, 2, job_stack, &s), TT_OK);
    size_t mine = 0;
    pthread_attr_t pa;
    if (pthread_getattr_np(pthread_self(), &pa) == 0) {
        pthread_attr_getstacksize(&pa, &mine);
        pthread_attr_destroy(&pa);
    }
    ck_assert_msg(atomic_load(&s.stack_of[0]) == mine,
                  "a default pool's member 0 has a %zu-byte stack, the caller %zu",
                  atomic_load(&s.stack_of[0]), mine);
    ck_rc(tt_pool_destroy(p), TT_OK);
#endif
}
END_TEST

START_TEST(test_pool_qos)
{
    static const tt_qos qs[] = {TT_QOS_BACKGROUND, TT_QOS_UTILITY, TT_QOS_USER_INITIATED,
                                TT_QOS_USER_INTERACTIVE};
    for (size_t i = 0; i < TT_ARRAY_LEN(qs); i++) {
        int before = th_count_threads_settled();
        tt_pool_attr *a = NULL;
        ck_rc(tt_pool_attr_create(&a), TT_OK);
        ck_rc(tt_pool_attr_set_threads(a, 2), TT_OK);
        ck_rc(tt_pool_attr_set_qos(a, qs[i]), TT_OK);
        ck_rc(tt_pool_attr_set_spin_polls(a, th_test_spin_polls()), TT_OK);
        tt_pool *p = NULL;
        ck_rc(tt_pool_create(&p, a), TT_OK);
        tt_pool_attr_destroy(a);
        cnt c = {0};
        tt_exec ex;
        ck_rc(tt_exec_init(&ex, p, 2), TT_OK);
        ck_rc(tt_fork(&ex, 4, job_cnt, &c), TT_OK);
        ck_assert_int_eq(atomic_load(&c.n), 4);
        ck_rc(tt_pool_destroy(p), TT_OK);
        /* a QoS makes the members dedicated: joined by the destroy */
        /* the members' exit is checked by tid where the test has them; the
         * joined host thread can still be listed in /proc for a moment */
        ck_assert_int_eq(th_wait_thread_count(before, 5), before);
    }
}
END_TEST

static Suite *attr_suite(void)
{
    Suite *s = suite_create("attr");
    TCase *tc = th_tcase(s, "attributes", 10);
    tcase_add_test(tc, test_attr_defaults);
    tcase_add_test(tc, test_attr_round_trips);
    tcase_add_test(tc, test_attr_invalid);
    tc = th_tcase(s, "widths", 30);
    tcase_add_test(tc, test_pool_width_zero_is_all_cpus);
    tcase_add_test(tc, test_pool_width_zero_ignores_narrowed_affinity);
    tcase_add_test(tc, test_pool_default_width_is_max_threads);
    tcase_add_test(tc, test_pool_absurd_widths);
    tcase_add_test(tc, test_pool_accessors);
    tcase_add_test(tc, test_pool_no_spin);
    tc = th_tcase(s, "dedicated", 60);
    tcase_add_test(tc, test_pool_thread_names);
    tcase_add_test(tc, test_pool_on_start);
    tcase_add_test(tc, test_pool_stack_size);
    tcase_add_test(tc, test_pool_qos);
    return s;
}

int main(void) { return th_run_suite(attr_suite()); }
