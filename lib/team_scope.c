/*
 * team_scope.c -- team scopes: control blocks, sections, splits, the
 * members' loop, tt_team_scope and the entries on tokens with team
 * authority. Persistent teams (team.c) are a control block held between
 * leaders, and use the block's machinery from here through scope.h.
 *
 * A scope is a control block (tt__ctl) shared by a leader thread
 * (participant 0) and size - 1 reserved members (participants 1..size-1).
 * Each member runs participate(): it waits for the control block's
 * generation word to move, reads the command the leader wrote before it
 * moved, runs it, and reports to the command's join. Commands are a
 * section (the first `width` participants run a function, with a barrier
 * of their own), a split (the participants break into groups, each with a
 * sub-control block on the leader's stack, and every group runs its own
 * commands concurrently), end (the members leave; they return to the
 * pool, or in a persistent team only at tt_team_into_pool) and leave (the
 * members leave without reporting: at the end of a root scope on the
 * caller's team in the caller-first order, where the region's end barrier
 * is the join, see scope_participate; and at the end of a split's group,
 * where the split's own join is, see lead_group).
 *
 * The leader writes a command and then bumps the generation with a seq_cst
 * store (tt__event_post): that store releases the command to every member's
 * acquire load of the word. A member touches the control block last in its
 * tt__join_done, so the block may live on the leader's stack.
 *
 * Tokens with team authority (TT__F_TEAM) carry a control block in their
 * `team` field and a budget no larger than its size; their entries run as
 * commands on that block instead of acquiring members.
 */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct tt_scope {
    tt__ctl *c;
    unsigned size; /* may be less than c->size (a narrower token) */
    void *ledger;
};

struct tt_section {
    tt__ctl *c;
    unsigned rank, size;
    void *ledger;
};

static void participate(tt__ctl *c, unsigned rank, uint32_t seen);

enum { CMD_SECTION = 1, CMD_SPLIT, CMD_END, CMD_LEAVE };

typedef struct split_cmd {
    unsigned jobs;      /* parts (split) or jobs (fork)                  */
    unsigned groups;    /* min(jobs, size)                               */
    unsigned size;      /* participants split (a view may be narrower)   */
    tt_split_fn split;  /* one of these two                              */
    tt_job_fn job;
    void *arg;
    tt__ctl *subs;      /* groups control blocks                         */
    uint32_t child_flags;
    _Atomic int *fail;  /* the scope's failure word (a fork: no job starts
                         * after a failure; tt_fork_fail stores here)    */
    _Atomic unsigned next; /* a fork with more jobs than groups: the next
                            * job not yet handed out                     */
} split_cmd;

/* ------------------------------------------------------------------------ */
/* Control blocks                                                            */
/* ------------------------------------------------------------------------ */

void tt__ctl_init(tt__ctl *c, tt_pool *pool, uint32_t pool_gen, tt__crew *crew, unsigned size,
                  const uint32_t *members, const tt__wait_policy *pol, void *ledger)
{
    memset(c, 0, sizeof *c);
    c->pool = pool;
    c->crew = crew;
    c->size = size;
    c->members = members;
    c->pol = *pol;
    /* A scope with more awake participants than CPUs spins little, as
     * libgomp does when it manages more threads than CPUs. */
    if (size > tt__cpu_count_cached())
        c->pol.throttled = true;
    c->ledger = ledger;
    c->leader = pthread_self();
    c->pool_gen = pool_gen;
    atomic_store_explicit(&c->lead_cpu, -1, memory_order_relaxed);
}

static tt__wait_stats *ctl_stats(tt__ctl *c) { return c->crew ? c->crew->stats : NULL; }

/* ------------------------------------------------------------------------ */
/* Sharing a CPU                                                             */
/* ------------------------------------------------------------------------ */
/*
 * A scope's participants hand work back and forth many times a millisecond,
 * so they are fast only while each has a CPU of its own. On a loaded
 * machine the scheduler may put the leader and a member on one CPU: a
 * thread woken from a futex goes to its waker's CPU or its own last one
 * when no CPU is idle, and two threads that sleep and wake each other look
 * light to the load balancer, which then leaves them together. There,
 * every handoff waits for the scheduler: a spinning waiter holds the CPU
 * that the thread it waits for needs, and when it sleeps the CPU may go to
 * the load first. Measured on host vm (2 vCPUs, beside two processes busy
 * 50 % of every 10 ms and an OpenMP co-tenant): per run, a held scope's
 * threads either stayed apart (0.5 us an empty section) or sat on one CPU
 * for the whole run (`ps`: both threads on CPU 0, 50 to 70 us a section,
 * a join sleep and a member park in almost every section), and once
 * together they never parted. libgomp's threads never sleep between
 * regions that close together and were not seen together.
 *
 * So the block tracks where its threads run, through sched_getcpu() (with
 * glibc's rseq a load of a thread-local word, 2 ns on host vm; a vDSO call
 * where there is no rseq):
 *  - the leader writes its CPU beside each command it issues (lead_cpu);
 *  - a member that starts a command on that CPU sets its bit in `crowded`,
 *    and clears it when it starts one elsewhere;
 *  - a wait for a thread on the waiter's own CPU does not spin: the
 *    leader's join and the section barrier while any bit is set, a member's
 *    wait for the next command while it runs on lead_cpu. It yields (which
 *    runs the other thread at once) and then sleeps (tt__wait_policy's
 *    `crowded`; under a spin budget of 0 it sleeps at once, as every wait
 *    then does);
 *  - a member that starts a second command in a row on its leader's CPU
 *    (of this block, or its last one in another: member_last_same)
 *    moves itself off that CPU: it takes the CPU out of its affinity mask
 *    and puts the mask back at once, and the kernel migrates it in between
 *    (a nudge; 20 to 250 us on host vm, paid once, where staying cost 50 us
 *    a section). Its mask after is the one it had: a thread that OpenMP or
 *    the user bound to one CPU is never moved, one bound to a place of
 *    several CPUs stays in it. No nudge where the scope has more
 *    participants than CPUs (there threads must share), under likwid-pin
 *    (tt__pin_allowed), or more often than once per TT__MOVE_EVERY_NS a
 *    block and a thread (a scheduler that keeps pulling the threads
 *    together costs a nudge per millisecond at most). The streak is the
 *    thread's too: a root scope of one section is a block of its own, and
 *    a loop of such scopes whose threads the scheduler had put together
 *    never moved; libgomp's own spins (its end barrier, its dock) then took
 *    the shared CPU for a tick at a time (`perf sched timehist`: both
 *    threads on CPU 0, running 4 ms each in turn), and 10 % of the calls
 *    took 12 ms under load (waiting.md).
 * A stale hint costs one wait its spin (a wake-up instead) or one
 * needless nudge; nothing is published through these words, so all their
 * accesses are relaxed.
 */
/* The block's policy for a wait that is crowded: no spin. */
static const tt__wait_policy *crowded_pol(const tt__ctl *c, tt__wait_policy *tmp,
                                          tt__wait_stats *st)
{
    *tmp = c->pol;
    tmp->crowded = true;
    if (st)
        atomic_fetch_add_explicit(&st->crowded_waits, 1, memory_order_relaxed);
    return tmp;
}

/* The policy of the leader's join and of a section barrier. */
static const tt__wait_policy *team_pol(tt__ctl *c, tt__wait_policy *tmp, tt__wait_stats *st)
{
    if (atomic_load_explicit(&c->crowded, memory_order_relaxed) != 0)
        return crowded_pol(c, tmp, st);
    return &c->pol;
}

/* Test hook: when >= 0, the CPU every thread of a scope is taken to run
 * on (so that every member shares its leader's); -1 (sched_getcpu). */
static _Atomic int cpu_hook = -1;

int tt__test_scope_cpu_hook(int cpu)
{
    return atomic_exchange_explicit(&cpu_hook, cpu, memory_order_relaxed);
}

/* Test hook: whether the scope's waits spin only the throttled budget. */
bool tt__test_scope_throttled(const tt_scope *scope) { return scope->c->pol.throttled; }

static int scope_cpu(void)
{
    int h = atomic_load_explicit(&cpu_hook, memory_order_relaxed);
    return h >= 0 ? h : sched_getcpu();
}

/* Where the calling thread started its last command as a member, across
 * blocks: a root scope of one section is a block of its own, so a member
 * that sits on its leader's CPU scope after scope never started two
 * commands of one block there. Thread-local, as is the rate limit of the
 * thread's moves (at most one per TT__MOVE_EVERY_NS, on top of the
 * block's). */
static _Thread_local bool member_last_same;
static _Thread_local _Atomic uint64_t member_move_after_ns;

/* Move the calling member off `cpu` (see above); the caller's mask is the
 * same after. */
static void nudge_off(tt__ctl *c, int cpu, tt__wait_stats *st)
{
    if (c->pol.throttled || !tt__cpu_move_due(&member_move_after_ns, TT__MOVE_EVERY_NS) ||
        !tt__cpu_move_due(&c->nudge_after_ns, TT__MOVE_EVERY_NS))
        return;
    if (tt__cpu_move_off(cpu) && st)
        atomic_fetch_add_explicit(&st->nudges, 1, memory_order_relaxed);
}

/* Participant `rank` >= 1 starts a command of c: note whether it runs on
 * the CPU the command was issued from, and move off it the second time in
 * a row (this block's command or the thread's last one in another). */
static void note_cpu(tt__ctl *c, unsigned rank, tt__wait_stats *st)
{
    int lead = atomic_load_explicit(&c->lead_cpu, memory_order_relaxed);
    int cpu = scope_cpu();
    uint64_t bit = 1ull << (rank < 63 ? rank : 63);
    bool same = cpu >= 0 && cpu == lead;
    bool was = (atomic_load_explicit(&c->crowded, memory_order_relaxed) & bit) != 0;
    bool streak = same && (was || member_last_same);
    member_last_same = same;
    if (same && !was)
        atomic_fetch_or_explicit(&c->crowded, bit, memory_order_relaxed);
    else if (!same && was)
        atomic_fetch_and_explicit(&c->crowded, ~bit, memory_order_relaxed);
    if (streak)
        nudge_off(c, cpu, st);
}

/* Whether the calling member runs on the CPU the last command came from. */
static bool on_lead_cpu(tt__ctl *c)
{
    int lead = atomic_load_explicit(&c->lead_cpu, memory_order_relaxed);
    return lead >= 0 && scope_cpu() == lead;
}

/* Issue a command to participants 1..n-1 that takes part, and set up the
 * join for `pending` of them. */
static void issue(tt__ctl *c, int kind, uint32_t pending)
{
    /* One command at a time: the previous command's join is complete (the
     * leader waited for it), and no more participants report than the
     * block has beside its leader. */
    TT__INVARIANT((atomic_load_explicit(&c->join.word, memory_order_relaxed) &
                   ~TT__JOIN_SLEEPING) == 0,
                  "scope: a command issued while the last one's join is pending");
    TT__INVARIANT(pending < c->size && (kind == CMD_END || c->width <= c->size),
                  "scope: a command for more participants than the block has");
    tt__join_init(&c->join, pending);
    uint32_t g = atomic_load_explicit(&c->gen.word, memory_order_relaxed) + 1;
    /* Relaxed: the seq_cst store of the generation in tt__event_post
     * releases the header and the body to the participants' acquire. */
    atomic_store_explicit(&c->cmd,
                          (uint64_t)g << 32 | (uint64_t)kind << 24 | (c->width & 0xffffffu),
                          memory_order_relaxed);
    atomic_store_explicit(&c->lead_cpu, scope_cpu(), memory_order_relaxed);
    /* Sleeping members: the join that follows waits at least their wake-up,
     * so the oversubscription sample its spin would take is taken now. */
    if (tt__event_post(&c->gen, g, ctl_stats(c)))
        tt__wait_woke(&c->pol);
}

static void wait_join(tt__ctl *c)
{
    tt__wait_stats *st = ctl_stats(c);
    tt__wait_policy tmp;
    tt__join_wait(&c->join, team_pol(c, &tmp, st), st);
}

/* ------------------------------------------------------------------------ */
/* Sections                                                                  */
/* ------------------------------------------------------------------------ */

/*
 * What OpenMP sees in a section (c-api: "A share is one thread to OpenMP").
 * A section that runs on every thread of the region it executes in (a root
 * scope on the caller's team at the pool's width, the section at the
 * scope's full size) *is* that region's team: its orphaned `omp for` is
 * shared among the section's participants and omp_get_thread_num() is the
 * section rank, as SPMD code written for `omp parallel` expects. Every
 * other section (narrower than the block, a split part's, any section on a
 * private crew) is one thread to OpenMP per participant.
 */
typedef struct section_call {
    tt__ctl *c;
    tt_section *s;
} section_call;

static void section_thunk(void *ctx)
{
    section_call *k = ctx;
    k->c->fn(k->c->arg, k->s);
}

static void run_section(tt__ctl *c, unsigned rank)
{
    tt_section s = {.c = c, .rank = rank, .size = c->width, .ledger = c->ledger};
    tt__ledger_enter(c->ledger);
    section_call k = {c, &s};
    if (c->region_team && c->width == c->size) {
        /* The region's team: the tasks it generates bind to the root's
         * region, whose end is after this section's join; they complete
         * here, as at the end of the `omp parallel` this section stands
         * for (unless the owner declared the pool's user code
         * OpenMP-free). */
        if (tt__pool_isolates(c->pool))
            tt__backend_get()->complete(section_thunk, &k);
        else
            section_thunk(&k);
    } else {
        tt__share_run(c->pool, section_thunk, &k);
    }
    tt__ledger_leave(c->ledger);
}

/* A scope's callback on its leader: at the region's level when the block is
 * the region's whole team (its full-size sections must be that team to
 * OpenMP, and the leader runs their rank 0; the callback's own code then
 * runs as code in `omp master` would), otherwise one thread to OpenMP. */
typedef struct scope_call {
    tt_scope_fn fn;
    void *arg;
    tt_scope *view;
} scope_call;

static void scope_thunk(void *ctx)
{
    scope_call *k = ctx;
    k->fn(k->arg, k->view);
}

static void run_scope_fn(tt__ctl *c, tt_scope *view, tt_scope_fn fn, void *arg)
{
    tt__ledger_enter(view->ledger);
    scope_call k = {fn, arg, view};
    if (c->region_team && view->size == c->size)
        scope_thunk(&k);
    else
        tt__share_run(c->pool, scope_thunk, &k);
    tt__ledger_leave(view->ledger);
}

unsigned tt_section_rank(const tt_section *s) { return s ? s->rank : 0; }
unsigned tt_section_size(const tt_section *s) { return s ? s->size : 0; }

/* Errors out of callbacks: the first nonzero code stored wins. Returns
 * whether this call stored it. */
static bool fail_set(_Atomic int *fail, int code)
{
    int none = 0;
    return atomic_compare_exchange_strong_explicit(fail, &none, code, memory_order_acq_rel,
                                                   memory_order_acquire);
}

static int fail_get(const tt__ctl *c)
{
    return c->fail ? atomic_load_explicit(c->fail, memory_order_acquire) : 0;
}

/*
 * The section barrier and failures. The release generation bar_gen moves by
 * BAR_STEP per completed barrier, and its two low bits say why a waiter was
 * let go: BAR_FAILED, set (one add, by the failing participant) when a
 * participant of this very section fails it (tt_section_fail), which
 * releases the participants waiting for one that left the section; and
 * BAR_DONE_FAILED, stored with the completion by the last arriver of a
 * barrier that finds the scope failed elsewhere (its leader, another group
 * of a split: those never leave this section's participants waiting), so
 * that all of its participants return the code alike. The failure itself
 * is bar_fail, stored before either move of the generation.
 *
 * A participant reads the generation, then bar_fail: a failure it missed
 * moves the generation after its read, so a participant that arrives and
 * waits is woken either by the last arrival or by that move. It returns
 * TT_OK when the barrier completed (every participant arrived) without a
 * failure at completion, the code otherwise; and once bar_fail is set,
 * every later barrier of the section returns it without arriving, so the
 * participants that got the code may leave the section. A barrier cannot
 * both complete and be released by a failure: the failing participant
 * never arrives at it.
 */
enum { BAR_FAILED = 1u, BAR_DONE_FAILED = 2u, BAR_STEP = 4u };

int tt_section_fail(tt_section *s, int code)
{
    if (!s || !s->c || !s->c->fail || code == 0)
        return TT_EINVAL;
    (void)fail_set(s->c->fail, code);
    tt__ctl *c = s->c;
    int none = 0;
    if (s->size > 1 &&
        atomic_compare_exchange_strong_explicit(&c->bar_fail, &none, fail_get(c),
                                                memory_order_acq_rel, memory_order_acquire)) {
        /* The first failure of this section: the generation's low bits are
         * clear here (a barrier completed with BAR_DONE_FAILED set
         * bar_fail first), so the add sets BAR_FAILED. */
        tt__event_bump(&c->bar_gen, ctl_stats(c));
    }
    return TT_OK;
}

int tt_section_barrier(tt_section *s)
{
    if (!s || !s->c)
        return TT_EINVAL;
    tt__ctl *c = s->c;
    if (s->size <= 1)
        return fail_get(c);
    /* Read the release generation before arriving: once the last arrives,
     * it moves, and a waiter must compare against the value from before. */
    uint32_t g = atomic_load_explicit(&c->bar_gen.word, memory_order_acquire);
    int code = atomic_load_explicit(&c->bar_fail, memory_order_acquire);
    if (code != 0)
        return code; /* a failed section waits for nobody */
    TT__ASSERT((g & (BAR_STEP - 1)) == 0);
    uint32_t arrived = atomic_fetch_add_explicit(&c->bar_count, 1, memory_order_acq_rel) + 1;
    if (arrived == s->size) {
        /* Last: reset for the next barrier of this section before the
         * release, so that nobody can arrive at the next one early. A
         * failure of the scope from elsewhere is told to every participant
         * of this barrier alike. */
        atomic_store_explicit(&c->bar_count, 0, memory_order_relaxed);
        uint32_t next = g + BAR_STEP;
        if ((code = fail_get(c)) != 0) {
            int none = 0;
            if (!atomic_compare_exchange_strong_explicit(&c->bar_fail, &none, code,
                                                         memory_order_acq_rel,
                                                         memory_order_acquire))
                code = none;
            next |= BAR_DONE_FAILED;
        }
        tt__event_post(&c->bar_gen, next, ctl_stats(c));
        return code;
    }
    tt__wait_stats *st = ctl_stats(c);
    tt__wait_policy tmp;
    uint32_t v = tt__event_wait_ne(&c->bar_gen, g, team_pol(c, &tmp, st), st,
                                   st ? &st->barrier_sleeps : NULL);
    if ((v & ~(uint32_t)(BAR_STEP - 1)) != g && !(v & BAR_DONE_FAILED))
        return TT_OK; /* completed (a failure after it is the next one's) */
    /* Released by a failure (this barrier's arrivals stay in bar_count: no
     * barrier of the section counts again, and the next section resets
     * it), or completed after the scope failed. */
    return atomic_load_explicit(&c->bar_fail, memory_order_acquire);
}

static int scope_leader_check(const tt_scope *scope)
{
    if (!scope || !scope->c)
        return TT_EINVAL;
    if (!pthread_equal(scope->c->leader, pthread_self()))
        return TT_EWRONGTHREAD;
    if (scope->c->hook.busy)
        return TT_EBUSY;
    return TT_OK;
}

unsigned tt_scope_size(const tt_scope *scope) { return scope ? scope->size : 0; }

int tt_scope_fail(tt_scope *scope, int code)
{
    if (!scope || !scope->c || !scope->c->fail || code == 0)
        return TT_EINVAL;
    if (!pthread_equal(scope->c->leader, pthread_self()))
        return TT_EWRONGTHREAD;
    (void)fail_set(scope->c->fail, code);
    return TT_OK;
}

int tt_scope_failed(const tt_scope *scope)
{
    return scope && scope->c ? fail_get(scope->c) : 0;
}

int tt_scope_run_with(tt_scope *scope, unsigned width, tt_section_fn section, void *arg)
{
    int rc = scope_leader_check(scope);
    if (rc)
        return rc;
    if (!section || width == 0 || width > scope->size)
        return TT_EINVAL;
    tt__ctl *c = scope->c;
    if ((rc = fail_get(c)) != 0)
        return rc; /* a failed scope runs no more sections */
    c->hook.busy = true;
    c->fn = section;
    c->arg = arg;
    c->width = width;
    /* The barrier starts clean: no failure, and a generation whose low
     * bits (why the last section's waiters were let go) are clear. Nobody
     * waits on it between sections; the command's post publishes both. */
    atomic_store_explicit(&c->bar_fail, 0, memory_order_relaxed);
    uint32_t bg = atomic_load_explicit(&c->bar_gen.word, memory_order_relaxed);
    if (bg & (BAR_STEP - 1))
        atomic_store_explicit(&c->bar_gen.word, (bg | (BAR_STEP - 1)) + 1, memory_order_relaxed);
    if (width == 1) {
        /* A section of one runs on the leader; nobody else is woken. */
        run_section(c, 0);
    } else {
        atomic_store_explicit(&c->bar_count, 0, memory_order_relaxed);
        issue(c, CMD_SECTION, width - 1);
        run_section(c, 0);
        wait_join(c);
    }
    c->hook.busy = false;
    return fail_get(c);
}

int tt_scope_run(tt_scope *scope, tt_section_fn section, void *arg)
{
    return tt_scope_run_with(scope, scope ? scope->size : 0, section, arg);
}

/* ------------------------------------------------------------------------ */
/* Splits and scope forks                                                    */
/* ------------------------------------------------------------------------ */

/* The group leader's side: run the group's parts, then end the sub-block. */
static void fork_group(tt__ctl *sub, split_cmd *sc, unsigned g);

static void lead_group(tt__ctl *sub, split_cmd *sc, unsigned g)
{
    sub->leader = pthread_self();
    if (!sc->split) {
        fork_group(sub, sc, g);
        return;
    }
    size_t first, n;
    tt__block(sc->jobs, sc->groups, g, &first, &n);
    tt__share_seq seq;
    tt__share_seq_begin(&seq, sub->pool, n);
    for (size_t i = first; i < first + n; i++) {
        if (i != first)
            tt__share_seq_next(&seq);
        {
            /* Like a scope's callback, a part is the root's user code on
             * this thread (its sections on this thread count once). */
            tt_scope view = {.c = sub, .size = sub->size, .ledger = sub->ledger};
            tt__ledger_enter(sub->ledger);
            sc->split(sc->arg, (unsigned)i, &view);
            tt__ledger_leave(sub->ledger);
        }
    }
    /* The group's members leave without reporting: each of them reports to
     * the split's own join on the parent block right after its last read
     * of this one, and the sub-block lives in split_common's frame until
     * that join is complete. A join here would be one more handoff from
     * the members' cores to this one, in series with that join. */
    if (sub->size > 1)
        issue(sub, CMD_LEAVE, 0);
}

/* Job i of a scope fork on its group's leader, with a child token that has
 * team authority over the group. */
static void fork_group_job(tt__ctl *sub, split_cmd *sc, unsigned i)
{
    tt_exec child;
    tt__exec *x = tt__x(&child);
    tt__token_spec spec = {.pool = sub->pool, .pool_gen = sub->pool_gen,
                           .budget = sub->size, .flags = sc->child_flags,
                           .ledger = sub->ledger, .team = sub,
                           .owner = pthread_self(), .fork_fail = sc->fail};
    tt__token_mint(x, &spec);
    tt__ledger_enter(sub->ledger);
    sc->job(sc->arg, i, &child);
    tt__ledger_leave(sub->ledger);
    atomic_store_explicit(&x->magic, TT__MAGIC_FINISHED, memory_order_relaxed);
}

/* A group of a scope fork: group g starts with job g, then, with more jobs
 * than groups, takes the next job not yet handed out each time it is free
 * (as tt_fork's tasks do). No job starts once the scope failed. */
static void fork_group(tt__ctl *sub, split_cmd *sc, unsigned g)
{
    tt__share_seq seq;
    tt__share_seq_begin(&seq, sub->pool, sc->jobs <= sc->groups ? 1 : 2);
    for (unsigned i = g, first = 1;
         i < sc->jobs && atomic_load_explicit(sc->fail, memory_order_acquire) == 0; first = 0) {
        if (!first)
            tt__share_seq_next(&seq);
        fork_group_job(sub, sc, i);
        if (sc->jobs <= sc->groups)
            break;
        i = atomic_fetch_add_explicit(&sc->next, 1, memory_order_relaxed);
    }
    if (sub->size > 1)
        issue(sub, CMD_LEAVE, 0);
}

/* Participant p's side of a split of c. A split's groups are never their
 * region's team: each participant is one thread to OpenMP for the whole
 * split (one isolation, which the group's parts and sections find in
 * place). */
typedef struct split_call {
    tt__ctl *c;
    unsigned p;
} split_call;

static void split_thunk(void *ctx)
{
    split_call *k = ctx;
    split_cmd *sc = k->c->split;
    size_t g, r;
    tt__block_find(sc->size, sc->groups, k->p, &g, &r);
    if (r == 0)
        lead_group(&sc->subs[g], sc, (unsigned)g);
    else
        participate(&sc->subs[g], (unsigned)r, 0);
}

static void split_part(tt__ctl *c, unsigned p)
{
    split_call k = {c, p};
    tt__share_run(c->pool, split_thunk, &k);
}

static int split_common(tt_scope *scope, unsigned jobs, tt_split_fn split, tt_job_fn job,
                        void *arg, uint32_t child_flags)
{
    int rc = scope_leader_check(scope);
    if (rc)
        return rc;
    if (jobs == 0 || (!split && !job))
        return TT_EINVAL;
    tt__ctl *c = scope->c;
    if ((rc = fail_get(c)) != 0)
        return rc;
    unsigned size = scope->size;
    unsigned groups = jobs < size ? jobs : size;
    tt__ctl subs[groups];
    for (unsigned g = 0; g < groups; g++) {
        size_t first, n;
        tt__block(size, groups, g, &first, &n);
        /* Participant q >= 1 of group g is participant first + q of c. */
        tt__ctl_init(&subs[g], c->pool, c->pool_gen, c->crew, (unsigned)n,
                     c->members ? c->members + first : NULL, &c->pol, c->ledger);
        subs[g].pol.throttled = c->pol.throttled;
        subs[g].leader = pthread_self(); /* reset by the group's leader */
        subs[g].fail = c->fail;          /* a part's failure fails the scope */
    }
    split_cmd sc = {.jobs = jobs, .groups = groups, .size = size, .split = split, .job = job,
                    .arg = arg, .subs = subs, .child_flags = child_flags, .fail = c->fail};
    _Atomic int no_fail = 0; /* every scope has a word; never read otherwise */
    if (!sc.fail)
        sc.fail = &no_fail;
    atomic_init(&sc.next, groups); /* jobs 0..groups-1 are the groups' first */
    c->hook.busy = true;
    c->split = &sc;
    if (size > 1 && groups > 0) {
        /* A narrower view (size < c->size) leaves the rest idle: only
         * participants below size take part. */
        c->width = size;
        issue(c, CMD_SPLIT, size - 1);
        split_part(c, 0);
        wait_join(c);
    } else {
        split_part(c, 0);
    }
    c->split = NULL;
    c->hook.busy = false;
    return fail_get(c);
}

int tt_scope_split(tt_scope *scope, unsigned parts, tt_split_fn fn, void *arg)
{
    if (!fn)
        return TT_EINVAL;
    return split_common(scope, parts, fn, NULL, arg, 0);
}

int tt_scope_fork(tt_scope *scope, unsigned jobs, tt_job_fn job, void *arg)
{
    if (!job)
        return TT_EINVAL;
    return split_common(scope, jobs, NULL, job, arg,
                        TT__F_TEAM | TT__F_FORK_CHILD | TT__F_IN_TASK);
}

tt_exec *tt_scope_reborrow(tt_scope *scope, tt_exec *child)
{
    if (!child)
        return NULL;
    tt__exec *x = tt__x(child);
    if (!scope || !scope->c || !pthread_equal(scope->c->leader, pthread_self())) {
        tt__token_mint_invalid(x);
        return child;
    }
    tt__token_spec spec = {.pool = scope->c->pool, .pool_gen = scope->c->pool_gen,
                           .budget = scope->size, .flags = TT__F_TEAM | TT__F_OWNED,
                           .ledger = scope->ledger, .team = scope->c, .owner = pthread_self()};
    tt__token_mint(x, &spec);
    return child;
}

/* ------------------------------------------------------------------------ */
/* Members' loop                                                             */
/* ------------------------------------------------------------------------ */

static int cmd_kind(uint64_t cmd) { return (int)(cmd >> 24 & 0xffu); }
static unsigned cmd_width(uint64_t cmd) { return (unsigned)(cmd & 0xffffffu); }

/* Wait for the next command of c after generation `*seen`. */
static uint64_t next_cmd(tt__ctl *c, uint32_t *seen, tt__wait_stats *st)
{
    tt__wait_policy tmp;
    const tt__wait_policy *pol = on_lead_cpu(c) ? crowded_pol(c, &tmp, st) : &c->pol;
    for (;;) {
        /* A reserved member that sleeps here stays reserved: only an end
         * command releases it. */
        *seen = tt__event_wait_ne(&c->gen, *seen, pol, st, st ? &st->member_parks : NULL);
        uint64_t cmd = atomic_load_explicit(&c->cmd, memory_order_acquire);
        if ((uint32_t)(cmd >> 32) == *seen)
            return cmd;
        /* a newer command is being issued: not one of ours */
    }
}

/* Run one command as participant `rank`; false when it ends the
 * participation (end, leave). */
static bool run_cmd(tt__ctl *c, unsigned rank, uint64_t cmd, tt__wait_stats *st)
{
    unsigned width = cmd_width(cmd);
    switch (cmd_kind(cmd)) {
    case CMD_SECTION:
        if (rank < width) {
            note_cpu(c, rank, st);
            run_section(c, rank);
            tt__join_done(&c->join, st);
        }
        return true;
    case CMD_SPLIT:
        if (rank < width) {
            note_cpu(c, rank, st);
            split_part(c, rank);
            tt__join_done(&c->join, st);
        }
        return true;
    case CMD_END:
        tt__join_done(&c->join, st);
        return false;
    case CMD_LEAVE:
        /* No report: the leader does not wait for one (the block lives
         * until the region's end barrier, or the split's join, which this
         * participant reaches after this). */
        return false;
    default:
        /* The header of a command of this generation names a kind the
         * leader never writes: the block was overwritten. */
        TT__INVARIANT(false, "scope: a command of unknown kind");
        return true;
    }
}

/*
 * A member of a scope that is its region's whole team runs at the region's
 * level, where full-width sections need it; every other command it takes
 * part in (a split part, a section narrower than the scope) is user code
 * that must be one thread to OpenMP, and a nested one-thread region costs
 * libgomp two futex wakes at its end (placement.md: about 2.2 us on host
 * vm). Opened per command, that end sat between the member's last share
 * and its report, on the path the leader's join waits for. So the member
 * opens one such region when the first of those commands comes, and stays
 * in it, serving, until a command needs the region's level again (a
 * full-width section, end, leave), which it then runs outside. Each share
 * inside still ends as one of its own would (backend isolate's fast path:
 * its tasks complete, its ICV changes are put back) before its report.
 * The leader's own part of a split keeps its one isolation per split: the
 * callback it returns to runs at the region's level. Measured against the
 * commit before (host vm, width 2, alternating processes): futex calls per
 * split of an empty section 4 -> 2 (strace -c), a loop of such splits 0.95
 * of its time (10 pairs, 5.60 -> 5.23 us), wait_scenarios' nested rows
 * 0.98 to 0.99 (6 rounds; their 20 us sections dilute it).
 */
/* Whether `rank` runs user code for cmd that must be one thread to
 * OpenMP: a split part, or a section narrower than the scope. */
static bool cmd_isolated_share(const tt__ctl *c, unsigned rank, uint64_t cmd)
{
    int kind = cmd_kind(cmd);
    unsigned width = cmd_width(cmd);
    return rank < width && (kind == CMD_SPLIT || (kind == CMD_SECTION && width < c->size));
}

/* Whether a member in its kept isolation may stay in it for cmd: an
 * isolated share, or a section or split this rank sits out. */
static bool cmd_stays_isolated(const tt__ctl *c, unsigned rank, uint64_t cmd)
{
    int kind = cmd_kind(cmd);
    return cmd_isolated_share(c, rank, cmd) ||
           ((kind == CMD_SECTION || kind == CMD_SPLIT) && rank >= cmd_width(cmd));
}

typedef struct iso_serve_ctx {
    tt__ctl *c;
    unsigned rank;
    uint32_t seen;
    uint64_t cmd; /* in: the first command; out: the one that ended it */
} iso_serve_ctx;

static void iso_serve(void *ctx)
{
    iso_serve_ctx *k = ctx;
    tt__wait_stats *st = ctl_stats(k->c);
    do {
        (void)run_cmd(k->c, k->rank, k->cmd, st);
        k->cmd = next_cmd(k->c, &k->seen, st);
    } while (cmd_stays_isolated(k->c, k->rank, k->cmd));
}

static void participate(tt__ctl *c, unsigned rank, uint32_t seen)
{
    tt__wait_stats *st = ctl_stats(c);
    bool serve_isolated = c->region_team && tt__pool_isolates(c->pool);
    uint64_t cmd = next_cmd(c, &seen, st);
    for (;;) {
        if (serve_isolated && cmd_isolated_share(c, rank, cmd)) {
            iso_serve_ctx k = {c, rank, seen, cmd};
            tt__backend_get()->isolate(iso_serve, &k);
            seen = k.seen;
            cmd = k.cmd;
            continue;
        }
        if (!run_cmd(c, rank, cmd, st))
            return;
        cmd = next_cmd(c, &seen, st);
    }
}

/* Pinning (Linux): participant k >= 1 of a root scope runs on the k-th CPU
 * of the leader's affinity set while it takes part, and gets its own mask
 * back before it serves anything else (not under likwid-pin:
 * tt__pin_allowed, cpu.c). */

/* Pin the calling thread to `cpu`; true when it did (its mask is in
 * *saved, to be put back with unpin). */
static bool pin_to(unsigned cpu, cpu_set_t *saved) { return tt__cpu_pin(cpu, saved); }

static void unpin(const cpu_set_t *saved) { tt__cpu_unpin(saved); }

/* The first `max` CPUs of the calling thread's (the leader's) affinity set;
 * how many. */
static unsigned pin_cpus(unsigned *cpus, unsigned max)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    unsigned n = 0;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        for (unsigned cpu = 0; cpu < CPU_SETSIZE && n < max; cpu++)
            if (CPU_ISSET(cpu, &set))
                cpus[n++] = cpu;
    return n;
}

static void part_run(tt__work *w, tt__member *m)
{
    (void)m;
    tt__part_work *pw = (tt__part_work *)w;
    tt__ctl *c = pw->c;
    unsigned rank = pw->rank;
    uint32_t gen0 = pw->gen0;
    cpu_set_t saved;
    bool pinned = pw->pin && pin_to(pw->cpu, &saved);
    /* pw lives in the leader's frame until the end command's join: after
     * participate returns, it may be gone. */
    participate(c, rank, gen0);
    if (pinned)
        unpin(&saved);
}

/* Post the participant loop to every member of c (participants 1..). */
void tt__ctl_start_members(tt__ctl *c, tt__part_work *works, bool pin)
{
    unsigned cpus[c->size > 0 ? c->size : 1];
    unsigned ncpu = pin ? pin_cpus(cpus, c->size) : 0;
    if (ncpu == 0)
        pin = false;
    uint32_t gen0 = atomic_load_explicit(&c->gen.word, memory_order_relaxed);
    for (unsigned p = 1; p < c->size; p++) {
        works[p - 1] = (tt__part_work){.w = {part_run}, .c = c, .rank = p, .gen0 = gen0,
                                   .pin = pin, .cpu = pin ? cpus[p % ncpu] : 0};
        tt__member_post(&c->crew->members[c->members[p - 1]], &works[p - 1].w);
    }
}

void tt__ctl_end_members(tt__ctl *c)
{
    if (c->size > 1) {
        issue(c, CMD_END, c->size - 1);
        wait_join(c);
    }
}

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

typedef struct scope_part {
    scope_region *r;
    unsigned k;
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
    if (!on_lead_cpu(c))
        return tt__wait_polls(&c->pol);
    tt__wait_stats *st = ctl_stats(c);
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
 *    core and a member's where there were three (end, the members'
 *    reports, the caller's "done"); each is a cache-line transfer, 550 to
 *    600 cycles one way on the development hosts when their two vCPUs sit
 *    far apart (a two-thread ping-pong: 1070 to 1250 cycles a round trip,
 *    against 190 to 340 when they sit close).
 *  - Under a spin budget of 0 (OMP_WAIT_POLICY=passive) the join was a
 *    sleep: the leader slept in it and again in libgomp's barrier, each
 *    a wake-up (10 to 20 us on these hosts). Measured (host vm, width 2,
 *    passive, bench_paths scope over 10^3 doubles, a one-section scope
 *    per call): 6 context switches per scope -> 4, 72 -> 50 us, where
 *    `omp parallel` takes 2 and 23 to 25 us. The 2 left are the price of
 *    a region held open across the callback: the member sleeps between
 *    the section and the end command, and the leader in the section's
 *    join (waiting.md, "A team scope under OMP_WAIT_POLICY=passive").
 *
 * Where the process holds more threads than CPUs (TT__END_LEAD_WAITS, a
 * throttled libgomp) the leader keeps its awake join and then says it is
 * done (lead_done), and the members, which reported, wait for that before
 * the barrier, as a root's do (exec.c, region_end): the leader reaches the
 * barrier first and a member makes its wake call. Going from the join
 * straight to the barrier it was the last arriver: 378 system calls of the
 * leader's in 200 empty scopes (test_waits), where it now makes 62 to
 * 167 (the dock's, on scopes whose bookkeeping ends after the member is
 * back in the dock). A member's wait for that word follows the block's
 * policy (lead_wait_polls): none on the leader's CPU, where the leader
 * could say it only once the member stopped polling.
 *
 * The block stays valid: it lives in the leader's frame until the
 * region's end barrier, which every member passes after its last read of
 * the command (and of lead_done).
 */
static void scope_participate(void *ctx)
{
    scope_part *p = ctx;
    scope_region *r = p->r;
    tt__ctl *c = r->c;
    if (p->k == 0) {
        /* The callback is the root's user code on this thread. */
        run_scope_fn(c, r->view, r->fn, r->arg);
        if (c->size <= 1)
            return;
        if (r->leave_at_end) {
            issue(c, CMD_LEAVE, 0);
            return;
        }
        if (c->crew->stats)
            atomic_fetch_add_explicit(&c->crew->stats->scope_end_joins, 1, memory_order_relaxed);
        tt__ctl_end_members(c);
        if (r->lead_says_done)
            tt__lead_first_done(&r->lead_done);
    } else {
        cpu_set_t saved;
        bool pinned = r->ncpu > 0 && pin_to(r->cpus[p->k % r->ncpu], &saved);
        participate(c, p->k, 0);
        if (pinned)
            unpin(&saved);
        if (r->lead_says_done)
            tt__lead_first_wait(&r->lead_done, lead_wait_polls(c), ctl_stats(c));
    }
}

static void scope_region_member(void *ctx, unsigned k, unsigned got)
{
    scope_region *r = ctx;
    tt__ctl *c = r->c;
    if (got < c->size) {
        if (k == 0)
            r->short_team = true;
        return;
    }
    if (k >= c->size)
        return;
    scope_part part = {r, k};
    /* Every thread of the region takes part: the block is the region's
     * team (run_section), and each participant stays at the region's level,
     * confined. Otherwise each participant is one thread to OpenMP for the
     * whole scope. */
    tt__region_participate(c->crew, k, !c->region_team && tt__pool_isolates(c->pool),
                           scope_participate, &part);
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
    run_scope_fn(&c, &view, fn, arg);
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
    run_scope_fn(&c, &view, fn, arg);
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
static bool scope_on_region(tt__exec *x, const tt__placement *pl, const scope_settings *s,
                            _Atomic int *fail, tt_scope_fn fn, void *arg)
{
    tt_pool *pool = x->pool;
    unsigned budget = x->budget;
    unsigned cpus[budget];
    tt__ctl c;
    tt_scope view = {.c = &c, .size = budget, .ledger = x->ledger};
    tt__ctl_init(&c, pool, x->pool_gen, pl->crew, budget, NULL, &s->pol, x->ledger);
    /* Every thread of the region takes part when the scope has the pool's
     * width (the region is always opened at that width). */
    c.region_team = budget == pool->width;
    c.fail = fail;
    /* A region wider than any this thread opened before starts its team
     * threads (wait.c, region_width_seen): this scope's waits spin only the
     * throttled budget, as libgomp's do there, and then yield and sleep.
     * A new thread starts on its parent's CPU and waits there behind any
     * spinner; and a waiter woken by it may be queued on the new thread's
     * CPU behind it in turn. Measured on host vm (a fresh pthread's first
     * tt_team_scope of one section, width 2, 400 threads, 3 runs): a median
     * of 7.8 ms, two ticks, where its first `omp parallel` took 26 to 38
     * us; marking the members crowded until their first command (so that
     * the leader's first join does not spin) left one tick, 3.9 ms: the
     * member, moved off its leader's CPU, spun for the next command while
     * the leader, woken from its join onto the member's CPU, waited behind
     * it.
     *
     * Its end keeps the order the process's threads say. In a process of
     * more threads than CPUs (TT__END_LEAD_WAITS) the member, which had
     * taken the leader's CPU when the leader yielded in its end join,
     * reported and then spun for the leader's "done", which the leader
     * could say only once that spin gave up: a user-space trace of 20
     * such scopes (host vm) had the leader's end join last 23 us after the
     * member's report, every time on the one CPU both ran on, and the
     * scope 58 us at the median. A member on its leader's CPU no longer
     * polls for that word (lead_wait_polls): 36 to 38 us, where raw
     * OpenMP's first `omp parallel` took 39 to 40 (25 in its fast mode;
     * alternating processes, 100 threads each). Tried, not kept: ending
     * such a scope in the barrier alone, as a thread's first root does.
     * Quiet it did as well; beside two processes busy 50 % and an OpenMP
     * co-tenant, the leader then slept in libgomp's barrier and waited for
     * a CPU to be woken onto: a p75 of 1.7 to 8.0 ms (two harness runs)
     * against 49 to 102 us with the awake end join. */
    if (tt__region_new_team(pool->width))
        c.pol.throttled = true;
    scope_region r = {.c = &c, .view = &view, .fn = fn, .arg = arg, .cpus = cpus,
                      .ncpu = s->pin ? pin_cpus(cpus, budget) : 0};
    if (budget > 1 && s->pol.spin_polls > 0) {
        enum tt__region_end end = tt__region_end_order(tt__backend_get()->last_arriver_wakes());
        r.leave_at_end = end == TT__END_LEAD_FIRST;
        r.lead_says_done = end == TT__END_LEAD_WAITS;
    } else {
        r.leave_at_end = budget > 1;
    }
    tt__backend_get()->region(pool->width, scope_region_member, &r);
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
    run_scope_fn(&c, &view, fn, arg);
    tt__place_lead_end(&mark);
    tt__ctl_end_members(&c);
}

int tt_team_scope_with(tt_exec *ex, const tt_team_opts *opts, tt_scope_fn fn, void *arg)
{
    tt__exec *x = ex ? tt__x(ex) : NULL;
    int rc = tt__exec_check(x);
    if (rc)
        return rc;
    if (!fn)
        return TT_EINVAL;
    if (x->flags & TT__F_TEAM)
        return team_scope_carried(x, fn, arg);
    if (tt__entry_lean(x))
        return scope_lean(x, fn, arg);
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
    s.pol.throttled = s.pol.throttled || budget > tt__cpu_count_cached();
    _Atomic int fail = 0;
    bool ran = true;
    if (pl.route == TT__ROUTE_REGION)
        ran = scope_on_region(x, &pl, &s, &fail, fn, arg);
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
    run_scope_fn(view->c, view, k->fn, k->arg);
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

