/*
 * crew.c -- the private crew: a pool's own threads, held on a private host
 * thread, and the process-wide cache of idle ones.
 *
 * Roots normally run on the caller's own OpenMP team (host_team.c), so that
 * the library adds no thread beside the application's. A private crew exists
 * only where sharing cannot work: a pool with thread settings of its own
 * (thread_name, on_start, stack_size, qos), a root entered from inside a
 * parallel region that is not the pool's own, a pool used in a fork() child
 * (libgomp's own team is broken there, GCC PR 60035), and persistent teams,
 * whose members stay reserved between leaders on any thread.
 *
 * A private crew of width W is W members, each with a mailbox. A member runs
 * tt__member_main: it waits on its mailbox (spin, yield, futex), runs the
 * work it was handed, and waits again. Work reaches a member only through
 * the gang that reserved it, so a mailbox has exactly one writer at a time
 * and needs no lock. The same serving loop (tt__member_serve) runs in the
 * members of a root region on the caller's team.
 */
#include "crew.h"
#include "cpu.h"
#include "test_hooks.h"
#include "futex.h"

#include <errno.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

/* ------------------------------------------------------------------------ */
/* Members                                                                   */
/* ------------------------------------------------------------------------ */

static void exit_run(tt__work *w, tt__member *m)
{
    (void)w;
    (void)m;
}
tt__work tt__work_exit = {exit_run};

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

void tt__member_serve(tt__member *m)
{
    tt__crew *c = m->crew;
    for (;;) {
        tt__wait_policy pol = {
            .spin_polls = atomic_load_explicit(&c->idle_polls, memory_order_relaxed),
            .spin_ns = atomic_load_explicit(&c->idle_ns, memory_order_relaxed),
            .throttled = atomic_load_explicit(&c->oversubscribed, memory_order_relaxed),
            .yield_every = TT__IDLE_YIELD_EVERY,
        };
        pol.stop = &c->park_epoch;
        pol.stop_val = atomic_load_explicit(&c->park_epoch, memory_order_relaxed);
        uint32_t seq = tt__event_wait_ne(&m->mail, m->seen, &pol, c->stats, &c->stats->member_parks);
        m->seen = seq;
        /* The acquire load of the mailbox word in the wait made the work
         * pointer stored before it visible. */
        tt__work *w = atomic_load_explicit(&m->work, memory_order_relaxed);
        if (w == &tt__work_exit)
            return;
        w->run(w, m);
    }
}

static void member_life(void *ctx)
{
    tt__member *m = ctx;
    tt__crew *c = m->crew;
    if (c->attr.on_start)
        c->attr.on_start(c->attr.on_start_arg, (unsigned)(m - c->members));
    /* Register; release publishes this member's fields to the builder. */
    atomic_fetch_add_explicit(&c->started, 1, memory_order_release);
    tt__event_bump(&c->startup, NULL);
    tt__member_serve(m);
}

void tt__member_main(tt__crew *c, unsigned k)
{
    tt__member *m = &c->members[k];
    atomic_store_explicit(&m->thread_id, tt__self_id(), memory_order_relaxed);
#if defined(__linux__)
    m->tid = (pid_t)syscall(SYS_gettid);
#endif
    m->stack_size = own_stack_size();
    /* Each member takes the crew's CPU set (the process's, see
     * tt__process_cpus): OMP_PROC_BIND may have bound libgomp's threads to
     * places, which a private crew must not inherit. Not under likwid-pin
     * (tt__pin_allowed), which pins each new thread itself. */
    if (c->have_cpus && tt__pin_allowed())
        sched_setaffinity(0, sizeof c->cpus, &c->cpus);
    member_set_name(c, k);
    /* A member's whole life is one thread to OpenMP (one nested one-thread
     * region, opened once): the on_start hook and every share it runs see
     * a team of one, whatever pool the crew serves (a cached crew changes
     * pools). */
    c->be->isolate(member_life, m);
    atomic_fetch_add_explicit(&c->exited, 1, memory_order_release);
}

void tt__member_post(tt__member *m, tt__work *w)
{
    /* Only the gang that owns m writes its mailbox, so the word has one
     * writer; the seq_cst store in tt__event_post releases the work
     * pointer to the member's acquire load. */
#if defined(TT_ENABLE_DEBUG) && TT_ENABLE_DEBUG
    TT__ASSERT(atomic_exchange_explicit(&m->posting, 1, memory_order_acq_rel) == 0);
#endif
    uint32_t seq = atomic_load_explicit(&m->mail.word, memory_order_relaxed) + 1;
    atomic_store_explicit(&m->work, w, memory_order_relaxed);
#if defined(TT_ENABLE_DEBUG) && TT_ENABLE_DEBUG
    /* cleared before the post: once posted, the work may end and the next
     * holder of the member may post again */
    atomic_store_explicit(&m->posting, 0, memory_order_release);
#endif
    tt__event_post(&m->mail, seq, m->crew->stats);
}

/* ------------------------------------------------------------------------ */
/* Crews                                                                     */
/* ------------------------------------------------------------------------ */

int tt__crew_alloc_members(tt__crew *c, unsigned width)
{
    size_t bytes = sizeof(tt__member) * width;
    void *mem = NULL;
    if (tt__memalign(&mem, TT__CACHELINE, bytes) != 0)
        return TT_ENOMEM;
    memset(mem, 0, bytes);
    c->members_mem = mem;
    c->members = mem;
    c->width = width;
    for (unsigned k = 0; k < width; k++) {
        c->members[k].index = k;
        c->members[k].crew = c;
    }
    return TT_OK;
}

void tt__crew_free(tt__crew *c)
{
    free(c->scope_block);
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
    bool over = c->width > tt__cpu_count_cached();
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
 * threads. Start and end that many probe threads first, so that a refusal
 * becomes TT_EAGAIN instead.
 *
 * A probe's stack must hold the process's static TLS, which glibc carves
 * from the top of every thread's stack: a program that links OpenBLAS has
 * about 60 KiB of it, and a 64 KiB probe was refused (EINVAL) for that
 * alone. The probe stack is therefore the static TLS of every module loaded
 * so far plus 64 KiB of room. */
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

static int add_tls(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    size_t *sum = data;
    for (unsigned i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_TLS)
            *sum += info->dlpi_phdr[i].p_memsz + info->dlpi_phdr[i].p_align;
    return 0;
}

size_t tt__static_tls_bytes(void)
{
    size_t sum = 0;
    dl_iterate_phdr(add_tls, &sum);
    return sum;
}

static int preflight_threads(unsigned n)
{
    /* The counts first (threads-max, pids cgroup, RLIMIT_NPROC: cpu.c),
     * then, under a finite RLIMIT_NPROC, the kernel's own answer. */
    int rc = tt__threads_room(n);
    if (rc != TT_OK)
        return rc;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NPROC, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return TT_OK;
    pthread_t *t = tt__calloc(n, sizeof *t);
    if (!t)
        return TT_ENOMEM;
    probe pr = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER, .go = false};
    pthread_attr_t pa;
    pthread_attr_init(&pa);
    size_t stack = tt__static_tls_bytes() + ((size_t)64 << 10);
    stack = (stack + 4095) & ~(size_t)4095;
    pthread_attr_setstacksize(&pa, stack);
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
    tt__crew *c = tt__calloc_lines(1, sizeof *c);
    if (!c)
        return TT_ENOMEM;
    c->kind = TT__CREW_PRIVATE;
    c->stats = &c->own_stats;
    c->be = tt__backend_get();
    c->attr = *attr;
    c->attr.thread_name = NULL;
    if (attr->thread_name && !(c->attr.thread_name = tt__strdup(attr->thread_name))) {
        free(c);
        return TT_ENOMEM;
    }
    c->dedicated = tt__attr_dedicated(attr);
    if (tt__crew_alloc_members(c, width) != TT_OK) {
        tt__crew_free(c);
        return TT_ENOMEM;
    }
    crew_configure(c, attr);
    c->have_cpus = tt__process_cpus(&c->cpus);

    int rc = preflight_threads(width);
    if (rc == TT_OK)
        rc = tt__fault_thread() ? TT_EAGAIN : c->be->start(c);
    if (rc != TT_OK) {
        tt__crew_free(c);
        return rc;
    }
    /* Wait until OpenMP formed the team and every member registered. */
    tt__wait_policy pol = {.spin_polls = attr->spin_polls < 1000 ? attr->spin_polls : 1000};
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
        tt__crew_free(c);
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
    tt__crew_free(c);
}

/* Work that makes a member take the crew's CPU set (a cached crew taken by
 * a new pool). */
typedef struct affinity_work {
    tt__work w;
    tt__join *join;
} affinity_work;

static void affinity_run(tt__work *w, tt__member *m)
{
    affinity_work *a = (affinity_work *)w;
    tt__crew *c = m->crew;
    if (c->have_cpus && tt__pin_allowed())
        sched_setaffinity(0, sizeof c->cpus, &c->cpus);
    tt__join_done(a->join, c->stats);
}

static void crew_retarget(tt__crew *c)
{
    c->have_cpus = tt__process_cpus(&c->cpus);
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

void tt__crew_note_width(unsigned width)
{
    pthread_mutex_lock(&cache_lock);
    if (width > widest_built)
        widest_built = width;
    pthread_mutex_unlock(&cache_lock);
}

tt__crew *tt__crew_cache_take(unsigned width, const struct tt_pool_attr *attr)
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
    if (c) {
        crew_configure(c, attr);
        crew_retarget(c);
    }
    return c;
}

void tt__crew_cache_put(tt__crew *c)
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

/* Test hook (the resource-failure tests): join every cached crew, so that a
 * test can count the threads left with the cache empty. */
void tt__test_crew_cache_drain(void)
{
    pthread_mutex_lock(&cache_lock);
    tt__crew *c = cache_head;
    cache_head = NULL;
    cache_threads = 0;
    pthread_mutex_unlock(&cache_lock);
    while (c) {
        tt__crew *n = c->next;
        tt__crew_destroy(c);
        c = n;
    }
}

void tt__crew_atfork_prepare(void) { pthread_mutex_lock(&cache_lock); }
void tt__crew_atfork_parent(void) { pthread_mutex_unlock(&cache_lock); }

void tt__crew_atfork_child(void)
{
    /* The cached crews' threads are gone: forget them (their memory is
     * released, no thread is joined). */
    tt__crew *c = cache_head;
    while (c) {
        tt__crew *n = c->next;
        tt__crew_free(c);
        c = n;
    }
    cache_head = NULL;
    cache_threads = 0;
    pthread_mutex_unlock(&cache_lock); /* taken in prepare by this thread */
}
