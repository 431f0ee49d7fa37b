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

/* The quick frame: the full frame of a plain thread's root on its own
 * team, with what the root holds taken on the fast paths only (exec_root.c
 * says why such a root has a path of its own). Its slots are a mask of the
 * pool's one slot word (slots 0..n-1 of the region's threads once they
 * run), taken without jumping a queue and counted as an install in ledger
 * builds; its crew is a region crew, taken where `crew` asks for one (a
 * tt_external's callee opens its own region: none). tt__entry_quick_begin
 * takes them for a root of n participants on x's pool and consumes the
 * token: 1 taken
 * (run the root, then tt__entry_quick_end, with `ran` false where nothing
 * ran and the refusal consumes nothing); 0 nothing taken, for a token that
 * is not a plain root, a pool wider than TT__QUICK_MAX or with anyone
 * queued for slots, a thread that holds or leads anything of the pool or
 * is inside a region, a tt_external running on the pool, slots taken now:
 * the general path runs; -1 refused by the claim or the consume, with the
 * code in *rc, nothing taken. The quick root (exec_root.c), the team
 * scope's root on the caller's team (scope_entries.c) and a full-width
 * tt_external (exec_entries.c) take it. */
#define TT__QUICK_MAX 64
typedef struct tt__entry_quick {
    tt__entry fr;
    uint64_t slots;
    tt__crew *crew;
} tt__entry_quick;
int tt__entry_quick_begin(tt__entry_quick *h, tt__exec *x, unsigned n, bool crew, int *rc);
void tt__entry_quick_end(tt__entry_quick *h, bool ran);

int tt__entry_begin(tt__entry *e, tt__exec *x);
void tt__entry_hold(tt__entry *e, const tt__placement *pl);
int tt__entry_commit(tt__entry *e);
int tt__entry_abort(tt__entry *e, int rc);
void tt__entry_end(tt__entry *e, bool ran);

#endif /* TT_ENTRY_H */
