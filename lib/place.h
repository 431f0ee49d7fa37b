/*
 * place.h -- placement (place.c): the members of a token, the slots an
 * entry takes, inline holds and lending. Above the tokens.
 */
#ifndef TT_PLACE_H
#define TT_PLACE_H

#include "tokens.h"

/* An inline hold: the one slot a thread takes to run work of a pool inline
 * while it holds nothing of it. While the run lasts the hold is on the
 * thread's hold stack, so that the thread never waits for the pool's slots
 * again. */
typedef struct tt__inline_hold {
    tt_pool *pool;
    uint32_t slot;
    bool held;
    bool mark; /* a scope leader's mark: holds slots, none to lend */
} tt__inline_hold;

/* A thread inside a hold of the pool that makes a nested entry which takes
 * slots of the same pool lends its held slot to it for the entry (the
 * parent waiting for its children keeps no slot), and takes it back after:
 * it never waits for slots while holding one. */
typedef struct tt__lend {
    tt__inline_hold *h;
    tt__ledger_saved ls;
} tt__lend;

/* Where an entry's tasks run. */
enum tt__route {
    TT__ROUTE_GANG,    /* the token's gang part, or a member's nested root  */
    TT__ROUTE_REGION,  /* a region on the calling thread's own team         */
    TT__ROUTE_PRIVATE  /* the pool's private crew; the caller waits         */
};

/* The members an entry may use, and what it took for them. */
typedef struct tt__placement {
    const uint32_t *gang; /* member indices in `crew`, or NULL             */
    uint32_t off, cnt;    /* gang[off, off + cnt)                          */
    int self;             /* caller's member index in `crew`, or -1        */
    tt__crew *crew;       /* the crew the member indices name              */
    enum tt__route route;
    unsigned acquired;    /* slots taken from the pool for this entry      */
    uint32_t *slots;      /* where the taken slot indices are              */
    tt__lend lend;        /* the inline hold's slot lent to this entry     */
} tt__placement;

/* How many members an entry reserves and how: `need` of them, slots
 * 0..need-1 exactly (`prefix`, a broadcast; waits forever), a plain thread
 * waiting at most `timeout_ns` (UINT64_MAX: forever), and under `strict`
 * all or none (a scope: a member then tops its token's gang part up to
 * `need`, and is refused when it cannot). */
typedef struct tt__reserve {
    unsigned need;
    bool prefix;
    bool strict;
    uint64_t timeout_ns;
} tt__reserve;

/* The members of token x as seen from the calling thread: TT_OK, or
 * TT_EWRONGTHREAD when the token's gang part belongs to another task. */
int tt__place_members(const tt__exec *x, tt__placement *pl);
/* A plain thread's crew, before the token is consumed: the private crew,
 * started now if it was not (TT_OK, TT_EAGAIN, TT_ENOMEM, TT_ESHORTTEAM),
 * or its own team's region (room for its threads: TT_OK or TT_EAGAIN);
 * then its region crew (TT_ENOMEM), and giving the region crew back. */
int tt__place_crew(tt_pool *pool, tt__placement *pl);
int tt__place_region_crew(tt_pool *pool, tt__placement *pl);
void tt__place_drop_crew(tt_pool *pool, tt__placement *pl);
/* Reserve the members per `r` when the token holds none (or, strict, too
 * few): `slots` and `gang` have room for r->need indices. TT_OK, or (a
 * plain thread's timeout, a strict member) TT_REFUSED_UNAVAILABLE. Every
 * outcome is undone by tt__place_unreserve: the region crew, the slots,
 * the lent slot taken back. */
int tt__place_reserve(tt_pool *pool, tt__placement *pl, const tt__reserve *r, uint32_t *slots,
                      uint32_t *gang);
void tt__place_unreserve(tt_pool *pool, tt__placement *pl);

/* Take the slot an inline run of token x needs (none when the calling
 * thread holds something of the pool already; pl: the token's placement,
 * or NULL to find it), give it back unused, and bracket the run. */
void tt__inline_hold_take(tt__inline_hold *h, const tt__exec *x, const tt__placement *pl);
void tt__inline_hold_drop(tt__inline_hold *h);
void tt__inline_hold_begin(tt__inline_hold *h);
void tt__inline_hold_end(tt__inline_hold *h);
/* The hold of `pool` the calling thread is inside (NULL: none). */
tt__inline_hold *tt__pool_thread_hold(const tt_pool *pool);
void tt__pool_hold_push(tt__inline_hold *h);
void tt__pool_hold_pop(const tt__inline_hold *h);
void tt__lend_begin(tt__lend *l, tt_pool *pool);
/* Around a scope callback led by a thread that is no member of the pool:
 * mark the thread as one that holds slots of the pool (place.c). */
void tt__place_lead_begin(tt__inline_hold *h, tt_pool *pool);
void tt__place_lead_end(tt__inline_hold *h);
/* True when the calling thread holds slots of `pool` that it cannot lend
 * (a scope leader's mark, a hold whose slot is lent, a persistent team's
 * leader role) or runs inside the
 * callee of a tt_external that holds them: it never waits for the pool's
 * slots; it takes what is free now, runs inline, or is refused. */
bool tt__place_no_wait(const tt_pool *pool);
/* True when a plain thread's root on pool needs none of the rules above:
 * the thread holds nothing of any pool inline (no hold, no mark), leads no
 * team of pool, and no tt_external of pool is running (so the thread is
 * no callee of one). Then it takes its slots FIFO as every plain thread
 * does, and no lending applies (exec_root.c, the quick root). */
bool tt__place_plain_clear(const tt_pool *pool);
/* The calling thread takes (on) or gives up (off) the leader role of a
 * persistent team of `pool`: a holder of its slots until the role ends. */
void tt__place_lead_role(const tt_pool *pool, bool on);
void tt__lend_end(tt__lend *l);

#endif /* TT_PLACE_H */
