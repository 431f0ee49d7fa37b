/*
 * test_inline.c -- inline entries on budget-1 tokens (the lean frame,
 * exec.c): deep recursion of tt_fork on a thread with an 8 MiB stack and a
 * bound on the stack a level takes, and every contract of an entry kept on
 * that path: consumption, TT_ECOPY, TT_ECONSUMED, TT_EBUSY (and a refusal
 * consumes nothing), TT_EWRONGTHREAD, a destroy from another thread refused
 * while the inline entries run, tt_for_ranges' one range and its empty
 * entry, a team scope of the leader alone.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "tt_test.h"

#ifdef _OPENMP
#include <omp.h>
#endif

/* A pool of width 2 whose shares are declared OpenMP-free (iso false) or
 * isolated (the default). */
static tt_pool *inline_pool(bool iso)
{
    tt_pool_attr *a = NULL;
    ck_assert_int_eq(tt_pool_attr_create(&a), TT_OK);
    ck_assert_int_eq(tt_pool_attr_set_threads(a, 2), TT_OK);
    ck_assert_int_eq(tt_pool_attr_set_spin_polls(a, th_test_spin_polls()), TT_OK);
    ck_assert_int_eq(tt_pool_attr_set_isolate_shares(a, iso), TT_OK);
    tt_pool *p = NULL;
    ck_assert_int_eq(tt_pool_create(&p, a), TT_OK);
    tt_pool_attr_destroy(a);
    return p;
}

/* ------------------------------------------------------------------------ */
/* Deep recursion                                                            */
/* ------------------------------------------------------------------------ */

#define DEEP_LEVELS 10000
#define DEEP_STACK ((size_t)8 << 20)

/* Under a sanitizer every frame is larger (its redzones and shadow calls):
 * the depth is the same, the stack bounds are the release build's. */
static bool under_sanitizer(void)
{
    return getenv("TT_UNDER_TSAN") || getenv("TT_UNDER_ASAN");
}
static size_t deep_stack(void) { return under_sanitizer() ? DEEP_STACK * 8 : DEEP_STACK; }

typedef struct deep {
    unsigned depth;    /* levels to go                                   */
    unsigned reached;  /* deepest level run                              */
    unsigned leaves;   /* job 1 of every level, and the last level       */
    int rc;            /* first failure                                  */
    uintptr_t at1, at1001; /* a local's address at levels 1 and 1001     */
    unsigned level;
} deep;

static void deep_job(void *arg, unsigned i, tt_exec *child)
{
    deep *d = arg;
    volatile char mark = 0;
    if (i == 1) {
        d->leaves++;
        return;
    }
    unsigned level = d->level;
    if (level == 1)
        d->at1 = (uintptr_t)&mark;
    if (level == 1001)
        d->at1001 = (uintptr_t)&mark;
    if (level > d->reached)
        d->reached = level;
    if (level == d->depth) {
        d->leaves++;
        return;
    }
    if (tt_exec_budget(child) != 1 && d->rc == TT_OK)
        d->rc = -100;
    d->level = level + 1;
    int rc = tt_fork(child, 2, deep_job, d);
    d->level = level;
    if (rc && d->rc == TT_OK)
        d->rc = rc;
    (void)mark;
}

typedef struct deep_run {
    tt_pool *pool; /* NULL: a serial token */
    deep d;
} deep_run;

static void *deep_thread(void *arg)
{
    deep_run *r = arg;
    tt_exec ex;
    if (!r->pool)
        tt_exec_init_serial(&ex);
    else if (tt_exec_init(&ex, r->pool, 1) != TT_OK) {
        r->d.rc = -1;
        return NULL;
    }
    r->d.level = 1;
    int rc = tt_fork(&ex, 2, deep_job, &r->d);
    if (rc && r->d.rc == TT_OK)
        r->d.rc = rc;
    return NULL;
}

/* DEEP_LEVELS nested inline forks of 2 jobs on a thread of DEEP_STACK bytes
 * of stack; the stack a level takes, measured between levels 1 and 1001. */
static size_t deep_on_thread(tt_pool *pool, unsigned levels)
{
    deep_run r = {.pool = pool, .d = {.depth = levels}};
    pthread_attr_t a;
    pthread_attr_init(&a);
    ck_assert_int_eq(pthread_attr_setstacksize(&a, deep_stack()), 0);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, &a, deep_thread, &r), 0);
    pthread_attr_destroy(&a);
    pthread_join(t, NULL);
    ck_assert_msg(r.d.rc == TT_OK, "deep fork: %d", r.d.rc);
    ck_assert_uint_eq(r.d.reached, levels);
    ck_assert_uint_eq(r.d.leaves, levels + 1); /* job 1 of every level, and the last job 0 */
    ck_assert(r.d.at1 > r.d.at1001);
    return (r.d.at1 - r.d.at1001) / 1000;
}

/* An OpenMP-free pool: a few hundred bytes a level at most, so 10,000
 * levels fit an 8 MiB stack with room to spare. */
START_TEST(test_inline_deep_omp_free)
{
    tt_pool *p = inline_pool(false);
    size_t per = deep_on_thread(p, DEEP_LEVELS);
    printf("inline fork, OpenMP-free pool: %zu bytes of stack a level\n", per);
    ck_assert_msg(per <= 384 || under_sanitizer(), "%zu bytes of stack a level", per);
    th_free_pool(p);
}
END_TEST

/* An isolated pool and a serial token: the one-thread contract adds the
 * runtime's frames per level (its taskgroup); 10,000 levels still fit
 * 8 MiB, with an eighth to spare. */
START_TEST(test_inline_deep_isolated)
{
    tt_pool *p = inline_pool(true);
    size_t per = deep_on_thread(p, DEEP_LEVELS);
    printf("inline fork, isolated pool: %zu bytes of stack a level\n", per);
    ck_assert_msg(per * DEEP_LEVELS < deep_stack() / 8 * 7, "%zu bytes of stack a level", per);
    th_free_pool(p);
    per = deep_on_thread(NULL, DEEP_LEVELS);
    printf("inline fork, serial token: %zu bytes of stack a level\n", per);
    ck_assert_msg(per * DEEP_LEVELS < deep_stack() / 8 * 7, "%zu bytes of stack a level", per);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Contracts on the lean path                                                */
/* ------------------------------------------------------------------------ */

typedef struct contracts {
    tt_pool *pool;
    int rc_copy, rc_consumed, rc_busy, rc_after_busy, rc_wrong, rc_destroy;
    int rc_ranges0, rc_ranges0_again;
    unsigned inner_runs, range_calls, scope_sections;
    int rc_scope, rc_scope_again;
    size_t range_begin, range_end;
    tt_exec *shared;
} contracts;

static void count_job(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    (void)child;
    atomic_fetch_add((_Atomic unsigned *)&((contracts *)arg)->inner_runs, 1);
}

static void count_range(void *arg, size_t b, size_t e)
{
    contracts *c = arg;
    c->range_calls++;
    c->range_begin = b;
    c->range_end = e;
}

/* Entered inside the reborrow's entry: the parent is lent (TT_EBUSY). */
typedef struct busy_ctx {
    tt_exec *parent;
    int rc;
} busy_ctx;

static void busy_job(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    (void)child;
    busy_ctx *b = arg;
    b->rc = tt_fork(b->parent, 1, count_job, NULL);
}

static void *wrong_thread(void *arg)
{
    contracts *c = arg;
    c->rc_wrong = tt_fork(c->shared, 1, count_job, c);
    c->rc_destroy = tt_pool_destroy(c->pool);
    return NULL;
}

/* A job of a budget-1 root: its child is a budget-1 task token, the lean
 * path's. */
static void contracts_job(void *arg, unsigned i, tt_exec *child)
{
    contracts *c = arg;
    if (i != 0)
        return;
    /* A copy is refused, and the original still runs. */
    tt_exec copy;
    memcpy(&copy, child, sizeof copy);
    c->rc_copy = tt_fork(&copy, 2, count_job, c);
    /* Another thread: TT_EWRONGTHREAD; a destroy while this entry runs:
     * TT_EBUSY. */
    c->shared = child;
    pthread_t t;
    pthread_create(&t, NULL, wrong_thread, c);
    pthread_join(t, NULL);
    /* A reborrow inside an entry: the parent is busy, and that refusal
     * consumes nothing. */
    tt_exec rb;
    tt_exec_reborrow(child, &rb);
    busy_ctx b = {.parent = child, .rc = -1};
    ck_assert_int_eq(tt_fork(&rb, 1, busy_job, &b), TT_OK);
    c->rc_busy = b.rc;
    c->rc_after_busy = tt_fork(child, 3, count_job, c);
    c->rc_consumed = tt_fork(child, 1, count_job, c);
}

static void scope_section(void *arg, tt_section *s)
{
    contracts *c = arg;
    if (tt_section_size(s) == 1)
        c->scope_sections++;
}

static void scope_body(void *arg, tt_scope *scope)
{
    ck_assert_int_eq(tt_scope_run(scope, scope_section, arg), TT_OK);
}

static void ranges_job(void *arg, unsigned i, tt_exec *child)
{
    contracts *c = arg;
    if (i != 0)
        return;
    tt_exec a, b;
    tt_exec_reborrow(child, &a);
    ck_assert_int_eq(tt_for_ranges(&a, 1000, 7, count_range, c), TT_OK);
    ck_assert_int_eq(tt_for_ranges(&a, 1000, 7, count_range, c), TT_ECONSUMED);
    tt_exec_reborrow(child, &b);
    c->rc_ranges0 = tt_for_ranges(&b, 0, 1, count_range, c);
    c->rc_ranges0_again = tt_for_ranges(&b, 0, 1, count_range, c);
    tt_exec d;
    tt_exec_reborrow(child, &d);
    c->rc_scope = tt_team_scope(&d, scope_body, c);
    c->rc_scope_again = tt_team_scope(&d, scope_body, c);
}

static void check_contracts(tt_pool *pool, bool serial)
{
    contracts c = {.pool = pool};
    tt_exec ex;
    if (serial)
        tt_exec_init_serial(&ex);
    else
        tt_exec_init(&ex, pool, 1);
    ck_assert_int_eq(tt_fork(&ex, 2, contracts_job, &c), TT_OK);
    ck_assert_int_eq(c.rc_copy, TT_ECOPY);
    ck_assert_int_eq(c.rc_wrong, TT_EWRONGTHREAD);
    ck_assert_int_eq(c.rc_destroy, serial ? TT_OK /* NULL */ : TT_EBUSY);
    ck_assert_int_eq(c.rc_busy, TT_EBUSY);
    ck_assert_int_eq(c.rc_after_busy, TT_OK);
    ck_assert_int_eq(c.rc_consumed, TT_ECONSUMED);
    /* the 3 jobs of the fork after the refusal, and nothing else */
    ck_assert_uint_eq(c.inner_runs, 3);
    tt_exec ex2;
    if (serial)
        tt_exec_init_serial(&ex2);
    else
        tt_exec_init(&ex2, pool, 1);
    ck_assert_int_eq(tt_fork(&ex2, 1, ranges_job, &c), TT_OK);
    ck_assert_uint_eq(c.range_calls, 1);
    ck_assert_uint_eq(c.range_begin, 0);
    ck_assert_uint_eq(c.range_end, 1000);
    ck_assert_int_eq(c.rc_ranges0, TT_OK);
    ck_assert_int_eq(c.rc_ranges0_again, TT_ECONSUMED);
    ck_assert_int_eq(c.rc_scope, TT_OK);
    ck_assert_int_eq(c.rc_scope_again, TT_ECONSUMED);
    ck_assert_uint_eq(c.scope_sections, 1);
}

START_TEST(test_inline_contracts)
{
    for (int iso = 0; iso < 2; iso++) {
        tt_pool *p = inline_pool(iso != 0);
        check_contracts(p, false);
        th_free_pool(p);
    }
}
END_TEST

START_TEST(test_inline_contracts_serial)
{
    check_contracts(NULL, true);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The one-thread contract on the lean path (isolated pool)                  */
/* ------------------------------------------------------------------------ */

#ifdef _OPENMP
typedef struct icv_seen {
    int nthreads, dyn, chunk;
    omp_sched_t kind;
} icv_seen;

static icv_seen icv_now(void)
{
    icv_seen v;
    v.nthreads = omp_get_max_threads();
    v.dyn = omp_get_dynamic();
    omp_get_schedule(&v.kind, &v.chunk);
    return v;
}

static bool icv_same(icv_seen a, icv_seen b)
{
    return a.nthreads == b.nthreads && a.dyn == b.dyn && a.kind == b.kind && a.chunk == b.chunk;
}

typedef struct icv_ctx {
    icv_seen start[2], second, after[2];
    _Atomic int task_done[2], done_at_return[2], ran[2];
    unsigned outer;
} icv_ctx;

typedef struct icv_inner {
    icv_ctx *c;
    unsigned outer;
} icv_inner;

static void icv_job(void *arg, unsigned i, tt_exec *child)
{
    (void)child;
    icv_inner *in = arg;
    icv_ctx *c = in->c;
    if (i == 0) {
        c->start[in->outer] = icv_now();
        omp_set_num_threads(3);
        omp_set_dynamic(!c->start[in->outer].dyn);
        omp_set_schedule(omp_sched_dynamic, 7);
        _Atomic int *done = &c->task_done[in->outer];
#pragma omp task shared(done)
        atomic_store(done, 1);
    } else {
        c->second = icv_now();
        c->ran[in->outer] = icv_same(c->second, c->start[in->outer]);
    }
}

static void icv_outer(void *arg, unsigned k, tt_exec *child)
{
    icv_ctx *c = arg;
    tt_exec one;
    tt_exec_reborrow(child, &one);
    tt_exec_limit(&one, 1);
    icv_seen before = icv_now();
    icv_inner in = {c, k};
    ck_assert_int_eq(tt_fork(&one, 2, icv_job, &in), TT_OK);
    c->done_at_return[k] = atomic_load(&c->task_done[k]);
    c->after[k] = icv_now();
    ck_assert(icv_same(before, c->after[k]));
}

/* A lean fork of 2 jobs on an isolated pool: the second job starts with
 * the ICVs the first started with, the caller sees none of the first's,
 * and the first's task is complete when the fork returns; on a plain
 * thread (no region) and inside a root's region (a member's team of one). */
START_TEST(test_inline_isolated_contract)
{
    tt_pool *p = inline_pool(true);
    for (unsigned b = 1; b <= 2; b++) {
        icv_ctx c = {0};
        tt_exec ex;
        ck_assert_int_eq(tt_exec_init(&ex, p, b), TT_OK);
        ck_assert_int_eq(tt_fork(&ex, b, icv_outer, &c), TT_OK);
        for (unsigned k = 0; k < b; k++) {
            ck_assert_msg(c.ran[k], "budget %u, task %u: job 1 saw job 0's ICVs", b, k);
            ck_assert_msg(c.done_at_return[k], "budget %u, task %u: job 0's task not done", b,
                          k);
        }
    }
    th_free_pool(p);
}
END_TEST
#endif /* _OPENMP */

static Suite *inline_suite(void)
{
    Suite *s = suite_create("inline");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, th_timeout(60));
    tcase_add_test(tc, test_inline_deep_omp_free);
    tcase_add_test(tc, test_inline_deep_isolated);
    tcase_add_test(tc, test_inline_contracts);
    tcase_add_test(tc, test_inline_contracts_serial);
#ifdef _OPENMP
    tcase_add_test(tc, test_inline_isolated_contract);
#endif
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return th_run_suite(inline_suite()); }
