/*
 * internal.h -- private structures of threadteam. Nothing here is installed.
 *
 * Layers (prefixes show them):
 *   tt__wait_*    spin / yield / futex waits shaped like libgomp's   (wait.c)
 *   tt__crew_*    the threads of a pool: one OpenMP team on a host
 *                 thread, behind a small backend table                (pool.c,
 *                 backend_omp.c, backend_serial.c)
 *   tt__gang_*    reservation of members for one root entry          (pool.c)
 *   tt__token_*,  the token protocol: mint, check, enter, leave     (token.c)
 *   tt__exec_*
 *   (entries)     placement and the task engine                      (exec.c)
 *   tt__team_*    scopes, teams, team-authority entries              (team.c)
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

#define TT__CACHELINE 64
#define TT__ALIGNED __attribute__((aligned(TT__CACHELINE)))

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
    _Atomic uint64_t wakes;          /* futex wakes issued                   */
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
} tt__wait_policy;

#define TT__THROTTLED_POLLS 100u
#define TT__YIELDS 16u
/* An idle member yields every this many polls of its spin (measured: with
 * a plain thread posting to a pool as wide as the CPUs, members that spin
 * without yielding kept the poster off the CPU for a scheduler slice,
 * about 1.5 ms per call; yielding every 16 polls brought it to 2.5 us). */
#define TT__IDLE_YIELD_EVERY 16u

void tt__futex_wait(_Atomic uint32_t *word, uint32_t expected);
void tt__futex_wake(_Atomic uint32_t *word, int count);
uint64_t tt__now_ns(void);

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

/* Spin per `pol` until *word != old. Returns true when the value changed
 * during the spin, false when the spin budget ran out (the caller then
 * sleeps with its own protocol). `stats` may be NULL. */
bool tt__wait_spin_ne(_Atomic uint32_t *word, uint32_t old,
                      const tt__wait_policy *pol, tt__wait_stats *stats);

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
/* Store `value` and wake sleepers, if any. */
void tt__event_post(tt__event *ev, uint32_t value, tt__wait_stats *stats);
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
    bool pin_participants;
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
/* Crew: the threads of a pool                                               */
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
    uint32_t seen;              /* member-private: the last sequence run   */
    unsigned index;
    struct tt__crew *crew;
    pthread_t thread;
    pid_t tid;
    size_t stack_size;
} tt__member;

/* The backend table (BLIS style): the OpenMP backend opens one parallel
 * region on a host thread; the serial backend has no threads and is always
 * built, so --disable-parallel is the same code with another table. */
typedef struct tt__backend {
    const char *name;
    /* Start the crew's threads; every member then runs tt__member_main. */
    int (*start)(struct tt__crew *c);
    /* Join what start created (after every member left tt__member_main). */
    void (*join)(struct tt__crew *c);
    /* The OpenMP thread number at nesting level 1 of the calling thread, or
     * -1 when it is not inside a parallel region. */
    int (*level1_thread_num)(void);
    /* Around tt_external's callback: let exactly `width` threads form one
     * nested region from the calling thread, and put things back. */
    void (*external_enter)(unsigned width, int saved[4]);
    void (*external_leave)(const int saved[4]);
    /* The thread limit OpenMP imposes (UINT32_MAX when none). */
    unsigned (*thread_limit)(void);
} tt__backend;

extern const tt__backend tt__backend_serial;
#if TT_HAVE_OPENMP
extern const tt__backend tt__backend_omp;
#endif
const tt__backend *tt__backend_get(void);

typedef struct tt__crew {
    unsigned width;
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
    tt__wait_stats stats;
    _Atomic uint32_t park_epoch; /* bumped by tt_pool_release_idle      */
    cpu_set_t cpus;           /* the building thread's CPU set          */
    bool have_cpus;

    /* Start-up handshake. */
    _Atomic uint32_t started;  /* members that reached tt__member_main   */
    _Atomic uint32_t got;      /* team size OpenMP formed (0 = not yet)  */
    tt__event startup;         /* posted as members register             */
    _Atomic int start_err;

    pthread_t host;
    bool host_started;
    _Atomic uint32_t exited;   /* members that left tt__member_main      */

    tt__member *members;       /* width entries, cache-line aligned      */
    void *members_mem;
    struct tt__crew *next;     /* in the process-wide cache              */
} tt__crew;

int tt__crew_create(const struct tt_pool_attr *attr, unsigned width, tt__crew **out);
/* Tell every member to leave and join the threads. */
void tt__crew_destroy(tt__crew *c);
/* Body of every member thread: register, serve work until shutdown. */
void tt__member_main(tt__crew *c, unsigned k);
/* Hand `w` to member m (owned by the caller's gang) and wake it. */
void tt__member_post(tt__member *m, tt__work *w);

/* ------------------------------------------------------------------------ */
/* The pool and its gangs                                                    */
/* ------------------------------------------------------------------------ */

struct tt__gang_waiter {
    unsigned n;
    bool prefix;
    struct tt__gang_waiter *next;
};

/* A gang is a set of members reserved for one root entry (or a team). Its
 * member list lives in the frame of the entry that acquired it (or in the
 * team object) and outlives every token that refers to it. */
struct tt_pool {
    /* Bumped when the pool is destroyed. Pool objects are never returned to
     * the allocator (they are reused by later pools), so a token that
     * outlived its pool can still read this and report TT_EDESTROYED. */
    _Atomic uint32_t gen;
    struct tt_pool *next_shell;
    bool retired;             /* in the shell list: not a live pool      */
    _Atomic bool doomed;      /* destroyed from a member: last out ends it */
    tt_wait_counts base;      /* counters of a reused crew at build        */
    unsigned width;
    tt__crew *crew;           /* NULL for width 1: nothing ever dispatches */
    struct tt_pool_attr attr; /* settings in force (thread_name not owned) */
    uint64_t forked_gen;      /* fork generation at build (TT_EFORKED)     */

    /* Member reservation: a bitmap of free members under a mutex, and a
     * FIFO of plain threads waiting for members, so that acquisitions (and
     * so broadcasts) are served in one order. */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    uint64_t *free_bits;      /* bit k set: member k is free              */
    unsigned free_count;
    struct tt__gang_waiter *wait_head; /* FIFO of blocking acquirers     */
    struct tt__gang_waiter *wait_tail;
    bool team_owned;          /* a tt_team owns the pool                  */

    _Atomic uint64_t installs; /* plain-thread acquisitions (ledger)      */

    /* Entries running on the pool's tokens, inline ones included, so that
     * a destroy under a running entry is refused (or, from a member, is
     * finished by the last entry out). `closing` is set by a destroy while
     * it checks: an entry that starts meanwhile waits for the verdict. */
    _Atomic uint32_t entries;
    _Atomic uint32_t closing;
};

/* Index of the calling thread as a member of pool, or -1. O(1): the level-1
 * OpenMP thread number names the only member it can be, and a pthread
 * comparison confirms it. */
int tt__pool_member_of(const tt_pool *pool);

/* Take exactly n free members for a plain thread, waiting in FIFO order
 * (timeout_ns UINT64_MAX: forever). idx receives their indices, lowest
 * first. Returns TT_OK or TT_REFUSED_UNAVAILABLE on timeout. */
int tt__gang_acquire(tt_pool *p, unsigned n, uint32_t *idx, uint64_t timeout_ns);
/* Take members 0..n-1 exactly (broadcast), FIFO, waiting forever. */
void tt__gang_acquire_prefix(tt_pool *p, unsigned n, uint32_t *idx);
/* Take up to n free members without waiting (a member's nested root);
 * returns how many. Takes nothing while plain threads queue. */
unsigned tt__gang_try_acquire(tt_pool *p, unsigned n, uint32_t *idx);
void tt__gang_release(tt_pool *p, unsigned n, const uint32_t *idx);
/* Take exactly n free members without waiting, or none (tt_team_try_lead);
 * true when it took them. Takes nothing while plain threads queue. */
bool tt__gang_try_acquire_all(tt_pool *p, unsigned n, uint32_t *idx);

extern _Atomic uint64_t tt__fork_generation; /* bumped in fork() children */
/* True in a fork() child of the process that built the pool. */
bool tt__pool_forked(const tt_pool *p);
/* Count an entry in (TT_OK, or TT_EDESTROYED when the pool is gone) and
 * out (the last one out of a pool destroyed from a member tears it down). */
int tt__pool_entry_begin(tt_pool *p, uint32_t gen);
void tt__pool_entry_end(tt_pool *p);
/* Tear down a pool destroyed from a member once nothing holds it; true
 * when it did. */
bool tt__pool_finish_doomed(tt_pool *p);

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
int tt__exec_enter(tt__exec *x);
void tt__exec_leave(tt__exec *x);
void tt__exec_suspend(const tt__exec *x);
void tt__exec_resume(const tt__exec *x);

/* Team-authority entries (team.c, called by exec.c). */
int tt__team_fork(tt__exec *x, unsigned jobs, tt_job_fn job, void *arg);
int tt__team_for_ranges(tt__exec *x, size_t len, size_t grain, tt_range_fn body, void *arg);
int tt__team_broadcast(tt__exec *x, tt_bcast_fn fn, void *arg);
/* Hooks of team.c that token.c calls: end the leader role of a lead token
 * (a no-op for other tokens), and whether a command is in flight on a team
 * token's control block (its `team` field). */
void tt__team_token_end(tt__exec *x);
bool tt__team_ctl_busy(const void *ctl);

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
    size_t base = len / n, rem = len % n;
    *begin = j * base + (j < rem ? j : rem);
    *end = *begin + base + (j < rem ? 1 : 0);
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
/* Ledger (ledger.c); every call is a no-op without --enable-ledger          */
/* ------------------------------------------------------------------------ */

#if TT_LEDGER_ENABLED
void *tt__ledger_new_root(void);
void tt__ledger_enter(void *root, unsigned n);
void tt__ledger_leave(void *root, unsigned n);
void tt__ledger_install(tt_pool *pool);
#else
static inline void *tt__ledger_new_root(void) { return NULL; }
static inline void tt__ledger_enter(void *root, unsigned n) { (void)root; (void)n; }
static inline void tt__ledger_leave(void *root, unsigned n) { (void)root; (void)n; }
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

/* CPUs in the calling thread's affinity set (at least 1). */
unsigned tt__affinity_cpus(void);
/* The CPUs of the process's affinity set when the first pool was built: a
 * hint for hot paths that must not make a system call. */
unsigned tt__cpu_count_cached(void);

#endif /* TT_INTERNAL_H */
