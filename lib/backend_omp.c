/*
 * backend_omp.c -- the OpenMP backend. This is the only file that includes
 * omp.h.
 *
 * Two kinds of region: a root's region on the calling thread's own team
 * (omp_region, see host_team.c for why), opened per root at the pool's
 * width; and a private crew's region, opened once on a private host thread
 * and held for the life of the crew (omp_start). A new pthread gets a
 * libgomp thread pool of its own, and the region on it is a non-nested one,
 * so libgomp keeps its threads for the whole life of the region.
 */
#include "internal.h"
#include "wait.h"

#if TT_HAVE_OPENMP

#include <errno.h>
#include <omp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

static void *omp_host_main(void *p)
{
    tt__crew *c = p;
    /* The host thread's own ICVs only: dynamic adjustment off, so that
     * libgomp forms exactly the width asked for or reports a shorter team
     * (which tt__crew_create turns into TT_ESHORTTEAM). */
    omp_set_dynamic(0);
#pragma omp parallel num_threads(c->width)
    {
        unsigned k = (unsigned)omp_get_thread_num();
        if (k == 0)
            atomic_store_explicit(&c->got, (uint32_t)omp_get_num_threads(), memory_order_release);
        tt__member_main(c, k);
    }
    return NULL;
}

static int omp_start(tt__crew *c)
{
    pthread_attr_t pa;
    if (pthread_attr_init(&pa) != 0)
        return TT_ENOMEM;
    int rc = pthread_attr_setstacksize(&pa, c->attr.stack_size);
    if (rc == 0)
        rc = tt__thread_create(&c->host, &pa, omp_host_main, c);
    pthread_attr_destroy(&pa);
    if (rc == EINVAL)
        return TT_EINVAL;
    if (rc != 0)
        return TT_EAGAIN;
    c->host_started = true;
    return TT_OK;
}

/* libgomp's worker threads are detached: when the host thread exits, its
 * thread-specific-data destructor tells them to exit, and nobody joins
 * them. Wait until the kernel reports each of them gone, so that when a
 * destroy returns, every member has exited and its thread-local destructors
 * have run. */
static void omp_wait_gone(pid_t tid)
{
    if (tid <= 0)
        return;
    pid_t pid = getpid();
    for (unsigned i = 0;; i++) {
        if (syscall(SYS_tgkill, pid, tid, 0) != 0 && errno == ESRCH)
            return;
        struct timespec ts = {0, i < 100 ? 20000 : 1000000};
        nanosleep(&ts, NULL);
    }
}

static void omp_join(tt__crew *c)
{
    if (!c->host_started)
        return;
    pthread_join(c->host, NULL);
    c->host_started = false;
    uint32_t got = atomic_load_explicit(&c->got, memory_order_acquire);
    for (uint32_t k = 1; k < got && k < c->width; k++)
        omp_wait_gone(c->members[k].tid);
}

static unsigned omp_region(unsigned width, tt__region_fn fn, void *ctx)
{
    /* Dynamic adjustment off for this region only (the application's ICV is
     * put back after): libgomp then forms exactly `width` threads unless a
     * thread limit or max-active-levels forbids it, and the caller checks
     * the team it got. The caller's nthreads-var is not touched: the
     * num_threads clause overrides it for this region alone.
     *
     * `go` and `done` state in the C memory model what libgomp's barriers
     * do (a release before the region, an acquire by each participant; a
     * release by each at its end, an acquire after the join): everything
     * the caller wrote before is visible to the participants, and
     * everything they wrote is visible after. libgomp's own barriers give
     * that too, but through futexes and atomics that ThreadSanitizer cannot
     * see in an uninstrumented libgomp. One RMW per participant. */
    int dyn = omp_get_dynamic();
    if (dyn)
        omp_set_dynamic(0);
    unsigned got = 0;
    _Atomic uint32_t go, done;
    atomic_store_explicit(&done, 0, memory_order_relaxed);
    atomic_store_explicit(&go, 1, memory_order_release);
#pragma omp parallel num_threads(width) shared(go, done, got)
    {
        (void)atomic_load_explicit(&go, memory_order_acquire);
        unsigned n = (unsigned)omp_get_num_threads();
        unsigned k = (unsigned)omp_get_thread_num();
        if (k == 0)
            got = n;
        fn(ctx, k, n);
        atomic_fetch_add_explicit(&done, 1, memory_order_release);
    }
    (void)atomic_load_explicit(&done, memory_order_acquire);
    if (dyn)
        omp_set_dynamic(dyn);
    return got;
}

static void omp_confine(void) { omp_set_num_threads(1); }

static bool omp_in_parallel_any(void) { return omp_get_level() > 0; }

/* The width of the application's own regions: nthreads-var, or 1 when
 * OMP_MAX_ACTIVE_LEVELS=0 serialises every region. */
static unsigned omp_max_threads(void)
{
    if (omp_get_max_active_levels() == 0)
        return 1;
    int n = omp_get_max_threads();
    return n > 0 ? (unsigned)n : 1u;
}

static bool omp_places_cpus(cpu_set_t *set)
{
    int np = omp_get_num_places();
    if (np <= 0)
        return false;
    CPU_ZERO(set);
    bool any = false;
    for (int p = 0; p < np; p++) {
        int n = omp_get_place_num_procs(p);
        if (n <= 0)
            continue;
        int ids[n];
        omp_get_place_proc_ids(p, ids);
        for (int i = 0; i < n; i++)
            if (ids[i] >= 0 && ids[i] < CPU_SETSIZE) {
                CPU_SET(ids[i], set);
                any = true;
            }
    }
    return any;
}

static int omp_level1_thread_num(void)
{
    if (omp_get_level() < 1)
        return -1;
    return omp_get_ancestor_thread_num(1);
}

/* Let the calling thread open one region of exactly `width` threads:
 * nested inside a member, or its own top-level region (a full-width root
 * on a plain thread). These are the calling task's own ICVs
 * (data-environment scope since OpenMP 5.0), so nothing outside this call
 * sees them. */
static void omp_external_enter(unsigned width, bool nested, int saved[4])
{
    saved[0] = omp_get_max_active_levels();
    saved[1] = omp_get_max_threads();
    saved[2] = omp_get_dynamic();
    omp_set_dynamic(0);
    omp_set_num_threads((int)width);
    if (width > 1 && nested) {
        int need = omp_get_active_level() + 1;
        if (saved[0] < need)
            omp_set_max_active_levels(need);
    }
}

static void omp_external_leave(const int saved[4])
{
    omp_set_max_active_levels(saved[0]);
    omp_set_num_threads(saved[1]);
    omp_set_dynamic(saved[2]);
}

/* ------------------------------------------------------------------------ */
/* Recognising a tt_external callee's threads                                */
/* ------------------------------------------------------------------------ */
/*
 * A tt_external that holds a pool's slots waits for its callee; a thread of
 * the callee's own regions that enters the same pool must not wait for
 * those slots (it would wait for itself). OpenMP names no team and no
 * ancestor thread, but it does hand every implicit task of a new region the
 * data environment of the task that opened it, and one ICV of that
 * environment changes nothing a callee does unless it allocates with
 * omp_alloc: def-allocator-var. So around the callee, the calling thread's
 * default allocator becomes a *mark*: an allocator with default traits in
 * the default memory space (what omp_default_mem_alloc is), made by
 * omp_init_allocator once and kept for the life of the process. Every
 * thread of every region the callee opens, at any depth, inherits it
 * (libgomp copies it into each team member at region start: checked with
 * GCC 12), and no other thread has it. A thread entering a pool reads its
 * default allocator, finds the mark and walks the marks that were in force
 * where each external was called (nested externals) looking for the pool.
 *
 * The mark replaces only omp_default_mem_alloc (or an outer mark): where
 * the application set another default allocator (OMP_ALLOCATOR,
 * omp_set_default_allocator), the external is left unmarked and the pool
 * falls back to treating every thread inside a foreign region as possibly
 * a callee's (tt__pool_external_callee).
 *
 * Marks live in a fixed table: entries [0, made) have their allocator
 * made; `busy` bits say which are in use. An entry is taken and given back
 * under `mark_lock` (tt_external is not a hot path at the scale of a mutex:
 * a mutex pair costs about 40 ns, the smallest measured dgemm 1.6 us).
 * Readers scan without the lock: a thread only finds a mark that its
 * ancestry put in force and that is therefore still taken.
 */
#define TT__MARKS 256

typedef struct callee_mark {
    _Atomic omp_allocator_handle_t h;
    const void *_Atomic pool;
    struct callee_mark *_Atomic outer;
    omp_allocator_handle_t saved; /* the taker's default before the mark */
    bool busy;
} callee_mark;

static callee_mark marks[TT__MARKS];
static _Atomic unsigned marks_made;
static pthread_mutex_t mark_lock = PTHREAD_MUTEX_INITIALIZER;

static callee_mark *mark_find(omp_allocator_handle_t h)
{
    if (h == omp_default_mem_alloc || h == omp_null_allocator)
        return NULL;
    unsigned made = atomic_load_explicit(&marks_made, memory_order_acquire);
    for (unsigned i = 0; i < made; i++)
        if (atomic_load_explicit(&marks[i].h, memory_order_relaxed) == h)
            return &marks[i];
    return NULL;
}

static void *omp_callee_mark(const void *pool)
{
    omp_allocator_handle_t cur = omp_get_default_allocator();
    callee_mark *outer = mark_find(cur);
    if (!outer && cur != omp_default_mem_alloc)
        return NULL; /* the application's own default allocator: keep it */
    callee_mark *m = NULL;
    pthread_mutex_lock(&mark_lock);
    unsigned made = atomic_load_explicit(&marks_made, memory_order_relaxed);
    for (unsigned i = 0; i < made && !m; i++)
        if (!marks[i].busy)
            m = &marks[i];
    if (!m && made < TT__MARKS) {
        omp_allocator_handle_t h = omp_init_allocator(omp_default_mem_space, 0, NULL);
        if (h != omp_null_allocator) {
            m = &marks[made];
            atomic_store_explicit(&m->h, h, memory_order_relaxed);
            atomic_store_explicit(&marks_made, made + 1, memory_order_release);
        }
    }
    if (m) {
        m->busy = true;
        m->saved = cur;
        /* Release: a thread that inherits the mark reads these after the
         * region start that copied it (libgomp's own synchronisation, which
         * TSan does not see, hence atomics). */
        atomic_store_explicit(&m->pool, pool, memory_order_release);
        atomic_store_explicit(&m->outer, outer, memory_order_release);
    }
    pthread_mutex_unlock(&mark_lock);
    if (m)
        omp_set_default_allocator(atomic_load_explicit(&m->h, memory_order_relaxed));
    return m;
}

static void omp_callee_unmark(void *mark)
{
    callee_mark *m = mark;
    if (!m)
        return;
    omp_set_default_allocator(m->saved);
    pthread_mutex_lock(&mark_lock);
    atomic_store_explicit(&m->pool, NULL, memory_order_relaxed);
    m->busy = false;
    pthread_mutex_unlock(&mark_lock);
}

static bool omp_callee_of(const void *pool)
{
    for (callee_mark *m = mark_find(omp_get_default_allocator()); m;
         m = atomic_load_explicit(&m->outer, memory_order_acquire))
        if (atomic_load_explicit(&m->pool, memory_order_acquire) == pool)
            return true;
    return false;
}

static unsigned omp_thread_limit(void)
{
    int l = omp_get_thread_limit();
    return l <= 0 ? UINT32_MAX : (unsigned)l;
}

const tt__backend tt__backend_omp = {
    .name = "openmp",
    .start = omp_start,
    .join = omp_join,
    .level1_thread_num = omp_level1_thread_num,
    .in_parallel = omp_in_parallel_any,
    .confine = omp_confine,
    .max_threads = omp_max_threads,
    .region = omp_region,
    .places_cpus = omp_places_cpus,
    .external_enter = omp_external_enter,
    .external_leave = omp_external_leave,
    .thread_limit = omp_thread_limit,
    .callee_mark = omp_callee_mark,
    .callee_unmark = omp_callee_unmark,
    .callee_of = omp_callee_of,
};

#endif /* TT_HAVE_OPENMP */
