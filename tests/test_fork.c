/*
 * test_fork.c -- tt_fork shares: every job once, the children's budgets
 * (shares differ by at most one and sum to the budget; with more jobs than
 * budget, `budget` tasks that take the jobs as they free up, child budget
 * 1), the
 * number of distinct tasks, where the tasks run (a plain thread's tasks on
 * members, a member's first task on itself, one task inline), on pools
 * wider than the machine; tt_fork_fail; and the children of jobs that run
 * after another job destroyed the pool from its member.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "tt_test.h"

#define MAX_JOBS 1024

typedef struct fork_rec {
    pthread_t caller;
    tt_pool *pool;
    _Atomic int ran[MAX_JOBS];
    _Atomic unsigned budget[MAX_JOBS];
    _Atomic int thread_idx[MAX_JOBS]; /* index in the thread set */
    _Atomic int seq[MAX_JOBS];        /* order of the job on its thread */
    _Atomic int on_caller[MAX_JOBS];
    _Atomic int member[MAX_JOBS];     /* member index, -1 when not a member */
    _Atomic int thread_seq[64];       /* jobs seen per thread so far */
    th_thread_set threads;
} fork_rec;

static void rec_init(fork_rec *r, tt_pool *pool)
{
    memset(r, 0, sizeof *r);
    r->caller = pthread_self();
    r->pool = pool;
    th_thread_set_init(&r->threads);
}

static void rec_destroy(fork_rec *r) { th_thread_set_destroy(&r->threads); }

static void rec_job(fork_rec *r, unsigned i, tt_exec *child)
{
    if (i >= MAX_JOBS) {
        TT_CHECK(0, "job index %u out of range", i);
        return;
    }
    atomic_fetch_add(&r->ran[i], 1);
    atomic_store(&r->budget[i], tt_exec_budget(child));
    unsigned t = th_thread_set_add(&r->threads, pthread_self());
    atomic_store(&r->thread_idx[i], (int)t);
    if (t < 64)
        atomic_store(&r->seq[i], atomic_fetch_add(&r->thread_seq[t], 1));
    atomic_store(&r->on_caller[i], pthread_equal(pthread_self(), r->caller));
    unsigned k = 0;
    atomic_store(&r->member[i], tt_pool_is_member(r->pool, &k) ? (int)k : -1);
}

static void job_rec(void *arg, unsigned i, tt_exec *child)
{
    rec_job(arg, i, child);
    /* a little work, so that tasks overlap */
    th_spin_us(2);
}

/* Check one fork of `jobs` jobs on a token of budget `budget` from a plain
 * thread; msg names the case. Uses ck_assert: call on the test's thread. */
static void check_fork_result(fork_rec *r, unsigned jobs, unsigned budget, const char *msg,
                              bool plain_caller)
{
    unsigned ntasks = jobs < budget ? jobs : budget;
    for (unsigned i = 0; i < jobs; i++)
        TT_REQUIRE(atomic_load(&r->ran[i]) == 1, "%s: job %u ran %d times", msg, i,
                      atomic_load(&r->ran[i]));
    for (unsigned i = jobs; i < MAX_JOBS && i < jobs + 4; i++)
        TT_REQUIRE(atomic_load(&r->ran[i]) == 0, "%s: job %u (beyond jobs) ran", msg, i);

    unsigned nthreads = th_thread_set_size(&r->threads);
    TT_REQUIRE(nthreads >= 1 && nthreads <= ntasks, "%s: %u distinct threads for %u tasks",
                  msg, nthreads, ntasks);

    if (jobs <= budget) {
        /* one job per task: budgets differ by at most one and sum to budget */
        unsigned lo = UINT32_MAX, hi = 0, sum = 0;
        for (unsigned i = 0; i < jobs; i++) {
            unsigned b = atomic_load(&r->budget[i]);
            lo = b < lo ? b : lo;
            hi = b > hi ? b : hi;
            sum += b;
        }
        TT_REQUIRE(lo >= 1 && hi - lo <= 1, "%s: child budgets from %u to %u", msg, lo, hi);
        TT_REQUIRE(sum == budget, "%s: child budgets sum to %u, want %u", msg, sum, budget);
    } else {
        for (unsigned i = 0; i < jobs; i++)
            TT_REQUIRE(atomic_load(&r->budget[i]) == 1, "%s: job %u has child budget %u", msg,
                          i, atomic_load(&r->budget[i]));
    }

    /* Each thread takes its jobs in increasing order: task t starts with
     * job t, then, with more jobs than budget, each free task takes the
     * lowest job not yet taken (tt_fork hands jobs out as tasks free up). */
    int count_of[64];
    for (int t = 0; t < 64; t++)
        count_of[t] = 0;
    for (unsigned i = 0; i < jobs; i++) {
        int t = atomic_load(&r->thread_idx[i]);
        TT_REQUIRE(t < 64, "thread index %d", t);
        TT_REQUIRE(atomic_load(&r->seq[i]) == count_of[t],
                      "%s: job %u ran out of order on its thread", msg, i);
        count_of[t]++;
    }
    if (plain_caller && TT_PARALLEL_ENABLED && ntasks > 1) {
        /* A plain thread's root is a region on its own team: one thread per
         * task; the caller is participant 0 and runs the first task itself,
         * starting with job 0; every job runs on a member. Jobs 0..ntasks-1
         * are the tasks' first (job t on task t's thread: jobs 1.. of them
         * off the caller); which task runs a later one is not promised. */
        TT_REQUIRE(nthreads == ntasks, "%s: %u threads ran the %u tasks", msg, nthreads,
                   ntasks);
        for (unsigned i = 0; i < jobs; i++) {
            if (i < ntasks)
                TT_REQUIRE(atomic_load(&r->on_caller[i]) == (i == 0),
                           "%s: job %u ran %s the plain calling thread", msg, i,
                           i == 0 ? "off" : "on");
            TT_REQUIRE(atomic_load(&r->member[i]) >= 0, "%s: job %u ran off the pool", msg, i);
        }
    }
    if (ntasks == 1) {
        /* one task runs inline on the caller, the jobs in order */
        for (unsigned i = 0; i < jobs; i++) {
            TT_REQUIRE(atomic_load(&r->on_caller[i]), "%s: a single task ran off the caller",
                          msg);
            TT_REQUIRE(atomic_load(&r->seq[i]) == (int)i, "%s: job %u ran out of order", msg, i);
        }
    }
    if (!TT_PARALLEL_ENABLED) {
        for (unsigned i = 0; i < jobs; i++)
            TT_REQUIRE(atomic_load(&r->on_caller[i]), "%s: without parallel job %u ran off "
                          "the calling thread", msg, i);
    }
}

static fork_rec g_rec; /* large: keep it off the stack */

START_TEST(test_fork_shares_grid)
{
    unsigned width = 8; /* wider than the 2-CPU machines */
    tt_pool *pool = th_make_pool(width);
    unsigned w = tt_pool_width(pool);
    unsigned rounds = th_iters(20);
    unsigned forks = 0;
    for (unsigned round = 0; round < rounds; round++) {
        for (unsigned b = 1; b <= 8; b++) {
            for (unsigned jobs = 1; jobs <= 20; jobs++) {
                tt_exec ex;
                ck_assert_int_eq(tt_exec_init(&ex, pool, b), TT_OK);
                unsigned eb = tt_exec_budget(&ex);
                ck_assert_uint_eq(eb, b < w ? b : w);
                rec_init(&g_rec, pool);
                int rc = tt_fork(&ex, jobs, job_rec, &g_rec);
                ck_assert_msg(rc == TT_OK, "tt_fork(budget %u, jobs %u): %s", b, jobs,
                              tt_status_name(rc));
                char msg[96];
                snprintf(msg, sizeof msg, "round %u, budget %u (%u), jobs %u", round, b, eb, jobs);
                check_fork_result(&g_rec, jobs, eb, msg, true);
                rec_destroy(&g_rec);
                forks++;
            }
        }
    }
    th_assert_no_failures();
    th_free_pool(pool);
    ck_assert_uint_eq(forks, rounds * 160);
}
END_TEST

START_TEST(test_fork_many_jobs)
{
    tt_pool *pool = th_make_pool(4);
    static const unsigned cases[][2] = {{3, 1000}, {4, 1023}, {2, 999}, {1, 500}, {4, 5}};
    for (size_t c = 0; c < TT_ARRAY_LEN(cases); c++) {
        tt_exec ex;
        ck_assert_int_eq(tt_exec_init(&ex, pool, cases[c][0]), TT_OK);
        unsigned eb = tt_exec_budget(&ex);
        rec_init(&g_rec, pool);
        ck_assert_int_eq(tt_fork(&ex, cases[c][1], job_rec, &g_rec), TT_OK);
        char msg[64];
        snprintf(msg, sizeof msg, "budget %u, jobs %u", eb, cases[c][1]);
        check_fork_result(&g_rec, cases[c][1], eb, msg, true);
#if TT_LEDGER_ENABLED
        /* Jobs handed out as tasks free up: still at most budget at once. */
        ck_assert_uint_le(tt_ledger_max_live(tt_exec_ledger_root(&ex)), eb);
#endif
        rec_destroy(&g_rec);
    }
    th_assert_no_failures();
    th_free_pool(pool);
}
END_TEST

START_TEST(test_fork_clamped_pools)
{
    /* budgets above the width of narrow pools */
    static const unsigned widths[] = {2, 3};
    for (size_t wi = 0; wi < TT_ARRAY_LEN(widths); wi++) {
        tt_pool *pool = th_make_pool(widths[wi]);
        unsigned w = tt_pool_width(pool);
        for (unsigned b = 1; b <= 6; b++) {
            for (unsigned jobs = 1; jobs <= 7; jobs++) {
                tt_exec ex;
                ck_assert_int_eq(tt_exec_init(&ex, pool, b), TT_OK);
                ck_assert_uint_eq(tt_exec_budget(&ex), b < w ? b : w);
                rec_init(&g_rec, pool);
                ck_assert_int_eq(tt_fork(&ex, jobs, job_rec, &g_rec), TT_OK);
                char msg[64];
                snprintf(msg, sizeof msg, "width %u, budget %u, jobs %u", w, b, jobs);
                check_fork_result(&g_rec, jobs, tt_exec_budget(&ex), msg, true);
                rec_destroy(&g_rec);
            }
        }
        th_free_pool(pool);
    }
    th_assert_no_failures();
}
END_TEST

/* Nested: a fork from a member. Its first task runs on the member itself,
 * and the shares of the child token split the same way. */
typedef struct nested_ctx {
    tt_pool *pool;
    unsigned inner_jobs;
    _Atomic int outer_jobs;
    _Atomic int bad_first_task;
    _Atomic int inner_calls;
    _Atomic unsigned inner_budget_sum[64];
    _Atomic int inner_ran[64][32];
    pthread_t outer_thread[64];
    bool outer_member[64];
    unsigned outer_budget[64];
} nested_ctx;

typedef struct inner_arg {
    nested_ctx *n;
    unsigned outer;
} inner_arg;

static void job_inner(void *arg, unsigned i, tt_exec *child)
{
    inner_arg *a = arg;
    nested_ctx *n = a->n;
    atomic_fetch_add(&n->inner_calls, 1);
    if (i < 32)
        atomic_fetch_add(&n->inner_ran[a->outer][i], 1);
    atomic_fetch_add(&n->inner_budget_sum[a->outer], tt_exec_budget(child));
    bool here = pthread_equal(pthread_self(), n->outer_thread[a->outer]);
    unsigned ntasks = n->inner_jobs < n->outer_budget[a->outer] ? n->inner_jobs
                                                                 : n->outer_budget[a->outer];
    if (n->outer_member[a->outer] || (TT_PARALLEL_ENABLED && ntasks > 1)) {
        /* a member runs the first task itself, and so does a plain thread
         * (the outer job ran inline), participant 0 of its own region */
        if (i == 0 && !here)
            atomic_fetch_add(&n->bad_first_task, 1);
    } else if (!here) {
        atomic_fetch_add(&n->bad_first_task, 1); /* one task: inline */
    }
    th_spin_us(2);
}

static void job_outer(void *arg, unsigned i, tt_exec *child)
{
    nested_ctx *n = arg;
    atomic_fetch_add(&n->outer_jobs, 1);
    n->outer_thread[i] = pthread_self();
    n->outer_member[i] = tt_pool_is_member(n->pool, NULL);
    unsigned cb = tt_exec_budget(child);
    n->outer_budget[i] = cb;
    inner_arg a = {n, i};
    int rc = tt_fork(child, n->inner_jobs, job_inner, &a);
    TT_CHECK(rc == TT_OK, "nested tt_fork: %s", tt_status_name(rc));
    /* jobs <= budget: the children's budgets sum to this child's budget */
    if (n->inner_jobs <= cb)
        TT_CHECK(atomic_load(&n->inner_budget_sum[i]) == cb,
                 "nested children's budgets sum to %u, want %u",
                 atomic_load(&n->inner_budget_sum[i]), cb);
}

START_TEST(test_fork_nested_from_member)
{
    tt_pool *pool = th_make_pool(8);
    static const unsigned cases[][3] = {
        /* root budget, outer jobs, inner jobs */
        {8, 2, 4}, {8, 2, 2}, {8, 2, 7}, {8, 4, 2}, {8, 3, 3}, {6, 2, 3}, {8, 1, 8}, {5, 2, 9},
    };
    for (size_t c = 0; c < TT_ARRAY_LEN(cases); c++) {
        nested_ctx *n = calloc(1, sizeof *n);
        ck_assert_ptr_nonnull(n);
        n->pool = pool;
        n->inner_jobs = cases[c][2];
        tt_exec ex;
        ck_assert_int_eq(tt_exec_init(&ex, pool, cases[c][0]), TT_OK);
        ck_assert_int_eq(tt_fork(&ex, cases[c][1], job_outer, n), TT_OK);
        ck_assert_int_eq(atomic_load(&n->outer_jobs), (int)cases[c][1]);
        ck_assert_int_eq(atomic_load(&n->inner_calls), (int)(cases[c][1] * cases[c][2]));
        for (unsigned o = 0; o < cases[c][1]; o++)
            for (unsigned i = 0; i < cases[c][2]; i++)
                ck_assert_int_eq(atomic_load(&n->inner_ran[o][i]), 1);
        ck_assert_msg(atomic_load(&n->bad_first_task) == 0,
                      "case %zu: a nested fork ran a task on the wrong thread", c);
        free(n);
    }
    th_assert_no_failures();
    th_free_pool(pool);
}
END_TEST

/* The arg reaches every job; children are valid tokens of the pool. */
typedef struct arg_ctx {
    unsigned magic;
    _Atomic int bad;
    _Atomic int calls;
} arg_ctx;

static void job_arg(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    arg_ctx *a = arg;
    atomic_fetch_add(&a->calls, 1);
    if (a->magic != 0xfeedu)
        atomic_fetch_add(&a->bad, 1);
    if (tt_exec_budget(child) == 0)
        atomic_fetch_add(&a->bad, 1);
}

START_TEST(test_fork_arg_and_serial)
{
    arg_ctx a = {.magic = 0xfeedu};
    tt_exec s;
    tt_exec_init_serial(&s);
    ck_assert_int_eq(tt_fork(&s, 7, job_arg, &a), TT_OK);
    tt_pool *pool = th_make_pool(4);
    tt_exec ex;
    ck_assert_int_eq(tt_exec_init(&ex, pool, 4), TT_OK);
    ck_assert_int_eq(tt_fork(&ex, 9, job_arg, &a), TT_OK);
    ck_assert_int_eq(atomic_load(&a.calls), 16);
    ck_assert_int_eq(atomic_load(&a.bad), 0);
    /* a serial token's fork: one task, on the caller, child budget 1 */
    rec_init(&g_rec, pool);
    tt_exec_init_serial(&s);
    ck_assert_int_eq(tt_fork(&s, 6, job_rec, &g_rec), TT_OK);
    check_fork_result(&g_rec, 6, 1, "serial token", true);
    rec_destroy(&g_rec);
    th_free_pool(pool);
    th_assert_no_failures();
}
END_TEST

/* ------------------------------------------------------------------------ */
/* tt_fork_fail: errors out of jobs                                          */
/* ------------------------------------------------------------------------ */

enum { FAIL_A = 1001, FAIL_B = 1002 };

typedef struct fail_rec {
    unsigned fail_at;          /* the job that fails                       */
    _Atomic int started[MAX_JOBS];
    _Atomic int finished[MAX_JOBS];
    th_flag failed;            /* set once the failing job's call returned */
    _Atomic int bad;
} fail_rec;

static fail_rec g_fail;

static unsigned count_set(_Atomic int *a, unsigned n)
{
    unsigned c = 0;
    for (unsigned i = 0; i < n; i++)
        c += atomic_load(&a[i]) != 0;
    return c;
}

/* Job fail_at fails the fork (twice: the first code wins, the second call
 * is still TT_OK); every other job that started waits until the failure
 * is stored, so that no task ends its first job before the failure: a
 * task that took a second job would have started it after the failure.
 * (A task's first job may still start just after the failure, when its
 * check came just before: hence the count below, not a flag read here.)
 * Every job marks its end after a short spin: the fork must return only
 * after every started job ended. */
static void failing_job(void *arg, unsigned i, tt_exec *child)
{
    fail_rec *f = arg;
    if (i >= MAX_JOBS)
        return;
    atomic_store(&f->started[i], 1);
    if (i == f->fail_at) {
        if (tt_fork_fail(child, FAIL_A) != TT_OK || tt_fork_fail(child, FAIL_B) != TT_OK)
            atomic_fetch_add(&f->bad, 1);
        th_flag_set(&f->failed, 1);
    } else if (!th_flag_wait_ge(&f->failed, 1, 10)) {
        atomic_fetch_add(&f->bad, 1); /* a hang: the failing job never ran */
    }
    th_spin_us(200);
    atomic_store(&f->finished[i], 1);
}

START_TEST(test_fork_fail_skips_unstarted)
{
    tt_pool *pool = th_make_pool(4);
    unsigned w = tt_pool_width(pool);
    unsigned rounds = th_iters(20);
    for (unsigned round = 0; round < rounds; round++) {
        for (unsigned b = 1; b <= w; b++) {
            for (unsigned jobs = 1; jobs <= 40; jobs += 13) {
                tt_exec ex;
                ck_assert_int_eq(tt_exec_init(&ex, pool, b), TT_OK);
                memset(&g_fail, 0, sizeof g_fail);
                /* The first job taken (0), or, with jobs <= budget, any. */
                g_fail.fail_at = jobs <= b ? round % jobs : 0;
                int rc = tt_fork(&ex, jobs, failing_job, &g_fail);
                ck_assert_msg(rc == FAIL_A, "budget %u, jobs %u: tt_fork gave %d", b, jobs, rc);
                ck_assert_uint_eq(atomic_load(&g_fail.bad), 0);
                ck_assert(atomic_load(&g_fail.started[g_fail.fail_at]));
                unsigned started = count_set(g_fail.started, jobs);
                unsigned finished = count_set(g_fail.finished, jobs);
                /* At most one job per task started: each other task's
                 * first job waited for the failure, and no job started
                 * after it. */
                ck_assert_msg(started >= 1 && started <= b, "budget %u, jobs %u: %u started", b,
                              jobs, started);
                ck_assert_msg(finished == started, "tt_fork returned with %u of %u jobs ended",
                              finished, started);
                ck_assert_int_eq(tt_fork(&ex, 1, failing_job, &g_fail), TT_ECONSUMED);
            }
        }
    }
    th_free_pool(pool);
}
END_TEST

/* Every job fails with its own code at once: the fork returns one of them,
 * and a job whose code lost still got TT_OK. */
typedef struct race_fail {
    _Atomic int codes_ok;
    _Atomic int ran;
} race_fail;

static void every_job_fails(void *arg, unsigned i, tt_exec *child)
{
    race_fail *r = arg;
    atomic_fetch_add(&r->ran, 1);
    if (tt_fork_fail(child, 2000 + (int)i) == TT_OK)
        atomic_fetch_add(&r->codes_ok, 1);
}

START_TEST(test_fork_fail_first_wins)
{
    tt_pool *pool = th_make_pool(4);
    unsigned w = tt_pool_width(pool);
    for (unsigned round = 0; round < th_iters(200); round++) {
        unsigned b = 1 + round % w, jobs = b;
        tt_exec ex;
        ck_assert_int_eq(tt_exec_init(&ex, pool, b), TT_OK);
        race_fail r = {0};
        int rc = tt_fork(&ex, jobs, every_job_fails, &r);
        unsigned ran = (unsigned)atomic_load(&r.ran);
        ck_assert_msg(rc >= 2000 && rc < 2000 + (int)jobs, "fork gave %d", rc);
        ck_assert_int_eq(atomic_load(&r.codes_ok), (int)ran);
        ck_assert_uint_ge(ran, 1);
    }
    th_free_pool(pool);
}
END_TEST

/* The inline path: a budget-1 token and a serial token run the jobs in
 * order on the caller; job 2 fails, jobs 3.. never run. */
static void inline_fail_job(void *arg, unsigned i, tt_exec *child)
{
    _Atomic int *ran = arg;
    atomic_store(&ran[i], 1);
    if (i == 2)
        TT_CHECK(tt_fork_fail(child, FAIL_B) == TT_OK, "inline tt_fork_fail");
}

START_TEST(test_fork_fail_inline)
{
    tt_pool *pool = th_make_pool(2);
    for (int kind = 0; kind < 2; kind++) {
        tt_exec ex;
        if (kind == 0)
            ck_assert_int_eq(tt_exec_init(&ex, pool, 1), TT_OK);
        else
            tt_exec_init_serial(&ex);
        _Atomic int ran[8] = {0};
        ck_assert_int_eq(tt_fork(&ex, 8, inline_fail_job, ran), FAIL_B);
        for (unsigned i = 0; i < 8; i++)
            ck_assert_msg(atomic_load(&ran[i]) == (i <= 2), "%s token: job %u ran %d",
                          kind ? "serial" : "budget-1", i, atomic_load(&ran[i]));
    }
    th_assert_no_failures();
    th_free_pool(pool);
}
END_TEST

/* Nested: a job's inner fork fails; the job passes the code on through its
 * own (consumed) child, or does not, and then the outer fork is TT_OK. */
static void inner_fail_job(void *arg, unsigned i, tt_exec *child)
{
    (void)arg;
    if (i == 1)
        TT_CHECK(tt_fork_fail(child, FAIL_A) == TT_OK, "inner tt_fork_fail");
}

static void outer_job(void *arg, unsigned i, tt_exec *child)
{
    bool pass_on = *(bool *)arg;
    int rc = tt_fork(child, 3, inner_fail_job, NULL);
    TT_CHECK(rc == FAIL_A, "job %u: the inner fork gave %d", i, rc);
    if (pass_on && rc != TT_OK)
        TT_CHECK(tt_fork_fail(child, rc) == TT_OK, "passing the code on (child consumed)");
}

START_TEST(test_fork_fail_nested)
{
    tt_pool *pool = th_make_pool(4);
    for (unsigned b = 1; b <= tt_pool_width(pool); b++) {
        for (int pass_on = 0; pass_on < 2; pass_on++) {
            tt_exec ex;
            ck_assert_int_eq(tt_exec_init(&ex, pool, b), TT_OK);
            bool p = pass_on;
            ck_assert_int_eq(tt_fork(&ex, 2, outer_job, &p), pass_on ? FAIL_A : TT_OK);
        }
    }
    th_assert_no_failures();
    th_free_pool(pool);
}
END_TEST

/* tt_scope_fork and a fork on a token with team authority. */
typedef struct scope_fail_ctx {
    int fork_rc, failed_after, team_fork_rc, failed_after_team;
    _Atomic int started[16];
    _Atomic int bad;
    th_flag failed;
} scope_fail_ctx;

/* Job 0 fails; every other job waits for that (as in failing_job), so no
 * group takes a second job before the failure. */
static void scope_fail_job(void *arg, unsigned i, tt_exec *child)
{
    scope_fail_ctx *c = arg;
    atomic_store(&c->started[i], 1);
    if (i == 0) {
        if (tt_fork_fail(child, FAIL_B) != TT_OK)
            atomic_fetch_add(&c->bad, 1);
        th_flag_set(&c->failed, 1);
    } else if (!th_flag_wait_ge(&c->failed, 1, 10)) {
        atomic_fetch_add(&c->bad, 1);
    }
}

static void scope_fail_fn(void *arg, tt_scope *scope)
{
    scope_fail_ctx *c = arg;
    /* A fork on a reborrowed team token: its own code, the scope unfailed. */
    tt_exec t;
    c->team_fork_rc = tt_fork(tt_scope_reborrow(scope, &t), 1, scope_fail_job, c);
    c->failed_after_team = tt_scope_failed(scope);
    memset((void *)c->started, 0, sizeof c->started);
    atomic_store(&c->failed.v, 0);
    /* 16 jobs, job 0 fails at once: the scope fails. */
    c->fork_rc = tt_scope_fork(scope, 16, scope_fail_job, c);
    c->failed_after = tt_scope_failed(scope);
}

START_TEST(test_fork_fail_scope_fork)
{
    tt_pool *pool = th_make_pool(3);
    for (unsigned b = 1; b <= tt_pool_width(pool); b++) {
        tt_exec ex;
        ck_assert_int_eq(tt_exec_init(&ex, pool, b), TT_OK);
        scope_fail_ctx c = {0};
        ck_assert_int_eq(tt_team_scope(&ex, scope_fail_fn, &c), FAIL_B);
        ck_assert_int_eq(c.team_fork_rc, FAIL_B);
        ck_assert_int_eq(c.failed_after_team, 0);
        ck_assert_int_eq(c.fork_rc, FAIL_B);
        ck_assert_int_eq(c.failed_after, FAIL_B);
        ck_assert_int_eq(atomic_load(&c.bad), 0);
        /* Group g starts with job g; job 0 failed, and no group took a
         * second job after that: at most one job per group started. */
        unsigned started = count_set(c.started, 16);
        ck_assert_msg(atomic_load(&c.started[0]) && started <= b, "%u of 16 jobs started",
                      started);
    }
    th_free_pool(pool);
}
END_TEST

/* Misuse: NULL, code 0, tokens that are no job's child, a byte copy of a
 * child, another thread. */
typedef struct misuse_ctx {
    tt_exec *child;
    int rc;
} misuse_ctx;

static void *fail_other_thread(void *arg)
{
    misuse_ctx *m = arg;
    m->rc = tt_fork_fail(m->child, FAIL_A);
    return NULL;
}

static void misuse_job(void *arg, unsigned i, tt_exec *child)
{
    (void)arg;
    (void)i;
    TT_CHECK(tt_fork_fail(child, 0) == TT_EINVAL, "code 0");
    tt_exec r;
    TT_CHECK(tt_fork_fail(tt_exec_reborrow(child, &r), FAIL_A) == TT_EINVAL, "a reborrow");
    tt_exec copy;
    memcpy(&copy, child, sizeof copy);
    TT_CHECK(tt_fork_fail(&copy, FAIL_A) == TT_ECOPY, "a byte copy");
    misuse_ctx m = {child, -1};
    pthread_t t;
    if (pthread_create(&t, NULL, fail_other_thread, &m) == 0) {
        pthread_join(t, NULL);
        TT_CHECK(m.rc == TT_EWRONGTHREAD, "another thread: %s", tt_status_name(m.rc));
    }
}

START_TEST(test_fork_fail_misuse)
{
    ck_assert_int_eq(tt_fork_fail(NULL, FAIL_A), TT_EINVAL);
    tt_pool *pool = th_make_pool(2);
    tt_exec ex;
    ck_assert_int_eq(tt_exec_init(&ex, pool, 2), TT_OK);
    ck_assert_int_eq(tt_fork_fail(&ex, FAIL_A), TT_EINVAL); /* a root */
    tt_exec serial;
    tt_exec_init_serial(&serial);
    ck_assert_int_eq(tt_fork_fail(&serial, FAIL_A), TT_EINVAL);
    tt_exec bad;
    memset(&bad, 0xab, sizeof bad);
    ck_assert_int_eq(tt_fork_fail(&bad, FAIL_A), TT_EINVAL); /* never minted */
    /* Misuse changes nothing: the fork still returns TT_OK. */
    ck_assert_int_eq(tt_fork(&ex, 2, misuse_job, NULL), TT_OK);
    tt_exec_finish(&serial);
    th_assert_no_failures();
    th_free_pool(pool);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Hand-out as tasks free up                                                 */
/* ------------------------------------------------------------------------ */

/* Jobs 0 and 1 are long and 2, 3 short, at budget 2. With fixed blocks one
 * task ran 0 then 1; handed out as tasks free up, 0 and 1 run at once
 * (each waits, with a timeout, until the other started) and the short jobs
 * follow on whichever task frees first. */
typedef struct handout {
    th_flag started[4];
    _Atomic int overlap_missed;
    _Atomic int order_bad;
    _Atomic int done[4];
} handout;

static TT_TEST_UNUSED void handout_job(void *arg, unsigned i, tt_exec *child)
{
    handout *h = arg;
    (void)child;
    th_flag_set(&h->started[i], 1);
    if (i < 2) {
        if (!th_flag_wait_ge(&h->started[1 - i], 1, 5))
            atomic_fetch_add(&h->overlap_missed, 1);
        th_sleep_us(2000);
    } else if (!atomic_load(&h->done[0]) && !atomic_load(&h->done[1])) {
        atomic_fetch_add(&h->order_bad, 1); /* a short job before any long one ended */
    }
    atomic_store(&h->done[i], 1);
}

START_TEST(test_fork_hands_out_as_tasks_free)
{
#if TT_PARALLEL_ENABLED
    tt_pool *pool = th_make_pool(2);
    if (tt_pool_width(pool) < 2) {
        th_free_pool(pool);
        return;
    }
    for (unsigned round = 0; round < th_iters(20); round++) {
        tt_exec ex;
        ck_assert_int_eq(tt_exec_init(&ex, pool, 2), TT_OK);
        handout h;
        memset(&h, 0, sizeof h);
        ck_assert_int_eq(tt_fork(&ex, 4, handout_job, &h), TT_OK);
#if TT_LEDGER_ENABLED
        ck_assert_uint_le(tt_ledger_max_live(tt_exec_ledger_root(&ex)), 2);
#endif
        ck_assert_msg(atomic_load(&h.overlap_missed) == 0,
                      "round %u: the two long jobs did not run at once", round);
        ck_assert_int_eq(atomic_load(&h.order_bad), 0);
        for (unsigned i = 0; i < 4; i++)
            ck_assert(atomic_load(&h.done[i]));
    }
    th_free_pool(pool);
#endif
}
END_TEST

/* ------------------------------------------------------------------------ */
/* A destroy from a member, seen by the fork's later jobs                     */
/* ------------------------------------------------------------------------ */

static TT_TEST_UNUSED void job_count_calls(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    (void)child;
    atomic_fetch_add((_Atomic int *)arg, 1);
}

/* A job that runs after another job of the same fork destroyed the pool
 * from its member gets its child token after the destroy: jobs 0 and 1 are
 * the two tasks' first, job 1 waits until job 0 destroyed the pool, and job
 * 2 is handed to whichever task frees up first, after that. Regression
 * (docs/design/misuse.md, found #2): the child was minted with the pool's
 * new generation, so the later job's entries ran on the doomed pool (while
 * a child minted before the destroy was refused). */
typedef struct later_child {
    tt_pool *pool;
    _Atomic int destroy_rc, entry_rc, init_rc, ran, on_member;
    th_flag destroyed;
} later_child;

static TT_TEST_UNUSED void job_later_child(void *arg, unsigned i, tt_exec *child)
{
    later_child *l = arg;
    if (i == 0) {
        atomic_store(&l->on_member, tt_pool_is_member(l->pool, NULL));
        atomic_store(&l->destroy_rc, tt_pool_destroy(l->pool));
        th_flag_set(&l->destroyed, 1);
    } else if (i == 1) {
        TT_CHECK(th_flag_wait_ge(&l->destroyed, 1, 10), "job 0 never destroyed the pool");
    } else if (i == 2) {
        _Atomic int calls = 0;
        atomic_store(&l->entry_rc, tt_fork(child, 2, job_count_calls, &calls));
        atomic_store(&l->ran, atomic_load(&calls));
        tt_exec x;
        atomic_store(&l->init_rc, tt_exec_init(&x, l->pool, 1));
    }
}

START_TEST(test_destroy_from_member_later_child)
{
#if TT_PARALLEL_ENABLED
    tt_pool *p = th_make_pool(2);
    later_child l;
    memset(&l, 0, sizeof l);
    l.pool = p;
    tt_exec ex;
    ck_assert_int_eq(tt_exec_init(&ex, p, 2), TT_OK);
    ck_assert_int_eq(tt_fork(&ex, 4, job_later_child, &l), TT_OK); /* 2 tasks, 4 jobs */
    th_assert_no_failures();
    ck_assert(atomic_load(&l.on_member));
    ck_assert_msg(atomic_load(&l.destroy_rc) == TT_OK, "the destroy from job 0: %s",
                  tt_status_name(atomic_load(&l.destroy_rc)));
    ck_assert_msg(atomic_load(&l.init_rc) == TT_EDESTROYED, "tt_exec_init after it: %s",
                  tt_status_name(atomic_load(&l.init_rc)));
    ck_assert_msg(atomic_load(&l.entry_rc) == TT_EDESTROYED,
                  "an entry on a child minted after a destroy from a member: %s (ran %d jobs)",
                  tt_status_name(atomic_load(&l.entry_rc)), atomic_load(&l.ran));
#else
    tt_pool *p = th_make_pool(2);
    ck_assert_uint_eq(tt_pool_width(p), 1); /* no members to call from */
    th_free_pool(p);
#endif
}
END_TEST

static Suite *fork_suite(void)
{
    Suite *s = suite_create("fork");
    TCase *tc = th_tcase(s, "shares", 120);
    tcase_add_test(tc, test_fork_shares_grid);
    tcase_add_test(tc, test_fork_many_jobs);
    tcase_add_test(tc, test_fork_clamped_pools);
    tc = th_tcase(s, "nested", 60);
    tcase_add_test(tc, test_fork_nested_from_member);
    tcase_add_test(tc, test_fork_arg_and_serial);
    tc = th_tcase(s, "fail", 120);
    tcase_add_test(tc, test_fork_fail_skips_unstarted);
    tcase_add_test(tc, test_fork_fail_first_wins);
    tcase_add_test(tc, test_fork_fail_inline);
    tcase_add_test(tc, test_fork_fail_nested);
    tcase_add_test(tc, test_fork_fail_scope_fork);
    tcase_add_test(tc, test_fork_fail_misuse);
    tcase_add_test(tc, test_fork_hands_out_as_tasks_free);
    tc = th_tcase(s, "destroy", 60);
    tcase_add_test(tc, test_destroy_from_member_later_child);
    return s;
}

int main(void) { return th_run_suite(fork_suite()); }
