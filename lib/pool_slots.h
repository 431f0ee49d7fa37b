/*
 * pool_slots.h -- the pool and its slots (pool.c, gang.c): the pool object,
 * membership, lifecycle, slot reservation, and the block partition every
 * entry splits by. Types and declarations only: nothing here calls another
 * file, so that the files below the pool that read its fields (gang.c,
 * ledger.c) stay below the backends. Running a share, which asks the
 * backend, is in share.h.
 */
#ifndef TT_POOL_SLOTS_H
#define TT_POOL_SLOTS_H

#include "backend.h"
#include "pool_attr.h"
#include "waits.h"

struct tt__gang_waiter {
    unsigned n;
    bool prefix;
    struct tt__gang_waiter *next;
};

/* The slots of a pool are its width: every root takes as many slots as it
 * may run tasks (all or nothing), so that roots from different threads
 * together never run more than the width. On a private crew a slot's index
 * names the member that runs it; a root on the caller's team uses its own
 * region's threads 0..n-1 and its slots only count. */
enum { TT__POOL_LIVE = 0, TT__POOL_DOOMED, TT__POOL_ENDING, TT__POOL_RETIRED };

struct tt_pool {
    /* Bumped when the pool is destroyed. Pool objects are never returned to
     * the allocator (they are reused by later pools), so a token that
     * outlived its pool can still read this and report TT_EDESTROYED. */
    _Atomic uint32_t gen;
    /* Entries running on the pool's tokens, inline ones included, so that
     * a destroy under a running entry is refused (or, from a member, is
     * finished by the last entry out). `closing` is set by a destroy while
     * it checks: an entry that starts meanwhile waits for the verdict.
     * Like `gen`, both survive the reuse of the object by a later pool: a
     * stale entry that counted itself in on the retired object counts
     * itself out of the same word, so a new pool's count stays exact. */
    _Atomic uint32_t entries;
    _Atomic uint32_t closing;
    struct tt_pool *next_shell;
    /* The destroy state machine (pool.c, tt_pool_destroy): LIVE, then
     * DOOMED (destroyed from a member: the last entry out ends it), ENDING
     * (one thread claimed the teardown, under `lock`), RETIRED (in the
     * shell list). Every move happens under `lock` but the last, and a
     * destroy that finds ENDING or RETIRED returns TT_EDESTROYED, so
     * exactly one thread tears a pool down. */
    _Atomic uint32_t state;
    tt_wait_counts base;      /* counters of a reused crew at build        */
    unsigned width;
    /* The private crew, started on first need (at build for a dedicated
     * pool); NULL until then. Written once under `lock`, read without it
     * (acquire). */
    tt__crew *_Atomic crew;
    tt__crew *region_free;    /* idle region crews (under lock)            */
    /* One idle region crew kept out of the list, taken and given back with
     * one atomic exchange: the crew of the common case (one root at a
     * time) costs no mutex pair per root. */
    tt__crew *_Atomic region_spare;
    tt__crew *_Atomic regions;/* every region crew, newest first           */
    tt__wait_stats stats;     /* the waits of region crews                 */
    bool dedicated;           /* thread settings of its own                */
    struct tt_pool_attr attr; /* settings in force (thread_name not owned) */
    uint64_t forked_gen;      /* fork generation at build (TT_EFORKED)     */

    /* Slot reservation: a bitmap of free slots under a mutex, and a FIFO
     * of plain threads waiting for slots, so that acquisitions (and so
     * broadcasts) are served in one order. */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    /* Bit k set: slot k is free. One word (width <= 64) is taken and given
     * back without the mutex while nobody queues (gang.c). */
    _Atomic uint64_t *free_bits;
    _Atomic uint32_t slot_waiters; /* plain threads in the FIFO below     */
    struct tt__gang_waiter *wait_head; /* FIFO of blocking acquirers     */
    struct tt__gang_waiter *wait_tail;
    bool team_owned;          /* a tt_team owns the pool                  */

    _Atomic uint64_t installs; /* plain-thread acquisitions (ledger builds) */
    /* Ledger builds: threads running the pool's work now (high 32 bits)
     * and the most at once (low 32 bits); see ledger.c. */
    _Atomic uint64_t ledger_threads;
    /* tt_external calls running on the pool while holding its slots: a
     * thread of a callee's region that enters the pool must not wait for
     * those slots (tt__pool_external_callee). */
    _Atomic uint32_t externals;
    _Atomic uint32_t externals_unmarked; /* of those, not marked (above)  */
};

static inline tt__crew *tt__pool_crew(const tt_pool *p)
{
    return atomic_load_explicit(&((tt_pool *)p)->crew, memory_order_acquire);
}
/* The private crew, started now if it was not (TT_OK, TT_EAGAIN,
 * TT_ENOMEM, TT_ESHORTTEAM). */
int tt__pool_private_crew(tt_pool *p, tt__crew **out);
/* True when roots of the calling thread run on the pool's private crew:
 * a dedicated pool, a thread inside a parallel region, a fork() child. */
bool tt__pool_uses_private_crew(const tt_pool *p);

/* Index of the calling thread as a member of one of pool's crews, or -1;
 * *crew receives that crew. The level-1 OpenMP thread number names the
 * only member it can be in each crew, and a thread comparison confirms. */
int tt__pool_member_of(const tt_pool *pool, tt__crew **crew);
/* Take exactly n free slots for a plain thread, waiting in FIFO order
 * (timeout_ns UINT64_MAX: forever). idx receives their indices, lowest
 * first. Returns TT_OK or TT_REFUSED_UNAVAILABLE on timeout. */
int tt__gang_acquire(tt_pool *p, unsigned n, uint32_t *idx, uint64_t timeout_ns);
/* Take slots 0..n-1 exactly (broadcast), FIFO, waiting forever. */
void tt__gang_acquire_prefix(tt_pool *p, unsigned n, uint32_t *idx);
/* Take up to n free slots without waiting (a member's nested root);
 * returns how many. */
unsigned tt__gang_try_acquire(tt_pool *p, unsigned n, uint32_t *idx);
/* Take exactly n free slots or none, without waiting: TT_OK or
 * TT_REFUSED_UNAVAILABLE. */
int tt__gang_try_acquire_all(tt_pool *p, unsigned n, uint32_t *idx);
/* Take slots 0..n-1 exactly, or none, without waiting. */
int tt__gang_try_acquire_prefix(tt_pool *p, unsigned n, uint32_t *idx);
/* True when slots 0..n-1 are free now (a look, nothing taken). */
bool tt__gang_prefix_free(const tt_pool *p, unsigned n);
void tt__gang_release(tt_pool *p, unsigned n, const uint32_t *idx);
/* The everyday root's slots as a mask of the one word (pools of at most
 * 64): n free slots taken now when nobody queues (the FIFO's fast path,
 * counted as an install in ledger builds), else 0 and nothing taken; and
 * their give-back. */
uint64_t tt__gang_take_word(tt_pool *p, unsigned n);
void tt__gang_give_word(tt_pool *p, uint64_t mask);
void tt__gang_init_free(tt_pool *p);
/* Every slot free (wide pools: under the lock). */
bool tt__gang_all_free(const tt_pool *p);

/* True in a fork() child of the process that built the pool. */
bool tt__pool_forked(const tt_pool *p);
/* Count an entry in (TT_OK, or TT_EDESTROYED when the pool is gone) and
 * out (the last one out of a pool destroyed from a member tears it down). */
int tt__pool_entry_begin(tt_pool *p, uint32_t gen);
void tt__pool_entry_end(tt_pool *p);
/* Tear down a pool destroyed from a member once nothing holds it; true
 * when it did. */
bool tt__pool_finish_doomed(tt_pool *p);

/* One block partition for the whole library: `total` items in `parts`
 * contiguous blocks whose sizes differ by at most one, the larger first.
 * Block j is [*first, *first + *n). Worked example: 10 items in 4 parts are
 * 3, 3, 2, 2 (base 2, rem 2): block 1 starts at 1*2 + min(1, 2) = 3 and has
 * 2 + 1 = 3 items; block 3 starts at 3*2 + min(3, 2) = 8 and has 2. */
static inline void tt__block(size_t total, size_t parts, size_t j, size_t *first, size_t *n)
{
    size_t base = total / parts, rem = total % parts;
    *first = j * base + (j < rem ? j : rem);
    *n = base + (j < rem ? 1 : 0);
}
/* The block that item i falls in (the inverse of tt__block), and its
 * offset there. */
static inline void tt__block_find(size_t total, size_t parts, size_t i, size_t *j, size_t *r)
{
    size_t base = total / parts, rem = total % parts;
    size_t big = rem * (base + 1);
    if (i < big) {
        *j = i / (base + 1);
        *r = i % (base + 1);
    } else {
        *j = rem + (i - big) / base;
        *r = (i - big) % base;
    }
}

#endif /* TT_POOL_SLOTS_H */
