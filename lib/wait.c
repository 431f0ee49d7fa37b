/*
 * wait.c -- waits shaped like libgomp's (config/linux/wait.h): spin a
 * bounded number of polls, yield a few times, then sleep on a futex.
 *
 * Memory orders. Every wait is a handshake between one waker and one or
 * more waiters on a 32-bit word:
 *  - the waker publishes the data the waiter will read, then stores or
 *    decrements the word with release order; the waiter's acquire load of
 *    the word then makes that data visible;
 *  - the decision to make a futex system call needs a Dekker-style check:
 *    the waiter announces itself (sleepers++ or the SLEEPING bit) and then
 *    re-reads the word; the waker changes the word and then reads the
 *    announcement. Both sides use seq_cst for that pair, so at least one of
 *    them sees the other: either the waiter sees the new word and does not
 *    sleep, or the waker sees the sleeper and wakes it. Nothing weaker than
 *    seq_cst orders a store before a later load of another location.
 */
#include "internal.h"
#include "wait.h"

#include <limits.h>
#include <sched.h>

uint64_t tt__now_ns(void) { return tt__mono_ns(); }

void tt__futex_wait(_Atomic uint32_t *word, uint32_t expected)
{
#if TT__HAVE_FUTEX
    /* A spurious return (EINTR, EAGAIN because the word already changed) is
     * fine: every caller loops on its condition. */
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
#else
    if (atomic_load_explicit(word, memory_order_acquire) == expected)
        sched_yield();
#endif
}

void tt__futex_wake(_Atomic uint32_t *word, int count)
{
#if TT__HAVE_FUTEX
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, count, NULL, NULL, 0);
#else
    (void)word;
    (void)count;
#endif
}

/* A poll that took this long means the waiter was descheduled between two
 * reads of the word: the CPU is shared, so spinning on is wasteful. */
#define TT__PREEMPT_NS 200000ull
/* Read the clock only every so many polls, so that the fast path of a spin
 * is a load and a pause. */
#define TT__CLOCK_EVERY 256u

bool tt__wait_spin_ne(_Atomic uint32_t *word, uint32_t old, const tt__wait_policy *pol,
                      tt__wait_stats *stats)
{
    uint64_t polls = pol->spin_polls;
    if (pol->throttled && polls > TT__THROTTLED_POLLS)
        polls = TT__THROTTLED_POLLS;
    uint64_t last = 0, start = 0;
    if (polls >= TT__CLOCK_EVERY)
        last = start = tt__mono_ns();
    for (uint64_t i = 0; i < polls; i++) {
        if (atomic_load_explicit(word, memory_order_acquire) != old)
            return true;
        tt__cpu_relax();
        if (pol->yield_every && (i % pol->yield_every) == pol->yield_every - 1)
            sched_yield();
        if ((i & (TT__CLOCK_EVERY - 1)) == TT__CLOCK_EVERY - 1) {
            uint64_t now = tt__mono_ns();
            if (now - last > TT__PREEMPT_NS) {
                /* Descheduled: throttle this wait to the oversubscribed
                 * budget from here on, as libgomp does. */
                if (stats)
                    atomic_fetch_add_explicit(&stats->preemptions, 1, memory_order_relaxed);
                if (polls > i + TT__THROTTLED_POLLS)
                    polls = i + TT__THROTTLED_POLLS;
            }
            if (pol->spin_ns && now - start > pol->spin_ns)
                break;
            if (pol->stop && atomic_load_explicit(pol->stop, memory_order_relaxed) != pol->stop_val)
                break;
            last = now;
        }
    }
    /* A spin budget of 0 means sleep at once: no yields either. */
    unsigned yields = pol->spin_polls == 0 ? 0u : TT__YIELDS;
    for (unsigned y = 0; y < yields; y++) {
        if (atomic_load_explicit(word, memory_order_acquire) != old)
            return true;
        sched_yield();
    }
    return atomic_load_explicit(word, memory_order_acquire) != old;
}

uint32_t tt__event_wait_ne(tt__event *ev, uint32_t old, const tt__wait_policy *pol,
                           tt__wait_stats *stats, _Atomic uint64_t *slept_ctr)
{
    uint32_t v;
    if (tt__wait_spin_ne(&ev->word, old, pol, stats))
        return atomic_load_explicit(&ev->word, memory_order_acquire);
    for (;;) {
        atomic_fetch_add_explicit(&ev->sleepers, 1, memory_order_seq_cst);
        v = atomic_load_explicit(&ev->word, memory_order_seq_cst);
        if (v == old) {
            if (slept_ctr)
                atomic_fetch_add_explicit(slept_ctr, 1, memory_order_relaxed);
            tt__futex_wait(&ev->word, old);
        }
        atomic_fetch_sub_explicit(&ev->sleepers, 1, memory_order_relaxed);
        v = atomic_load_explicit(&ev->word, memory_order_acquire);
        if (v != old)
            return v;
    }
}

void tt__event_post(tt__event *ev, uint32_t value, tt__wait_stats *stats)
{
    atomic_store_explicit(&ev->word, value, memory_order_seq_cst);
    if (atomic_load_explicit(&ev->sleepers, memory_order_seq_cst) != 0) {
        if (stats)
            atomic_fetch_add_explicit(&stats->wakes, 1, memory_order_relaxed);
        tt__futex_wake(&ev->word, INT_MAX);
    }
}

void tt__event_bump(tt__event *ev, tt__wait_stats *stats)
{
    atomic_fetch_add_explicit(&ev->word, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&ev->sleepers, memory_order_seq_cst) != 0) {
        if (stats)
            atomic_fetch_add_explicit(&stats->wakes, 1, memory_order_relaxed);
        tt__futex_wake(&ev->word, INT_MAX);
    }
}

void tt__join_done(tt__join *j, tt__wait_stats *stats)
{
    /* acq_rel: release publishes the task's writes to the waiter; acquire
     * is not needed for data but keeps the RMW chain ordered for TSan. */
    uint32_t old = atomic_fetch_sub_explicit(&j->word, 1, memory_order_acq_rel);
    /* Join counts: one completion per pending task, never one too many. */
    TT__ASSERT((old & ~TT__JOIN_SLEEPING) >= 1);
    if ((old & ~TT__JOIN_SLEEPING) == 1 && (old & TT__JOIN_SLEEPING)) {
        /* The waiter sleeps (or is about to): wake it. After the decrement
         * the waiter may already have returned and its frame be reused; the
         * futex call reads no user memory, and a stray wake on a reused
         * address is harmless because every futex waiter loops. */
        if (stats)
            atomic_fetch_add_explicit(&stats->wakes, 1, memory_order_relaxed);
        tt__futex_wake(&j->word, 1);
    }
}

void tt__join_wait(tt__join *j, const tt__wait_policy *pol, tt__wait_stats *stats)
{
    uint32_t v = atomic_load_explicit(&j->word, memory_order_acquire);
    while (v != 0) {
        /* Spin while the count moves; each change restarts nothing but the
         * comparison value. */
        if (tt__wait_spin_ne(&j->word, v, pol, stats)) {
            v = atomic_load_explicit(&j->word, memory_order_acquire);
            continue;
        }
        /* Announce the sleep in the word itself, so that the completer that
         * brings the count to zero sees it in its own RMW. */
        if (!atomic_compare_exchange_strong_explicit(&j->word, &v, v | TT__JOIN_SLEEPING,
                                                     memory_order_acq_rel,
                                                     memory_order_acquire))
            continue;
        v |= TT__JOIN_SLEEPING;
        while ((v & ~TT__JOIN_SLEEPING) != 0) {
            if (stats)
                atomic_fetch_add_explicit(&stats->join_sleeps, 1, memory_order_relaxed);
            tt__futex_wait(&j->word, v);
            v = atomic_load_explicit(&j->word, memory_order_acquire);
        }
        v &= ~TT__JOIN_SLEEPING;
    }
}

/* Test hook: one spin, throttled or not, on a word that never changes;
 * returns whether the word changed (never). A throttled spin ends after
 * TT__THROTTLED_POLLS polls whatever `spin_polls` says, which the test
 * proves by asking for 2^40 polls under a timeout. */
bool tt__test_spin_once(uint64_t spin_polls, bool throttled)
{
    _Atomic uint32_t word = 0;
    tt__wait_policy pol = {.spin_polls = spin_polls, .throttled = throttled};
    return tt__wait_spin_ne(&word, 0, &pol, NULL);
}
