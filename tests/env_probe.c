/*
 * env_probe.c -- the core contracts under the OpenMP environment a job
 * script set. tests/env_matrix.sh runs this program once per setting
 * (OMP_NUM_THREADS, OMP_PLACES, OMP_PROC_BIND, OMP_NESTED,
 * OMP_MAX_ACTIVE_LEVELS, OMP_THREAD_LIMIT, OMP_DYNAMIC, OMP_WAIT_POLICY,
 * GOMP_SPINCOUNT) and prints one line each.
 *
 * What it checks, with counters in user code (not the library's ledger):
 *  - a default pool's width is the application's (omp_get_max_threads, 1
 *    when OMP_MAX_ACTIVE_LEVELS=0);
 *  - under one root, at every depth (forks of forks, ranges), user code
 *    never runs on more threads at once than the budget, and an
 *    `omp parallel` in a share gets exactly one thread whatever the nesting
 *    settings say;
 *  - tt_external hands the callee a region of exactly `width` threads, at
 *    the root's full width and in a fork child's share;
 *  - promised concurrency: a broadcast's calls all pass a barrier together;
 *  - placement: participant k of a root sits on the CPUs where the
 *    application's own thread k sits; a private crew spans the process's
 *    CPUs (the union of OpenMP's places, not the one place libgomp bound
 *    the initial thread to);
 *  - with --exact-threads: after the application's regions, pool roots
 *    and tt_external calls the process has exactly omp_get_max_threads()
 *    threads, and each of them ran both the application's and the pool's
 *    work.
 * Exit status 0 when every check held, 1 otherwise.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <threadteam.h>

#include <dlfcn.h>
#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int failures;
#define CHECK(c, ...)                                                          \
    do {                                                                       \
        if (!(c)) {                                                            \
            failures++;                                                        \
            fprintf(stderr, "env_probe: check failed (%s:%d): ", __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                      \
            fputc('\n', stderr);                                               \
        }                                                                      \
    } while (0)

static void spin_us(unsigned us)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do
        clock_gettime(CLOCK_MONOTONIC, &t);
    while ((t.tv_sec - t0.tv_sec) * 1000000L + (t.tv_nsec - t0.tv_nsec) / 1000 < (long)us);
}

/* Threads running user code at once under the current root, and the peak. */
static _Atomic int running, peak, nested_max;

static void user_enter(void)
{
    int n = atomic_fetch_add(&running, 1) + 1;
    int p = atomic_load(&peak);
    while (n > p && !atomic_compare_exchange_weak(&peak, &p, n))
        ;
}
static void user_leave(void) { atomic_fetch_sub(&running, 1); }

static void note_max(_Atomic int *m, int v)
{
    int p = atomic_load(m);
    while (v > p && !atomic_compare_exchange_weak(m, &p, v))
        ;
}

/* A leaf: user code that also opens its own omp parallel, which must get
 * one thread. */
static void leaf_body(void *arg, size_t b, size_t e)
{
    (void)arg;
    (void)b;
    (void)e;
    user_enter();
#pragma omp parallel
    {
#pragma omp single
        note_max(&nested_max, omp_get_num_threads());
    }
    spin_us(20);
    user_leave();
}

static void fork_job(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    int depth = (int)(intptr_t)arg;
    if (depth < 2) {
        int rc = tt_fork(child, 3, fork_job, (void *)(intptr_t)(depth + 1));
        CHECK(rc == TT_OK, "nested fork: %s", tt_strerror(rc));
    } else if (i % 2 == 0) {
        int rc = tt_for_ranges(child, 64, 1, leaf_body, NULL);
        CHECK(rc == TT_OK, "ranges in a share: %s", tt_strerror(rc));
    } else {
        /* Chunks handed out: several shares in turn on one task. */
        int rc = tt_for_ranges_dynamic(child, 64, 8, leaf_body, NULL);
        CHECK(rc == TT_OK, "dynamic ranges in a share: %s", tt_strerror(rc));
    }
}

/* tt_external's callee: its region must have exactly `width` threads. */
static _Atomic int ext_bad;
static void ext_callee(void *arg, unsigned width)
{
    (void)arg;
    _Atomic int n = 0;
#pragma omp parallel
    {
        atomic_fetch_add(&n, 1);
        /* A nested region of the callee's: one thread each, whatever the
         * application's nesting settings (OMP_NESTED, OMP_MAX_ACTIVE_LEVELS,
         * a list in OMP_NUM_THREADS), so no more than `width` run. */
#pragma omp parallel
        {
            user_enter();
            spin_us(300);
            user_leave();
        }
    }
    if (atomic_load(&n) != (int)width) {
        fprintf(stderr, "env_probe: tt_external(width %u): its region had %d threads\n", width,
                atomic_load(&n));
        atomic_fetch_add(&ext_bad, 1);
    }
}

static void ext_job(void *arg, unsigned i, tt_exec *child)
{
    (void)arg;
    (void)i;
    int rc = tt_external(child, ext_callee, NULL);
    CHECK(rc == TT_OK, "tt_external in a share: %s", tt_strerror(rc));
}

/* Broadcast: the calls meet at a barrier (all must run at once). */
typedef struct bar {
    _Atomic int arrived;
    int n;
} bar;

static bool bar_wait(bar *b, double timeout_s)
{
    atomic_fetch_add(&b->arrived, 1);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (atomic_load(&b->arrived) < b->n) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) * 1e-9 > timeout_s)
            return false;
        sched_yield();
    }
    return true;
}

#define MAXW 256
typedef struct where {
    bar b;
    _Atomic int bad;
    cpu_set_t cpus[MAXW];
    pid_t tid[MAXW];
} where;

static void bcast_where(void *arg, unsigned i)
{
    where *w = arg;
    if (i < MAXW) {
        sched_getaffinity(0, sizeof w->cpus[i], &w->cpus[i]);
        w->tid[i] = (pid_t)syscall(SYS_gettid);
    }
    if (!bar_wait(&w->b, 20))
        atomic_fetch_add(&w->bad, 1);
}

static int count_threads(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    int n = -1;
    char line[128];
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "Threads: %d", &n) == 1)
            break;
    if (f)
        fclose(f);
    return n;
}

static bool process_cpus(cpu_set_t *set)
{
    int np = omp_get_num_places();
    if (np > 0) {
        CPU_ZERO(set);
        for (int p = 0; p < np; p++) {
            int n = omp_get_place_num_procs(p);
            int ids[n > 0 ? n : 1];
            omp_get_place_proc_ids(p, ids);
            for (int i = 0; i < n; i++)
                CPU_SET(ids[i], set);
        }
        return true;
    }
    return sched_getaffinity(0, sizeof *set, set) == 0;
}

int main(int argc, char **argv)
{
    bool exact_threads = argc > 1 && strcmp(argv[1], "--exact-threads") == 0;
    cpu_set_t proc;
    process_cpus(&proc);
    int app_width = omp_get_max_active_levels() == 0 ? 1 : omp_get_max_threads();

    /* The application's own region first, as an OpenMP code would. */
    where app;
    memset(&app, 0, sizeof app);
    int app_n = 0;
#pragma omp parallel
    {
        int k = omp_get_thread_num();
#pragma omp single
        app_n = omp_get_num_threads();
        if (k < MAXW) {
            sched_getaffinity(0, sizeof app.cpus[k], &app.cpus[k]);
            app.tid[k] = (pid_t)syscall(SYS_gettid);
        }
    }

    tt_pool *pool = NULL;
    int rc = tt_pool_create(&pool, NULL);
    CHECK(rc == TT_OK, "default pool: %s", tt_strerror(rc));
    if (rc)
        return 1;
    unsigned W = tt_pool_width(pool);
    CHECK((int)W == app_width, "default width %u, the application's is %d", W, app_width);

    /* Slots at every depth, nested regions in shares confined. */
    for (int round = 0; round < 3; round++) {
        atomic_store(&peak, 0);
        tt_exec ex;
        rc = tt_exec_init(&ex, pool, W);
        CHECK(rc == TT_OK, "tt_exec_init: %s", tt_strerror(rc));
        rc = tt_fork(&ex, 3, fork_job, (void *)0);
        CHECK(rc == TT_OK, "root fork: %s", tt_strerror(rc));
        CHECK(atomic_load(&peak) <= (int)W, "fork tree ran %d threads of user code, budget %u",
              atomic_load(&peak), W);
    }
    CHECK(atomic_load(&nested_max) == 1, "an omp parallel in a share formed %d threads",
          atomic_load(&nested_max));

    /* tt_external at full width, and in fork children's shares. */
    atomic_store(&peak, 0);
    for (int i = 0; i < 5; i++) {
        tt_exec ex;
        rc = tt_exec_init(&ex, pool, W);
        CHECK(rc == TT_OK, "tt_exec_init: %s", tt_strerror(rc));
        rc = tt_external(&ex, ext_callee, NULL);
        CHECK(rc == TT_OK, "tt_external: %s", tt_strerror(rc));
    }
    CHECK(atomic_load(&peak) <= (int)W, "tt_external ran %d threads, budget %u",
          atomic_load(&peak), W);
    if (W >= 2) {
        atomic_store(&peak, 0);
        tt_exec ex;
        rc = tt_exec_init(&ex, pool, W);
        CHECK(rc == TT_OK, "tt_exec_init: %s", tt_strerror(rc));
        rc = tt_fork(&ex, 2, ext_job, NULL);
        CHECK(rc == TT_OK, "fork of externals: %s", tt_strerror(rc));
        CHECK(atomic_load(&peak) <= (int)W, "externals in shares ran %d threads, budget %u",
              atomic_load(&peak), W);
    }
    CHECK(atomic_load(&ext_bad) == 0, "tt_external's region had the wrong width");

    /* Concurrency and placement: participant k where app thread k is. */
    where *pw = calloc(1, sizeof *pw);
    pw->b.n = (int)W;
    tt_exec ex;
    rc = tt_exec_init(&ex, pool, W);
    CHECK(rc == TT_OK, "tt_exec_init: %s", tt_strerror(rc));
    rc = tt_broadcast(&ex, bcast_where, pw);
    CHECK(rc == TT_OK, "broadcast: %s", tt_strerror(rc));
    CHECK(atomic_load(&pw->bad) == 0, "a broadcast's calls did not all run at once");
    if (app_n == (int)W)
        for (unsigned k = 0; k < W && k < MAXW; k++)
            CHECK(CPU_EQUAL(&pw->cpus[k], &app.cpus[k]),
                  "participant %u sits on %d CPUs, the application's thread %u on %d", k,
                  CPU_COUNT(&pw->cpus[k]), k, CPU_COUNT(&app.cpus[k]));

    /* Thread count: one set of threads. */
    if (exact_threads) {
        /* ThreadSanitizer's runtime keeps one background thread of its own. */
#if defined(__SANITIZE_THREAD__)
        int extra = 1;
#else
        int extra = 0;
#endif
        /* Threads of the nested regions that tt_external opened in fork
         * shares end asynchronously after their region (libgomp never keeps
         * nested teams): let them leave /proc first, for at most 2 s. */
        int n = count_threads() - extra;
        for (int i = 0; i < 400 && n != app_width; i++) {
            struct timespec ts = {0, 5000000};
            nanosleep(&ts, NULL);
            n = count_threads() - extra;
        }
        /* LLVM's libomp keeps the workers of nested regions (the callee's
         * of an external in a fork share) in its process-wide pool for
         * reuse, where libgomp ends them: there the count is bounded by the
         * peak (never the product of the widths), not equal to the width. */
        if (dlsym(RTLD_DEFAULT, "__kmpc_fork_call") != NULL)
            CHECK(n >= app_width && n < 2 * app_width,
                  "the process has %d threads, omp_get_max_threads() is %d (libomp)", n,
                  app_width);
        else
            CHECK(n == app_width, "the process has %d threads, omp_get_max_threads() is %d", n,
                  app_width);
        if (app_n == (int)W)
            for (unsigned k = 0; k < W && k < MAXW; k++) {
                bool found = false;
                for (unsigned j = 0; j < W; j++)
                    found = found || pw->tid[k] == app.tid[j];
                CHECK(found, "participant %u (tid %d) is not one of the application's threads",
                      k, (int)pw->tid[k]);
            }
    }
    free(pw);
    tt_pool_destroy(pool);

    /* A private crew (a dedicated pool) spans the process's CPUs. */
    if (W >= 2) {
        tt_pool_attr *a = NULL;
        tt_pool_attr_create(&a);
        tt_pool_attr_set_threads(a, W);
        tt_pool_attr_set_thread_name(a, "ttprobe");
        tt_pool *d = NULL;
        rc = tt_pool_create(&d, a);
        tt_pool_attr_destroy(a);
        CHECK(rc == TT_OK, "dedicated pool: %s", tt_strerror(rc));
        if (rc == TT_OK) {
            where *dw = calloc(1, sizeof *dw);
            dw->b.n = (int)W;
            rc = tt_exec_init(&ex, d, W);
            CHECK(rc == TT_OK, "tt_exec_init: %s", tt_strerror(rc));
            atomic_store(&peak, 0);
            rc = tt_broadcast(&ex, bcast_where, dw);
            CHECK(rc == TT_OK && atomic_load(&dw->bad) == 0, "dedicated broadcast: %s",
                  tt_strerror(rc));
            for (unsigned k = 0; k < W && k < MAXW; k++)
                CHECK(CPU_EQUAL(&dw->cpus[k], &proc),
                      "private member %u sits on %d CPUs, the process has %d", k,
                      CPU_COUNT(&dw->cpus[k]), CPU_COUNT(&proc));
            rc = tt_exec_init(&ex, d, W);
            CHECK(rc == TT_OK, "tt_exec_init: %s", tt_strerror(rc));
            rc = tt_fork(&ex, 3, fork_job, (void *)0);
            CHECK(rc == TT_OK && atomic_load(&peak) <= (int)W,
                  "dedicated fork tree: %s, peak %d", tt_strerror(rc), atomic_load(&peak));
            free(dw);
            tt_pool_destroy(d);
        }
    }
    printf("env_probe: width %u, app threads %d, nested max %d: %s\n", W, app_n,
           atomic_load(&nested_max), failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
