/*
 * team.c -- persistent teams: a pool's members held as one team between
 * leaders (tt_pool_into_team, tt_team_lead, tt_team_into_pool).
 *
 * A persistent team is a control block (tt__ctl, scope.h) that outlives
 * any one call: its members run the participant loop of scope_split.c from
 * tt_pool_into_team until tt_team_into_pool, and whichever thread leads
 * (one at a time) issues commands on it through a lead token, a token with
 * team authority whose entries are the scope entries of scope_entries.c.
 * With idle_serves_pool the members go back to the pool between leaders
 * and each lead reserves them again.
 *
 * The leader role ends when the lead token is consumed or finished; token.c
 * learns how through the block's hook (tt__team_hook.lead_end), which this
 * file fills in, so that the token protocol calls nothing above it.
 */
#include "internal.h"

#include <stddef.h>
#include <stdlib.h>

/* ------------------------------------------------------------------------ */
/* Persistent teams                                                          */
/* ------------------------------------------------------------------------ */

struct tt_team {
    tt_pool *pool;
    unsigned width;
    tt__ctl ctl;
    uint32_t *members;
    tt__part_work *works;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool led;
    /* idle_serves_pool: between leaders the members go back to the pool,
     * where other roots may use them, and each lead reserves them again. */
    bool lends;
    bool lent;
};

static void team_lead_end(tt__exec *x);

/* Free a team's memory; `sync`: its lock and condition variable were
 * initialised and are destroyed too. */
static void team_free(tt_team *t, bool sync)
{
    if (sync) {
        pthread_cond_destroy(&t->cond);
        pthread_mutex_destroy(&t->lock);
    }
    free(t->members);
    free(t->works);
    free(t);
}

/* Test hook (tests/test_races.c): runs after the pool's state was checked
 * and the team took ownership, where a destroy from a member could land. */
void (*tt__test_into_team_window)(tt_pool *pool);

int tt_pool_into_team(tt_pool *pool, unsigned width, tt_team **team)
{
    if (!team)
        return TT__EINVAL("!team");
    *team = NULL;
    if (!pool)
        return TT__EINVAL("!pool");
    if (width == 0)
        return TT__EINVAL("width == 0");
    if (width > pool->width)
        return TT__EINVAL("width > pool->width");
    if (tt__pool_forked(pool))
        return TT_EFORKED;
    tt_team *t = tt__calloc_lines(1, sizeof *t);
    if (!t)
        return TT_ENOMEM;
    unsigned nm = width - 1;
    /* Slots: one per member (members[0..nm-1], the participants 1..) and
     * one for whichever thread leads (members[nm], a member left idle):
     * the leader runs the team's work too, and the pool's width caps every
     * root together (a team of width 1 on a pool of width 1 ran beside a
     * root of the pool: the ledger's per-pool peak showed 2). */
    t->members = tt__calloc(width, sizeof *t->members);
    t->works = tt__calloc(nm ? nm : 1, sizeof *t->works);
    if (!t->members || !t->works || pthread_mutex_init(&t->lock, NULL) != 0) {
        team_free(t, false);
        return TT_ENOMEM;
    }
    if (pthread_cond_init(&t->cond, NULL) != 0) {
        pthread_mutex_destroy(&t->lock);
        team_free(t, false);
        return TT_ENOMEM;
    }
    pthread_mutex_lock(&pool->lock);
    /* The generation the team is built at, which its leads' tokens carry:
     * read before the state, as tt_exec_init does (acquire, pairing with a
     * destroy's release of the state before its bump). A destroy from a
     * member moves state and generation under this lock, so both reads see
     * the pool before it or after it, never the new generation of a dying
     * pool. */
    uint32_t gen = atomic_load_explicit(&pool->gen, memory_order_acquire);
    /* A destroyed pool (from a member, or for good: a handle not reused)
     * takes no team. */
    bool dead = atomic_load_explicit(&pool->state, memory_order_acquire) != TT__POOL_LIVE;
    bool owned = dead || pool->team_owned;
    if (!owned)
        pool->team_owned = true;
    pthread_mutex_unlock(&pool->lock);
    if (tt__test_into_team_window)
        tt__test_into_team_window(pool);
    int rc = dead ? TT_EDESTROYED : owned ? TT_EBUSY : TT_OK;
    t->lends = pool->attr.idle_serves_pool;
    /* A persistent team holds its members between leaders, who may come
     * from any thread: it runs on the private crew. */
    tt__crew *crew = NULL;
    if (rc == TT_OK && nm > 0)
        rc = tt__pool_private_crew(pool, &crew);
    /* A caller that holds slots of the pool (a member, a scope's leader,
     * an inline run's hold, which it could not lend for the team's life)
     * takes the members free now or is refused: it never waits for its own
     * slots. */
    bool holder = tt__pool_thread_hold(pool) || tt__place_no_wait(pool) ||
                  tt__pool_member_of(pool, NULL) >= 0;
    if (rc == TT_OK && !(t->lends && nm > 0))
        rc = tt__gang_acquire(pool, width, t->members,
                              holder ? 0 : pool->attr.acquire_timeout_ns);
    if (rc != TT_OK) {
        if (!owned) {
            pthread_mutex_lock(&pool->lock);
            pool->team_owned = false;
            pthread_mutex_unlock(&pool->lock);
        }
        team_free(t, true);
        return rc;
    }
    t->pool = pool;
    t->width = width;
    tt__wait_policy pol = crew ? crew->team_pol : (tt__wait_policy){0};
    tt__ctl_init(&t->ctl, pool, gen, crew, width, t->members, &pol, NULL);
    t->ctl.hook.lead_end = team_lead_end;
    if (nm > 0 && !t->lends)
        tt__ctl_start_members(&t->ctl, t->works, pool->attr.pin_participants && tt__pin_allowed());
    t->lent = t->lends && nm > 0;
    *team = t;
    return TT_OK;
}

static int lead_common(tt_team *team, unsigned budget, tt_exec *ex, bool block)
{
    if (!ex)
        return TT__EINVAL("!ex");
    tt__exec *x = tt__x(ex);
    if (!team || budget == 0) {
        tt__token_mint_invalid(x);
        return TT__EINVAL(!team ? "!team" : "budget == 0");
    }
    if (tt__pool_forked(team->pool)) {
        tt__token_mint_invalid(x);
        return TT_EFORKED;
    }
    pthread_mutex_lock(&team->lock);
    if (!block && team->led) {
        pthread_mutex_unlock(&team->lock);
        return TT_REFUSED_BUSY;
    }
    while (team->led)
        pthread_cond_wait(&team->cond, &team->lock);
    team->led = true;
    pthread_mutex_unlock(&team->lock);
    if (team->lent) {
        /* Take the members back from the pool for this leader. A try
         * never waits: when other roots hold them, it gives the role back
         * and is refused (TT_REFUSED_UNAVAILABLE), nothing changed. */
        /* A caller that holds slots of the pool itself (a member, a
         * scope's leader, an inline run's hold, a lead role) never waits
         * for them: the slots it waits for may be its own. It takes the
         * members free now or is refused, as a try is. */
        bool holder = tt__pool_thread_hold(team->pool) || tt__place_no_wait(team->pool) ||
                      tt__pool_member_of(team->pool, NULL) >= 0;
        if (block && !holder) {
            tt__gang_acquire(team->pool, team->width, team->members, UINT64_MAX);
        } else if (tt__gang_try_acquire_all(team->pool, team->width, team->members) != TT_OK) {
            pthread_mutex_lock(&team->lock);
            team->led = false;
            pthread_cond_signal(&team->cond);
            pthread_mutex_unlock(&team->lock);
            return TT_REFUSED_UNAVAILABLE;
        }
        team->ctl.leader = pthread_self();
        tt__ctl_start_members(&team->ctl, team->works,
                      team->pool->attr.pin_participants && tt__pin_allowed());
        team->lent = false;
    }

    tt__token_spec spec = {
        .pool = team->pool,
        /* The generation the team was built at: a lead after a destroy
         * from a member mints a token whose entries are refused. */
        .pool_gen = team->ctl.pool_gen,
        .budget = budget < team->width ? budget : team->width,
        .flags = TT__F_TEAM | TT__F_LEAD,
        .team = &team->ctl,
        .ledger = tt__ledger_new_root(team->pool),
    };
    team->ctl.ledger = spec.ledger;
    team->ctl.leader = pthread_self();
    tt__token_mint(x, &spec);
    /* The leader holds the team's slots until its role ends: its own roots
     * of the pool meanwhile never wait for them (place.c). */
    tt__place_lead_role(team->pool, true);
    return TT_OK;
}

int tt_team_lead(tt_team *team, unsigned budget, tt_exec *ex)
{
    return lead_common(team, budget, ex, true);
}

int tt_team_try_lead(tt_team *team, unsigned budget, tt_exec *ex)
{
    return lead_common(team, budget, ex, false);
}

/* The team of a control block: the block is the team's `ctl` member. */
static tt_team *team_of_ctl(tt__ctl *c)
{
    return (tt_team *)(void *)((char *)c - offsetof(tt_team, ctl));
}

/* The end of a leader role (token.c calls it through the control block's
 * hook, tt__team_hook.lead_end, for a token minted by tt_team_lead). */
static void team_lead_end(tt__exec *x)
{
    tt_team *t = team_of_ctl(x->team);
    tt__place_lead_role(t->pool, false);
    if (t->lends && t->width > 1) {
        /* The role ends on the leader's thread: lend the members to the
         * pool until the next leader. */
        t->ctl.leader = pthread_self();
        tt__ctl_end_members(&t->ctl);
        tt__gang_release(t->pool, t->width, t->members);
        t->lent = true;
    }
    pthread_mutex_lock(&t->lock);
    t->led = false;
    pthread_cond_signal(&t->cond);
    pthread_mutex_unlock(&t->lock);
}

tt_pool *tt_team_pool(tt_team *team) { return team ? team->pool : NULL; }

unsigned tt_team_width(const tt_team *team) { return team ? team->width : 0; }

tt_pool *tt_team_into_pool(tt_team *team)
{
    if (!team)
        return NULL;
    if (tt__pool_forked(team->pool)) {
        /* In a fork child nobody can end a leader role held by a thread of
         * the parent, and the team's lock may have been copied locked:
         * touch neither, free the memory and give the pool back. */
        tt_pool *pool = team->pool;
        team_free(team, false);
        return pool;
    }
    pthread_mutex_lock(&team->lock);
    while (team->led)
        pthread_cond_wait(&team->cond, &team->lock);
    team->led = true;
    pthread_mutex_unlock(&team->lock);
    tt_pool *pool = team->pool;
    team->ctl.leader = pthread_self();
    bool forked = tt__pool_forked(pool);
    if (!forked) {
        /* In a fork child the members do not exist: nobody to end. */
        if (!team->lent) {
            if (team->width > 1)
                tt__ctl_end_members(&team->ctl);
            tt__gang_release(pool, team->width, team->members);
        }
        pthread_mutex_lock(&pool->lock);
        pool->team_owned = false;
        pthread_mutex_unlock(&pool->lock);
    }
    team_free(team, true);
    /* A pool destroyed from one of the team's members ends here, the last
     * holder out; there is no pool to give back. */
    if (!forked && tt__pool_finish_doomed(pool))
        return NULL;
    return pool;
}
