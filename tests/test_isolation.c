/*
 * test_isolation.c -- a share is one thread to OpenMP.
 *
 * Roots run on the caller's own OpenMP team, so the library's region is the
 * innermost parallel region of every share unless the library hides it.
 * User code in a share (a fork job, a range, a broadcast call, an inline
 * run, a section narrower than its region, a split part, a callee of a
 * budget-1 tt_external) must see a team of one thread: legacy kernels call
 * functions with orphaned `omp for`, `single`, `sections`, `barrier`,
 * create tasks and open nested regions, and all of it must run exactly
 * once, on the share's thread, with no thread the root did not take a slot
 * for running user code.
 *
 * The matrix: every entry kind (kinds[] below) on every path (paths[]: the
 * caller's own team from the main thread, a plain pthread, a thread inside
 * the application's own parallel region, a dedicated pool's private crew,
 * a persistent team) runs probe(), which exercises every construct and
 * counts in user code: iterations, the thread that ran them, the threads
 * in user code at once (at most the budget), the size of nested regions.
 * Nesting is enabled for the whole program (max-active-levels 8), so that a
 * nested region that the library failed to confine does get threads.
 *
 * The one place where OpenMP may see more than one thread is a team-scope
 * section that runs on every thread of its region (a full-width scope on
 * the caller's team, a full-width section): there the SPMD kernel's
 * orphaned `omp for` is shared among the section's participants
 * (test_full_width_section_is_the_team).
 *
 * probe() never enters a worksharing construct when it already sees more
 * than one thread: it records the failure instead, so a defect fails the
 * test rather than hanging it (a construct bound to the library's wider
 * region waits at its barrier for threads that never come).
 */
#include "tt_test.h"

#ifdef _OPENMP
#include <dlfcn.h>
#include <omp.h>
#endif

typedef struct probe_stats {
    th_live live;            /* threads in user code at once               */
    _Atomic unsigned probes; /* probe() calls completed                    */
    _Atomic unsigned late;   /* tasks a probe left for the share's end     */
    _Atomic unsigned bad;    /* violations seen                            */
    char what[160];          /* the first violation                        */
    _Atomic int what_set;
    /* The scope under test is a root scope on the caller's team at the
     * pool's width: its callback runs on the region's master (as code in
     * `omp master` does) and its full-size sections are the region's team. */
    bool region_team;
} probe_stats;

static TT_TEST_UNUSED void bad(probe_stats *P, const char *fmt, unsigned a, unsigned b)
{
    atomic_fetch_add(&P->bad, 1);
    int z = 0;
    if (atomic_compare_exchange_strong(&P->what_set, &z, 1))
        snprintf(P->what, sizeof P->what, fmt, a, b);
}

static void probe_init(probe_stats *P)
{
    memset(P, 0, sizeof *P);
    th_live_init(&P->live);
}

#ifdef _OPENMP
/* Each construct in a function of its own: the worksharing constructs are
 * orphaned, as in the legacy kernels (NPB's add(), the loops of a solver). */
static void ws_for_static(_Atomic unsigned *n, pid_t me, _Atomic unsigned *foreign)
{
#pragma omp for schedule(static)
    for (int i = 0; i < 1000; i++) {
        atomic_fetch_add(n, 1);
        if (th_gettid() != me)
            atomic_fetch_add(foreign, 1);
    }
}

static void ws_for_dynamic(_Atomic unsigned *n, pid_t me, _Atomic unsigned *foreign)
{
#pragma omp for schedule(dynamic, 7)
    for (int i = 0; i < 1000; i++) {
        atomic_fetch_add(n, 1);
        if (th_gettid() != me)
            atomic_fetch_add(foreign, 1);
    }
}

static void ws_for_guided(_Atomic unsigned *n, pid_t me, _Atomic unsigned *foreign)
{
#pragma omp for schedule(guided) nowait
    for (int i = 0; i < 1000; i++) {
        atomic_fetch_add(n, 1);
        if (th_gettid() != me)
            atomic_fetch_add(foreign, 1);
    }
#pragma omp barrier
}

static void ws_single_sections(_Atomic unsigned *n)
{
#pragma omp single
    atomic_fetch_add(n, 1);
#pragma omp sections
    {
#pragma omp section
        atomic_fetch_add(n, 10);
#pragma omp section
        atomic_fetch_add(n, 100);
    }
}

static void task_body(probe_stats *P, _Atomic unsigned *n, pid_t me)
{
    int live = th_live_enter(&P->live);
    (void)live;
    atomic_fetch_add(n, 1);
    if (th_gettid() != me)
        bad(P, "a task ran on another thread (%u, %u)", (unsigned)th_gettid(), (unsigned)me);
    th_spin_us(20);
    th_live_leave(&P->live);
}

static void ws_tasks(probe_stats *P, _Atomic unsigned *n, pid_t me)
{
    for (int i = 0; i < 8; i++) {
#pragma omp task shared(n, me, P)
        task_body(P, n, me);
    }
#pragma omp taskwait
#pragma omp taskloop grainsize(10) shared(n, me, P)
    for (int i = 0; i < 40; i++)
        task_body(P, n, me);
}
#endif

/* Deferred tasks each probe leaves without waiting for them. */
enum { LATE_TASKS = 4 };

#ifdef _OPENMP
/* Leave LATE_TASKS deferred tasks, each spinning `us` and then counting
 * itself in *ran, without waiting for them. They outlive the caller's
 * frame: the pointer is copied into each task (firstprivate). */
static void leave_late_tasks(_Atomic unsigned *ran, unsigned us)
{
    for (int i = 0; i < LATE_TASKS; i++) {
#pragma omp task firstprivate(ran, us)
        {
            th_spin_us(us);
            atomic_fetch_add(ran, 1);
        }
    }
}
#endif

/* Everything an OpenMP kernel may do, from user code in a share. */
static void probe(probe_stats *P)
{
    th_live_enter(&P->live);
#ifdef _OPENMP
    pid_t me = th_gettid();
    int nt = omp_get_num_threads(), tn = omp_get_thread_num();
    if (nt != 1 || tn != 0) {
        bad(P, "omp_get_num_threads %u, omp_get_thread_num %u in a share", (unsigned)nt,
            (unsigned)tn);
    } else {
        _Atomic unsigned n = 0, foreign = 0;
        ws_for_static(&n, me, &foreign);
        if (n != 1000)
            bad(P, "orphaned omp for (static) ran %u of %u iterations here", n, 1000);
        n = 0;
        ws_for_dynamic(&n, me, &foreign);
        if (n != 1000)
            bad(P, "orphaned omp for (dynamic) ran %u of %u iterations here", n, 1000);
        n = 0;
        ws_for_guided(&n, me, &foreign);
        if (n != 1000)
            bad(P, "orphaned omp for (guided) ran %u of %u iterations here", n, 1000);
        if (foreign)
            bad(P, "%u iterations ran on another thread (%u)", foreign, 0);
        n = 0;
        ws_single_sections(&n);
        if (n != 111)
            bad(P, "single + sections counted %u, want %u", n, 111);
        n = 0;
        th_live_leave(&P->live); /* the tasks count themselves */
        ws_tasks(P, &n, me);
        th_live_enter(&P->live);
        if (n != 48)
            bad(P, "tasks ran %u of %u", n, 48);
    }
    /* Nested regions: one thread, with and without a num_threads clause
     * (nesting is enabled for the whole program). */
    _Atomic unsigned threads = 0;
#pragma omp parallel shared(threads)
    atomic_fetch_add(&threads, 1);
    if (threads != 1)
        bad(P, "a nested omp parallel got %u threads (%u)", threads, 0);
    threads = 0;
#pragma omp parallel num_threads(3) shared(threads)
    {
#pragma omp parallel num_threads(2) shared(threads)
        atomic_fetch_add(&threads, 1);
    }
    if (threads != 1)
        bad(P, "nested omp parallel num_threads(3) x (2) got %u threads (%u)", threads, 0);
    /* Tasks left for the end: no taskwait. OpenMP completes them before
     * the region that generated them ends, and the entry that ran this
     * share must not return before they ran either (run_all_kinds checks
     * the count right after it). */
    leave_late_tasks(&P->late, 20);
#endif
    th_live_leave(&P->live);
    atomic_fetch_add(&P->probes, 1);
}

/* ------------------------------------------------------------------------ */
/* Entry kinds                                                               */
/* ------------------------------------------------------------------------ */

static void job_probe(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    (void)child;
    probe(arg);
}

static void job_nested(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    int rc = tt_fork(child, 2, job_probe, arg);
    TT_CHECK(rc == TT_OK, "nested fork: %s", tt_strerror(rc));
}

static void body_probe(void *arg, size_t b, size_t e)
{
    (void)b;
    (void)e;
    probe(arg);
}

static void bcast_probe(void *arg, unsigned i)
{
    (void)i;
    probe(arg);
}

static void ext_probe(void *arg, unsigned width)
{
    TT_CHECK(width == 1, "budget-1 external: width %u", width);
    probe(arg);
}

static void section_probe(void *arg, tt_section *s)
{
    (void)s;
    probe(arg);
}

static void scope_narrow_sections(void *arg, tt_scope *scope)
{
    /* The scope's callback is user code too, and so is every section
     * narrower than the region. The callback of a scope that is its
     * region's whole team is that team's master. */
    probe_stats *P = arg;
    unsigned size = tt_scope_size(scope);
    if (!P->region_team) {
        probe(arg);
    } else {
#ifdef _OPENMP
        if ((unsigned)omp_get_num_threads() != size || omp_get_thread_num() != 0)
            bad(P, "region-team scope callback: %u threads, thread %u",
                (unsigned)omp_get_num_threads(), (unsigned)omp_get_thread_num());
        _Atomic unsigned threads = 0;
#pragma omp parallel num_threads(2) shared(threads)
        atomic_fetch_add(&threads, 1);
        if (threads != 1)
            bad(P, "region-team scope callback: a nested region got %u threads (%u)", threads, 0);
#endif
    }
    for (unsigned w = 1; w < size; w++) {
        int rc = tt_scope_run_with(scope, w, section_probe, arg);
        TT_CHECK(rc == TT_OK, "scope_run_with %u: %s", w, tt_strerror(rc));
    }
}

static void part_probe(void *arg, unsigned part, tt_scope *sub)
{
    (void)part;
    int rc = tt_scope_run(sub, section_probe, arg);
    TT_CHECK(rc == TT_OK, "part's section: %s", tt_strerror(rc));
}

static void scope_split(void *arg, tt_scope *scope)
{
    int rc = tt_scope_split(scope, tt_scope_size(scope), part_probe, arg);
    TT_CHECK(rc == TT_OK, "split: %s", tt_strerror(rc));
    rc = tt_scope_fork(scope, tt_scope_size(scope), job_probe, arg);
    TT_CHECK(rc == TT_OK, "scope fork: %s", tt_strerror(rc));
}

enum kind {
    K_FORK,        /* a job per slot                                   */
    K_FORK_NESTED, /* jobs that fork again                             */
    K_RANGES,
    K_RANGES_DYN,  /* chunks handed out: a task runs several shares    */
    K_BCAST,
    K_SCOPE,       /* narrower sections, and the callback itself        */
    K_SPLIT,       /* split parts and scope forks                       */
    K_INLINE_B1,   /* a budget-1 root: inline                           */
    K_INLINE_ONE,  /* one job on a wider token: inline                  */
    K_SERIAL,      /* a serial token                                    */
    K_EXT_B1,      /* a budget-1 external: the callee inline            */
    K_NKINDS
};

static const char *kind_name[K_NKINDS] = {"fork", "fork-nested", "ranges", "ranges-dynamic",
                                          "broadcast",
                                          "scope", "split", "inline-b1", "inline-one-job",
                                          "serial", "external-b1"};

/* Run entry kind k on a fresh token of `pool` with `budget`; returns the
 * entry's code. */
static int run_kind(tt_pool *pool, unsigned budget, enum kind k, probe_stats *P)
{
    tt_exec ex;
    int rc;
    if (k == K_SERIAL) {
        tt_exec_init_serial(&ex);
    } else {
        rc = tt_exec_init(&ex, pool, k == K_INLINE_B1 || k == K_EXT_B1 ? 1 : budget);
        if (rc)
            return rc;
    }
    switch (k) {
    case K_FORK:
        return tt_fork(&ex, tt_exec_budget(&ex), job_probe, P);
    case K_FORK_NESTED:
        return tt_fork(&ex, 2, job_nested, P);
    case K_RANGES:
        return tt_for_ranges(&ex, 64, 1, body_probe, P);
    case K_RANGES_DYN:
        return tt_for_ranges_dynamic(&ex, 64, 4, body_probe, P);
    case K_BCAST:
        return tt_broadcast(&ex, bcast_probe, P);
    case K_SCOPE:
        return tt_team_scope(&ex, scope_narrow_sections, P);
    case K_SPLIT:
        return tt_team_scope(&ex, scope_split, P);
    case K_INLINE_B1:
    case K_SERIAL:
        return tt_fork(&ex, 3, job_probe, P);
    case K_INLINE_ONE:
        return tt_fork(&ex, 1, job_probe, P);
    case K_EXT_B1:
        return tt_external(&ex, ext_probe, P);
    default:
        return TT_EINVAL;
    }
}

/* ------------------------------------------------------------------------ */
/* Paths                                                                     */
/* ------------------------------------------------------------------------ */

typedef struct matrix_case {
    tt_pool *pool;
    unsigned budget;
    const char *path;
    bool callers_team; /* roots run on the caller's own team here */
    unsigned failures;
} matrix_case;

static void run_all_kinds(matrix_case *mc)
{
    for (int k = 0; k < K_NKINDS; k++) {
        probe_stats P;
        probe_init(&P);
        P.region_team = mc->callers_team && TT_PARALLEL_ENABLED &&
                        mc->budget == tt_pool_width(mc->pool) && mc->budget > 1;
        int rc = run_kind(mc->pool, mc->budget, (enum kind)k, &P);
        /* A broadcast from inside the application's own region may be
         * refused while another entry holds the slots; nothing else may. */
        bool refused_ok = k == K_BCAST && rc == TT_REFUSED_UNAVAILABLE;
        unsigned cap = k == K_SERIAL || k == K_INLINE_B1 || k == K_EXT_B1
                           ? 1
                           : th_expect_budget(tt_pool_width(mc->pool), mc->budget);
        if (!refused_ok && rc != TT_OK) {
            TT_CHECK(0, "%s, width %u budget %u, %s: rc %s", mc->path, tt_pool_width(mc->pool),
                     mc->budget, kind_name[k], tt_status_name(rc));
            mc->failures++;
        }
#ifdef _OPENMP
        unsigned probes = atomic_load(&P.probes), late = atomic_load(&P.late);
        if (late != probes * LATE_TASKS) {
            TT_CHECK(0, "%s, width %u budget %u, %s: %u of the %u tasks that %u shares left "
                        "behind had run when the entry returned",
                     mc->path, tt_pool_width(mc->pool), mc->budget, kind_name[k], late,
                     probes * LATE_TASKS, probes);
            mc->failures++;
        }
#endif
        if (atomic_load(&P.bad) || (unsigned)th_live_max(&P.live) > cap ||
            (!refused_ok && atomic_load(&P.probes) == 0)) {
            TT_CHECK(0, "%s, width %u budget %u, %s: %u violations (%s), %d threads in user code "
                        "(budget %u), %u probes",
                     mc->path, tt_pool_width(mc->pool), mc->budget, kind_name[k],
                     atomic_load(&P.bad), P.what, th_live_max(&P.live), cap,
                     atomic_load(&P.probes));
            mc->failures++;
        }
    }
}

static void *plain_thread_main(void *arg)
{
    run_all_kinds(arg);
    return NULL;
}

static tt_pool *make_pool(unsigned width, bool dedicated)
{
    tt_pool_attr *a;
    ck_assert_int_eq(tt_pool_attr_create(&a), TT_OK);
    ck_assert_int_eq(tt_pool_attr_set_threads(a, width), TT_OK);
    if (dedicated)
        ck_assert_int_eq(tt_pool_attr_set_thread_name(a, "tt-iso"), TT_OK);
    tt_pool *p;
    ck_assert_int_eq(tt_pool_create(&p, a), TT_OK);
    tt_pool_attr_destroy(a);
    return p;
}

static void enable_nesting(void)
{
#ifdef _OPENMP
    /* As OMP_MAX_ACTIVE_LEVELS=8 would: a nested region the library does
     * not confine gets its threads. */
    omp_set_max_active_levels(8);
#endif
}

static const unsigned widths[] = {2, 4};

START_TEST(test_matrix_callers_team)
{
    enable_nesting();
    for (unsigned w = 0; w < sizeof widths / sizeof *widths; w++)
        for (unsigned budget = 2; budget <= widths[w]; budget += 2) {
            tt_pool *p = make_pool(widths[w], false);
            matrix_case mc = {.pool = p, .budget = budget, .path = "main thread",
                              .callers_team = true};
            run_all_kinds(&mc);
            ck_assert_int_eq(tt_pool_destroy(p), TT_OK);
        }
    th_assert_no_failures();
}
END_TEST

START_TEST(test_matrix_plain_pthread)
{
    enable_nesting();
    for (unsigned w = 0; w < sizeof widths / sizeof *widths; w++) {
        tt_pool *p = make_pool(widths[w], false);
        matrix_case mc = {.pool = p, .budget = 2, .path = "plain pthread",
                          .callers_team = true};
        pthread_t t;
        ck_assert_int_eq(pthread_create(&t, NULL, plain_thread_main, &mc), 0);
        pthread_join(t, NULL);
        ck_assert_int_eq(tt_pool_destroy(p), TT_OK);
    }
    th_assert_no_failures();
}
END_TEST

START_TEST(test_matrix_dedicated_pool)
{
    enable_nesting();
    for (unsigned w = 0; w < sizeof widths / sizeof *widths; w++) {
        tt_pool *p = make_pool(widths[w], true);
        matrix_case mc = {.pool = p, .budget = widths[w], .path = "dedicated pool"};
        run_all_kinds(&mc);
        ck_assert_int_eq(tt_pool_destroy(p), TT_OK);
    }
    th_assert_no_failures();
}
END_TEST

START_TEST(test_matrix_inside_application_region)
{
#ifdef _OPENMP
    enable_nesting();
    tt_pool *p = make_pool(2, false);
    matrix_case mc = {.pool = p, .budget = 2, .path = "inside the application's region"};
    omp_set_dynamic(0);
#pragma omp parallel num_threads(2) shared(mc)
    {
#pragma omp master
        run_all_kinds(&mc);
    }
    ck_assert_int_eq(tt_pool_destroy(p), TT_OK);
    th_assert_no_failures();
#endif
}
END_TEST

START_TEST(test_matrix_width1_pool)
{
    enable_nesting();
    tt_pool *p = make_pool(1, false);
    matrix_case mc = {.pool = p, .budget = 1, .path = "width-1 pool"};
    run_all_kinds(&mc);
    ck_assert_int_eq(tt_pool_destroy(p), TT_OK);
    th_assert_no_failures();
}
END_TEST

START_TEST(test_matrix_persistent_team)
{
    enable_nesting();
    unsigned w = th_expect_width(4);
    tt_pool *p = make_pool(4, false);
    tt_team *team;
    ck_assert_int_eq(tt_pool_into_team(p, w, &team), TT_OK);
    for (int k = 0; k < 3; k++) {
        probe_stats P;
        probe_init(&P);
        tt_exec ex;
        ck_assert_int_eq(tt_team_lead(team, w, &ex), TT_OK);
        int rc = k == 0   ? tt_fork(&ex, w, job_probe, &P)
                 : k == 1 ? tt_for_ranges(&ex, 64, 1, body_probe, &P)
                          : tt_team_scope(&ex, scope_narrow_sections, &P);
        ck_assert_msg(rc == TT_OK, "team entry %d: %s", k, tt_strerror(rc));
        ck_assert_msg(atomic_load(&P.bad) == 0, "team entry %d: %u violations (%s)", k,
                      atomic_load(&P.bad), P.what);
        ck_assert_int_le(th_live_max(&P.live), (int)w);
        ck_assert_uint_gt(atomic_load(&P.probes), 0);
    }
    p = tt_team_into_pool(team);
    ck_assert_int_eq(tt_pool_destroy(p), TT_OK);
    th_assert_no_failures();
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The exception: a full-width section is its region's team                  */
/* ------------------------------------------------------------------------ */

typedef struct spmd {
    _Atomic unsigned iters[1000];
    _Atomic unsigned bad;
    double sum;
} spmd;

/* Shared by the section's threads, as a global of an SPMD code is. The
 * section's worksharing is synchronised by libgomp's barriers, which TSan
 * cannot see: its functions are named ttomp_* (tests/tsan.supp). */
static TT_TEST_UNUSED double spmd_sum;

static void ttomp_spmd_section(void *arg, tt_section *s)
{
    spmd *S = arg;
#ifdef _OPENMP
    if ((unsigned)omp_get_num_threads() != tt_section_size(s) ||
        (unsigned)omp_get_thread_num() != tt_section_rank(s)) {
        atomic_fetch_add(&S->bad, 1);
        return;
    }
#pragma omp single
    spmd_sum = 0;
#pragma omp for schedule(static) reduction(+ : spmd_sum)
    for (int i = 0; i < 1000; i++) {
        atomic_fetch_add(&S->iters[i], 1);
        spmd_sum += i;
    }
#pragma omp single
    S->sum = spmd_sum;
#else
    (void)s;
    for (int i = 0; i < 1000; i++)
        atomic_fetch_add(&S->iters[i], 1);
    S->sum = 499500;
#endif
}

static void ttomp_spmd_scope(void *arg, tt_scope *scope)
{
    for (int r = 0; r < 20; r++) {
        int rc = tt_scope_run(scope, ttomp_spmd_section, arg);
        TT_CHECK(rc == TT_OK, "spmd section: %s", tt_strerror(rc));
    }
}

START_TEST(test_full_width_section_is_the_team)
{
    unsigned w = th_expect_width(2);
    tt_pool *p = make_pool(2, false);
    spmd *S = calloc(1, sizeof *S);
    tt_exec ex;
    ck_assert_int_eq(tt_exec_init(&ex, p, w), TT_OK);
    ck_assert_int_eq(tt_team_scope(&ex, ttomp_spmd_scope, S), TT_OK);
    ck_assert_uint_eq(atomic_load(&S->bad), 0);
    for (int i = 0; i < 1000; i++)
        ck_assert_msg(atomic_load(&S->iters[i]) == 20, "iteration %d ran %u times", i,
                      atomic_load(&S->iters[i]));
    ck_assert(S->sum == 499500.0);
    free(S);
    ck_assert_int_eq(tt_pool_destroy(p), TT_OK);
    th_assert_no_failures();
}
END_TEST

/* ------------------------------------------------------------------------ */
/* A task of a share that enters the same pool                               */
/* ------------------------------------------------------------------------ */

/* On 784228d a task created in a share could be run by a region thread the
 * root took no slot for, and when that task entered the same pool it waited
 * in the FIFO for slots its own root held while the share sat in taskwait:
 * a deadlock, every run. The task runs on the share's thread now, which
 * holds its slot: its nested root runs there. */
static TT_TEST_UNUSED void count_job(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    (void)child;
    probe_stats *P = arg;
    th_live_enter(&P->live);
    th_spin_us(20);
    th_live_leave(&P->live);
    atomic_fetch_add(&P->probes, 1);
}

typedef struct task_root {
    tt_pool *pool;
    probe_stats P;
} task_root;

static void task_root_job(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    (void)child;
    task_root *T = arg;
#ifdef _OPENMP
    pid_t me = th_gettid();
    for (int k = 0; k < 4; k++) {
#pragma omp task shared(T, me)
        {
            if (th_gettid() != me)
                bad(&T->P, "a task ran on thread %u, not the share's %u", (unsigned)th_gettid(),
                    (unsigned)me);
            tt_exec ex;
            int rc = tt_exec_init(&ex, T->pool, tt_pool_width(T->pool));
            /* Worksharing and barriers may not be nested in an explicit
             * task (OpenMP): the task's jobs count themselves only. */
            if (rc == TT_OK)
                rc = tt_fork(&ex, 2, count_job, &T->P);
            if (rc != TT_OK)
                bad(&T->P, "the task's root: %u%u", (unsigned)rc, 0);
        }
    }
#pragma omp taskwait
#else
    (void)T;
#endif
}

START_TEST(test_task_enters_same_pool)
{
    enable_nesting();
    for (unsigned w = 0; w < sizeof widths / sizeof *widths; w++) {
        task_root T = {.pool = make_pool(widths[w], false)};
        probe_init(&T.P);
        for (int r = 0; r < 10; r++) {
            tt_exec ex;
            ck_assert_int_eq(tt_exec_init(&ex, T.pool, 2), TT_OK);
            ck_assert_int_eq(tt_fork(&ex, 2, task_root_job, &T), TT_OK);
        }
        ck_assert_msg(atomic_load(&T.P.bad) == 0, "width %u: %s", widths[w], T.P.what);
#ifdef _OPENMP
        ck_assert_uint_eq(atomic_load(&T.P.probes), 10 * 2 * 4 * 2);
#endif
        ck_assert_int_le(th_live_max(&T.P.live), 2);
        ck_assert_int_eq(tt_pool_destroy(T.pool), TT_OK);
    }
    th_assert_no_failures();
}
END_TEST

/* ------------------------------------------------------------------------ */
/* A nested entry that runs inline completes its tasks                       */
/* ------------------------------------------------------------------------ */

/*
 * A share's deferred tasks complete before its entry returns: OpenMP runs
 * them at the latest in the implicit barrier that ends the region that
 * generated them, and a share is such a region of one thread. On a region
 * participant the share's isolation ends with that barrier, and outside
 * every region OpenMP runs a task at once; but a nested entry that runs
 * inline inside a share (a budget-1 child token, one job) has no region
 * of its own that ends when it returns, so without care its tasks would
 * run only when the enclosing share ends, after the caller of the nested
 * entry had read what they were to write.
 */
typedef struct late_ctx {
    _Atomic unsigned ran;   /* tasks run                                   */
    _Atomic unsigned shares; /* shares that left tasks behind              */
    _Atomic unsigned bad;
} late_ctx;

static void leave_tasks(late_ctx *L)
{
#ifdef _OPENMP
    leave_late_tasks(&L->ran, 10);
#endif
    atomic_fetch_add(&L->shares, 1);
}

static void late_job(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    (void)child;
    leave_tasks(arg);
}

static void late_body(void *arg, size_t b, size_t e)
{
    (void)b;
    (void)e;
    leave_tasks(arg);
}

static double late_sum(void *arg, size_t b, size_t e)
{
    leave_tasks(arg);
    return (double)(e - b);
}

static void late_section(void *arg, tt_section *s)
{
    (void)s;
    leave_tasks(arg);
}

static void late_scope(void *arg, tt_scope *scope)
{
    TT_CHECK(tt_scope_run(scope, late_section, arg) == TT_OK, "late scope's section");
}

static void late_ext(void *arg, unsigned width)
{
    (void)width;
    leave_tasks(arg);
}

/* After each nested entry on the child token (budget 1: it runs inline),
 * every task its shares left has run. The counts are the job's own. */
static void nested_entries_job(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    _Atomic unsigned *failures = arg;
    for (int k = 0; k < 6; k++) {
        late_ctx L = {0};
        double sum = 0;
        tt_exec sub;
        tt_exec_reborrow(child, &sub);
        int rc;
        switch (k) {
        case 0: rc = tt_fork(&sub, 1, late_job, &L); break;
        case 1: rc = tt_fork(&sub, 3, late_job, &L); break;
        case 2: rc = tt_for_ranges(&sub, 4, 1, late_body, &L); break;
        case 3: rc = tt_reduce_sum_d(&sub, 4, 1, late_sum, &L, &sum); break;
        case 4: rc = tt_team_scope(&sub, late_scope, &L); break;
        default: rc = tt_external(&sub, late_ext, &L); break;
        }
        TT_CHECK(rc == TT_OK, "nested entry %d: %s", k, tt_strerror(rc));
        unsigned shares = atomic_load(&L.shares), ran = atomic_load(&L.ran);
        TT_CHECK(shares > 0, "nested entry %d ran no share", k);
#ifdef _OPENMP
        if (ran != shares * LATE_TASKS) {
            atomic_fetch_add(failures, 1);
            TT_CHECK(0, "nested entry %d returned with %u of the %u tasks its shares left run", k,
                     ran, shares * LATE_TASKS);
        }
#else
        (void)ran;
#endif
        /* Whatever is still pending runs now, while L lives. */
#ifdef _OPENMP
#pragma omp taskwait
#endif
    }
}

/* A full-width section of a root scope is its region's team: its tasks
 * bind to the root's region, and still complete before tt_scope_run
 * returns, as at the end of the `omp parallel` the section stands for. */
static void full_width_scope(void *arg, tt_scope *scope)
{
    _Atomic unsigned *failures = arg;
    for (int r = 0; r < 20; r++) {
        late_ctx L = {0};
        int rc = tt_scope_run(scope, late_section, &L);
        TT_CHECK(rc == TT_OK, "full-width section: %s", tt_strerror(rc));
        unsigned shares = atomic_load(&L.shares), ran = atomic_load(&L.ran);
        TT_CHECK(shares == tt_scope_size(scope), "%u of %u ranks ran the section", shares,
                 tt_scope_size(scope));
#ifdef _OPENMP
        if (ran != shares * LATE_TASKS) {
            atomic_fetch_add(failures, 1);
            TT_CHECK(0, "a full-width section returned with %u of the %u tasks it left run", ran,
                     shares * LATE_TASKS);
        }
        /* What is still pending must not outlive L: a barrier of the
         * region (the callback is its master's code) runs it. */
#pragma omp taskwait
#endif
        if (ran != shares * LATE_TASKS)
            return;
    }
}

START_TEST(test_entries_complete_their_tasks)
{
    enable_nesting();
    for (unsigned w = 0; w < sizeof widths / sizeof *widths; w++) {
        tt_pool *pool = make_pool(widths[w], false);
        for (int r = 0; r < 5; r++) {
            _Atomic unsigned failures = 0;
            tt_exec ex;
            ck_assert_int_eq(tt_exec_init(&ex, pool, widths[w]), TT_OK);
            ck_assert_int_eq(tt_fork(&ex, widths[w], nested_entries_job, &failures), TT_OK);
            ck_assert_uint_eq(atomic_load(&failures), 0);
            ck_assert_int_eq(tt_exec_init(&ex, pool, widths[w]), TT_OK);
            ck_assert_int_eq(tt_team_scope(&ex, full_width_scope, &failures), TT_OK);
            ck_assert_uint_eq(atomic_load(&failures), 0);
        }
        ck_assert_int_eq(tt_pool_destroy(pool), TT_OK);
    }
    th_assert_no_failures();
}
END_TEST

/* A region-team scope's members stay in one isolation across the commands
 * that need it (split parts, narrower sections) and leave it for the ones
 * that need the region (full-width sections, the end): mixing them, each
 * still sees what it must, and each one's tasks are done at its end. */
typedef struct mixed {
    spmd *S;
    late_ctx L;
    _Atomic unsigned bad, narrow_runs;
} mixed;

static void mixed_narrow(void *arg, tt_section *s)
{
    (void)s;
    mixed *M = arg;
#ifdef _OPENMP
    if (omp_get_num_threads() != 1 || omp_get_thread_num() != 0)
        atomic_fetch_add(&M->bad, 1);
#endif
    leave_tasks(&M->L);
    atomic_fetch_add(&M->narrow_runs, 1);
}

static void mixed_part(void *arg, unsigned part, tt_scope *sub)
{
    (void)part;
    int rc = tt_scope_run(sub, mixed_narrow, arg);
    TT_CHECK(rc == TT_OK, "mixed part's section: %s", tt_strerror(rc));
}

static void ttomp_mixed_scope(void *arg, tt_scope *scope)
{
    mixed *M = arg;
    unsigned size = tt_scope_size(scope);
    for (int r = 0; r < 30; r++) {
        int rc = TT_OK;
        switch (r % 4) {
        case 0:
            rc = tt_scope_run(scope, ttomp_spmd_section, M->S);
            break;
        case 1:
            rc = tt_scope_split(scope, 1 + (unsigned)r % size, mixed_part, M);
            break;
        case 2:
            if (size > 2)
                rc = tt_scope_run_with(scope, size - 1, mixed_narrow, M);
            else
                rc = tt_scope_split(scope, size, mixed_part, M);
            break;
        default:
            rc = tt_scope_split(scope, 2 * size, mixed_part, M);
            break;
        }
        TT_CHECK(rc == TT_OK, "mixed command %d: %s", r % 4, tt_strerror(rc));
#ifdef _OPENMP
        unsigned ran = atomic_load(&M->L.ran), shares = atomic_load(&M->L.shares);
        if (ran != shares * LATE_TASKS)
            atomic_fetch_add(&M->bad, 1);
#endif
    }
}

START_TEST(test_region_team_mixed_commands)
{
    for (unsigned w = 0; w < sizeof widths / sizeof *widths; w++) {
        tt_pool *p = make_pool(widths[w], false);
        unsigned width = tt_pool_width(p);
        for (int rep = 0; rep < 5; rep++) {
            mixed M;
            memset(&M, 0, sizeof M);
            M.S = calloc(1, sizeof *M.S);
            tt_exec ex;
            ck_assert_int_eq(tt_exec_init(&ex, p, width), TT_OK);
            ck_assert_int_eq(tt_team_scope(&ex, ttomp_mixed_scope, &M), TT_OK);
            ck_assert_uint_eq(atomic_load(&M.bad), 0);
            ck_assert_uint_eq(atomic_load(&M.S->bad), 0);
            ck_assert_uint_gt(atomic_load(&M.narrow_runs), 0);
            for (int i = 0; i < 1000; i++)
                ck_assert_uint_eq(atomic_load(&M.S->iters[i]), 8);
            free(M.S);
        }
        ck_assert_int_eq(tt_pool_destroy(p), TT_OK);
    }
    th_assert_no_failures();
}
END_TEST

/* ------------------------------------------------------------------------ */
/* isolate_shares off: the owner's promise                                   */
/* ------------------------------------------------------------------------ */

typedef struct promise_seen {
    _Atomic unsigned nested_threads, jobs;
} promise_seen;

static void promise_job(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    (void)child;
    promise_seen *S = arg;
    _Atomic unsigned threads = 0;
#ifdef _OPENMP
#pragma omp parallel num_threads(3) shared(threads)
    atomic_fetch_add(&threads, 1);
#else
    threads = 1;
#endif
    atomic_fetch_add(&S->nested_threads, threads);
    atomic_fetch_add(&S->jobs, 1);
}

START_TEST(test_isolate_shares_off)
{
    enable_nesting();
    tt_pool_attr *a;
    bool on = false;
    ck_assert_int_eq(tt_pool_attr_create(&a), TT_OK);
    ck_assert_int_eq(tt_pool_attr_get_isolate_shares(a, &on), TT_OK);
    ck_assert(on);
    ck_assert_int_eq(tt_pool_attr_set_isolate_shares(a, false), TT_OK);
    ck_assert_int_eq(tt_pool_attr_get_isolate_shares(a, &on), TT_OK);
    ck_assert(!on);
    ck_assert_int_eq(tt_pool_attr_set_isolate_shares(NULL, false), TT_EINVAL);
    ck_assert_int_eq(tt_pool_attr_get_isolate_shares(a, NULL), TT_EINVAL);
    ck_assert_int_eq(tt_pool_attr_set_threads(a, 2), TT_OK);
    tt_pool *p;
    ck_assert_int_eq(tt_pool_create(&p, a), TT_OK);
    tt_pool_attr_destroy(a);
    /* Even without isolation an omp parallel in a share gets one thread. */
    promise_seen S = {0};
    for (int r = 0; r < 20; r++) {
        tt_exec ex;
        ck_assert_int_eq(tt_exec_init(&ex, p, 2), TT_OK);
        ck_assert_int_eq(tt_fork(&ex, 2, promise_job, &S), TT_OK);
    }
    ck_assert_uint_eq(atomic_load(&S.jobs), 40);
    ck_assert_uint_eq(atomic_load(&S.nested_threads), 40);
    ck_assert_int_eq(tt_pool_destroy(p), TT_OK);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The application's OpenMP state is the same after                         */
/* ------------------------------------------------------------------------ */

START_TEST(test_icvs_restored)
{
#ifdef _OPENMP
    omp_set_max_active_levels(3);
    omp_set_num_threads(3);
    tt_pool *p = make_pool(2, false);
    for (int k = 0; k < K_NKINDS; k++) {
        probe_stats P;
        probe_init(&P);
        int rc = run_kind(p, 2, (enum kind)k, &P);
        ck_assert_msg(rc == TT_OK, "%s: %s", kind_name[k], tt_strerror(rc));
        ck_assert_int_eq(omp_get_max_active_levels(), 3);
        ck_assert_int_eq(omp_get_max_threads(), 3);
        ck_assert_int_eq(omp_get_level(), 0);
    }
    ck_assert_int_eq(tt_pool_destroy(p), TT_OK);
#endif
}
END_TEST

/*
 * A share's own ICV changes stay in the share: in OpenMP an implicit task's
 * omp_set_schedule, omp_set_dynamic, omp_set_default_device,
 * omp_set_num_threads, omp_set_max_active_levels and
 * omp_set_default_allocator end with its region.
 * A share that runs without a region of its own (inline on a thread
 * outside every region, in a crew member's life-long team of one, nested
 * inside another share) must not hand them to the application or to the
 * next share on the same thread.
 */
#ifdef _OPENMP
/* The allocator routines of the application's runtime: a GCC-built test
 * names them at libgomp's symbol version OMP_5.0.1, which LLVM libomp does
 * not define, so under check-libomp-app a direct call would bind to
 * libgomp while the application's runtime (preloaded first) is libomp.
 * The library resolves them the same way (backend_omp.c). */
static omp_allocator_handle_t app_get_default_allocator(void)
{
    omp_allocator_handle_t (*get)(void) =
        (omp_allocator_handle_t(*)(void))dlsym(RTLD_DEFAULT, "omp_get_default_allocator");
    return get ? get() : omp_get_default_allocator();
}

static void app_set_default_allocator(omp_allocator_handle_t h)
{
    void (*set)(omp_allocator_handle_t) =
        (void (*)(omp_allocator_handle_t))dlsym(RTLD_DEFAULT, "omp_set_default_allocator");
    if (set)
        set(h);
    else
        omp_set_default_allocator(h);
}

typedef struct icvs {
    omp_sched_t sched;
    int chunk, dyn, dev, nthreads, mal;
    omp_allocator_handle_t alloc;
} icvs;

static icvs icvs_now(void)
{
    icvs v;
    omp_get_schedule(&v.sched, &v.chunk);
    v.dyn = omp_get_dynamic();
    v.dev = omp_get_default_device();
    v.nthreads = omp_get_max_threads();
    v.mal = omp_get_max_active_levels();
    v.alloc = app_get_default_allocator();
    return v;
}

static bool icvs_same(const icvs *a, const icvs *b, bool all)
{
    return a->sched == b->sched && a->chunk == b->chunk && a->dyn == b->dyn &&
           a->dev == b->dev && a->alloc == b->alloc && (!all || (a->nthreads == b->nthreads && a->mal == b->mal));
}

typedef struct icv_round {
    icvs first[8];      /* what job i saw in the first entry             */
    _Atomic unsigned differ;
    int pass;           /* 0: record and change, 1: compare              */
} icv_round;

static void icv_job(void *arg, unsigned i, tt_exec *child)
{
    (void)child;
    icv_round *R = arg;
    icvs v = icvs_now();
    if (R->pass == 0) {
        R->first[i] = v;
        omp_set_schedule(omp_sched_guided, 13);
        omp_set_dynamic(!v.dyn);
        omp_set_default_device(v.dev + 1);
        omp_set_num_threads(5);
        omp_set_max_active_levels(4);
        app_set_default_allocator(v.alloc == omp_low_lat_mem_alloc ? omp_default_mem_alloc
                                                                   : omp_low_lat_mem_alloc);
    } else if (!icvs_same(&v, &R->first[i], false)) {
        atomic_fetch_add(&R->differ, 1);
    }
}

static void icv_part(void *arg, unsigned part, tt_scope *sub)
{
    (void)sub;
    icv_job(arg, part, NULL);
}

static void icv_split_scope(void *arg, tt_scope *scope)
{
    icv_round *R = arg;
    /* Twice as many parts as participants: each group leader runs two. */
    int rc = tt_scope_split(scope, 2 * tt_scope_size(scope), icv_part, R);
    TT_CHECK(rc == TT_OK, "icv split: %s", tt_strerror(rc));
}

/* A chunk of grain 1 of tt_for_ranges_dynamic as job `begin`. */
static void icv_chunk(void *arg, size_t begin, size_t end)
{
    (void)end;
    icv_job(arg, (unsigned)begin, NULL);
}

/* Two entries of `jobs` jobs (0: a team scope split into parts; with
 * `dynamic`, chunks of tt_for_ranges_dynamic) on fresh tokens of `pool`
 * with `budget`, from this thread: the ICVs the caller sees are the same
 * after each, and the second entry's jobs see what the first entry's saw. */
static void icv_rounds_as(tt_pool *pool, unsigned budget, unsigned jobs, bool dynamic,
                          const char *where)
{
    icvs before = icvs_now();
    icv_round R;
    memset(&R, 0, sizeof R);
    for (R.pass = 0; R.pass < 2; R.pass++) {
        tt_exec ex;
        int rc = tt_exec_init(&ex, pool, budget);
        if (rc == TT_OK)
            rc = dynamic ? tt_for_ranges_dynamic(&ex, jobs, 1, icv_chunk, &R)
                 : jobs  ? tt_fork(&ex, jobs, icv_job, &R)
                         : tt_team_scope(&ex, icv_split_scope, &R);
        TT_CHECK(rc == TT_OK, "%s: fork: %s", where, tt_strerror(rc));
        icvs after = icvs_now();
        TT_CHECK(icvs_same(&after, &before, true),
                 "%s: a share's ICV changes reached its caller (schedule %d/%d, dynamic %d, "
                 "device %d, nthreads %d, max-active-levels %d)",
                 where, (int)after.sched, after.chunk, after.dyn, after.dev, after.nthreads,
                 after.mal);
    }
    TT_CHECK(atomic_load(&R.differ) == 0, "%s: %u shares saw an earlier share's ICV changes",
             where, atomic_load(&R.differ));
}

static void icv_rounds(tt_pool *pool, unsigned budget, unsigned jobs, const char *where)
{
    icv_rounds_as(pool, budget, jobs, false, where);
}

typedef struct icv_nested {
    tt_pool *pool;
} icv_nested;

static void icv_nested_job(void *arg, unsigned i, tt_exec *child)
{
    (void)arg;
    if (i != 0)
        return;
    /* Inside a share: a budget-1 child's entries run inline here. */
    icvs before = icvs_now();
    icv_round R;
    memset(&R, 0, sizeof R);
    for (R.pass = 0; R.pass < 2; R.pass++) {
        tt_exec sub;
        tt_exec_reborrow(child, &sub);
        int rc = tt_fork(&sub, 2, icv_job, &R);
        TT_CHECK(rc == TT_OK, "nested inline: fork: %s", tt_strerror(rc));
        icvs after = icvs_now();
        TT_CHECK(icvs_same(&after, &before, true),
                 "nested inline: a share's ICV changes reached the enclosing share");
    }
    TT_CHECK(atomic_load(&R.differ) == 0, "nested inline: %u shares saw an earlier share's "
                                          "ICV changes", atomic_load(&R.differ));
}

static void *icv_plain_thread(void *arg)
{
    icv_rounds(arg, 2, 2, "plain pthread");
    return NULL;
}
#endif

START_TEST(test_share_icvs_stay_in_the_share)
{
#ifdef _OPENMP
    tt_pool *region = make_pool(2, false), *dedicated = make_pool(2, true);
    icv_rounds(region, 1, 3, "inline, budget 1, main thread");
    icv_rounds(region, 2, 2, "caller's team");
    icv_rounds(region, 2, 4, "caller's team, more jobs than budget");
    icv_rounds(dedicated, 2, 2, "private crew");
    icv_rounds(dedicated, 2, 4, "private crew, more jobs than budget");
    icv_rounds_as(region, 2, 6, true, "caller's team, dynamic chunks");
    icv_rounds_as(dedicated, 2, 6, true, "private crew, dynamic chunks");
    icv_rounds_as(region, 1, 3, true, "inline dynamic chunks, budget 1");
    icv_rounds(region, 2, 0, "split parts, caller's team");
    icv_rounds(dedicated, 2, 0, "split parts, private crew");
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, icv_plain_thread, region), 0);
    pthread_join(t, NULL);
    tt_exec ex;
    ck_assert_int_eq(tt_exec_init(&ex, region, 2), TT_OK);
    ck_assert_int_eq(tt_fork(&ex, 2, icv_nested_job, NULL), TT_OK);
    ck_assert_int_eq(tt_pool_destroy(dedicated), TT_OK);
    ck_assert_int_eq(tt_pool_destroy(region), TT_OK);
    th_assert_no_failures();
#endif
}
END_TEST

static Suite *isolation_suite(void)
{
    Suite *s = suite_create("isolation");
    TCase *tc = th_tcase(s, "core", 120);
    tcase_add_test(tc, test_matrix_callers_team);
    tcase_add_test(tc, test_matrix_plain_pthread);
    tcase_add_test(tc, test_matrix_dedicated_pool);
    tcase_add_test(tc, test_matrix_inside_application_region);
    tcase_add_test(tc, test_matrix_width1_pool);
    tcase_add_test(tc, test_matrix_persistent_team);
    tcase_add_test(tc, test_full_width_section_is_the_team);
    tcase_add_test(tc, test_region_team_mixed_commands);
    tcase_add_test(tc, test_icvs_restored);
    tcase_add_test(tc, test_isolate_shares_off);
    tcase_add_test(tc, test_task_enters_same_pool);
    tcase_add_test(tc, test_entries_complete_their_tasks);
    tcase_add_test(tc, test_share_icvs_stay_in_the_share);
    return s;
}

int main(void) { return th_run_suite(isolation_suite()); }
