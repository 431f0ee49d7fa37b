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

/* The token protocol (mint, check, claim, consume, leave, derive) is in
 * token.c, the entry frame around it in entry.c, and placement (which
 * members an entry uses, the slots it takes, inline holds, lending) in
 * place.c. */

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

static void run_body(entry *e, const task *t);

static void task_run(tt__work *w, tt__member *m)
{
    task *t = (task *)w;
    entry *e = t->e;
    /* The member is one thread to OpenMP already (its life's or its
     * participation's isolation), which outlives this task: run_body
     * completes the tasks the body generated before the report below. */
    run_body(e, t);
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
static void plan_tasks(entry *e, task *tasks, unsigned ntasks, unsigned budget, const tt__placement *pl)
{
    /* This runs on every root before its region opens, so on the path that
     * every root's latency adds up: one division for the blocks, and none
     * per task when the gang part is full (cnt == budget, the common case:
     * the map is then the identity). A 64-bit division costs 14 to 46
     * cycles on the development hosts' AMD EPYC; the general form took six
     * for a 2-task root. */
    uint64_t s = 0;
    unsigned base = budget / ntasks, rem = budget % ntasks;
    bool full = pl->cnt == budget;
    for (unsigned j = 0; j < ntasks; j++) {
        size_t sh = base + (j < rem ? 1u : 0u);
        uint32_t lo = full ? (uint32_t)s : ceil_map(s, pl->cnt, budget);
        uint32_t hi = full ? (uint32_t)(s + sh) : ceil_map(s + sh, pl->cnt, budget);
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
static void run_posted(entry *e, task *tasks, unsigned ntasks, const tt__placement *pl)
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

typedef struct range_entry {
    entry e;
    tt_range_fn body;
    void *arg;
    size_t len;
    unsigned ntasks;
} range_entry;

static void range_body(entry *e, const task *t);

/* A root on the caller's own team: region thread k is member k. The task
 * whose first member is k runs on k directly (no mailbox); the other
 * members of a task's gang part serve their mailboxes for the task's nested
 * entries until the task's owner tells them to stop. The region's own end
 * barrier is the join. */
typedef struct region_run {
    /*
     * The first line: everything a region thread reads of the root when
     * the root is a plain split of a tt_for_ranges (range_fn set: region
     * thread k < n runs range k, one member each, nothing nested to serve),
     * written by the leader just before the region. Copies of e->crew, the
     * pool's isolate_shares and the entry's body, argument, length and
     * ledger, so that such a thread reads this one line of the leader's
     * and not also the entry's, its task's and the role array's (other
     * lines of the leader's stack): each line a region thread must fetch
     * from the leader's core costs 50 to 100 ns on the 2-vCPU hosts when
     * their vCPUs sit close, 250 to 300 ns when they sit far apart
     * (bench/core_distance), on the path that every root waits for. And a
     * line the member read is one the leader must take back before its
     * next root's atomics can complete. With the split read from here,
     * 20000 roots of tt_for_ranges on 10^3 doubles (OpenMP-free shares,
     * width 2, vCPUs far apart) took 3.67 to 4.06 us a root (median of 8
     * alternations 3.88) where they took 4.03 to 4.35 (4.10), against 3.40
     * to 3.53 for raw `omp parallel for`. Other roots read their task and
     * entry through the second line.
     */
    tt__crew *crew;
    tt_range_fn range_fn;
    void *range_arg;
    size_t range_len;
    void *ledger;
    unsigned n;     /* members the root uses: 0..n-1                       */
    unsigned ntasks;
    bool iso;
    uint8_t end; /* enum tt__region_end: who waits for whom (region_end) */
    bool all_at_once; /* a broadcast: its calls need every thread at once */
    /* The general path. */
    entry *e;
    task *tasks;
    int *role;      /* role[k]: the task member k starts, or -1: it serves */
    bool short_team;
    /* TT__END_LEAD_WAITS: participants 1..n-1 count down, participant 0
     * waits, then says it is done and the others wait for that.
     * TT__END_LEAD_FIRST: participant 0 says it is done, the others wait
     * for that. In a line of its own, which only these updates write. */
    tt__join join TT__ALIGNED;
    _Atomic uint32_t lead_done;
} region_run;

typedef struct region_part {
    region_run *r;
    unsigned k;
} region_part;

/* Participant k's part of a plain split (region_run, range_fn): range k,
 * read from the root's first line only. The same work as range_body on
 * task k. */
static void range_participate(void *ctx)
{
    region_part *p = ctx;
    const region_run *r = p->r;
    size_t begin, end;
    tt__range_of(r->range_len, r->ntasks, p->k, &begin, &end);
    tt__ledger_enter(r->ledger);
    r->range_fn(r->range_arg, begin, end);
    tt__ledger_leave(r->ledger);
}

/* Participant k's part of a root: its task, or serving its task's nested
 * entries. */
static void region_participate(void *ctx)
{
    region_part *p = ctx;
    region_run *r = p->r;
    tt__crew *c = r->crew;
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
    tt__share_seq seq;
    tt__share_seq_begin(&seq, p->r->e->pool, p->k + p->got < p->r->ntasks ? 2 : 1);
    for (unsigned j = p->k; j < p->r->ntasks; j += p->got) {
        if (j != p->k)
            tt__share_seq_next(&seq);
        task t = p->r->tasks[j];
        t.off = 0;
        t.cnt = 0;
        p->r->e->body(p->r->e, &t);
    }
}

/*
 * The order in which a root's participants reach the runtime's end-of-region
 * barrier (wait.c, tt__region_end_order, decides which order applies).
 *
 * That barrier is the root's join and stays so (it orders every share's
 * writes before the caller returns). But the thread that reaches it last
 * pays for the release, and where the runtime throttles its waits, a
 * thread that reaches it early may sleep there. Both fall on the caller,
 * whose path every root's latency is, unless the library orders the
 * arrivals.
 *
 * TT__END_LEAD_FIRST: the caller first. libgomp's last arriver stores the
 * barrier's new generation, which lets the spinning threads go at once,
 * and then makes a futex_wake system call, whether anyone sleeps or not
 * (1.1 us on the development hosts, a PVM guest; backend_omp.c). A
 * root's caller starts its share after its own release call at the dock
 * barrier, so it was the last arriver at the end barrier on nearly every
 * root: it made 98 % of a root's two wake calls (perf, raw_syscalls, a
 * loop of tt_for_ranges on 10^3 doubles, width 2, OpenMP-free shares;
 * raw `omp parallel` 69 %). Now participant 0 says when it is done and the
 * others wait for that before the barrier, for at most TT__LEAD_FIRST_POLLS
 * polls (about 20 us: a root whose caller still works after that saves 1
 * us in 20 and is better left to libgomp's own wait). The caller then
 * leaves the barrier on the generation store, and a member makes the
 * call; the member's wait replaces the same spin in libgomp's barrier,
 * which libgomp unthrottled spins anyway. The same loop: the caller made
 * 23 % of the calls (0.46 per root: the dock's, on roots where its
 * bookkeeping ended after the member was back in the dock), and a root
 * cost 1.17 to 1.2 of raw `omp parallel for` in place of 1.31 (8
 * alternating processes, medians).
 *
 * TT__END_LEAD_WAITS: the caller last, but awake. libgomp throttles every
 * wait to 100 polls (about 2 us here) once the process holds more of its
 * threads than there are CPUs, even when most of them sleep: a second
 * thread's team beside the main thread's docked one is enough. Then the
 * caller, done with its share before a member that took 10 to 20 us to
 * wake (futex wake-to-run latency of these hosts), slept in the barrier;
 * the member, woken late in turn, slept in libgomp's dock before the next
 * root; and every root paid two wake-ups, about 20 us where the region
 * costs 3 (bench_paths other-thread steady, 2 CPUs: 18 to 20 us per call,
 * p50 22 us; raw `omp parallel` falls into the same chain in some runs).
 * So participant 0 first waits for the other participants in a join of the
 * library's (lib/wait.c: spin, yield, sleep; the counters say when it
 * slept), with the pool's team wait policy: OMP_WAIT_POLICY and
 * GOMP_SPINCOUNT through the pool's spin budget, the throttled budget when
 * the pool is wider than the CPUs, and a stop when the waiter sees itself
 * descheduled. A caller that waits long sleeps here instead of in the
 * barrier: the library's budget replaces libgomp's, it does not add to it.
 * Then it says it is done, as in the caller-first order, and the others,
 * which reported to the join, wait for that (TT__LEAD_FIRST_POLLS at most)
 * before they go to the barrier: the caller reaches the barrier first and
 * is let go by the generation store, a member makes the wake call. When
 * the caller went from the join straight to the barrier it arrived last
 * on nearly every root and paid that call on its path (test_waits: 401
 * calls in 200 roots; the A/B is in docs/design/waiting.md, "A root's
 * caller and libgomp's throttle").
 *
 * TT__END_BARRIER, the barrier alone: on an oversubscribed machine (there
 * libgomp's quick sleep beat the join's spin, and a spin for the caller's
 * sake takes a CPU from someone who may need it), under LLVM libomp
 * unthrottled (its barrier wakes only the threads that sleep), and under a
 * budget of 0 (OMP_WAIT_POLICY=passive: the caller would sleep in a join
 * and the members in the barrier, one more futex wake per root than the
 * barrier alone makes; a member waiting for the caller would spin where
 * the user asked for none).
 */
static void region_end(region_run *r, tt__crew *c, unsigned k)
{
    switch ((enum tt__region_end)r->end) {
    case TT__END_BARRIER:
        return;
    case TT__END_LEAD_WAITS:
        /* The join first; then the caller-first order's step. */
        if (k > 0)
            tt__join_done(&r->join, c->stats);
        else
            tt__join_wait(&r->join, &c->team_pol, c->stats);
        /* fall through */
    case TT__END_LEAD_FIRST:
        /* Participant 0 says it is done, the others wait for that. */
        if (k == 0)
            tt__lead_first_done(&r->lead_done);
        else
            tt__lead_first_wait(&r->lead_done, c->team_pol.spin_polls, c->stats);
        return;
    }
}

static void region_member(void *ctx, unsigned k, unsigned got)
{
    region_run *r = ctx;
    tt__crew *c = r->crew;
    bool iso = r->iso;
    if (got < r->n) {
        if (r->all_at_once) {
            /* The calls must run at once: refused, nothing ran. */
            if (k == 0)
                r->short_team = true;
            return;
        }
        if (k >= r->ntasks)
            return;
        short_part sp = {r, k, got};
        tt__region_participate(c, k, iso, short_participate, &sp);
        return;
    }
    if (k >= r->n)
        return; /* not needed: leave at once */
    /* The whole participation is one thread to OpenMP (one nested region
     * per participant per root, not one per share): the shares, the
     * entries nested in them and the work this member serves for them. */
    region_part part = {r, k};
    tt__region_participate(c, k, iso, r->range_fn ? range_participate : region_participate, &part);
    region_end(r, c, k);
}

/* The end order of this thread's last root region (a test hook reads it;
 * one store per root, to a line of this thread's own). */
static _Thread_local uint8_t last_region_end;

int tt__test_last_region_end(void) { return last_region_end; }

/* Returns false when the team formed was too narrow for calls that must
 * run at once (nothing ran). */
static bool run_region(entry *e, task *tasks, unsigned ntasks, const tt__placement *pl,
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
                    .all_at_once = all_at_once, .crew = e->crew,
                    .iso = e->pool->attr.isolate_shares, .end = TT__END_BARRIER};
    if (e->body == range_body && ntasks == pl->cnt) {
        /* A plain split: task k is range k on region thread k (plan_tasks
         * maps a full gang part one member per task, in order). */
        const range_entry *re = (const range_entry *)e;
        TT__ASSERT(re->ntasks == ntasks);
        for (unsigned k = 0; k < ntasks; k++)
            TT__ASSERT(tasks[k].index == k && tasks[k].off == k && tasks[k].cnt == 1);
        r.range_fn = re->body;
        r.range_arg = re->arg;
        r.range_len = re->len;
        r.ledger = e->ledger;
    }
    unsigned width = e->pool->width;
    if (!tt__region_new_team(width) /* else the barrier alone */ && pl->cnt > 1 &&
        e->crew->team_pol.spin_polls > 0)
        r.end = (uint8_t)tt__region_end_order(tt__backend_get()->last_arriver_wakes());
    last_region_end = r.end;
    if (r.end == TT__END_LEAD_WAITS)
        tt__join_init(&r.join, pl->cnt - 1);
    if (r.end != TT__END_BARRIER)
        atomic_store_explicit(&r.lead_done, 0, memory_order_relaxed);
    tt__backend_get()->region(width, region_member, &r);
    return !r.short_team;
}

/* Run `ntasks` tasks whose shares split `budget` on the members of `pl`,
 * and wait for them. On a region whose team came out short, the tasks run
 * on the threads obtained; calls that must run at once (`all_at_once`, a
 * broadcast) are refused instead (TT_REFUSED_UNAVAILABLE, nothing ran). */
static int run_tasks(entry *e, unsigned ntasks, unsigned budget, tt__placement *pl, bool all_at_once)
{
    task tasks[ntasks];
    plan_tasks(e, tasks, ntasks, budget, pl);
    if (pl->route != TT__ROUTE_REGION) {
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

static void ext_entry_inline(entry *e);

/* The common body of tt_fork, tt_for_ranges, tt_broadcast and tt_external
 * on a token without team authority, inside the entry frame (entry.c):
 * locate the caller, run inline when one task (or no crew) suffices,
 * otherwise reserve `need` members and run `ntasks` tasks splitting
 * `budget`. */
typedef struct run_spec {
    unsigned ntasks, budget, need;
    bool prefix; /* take slots 0..need-1 (broadcast)                    */
    bool one;    /* one task on the first member, the rest held (external) */
} run_spec;

typedef struct inline_run {
    entry *e;
    const run_spec *sp;
    const tt__placement *pl;
} inline_run;

static void inline_tasks(void *ctx)
{
    inline_run *r = ctx;
    tt__share_seq seq;
    tt__share_seq_begin(&seq, r->e->pool, r->sp->ntasks);
    for (unsigned j = 0; j < r->sp->ntasks; j++) {
        if (j)
            tt__share_seq_next(&seq);
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

/* A plain thread's preparation of a spread entry, before the token is
 * consumed, so that a refused start leaves the token usable: its crew (the
 * private crew started, or room for its own team's region and the region
 * crew), room for an external callee's nested team, and, for a thread of a
 * tt_external callee, the slots taken now or never. Tasks that may run one
 * after the other (a fork, ranges) never fail for want of threads: they
 * run on the calling thread alone (*spread cleared, slots conserved); a
 * broadcast or an external, which need their threads, fail with the code
 * (a crew that came out short: TT_REFUSED_UNAVAILABLE). */
static int prepare_plain(tt__exec *x, const run_spec *sp, tt__placement *pl, bool *spread,
                         uint32_t *slots)
{
    bool degrade = !sp->prefix && !sp->one;
    int rc = tt__place_crew(x->pool, pl);
    if (rc != TT_OK && degrade) {
        *spread = false;
        return TT_OK;
    }
    if (rc)
        return rc == TT_ESHORTTEAM ? TT_REFUSED_UNAVAILABLE : rc;
    if (pl->route == TT__ROUTE_REGION && (rc = tt__place_region_crew(x->pool, pl)) != TT_OK)
        return rc;
    if (sp->one && (rc = tt__threads_room(sp->need - 1)) != TT_OK)
        return rc; /* the callee's nested team */
    if (tt__pool_external_callee(x->pool)) {
        /* A thread of a tt_external callee's own region, calling back into
         * the pool whose slots that very tt_external holds while it waits
         * for the callee: it must not wait for them. Take the slots now if
         * they are free; otherwise run the tasks inline on this thread,
         * which the tt_external's width already counts (a broadcast, which
         * needs its calls at once, is refused). */
        int got = sp->prefix ? tt__gang_try_acquire_prefix(x->pool, sp->need, slots)
                             : tt__gang_try_acquire_all(x->pool, sp->need, slots);
        if (got == TT_OK) {
            pl->slots = slots;
            pl->acquired = sp->need;
        } else if (sp->prefix) {
            return TT_REFUSED_UNAVAILABLE;
        } else {
            *spread = false;
        }
    }
    return TT_OK;
}

/* Lazy and inline: one task (or a pool of width 1) runs on the caller with
 * the token's members, and no scheduler call is made; still one thread to
 * OpenMP. */
static void run_inline(entry *e, const run_spec *sp, const tt__placement *pl)
{
    e->gang = pl->gang;
    e->crew = pl->crew;
    inline_run run = {.e = e, .sp = sp, .pl = pl};
    tt__share_run(e->pool, inline_tasks, &run);
}

/* Reserve the members, run the tasks on them and give them back. Inside an
 * inline run of this pool, its slot goes to this entry while it runs
 * (place.c, lending). */
static int run_spread(tt__exec *x, entry *e, const run_spec *sp, tt__placement *pl,
                      uint32_t *slots, uint32_t *gang)
{
    tt__reserve r = {.need = sp->need, .prefix = sp->prefix, .timeout_ns = UINT64_MAX};
    int rc = tt__place_reserve(x->pool, pl, &r, slots, gang);
    if (rc == TT_OK) {
        if (sp->one) {
            tt__placement one = *pl;
            one.cnt = 1;
            rc = run_tasks(e, 1, 1, &one, false);
        } else {
            /* Leaf tasks take one member each: a token's wider gang part
             * is narrowed to what they use. */
            tt__placement use = *pl;
            if (use.cnt > sp->budget)
                use.cnt = sp->budget;
            rc = run_tasks(e, sp->ntasks, sp->budget, &use, sp->prefix);
        }
    }
    tt__place_unreserve(x->pool, pl);
    return rc;
}

/* Run an entry whose frame `fr` was begun (the token claimed): every
 * refusal below aborts it, and the end leaves it, or gives the token back
 * when a short team refused a broadcast after the consume. */
static int run_entry(tt__entry *fr, entry *e, run_spec sp)
{
    tt__exec *x = fr->x;
    tt__placement pl;
    int rc = tt__place_members(x, &pl);
    bool spread = !((sp.ntasks <= 1 && !sp.one) || !x->pool || x->pool->width <= 1);
    uint32_t slots[spread ? sp.need : 1], gang[spread ? sp.need : 1];
    if (rc == TT_OK && spread && pl.self < 0)
        rc = prepare_plain(x, &sp, &pl, &spread, slots);
    if (rc == TT_OK && !spread && !sp.one)
        tt__entry_hold(fr, &pl);
    if (rc == TT_OK)
        rc = tt__entry_commit(fr);
    if (rc) {
        tt__place_unreserve(x->pool, &pl);
        return tt__entry_abort(fr, rc);
    }
    if (!spread && pl.self < 0) {
        /* A region crew taken for a spread that did not happen. */
        tt__place_drop_crew(x->pool, &pl);
        pl.crew = NULL;
    }
    if (!spread && sp.one)
        ext_entry_inline(e);
    else if (!spread)
        run_inline(e, &sp, &pl);
    else
        rc = run_spread(x, e, &sp, &pl, slots, gang);
    /* TT_REFUSED_UNAVAILABLE here: a short team refused a broadcast after
     * the consume, and nothing ran. */
    tt__entry_end(fr, rc != TT_REFUSED_UNAVAILABLE);
    return rc;
}

/* Begin the frame and run the entry (tt_fork, tt_for_ranges, tt_broadcast). */
static int enter_and_run(tt__exec *x, entry *e, run_spec sp)
{
    tt__entry fr;
    int rc = tt__entry_begin(&fr, x);
    if (rc)
        return rc;
    return run_entry(&fr, e, sp);
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
    /* The fork's failure word (tt_fork_fail through a child token): 0, or
     * the first code. Read before each job starts. */
    _Atomic int fail;
    /* With more jobs than tasks: the next job not yet handed out (task t
     * starts with job t). Each task takes the next one when it is free, so
     * a task stuck in a long job leaves the rest to the others (as
     * schedule(dynamic, 1)). */
    _Atomic unsigned next;
} fork_entry;

static bool fork_failed(fork_entry *f)
{
    return atomic_load_explicit(&f->fail, memory_order_acquire) != 0;
}

/* Task t's jobs: task t starts with job t (the caller's task with job 0,
 * as it runs the first share itself), then, with more jobs than tasks,
 * takes the lowest job not yet taken each time it is free (the one task
 * of an inline run takes them in order, without the counter). A failed
 * fork starts no more jobs (a job taken after the failure is dropped).
 * One loop, so that the job's frame is built in one place. */
static void fork_body(entry *e, const task *t)
{
    fork_entry *f = (fork_entry *)e;
    bool one = f->jobs <= f->ntasks, alone = f->ntasks == 1;
    tt__share_seq seq;
    tt__share_seq_begin(&seq, e->pool, one ? 1 : 2);
    for (unsigned i = t->index, first = 1; i < f->jobs && !fork_failed(f); first = 0) {
        if (!first)
            tt__share_seq_next(&seq);
        tt_exec child;
        tt__exec *c = tt__x(&child);
        child_of(c, e, t, f->child_flags, f->team);
        c->fork_fail = &f->fail;
        tt__ledger_enter(e->ledger);
        f->job(f->arg, i, &child);
        tt__ledger_leave(e->ledger);
        atomic_store_explicit(&c->magic, TT__MAGIC_FINISHED, memory_order_relaxed);
        if (one)
            break;
        i = alone ? i + 1 : atomic_fetch_add_explicit(&f->next, 1, memory_order_relaxed);
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
    atomic_init(&f.fail, 0);
    atomic_init(&f.next, ntasks); /* jobs 0..ntasks-1 are the tasks' first */
    rc = enter_and_run(x, &f.e, (run_spec){.ntasks = ntasks, .budget = budget, .need = budget});
    if (rc == TT_OK)
        rc = atomic_load_explicit(&f.fail, memory_order_acquire);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* tt_for_ranges                                                             */
/* ------------------------------------------------------------------------ */

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
    return enter_and_run(x, &r.e, (run_spec){.ntasks = ntasks, .budget = ntasks, .need = ntasks});
}

/* ------------------------------------------------------------------------ */
/* tt_for_ranges_dynamic                                                     */
/* ------------------------------------------------------------------------ */

typedef struct chunk_entry {
    entry e;
    tt__chunks k;
} chunk_entry;

/* A task takes chunks until none is left; each chunk is a share of its
 * own to OpenMP (what one sets ends with it), as a fork's jobs are. */
static void chunk_body(entry *e, const task *t)
{
    chunk_entry *c = (chunk_entry *)e;
    tt__share_seq seq;
    tt__share_seq_begin(&seq, e->pool, 2);
    size_t begin, end;
    for (bool first = true; tt__chunks_take(&c->k, first, t->index, &begin, &end);
         first = false) {
        if (!first)
            tt__share_seq_next(&seq);
        tt__ledger_enter(e->ledger);
        c->k.body(c->k.arg, begin, end);
        tt__ledger_leave(e->ledger);
    }
}

int tt_for_ranges_dynamic(tt_exec *ex, size_t len, size_t grain, tt_range_fn body, void *arg)
{
    tt__exec *x = ex ? tt__x(ex) : NULL;
    int rc = tt__exec_check(x);
    if (rc)
        return rc;
    if (!body || grain == 0)
        return TT_EINVAL;
    chunk_entry c = {
        .e = {.body = len == 0 ? nothing_body : chunk_body, .pool = x->pool,
              .pool_gen = x->pool_gen, .ledger = x->ledger},
    };
    tt__chunks_init(&c.k, len, grain, body, arg);
    if (x->flags & TT__F_TEAM) {
        if (len == 0)
            return tt__team_for_ranges(x, 0, grain, body, arg); /* consumes, runs nothing */
        return tt__team_for_chunks(x, &c.k);
    }
    unsigned ntasks = tt__chunks_tasks(&c.k, x->budget);
    atomic_store_explicit(&c.k.next, ntasks, memory_order_relaxed);
    return enter_and_run(x, &c.e, (run_spec){.ntasks = ntasks, .budget = ntasks, .need = ntasks});
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
    return enter_and_run(x, &b.e, (run_spec){.ntasks = budget, .budget = budget, .need = budget,
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

/* Inline: budget 1, a pool of width 1, or a team token whose leader holds
 * the team's width. Room for the callee's team before anything is
 * consumed. */
static int ext_inline(tt__entry *fr, ext_entry *e, unsigned width)
{
    tt__entry_hold(fr, NULL);
    int rc = width <= 1                         ? TT_OK
             : tt__backend_get()->in_parallel() ? tt__threads_room(width - 1)
                                                : tt__region_room(width);
    if (rc == TT_OK)
        rc = tt__entry_commit(fr);
    if (rc)
        return tt__entry_abort(fr, rc);
    ext_call(e, width, false);
    tt__entry_end(fr, true);
    return TT_OK;
}

/* A full-width root on a plain thread: the callee runs on this very thread
 * with nthreads-var = width, so its region is this thread's own top-level
 * region on the same hot team. No region of ours, no nested region, no
 * thread created. */
static int ext_top(tt__entry *fr, ext_entry *e, tt__placement *pl, unsigned width)
{
    tt_pool *pool = fr->x->pool;
    int rc = tt__region_room(width);
    if (rc == TT_OK)
        rc = tt__entry_commit(fr);
    if (rc)
        return tt__entry_abort(fr, rc);
    uint32_t slots[width];
    tt__reserve r = {.need = width, .timeout_ns = UINT64_MAX};
    tt__place_reserve(pool, pl, &r, slots, slots);
    ext_call(e, width, true);
    tt__place_unreserve(pool, pl);
    tt__entry_end(fr, true);
    return TT_OK;
}

/* A member's nested root: the callee gets the members it holds (room for
 * its nested team before anything is consumed). */
static int ext_member_root(tt__entry *fr, ext_entry *e, tt__placement *pl, unsigned width)
{
    tt_pool *pool = fr->x->pool;
    int rc = tt__threads_room(width - 1);
    if (rc == TT_OK)
        rc = tt__entry_commit(fr);
    if (rc)
        return tt__entry_abort(fr, rc);
    uint32_t slots[width], gang[width];
    tt__reserve r = {.need = width, .timeout_ns = UINT64_MAX};
    tt__place_reserve(pool, pl, &r, slots, gang);
    e->width = pl->cnt;
    ext_call(e, e->width, true);
    tt__place_unreserve(pool, pl);
    tt__entry_end(fr, true);
    return TT_OK;
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
    tt__entry fr;
    rc = tt__entry_begin(&fr, x);
    if (rc)
        return rc;
    if (width == 1 || !x->pool || x->pool->width <= 1 || (x->flags & TT__F_TEAM))
        return ext_inline(&fr, &e, width);
    tt__placement pl;
    rc = tt__place_members(x, &pl);
    if (rc)
        return tt__entry_abort(&fr, rc);
    /* A thread that runs inside a callee of this pool's own external (the
     * caller of a full-width external calling back) is no plain thread
     * here: the slots are held, it takes the general path, which never
     * waits for them. */
    if (pl.self < 0 && width == x->pool->width && !tt__pool_uses_private_crew(x->pool) &&
        !tt__pool_external_callee(x->pool))
        return ext_top(&fr, &e, &pl, width);
    if (pl.self >= 0 && !pl.gang)
        return ext_member_root(&fr, &e, &pl, width);
    if (pl.gang)
        e.width = pl.cnt < width ? pl.cnt : width;
    return run_entry(&fr, &e.e,
                     (run_spec){.ntasks = 1, .budget = width, .need = width, .one = true});
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
