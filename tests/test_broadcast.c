/*
 * test_broadcast.c -- tt_broadcast: fn(i) for i in 0..budget-1 once each,
 * all at once (a barrier of `budget` parties completes), fn(i) on pool
 * member i; refusals (TT_REFUSED_FORK_CHILD for fork children, also
 * through reborrow and limit; TT_REFUSED_CALLER_IN_POOL from a member of
 * the same pool) that consume nothing; tt_can_broadcast agreeing with
 * tt_broadcast in every case; broadcasts from a member of another pool;
 * concurrent broadcasts from several plain threads, seen in the same order
 * by every member.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "tt_test.h"

/* can_broadcast and broadcast agree: call both, return the broadcast's
 * code. fn must be non-NULL. Any thread. */
static int bcast_agree(tt_exec *ex, tt_bcast_fn fn, void *arg, const char *what)
{
    bool can = tt_can_broadcast(ex);
    int rc = tt_broadcast(ex, fn, arg);
    TT_CHECK(can == (rc == TT_OK), "%s: tt_can_broadcast %s but tt_broadcast returned %s", what,
             can ? "true" : "false", tt_status_name(rc));
    return rc;
}

typedef struct bc_rec {
    tt_pool *pool;
    unsigned budget;
    th_tbarrier bar;
    pthread_t caller;
    _Atomic int ran[64];
    _Atomic int member_of[64];
    _Atomic int barrier_bad;
    _Atomic int on_caller;
    _Atomic int calls;
} bc_rec;

static void rec_init(bc_rec *r, tt_pool *pool, unsigned budget)
{
    memset(r, 0, sizeof *r);
    r->pool = pool;
    r->budget = budget;
    r->caller = pthread_self();
    th_tbarrier_init(&r->bar, budget);
    for (int i = 0; i < 64; i++)
        atomic_store(&r->member_of[i], -2);
}

static void rec_destroy(bc_rec *r) { th_tbarrier_destroy(&r->bar); }

static void fn_rec(void *arg, unsigned i)
{
    bc_rec *r = arg;
    atomic_fetch_add(&r->calls, 1);
    if (i >= 64) {
        TT_CHECK(0, "broadcast index %u", i);
        return;
    }
    atomic_fetch_add(&r->ran[i], 1);
    unsigned k = 0;
    atomic_store(&r->member_of[i], tt_pool_is_member(r->pool, &k) ? (int)k : -1);
    if (pthread_equal(pthread_self(), r->caller))
        atomic_fetch_add(&r->on_caller, 1);
    /* all `budget` calls run at once: twice through the barrier */
    for (int round = 0; round < 2; round++)
        if (th_tbarrier_wait(&r->bar, 20) < 0)
            atomic_fetch_add(&r->barrier_bad, 1);
}

/* Checks of one broadcast of budget b from a plain thread (test thread). */
static void check_bcast(bc_rec *r, unsigned b, const char *msg)
{
    ck_assert_msg(atomic_load(&r->calls) == (int)b, "%s: %d calls for budget %u", msg,
                  atomic_load(&r->calls), b);
    for (unsigned i = 0; i < b; i++)
        ck_assert_msg(atomic_load(&r->ran[i]) == 1, "%s: fn(%u) ran %d times", msg, i,
                      atomic_load(&r->ran[i]));
    ck_assert_msg(atomic_load(&r->barrier_bad) == 0,
                  "%s: the calls did not all run at once (a barrier of %u timed out)", msg, b);
    if (b >= 2) {
        for (unsigned i = 0; i < b; i++)
            ck_assert_msg(atomic_load(&r->member_of[i]) == (int)i,
                          "%s: fn(%u) ran on member %d", msg, i, atomic_load(&r->member_of[i]));
        /* the plain caller is participant 0 of its own region */
        ck_assert_msg(atomic_load(&r->on_caller) == 1, "%s: %d calls ran on the plain caller",
                      msg, atomic_load(&r->on_caller));
    } else {
        /* budget 1 runs inline */
        ck_assert_msg(atomic_load(&r->on_caller) == 1, "%s: budget 1 did not run inline", msg);
    }
}

START_TEST(test_broadcast_members_and_barrier)
{
    static const unsigned widths[] = {2, 4, 8};
    unsigned rounds = th_iters(10);
    for (size_t wi = 0; wi < TT_ARRAY_LEN(widths); wi++) {
        tt_pool *pool = th_make_pool(widths[wi]);
        unsigned w = tt_pool_width(pool);
        for (unsigned round = 0; round < rounds; round++) {
            for (unsigned b = 1; b <= w + 1; b++) {
                tt_exec ex;
                ck_assert_int_eq(tt_exec_init(&ex, pool, b), TT_OK);
                unsigned eb = tt_exec_budget(&ex);
                ck_assert_uint_eq(eb, b < w ? b : w);
                bc_rec r;
                rec_init(&r, pool, eb);
                int rc = bcast_agree(&ex, fn_rec, &r, "root");
                char msg[64];
                snprintf(msg, sizeof msg, "width %u budget %u", w, eb);
                ck_assert_msg(rc == TT_OK, "%s: %s", msg, tt_status_name(rc));
                check_bcast(&r, eb, msg);
                rec_destroy(&r);
                /* consumed now */
                ck_assert(!tt_can_broadcast(&ex));
                ck_assert_int_eq(tt_broadcast(&ex, fn_rec, &r), TT_ECONSUMED);
            }
        }
        th_free_pool(pool);
    }
    th_assert_no_failures();
}
END_TEST

START_TEST(test_broadcast_reborrow_limit_of_root)
{
    /* roots, and their reborrows and limits, are eligible */
    tt_pool *pool = th_make_pool(4);
    unsigned w = tt_pool_width(pool);
    tt_exec p;
    ck_assert_int_eq(tt_exec_init(&p, pool, 4), TT_OK);
    for (unsigned lim = 1; lim <= 4; lim++) {
        tt_exec c;
        tt_exec_reborrow(&p, &c);
        tt_exec_limit(&c, lim);
        unsigned eb = tt_exec_budget(&c);
        ck_assert_uint_eq(eb, lim < w ? lim : w);
        bc_rec r;
        rec_init(&r, pool, eb);
        ck_assert_int_eq(bcast_agree(&c, fn_rec, &r, "limited reborrow"), TT_OK);
        check_bcast(&r, eb, "limited reborrow of a root");
        rec_destroy(&r);
    }
    /* the parent, then itself limited */
    tt_exec_limit(&p, 2);
    bc_rec r;
    rec_init(&r, pool, tt_exec_budget(&p));
    ck_assert_int_eq(bcast_agree(&p, fn_rec, &r, "limited root"), TT_OK);
    check_bcast(&r, tt_exec_budget(&p), "limited root");
    rec_destroy(&r);
    /* a serial token broadcasts inline */
    tt_exec s;
    tt_exec_init_serial(&s);
    rec_init(&r, pool, 1);
    ck_assert_int_eq(bcast_agree(&s, fn_rec, &r, "serial"), TT_OK);
    check_bcast(&r, 1, "serial token");
    rec_destroy(&r);
    th_free_pool(pool);
    th_assert_no_failures();
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Refusals                                                                  */
/* ------------------------------------------------------------------------ */

typedef struct refuse_ctx {
    tt_pool *pool;  /* the pool of the fork */
    tt_pool *other; /* another pool, or NULL */
    _Atomic int jobs;
    _Atomic int fn_calls;
} refuse_ctx;

static void fn_count(void *arg, unsigned i)
{
    (void)i;
    atomic_fetch_add(&((refuse_ctx *)arg)->fn_calls, 1);
}

static void job_count(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    (void)child;
    atomic_fetch_add((_Atomic int *)arg, 1);
}

static void job_refusals(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    refuse_ctx *c = arg;
    atomic_fetch_add(&c->jobs, 1);
    bool member = tt_pool_is_member(c->pool, NULL);
#if !TT_PARALLEL_ENABLED
    TT_CHECK(!member, "a member without parallel");
#endif
    int before = atomic_load(&c->fn_calls);

    /* the fork child itself, a reborrow of it, a limit of that */
    int rc = bcast_agree(child, fn_count, c, "fork child");
    TT_CHECK(rc == TT_REFUSED_FORK_CHILD, "broadcast on a fork child: %s", tt_status_name(rc));
    tt_exec g;
    tt_exec_reborrow(child, &g);
    rc = bcast_agree(&g, fn_count, c, "reborrowed fork child");
    TT_CHECK(rc == TT_REFUSED_FORK_CHILD, "broadcast on a reborrowed fork child: %s",
             tt_status_name(rc));
    tt_exec_limit(&g, 1);
    rc = bcast_agree(&g, fn_count, c, "limited reborrowed fork child");
    TT_CHECK(rc == TT_REFUSED_FORK_CHILD, "broadcast on a limited reborrow of a fork child: %s",
             tt_status_name(rc));
    tt_exec_finish(&g);
    TT_CHECK(atomic_load(&c->fn_calls) == before, "a refused broadcast ran fn");

    /* a new root of the same pool minted on a member */
    tt_exec r;
    rc = tt_exec_init(&r, c->pool, 2);
    TT_CHECK(rc == TT_OK, "tt_exec_init in a job: %s", tt_status_name(rc));
    rc = bcast_agree(&r, fn_count, c, "root minted in a job");
    if (member) {
        TT_CHECK(rc == TT_REFUSED_CALLER_IN_POOL, "broadcast from a member on its pool: %s",
                 tt_status_name(rc));
        TT_CHECK(atomic_load(&c->fn_calls) == before, "a refused broadcast ran fn");
        /* through reborrow and limit */
        tt_exec rc2;
        tt_exec_reborrow(&r, &rc2);
        int x = bcast_agree(&rc2, fn_count, c, "reborrowed in-pool root");
        TT_CHECK(x == TT_REFUSED_CALLER_IN_POOL, "broadcast from a member, reborrow: %s",
                 tt_status_name(x));
        tt_exec_limit(&rc2, 1);
        x = bcast_agree(&rc2, fn_count, c, "limited in-pool root");
        TT_CHECK(x == TT_REFUSED_CALLER_IN_POOL, "broadcast from a member, budget 1: %s",
                 tt_status_name(x));
        tt_exec_finish(&rc2);
        /* the refusals consumed nothing: the root still forks */
        _Atomic int n = 0;
        x = tt_fork(&r, 2, job_count, (void *)&n);
        TT_CHECK(x == TT_OK, "fork on a root after a refusal: %s", tt_status_name(x));
        TT_CHECK(atomic_load(&n) == 2, "the fork after a refusal ran %d jobs", atomic_load(&n));
    } else {
        /* not a member (inline job): the broadcast runs */
        TT_CHECK(rc == TT_OK, "broadcast of a new root from a plain thread: %s",
                 tt_status_name(rc));
    }

    /* the child itself still works after all the refusals */
    _Atomic int n1 = 0;
    rc = tt_fork(child, 1, job_count, (void *)&n1);
    TT_CHECK(rc == TT_OK, "fork on the fork child after refusals: %s", tt_status_name(rc));
    TT_CHECK(atomic_load(&n1) == 1, "fork after refusals did not run");

    /* a root of another pool: from here we are a plain thread of it */
    if (c->other) {
        tt_exec o;
        rc = tt_exec_init(&o, c->other, 4);
        TT_CHECK(rc == TT_OK, "tt_exec_init on the other pool: %s", tt_status_name(rc));
        bc_rec br;
        memset(&br, 0, sizeof br);
        unsigned ob = tt_exec_budget(&o);
        br.pool = c->other;
        br.budget = ob;
        br.caller = pthread_self();
        th_tbarrier_init(&br.bar, ob);
        rc = bcast_agree(&o, fn_rec, &br, "root of another pool");
        TT_CHECK(rc == TT_OK, "broadcast on another pool from a member: %s", tt_status_name(rc));
        TT_CHECK(atomic_load(&br.calls) == (int)ob, "broadcast on the other pool: %d calls",
                 atomic_load(&br.calls));
        TT_CHECK(atomic_load(&br.barrier_bad) == 0, "the other pool's broadcast was not concurrent");
        if (ob >= 2)
            for (unsigned k = 0; k < ob; k++)
                TT_CHECK(atomic_load(&br.member_of[k]) == (int)k,
                         "other pool: fn(%u) ran on member %d", k, atomic_load(&br.member_of[k]));
        th_tbarrier_destroy(&br.bar);
    }
}

START_TEST(test_broadcast_refusals)
{
    tt_pool *pool = th_make_pool(4);
    tt_pool *other = th_make_pool(4);
    static const unsigned cases[][2] = {{1, 1}, {2, 2}, {4, 2}, {4, 4}, {2, 1}};
    for (size_t c = 0; c < TT_ARRAY_LEN(cases); c++) {
        refuse_ctx rc;
        memset(&rc, 0, sizeof rc);
        rc.pool = pool;
        /* the other pool only from one job at a time (its members are
         * few): with one job per case */
        rc.other = cases[c][1] == 1 ? other : NULL;
        tt_exec ex;
        ck_assert_int_eq(tt_exec_init(&ex, pool, cases[c][0]), TT_OK);
        ck_assert_int_eq(tt_fork(&ex, cases[c][1], job_refusals, &rc), TT_OK);
        th_assert_no_failures();
    }
    /* the other pool from a member of the first, with several jobs */
    refuse_ctx rc;
    memset(&rc, 0, sizeof rc);
    rc.pool = pool;
    rc.other = other;
    tt_exec ex;
    ck_assert_int_eq(tt_exec_init(&ex, pool, 2), TT_OK);
    ck_assert_int_eq(tt_fork(&ex, 2, job_refusals, &rc), TT_OK);
    th_assert_no_failures();
    th_free_pool(other);
    th_free_pool(pool);
}
END_TEST

START_TEST(test_can_broadcast_agrees_on_bad_tokens)
{
    tt_pool *pool = th_make_pool(2);
    refuse_ctx c;
    memset(&c, 0, sizeof c);
    tt_exec a, b, g;
    /* consumed */
    ck_assert_int_eq(tt_exec_init(&a, pool, 2), TT_OK);
    tt_exec_finish(&a);
    ck_assert_int_eq(bcast_agree(&a, fn_count, &c, "finished"), TT_ECONSUMED);
    /* copied */
    ck_assert_int_eq(tt_exec_init(&a, pool, 2), TT_OK);
    b = a;
    ck_assert_int_eq(bcast_agree(&b, fn_count, &c, "copy"), TT_ECOPY);
    /* limit 0 */
    tt_exec_limit(&a, 0);
    ck_assert_int_eq(bcast_agree(&a, fn_count, &c, "limit 0"), TT_EINVAL);
    /* garbage */
    memset(&g, 0x5a, sizeof g);
    ck_assert_int_eq(bcast_agree(&g, fn_count, &c, "garbage"), TT_EINVAL);
    /* budget 0 */
    ck_assert_int_eq(tt_exec_init(&a, pool, 0), TT_EINVAL);
    ck_assert_int_eq(bcast_agree(&a, fn_count, &c, "budget 0"), TT_EINVAL);
    /* a reborrow of a consumed parent */
    ck_assert_int_eq(tt_exec_init(&a, pool, 2), TT_OK);
    tt_exec_reborrow(&a, &b);
    tt_exec_finish(&a);
    ck_assert_int_eq(bcast_agree(&b, fn_count, &c, "child of finished"), TT_ECONSUMED);
    ck_assert(!tt_can_broadcast(NULL));
    ck_assert_int_eq(tt_broadcast(NULL, fn_count, &c), TT_EINVAL);
    ck_assert_int_eq(atomic_load(&c.fn_calls), 0);
    th_free_pool(pool);
    th_assert_no_failures();
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Concurrent broadcasts: the same order on every member                     */
/* ------------------------------------------------------------------------ */

#define BC_THREADS 4
#define BC_MAX_IDS 4096

typedef struct order_ctx {
    tt_pool *pool;
    unsigned width;
    unsigned per_thread;
    _Atomic int log_len[64];
    _Atomic int log[8][BC_MAX_IDS]; /* per member: broadcast ids in order */
    _Atomic unsigned budget_of[BC_MAX_IDS];
    _Atomic int calls_of[BC_MAX_IDS];
    _Atomic int bad;
    _Atomic int rc_bad;
} order_ctx;

typedef struct one_bcast {
    order_ctx *o;
    int id;
    th_tbarrier bar;
} one_bcast;

static void fn_order(void *arg, unsigned i)
{
    one_bcast *b = arg;
    order_ctx *o = b->o;
    atomic_fetch_add(&o->calls_of[b->id], 1);
    unsigned k = 0;
    if (TT_PARALLEL_ENABLED && atomic_load(&o->budget_of[b->id]) >= 2) {
        if (!tt_pool_is_member(o->pool, &k) || k != i) {
            atomic_fetch_add(&o->bad, 1);
            return;
        }
    } else {
        k = 0;
    }
    if (k < 8) {
        int n = atomic_fetch_add(&o->log_len[k], 1);
        if (n < BC_MAX_IDS)
            atomic_store(&o->log[k][n], b->id);
    }
    if (th_tbarrier_wait(&b->bar, 20) < 0)
        atomic_fetch_add(&o->bad, 1);
}

typedef struct bthread {
    order_ctx *o;
    unsigned t;
} bthread;

static void *bcast_thread(void *arg)
{
    bthread *bt = arg;
    order_ctx *o = bt->o;
    uint64_t s = th_seed_child(0xb0adca57u, bt->t);
    for (unsigned n = 0; n < o->per_thread; n++) {
        one_bcast b;
        b.o = o;
        b.id = (int)(bt->t * o->per_thread + n);
        unsigned want = 2 + th_rng_below(&s, o->width > 1 ? o->width - 1 : 1);
        tt_exec ex;
        if (tt_exec_init(&ex, o->pool, want) != TT_OK) {
            atomic_fetch_add(&o->rc_bad, 1);
            continue;
        }
        unsigned eb = tt_exec_budget(&ex);
        atomic_store(&o->budget_of[b.id], eb);
        th_tbarrier_init(&b.bar, eb);
        if (tt_broadcast(&ex, fn_order, &b) != TT_OK)
            atomic_fetch_add(&o->rc_bad, 1);
        th_tbarrier_destroy(&b.bar);
    }
    return NULL;
}

START_TEST(test_broadcast_concurrent_order)
{
    static const unsigned widths[] = {4, 8};
    for (size_t wi = 0; wi < TT_ARRAY_LEN(widths); wi++) {
        order_ctx *o = calloc(1, sizeof *o);
        ck_assert_ptr_nonnull(o);
        o->pool = th_make_pool(widths[wi]);
        o->width = tt_pool_width(o->pool);
        o->per_thread = th_iters(500);
        pthread_t th[BC_THREADS];
        bthread bt[BC_THREADS];
        for (unsigned t = 0; t < BC_THREADS; t++) {
            bt[t] = (bthread){o, t};
            ck_assert_int_eq(pthread_create(&th[t], NULL, bcast_thread, &bt[t]), 0);
        }
        for (unsigned t = 0; t < BC_THREADS; t++)
            ck_assert(th_join_timeout(th[t], 60));
        th_assert_no_failures();
        ck_assert_int_eq(atomic_load(&o->rc_bad), 0);
        ck_assert_msg(atomic_load(&o->bad) == 0,
                      "width %u: %d calls off their member or not concurrent", o->width,
                      atomic_load(&o->bad));
        int total = (int)(BC_THREADS * o->per_thread);
        for (int id = 0; id < total; id++)
            ck_assert_int_eq(atomic_load(&o->calls_of[id]), (int)atomic_load(&o->budget_of[id]));
        unsigned mw = o->width < 8 ? o->width : 8;
        if (TT_PARALLEL_ENABLED) {
            /* each member saw each broadcast that reached it once */
            for (unsigned k = 0; k < mw; k++) {
                int want = 0;
                for (int id = 0; id < total; id++)
                    want += atomic_load(&o->budget_of[id]) > k;
                ck_assert_int_eq(atomic_load(&o->log_len[k]), want);
            }
            /* members a < b: member a's sequence restricted to the
             * broadcasts that reached b is b's sequence */
            for (unsigned a = 0; a < mw; a++) {
                for (unsigned b = a + 1; b < mw; b++) {
                    int la = atomic_load(&o->log_len[a]), lb = atomic_load(&o->log_len[b]);
                    int jb = 0;
                    for (int ia = 0; ia < la; ia++) {
                        int id = atomic_load(&o->log[a][ia]);
                        if (atomic_load(&o->budget_of[id]) <= b)
                            continue;
                        ck_assert_msg(jb < lb && atomic_load(&o->log[b][jb]) == id,
                                      "width %u: members %u and %u saw broadcasts in different "
                                      "orders (at %d of member %u)",
                                      o->width, a, b, jb, b);
                        jb++;
                    }
                    ck_assert_int_eq(jb, lb);
                }
            }
        }
        th_free_pool(o->pool);
        free(o);
    }
}
END_TEST

/* A broadcast waits for members held by another root, then completes. */
typedef struct hold_ctx {
    th_flag started, release;
} hold_ctx;

static void job_hold(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    (void)child;
    hold_ctx *h = arg;
    atomic_fetch_add(&h->started.v, 1);
    TT_CHECK(th_flag_wait_ge(&h->release, 1, 30), "holding job never released");
}

typedef struct hold_args {
    tt_pool *pool;
    hold_ctx h;
    int rc;
} hold_args;

static TT_TEST_UNUSED void *holder_main(void *arg)
{
    hold_args *a = arg;
    tt_exec ex;
    a->rc = tt_exec_init(&ex, a->pool, 2);
    if (a->rc == TT_OK)
        a->rc = tt_fork(&ex, 2, job_hold, &a->h);
    return NULL;
}

typedef struct bcaster_args {
    tt_pool *pool;
    bc_rec r;
    int rc;
} bcaster_args;

static TT_TEST_UNUSED void *bcaster_main(void *arg)
{
    bcaster_args *b = arg;
    tt_exec ex;
    /* the broadcasting thread is the plain caller: participant 0 */
    b->r.caller = pthread_self();
    b->rc = tt_exec_init(&ex, b->pool, 4);
    if (b->rc == TT_OK)
        b->rc = tt_broadcast(&ex, fn_rec, &b->r);
    return NULL;
}

START_TEST(test_broadcast_waits_for_members)
{
#if TT_PARALLEL_ENABLED
    tt_pool *pool = th_make_pool(4);
    hold_args a;
    memset(&a, 0, sizeof a);
    a.pool = pool;
    pthread_t t, tb;
    ck_assert_int_eq(pthread_create(&t, NULL, holder_main, &a), 0);
    ck_assert(th_flag_wait_ge(&a.h.started, 2, 20));
    /* two members are held by another root: a budget-4 broadcast waits */
    bcaster_args *b = calloc(1, sizeof *b);
    ck_assert_ptr_nonnull(b);
    b->pool = pool;
    rec_init(&b->r, pool, 4);
    ck_assert_int_eq(pthread_create(&tb, NULL, bcaster_main, b), 0);
    th_sleep_us(30000);
    ck_assert_msg(atomic_load(&b->r.calls) == 0,
                  "%d calls of a broadcast ran while members it needs were held",
                  atomic_load(&b->r.calls));
    th_flag_set(&a.h.release, 1);
    ck_assert(th_join_timeout(tb, 30));
    ck_assert(th_join_timeout(t, 30));
    ck_assert_int_eq(a.rc, TT_OK);
    ck_assert_int_eq(b->rc, TT_OK);
    check_bcast(&b->r, 4, "after waiting for held members");
    rec_destroy(&b->r);
    free(b);
    th_free_pool(pool);
    th_assert_no_failures();
#else
    tt_pool *pool = th_make_pool(4);
    ck_assert_uint_eq(tt_pool_width(pool), 1);
    th_free_pool(pool);
#endif
}
END_TEST

static Suite *broadcast_suite(void)
{
    Suite *s = suite_create("broadcast");
    TCase *tc = th_tcase(s, "members", 120);
    tcase_add_test(tc, test_broadcast_members_and_barrier);
    tcase_add_test(tc, test_broadcast_reborrow_limit_of_root);
    tc = th_tcase(s, "refusals", 60);
    tcase_add_test(tc, test_broadcast_refusals);
    tcase_add_test(tc, test_can_broadcast_agrees_on_bad_tokens);
    tc = th_tcase(s, "concurrent", 120);
    tcase_add_test(tc, test_broadcast_concurrent_order);
    tcase_add_test(tc, test_broadcast_waits_for_members);
    return s;
}

int main(void) { return th_run_suite(broadcast_suite()); }
