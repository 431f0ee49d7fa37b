/*
 * entry.c -- the entry frame: the one sequence every entry runs through.
 *
 * An entry is a call that runs work under a token (tt_fork, tt_for_ranges,
 * tt_broadcast, tt_external, tt_team_scope, and their forms on a team
 * token). Each must keep the same promises, whatever its path (a root on
 * the caller's team, the private crew, inline, a team's control block):
 *
 *  - a refusal consumes nothing: everything that can refuse comes between
 *    the claim and the consumption, or, found only after it (a region whose
 *    team came out short for work that needs every thread at once), gives
 *    the token back as it was;
 *  - the pool counts the entry from the claim to the leave, so that a
 *    destroy from another thread is refused meanwhile, and every resource
 *    taken under the claim is given back before the claim is dropped;
 *  - the thread that waits for the entry's work stops counting in the
 *    ledger while it waits (the budget it held passed to the work), and a
 *    thread that runs work of the pool inline holds one slot for the run.
 *
 * The sequence is written once, here, as four calls on a record that
 * lives on the entry's stack (entry.h has the protocol), so that no entry
 * has an order of undo steps of its own; the record's state makes a call
 * out of order a broken invariant, not a lost slot.
 */
#include "entry.h"

int tt__entry_begin(tt__entry *e, tt__exec *x)
{
    *e = (tt__entry){.x = x, .hold = {.pool = x->pool}};
    int rc = tt__exec_claim(x);
    if (rc == TT_OK)
        e->state = TT__ENTRY_CLAIMED;
    return rc;
}

void tt__entry_hold(tt__entry *e, const tt__placement *pl)
{
    TT__INVARIANT(e->state == TT__ENTRY_CLAIMED && !e->hold.held,
                  "entry frame: inline hold taken outside a claim");
    tt__inline_hold_take(&e->hold, e->x, pl);
}

int tt__entry_commit(tt__entry *e)
{
    TT__INVARIANT(e->state == TT__ENTRY_CLAIMED, "entry frame: commit without a claim");
    int rc = tt__exec_consume(e->x);
    if (rc)
        return rc; /* still claimed: the caller gives back, then aborts */
    e->state = TT__ENTRY_RUNNING;
    e->saved = tt__exec_suspend(e->x);
    tt__inline_hold_begin(&e->hold);
    return TT_OK;
}

int tt__entry_abort(tt__entry *e, int rc)
{
    TT__INVARIANT(e->state == TT__ENTRY_CLAIMED, "entry frame: abort without a claim");
    e->state = TT__ENTRY_CLOSED;
    tt__inline_hold_drop(&e->hold);
    tt__exec_unclaim(e->x);
    return rc;
}

void tt__entry_end(tt__entry *e, bool ran)
{
    TT__INVARIANT(e->state == TT__ENTRY_RUNNING, "entry frame: end without a commit");
    e->state = TT__ENTRY_CLOSED;
    tt__inline_hold_end(&e->hold);
    tt__exec_resume(e->x, e->saved);
    if (ran) {
        tt__exec_leave(e->x);
    } else {
        /* Refused after the consume (a short team): nothing ran, and a
         * refusal consumes nothing. */
        tt__exec_unconsume(e->x);
        tt__exec_unclaim(e->x);
    }
}

/* The lean frame (tt__entry_lean): claim and consume at once, then the
 * ledger's suspend; the end as tt__entry_end's with ran == true. The same
 * token calls as the full frame, without the record: an inline run of a
 * budget-1 token keeps a few words on the stack per level of recursion. */
int tt__entry_lean_begin(tt__exec *x, unsigned *saved)
{
    int rc = tt__exec_enter_lean(x);
    if (rc == TT_OK)
        *saved = tt__exec_suspend(x);
    return rc;
}

void tt__entry_lean_end(tt__exec *x, unsigned saved)
{
    tt__exec_resume(x, saved);
    tt__exec_leave_lean(x);
}

/* The quick frame (entry.h, tt__entry_quick_begin). */
int tt__entry_quick_begin(tt__entry_quick *h, tt__exec *x, unsigned n, bool crew, int *rc)
{
    tt_pool *p = x->pool;
    /* A plain root token (no reborrow, no team, no task, no lead role), a
     * pool of one slot word, a root on the caller's own team, a thread
     * that holds nothing of the pool, and nobody queued for slots. */
    if (!p || x->flags != 0 || x->parent || n < 2 || n > p->width || p->width > TT__QUICK_MAX)
        return 0;
    if (tt__pool_uses_private_crew(p) || !tt__place_plain_clear(p) ||
        tt__region_room(p->width) != TT_OK ||
        atomic_load_explicit(&p->slot_waiters, memory_order_seq_cst) != 0)
        return 0;
    int r = tt__entry_begin(&h->fr, x);
    if (r) {
        *rc = r; /* the general path's claim would refuse the same way */
        return -1;
    }
    /* First come first served, as every plain thread's: taken now when
     * nobody queues (gang.c's fast path, counted as an install in ledger
     * builds), else the general path queues. */
    h->slots = tt__gang_take_word(p, n);
    if (!h->slots) {
        (void)tt__entry_abort(&h->fr, TT_OK); /* taken: the general path waits */
        return 0;
    }
    tt__ledger_install(p);
    h->crew = crew ? tt__region_crew_get(p) : NULL;
    if (crew && !h->crew) {
        tt__gang_give_word(p, h->slots);
        (void)tt__entry_abort(&h->fr, TT_OK);
        return 0;
    }
    r = tt__entry_commit(&h->fr);
    if (r) {
        tt__region_crew_put(p, h->crew);
        tt__gang_give_word(p, h->slots);
        *rc = tt__entry_abort(&h->fr, r);
        return -1;
    }
    return 1;
}

void tt__entry_quick_end(tt__entry_quick *h, bool ran)
{
    tt_pool *p = h->fr.x->pool;
    if (h->crew)
        tt__region_crew_put(p, h->crew);
    tt__gang_give_word(p, h->slots);
    tt__entry_end(&h->fr, ran);
}
