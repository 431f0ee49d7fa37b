/*
 * libomp_app.c -- an application compiled with clang -fopenmp (LLVM libomp)
 * and linked against the GCC-built libthreadteam.so: every GOMP_* and omp_*
 * call of the library lands in libomp's GOMP compatibility layer
 * (tests/test_libomp_app.sh). The contracts, counted in this program's own
 * code:
 *  - slot conservation: two application threads fork on one width-2 pool
 *    at once; never more than 2 jobs run at a time;
 *  - shares are one thread to OpenMP: in a job omp_get_num_threads() is 1
 *    and an orphaned `omp for` runs every iteration exactly once;
 *  - tt_external's exact width: the callee's region has the width it was
 *    given, and a callee's threads that enter the pool again do not wait
 *    for the slots their external holds;
 *  - one set of threads: the library's forks start no thread beyond those
 *    of the application's own region.
 * Prints "libomp_app: PASS" or "libomp_app: FAIL: ..." lines; exit 0 / 1.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "threadteam.h"

static int failures;
#define FAIL(...)                                                                                  \
    do {                                                                                           \
        printf("libomp_app: FAIL: " __VA_ARGS__);                                                  \
        printf("\n");                                                                              \
        failures++;                                                                                \
    } while (0)

static unsigned count_threads(void)
{
    unsigned n = 0;
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

static void spin_us(unsigned us)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do
        clock_gettime(CLOCK_MONOTONIC, &t);
    while ((t.tv_sec - t0.tv_sec) * 1000000L + (t.tv_nsec - t0.tv_nsec) / 1000 < (long)us);
}

/* ---- slot conservation ---- */
typedef struct live {
    _Atomic int now, max;
    _Atomic unsigned jobs;
    _Atomic unsigned long tids[8];
} live;

/* Counts the distinct threads that ran jobs (up to 8). */
static void note_thread(live *l)
{
    unsigned long me = (unsigned long)pthread_self();
    for (int i = 0; i < 8; i++) {
        unsigned long t = atomic_load(&l->tids[i]);
        if (t == me)
            return;
        if (t == 0 && atomic_compare_exchange_strong(&l->tids[i], &t, me))
            return;
        if (t == me)
            return;
    }
}

static unsigned threads_seen(live *l)
{
    unsigned n = 0;
    for (int i = 0; i < 8; i++)
        n += atomic_load(&l->tids[i]) != 0;
    return n;
}

static void live_job(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    (void)child;
    live *l = arg;
    note_thread(l);
    int n = atomic_fetch_add(&l->now, 1) + 1;
    int m = atomic_load(&l->max);
    while (n > m && !atomic_compare_exchange_weak(&l->max, &m, n))
        ;
    spin_us(200);
    atomic_fetch_sub(&l->now, 1);
    atomic_fetch_add(&l->jobs, 1);
}

static void check_conservation(tt_pool *p, unsigned w)
{
    live l = {0};
    _Atomic int bad = 0;
#pragma omp parallel num_threads(2) shared(l, bad)
    {
        for (int r = 0; r < 50; r++) {
            tt_exec ex;
            int rc = tt_exec_init(&ex, p, w);
            if (rc == TT_OK)
                rc = tt_fork(&ex, 4, live_job, &l);
            if (rc != TT_OK)
                atomic_fetch_add(&bad, 1);
        }
    }
    if (atomic_load(&bad))
        FAIL("conservation: %d forks failed", atomic_load(&bad));
    if (atomic_load(&l.jobs) != 2 * 50 * 4)
        FAIL("conservation: %u of %u jobs ran", atomic_load(&l.jobs), 2 * 50 * 4);
    if (atomic_load(&l.max) > (int)w)
        FAIL("conservation: %d jobs ran at once on a width-%u pool", atomic_load(&l.max), w);
    else
        printf("libomp_app: conservation: %u jobs from 2 application threads, at most %d at once "
               "(width %u), on %u threads\n",
               atomic_load(&l.jobs), atomic_load(&l.max), w, threads_seen(&l));
}

/* ---- one-thread shares ---- */
#define ITERS 1000
typedef struct share_seen {
    _Atomic unsigned hits[4][ITERS];
    _Atomic unsigned wide, jobs;
} share_seen;

static void orphaned_for(share_seen *s, unsigned job)
{
#pragma omp for
    for (int k = 0; k < ITERS; k++)
        atomic_fetch_add(&s->hits[job][k], 1);
}

static void share_job(void *arg, unsigned i, tt_exec *child)
{
    (void)child;
    share_seen *s = arg;
    if (omp_get_num_threads() != 1)
        atomic_fetch_add(&s->wide, 1);
    orphaned_for(s, i);
    /* A region the share opens gets one thread too. */
#pragma omp parallel
    {
        if (omp_get_num_threads() != 1)
            atomic_fetch_add(&s->wide, 1);
    }
    atomic_fetch_add(&s->jobs, 1);
}

static void check_one_thread_shares(tt_pool *p, unsigned w)
{
    share_seen *s = calloc(1, sizeof *s);
    tt_exec ex;
    int rc = tt_exec_init(&ex, p, w);
    if (rc == TT_OK)
        rc = tt_fork(&ex, 4, share_job, s);
    if (rc != TT_OK) {
        FAIL("shares: fork: %s", tt_status_name(rc));
        free(s);
        return;
    }
    unsigned wrong = 0;
    for (unsigned j = 0; j < 4; j++)
        for (int k = 0; k < ITERS; k++)
            wrong += atomic_load(&s->hits[j][k]) != 1;
    if (atomic_load(&s->jobs) != 4)
        FAIL("shares: %u of 4 jobs ran", atomic_load(&s->jobs));
    if (atomic_load(&s->wide))
        FAIL("shares: %u times a share saw more than one thread", atomic_load(&s->wide));
    if (wrong)
        FAIL("shares: %u iterations of the orphaned omp for ran other than once", wrong);
    if (!atomic_load(&s->wide) && !wrong)
        printf("libomp_app: shares: omp_get_num_threads() == 1 in 4 jobs, orphaned omp for ran "
               "%d iterations once each per job\n",
               ITERS);
    free(s);
}

/* ---- tt_external ---- */
typedef struct ext_seen {
    tt_pool *pool;
    unsigned width_given;
    _Atomic unsigned team, calls_ok, calls_bad;
} ext_seen;

static void cb_job(void *arg, unsigned i, tt_exec *child)
{
    (void)arg;
    (void)i;
    (void)child;
    spin_us(5);
}

static void callee(void *arg, unsigned width)
{
    ext_seen *e = arg;
    e->width_given = width;
#pragma omp parallel num_threads(width)
    {
        if (omp_get_thread_num() == 0)
            atomic_store(&e->team, (unsigned)omp_get_num_threads());
        /* A callee's thread enters the pool again: it must not wait for the
         * slots that its own external holds. */
        tt_exec r;
        int rc = tt_exec_init(&r, e->pool, 2);
        if (rc == TT_OK)
            rc = tt_fork(&r, 2, cb_job, NULL);
        atomic_fetch_add(rc == TT_OK ? &e->calls_ok : &e->calls_bad, 1);
    }
}

static void check_external(tt_pool *p, unsigned w)
{
    for (unsigned budget = 1; budget <= w; budget++) {
        ext_seen e = {.pool = p};
        tt_exec ex;
        int rc = tt_exec_init(&ex, p, budget);
        if (rc == TT_OK)
            rc = tt_external(&ex, callee, &e);
        if (rc != TT_OK) {
            FAIL("external: %s", tt_status_name(rc));
            continue;
        }
        if (e.width_given != budget || atomic_load(&e.team) != budget)
            FAIL("external: budget %u, width given %u, the callee's region had %u threads",
                 budget, e.width_given, atomic_load(&e.team));
        else if (atomic_load(&e.calls_bad) || atomic_load(&e.calls_ok) != budget)
            FAIL("external: %u of the callee's calls back failed", atomic_load(&e.calls_bad));
        else
            printf("libomp_app: external: budget %u, the callee's region had exactly %u "
                   "threads, its threads' forks on the pool ran\n",
                   budget, budget);
    }
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    alarm(120);
    omp_set_dynamic(0);
    omp_set_max_active_levels(4);
    unsigned w = 2;
    unsigned got = 0;
#pragma omp parallel num_threads(2)
    {
        if (omp_get_thread_num() == 0)
            got = (unsigned)omp_get_num_threads();
    }
    if (got != 2) {
        printf("libomp_app: SKIP: the application's region got %u threads, not 2\n", got);
        return 77;
    }
    unsigned before = count_threads();
    tt_pool_attr *a = NULL;
    tt_pool *p = NULL;
    int rc = tt_pool_attr_create(&a);
    if (rc == TT_OK)
        rc = tt_pool_attr_set_threads(a, w);
    if (rc == TT_OK)
        rc = tt_pool_create(&p, a);
    tt_pool_attr_destroy(a);
    if (rc != TT_OK) {
        printf("libomp_app: FAIL: tt_pool_create: %s\n", tt_status_name(rc));
        return 1;
    }
    /* Before anything else: the library's first roots take the
     * application's threads. */
    tt_exec ex;
    rc = tt_exec_init(&ex, p, w);
    if (rc == TT_OK)
        rc = tt_fork(&ex, 2, cb_job, NULL);
    if (rc != TT_OK)
        FAIL("first fork: %s", tt_status_name(rc));
    unsigned after = count_threads();
    if (after != before)
        FAIL("%u threads before the library's first fork, %u after (a second set of threads)",
             before, after);
    else
        printf("libomp_app: one set of threads: %u before and after the library's first fork\n",
               after);
    check_one_thread_shares(p, w);
    check_conservation(p, w);
    check_external(p, w);
    tt_pool_destroy(p);
    if (failures) {
        printf("libomp_app: %d failures\n", failures);
        return 1;
    }
    printf("libomp_app: PASS\n");
    return 0;
}
