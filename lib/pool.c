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
        tt__wait_policy pol = c->idle_pol;
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

int tt__crew_create(const struct tt_pool_attr *attr, unsigned width, tt__crew **out)
{
    *out = NULL;
    tt__crew *c = calloc(1, sizeof *c);
    if (!c)
        return TT_ENOMEM;
    c->width = width;
    c->be = tt__backend_get();
    c->attr = *attr;
    c->attr.thread_name = NULL;
    if (attr->thread_name && !(c->attr.thread_name = strdup(attr->thread_name))) {
        free(c);
        return TT_ENOMEM;
    }
    c->dedicated = tt__attr_dedicated(attr);
    c->oversubscribed = width > tt__affinity_cpus();
    c->idle_pol = (tt__wait_policy){
        .spin_polls = attr->spin_polls,
        .spin_ns = attr->idle_spin_ns,
        .throttled = c->oversubscribed,
    };
    if (attr->idle_spin_ns == 0)
        c->idle_pol.spin_polls = 0;
    c->team_pol = (tt__wait_policy){
        .spin_polls = attr->spin_polls,
        .spin_ns = 0,
        .throttled = c->oversubscribed,
    };
    CPU_ZERO(&c->cpus);
    c->have_cpus = sched_getaffinity(0, sizeof c->cpus, &c->cpus) == 0;

    size_t bytes = sizeof(tt__member) * width;
    void *mem = NULL;
    if (posix_memalign(&mem, TT__CACHELINE, bytes) != 0) {
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

    int rc = c->be->start(c);
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
    crew_free(c);
}

/* ------------------------------------------------------------------------ */
/* fork() in a child: the crews' threads do not exist there                  */
/* ------------------------------------------------------------------------ */

static void atfork_child(void)
{
    atomic_fetch_add_explicit(&tt__fork_generation, 1, memory_order_relaxed);
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static void atfork_register(void) { pthread_atfork(NULL, NULL, atfork_child); }

static bool pool_forked(const tt_pool *p)
{
    return p->forked_gen != atomic_load_explicit(&tt__fork_generation, memory_order_relaxed);
}

/* ------------------------------------------------------------------------ */
/* Pools                                                                     */
/* ------------------------------------------------------------------------ */

static void pool_free(tt_pool *p)
{
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->cond);
    free(p->free_bits);
    free(p);
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

    tt_pool *p = calloc(1, sizeof *p);
    if (!p)
        return TT_ENOMEM;
    p->width = width;
    p->attr = a;
    p->attr.thread_name = NULL; /* the crew owns its copy */
    p->forked_gen = atomic_load_explicit(&tt__fork_generation, memory_order_relaxed);
    size_t words = (width + 63) / 64;
    p->free_bits = calloc(words, sizeof(uint64_t));
    if (!p->free_bits) {
        free(p);
        return TT_ENOMEM;
    }
    if (pthread_mutex_init(&p->lock, NULL) != 0) {
        free(p->free_bits);
        free(p);
        return TT_ENOMEM;
    }
    if (pthread_cond_init(&p->cond, NULL) != 0) {
        pthread_mutex_destroy(&p->lock);
        free(p->free_bits);
        free(p);
        return TT_ENOMEM;
    }
    for (unsigned k = 0; k < width; k++)
        p->free_bits[k / 64] |= 1ull << (k % 64);
    p->free_count = width;

    if (width > 1) {
        int rc = tt__crew_create(&a, width, &p->crew);
        if (rc != TT_OK) {
            pool_free(p);
            return rc;
        }
    }
    *pool = p;
    return TT_OK;
}

int tt_pool_destroy(tt_pool *pool)
{
    if (!pool)
        return TT_OK;
    if (pool_forked(pool)) {
        /* In a fork child the threads do not exist: free the memory only.
         * The crew's mutexes were copied in whatever state; do not touch
         * them beyond freeing. */
        if (pool->crew) {
            free(pool->crew->attr.thread_name);
            free(pool->crew->members_mem);
            free(pool->crew);
        }
        free(pool->free_bits);
        free(pool);
        return TT_OK;
    }
    pthread_mutex_lock(&pool->lock);
    bool busy = pool->free_count != pool->width || pool->team_owned || pool->wait_head != NULL;
    pthread_mutex_unlock(&pool->lock);
    if (busy)
        return TT_EBUSY;
    if (tt__pool_member_of(pool) >= 0)
        return TT_EBUSY; /* a member is always inside an entry */
    if (pool->crew)
        tt__crew_destroy(pool->crew);
    pool_free(pool);
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
    const tt__wait_stats *st = &pool->crew->stats;
    out->join_sleeps = atomic_load_explicit(&st->join_sleeps, memory_order_relaxed);
    out->barrier_sleeps = atomic_load_explicit(&st->barrier_sleeps, memory_order_relaxed);
    out->member_parks = atomic_load_explicit(&st->member_parks, memory_order_relaxed);
    out->preemptions = atomic_load_explicit(&st->preemptions, memory_order_relaxed);
    out->wakes = atomic_load_explicit(&st->wakes, memory_order_relaxed);
    return TT_OK;
}
