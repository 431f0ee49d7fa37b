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
 * A bitmap of free slots under the pool's mutex. A plain thread waits in a
 * FIFO until the slots it needs are all free and takes them at once (all or
 * nothing, so two waiters never hold parts of what each other needs). A
 * member never waits: it takes what is free, or is refused at once, and it
 * does not queue behind plain threads (which may be waiting for the very
 * root that the member serves). Broadcasts take the prefix 0..n-1 through
 * the same FIFO, which puts concurrent broadcasts in one order.
 */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

static bool bit_is_free(const tt_pool *p, unsigned k)
{
    return (p->free_bits[k / 64] >> (k % 64)) & 1u;
}

void tt__gang_init_free(tt_pool *p)
{
    for (unsigned k = 0; k < p->width; k++)
        p->free_bits[k / 64] |= 1ull << (k % 64);
    p->free_count = p->width;
}

/* Take n free slots, lowest first. Caller holds the lock and checked. */
static void take_lowest(tt_pool *p, unsigned n, uint32_t *idx)
{
    unsigned got = 0;
    size_t words = (p->width + 63) / 64;
    for (size_t w = 0; w < words && got < n; w++) {
        while (p->free_bits[w] && got < n) {
            unsigned b = (unsigned)__builtin_ctzll(p->free_bits[w]);
            p->free_bits[w] &= ~(1ull << b);
            idx[got++] = (uint32_t)(w * 64 + b);
        }
    }
    TT__ASSERT(got == n);
    p->free_count -= got;
}

static bool prefix_free(const tt_pool *p, unsigned n)
{
    for (unsigned k = 0; k < n; k++)
        if (!bit_is_free(p, k))
            return false;
    return true;
}

static void take_prefix(tt_pool *p, unsigned n, uint32_t *idx)
{
    for (unsigned k = 0; k < n; k++) {
        p->free_bits[k / 64] &= ~(1ull << (k % 64));
        idx[k] = k;
    }
    p->free_count -= n;
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

static bool can_take(const tt_pool *p, unsigned n, bool prefix)
{
    return prefix ? prefix_free(p, n) : p->free_count >= n;
}

static int acquire_fifo(tt_pool *p, unsigned n, bool prefix, uint32_t *idx, uint64_t timeout_ns)
{
    pthread_mutex_lock(&p->lock);
    /* The fast path, and the common one: nobody queues and the slots are
     * free. No clock is read. */
    if (!p->wait_head && can_take(p, n, prefix)) {
        if (prefix)
            take_prefix(p, n, idx);
        else
            take_lowest(p, n, idx);
        pthread_mutex_unlock(&p->lock);
        atomic_fetch_add_explicit(&p->installs, 1, memory_order_relaxed);
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
    for (;;) {
        if (p->wait_head == &me && can_take(p, n, prefix))
            break;
        int rc = timed ? pthread_cond_timedwait(&p->cond, &p->lock, &deadline)
                       : pthread_cond_wait(&p->cond, &p->lock);
        if (rc == ETIMEDOUT) {
            if (!(p->wait_head == &me && can_take(p, n, prefix))) {
                queue_remove(p, &me);
                pthread_cond_broadcast(&p->cond); /* the head may have changed */
                pthread_mutex_unlock(&p->lock);
                return TT_REFUSED_UNAVAILABLE;
            }
            break;
        }
    }
    if (prefix)
        take_prefix(p, n, idx);
    else
        take_lowest(p, n, idx);
    queue_remove(p, &me);
    if (p->wait_head)
        pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
    atomic_fetch_add_explicit(&p->installs, 1, memory_order_relaxed);
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

unsigned tt__gang_try_acquire(tt_pool *p, unsigned n, uint32_t *idx)
{
    if (n == 0)
        return 0;
    pthread_mutex_lock(&p->lock);
    unsigned got = n < p->free_count ? n : p->free_count;
    take_lowest(p, got, idx);
    pthread_mutex_unlock(&p->lock);
    return got;
}

int tt__gang_try_acquire_all(tt_pool *p, unsigned n, uint32_t *idx)
{
    if (n == 0)
        return TT_OK;
    pthread_mutex_lock(&p->lock);
    bool ok = p->free_count >= n;
    if (ok)
        take_lowest(p, n, idx);
    pthread_mutex_unlock(&p->lock);
    return ok ? TT_OK : TT_REFUSED_UNAVAILABLE;
}

int tt__gang_try_acquire_prefix(tt_pool *p, unsigned n, uint32_t *idx)
{
    pthread_mutex_lock(&p->lock);
    bool ok = prefix_free(p, n);
    if (ok)
        take_prefix(p, n, idx);
    pthread_mutex_unlock(&p->lock);
    return ok ? TT_OK : TT_REFUSED_UNAVAILABLE;
}

void tt__gang_release(tt_pool *p, unsigned n, const uint32_t *idx)
{
    if (n == 0)
        return;
    pthread_mutex_lock(&p->lock);
    for (unsigned i = 0; i < n; i++) {
        TT__ASSERT(idx[i] < p->width && !bit_is_free(p, idx[i]));
        p->free_bits[idx[i] / 64] |= 1ull << (idx[i] % 64);
    }
    p->free_count += n;
    TT__ASSERT(p->free_count <= p->width);
    if (p->wait_head)
        pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
}
