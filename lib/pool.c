/*
 * pool.c -- pools: width, membership, lifecycle (destroy, fork, reuse).
 *
 * A pool is a width (its slots, gang.c) and the crews that run its tasks:
 * region crews for roots on the callers' own OpenMP teams (host_team.c) and
 * a private crew (crew.c) where sharing cannot work. A pool with default
 * settings starts no thread when it is built; a pool with thread settings of
 * its own starts its private crew at build, so that its on_start hooks and
 * thread names take effect there and a failure is reported by
 * tt_pool_create.
 */
#include "share.h"
#include "ledger.h"
#include "test_hooks.h"
#include "futex.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <sys/resource.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <time.h>

/* Bumped in every fork() child (pool.c is its only reader). */
static _Atomic uint64_t fork_generation;

/* ------------------------------------------------------------------------ */
/* fork() in a child: the crews' threads do not exist there                  */
/* ------------------------------------------------------------------------ */

/* Pool objects are kept for reuse (see struct tt_pool); this list holds the
 * destroyed ones. */
static pthread_mutex_t shell_lock = PTHREAD_MUTEX_INITIALIZER;
static tt_pool *shell_head;

/* Set in a fork() child whose parent had other threads when it forked:
 * the forking thread may have had a libgomp team, whose threads do not
 * exist in the child, and a region opened on it there hangs (GCC PR
 * 60035). Roots in such a child run on private crews (a new host thread
 * gets a libgomp pool of its own). A child of a single-threaded parent (a
 * test runner, a shell) has no such team: its roots use its own team. */
static _Atomic bool fork_tainted;
static bool fork_multithreaded;

static void atfork_prepare(void)
{
    unsigned n = tt__process_threads();
    fork_multithreaded = n != 1;
    pthread_mutex_lock(&shell_lock);
    tt__crew_atfork_prepare();
}

static void atfork_parent(void)
{
    tt__crew_atfork_parent();
    pthread_mutex_unlock(&shell_lock);
}

static void atfork_child(void)
{
    atomic_fetch_add_explicit(&fork_generation, 1, memory_order_relaxed);
    if (fork_multithreaded)
        atomic_store_explicit(&fork_tainted, true, memory_order_relaxed);
    /* The retired pool objects may carry entry counts of the parent's
     * other threads, which do not exist here: a pool built on one of them
     * must start from zero. */
    for (tt_pool *p = shell_head; p; p = p->next_shell) {
        atomic_store_explicit(&p->entries, 0, memory_order_relaxed);
        atomic_store_explicit(&p->closing, 0, memory_order_relaxed);
    }
    tt__crew_atfork_child();
    /* The forking thread took the lock in atfork_prepare and is the child's
     * only thread: it owns it, and unlocks it. */
    pthread_mutex_unlock(&shell_lock);
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static void atfork_register(void) { pthread_atfork(atfork_prepare, atfork_parent, atfork_child); }

/* Registered when the library is loaded, not when the first pool is built:
 * a fork() child must know it is one even if the parent never built a
 * pool, because libgomp's team of the forking thread is broken there (GCC
 * PR 60035) and roots in the child must not open regions on it. */
__attribute__((constructor)) static void atfork_at_load(void)
{
    pthread_once(&atfork_once, atfork_register);
}

static bool pool_forked(const tt_pool *p)
{
    return p->forked_gen != atomic_load_explicit(&fork_generation, memory_order_relaxed);
}

/* ------------------------------------------------------------------------ */
/* Pools                                                                     */
/* ------------------------------------------------------------------------ */

static tt_pool *shell_get(void)
{
    pthread_mutex_lock(&shell_lock);
    tt_pool *p = shell_head;
    if (p)
        shell_head = p->next_shell;
    pthread_mutex_unlock(&shell_lock);
    if (!p) {
        p = tt__calloc_lines(1, sizeof *p);
        if (!p)
            return NULL;
        atomic_store_explicit(&p->gen, 1, memory_order_relaxed);
    }
    p->next_shell = NULL;
    return p;
}

/* Retire a pool object: every token minted on it now reads TT_EDESTROYED. */
static void shell_put(tt_pool *p)
{
    free((void *)p->free_bits);
    p->free_bits = NULL;
    p->crew = NULL;
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
    pthread_mutex_lock(&shell_lock);
    atomic_store_explicit(&p->state, TT__POOL_RETIRED, memory_order_release);
    p->next_shell = shell_head;
    shell_head = p;
    pthread_mutex_unlock(&shell_lock);
}

/* The lock and the condition variable are not destroyed: a destroy that
 * raced the teardown may still take the lock to read the state (and find
 * RETIRED); tt_pool_create initialises them again when it reuses the
 * object. */
static void pool_free(tt_pool *p) { shell_put(p); }

int tt_pool_create(tt_pool **pool, const tt_pool_attr *attr)
{
    if (!pool)
        return TT__EINVAL("!pool");
    *pool = NULL;
    if (tt__runtime_check() != TT_OK)
        return TT_ERUNTIME;
    pthread_once(&atfork_once, atfork_register);

    struct tt_pool_attr a;
    if (attr)
        a = *attr;
    else
        tt__attr_defaults(&a);
    const tt__backend *be = tt__backend_get();

    /* The default width is the application's: the building thread's
     * nthreads-var, so that the library's regions and the application's
     * reuse one hot team (OMP_NUM_THREADS=3 gives a pool of 3). */
    unsigned width = a.threads ? a.threads : be->max_threads();
#if !TT_HAVE_OPENMP
    width = 1; /* --disable-parallel: every pool has width 1 */
#endif
    if (width == 0)
        width = 1;
    if (width > 1 && width > tt__width_limit(be))
        return TT_ERANGE;

    tt_pool *p = shell_get();
    if (!p)
        return TT_ENOMEM;
    /* Clear everything but the generation and the entry words, which stale
     * tokens may still read and write. */
    _Static_assert(offsetof(struct tt_pool, gen) == 0, "gen must come first");
    _Static_assert(offsetof(struct tt_pool, next_shell) > offsetof(struct tt_pool, closing),
                   "the entry words come before next_shell");
    size_t keep = offsetof(struct tt_pool, next_shell);
    memset((char *)p + keep, 0, sizeof *p - keep);
    p->width = width;
    /* Without a spin_polls attribute, every wait of the pool follows the
     * application's OpenMP settings (OMP_WAIT_POLICY, GOMP_SPINCOUNT). */
    const tt__omp_waits *ow = tt__omp_waits_get(); /* also sets the throttled budget */
    if (!a.spin_polls_set)
        a.spin_polls = ow->spin_polls;
    p->attr = a;
    p->attr.thread_name = NULL; /* the crew owns its copy */
    p->dedicated = tt__attr_dedicated(&a);
    p->forked_gen = atomic_load_explicit(&fork_generation, memory_order_relaxed);
    size_t words = (width + 63) / 64;
    p->free_bits = tt__calloc_lines(words, sizeof(_Atomic uint64_t));
    if (!p->free_bits) {
        shell_put(p);
        return TT_ENOMEM;
    }
    if (pthread_mutex_init(&p->lock, NULL) != 0) {
        shell_put(p);
        return TT_ENOMEM;
    }
    if (pthread_cond_init(&p->cond, NULL) != 0) {
        pthread_mutex_destroy(&p->lock);
        shell_put(p);
        return TT_ENOMEM;
    }
    tt__gang_init_free(p);
    tt__crew_note_width(width);
    if (width > 1 && p->dedicated) {
        tt__crew *c = NULL;
        int rc = tt__crew_create(&a, width, &c);
        if (rc != TT_OK) {
            pool_free(p);
            return rc;
        }
        atomic_store_explicit(&p->crew, c, memory_order_release);
    }
    *pool = p;
    return TT_OK;
}

int tt__pool_private_crew(tt_pool *p, tt__crew **out)
{
    tt__crew *c = tt__pool_crew(p);
    if (c) {
        *out = c;
        return TT_OK;
    }
    /* Started under the pool's lock, so that two roots that need it at once
     * start one crew. A default pool takes a cached crew of its width when
     * there is one (each member then takes the process's CPU set). */
    pthread_mutex_lock(&p->lock);
    c = tt__pool_crew(p);
    int rc = TT_OK;
    if (!c) {
        c = tt__crew_cache_take(p->width, &p->attr);
        if (!c)
            rc = tt__crew_create(&p->attr, p->width, &c);
        if (rc == TT_OK) {
            /* A cached crew counted its waits for earlier pools too. */
            p->base.join_sleeps = atomic_load_explicit(&c->stats->join_sleeps, memory_order_relaxed);
            p->base.barrier_sleeps = atomic_load_explicit(&c->stats->barrier_sleeps, memory_order_relaxed);
            p->base.member_parks = atomic_load_explicit(&c->stats->member_parks, memory_order_relaxed);
            p->base.preemptions = atomic_load_explicit(&c->stats->preemptions, memory_order_relaxed);
            p->base.starving = atomic_load_explicit(&c->stats->starving, memory_order_relaxed);
            p->base.wakes = atomic_load_explicit(&c->stats->wakes, memory_order_relaxed);
            atomic_store_explicit(&p->crew, c, memory_order_release);
        }
    }
    pthread_mutex_unlock(&p->lock);
    *out = c;
    return rc;
}

static _Atomic bool force_private_crew;
void tt__test_force_private_crew(bool on)
{
    atomic_store_explicit(&force_private_crew, on, memory_order_relaxed);
}

bool tt__pool_uses_private_crew(const tt_pool *p)
{
    if (p->dedicated || atomic_load_explicit(&force_private_crew, memory_order_relaxed))
        return true;
    /* In a fork() child of a multi-threaded parent libgomp's team of the
     * forking thread may be broken (GCC PR 60035): every root there runs on
     * a private crew, whose host thread has a libgomp pool of its own. */
    if (atomic_load_explicit(&fork_tainted, memory_order_relaxed))
        return true;
    return tt__backend_get()->in_parallel();
}

/* Teardowns so far (test hook: exactly one per destroyed pool). */
static _Atomic unsigned long teardowns;
unsigned long tt__test_pool_teardowns(void)
{
    return atomic_load_explicit(&teardowns, memory_order_relaxed);
}

/* Hand the private crew back (to the cache, or join it), free the region
 * crews, and retire the pool. */
static void pool_teardown(tt_pool *pool)
{
    atomic_fetch_add_explicit(&teardowns, 1, memory_order_relaxed);
    tt__crew *c = atomic_exchange_explicit(&pool->crew, NULL, memory_order_acq_rel);
    if (c) {
        if (c->dedicated)
            tt__crew_destroy(c);
        else
            tt__crew_cache_put(c);
    }
    tt__region_crews_free(pool);
    pool_free(pool);
}

static void *reaper_main(void *arg)
{
    pool_teardown(arg);
    return NULL;
}

/* A pool destroyed from one of its members is torn down by the last entry
 * out. */
static void doom_finish(tt_pool *p)
{
    tt__crew *mine = NULL;
    if (tt__pool_member_of(p, &mine) < 0 || mine->kind != TT__CREW_PRIVATE) {
        pool_teardown(p);
        return;
    }
    /* A member of the private crew cannot join its own team: a detached
     * thread does it. */
    pthread_t t;
    pthread_attr_t pa;
    pthread_attr_init(&pa);
    pthread_attr_setdetachstate(&pa, PTHREAD_CREATE_DETACHED);
    if (tt__thread_create(&t, &pa, reaper_main, p) != 0) {
        /* No thread to spare: leave the crew running; the pool object stays
         * retired. This leaks the crew but never corrupts anything. */
        atomic_store_explicit(&p->crew, NULL, memory_order_relaxed);
    }
    pthread_attr_destroy(&pa);
}

/* The first half of an entry's count, before its generation check.
 * seq_cst pairs with the destroy's store of `closing` and load of
 * `entries`: either the destroy sees this entry, or this entry sees the
 * destroy and waits for its verdict. */
static void entry_count_in(tt_pool *p)
{
    atomic_fetch_add_explicit(&p->entries, 1, memory_order_seq_cst);
}

int tt__pool_entry_begin(tt_pool *p, uint32_t gen)
{
    entry_count_in(p);
    while (atomic_load_explicit(&p->closing, memory_order_seq_cst))
        tt__cpu_relax();
    if (atomic_load_explicit(&p->gen, memory_order_acquire) != gen) {
        tt__pool_entry_end(p);
        return TT_EDESTROYED;
    }
    return TT_OK;
}

void tt__pool_entry_end(tt_pool *p)
{
    uint32_t left = atomic_fetch_sub_explicit(&p->entries, 1, memory_order_acq_rel) - 1;
    TT__INVARIANT(left != UINT32_MAX, "pool entry count: an entry ended that never began");
    if (left == 0 && atomic_load_explicit(&p->state, memory_order_acquire) == TT__POOL_DOOMED)
        tt__pool_finish_doomed(p);
}

/* Nothing holds the pool: every slot free, no team, no entry (under
 * `lock`). */
static bool pool_idle(tt_pool *p)
{
    return tt__gang_all_free(p) && !p->team_owned && p->wait_head == NULL &&
           atomic_load_explicit(&p->entries, memory_order_acquire) == 0;
}

/* The last holder out of a pool destroyed from a member tears it down.
 * The claim happens under the lock, so it happens once. */
bool tt__pool_finish_doomed(tt_pool *p)
{
    pthread_mutex_lock(&p->lock);
    bool due = atomic_load_explicit(&p->state, memory_order_relaxed) == TT__POOL_DOOMED &&
               pool_idle(p);
    if (due)
        atomic_store_explicit(&p->state, TT__POOL_ENDING, memory_order_relaxed);
    pthread_mutex_unlock(&p->lock);
    if (due)
        doom_finish(p);
    return due;
}

/* Test hooks (tests/test_races.c, test_entry_count_survives_reuse): the
 * two halves of an entry's count around its generation check, so that a
 * test can put a pool-object reuse between them, which a real entry only
 * meets when it is preempted in that window. Not exported by the shared
 * library (the tests link the static archive). */
void tt__test_entry_count_in(tt_pool *p) { entry_count_in(p); }
void tt__test_entry_count_out(tt_pool *p) { tt__pool_entry_end(p); }

int tt_pool_destroy(tt_pool *pool)
{
    if (!pool)
        return TT_OK;
    if (pool_forked(pool)) {
        /* In a fork child the threads do not exist: release the memory
         * only. The locks were copied in whatever state; leave them. A
         * second destroy finds the object retired. */
        if (atomic_load_explicit(&pool->state, memory_order_acquire) == TT__POOL_RETIRED)
            return TT_EDESTROYED;
        tt__crew *c = tt__pool_crew(pool);
        if (c)
            tt__crew_free(c);
        atomic_store_explicit(&pool->crew, NULL, memory_order_relaxed);
        tt__region_crews_free(pool);
        /* Its entry count holds the parent's other threads' entries, which
         * do not exist here (every entry on a pre-fork pool is refused in
         * the child before it counts itself): the next pool built on this
         * object starts from zero. */
        atomic_store_explicit(&pool->entries, 0, memory_order_relaxed);
        atomic_store_explicit(&pool->closing, 0, memory_order_relaxed);
        shell_put(pool);
        return TT_OK;
    }
    /* ENDING and RETIRED are final: someone else tears it down, or did. */
    if (atomic_load_explicit(&pool->state, memory_order_acquire) >= TT__POOL_ENDING)
        return TT_EDESTROYED;
    pthread_mutex_lock(&pool->lock);
    uint32_t st = atomic_load_explicit(&pool->state, memory_order_relaxed);
    if (st >= TT__POOL_ENDING) {
        pthread_mutex_unlock(&pool->lock);
        return TT_EDESTROYED;
    }
    if (st == TT__POOL_DOOMED) {
        /* Already destroyed from a member: the last holder out ends it;
         * from a plain thread with nothing running, end it now (claimed
         * under the lock, so the last holder out finds ENDING). */
        bool idle = tt__pool_member_of(pool, NULL) < 0 && pool_idle(pool);
        if (idle)
            atomic_store_explicit(&pool->state, TT__POOL_ENDING, memory_order_relaxed);
        pthread_mutex_unlock(&pool->lock);
        if (idle)
            pool_teardown(pool);
        return idle ? TT_OK : TT_EDESTROYED;
    }
    if (tt__pool_member_of(pool, NULL) >= 0) {
        /* From one of its own members: signal shutdown and return. New
         * entries are refused from now on; the last entry out tears the
         * pool down. */
        atomic_store_explicit(&pool->state, TT__POOL_DOOMED, memory_order_release);
        atomic_fetch_add_explicit(&pool->gen, 1, memory_order_release);
        pthread_mutex_unlock(&pool->lock);
        return TT_OK;
    }
    bool busy = !tt__gang_all_free(pool) || pool->team_owned || pool->wait_head != NULL;
    if (!busy) {
        /* Entries that do not reserve members (inline ones) count only in
         * `entries`: close the door, look, and open it again if busy. */
        atomic_store_explicit(&pool->closing, 1, memory_order_seq_cst);
        busy = atomic_load_explicit(&pool->entries, memory_order_seq_cst) != 0;
        if (!busy) {
            /* ENDING before the bump, both release: a tt_exec_init that
             * reads the bumped generation reads ENDING too (token.c). */
            atomic_store_explicit(&pool->state, TT__POOL_ENDING, memory_order_release);
            atomic_fetch_add_explicit(&pool->gen, 1, memory_order_release);
        }
        atomic_store_explicit(&pool->closing, 0, memory_order_seq_cst);
    }
    pthread_mutex_unlock(&pool->lock);
    if (busy)
        return TT_EBUSY;
    pool_teardown(pool);
    return TT_OK;
}

unsigned tt_pool_width(const tt_pool *pool) { return pool ? pool->width : 0; }

uint64_t tt_pool_spin_polls(const tt_pool *pool) { return pool ? pool->attr.spin_polls : 0; }

bool tt_pool_pin_participants(const tt_pool *pool)
{
    return pool ? pool->attr.pin_participants : false;
}

int tt_pool_release_idle(tt_pool *pool)
{
    if (!pool)
        return TT__EINVAL("!pool");
    /* Relaxed: a member that misses the bump finishes its spin as it would
     * have anyway; nothing depends on it. */
    tt__crew *c = tt__pool_crew(pool);
    if (c)
        atomic_fetch_add_explicit(&c->park_epoch, 1, memory_order_relaxed);
    for (c = atomic_load_explicit(&pool->regions, memory_order_acquire); c;
         c = atomic_load_explicit(&c->next_all, memory_order_relaxed))
        atomic_fetch_add_explicit(&c->park_epoch, 1, memory_order_relaxed);
    return TT_OK;
}

size_t tt_pool_member_stack_size(const tt_pool *pool)
{
    tt__crew *c = pool ? tt__pool_crew(pool) : NULL;
    if (!c)
        return 0;
    size_t min = SIZE_MAX;
    for (unsigned k = 0; k < pool->width; k++)
        if (c->members[k].stack_size < min)
            min = c->members[k].stack_size;
    return min == SIZE_MAX ? 0 : min;
}

static bool is_member(const tt__crew *c, int k, uintptr_t self)
{
    return (unsigned)k < c->width &&
           atomic_load_explicit(&c->members[k].thread_id, memory_order_relaxed) == self;
}

int tt__pool_member_of(const tt_pool *pool, tt__crew **crew)
{
    if (crew)
        *crew = NULL;
    if (pool->width <= 1)
        return -1;
    int k = tt__backend_get()->level1_thread_num();
    if (k < 0)
        return -1;
    uintptr_t self = tt__self_id();
    tt__crew *c = tt__pool_crew(pool);
    if (!(c && is_member(c, k, self))) {
        /* At most one region crew per concurrent root: this walk is short. */
        for (c = atomic_load_explicit(&((tt_pool *)pool)->regions, memory_order_acquire); c;
             c = atomic_load_explicit(&c->next_all, memory_order_relaxed))
            if (is_member(c, k, self))
                break;
    }
    if (!c)
        return -1;
    if (crew)
        *crew = c;
    return k;
}

bool tt_pool_is_member(const tt_pool *pool, unsigned *member)
{
    if (!pool)
        return false;
    int k = tt__pool_member_of(pool, NULL);
    if (k < 0)
        return false;
    if (member)
        *member = (unsigned)k;
    return true;
}

bool tt__pool_forked(const tt_pool *p) { return pool_forked(p); }

int tt_pool_wait_counts(const tt_pool *pool, tt_wait_counts *out)
{
    if (!pool)
        return TT__EINVAL("!pool");
    if (!out)
        return TT__EINVAL("!out");
    memset(out, 0, sizeof *out);
    /* The waits of the region crews (the pool's own counters) and of the
     * private crew since this pool took it (a crew taken from the cache
     * counted for earlier pools too). */
    const tt__wait_stats *st = &pool->stats;
    out->join_sleeps = atomic_load_explicit(&st->join_sleeps, memory_order_relaxed);
    out->barrier_sleeps = atomic_load_explicit(&st->barrier_sleeps, memory_order_relaxed);
    out->member_parks = atomic_load_explicit(&st->member_parks, memory_order_relaxed);
    out->preemptions = atomic_load_explicit(&st->preemptions, memory_order_relaxed);
    out->starving = atomic_load_explicit(&st->starving, memory_order_relaxed);
    out->wakes = atomic_load_explicit(&st->wakes, memory_order_relaxed);
    tt__crew *c = tt__pool_crew(pool);
    if (c && c->stats != st) {
        st = c->stats;
        out->join_sleeps += atomic_load_explicit(&st->join_sleeps, memory_order_relaxed) - pool->base.join_sleeps;
        out->barrier_sleeps += atomic_load_explicit(&st->barrier_sleeps, memory_order_relaxed) - pool->base.barrier_sleeps;
        out->member_parks += atomic_load_explicit(&st->member_parks, memory_order_relaxed) - pool->base.member_parks;
        out->preemptions += atomic_load_explicit(&st->preemptions, memory_order_relaxed) - pool->base.preemptions;
        out->starving += atomic_load_explicit(&st->starving, memory_order_relaxed) - pool->base.starving;
        out->wakes += atomic_load_explicit(&st->wakes, memory_order_relaxed) - pool->base.wakes;
    }
    return TT_OK;
}

/* One of the pool's wait counters (`off`: its offset in tt__wait_stats),
 * summed over the pool's own stats and its private crew's. */
static uint64_t pool_counter(const tt_pool *pool, size_t off)
{
    const tt__wait_stats *st = &pool->stats;
    uint64_t n = atomic_load_explicit((_Atomic uint64_t *)((char *)st + off), memory_order_relaxed);
    tt__crew *c = tt__pool_crew(pool);
    if (c && c->stats != st)
        n += atomic_load_explicit((_Atomic uint64_t *)((char *)c->stats + off),
                                  memory_order_relaxed);
    return n;
}

uint64_t tt__test_pool_spun_polls(const tt_pool *pool)
{
    return pool_counter(pool, offsetof(tt__wait_stats, spun_polls));
}

uint64_t tt__test_pool_lead_late(const tt_pool *pool)
{
    return pool_counter(pool, offsetof(tt__wait_stats, lead_late));
}

uint64_t tt__test_pool_scope_end_joins(const tt_pool *pool)
{
    return pool_counter(pool, offsetof(tt__wait_stats, scope_end_joins));
}

uint64_t tt__test_pool_crowded_waits(const tt_pool *pool)
{
    return pool_counter(pool, offsetof(tt__wait_stats, crowded_waits));
}

uint64_t tt__test_pool_nudges(const tt_pool *pool)
{
    return pool_counter(pool, offsetof(tt__wait_stats, nudges));
}

uint64_t tt__test_pool_lead_wait_skips(const tt_pool *pool)
{
    return pool_counter(pool, offsetof(tt__wait_stats, lead_wait_skips));
}
