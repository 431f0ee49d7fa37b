/*
 * entry.h -- the entry frame every entry runs through (entry.c). Above
 * placement.
 */
#ifndef TT_ENTRY_H
#define TT_ENTRY_H

#include "place.h"

/* Every entry (a call that runs work under a token: tt_fork,
 * tt_for_ranges, tt_broadcast, tt_external, tt_team_scope and the entries
 * on team tokens) goes through one frame:
 *
 *   tt__entry_begin   claim the token (count the entry: token, ancestors,
 *                     pool); nothing consumed
 *   tt__entry_hold    (optional) take the inline slot the run needs
 *   tt__entry_commit  consume the token; the thread's ledger count is given
 *                     up and the inline hold entered while the work runs
 *   tt__entry_abort   a refusal before the commit: drop the hold and the
 *                     claim, return the code
 *   tt__entry_end     after the work: leave the hold, count again, and
 *                     leave the token, or (ran == false: a refusal found
 *                     after the commit, nothing ran) give it back unused
 *
 * What the entry took between begin and commit (slots, a region crew) is
 * given back by the caller before tt__entry_abort or tt__entry_end, since
 * the pool may be destroyed as soon as the claim is dropped. */
enum { TT__ENTRY_CLAIMED = 1, TT__ENTRY_RUNNING, TT__ENTRY_CLOSED };
typedef struct tt__entry {
    tt__exec *x;
    tt__inline_hold hold;
    unsigned saved; /* the ledger count given up while the work runs */
    int state;
} tt__entry;

/* The lean frame, for an entry that runs inline with nothing to place:
 * a budget-1 token without team authority that needs no slot of its pool
 * (a serial token, or a token handed to a task: its thread is the task's
 * member, or inside the inline hold of the run that minted it) and no
 * count of its own (tt__exec_counts_pool). Nothing can refuse between the
 * claim and the consume, so both come at once (begin: TT_OK, or the
 * claim's or the consume's code, nothing consumed), and the end leaves the
 * token. exec.c's inline forks and ranges take it; a budget-1 token that
 * needs a slot (a root on a plain thread) takes the full frame. */
static inline bool tt__entry_lean(const tt__exec *x)
{
    return x->budget == 1 && !(x->flags & TT__F_TEAM) && (!x->pool || (x->flags & TT__F_IN_TASK));
}
int tt__entry_lean_begin(tt__exec *x, unsigned *saved);
void tt__entry_lean_end(tt__exec *x, unsigned saved);

int tt__entry_begin(tt__entry *e, tt__exec *x);
void tt__entry_hold(tt__entry *e, const tt__placement *pl);
int tt__entry_commit(tt__entry *e);
int tt__entry_abort(tt__entry *e, int rc);
void tt__entry_end(tt__entry *e, bool ran);

#endif /* TT_ENTRY_H */
