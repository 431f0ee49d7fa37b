/*
 * test_affinity.c -- the library leaves affinity alone under likwid-pin
 * (issue 39, item 5): with LIKWID_PIN set, a crew's members keep the mask
 * the launcher gave them, both when a dedicated pool's crew starts and
 * when a cached crew is taken by a new pool.
 *
 * likwid-pin pins each new thread from a pthread_create wrapper it
 * preloads. This program does the same from a pthread_create of its own
 * (the executable's definition comes first for every caller, libgomp
 * included), switched on only around the calls under test: each thread
 * created meanwhile starts pinned to one CPU. Each case runs its control
 * first, without LIKWID_PIN: there the crew takes the process's CPUs, as
 * it must (OMP_PROC_BIND may have bound libgomp's threads), which shows
 * that the emulation pins and the case can fail.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "tt_test.h"

#include <dlfcn.h>

#if TT_PARALLEL_ENABLED
#ifndef _OPENMP
#error "test_affinity needs the OpenMP compiler flags in a parallel build"
#endif
#include <omp.h>
#endif

/* ------------------------------------------------------------------------ */
/* The launcher                                                              */
/* ------------------------------------------------------------------------ */

static _Atomic int launcher_on;
static _Atomic unsigned launcher_next;

typedef struct tramp {
    void *(*fn)(void *);
    void *arg;
    int cpu;
} tramp;

static void *tramp_main(void *p)
{
    tramp t = *(tramp *)p;
    free(p);
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(t.cpu, &one);
    (void)sched_setaffinity(0, sizeof one, &one);
    return t.fn(t.arg);
}

static int launcher_cpu(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    sched_getaffinity(0, sizeof set, &set);
    int n = CPU_COUNT(&set);
    unsigned k = atomic_fetch_add(&launcher_next, 1) % (unsigned)(n > 0 ? n : 1);
    for (int c = 0, seen = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set) && (unsigned)seen++ == k)
            return c;
    return 0;
}

int pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
    typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
    static create_fn real;
    if (!real)
        real = (create_fn)dlsym(RTLD_NEXT, "pthread_create");
    if (!atomic_load(&launcher_on))
        return real(th, attr, fn, arg);
    tramp *t = malloc(sizeof *t);
    if (!t)
        return EAGAIN;
    *t = (tramp){fn, arg, launcher_cpu()};
    int rc = real(th, attr, tramp_main, t);
    if (rc)
        free(t);
    return rc;
}

static int mask_count(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    sched_getaffinity(0, sizeof set, &set);
    return CPU_COUNT(&set);
}

static void set_likwid(bool on)
{
    if (on)
        setenv("LIKWID_PIN", "1", 1);
    else
        unsetenv("LIKWID_PIN");
}

/* ------------------------------------------------------------------------ */
/* A dedicated pool's members at their start                                 */
/* ------------------------------------------------------------------------ */

typedef struct starts {
    _Atomic int max_count, min_count, n;
} starts;

static void on_start(void *arg, unsigned k)
{
    (void)k;
    starts *s = arg;
    int c = mask_count();
    atomic_fetch_add(&s->n, 1);
    int m = atomic_load(&s->max_count);
    while (c > m && !atomic_compare_exchange_weak(&s->max_count, &m, c))
        ;
    m = atomic_load(&s->min_count);
    while (c < m && !atomic_compare_exchange_weak(&s->min_count, &m, c))
        ;
}

static void noop_range(void *arg, size_t b, size_t e)
{
    (void)arg;
    (void)b;
    (void)e;
}

static void dedicated_start(bool likwid, starts *s)
{
    *s = (starts){.max_count = 0, .min_count = 1 << 20};
    set_likwid(likwid);
    tt_pool_attr *a;
    ck_assert_int_eq(tt_pool_attr_create(&a), TT_OK);
    tt_pool_attr_set_threads(a, 2);
    tt_pool_attr_set_thread_name(a, "tt-aff");
    tt_pool_attr_set_on_start(a, on_start, s);
    atomic_store(&launcher_on, 1);
    tt_pool *p = NULL;
    int rc = tt_pool_create(&p, a);
    /* A dedicated crew may start on the first entry: make one. */
    tt_exec ex;
    if (rc == TT_OK && tt_exec_init(&ex, p, 2) == TT_OK)
        ck_assert_int_eq(tt_for_ranges(&ex, 8, 1, noop_range, NULL), TT_OK);
    atomic_store(&launcher_on, 0);
    tt_pool_attr_destroy(a);
    ck_assert_int_eq(rc, TT_OK);
    ck_assert_int_eq(tt_pool_destroy(p), TT_OK);
    set_likwid(false);
}

START_TEST(dedicated_members_keep_launcher_mask)
{
    if (!TT_PARALLEL_ENABLED || mask_count() < 2)
        return;
    starts s;
    dedicated_start(false, &s);
    ck_assert_int_gt(atomic_load(&s.n), 0);
    ck_assert_msg(atomic_load(&s.min_count) == mask_count(),
                  "control: a member started with %d CPUs, the process has %d",
                  atomic_load(&s.min_count), mask_count());
    dedicated_start(true, &s);
    ck_assert_int_gt(atomic_load(&s.n), 0);
    ck_assert_msg(atomic_load(&s.max_count) == 1,
                  "under LIKWID_PIN a member's start set its mask to %d CPUs",
                  atomic_load(&s.max_count));
}
END_TEST

/* ------------------------------------------------------------------------ */
/* A cached crew taken by a new pool                                         */
/* ------------------------------------------------------------------------ */

typedef struct masks {
    _Atomic int count[2];
} masks;

static void pin_self(void *arg, unsigned i)
{
    (void)arg;
    cpu_set_t set, one;
    CPU_ZERO(&set);
    sched_getaffinity(0, sizeof set, &set);
    int cpu = th_first_cpu_of(&set, -1);
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    /* What likwid-pin does to a thread it pins. */
    TT_CHECK(sched_setaffinity(0, sizeof one, &one) == 0, "pin member %u", i);
}

static void read_mask(void *arg, unsigned i)
{
    masks *m = arg;
    if (i < 2)
        atomic_store(&m->count[i], mask_count());
}

/* A broadcast from inside the application's own region: on the private
 * crew. */
static int app_broadcast(tt_pool *p, tt_bcast_fn fn, void *arg)
{
    int rc = -1;
#if TT_PARALLEL_ENABLED
#pragma omp parallel num_threads(2)
    {
#pragma omp master
        {
            tt_exec ex;
            rc = tt_exec_init(&ex, p, 2);
            if (rc == TT_OK)
                rc = tt_broadcast(&ex, fn, arg);
        }
    }
#else
    (void)p;
    (void)fn;
    (void)arg;
#endif
    return rc;
}

static void cached_crew(bool likwid, masks *m)
{
    *m = (masks){{0, 0}};
    tt_pool *p = th_make_pool(2);
    ck_assert_int_eq(app_broadcast(p, pin_self, NULL), TT_OK);
    th_free_pool(p);
    /* The crew is cached; a new pool of its width takes it. */
    set_likwid(likwid);
    p = th_make_pool(2);
    ck_assert_int_eq(app_broadcast(p, read_mask, m), TT_OK);
    th_free_pool(p);
    set_likwid(false);
    th_assert_no_failures();
}

START_TEST(cached_crew_keeps_launcher_mask)
{
    if (!TT_PARALLEL_ENABLED || mask_count() < 2)
        return;
    masks m;
    cached_crew(false, &m);
    for (int i = 0; i < 2; i++)
        ck_assert_msg(atomic_load(&m.count[i]) == mask_count(),
                      "control: a cached crew's member %d kept %d CPUs", i,
                      atomic_load(&m.count[i]));
    cached_crew(true, &m);
    for (int i = 0; i < 2; i++)
        ck_assert_msg(atomic_load(&m.count[i]) == 1,
                      "under LIKWID_PIN a cached crew's member %d was set to %d CPUs", i,
                      atomic_load(&m.count[i]));
}
END_TEST

static Suite *affinity_suite(void)
{
    Suite *s = suite_create("affinity");
    TCase *tc = th_tcase(s, "likwid", 60);
    tcase_add_test(tc, dedicated_members_keep_launcher_mask);
    tcase_add_test(tc, cached_crew_keeps_launcher_mask);
    return s;
}

int main(void) { return th_run_suite(affinity_suite()); }
