/*
 * share.h -- running a share's user code: isolation on a pool's shares,
 * sequences of shares in one isolation, a region thread's part of a root or
 * scope, and whether a thread runs inside a tt_external's callee. This is
 * the first layer above the backend table: its inline functions call
 * tt__backend_get (backend.h, backend_serial.c) and the crew's member
 * bracket (crew.h), both calls down. Files below the backends include
 * pool_slots.h for the pool's fields, never this header.
 */
#ifndef TT_SHARE_H
#define TT_SHARE_H

#include "cpu.h"
#include "crew.h"
#include "pool_slots.h"

/* True when the calling thread runs inside the callee of a tt_external
 * that holds slots of the pool (the callee's own thread, or a thread of any
 * region the callee opened): such a thread never waits for slots. Exact
 * where the external could mark the callee (backend callee_of: a tag no
 * OpenMP routine can change, and an allocator mark); for an unmarked
 * external (the table of marks full: 256 externals at once), any thread
 * inside a parallel region is taken for a possible callee thread. */
static inline bool tt__pool_external_callee(const tt_pool *p)
{
    if (atomic_load_explicit(&((tt_pool *)p)->externals, memory_order_acquire) == 0)
        return false;
    const tt__backend *be = tt__backend_get();
    if (be->callee_of(p))
        return true;
    return atomic_load_explicit(&((tt_pool *)p)->externals_unmarked, memory_order_acquire) != 0 &&
           be->in_parallel();
}

/* Run user code fn(ctx) of a share on the calling thread as one thread to
 * OpenMP (tt__backend.isolate), unless the pool's owner promised that its
 * shares make no OpenMP call (tt_pool_attr_set_isolate_shares). A serial
 * token (pool NULL) is isolated too. */
static inline bool tt__pool_isolates(const tt_pool *pool)
{
    return !pool || pool->attr.isolate_shares;
}

static inline void tt__share_run(const tt_pool *pool, void (*fn)(void *ctx), void *ctx)
{
    if (!tt__pool_isolates(pool))
        fn(ctx);
    else
        tt__backend_get()->isolate(fn, ctx);
}

/* Shares that run one after the other in one isolation (a task's jobs,
 * the tasks of an inline run or of a short team's thread, a group's split
 * parts): each starts with the ICVs the first one started with, as it
 * would in a region of its own, whatever the ones before it set. One
 * reading before the first (when there is more than one, on a pool that
 * isolates shares) and a comparison before each next: about 10 ns. */
typedef struct tt__share_seq {
    bool on;
    tt__icvs icv;
} tt__share_seq;

static inline void tt__share_seq_begin(tt__share_seq *q, const tt_pool *pool, size_t count)
{
    q->on = count > 1 && tt__pool_isolates(pool);
    if (q->on)
        tt__backend_get()->icvs_save(&q->icv);
}

/* The same, from the reading the isolation took (backend isolate_seq;
 * NULL: none, read now). */
static inline void tt__share_seq_begin_from(tt__share_seq *q, const tt_pool *pool, size_t count,
                                            const tt__icvs *start)
{
    q->on = count > 1 && tt__pool_isolates(pool);
    if (q->on) {
        if (start)
            q->icv = *start;
        else
            tt__backend_get()->icvs_save(&q->icv);
    }
}

static inline void tt__share_seq_next(tt__share_seq *q)
{
    if (q->on)
        tt__backend_get()->icvs_restore(&q->icv);
}

/* Region thread k's part of a root or scope on region crew c: member k of
 * the crew for the whole part, and one thread to OpenMP for it (isolate),
 * or only confined (an `omp parallel` in it gets one thread) where
 * `isolate` is false: the pool's owner declared its shares OpenMP-free, or
 * the participants are their region's whole team. The one place where a
 * participant's share isolation is decided. */
static inline void tt__region_participate(tt__crew *c, unsigned k, bool isolate,
                                          void (*fn)(void *ctx), void *ctx)
{
    tt__region_member_enter(c, k);
    if (isolate) {
        c->be->isolate(fn, ctx);
    } else {
        c->be->confine();
        fn(ctx);
    }
    tt__region_member_leave(c, k);
}

/* The same for a thread of backend region_line, which starts confined:
 * only an isolated share needs a call of the backend. */
static inline void tt__region_participate_line(tt__crew *c, unsigned k, bool isolate,
                                               void (*fn)(void *ctx), void *ctx)
{
    tt__region_member_enter(c, k);
    if (isolate)
        c->be->isolate(fn, ctx);
    else
        fn(ctx);
    tt__region_member_leave(c, k);
}

#endif /* TT_SHARE_H */
