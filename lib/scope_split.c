/*
 * scope_split.c -- splits and scope forks (the participants break into
 * groups, each with a sub-control block, and every group runs its own
 * commands), and the members' loop, tt__ctl_participate, which serves a
 * block's commands and runs a split's part. Below scope_entries.c, above
 * team_scope.c (team_scope.c's essay describes the protocol).
 */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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
        tt__ctl_issue(sub, CMD_LEAVE, 0);
}

/* Job i of a scope fork on its group's leader, with a child token that has
 * team authority over the group. */
static void fork_group_job(tt__ctl *sub, split_cmd *sc, unsigned i)
{
    tt_exec child;
    tt__token_spec spec = {.pool = sub->pool, .pool_gen = sub->pool_gen,
                           .budget = sub->size, .flags = sc->child_flags,
                           .ledger = sub->ledger, .team = sub,
                           .owner = pthread_self(), .fork_fail = sc->fail};
    tt__job_run(&child, &spec, sc->job, sc->arg, i);
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
        tt__ctl_issue(sub, CMD_LEAVE, 0);
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
        tt__ctl_participate(&sc->subs[g], (unsigned)r, 0);
}

static void split_part(tt__ctl *c, unsigned p)
{
    split_call k = {c, p};
    tt__share_run(c->pool, split_thunk, &k);
}

static int split_common(tt_scope *scope, unsigned jobs, tt_split_fn split, tt_job_fn job,
                        void *arg, uint32_t child_flags)
{
    int rc = tt__scope_leader_check(scope);
    if (rc)
        return rc;
    if (jobs == 0)
        return TT__EINVAL("jobs == 0");
    if ((!split && !job))
        return TT__EINVAL("!split && !job");
    tt__ctl *c = scope->c;
    if ((rc = tt__ctl_fail_get(c)) != 0)
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
        tt__ctl_issue(c, CMD_SPLIT, size - 1);
        split_part(c, 0);
        tt__ctl_wait_join(c);
    } else {
        split_part(c, 0);
    }
    c->split = NULL;
    c->hook.busy = false;
    return tt__ctl_fail_get(c);
}

int tt_scope_split(tt_scope *scope, unsigned parts, tt_split_fn fn, void *arg)
{
    if (!fn)
        return TT__EINVAL("!fn");
    return split_common(scope, parts, fn, NULL, arg, 0);
}

int tt_scope_fork(tt_scope *scope, unsigned jobs, tt_job_fn job, void *arg)
{
    if (!job)
        return TT__EINVAL("!job");
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
    const tt__wait_policy *pol =
        tt__ctl_on_lead_cpu(c) ? tt__ctl_crowded_pol(c, &tmp, st) : &c->pol;
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
            tt__ctl_note_cpu(c, rank, st);
            tt__ctl_run_section(c, rank);
            tt__join_done(&c->join, st);
        }
        return true;
    case CMD_SPLIT:
        if (rank < width) {
            tt__ctl_note_cpu(c, rank, st);
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
 * libgomp two futex wakes at its end (microseconds; placement.md). Opened
 * per command, that end would sit between the member's last share and its
 * report, on the path the leader's join waits for. So the member
 * opens one such region when the first of those commands comes, and stays
 * in it, serving, until a command needs the region's level again (a
 * full-width section, end, leave), which it then runs outside. Each share
 * inside still ends as one of its own would (backend isolate's fast path:
 * its tasks complete, its ICV changes are put back) before its report.
 * The leader's own part of a split keeps its one isolation per split: the
 * callback it returns to runs at the region's level. The run:
 * docs/design/runs/2026-12-07-comment-records.md, "A member's kept
 * isolation".
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
    tt__wait_stats *st = tt__ctl_stats(k->c);
    do {
        (void)run_cmd(k->c, k->rank, k->cmd, st);
        k->cmd = next_cmd(k->c, &k->seen, st);
    } while (cmd_stays_isolated(k->c, k->rank, k->cmd));
}

void tt__ctl_participate(tt__ctl *c, unsigned rank, uint32_t seen)
{
    tt__wait_stats *st = tt__ctl_stats(c);
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
unsigned tt__scope_pin_cpus(unsigned *cpus, unsigned max)
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
     * tt__ctl_participate returns, it may be gone. */
    tt__ctl_participate(c, rank, gen0);
    if (pinned)
        unpin(&saved);
}

/* Post the participant loop to every member of c (participants 1..). */
void tt__ctl_start_members(tt__ctl *c, tt__part_work *works, bool pin)
{
    unsigned cpus[c->size > 0 ? c->size : 1];
    unsigned ncpu = pin ? tt__scope_pin_cpus(cpus, c->size) : 0;
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
        tt__ctl_issue(c, CMD_END, c->size - 1);
        tt__ctl_wait_join(c);
    }
}
