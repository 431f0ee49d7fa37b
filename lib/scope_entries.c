/*
 * scope_entries.c -- tt_team_scope (a scope alone, lean, on the caller's
 * own team, or on members of a crew through their mailboxes) and the
 * entries on tokens with team authority, which run as commands on the
 * block the token carries. The top of the team-scope files: it calls into
 * scope_split.c and team_scope.c (whose essay describes the protocol).
 */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* tt_team_scope                                                             */
/* ------------------------------------------------------------------------ */

void tt_team_opts_init(tt_team_opts *opts)
{
    if (!opts)
        return;
    opts->acquire_timeout_ns = UINT64_MAX;
    opts->spin_polls = UINT64_MAX;
    opts->pin_participants = -1;
}

/* Entries on a token with team authority: the scope is already there. */
static int team_scope_carried(tt__exec *x, tt_scope_fn fn, void *arg);

/* A root scope on the caller's own team: region thread 0 is the leader
 * and runs the callback, threads 1..size-1 take part in the control block
 * directly (no mailbox), the others leave at once. */
typedef struct scope_region {
    tt__ctl *c;
    tt_scope *view;
    tt_scope_fn fn;
    void *arg;
    const unsigned *cpus; /* pinning: participant k on cpus[k % ncpu]     */
    unsigned ncpu;
    bool short_team;
    /* The end command is CMD_LEAVE, and the region's end barrier the
     * scope's last join: in the caller-first order (exec.c, region_end,
     * TT__END_LEAD_FIRST) and under a spin budget of 0. See
     * scope_participate. */
    bool leave_at_end;
    /* After the end command's join the leader says it is done, and the
     * members wait for that before the region's end barrier: where the
     * process holds more threads than CPUs (TT__END_LEAD_WAITS). */
    bool lead_says_done;
    _Atomic uint32_t lead_done;
} scope_region;

/* Participant k's view of the scope: the leader's region record (its own,
 * for participant 0) and, for the others, the copies of what they read of
 * it, which reach them by value in the region's data (scope_line_member):
 * a member reads the block and nothing else of the leader's frame. */
typedef struct scope_part {
    scope_region *r;
    unsigned k;
    tt__ctl *c;
    const unsigned *cpus;
    unsigned ncpu;
    bool lead_says_done;
    uint32_t gen0; /* the block's generation before the scope's first command */
} scope_part;

/* The budget of a member's wait for its leader's "done" (lead_done),
 * which follows the block's policy as its other waits do: no poll on the
 * CPU the leader issued the end command from (the leader says it only once
 * this member stops polling; "Sharing a CPU" above), and at most the
 * throttled budget where the block's waits are throttled. A skip is
 * counted (lead_wait_skips): it happens only in a process of more threads
 * than CPUs, with the member on its leader's CPU, never on a quiet path. */
static uint64_t lead_wait_polls(tt__ctl *c)
{
    if (!tt__ctl_on_lead_cpu(c))
        return tt__wait_polls(&c->pol);
    tt__wait_stats *st = tt__ctl_stats(c);
    if (st)
        atomic_fetch_add_explicit(&st->lead_wait_skips, 1, memory_order_relaxed);
    return 0;
}

/*
 * The end of a root scope on the caller's team. Where the leader's wait
 * can be awake (a spin budget, outside the caller-first order), the leader
 * ends its members' part with CMD_END and waits for their reports: that
 * join is its awake wait (with the scope's policy) before libgomp's
 * barrier, which a throttled libgomp would make a sleep, and the counter
 * scope_end_joins says it happened. Everywhere else the end command is the
 * caller's "done": the leader issues CMD_LEAVE and goes straight to the
 * barrier, and the members leave on it without reporting; the barrier is
 * the scope's last join.
 *
 *  - In the caller-first order, that is one handoff between the leader's
 *    core and a member's where a join would make three (end, the
 *    members' reports, the caller's "done"); each is a cache-line
 *    transfer, hundreds of cycles one way between cores that sit far
 *    apart.
 *  - Under a spin budget of 0 (OMP_WAIT_POLICY=passive) the join would be
 *    a sleep: the leader would sleep in it and again in libgomp's barrier,
 *    each a wake-up (tens of microseconds). The two wake-ups a scope still
 *    makes are the price of a region held open across the callback: the
 *    member sleeps between the section and the end command, and the
 *    leader in the section's join (waiting.md, "A team scope under
 *    OMP_WAIT_POLICY=passive"; the run: comment-records.md, "The end of a
 *    root scope").
 *
 * Where the process holds more threads than CPUs (TT__END_LEAD_WAITS, a
 * throttled libgomp) the leader keeps its awake join and then says it is
 * done (lead_done), and the members, which reported, wait for that before
 * the barrier, as a root's do (exec.c, region_end): the leader reaches the
 * barrier first and a member makes its wake call. Going from the join
 * straight to the barrier it would be the last arriver, and make that
 * system call on its own path (comment-records.md, "The end of a root
 * scope"). A member's wait for that word follows the block's
 * policy (lead_wait_polls): none on the leader's CPU, where the leader
 * could say it only once the member stopped polling.
 *
 * The block stays valid: it is the region crew's (or, where that one
 * could not be allocated, in the leader's frame) until the region's end
 * barrier, which every member passes after its last read of the command
 * (and of lead_done); the next scope on the crew starts after it.
 */
static void scope_participate(void *ctx)
{
    scope_part *p = ctx;
    scope_region *r = p->r;
    tt__ctl *c = p->c;
    if (p->k == 0) {
        /* The callback is the root's user code on this thread. */
        tt__scope_run_fn(c, r->view, r->fn, r->arg);
        if (c->size <= 1)
            return;
        if (r->leave_at_end) {
            tt__ctl_issue(c, CMD_LEAVE, 0);
            return;
        }
        if (c->crew->stats)
            atomic_fetch_add_explicit(&c->crew->stats->scope_end_joins, 1, memory_order_relaxed);
        tt__ctl_end_members(c);
        if (r->lead_says_done)
            tt__lead_first_done(&r->lead_done);
    } else {
        cpu_set_t saved;
        bool pinned = p->ncpu > 0 && tt__cpu_pin(p->cpus[p->k % p->ncpu], &saved);
        tt__ctl_participate(c, p->k, p->gen0);
        if (pinned)
            tt__cpu_unpin(&saved);
        if (p->lead_says_done)
            tt__lead_first_wait(&r->lead_done, lead_wait_polls(c), tt__ctl_stats(c));
    }
}

/* The region's line (backend region_line): the words a participant needs
 * before it reads the block. */
enum { SCOPE_W_R, SCOPE_W_C, SCOPE_W_CPUS, SCOPE_W_CREW, SCOPE_W_NCPU, SCOPE_W_SIZE,
       SCOPE_W_FLAGS, SCOPE_W_GEN0 };
enum { SCOPE_F_ISOLATE = 1, SCOPE_F_LEAD_SAYS_DONE = 2 };

static void scope_line_member(const tt__line *l, unsigned k, unsigned got)
{
    scope_region *r = (scope_region *)(uintptr_t)l->w[SCOPE_W_R];
    unsigned size = (unsigned)l->w[SCOPE_W_SIZE];
    if (got < size) {
        if (k == 0)
            r->short_team = true;
        return;
    }
    if (k >= size)
        return;
    uint64_t flags = l->w[SCOPE_W_FLAGS];
    scope_part part = {.r = r, .k = k, .c = (tt__ctl *)(uintptr_t)l->w[SCOPE_W_C],
                       .cpus = (const unsigned *)(uintptr_t)l->w[SCOPE_W_CPUS],
                       .ncpu = (unsigned)l->w[SCOPE_W_NCPU],
                       .gen0 = (uint32_t)l->w[SCOPE_W_GEN0],
                       .lead_says_done = (flags & SCOPE_F_LEAD_SAYS_DONE) != 0};
    /* Every thread of the region takes part: the block is the region's
     * team (tt__ctl_run_section), and each participant stays at the
     * region's level, confined (region_line starts them so). Otherwise
     * each participant is one thread to OpenMP for the whole scope. */
    tt__region_participate_line((tt__crew *)(uintptr_t)l->w[SCOPE_W_CREW], k,
                                (flags & SCOPE_F_ISOLATE) != 0, scope_participate, &part);
}

/* A scope of the leader alone (budget 1, a pool of width 1): no member,
 * no scheduler call, and a slot of the pool when this thread holds none
 * (place.c, inline holds). */
static int scope_alone(tt__entry *fr, tt_scope_fn fn, void *arg)
{
    tt__exec *x = fr->x;
    tt__entry_hold(fr, NULL);
    int rc = tt__entry_commit(fr);
    if (rc)
        return tt__entry_abort(fr, rc);
    tt__ctl c;
    tt__wait_policy pol = {0};
    tt__ctl_init(&c, x->pool, x->pool_gen, NULL, 1, NULL, &pol, x->ledger);
    _Atomic int fail = 0;
    c.fail = &fail;
    tt_scope view = {.c = &c, .size = 1, .ledger = x->ledger};
    tt__scope_run_fn(&c, &view, fn, arg);
    tt__entry_end(fr, true);
    return atomic_load_explicit(&fail, memory_order_acquire);
}

/* The same on the lean frame (entry.c, tt__entry_lean): a budget-1 token
 * that needs no slot and no count of its own, so no placement either. */
static int scope_lean(tt__exec *x, tt_scope_fn fn, void *arg)
{
    unsigned saved;
    int rc = tt__entry_lean_begin(x, &saved);
    if (rc)
        return rc;
    tt__ctl c;
    tt__wait_policy pol = {0};
    tt__ctl_init(&c, x->pool, x->pool_gen, NULL, 1, NULL, &pol, x->ledger);
    _Atomic int fail = 0;
    c.fail = &fail;
    tt_scope view = {.c = &c, .size = 1, .ledger = x->ledger};
    tt__scope_run_fn(&c, &view, fn, arg);
    tt__entry_lean_end(x, saved);
    return atomic_load_explicit(&fail, memory_order_acquire);
}

/* A scope's settings: the pool's, overridden by the options. */
typedef struct scope_settings {
    uint64_t timeout;
    tt__wait_policy pol;
    bool pin;
} scope_settings;

static scope_settings scope_settings_of(const tt_pool *pool, const tt_team_opts *opts)
{
    scope_settings s = {.timeout = pool->attr.acquire_timeout_ns,
                        .pol = {.spin_polls = pool->attr.spin_polls,
                                .throttled = pool->width > tt__cpu_count_cached()},
                        .pin = pool->attr.pin_participants};
    if (opts) {
        if (opts->acquire_timeout_ns != UINT64_MAX)
            s.timeout = opts->acquire_timeout_ns;
        if (opts->spin_polls != UINT64_MAX)
            s.pol.spin_polls = opts->spin_polls;
        if (opts->pin_participants >= 0)
            s.pin = opts->pin_participants != 0;
    }
    s.pin = s.pin && tt__pin_allowed();
    return s;
}

/* The members of a scope, all taken before the token is consumed, so that
 * a refusal consumes nothing (place.c has the rules). A member's token
 * holds a gang part that starts with the caller; a member tops it up from
 * the free slots of its private crew without waiting, or is refused at
 * once. A plain thread takes `budget` slots, its own included, waiting up
 * to the acquire timeout (a thread of a tt_external callee's region never
 * waits for the slots that tt_external may hold: free now, or refused),
 * and runs on its own team's region, or on the private crew where it
 * cannot (one that came out short: TT_REFUSED_UNAVAILABLE). */
static int scope_reserve(tt__exec *x, tt__placement *pl, uint64_t timeout, uint32_t *slots,
                         uint32_t *gang)
{
    tt_pool *pool = x->pool;
    int rc = tt__place_members(x, pl);
    if (rc)
        return rc;
    tt__reserve r = {.need = x->budget, .strict = true, .timeout_ns = timeout};
    if (pl->self < 0) {
        rc = tt__place_crew(pool, pl);
        if (rc)
            return rc == TT_ESHORTTEAM ? TT_REFUSED_UNAVAILABLE : rc;
        if (tt__place_no_wait(pool))
            r.timeout_ns = 0;
    }
    rc = tt__place_reserve(pool, pl, &r, slots, gang);
    if (rc == TT_OK && pl->route == TT__ROUTE_REGION)
        rc = tt__place_region_crew(pool, pl);
    return rc;
}

/* A root scope on the caller's own team. False when the team came out
 * narrower than the scope (dynamic adjustment, a thread limit reached after
 * the pool was built): the members cannot be had, and nothing ran. */
static bool scope_on_region(tt__exec *x, tt__crew *crew, const scope_settings *s,
                            _Atomic int *fail, tt_scope_fn fn, void *arg)
{
    tt_pool *pool = x->pool;
    unsigned budget = x->budget;
    unsigned cpus[budget];
    /* The crew's kept block (scope.h, tt__ctl_keep), or one of this
     * frame's where it cannot be had. */
    tt__ctl own, *c = &own;
    tt__ctl_kept *kept = tt__ctl_keep(crew, pool, x->pool_gen, budget, &s->pol, x->ledger);
    if (kept) {
        c = &kept->c;
    } else {
        tt__ctl_init(c, pool, x->pool_gen, crew, budget, NULL, &s->pol, x->ledger);
        c->fail = fail;
    }
    tt_scope view = {.c = c, .size = budget, .ledger = x->ledger};
    /* Every thread of the region takes part when the scope has the pool's
     * width (the region is always opened at that width). */
    TT__CTL_KEEP(c, region_team, budget == pool->width);
    /* A region wider than any this thread opened before starts its team
     * threads (wait.c, region_width_seen): this scope's waits spin only the
     * throttled budget, as libgomp's do there, and then yield and sleep.
     * A new thread starts on its parent's CPU and waits there behind any
     * spinner, and a waiter woken by it may be queued on the new thread's
     * CPU behind it in turn. The scope's end keeps the order the process's
     * threads say; a member on its leader's CPU does not poll for the
     * leader's "done" (lead_wait_polls), which the leader could say only
     * once that poll gave up. Runs and what was tried:
     * docs/design/runs/2026-12-07-comment-records.md, "A thread's first
     * scope". */
    if (tt__region_new_team(pool->width))
        TT__CTL_KEEP(c, pol.throttled, true);
    scope_region r = {.c = c, .view = &view, .fn = fn, .arg = arg, .cpus = cpus,
                      .ncpu = s->pin ? tt__scope_pin_cpus(cpus, budget) : 0};
    if (budget > 1 && s->pol.spin_polls > 0) {
        enum tt__region_end end = tt__region_end_order(tt__backend_get()->last_arriver_wakes());
        r.leave_at_end = end == TT__END_LEAD_FIRST;
        r.lead_says_done = end == TT__END_LEAD_WAITS;
    } else {
        r.leave_at_end = budget > 1;
    }
    tt__line line = {{0}};
    line.w[SCOPE_W_R] = (uintptr_t)&r;
    line.w[SCOPE_W_C] = (uintptr_t)c;
    line.w[SCOPE_W_CPUS] = (uintptr_t)cpus;
    line.w[SCOPE_W_CREW] = (uintptr_t)c->crew;
    line.w[SCOPE_W_NCPU] = r.ncpu;
    line.w[SCOPE_W_SIZE] = c->size;
    line.w[SCOPE_W_FLAGS] = (!c->region_team && tt__pool_isolates(c->pool) ? SCOPE_F_ISOLATE : 0) |
                            (r.lead_says_done ? SCOPE_F_LEAD_SAYS_DONE : 0);
    /* A kept block's generation goes on from the last scope: members
     * wait for the first command after it. */
    line.w[SCOPE_W_GEN0] = atomic_load_explicit(&c->gen.word, memory_order_relaxed);
    tt__backend_get()->region_line(pool->width, scope_line_member, &line);
    if (kept) {
        int code = atomic_load_explicit(&kept->fail, memory_order_acquire);
        if (code)
            atomic_store_explicit(fail, code, memory_order_relaxed);
    }
    return !r.short_team;
}

/* A scope on members of a crew through their mailboxes: participant p >= 1
 * runs on member gang[p] (on the private crew the leader is not a member:
 * its slot is the first). */
static void scope_on_members(tt__exec *x, const tt__placement *pl, const scope_settings *s,
                             _Atomic int *fail, tt_scope_fn fn, void *arg)
{
    unsigned budget = x->budget;
    tt__ctl c;
    tt_scope view = {.c = &c, .size = budget, .ledger = x->ledger};
    tt__ctl_init(&c, x->pool, x->pool_gen, pl->crew, budget, pl->gang + pl->off + 1, &s->pol,
                 x->ledger);
    c.fail = fail;
    tt__part_work works[budget - 1];
    tt__ctl_start_members(&c, works, s->pin);
    /* The leader is no member here and holds the scope's slots: marked,
     * its callback's entries on the pool never wait for them. */
    tt__inline_hold mark;
    tt__place_lead_begin(&mark, x->pool);
    tt__scope_run_fn(&c, &view, fn, arg);
    tt__place_lead_end(&mark);
    tt__ctl_end_members(&c);
}

/* Whether this thread's last tt_team_scope on a plain root token took the
 * quick frame (a test hook reads it). */
static TT__TLS_HOT bool last_scope_quick;

int tt__test_last_scope_quick(void) { return last_scope_quick; }

/* A root scope in the quick frame: the caller's own team, the pool's
 * width, the slots and the crew taken (tt__entry_quick_begin). The same
 * run and end as the general path's. */
static int scope_quick(tt__exec *x, tt__entry_quick *q, const tt_team_opts *opts, tt_scope_fn fn,
                       void *arg)
{
    /* A scope wider than the CPUs spins little: its block is made with
     * tt__ctl_pol's throttle (scope.h). */
    scope_settings s = scope_settings_of(x->pool, opts);
    _Atomic int fail = 0;
    bool ran = scope_on_region(x, q->crew, &s, &fail, fn, arg);
    tt__entry_quick_end(q, ran);
    return ran ? atomic_load_explicit(&fail, memory_order_acquire) : TT_REFUSED_UNAVAILABLE;
}

int tt_team_scope_with(tt_exec *ex, const tt_team_opts *opts, tt_scope_fn fn, void *arg)
{
    tt__exec *x = ex ? tt__x(ex) : NULL;
    int rc = tt__exec_check(x);
    if (rc)
        return rc;
    if (!fn)
        return TT__EINVAL("!fn");
    if (x->flags & TT__F_TEAM)
        return team_scope_carried(x, fn, arg);
    if (tt__entry_lean(x))
        return scope_lean(x, fn, arg);
    /* A plain thread's root scope at its pool's width: the quick frame
     * (entry.h) where nothing asks for the general path. */
    last_scope_quick = false;
    if (x->pool && x->budget == x->pool->width) {
        tt__entry_quick q;
        int took = tt__entry_quick_begin(&q, x, x->budget, true, &rc);
        if (took < 0)
            return rc;
        if (took > 0) {
            last_scope_quick = true;
            return scope_quick(x, &q, opts, fn, arg);
        }
    }
    /* Claim first (a parent whose child is inside an entry is busy, whatever
     * members are free; and a destroy from another thread is refused from
     * here on), consume only once the members are there. */
    tt__entry fr;
    rc = tt__entry_begin(&fr, x);
    if (rc)
        return rc;
    tt_pool *pool = x->pool;
    unsigned budget = x->budget;
    if (budget == 1 || !pool || pool->width <= 1)
        return scope_alone(&fr, fn, arg);
    scope_settings s = scope_settings_of(pool, opts);
    tt__placement pl;
    uint32_t slots[budget], gang[budget];
    rc = scope_reserve(x, &pl, s.timeout, slots, gang);
    if (rc == TT_OK)
        rc = tt__entry_commit(&fr);
    if (rc) {
        /* Give back what was taken under the claim, then the claim (the
         * pool may be destroyed as soon as the entry count drops). */
        tt__place_unreserve(pool, &pl);
        return tt__entry_abort(&fr, rc);
    }
    /* A scope wider than the CPUs spins little: every block of `budget`
     * participants is made with tt__ctl_pol's throttle (scope.h). */
    _Atomic int fail = 0;
    bool ran = true;
    if (pl.route == TT__ROUTE_REGION)
        ran = scope_on_region(x, pl.crew, &s, &fail, fn, arg);
    else
        scope_on_members(x, &pl, &s, &fail, fn, arg);
    tt__place_unreserve(pool, &pl);
    /* A team narrower than the scope ran nothing: the refusal consumes
     * nothing. Otherwise the scope's failure code (tt_scope_fail), when it
     * ran and failed. */
    tt__entry_end(&fr, ran);
    return ran ? atomic_load_explicit(&fail, memory_order_acquire) : TT_REFUSED_UNAVAILABLE;
}

int tt_team_scope(tt_exec *ex, tt_scope_fn fn, void *arg)
{
    return tt_team_scope_with(ex, NULL, fn, arg);
}

/* Run `op` on the scope a token with team authority carries: consume the
 * token, lead the control block from this thread for the call, and give the
 * token's slot up while the scope's participants count theirs. */
typedef int (*carried_op)(tt_scope *view, void *ctx);

static int with_carried_scope(tt__exec *x, carried_op op, void *ctx)
{
    tt__ctl *c = x->team;
    tt__entry fr;
    int rc = tt__entry_begin(&fr, x);
    if (rc)
        return rc;
    /* A command already in flight on the block (an entry on a scope token
     * from inside one of its own sections) is refused before the token is
     * consumed: a refusal consumes nothing. `busy` is written only by the
     * block's leader thread, which this is (tt__exec_check confirmed the
     * token's owner). */
    rc = c->hook.busy ? TT_EBUSY : tt__entry_commit(&fr);
    if (rc)
        return tt__entry_abort(&fr, rc);
    pthread_t prev = c->leader;
    c->leader = pthread_self();
    /* This entry's own failure word (a failure inside it is this entry's
     * code, not the enclosing scope's). */
    _Atomic int fail = 0, *prev_fail = c->fail;
    c->fail = &fail;
    tt_scope view = {.c = c, .size = x->budget, .ledger = x->ledger};
    /* The leader of the block holds its slots (a persistent team's leader,
     * a scope's leader through a reborrowed token): marked, unless it is
     * inside a hold of the pool already. (On a member the mark changes
     * nothing: a member never waits for slots.) */
    tt__inline_hold mark;
    tt__place_lead_begin(&mark, c->pool);
    rc = op(&view, ctx);
    tt__place_lead_end(&mark);
    c->fail = prev_fail;
    c->leader = prev;
    tt__entry_end(&fr, true);
    return rc;
}

typedef struct call_ctx {
    tt_scope_fn fn;
    tt_section_fn section;
    tt_job_fn job;
    void *arg;
    unsigned n; /* section width or jobs */
} call_ctx;

static int op_callback(tt_scope *view, void *ctx)
{
    call_ctx *k = ctx;
    tt__scope_run_fn(view->c, view, k->fn, k->arg);
    return tt_scope_failed(view);
}

static int op_section(tt_scope *view, void *ctx)
{
    call_ctx *k = ctx;
    return tt_scope_run_with(view, k->n, k->section, k->arg);
}

static int op_fork(tt_scope *view, void *ctx)
{
    call_ctx *k = ctx;
    return tt_scope_fork(view, k->n, k->job, k->arg);
}

static int team_scope_carried(tt__exec *x, tt_scope_fn fn, void *arg)
{
    call_ctx k = {.fn = fn, .arg = arg};
    return with_carried_scope(x, op_callback, &k);
}

/* ------------------------------------------------------------------------ */
/* Entries on tokens with team authority                                     */
/* ------------------------------------------------------------------------ */

typedef struct team_ranges {
    tt_range_fn body;
    void *arg;
    size_t len;
    unsigned ntasks;
} team_ranges;

/* A range and a broadcast call are shares, one thread to OpenMP, also when
 * their section is the region's team. */
typedef struct range_call {
    team_ranges *r;
    size_t begin, end;
} range_call;

static void range_thunk(void *ctx)
{
    range_call *k = ctx;
    k->r->body(k->r->arg, k->begin, k->end);
}

static void ranges_section(void *arg, tt_section *s)
{
    range_call k = {.r = arg};
    tt__range_of(k.r->len, k.r->ntasks, s->rank, &k.begin, &k.end);
    tt__share_run(s->c->pool, range_thunk, &k);
}

typedef struct team_bcast {
    tt_bcast_fn fn;
    void *arg;
} team_bcast;

typedef struct bcast_call {
    team_bcast *b;
    unsigned rank;
} bcast_call;

static void bcast_thunk(void *ctx)
{
    bcast_call *k = ctx;
    k->b->fn(k->b->arg, k->rank);
}

static void bcast_section(void *arg, tt_section *s)
{
    bcast_call k = {arg, s->rank};
    tt__share_run(s->c->pool, bcast_thunk, &k);
}

/* Run one section of `width` on the token's control block. */
static int team_section(tt__exec *x, unsigned width, tt_section_fn fn, void *arg)
{
    call_ctx k = {.section = fn, .arg = arg, .n = width};
    return with_carried_scope(x, op_section, &k);
}

/* tt_for_ranges_dynamic on a token with team authority: a section whose
 * participants take chunks until none is left, each chunk a share (one
 * thread to OpenMP, what it sets ending with it). */
typedef struct chunk_call {
    tt__chunks *k;
    tt_pool *pool;
    unsigned rank;
} chunk_call;

static void chunk_thunk(void *ctx)
{
    chunk_call *c = ctx;
    tt__share_seq seq;
    tt__share_seq_begin(&seq, c->pool, 2);
    size_t begin, end;
    for (bool first = true; tt__chunks_take(c->k, first, c->rank, &begin, &end);
         first = false) {
        if (!first)
            tt__share_seq_next(&seq);
        c->k->body(c->k->arg, begin, end);
    }
}

static void chunks_section(void *arg, tt_section *s)
{
    chunk_call c = {.k = arg, .pool = s->c->pool, .rank = s->rank};
    tt__share_run(s->c->pool, chunk_thunk, &c);
}

int tt__team_for_chunks(tt__exec *x, tt__chunks *k)
{
    unsigned n = tt__chunks_tasks(k, x->budget);
    atomic_store_explicit(&k->next, n, memory_order_relaxed);
    return team_section(x, n, chunks_section, k);
}

int tt__team_for_ranges(tt__exec *x, size_t len, size_t grain, tt_range_fn body, void *arg)
{
    if (len == 0) {
        /* Nothing to run: the token is used up all the same. */
        tt__entry fr;
        int rc = tt__entry_begin(&fr, x);
        if (rc == TT_OK && (rc = tt__entry_commit(&fr)) != TT_OK)
            return tt__entry_abort(&fr, rc);
        if (rc == TT_OK)
            tt__entry_end(&fr, true);
        return rc;
    }
    unsigned ntasks = tt__range_tasks(len, grain, x->budget);
    team_ranges r = {.body = body, .arg = arg, .len = len, .ntasks = ntasks};
    return team_section(x, ntasks, ranges_section, &r);
}

int tt__team_broadcast(tt__exec *x, tt_bcast_fn fn, void *arg)
{
    team_bcast b = {.fn = fn, .arg = arg};
    return team_section(x, x->budget, bcast_section, &b);
}

int tt__team_fork(tt__exec *x, unsigned jobs, tt_job_fn job, void *arg)
{
    call_ctx k = {.job = job, .arg = arg, .n = jobs};
    return with_carried_scope(x, op_fork, &k);
}
