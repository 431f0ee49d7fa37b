/*
 * tokens.h -- tokens (token.c): their layout, minting, the entry protocol
 * (claim, consume, leave), the split of tt_for_ranges and its dynamic
 * chunks, and the cost kinds (cost.c). Above the pool and the ledger.
 */
#ifndef TT_TOKENS_H
#define TT_TOKENS_H

#include "share.h"
#include "ledger.h"

enum {
    TT__MAGIC_LIVE = 0x7474ec01u,
    TT__MAGIC_CONSUMED = 0x7474ec02u,
    TT__MAGIC_FINISHED = 0x7474ec03u,
    TT__MAGIC_INVALID = 0x7474ec0fu
};

enum {
    TT__F_FORK_CHILD = 1u << 0, /* derived from tt_fork                    */
    TT__F_IN_TASK = 1u << 1,    /* held by a task the library started       */
    TT__F_TEAM = 1u << 2,       /* carries team authority                   */
    TT__F_BAD_LIMIT = 1u << 3,  /* tt_exec_limit(ex, 0): next entry EINVAL  */
    TT__F_SERIAL = 1u << 4,     /* no pool                                  */
    TT__F_LEAD = 1u << 5,       /* minted by tt_team_lead: ends the role    */
    TT__F_OWNED = 1u << 6       /* usable only on `owner` (tt_scope_reborrow) */
};

/* Bits of tt__exec.busy: the low bits count reborrowed descendants inside
 * entries; TT__BUSY_ENTRY marks the token's own entry; TT__BUSY_ENDING
 * marks a team-lead token finished while a descendant was inside: the
 * descendant's leave ends the leader role (token.c). */
#define TT__BUSY_ENTRY 0x80000000u
#define TT__BUSY_ENDING 0x40000000u

typedef struct tt__exec {
    struct tt__exec *self;     /* == the token's own address; a copy differs */
    _Atomic uint32_t magic;
    uint32_t flags;
    uint32_t budget;
    uint32_t gang_off;         /* this token's members: gang[off, off+cnt)  */
    uint32_t gang_cnt;
    uint32_t pool_gen;         /* pool->gen when minted                     */
    _Atomic uint32_t busy;
    tt_pool *pool;
    const uint32_t *gang;      /* member indices, or NULL: none reserved    */
    struct tt__exec *parent;   /* reborrow parent, or NULL                  */
    void *ledger;              /* ledger root record (ledger builds)        */
    void *team;                /* team authority (tt_team), or NULL         */
    pthread_t owner;           /* the task's thread, for tokens it was handed */
    _Atomic int *fork_fail;    /* a fork job's child: its fork's failure word */
} tt__exec;

_Static_assert(sizeof(tt__exec) <= sizeof(tt_exec), "tt_exec too small");
_Static_assert(_Alignof(tt__exec) <= _Alignof(tt_exec), "tt_exec misaligned");

static inline tt__exec *tt__x(tt_exec *ex) { return (tt__exec *)(void *)ex; }
static inline const tt__exec *tt__cx(const tt_exec *ex)
{
    return (const tt__exec *)(const void *)ex;
}

/* What a new token holds; every field not named is zero. `owner` matters
 * with TT__F_IN_TASK or TT__F_OWNED (the token's thread). */
typedef struct tt__token_spec {
    tt_pool *pool;
    uint32_t pool_gen;
    unsigned budget;
    uint32_t flags;
    const uint32_t *gang;
    uint32_t gang_off, gang_cnt;
    void *ledger;
    void *team;
    pthread_t owner;
    tt__exec *parent;
    _Atomic int *fork_fail; /* a fork job's child: tt_fork_fail stores here */
} tt__token_spec;

/* Mint a live token in place: the one way a token of any kind is made
 * (roots, reborrows, fork children in exec_entries.c, scope and lead tokens in
 * team.c). */
static inline void tt__token_mint(tt__exec *x, const tt__token_spec *s)
{
    /* Inline, every field stored once (nothing reads the rest of the
     * tt_exec), then the magic that makes it live: a lean fork mints one
     * child per job, and inline the spec folds into the stores. */
    x->self = x;
    x->flags = s->flags;
    x->budget = s->budget;
    x->pool = s->pool;
    x->pool_gen = s->pool_gen;
    x->gang = s->gang;
    x->gang_off = s->gang_off;
    x->gang_cnt = s->gang_cnt;
    x->ledger = s->ledger;
    x->team = s->team;
    x->owner = s->owner;
    x->parent = s->parent;
    x->fork_fail = s->fork_fail;
    atomic_store_explicit(&x->busy, 0, memory_order_relaxed);
    atomic_store_explicit(&x->magic, TT__MAGIC_LIVE, memory_order_release);
}
/* Run job `i` of a fork with its child token: minted from s in `child`
 * (the caller's frame, so that a lean fork's recursion stacks one token a
 * level), the job counted in the ledger while it runs, and the child
 * finished after it (an entry on a child that outlived its job is
 * refused). Every fork runs its jobs through this: the general path's
 * tasks, the lean and the quick roots, a scope fork's groups. */
static inline void tt__job_run(tt_exec *child, const tt__token_spec *s, tt_job_fn job, void *arg,
                               unsigned i)
{
    tt__exec *c = (tt__exec *)(void *)child;
    tt__token_mint(c, s);
    tt__ledger_enter(s->ledger);
    job(arg, i, child);
    tt__ledger_leave(s->ledger);
    atomic_store_explicit(&c->magic, TT__MAGIC_FINISHED, memory_order_relaxed);
}

/* Leave x an invalid token: every entry on it returns TT_EINVAL. */
void tt__token_mint_invalid(tt__exec *x);
/* The state of one token (not its chain): TT_OK when a live original,
 * else TT_EINVAL, TT_ECOPY or TT_ECONSUMED. */
int tt__token_check_one(const tt__exec *x);
/* What tt_broadcast on x would return now without running (TT_OK: it
 * would run): the one rule behind tt_broadcast and tt_can_broadcast. */
int tt__token_broadcast_verdict(const tt__exec *x);

/* Whether an entry on x counts itself in its pool's entries (token.c,
 * claim and leave). A token handed to a library task (TT__F_IN_TASK, and
 * its reborrows) is usable only on the task's thread while the task runs,
 * and the task runs inside its parent's entry, which the pool counts until
 * every task of it is done: that count already keeps a destroy from
 * another thread out, and the generation check (tt__exec_check) refuses
 * the entry after a destroy from a member. Counting it again would put one
 * more read-modify-write of the pool's one shared line on every nested
 * entry, from every thread of the pool at once. */
static inline bool tt__exec_counts_pool(const tt__exec *x)
{
    return x->pool && !(x->flags & TT__F_IN_TASK);
}

/* Entry protocol (token.c), used by exec.c and team.c: check a token (and
 * its whole reborrow chain, bounded), claim and consume it (every refusal,
 * TT_EBUSY included, comes before the consumption), give its ledger slot up
 * while it waits, and release it. */
int tt__exec_check(const tt__exec *x);
/* claim: count the entry (token, ancestors, pool) without consuming;
 * consume: the token is used up (the caller undoes the claim on failure);
 * unclaim: a refusal after the claim, nothing consumed; unconsume: a
 * refusal found after the consume (the claim still held). Entries use them
 * through the entry frame (entry.c), never one by one. */
int tt__exec_claim(tt__exec *x);
int tt__exec_consume(tt__exec *x);
void tt__exec_unconsume(tt__exec *x);
void tt__exec_unclaim(tt__exec *x);
void tt__exec_leave(tt__exec *x);
/* Claim and consume at once (the lean frame, entry.c): TT_OK, TT_EBUSY or
 * TT_ECONSUMED, nothing consumed on a refusal. */
int tt__exec_enter_lean(tt__exec *x);
void tt__exec_leave_lean(tt__exec *x);

/* Team-authority entries (scope_entries.c, called by exec_entries.c). */
int tt__team_fork(tt__exec *x, unsigned jobs, tt_job_fn job, void *arg);
int tt__team_for_ranges(tt__exec *x, size_t len, size_t grain, tt_range_fn body, void *arg);
struct tt__chunks;
int tt__team_for_chunks(tt__exec *x, struct tt__chunks *k);
int tt__team_broadcast(tt__exec *x, tt_bcast_fn fn, void *arg);
/* The head of the control block a team token carries in its `team` field:
 * all that token.c knows of teams, so that the token protocol calls nothing
 * above it. `busy`: a command (section, split) is in flight, written only
 * by the block's leader, the one thread that uses a team token of the block
 * (TT__F_OWNED, TT__F_IN_TASK, a lead token's leader); an entry on such a
 * token is then refused (TT_EBUSY) before it claims anything. `lead_end`:
 * ends the leader role of a token minted by tt_team_lead (persistent teams,
 * team.c; NULL in every other block), called exactly once per lead token. */
typedef struct tt__team_hook {
    bool busy;
    void (*lead_end)(tt__exec *x);
} tt__team_hook;

/* tt_for_ranges' split, shared by the pooled and the team paths: at most
 * `budget` ranges of at least `grain` (one range when len < grain), and
 * range j of n, contiguous, sizes differing by at most one. */
static inline unsigned tt__range_tasks(size_t len, size_t grain, unsigned budget)
{
    size_t chunks = len / grain;
    if (chunks == 0)
        chunks = 1;
    return chunks < budget ? (unsigned)chunks : budget;
}

static inline void tt__range_of(size_t len, unsigned n, size_t j, size_t *begin, size_t *end)
{
    size_t cnt;
    tt__block(len, n, j, begin, &cnt);
    *end = *begin + cnt;
}

/* tt_for_ranges_dynamic's chunks, shared by the pooled and the team paths:
 * ceil(len / grain) chunks of `grain` indices (the last one shorter); task
 * t of n starts with chunk t (the caller's task with chunk 0), then takes
 * the lowest chunk not yet taken each time it is free (`next` starts at n,
 * set by the entry once it knows n). Chunk c is
 * [c * grain, min(len, (c + 1) * grain)). */
typedef struct tt__chunks {
    tt_range_fn body;
    void *arg;
    size_t len, grain, count;
    _Atomic size_t next; /* the next chunk not yet taken */
} tt__chunks;

static inline void tt__chunks_init(tt__chunks *k, size_t len, size_t grain, tt_range_fn body,
                                   void *arg)
{
    k->body = body;
    k->arg = arg;
    k->len = len;
    k->grain = grain;
    k->count = len / grain + (len % grain != 0);
    atomic_init(&k->next, 0);
}

static inline unsigned tt__chunks_tasks(const tt__chunks *k, unsigned budget)
{
    return k->count < budget ? (unsigned)k->count : budget;
}

/* Task `task`'s next chunk (its first: chunk `task`): false when none is
 * left. */
static inline bool tt__chunks_take(tt__chunks *k, bool first, unsigned task, size_t *begin,
                                   size_t *end)
{
    size_t c = first ? task : atomic_fetch_add_explicit(&k->next, 1, memory_order_relaxed);
    if (c >= k->count)
        return false;
    *begin = c * k->grain;
    *end = k->len - *begin < k->grain ? k->len : *begin + k->grain;
    return true;
}

/* Kinds of token for the cost model. */
enum tt__cost_kind {
    TT__KIND_SERIAL = 0, /* runs inline: no dispatch cost                  */
    TT__KIND_TEAM,       /* carries team authority                         */
    TT__KIND_IN_POOL,    /* the caller is a member of the token's pool     */
    TT__KIND_OUTSIDE     /* a plain thread that enters the pool            */
};
/* The kind of a token as seen from the calling thread. */
enum tt__cost_kind tt__exec_cost_kind(const tt_exec *ex);
/* The dispatch costs in force for a pool (attr's, or the host default). */
const tt_dispatch_costs *tt__pool_costs(const tt_pool *pool);

/* A token held by a library task gives up its slot while it waits for its
 * children, and takes it back after (token protocol; inline here, below
 * the ledger's declarations, since every entry calls them). The ledger
 * knows whether this thread counts for the root (a task's thread does, a
 * plain caller of a root does not). */
static inline unsigned tt__exec_suspend(const tt__exec *x)
{
    return tt__ledger_suspend(x->ledger);
}
static inline void tt__exec_resume(const tt__exec *x, unsigned saved)
{
    tt__ledger_resume(x->ledger, saved);
}

#endif /* TT_TOKENS_H */
