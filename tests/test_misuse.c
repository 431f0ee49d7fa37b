/*
 * test_misuse.c -- calls into threadteam made in a forbidden way get a
 * code, and nothing runs, nothing is consumed that should not be, and no
 * memory is corrupted: consumed and finished tokens (TT_ECONSUMED), an
 * entry on the parent from inside its own entry (TT_ECONSUMED), on a parent
 * whose reborrowed child is inside an entry (TT_EBUSY), byte copies
 * (TT_ECOPY), tokens used on another thread than their task's and scope
 * functions called off the leader (TT_EWRONGTHREAD), scope functions from
 * inside a section of the same scope (TT_EBUSY), a held team
 * (TT_REFUSED_BUSY), a team-owned pool (TT_EBUSY), tt_exec_limit(ex, 0)
 * (TT_EINVAL), tokens of a destroyed pool (TT_EDESTROYED), broadcast
 * refusals (nothing consumed), invalid arguments and uninitialised tokens
 * (TT_EINVAL). docs/design/misuse.md lists every case with its test.
 *
 * The tcase "regressions" holds the misuses these tests found undefended
 * (all fixed since; docs/design/misuse.md, "Found by these tests").
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "tt_test.h"

#include <signal.h>
#include <sys/wait.h>

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

static _Atomic long lm_ran; /* user code that ran (must stay 0 on refusals) */

static void lm_range(void *arg, size_t b, size_t e)
{
    (void)arg;
    (void)b;
    (void)e;
    atomic_fetch_add(&lm_ran, 1);
}
static void lm_job(void *arg, unsigned i, tt_exec *c)
{
    (void)arg;
    (void)i;
    (void)c;
    atomic_fetch_add(&lm_ran, 1);
}
static void lm_bcast(void *arg, unsigned i)
{
    (void)arg;
    (void)i;
    atomic_fetch_add(&lm_ran, 1);
}
static void lm_ext(void *arg, unsigned w)
{
    (void)arg;
    (void)w;
    atomic_fetch_add(&lm_ran, 1);
}
static void lm_scope_fn(void *arg, tt_scope *s)
{
    (void)arg;
    (void)s;
    atomic_fetch_add(&lm_ran, 1);
}
static void lm_section(void *arg, tt_section *s)
{
    (void)arg;
    (void)s;
    atomic_fetch_add(&lm_ran, 1);
}
static void lm_split(void *arg, unsigned part, tt_scope *sub)
{
    (void)arg;
    (void)part;
    (void)sub;
    atomic_fetch_add(&lm_ran, 1);
}

/* The entries, by number, so every misuse is tried on each of them. */
enum { E_FORK, E_RANGES, E_BCAST, E_EXTERNAL, E_SCOPE, E_SCOPE_WITH, E_COUNT };
static const char *const lm_entry_name[E_COUNT] = {
    "tt_fork", "tt_for_ranges", "tt_broadcast", "tt_external", "tt_team_scope",
    "tt_team_scope_with"};

static int lm_enter(tt_exec *ex, int e)
{
    tt_team_opts o;
    tt_team_opts_init(&o);
    o.acquire_timeout_ns = 200000000u;
    switch (e) {
    case E_FORK:
        return tt_fork(ex, 2, lm_job, NULL);
    case E_RANGES:
        return tt_for_ranges(ex, 16, 1, lm_range, NULL);
    case E_BCAST:
        return tt_broadcast(ex, lm_bcast, NULL);
    case E_EXTERNAL:
        return tt_external(ex, lm_ext, NULL);
    case E_SCOPE:
        return tt_team_scope(ex, lm_scope_fn, NULL);
    default:
        return tt_team_scope_with(ex, &o, lm_scope_fn, NULL);
    }
}

/* Every entry on ex returns `want` and runs nothing. Usable on any thread
 * (TT_CHECK). */
static void lm_all_entries_refuse(tt_exec *ex, int want, const char *what)
{
    for (int e = 0; e < E_COUNT; e++) {
        long before = atomic_load(&lm_ran);
        int rc = lm_enter(ex, e);
        TT_CHECK(rc == want, "%s: %s returned %s, expected %s", what, lm_entry_name[e],
                 tt_status_name(rc), tt_status_name(want));
        TT_CHECK(atomic_load(&lm_ran) == before, "%s: %s ran user code", what, lm_entry_name[e]);
    }
}

/* ------------------------------------------------------------------------ */
/* Consumed and finished tokens                                              */
/* ------------------------------------------------------------------------ */

START_TEST(lm_consumed_token)
{
    tt_pool *p = th_make_pool(2);
    for (int e = 0; e < E_COUNT; e++) {
        tt_exec ex;
        ck_assert_int_eq(tt_exec_init(&ex, p, 2), TT_OK);
        ck_assert_int_eq(lm_enter(&ex, e), TT_OK);
        char what[64];
        snprintf(what, sizeof what, "after %s", lm_entry_name[e]);
        lm_all_entries_refuse(&ex, TT_ECONSUMED, what);
        /* Still readable, never usable. */
        ck_assert_uint_eq(tt_exec_budget(&ex), th_expect_budget(2, 2));
        ck_assert(!tt_can_broadcast(&ex));
        ck_assert(!tt_carries_team(&ex));
        ck_assert_uint_eq(tt_dispatch_cost(&ex, 2), UINT64_MAX);
        tt_exec_finish(&ex); /* does nothing */
        lm_all_entries_refuse(&ex, TT_ECONSUMED, what);
    }
    /* A serial token too. */
    tt_exec s;
    tt_exec_init_serial(&s);
    ck_assert_int_eq(tt_for_ranges(&s, 4, 1, lm_range, NULL), TT_OK);
    lm_all_entries_refuse(&s, TT_ECONSUMED, "serial token after an entry");
    th_free_pool(p);
    th_assert_no_failures();
}
END_TEST

START_TEST(lm_finished_token)
{
    tt_pool *p = th_make_pool(2);
    tt_exec ex, child;
    ck_assert_int_eq(tt_exec_init(&ex, p, 2), TT_OK);
    tt_exec_finish(&ex);
    tt_exec_finish(&ex); /* twice: nothing */
    lm_all_entries_refuse(&ex, TT_ECONSUMED, "finished token");
    /* A child of a finished parent reports the parent. */
    tt_exec_reborrow(&ex, &child);
    lm_all_entries_refuse(&child, TT_ECONSUMED, "child of a finished token");
    /* A finished child leaves its parent usable. */
    ck_assert_int_eq(tt_exec_init(&ex, p, 2), TT_OK);
    tt_exec_reborrow(&ex, &child);
    tt_exec_finish(&child);
    lm_all_entries_refuse(&child, TT_ECONSUMED, "finished child");
    ck_assert_int_eq(tt_for_ranges(&ex, 16, 1, lm_range, NULL), TT_OK);
    th_free_pool(p);
    th_assert_no_failures();
}
END_TEST

/* A job that finishes its own child, then tries it. */
static void lm_finish_child_job(void *arg, unsigned i, tt_exec *c)
{
    (void)arg;
    (void)i;
    tt_exec_finish(c);
    lm_all_entries_refuse(c, TT_ECONSUMED, "a job's finished child");
}

START_TEST(lm_fork_child_finished)
{
    tt_pool *p = th_make_pool(2);
    tt_exec ex;
    ck_assert_int_eq(tt_exec_init(&ex, p, 2), TT_OK);
    ck_assert_int_eq(tt_fork(&ex, 2, lm_finish_child_job, NULL), TT_OK);
    th_free_pool(p);
    th_assert_no_failures();
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Entries on the parent                                                     */
/* ------------------------------------------------------------------------ */

/* From inside the entry that consumed it, on any thread of the entry:
 * TT_ECONSUMED. */
static tt_exec *lm_parent;

static void lm_parent_job(void *arg, unsigned i, tt_exec *c)
{
    (void)arg;
    (void)i;
    (void)c;
    lm_all_entries_refuse(lm_parent, TT_ECONSUMED, "the parent from inside a fork job");
}
static void lm_parent_range(void *arg, size_t b, size_t e)
{
    (void)arg;
    (void)b;
    (void)e;
    lm_all_entries_refuse(lm_parent, TT_ECONSUMED, "the parent from inside a range body");
}
static void lm_parent_bcast(void *arg, unsigned i)
{
    (void)arg;
    (void)i;
    lm_all_entries_refuse(lm_parent, TT_ECONSUMED, "the parent from inside a broadcast");
}
static void lm_parent_ext(void *arg, unsigned w)
{
    (void)arg;
    (void)w;
    lm_all_entries_refuse(lm_parent, TT_ECONSUMED, "the parent from inside tt_external");
}
static void lm_parent_section(void *arg, tt_section *s)
{
    (void)arg;
    (void)s;
    lm_all_entries_refuse(lm_parent, TT_ECONSUMED, "the parent from inside a section");
}
static void lm_parent_scope(void *arg, tt_scope *s)
{
    (void)arg;
    lm_all_entries_refuse(lm_parent, TT_ECONSUMED, "the parent from the scope callback");
    int rc = tt_scope_run(s, lm_parent_section, NULL);
    TT_CHECK(rc == TT_OK, "tt_scope_run: %s", tt_status_name(rc));
}

START_TEST(lm_entry_on_parent_inside)
{
    tt_pool *p = th_make_pool(2);
    for (unsigned budget = 1; budget <= 2; budget++) {
        tt_exec ex;
        lm_parent = &ex;
        ck_assert_int_eq(tt_exec_init(&ex, p, budget), TT_OK);
        ck_assert_int_eq(tt_fork(&ex, 2, lm_parent_job, NULL), TT_OK);
        ck_assert_int_eq(tt_exec_init(&ex, p, budget), TT_OK);
        ck_assert_int_eq(tt_for_ranges(&ex, 2, 1, lm_parent_range, NULL), TT_OK);
        ck_assert_int_eq(tt_exec_init(&ex, p, budget), TT_OK);
        ck_assert_int_eq(tt_broadcast(&ex, lm_parent_bcast, NULL), TT_OK);
        ck_assert_int_eq(tt_exec_init(&ex, p, budget), TT_OK);
        ck_assert_int_eq(tt_external(&ex, lm_parent_ext, NULL), TT_OK);
        ck_assert_int_eq(tt_exec_init(&ex, p, budget), TT_OK);
        ck_assert_int_eq(tt_team_scope(&ex, lm_parent_scope, NULL), TT_OK);
    }
    /* A serial token. */
    tt_exec s;
    lm_parent = &s;
    tt_exec_init_serial(&s);
    ck_assert_int_eq(tt_fork(&s, 2, lm_parent_job, NULL), TT_OK);
    th_free_pool(p);
    th_assert_no_failures();
}
END_TEST

/* An entry on a parent whose reborrowed child is inside an entry:
 * TT_EBUSY, nothing consumed (the parent works once the child left). */
static void lm_busy_parent_job(void *arg, unsigned i, tt_exec *c)
{
    tt_pool *pool = arg;
    (void)c;
    if (i != 0)
        return;
    /* (The team scopes: lm_team_scope_on_busy_parent, with the gaps.) */
    for (int e = 0; e < E_SCOPE; e++) {
        long before = atomic_load(&lm_ran);
        int rc = lm_enter(lm_parent, e);
        int want = TT_EBUSY;
        /* A broadcast's refusal comes first when the job runs on a member. */
        unsigned k;
        if (e == E_BCAST && pool && tt_pool_is_member(pool, &k))
            want = TT_REFUSED_CALLER_IN_POOL;
        TT_CHECK(rc == want, "parent of a child inside an entry: %s returned %s, expected %s",
                 lm_entry_name[e], tt_status_name(rc), tt_status_name(want));
        TT_CHECK(atomic_load(&lm_ran) == before, "%s ran user code", lm_entry_name[e]);
    }
}

START_TEST(lm_entry_on_busy_parent)
{
    tt_pool *p = th_make_pool(2);
    for (unsigned budget = 1; budget <= 2; budget++) {
        tt_exec ex, child;
        lm_parent = &ex;
        ck_assert_int_eq(tt_exec_init(&ex, p, budget), TT_OK);
        tt_exec_reborrow(&ex, &child);
        ck_assert_int_eq(tt_fork(&child, 2, lm_busy_parent_job, p), TT_OK);
        /* The child was consumed; the parent is usable again. */
        lm_all_entries_refuse(&child, TT_ECONSUMED, "the consumed child");
        ck_assert_int_eq(tt_for_ranges(&ex, 16, 1, lm_range, NULL), TT_OK);
    }
    /* Serial: the same, inline. */
    tt_exec s, sc;
    lm_parent = &s;
    tt_exec_init_serial(&s);
    tt_exec_reborrow(&s, &sc);
    ck_assert_int_eq(tt_fork(&sc, 1, lm_busy_parent_job, NULL), TT_OK);
    ck_assert_int_eq(tt_fork(&s, 1, lm_job, NULL), TT_OK);
    th_free_pool(p);
    th_assert_no_failures();
}
END_TEST

/* Children of bad parents report the parent's problem at their entry. */
START_TEST(lm_child_of_bad_parent)
{
    tt_pool *p = th_make_pool(2);
    tt_exec ex, child, copy, bad;
    /* NULL parent. */
    ck_assert_ptr_eq(tt_exec_reborrow(NULL, &child), &child);
    lm_all_entries_refuse(&child, TT_EINVAL, "child of NULL");
    ck_assert_ptr_null(tt_exec_reborrow(&ex, NULL));
    /* Consumed parent. */
    ck_assert_int_eq(tt_exec_init(&ex, p, 2), TT_OK);
    ck_assert_int_eq(tt_for_ranges(&ex, 4, 1, lm_range, NULL), TT_OK);
    tt_exec_reborrow(&ex, &child);
    lm_all_entries_refuse(&child, TT_ECONSUMED, "child of a consumed parent");
    /* Copied parent. */
    ck_assert_int_eq(tt_exec_init(&ex, p, 2), TT_OK);
    memcpy(&copy, &ex, sizeof ex);
    tt_exec_reborrow(&copy, &child);
    lm_all_entries_refuse(&child, TT_ECOPY, "child of a copy");
    ck_assert_int_eq(tt_for_ranges(&ex, 4, 1, lm_range, NULL), TT_OK);
    /* Invalid parent (a failed mint). */
    ck_assert_int_eq(tt_exec_init(&bad, p, 0), TT_EINVAL);
    tt_exec_reborrow(&bad, &child);
    lm_all_entries_refuse(&child, TT_EINVAL, "child of an invalid token");
    th_free_pool(p);
    th_assert_no_failures();
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Byte copies                                                               */
/* ------------------------------------------------------------------------ */

START_TEST(lm_byte_copy)
{
    tt_pool *p = th_make_pool(2);
    tt_exec ex;
    ck_assert_int_eq(tt_exec_init(&ex, p, 2), TT_OK);
    tt_exec assigned = ex; /* assignment */
    tt_exec copied;
    memcpy(&copied, &ex, sizeof ex);
    lm_all_entries_refuse(&assigned, TT_ECOPY, "assigned copy");
    lm_all_entries_refuse(&copied, TT_ECOPY, "memcpy copy");
    ck_assert(!tt_can_broadcast(&copied));
    ck_assert(!tt_carries_team(&copied));
    ck_assert_uint_eq(tt_dispatch_cost(&copied, 2), UINT64_MAX);
    /* Calls on the copy do not reach the original. */
    tt_exec_limit(&copied, 1);
    tt_exec_finish(&copied);
    ck_assert_uint_eq(tt_exec_budget(&ex), th_expect_budget(2, 2));
    lm_all_entries_refuse(&copied, TT_ECOPY, "finished copy");
    /* The original still works, once. */
    ck_assert_int_eq(tt_fork(&ex, 2, lm_job, NULL), TT_OK);
    /* A copy of a consumed token is still a copy. */
    tt_exec late = ex;
    lm_all_entries_refuse(&late, TT_ECOPY, "copy of a consumed token");
    /* Copies of serial tokens. */
    tt_exec s;
    tt_exec_init_serial(&s);
    tt_exec sc = s;
    lm_all_entries_refuse(&sc, TT_ECOPY, "copy of a serial token");
    ck_assert_int_eq(tt_for_ranges(&s, 4, 1, lm_range, NULL), TT_OK);
    th_free_pool(p);
    th_assert_no_failures();
}
END_TEST

/* A job copies its child token; a scope leader copies a scope-reborrowed
 * token; a leader copies its team token (finishing the copy keeps the
 * leader role held). */
/* Counts into its own counter, not lm_ran: the sibling job checks lm_ran
 * for "ran nothing" at the same time. */
static void lm_count_range(void *arg, size_t b, size_t e)
{
    atomic_fetch_add((_Atomic long *)arg, (long)(e - b));
}

static void lm_copy_child_job(void *arg, unsigned i, tt_exec *c)
{
    (void)arg;
    (void)i;
    tt_exec copy = *c;
    lm_all_entries_refuse(&copy, TT_ECOPY, "copy of a fork child");
    _Atomic long n = 0;
    TT_CHECK(tt_for_ranges(c, 4, 1, lm_count_range, (void *)&n) == TT_OK, "the child itself");
    TT_CHECK(atomic_load(&n) == 4, "the child itself covered %ld of 4 indices", atomic_load(&n));
}

static void lm_copy_scope(void *arg, tt_scope *s)
{
    (void)arg;
    tt_exec child;
    tt_scope_reborrow(s, &child);
    tt_exec copy;
    memcpy(&copy, &child, sizeof child);
    lm_all_entries_refuse(&copy, TT_ECOPY, "copy of a scope-reborrowed token");
    TT_CHECK(tt_for_ranges(&child, 4, 1, lm_range, NULL) == TT_OK, "the scope child itself");
}

START_TEST(lm_byte_copy_derived)
{
    tt_pool *p = th_make_pool(2);
    tt_exec ex;
    ck_assert_int_eq(tt_exec_init(&ex, p, 2), TT_OK);
    ck_assert_int_eq(tt_fork(&ex, 2, lm_copy_child_job, NULL), TT_OK);
    ck_assert_int_eq(tt_exec_init(&ex, p, 2), TT_OK);
    ck_assert_int_eq(tt_team_scope(&ex, lm_copy_scope, NULL), TT_OK);
    tt_team *team = NULL;
    ck_assert_int_eq(tt_pool_into_team(p, th_expect_width(2), &team), TT_OK);
    ck_assert_int_eq(tt_team_lead(team, 2, &ex), TT_OK);
    tt_exec copy = ex;
    lm_all_entries_refuse(&copy, TT_ECOPY, "copy of a team token");
    tt_exec_finish(&copy);
    tt_exec other;
    ck_assert_int_eq(tt_team_try_lead(team, 1, &other), TT_REFUSED_BUSY);
    tt_exec_finish(&ex);
    ck_assert_int_eq(tt_team_try_lead(team, 1, &other), TT_OK);
    tt_exec_finish(&other);
    ck_assert_ptr_eq(tt_team_into_pool(team), p);
    th_free_pool(p);
    th_assert_no_failures();
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Tokens and scopes used on the wrong thread                                */
/* ------------------------------------------------------------------------ */

typedef struct lm_other {
    tt_exec *tok;
    tt_scope *scope;
    int what;
    int rc[E_COUNT + 8];
    tt_exec reborrowed;
} lm_other;

static void *lm_other_thread(void *arg)
{
    lm_other *o = arg;
    if (o->tok) {
        int n = o->what ? o->what : E_COUNT;
        for (int e = 0; e < n; e++)
            o->rc[e] = lm_enter(o->tok, e);
    }
    if (o->scope) {
        o->rc[0] = tt_scope_run(o->scope, lm_section, NULL);
        o->rc[1] = tt_scope_run_with(o->scope, 1, lm_section, NULL);
        o->rc[2] = tt_scope_split(o->scope, 2, lm_split, NULL);
        o->rc[3] = tt_scope_fork(o->scope, 2, lm_job, NULL);
        tt_scope_reborrow(o->scope, &o->reborrowed);
        o->rc[4] = tt_for_ranges(&o->reborrowed, 4, 1, lm_range, NULL);
    }
    return NULL;
}

static void lm_run_other(lm_other *o)
{
    pthread_t t;
    pthread_create(&t, NULL, lm_other_thread, o);
    th_join_timeout(t, 10);
}

/* A fork child (it holds members) used on a plain thread and by a sibling
 * job: TT_EWRONGTHREAD (a broadcast refuses first: TT_REFUSED_FORK_CHILD);
 * nothing consumed, the child's own task then uses it. */
typedef struct lm_sib {
    tt_exec *child0;
    th_flag published, done;
    int rc_sibling;
} lm_sib;

static TT_TEST_UNUSED void lm_wrong_thread_job(void *arg, unsigned i, tt_exec *c)
{
    lm_sib *s = arg;
    if (i == 0) {
        /* The team scopes come last: a budget-1 child is not checked by
         * them (lm_team_scope_budget1_child_wrong_thread). */
        lm_other o = {.tok = c, .what = tt_exec_budget(c) > 1 ? E_COUNT : E_SCOPE};
        long before = atomic_load(&lm_ran);
        lm_run_other(&o);
        for (int e = 0; e < o.what; e++) {
            /* A broadcast may report the refusal or the thread: both run
             * nothing (which check comes first is not specified). */
            bool ok = o.rc[e] == TT_EWRONGTHREAD ||
                      (e == E_BCAST && o.rc[e] == TT_REFUSED_FORK_CHILD);
            TT_CHECK(ok, "fork child on a plain thread: %s returned %s, expected TT_EWRONGTHREAD",
                     lm_entry_name[e], tt_status_name(o.rc[e]));
        }
        TT_CHECK(atomic_load(&lm_ran) == before, "user code ran");
        /* Offer the token to the sibling and wait for its try. */
        s->child0 = c;
        th_flag_set(&s->published, 1);
        bool tried = th_flag_wait_ge(&s->done, 1, 2);
        if (tried)
            TT_CHECK(s->rc_sibling == TT_EWRONGTHREAD,
                     "fork child used by a sibling job's member: %s",
                     tt_status_name(s->rc_sibling));
        /* Nothing was consumed. */
        TT_CHECK(tt_for_ranges(c, 8, 1, lm_range, NULL) == TT_OK, "the child's own entry");
    } else if (th_flag_wait_ge(&s->published, 1, 2)) {
        /* Both jobs run at once on members 0 and 1 (a plain caller's full
         * gang); if they did not, the sibling case is skipped. */
        s->rc_sibling = tt_for_ranges(s->child0, 8, 1, lm_range, NULL);
        th_flag_set(&s->done, 1);
    }
}

START_TEST(lm_fork_child_wrong_thread)
{
#if TT_PARALLEL_ENABLED
    /* Children of budget 1 (width 2, budget 2) and of budget 2 (width 4,
     * budget 4): each holds members. */
    for (unsigned w = 2; w <= 4; w += 2) {
        tt_pool *p = th_make_pool(w);
        lm_sib s = {0};
        tt_exec ex;
        ck_assert_int_eq(tt_exec_init(&ex, p, w), TT_OK);
        ck_assert_int_eq(tt_fork(&ex, 2, lm_wrong_thread_job, &s), TT_OK);
        th_free_pool(p);
    }
    th_assert_no_failures();
#endif
}
END_TEST

/* Scope functions called from another thread than the leader's:
 * TT_EWRONGTHREAD; tt_scope_reborrow there leaves the token invalid. */
typedef struct lm_sc {
    tt_scope *scope;
    int rank1_rc[4];
    bool rank1_ran;
} lm_sc;

static void lm_rank1_section(void *arg, tt_section *s)
{
    lm_sc *c = arg;
    if (tt_section_rank(s) == 1) {
        c->rank1_ran = true;
        c->rank1_rc[0] = tt_scope_run(c->scope, lm_section, NULL);
        c->rank1_rc[1] = tt_scope_run_with(c->scope, 1, lm_section, NULL);
        c->rank1_rc[2] = tt_scope_split(c->scope, 2, lm_split, NULL);
        c->rank1_rc[3] = tt_scope_fork(c->scope, 2, lm_job, NULL);
    }
}

static void lm_wrong_thread_scope(void *arg, tt_scope *scope)
{
    lm_sc *c = arg;
    c->scope = scope;
    lm_other o = {.scope = scope};
    long before = atomic_load(&lm_ran);
    lm_run_other(&o);
    static const char *const fn[] = {"tt_scope_run", "tt_scope_run_with", "tt_scope_split",
                                     "tt_scope_fork"};
    for (int i = 0; i < 4; i++)
        TT_CHECK(o.rc[i] == TT_EWRONGTHREAD, "%s from another thread: %s", fn[i],
                 tt_status_name(o.rc[i]));
    TT_CHECK(o.rc[4] == TT_EINVAL, "token from tt_scope_reborrow on another thread: %s",
             tt_status_name(o.rc[4]));
    TT_CHECK(atomic_load(&lm_ran) == before, "user code ran");
    /* From a participant other than the leader, inside a section. */
    TT_CHECK(tt_scope_run(scope, lm_rank1_section, c) == TT_OK, "section");
    if (tt_scope_size(scope) > 1) {
        TT_CHECK(c->rank1_ran, "rank 1 did not run");
        for (int i = 0; i < 4; i++)
            TT_CHECK(c->rank1_rc[i] == TT_EWRONGTHREAD, "%s from rank 1: %s", fn[i],
                     tt_status_name(c->rank1_rc[i]));
    }
}

START_TEST(lm_scope_wrong_thread)
{
    tt_pool *p = th_make_pool(2);
    for (unsigned budget = 1; budget <= 2; budget++) {
        lm_sc c = {0};
        tt_exec ex;
        ck_assert_int_eq(tt_exec_init(&ex, p, budget), TT_OK);
        ck_assert_int_eq(tt_team_scope(&ex, lm_wrong_thread_scope, &c), TT_OK);
    }
    th_free_pool(p);
    th_assert_no_failures();
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Scope functions from inside a section of the same scope                   */
/* ------------------------------------------------------------------------ */

static void lm_leader_section(void *arg, tt_section *s)
{
    tt_scope *scope = arg;
    if (tt_section_rank(s) != 0)
        return;
    long before = atomic_load(&lm_ran);
    int rc[4] = {tt_scope_run(scope, lm_section, NULL), tt_scope_run_with(scope, 1, lm_section, NULL),
                 tt_scope_split(scope, 2, lm_split, NULL), tt_scope_fork(scope, 2, lm_job, NULL)};
    static const char *const fn[] = {"tt_scope_run", "tt_scope_run_with", "tt_scope_split",
                                     "tt_scope_fork"};
    for (int i = 0; i < 4; i++)
        TT_CHECK(rc[i] == TT_EBUSY, "%s by the leader inside a section of the scope: %s", fn[i],
                 tt_status_name(rc[i]));
    TT_CHECK(atomic_load(&lm_ran) == before, "user code ran");
}

/* Inside a split part: the group leader that is the scope's leader gets
 * TT_EBUSY on the outer scope, another group's leader TT_EWRONGTHREAD. */
typedef struct lm_outer {
    tt_scope *outer;
    pthread_t leader;
    int rc[8];
    bool other_group;
} lm_outer;

static void lm_split_part(void *arg, unsigned part, tt_scope *sub)
{
    lm_outer *o = arg;
    (void)sub;
    if (part >= 2)
        return;
    int rc = tt_scope_run(o->outer, lm_section, NULL);
    o->rc[part] = rc;
    if (!pthread_equal(pthread_self(), o->leader))
        o->other_group = true;
}

static void lm_busy_scope(void *arg, tt_scope *scope)
{
    (void)arg;
    TT_CHECK(tt_scope_run(scope, lm_leader_section, scope) == TT_OK, "section");
    TT_CHECK(tt_scope_run_with(scope, 1, lm_leader_section, scope) == TT_OK, "section of one");
    lm_outer o = {.outer = scope, .leader = pthread_self(), .rc = {-1, -1}};
    TT_CHECK(tt_scope_split(scope, 2, lm_split_part, &o) == TT_OK, "split");
    TT_CHECK(o.rc[0] == TT_EBUSY, "outer tt_scope_run from part 0 (the leader): %s",
             tt_status_name(o.rc[0]));
    if (o.other_group)
        TT_CHECK(o.rc[1] == TT_EWRONGTHREAD, "outer tt_scope_run from part 1 (another group): %s",
                 tt_status_name(o.rc[1]));
    else
        TT_CHECK(o.rc[1] == TT_EBUSY, "outer tt_scope_run from part 1 on the leader: %s",
                 tt_status_name(o.rc[1]));
    /* Once the section is over, the scope serves again. */
    long before = atomic_load(&lm_ran);
    TT_CHECK(tt_scope_run(scope, lm_section, NULL) == TT_OK, "after");
    TT_CHECK(atomic_load(&lm_ran) == before + tt_scope_size(scope), "every participant ran");
}

START_TEST(lm_scope_reentry_from_section)
{
    tt_pool *p = th_make_pool(2);
    for (unsigned budget = 1; budget <= 2; budget++) {
        tt_exec ex;
        ck_assert_int_eq(tt_exec_init(&ex, p, budget), TT_OK);
        ck_assert_int_eq(tt_team_scope(&ex, lm_busy_scope, NULL), TT_OK);
    }
    th_free_pool(p);
    th_assert_no_failures();
}
END_TEST

static void lm_bad_scope_args(void *arg, tt_scope *scope)
{
    (void)arg;
    unsigned n = tt_scope_size(scope);
    TT_CHECK(tt_scope_run_with(scope, 0, lm_section, NULL) == TT_EINVAL, "run_with 0");
    TT_CHECK(tt_scope_run_with(scope, n + 1, lm_section, NULL) == TT_EINVAL, "run_with size+1");
    TT_CHECK(tt_scope_run(scope, NULL, NULL) == TT_EINVAL, "run NULL");
    TT_CHECK(tt_scope_split(scope, 0, lm_split, NULL) == TT_EINVAL, "split 0");
    TT_CHECK(tt_scope_split(scope, 2, NULL, NULL) == TT_EINVAL, "split NULL");
    TT_CHECK(tt_scope_fork(scope, 0, lm_job, NULL) == TT_EINVAL, "scope fork 0");
    TT_CHECK(tt_scope_fork(scope, 2, NULL, NULL) == TT_EINVAL, "scope fork NULL");
    TT_CHECK(tt_scope_run(NULL, lm_section, NULL) == TT_EINVAL, "run on NULL");
    TT_CHECK(tt_scope_split(NULL, 1, lm_split, NULL) == TT_EINVAL, "split on NULL");
    TT_CHECK(tt_scope_fork(NULL, 1, lm_job, NULL) == TT_EINVAL, "fork on NULL");
    tt_exec c;
    TT_CHECK(tt_scope_reborrow(NULL, &c) == &c, "reborrow NULL scope");
    lm_all_entries_refuse(&c, TT_EINVAL, "token from tt_scope_reborrow(NULL)");
    TT_CHECK(tt_scope_reborrow(scope, NULL) == NULL, "reborrow into NULL");
    TT_CHECK(tt_scope_size(NULL) == 0 && tt_section_rank(NULL) == 0 && tt_section_size(NULL) == 0,
             "NULL accessors");
    TT_CHECK(tt_section_barrier(NULL) == TT_EINVAL, "barrier on NULL");
}

START_TEST(lm_scope_bad_args)
{
    tt_pool *p = th_make_pool(2);
    tt_exec ex;
    ck_assert_int_eq(tt_exec_init(&ex, p, 2), TT_OK);
    long before = atomic_load(&lm_ran);
    ck_assert_int_eq(tt_team_scope(&ex, lm_bad_scope_args, NULL), TT_OK);
    ck_assert_int_eq(atomic_load(&lm_ran), before);
    th_free_pool(p);
    th_assert_no_failures();
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Persistent teams                                                          */
/* ------------------------------------------------------------------------ */

static void *lm_try_lead_thread(void *arg)
{
    tt_team *team = arg;
    tt_exec ex;
    int rc = tt_team_try_lead(team, 1, &ex);
    if (rc == TT_OK)
        tt_exec_finish(&ex);
    return (void *)(intptr_t)rc;
}

START_TEST(lm_team_try_lead_busy)
{
    tt_pool *p = th_make_pool(2);
    unsigned w = th_expect_width(2);
    tt_team *team = NULL;
    ck_assert_int_eq(tt_pool_into_team(p, w, &team), TT_OK);
    tt_exec lead, other, child;
    ck_assert_int_eq(tt_team_lead(team, w, &lead), TT_OK);
    ck_assert(tt_carries_team(&lead));
    /* Held: refused on this thread and on another. */
    ck_assert_int_eq(tt_team_try_lead(team, 1, &other), TT_REFUSED_BUSY);
    pthread_t t;
    void *res;
    pthread_create(&t, NULL, lm_try_lead_thread, team);
    pthread_join(t, &res);
    ck_assert_int_eq((int)(intptr_t)res, TT_REFUSED_BUSY);
    /* A reborrowed child's entry does not end the role... */
    tt_exec_reborrow(&lead, &child);
    ck_assert_int_eq(tt_for_ranges(&child, 8, 1, lm_range, NULL), TT_OK);
    ck_assert_int_eq(tt_team_try_lead(team, 1, &other), TT_REFUSED_BUSY);
    /* ...the lead token's own entry does. */
    ck_assert_int_eq(tt_for_ranges(&lead, 8, 1, lm_range, NULL), TT_OK);
    ck_assert_int_eq(tt_team_try_lead(team, 1, &other), TT_OK);
    /* Finishing ends it too. */
    ck_assert_int_eq(tt_team_try_lead(team, 1, &lead), TT_REFUSED_BUSY);
    tt_exec_finish(&other);
    ck_assert_int_eq(tt_team_try_lead(team, 1, &lead), TT_OK);
    tt_exec_finish(&lead);
    ck_assert_ptr_eq(tt_team_into_pool(team), p);
    th_free_pool(p);
}
END_TEST

/* tt_team_lead waits while another leader holds the team. */
typedef struct lm_lead {
    tt_team *team;
    th_flag got;
    int rc;
} lm_lead;

static void *lm_lead_thread(void *arg)
{
    lm_lead *l = arg;
    tt_exec ex;
    l->rc = tt_team_lead(l->team, 1, &ex);
    th_flag_set(&l->got, 1);
    if (l->rc == TT_OK)
        tt_exec_finish(&ex);
    return NULL;
}

START_TEST(lm_team_lead_blocks)
{
    tt_pool *p = th_make_pool(2);
    tt_team *team = NULL;
    ck_assert_int_eq(tt_pool_into_team(p, th_expect_width(2), &team), TT_OK);
    tt_exec lead;
    ck_assert_int_eq(tt_team_lead(team, 2, &lead), TT_OK);
    lm_lead l = {.team = team};
    pthread_t t;
    pthread_create(&t, NULL, lm_lead_thread, &l);
    th_sleep_us(100000);
    ck_assert_msg(th_flag_get(&l.got) == 0, "tt_team_lead did not wait for the leader");
    tt_exec_finish(&lead);
    ck_assert(th_flag_wait_ge(&l.got, 1, 5));
    ck_assert(th_join_timeout(t, 5));
    ck_assert_int_eq(l.rc, TT_OK);
    ck_assert_ptr_eq(tt_team_into_pool(team), p);
    th_free_pool(p);
}
END_TEST

/* A pool a team owns: destroy and a second into_team are TT_EBUSY and
 * change nothing; invalid team arguments are TT_EINVAL. */
START_TEST(lm_team_owned_pool)
{
    tt_pool *p = th_make_pool(2);
    unsigned w = th_expect_width(2);
    tt_team *team = NULL, *t2 = (tt_team *)p;
    ck_assert_int_eq(tt_pool_into_team(p, 0, &t2), TT_EINVAL);
    ck_assert_ptr_null(t2);
    ck_assert_int_eq(tt_pool_into_team(p, w + 1, &t2), TT_EINVAL);
    ck_assert_int_eq(tt_pool_into_team(NULL, 1, &t2), TT_EINVAL);
    ck_assert_int_eq(tt_pool_into_team(p, 1, NULL), TT_EINVAL);
    ck_assert_int_eq(tt_pool_into_team(p, w, &team), TT_OK);
    ck_assert_int_eq(tt_pool_destroy(p), TT_EBUSY);
    ck_assert_int_eq(tt_pool_into_team(p, 1, &t2), TT_EBUSY);
    ck_assert_ptr_null(t2);
    tt_exec ex;
    ck_assert_int_eq(tt_team_lead(team, 0, &ex), TT_EINVAL);
    lm_all_entries_refuse(&ex, TT_EINVAL, "token of a failed tt_team_lead");
    ck_assert_int_eq(tt_team_lead(NULL, 1, &ex), TT_EINVAL);
    ck_assert_int_eq(tt_team_lead(team, 1, NULL), TT_EINVAL);
    ck_assert_int_eq(tt_team_try_lead(NULL, 1, &ex), TT_EINVAL);
    ck_assert_ptr_null(tt_team_pool(NULL));
    ck_assert_ptr_null(tt_team_into_pool(NULL));
    ck_assert_uint_eq(tt_team_width(NULL), 0);
    /* Nothing changed: the team works. */
    ck_assert_int_eq(tt_team_lead(team, w, &ex), TT_OK);
    long before = atomic_load(&lm_ran);
    ck_assert_int_eq(tt_broadcast(&ex, lm_bcast, NULL), TT_OK);
    ck_assert_int_eq(atomic_load(&lm_ran), before + (long)w);
    ck_assert_ptr_eq(tt_team_into_pool(team), p);
    ck_assert_int_eq(tt_pool_destroy(p), TT_OK);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* tt_exec_limit(ex, 0)                                                      */
/* ------------------------------------------------------------------------ */

static void lm_job_limit0(void *arg, unsigned i, tt_exec *child)
{
    (void)arg;
    (void)i;
    TT_CHECK(tt_exec_limit(child, 0) == child, "tt_exec_limit on a fork child");
    lm_all_entries_refuse(child, TT_EINVAL, "fork child limit 0");
}

START_TEST(lm_limit_zero)
{
    tt_pool *p = th_make_pool(2);
    tt_exec ex, child;
    ck_assert_ptr_null(tt_exec_limit(NULL, 0));
    ck_assert_int_eq(tt_exec_init(&ex, p, 2), TT_OK);
    ck_assert_ptr_eq(tt_exec_limit(&ex, 0), &ex);
    lm_all_entries_refuse(&ex, TT_EINVAL, "limit 0");
    /* Not consumed: still the same token, finish works. */
    ck_assert_uint_eq(tt_exec_budget(&ex), th_expect_budget(2, 2));
    tt_exec_reborrow(&ex, &child);
    lm_all_entries_refuse(&child, TT_EINVAL, "child of a limit-0 token");
    tt_exec_finish(&ex);
    lm_all_entries_refuse(&ex, TT_ECONSUMED, "finished limit-0 token");
    /* On a serial token and on a fork child. */
    tt_exec s;
    tt_exec_init_serial(&s);
    tt_exec_limit(&s, 0);
    lm_all_entries_refuse(&s, TT_EINVAL, "serial limit 0");
    ck_assert_int_eq(tt_exec_init(&ex, p, 2), TT_OK);
    ck_assert_int_eq(tt_fork(&ex, 2, lm_job_limit0, NULL), TT_OK);
    th_free_pool(p);
    th_assert_no_failures();
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Tokens of a destroyed pool                                                */
/* ------------------------------------------------------------------------ */

START_TEST(lm_destroyed_pool_tokens)
{
    for (int round = 0; round < 2; round++) {
        tt_pool *p = th_make_pool(2);
        tt_exec ex, child, s;
        ck_assert_int_eq(tt_exec_init(&ex, p, 2), TT_OK);
        tt_exec_reborrow(&ex, &child);
        tt_exec_init_serial(&s);
        th_free_pool(p);
        lm_all_entries_refuse(&ex, TT_EDESTROYED, "root minted before tt_pool_destroy");
        lm_all_entries_refuse(&child, TT_EDESTROYED, "reborrowed child minted before destroy");
        ck_assert(!tt_can_broadcast(&ex));
        ck_assert_uint_eq(tt_dispatch_cost(&ex, 2), UINT64_MAX);
        /* A new pool (the library reuses pool objects) works, and the old
         * tokens still refuse. */
        tt_pool *q = th_make_pool(2);
        tt_exec nx;
        ck_assert_int_eq(tt_exec_init(&nx, q, 2), TT_OK);
        ck_assert_int_eq(tt_for_ranges(&nx, 8, 1, lm_range, NULL), TT_OK);
        lm_all_entries_refuse(&ex, TT_EDESTROYED, "old root after a new pool");
        /* A serial token has no pool to lose. */
        ck_assert_int_eq(tt_for_ranges(&s, 4, 1, lm_range, NULL), TT_OK);
        th_free_pool(q);
    }
    th_assert_no_failures();
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Invalid arguments, uninitialised tokens                                   */
/* ------------------------------------------------------------------------ */

START_TEST(lm_invalid_args)
{
    tt_pool *p = th_make_pool(2);
    tt_exec ex;
    /* NULL tokens. */
    for (int e = 0; e < E_COUNT; e++)
        ck_assert_int_eq(lm_enter(NULL, e), TT_EINVAL);
    ck_assert(!tt_can_broadcast(NULL));
    ck_assert(!tt_carries_team(NULL));
    ck_assert_uint_eq(tt_exec_budget(NULL), 0);
    tt_exec_finish(NULL);
    tt_exec_init_serial(NULL);
    /* Minting. */
    ck_assert_int_eq(tt_exec_init(NULL, p, 1), TT_EINVAL);
    ck_assert_int_eq(tt_exec_init(&ex, NULL, 1), TT_EINVAL);
    lm_all_entries_refuse(&ex, TT_EINVAL, "token of tt_exec_init(NULL pool)");
    ck_assert_int_eq(tt_exec_init(&ex, p, 0), TT_EINVAL);
    lm_all_entries_refuse(&ex, TT_EINVAL, "token of tt_exec_init(budget 0)");
    ck_assert_uint_eq(tt_exec_budget(&ex), 0);
    /* NULL functions, zero counts: TT_EINVAL and the token is not consumed. */
    long before = atomic_load(&lm_ran);
    ck_assert_int_eq(tt_exec_init(&ex, p, 2), TT_OK);
    ck_assert_int_eq(tt_fork(&ex, 2, NULL, NULL), TT_EINVAL);
    ck_assert_int_eq(tt_fork(&ex, 0, lm_job, NULL), TT_EINVAL);
    ck_assert_int_eq(tt_for_ranges(&ex, 8, 0, lm_range, NULL), TT_EINVAL);
    ck_assert_int_eq(tt_for_ranges(&ex, 8, 1, NULL, NULL), TT_EINVAL);
    ck_assert_int_eq(tt_broadcast(&ex, NULL, NULL), TT_EINVAL);
    ck_assert_int_eq(tt_external(&ex, NULL, NULL), TT_EINVAL);
    ck_assert_int_eq(tt_team_scope(&ex, NULL, NULL), TT_EINVAL);
    ck_assert_int_eq(tt_team_scope_with(&ex, NULL, NULL, NULL), TT_EINVAL);
    ck_assert_int_eq(atomic_load(&lm_ran), before);
    ck_assert_int_eq(tt_for_ranges(&ex, 8, 1, lm_range, NULL), TT_OK);
    /* Pools and attributes. */
    ck_assert_int_eq(tt_pool_create(NULL, NULL), TT_EINVAL);
    ck_assert_int_eq(tt_pool_destroy(NULL), TT_OK);
    ck_assert_uint_eq(tt_pool_width(NULL), 0);
    ck_assert_int_eq(tt_pool_release_idle(NULL), TT_EINVAL);
    ck_assert_int_eq(tt_pool_wait_counts(NULL, NULL), TT_EINVAL);
    ck_assert(!tt_pool_is_member(NULL, NULL));
    ck_assert_int_eq(tt_pool_attr_create(NULL), TT_EINVAL);
    tt_pool_attr_destroy(NULL);
    tt_pool_attr *a = NULL;
    ck_assert_int_eq(tt_pool_attr_create(&a), TT_OK);
    ck_assert_int_eq(tt_pool_attr_set_threads(NULL, 2), TT_EINVAL);
    ck_assert_int_eq(tt_pool_attr_set_thread_name(NULL, "x"), TT_EINVAL);
    ck_assert_int_eq(tt_pool_attr_set_thread_name(a, ""), TT_EINVAL);
    ck_assert_int_eq(tt_pool_attr_set_stack_size(a, 1024), TT_EINVAL);
    ck_assert_int_eq(tt_pool_attr_set_qos(a, (tt_qos)99), TT_EINVAL);
    ck_assert_int_eq(tt_pool_attr_set_on_start(NULL, NULL, NULL), TT_EINVAL);
    unsigned th;
    ck_assert_int_eq(tt_pool_attr_get_threads(a, NULL), TT_EINVAL);
    ck_assert_int_eq(tt_pool_attr_get_threads(NULL, &th), TT_EINVAL);
    tt_pool_attr_destroy(a);
    /* Every code has a sentence and a name. */
    for (int c = -2; c < 40; c++) {
        ck_assert_ptr_nonnull(tt_strerror(c));
        ck_assert_ptr_nonnull(tt_status_name(c));
    }
    th_free_pool(p);
}
END_TEST

START_TEST(lm_uninitialised_token)
{
    tt_exec ex;
    memset(&ex, 0, sizeof ex);
    lm_all_entries_refuse(&ex, TT_EINVAL, "zero-filled token");
    ck_assert_uint_eq(tt_exec_budget(&ex), 0);
    ck_assert(!tt_can_broadcast(&ex));
    tt_exec_finish(&ex);
    tt_exec_limit(&ex, 1);
    memset(&ex, 0xa5, sizeof ex);
    lm_all_entries_refuse(&ex, TT_EINVAL, "garbage-filled token");
    ck_assert_uint_eq(tt_exec_budget(&ex), 0);
    ck_assert(!tt_carries_team(&ex));
    ck_assert_uint_eq(tt_dispatch_cost(&ex, 2), UINT64_MAX);
    /* (A reborrow of it: lm_reborrow_of_garbage_token, with the gaps.) */
    th_assert_no_failures();
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Broadcast refusals consume nothing                                        */
/* ------------------------------------------------------------------------ */

static void lm_refusal_job(void *arg, unsigned i, tt_exec *c)
{
    tt_pool *p = arg;
    (void)i;
    /* A fork child, and what derives from it. */
    TT_CHECK(!tt_can_broadcast(c), "can_broadcast on a fork child");
    TT_CHECK(tt_broadcast(c, lm_bcast, NULL) == TT_REFUSED_FORK_CHILD, "fork child");
    tt_exec rb;
    tt_exec_reborrow(c, &rb);
    TT_CHECK(tt_broadcast(&rb, lm_bcast, NULL) == TT_REFUSED_FORK_CHILD, "reborrow of a child");
    TT_CHECK(tt_for_ranges(&rb, 4, 1, lm_range, NULL) == TT_OK, "the reborrow, refused, runs");
    tt_exec_limit(c, 1);
    TT_CHECK(tt_broadcast(c, lm_bcast, NULL) == TT_REFUSED_FORK_CHILD, "limited child");
    /* A root minted on a member of the same pool. */
    unsigned k;
    if (tt_pool_is_member(p, &k)) {
        tt_exec r;
        TT_CHECK(tt_exec_init(&r, p, 2) == TT_OK, "member root");
        TT_CHECK(!tt_can_broadcast(&r), "can_broadcast from a member");
        TT_CHECK(tt_broadcast(&r, lm_bcast, NULL) == TT_REFUSED_CALLER_IN_POOL, "member root");
        TT_CHECK(tt_for_ranges(&r, 4, 1, lm_range, NULL) == TT_OK, "the refused root, used");
    }
    /* Refused, not consumed: the child still works. */
    TT_CHECK(tt_for_ranges(c, 4, 1, lm_range, NULL) == TT_OK, "the refused child, used");
}

static void lm_refusal_scope_job(void *arg, unsigned i, tt_exec *c)
{
    (void)arg;
    (void)i;
    TT_CHECK(tt_carries_team(c), "scope fork child carries the team");
    TT_CHECK(tt_broadcast(c, lm_bcast, NULL) == TT_REFUSED_FORK_CHILD, "scope fork child");
    TT_CHECK(tt_for_ranges(c, 4, 1, lm_range, NULL) == TT_OK, "the refused scope child, used");
}

static void lm_refusal_scope(void *arg, tt_scope *s)
{
    TT_CHECK(tt_scope_fork(s, 2, lm_refusal_scope_job, arg) == TT_OK, "scope fork");
}

START_TEST(lm_broadcast_refusals)
{
    tt_pool *p = th_make_pool(2);
    tt_exec ex;
    ck_assert_int_eq(tt_exec_init(&ex, p, 2), TT_OK);
    ck_assert_int_eq(tt_fork(&ex, 2, lm_refusal_job, p), TT_OK);
    ck_assert_int_eq(tt_exec_init(&ex, p, 2), TT_OK);
    ck_assert_int_eq(tt_team_scope(&ex, lm_refusal_scope, p), TT_OK);
    th_free_pool(p);
    th_assert_no_failures();
}
END_TEST

/* ------------------------------------------------------------------------ */
/* A token entered on another thread while inside an entry                   */
/* ------------------------------------------------------------------------ */

typedef struct lm_in {
    tt_exec *tok;
    th_flag inside, release;
} lm_in;

static void lm_in_job(void *arg, unsigned i, tt_exec *c)
{
    (void)c;
    lm_in *in = arg;
    if (i == 0) {
        th_flag_set(&in->inside, 1);
        TT_CHECK(th_flag_wait_ge(&in->release, 1, 10), "never released");
    }
}

static void *lm_in_thread(void *arg)
{
    lm_in *in = arg;
    int rc = tt_fork(in->tok, 2, lm_in_job, in);
    TT_CHECK(rc == TT_OK, "the entry: %s", tt_status_name(rc));
    return NULL;
}

START_TEST(lm_entry_while_inside_elsewhere)
{
    tt_pool *p = th_make_pool(2);
    tt_exec ex;
    ck_assert_int_eq(tt_exec_init(&ex, p, 2), TT_OK);
    lm_in in = {.tok = &ex};
    pthread_t t;
    pthread_create(&t, NULL, lm_in_thread, &in);
    ck_assert(th_flag_wait_ge(&in.inside, 1, 5));
    lm_all_entries_refuse(&ex, TT_ECONSUMED, "token inside an entry on another thread");
    th_flag_set(&in.release, 1);
    ck_assert(th_join_timeout(t, 10));
    th_free_pool(p);
    th_assert_no_failures();
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Regressions: misuses found undefended, fixed since                        */
/* ------------------------------------------------------------------------ */

/* A token with team authority handed to a task (a tt_scope_fork child) or
 * minted for the leader (tt_scope_reborrow) used on another thread. The
 * header: "TT_EWRONGTHREAD: a token handed to a task was used on another
 * thread than that task's"; tt_scope_reborrow: "only on the leader's
 * thread". (Regression: team entries skipped the thread check and
 * team_section() made the calling thread the control block's leader, so
 * the other thread ran a section on the scope's members -- here while the
 * owner waits; had the owner issued a command at the same time, two
 * threads would have driven one control block.) */
typedef struct lm_tt {
    int rc_fork_child[E_COUNT];
    int rc_reborrow[E_COUNT];
    bool forked;
} lm_tt;

static void lm_team_other_job(void *arg, unsigned i, tt_exec *c)
{
    lm_tt *r = arg;
    if (i != 0)
        return;
    lm_other o = {.tok = c};
    lm_run_other(&o);
    memcpy(r->rc_fork_child, o.rc, sizeof r->rc_fork_child);
    r->forked = true;
}

static void lm_team_other_scope(void *arg, tt_scope *s)
{
    lm_tt *r = arg;
    tt_exec child;
    tt_scope_reborrow(s, &child);
    lm_other o = {.tok = &child};
    lm_run_other(&o);
    memcpy(r->rc_reborrow, o.rc, sizeof r->rc_reborrow);
    TT_CHECK(tt_scope_fork(s, 2, lm_team_other_job, r) == TT_OK, "scope fork");
}

START_TEST(lm_team_token_wrong_thread)
{
    tt_pool *p = th_make_pool(2);
    lm_tt r;
    memset(&r, 0, sizeof r);
    tt_exec ex;
    ck_assert_int_eq(tt_exec_init(&ex, p, 2), TT_OK);
    ck_assert_int_eq(tt_team_scope(&ex, lm_team_other_scope, &r), TT_OK);
    ck_assert(r.forked);
    for (int e = 0; e < E_COUNT; e++) {
        TT_CHECK(r.rc_reborrow[e] == TT_EWRONGTHREAD,
                 "tt_scope_reborrow token used on another thread: %s returned %s, expected "
                 "TT_EWRONGTHREAD",
                 lm_entry_name[e], tt_status_name(r.rc_reborrow[e]));
        bool ok = r.rc_fork_child[e] == TT_EWRONGTHREAD ||
                  (e == E_BCAST && r.rc_fork_child[e] == TT_REFUSED_FORK_CHILD);
        TT_CHECK(ok,
                 "tt_scope_fork child used on another thread than its job's: %s returned %s, "
                 "expected TT_EWRONGTHREAD",
                 lm_entry_name[e], tt_status_name(r.rc_fork_child[e]));
    }
    th_free_pool(p);
    th_assert_no_failures();
}
END_TEST

/* A second reborrowed child of a parent whose first child is inside an
 * entry: the header says an entry on the parent is TT_EBUSY then, and
 * slots are conserved under the root. (Regression: tt__exec_enter failed
 * only on an ancestor itself inside an entry, not on one that already
 * counted a descendant inside, so the second child entered with the
 * parent's full budget and the root ran budget + 2 tasks at once.) */
typedef struct lm_sr {
    tt_exec *root;
    th_live live;
    int rc_second;
} lm_sr;

static void lm_sr_body(void *arg, size_t b, size_t e)
{
    lm_sr *s = arg;
    (void)b;
    (void)e;
    th_live_enter(&s->live);
    th_sleep_us(20000);
    th_live_leave(&s->live);
}

static void lm_sr_job(void *arg, unsigned i, tt_exec *c)
{
    (void)c;
    lm_sr *s = arg;
    th_live_enter(&s->live);
    if (i == 0) {
        tt_exec second;
        tt_exec_reborrow(s->root, &second);
        th_live_leave(&s->live); /* waits: holds no slot */
        s->rc_second = tt_for_ranges(&second, 2, 1, lm_sr_body, s);
        th_live_enter(&s->live);
    } else {
        th_sleep_us(30000);
    }
    th_live_leave(&s->live);
}

START_TEST(lm_second_reborrow_while_inside)
{
    tt_pool *p = th_make_pool(4);
    tt_exec root, first;
    ck_assert_int_eq(tt_exec_init(&root, p, 2), TT_OK);
    lm_sr s = {.root = &root, .rc_second = -1};
    th_live_init(&s.live);
    tt_exec_reborrow(&root, &first);
    ck_assert_int_eq(tt_fork(&first, 2, lm_sr_job, &s), TT_OK);
    unsigned budget = tt_exec_budget(&root);
    th_free_pool(p); /* before the asserts: a failure leaks nothing */
    ck_assert_msg(s.rc_second == TT_EBUSY,
                  "a second reborrow of a parent whose first child is inside an entry: entry "
                  "returned %s, expected TT_EBUSY (%d tasks ran at once under a root of budget %u)",
                  tt_status_name(s.rc_second), th_live_max(&s.live), budget);
    ck_assert_int_le(th_live_max(&s.live), (int)budget);
}
END_TEST

/* tt_team_scope on a parent whose reborrowed child is inside an entry:
 * TT_EBUSY like every other entry. (Regression: the scope first waited for
 * members, up to the acquire timeout, and then refused with
 * TT_REFUSED_UNAVAILABLE; the busy check came after the acquisition.) */
typedef struct lm_bp {
    tt_pool *pool;
    int rc[2];
} lm_bp;

static void lm_bp_job(void *arg, unsigned i, tt_exec *c)
{
    (void)c;
    lm_bp *b = arg;
    if (i != 0)
        return;
    b->rc[0] = lm_enter(lm_parent, E_SCOPE);
    b->rc[1] = lm_enter(lm_parent, E_SCOPE_WITH);
}

START_TEST(lm_team_scope_on_busy_parent)
{
    tt_pool *p = th_make_pool(2);
    for (unsigned budget = 1; budget <= 2; budget++) {
        tt_exec ex, child;
        lm_parent = &ex;
        lm_bp b = {.pool = p, .rc = {-1, -1}};
        ck_assert_int_eq(tt_exec_init(&ex, p, budget), TT_OK);
        tt_exec_reborrow(&ex, &child);
        ck_assert_int_eq(tt_fork(&child, 2, lm_bp_job, &b), TT_OK);
        for (int k = 0; k < 2; k++)
            TT_CHECK(b.rc[k] == TT_EBUSY,
                     "budget %u: %s on a parent whose child is inside an entry returned %s, "
                     "expected TT_EBUSY",
                     budget, lm_entry_name[E_SCOPE + k], tt_status_name(b.rc[k]));
        ck_assert_int_eq(tt_for_ranges(&ex, 8, 1, lm_range, NULL), TT_OK);
    }
    th_free_pool(p);
    th_assert_no_failures();
}
END_TEST

/* A fork child of budget 1 that holds a member, used by a team scope on a
 * plain thread: TT_EWRONGTHREAD like the other entries. (Regression:
 * tt_team_scope_with took its "leader alone" shortcut for budget 1 before
 * it checked the token's members, and ran on the wrong thread.) */
static TT_TEST_UNUSED void lm_b1_job(void *arg, unsigned i, tt_exec *c)
{
    int *rc = arg;
    if (i != 0)
        return;
    /* The entries before the scope refuse (TT_EWRONGTHREAD) and consume
     * nothing; the scope is the one that matters. */
    lm_other one = {.tok = c, .what = E_SCOPE + 1};
    lm_run_other(&one);
    rc[0] = one.rc[E_SCOPE];
    rc[1] = tt_for_ranges(c, 4, 1, lm_range, NULL); /* still the job's own */
}

START_TEST(lm_team_scope_budget1_child_wrong_thread)
{
#if TT_PARALLEL_ENABLED
    tt_pool *p = th_make_pool(2);
    int rc[2] = {-1, -1};
    tt_exec ex;
    ck_assert_int_eq(tt_exec_init(&ex, p, 2), TT_OK);
    ck_assert_int_eq(tt_fork(&ex, 2, lm_b1_job, rc), TT_OK);
    ck_assert_msg(rc[0] == TT_EWRONGTHREAD,
                  "tt_team_scope on a budget-1 fork child from another thread returned %s, "
                  "expected TT_EWRONGTHREAD",
                  tt_status_name(rc[0]));
    ck_assert_int_eq(rc[1], TT_OK);
    th_free_pool(p);
#endif
}
END_TEST

/* tt_exec_reborrow from an uninitialised (garbage) parent: the header's
 * TT_EINVAL covers "an uninitialised token", and a reborrow of a bad
 * parent leaves the child invalid. (Regression: mint() read the parent's
 * garbage pool pointer before the magic was checked: SIGSEGV.) Run in a
 * child process, so that a crash fails this test only. */
START_TEST(lm_reborrow_of_garbage_token)
{
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        signal(SIGALRM, SIG_DFL);
        alarm(10);
        tt_exec ex, child;
        memset(&ex, 0xa5, sizeof ex);
        tt_exec_reborrow(&ex, &child);
        th_reset_failures();
        lm_all_entries_refuse(&child, TT_EINVAL, "child of a garbage token");
        _exit(th_failures() ? 1 : 0);
    }
    int st = 0;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
                  "tt_exec_reborrow of a garbage-filled token: child process %s %d",
                  WIFSIGNALED(st) ? "killed by signal" : "exit status",
                  WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Suite                                                                     */
/* ------------------------------------------------------------------------ */

static Suite *misuse_suite(void)
{
    Suite *s = suite_create("misuse");
    TCase *tc = th_tcase(s, "consumed", 30);
    tcase_add_test(tc, lm_consumed_token);
    tcase_add_test(tc, lm_finished_token);
    tcase_add_test(tc, lm_fork_child_finished);

    tc = th_tcase(s, "parent", 30);
    tcase_add_test(tc, lm_entry_on_parent_inside);
    tcase_add_test(tc, lm_entry_on_busy_parent);
    tcase_add_test(tc, lm_child_of_bad_parent);

    tc = th_tcase(s, "copy", 30);
    tcase_add_test(tc, lm_byte_copy);
    tcase_add_test(tc, lm_byte_copy_derived);

    tc = th_tcase(s, "thread", 30);
    tcase_add_test(tc, lm_fork_child_wrong_thread);
    tcase_add_test(tc, lm_scope_wrong_thread);
    tcase_add_test(tc, lm_entry_while_inside_elsewhere);

    tc = th_tcase(s, "scope", 30);
    tcase_add_test(tc, lm_scope_reentry_from_section);
    tcase_add_test(tc, lm_scope_bad_args);

    tc = th_tcase(s, "team", 30);
    tcase_add_test(tc, lm_team_try_lead_busy);
    tcase_add_test(tc, lm_team_lead_blocks);
    tcase_add_test(tc, lm_team_owned_pool);

    tc = th_tcase(s, "tokens", 30);
    tcase_add_test(tc, lm_limit_zero);
    tcase_add_test(tc, lm_destroyed_pool_tokens);
    tcase_add_test(tc, lm_invalid_args);
    tcase_add_test(tc, lm_uninitialised_token);
    tcase_add_test(tc, lm_broadcast_refusals);

    tc = th_tcase(s, "regressions", 30);
    tcase_add_test(tc, lm_team_token_wrong_thread);
    tcase_add_test(tc, lm_second_reborrow_while_inside);
    tcase_add_test(tc, lm_team_scope_on_busy_parent);
    tcase_add_test(tc, lm_team_scope_budget1_child_wrong_thread);
    tcase_add_test(tc, lm_reborrow_of_garbage_token);
    return s;
}

int main(void) { return th_run_suite(misuse_suite()); }
