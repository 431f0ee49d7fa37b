/*
 * exec.c -- the entries on pooled tokens: placement and the task engine.
 *
 * Slot conservation is structural. A root of budget b runs at most b tasks:
 * tt_fork splits the budget into shares that sum to b, a task holds its
 * share, and a parent that waits for its children holds nothing. The
 * members follow the slots: a plain thread that enters the pool reserves a
 * gang of members for the whole entry, and each task gets the part of the
 * gang that matches its share, so nested entries below it dispatch on
 * members that nobody else uses and never wait for another root. That is
 * also why no join ever needs to run other work to make progress: every
 * wait is for members of the waiter's own subtree.
 *
 * Mapping of shares to members: task j with slots [S_j, S_j + s_j) of a
 * token whose gang part has cnt members out of budget b gets members
 * [ceil(S_j*cnt/b), ceil((S_j+s_j)*cnt/b)). With a full gang (cnt == b) that
 * is exactly its slots. With fewer members (a member's nested root that
 * found the pool busy) the first task always keeps the caller's member, and
 * a task that gets no member runs inline on the caller after the others
 * were dispatched.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* The token protocol (mint, check, enter, leave, derive) is in token.c. */

/* ------------------------------------------------------------------------ */
/* Placement: which members an entry may use                                 */
/* ------------------------------------------------------------------------ */

typedef struct placement {
    const uint32_t *gang; /* members, or NULL                           */
    uint32_t off, cnt;    /* gang[off, off + cnt)                       */
    int self;             /* caller's member index, or -1 (plain)       */
    unsigned acquired;    /* members taken from the pool for this entry */
    uint32_t *own;        /* where the taken indices are                */
} placement;

/* The members of a token as seen from the calling thread. A token with a
 * gang part belongs to the task that runs on its first member. */
static int token_members(const tt__exec *x, int self, placement *pl)
{
    pl->gang = NULL;
    pl->off = pl->cnt = 0;
    pl->self = self;
    pl->acquired = 0;
    pl->own = NULL;
    if (x->gang && x->gang_cnt > 0 && !(x->flags & TT__F_TEAM)) {
        if (self < 0 || x->gang[x->gang_off] != (uint32_t)self)
            return TT_EWRONGTHREAD;
        pl->gang = x->gang;
        pl->off = x->gang_off;
        pl->cnt = x->gang_cnt;
    }
    return TT_OK;
}

/* Reserve members for an entry that wants `need` of them when the token has
 * none: a plain thread waits for all of them; a member keeps itself first
 * and takes what is free. `buf` has room for `need` indices. */
static void reserve(tt_pool *pool, placement *pl, unsigned need, uint32_t *buf)
{
    if (pl->gang)
        return;
    if (pl->self >= 0) {
        buf[0] = (uint32_t)pl->self;
        pl->acquired = tt__gang_try_acquire(pool, need - 1, buf + 1);
        pl->own = buf + 1;
        pl->gang = buf;
        pl->off = 0;
        pl->cnt = 1 + pl->acquired;
    } else {
        tt__gang_acquire(pool, need, buf, UINT64_MAX);
        tt__ledger_install(pool);
        pl->acquired = need;
        pl->own = buf;
        pl->gang = buf;
        pl->off = 0;
        pl->cnt = need;
    }
}

static void unreserve(tt_pool *pool, placement *pl)
{
    if (pl->acquired)
        tt__gang_release(pool, pl->acquired, pl->own);
}

/* ------------------------------------------------------------------------ */
/* The task engine                                                           */
/* ------------------------------------------------------------------------ */

typedef struct entry entry;
typedef struct task {
    tt__work w;
    entry *e;
    unsigned index;
    uint32_t off, cnt; /* the task's members: gang[off, off + cnt) */
    unsigned share;
} task;

struct entry {
    tt__join join;
    void (*body)(entry *e, const task *t);
    const uint32_t *gang;
    tt_pool *pool;
    uint32_t pool_gen; /* children belong to the pool the entry's token did */
    bool sleepy;       /* the waiter spins little: the work hands its CPU on */
    void *ledger;
};

static void task_run(tt__work *w, tt__member *m)
{
    task *t = (task *)w;
    entry *e = t->e;
    e->body(e, t);
    /* Last touch of the entry: after this the dispatcher may return. */
    tt__join_done(&e->join, &m->crew->stats);
}

static inline unsigned share_of(unsigned budget, unsigned ntasks, unsigned j)
{
    return budget / ntasks + (j < budget % ntasks ? 1u : 0u);
}

static inline uint32_t ceil_map(uint64_t s, uint32_t cnt, unsigned budget)
{
    return (uint32_t)((s * cnt + budget - 1) / budget);
}

/* Run `ntasks` tasks whose shares split `budget`, on the members of `pl`,
 * and wait for them. */
static void run_tasks(entry *e, unsigned ntasks, unsigned budget, const placement *pl)
{
    task tasks[ntasks];
    unsigned dispatched = 0;
    uint64_t s = 0;
    for (unsigned j = 0; j < ntasks; j++) {
        unsigned sh = share_of(budget, ntasks, j);
        uint32_t lo = ceil_map(s, pl->cnt, budget);
        uint32_t hi = ceil_map(s + sh, pl->cnt, budget);
        s += sh;
        tasks[j] = (task){.w = {task_run}, .e = e, .index = j, .off = pl->off + lo,
                          .cnt = hi - lo, .share = sh};
        bool inline_here = tasks[j].cnt == 0 || (j == 0 && pl->self >= 0);
        if (!inline_here)
            dispatched++;
    }
    e->gang = pl->gang;
    tt__join_init(&e->join, dispatched);
    tt__crew *crew = e->pool->crew;
    for (unsigned j = 0; j < ntasks; j++) {
        if (tasks[j].cnt == 0 || (j == 0 && pl->self >= 0))
            continue;
        tt__member_post(&crew->members[pl->gang[tasks[j].off]], &tasks[j].w);
    }
    for (unsigned j = 0; j < ntasks; j++) {
        if (tasks[j].cnt == 0 || (j == 0 && pl->self >= 0)) {
            if (tasks[j].cnt == 0)
                tasks[j].off = 0;
            e->body(e, &tasks[j]);
        }
    }
    if (dispatched) {
        /* A plain thread that waits for as many tasks as there are CPUs
         * would be one runnable thread too many: it spins little and
         * sleeps, as in an oversubscribed scope. */
        tt__wait_policy pol = crew->team_pol;
        if (e->sleepy || (pl->self < 0 && dispatched >= tt__cpu_count_cached()))
            pol.throttled = true;
        tt__join_wait(&e->join, &pol, &crew->stats);
    }
}

/* Mint the child token of task t in place. */
static void child_of(tt__exec *c, const entry *e, const task *t, uint32_t flags, void *team)
{
    tt__token_spec s = {.pool = e->pool, .pool_gen = e->pool_gen, .budget = t->share,
                        .flags = flags, .ledger = e->ledger, .team = team,
                        .owner = pthread_self()};
    if (t->cnt > 0) {
        s.gang = e->gang;
        s.gang_off = t->off;
        s.gang_cnt = t->cnt;
    }
    tt__token_mint(c, &s);
}

/* ------------------------------------------------------------------------ */
/* tt_fork                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct fork_entry {
    entry e;
    tt_job_fn job;
    void *arg;
    unsigned jobs, ntasks;
    uint32_t child_flags;
    void *team;
} fork_entry;

static void fork_body(entry *e, const task *t)
{
    fork_entry *f = (fork_entry *)e;
    /* Task t runs jobs [first, first + n): blocks that differ by one. */
    unsigned base = f->jobs / f->ntasks, rem = f->jobs % f->ntasks;
    unsigned first = t->index * base + (t->index < rem ? t->index : rem);
    unsigned n = base + (t->index < rem ? 1u : 0u);
    for (unsigned i = first; i < first + n; i++) {
        tt_exec child;
        tt__exec *c = tt__x(&child);
        child_of(c, e, t, f->child_flags, f->team);
        tt__ledger_enter(e->ledger, 1);
        f->job(f->arg, i, &child);
        tt__ledger_leave(e->ledger, 1);
        atomic_store_explicit(&c->magic, TT__MAGIC_FINISHED, memory_order_relaxed);
    }
}

int tt_fork(tt_exec *ex, unsigned jobs, tt_job_fn job, void *arg)
{
    tt__exec *x = ex ? tt__x(ex) : NULL;
    int rc = tt__exec_check(x);
    if (rc)
        return rc;
    if (!job || jobs == 0)
        return TT_EINVAL;
    if (x->flags & TT__F_TEAM)
        return tt__team_fork(x, jobs, job, arg);
    int self = x->pool ? tt__pool_member_of(x->pool) : -1;
    placement pl;
    rc = token_members(x, self, &pl);
    if (rc)
        return rc;
    rc = tt__exec_enter(x);
    if (rc)
        return rc;

    unsigned budget = x->budget;
    unsigned ntasks = jobs < budget ? jobs : budget;
    fork_entry f = {
        .e = {.body = fork_body, .pool = x->pool, .pool_gen = x->pool_gen, .ledger = x->ledger},
        .job = job, .arg = arg, .jobs = jobs, .ntasks = ntasks,
        .child_flags = TT__F_FORK_CHILD | TT__F_IN_TASK | (x->flags & TT__F_TEAM),
        .team = x->team,
    };
    tt__exec_suspend(x);
    if (ntasks == 1 || !x->pool || !x->pool->crew) {
        /* Lazy and inline: one task (or no crew) runs on the caller with the
         * token's members, and no scheduler call is made. */
        f.e.gang = pl.gang;
        if (ntasks == 1) {
            task t = {.e = &f.e, .index = 0, .off = pl.off, .cnt = pl.cnt, .share = budget};
            fork_body(&f.e, &t);
        } else {
            for (unsigned j = 0; j < ntasks; j++) {
                task tj = {.e = &f.e, .index = j, .share = share_of(budget, ntasks, j)};
                fork_body(&f.e, &tj);
            }
        }
    } else {
        uint32_t buf[budget];
        reserve(x->pool, &pl, budget, buf);
        run_tasks(&f.e, ntasks, budget, &pl);
        unreserve(x->pool, &pl);
    }
    tt__exec_resume(x);
    tt__exec_leave(x);
    return TT_OK;
}

/* ------------------------------------------------------------------------ */
/* tt_for_ranges                                                             */
/* ------------------------------------------------------------------------ */

typedef struct range_entry {
    entry e;
    tt_range_fn body;
    void *arg;
    size_t len;
    unsigned ntasks;
} range_entry;

static void range_body(entry *e, const task *t)
{
    range_entry *r = (range_entry *)e;
    size_t begin, end;
    tt__range_of(r->len, r->ntasks, t->index, &begin, &end);
    tt__ledger_enter(e->ledger, 1);
    r->body(r->arg, begin, end);
    tt__ledger_leave(e->ledger, 1);
}

int tt_for_ranges(tt_exec *ex, size_t len, size_t grain, tt_range_fn body, void *arg)
{
    tt__exec *x = ex ? tt__x(ex) : NULL;
    int rc = tt__exec_check(x);
    if (rc)
        return rc;
    if (!body || grain == 0)
        return TT_EINVAL;
    if (x->flags & TT__F_TEAM)
        return tt__team_for_ranges(x, len, grain, body, arg);
    int self = x->pool ? tt__pool_member_of(x->pool) : -1;
    placement pl;
    rc = token_members(x, self, &pl);
    if (rc)
        return rc;
    rc = tt__exec_enter(x);
    if (rc)
        return rc;
    if (len == 0) {
        tt__exec_leave(x);
        return TT_OK;
    }
    unsigned ntasks = tt__range_tasks(len, grain, x->budget);
    range_entry r = {
        .e = {.body = range_body, .pool = x->pool, .ledger = x->ledger},
        .body = body, .arg = arg, .len = len, .ntasks = ntasks,
    };
    tt__exec_suspend(x);
    if (ntasks == 1 || !x->pool || !x->pool->crew) {
        for (unsigned j = 0; j < ntasks; j++) {
            task t = {.e = &r.e, .index = j, .share = 1};
            range_body(&r.e, &t);
        }
    } else {
        uint32_t buf[ntasks];
        reserve(x->pool, &pl, ntasks, buf);
        /* Leaf tasks: each takes one member; a token's wider gang part is
         * narrowed to what the ranges use. */
        placement use = pl;
        if (use.cnt > ntasks)
            use.cnt = ntasks;
        run_tasks(&r.e, ntasks, ntasks, &use);
        unreserve(x->pool, &pl);
    }
    tt__exec_resume(x);
    tt__exec_leave(x);
    return TT_OK;
}

/* ------------------------------------------------------------------------ */
/* tt_broadcast                                                              */
/* ------------------------------------------------------------------------ */

typedef struct bcast_entry {
    entry e;
    tt_bcast_fn fn;
    void *arg;
} bcast_entry;

static void bcast_body(entry *e, const task *t)
{
    bcast_entry *b = (bcast_entry *)e;
    tt__ledger_enter(e->ledger, 1);
    b->fn(b->arg, t->index);
    tt__ledger_leave(e->ledger, 1);
}

int tt_broadcast(tt_exec *ex, tt_bcast_fn fn, void *arg)
{
    tt__exec *x = ex ? tt__x(ex) : NULL;
    int rc = tt__exec_check(x);
    if (rc)
        return rc;
    if (!fn)
        return TT_EINVAL;
    /* One rule with tt_can_broadcast (token.c). */
    rc = tt__token_broadcast_verdict(x);
    if (rc)
        return rc;
    if (x->flags & TT__F_TEAM)
        return tt__team_broadcast(x, fn, arg);
    rc = tt__exec_enter(x);
    if (rc)
        return rc;
    unsigned budget = x->budget;
    bcast_entry b = {.e = {.body = bcast_body, .pool = x->pool, .ledger = x->ledger},
                     .fn = fn, .arg = arg};
    tt__exec_suspend(x);
    if (budget == 1 || !x->pool || !x->pool->crew) {
        task t = {.e = &b.e, .index = 0, .share = 1};
        bcast_body(&b.e, &t);
    } else {
        uint32_t buf[budget];
        tt__gang_acquire_prefix(x->pool, budget, buf);
        tt__ledger_install(x->pool);
        placement pl = {.gang = buf, .off = 0, .cnt = budget, .self = -1,
                        .acquired = budget, .own = buf};
        run_tasks(&b.e, budget, budget, &pl);
        unreserve(x->pool, &pl);
    }
    tt__exec_resume(x);
    tt__exec_leave(x);
    return TT_OK;
}

/* ------------------------------------------------------------------------ */
/* tt_external                                                               */
/* ------------------------------------------------------------------------ */

typedef struct ext_entry {
    entry e;
    tt_external_fn fn;
    void *arg;
    unsigned width;
    const tt__backend *be;
} ext_entry;

static void ext_body(entry *e, const task *t)
{
    (void)t;
    ext_entry *x = (ext_entry *)e;
    int saved[4];
    x->be->external_enter(x->width, saved);
    tt__ledger_enter(e->ledger, x->width);
    x->fn(x->arg, x->width);
    tt__ledger_leave(e->ledger, x->width);
    x->be->external_leave(saved);
}

int tt_external(tt_exec *ex, tt_external_fn fn, void *arg)
{
    tt__exec *x = ex ? tt__x(ex) : NULL;
    int rc = tt__exec_check(x);
    if (rc)
        return rc;
    if (!fn)
        return TT_EINVAL;
    int self = x->pool ? tt__pool_member_of(x->pool) : -1;
    placement pl;
    if (x->flags & TT__F_TEAM) {
        pl = (placement){.self = self};
    } else {
        rc = token_members(x, self, &pl);
        if (rc)
            return rc;
    }
    rc = tt__exec_enter(x);
    if (rc)
        return rc;
    unsigned width = x->budget;
    /* The callee opens its own team of `width` threads: a caller that spun
     * while it runs would take a CPU from it. */
    ext_entry e = {.e = {.body = ext_body, .pool = x->pool, .sleepy = true, .ledger = x->ledger},
                   .fn = fn, .arg = arg, .width = width, .be = tt__backend_get()};
    tt__exec_suspend(x);
    if (width == 1 || !x->pool || !x->pool->crew || (x->flags & TT__F_TEAM)) {
        /* Inline: budget 1, a pool without crew, or a team token whose
         * leader holds the team's width. */
        task t = {.e = &e.e};
        ext_body(&e.e, &t);
    } else {
        /* Reserve the whole width, so that the slots the outside library's
         * threads use are not handed to other roots meanwhile, and run the
         * callback on the first member (the caller, when it is one). */
        uint32_t buf[width];
        reserve(x->pool, &pl, width, buf);
        placement one = pl;
        one.cnt = 1;
        run_tasks(&e.e, 1, 1, &one);
        unreserve(x->pool, &pl);
    }
    tt__exec_resume(x);
    tt__exec_leave(x);
    return TT_OK;
}

/* ------------------------------------------------------------------------ */
/* Cost-model support                                                        */
/* ------------------------------------------------------------------------ */

enum tt__cost_kind tt__exec_cost_kind(const tt_exec *ex)
{
    const tt__exec *x = ex ? tt__cx(ex) : NULL;
    if (!x || tt__token_check_one(x) != TT_OK || x->budget <= 1 || !x->pool || !x->pool->crew)
        return TT__KIND_SERIAL;
    if (x->flags & TT__F_TEAM)
        return TT__KIND_TEAM;
    if (tt__pool_member_of(x->pool) >= 0)
        return TT__KIND_IN_POOL;
    return TT__KIND_OUTSIDE;
}
