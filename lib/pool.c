/*
 * pool.c -- pools, their crews (the member threads) and member reservation.
 *
 * A pool of width W > 1 owns a crew: W members, each with a mailbox. A
 * member runs tt__member_main: it waits on its mailbox (spin, yield, futex),
 * runs the work it was handed, and waits again. Work reaches a member only
 * through the gang that reserved it, so a mailbox has exactly one writer at
 * a time and needs no lock.
 *
 * Reservation: a bitmap of free members under the pool's mutex. A plain
 * thread that enters the pool waits in a FIFO until the members it needs are
 * all free and takes them at once (all or nothing, so two waiters never hold
 * parts of what each other needs). A member that mints a new root takes
 * what is free without waiting. Broadcasts take the prefix 0..n-1 through
 * the same FIFO, which is what puts concurrent broadcasts in the same order
 * on every member.
 */
#include "internal.h"
#include "wait.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <sys/resource.h>

_Atomic uint64_t tt__fork_generation;

/* ------------------------------------------------------------------------ */
/* CPUs and limits                                                           */
/* ------------------------------------------------------------------------ */

unsigned tt__affinity_cpus(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0)
            return (unsigned)n;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned)n : 1u;
}

static _Atomic unsigned cpu_count_hint;


unsigned tt__cpu_count_cached(void)
{
    unsigned n = atomic_load_explicit(&cpu_count_hint, memory_order_relaxed);
    if (n == 0) {
        n = tt__affinity_cpus();
        atomic_store_explicit(&cpu_count_hint, n, memory_order_relaxed);
    }
    return n;
}

/* Widths above this are refused even when the system would allow them:
 * the member list of a gang lives on the entry's stack. */
#define TT__MAX_WIDTH 4096u

static unsigned long read_threads_max(void)
{
    FILE *f = fopen("/proc/sys/kernel/threads-max", "r");
    unsigned long v = 0;
    if (f) {
        if (fscanf(f, "%lu", &v) != 1)
            v = 0;
        fclose(f);
    }
    return v;
}

/* The most threads a pool may ask for: our own cap, OpenMP's thread limit,
 * the kernel's threads-max, and the process's RLIMIT_NPROC. */
static unsigned width_limit(const tt__backend *be)
{
    unsigned lim = TT__MAX_WIDTH;
    unsigned omp = be->thread_limit();
    if (omp < lim)
        lim = omp;
    unsigned long tmax = read_threads_max();
    if (tmax > 0 && tmax < lim)
        lim = (unsigned)tmax;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NPROC, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < lim)
        lim = (unsigned)rl.rlim_cur;
    return lim;
}

/* ------------------------------------------------------------------------ */
/* Members                                                                   */
/* ------------------------------------------------------------------------ */

/* The sentinel work that tells a member to leave. */
static void exit_run(tt__work *w, tt__member *m)
{
    (void)w;
    (void)m;
}
static tt__work tt__work_exit = {exit_run};

static void member_set_name(tt__crew *c, unsigned k)
{
#if defined(__linux__)
    if (!c->attr.thread_name)
        return;
    char name[16];
    snprintf(name, sizeof name, "%s%u", c->attr.thread_name, k);
    /* Linux truncates at 15 bytes; keep the index visible if it does. */
    size_t nl = strlen(c->attr.thread_name);
    char idx[12];
    int il = snprintf(idx, sizeof idx, "%u", k);
    if (nl + (size_t)il > 15)
        snprintf(name, sizeof name, "%.*s%s", 15 - il, c->attr.thread_name, idx);
    pthread_setname_np(pthread_self(), name);
#else
    (void)c;
    (void)k;
#endif
}

static size_t own_stack_size(void)
{
#if defined(__linux__)
    pthread_attr_t a;
    size_t sz = 0;
    if (pthread_getattr_np(pthread_self(), &a) == 0) {
        pthread_attr_getstacksize(&a, &sz);
        pthread_attr_destroy(&a);
    }
    return sz;
#else
    return 0;
#endif
}

void tt__member_main(tt__crew *c, unsigned k)
{
    tt__member *m = &c->members[k];
    m->thread = pthread_self();
#if defined(__linux__)
    m->tid = (pid_t)syscall(SYS_gettid);
#endif
    m->stack_size = own_stack_size();
    /* Each member takes the building thread's CPU set: OMP_PROC_BIND may
     * have bound libgomp's threads to places, which this team must not
     * inherit from the application's settings. */
    if (c->have_cpus)
        sched_setaffinity(0, sizeof c->cpus, &c->cpus);
    member_set_name(c, k);
    if (c->attr.on_start)
        c->attr.on_start(c->attr.on_start_arg, k);

    /* Register; release publishes this member's fields to the builder. */
    atomic_fetch_add_explicit(&c->started, 1, memory_order_release);
    tt__event_bump(&c->startup, NULL);

    for (;;) {
        tt__wait_policy pol = {
            .spin_polls = atomic_load_explicit(&c->idle_polls, memory_order_relaxed),
            .spin_ns = atomic_load_explicit(&c->idle_ns, memory_order_relaxed),
            .throttled = atomic_load_explicit(&c->oversubscribed, memory_order_relaxed),
            .yield_every = TT__IDLE_YIELD_EVERY,
        };
        pol.stop = &c->park_epoch;
        pol.stop_val = atomic_load_explicit(&c->park_epoch, memory_order_relaxed);
        uint32_t seq = tt__event_wait_ne(&m->mail, m->seen, &pol, &c->stats, &c->stats.member_parks);
        m->seen = seq;
        /* The acquire load of the mailbox word in the wait made the work
         * pointer stored before it visible. */
        tt__work *w = atomic_load_explicit(&m->work, memory_order_relaxed);
        if (w == &tt__work_exit)
            break;
        w->run(w, m);
    }
    atomic_fetch_add_explicit(&c->exited, 1, memory_order_release);
}

void tt__member_post(tt__member *m, tt__work *w)
{
    /* Only the gang that owns m writes its mailbox, so the word has one
     * writer; the seq_cst store in tt__event_post releases the work
     * pointer to the member's acquire load. */
    uint32_t seq = atomic_load_explicit(&m->mail.word, memory_order_relaxed) + 1;
    atomic_store_explicit(&m->work, w, memory_order_relaxed);
    tt__event_post(&m->mail, seq, &m->crew->stats);
}

/* ------------------------------------------------------------------------ */
/* Crews                                                                     */
/* ------------------------------------------------------------------------ */

static void crew_free(tt__crew *c)
{
    free(c->attr.thread_name);
    free(c->members_mem);
    free(c);
}

/* Tell members 0..n-1 to leave. */
static void crew_send_exit(tt__crew *c, uint32_t n)
{
    for (uint32_t k = 0; k < n && k < c->width; k++)
        tt__member_post(&c->members[k], &tt__work_exit);
}

/* Settings a crew takes from the pool that uses it (at build, and again
 * when a cached crew is taken by a new pool). */
static void crew_configure(tt__crew *c, const struct tt_pool_attr *attr)
{
    bool over = c->width > tt__affinity_cpus();
    atomic_store_explicit(&c->oversubscribed, over, memory_order_relaxed);
    atomic_store_explicit(&c->idle_polls, attr->idle_spin_ns == 0 ? 0 : attr->spin_polls,
                          memory_order_relaxed);
    atomic_store_explicit(&c->idle_ns, attr->idle_spin_ns, memory_order_relaxed);
    c->team_pol = (tt__wait_policy){
        .spin_polls = attr->spin_polls,
        .spin_ns = 0,
        .throttled = over,
    };
    c->attr.spin_polls = attr->spin_polls;
    c->attr.idle_spin_ns = attr->idle_spin_ns;
    c->attr.acquire_timeout_ns = attr->acquire_timeout_ns;
    c->attr.pin_participants = attr->pin_participants;
    c->attr.idle_serves_pool = attr->idle_serves_pool;
}

/* When the process may only have a bounded number of threads, libgomp
 * would abort the process (gomp_fatal) if the OS refused one of the team's
 * threads. Start and end that many small probe threads first, so that a
 * refusal becomes TT_EAGAIN instead. */
typedef struct probe {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool go;
} probe;

static void *probe_main(void *arg)
{
    probe *pr = arg;
    pthread_mutex_lock(&pr->lock);
    while (!pr->go)
        pthread_cond_wait(&pr->cond, &pr->lock);
    pthread_mutex_unlock(&pr->lock);
    return NULL;
}

static int preflight_threads(unsigned n)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NPROC, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return TT_OK;
    pthread_t *t = tt__calloc(n, sizeof *t);
    if (!t)
        return TT_ENOMEM;
    probe pr = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER, .go = false};
    pthread_attr_t pa;
    pthread_attr_init(&pa);
    pthread_attr_setstacksize(&pa, 64 << 10);
    unsigned started = 0;
    while (started < n && pthread_create(&t[started], &pa, probe_main, &pr) == 0)
        started++;
    pthread_attr_destroy(&pa);
    pthread_mutex_lock(&pr.lock);
    pr.go = true;
    pthread_cond_broadcast(&pr.cond);
    pthread_mutex_unlock(&pr.lock);
    for (unsigned i = 0; i < started; i++)
        pthread_join(t[i], NULL);
    free(t);
    return started == n ? TT_OK : TT_EAGAIN;
}

int tt__crew_create(const struct tt_pool_attr *attr, unsigned width, tt__crew **out)
{
    *out = NULL;
    tt__crew *c = tt__calloc(1, sizeof *c);
    if (!c)
        return TT_ENOMEM;
    c->width = width;
    c->be = tt__backend_get();
    c->attr = *attr;
    c->attr.thread_name = NULL;
    if (attr->thread_name && !(c->attr.thread_name = tt__strdup(attr->thread_name))) {
        free(c);
        return TT_ENOMEM;
    }
    c->dedicated = tt__attr_dedicated(attr);
    crew_configure(c, attr);
    CPU_ZERO(&c->cpus);
    c->have_cpus = sched_getaffinity(0, sizeof c->cpus, &c->cpus) == 0;

    size_t bytes = sizeof(tt__member) * width;
    void *mem = NULL;
    if (tt__memalign(&mem, TT__CACHELINE, bytes) != 0) {
        crew_free(c);
        return TT_ENOMEM;
    }
    memset(mem, 0, bytes);
    c->members_mem = mem;
    c->members = mem;
    for (unsigned k = 0; k < width; k++) {
        c->members[k].index = k;
        c->members[k].crew = c;
    }

    int rc = preflight_threads(width);
    if (rc == TT_OK)
        rc = tt__fault_thread() ? TT_EAGAIN : c->be->start(c);
    if (rc != TT_OK) {
        crew_free(c);
        return rc;
    }
    /* Wait until OpenMP formed the team and every member registered. */
    tt__wait_policy pol = {.spin_polls = 1000};
    for (;;) {
        uint32_t seen = atomic_load_explicit(&c->startup.word, memory_order_acquire);
        uint32_t got = atomic_load_explicit(&c->got, memory_order_acquire);
        if (got && atomic_load_explicit(&c->started, memory_order_acquire) == got)
            break;
        tt__event_wait_ne(&c->startup, seen, &pol, NULL, NULL);
    }
    uint32_t got = atomic_load_explicit(&c->got, memory_order_acquire);
    if (got != width) {
        crew_send_exit(c, got);
        c->be->join(c);
        crew_free(c);
        return TT_ESHORTTEAM;
    }
    *out = c;
    return TT_OK;
}

void tt__crew_destroy(tt__crew *c)
{
    crew_send_exit(c, c->width);
    c->be->join(c);
    /* Every member counted itself out (release) after its last touch of
     * the crew; this acquire orders those touches before the free (the
     * backend's wait for the threads to end is invisible to TSan). */
    while (atomic_load_explicit(&c->exited, memory_order_acquire) < c->width)
        sched_yield();
    crew_free(c);
}

/* Work that makes a member take the crew's CPU set (a cached crew taken by
 * a pool built on another thread). */
typedef struct affinity_work {
    tt__work w;
    tt__join *join;
} affinity_work;

static void affinity_run(tt__work *w, tt__member *m)
{
    affinity_work *a = (affinity_work *)w;
    tt__crew *c = m->crew;
    if (c->have_cpus)
        sched_setaffinity(0, sizeof c->cpus, &c->cpus);
    tt__join_done(a->join, &c->stats);
}

static void crew_retarget(tt__crew *c)
{
    CPU_ZERO(&c->cpus);
    c->have_cpus = sched_getaffinity(0, sizeof c->cpus, &c->cpus) == 0;
    affinity_work works[c->width];
    tt__join join;
    tt__join_init(&join, c->width);
    for (unsigned k = 0; k < c->width; k++) {
        works[k] = (affinity_work){.w = {affinity_run}, .join = &join};
        tt__member_post(&c->members[k], &works[k].w);
    }
    tt__join_wait(&join, &c->team_pol, NULL);
}

/* ------------------------------------------------------------------------ */
/* The process-wide cache of idle default crews                              */
/* ------------------------------------------------------------------------ */

/* Oldest first. The cache holds at most max(CPUs, widest pool built)
 * threads; beyond that the oldest crews are joined. */
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static tt__crew *cache_head;
static unsigned cache_threads;
static unsigned widest_built;

static tt__crew *cache_take(unsigned width)
{
    pthread_mutex_lock(&cache_lock);
    if (width > widest_built)
        widest_built = width;
    tt__crew **pp = &cache_head;
    while (*pp && (*pp)->width != width)
        pp = &(*pp)->next;
    tt__crew *c = *pp;
    if (c) {
        *pp = c->next;
        c->next = NULL;
        cache_threads -= c->width;
    }
    pthread_mutex_unlock(&cache_lock);
    return c;
}

static void cache_put(tt__crew *c)
{
    tt__crew *evict = NULL, **tail;
    pthread_mutex_lock(&cache_lock);
    for (tail = &cache_head; *tail; tail = &(*tail)->next)
        ;
    *tail = c;
    cache_threads += c->width;
    unsigned cap = tt__affinity_cpus();
    if (widest_built > cap)
        cap = widest_built;
    /* Unlink the oldest entries beyond the cap; join them outside the lock. */
    tt__crew **evict_tail = &evict;
    while (cache_threads > cap && cache_head) {
        tt__crew *old = cache_head;
        cache_head = old->next;
        old->next = NULL;
        cache_threads -= old->width;
        *evict_tail = old;
        evict_tail = &old->next;
    }
    pthread_mutex_unlock(&cache_lock);
    while (evict) {
        tt__crew *n = evict->next;
        tt__crew_destroy(evict);
        evict = n;
    }
}

unsigned tt__cache_threads(void)
{
    pthread_mutex_lock(&cache_lock);
    unsigned n = cache_threads;
    pthread_mutex_unlock(&cache_lock);
    return n;
}

/* ------------------------------------------------------------------------ */
/* fork() in a child: the crews' threads do not exist there                  */
/* ------------------------------------------------------------------------ */

/* Pool objects are kept for reuse (see struct tt_pool); this list holds the
 * destroyed ones. */
static pthread_mutex_t shell_lock = PTHREAD_MUTEX_INITIALIZER;
static tt_pool *shell_head;

static void atfork_prepare(void)
{
    pthread_mutex_lock(&shell_lock);
    pthread_mutex_lock(&cache_lock);
}

static void atfork_parent(void)
{
    pthread_mutex_unlock(&cache_lock);
    pthread_mutex_unlock(&shell_lock);
}

static void atfork_child(void)
{
    atomic_fetch_add_explicit(&tt__fork_generation, 1, memory_order_relaxed);
    /* The cached crews' threads are gone: forget them (their memory is
     * released, no thread is joined). */
    tt__crew *c = cache_head;
    while (c) {
        tt__crew *n = c->next;
        crew_free(c);
        c = n;
    }
    cache_head = NULL;
    cache_threads = 0;
    pthread_mutex_init(&cache_lock, NULL);
    pthread_mutex_init(&shell_lock, NULL);
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static void atfork_register(void) { pthread_atfork(atfork_prepare, atfork_parent, atfork_child); }

static bool pool_forked(const tt_pool *p)
{
    return p->forked_gen != atomic_load_explicit(&tt__fork_generation, memory_order_relaxed);
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
        p = tt__calloc(1, sizeof *p);
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
    free(p->free_bits);
    p->free_bits = NULL;
    p->crew = NULL;
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
    pthread_mutex_lock(&shell_lock);
    p->retired = true;
    p->next_shell = shell_head;
    shell_head = p;
    pthread_mutex_unlock(&shell_lock);
}

static void pool_free(tt_pool *p)
{
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->cond);
    shell_put(p);
}

int tt_pool_create(tt_pool **pool, const tt_pool_attr *attr)
{
    if (!pool)
        return TT_EINVAL;
    *pool = NULL;
    pthread_once(&atfork_once, atfork_register);

    struct tt_pool_attr a;
    if (attr)
        a = *attr;
    else
        tt__attr_defaults(&a);
    const tt__backend *be = tt__backend_get();

    unsigned width = a.threads ? a.threads : tt__affinity_cpus();
#if !TT_HAVE_OPENMP
    width = 1; /* --disable-parallel: every pool has width 1 */
#endif
    if (width > 1 && width > width_limit(be))
        return TT_ERANGE;

    tt_pool *p = shell_get();
    if (!p)
        return TT_ENOMEM;
    /* Clear everything but the generation, which stale tokens may read. */
    _Static_assert(offsetof(struct tt_pool, gen) == 0, "gen must come first");
    memset((char *)p + sizeof p->gen, 0, sizeof *p - sizeof p->gen);
    p->width = width;
    p->attr = a;
    p->attr.thread_name = NULL; /* the crew owns its copy */
    p->forked_gen = atomic_load_explicit(&tt__fork_generation, memory_order_relaxed);
    size_t words = (width + 63) / 64;
    p->free_bits = tt__calloc(words, sizeof(uint64_t));
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
    for (unsigned k = 0; k < width; k++)
        p->free_bits[k / 64] |= 1ull << (k % 64);
    p->free_count = width;

    if (width > 1) {
        tt__crew *c = NULL;
        if (!tt__attr_dedicated(&a))
            c = cache_take(width);
        if (c) {
            crew_configure(c, &a);
            crew_retarget(c);
            p->crew = c;
            tt_pool_wait_counts(p, &p->base);
        } else {
            pthread_mutex_lock(&cache_lock);
            if (width > widest_built)
                widest_built = width;
            pthread_mutex_unlock(&cache_lock);
            int rc = tt__crew_create(&a, width, &p->crew);
            if (rc != TT_OK) {
                pool_free(p);
                return rc;
            }
        }
    }
    *pool = p;
    return TT_OK;
}

/* Hand the crew back (to the cache, or join it) and retire the pool. */
static void pool_teardown(tt_pool *pool)
{
    tt__crew *c = pool->crew;
    pool->crew = NULL;
    if (c) {
        if (c->dedicated)
            tt__crew_destroy(c);
        else
            cache_put(c);
    }
    pool_free(pool);
}

static void *reaper_main(void *arg)
{
    pool_teardown(arg);
    return NULL;
}

/* Called with the pool's lock held after a release: a pool destroyed from
 * one of its members is torn down by the last entry out. */

static void doom_finish(tt_pool *p)
{
    if (tt__pool_member_of(p) < 0) {
        pool_teardown(p);
        return;
    }
    /* A member cannot join its own team: a detached thread does it. */
    pthread_t t;
    pthread_attr_t pa;
    pthread_attr_init(&pa);
    pthread_attr_setdetachstate(&pa, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &pa, reaper_main, p) != 0) {
        /* No thread to spare: leave the crew running; the pool object stays
         * retired. This leaks the crew but never corrupts anything. */
        p->crew = NULL;
    }
    pthread_attr_destroy(&pa);
}

int tt__pool_entry_begin(tt_pool *p, uint32_t gen)
{
    /* seq_cst pairs with the destroy's store of `closing` and load of
     * `entries`: either the destroy sees this entry, or this entry sees
     * the destroy and waits for its verdict. */
    atomic_fetch_add_explicit(&p->entries, 1, memory_order_seq_cst);
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
    if (left == 0 && atomic_load_explicit(&p->doomed, memory_order_acquire))
        tt__pool_finish_doomed(p);
}

/* The last holder out of a pool destroyed from a member tears it down.
 * The claim happens under the lock, so it happens once. */
bool tt__pool_finish_doomed(tt_pool *p)
{
    pthread_mutex_lock(&p->lock);
    bool due = atomic_load_explicit(&p->doomed, memory_order_relaxed) &&
               p->free_count == p->width && !p->team_owned &&
               atomic_load_explicit(&p->entries, memory_order_acquire) == 0;
    if (due)
        atomic_store_explicit(&p->doomed, false, memory_order_relaxed);
    pthread_mutex_unlock(&p->lock);
    if (due)
        doom_finish(p);
    return due;
}

int tt_pool_destroy(tt_pool *pool)
{
    if (!pool)
        return TT_OK;
    if (pool_forked(pool)) {
        /* In a fork child the threads do not exist: release the memory
         * only. The locks were copied in whatever state; leave them. */
        if (pool->crew)
            crew_free(pool->crew);
        pool->crew = NULL;
        shell_put(pool);
        return TT_OK;
    }
    if (pool->retired)
        return TT_EDESTROYED;
    pthread_mutex_lock(&pool->lock);
    if (atomic_load_explicit(&pool->doomed, memory_order_relaxed)) {
        /* Already destroyed from a member: the last holder out ends it;
         * from a plain thread with nothing running, end it now. */
        bool idle = tt__pool_member_of(pool) < 0 && pool->free_count == pool->width &&
                    !pool->team_owned && atomic_load_explicit(&pool->entries, memory_order_acquire) == 0;
        if (idle)
            atomic_store_explicit(&pool->doomed, false, memory_order_relaxed);
        pthread_mutex_unlock(&pool->lock);
        if (idle)
            pool_teardown(pool);
        return idle ? TT_OK : TT_EDESTROYED;
    }
    if (tt__pool_member_of(pool) >= 0) {
        /* From one of its own members: signal shutdown and return. New
         * entries are refused from now on; the last entry out tears the
         * pool down. */
        atomic_store_explicit(&pool->doomed, true, memory_order_release);
        atomic_fetch_add_explicit(&pool->gen, 1, memory_order_release);
        pthread_mutex_unlock(&pool->lock);
        return TT_OK;
    }
    bool busy = pool->free_count != pool->width || pool->team_owned || pool->wait_head != NULL;
    if (!busy) {
        /* Entries that do not reserve members (inline ones) count only in
         * `entries`: close the door, look, and open it again if busy. */
        atomic_store_explicit(&pool->closing, 1, memory_order_seq_cst);
        busy = atomic_load_explicit(&pool->entries, memory_order_seq_cst) != 0;
        if (!busy)
            atomic_fetch_add_explicit(&pool->gen, 1, memory_order_release);
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
        return TT_EINVAL;
    if (pool->crew) {
        /* Relaxed: a member that misses the bump finishes its spin as it
         * would have anyway; nothing depends on it. */
        atomic_fetch_add_explicit(&pool->crew->park_epoch, 1, memory_order_relaxed);
    }
    return TT_OK;
}

size_t tt_pool_member_stack_size(const tt_pool *pool)
{
    if (!pool || !pool->crew)
        return 0;
    size_t min = SIZE_MAX;
    for (unsigned k = 0; k < pool->width; k++)
        if (pool->crew->members[k].stack_size < min)
            min = pool->crew->members[k].stack_size;
    return min == SIZE_MAX ? 0 : min;
}

int tt__pool_member_of(const tt_pool *pool)
{
    const tt__crew *c = pool->crew;
    if (!c)
        return -1;
    int k = c->be->level1_thread_num();
    if (k < 0 || (unsigned)k >= c->width)
        return -1;
    return pthread_equal(c->members[k].thread, pthread_self()) ? k : -1;
}

bool tt_pool_is_member(const tt_pool *pool, unsigned *member)
{
    if (!pool)
        return false;
    int k = tt__pool_member_of(pool);
    if (k < 0)
        return false;
    if (member)
        *member = (unsigned)k;
    return true;
}

/* ------------------------------------------------------------------------ */
/* Gangs                                                                     */
/* ------------------------------------------------------------------------ */

static bool bit_is_free(const tt_pool *p, unsigned k)
{
    return (p->free_bits[k / 64] >> (k % 64)) & 1u;
}

/* Take n free members, lowest first. Caller holds the lock and checked. */
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

static int acquire_fifo(tt_pool *p, unsigned n, bool prefix, uint32_t *idx, uint64_t timeout_ns)
{
    struct tt__gang_waiter me = {.n = n, .prefix = prefix, .next = NULL};
    struct timespec deadline;
    bool timed = timeout_ns != UINT64_MAX;
    if (timed) {
        clock_gettime(CLOCK_REALTIME, &deadline);
        uint64_t ns = (uint64_t)deadline.tv_nsec + timeout_ns % 1000000000ull;
        deadline.tv_sec += (time_t)(timeout_ns / 1000000000ull + ns / 1000000000ull);
        deadline.tv_nsec = (long)(ns % 1000000000ull);
    }
    pthread_mutex_lock(&p->lock);
    if (p->wait_tail)
        p->wait_tail->next = &me;
    else
        p->wait_head = &me;
    p->wait_tail = &me;
    for (;;) {
        bool ok = p->wait_head == &me && (prefix ? prefix_free(p, n) : p->free_count >= n);
        if (ok)
            break;
        int rc = timed ? pthread_cond_timedwait(&p->cond, &p->lock, &deadline)
                       : pthread_cond_wait(&p->cond, &p->lock);
        if (rc == ETIMEDOUT) {
            bool now_ok = p->wait_head == &me && (prefix ? prefix_free(p, n) : p->free_count >= n);
            if (!now_ok) {
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
    unsigned got = 0;
    if (!p->wait_head) {
        got = n < p->free_count ? n : p->free_count;
        take_lowest(p, got, idx);
    }
    pthread_mutex_unlock(&p->lock);
    return got;
}

void tt__gang_release(tt_pool *p, unsigned n, const uint32_t *idx)
{
    if (n == 0)
        return;
    pthread_mutex_lock(&p->lock);
    for (unsigned i = 0; i < n; i++)
        p->free_bits[idx[i] / 64] |= 1ull << (idx[i] % 64);
    p->free_count += n;
    if (p->wait_head)
        pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
}

bool tt__pool_forked(const tt_pool *p) { return pool_forked(p); }

int tt_pool_wait_counts(const tt_pool *pool, tt_wait_counts *out)
{
    if (!pool || !out)
        return TT_EINVAL;
    memset(out, 0, sizeof *out);
    if (!pool->crew)
        return TT_OK;
    /* A crew taken from the cache counted for earlier pools too: report
     * what happened since this pool was built. */
    const tt__wait_stats *st = &pool->crew->stats;
    out->join_sleeps = atomic_load_explicit(&st->join_sleeps, memory_order_relaxed) - pool->base.join_sleeps;
    out->barrier_sleeps = atomic_load_explicit(&st->barrier_sleeps, memory_order_relaxed) - pool->base.barrier_sleeps;
    out->member_parks = atomic_load_explicit(&st->member_parks, memory_order_relaxed) - pool->base.member_parks;
    out->preemptions = atomic_load_explicit(&st->preemptions, memory_order_relaxed) - pool->base.preemptions;
    out->wakes = atomic_load_explicit(&st->wakes, memory_order_relaxed) - pool->base.wakes;
    return TT_OK;
}

/* ------------------------------------------------------------------------ */
/* All-or-nothing try (tt_team_try_lead; branch `tokens`)                    */
/* ------------------------------------------------------------------------ */

bool tt__gang_try_acquire_all(tt_pool *p, unsigned n, uint32_t *idx)
{
    if (n == 0)
        return true;
    pthread_mutex_lock(&p->lock);
    bool ok = !p->wait_head && p->free_count >= n;
    if (ok)
        take_lowest(p, n, idx);
    pthread_mutex_unlock(&p->lock);
    if (ok)
        atomic_fetch_add_explicit(&p->installs, 1, memory_order_relaxed);
    return ok;
}
