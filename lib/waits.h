/*
 * waits.h -- the waits (wait.c): spin / yield / futex waits shaped like
 * libgomp's, their counters and policies, events and joins, and the order in
 * which a root's region ends. Above base.h only; the futex system call
 * itself is in futex.h, which only the files that make it include.
 */
#ifndef TT_WAITS_H
#define TT_WAITS_H

#include "base.h"

/* Counters of the waits, one set per pool. They are relaxed atomics bumped
 * only on the slow paths (a sleep, a detected preemption), so the fast path
 * of a wait costs nothing extra. */
typedef struct tt__wait_stats {
    _Atomic uint64_t join_sleeps;    /* a leader or caller slept in a join   */
    _Atomic uint64_t barrier_sleeps; /* a participant slept in a barrier     */
    _Atomic uint64_t member_parks;   /* a member slept waiting for work      */
    _Atomic uint64_t preemptions;    /* a spinning waiter saw itself paused  */
    /* A spin past TT__OVERSUB_AFTER_NS stopped because the machine had
     * more runnable threads than the process's CPUs plus
     * TT__OVERSUB_MARGIN (wait.c). */
    _Atomic uint64_t starving;
    _Atomic uint64_t wakes;          /* futex wakes issued                   */
    /* A waiter of this pool saw itself descheduled: until this time
     * (tt__mono_ns) the pool's idle waits spin the throttled budget. */
    _Atomic uint64_t starved_until_ns;
    /* Polls spun by the waits that then slept (counted on that slow path
     * only): 0 under OMP_WAIT_POLICY=passive. */
    _Atomic uint64_t spun_polls;
    /* A root's participant stopped waiting for its caller before the end
     * barrier (exec.c, region_end: TT__END_LEAD_FIRST). */
    _Atomic uint64_t lead_late;
    /* A root scope on the caller's team ended with the leader waiting for
     * its members to acknowledge the end (scope_entries.c, scope_participate:
     * every order but TT__END_LEAD_FIRST). */
    _Atomic uint64_t scope_end_joins;
    /* A scope's wait skipped its spin because the thread it waits for last
     * ran on the waiter's CPU (team_scope.c, "Sharing a CPU"). */
    _Atomic uint64_t crowded_waits;
    /* A scope's member moved itself off its leader's CPU (the same). */
    _Atomic uint64_t nudges;
    /* A member's wait for its leader's "done" at a root scope's end
     * skipped its polls: the member sat on the CPU the leader issued the
     * end command from (scope_entries.c, lead_wait_polls). Counted apart from
     * crowded_waits, which the member's other waits on that CPU bump too,
     * so that a test can see this one decision. */
    _Atomic uint64_t lead_wait_skips;
} tt__wait_stats;

/* How one wait spins before it sleeps. */
typedef struct tt__wait_policy {
    uint64_t spin_polls;   /* polls before yielding                     */
    uint64_t spin_ns;      /* also stop spinning after this long (0: no) */
    bool throttled;        /* oversubscribed: spin at most 100 polls    */
    /* When not 0, yield the CPU every that many polls: an idle member must
     * not keep a CPU from the thread that is about to give it work. */
    uint32_t yield_every;
    /* When not NULL, the spin also ends once *stop != stop_val (checked
     * with the clock): tt_pool_release_idle sends spinning members to
     * sleep this way. */
    _Atomic uint32_t *stop;
    uint32_t stop_val;
    /* The thread this wait is for last ran on the waiter's CPU, where it
     * cannot run while the waiter polls: no spin, only the yields (none
     * under a spin budget of 0) before the sleep (team_scope.c, "Sharing a
     * CPU"). */
    bool crowded;
} tt__wait_policy;

/* The throttled budget when nothing says otherwise (libgomp's default
 * gomp_throttled_spin_count_var); OMP_WAIT_POLICY=active makes it 1000. */
#define TT__THROTTLED_POLLS 100u
#define TT__YIELDS 16u
/* A wait's spin when neither the pool nor the environment sets one
 * (wait.c says why these). */
#if defined(__aarch64__)
#define TT__DEFAULT_SPIN_POLLS (1ull << 21)
#else
#define TT__DEFAULT_SPIN_POLLS 300000ull
#endif

/* The application's OpenMP wait settings, as libgomp reads them (env.c of
 * GCC 12): OMP_WAIT_POLICY and GOMP_SPINCOUNT, read from the environment
 * once per process (tt__omp_waits) and kept in a process-wide variable. */
typedef struct tt__omp_waits {
    uint64_t spin_polls;      /* a wait's budget when no spin_polls attribute */
    uint64_t throttled_polls; /* a throttled wait spins at most this many     */
    int policy;               /* OMP_WAIT_POLICY: -1 unset, 0 passive, 1 active */
    bool spincount_set;       /* GOMP_SPINCOUNT was set and valid             */
} tt__omp_waits;
/* The process's settings, parsed on the first call (thread-safe). */
const tt__omp_waits *tt__omp_waits_get(void);
/* Parse the two variables' values (NULL = unset) the way libgomp does. */
void tt__omp_waits_parse(const char *policy, const char *spincount, tt__omp_waits *out);
/* The throttled budget now in force (tt__omp_waits_get()->throttled_polls
 * once read, TT__THROTTLED_POLLS before). */
uint64_t tt__throttled_polls(void);
/* An idle member yields every this many polls of its spin: on a pool as
 * wide as the CPUs, members that spin without yielding keep a plain thread
 * that posts to them off the CPU for a scheduler slice (milliseconds a
 * call), where yields keep it to microseconds (comment-records.md, "Idle
 * yields"). */
#define TT__IDLE_YIELD_EVERY 16u

void tt__futex_wait(_Atomic uint32_t *word, uint32_t expected);
void tt__futex_wake(_Atomic uint32_t *word, int count);

static inline void tt__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#else
    __asm__ __volatile__("" ::: "memory");
#endif
}

/* The most polls a wait under `pol` makes before it yields or sleeps: none
 * when crowded, at most the throttled budget when throttled, else the
 * policy's spin_polls. tt__wait_spin_ne takes its budget here, and so does a
 * scope member's wait for its leader's "done" (scope_entries.c). */
uint64_t tt__wait_polls(const tt__wait_policy *pol);

/* Spin per `pol` until *word != old. Returns true when the value changed
 * during the spin, false when the spin budget ran out (the caller then
 * sleeps with its own protocol). `stats` may be NULL. */
bool tt__wait_spin_ne(_Atomic uint32_t *word, uint32_t old,
                      const tt__wait_policy *pol, tt__wait_stats *stats);

/* How a root's region ends: which thread reaches the runtime's end barrier
 * last (exec.c, region_end; wait.c says when each applies). */
enum tt__region_end {
    TT__END_BARRIER,    /* the runtime's barrier alone                      */
    TT__END_LEAD_WAITS, /* the caller waits for the others (a join), then
                         * they wait a little for the caller              */
    TT__END_LEAD_FIRST, /* the others first wait a little for the caller     */
    TT__END_JOIN,       /* the caller waits for the others, then the barrier */
};
/* The end for a root's region now: TT__END_LEAD_WAITS when the process
 * holds more threads than CPUs (libgomp then throttles its waits),
 * TT__END_LEAD_FIRST when not and `last_wakes` (the runtime's last arriver
 * always makes a system call), TT__END_BARRIER when the machine is
 * oversubscribed or neither applies. Sampled at most every 10 ms. */
enum tt__region_end tt__region_end_order(bool last_wakes);
/* The same, with the time read by the caller (tt__mono_ns). */
enum tt__region_end tt__region_end_order_at(bool last_wakes, uint64_t now);
/* TT__CHAIN_ROOTS root regions in a row of a throttled process (TT__END_JOIN's
 * condition) that each lasted TT__CHAIN_NS or more look like a wake-up chain
 * (exec.c, the essay before tt__root_end_wait): the crew's roots then keep
 * the caller's join for TT__JOIN_HOLD_NS. One long root is not enough: a
 * guest's vCPU is taken away for tens of microseconds now and then. */
#define TT__CHAIN_NS 20000ull
#define TT__CHAIN_ROOTS 3u
#define TT__JOIN_HOLD_NS 100000000ull
/* Whether a wake call of the runtime's barrier costs more than the
 * caller-first step that spares the caller one (exec.c, the essay before
 * tt__root_end_wait): the cost of a futex wake with nobody asleep, sampled
 * with the thread count above (the least of three calls), at least
 * TT__WAKE_DEAR_NS. */
bool tt__wake_dear(void);
#define TT__WAKE_DEAR_NS 400u
/* Whether a root region of `width` threads opened by the calling thread
 * is wider than any it opened before (the runtime then starts team threads
 * for it: wait.c, region_width_seen); notes the width. */
bool tt__region_new_team(unsigned width);
/* Polls a participant waits for the caller before the end barrier
 * (TT__END_LEAD_FIRST), at most; exec.c says why this many. */
#define TT__LEAD_FIRST_POLLS 1024u
/* TT__END_LEAD_FIRST: the caller says it is done (release: nothing is
 * published through the word, the barrier orders the shares' writes, but
 * the store stays after the caller's part in every model); a participant
 * waits for that at most min(spin_polls, TT__LEAD_FIRST_POLLS) polls, and
 * counts in stats->lead_late a wait that ran out. */
static inline void tt__lead_first_done(_Atomic uint32_t *done)
{
    atomic_store_explicit(done, 1, memory_order_release);
}
void tt__lead_first_wait(_Atomic uint32_t *done, uint64_t spin_polls, tt__wait_stats *stats);

/* The runnable count in a line of /proc/loadavg (the fourth field's
 * "running" of "running/total"), or -1 for a line that is not one. */
long tt__loadavg_parse_running(const char *s);
/* The caller has just woken threads from a futex and will wait for them
 * with `pol`: take the oversubscription sample now, while they wake, when
 * that wait's spin could last long enough to take it (wait.c says why). */
void tt__wait_woke(const tt__wait_policy *pol);

/* An event word with a sleeper count: the waiter of a long-lived object
 * (a member's mailbox, a scope's generation) sleeps on it and the waker
 * only makes a system call when someone may sleep. */
typedef struct tt__event {
    _Atomic uint32_t word;
    _Atomic uint32_t sleepers;
} tt__event;

/* Wait until ev->word != old (spin, yield, futex). `slept_ctr` is bumped
 * each time the waiter goes to sleep (may be NULL). Returns the new value. */
uint32_t tt__event_wait_ne(tt__event *ev, uint32_t old, const tt__wait_policy *pol,
                           tt__wait_stats *stats, _Atomic uint64_t *slept_ctr);
/* Store `value` and wake sleepers, if any; returns whether it made the
 * wake call (someone slept or was about to). */
bool tt__event_post(tt__event *ev, uint32_t value, tt__wait_stats *stats);
/* Add one to the word (any number of concurrent wakers) and wake sleepers. */
void tt__event_bump(tt__event *ev, tt__wait_stats *stats);

/* A join: `pending` tasks outstanding. The waiter owns the object (usually
 * on its stack); a completer never touches it after its decrement except
 * through the futex system call, which reads no user memory. */
#define TT__JOIN_SLEEPING 0x80000000u
typedef struct tt__join {
    _Atomic uint32_t word; /* pending count | TT__JOIN_SLEEPING */
} tt__join;

static inline void tt__join_init(tt__join *j, uint32_t pending)
{
    atomic_store_explicit(&j->word, pending, memory_order_relaxed);
}
void tt__join_done(tt__join *j, tt__wait_stats *stats);
void tt__join_wait(tt__join *j, const tt__wait_policy *pol, tt__wait_stats *stats);

#endif /* TT_WAITS_H */
