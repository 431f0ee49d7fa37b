/*
 * backend_omp.c -- the OpenMP backend. With omp_runtime.c (which runtime
 * answers the library's calls), the only file that includes omp.h.
 *
 * Two kinds of region: a root's region on the calling thread's own team
 * (omp_region, see host_team.c for why), opened per root at the pool's
 * width; and a private crew's region, opened once on a private host thread
 * and held for the life of the crew (omp_start). A new pthread gets a
 * libgomp thread pool of its own, and the region on it is a non-nested one,
 * so libgomp keeps its threads for the whole life of the region.
 */
#include "share.h"
#include "test_hooks.h"
#include "futex.h"

#if TT_HAVE_OPENMP

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <link.h>
#include <omp.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* The backend's operations                                                  */
/* ------------------------------------------------------------------------ */

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

/*
 * Under libomp a private crew is not an OpenMP region: libomp takes a new
 * region's workers from its process-wide thread pool (the application's
 * idle threads) and puts them back when the region ends, so the members of
 * a dedicated pool would neither get the pool's stack size nor exit at its
 * destroy, and would carry its thread names and CPU set into the
 * application's later regions. The host thread starts members 1..W-1 as
 * plain threads (the pool's stack size), runs member 0 itself, and joins
 * them when they leave. A member's index lives in a thread-local
 * (level1_thread_num), and a member counts as inside a parallel region
 * (in_parallel), which is what it is to the library under libgomp.
 */
static _Thread_local int plain_member_k = -1;

/* libomp makes a thread a root of its own at the thread's first OpenMP
 * call, and binds it to a place then where OMP_PROC_BIND is set: that
 * call is made first, so that the member's CPU set (tt__member_main)
 * comes after it and holds. libomp also gives the new root its initial
 * affinity mask there (the process's); under likwid-pin, which pinned
 * this thread when it started and whose pin the library leaves alone
 * (tt__pin_allowed), the launcher's mask is put back. */
static void plain_register(void)
{
    cpu_set_t launcher;
    bool keep = !tt__pin_allowed() && sched_getaffinity(0, sizeof launcher, &launcher) == 0;
    (void)omp_get_max_threads();
    if (keep)
        (void)sched_setaffinity(0, sizeof launcher, &launcher);
}

static void *plain_member_main(void *p)
{
    tt__member *m = p;
    plain_register();
    plain_member_k = (int)m->index;
    tt__member_main(m->crew, m->index);
    plain_member_k = -1;
    return NULL;
}

static void *plain_host_main(void *p)
{
    tt__crew *c = p;
    unsigned n = 1;
    pthread_t *t = calloc(c->width, sizeof *t);
    pthread_attr_t pa;
    bool attr_ok = t && pthread_attr_init(&pa) == 0;
    if (attr_ok) {
        (void)pthread_attr_setstacksize(&pa, c->attr.stack_size);
        for (unsigned k = 1; k < c->width; k++, n++)
            if (tt__thread_create(&t[k], &pa, plain_member_main, &c->members[k]) != 0)
                break;
        pthread_attr_destroy(&pa);
    }
    /* A short count makes tt__crew_create tell members 0..n-1 to leave and
     * refuse (TT_ESHORTTEAM), as for a short OpenMP team. */
    atomic_store_explicit(&c->got, (uint32_t)n, memory_order_release);
    plain_register();
    plain_member_k = 0;
    tt__member_main(c, 0);
    plain_member_k = -1;
    for (unsigned k = 1; k < n; k++)
        pthread_join(t[k], NULL);
    free(t);
    return NULL;
}

static int omp_start(tt__crew *c)
{
    pthread_attr_t pa;
    if (pthread_attr_init(&pa) != 0)
        return TT_ENOMEM;
    int rc = pthread_attr_setstacksize(&pa, c->attr.stack_size);
    if (rc == 0)
        rc = tt__thread_create(&c->host, &pa,
                               tt__omp_runtime_is_libomp() ? plain_host_main : omp_host_main, c);
    pthread_attr_destroy(&pa);
    if (rc == EINVAL)
        return TT__EINVAL("the stack size is refused by pthread_attr_setstacksize");
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
    /* libomp: the host thread joined its members (plain_host_main). */
    if (tt__omp_runtime_is_libomp())
        return;
    uint32_t got = atomic_load_explicit(&c->got, memory_order_acquire);
    for (uint32_t k = 1; k < got && k < c->width; k++)
        omp_wait_gone(c->members[k].tid);
}

/* Test hook: the most threads a root's region asks for (0: no cap), so that
 * the suite can make a team come out short, which the pool's build-time
 * checks otherwise leave to dynamic adjustment and exhausted threads. */
static _Atomic unsigned region_cap;

/*
 * What both kinds of root region do around the construct. Dynamic
 * adjustment off for the region only (the application's ICV is put back
 * after): libgomp then forms exactly `width` threads unless a thread limit
 * or max-active-levels forbids it, and the caller checks the team it got.
 * The caller's nthreads-var is not touched: the num_threads clause
 * overrides it for this region alone.
 *
 * max-active-levels-var (the calling task's own, data-environment scope in
 * libgomp since GCC 11, and put back after): omp_region only makes sure the
 * region is active, whatever the calling task has (inside an inline run
 * that the library isolated, omp_isolate sets it to 0 outside every region,
 * and a nested root still gets its team; a pool whose width OpenMP can
 * never give was refused when it was built, tt_pool_create, TT_ERANGE).
 * omp_region_block sets it to exactly the level the region opens (the
 * caller's active level plus one), which the threads' implicit tasks
 * inherit: a region that any of them opens is inactive, one thread, as
 * omp_confine makes it, so no participant writes its own ICVs.
 *
 * The test hook's cap (tt__test_region_cap) narrows the region here.
 */
typedef struct region_icvs {
    int dyn, mal, want;
} region_icvs;

static inline unsigned region_icvs_enter(region_icvs *r, unsigned width, bool confined)
{
    r->dyn = omp_get_dynamic();
    if (r->dyn)
        omp_set_dynamic(0);
    r->mal = omp_get_max_active_levels();
    r->want = confined ? omp_get_active_level() + 1 : (r->mal < 1 ? 1 : r->mal);
    if (r->mal != r->want)
        omp_set_max_active_levels(r->want);
    unsigned cap = atomic_load_explicit(&region_cap, memory_order_relaxed);
    return cap && cap < width ? cap : width;
}

static inline void region_icvs_leave(const region_icvs *r)
{
    if (r->mal != r->want)
        omp_set_max_active_levels(r->mal);
    if (r->dyn)
        omp_set_dynamic(r->dyn);
}

/* Under ThreadSanitizer, `go` and `done` state in the C memory model what
 * libgomp's barriers do (a release before the region, an acquire by each
 * participant; a release by each at its end, an acquire after the join),
 * which TSan cannot see through an uninstrumented libgomp's futexes and
 * atomics. Other builds rely on the barriers themselves (OpenMP's flush at
 * region start and end): the two words were one more cache line for every
 * region thread to fetch and write back, on the path the root's join waits
 * for. */
#if TT__TSAN
#define TSAN_REGION_BEFORE                                                                         \
    _Atomic uint32_t go, done;                                                                     \
    atomic_store_explicit(&done, 0, memory_order_relaxed);                                         \
    atomic_store_explicit(&go, 1, memory_order_release)
#define TSAN_REGION_IN (void)atomic_load_explicit(&go, memory_order_acquire)
#define TSAN_REGION_OUT atomic_fetch_add_explicit(&done, 1, memory_order_release)
#define TSAN_REGION_AFTER (void)atomic_load_explicit(&done, memory_order_acquire)
#else
#define TSAN_REGION_BEFORE ((void)0)
#define TSAN_REGION_IN ((void)0)
#define TSAN_REGION_OUT ((void)0)
#define TSAN_REGION_AFTER ((void)0)
#endif

static unsigned omp_region(unsigned width, tt__region_fn fn, void *ctx)
{
    region_icvs icv;
    width = region_icvs_enter(&icv, width, false);
    unsigned got = 0;
    TSAN_REGION_BEFORE;
#if TT__TSAN
#pragma omp parallel num_threads(width) shared(go, done, got)
#else
#pragma omp parallel num_threads(width) shared(got)
#endif
    {
        TSAN_REGION_IN;
        unsigned n = (unsigned)omp_get_num_threads();
        unsigned k = (unsigned)omp_get_thread_num();
        if (k == 0)
            got = n;
        fn(ctx, k, n);
        TSAN_REGION_OUT;
    }
    TSAN_REGION_AFTER;
    region_icvs_leave(&icv);
    return got;
}

/* omp_region with the line by value and the threads confined (backend.h).
 * firstprivate scalars travel in the region's data block itself (GCC
 * passes an aggregate by its address, which would be one more line to
 * fetch); each thread rebuilds the line on its own stack. */
static __attribute__((noinline)) unsigned omp_region_block(unsigned width, tt__line_fn fn,
                                                           const tt__line *line)
{
    uint64_t w0 = line->w[0], w1 = line->w[1], w2 = line->w[2], w3 = line->w[3];
    uint64_t w4 = line->w[4], w5 = line->w[5], w6 = line->w[6], w7 = line->w[7];
    region_icvs icv;
    width = region_icvs_enter(&icv, width, true);
    unsigned got = 0;
    TSAN_REGION_BEFORE;
#if TT__TSAN
#pragma omp parallel num_threads(width) firstprivate(w0, w1, w2, w3, w4, w5, w6, w7) \
    shared(go, done, got)
#else
#pragma omp parallel num_threads(width) firstprivate(w0, w1, w2, w3, w4, w5, w6, w7) shared(got)
#endif
    {
        TSAN_REGION_IN;
        tt__line l = {{w0, w1, w2, w3, w4, w5, w6, w7}};
        unsigned n = (unsigned)omp_get_num_threads();
        unsigned k = (unsigned)omp_get_thread_num();
        if (k == 0)
            got = n;
        fn(&l, k, n);
        TSAN_REGION_OUT;
    }
    TSAN_REGION_AFTER;
    region_icvs_leave(&icv);
    return got;
}

/*
 * The data block GCC builds for the region above is the one line of the
 * caller's stack that the region's threads read. Built at the depth of the
 * caller's other calls, it lies where the next root's bookkeeping (the
 * claim, the slots, the placement) pushes its frames, and those writes then
 * wait for the line to come back from a member's core, in front of the
 * locked instructions that follow them: a slot take of a few cycles took a
 * hundred nanoseconds once a call before it pushed one more register
 * (docs/design/runs/2026-12-07-root-cost.md). A gap puts the block below
 * every frame the library's entries push between two roots.
 */
#define TT__BLOCK_GAP 1024

static unsigned omp_region_line(unsigned width, tt__line_fn fn, const tt__line *line)
{
    char gap[TT__BLOCK_GAP];
    __asm__ volatile("" ::"r"(gap) : "memory"); /* kept, never written */
    unsigned got = omp_region_block(width, fn, line);
    __asm__ volatile("" ::"r"(gap) : "memory");
    return got;
}

/* An `omp parallel` opened by the calling task gets one thread: no
 * nthreads-var above 1 and no level left to activate, whatever
 * OMP_NUM_THREADS (list-valued too), OMP_NESTED or OMP_MAX_ACTIVE_LEVELS
 * say. Both ICVs are the implicit task's own. */
static void omp_confine(void)
{
    omp_set_num_threads(1);
    omp_set_max_active_levels(omp_get_active_level());
}

/* True when the calling thread already is one thread to OpenMP: a team of
 * one, and every region it could open inactive. Inside an earlier isolate
 * (a share's nested entry that runs inline) this holds, and isolating
 * again would only cost. */
static bool omp_is_one_thread(void)
{
    return omp_get_num_threads() == 1 && omp_get_max_threads() == 1 &&
           omp_get_max_active_levels() <= omp_get_active_level();
}

/*
 * One thread to OpenMP (c-api: "A share is one thread to OpenMP").
 *
 * OpenMP binds orphaned worksharing, barriers and explicit tasks to the
 * innermost enclosing parallel region, and a share's innermost region is
 * the library's own (a root's region at the pool's width, a private crew's
 * region): without this, an orphaned `omp for` in a fork job is divided
 * among threads that never run it (500 of 1000 iterations ran, or the loop's
 * barrier hung), and tasks are run by threads the root took no slot for.
 *
 *  - Outside every region (an inline run on a plain thread) there is no
 *    team to hide: OpenMP already gives the thread a team of one, and only
 *    the regions it may open need confining. The calling task's
 *    nthreads-var and max-active-levels-var are set to 1 and 0 and put
 *    back after (two ICV writes, a few nanoseconds).
 *  - Inside a region, one nested region of one thread is opened and fn runs
 *    in it, confined as above. Orphaned constructs then bind to this team
 *    of one, tasks are run by its only thread (at the latest in the region's
 *    end barrier), and the library's region stays invisible.
 *
 * A nested one-thread region costs microseconds in libgomp (it allocates
 * and frees a team each time; only a top-level team is cached), so the
 * library opens one per
 * participant for the whole of its participation (a region's participant,
 * a private crew member for its whole life), never one per share: every
 * share and nested entry inside finds omp_is_one_thread() true.
 */
typedef struct isolate_call {
    void (*fn)(void *ctx);
    void (*seq_fn)(void *ctx, const tt__icvs *start);
    void *ctx;
} isolate_call;

/* A share without a region of its own puts back the ICVs it changed
 * (backend.h, tt__icvs), so that neither its caller nor the next share
 * on the thread sees them. Each read is a load from the calling task's
 * ICV block; together about 5 ns. */
static omp_allocator_handle_t rt_get_default_allocator(void);
static void rt_set_default_allocator(omp_allocator_handle_t h);

static void omp_icvs_save(tt__icvs *v)
{
    omp_sched_t k;
    v->nthreads = omp_get_max_threads();
    v->mal = omp_get_max_active_levels();
    v->dyn = omp_get_dynamic();
    v->dev = omp_get_default_device();
    omp_get_schedule(&k, &v->chunk);
    v->sched = (int)k;
    /* In the runtime that answers the other calls (rt_alloc_resolve). */
    v->alloc = (uintptr_t)rt_get_default_allocator();
}

static void omp_icvs_restore(const tt__icvs *v)
{
    tt__icvs now;
    omp_icvs_save(&now);
    if (now.nthreads != v->nthreads)
        omp_set_num_threads(v->nthreads);
    if (now.mal != v->mal)
        omp_set_max_active_levels(v->mal);
    if (now.dyn != v->dyn)
        omp_set_dynamic(v->dyn);
    if (now.dev != v->dev)
        omp_set_default_device(v->dev);
    if (now.sched != v->sched || now.chunk != v->chunk)
        omp_set_schedule((omp_sched_t)v->sched, v->chunk);
    if (now.alloc != v->alloc)
        rt_set_default_allocator((omp_allocator_handle_t)v->alloc);
}

/* The one body of omp_isolate and omp_isolate_seq (inlined into each, so
 * that neither pays for the other's form): exactly one of fn and seq_fn is
 * set; seq_fn gets the ICVs fn's share starts with where the isolation
 * read them anyway (NULL where it did not: a nested region of its own), so
 * that shares run one after the other in it (tt__share_seq) need no
 * reading of their own. */
static inline __attribute__((always_inline)) void
isolate_body(void (*fn)(void *ctx), void (*seq_fn)(void *ctx, const tt__icvs *start), void *ctx)
{
    if (omp_is_one_thread()) {
        tt__icvs saved;
        omp_icvs_save(&saved);
        if (omp_get_level() == 0) {
            /* No team: OpenMP runs every task at once. */
            if (seq_fn)
                seq_fn(ctx, &saved);
            else
                fn(ctx);
        } else {
            /* Inside a team of one that outlives this share (a crew
             * member's life, a participant's part of a root, an enclosing
             * share). Its deferred tasks would run only at that team's
             * end, after the share's completion was reported and its
             * caller had gone on; the taskgroup completes them, and their
             * descendants, here, as the end of the share's own region
             * would. It costs tens of nanoseconds when no task was made
             * (libgomp allocates and frees the group), a nested region of
             * its own microseconds (comment-records.md, "Isolation"). */
#pragma omp taskgroup
            {
                if (seq_fn)
                    seq_fn(ctx, &saved);
                else
                    fn(ctx);
            }
        }
        omp_icvs_restore(&saved);
        return;
    }
    if (omp_get_level() == 0) {
        tt__icvs saved;
        omp_icvs_save(&saved);
        omp_set_num_threads(1);
        omp_set_max_active_levels(0);
        if (seq_fn) {
            tt__icvs start = saved; /* what the share starts with: confined */
            start.nthreads = 1;
            start.mal = 0;
            seq_fn(ctx, &start);
        } else {
            fn(ctx);
        }
        omp_icvs_restore(&saved);
        return;
    }
    isolate_call call = {fn, seq_fn, ctx};
#pragma omp parallel num_threads(1) shared(call)
    {
        omp_confine();
        if (call.seq_fn)
            call.seq_fn(call.ctx, NULL);
        else
            call.fn(call.ctx);
    }
}

static void omp_isolate(void (*fn)(void *ctx), void *ctx) { isolate_body(fn, NULL, ctx); }

static void omp_isolate_seq(void (*fn)(void *ctx, const tt__icvs *start), void *ctx)
{
    isolate_body(NULL, fn, ctx);
}

/* A taskgroup ends only when every task generated in it, and every
 * descendant of those, is complete: a `taskwait` would wait for the
 * children alone, and a barrier of a team of one costs a futex wake in
 * libgomp. */
static void omp_complete(void (*fn)(void *ctx), void *ctx)
{
#pragma omp taskgroup
    fn(ctx);
}

static bool omp_in_parallel_any(void) { return omp_get_level() > 0 || plain_member_k >= 0; }

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
    /* libomp lists places (the machine's, from the initial mask) even when
     * nothing binds: then the calling thread's own set counts, as with
     * libgomp, which lists places only when OMP_PLACES or OMP_PROC_BIND
     * asked for them. */
    if (tt__omp_runtime_is_libomp() && omp_get_proc_bind() == omp_proc_bind_false)
        return false;
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
    if (plain_member_k >= 0)
        return plain_member_k;
    if (omp_get_level() < 1)
        return -1;
    return omp_get_ancestor_thread_num(1);
}

/* Let the calling thread open one region of exactly `width` threads:
 * nested inside a member, or its own top-level region (a full-width root
 * on a plain thread). These are the calling task's own ICVs
 * (data-environment scope since OpenMP 5.0), so nothing outside this call
 * sees them. Each is written only where it differs, on the way in and on
 * the way out: a full-width root on a thread whose settings already match
 * (a pool as wide as the application's team) writes none, and what the
 * callee set on this thread is put back all the same. */
static void omp_external_enter(unsigned width, int saved[4])
{
    saved[0] = omp_get_max_active_levels();
    saved[1] = omp_get_max_threads();
    saved[2] = omp_get_dynamic();
    if (saved[2])
        omp_set_dynamic(0);
    if (saved[1] != (int)width)
        omp_set_num_threads((int)width);
    /* The callee's region must be active: nested in a member (whose share is
     * confined, omp_confine), or this thread's own top-level region inside
     * an inline run the library isolated. And it is the one active level the
     * callee gets: a region it nests inside runs on one thread, whatever
     * nesting the application asked for (OMP_NESTED, OMP_MAX_ACTIVE_LEVELS,
     * a list in OMP_NUM_THREADS), so that no more than `width` threads run
     * under the root. */
    if (width > 1) {
        int need = omp_get_active_level() + 1;
        if (saved[0] != need)
            omp_set_max_active_levels(need);
    }
}

static void omp_external_leave(const int saved[4])
{
    if (omp_get_max_active_levels() != saved[0])
        omp_set_max_active_levels(saved[0]);
    if (omp_get_max_threads() != saved[1])
        omp_set_num_threads(saved[1]);
    if (omp_get_dynamic() != saved[2])
        omp_set_dynamic(saved[2]);
}

/* ------------------------------------------------------------------------ */
/* Recognising a tt_external callee's threads                                */
/* ------------------------------------------------------------------------ */
/*
 * A tt_external that holds a pool's slots waits for its callee; a thread of
 * the callee's own regions that enters the same pool must not wait for
 * those slots (it would wait for itself), and no other thread may skip the
 * wait (the width caps every root together). OpenMP names no team and no
 * ancestor thread, but it hands every implicit task of a new region the
 * data environment of the task that opened it, at any depth. The callee is
 * marked there twice, and a thread entering the pool looks for either mark:
 *
 *  - The tag: thread-limit-var. No OpenMP routine sets it (only
 *    OMP_THREAD_LIMIT at start and the thread_limit clause of a `teams`
 *    construct, for that construct alone), so neither the application nor
 *    the callee can take it off. The callee runs inside
 *    `teams num_teams(1) thread_limit(TT__TAG_BASE + i)` on the calling
 *    thread: with one team, libgomp sets the ICV, calls the body once and
 *    puts the ICV back (GOMP_teams_reg), a few nanoseconds and no thread.
 *    The value, about 2^30, limits nothing. Where the process has a thread
 *    limit of its own (OMP_THREAD_LIMIT) the tag is left out, so that the
 *    limit holds in the callee. OpenMP allows a host `teams` construct only
 *    outside every parallel region; libgomp runs it the same way inside
 *    one (a member's nested external), which is what the library relies on
 *    there (checked with GCC 12; backend_omp.c is the only place to
 *    revisit for another runtime; not used on LLVM libomp, omp_callee_call).
 *  - The allocator mark: def-allocator-var becomes an allocator of the
 *    library's own that forwards every allocation to the allocator that
 *    was in force (a pool of one byte whose fallback is that allocator), so
 *    the callee's omp_alloc behaves as before. It is the one mark where the
 *    tag cannot be set (OMP_THREAD_LIMIT), and the application or the
 *    callee may replace it (omp_set_default_allocator).
 *
 * Marks live in a fixed table: entries [0, made) exist; `busy` says which
 * are in use. A thread takes an entry by setting its `busy` from false to
 * true (a compare-and-swap) and gives it back by clearing it; the entry's
 * other fields are its taker's until then. A thread first tries the entry
 * it used last (`last_mark`), which is free again whenever its externals do
 * not overlap, so that externals on many threads at once write no line
 * they share: one lock taken at both ends of every external in the process
 * made two threads' externals several times dearer than one thread's
 * (docs/design/runs/2026-12-07-external-marks.md). Otherwise it scans
 * under `mark_lock`, which orders the table's growth. Readers scan without
 * either: a thread only finds a mark that its ancestry put in force and
 * that is therefore still taken. An entry's allocator forwards to one
 * allocator (`fb`), so an entry is reused for the same one as it is, and
 * for another only once its taker has made it a new allocator.
 */
#define TT__MARKS 256
#define TT__TAG_BASE 0x40000000

/* A line each: threads that call externals at once each take their own
 * entry again and again (last_mark), and must not write each other's line. */
typedef struct callee_mark {
    _Alignas(64) _Atomic omp_allocator_handle_t h; /* omp_null_allocator: none made   */
    /* What h forwards to: written by the entry's taker, read by threads
     * looking for a free entry. */
    _Atomic omp_allocator_handle_t fb;
    const void *_Atomic pool;
    struct callee_mark *_Atomic outer;
    omp_allocator_handle_t saved; /* the taker's default before the mark */
    _Atomic bool busy;
} callee_mark;

static callee_mark marks[TT__MARKS];
static _Atomic unsigned marks_made;
static pthread_mutex_t mark_lock = PTHREAD_MUTEX_INITIALIZER;
static TT__TLS_HOT callee_mark *last_mark;

/* Take m if it is free. Acquire: the last taker's writes to the entry (its
 * allocator, fb) happen before this taker reads them; its release is the
 * store that gives the entry back (omp_callee_unmark). */
static bool mark_try_take(callee_mark *m)
{
    bool free = false;
    return !atomic_load_explicit(&m->busy, memory_order_relaxed) &&
           atomic_compare_exchange_strong_explicit(&m->busy, &free, true, memory_order_acquire,
                                                   memory_order_relaxed);
}

/* A fork() child has only the forking thread: mark_lock is held across the
 * fork (prepare) and given back on both sides, so that a child never
 * starts with it held by a thread it does not have (its first external
 * would wait forever). Entries busy in other threads of the parent stay
 * busy in the child: the table has room. */
static void marks_atfork_prepare(void) { pthread_mutex_lock(&mark_lock); }
static void marks_atfork_release(void) { pthread_mutex_unlock(&mark_lock); }
static pthread_once_t marks_atfork_once = PTHREAD_ONCE_INIT;
static _Atomic uint64_t mark_lock_hold_ns; /* test hook (test_hooks.h) */

uint64_t tt__test_mark_lock_hold_ns(uint64_t ns)
{
    return atomic_exchange_explicit(&mark_lock_hold_ns, ns, memory_order_relaxed);
}

static void marks_atfork_register(void)
{
    pthread_atfork(marks_atfork_prepare, marks_atfork_release, marks_atfork_release);
}

/* A free entry for allocator `cur`, taken: one that forwards to it, else
 * one without an allocator, else a new one; NULL when none is free and the
 * table is full. (An entry that forwards to another allocator is not made
 * over: its allocator would be lost, as nothing destroys one.) */
static callee_mark *mark_take_slow(omp_allocator_handle_t cur)
{
    callee_mark *m = NULL;
    pthread_once(&marks_atfork_once, marks_atfork_register);
    pthread_mutex_lock(&mark_lock);
    uint64_t hold = atomic_load_explicit(&mark_lock_hold_ns, memory_order_relaxed);
    if (hold) {
        struct timespec ts = {(time_t)(hold / 1000000000u), (long)(hold % 1000000000u)};
        nanosleep(&ts, NULL);
    }
    unsigned made = atomic_load_explicit(&marks_made, memory_order_relaxed);
    for (unsigned i = 0; i < made && !m; i++)
        if (atomic_load_explicit(&marks[i].fb, memory_order_relaxed) == cur &&
            mark_try_take(&marks[i]))
            m = &marks[i];
    for (unsigned i = 0; i < made && !m; i++)
        if (atomic_load_explicit(&marks[i].h, memory_order_relaxed) == omp_null_allocator &&
            mark_try_take(&marks[i]))
            m = &marks[i];
    if (!m && made < TT__MARKS) {
        m = &marks[made];
        atomic_store_explicit(&m->h, omp_null_allocator, memory_order_relaxed);
        atomic_store_explicit(&m->busy, true, memory_order_relaxed);
        atomic_store_explicit(&marks_made, made + 1, memory_order_release);
    }
    pthread_mutex_unlock(&mark_lock);
    return m;
}

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

/* The mark whose tag the calling thread's thread-limit-var holds. */
static callee_mark *tag_find(void)
{
    int tl = omp_get_thread_limit();
    if (tl < TT__TAG_BASE || tl >= TT__TAG_BASE + TT__MARKS)
        return NULL;
    unsigned i = (unsigned)(tl - TT__TAG_BASE);
    return i < atomic_load_explicit(&marks_made, memory_order_acquire) ? &marks[i] : NULL;
}

/*
 * The allocator routines are called in the runtime that answers the
 * library's other omp_* calls. A GCC-built library names them at libgomp's
 * symbol version OMP_5.0.1, which LLVM's libomp (checked with 14) does not
 * define: in a clang/libomp application those three references alone bound
 * to libgomp, so the mark went into libgomp's ICVs while the callee's
 * regions ran on libomp, its threads were not known as the callee's, and a
 * callee whose threads entered the pool again waited for the slots of its
 * own external forever. They are looked up, unversioned, in the module
 * that defines the omp_get_level the library calls; where that fails the
 * library's own references are used.
 */
/* The runtime's own prototype: libgomp's omp.h takes the traits as const,
 * libomp's does not. */
typedef __typeof__(&omp_init_allocator) rt_init_allocator_fn;
static struct {
    rt_init_allocator_fn init;
    void (*set_default)(omp_allocator_handle_t);
    omp_allocator_handle_t (*get_default)(void);
} rt_alloc;
static pthread_once_t rt_alloc_once = PTHREAD_ONCE_INIT;

static void rt_alloc_resolve(void)
{
    Dl_info di;
    void *h = NULL;
    if (dladdr((void *)&omp_get_level, &di) && di.dli_fname && di.dli_fname[0] &&
        di.dli_sname && strcmp(di.dli_sname, "omp_get_level") == 0)
        h = dlopen(di.dli_fname, RTLD_LAZY | RTLD_NOLOAD); /* kept open: the runtime stays */
    rt_init_allocator_fn init = h ? (rt_init_allocator_fn)dlsym(h, "omp_init_allocator") : NULL;
    void (*set)(omp_allocator_handle_t) =
        h ? (void (*)(omp_allocator_handle_t))dlsym(h, "omp_set_default_allocator") : NULL;
    omp_allocator_handle_t (*get)(void) =
        h ? (omp_allocator_handle_t(*)(void))dlsym(h, "omp_get_default_allocator") : NULL;
    if (init && set && get) {
        rt_alloc.init = init;
        rt_alloc.set_default = set;
        rt_alloc.get_default = get;
    } else {
        rt_alloc.init = omp_init_allocator;
        rt_alloc.set_default = omp_set_default_allocator;
        rt_alloc.get_default = omp_get_default_allocator;
    }
}

static omp_allocator_handle_t rt_get_default_allocator(void)
{
    pthread_once(&rt_alloc_once, rt_alloc_resolve);
    return rt_alloc.get_default();
}

static void rt_set_default_allocator(omp_allocator_handle_t h)
{
    pthread_once(&rt_alloc_once, rt_alloc_resolve);
    rt_alloc.set_default(h);
}

static omp_allocator_handle_t rt_init_allocator(omp_memspace_handle_t space, int n,
                                                omp_alloctrait_t tr[])
{
    pthread_once(&rt_alloc_once, rt_alloc_resolve);
    return rt_alloc.init(space, n, tr);
}

/* An allocator that forwards every allocation to `fb`: a memory pool of
 * one byte, so that every request falls back to fb. For the default
 * allocator, one with default traits (what omp_default_mem_alloc is). */
static omp_allocator_handle_t forwarding_allocator(omp_allocator_handle_t fb)
{
    if (fb == omp_default_mem_alloc || fb == omp_null_allocator)
        return rt_init_allocator(omp_default_mem_space, 0, NULL);
    omp_alloctrait_t tr[] = {{omp_atk_pool_size, 1},
                             {omp_atk_fallback, omp_atv_allocator_fb},
                             {omp_atk_fb_data, (omp_uintptr_t)fb}};
    return rt_init_allocator(omp_default_mem_space, 3, tr);
}

static void *omp_callee_mark(const void *pool)
{
    omp_allocator_handle_t cur = rt_get_default_allocator();
    /* The outer external's mark: by tag (exact), else by allocator. */
    callee_mark *outer = tag_find();
    if (!outer)
        outer = mark_find(cur);
    callee_mark *m = last_mark;
    if (atomic_load_explicit(&mark_lock_hold_ns, memory_order_relaxed))
        m = NULL; /* the test hook: every mark through the scan */
    if (m && atomic_load_explicit(&m->fb, memory_order_relaxed) == cur && mark_try_take(m)) {
        /* Made over for another allocator between the look and the take
         * (only an entry without an allocator is): give it back. */
        if (atomic_load_explicit(&m->fb, memory_order_relaxed) != cur) {
            atomic_store_explicit(&m->busy, false, memory_order_release);
            m = NULL;
        }
    } else {
        m = NULL;
    }
    if (!m)
        m = mark_take_slow(cur);
    if (!m)
        return NULL;
    last_mark = m;
    if (atomic_load_explicit(&m->h, memory_order_relaxed) == omp_null_allocator ||
        atomic_load_explicit(&m->fb, memory_order_relaxed) != cur) {
        /* May fail (no memory): the tag alone marks the callee then. */
        atomic_store_explicit(&m->h, forwarding_allocator(cur), memory_order_relaxed);
        atomic_store_explicit(&m->fb, cur, memory_order_relaxed);
    }
    m->saved = cur;
    /* Release: a thread that inherits the mark reads these after the
     * region start that copied it (libgomp's own synchronisation, which
     * TSan does not see, hence atomics). */
    atomic_store_explicit(&m->pool, pool, memory_order_release);
    atomic_store_explicit(&m->outer, outer, memory_order_release);
    if (atomic_load_explicit(&m->h, memory_order_relaxed) != omp_null_allocator)
        rt_set_default_allocator(atomic_load_explicit(&m->h, memory_order_relaxed));
    return m;
}

static void omp_callee_unmark(void *mark)
{
    callee_mark *m = mark;
    if (!m)
        return;
    if (atomic_load_explicit(&m->h, memory_order_relaxed) != omp_null_allocator)
        rt_set_default_allocator(m->saved);
    atomic_store_explicit(&m->pool, NULL, memory_order_relaxed);
    atomic_store_explicit(&m->busy, false, memory_order_release);
}

/* Call fn(ctx) with the mark's tag in force (see above). */
static void omp_callee_call(void *mark, void (*fn)(void *ctx), void *ctx)
{
    callee_mark *m = mark;
    int tl = omp_get_thread_limit();
    /* The process's own thread limit stays in force: no tag then. */
    /* libomp (checked with 14): a host `teams num_teams(1)` runs on the
     * calling thread, but the thread_limit it sets stays behind in the
     * ICVs of the threads of the callee's regions (a hot team's worker
     * still holds the tag after the external returned) and caps the
     * callee's regions at the processors (KMP_TEAMS_THREAD_LIMIT): no tag
     * there, the allocator mark alone marks the callee. */
    if (!m || (tl != INT_MAX && !tag_find()) || tt__omp_runtime_is_libomp()) {
        fn(ctx);
        return;
    }
    int tag = TT__TAG_BASE + (int)(m - marks);
#pragma omp teams num_teams(1) thread_limit(tag)
    fn(ctx);
}

static bool walk_marks(callee_mark *m, const void *pool)
{
    for (; m; m = atomic_load_explicit(&m->outer, memory_order_acquire))
        if (atomic_load_explicit(&m->pool, memory_order_acquire) == pool)
            return true;
    return false;
}

static bool omp_callee_of(const void *pool)
{
    return walk_marks(tag_find(), pool) || walk_marks(mark_find(rt_get_default_allocator()), pool);
}

/* The most threads one region of the calling thread can have: the thread
 * limit, and 1 when max-active-levels-var is 0 (OMP_MAX_ACTIVE_LEVELS=0
 * serialises every region) on a thread outside every region, whose roots
 * run on its own team. Inside an inline run that the library isolated
 * (nthreads-var 1 and max-active-levels-var 0) the application's setting
 * is not known and only the thread limit counts; inside a region, roots run
 * on a private crew, whose host thread has the defaults. */
static unsigned omp_thread_limit(void)
{
    int l = omp_get_thread_limit();
    unsigned lim = l <= 0 ? UINT32_MAX : (unsigned)l;
    if (omp_get_level() == 0 && omp_get_max_active_levels() == 0 && omp_get_max_threads() != 1)
        lim = 1;
    return lim;
}

void tt__test_region_cap(unsigned cap)
{
    atomic_store_explicit(&region_cap, cap, memory_order_relaxed);
}

/* libgomp's barrier (config/linux/bar.c, gomp_team_barrier_wait_end):
 * the last thread to arrive stores the barrier's next generation, which
 * lets every spinning thread go at once, and then calls futex_wake for
 * any that sleep, unconditionally: one system call per barrier, about a
 * microsecond, two per root with the dock barrier at the region's start
 * (comment-records.md, "libgomp's last arriver"). LLVM libomp's barriers
 * release through flags and wake only threads that sleep. */
static bool omp_last_arriver_wakes(void)
{
    return !tt__omp_runtime_is_libomp();
}

const tt__backend tt__backend_omp = {
    .name = "openmp",
    .start = omp_start,
    .join = omp_join,
    .level1_thread_num = omp_level1_thread_num,
    .in_parallel = omp_in_parallel_any,
    .confine = omp_confine,
    .isolate = omp_isolate,
    .isolate_seq = omp_isolate_seq,
    .complete = omp_complete,
    .icvs_save = omp_icvs_save,
    .icvs_restore = omp_icvs_restore,
    .max_threads = omp_max_threads,
    .region = omp_region,
    .region_line = omp_region_line,
    .places_cpus = omp_places_cpus,
    .external_enter = omp_external_enter,
    .external_leave = omp_external_leave,
    .thread_limit = omp_thread_limit,
    .callee_mark = omp_callee_mark,
    .callee_unmark = omp_callee_unmark,
    .callee_call = omp_callee_call,
    .callee_of = omp_callee_of,
    .last_arriver_wakes = omp_last_arriver_wakes,
};

#endif /* TT_HAVE_OPENMP */
