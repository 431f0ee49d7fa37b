/*
 * internal.h -- private structures of threadteam. Nothing here is installed.
 *
 * Layers, from the bottom up (prefixes and files show them); each file
 * calls only into layers below it, and this header calls into none:
 *   tt__wait_*    spin / yield / futex waits shaped like libgomp's   (wait.c)
 *   (CPUs)        the process's CPUs and thread limits, room for
 *                 more threads                                       (cpu.c)
 *   tt__crew_*    the threads that run a pool's tasks: the private
 *                 crew held on a host thread (crew.c), the caller's
 *                 own OpenMP team for one root (host_team.c), behind a
 *                 small backend table          (backend_omp.c, backend_serial.c)
 *   tt__gang_*    the pool's slots: reservation for one root         (gang.c)
 *   tt__pool_*    pools, membership, lifecycle                       (pool.c)
 *   tt__place_*   where an entry runs: members of a token, slots
 *                 taken, inline holds and lending                    (place.c)
 *   tt__token_*,  the token protocol: mint, check, claim, consume,   (token.c)
 *   tt__exec_*    leave, reborrow, limit, finish
 *   tt__entry_*   the entry frame every entry runs through           (entry.c)
 *   (entries)     pooled entries and the task engine                 (exec.c)
 *   tt__ctl_*     team scopes: control blocks, sections, splits,
 *                 tt_team_scope, entries on team tokens        (team_scope.c)
 *   (teams)       persistent teams                                   (team.c)
 *   tt__ledger_*  test support, compiled out without --enable-ledger (ledger.c)
 */
#ifndef TT_INTERNAL_H
#define TT_INTERNAL_H

#include "config.h"
#include "threadteam.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sched.h>
#include <sys/types.h>
#include <time.h>

#define TT__CACHELINE 64
#define TT__ALIGNED __attribute__((aligned(TT__CACHELINE)))

/* The monotonic clock every wait and sample reads (clock_gettime in the
 * vDSO: no system call; 28 ns on host vm, under kvm-clock). Inline here,
 * so that the files that read it (wait.c, cpu.c) need nothing of each
 * other for it. */
static inline uint64_t tt__mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* 1 in a ThreadSanitizer build (GCC defines __SANITIZE_THREAD__, clang has
 * the feature): the library then states in C11 atomics the orderings that
 * libgomp's barriers give, which TSan cannot see (backend_omp.c). */
#if defined(__SANITIZE_THREAD__)
#define TT__TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TT__TSAN 1
#endif
#endif
#ifndef TT__TSAN
#define TT__TSAN 0
#endif

#if defined(TT_ENABLE_DEBUG) && TT_ENABLE_DEBUG
#include <stdio.h>
#include <stdlib.h>
#define TT__ASSERT(c)                                                          \
    do {                                                                       \
        if (!(c)) {                                                            \
            fprintf(stderr, "threadteam: assertion failed: %s (%s:%d)\n", #c,  \
                    __FILE__, __LINE__);                                       \
            abort();                                                           \
        }                                                                      \
    } while (0)
#else
#define TT__ASSERT(c) ((void)0)
#endif

#define TT__LIKELY(x) __builtin_expect(!!(x), 1)
#define TT__UNLIKELY(x) __builtin_expect(!!(x), 0)

/* Invariants, always compiled (release builds too, as Argobots does): the
 * few states whose corruption would otherwise show up far away, as a hang
 * or a slot lost for good (a token's busy word, a scope's command and join,
 * the thread's hold stack, the pairing of an entry's begin and end). Each
 * is an integer compare on a path that touches the field anyway, never in
 * the inner loop of a wait; TT__ASSERT (--enable-debug) keeps the costly
 * checks. On failure: file, line and what broke on stderr, then abort(). */
__attribute__((cold, noreturn, noinline)) void tt__invariant_failed(const char *file, int line,
                                                                   const char *what);
#define TT__INVARIANT(c, what)                                                 \
    do {                                                                       \
        if (TT__UNLIKELY(!(c)))                                                \
            tt__invariant_failed(__FILE__, __LINE__, what);                    \
    } while (0)

/* ------------------------------------------------------------------------ */
/* Waits (wait.c)                                                            */
/* ------------------------------------------------------------------------ */

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
     * its members to acknowledge the end (team_scope.c, scope_participate:
     * every order but TT__END_LEAD_FIRST). */
    _Atomic uint64_t scope_end_joins;
    /* A scope's wait skipped its spin because the thread it waits for last
     * ran on the waiter's CPU (team_scope.c, "Sharing a CPU"). */
    _Atomic uint64_t crowded_waits;
    /* A scope's member moved itself off its leader's CPU (the same). */
    _Atomic uint64_t nudges;
    /* A member's wait for its leader's "done" at a root scope's end
     * skipped its polls: the member sat on the CPU the leader issued the
     * end command from (team_scope.c, lead_wait_polls). Counted apart from
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
/* An idle member yields every this many polls of its spin (measured: with
 * a plain thread posting to a pool as wide as the CPUs, members that spin
 * without yielding kept the poster off the CPU for a scheduler slice,
 * about 1.5 ms per call; yielding every 16 polls brought it to 2.5 us). */
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
 * scope member's wait for its leader's "done" (team_scope.c). */
uint64_t tt__wait_polls(const tt__wait_policy *pol);

/* Spin per `pol` until *word != old. Returns true when the value changed
 * during the spin, false when the spin budget ran out (the caller then
 * sleeps with its own protocol). `stats` may be NULL. */
bool tt__wait_spin_ne(_Atomic uint32_t *word, uint32_t old,
                      const tt__wait_policy *pol, tt__wait_stats *stats);

bool tt__test_spin_once(uint64_t spin_polls, bool throttled);
/* Test hook: the pool's spun_polls counter (region crews and its private crew). */
uint64_t tt__test_pool_spun_polls(const tt_pool *pool);
/* Test hook: the pool's lead_late counter, the same way. */
uint64_t tt__test_pool_lead_late(const tt_pool *pool);
/* Test hook: the pool's scope_end_joins counter, the same way. */
uint64_t tt__test_pool_scope_end_joins(const tt_pool *pool);
/* Test hooks: the pool's crowded_waits and nudges counters, the same way. */
uint64_t tt__test_pool_crowded_waits(const tt_pool *pool);
uint64_t tt__test_pool_nudges(const tt_pool *pool);
/* Test hook: the pool's lead_wait_skips counter, the same way. */
uint64_t tt__test_pool_lead_wait_skips(const tt_pool *pool);
/* Test hook: when >= 0, the CPU that every thread of a scope is taken to
 * run on (team_scope.c); returns the previous value. */
int tt__test_scope_cpu_hook(int cpu);
/* Test hook: whether a scope's waits spin only the throttled budget. */
bool tt__test_scope_throttled(const tt_scope *scope);
uint64_t tt__test_spin_stats(uint64_t spin_polls, uint32_t yield_every, bool reset,
                             uint64_t *preemptions, uint64_t *starved_until,
                             uint64_t *spun);

/* How a root's region ends: which thread reaches the runtime's end barrier
 * last (exec.c, region_end; wait.c says when each applies). */
enum tt__region_end {
    TT__END_BARRIER,    /* the runtime's barrier alone                      */
    TT__END_LEAD_WAITS, /* the caller waits for the others (a join), then
                         * they wait a little for the caller              */
    TT__END_LEAD_FIRST, /* the others first wait a little for the caller     */
};
/* The end for a root's region now: TT__END_LEAD_WAITS when the process
 * holds more threads than CPUs (libgomp then throttles its waits),
 * TT__END_LEAD_FIRST when not and `last_wakes` (the runtime's last arriver
 * always makes a system call), TT__END_BARRIER when the machine is
 * oversubscribed or neither applies. Sampled at most every 10 ms. */
enum tt__region_end tt__region_end_order(bool last_wakes);
/* Test hook: the process's thread count that tt__region_end_order takes
 * (0: the sampled one); returns the previous hook. */
uint32_t tt__test_threads_hook(uint32_t n);
/* Whether a root region of `width` threads opened by the calling thread
 * is wider than any it opened before (the runtime then starts team threads
 * for it: wait.c, region_width_seen); notes the width. */
bool tt__region_new_team(unsigned width);
/* Test hook: the end order (enum tt__region_end) of the calling thread's
 * last root region. */
int tt__test_last_region_end(void);
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
uint64_t tt__test_runnable_hook(bool on, long running, unsigned cpus);
uint64_t tt__test_oversub_samples(void);
/* The caller has just woken threads from a futex and will wait for them
 * with `pol`: take the oversubscription sample now, while they wake, when
 * that wait's spin could last long enough to take it (wait.c says why). */
void tt__wait_woke(const tt__wait_policy *pol);
uint64_t tt__test_spin_starving(uint64_t spin_polls, uint64_t *starving, uint64_t *preemptions,
                                uint64_t *starved_until, uint64_t *spun);

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

/* ------------------------------------------------------------------------ */
/* Pool attributes (attr.c)                                                  */
/* ------------------------------------------------------------------------ */

struct tt_pool_attr {
    unsigned threads;
    char *thread_name;
    size_t stack_size;
    bool stack_size_set;
    tt_on_start_fn on_start;
    void *on_start_arg;
    bool on_start_set;
    tt_qos qos;
    uint64_t idle_spin_ns;
    bool idle_serves_pool;
    uint64_t acquire_timeout_ns;
    uint64_t spin_polls;
    bool spin_polls_set; /* false: the pool takes the OpenMP settings */
    bool pin_participants;
    bool isolate_shares;   /* false: the owner's promise that shares make no OpenMP call */
    tt_dispatch_costs costs;
    bool costs_set;
};

#define TT__DEFAULT_STACK_SIZE ((size_t)16 << 20)
#define TT__MIN_STACK_SIZE ((size_t)64 << 10)
#define TT__DEFAULT_IDLE_SPIN_NS 1000000ull        /* 1 ms */
#define TT__DEFAULT_ACQUIRE_TIMEOUT_NS 1000000000ull /* 1 s */
#if defined(__aarch64__)
#define TT__DEFAULT_SPIN_POLLS (1ull << 21)
#else
#define TT__DEFAULT_SPIN_POLLS 300000ull
#endif

void tt__attr_defaults(struct tt_pool_attr *a);
/* True when the settings ask for dedicated members (not cacheable). */
bool tt__attr_dedicated(const struct tt_pool_attr *a);

/* ------------------------------------------------------------------------ */
/* Crews: the threads that run a pool's tasks                                */
/* ------------------------------------------------------------------------ */

struct tt__crew;
struct tt__member;

/* A unit of work handed to one member. The dispatcher owns it and keeps it
 * alive until the work's join completes. */
typedef struct tt__work {
    void (*run)(struct tt__work *w, struct tt__member *m);
} tt__work;

typedef struct tt__member {
    tt__event mail TT__ALIGNED; /* word = sequence of handed work          */
    tt__work *_Atomic work;     /* the work for the newest sequence        */
    uint32_t seen;              /* serving thread only: last sequence run  */
    unsigned index;
    struct tt__crew *crew;
    /* The thread serving as this member now, as (uintptr_t)pthread_self(),
     * or 0. Written only by that thread (set when it starts serving, cleared
     * when it stops, for a region crew), read by any thread that asks
     * whether it is a member: relaxed, since a thread only ever compares it
     * with its own identity, which only it writes. */
    _Atomic uintptr_t thread_id;
    pid_t tid;
    size_t stack_size;
#if defined(TT_ENABLE_DEBUG) && TT_ENABLE_DEBUG
    /* --enable-debug: set while a post is in flight, so that two writers
     * of one mailbox at once (a gang bookkeeping error) abort. */
    _Atomic uint32_t posting;
#endif
} tt__member;

static inline uintptr_t tt__self_id(void) { return (uintptr_t)pthread_self(); }
_Static_assert(sizeof(pthread_t) <= sizeof(uintptr_t), "pthread_t must fit in uintptr_t");

/* The backend table (BLIS style): the OpenMP backend opens parallel
 * regions; the serial backend has no threads and is always built, so
 * --disable-parallel is the same code with another table. */
typedef void (*tt__region_fn)(void *ctx, unsigned k, unsigned got);
/* The ICVs that code in a share can set through the OpenMP API (its
 * implicit task's data environment, which ends with its region in
 * OpenMP): nthreads-var, max-active-levels-var, dyn-var,
 * default-device-var, run-sched-var and def-allocator-var. */
typedef struct tt__icvs {
    int nthreads, mal, dyn, dev, sched, chunk;
    uintptr_t alloc;
} tt__icvs;

typedef struct tt__backend {
    const char *name;
    /* Start a private crew's threads on a host thread; every member then
     * runs tt__member_main. */
    int (*start)(struct tt__crew *c);
    /* Join what start created (after every member left tt__member_main). */
    void (*join)(struct tt__crew *c);
    /* The OpenMP thread number at nesting level 1 of the calling thread, or
     * -1 when it is not inside a parallel region. */
    int (*level1_thread_num)(void);
    /* True when the calling thread is inside any parallel region (active or
     * not): its roots cannot open a region on its own team. */
    bool (*in_parallel)(void);
    /* The calling thread's nthreads-var (omp_get_max_threads). */
    unsigned (*max_threads)(void);
    /* Open one parallel region of `width` threads on the calling thread (its
     * own team), dynamic adjustment off for the region only; thread k runs
     * fn(ctx, k, got), got being the team size formed. Returns got. */
    unsigned (*region)(unsigned width, tt__region_fn fn, void *ctx);
    /* Confine the calling participant's own OpenMP: an `omp parallel` in a
     * share gets one thread whatever OMP_NESTED, OMP_MAX_ACTIVE_LEVELS or a
     * list-valued OMP_NUM_THREADS say (tt_external is the one door through
     * which a width is handed to such code). Sets the participant's
     * implicit task's nthreads-var, which nothing outside it sees. */
    void (*confine)(void);
    /* Run fn(ctx) on the calling thread as one thread to OpenMP: a team of
     * one (omp_get_num_threads() == 1), so that orphaned worksharing and
     * barriers bind to it, explicit tasks run on this thread, and an
     * `omp parallel` opened inside gets one thread. Every task fn generated
     * is complete when isolate returns, as at the end of a region of its
     * own. Costs a taskgroup when the thread already is one thread to
     * OpenMP inside a team (an earlier isolate, a crew member's life), a
     * few ICV writes outside every region, and one nested one-thread
     * region inside a wider one (backend_omp.c has the figures). */
    void (*isolate)(void (*fn)(void *ctx), void *ctx);
    /* Run fn(ctx) and complete every explicit task it generated (and their
     * descendants) before returning, as the end of a region would: for
     * user code whose completion the library reports before the team it
     * runs in ends (a full-width section of a root scope, whose tasks bind
     * to the root's own region). isolate does the same for shares. */
    void (*complete)(void (*fn)(void *ctx), void *ctx);
    /* Read the calling task's settable ICVs, and put back those that
     * differ from a reading (tt__share_seq). */
    void (*icvs_save)(tt__icvs *v);
    void (*icvs_restore)(const tt__icvs *v);
    /* The union of the CPUs of OpenMP's places, when places are defined
     * (OMP_PLACES, or OMP_PROC_BIND, which implies them): false otherwise. */
    bool (*places_cpus)(cpu_set_t *set);
    /* Around tt_external's callback: let exactly `width` threads form one
     * region from the calling thread (nested or its own top-level one), and put things
     * back. */
    void (*external_enter)(unsigned width, int saved[4]);
    void (*external_leave)(const int saved[4]);
    /* The thread limit OpenMP imposes (UINT32_MAX when none). */
    unsigned (*thread_limit)(void);
    /* Around a tt_external callee that runs while the external holds
     * `pool`'s slots: mark the calling thread's data environment, which
     * every region the callee opens inherits (NULL: could not mark), and
     * take the mark off. callee_of: the calling thread runs inside such a
     * callee of `pool` (backend_omp.c says how). */
    void *(*callee_mark)(const void *pool);
    void (*callee_unmark)(void *mark);
    /* Call fn(ctx) as the callee of the external that took `mark` (NULL:
     * unmarked): every region fn opens, at any depth, carries the mark. */
    void (*callee_call)(void *mark, void (*fn)(void *ctx), void *ctx);
    bool (*callee_of)(const void *pool);
    /* True when the last thread to reach a region's end barrier always
     * makes a system call to wake the others, whether any sleeps or not
     * (libgomp): the library then lets a root's caller reach it first
     * (exec.c, region_end). */
    bool (*last_arriver_wakes)(void);
} tt__backend;

extern const tt__backend tt__backend_serial;
#if TT_HAVE_OPENMP
extern const tt__backend tt__backend_omp;
#endif
const tt__backend *tt__backend_get(void);
/* TT_ERUNTIME when the library's OpenMP calls land in another runtime than
 * the application's (backend_omp.c, which names both on stderr once), else
 * TT_OK; TT_OK always without OpenMP. */
int tt__runtime_check(void);

enum tt__crew_kind {
    TT__CREW_PRIVATE = 1, /* held threads on a private host thread (crew.c) */
    TT__CREW_REGION       /* the caller's own team, one region at a time
                             (host_team.c)                                   */
};

typedef struct tt__crew {
    unsigned width;
    enum tt__crew_kind kind;
    const tt__backend *be;
    struct tt_pool_attr attr; /* copy; thread_name owned by the crew    */
    bool dedicated;
    _Atomic bool oversubscribed; /* width > CPUs of the affinity set     */
    /* How an idle member waits for work: relaxed atomics, because a crew
     * taken from the cache gets the new pool's settings while its members
     * may be spinning. */
    _Atomic uint64_t idle_polls;
    _Atomic uint64_t idle_ns;
    tt__wait_policy team_pol; /* how team waits (joins, barriers) spin   */
    tt__wait_stats *stats;    /* the pool's (region crews) or own_stats  */
    tt__wait_stats own_stats;
    _Atomic uint32_t park_epoch; /* bumped by tt_pool_release_idle      */
    cpu_set_t cpus;           /* the CPU set members take (private crew) */
    bool have_cpus;

    /* Start-up handshake (private crew). */
    _Atomic uint32_t started;  /* members that reached tt__member_main   */
    _Atomic uint32_t got;      /* team size OpenMP formed (0 = not yet)  */
    tt__event startup;         /* posted as members register             */
    _Atomic int start_err;

    pthread_t host;
    bool host_started;
    _Atomic uint32_t exited;   /* members that left tt__member_main      */

    tt__member *members;       /* width entries, cache-line aligned      */
    void *members_mem;
    struct tt__crew *next;     /* cache list (private), free list (region) */
    struct tt__crew *_Atomic next_all; /* every region crew of a pool    */
} tt__crew;

/* The sentinel work that tells a serving member to stop. */
extern tt__work tt__work_exit;

/* Allocate a crew's member array (cache-line aligned); 0 or TT_ENOMEM. */
int tt__crew_alloc_members(tt__crew *c, unsigned width);
void tt__crew_free(tt__crew *c);
/* Start a private crew (crew.c): threads held on a private host thread,
 * taken from the process-wide cache when the settings allow. */
int tt__crew_create(const struct tt_pool_attr *attr, unsigned width, tt__crew **out);
/* Take a cached crew of `width` (NULL when none) and give one back (it is
 * joined when the cache is full). */
tt__crew *tt__crew_cache_take(unsigned width, const struct tt_pool_attr *attr);
void tt__crew_cache_put(tt__crew *c);
void tt__crew_note_width(unsigned width);
/* Tell every member to leave and join the threads. */
void tt__crew_destroy(tt__crew *c);
/* Forget cached crews in a fork() child (their threads do not exist). */
void tt__crew_atfork_child(void);
void tt__crew_atfork_prepare(void);
void tt__crew_atfork_parent(void);
/* Body of every private member thread: register, serve until shutdown. */
void tt__member_main(tt__crew *c, unsigned k);
/* Serve work posted to member m until the exit sentinel arrives. */
void tt__member_serve(tt__member *m);
/* Hand `w` to member m (owned by the caller's gang) and wake it. */
void tt__member_post(tt__member *m, tt__work *w);

/* Region crews (host_team.c): the member slots of one root region on the
 * caller's own OpenMP team. */
tt__crew *tt__region_crew_get(tt_pool *p);
void tt__region_crew_put(tt_pool *p, tt__crew *c);
void tt__region_crews_free(tt_pool *p);
/* Enter and leave member k of a region crew (the calling thread). */
static inline void tt__region_member_enter(tt__crew *c, unsigned k)
{
    atomic_store_explicit(&c->members[k].thread_id, tt__self_id(), memory_order_relaxed);
}
static inline void tt__region_member_leave(tt__crew *c, unsigned k)
{
    atomic_store_explicit(&c->members[k].thread_id, 0, memory_order_relaxed);
}

/* ------------------------------------------------------------------------ */
/* CPUs and thread limits (cpu.c): below every layer that asks               */
/* ------------------------------------------------------------------------ */

/* The process's CPU set (the union of OpenMP's places when there are any,
 * since libgomp may have bound the initial thread to one place before
 * main; otherwise the calling thread's affinity set). False when unknown. */
bool tt__process_cpus(cpu_set_t *set);
/* CPUs in the calling thread's affinity set (at least 1). */
unsigned tt__affinity_cpus(void);
/* The CPUs of the process's affinity set when first asked: a hint for hot
 * paths that must not make a system call. */
unsigned tt__cpu_count_cached(void);
/* The widest pool the system allows: our own cap, OpenMP's thread limit
 * (through `be`), the kernel's threads-max and RLIMIT_NPROC. */
unsigned tt__width_limit(const tt__backend *be);
/* Threads of the process now, from /proc (0 when unknown). */
unsigned tt__process_threads(void);
/* tt__threads_room: TT_OK when `need` more threads fit under threads-max,
 * the pids cgroup and RLIMIT_NPROC now, else TT_EAGAIN. tt__region_room:
 * the same for a root region of `width` on the calling thread, once per
 * thread and width. */
int tt__threads_room(unsigned need);
int tt__region_room(unsigned width);
void tt__test_room_refuse(long nth);

/* Whether the library may change a thread's affinity: not under likwid-pin
 * (LIKWID_PIN set), which pins the threads itself. */
bool tt__pin_allowed(void);
/* Move the calling thread off `cpu` and leave its affinity mask as it was:
 * take `cpu` out of the mask and put the mask back, the kernel migrating
 * the thread in between. False, nothing done, where the mask has no other
 * CPU, `cpu` is not in it, or tt__pin_allowed says no (team_scope.c,
 * "Sharing a CPU", says why and when). */
bool tt__cpu_move_off(int cpu);
/* At most one move per `every_ns` per `*next_ns` (a block's):
 * true for the caller whose compare-exchange moves the time on (relaxed:
 * a hint that elects a mover and publishes nothing). */
bool tt__cpu_move_due(_Atomic uint64_t *next_ns, uint64_t every_ns);
/* At most one move a millisecond per scope block. */
#ifndef TT__MOVE_EVERY_NS
#define TT__MOVE_EVERY_NS 1000000ull
#endif

/* ------------------------------------------------------------------------ */
/* The pool and its slots                                                    */
/* ------------------------------------------------------------------------ */

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
/* Test hook: every root takes the private crew (tests/test_lifecycle.c). */
void tt__test_force_private_crew(bool on);

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
void tt__gang_release(tt_pool *p, unsigned n, const uint32_t *idx);
void tt__gang_init_free(tt_pool *p);
/* Test hook of tt_pool_into_team (team.c). */
extern void (*tt__test_into_team_window)(tt_pool *pool);
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

/* ------------------------------------------------------------------------ */
/* Tokens (token.c)                                                          */
/* ------------------------------------------------------------------------ */

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
 * (roots, reborrows, fork children in exec.c, scope and lead tokens in
 * team.c). */
void tt__token_mint(tt__exec *x, const tt__token_spec *s);
/* Leave x an invalid token: every entry on it returns TT_EINVAL. */
void tt__token_mint_invalid(tt__exec *x);
/* The state of one token (not its chain): TT_OK when a live original,
 * else TT_EINVAL, TT_ECOPY or TT_ECONSUMED. */
int tt__token_check_one(const tt__exec *x);
/* What tt_broadcast on x would return now without running (TT_OK: it
 * would run): the one rule behind tt_broadcast and tt_can_broadcast. */
int tt__token_broadcast_verdict(const tt__exec *x);

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
unsigned tt__exec_suspend(const tt__exec *x);
void tt__exec_resume(const tt__exec *x, unsigned saved);

/* Team-authority entries (team_scope.c, called by exec.c). */
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

/* ------------------------------------------------------------------------ */
/* Placement (place.c): members of a token, slots taken, holds, lending      */
/* ------------------------------------------------------------------------ */

/* What tt__ledger_pool_suspend saves: the roots of one pool the calling
 * thread stopped counting for (it gives its slot of the pool back while it
 * waits), to count for them again with tt__ledger_pool_resume. */
#define TT__LEDGER_SAVED 8
typedef struct tt__ledger_saved {
    unsigned n;
    uint64_t id[TT__LEDGER_SAVED];
    unsigned depth[TT__LEDGER_SAVED];
} tt__ledger_saved;

/* An inline hold: the one slot a thread takes to run work of a pool inline
 * while it holds nothing of it. While the run lasts the hold is on the
 * thread's hold stack, so that the thread never waits for the pool's slots
 * again. */
typedef struct tt__inline_hold {
    tt_pool *pool;
    uint32_t slot;
    bool held;
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
void tt__lend_end(tt__lend *l);

/* ------------------------------------------------------------------------ */
/* The entry frame (entry.c)                                                 */
/* ------------------------------------------------------------------------ */

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

int tt__entry_begin(tt__entry *e, tt__exec *x);
void tt__entry_hold(tt__entry *e, const tt__placement *pl);
int tt__entry_commit(tt__entry *e);
int tt__entry_abort(tt__entry *e, int rc);
void tt__entry_end(tt__entry *e, bool ran);

/* ------------------------------------------------------------------------ */
/* Team scopes (team_scope.c) and persistent teams (team.c)                  */
/* ------------------------------------------------------------------------ */

/* A control block: shared by a leader thread (participant 0) and size - 1
 * members (participants 1..size-1), each of which waits for the block's
 * generation word to move, runs the command the leader wrote, and reports
 * to the command's join (team_scope.c). A scope's block lives on the
 * leader's stack; a persistent team's in the tt_team. */
typedef struct tt__ctl tt__ctl;
struct tt__ctl {
    /* What token.c reads of the block through a team token's `team` field
     * (internal.h): `busy`, a command is in flight (leader-private), and
     * the hook that ends a persistent team's leader role. First, so that
     * the token protocol needs nothing else of this file. */
    tt__team_hook hook;
    tt__event gen TT__ALIGNED; /* bumped once per command                 */
    /* The command's header: generation << 32 | kind << 24 | width, one
     * atomic word, so that a participant left out of a narrow section can
     * read which command it is while the leader may already write the next
     * (it does not wait for participants that take no part). */
    _Atomic uint64_t cmd;
    /* Where the block's threads run (team_scope.c, "Sharing a CPU"): the
     * CPU the leader issued the last command from (sched_getcpu; -1 before
     * the first, or unknown); the participants whose last command started
     * on that CPU (bit min(rank, 63)). Hints, both relaxed. On the
     * command's line: a member reads them with the command, the leader
     * reads `crowded` from its own cache, and a member writes only when its
     * bit changes. With them the command's header and body still fill one
     * line (8 + 8 + 8 + 8 + 16 + 8 + 8 bytes). */
    _Atomic int lead_cpu;
    _Atomic uint64_t crowded;
    /* The command's body: read only by participants that take part, which
     * the leader waits for before it writes another. */
    tt_section_fn fn;
    void *arg;
    unsigned width;
    struct split_cmd *split; /* team_scope.c */
    tt__join join TT__ALIGNED;
    /* The earliest time of the block's next nudge (team_scope.c, "Sharing
     * a CPU"): a hint, relaxed, touched only by a member about to move. */
    _Atomic uint64_t nudge_after_ns;
    /* The section barrier: arrivals, and the generation that releases. */
    _Atomic uint32_t bar_count TT__ALIGNED;
    /* The failure the section's barriers return (0: none): set, with a
     * move of bar_gen after it, by a participant's tt_section_fail or by
     * the last arriver of a barrier that finds the scope failed; reset
     * with bar_count when a section starts. */
    _Atomic int bar_fail;
    tt__event bar_gen;
    /* Fixed for the life of the block. */
    tt_pool *pool;
    tt__crew *crew;
    unsigned size;            /* participants, the leader included       */
    const uint32_t *members;  /* participant p >= 1 is members[p - 1]    */
    tt__wait_policy pol;
    void *ledger;
    pthread_t leader;         /* the thread that may issue commands      */
    uint32_t pool_gen;        /* tokens minted here belong to this pool  */
    /* The block's participants are every thread of the OpenMP region they
     * run in (a root scope on the caller's team at the pool's width): a
     * section of the block's full size is that region's team to OpenMP. */
    bool region_team;
    /* The failure word of the tt_team_scope call this block serves now
     * (tt_scope_fail, tt_section_fail): 0, or the first code. Set by the
     * leader before any command; a split's sub-blocks share their parent's. */
    _Atomic int *fail;
};

/* A member's part of a scope: the work posted to it once per scope. */
typedef struct tt__part_work {
    tt__work w;
    tt__ctl *c;
    unsigned rank;
    uint32_t gen0;   /* the generation before the first command          */
    bool pin;
    unsigned cpu;    /* CPU to pin to, when pin                          */
} tt__part_work;

/* Set up a control block of `size` participants on `crew` (`members`:
 * participant p >= 1 is members[p - 1]; NULL on a region crew, where
 * region thread p is participant p). `pool_gen` is the pool generation its
 * child tokens carry: a scope's is the generation of the token that
 * entered (checked at its claim; read from the pool here instead, after a
 * destroy from a member (DOOMED, the generation bumped), it would make the
 * scope's child tokens look live on the dying pool), a split's groups take
 * their parent's, and a persistent team's is the generation it was built
 * at. */
void tt__ctl_init(tt__ctl *c, tt_pool *pool, uint32_t pool_gen, tt__crew *crew, unsigned size,
                  const uint32_t *members, const tt__wait_policy *pol, void *ledger);
/* Post the participant loop to every member of c (`works`: size - 1
 * records that live until the end command's join), pinned per `pin`; and
 * end it: the members leave the loop, and the leader waits for them. */
void tt__ctl_start_members(tt__ctl *c, tt__part_work *works, bool pin);
void tt__ctl_end_members(tt__ctl *c);

/* ------------------------------------------------------------------------ */
/* Ledger (ledger.c); every call is a no-op without --enable-ledger          */
/* ------------------------------------------------------------------------ */

/* The ledger counts threads, not calls: tt__ledger_enter/leave bracket a
 * thread's run of a root's user code (nested brackets of the same root on
 * one thread count once); tt__ledger_suspend stops the count of a thread
 * that waits for its children and returns what tt__ledger_resume needs to
 * restore it; tt__ledger_callee_begin/end mark a thread that runs a
 * tt_external callee, so that the threads of the callee's own OpenMP
 * regions count for the root too. */
#if TT_LEDGER_ENABLED
void tt__ledger_pool_suspend(const tt_pool *pool, tt__ledger_saved *sv);
void tt__ledger_pool_resume(const tt__ledger_saved *sv);
void *tt__ledger_new_root(tt_pool *pool);
void tt__ledger_enter(void *root);
void tt__ledger_leave(void *root);
unsigned tt__ledger_suspend(void *root);
void tt__ledger_resume(void *root, unsigned saved);
uint64_t tt__ledger_callee_begin(void *root);
void tt__ledger_callee_end(uint64_t prev);
static inline void tt__ledger_install(tt_pool *pool) { (void)pool; }
#else
static inline void tt__ledger_pool_suspend(const tt_pool *pool, tt__ledger_saved *sv)
{
    (void)pool;
    sv->n = 0;
}
static inline void tt__ledger_pool_resume(const tt__ledger_saved *sv) { (void)sv; }
static inline void *tt__ledger_new_root(tt_pool *pool) { (void)pool; return NULL; }
static inline void tt__ledger_enter(void *root) { (void)root; }
static inline void tt__ledger_leave(void *root) { (void)root; }
static inline unsigned tt__ledger_suspend(void *root) { (void)root; return 0; }
static inline void tt__ledger_resume(void *root, unsigned saved) { (void)root; (void)saved; }
static inline uint64_t tt__ledger_callee_begin(void *root) { (void)root; return 0; }
static inline void tt__ledger_callee_end(uint64_t prev) { (void)prev; }
static inline void tt__ledger_install(tt_pool *pool) { (void)pool; }
#endif

/* Allocation and thread start with failure injection (alloc.c). Tests
 * link the static library and arm tt__fault_inject. */
void *tt__malloc(size_t n);
void *tt__calloc(size_t n, size_t size);
char *tt__strdup(const char *s);
int tt__memalign(void **p, size_t align, size_t n);
bool tt__fault_thread(void);
void tt__fault_inject(long alloc_nth, long thread_nth);

/* Thread starts with bounded retries (gomp_guard.c): tt__thread_create is
 * pthread_create retried on EAGAIN a bounded number of times (libgomp's own
 * thread starts and allocations are retried the same way). */
int tt__thread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg);
unsigned long tt__guard_retries(void);
unsigned tt__guard_slots(void);
void tt__test_crew_cache_drain(void);
/* The bytes of static TLS of every module loaded now (crew.c). */
size_t tt__static_tls_bytes(void);

#endif /* TT_INTERNAL_H */
