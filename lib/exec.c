/*
 * exec.c -- the task engine of the entries on pooled tokens: placement of
 * their tasks on members, a root on the caller's own team, and the one path
 * every entry runs through. The entries themselves (tt_fork, tt_for_ranges,
 * tt_for_ranges_dynamic, tt_broadcast, tt_external) are in exec_entries.c.
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
#include "exec.h"

#include <stdlib.h>
#include <string.h>

/* The token protocol (mint, check, claim, consume, leave, derive) is in
 * token.c, the entry frame around it in entry.c, and placement (which
 * members an entry uses, the slots it takes, inline holds, lending) in
 * place.c. */

/* ------------------------------------------------------------------------ */
/* The task engine                                                           */
/* ------------------------------------------------------------------------ */

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

/* The body of a plain split (tt_for_ranges, exec_entries.c): task k runs
 * range k. run_region knows it, for a plain split's own fast path. */
void tt__exec_range_body(entry *e, const task *t)
{
    range_entry *r = (range_entry *)e;
    size_t begin, end;
    tt__range_of(r->len, r->ntasks, t->index, &begin, &end);
    tt__ledger_enter(e->ledger);
    r->body(r->arg, begin, end);
    tt__ledger_leave(e->ledger);
}

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
     * from the leader's core costs tens to hundreds of nanoseconds, as the
     * cores sit close or far apart (bench/core_distance), on the path that
     * every root waits for. And a line the member read is one the leader
     * must take back before its next root's atomics can complete (the run:
     * docs/design/runs/2026-12-07-comment-records.md, "A root's first
     * line"). Other roots read their task and entry through the second
     * line.
     */
    tt__crew *crew;
    tt_range_fn range_fn;
    void *range_arg;
    size_t range_len;
    void *ledger;
    unsigned n;     /* members the root uses: 0..n-1                       */
    unsigned ntasks;
    bool iso;
    uint8_t end; /* enum tt__region_end: who waits for whom (tt__root_end_wait) */
    bool all_at_once; /* a broadcast: its calls need every thread at once */
    /* The general path. */
    entry *e;
    task *tasks;
    int *role;      /* role[k]: the task member k starts, or -1: it serves */
    bool short_team;
    tt__root_end fin; /* the end order's handshake, in a line of its own */
} region_run;

typedef struct region_part {
    region_run *r;
    unsigned k;
} region_part;

/* Participant k's part of a plain split (region_run, range_fn): range k,
 * read from the root's first line only. The same work as
 * tt__exec_range_body on task k. */
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
 * (about a microsecond; backend_omp.c). A root's caller starts its share
 * after its own release call at the dock barrier, so left alone it is the
 * last arriver at the end barrier on nearly every root and makes that call
 * on its path. So participant 0 says when it is done and the others wait
 * for that before the barrier, for at most TT__LEAD_FIRST_POLLS polls
 * (tens of microseconds: a root whose caller still works after that saves
 * a twentieth at most and is better left to libgomp's own wait). The
 * caller then leaves the barrier on the generation store, and a member
 * makes the call; the member's wait replaces the same spin in libgomp's
 * barrier, which libgomp unthrottled spins anyway (the runs:
 * docs/design/runs/2026-12-07-comment-records.md, "The end order of a
 * root").
 *
 * TT__END_LEAD_WAITS: the caller last, but awake. libgomp throttles every
 * wait to 100 polls (a few microseconds) once the process holds more of
 * its threads than there are CPUs, even when most of them sleep: a second
 * thread's team beside the main thread's docked one is enough. Then the
 * caller, done with its share before a member that takes tens of
 * microseconds to wake (futex wake-to-run latency), would sleep in the
 * barrier; the member, woken late in turn, would sleep in libgomp's dock
 * before the next root; and every root would pay two wake-ups, several
 * times the region's own cost (raw `omp parallel` falls into the same
 * chain). So participant 0 first waits for the other participants in a
 * join of the library's (lib/wait.c: spin, yield, sleep; the counters say
 * when it slept), with the pool's team wait policy: OMP_WAIT_POLICY and
 * GOMP_SPINCOUNT through the pool's spin budget, the throttled budget when
 * the pool is wider than the CPUs, and a stop when the waiter sees itself
 * descheduled. A caller that waits long sleeps here instead of in the
 * barrier: the library's budget replaces libgomp's, it does not add to it.
 * Then it says it is done, as in the caller-first order, and the others,
 * which reported to the join, wait for that (TT__LEAD_FIRST_POLLS at most)
 * before they go to the barrier: the caller reaches the barrier first and
 * is let go by the generation store, a member makes the wake call. Going
 * from the join straight to the barrier, the caller would arrive last on
 * nearly every root and pay that call on its path (docs/design/waiting.md,
 * "A root's caller and libgomp's throttle").
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
void tt__root_end_wait(tt__root_end *f, uint8_t end, tt__crew *c, unsigned k)
{
    switch ((enum tt__region_end)end) {
    case TT__END_BARRIER:
        return;
    case TT__END_LEAD_WAITS:
        /* The join first; then the caller-first order's step. */
        if (k > 0)
            tt__join_done(&f->join, c->stats);
        else
            tt__join_wait(&f->join, &c->team_pol, c->stats);
        /* fall through */
    case TT__END_LEAD_FIRST:
        /* Participant 0 says it is done, the others wait for that. */
        if (k == 0)
            tt__lead_first_done(&f->lead_done);
        else
            tt__lead_first_wait(&f->lead_done, c->team_pol.spin_polls, c->stats);
        return;
    case TT__END_JOIN:
        if (k > 0)
            tt__join_done(&f->join, c->stats);
        else
            tt__join_wait(&f->join, &c->team_pol, c->stats);
        return;
    }
}

/* The end order of this thread's last root region (a test hook reads it;
 * one store per root, to a line of this thread's own). */
static TT__TLS_HOT uint8_t last_region_end;

int tt__test_last_region_end(void) { return last_region_end; }

uint8_t tt__root_end_begin(tt__root_end *f, tt_pool *pool, tt__crew *crew, unsigned n,
                           uint64_t *watch_ns)
{
    uint8_t end = TT__END_BARRIER;
    uint64_t now = 0;
    *watch_ns = 0;
    if (!tt__region_new_team(pool->width) /* else the barrier alone */ && n > 1 &&
        crew->team_pol.spin_polls > 0) {
        now = tt__mono_ns();
        end = (uint8_t)tt__region_end_order_at(tt__backend_get()->last_arriver_wakes(), now);
    }
    /* The caller-first step spares the caller a wake call and costs a
     * participant one cache line after its share: where a wake is cheaper
     * than the line, the caller goes to the barrier without it. */
    if (end == TT__END_LEAD_FIRST && !tt__wake_dear())
        end = TT__END_BARRIER;
    else if (end == TT__END_LEAD_WAITS && !tt__wake_dear())
        end = TT__END_JOIN;
    /* The caller's join costs a line each way; it pays where a participant
     * comes late (a wake-up chain), which roots that each take long show.
     * Without a chain seen lately the barrier alone, and the root is
     * watched (tt__root_end_after). */
    if (end == TT__END_JOIN && now >= crew->lead.join_until_ns) {
        end = TT__END_BARRIER;
        *watch_ns = now;
    }
    last_region_end = end;
    if (end == TT__END_LEAD_WAITS || end == TT__END_JOIN)
        tt__join_init(&f->join, n - 1);
    if (end == TT__END_LEAD_WAITS || end == TT__END_LEAD_FIRST)
        atomic_store_explicit(&f->lead_done, 0, memory_order_relaxed);
    return end;
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
    tt__root_end_wait(&r->fin, r->end, c, k);
}

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
    if (e->body == tt__exec_range_body && ntasks == pl->cnt) {
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
    uint64_t watch;
    r.end = tt__root_end_begin(&r.fin, e->pool, e->crew, pl->cnt, &watch);
    tt__backend_get()->region(e->pool->width, region_member, &r);
    tt__root_end_after(e->crew, watch);
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
    if (tt__place_no_wait(x->pool)) {
        /* A thread of a tt_external callee's own region, calling back into
         * the pool whose slots that very tt_external holds while it waits
         * for the callee, or a scope's leader that holds the scope's slots
         * (place.c): it must not wait for them. Take the slots now if
         * they are free; otherwise run the tasks inline on this thread,
         * which the holder's width already counts (a broadcast, which
         * needs its calls at once, is refused: tt__token_broadcast_verdict
         * says so first). */
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
int tt__exec_run_entry(tt__entry *fr, entry *e, run_spec sp)
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
        sp.inline_one(e);
    else if (!spread)
        run_inline(e, &sp, &pl);
    else
        rc = run_spread(x, e, &sp, &pl, slots, gang);
    /* TT_REFUSED_UNAVAILABLE here: a short team refused a broadcast after
     * the consume, and nothing ran. */
    tt__entry_end(fr, rc != TT_REFUSED_UNAVAILABLE);
    return rc;
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
