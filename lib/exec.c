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

/* Where an entry's tasks run. */
enum route {
    ROUTE_GANG,    /* the token's gang part, or a member's nested root     */
    ROUTE_REGION,  /* a region on the calling thread's own team            */
    ROUTE_PRIVATE  /* the pool's private crew; the caller waits            */
};

typedef struct placement {
    const uint32_t *gang; /* member indices in `crew`, or NULL             */
    uint32_t off, cnt;    /* gang[off, off + cnt)                          */
    int self;             /* caller's member index in `crew`, or -1        */
    tt__crew *crew;       /* the crew the member indices name              */
    enum route route;
    unsigned acquired;    /* slots taken from the pool for this entry      */
    uint32_t *slots;      /* where the taken slot indices are              */
} placement;

/* The members of a token as seen from the calling thread. A token with a
 * gang part belongs to the task that runs on its first member. */
static int token_members(const tt__exec *x, placement *pl)
{
    *pl = (placement){.self = -1, .route = ROUTE_GANG};
    if (!x->pool)
        return TT_OK;
    pl->self = tt__pool_member_of(x->pool, &pl->crew);
    if (x->gang && x->gang_cnt > 0 && !(x->flags & TT__F_TEAM)) {
        if (pl->self < 0 || x->gang[x->gang_off] != (uint32_t)pl->self)
            return TT_EWRONGTHREAD;
        pl->gang = x->gang;
        pl->off = x->gang_off;
        pl->cnt = x->gang_cnt;
    }
    return TT_OK;
}

/* Reserve the members for an entry that wants `need` of them when the token
 * has none. A member keeps itself first and takes what is free without
 * waiting (on a region crew nothing else serves: it runs alone). A plain
 * thread waits for all `need` slots (FIFO); it then runs on its own team's
 * region, or on the private crew where it cannot. `slots` and `gang` have
 * room for `need` indices. */
static int reserve(tt_pool *pool, placement *pl, unsigned need, bool prefix, uint32_t *slots,
                   uint32_t *gang)
{
    if (pl->gang)
        return TT_OK;
    TT__ASSERT(pl->acquired == 0 || pl->slots == slots);
    pl->slots = slots;
    pl->off = 0;
    if (pl->self >= 0) {
        gang[0] = (uint32_t)pl->self;
        if (pl->crew->kind == TT__CREW_PRIVATE) {
            pl->acquired = tt__gang_try_acquire(pool, need - 1, slots);
            for (unsigned i = 0; i < pl->acquired; i++)
                gang[1 + i] = slots[i];
        }
        pl->gang = gang;
        pl->cnt = 1 + pl->acquired;
        return TT_OK;
    }
    bool private = tt__pool_uses_private_crew(pool);
    tt__crew *crew = NULL;
    if (private) {
        int rc = tt__pool_private_crew(pool, &crew);
        if (rc)
            return rc;
    }
    if (pl->acquired == need) {
        /* taken already, without waiting (a callee of tt_external) */
    } else if (prefix) {
        tt__gang_acquire_prefix(pool, need, slots);
    } else {
        tt__gang_acquire(pool, need, slots, UINT64_MAX);
    }
    tt__ledger_install(pool);
    pl->acquired = need;
    pl->cnt = need;
    if (private) {
        pl->route = ROUTE_PRIVATE;
        pl->crew = crew;
        pl->gang = slots;
        return TT_OK;
    }
    /* The region crew was taken before the token was consumed (run_entry),
     * so that a failed allocation consumes nothing. */
    TT__ASSERT(pl->crew && pl->crew->kind == TT__CREW_REGION);
    pl->route = ROUTE_REGION;
    for (unsigned i = 0; i < need; i++)
        gang[i] = i;
    pl->gang = gang;
    return TT_OK;
}

static void unreserve(tt_pool *pool, placement *pl)
{
    if (pl->route == ROUTE_REGION)
        tt__region_crew_put(pool, pl->crew);
    if (pl->acquired)
        tt__gang_release(pool, pl->acquired, pl->slots);
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
    tt__crew *crew;
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
    tt__join_done(&e->join, m->crew->stats);
}

static inline uint32_t ceil_map(uint64_t s, uint32_t cnt, unsigned budget)
{
    return (uint32_t)((s * cnt + budget - 1) / budget);
}

/* Map `ntasks` tasks whose shares split `budget` onto the members of `pl`:
 * task j with slots [S_j, S_j + s_j) gets members
 * [ceil(S_j*cnt/budget), ceil((S_j+s_j)*cnt/budget)), exactly its slots
 * when the gang part is full (cnt == budget). */
static void plan_tasks(entry *e, task *tasks, unsigned ntasks, unsigned budget, const placement *pl)
{
    uint64_t s = 0;
    for (unsigned j = 0; j < ntasks; j++) {
        size_t first, sh;
        tt__block(budget, ntasks, j, &first, &sh);
        uint32_t lo = ceil_map(s, pl->cnt, budget);
        uint32_t hi = ceil_map(s + sh, pl->cnt, budget);
        s += sh;
        tasks[j] = (task){.w = {task_run}, .e = e, .index = j, .off = pl->off + lo,
                          .cnt = hi - lo, .share = (unsigned)sh};
    }
    e->gang = pl->gang;
    e->crew = pl->crew;
}

/* A task's body run by the thread that dispatches it (the entry's caller):
 * user code of a share, so one thread to OpenMP (tt__share_run). On a
 * member, which runs inside its participation's isolation, that costs a
 * check; on a plain thread outside every region, two ICV writes; inside the
 * application's own region, one nested one-thread region. */
typedef struct body_call {
    entry *e;
    const task *t;
} body_call;

static void body_thunk(void *ctx)
{
    body_call *b = ctx;
    b->e->body(b->e, b->t);
}

static void run_body(entry *e, const task *t)
{
    body_call b = {e, t};
    tt__share_run(e->pool, body_thunk, &b);
}

/* Run the tasks on members through their mailboxes, and wait. */
static void run_posted(entry *e, task *tasks, unsigned ntasks, const placement *pl)
{
    unsigned dispatched = 0;
    for (unsigned j = 0; j < ntasks; j++)
        if (!(tasks[j].cnt == 0 || (j == 0 && pl->self >= 0)))
            dispatched++;
    tt__join_init(&e->join, dispatched);
    tt__crew *crew = pl->crew;
    for (unsigned j = 0; j < ntasks; j++) {
        if (tasks[j].cnt == 0 || (j == 0 && pl->self >= 0))
            continue;
        tt__member_post(&crew->members[pl->gang[tasks[j].off]], &tasks[j].w);
    }
    for (unsigned j = 0; j < ntasks; j++) {
        if (tasks[j].cnt == 0 || (j == 0 && pl->self >= 0)) {
            if (tasks[j].cnt == 0)
                tasks[j].off = 0;
            run_body(e, &tasks[j]);
        }
    }
    if (dispatched) {
        /* A plain thread that waits for as many tasks as there are CPUs
         * would be one runnable thread too many: it spins little and
         * sleeps, as in an oversubscribed scope. */
        tt__wait_policy pol = crew->team_pol;
        if (e->sleepy || (pl->self < 0 && dispatched >= tt__cpu_count_cached()))
            pol.throttled = true;
        tt__join_wait(&e->join, &pol, crew->stats);
    }
}

/* A root on the caller's own team: region thread k is member k. The task
 * whose first member is k runs on k directly (no mailbox); the other
 * members of a task's gang part serve their mailboxes for the task's nested
 * entries until the task's owner tells them to stop. The region's own end
 * barrier is the join. */
typedef struct region_run {
    entry *e;
    task *tasks;
    int *role;      /* role[k]: the task member k starts, or -1: it serves */
    unsigned n;     /* members the root uses: 0..n-1                       */
    unsigned ntasks;
    bool all_at_once; /* a broadcast: its calls need every thread at once */
    bool short_team;
} region_run;

typedef struct region_part {
    region_run *r;
    unsigned k;
} region_part;

/* Participant k's part of a root: its task, or serving its task's nested
 * entries. */
static void region_participate(void *ctx)
{
    region_part *p = ctx;
    region_run *r = p->r;
    tt__crew *c = r->e->crew;
    int j = r->role[p->k];
    if (j >= 0) {
        task *t = &r->tasks[j];
        r->e->body(r->e, t);
        /* The task and every entry nested in it are done: its other
         * members stop serving. */
        for (uint32_t i = 1; i < t->cnt; i++)
            tt__member_post(&c->members[r->e->gang[t->off + i]], &tt__work_exit);
    } else {
        tt__member_serve(&c->members[p->k]);
    }
}

/* A team that came out short (dynamic adjustment, a thread limit reached
 * after the pool was built, threads exhausted): the tasks run on the
 * `got` threads obtained, thread k taking tasks k, k + got, ..., each
 * without members of its own (its nested entries run on this thread), so
 * that no more than `got` <= budget run at once. */
typedef struct short_part {
    region_run *r;
    unsigned k, got;
} short_part;

static void short_participate(void *ctx)
{
    short_part *p = ctx;
    for (unsigned j = p->k; j < p->r->ntasks; j += p->got) {
        task t = p->r->tasks[j];
        t.off = 0;
        t.cnt = 0;
        p->r->e->body(p->r->e, &t);
    }
}

static void region_member(void *ctx, unsigned k, unsigned got)
{
    region_run *r = ctx;
    tt__crew *c = r->e->crew;
    bool iso = r->e->pool->attr.isolate_shares;
    if (got < r->n) {
        if (r->all_at_once) {
            /* The calls must run at once: refused, nothing ran. */
            if (k == 0)
                r->short_team = true;
            return;
        }
        if (k >= r->ntasks)
            return;
        tt__region_member_enter(c, k);
        short_part sp = {r, k, got};
        tt__participate(c, iso, short_participate, &sp);
        tt__region_member_leave(c, k);
        return;
    }
    if (k >= r->n)
        return; /* not needed: leave at once */
    tt__region_member_enter(c, k);
    /* The whole participation is one thread to OpenMP (one nested region
     * per participant per root, not one per share): the shares, the
     * entries nested in them and the work this member serves for them. */
    region_part part = {r, k};
    tt__participate(c, iso, region_participate, &part);
    tt__region_member_leave(c, k);
}

/* Returns false when the team formed was too narrow for calls that must
 * run at once (nothing ran). */
static bool run_region(entry *e, task *tasks, unsigned ntasks, const placement *pl,
                       bool all_at_once)
{
    int role[pl->cnt];
    for (unsigned k = 0; k < pl->cnt; k++)
        role[k] = -1;
    for (unsigned j = 0; j < ntasks; j++) {
        TT__ASSERT(tasks[j].cnt > 0);
        role[tasks[j].off] = (int)j;
    }
    region_run r = {.e = e, .tasks = tasks, .role = role, .n = pl->cnt, .ntasks = ntasks,
                    .all_at_once = all_at_once};
    tt__backend_get()->region(e->pool->width, region_member, &r);
    return !r.short_team;
}

/* Run `ntasks` tasks whose shares split `budget` on the members of `pl`,
 * and wait for them. On a region whose team came out short, the tasks run
 * on the threads obtained; calls that must run at once (`all_at_once`, a
 * broadcast) are refused instead (TT_REFUSED_UNAVAILABLE, nothing ran). */
static int run_tasks(entry *e, unsigned ntasks, unsigned budget, placement *pl, bool all_at_once)
{
    task tasks[ntasks];
    plan_tasks(e, tasks, ntasks, budget, pl);
    if (pl->route != ROUTE_REGION) {
        run_posted(e, tasks, ntasks, pl);
        return TT_OK;
    }
    return run_region(e, tasks, ntasks, pl, all_at_once) ? TT_OK : TT_REFUSED_UNAVAILABLE;
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

/* The width caps every root of a pool together (c-api.md), inline runs
 * too: a thread that runs work of the pool inline while it holds nothing of
 * it (no member, not inside a callee of the pool's own tt_external, not
 * inside another inline run of the pool) takes one slot for the run,
 * waiting for it first come first served as roots do. Without it, plain
 * threads with budget-1 roots on a pool of width 1 ran side by side (the
 * ledger's per-pool peak showed 2). A thread inside the run is known by
 * its hold (tt__pool_thread_holds) and never waits for a slot again. */
static bool inline_slot_needed(const tt__exec *x, const placement *pl)
{
    return x->pool && !(x->flags & TT__F_TEAM) && pl->self < 0 && !pl->gang &&
           !tt__pool_thread_holds(x->pool) && !tt__pool_external_callee(x->pool);
}

static void inline_hold_take(tt__inline_hold *h, tt__exec *x, const placement *pl)
{
    *h = (tt__inline_hold){.pool = x->pool};
    if (!inline_slot_needed(x, pl))
        return;
    tt__gang_acquire(x->pool, 1, &h->slot, UINT64_MAX);
    h->held = true;
}

/* Give the slot back without having run (a refused entry). */
void tt__inline_hold_drop(tt__inline_hold *h)
{
    if (h->held)
        tt__gang_release(h->pool, 1, &h->slot);
    h->held = false;
}

void tt__inline_hold_begin(tt__inline_hold *h)
{
    if (h->held)
        tt__pool_hold_push(h);
}

void tt__lend_begin(tt__lend *l, tt_pool *pool)
{
    l->h = tt__pool_thread_hold(pool);
    if (!l->h || !l->h->held) {
        l->h = NULL;
        return;
    }
    /* Stop counting first, then give the slot back (the ledger's per-pool
     * count never shows this thread beside the slot's next holder). */
    tt__ledger_pool_suspend(pool, &l->ls);
    tt__gang_release(pool, 1, &l->h->slot);
    l->h->held = false;
}

void tt__lend_end(tt__lend *l)
{
    if (!l->h)
        return;
    tt__gang_acquire(l->h->pool, 1, &l->h->slot, UINT64_MAX);
    l->h->held = true;
    tt__ledger_pool_resume(&l->ls);
}

/* For callers outside this file (team.c): the token's placement first. */
void tt__inline_hold_take(tt__inline_hold *h, tt__exec *x)
{
    placement pl;
    if (token_members(x, &pl) == TT_OK)
        inline_hold_take(h, x, &pl);
    else
        *h = (tt__inline_hold){.pool = x->pool};
}

void tt__inline_hold_end(tt__inline_hold *h)
{
    if (h->held) {
        tt__pool_hold_pop();
        tt__inline_hold_drop(h);
    }
}

static void ext_entry_inline(entry *e);

/* The common frame of tt_fork, tt_for_ranges, tt_broadcast and tt_external
 * on a token without team authority: locate the caller, claim and consume
 * the token, run inline when one task (or no crew) suffices, otherwise
 * reserve `need` members and run `ntasks` tasks splitting `budget`. */
typedef struct run_spec {
    unsigned ntasks, budget, need;
    bool prefix; /* take slots 0..need-1 (broadcast)                    */
    bool one;    /* one task on the first member, the rest held (external) */
    bool claimed; /* the caller claimed the token already (tt_external)  */
} run_spec;

typedef struct inline_run {
    entry *e;
    const run_spec *sp;
    const placement *pl;
} inline_run;

static void inline_tasks(void *ctx)
{
    inline_run *r = ctx;
    for (unsigned j = 0; j < r->sp->ntasks; j++) {
        size_t first, sh;
        tt__block(r->sp->budget, r->sp->ntasks, j, &first, &sh);
        task t = {.e = r->e, .index = j, .share = (unsigned)sh};
        if (r->sp->ntasks == 1) {
            t.off = r->pl->off;
            t.cnt = r->pl->cnt;
        }
        r->e->body(r->e, &t);
    }
}

/* Run an entry. The token is claimed here, or by the caller (sp.claimed);
 * either way every refusal below unclaims it, and success leaves it. */
static int run_entry(tt__exec *x, entry *e, run_spec sp)
{
    int rc = sp.claimed ? TT_OK : tt__exec_claim(x);
    if (rc)
        return rc;
    placement pl;
    rc = token_members(x, &pl);
    bool spread = !((sp.ntasks <= 1 && !sp.one) || !x->pool || x->pool->width <= 1);
    uint32_t slots[spread ? sp.need : 1], gang[spread ? sp.need : 1];
    /* Tasks that may run one after the other (a fork, ranges) never fail
     * for want of threads: they run on the threads obtained. */
    bool degrade = !sp.prefix && !sp.one;
    tt__crew *region_crew = NULL;
    if (rc == TT_OK && spread && pl.self < 0) {
        /* Start the private crew before the token is consumed, so that a
         * refused start leaves the token usable: a fork or ranges then runs
         * on the calling thread alone (slots conserved); a broadcast or an
         * external, which need their threads, fail with the code (a crew
         * that came out short: TT_REFUSED_UNAVAILABLE). */
        tt__crew *crew;
        if (tt__pool_uses_private_crew(x->pool)) {
            rc = tt__pool_private_crew(x->pool, &crew);
            if (rc != TT_OK && degrade) {
                rc = TT_OK;
                spread = false;
            } else if (rc == TT_ESHORTTEAM) {
                rc = TT_REFUSED_UNAVAILABLE;
            }
        } else {
            /* A root on this thread's own team: room for the region's
             * threads (libgomp would end the process where it cannot start
             * them), and its region crew, which is memory, taken before the
             * consume so that a failed allocation consumes nothing. A fork
             * or ranges without room runs on this thread alone. */
            rc = tt__region_room(x->pool->width);
            if (rc != TT_OK && degrade) {
                rc = TT_OK;
                spread = false;
            }
            if (rc == TT_OK && spread) {
                region_crew = tt__region_crew_get(x->pool);
                if (!region_crew)
                    rc = TT_ENOMEM;
            }
        }
        if (rc == TT_OK && spread && sp.one)
            rc = tt__threads_room(sp.need - 1); /* the callee's nested team */
        if (rc == TT_OK && spread && tt__pool_external_callee(x->pool)) {
            /* A thread of a tt_external callee's own region, calling back
             * into the pool whose slots that very tt_external holds while it
             * waits for the callee: it must not wait for them.
             * Take the slots now if they are free; otherwise run the tasks
             * inline on this thread, which the tt_external's width already
             * counts (a broadcast, which needs its calls at once, is
             * refused). */
            int got = sp.prefix ? tt__gang_try_acquire_prefix(x->pool, sp.need, slots)
                                : tt__gang_try_acquire_all(x->pool, sp.need, slots);
            if (got == TT_OK) {
                pl.slots = slots;
                pl.acquired = sp.need;
            } else if (sp.prefix) {
                rc = TT_REFUSED_UNAVAILABLE;
            } else {
                spread = false;
            }
        }
    }
    tt__inline_hold hold = {0};
    if (rc == TT_OK && !spread && !sp.one)
        inline_hold_take(&hold, x, &pl);
    if (rc == TT_OK)
        rc = tt__exec_consume(x);
    if (rc == TT_OK && !spread && region_crew) {
        tt__region_crew_put(x->pool, region_crew);
        region_crew = NULL;
    }
    if (rc) {
        if (pl.acquired)
            tt__gang_release(x->pool, pl.acquired, pl.slots);
        if (region_crew)
            tt__region_crew_put(x->pool, region_crew);
        tt__inline_hold_drop(&hold);
        tt__exec_unclaim(x);
        return rc;
    }
    pl.crew = pl.self < 0 ? region_crew : pl.crew;
    unsigned saved = tt__exec_suspend(x);
    tt__inline_hold_begin(&hold);
    if (!spread && sp.one) {
        ext_entry_inline(e);
    } else if (!spread) {
        /* Lazy and inline: one task (or a pool of width 1) runs on the
         * caller with the token's members, and no scheduler call is made;
         * still one thread to OpenMP. */
        e->gang = pl.gang;
        e->crew = pl.crew;
        inline_run run = {.e = e, .sp = &sp, .pl = &pl};
        tt__share_run(e->pool, inline_tasks, &run);
    } else {
        /* Inside an inline run of this pool, its slot goes to this entry
         * while it runs (tt__lend_begin). */
        tt__lend lend = {0};
        if (pl.self < 0 && !pl.gang && pl.acquired == 0)
            tt__lend_begin(&lend, x->pool);
        rc = reserve(x->pool, &pl, sp.need, sp.prefix, slots, gang);
        if (rc == TT_OK) {
            if (sp.one) {
                placement one = pl;
                one.cnt = 1;
                rc = run_tasks(e, 1, 1, &one, false);
            } else {
                /* Leaf tasks take one member each: a token's wider gang
                 * part is narrowed to what they use. */
                placement use = pl;
                if (use.cnt > sp.budget)
                    use.cnt = sp.budget;
                rc = run_tasks(e, sp.ntasks, sp.budget, &use, sp.prefix);
            }
            unreserve(x->pool, &pl);
        }
        tt__lend_end(&lend);
    }
    tt__inline_hold_end(&hold);
    tt__exec_resume(x, saved);
    if (rc == TT_REFUSED_UNAVAILABLE) {
        /* A short team refused a broadcast after the consume: nothing ran,
         * and a refusal consumes nothing. */
        tt__exec_unconsume(x);
        tt__exec_unclaim(x);
        return rc;
    }
    tt__exec_leave(x);
    return rc;
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
    size_t first, n;
    tt__block(f->jobs, f->ntasks, t->index, &first, &n);
    for (size_t i = first; i < first + n; i++) {
        tt_exec child;
        tt__exec *c = tt__x(&child);
        child_of(c, e, t, f->child_flags, f->team);
        tt__ledger_enter(e->ledger);
        f->job(f->arg, (unsigned)i, &child);
        tt__ledger_leave(e->ledger);
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
    unsigned budget = x->budget;
    unsigned ntasks = jobs < budget ? jobs : budget;
    fork_entry f = {
        .e = {.body = fork_body, .pool = x->pool, .pool_gen = x->pool_gen, .ledger = x->ledger},
        .job = job, .arg = arg, .jobs = jobs, .ntasks = ntasks,
        .child_flags = TT__F_FORK_CHILD | TT__F_IN_TASK,
        .team = NULL,
    };
    return run_entry(x, &f.e, (run_spec){.ntasks = ntasks, .budget = budget, .need = budget});
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
    tt__ledger_enter(e->ledger);
    r->body(r->arg, begin, end);
    tt__ledger_leave(e->ledger);
}

static void nothing_body(entry *e, const task *t)
{
    (void)e;
    (void)t;
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
    unsigned ntasks = len == 0 ? 0 : tt__range_tasks(len, grain, x->budget);
    range_entry r = {
        .e = {.body = len == 0 ? nothing_body : range_body, .pool = x->pool,
              .pool_gen = x->pool_gen, .ledger = x->ledger},
        .body = body, .arg = arg, .len = len, .ntasks = ntasks,
    };
    return run_entry(x, &r.e, (run_spec){.ntasks = ntasks, .budget = ntasks, .need = ntasks});
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
    tt__ledger_enter(e->ledger);
    b->fn(b->arg, t->index);
    tt__ledger_leave(e->ledger);
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
    unsigned budget = x->budget;
    bcast_entry b = {.e = {.body = bcast_body, .pool = x->pool, .pool_gen = x->pool_gen,
                           .ledger = x->ledger},
                     .fn = fn, .arg = arg};
    return run_entry(x, &b.e, (run_spec){.ntasks = budget, .budget = budget, .need = budget,
                                         .prefix = true});
}

/* ------------------------------------------------------------------------ */
/* tt_external                                                               */
/* ------------------------------------------------------------------------ */

typedef struct ext_entry {
    entry e;
    tt_external_fn fn;
    void *arg;
    unsigned width;  /* what the callee is handed: the members held      */
    bool nested;     /* the callee's region is nested in the caller's    */
} ext_entry;

typedef struct ext_run {
    struct ext_entry *x;
    unsigned width;
} ext_run;

static void ext_thunk(void *ctx);
static void ext_isolated_thunk(void *ctx);

/* Call the callee with `width`. `holding`: the external holds slots of the
 * pool while the callee runs, so a thread of the callee that enters the
 * pool must not wait for them: the pool counts the external, and the
 * backend marks the callee's threads (tt__pool_external_callee). */
static void ext_call(ext_entry *x, unsigned width, bool holding)
{
    const tt__backend *be = tt__backend_get();
    tt_pool *pool = x->e.pool;
    int saved[4];
    void *mark = NULL;
    be->external_enter(width, saved);
    if (holding) {
        atomic_fetch_add_explicit(&pool->externals, 1, memory_order_acq_rel);
        mark = be->callee_mark(pool);
        if (!mark)
            atomic_fetch_add_explicit(&pool->externals_unmarked, 1, memory_order_acq_rel);
    }
    /* Ledger: this thread counts, and so does every thread of the regions
     * the callee opens from here (ledger.c). */
    uint64_t prev = tt__ledger_callee_begin(x->e.ledger);
    tt__ledger_enter(x->e.ledger);
    /* A callee handed one thread is one thread to OpenMP, as a share is; a
     * wider one gets its width (the one door). Either runs with the mark
     * in force, so that its threads are known as the external's own. */
    ext_run r = {x, width};
    be->callee_call(mark, width == 1 ? ext_isolated_thunk : ext_thunk, &r);
    tt__ledger_leave(x->e.ledger);
    tt__ledger_callee_end(prev);
    if (holding) {
        if (mark)
            be->callee_unmark(mark);
        else
            atomic_fetch_sub_explicit(&pool->externals_unmarked, 1, memory_order_acq_rel);
        atomic_fetch_sub_explicit(&pool->externals, 1, memory_order_acq_rel);
    }
    be->external_leave(saved);
}

static void ext_thunk(void *ctx)
{
    ext_run *r = ctx;
    r->x->fn(r->x->arg, r->width);
}

static void ext_isolated_thunk(void *ctx)
{
    ext_run *r = ctx;
    tt__share_run(r->x->e.pool, ext_thunk, r);
}

static void ext_body(entry *e, const task *t)
{
    ext_entry *x = (ext_entry *)e;
    /* The members this entry holds (t->cnt is 1: the callee runs on the
     * first; the others were reserved so that nobody else uses their
     * slots while the callee's threads do). */
    (void)t;
    ext_call(x, x->width, true);
}

/* A callee thread of another tt_external that calls tt_external: the
 * callee runs here with width 1 (this thread is already counted). */
static void ext_entry_inline(entry *e)
{
    ext_entry *x = (ext_entry *)e;
    x->width = 1;
    ext_call(x, 1, false);
}

int tt_external(tt_exec *ex, tt_external_fn fn, void *arg)
{
    tt__exec *x = ex ? tt__x(ex) : NULL;
    int rc = tt__exec_check(x);
    if (rc)
        return rc;
    if (!fn)
        return TT_EINVAL;
    unsigned width = x->budget;
    /* The callee opens its own team of `width` threads: a caller that spun
     * while it runs would take a CPU from it. */
    ext_entry e = {.e = {.body = ext_body, .pool = x->pool, .pool_gen = x->pool_gen, .sleepy = true,
                         .ledger = x->ledger},
                   .fn = fn, .arg = arg, .width = width};
    if (width == 1 || !x->pool || x->pool->width <= 1 || (x->flags & TT__F_TEAM)) {
        /* Inline: budget 1, a pool of width 1, or a team token whose leader
         * holds the team's width. */
        rc = tt__exec_claim(x);
        if (rc)
            return rc;
        placement pl;
        tt__inline_hold hold = {0};
        if (token_members(x, &pl) == TT_OK)
            inline_hold_take(&hold, x, &pl);
        /* Room for the callee's team before anything is consumed. */
        rc = width <= 1                               ? TT_OK
             : tt__backend_get()->in_parallel() ? tt__threads_room(width - 1)
                                                : tt__region_room(width);
        if (rc == TT_OK)
            rc = tt__exec_consume(x);
        if (rc) {
            tt__inline_hold_drop(&hold);
            tt__exec_unclaim(x);
            return rc;
        }
        unsigned saved = tt__exec_suspend(x);
        tt__inline_hold_begin(&hold);
        ext_call(&e, width, false);
        tt__inline_hold_end(&hold);
        tt__exec_resume(x, saved);
        tt__exec_leave(x);
        return TT_OK;
    }
    rc = tt__exec_claim(x);
    if (rc)
        return rc;
    placement pl;
    rc = token_members(x, &pl);
    /* A thread that runs inside a callee of this pool's own external (the
     * caller of a full-width external calling back) is no plain thread
     * here: the slots are held, it takes the general path, which never
     * waits for them. */
    bool top = rc == TT_OK && pl.self < 0 && width == x->pool->width &&
               !tt__pool_uses_private_crew(x->pool) && !tt__pool_external_callee(x->pool);
    bool member_root = rc == TT_OK && pl.self >= 0 && !pl.gang;
    /* Room for the callee's team before anything is consumed: its
     * own top-level team on this thread, or a nested one on a member. */
    if (rc == TT_OK && top)
        rc = tt__region_room(width);
    else if (rc == TT_OK && member_root)
        rc = tt__threads_room(width - 1);
    if (rc == TT_OK && (top || member_root))
        rc = tt__exec_consume(x);
    if (rc) {
        tt__exec_unclaim(x);
        return rc;
    }
    if (top) {
        /* A full-width root on a plain thread: the callee runs on this very
         * thread with nthreads-var = width, so its region is this thread's
         * own top-level region on the same hot team. No region of ours, no
         * nested region, no thread created. */
        uint32_t slots[width];
        tt__lend lend;
        tt__lend_begin(&lend, x->pool);
        tt__gang_acquire(x->pool, width, slots, UINT64_MAX);
        tt__ledger_install(x->pool);
        unsigned saved = tt__exec_suspend(x);
        ext_call(&e, width, true);
        tt__exec_resume(x, saved);
        tt__gang_release(x->pool, width, slots);
        tt__lend_end(&lend);
        tt__exec_leave(x);
        return TT_OK;
    }
    if (member_root) {
        /* A member's nested root: the callee gets the members it holds. */
        uint32_t slots[width], gang[width];
        unsigned saved = tt__exec_suspend(x);
        reserve(x->pool, &pl, width, false, slots, gang);
        e.width = pl.cnt;
        ext_call(&e, e.width, true);
        unreserve(x->pool, &pl);
        tt__exec_resume(x, saved);
        tt__exec_leave(x);
        return TT_OK;
    }
    if (pl.gang)
        e.width = pl.cnt < width ? pl.cnt : width;
    /* The claim passes to run_entry (one claim per call). */
    return run_entry(x, &e.e,
                     (run_spec){.ntasks = 1, .budget = width, .need = width, .one = true,
                                .claimed = true});
}

/* ------------------------------------------------------------------------ */
/* Cost-model support                                                        */
/* ------------------------------------------------------------------------ */

enum tt__cost_kind tt__exec_cost_kind(const tt_exec *ex)
{
    const tt__exec *x = ex ? tt__cx(ex) : NULL;
    if (!x || tt__token_check_one(x) != TT_OK || x->budget <= 1 || !x->pool || x->pool->width <= 1 ||
        atomic_load_explicit(&x->pool->gen, memory_order_acquire) != x->pool_gen)
        return TT__KIND_SERIAL;
    if (x->flags & TT__F_TEAM)
        return TT__KIND_TEAM;
    if (tt__pool_entry_begin(x->pool, x->pool_gen) != TT_OK)
        return TT__KIND_SERIAL;
    bool member = tt__pool_member_of(x->pool, NULL) >= 0;
    tt__pool_entry_end(x->pool);
    return member ? TT__KIND_IN_POOL : TT__KIND_OUTSIDE;
}
