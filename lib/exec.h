/*
 * exec.h -- the task engine of the entries on pooled tokens (exec.c),
 * shared with the entries themselves (exec_entries.c): an entry record and
 * its tasks, and the one path every such entry runs through. Types and
 * declarations only; included by those two files alone.
 */
#ifndef TT_EXEC_H
#define TT_EXEC_H

#include "internal.h"

typedef struct entry entry;
typedef struct task {
    tt__work w;
    entry *e;
    unsigned index;
    uint32_t off, cnt; /* the task's members: gang[off, off + cnt) */
    unsigned share;
} task;

struct entry {
    tt__join join;
    void (*body)(entry *e, const task *t);
    const uint32_t *gang;
    tt__crew *crew;
    tt_pool *pool;
    uint32_t pool_gen; /* children belong to the pool the entry's token did */
    bool sleepy;       /* the waiter spins little: the work hands its CPU on */
    void *ledger;
};

typedef struct range_entry {
    entry e;
    tt_range_fn body;
    void *arg;
    size_t len;
    unsigned ntasks;
} range_entry;

/* The common body of tt_fork, tt_for_ranges, tt_broadcast and tt_external
 * on a token without team authority, inside the entry frame (entry.c):
 * locate the caller, run inline when one task (or no crew) suffices,
 * otherwise reserve `need` members and run `ntasks` tasks splitting
 * `budget`. */
typedef struct run_spec {
    unsigned ntasks, budget, need;
    bool prefix; /* take slots 0..need-1 (broadcast)                    */
    bool one;    /* one task on the first member, the rest held (external) */
    /* With `one`: run the entry inline at width 1 when it does not spread
     * (tt_external's callee on this thread, exec_entries.c). */
    void (*inline_one)(entry *e);
} run_spec;

/* Run an entry in a frame already begun (tt_external; and below). */
int tt__exec_run_entry(tt__entry *fr, entry *e, run_spec sp);

/* Begin the entry frame on x and run the entry (tt_fork, tt_for_ranges,
 * tt_broadcast). Inline, as the next one, so that the entries in
 * exec_entries.c pay no call for them. */
static inline int tt__exec_enter_and_run(tt__exec *x, entry *e, run_spec sp)
{
    tt__entry fr;
    int rc = tt__entry_begin(&fr, x);
    if (rc)
        return rc;
    return tt__exec_run_entry(&fr, e, sp);
}

/* The spec of task t's child token (tt__job_run mints it). */
static inline tt__token_spec tt__exec_child_spec(const entry *e, const task *t, uint32_t flags,
                                                 void *team)
{
    tt__token_spec s = {.pool = e->pool, .pool_gen = e->pool_gen, .budget = t->share,
                        .flags = flags, .ledger = e->ledger, .team = team,
                        .owner = pthread_self()};
    if (t->cnt > 0) {
        s.gang = e->gang;
        s.gang_off = t->off;
        s.gang_cnt = t->cnt;
    }
    return s;
}
/* The body of a plain split: task k runs range k. */
void tt__exec_range_body(entry *e, const task *t);

/* The end of a root's region (exec.c, the essay before tt__root_end_wait):
 * the handshake by which participant 0 reaches the runtime's end barrier
 * first, in a line of its own that only these updates write. */
typedef struct tt__root_end {
    /* TT__END_LEAD_WAITS: participants 1..n-1 count down, participant 0
     * waits, then says it is done and the others wait for that.
     * TT__END_LEAD_FIRST: participant 0 says it is done, the others wait
     * for that. */
    tt__join join TT__ALIGNED;
    _Atomic uint32_t lead_done;
} tt__root_end;

/* Choose the end order of a root of n participants on pool's region crew
 * (enum tt__region_end) and make its handshake ready. *watch_ns: 0, or the
 * time the region starts at when its length decides later roots' order
 * (tt__root_end_after). */
uint8_t tt__root_end_begin(tt__root_end *f, tt_pool *pool, tt__crew *crew, unsigned n,
                           uint64_t *watch_ns);
/* After the region: TT__CHAIN_ROOTS watched roots in a row that each took
 * TT__CHAIN_NS or more keep the crew's roots on the caller's join for
 * TT__JOIN_HOLD_NS. */
static inline void tt__root_end_after(tt__crew *crew, uint64_t watch_ns)
{
    if (!watch_ns)
        return;
    uint64_t now = tt__mono_ns();
    if (now - watch_ns < TT__CHAIN_NS) {
        if (crew->lead.long_roots)
            crew->lead.long_roots = 0;
    } else if (++crew->lead.long_roots >= TT__CHAIN_ROOTS) {
        crew->lead.long_roots = 0;
        crew->lead.join_until_ns = now + TT__JOIN_HOLD_NS;
    }
}
/* Participant k's end: what the order asks of it before the barrier. */
void tt__root_end_wait(tt__root_end *f, uint8_t end, tt__crew *c, unsigned k);

/* The quick root (exec_root.c): a plain thread's fork of one job per slot
 * or plain split on its own team, in one line for the region's threads. */
enum { TT__QUICK_FORK = 1, TT__QUICK_RANGES = 2 };
typedef struct tt__quick {
    uint8_t kind;     /* TT__QUICK_FORK or TT__QUICK_RANGES            */
    unsigned n;       /* tasks: jobs of the fork, ranges of the split  */
    union {
        tt_job_fn job;
        tt_range_fn range;
    } fn;
    void *arg;
    size_t len;       /* ranges: the length split into n ranges        */
    _Atomic int *fail;/* fork: the fork's failure word                 */
} tt__quick;
/* Run q as a quick root on x when nothing about x, its pool or the calling
 * thread asks for the general path: true, with *rc the entry's result (as
 * the general path would return it). False when it did nothing and took
 * nothing: the caller takes the general path. */
bool tt__exec_root_quick(tt__exec *x, const tt__quick *q, int *rc);


#endif /* TT_EXEC_H */
