/*
 * place.c -- where an entry runs: the members of a token, the slots an
 * entry takes, inline holds and lending.
 *
 * The pooled entries (exec.c, exec_entries.c) and the team scopes
 * (scope_entries.c) place their work the same way: they find the caller's
 * member, take the gang part its token holds, top it up from the pool's
 * free slots, or, on a plain thread, start the crew that will run the work
 * and wait for the slots. The rules, written once here:
 *
 *  - A member keeps itself first and never waits for slots: the slots it
 *    would wait for may be held by its own root until this very entry
 *    returns. It takes what is free without waiting (an entry that can run
 *    on fewer takes what there is; a scope, which needs them all, takes
 *    all or none), and on a region crew, where nothing else serves, it runs
 *    alone.
 *  - A plain thread takes all the slots it needs, first come first served
 *    (gang.c's FIFO), its own included. It runs on its own team's region
 *    (the region crew is memory, taken before the token is consumed, so
 *    that a failed allocation consumes nothing), or on the private crew
 *    where it cannot.
 *  - The width caps every root of a pool together, inline runs too: a
 *    thread that runs work of the pool inline while it holds nothing of it
 *    takes one slot for the run (an inline hold). A thread inside such a
 *    run is known by the hold on its thread-local stack and never waits
 *    for a slot of that pool again; a nested entry of it that takes slots
 *    borrows the held one (lending), so that a parent waiting for its
 *    children keeps no slot.
 *
 * This file sits below exec.c and the team scopes and above the slots
 * (gang.c), the pools (pool.c) and the crews; it knows nothing of tasks,
 * scopes or the token protocol beyond the fields of a token it reads.
 */
#include "place.h"

/* ------------------------------------------------------------------------ */
/* The thread's hold stack                                                   */
/* ------------------------------------------------------------------------ */

/* The inline holds this thread is inside, innermost last. A pool appears
 * once at most (a thread inside a hold takes no second slot of its pool),
 * so the depth is the number of different pools nested inline on one
 * thread; holds past TT__HOLDS are not recorded (their nested entries wait
 * for slots as plain threads do), but they are counted, so that every pop
 * matches its push. */
#define TT__HOLDS 16
static _Thread_local tt__inline_hold *tls_holds[TT__HOLDS];
static TT__TLS_HOT unsigned tls_nholds;

tt__inline_hold *tt__pool_thread_hold(const tt_pool *pool)
{
    unsigned n = tls_nholds < TT__HOLDS ? tls_nholds : TT__HOLDS;
    for (unsigned i = 0; i < n; i++)
        if (tls_holds[i]->pool == pool)
            return tls_holds[i];
    return NULL;
}

void tt__pool_hold_push(tt__inline_hold *h)
{
    TT__INVARIANT(tls_nholds < UINT32_MAX / 2, "inline hold stack: runaway depth");
    if (tls_nholds < TT__HOLDS)
        tls_holds[tls_nholds] = h;
    tls_nholds++;
}

void tt__pool_hold_pop(const tt__inline_hold *h)
{
    TT__INVARIANT(tls_nholds > 0, "inline hold stack: pop of an empty stack");
    tls_nholds--;
    TT__INVARIANT(tls_nholds >= TT__HOLDS || tls_holds[tls_nholds] == h,
                  "inline hold stack: pop of a hold that is not the innermost");
    (void)h;
}

/* The pools of whose persistent teams this thread holds the leader role
 * (tt_team_lead, until the lead token ends): the team holds the leader's
 * slot and every member's the whole time, so the leader holds slots of the
 * pool between its entries too. Kept apart from the hold stack: a role
 * begins and ends in the order the application's tokens do, not nested. A
 * thread that leads more than TT__LEADS teams at once is not recorded for
 * the others (their pools' entries on it wait as a plain thread's do). */
#define TT__LEADS 4
static _Thread_local const tt_pool *tls_leads[TT__LEADS];
/* How many entries of tls_leads are set: 0 on every root of a thread that
 * leads no team, read without the table's __tls_get_addr. */
static TT__TLS_HOT unsigned tls_nleads;

void tt__place_lead_role(const tt_pool *pool, bool on)
{
    for (unsigned i = 0; i < TT__LEADS; i++) {
        if (on ? tls_leads[i] == NULL : tls_leads[i] == pool) {
            tls_leads[i] = on ? pool : NULL;
            if (on)
                tls_nleads++;
            else
                tls_nleads--;
            return;
        }
    }
}

static bool leads(const tt_pool *pool)
{
    if (tls_nleads == 0)
        return false;
    for (unsigned i = 0; i < TT__LEADS; i++)
        if (tls_leads[i] == pool)
            return true;
    return false;
}

/* ------------------------------------------------------------------------ */
/* The members of a token                                                    */
/* ------------------------------------------------------------------------ */

int tt__place_members(const tt__exec *x, tt__placement *pl)
{
    *pl = (tt__placement){.self = -1, .route = TT__ROUTE_GANG};
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

/* ------------------------------------------------------------------------ */
/* The crew of a plain thread                                                */
/* ------------------------------------------------------------------------ */

int tt__place_crew(tt_pool *pool, tt__placement *pl)
{
    TT__ASSERT(pl->self < 0 && !pl->gang);
    if (tt__pool_uses_private_crew(pool)) {
        tt__crew *crew;
        int rc = tt__pool_private_crew(pool, &crew);
        if (rc == TT_OK) {
            pl->route = TT__ROUTE_PRIVATE;
            pl->crew = crew;
        }
        return rc;
    }
    /* A root on this thread's own team: room for the region's threads
     * (libgomp would end the process where it cannot start them). */
    pl->route = TT__ROUTE_REGION;
    return tt__region_room(pool->width);
}

int tt__place_region_crew(tt_pool *pool, tt__placement *pl)
{
    TT__ASSERT(pl->route == TT__ROUTE_REGION && !pl->crew);
    pl->crew = tt__region_crew_get(pool);
    return pl->crew ? TT_OK : TT_ENOMEM;
}

void tt__place_drop_crew(tt_pool *pool, tt__placement *pl)
{
    if (pl->route == TT__ROUTE_REGION && pl->crew)
        tt__region_crew_put(pool, pl->crew);
    if (pl->route == TT__ROUTE_REGION)
        pl->crew = NULL;
}

/* ------------------------------------------------------------------------ */
/* Reserving and giving back                                                 */
/* ------------------------------------------------------------------------ */

/* A member: itself first, then its token's gang part (topped up to `need`
 * under `strict`), then free slots of its private crew without waiting. */
static int reserve_member(tt_pool *pool, tt__placement *pl, const tt__reserve *r,
                          uint32_t *slots, uint32_t *gang)
{
    unsigned have = 1;
    gang[0] = (uint32_t)pl->self;
    if (pl->gang)
        for (uint32_t i = 1; i < pl->cnt && have < r->need; i++)
            gang[have++] = pl->gang[pl->off + i];
    unsigned want = r->need - have;
    if (want > 0 && pl->crew->kind == TT__CREW_PRIVATE) {
        if (!r->strict) {
            pl->acquired = tt__gang_try_acquire(pool, want, slots);
        } else if (tt__gang_try_acquire_all(pool, want, slots) == TT_OK) {
            pl->acquired = want;
        } else {
            return TT_REFUSED_UNAVAILABLE;
        }
        for (unsigned i = 0; i < pl->acquired; i++)
            gang[have + i] = slots[i];
    } else if (want > 0 && r->strict) {
        return TT_REFUSED_UNAVAILABLE; /* a region crew: nothing else serves */
    }
    pl->gang = gang;
    pl->off = 0;
    pl->cnt = have + pl->acquired;
    return TT_OK;
}

/* A plain thread: all `need` slots, FIFO (or taken already, without
 * waiting, by a thread of a tt_external callee). Inside an inline run of
 * the pool, that run's slot is lent to this entry first. */
static int reserve_plain(tt_pool *pool, tt__placement *pl, const tt__reserve *r,
                         uint32_t *slots, uint32_t *gang)
{
    if (pl->acquired == 0)
        tt__lend_begin(&pl->lend, pool);
    if (pl->acquired == r->need) {
        /* taken already, without waiting (a callee of tt_external) */
    } else if (r->prefix) {
        tt__gang_acquire_prefix(pool, r->need, slots);
    } else {
        int rc = tt__gang_acquire(pool, r->need, slots, r->timeout_ns);
        if (rc)
            return rc;
    }
    tt__ledger_install(pool);
    pl->slots = slots;
    pl->acquired = r->need;
    pl->off = 0;
    pl->cnt = r->need;
    if (pl->route == TT__ROUTE_REGION) {
        /* Region thread k is member k. */
        for (unsigned i = 0; i < r->need; i++)
            gang[i] = i;
        pl->gang = gang;
    } else {
        pl->gang = slots;
    }
    return TT_OK;
}

int tt__place_reserve(tt_pool *pool, tt__placement *pl, const tt__reserve *r, uint32_t *slots,
                      uint32_t *gang)
{
    if (pl->gang && !r->strict)
        return TT_OK;
    TT__ASSERT(pl->acquired == 0 || pl->slots == slots);
    pl->slots = slots;
    if (pl->self >= 0)
        return reserve_member(pool, pl, r, slots, gang);
    return reserve_plain(pool, pl, r, slots, gang);
}

void tt__place_unreserve(tt_pool *pool, tt__placement *pl)
{
    tt__place_drop_crew(pool, pl);
    if (pl->acquired)
        tt__gang_release(pool, pl->acquired, pl->slots);
    pl->acquired = 0;
    tt__lend_end(&pl->lend);
}

/* ------------------------------------------------------------------------ */
/* Inline holds and lending                                                  */
/* ------------------------------------------------------------------------ */

/* A thread that runs work of the pool inline while it holds nothing of it
 * (no member, not inside a callee of the pool's own tt_external, not
 * inside another inline run of the pool) takes one slot for the run,
 * waiting for it first come first served as roots do. Without it, plain
 * threads with budget-1 roots on a pool of width 1 ran side by side (the
 * ledger's per-pool peak showed 2). */
static bool inline_slot_needed(const tt__exec *x, const tt__placement *pl)
{
    return x->pool && !(x->flags & TT__F_TEAM) && pl->self < 0 && !pl->gang &&
           !tt__pool_thread_hold(x->pool) && !leads(x->pool) &&
           !tt__pool_external_callee(x->pool);
}

void tt__inline_hold_take(tt__inline_hold *h, const tt__exec *x, const tt__placement *pl)
{
    *h = (tt__inline_hold){.pool = x->pool};
    tt__placement own;
    if (!pl) {
        if (tt__place_members(x, &own) != TT_OK)
            return;
        pl = &own;
    }
    if (!inline_slot_needed(x, pl))
        return;
    tt__gang_acquire(x->pool, 1, &h->slot, UINT64_MAX);
    h->held = true;
}

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

void tt__inline_hold_end(tt__inline_hold *h)
{
    if (h->held) {
        tt__pool_hold_pop(h);
        tt__inline_hold_drop(h);
    }
}

/* A thread that leads a scope of the pool while it is no member of it (a
 * scope on the private crew, a team token's leader) holds the scope's
 * slots, its own included, until the scope's callback returns; it has no
 * single slot it could lend. Its mark on the hold stack (a hold that holds
 * nothing) tells every entry it makes on the pool meanwhile that it holds
 * slots: an inline run takes no slot for itself, and an entry that needs
 * more takes what is free now or runs inline (tt__place_no_wait). A thread
 * already inside a hold of the pool is known by that hold. */
void tt__place_lead_begin(tt__inline_hold *h, tt_pool *pool)
{
    *h = (tt__inline_hold){.pool = pool};
    if (pool && !tt__pool_thread_hold(pool)) {
        h->mark = true;
        tt__pool_hold_push(h);
    }
}

void tt__place_lead_end(tt__inline_hold *h)
{
    if (h->mark)
        tt__pool_hold_pop(h);
    h->mark = false;
}

bool tt__place_no_wait(const tt_pool *pool)
{
    const tt__inline_hold *h = tt__pool_thread_hold(pool);
    return (h && !h->held) || leads(pool) || tt__pool_external_callee(pool);
}

bool tt__place_plain_clear(const tt_pool *pool)
{
    return tls_nholds == 0 && !leads(pool) &&
           atomic_load_explicit(&((tt_pool *)pool)->externals, memory_order_acquire) == 0;
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
    l->h = NULL;
}
