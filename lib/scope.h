/*
 * scope.h -- team scopes (team_scope.c, scope_split.c, scope_entries.c)
 * and persistent teams (team.c): the control block a scope's or team's
 * threads share, and what the three files of team scopes share. Above the
 * entry frame.
 */
#ifndef TT_SCOPE_H
#define TT_SCOPE_H

#include "entry.h"

#include <string.h>

/* A control block: shared by a leader thread (participant 0) and size - 1
 * members (participants 1..size-1), each of which waits for the block's
 * generation word to move, runs the command the leader wrote, and reports
 * to the command's join (team_scope.c). A root scope's block on the
 * caller's team is kept in its region crew (tt__ctl_keep, below), any other
 * scope's lives on the leader's stack, a persistent team's in the tt_team. */
typedef struct tt__ctl tt__ctl;
struct tt__ctl {
    /* What token.c reads of the block through a team token's `team` field
     * (tokens.h): `busy`, a command is in flight (leader-private), and
     * the hook that ends a persistent team's leader role. First, so that
     * the token protocol needs nothing else of this file. */
    tt__team_hook hook;
    tt__event gen TT__ALIGNED; /* bumped once per command                 */
    /* The command's header: generation << 32 | kind << 24 | width, one
     * atomic word, so that a participant left out of a narrow section can
     * read which command it is while the leader may already write the next
     * (it does not wait for participants that take no part). */
    _Atomic uint64_t cmd;
    /* Where the block's threads run (team_scope.c, "Sharing a CPU"): the
     * CPU the leader issued the last command from (sched_getcpu; -1 before
     * the first, or unknown); the participants whose last command started
     * on that CPU (bit min(rank, 63)). Hints, both relaxed. On the
     * command's line: a member reads them with the command, the leader
     * reads `crowded` from its own cache, and a member writes only when its
     * bit changes. With them the command's header and body still fill one
     * line (8 + 8 + 8 + 8 + 16 + 8 + 8 bytes). */
    _Atomic int lead_cpu;
    _Atomic uint64_t crowded;
    /* The command's body: read only by participants that take part, which
     * the leader waits for before it writes another. */
    tt_section_fn fn;
    void *arg;
    unsigned width;
    struct split_cmd *split; /* scope_split.c */
    tt__join join TT__ALIGNED;
    /* The earliest time of the block's next nudge (team_scope.c, "Sharing
     * a CPU"): a hint, relaxed, touched only by a member about to move. */
    _Atomic uint64_t nudge_after_ns;
    /* The section barrier: arrivals, and the generation that releases. */
    _Atomic uint32_t bar_count TT__ALIGNED;
    /* The failure the section's barriers return (0: none): set, with a
     * move of bar_gen after it, by a participant's tt_section_fail or by
     * the last arriver of a barrier that finds the scope failed; reset
     * with bar_count when a section starts. */
    _Atomic int bar_fail;
    tt__event bar_gen;
    /* Fixed for the life of the block (a kept block's, for a scope), on a
     * line of their own: every participant reads them, and the section
     * barrier's line above is written as each section starts. */
    tt_pool *pool TT__ALIGNED;
    tt__crew *crew;
    unsigned size;            /* participants, the leader included       */
    const uint32_t *members;  /* participant p >= 1 is members[p - 1]    */
    tt__wait_policy pol;
    void *ledger;
    pthread_t leader;         /* the thread that may issue commands      */
    uint32_t pool_gen;        /* tokens minted here belong to this pool  */
    /* The block's participants are every thread of the OpenMP region they
     * run in (a root scope on the caller's team at the pool's width): a
     * section of the block's full size is that region's team to OpenMP. */
    bool region_team;
    /* The failure word of the tt_team_scope call this block serves now
     * (tt_scope_fail, tt_section_fail): 0, or the first code. Set by the
     * leader before any command; a split's sub-blocks share their parent's. */
    _Atomic int *fail;
};

/* A member's part of a scope: the work posted to it once per scope. */
typedef struct tt__part_work {
    tt__work w;
    tt__ctl *c;
    unsigned rank;
    uint32_t gen0;   /* the generation before the first command          */
    bool pin;
    unsigned cpu;    /* CPU to pin to, when pin                          */
} tt__part_work;

/* The policy of a block of `size` participants: the scope's, throttled
 * where more participants are awake than the process has CPUs (a scope
 * then spins little, as libgomp does when it manages more threads than
 * CPUs). */
static inline tt__wait_policy tt__ctl_pol(const tt__wait_policy *pol, unsigned size)
{
    tt__wait_policy p = *pol;
    if (size > tt__cpu_count_cached())
        p.throttled = true;
    return p;
}

/* Set up a control block of `size` participants on `crew` (`members`:
 * participant p >= 1 is members[p - 1]; NULL on a region crew, where
 * region thread p is participant p). `pool_gen` is the pool generation its
 * child tokens carry: a scope's is the generation of the token that
 * entered (checked at its claim; read from the pool here instead, after a
 * destroy from a member (DOOMED, the generation bumped), it would make the
 * scope's child tokens look live on the dying pool), a split's groups take
 * their parent's, and a persistent team's is the generation it was built
 * at. Inline, so that its stores fold into the caller's frame (every scope
 * sets one up). */
static inline void tt__ctl_init(tt__ctl *c, tt_pool *pool, uint32_t pool_gen, tt__crew *crew,
                                unsigned size, const uint32_t *members,
                                const tt__wait_policy *pol, void *ledger)
{
    memset(c, 0, sizeof *c);
    c->pool = pool;
    c->crew = crew;
    c->size = size;
    c->members = members;
    c->pol = tt__ctl_pol(pol, size);
    c->ledger = ledger;
    c->leader = pthread_self();
    c->pool_gen = pool_gen;
    atomic_store_explicit(&c->lead_cpu, -1, memory_order_relaxed);
}

/*
 * A root scope's control block kept in its region crew between scopes
 * (tt__crew.scope_block). A block on the leader's stack is written whole
 * by every scope (tt__ctl_init clears it), and its members read it whole:
 * each of its lines then crosses between the leader's core and a member's
 * once per scope, and the calls the leader makes after the region push
 * their frames onto lines a member still holds. A kept block is written
 * only where a field changes, so the lines a member reads and the leader
 * does not change stay in both caches: a scope's transfers are those of
 * its commands (the command's line, the join's), as in a persistent team.
 * Its generation goes on from scope to scope, and members start from the
 * value the region's line carries (scope_entries.c).
 */
typedef struct tt__ctl_kept {
    tt__ctl c;
    _Atomic int fail TT__ALIGNED; /* the scope's failure word (c.fail)     */
} tt__ctl_kept;

/* Write `v` to a field of a kept block only where it differs. */
#define TT__CTL_KEEP(c, f, v)                                                                     \
    do {                                                                                           \
        if ((c)->f != (v))                                                                         \
            (c)->f = (v);                                                                          \
    } while (0)

/* The block of crew `crew` for a root scope, set up as tt__ctl_init would
 * (members: none, the region's threads) and with its failure word cleared;
 * NULL where it cannot be allocated (the caller uses a block of its own).
 * The block is idle: the last scope's end command was its last. */
static inline tt__ctl_kept *tt__ctl_keep(tt__crew *crew, tt_pool *pool, uint32_t pool_gen,
                                         unsigned size, const tt__wait_policy *pol, void *ledger)
{
    tt__ctl_kept *k = crew->scope_block;
    if (!k) {
        k = tt__calloc_lines(1, sizeof *k); /* its fail word starts at 0 */
        if (!k)
            return NULL;
        tt__ctl_init(&k->c, pool, pool_gen, crew, size, NULL, pol, ledger);
        k->c.fail = &k->fail;
        crew->scope_block = k;
        return k;
    }
    tt__ctl *c = &k->c;
    tt__wait_policy p = tt__ctl_pol(pol, size);
    TT__CTL_KEEP(c, pool, pool);
    TT__CTL_KEEP(c, crew, crew);
    TT__CTL_KEEP(c, size, size);
    TT__CTL_KEEP(c, members, NULL);
    TT__CTL_KEEP(c, pol.spin_polls, p.spin_polls);
    TT__CTL_KEEP(c, pol.spin_ns, p.spin_ns);
    TT__CTL_KEEP(c, pol.throttled, p.throttled);
    TT__CTL_KEEP(c, pol.yield_every, p.yield_every);
    TT__CTL_KEEP(c, pol.stop, p.stop);
    TT__CTL_KEEP(c, pol.stop_val, p.stop_val);
    TT__CTL_KEEP(c, pol.crowded, p.crowded);
    TT__CTL_KEEP(c, ledger, ledger);
    if (!pthread_equal(c->leader, pthread_self()))
        c->leader = pthread_self();
    TT__CTL_KEEP(c, pool_gen, pool_gen);
    if (atomic_load_explicit(&k->fail, memory_order_relaxed) != 0)
        atomic_store_explicit(&k->fail, 0, memory_order_relaxed);
    return k;
}

/* Post the participant loop to every member of c (`works`: size - 1
 * records that live until the end command's join), pinned per `pin`; and
 * end it: the members leave the loop, and the leader waits for them. */
void tt__ctl_start_members(tt__ctl *c, tt__part_work *works, bool pin);
void tt__ctl_end_members(tt__ctl *c);

/* ------------------------------------------------------------------------ */
/* What the files of team scopes share: team_scope.c (control blocks,        */
/* sharing a CPU, sections), scope_split.c (splits, scope forks, the         */
/* members' loop) and scope_entries.c (tt_team_scope, entries on team        */
/* tokens), each calling only into the ones before it.                       */
/* ------------------------------------------------------------------------ */

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

/* The wait counters of c's crew (NULL without a crew). */
static inline tt__wait_stats *tt__ctl_stats(tt__ctl *c) { return c->crew ? c->crew->stats : NULL; }

/* team_scope.c. The block's policy for a wait that is crowded (no spin),
 * counted in st. */
const tt__wait_policy *tt__ctl_crowded_pol(const tt__ctl *c, tt__wait_policy *tmp,
                                           tt__wait_stats *st);
/* Participant `rank` >= 1 starts a command of c: note whether it runs on
 * the CPU the command was issued from, and move off it the second time in
 * a row. */
void tt__ctl_note_cpu(tt__ctl *c, unsigned rank, tt__wait_stats *st);
/* Whether the calling member runs on the CPU the last command came from. */
bool tt__ctl_on_lead_cpu(tt__ctl *c);
/* Issue a command (CMD_*) to the participants that take part, with a join
 * for `pending` of them; and wait for that join. */
void tt__ctl_issue(tt__ctl *c, int kind, uint32_t pending);
void tt__ctl_wait_join(tt__ctl *c);
/* Run the current section as participant `rank`. */
void tt__ctl_run_section(tt__ctl *c, unsigned rank);
/* Run a scope's callback (or a split's part) fn on the view, as the
 * root's user code. */
void tt__scope_run_fn(tt__ctl *c, tt_scope *view, tt_scope_fn fn, void *arg);
/* The scope's failure code (0: none). */
int tt__ctl_fail_get(const tt__ctl *c);
/* TT_OK when the calling thread may issue commands on `scope` now. */
int tt__scope_leader_check(const tt_scope *scope);

/* scope_split.c. The members' loop: participant `rank` >= 1 serves the
 * commands of c after generation `seen` until an end or leave. And the
 * first `max` CPUs of the calling thread's affinity set (how many), which
 * a pinned scope's participants take. */
void tt__ctl_participate(tt__ctl *c, unsigned rank, uint32_t seen);
unsigned tt__scope_pin_cpus(unsigned *cpus, unsigned max);

#endif /* TT_SCOPE_H */
