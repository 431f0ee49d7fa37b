/*
 * team_scope.c -- team scopes: control blocks, sharing a CPU, sections.
 * Splits, scope forks and the members' loop are in scope_split.c;
 * tt_team_scope and the entries on tokens with team authority in
 * scope_entries.c; the three share scope.h. Persistent teams (team.c) are a
 * control block held between leaders, and use the block's machinery
 * through scope.h.
 *
 * A scope is a control block (tt__ctl) shared by a leader thread
 * (participant 0) and size - 1 reserved members (participants 1..size-1).
 * Each member runs tt__ctl_participate(): it waits for the control block's
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
 * tt__join_done (or its read of a leave), so the block may live on the
 * leader's stack; a root scope's on the caller's team is kept in its region
 * crew instead (scope.h, tt__ctl_keep).
 *
 * Tokens with team authority (TT__F_TEAM) carry a control block in their
 * `team` field and a budget no larger than its size; their entries run as
 * commands on that block instead of acquiring members.
 */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Control blocks                                                            */
/* ------------------------------------------------------------------------ */

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
 * the load first. Under load, a held scope's threads either stay apart or
 * sit on one CPU for the whole run, a section then costing a hundred times
 * more (a join sleep and a member park in almost every one), and once
 * together they do not part; libgomp's threads, which never sleep between
 * regions that close together, do not meet this (the runs:
 * docs/design/runs/2026-12-07-comment-records.md, "Sharing a CPU").
 *
 * So the block tracks where its threads run, through sched_getcpu() (with
 * glibc's rseq a load of a thread-local word, nanoseconds; a vDSO call
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
 *    (a nudge: tens to hundreds of microseconds, paid once, where staying
 *    costs tens of microseconds every section). Its mask after is the one
 *    it had: a thread that OpenMP or
 *    the user bound to one CPU is never moved, one bound to a place of
 *    several CPUs stays in it. No nudge where the scope has more
 *    participants than CPUs (there threads must share), under likwid-pin
 *    (tt__pin_allowed), or more often than once per TT__MOVE_EVERY_NS a
 *    block and a thread (a scheduler that keeps pulling the threads
 *    together costs a nudge per millisecond at most). The streak is the
 *    thread's too: a root scope of one section is a block of its own, and
 *    a loop of such scopes whose threads the scheduler put together would
 *    otherwise never move, while libgomp's own spins (its end barrier, its
 *    dock) take the shared CPU for a tick at a time (waiting.md).
 * A stale hint costs one wait its spin (a wake-up instead) or one
 * needless nudge; nothing is published through these words, so all their
 * accesses are relaxed.
 */
/* The block's policy for a wait that is crowded: no spin. */
const tt__wait_policy *tt__ctl_crowded_pol(const tt__ctl *c, tt__wait_policy *tmp,
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
        return tt__ctl_crowded_pol(c, tmp, st);
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
void tt__ctl_note_cpu(tt__ctl *c, unsigned rank, tt__wait_stats *st)
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
bool tt__ctl_on_lead_cpu(tt__ctl *c)
{
    int lead = atomic_load_explicit(&c->lead_cpu, memory_order_relaxed);
    return lead >= 0 && scope_cpu() == lead;
}

/* Issue a command to participants 1..n-1 that takes part, and set up the
 * join for `pending` of them. */
void tt__ctl_issue(tt__ctl *c, int kind, uint32_t pending)
{
    /* One command at a time: the previous command's join is complete (the
     * leader waited for it), and no more participants report than the
     * block has beside its leader. */
    uint32_t last = atomic_load_explicit(&c->join.word, memory_order_relaxed);
    TT__INVARIANT((last & ~TT__JOIN_SLEEPING) == 0,
                  "scope: a command issued while the last one's join is pending");
    /* Only a section and a split have a width (the body's, set before this
     * call); an end or a leave carries 0, not the width of whatever command
     * came before it, which in a kept block may be the last scope's. */
    unsigned width = kind == CMD_SECTION || kind == CMD_SPLIT ? c->width : 0;
    TT__INVARIANT(pending < c->size && width <= c->size,
                  "scope: a command for more participants than the block has");
    /* The join's line was last written by the member that reported: a
     * store of the value it holds would take the line back from that
     * member's core for nothing (a leave after a section: 0 and 0). */
    if (last != pending)
        tt__join_init(&c->join, pending);
    uint32_t g = atomic_load_explicit(&c->gen.word, memory_order_relaxed) + 1;
    /* Relaxed: the seq_cst store of the generation in tt__event_post
     * releases the header and the body to the participants' acquire. */
    atomic_store_explicit(&c->cmd,
                          (uint64_t)g << 32 | (uint64_t)kind << 24 | (width & 0xffffffu),
                          memory_order_relaxed);
    atomic_store_explicit(&c->lead_cpu, scope_cpu(), memory_order_relaxed);
    /* Sleeping members: the join that follows waits at least their wake-up,
     * so the oversubscription sample its spin would take is taken now. */
    if (tt__event_post(&c->gen, g, tt__ctl_stats(c)))
        tt__wait_woke(&c->pol);
}

void tt__ctl_wait_join(tt__ctl *c)
{
    tt__wait_stats *st = tt__ctl_stats(c);
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

void tt__ctl_run_section(tt__ctl *c, unsigned rank)
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

void tt__scope_run_fn(tt__ctl *c, tt_scope *view, tt_scope_fn fn, void *arg)
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

int tt__ctl_fail_get(const tt__ctl *c)
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
    if (!s)
        return TT__EINVAL("!s");
    if (!s->c)
        return TT__EINVAL("the section has ended");
    if (!s->c->fail)
        return TT__EINVAL("the section has no scope (it has ended)");
    if (code == 0)
        return TT__EINVAL("code == 0");
    (void)fail_set(s->c->fail, code);
    tt__ctl *c = s->c;
    int none = 0;
    if (s->size > 1 &&
        atomic_compare_exchange_strong_explicit(&c->bar_fail, &none, tt__ctl_fail_get(c),
                                                memory_order_acq_rel, memory_order_acquire)) {
        /* The first failure of this section: the generation's low bits are
         * clear here (a barrier completed with BAR_DONE_FAILED set
         * bar_fail first), so the add sets BAR_FAILED. */
        tt__event_bump(&c->bar_gen, tt__ctl_stats(c));
    }
    return TT_OK;
}

int tt_section_barrier(tt_section *s)
{
    if (!s)
        return TT__EINVAL("!s");
    if (!s->c)
        return TT__EINVAL("the section has ended");
    tt__ctl *c = s->c;
    if (s->size <= 1)
        return tt__ctl_fail_get(c);
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
        if ((code = tt__ctl_fail_get(c)) != 0) {
            int none = 0;
            if (!atomic_compare_exchange_strong_explicit(&c->bar_fail, &none, code,
                                                         memory_order_acq_rel,
                                                         memory_order_acquire))
                code = none;
            next |= BAR_DONE_FAILED;
        }
        tt__event_post(&c->bar_gen, next, tt__ctl_stats(c));
        return code;
    }
    tt__wait_stats *st = tt__ctl_stats(c);
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

int tt__scope_leader_check(const tt_scope *scope)
{
    if (!scope)
        return TT__EINVAL("!scope");
    if (!scope->c)
        return TT__EINVAL("the scope has ended (used outside its callback)");
    if (!pthread_equal(scope->c->leader, pthread_self()))
        return TT_EWRONGTHREAD;
    if (scope->c->hook.busy)
        return TT_EBUSY;
    return TT_OK;
}

unsigned tt_scope_size(const tt_scope *scope) { return scope ? scope->size : 0; }

int tt_scope_fail(tt_scope *scope, int code)
{
    if (!scope)
        return TT__EINVAL("!scope");
    if (!scope->c)
        return TT__EINVAL("the scope has ended (used outside its callback)");
    if (!scope->c->fail)
        return TT__EINVAL("the scope has no failure word (it has ended)");
    if (code == 0)
        return TT__EINVAL("code == 0");
    if (!pthread_equal(scope->c->leader, pthread_self()))
        return TT_EWRONGTHREAD;
    (void)fail_set(scope->c->fail, code);
    return TT_OK;
}

int tt_scope_failed(const tt_scope *scope)
{
    return scope && scope->c ? tt__ctl_fail_get(scope->c) : 0;
}

int tt_scope_run_with(tt_scope *scope, unsigned width, tt_section_fn section, void *arg)
{
    int rc = tt__scope_leader_check(scope);
    if (rc)
        return rc;
    if (!section)
        return TT__EINVAL("!section");
    if (width == 0)
        return TT__EINVAL("width == 0");
    if (width > scope->size)
        return TT__EINVAL("width > scope->size");
    tt__ctl *c = scope->c;
    if ((rc = tt__ctl_fail_get(c)) != 0)
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
        tt__ctl_run_section(c, 0);
    } else {
        atomic_store_explicit(&c->bar_count, 0, memory_order_relaxed);
        tt__ctl_issue(c, CMD_SECTION, width - 1);
        tt__ctl_run_section(c, 0);
        tt__ctl_wait_join(c);
    }
    c->hook.busy = false;
    return tt__ctl_fail_get(c);
}

int tt_scope_run(tt_scope *scope, tt_section_fn section, void *arg)
{
    return tt_scope_run_with(scope, scope ? scope->size : 0, section, arg);
}
