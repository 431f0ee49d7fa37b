/*
 * gang.c -- the slots of a pool, and their reservation for one root.
 *
 * A pool of width W has W slots. Every root takes, before it runs, as many
 * slots as it may run tasks at once, all or nothing, and gives them back
 * when it returns: that is what makes the width a cap on all the roots of a
 * pool together, from any number of threads. On the private crew the index
 * of a slot names the member that runs it, and a member's mailbox has one
 * writer because only the holder of its slot posts to it; a root on the
 * caller's own team uses its region's threads 0..n-1 and its slots only
 * count.
 *
 * A bitmap of free slots. A plain thread waits in a FIFO (under the pool's
 * mutex) until the slots it needs are all free and takes them at once (all
 * or nothing, so two waiters never hold parts of what each other needs). A
 * member never waits: it takes what is free, or is refused at once, and it
 * does not queue behind plain threads (which may be waiting for the very
 * root that the member serves). Broadcasts take the prefix 0..n-1 through
 * the same FIFO, which puts concurrent broadcasts in one order.
 */
#include "pool_slots.h"
#include "ledger.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

/*
 * Pools of at most 64 slots (one bitmap word) take and give back slots with
 * one compare-and-swap or fetch-or on the word, without the mutex, while no
 * plain thread queues: the everyday root of one thread at a time costs two
 * atomic operations on one cache line instead of two mutex pairs (callgrind,
 * ranges of 10^3 doubles on a width-2 pool: 360 instructions per root for
 * the two pairs and the bitmap walk under them, 4 locked operations). The
 * mutex serves only the queue: a plain thread that finds the slots taken
 * queues under it and sleeps on the condition variable; a release that sees
 * `slot_waiters` non-zero takes the mutex to wake the queue. Wider pools
 * keep every operation under the mutex (the fast path never runs for them),
 * with relaxed atomics on the words.
 *
 * The lost wake-up this rules out: a waiter adds itself to `slot_waiters`
 * and then reads the word; a release writes the word and then reads
 * `slot_waiters`. All four are sequentially consistent, so at least one of
 * the two sees the other's write: either the waiter finds its slots, or the
 * release sees the waiter and broadcasts under the mutex, which the waiter
 * holds from its check until pthread_cond_wait releases it.
 */

static bool one_word(const tt_pool *p) { return p->width <= 64; }

static uint64_t prefix_mask(unsigned n) { return n >= 64 ? ~0ull : (1ull << n) - 1; }

/* The lowest n set bits of f (n <= popcount(f)). */
static uint64_t lowest_bits(uint64_t f, unsigned n)
{
    uint64_t take = 0;
    for (unsigned i = 0; i < n; i++) {
        uint64_t b = f & -f;
        take |= b;
        f &= f - 1;
    }
    return take;
}

static unsigned bits_to_idx(uint64_t take, unsigned base, uint32_t *idx)
{
    unsigned got = 0;
    while (take) {
        idx[got++] = base + (unsigned)__builtin_ctzll(take);
        take &= take - 1;
    }
    return got;
}

/* Take from the one word: exactly n slots (`all`), at most n (!all), or
 * the prefix 0..n-1. acq_rel on success: acquire pairs with the release of
 * the give-back that freed the slots (the previous holder's work on them
 * comes first), release orders this take before a later give-back's read
 * of the word. Returns how many were taken. */
static unsigned word_take(tt_pool *p, unsigned n, bool prefix, bool all, uint32_t *idx)
{
    uint64_t f = atomic_load_explicit(&p->free_bits[0], memory_order_acquire);
    for (;;) {
        uint64_t take;
        if (prefix) {
            take = prefix_mask(n);
            if ((f & take) != take)
                return 0;
        } else {
            /* The lowest min(n, free) bits, counted as they are taken: a
             * root's path has no popcount call (without a popcnt target
             * it is a libgcc function). */
            uint64_t rest = f;
            unsigned have = 0;
            take = 0;
            while (have < n && rest) {
                take |= rest & -rest;
                rest &= rest - 1;
                have++;
            }
            if (have < n && (all || have == 0))
                return 0;
        }
        if (atomic_compare_exchange_weak_explicit(&p->free_bits[0], &f, f & ~take,
                                                  memory_order_seq_cst, memory_order_acquire))
            return bits_to_idx(take, 0, idx);
    }
}

/* Wide pools, under the lock: how many slots are free. */
static unsigned words_free(const tt_pool *p)
{
    unsigned n = 0;
    for (size_t w = 0; w < (p->width + 63) / 64; w++)
        n += (unsigned)__builtin_popcountll(
            atomic_load_explicit(&((tt_pool *)p)->free_bits[w], memory_order_relaxed));
    return n;
}

static bool bit_is_free(const tt_pool *p, unsigned k)
{
    return (atomic_load_explicit(&((tt_pool *)p)->free_bits[k / 64], memory_order_relaxed) >>
            (k % 64)) & 1u;
}

static void clear_bit(tt_pool *p, unsigned k)
{
    atomic_fetch_and_explicit(&p->free_bits[k / 64], ~(1ull << (k % 64)), memory_order_relaxed);
}

void tt__gang_init_free(tt_pool *p)
{
    for (unsigned k = 0; k < p->width; k++)
        atomic_fetch_or_explicit(&p->free_bits[k / 64], 1ull << (k % 64), memory_order_relaxed);
}

bool tt__gang_all_free(const tt_pool *p)
{
    if (one_word(p))
        return atomic_load_explicit(&((tt_pool *)p)->free_bits[0], memory_order_seq_cst) ==
               prefix_mask(p->width);
    return words_free(p) == p->width;
}

/* Wide pools, under the lock: take n free slots (exactly n when `all`,
 * else as many as are free up to n), lowest first; or the prefix. */
static unsigned words_take(tt_pool *p, unsigned n, bool prefix, bool all, uint32_t *idx)
{
    if (prefix) {
        for (unsigned k = 0; k < n; k++)
            if (!bit_is_free(p, k))
                return 0;
        for (unsigned k = 0; k < n; k++) {
            clear_bit(p, k);
            idx[k] = k;
        }
        return n;
    }
    unsigned have = words_free(p);
    if (have < n && (all || have == 0))
        return 0;
    unsigned want = have < n ? have : n, got = 0;
    for (size_t w = 0; got < want; w++) {
        uint64_t f = atomic_load_explicit(&p->free_bits[w], memory_order_relaxed);
        uint64_t take = lowest_bits(f, (unsigned)__builtin_popcountll(f) < want - got
                                           ? (unsigned)__builtin_popcountll(f)
                                           : want - got);
        atomic_fetch_and_explicit(&p->free_bits[w], ~take, memory_order_relaxed);
        got += bits_to_idx(take, (unsigned)(w * 64), idx + got);
    }
    return got;
}

/* Take slots (see word_take); wide pools only under the lock. */
static unsigned take(tt_pool *p, unsigned n, bool prefix, bool all, uint32_t *idx)
{
    return one_word(p) ? word_take(p, n, prefix, all, idx) : words_take(p, n, prefix, all, idx);
}

static void queue_remove(tt_pool *p, struct tt__gang_waiter *w)
{
    struct tt__gang_waiter **pp = &p->wait_head;
    while (*pp && *pp != w)
        pp = &(*pp)->next;
    if (*pp)
        *pp = w->next;
    if (p->wait_tail == w) {
        p->wait_tail = NULL;
        for (struct tt__gang_waiter *q = p->wait_head; q; q = q->next)
            p->wait_tail = q;
    }
}

static void count_install(tt_pool *p)
{
#if TT_LEDGER_ENABLED
    atomic_fetch_add_explicit(&p->installs, 1, memory_order_relaxed);
#else
    (void)p;
#endif
}

static int acquire_fifo(tt_pool *p, unsigned n, bool prefix, uint32_t *idx, uint64_t timeout_ns)
{
    /* The fast path, and the common one: nobody queues and the slots are
     * free. No mutex, no clock. A thread that queues after the check is
     * simply served after this one. */
    if (one_word(p) && atomic_load_explicit(&p->slot_waiters, memory_order_seq_cst) == 0 &&
        word_take(p, n, prefix, true, idx) == n) {
        count_install(p);
        return TT_OK;
    }
    pthread_mutex_lock(&p->lock);
    if (!p->wait_head && take(p, n, prefix, true, idx) == n) {
        pthread_mutex_unlock(&p->lock);
        count_install(p);
        return TT_OK;
    }
    if (timeout_ns == 0) {
        pthread_mutex_unlock(&p->lock);
        return TT_REFUSED_UNAVAILABLE;
    }
    struct tt__gang_waiter me = {.n = n, .prefix = prefix, .next = NULL};
    struct timespec deadline;
    bool timed = timeout_ns != UINT64_MAX;
    if (timed) {
        clock_gettime(CLOCK_REALTIME, &deadline);
        uint64_t ns = (uint64_t)deadline.tv_nsec + timeout_ns % 1000000000ull;
        deadline.tv_sec += (time_t)(timeout_ns / 1000000000ull + ns / 1000000000ull);
        deadline.tv_nsec = (long)(ns % 1000000000ull);
    }
    if (p->wait_tail)
        p->wait_tail->next = &me;
    else
        p->wait_head = &me;
    p->wait_tail = &me;
    atomic_fetch_add_explicit(&p->slot_waiters, 1, memory_order_seq_cst);
    bool ok = false;
    for (;;) {
        if (p->wait_head == &me && take(p, n, prefix, true, idx) == n) {
            ok = true;
            break;
        }
        int rc = timed ? pthread_cond_timedwait(&p->cond, &p->lock, &deadline)
                       : pthread_cond_wait(&p->cond, &p->lock);
        if (rc == ETIMEDOUT) {
            ok = p->wait_head == &me && take(p, n, prefix, true, idx) == n;
            break;
        }
    }
    queue_remove(p, &me);
    atomic_fetch_sub_explicit(&p->slot_waiters, 1, memory_order_seq_cst);
    /* The head changed (this waiter was served or gave up): the next one
     * may be able to take its slots now. */
    if (p->wait_head)
        pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
    if (!ok)
        return TT_REFUSED_UNAVAILABLE;
    count_install(p);
    return TT_OK;
}

int tt__gang_acquire(tt_pool *p, unsigned n, uint32_t *idx, uint64_t timeout_ns)
{
    return acquire_fifo(p, n, false, idx, timeout_ns);
}

void tt__gang_acquire_prefix(tt_pool *p, unsigned n, uint32_t *idx)
{
    (void)acquire_fifo(p, n, true, idx, UINT64_MAX);
}

/* Members never wait and never queue: the one-word pools take without the
 * mutex whatever the queue holds, as the locked path always did. */
static unsigned try_take(tt_pool *p, unsigned n, bool prefix, bool all, uint32_t *idx)
{
    if (one_word(p))
        return word_take(p, n, prefix, all, idx);
    pthread_mutex_lock(&p->lock);
    unsigned got = words_take(p, n, prefix, all, idx);
    pthread_mutex_unlock(&p->lock);
    return got;
}

unsigned tt__gang_try_acquire(tt_pool *p, unsigned n, uint32_t *idx)
{
    return n == 0 ? 0 : try_take(p, n, false, false, idx);
}

int tt__gang_try_acquire_all(tt_pool *p, unsigned n, uint32_t *idx)
{
    if (n == 0)
        return TT_OK;
    return try_take(p, n, false, true, idx) == n ? TT_OK : TT_REFUSED_UNAVAILABLE;
}

int tt__gang_try_acquire_prefix(tt_pool *p, unsigned n, uint32_t *idx)
{
    return try_take(p, n, true, true, idx) == n ? TT_OK : TT_REFUSED_UNAVAILABLE;
}

bool tt__gang_prefix_free(const tt_pool *p, unsigned n)
{
    for (unsigned k = 0; k < n && k < p->width; k++)
        if (!bit_is_free(p, k))
            return false;
    return n <= p->width;
}

uint64_t tt__gang_take_word(tt_pool *p, unsigned n)
{
    /* acquire_fifo's fast path, as a mask: a pool of one word, nobody
     * queued, n slots free now. */
    if (!one_word(p) || n == 0 || atomic_load_explicit(&p->slot_waiters, memory_order_seq_cst) != 0)
        return 0;
    uint64_t f = atomic_load_explicit(&p->free_bits[0], memory_order_acquire);
    for (;;) {
        uint64_t rest = f, take = 0;
        unsigned have = 0;
        while (have < n && rest) { /* counted as taken: no popcount call */
            take |= rest & -rest;
            rest &= rest - 1;
            have++;
        }
        if (have < n)
            return 0;
        /* seq_cst, as word_take's: the acquire half pairs with the
         * give-back that freed the slots. */
        if (atomic_compare_exchange_weak_explicit(&p->free_bits[0], &f, f & ~take,
                                                  memory_order_seq_cst, memory_order_acquire)) {
            count_install(p);
            return take;
        }
    }
}

void tt__gang_give_word(tt_pool *p, uint64_t mask)
{
    /* tt__gang_release's one-word path. */
    uint64_t old = atomic_fetch_or_explicit(&p->free_bits[0], mask, memory_order_seq_cst);
    TT__INVARIANT((old & mask) == 0, "slots: a slot given back that was free");
    if (atomic_load_explicit(&p->slot_waiters, memory_order_seq_cst) != 0) {
        pthread_mutex_lock(&p->lock);
        pthread_cond_broadcast(&p->cond);
        pthread_mutex_unlock(&p->lock);
    }
}

void tt__gang_release(tt_pool *p, unsigned n, const uint32_t *idx)
{
    if (n == 0)
        return;
    if (one_word(p)) {
        uint64_t give = 0;
        for (unsigned i = 0; i < n; i++) {
            TT__ASSERT(idx[i] < p->width);
            give |= 1ull << idx[i];
        }
        /* seq_cst: the release half hands this holder's work to the next
         * taker; the store-load order against slot_waiters is the one the
         * file's opening comment needs. */
        uint64_t old = atomic_fetch_or_explicit(&p->free_bits[0], give, memory_order_seq_cst);
        TT__INVARIANT((old & give) == 0, "slots: a slot given back that was free");
        if (atomic_load_explicit(&p->slot_waiters, memory_order_seq_cst) != 0) {
            pthread_mutex_lock(&p->lock);
            pthread_cond_broadcast(&p->cond);
            pthread_mutex_unlock(&p->lock);
        }
        return;
    }
    pthread_mutex_lock(&p->lock);
    for (unsigned i = 0; i < n; i++) {
        TT__INVARIANT(idx[i] < p->width && !bit_is_free(p, idx[i]),
                      "slots: a slot given back that was free");
        atomic_fetch_or_explicit(&p->free_bits[idx[i] / 64], 1ull << (idx[i] % 64),
                                 memory_order_relaxed);
    }
    if (p->wait_head)
        pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
}
