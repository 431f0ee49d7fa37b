/*
 * test_tokens.c -- the token protocol on every kind of token (lib/token.c):
 *
 *  - a refused entry (TT_EBUSY, TT_REFUSED_*) consumes nothing, on roots,
 *    reborrowed children, limited tokens, fork children, scope reborrows,
 *    team-lead tokens and scope-fork children ("refusals");
 *  - tt_can_broadcast agrees with tt_broadcast, busy ancestors and scopes
 *    included ("broadcast");
 *  - tt_exec_finish on a lead token whose child is inside an entry does not
 *    let a second leader in before that entry left ("lead");
 *  - tt_team_try_lead never waits for lent members ("lead");
 *  - reborrow chains that loop are TT_EINVAL, not a hang ("cycles");
 *  - one status table behind the enum, tt_strerror and tt_status_name
 *    ("status").
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "tt_test.h"

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

/* User code run by entries: each callback counts into the counter its
 * entry was handed (arg), so that concurrent callers (the jobs of one
 * fork) each see only their own entries. */
static void tk_count(void *arg) { atomic_fetch_add((_Atomic long *)arg, 1); }

static void tk_range(void *arg, size_t b, size_t e)
{
    (void)b;
    (void)e;
    tk_count(arg);
}
static void tk_job(void *arg, unsigned i, tt_exec *c)
{
    (void)i;
    (void)c;
    tk_count(arg);
}
static void tk_bcast(void *arg, unsigned i)
{
    (void)i;
    tk_count(arg);
}
static void tk_ext(void *arg, unsigned w)
{
    (void)w;
    tk_count(arg);
}
static void tk_scope_fn(void *arg, tt_scope *s)
{
    (void)s;
    tk_count(arg);
}

enum { E_FORK, E_RANGES, E_RANGES0, E_BCAST, E_EXTERNAL, E_SCOPE, E_COUNT };
static const char *const tk_entry_name[E_COUNT] = {
    "tt_fork", "tt_for_ranges", "tt_for_ranges(len 0)", "tt_broadcast", "tt_external",
    "tt_team_scope"};

static int tk_enter(tt_exec *ex, int e, _Atomic long *ran)
{
    switch (e) {
    case E_FORK:
        return tt_fork(ex, 2, tk_job, ran);
    case E_RANGES:
        return tt_for_ranges(ex, 16, 1, tk_range, ran);
    case E_RANGES0:
        return tt_for_ranges(ex, 0, 1, tk_range, ran);
    case E_BCAST:
        return tt_broadcast(ex, tk_bcast, ran);
    case E_EXTERNAL:
        return tt_external(ex, tk_ext, ran);
    default:
        return tt_team_scope(ex, tk_scope_fn, ran);
    }
}

/* Every entry on ex is refused with `want` (a broadcast may refuse with
 * `bcast_want` instead) and runs nothing; TT_CHECK, so any thread. */
static void tk_all_refuse(tt_exec *ex, int want, int bcast_want, const char *what)
{
    for (int e = 0; e < E_COUNT; e++) {
        _Atomic long ran = 0;
        int rc = tk_enter(ex, e, &ran);
        int w = e == E_BCAST ? bcast_want : want;
        TT_CHECK(rc == w, "%s: %s returned %s, expected %s", what, tk_entry_name[e],
                 tt_status_name(rc), tt_status_name(w));
        TT_CHECK(atomic_load(&ran) == 0, "%s: %s ran user code", what, tk_entry_name[e]);
    }
}

/* The token was not consumed by the refusals: an entry runs. */
static void tk_still_usable(tt_exec *ex, const char *what)
{
    _Atomic long ran = 0;
    int rc = tt_for_ranges(ex, 4, 1, tk_range, &ran);
    TT_CHECK(rc == TT_OK, "%s: the entry after the refusals returned %s", what,
             tt_status_name(rc));
    TT_CHECK(atomic_load(&ran) > 0, "%s: the entry after the refusals ran nothing", what);
}

/* Run `fn(arg)` inside an entry on `holder` (a range of one index, on the
 * calling thread), so that holder's ancestors are busy while it runs. */
typedef struct tk_inside {
    void (*fn)(void *arg);
    void *arg;
} tk_inside;

static void tk_inside_range(void *arg, size_t b, size_t e)
{
    (void)b;
    (void)e;
    tk_inside *in = arg;
    in->fn(in->arg);
}

static int tk_run_inside(tt_exec *holder, void (*fn)(void *), void *arg)
{
    tk_inside in = {fn, arg};
    return tt_for_ranges(holder, 1, 1, tk_inside_range, &in);
}

typedef struct tk_target {
    tt_exec *ex;
    int bcast_want;
    const char *what;
} tk_target;

static void tk_refuse_busy(void *arg)
{
    tk_target *t = arg;
    tk_all_refuse(t->ex, TT_EBUSY, t->bcast_want, t->what);
}

/* ------------------------------------------------------------------------ */
/* Refusals consume nothing, on every kind of token                          */
/* ------------------------------------------------------------------------ */

/* A root, a reborrowed child, a limited token: busy while a reborrowed
 * child (or a sibling) is inside an entry. */
START_TEST(tk_refusal_root_child_limit)
{
    tt_pool *p = th_make_pool(2);
    unsigned w = th_expect_width(2);
    /* Root. */
    tt_exec root, c1, c2;
    ck_assert_int_eq(tt_exec_init(&root, p, w), TT_OK);
    tt_exec_reborrow(&root, &c1);
    tk_target t = {&root, TT_EBUSY, "root with a child inside"};
    ck_assert_int_eq(tk_run_inside(&c1, tk_refuse_busy, &t), TT_OK);
    tk_still_usable(&root, "root");
    /* A reborrowed child whose sibling is inside: the parent is lent. */
    ck_assert_int_eq(tt_exec_init(&root, p, w), TT_OK);
    tt_exec_reborrow(&root, &c1);
    tt_exec_reborrow(&root, &c2);
    t = (tk_target){&c2, TT_EBUSY, "child whose sibling is inside"};
    ck_assert_int_eq(tk_run_inside(&c1, tk_refuse_busy, &t), TT_OK);
    tk_still_usable(&c2, "reborrowed child");
    tk_still_usable(&root, "root after its children");
    /* A limited token (and a limited child of a root). */
    ck_assert_int_eq(tt_exec_init(&root, p, w), TT_OK);
    tt_exec_limit(&root, 1);
    tt_exec_reborrow(&root, &c1);
    t = (tk_target){&root, TT_EBUSY, "limited root with a child inside"};
    ck_assert_int_eq(tk_run_inside(&c1, tk_refuse_busy, &t), TT_OK);
    tk_still_usable(&root, "limited root");
    /* Serial tokens too. */
    tt_exec s, sc;
    tt_exec_init_serial(&s);
    tt_exec_reborrow(&s, &sc);
    t = (tk_target){&s, TT_EBUSY, "serial with a child inside"};
    ck_assert_int_eq(tk_run_inside(&sc, tk_refuse_busy, &t), TT_OK);
    tk_still_usable(&s, "serial");
    th_free_pool(p);
    th_assert_no_failures();
}
END_TEST

/* A fork child: busy while its own reborrowed child is inside (broadcast
 * refuses first with TT_REFUSED_FORK_CHILD); usable after. */
static void tk_fork_child_job(void *arg, unsigned i, tt_exec *child)
{
    (void)arg;
    tt_exec g;
    tt_exec_reborrow(child, &g);
    tk_target t = {child, TT_REFUSED_FORK_CHILD, i ? "fork child 1" : "fork child 0"};
    int rc = tk_run_inside(&g, tk_refuse_busy, &t);
    TT_CHECK(rc == TT_OK, "fork child's reborrow: %s", tt_status_name(rc));
    /* The broadcast refusal alone (nothing busy) consumes nothing either. */
    _Atomic long ran = 0;
    rc = tt_broadcast(child, tk_bcast, &ran);
    TT_CHECK(ran == 0, "fork child: a refused broadcast ran");
    TT_CHECK(rc == TT_REFUSED_FORK_CHILD, "fork child broadcast: %s", tt_status_name(rc));
    tk_still_usable(child, "fork child");
}

START_TEST(tk_refusal_fork_child)
{
    tt_pool *p = th_make_pool(2);
    for (unsigned budget = 1; budget <= 2; budget++) {
        tt_exec root;
        ck_assert_int_eq(tt_exec_init(&root, p, budget), TT_OK);
        ck_assert_int_eq(tt_fork(&root, 2, tk_fork_child_job, NULL), TT_OK);
    }
    th_free_pool(p);
    th_assert_no_failures();
}
END_TEST

/* Team tokens: a token whose control block has a command in flight (the
 * leader is inside a section of that scope) is busy, and the refusal
 * consumes nothing; after the section, the token runs. */
typedef struct tk_scope_case {
    tt_exec tok;          /* a tt_scope_reborrow token of the scope */
    tt_exec *outer;       /* a team token that is busy (ancestor) or NULL */
    const char *what;
} tk_scope_case;

static void tk_busy_section(void *arg, tt_section *s)
{
    tk_scope_case *k = arg;
    if (tt_section_rank(s) != 0)
        return;
    tk_all_refuse(&k->tok, TT_EBUSY, TT_EBUSY, k->what);
    TT_CHECK(!tt_can_broadcast(&k->tok), "%s: tt_can_broadcast true in a section", k->what);
    if (k->outer)
        tk_all_refuse(k->outer, TT_EBUSY, TT_EBUSY, "outer team token");
}

/* In a scope: the scope's own reborrow token, used inside a section. */
static void tk_scope_body(void *arg, tt_scope *scope)
{
    tk_scope_case *k = arg;
    tt_scope_reborrow(scope, &k->tok);
    TT_CHECK(tt_carries_team(&k->tok), "%s: scope reborrow carries no team", k->what);
    int rc = tt_scope_run(scope, tk_busy_section, k);
    TT_CHECK(rc == TT_OK, "%s: tt_scope_run: %s", k->what, tt_status_name(rc));
    tk_still_usable(&k->tok, k->what);
}

START_TEST(tk_refusal_scope_reborrow)
{
    tt_pool *p = th_make_pool(2);
    for (unsigned budget = 1; budget <= 2; budget++) {
        tt_exec root;
        ck_assert_int_eq(tt_exec_init(&root, p, budget), TT_OK);
        tk_scope_case k = {.what = "scope reborrow"};
        ck_assert_int_eq(tt_team_scope(&root, tk_scope_body, &k), TT_OK);
    }
    th_free_pool(p);
    th_assert_no_failures();
}
END_TEST

/* A team-lead token: busy while a reborrowed child is inside an entry;
 * scope reborrows of the team's scope inside sections; usable after. */
START_TEST(tk_refusal_team_lead)
{
    tt_pool *p = th_make_pool(2);
    unsigned w = th_expect_width(2);
    tt_team *team = NULL;
    ck_assert_int_eq(tt_pool_into_team(p, w, &team), TT_OK);
    tt_exec lead, child, other;
    ck_assert_int_eq(tt_team_lead(team, w, &lead), TT_OK);
    tt_exec_reborrow(&lead, &child);
    tk_target t = {&lead, TT_EBUSY, "team lead with a child inside"};
    ck_assert_int_eq(tk_run_inside(&child, tk_refuse_busy, &t), TT_OK);
    /* Still the leader: nobody else got in. */
    ck_assert_int_eq(tt_team_try_lead(team, 1, &other), TT_REFUSED_BUSY);
    /* A scope on a child of the lead token, and a scope reborrow in it. */
    tt_exec_reborrow(&lead, &child);
    tk_scope_case k = {.what = "scope reborrow of a team lead's scope"};
    ck_assert_int_eq(tt_team_scope(&child, tk_scope_body, &k), TT_OK);
    tk_still_usable(&lead, "team lead");
    /* The lead token's entry ended the role. */
    ck_assert_int_eq(tt_team_try_lead(team, 1, &other), TT_OK);
    tt_exec_finish(&other);
    ck_assert_ptr_eq(tt_team_into_pool(team), p);
    th_free_pool(p);
    th_assert_no_failures();
}
END_TEST

/* A tt_scope_fork child: busy while its reborrowed child leads a scope on
 * its group (an ancestor), and a scope reborrow of that scope inside its
 * sections; both usable after. */
static void tk_scope_fork_inner(void *arg, tt_scope *scope)
{
    tk_scope_case *k = arg;
    tt_scope_reborrow(scope, &k->tok);
    int rc = tt_scope_run(scope, tk_busy_section, k);
    TT_CHECK(rc == TT_OK, "%s: tt_scope_run: %s", k->what, tt_status_name(rc));
    tk_still_usable(&k->tok, k->what);
}

static void tk_scope_fork_job(void *arg, unsigned i, tt_exec *child)
{
    (void)arg;
    (void)i;
    TT_CHECK(tt_carries_team(child), "scope-fork child carries no team");
    tt_exec g;
    tt_exec_reborrow(child, &g);
    tk_scope_case k = {.outer = NULL, .what = "scope reborrow in a scope-fork child's scope"};
    int rc = tt_team_scope(&g, tk_scope_fork_inner, &k);
    TT_CHECK(rc == TT_OK, "scope on the scope-fork child's reborrow: %s", tt_status_name(rc));
    /* The child while its reborrow is inside an entry. */
    tt_exec g2;
    tt_exec_reborrow(child, &g2);
    tk_target t = {child, TT_REFUSED_FORK_CHILD, "scope-fork child with a child inside"};
    rc = tk_run_inside(&g2, tk_refuse_busy, &t);
    TT_CHECK(rc == TT_OK, "scope-fork child's reborrow entry: %s", tt_status_name(rc));
    tk_still_usable(child, "scope-fork child");
}

static void tk_scope_fork_body(void *arg, tt_scope *scope)
{
    (void)arg;
    int rc = tt_scope_fork(scope, 2, tk_scope_fork_job, NULL);
    TT_CHECK(rc == TT_OK, "tt_scope_fork: %s", tt_status_name(rc));
}

START_TEST(tk_refusal_scope_fork_child)
{
    tt_pool *p = th_make_pool(2);
    tt_exec root;
    ck_assert_int_eq(tt_exec_init(&root, p, 2), TT_OK);
    ck_assert_int_eq(tt_team_scope(&root, tk_scope_fork_body, NULL), TT_OK);
    th_free_pool(p);
    th_assert_no_failures();
}
END_TEST

/* TT_REFUSED_UNAVAILABLE from a team scope whose members are held by
 * another root consumes nothing either. */
typedef struct tk_hold {
    tt_pool *pool;
    th_flag inside;
    th_flag release;
    int rc;
} tk_hold;

static void tk_hold_job(void *arg, unsigned i, tt_exec *c)
{
    (void)i;
    (void)c;
    tk_hold *h = arg;
    atomic_fetch_add(&h->inside.v, 1);
    th_flag_wait_ge(&h->release, 1, 10);
}

static void *tk_hold_thread(void *arg)
{
    tk_hold *h = arg;
    tt_exec r;
    h->rc = tt_exec_init(&r, h->pool, tt_pool_width(h->pool));
    if (h->rc == TT_OK)
        h->rc = tt_fork(&r, tt_pool_width(h->pool), tk_hold_job, h);
    return NULL;
}

START_TEST(tk_refusal_unavailable)
{
    tt_pool *p = th_make_pool(2);
    if (tt_pool_width(p) < 2) {
        th_free_pool(p);
        return;
    }
    tk_hold h = {.pool = p};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, tk_hold_thread, &h), 0);
    ck_assert(th_flag_wait_ge(&h.inside, 1, 10));
    tt_exec root;
    ck_assert_int_eq(tt_exec_init(&root, p, 2), TT_OK);
    tt_team_opts o;
    tt_team_opts_init(&o);
    o.acquire_timeout_ns = 0;
    _Atomic long ran = 0;
    ck_assert_int_eq(tt_team_scope_with(&root, &o, tk_scope_fn, &ran), TT_REFUSED_UNAVAILABLE);
    ck_assert_int_eq(ran, 0);
    th_flag_set(&h.release, 1);
    ck_assert(th_join_timeout(th, 10));
    ck_assert_int_eq(h.rc, TT_OK);
    ck_assert_int_eq(tt_team_scope_with(&root, &o, tk_scope_fn, &ran), TT_OK);
    ck_assert_int_eq(ran, 1);
    th_free_pool(p);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* tt_can_broadcast agrees with tt_broadcast                                 */
/* ------------------------------------------------------------------------ */

/* can == (broadcast would run), then the broadcast itself. */
static void tk_agree(tt_exec *ex, int want, const char *what)
{
    bool can = tt_can_broadcast(ex);
    _Atomic long ran = 0;
    int rc = tt_broadcast(ex, tk_bcast, &ran);
    TT_CHECK(rc == want, "%s: tt_broadcast returned %s, expected %s", what, tt_status_name(rc),
             tt_status_name(want));
    TT_CHECK(can == (rc == TT_OK), "%s: tt_can_broadcast said %s, tt_broadcast returned %s",
             what, can ? "yes" : "no", tt_status_name(rc));
    if (rc != TT_OK)
        TT_CHECK(atomic_load(&ran) == 0, "%s: a refused broadcast ran", what);
    else
        TT_CHECK(atomic_load(&ran) == (long)tt_exec_budget(ex), "%s: %ld of %u ran", what,
                 (long)atomic_load(&ran), tt_exec_budget(ex));
}

static void tk_agree_busy(void *arg)
{
    tk_target *t = arg;
    tk_agree(t->ex, TT_EBUSY, t->what);
}

START_TEST(tk_can_broadcast_agrees)
{
    tt_pool *p = th_make_pool(2);
    unsigned w = th_expect_width(2);
    tt_exec root, c1, c2, g;
    /* A busy reborrow ancestor: c2's parent is lent to c1. */
    ck_assert_int_eq(tt_exec_init(&root, p, w), TT_OK);
    tt_exec_reborrow(&root, &c1);
    tt_exec_reborrow(&root, &c2);
    tk_target t = {&c2, TT_EBUSY, "sibling of a child inside"};
    ck_assert_int_eq(tk_run_inside(&c1, tk_agree_busy, &t), TT_OK);
    /* Two levels up: g's grandparent is lent. */
    tt_exec_reborrow(&c2, &g);
    tt_exec c3;
    tt_exec_reborrow(&root, &c3);
    t = (tk_target){&g, TT_EBUSY, "grandchild of a lent root"};
    ck_assert_int_eq(tk_run_inside(&c3, tk_agree_busy, &t), TT_OK);
    /* The token's own busy word. */
    tt_exec_reborrow(&root, &c1);
    t = (tk_target){&root, TT_EBUSY, "root with a child inside"};
    ck_assert_int_eq(tk_run_inside(&c1, tk_agree_busy, &t), TT_OK);
    /* After all that: every one of them runs. */
    tk_agree(&g, TT_OK, "grandchild, idle");
    tk_agree(&c2, TT_OK, "child, idle");
    tk_agree(&root, TT_OK, "root, idle");
    /* Consumed, copied. */
    tk_agree(&root, TT_ECONSUMED, "consumed root");
    tt_exec orig;
    ck_assert_int_eq(tt_exec_init(&orig, p, 2), TT_OK);
    tt_exec copy = orig; /* a byte copy: never usable */
    tk_agree(&copy, TT_ECOPY, "copied root");
    tk_agree(&orig, TT_OK, "the original of a copy");
    th_free_pool(p);
    th_assert_no_failures();
}
END_TEST

/* A team token in a section of its scope: both say busy. */
static void tk_agree_section(void *arg, tt_section *s)
{
    tk_scope_case *k = arg;
    if (tt_section_rank(s) == 0)
        tk_agree(&k->tok, TT_EBUSY, "scope reborrow in a section");
}

static void tk_agree_scope(void *arg, tt_scope *scope)
{
    tk_scope_case *k = arg;
    tt_scope_reborrow(scope, &k->tok);
    int rc = tt_scope_run(scope, tk_agree_section, k);
    TT_CHECK(rc == TT_OK, "tt_scope_run: %s", tt_status_name(rc));
    tk_agree(&k->tok, TT_OK, "scope reborrow after the section");
}

START_TEST(tk_can_broadcast_agrees_scope)
{
    tt_pool *p = th_make_pool(2);
    tt_exec root;
    ck_assert_int_eq(tt_exec_init(&root, p, 2), TT_OK);
    tk_scope_case k = {.what = "agree"};
    ck_assert_int_eq(tt_team_scope(&root, tk_agree_scope, &k), TT_OK);
    th_free_pool(p);
    th_assert_no_failures();
}
END_TEST

/* The codes the header lists for tt_broadcast beyond the refusals:
 * TT_EWRONGTHREAD (a scope's token on another thread) and TT_EDESTROYED
 * (a token of a destroyed pool); tt_can_broadcast agrees, nothing runs. */
typedef struct tk_other {
    tt_exec *ex;
    int rc;
    bool can;
    _Atomic long ran;
} tk_other;

static void *tk_bcast_thread(void *arg)
{
    tk_other *o = arg;
    o->can = tt_can_broadcast(o->ex);
    o->rc = tt_broadcast(o->ex, tk_bcast, &o->ran);
    return NULL;
}

static void tk_wrong_thread_scope(void *arg, tt_scope *scope)
{
    (void)arg;
    tt_exec tok;
    tt_scope_reborrow(scope, &tok);
    tk_other o = {.ex = &tok};
    pthread_t t;
    TT_CHECK(pthread_create(&t, NULL, tk_bcast_thread, &o) == 0, "pthread_create");
    pthread_join(t, NULL);
    TT_CHECK(o.rc == TT_EWRONGTHREAD, "scope token broadcast on another thread: %s",
             tt_status_name(o.rc));
    TT_CHECK(!o.can, "tt_can_broadcast true on another thread");
    TT_CHECK(atomic_load(&o.ran) == 0, "the refused broadcast ran");
    /* Nothing consumed: the leader's thread broadcasts with it. */
    tk_agree(&tok, TT_OK, "scope token on its own thread");
}

START_TEST(tk_broadcast_codes)
{
    tt_pool *p = th_make_pool(2);
    tt_exec root;
    ck_assert_int_eq(tt_exec_init(&root, p, 2), TT_OK);
    ck_assert_int_eq(tt_team_scope(&root, tk_wrong_thread_scope, NULL), TT_OK);
    ck_assert_int_eq(tt_exec_init(&root, p, 2), TT_OK);
    tt_exec child;
    tt_exec_reborrow(&root, &child);
    th_free_pool(p);
    tk_agree(&root, TT_EDESTROYED, "root of a destroyed pool");
    tk_agree(&child, TT_EDESTROYED, "child of a destroyed pool");
    th_assert_no_failures();
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Team leads                                                                */
/* ------------------------------------------------------------------------ */

typedef struct tk_finish_case {
    tt_team *team;
    tt_exec *lead;
    int try_same;   /* tt_team_try_lead on this thread, after the finish */
    int try_other;  /* ... and on another thread */
    th_flag other_got; /* a blocking tt_team_lead on another thread got in */
    pthread_t blocker; /* that thread */
    bool blocker_started;
} tk_finish_case;

static void *tk_try_lead_thread(void *arg)
{
    tk_finish_case *f = arg;
    tt_exec ex;
    int rc = tt_team_try_lead(f->team, 1, &ex);
    if (rc == TT_OK)
        tt_exec_finish(&ex);
    return (void *)(intptr_t)rc;
}

static void *tk_lead_thread(void *arg)
{
    tk_finish_case *f = arg;
    tt_exec ex;
    int rc = tt_team_lead(f->team, 1, &ex);
    th_flag_set(&f->other_got, 1);
    if (rc == TT_OK)
        tt_exec_finish(&ex);
    return NULL;
}

static void tk_finish_inside(void *arg)
{
    tk_finish_case *f = arg;
    f->blocker_started = pthread_create(&f->blocker, NULL, tk_lead_thread, f) == 0;
    TT_CHECK(f->blocker_started, "pthread_create");
    tt_exec_finish(f->lead);
    /* The lead token is finished: every entry on it says so. */
    tk_all_refuse(f->lead, TT_ECONSUMED, TT_ECONSUMED, "finished lead token");
    tt_exec other;
    f->try_same = tt_team_try_lead(f->team, 1, &other);
    if (f->try_same == TT_OK)
        tt_exec_finish(&other);
    pthread_t t;
    void *res = NULL;
    TT_CHECK(pthread_create(&t, NULL, tk_try_lead_thread, f) == 0, "pthread_create");
    pthread_join(t, &res);
    f->try_other = (int)(intptr_t)res;
    th_sleep_us(50000);
    TT_CHECK(th_flag_get(&f->other_got) == 0,
             "tt_team_lead on another thread got in while the child's entry ran");
}

START_TEST(tk_lead_finish_while_child_inside)
{
    for (int lends = 0; lends <= 1; lends++) {
        tt_pool_attr *a = NULL;
        ck_assert_int_eq(tt_pool_attr_create(&a), TT_OK);
        ck_assert_int_eq(tt_pool_attr_set_threads(a, 2), TT_OK);
        ck_assert_int_eq(tt_pool_attr_set_idle_serves_pool(a, lends), TT_OK);
        tt_pool *p = NULL;
        ck_assert_int_eq(tt_pool_create(&p, a), TT_OK);
        tt_pool_attr_destroy(a);
        tt_team *team = NULL;
        ck_assert_int_eq(tt_pool_into_team(p, tt_pool_width(p), &team), TT_OK);
        tt_exec lead, child;
        ck_assert_int_eq(tt_team_lead(team, tt_pool_width(p), &lead), TT_OK);
        tt_exec_reborrow(&lead, &child);
        tk_finish_case f = {.team = team, .lead = &lead};
        ck_assert_int_eq(tk_run_inside(&child, tk_finish_inside, &f), TT_OK);
        ck_assert_msg(f.try_same == TT_REFUSED_BUSY,
                      "lends %d: tt_team_try_lead after finish, child inside: %s", lends,
                      tt_status_name(f.try_same));
        ck_assert_msg(f.try_other == TT_REFUSED_BUSY,
                      "lends %d: tt_team_try_lead (other thread) after finish, child inside: %s",
                      lends, tt_status_name(f.try_other));
        /* The child's entry left: the role ended, the waiting leader got in. */
        ck_assert(th_flag_wait_ge(&f.other_got, 1, 10));
        ck_assert(f.blocker_started && th_join_timeout(f.blocker, 10));
        tt_exec next;
        int rc = TT_REFUSED_BUSY;
        for (int i = 0; i < 1000 && rc == TT_REFUSED_BUSY; i++) {
            rc = tt_team_try_lead(team, 1, &next);
            if (rc == TT_REFUSED_BUSY)
                th_sleep_us(1000);
        }
        ck_assert_int_eq(rc, TT_OK);
        tt_exec_finish(&next);
        /* Finishing the finished token again does nothing. */
        tt_exec_finish(&lead);
        ck_assert_int_eq(tt_team_try_lead(team, 1, &next), TT_OK);
        tt_exec_finish(&next);
        ck_assert_ptr_eq(tt_team_into_pool(team), p);
        th_free_pool(p);
    }
    th_assert_no_failures();
}
END_TEST

/* tt_team_try_lead on a team that lends its members (idle_serves_pool)
 * while another root holds them: refused at once, not after the root. */
START_TEST(tk_try_lead_never_waits)
{
    tt_pool_attr *a = NULL;
    ck_assert_int_eq(tt_pool_attr_create(&a), TT_OK);
    ck_assert_int_eq(tt_pool_attr_set_threads(a, 2), TT_OK);
    ck_assert_int_eq(tt_pool_attr_set_idle_serves_pool(a, true), TT_OK);
    tt_pool *p = NULL;
    ck_assert_int_eq(tt_pool_create(&p, a), TT_OK);
    tt_pool_attr_destroy(a);
    unsigned w = tt_pool_width(p);
    tt_team *team = NULL;
    ck_assert_int_eq(tt_pool_into_team(p, w, &team), TT_OK);
    if (w < 2) {
        /* Nothing to lend in a pool of one. */
        tt_exec l;
        ck_assert_int_eq(tt_team_try_lead(team, 1, &l), TT_OK);
        tt_exec_finish(&l);
        ck_assert_ptr_eq(tt_team_into_pool(team), p);
        th_free_pool(p);
        return;
    }
    tk_hold h = {.pool = p};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, tk_hold_thread, &h), 0);
    ck_assert(th_flag_wait_ge(&h.inside, 1, 10));
    tt_exec lead;
    uint64_t t0 = th_now_ns();
    int rc = tt_team_try_lead(team, w, &lead);
    double dt = (double)(th_now_ns() - t0) / 1e9;
    th_flag_set(&h.release, 1);
    if (rc == TT_OK)
        tt_exec_finish(&lead);
    ck_assert(th_join_timeout(th, 15));
    ck_assert_msg(rc == TT_REFUSED_UNAVAILABLE,
                  "tt_team_try_lead with the members lent to another root returned %s after %.3f s",
                  tt_status_name(rc), dt);
    ck_assert_msg(dt < 0.5, "tt_team_try_lead waited %.3f s", dt);
    /* The refusal left the team free: the next try leads. */
    ck_assert_int_eq(tt_team_try_lead(team, w, &lead), TT_OK);
    _Atomic long ran = 0;
    ck_assert_int_eq(tt_broadcast(&lead, tk_bcast, &ran), TT_OK);
    ck_assert_int_eq(ran, (long)w);
    ck_assert_int_eq(tt_team_try_lead(team, w, &lead), TT_OK);
    tt_exec_finish(&lead);
    ck_assert_ptr_eq(tt_team_into_pool(team), p);
    th_free_pool(p);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* One token entered by two threads at once                                  */
/* ------------------------------------------------------------------------ */

/* A token is not shared, but if two threads race into one, the consuming
 * compare-and-swap lets exactly one of them run; the other is refused
 * (TT_ECONSUMED, or TT_EBUSY when it saw the winner's claim). */
typedef struct tk_race {
    tt_exec ex;
    th_tbarrier start, done;
    unsigned iters;
    _Atomic long ran;
    int rc[2];
    _Atomic unsigned bad_rc;
} tk_race;

static void *tk_race_thread(void *arg)
{
    tk_race *r = arg;
    for (unsigned i = 0; i < r->iters; i++) {
        if (th_tbarrier_wait(&r->start, 10) < 0)
            return NULL;
        int rc = tt_for_ranges(&r->ex, 1, 1, tk_range, (void *)&r->ran);
        if (rc != TT_OK && rc != TT_ECONSUMED && rc != TT_EBUSY)
            atomic_fetch_add(&r->bad_rc, 1);
        if (th_tbarrier_wait(&r->done, 10) < 0)
            return NULL;
    }
    return NULL;
}

START_TEST(tk_one_token_two_threads)
{
    tt_pool *p = th_make_pool(2);
    tk_race *r = calloc(1, sizeof *r);
    ck_assert_ptr_nonnull(r);
    r->iters = th_iters(4000);
    th_tbarrier_init(&r->start, 3);
    th_tbarrier_init(&r->done, 3);
    pthread_t t[2];
    for (int k = 0; k < 2; k++)
        ck_assert_int_eq(pthread_create(&t[k], NULL, tk_race_thread, r), 0);
    unsigned twice = 0, none = 0;
    for (unsigned i = 0; i < r->iters; i++) {
        /* Budget 1 runs inline: the widest window between check and claim. */
        ck_assert_int_eq(tt_exec_init(&r->ex, p, 1), TT_OK);
        atomic_store(&r->ran, 0);
        ck_assert_int_ge(th_tbarrier_wait(&r->start, 10), 0);
        ck_assert_int_ge(th_tbarrier_wait(&r->done, 10), 0);
        long ran = atomic_load(&r->ran);
        twice += ran > 1;
        none += ran == 0;
    }
    for (int k = 0; k < 2; k++)
        ck_assert(th_join_timeout(t[k], 10));
    ck_assert_msg(twice == 0, "one token ran twice in %u of %u races", twice, r->iters);
    ck_assert_msg(none == 0, "neither thread ran in %u of %u races", none, r->iters);
    ck_assert_uint_eq(atomic_load(&r->bad_rc), 0);
    th_tbarrier_destroy(&r->start);
    th_tbarrier_destroy(&r->done);
    free(r);
    th_free_pool(p);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Reborrow cycles                                                           */
/* ------------------------------------------------------------------------ */

static void tk_cycle_invalid(tt_exec *ex, const char *what)
{
    TT_CHECK(!tt_can_broadcast(ex), "%s: tt_can_broadcast true on a looping chain", what);
    tk_all_refuse(ex, TT_EINVAL, TT_EINVAL, what);
}

START_TEST(tk_reborrow_cycles)
{
    tt_pool *p = th_make_pool(2);
    unsigned w = th_expect_width(2);
    /* A token reborrowed into itself. */
    tt_exec a, b, c;
    ck_assert_int_eq(tt_exec_init(&a, p, w), TT_OK);
    tt_exec_reborrow(&a, &a);
    tk_cycle_invalid(&a, "reborrow(&a, &a)");
    tt_exec_init_serial(&a);
    tt_exec_reborrow(&a, &a);
    tk_cycle_invalid(&a, "serial reborrow(&a, &a)");
    /* a -> b -> a. */
    ck_assert_int_eq(tt_exec_init(&a, p, w), TT_OK);
    tt_exec_reborrow(&a, &b);
    tt_exec_reborrow(&b, &a);
    tk_cycle_invalid(&a, "a in a -> b -> a");
    tk_cycle_invalid(&b, "b in a -> b -> a");
    /* a -> b -> c -> a, and a child hanging off the loop. */
    ck_assert_int_eq(tt_exec_init(&a, p, w), TT_OK);
    tt_exec_reborrow(&a, &b);
    tt_exec_reborrow(&b, &c);
    tt_exec_reborrow(&c, &a);
    tk_cycle_invalid(&a, "a in a -> b -> c -> a");
    tk_cycle_invalid(&c, "c in a -> b -> c -> a");
    tt_exec d;
    tt_exec_reborrow(&c, &d);
    tk_cycle_invalid(&d, "a child of a loop");
    /* A long chain without a loop still works. */
    enum { N = 40 };
    tt_exec chain[N];
    ck_assert_int_eq(tt_exec_init(&chain[0], p, w), TT_OK);
    for (int i = 1; i < N; i++)
        tt_exec_reborrow(&chain[i - 1], &chain[i]);
    ck_assert(tt_can_broadcast(&chain[N - 1]));
    tk_still_usable(&chain[N - 1], "the end of a chain of 40");
    tk_still_usable(&chain[0], "the root of a chain of 40");
    th_free_pool(p);
    th_assert_no_failures();
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Status table                                                              */
/* ------------------------------------------------------------------------ */

START_TEST(tk_status_table)
{
#ifndef TT_STATUS_MAP
    ck_abort_msg("threadteam.h has no TT_STATUS_MAP");
#else
    /* Every code of the table: its name is its own spelling, its sentence
     * is not the unknown one, and names and sentences are distinct. */
    static const struct {
        int code;
        const char *name;
    } table[] = {
#define TK_ROW(name, value, msg) {name, #name},
        TT_STATUS_MAP(TK_ROW)
#undef TK_ROW
    };
    const char *unknown = tt_strerror(-12345);
    ck_assert_str_eq(tt_status_name(-12345), "TT_UNKNOWN");
    ck_assert_uint_eq(TT_ARRAY_LEN(table), TT_ARRAY_LEN(th_all_codes));
    for (size_t i = 0; i < TT_ARRAY_LEN(table); i++) {
        ck_assert_str_eq(tt_status_name(table[i].code), table[i].name);
        ck_assert_str_ne(tt_strerror(table[i].code), unknown);
        for (size_t j = 0; j < i; j++) {
            ck_assert_int_ne(table[i].code, table[j].code);
            ck_assert_str_ne(tt_strerror(table[i].code), tt_strerror(table[j].code));
        }
    }
    /* The numeric values are part of the ABI. */
    ck_assert_int_eq(TT_OK, 0);
    ck_assert_int_eq(TT_EINVAL, 1);
    ck_assert_int_eq(TT_EDESTROYED, 12);
    ck_assert_int_eq(TT_REFUSED_FORK_CHILD, 32);
    ck_assert_int_eq(TT_REFUSED_BUSY, 35);
#endif
}
END_TEST

static Suite *tokens_suite(void)
{
    Suite *s = suite_create("tokens");
    TCase *tc = th_tcase(s, "refusals", 60);
    tcase_add_test(tc, tk_refusal_root_child_limit);
    tcase_add_test(tc, tk_refusal_fork_child);
    tcase_add_test(tc, tk_refusal_scope_reborrow);
    tcase_add_test(tc, tk_refusal_team_lead);
    tcase_add_test(tc, tk_refusal_scope_fork_child);
    tcase_add_test(tc, tk_refusal_unavailable);

    tc = th_tcase(s, "broadcast", 30);
    tcase_add_test(tc, tk_can_broadcast_agrees);
    tcase_add_test(tc, tk_can_broadcast_agrees_scope);
    tcase_add_test(tc, tk_broadcast_codes);

    tc = th_tcase(s, "lead", 30);
    tcase_add_test(tc, tk_lead_finish_while_child_inside);
    tcase_add_test(tc, tk_try_lead_never_waits);

    tc = th_tcase(s, "race", 60);
    tcase_add_test(tc, tk_one_token_two_threads);

    /* Short: a loop in a chain used to hang the entry. */
    tc = th_tcase(s, "cycles", 10);
    tcase_add_test(tc, tk_reborrow_cycles);

    tc = th_tcase(s, "status", 10);
    tcase_add_test(tc, tk_status_table);
    return s;
}

int main(void) { return th_run_suite(tokens_suite()); }
