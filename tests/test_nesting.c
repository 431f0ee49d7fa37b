/*
 * test_nesting.c -- where entries come from and where they run: a plain
 * thread (enters the pool once and waits; its tasks run on members), a
 * member of the same pool (nested entries inside jobs: the first task on
 * the member itself, no install), a member of another pool (a job of pool
 * A entering pool B is a plain thread of B), a new root minted inside a
 * member while the pool is full (runs inline, no deadlock), and many
 * pthreads calling into one pool at once, each root within its own budget.
 * With the ledger: installs count one per entry from a plain thread
 * (dispatched, or inline: an inline run takes its slot), none for nested
 * entries.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "tt_test.h"

/* ------------------------------------------------------------------------ */
/* Placement by caller                                                       */
/* ------------------------------------------------------------------------ */

typedef struct place_ctx {
    tt_pool *pool;
    pthread_t caller;
    _Atomic int jobs, on_caller, on_member;
    /* nested */
    _Atomic int nested_first_elsewhere;
    _Atomic int nested_jobs;
    _Atomic int nested_rc_bad;
#if TT_LEDGER_ENABLED
    _Atomic uint64_t installs_in_job_delta;
#endif
} place_ctx;

static void place_leaf(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    (void)child;
    place_ctx *c = arg;
    atomic_fetch_add(&c->jobs, 1);
    if (pthread_equal(pthread_self(), c->caller))
        atomic_fetch_add(&c->on_caller, 1);
    if (tt_pool_is_member(c->pool, NULL))
        atomic_fetch_add(&c->on_member, 1);
}

typedef struct nested_arg {
    place_ctx *c;
    pthread_t outer;
} nested_arg;

static void nested_leaf(void *arg, unsigned i, tt_exec *child)
{
    (void)child;
    nested_arg *a = arg;
    atomic_fetch_add(&a->c->nested_jobs, 1);
    if (i == 0 && !pthread_equal(pthread_self(), a->outer))
        atomic_fetch_add(&a->c->nested_first_elsewhere, 1);
}

static void nested_range(void *arg, size_t b, size_t e)
{
    (void)e;
    nested_leaf(arg, b == 0 ? 0 : 1, NULL);
}

/* A job on a member that makes nested entries on its child. */
static void place_nesting_job(void *arg, unsigned i, tt_exec *child)
{
    place_ctx *c = arg;
    place_leaf(c, i, child);
    bool member = tt_pool_is_member(c->pool, NULL);
#if TT_LEDGER_ENABLED
    uint64_t inst0 = tt_ledger_installs(c->pool);
#endif
    nested_arg a = {c, pthread_self()};
    tt_exec g;
    tt_exec_reborrow(child, &g);
    unsigned cb = tt_exec_budget(child);
    if (tt_fork(&g, cb + 1, nested_leaf, &a) != TT_OK)
        atomic_fetch_add(&c->nested_rc_bad, 1);
    tt_exec_reborrow(child, &g);
    if (tt_for_ranges(&g, 100, 1, nested_range, &a) != TT_OK)
        atomic_fetch_add(&c->nested_rc_bad, 1);
    (void)member;
#if TT_LEDGER_ENABLED
    if (member)
        atomic_fetch_add(&c->installs_in_job_delta, tt_ledger_installs(c->pool) - inst0);
#endif
}

static void place_bcast(void *arg, unsigned i) { place_leaf(arg, i, NULL); }
static void place_ext(void *arg, unsigned w) { place_leaf(arg, w, NULL); }

enum { P_FORK, P_RANGES, P_BCAST, P_EXT };

static void place_range(void *arg, size_t b, size_t e)
{
    (void)b;
    (void)e;
    place_leaf(arg, 0, NULL);
}

static int place_entry(int kind, tt_exec *ex, place_ctx *c, unsigned jobs)
{
    switch (kind) {
    case P_FORK: return tt_fork(ex, jobs, place_leaf, c);
    case P_RANGES: return tt_for_ranges(ex, jobs * 10, 10, place_range, c);
    case P_BCAST: return tt_broadcast(ex, place_bcast, c);
    default: return tt_external(ex, place_ext, c);
    }
}

START_TEST(test_placement_plain_thread)
{
    tt_pool *pool = th_make_pool(4);
    unsigned rounds = th_iters(20);
    for (unsigned r = 0; r < rounds; r++) {
        for (int kind = P_FORK; kind <= P_EXT; kind++) {
            for (unsigned b = 1; b <= 4; b++) {
                place_ctx c;
                memset(&c, 0, sizeof c);
                c.pool = pool;
                c.caller = pthread_self();
                tt_exec ex;
                ck_assert_int_eq(tt_exec_init(&ex, pool, b), TT_OK);
                unsigned eb = tt_exec_budget(&ex);
                unsigned tasks = eb; /* jobs == budget */
#if TT_LEDGER_ENABLED
                uint64_t i0 = tt_ledger_installs(pool);
#endif
                ck_assert_int_eq(place_entry(kind, &ex, &c, eb), TT_OK);
                int jobs = atomic_load(&c.jobs);
                ck_assert_int_eq(jobs, kind == P_EXT ? 1 : (int)tasks);
                bool dispatched = eb > 1;
                if (dispatched) {
                    /* a plain thread's root is a region on its own team: the
                     * caller is participant 0 and runs one task (member 0);
                     * a full-width tt_external runs on the caller outside
                     * any region of ours */
                    ck_assert_msg(atomic_load(&c.on_caller) == 1,
                                  "kind %d budget %u: %d tasks ran on the plain caller", kind, eb,
                                  atomic_load(&c.on_caller));
                    bool top = kind == P_EXT && eb == tt_pool_width(pool);
                    ck_assert_int_eq(atomic_load(&c.on_member), top ? 0 : jobs);
                } else {
                    /* inline: on the caller, not a member */
                    ck_assert_msg(atomic_load(&c.on_caller) == jobs,
                                  "kind %d budget 1: work ran off the caller", kind);
                    ck_assert_int_eq(atomic_load(&c.on_member), 0);
                }
#if TT_LEDGER_ENABLED
                /* one acquisition per entry: the members of a dispatched
                 * root, or the one slot an inline run from a plain thread
                 * takes so that the width caps every root together */
                uint64_t d = tt_ledger_installs(pool) - i0;
                ck_assert_msg(d == 1u, "kind %d budget %u: %llu installs for one entry", kind, eb,
                              (unsigned long long)d);
#endif
            }
        }
        /* one job of a wider token runs inline on the caller */
        place_ctx c;
        memset(&c, 0, sizeof c);
        c.pool = pool;
        c.caller = pthread_self();
        tt_exec ex;
        ck_assert_int_eq(tt_exec_init(&ex, pool, 4), TT_OK);
#if TT_LEDGER_ENABLED
        uint64_t i0 = tt_ledger_installs(pool);
#endif
        ck_assert_int_eq(tt_fork(&ex, 1, place_leaf, &c), TT_OK);
        ck_assert_int_eq(tt_exec_init(&ex, pool, 4), TT_OK);
        ck_assert_int_eq(tt_for_ranges(&ex, 5, 10, place_range, &c), TT_OK);
        ck_assert_int_eq(atomic_load(&c.on_caller), 2);
#if TT_LEDGER_ENABLED
        /* each inline run took one slot, no members */
        ck_assert_uint_eq(tt_ledger_installs(pool) - i0, 2);
#endif
        /* serial tokens never install */
        tt_exec_init_serial(&ex);
        ck_assert_int_eq(tt_fork(&ex, 3, place_leaf, &c), TT_OK);
        ck_assert_int_eq(atomic_load(&c.on_caller), 5);
#if TT_LEDGER_ENABLED
        ck_assert_uint_eq(tt_ledger_installs(pool) - i0, 2);
#endif
    }
    th_free_pool(pool);
}
END_TEST

START_TEST(test_placement_nested_in_member)
{
    tt_pool *pool = th_make_pool(8);
    static const unsigned cases[][2] = {{8, 2}, {8, 4}, {6, 3}, {8, 8}, {4, 2}};
    unsigned rounds = th_iters(10);
    for (unsigned r = 0; r < rounds; r++) {
        for (size_t k = 0; k < TT_ARRAY_LEN(cases); k++) {
            place_ctx c;
            memset(&c, 0, sizeof c);
            c.pool = pool;
            c.caller = pthread_self();
            tt_exec ex;
            ck_assert_int_eq(tt_exec_init(&ex, pool, cases[k][0]), TT_OK);
#if TT_LEDGER_ENABLED
            uint64_t i0 = tt_ledger_installs(pool);
#endif
            ck_assert_int_eq(tt_fork(&ex, cases[k][1], place_nesting_job, &c), TT_OK);
            ck_assert_int_eq(atomic_load(&c.nested_rc_bad), 0);
            ck_assert_int_eq(atomic_load(&c.jobs), (int)cases[k][1]);
            ck_assert_msg(atomic_load(&c.nested_first_elsewhere) == 0,
                          "a member's nested entry did not run its first task itself");
#if TT_LEDGER_ENABLED
            /* one install for the root entry, none for the nested ones */
            ck_assert_uint_eq(tt_ledger_installs(pool) - i0, 1);
            ck_assert_uint_eq(atomic_load(&c.installs_in_job_delta), 0);
#endif
        }
    }
    th_free_pool(pool);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* A member minting new roots on its own pool                                */
/* ------------------------------------------------------------------------ */

typedef struct full_ctx {
    tt_pool *pool;
    _Atomic int inner, inner_off_thread, rc_bad, outer;
    pthread_t outer_thread[16];
} full_ctx;

typedef struct full_inner {
    full_ctx *c;
    pthread_t outer;
} full_inner;

static void full_inner_job(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    (void)child;
    full_inner *a = arg;
    atomic_fetch_add(&a->c->inner, 1);
    if (!pthread_equal(pthread_self(), a->outer))
        atomic_fetch_add(&a->c->inner_off_thread, 1);
}

static void full_outer_job(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    (void)child;
    full_ctx *c = arg;
    atomic_fetch_add(&c->outer, 1);
    /* every member is held by the outer root: a new root finds none free
     * and runs its tasks here, without waiting */
    tt_exec r;
    if (tt_exec_init(&r, c->pool, 4) != TT_OK) {
        atomic_fetch_add(&c->rc_bad, 1);
        return;
    }
    full_inner a = {c, pthread_self()};
    if (tt_fork(&r, 4, full_inner_job, &a) != TT_OK)
        atomic_fetch_add(&c->rc_bad, 1);
    if (tt_exec_init(&r, c->pool, 3) != TT_OK ||
        tt_fork(&r, 2, full_inner_job, &a) != TT_OK)
        atomic_fetch_add(&c->rc_bad, 1);
}

START_TEST(test_member_new_root_when_full)
{
    tt_pool *pool = th_make_pool(4);
    unsigned w = tt_pool_width(pool);
    unsigned rounds = th_iters(20);
    for (unsigned r = 0; r < rounds; r++) {
        full_ctx c;
        memset(&c, 0, sizeof c);
        c.pool = pool;
        tt_exec ex;
        ck_assert_int_eq(tt_exec_init(&ex, pool, w), TT_OK);
        ck_assert_int_eq(tt_fork(&ex, w, full_outer_job, &c), TT_OK);
        ck_assert_int_eq(atomic_load(&c.rc_bad), 0);
        ck_assert_int_eq(atomic_load(&c.outer), (int)w);
        ck_assert_int_eq(atomic_load(&c.inner), (int)(w * 6));
        ck_assert_msg(atomic_load(&c.inner_off_thread) == 0,
                      "a member's new root ran tasks elsewhere while the pool was full");
    }
    th_free_pool(pool);
}
END_TEST

/* New roots minted in members while the pool has free members: they use
 * them (and keep within their budget). */
typedef struct spare_ctx {
    tt_pool *pool;
    th_live live[8];
    _Atomic int rc_bad, inner;
} spare_ctx;

typedef struct spare_inner {
    spare_ctx *c;
    unsigned idx;
} spare_inner;

static void spare_inner_job(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    (void)child;
    spare_inner *a = arg;
    th_live_enter(&a->c->live[a->idx]);
    atomic_fetch_add(&a->c->inner, 1);
    th_spin_us(20);
    th_live_leave(&a->c->live[a->idx]);
}

static void spare_outer_job(void *arg, unsigned i, tt_exec *child)
{
    (void)child;
    spare_ctx *c = arg;
    tt_exec r;
    spare_inner a = {c, i};
    if (tt_exec_init(&r, c->pool, 3) != TT_OK || tt_fork(&r, 6, spare_inner_job, &a) != TT_OK)
        atomic_fetch_add(&c->rc_bad, 1);
}

START_TEST(test_member_new_root_with_spare)
{
    tt_pool *pool = th_make_pool(8);
    unsigned rounds = th_iters(20);
    for (unsigned r = 0; r < rounds; r++) {
        spare_ctx c;
        memset(&c, 0, sizeof c);
        c.pool = pool;
        for (int k = 0; k < 8; k++)
            th_live_init(&c.live[k]);
        tt_exec ex;
        ck_assert_int_eq(tt_exec_init(&ex, pool, 2), TT_OK);
        ck_assert_int_eq(tt_fork(&ex, 2, spare_outer_job, &c), TT_OK);
        ck_assert_int_eq(atomic_load(&c.rc_bad), 0);
        ck_assert_int_eq(atomic_load(&c.inner), 12);
        for (int k = 0; k < 2; k++)
            ck_assert_msg(th_live_max(&c.live[k]) <= 3,
                          "a member's budget-3 root ran %d tasks at once", th_live_max(&c.live[k]));
    }
    th_free_pool(pool);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* A member of another pool                                                  */
/* ------------------------------------------------------------------------ */

typedef struct cross_ctx {
    tt_pool *a, *b;
    unsigned b_budget;
    _Atomic int a_jobs, b_jobs, b_on_b_member, b_on_a_thread, rc_bad, a_job_is_b_member;
    _Atomic int b_bcast, b_bcast_bad, b_ext;
    th_live b_live[16];
    /* A -> B -> A */
    bool back_to_a;
    _Atomic int back_jobs, back_on_a_member;
#if TT_LEDGER_ENABLED
    _Atomic uint64_t b_installs;
#endif
} cross_ctx;

typedef struct cross_arg {
    cross_ctx *c;
    unsigned a_job;
    pthread_t a_thread;
} cross_arg;

static void back_job(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    (void)child;
    cross_ctx *c = arg;
    atomic_fetch_add(&c->back_jobs, 1);
    if (tt_pool_is_member(c->a, NULL))
        atomic_fetch_add(&c->back_on_a_member, 1);
}

static void b_job(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    (void)child;
    cross_arg *x = arg;
    cross_ctx *c = x->c;
    th_live_enter(&c->b_live[x->a_job]);
    atomic_fetch_add(&c->b_jobs, 1);
    if (tt_pool_is_member(c->b, NULL))
        atomic_fetch_add(&c->b_on_b_member, 1);
    if (pthread_equal(pthread_self(), x->a_thread))
        atomic_fetch_add(&c->b_on_a_thread, 1);
    th_spin_us(10);
    th_live_leave(&c->b_live[x->a_job]);
    if (c->back_to_a && i == 0) {
        /* from a member of B back into A (a plain thread of A) */
        tt_exec r;
        if (tt_exec_init(&r, c->a, 2) != TT_OK || tt_fork(&r, 2, back_job, c) != TT_OK)
            atomic_fetch_add(&c->rc_bad, 1);
    }
}

static void b_bcast(void *arg, unsigned i)
{
    cross_arg *x = arg;
    unsigned k = 0;
    atomic_fetch_add(&x->c->b_bcast, 1);
    if (TT_PARALLEL_ENABLED && (!tt_pool_is_member(x->c->b, &k) || k != i))
        atomic_fetch_add(&x->c->b_bcast_bad, 1);
}

static void b_ext(void *arg, unsigned w)
{
    (void)w;
    cross_arg *x = arg;
    atomic_fetch_add(&x->c->b_ext, 1);
}

static void a_job(void *arg, unsigned i, tt_exec *child)
{
    (void)child;
    cross_ctx *c = arg;
    atomic_fetch_add(&c->a_jobs, 1);
    if (TT_PARALLEL_ENABLED && tt_pool_is_member(c->b, NULL))
        atomic_fetch_add(&c->a_job_is_b_member, 1);
    cross_arg x = {c, i, pthread_self()};
    tt_exec r;
    if (tt_exec_init(&r, c->b, c->b_budget) != TT_OK) {
        atomic_fetch_add(&c->rc_bad, 1);
        return;
    }
    unsigned bb = tt_exec_budget(&r);
    if (tt_fork(&r, bb, b_job, &x) != TT_OK)
        atomic_fetch_add(&c->rc_bad, 1);
    if (tt_exec_init(&r, c->b, c->b_budget) != TT_OK || tt_broadcast(&r, b_bcast, &x) != TT_OK)
        atomic_fetch_add(&c->rc_bad, 1);
    if (tt_exec_init(&r, c->b, c->b_budget) != TT_OK || tt_external(&r, b_ext, &x) != TT_OK)
        atomic_fetch_add(&c->rc_bad, 1);
}

static void run_cross(tt_pool *a, tt_pool *b, unsigned a_budget, unsigned a_jobs,
                      unsigned b_budget, bool back)
{
    cross_ctx *c = calloc(1, sizeof *c);
    ck_assert_ptr_nonnull(c);
    c->a = a;
    c->b = b;
    c->b_budget = b_budget;
    c->back_to_a = back;
    for (int k = 0; k < 16; k++)
        th_live_init(&c->b_live[k]);
    tt_exec ex;
#if TT_LEDGER_ENABLED
    uint64_t i0 = tt_ledger_installs(b);
#endif
    ck_assert_int_eq(tt_exec_init(&ex, a, a_budget), TT_OK);
    ck_assert_int_eq(tt_fork(&ex, a_jobs, a_job, c), TT_OK);
#if TT_LEDGER_ENABLED
    atomic_store(&c->b_installs, tt_ledger_installs(b) - i0);
#endif
    ck_assert_int_eq(atomic_load(&c->rc_bad), 0);
    ck_assert_int_eq(atomic_load(&c->a_jobs), (int)a_jobs);
    unsigned bb = th_expect_budget(tt_pool_width(b), b_budget);
    ck_assert_int_eq(atomic_load(&c->b_jobs), (int)(a_jobs * bb));
    ck_assert_int_eq(atomic_load(&c->a_job_is_b_member), 0);
    if (TT_PARALLEL_ENABLED && bb > 1) {
        /* B's tasks run on B's members. A member of A is inside A's region:
         * its B root runs on B's private crew, and nothing of it on the A
         * thread. An A job that ran inline on the plain test thread (budget
         * 1) is outside any region: its B root is a region on that thread's
         * own team, which runs B's first task (one job) itself. */
        ck_assert_int_eq(atomic_load(&c->b_on_b_member), atomic_load(&c->b_jobs));
        ck_assert_int_eq(atomic_load(&c->b_on_a_thread), a_budget > 1 ? 0 : (int)a_jobs);
    }
    ck_assert_int_eq(atomic_load(&c->b_bcast), (int)(a_jobs * bb));
    ck_assert_int_eq(atomic_load(&c->b_bcast_bad), 0);
    ck_assert_int_eq(atomic_load(&c->b_ext), (int)a_jobs);
    for (unsigned k = 0; k < a_jobs && k < 16; k++)
        ck_assert_msg(th_live_max(&c->b_live[k]) <= (int)bb,
                      "a root of B ran %d tasks at once, budget %u", th_live_max(&c->b_live[k]), bb);
    if (back) {
        ck_assert_int_eq(atomic_load(&c->back_jobs), (int)(a_jobs * 2));
        if (TT_PARALLEL_ENABLED)
            ck_assert_int_eq(atomic_load(&c->back_on_a_member), atomic_load(&c->back_jobs));
    }
#if TT_LEDGER_ENABLED
    if (TT_PARALLEL_ENABLED && bb > 1)
        ck_assert_msg(atomic_load(&c->b_installs) == 3u * a_jobs,
                      "a member of A entering B: %llu installs of B for %u x 3 entries",
                      (unsigned long long)atomic_load(&c->b_installs), a_jobs);
#endif
    free(c);
}

START_TEST(test_member_of_other_pool)
{
    tt_pool *a = th_make_pool(4);
    tt_pool *b = th_make_pool(4);
    unsigned rounds = th_iters(10);
    for (unsigned r = 0; r < rounds; r++) {
        run_cross(a, b, 1, 1, 4, false); /* A's job inline, plain thread */
        run_cross(a, b, 2, 2, 2, false); /* two A members share B */
        run_cross(a, b, 4, 4, 4, false); /* four A members queue for B */
        run_cross(a, b, 4, 2, 3, false);
        run_cross(a, b, 2, 2, 2, true); /* A -> B -> A with room left in A */
    }
    th_free_pool(b);
    th_free_pool(a);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Many threads into one pool                                                */
/* ------------------------------------------------------------------------ */

#define MANY_THREADS 6

typedef struct root_ctx {
    th_live live;
    unsigned budget;
    _Atomic int leaves;
} root_ctx;

static void many_leaf(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    (void)child;
    root_ctx *r = arg;
    th_live_enter(&r->live);
    atomic_fetch_add(&r->leaves, 1);
    th_spin_us(5);
    th_live_leave(&r->live);
}

static void many_range(void *arg, size_t b, size_t e)
{
    (void)b;
    (void)e;
    many_leaf(arg, 0, NULL);
}

static void many_mid(void *arg, unsigned i, tt_exec *child)
{
    root_ctx *r = arg;
    th_live_enter(&r->live);
    th_spin_us(5);
    /* a parent waiting for its children keeps no slot */
    th_live_leave(&r->live);
    int rc = (i % 2) ? tt_fork(child, 3, many_leaf, r) : tt_for_ranges(child, 40, 4, many_range, r);
    TT_CHECK(rc == TT_OK, "nested entry: %s", tt_status_name(rc));
    th_live_enter(&r->live);
    th_live_leave(&r->live);
}

typedef struct many_thread {
    tt_pool *pool;
    unsigned t, roots;
    _Atomic int bad;
    int max_over; /* the worst max - budget seen */
} many_thread;

static void *many_main(void *arg)
{
    many_thread *m = arg;
    uint64_t s = th_seed_child(0x3a17u, m->t);
    m->max_over = -100;
    for (unsigned n = 0; n < m->roots; n++) {
        root_ctx r;
        memset(&r, 0, sizeof r);
        th_live_init(&r.live);
        tt_exec ex;
        unsigned want = 1 + th_rng_below(&s, 4);
        if (tt_exec_init(&ex, m->pool, want) != TT_OK) {
            atomic_fetch_add(&m->bad, 1);
            continue;
        }
        r.budget = tt_exec_budget(&ex);
        int rc;
        switch (th_rng_below(&s, 3)) {
        case 0: rc = tt_fork(&ex, 1 + th_rng_below(&s, 6), many_mid, &r); break;
        case 1: rc = tt_for_ranges(&ex, th_rng_below(&s, 100), 3, many_range, &r); break;
        default: rc = tt_fork(&ex, 1 + th_rng_below(&s, 8), many_leaf, &r); break;
        }
        if (rc != TT_OK)
            atomic_fetch_add(&m->bad, 1);
        int over = th_live_max(&r.live) - (int)r.budget;
        if (over > m->max_over)
            m->max_over = over;
#if TT_LEDGER_ENABLED
        tt_ledger_root root = tt_exec_ledger_root(&ex);
        if (tt_ledger_max_live(root) > r.budget || tt_ledger_live(root) != 0)
            atomic_fetch_add(&m->bad, 1);
#endif
    }
    return NULL;
}

START_TEST(test_many_threads_one_pool)
{
    tt_pool *pool = th_make_pool(4);
    many_thread m[MANY_THREADS];
    pthread_t th[MANY_THREADS];
    unsigned roots = th_iters(1000);
    for (unsigned t = 0; t < MANY_THREADS; t++) {
        memset(&m[t], 0, sizeof m[t]);
        m[t].pool = pool;
        m[t].t = t;
        m[t].roots = roots;
        ck_assert_int_eq(pthread_create(&th[t], NULL, many_main, &m[t]), 0);
    }
    for (unsigned t = 0; t < MANY_THREADS; t++)
        ck_assert(th_join_timeout(th[t], 100));
    for (unsigned t = 0; t < MANY_THREADS; t++) {
        ck_assert_msg(atomic_load(&m[t].bad) == 0, "thread %u: %d failures", t,
                      atomic_load(&m[t].bad));
        ck_assert_msg(m[t].max_over <= 0, "thread %u: a root ran %d tasks over its budget", t,
                      m[t].max_over);
    }
    th_assert_no_failures();
    th_free_pool(pool);
}
END_TEST

/* Deep nesting: forks of two, six levels, from a full-width root. */
typedef struct deep_ctx {
    th_live live;
    _Atomic int leaves;
} deep_ctx;

static void deep_job(void *arg, unsigned i, tt_exec *child);

typedef struct deep_arg {
    deep_ctx *c;
    unsigned depth;
} deep_arg;

static void deep_job(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    deep_arg *a = arg;
    th_live_enter(&a->c->live);
    if (a->depth == 0) {
        atomic_fetch_add(&a->c->leaves, 1);
        th_spin_us(3);
        th_live_leave(&a->c->live);
        return;
    }
    th_live_leave(&a->c->live);
    deep_arg d = {a->c, a->depth - 1};
    int rc = tt_fork(child, 2, deep_job, &d);
    TT_CHECK(rc == TT_OK, "deep fork: %s", tt_status_name(rc));
}

START_TEST(test_deep_nesting)
{
    tt_pool *pool = th_make_pool(8);
    unsigned rounds = th_iters(20);
    for (unsigned r = 0; r < rounds; r++) {
        deep_ctx c;
        memset(&c, 0, sizeof c);
        th_live_init(&c.live);
        deep_arg a = {&c, 6};
        tt_exec ex;
        ck_assert_int_eq(tt_exec_init(&ex, pool, 8), TT_OK);
        unsigned b = tt_exec_budget(&ex);
        ck_assert_int_eq(tt_fork(&ex, 2, deep_job, &a), TT_OK);
        ck_assert_int_eq(atomic_load(&c.leaves), 128);
        ck_assert_msg(th_live_max(&c.live) <= (int)b, "deep nesting: %d live, budget %u",
                      th_live_max(&c.live), b);
#if TT_LEDGER_ENABLED
        tt_ledger_root root = tt_exec_ledger_root(&ex);
        ck_assert_uint_le(tt_ledger_max_live(root), b);
        ck_assert_uint_eq(tt_ledger_live(root), 0);
#endif
    }
    th_assert_no_failures();
    th_free_pool(pool);
}
END_TEST

static Suite *nesting_suite(void)
{
    Suite *s = suite_create("nesting");
    TCase *tc = th_tcase(s, "placement", 60);
    tcase_add_test(tc, test_placement_plain_thread);
    tcase_add_test(tc, test_placement_nested_in_member);
    tc = th_tcase(s, "members", 60);
    tcase_add_test(tc, test_member_new_root_when_full);
    tcase_add_test(tc, test_member_new_root_with_spare);
    tcase_add_test(tc, test_member_of_other_pool);
    tcase_add_test(tc, test_deep_nesting);
    tc = th_tcase(s, "many_threads", 120);
    tcase_add_test(tc, test_many_threads_one_pool);
    return s;
}

int main(void) { return th_run_suite(nesting_suite()); }
