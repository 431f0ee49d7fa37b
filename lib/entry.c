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
