/*
 * serial_app.c -- an OpenMP application linked against libthreadteam,
 * built by test_serial_app.sh with the compiler's OpenMP flag against the
 * library of the build under test (also the --disable-parallel one, which
 * has no OpenMP of its own). A share is one thread to OpenMP in either
 * build: an `omp parallel` in a fork job or a range forms one thread, an
 * orphaned `omp for` in a job run from inside the application's own region
 * runs every iteration on the job's thread, and the application's
 * settings are back after each entry. Exit 0 when all hold, 1 otherwise.
 */
#include <omp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "threadteam.h"

static _Atomic int failures;
static _Atomic int max_team;

#define CHECK(c, ...)                                                          \
    do {                                                                       \
        if (!(c)) {                                                            \
            fprintf(stderr, "serial_app: " __VA_ARGS__);                       \
            fputc('\n', stderr);                                               \
            atomic_fetch_add(&failures, 1);                                    \
        }                                                                      \
    } while (0)

static void note_team(int n)
{
    int m = atomic_load(&max_team);
    while (n > m && !atomic_compare_exchange_weak(&max_team, &m, n))
        ;
}

/* A share that opens a region, and runs an orphaned loop. */
static void share_body(void)
{
#pragma omp parallel
    note_team(omp_get_num_threads());
    _Atomic int hits = 0;
#pragma omp for
    for (int i = 0; i < 100; i++)
        atomic_fetch_add(&hits, 1);
    CHECK(atomic_load(&hits) == 100, "an orphaned omp for in a share ran %d of 100 iterations",
          atomic_load(&hits));
}

static void job(void *arg, unsigned i, tt_exec *child)
{
    (void)arg;
    (void)i;
    (void)child;
    share_body();
}

static void range(void *arg, size_t b, size_t e)
{
    (void)arg;
    (void)b;
    (void)e;
    share_body();
}

/* A tt_external callee gets exactly its width. */
static void callee(void *arg, unsigned width)
{
    (void)arg;
    _Atomic int n = 0;
#pragma omp parallel
    atomic_fetch_add(&n, 1);
    CHECK(atomic_load(&n) == (int)width, "a width-%u callee's region had %d threads", width,
          atomic_load(&n));
}

static void entries(tt_pool *pool, unsigned budget)
{
    int before = omp_get_max_threads();
    int mal = omp_get_max_active_levels();
    tt_exec ex;
    CHECK(tt_exec_init(&ex, pool, budget) == TT_OK, "init");
    CHECK(tt_fork(&ex, 3, job, NULL) == TT_OK, "fork");
    CHECK(tt_exec_init(&ex, pool, budget) == TT_OK, "init");
    CHECK(tt_for_ranges(&ex, 4, 1, range, NULL) == TT_OK, "ranges");
    CHECK(tt_exec_init(&ex, pool, budget) == TT_OK, "init");
    CHECK(tt_external(&ex, callee, NULL) == TT_OK, "external");
    CHECK(omp_get_max_threads() == before, "nthreads-var %d after the entries, %d before",
          omp_get_max_threads(), before);
    CHECK(omp_get_max_active_levels() == mal, "max-active-levels %d after, %d before",
          omp_get_max_active_levels(), mal);
}

int main(void)
{
    omp_set_num_threads(2);
    tt_pool *pool = NULL;
    if (tt_pool_create(&pool, NULL) != TT_OK) {
        fprintf(stderr, "serial_app: no pool\n");
        return 1;
    }
    unsigned w = tt_pool_width(pool);
    /* From the main thread, then from inside the application's region. */
    entries(pool, w);
    entries(pool, 1);
#pragma omp parallel num_threads(2)
    {
        int before = omp_get_num_threads();
        tt_exec ex;
        CHECK(tt_exec_init(&ex, pool, 1) == TT_OK, "init");
        CHECK(tt_fork(&ex, 2, job, NULL) == TT_OK, "fork in the application's region");
        CHECK(omp_get_num_threads() == before, "team %d after, %d before", omp_get_num_threads(),
              before);
    }
    CHECK(atomic_load(&max_team) == 1, "an omp parallel in a share formed %d threads",
          atomic_load(&max_team));
    CHECK(tt_pool_destroy(pool) == TT_OK, "destroy");
    printf("serial_app: width %u, widest team in a share %d: %s\n", w, atomic_load(&max_team),
           atomic_load(&failures) ? "FAILED" : "ok");
    return atomic_load(&failures) ? 1 : 0;
}
