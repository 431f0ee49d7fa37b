/*
 * test_scope_kept.c -- root team scopes one after another on a region crew,
 * whose control block the crew keeps between them (lib/scope.h,
 * tt__ctl_keep). What the kept block must never carry from one scope into
 * the next: a command (members start after the generation the region's line
 * carries), a failure code, a barrier's state, the leader's thread. So the
 * tests run long random sequences of scopes (none, one or several sections
 * of random widths, barriers, splits, failures), from one thread and from
 * several threads that take turns on one pool's crews, and SPMD sections
 * with orphaned `omp for` as an `omp parallel` body would have, and check
 * each section's work and each scope's code every time. And which root
 * scopes take the quick frame (entry.h, tt__entry_quick_begin; the test
 * hook tt__test_last_scope_quick says which), each still keeping the
 * general path's contracts.
 */
#include "tt_test.h"
#include "test_hooks.h"

#if TT_PARALLEL_ENABLED
#include <omp.h>
#endif

#define MAXW 4
#define FAIL_BASE 7000

/* What one scope does, drawn before it starts. */
typedef struct plan {
    unsigned nsec;       /* sections, 0..3                                  */
    unsigned width[3];   /* each section's width                            */
    bool barrier[3];     /* the section passes two barriers                 */
    bool split;          /* a split of two parts after the sections         */
    int fail;            /* 0, or the code the callback fails the scope with */
} plan;

typedef struct run {
    const plan *pl;
    unsigned size;                  /* the scope's size                     */
    _Atomic unsigned hits[3][MAXW]; /* section s, rank r                    */
    _Atomic unsigned bad;
    _Atomic unsigned parts;
    th_live *live;                  /* participants inside a section now    */
    unsigned cur;                   /* the section being run (leader writes) */
} run;

typedef struct sec_arg {
    run *r;
    unsigned s;
} sec_arg;

static void section(void *arg, tt_section *sec)
{
    sec_arg *a = arg;
    run *r = a->r;
    unsigned rank = tt_section_rank(sec), size = tt_section_size(sec);
    if (size != r->pl->width[a->s] || rank >= size)
        atomic_fetch_add(&r->bad, 1);
    if (r->live)
        th_live_enter(r->live);
    atomic_fetch_add(&r->hits[a->s][rank < MAXW ? rank : 0], 1);
    if (r->pl->barrier[a->s]) {
        /* Every participant has counted itself before anyone passes. */
        if (tt_section_barrier(sec) != TT_OK)
            atomic_fetch_add(&r->bad, 1);
        unsigned seen = 0;
        for (unsigned k = 0; k < size; k++)
            seen += atomic_load(&r->hits[a->s][k]);
        if (seen != size)
            atomic_fetch_add(&r->bad, 1);
        if (tt_section_barrier(sec) != TT_OK)
            atomic_fetch_add(&r->bad, 1);
    }
    if (r->live)
        th_live_leave(r->live);
}

static void part(void *arg, unsigned p, tt_scope *sub)
{
    (void)p;
    (void)sub;
    run *r = arg;
    atomic_fetch_add(&r->parts, 1);
}

static void scope_fn(void *arg, tt_scope *scope)
{
    run *r = arg;
    if (tt_scope_size(scope) != r->size)
        atomic_fetch_add(&r->bad, 1);
    for (unsigned s = 0; s < r->pl->nsec; s++) {
        sec_arg a = {r, s};
        if (tt_scope_run_with(scope, r->pl->width[s], section, &a) != TT_OK)
            atomic_fetch_add(&r->bad, 1);
    }
    if (r->pl->split && tt_scope_split(scope, 2, part, r) != TT_OK)
        atomic_fetch_add(&r->bad, 1);
    if (r->pl->fail)
        (void)tt_scope_fail(scope, r->pl->fail);
}

static plan draw(uint64_t *rng, unsigned size)
{
    plan p = {.nsec = th_rng_below(rng, 4)};
    for (unsigned s = 0; s < p.nsec; s++) {
        /* Mostly the scope's full width (the region's team), sometimes
         * narrower (one thread to OpenMP per participant). */
        p.width[s] = th_rng_below(rng, 3) ? size : 1 + th_rng_below(rng, size);
        p.barrier[s] = th_rng_below(rng, 3) == 0;
    }
    p.split = th_rng_below(rng, 6) == 0;
    p.fail = th_rng_below(rng, 8) == 0 ? FAIL_BASE + (int)th_rng_below(rng, 3) : 0;
    return p;
}

/* One scope of budget `budget` on pool p following plan pl; a failure is
 * recorded with TT_CHECK (any thread). */
static void one_scope(tt_pool *p, unsigned budget, const plan *pl, th_live *live)
{
    run r = {.pl = pl, .size = budget, .live = live};
    tt_exec ex;
    int rc = tt_exec_init(&ex, p, budget);
    TT_CHECK(rc == TT_OK, "tt_exec_init: %s", tt_status_name(rc));
    if (rc)
        return;
    rc = tt_team_scope(&ex, scope_fn, &r);
    TT_CHECK(rc == pl->fail, "tt_team_scope returned %d, want %d", rc, pl->fail);
    TT_CHECK(atomic_load(&r.bad) == 0, "%u bad observations", atomic_load(&r.bad));
    for (unsigned s = 0; s < pl->nsec; s++)
        for (unsigned k = 0; k < MAXW; k++) {
            unsigned want = k < pl->width[s] ? 1 : 0;
            TT_CHECK(atomic_load(&r.hits[s][k]) == want, "section %u rank %u ran %u times, want %u",
                     s, k, atomic_load(&r.hits[s][k]), want);
        }
    TT_CHECK(atomic_load(&r.parts) == (pl->split ? 2u : 0u), "split parts %u",
             atomic_load(&r.parts));
}

/* The scope's end takes one of two forms (scope_entries.c,
 * scope_participate): a leave command, where the region's end barrier is
 * the last join (the caller-first order, and every scope under a spin
 * budget of 0), or an end command whose join the leader waits for. The
 * thread-count hook picks the order: 1 thread, the caller-first order
 * (libgomp's last arriver always wakes); 1000, a throttled process's. */
static void random_sequences(uint64_t spin, uint32_t threads)
{
    uint32_t prev = tt__test_threads_hook(threads);
    for (unsigned w = 2; w <= MAXW; w++) {
        tt_pool *p = th_make_pool_spin(w, spin, 0);
        unsigned width = tt_pool_width(p);
        uint64_t rng = th_seed_child(0x5c09e + spin + threads, w);
        unsigned n = th_iters(spin ? 2000 : 400);
        for (unsigned i = 0; i < n && th_failures() == 0; i++) {
            /* Mostly the pool's width (the region's whole team); some
             * narrower budgets (the same crew, other block sizes, after
             * wider sections than they have participants). */
            unsigned budget = th_rng_below(&rng, 4) ? width : 1 + th_rng_below(&rng, width);
            plan pl = draw(&rng, budget);
            one_scope(p, budget, &pl, NULL);
        }
        th_free_pool(p);
        th_assert_no_failures();
    }
    tt__test_threads_hook(prev);
}

START_TEST(kept_random_sequences_leave)
{
    random_sequences(th_test_spin_polls(), 1);
}
END_TEST

START_TEST(kept_random_sequences_end_join)
{
    random_sequences(th_test_spin_polls(), 1000);
}
END_TEST

START_TEST(kept_random_sequences_passive)
{
    random_sequences(0, 0);
}
END_TEST

/* Several threads take turns on one pool: the crews (and their kept
 * blocks) pass from one leader to another, and at most `width`
 * participants are ever inside a section at once. */
typedef struct turn_arg {
    tt_pool *p;
    unsigned idx;
    th_live *live;
} turn_arg;

static void *turns(void *arg)
{
    turn_arg *t = arg;
    unsigned width = tt_pool_width(t->p);
    uint64_t rng = th_seed_child(0x7e115, t->idx);
    unsigned n = th_iters(800);
    for (unsigned i = 0; i < n && th_failures() == 0; i++) {
        unsigned budget = th_rng_below(&rng, 3) ? width : 1 + th_rng_below(&rng, width);
        plan pl = draw(&rng, budget);
        one_scope(t->p, budget, &pl, t->live);
    }
    return NULL;
}

START_TEST(kept_across_threads)
{
    tt_pool *p = th_make_pool(2);
    th_live live;
    th_live_init(&live);
    enum { NT = 3 };
    pthread_t th[NT];
    turn_arg args[NT];
    for (unsigned i = 0; i < NT; i++) {
        args[i] = (turn_arg){p, i, &live};
        ck_assert_int_eq(pthread_create(&th[i], NULL, turns, &args[i]), 0);
    }
    for (unsigned i = 0; i < NT; i++)
        pthread_join(th[i], NULL);
    th_assert_no_failures();
    ck_assert_int_le(th_live_max(&live), (int)tt_pool_width(p));
    th_free_pool(p);
}
END_TEST

#if TT_PARALLEL_ENABLED
/* SPMD sections, scope after scope: an orphaned `omp for` shared among a
 * full-width section's participants, each iteration exactly once, and
 * omp_get_thread_num() the section rank. */
#define SPMD_N 1000
typedef struct spmd {
    int a[SPMD_N];
    _Atomic unsigned bad;
} spmd;

static void spmd_section(void *arg, tt_section *sec)
{
    spmd *d = arg;
    if ((unsigned)omp_get_thread_num() != tt_section_rank(sec) ||
        (unsigned)omp_get_num_threads() != tt_section_size(sec))
        atomic_fetch_add(&d->bad, 1);
#pragma omp for schedule(static)
    for (int i = 0; i < SPMD_N; i++)
        d->a[i]++;
}

static void spmd_scope(void *arg, tt_scope *scope)
{
    if (tt_scope_run(scope, spmd_section, arg) != TT_OK)
        atomic_fetch_add(&((spmd *)arg)->bad, 1);
}

START_TEST(kept_spmd_sections)
{
    tt_pool *p = th_make_pool(3);
    unsigned width = tt_pool_width(p);
    spmd *d = calloc(1, sizeof *d);
    ck_assert_ptr_nonnull(d);
    unsigned n = th_iters(1000);
    for (unsigned i = 0; i < n; i++) {
        tt_exec ex;
        ck_assert_int_eq(tt_exec_init(&ex, p, width), TT_OK);
        TT_REQUIRE(tt_team_scope(&ex, spmd_scope, d) == TT_OK, "scope %u failed", i);
    }
    ck_assert_uint_eq(atomic_load(&d->bad), 0);
    for (int i = 0; i < SPMD_N; i++)
        TT_REQUIRE(d->a[i] == (int)n, "element %d incremented %d times, want %u", i, d->a[i], n);
    free(d);
    th_free_pool(p);
}
END_TEST
#endif

/* Which scopes take the quick frame: a plain root token at the pool's
 * width from a plain thread. A narrower budget, a reborrowed token and a
 * scope from inside another pool's region take the general path; every
 * one runs its sections on every rank once. */
typedef struct nested {
    tt_pool *inner;
    int inner_rc, inner_quick;
} nested;

static void nested_scope(void *arg, tt_scope *scope)
{
    nested *n = arg;
    (void)scope;
    plan pl = {.nsec = 1, .width = {tt_pool_width(n->inner)}};
    run r = {.pl = &pl, .size = tt_pool_width(n->inner)};
    tt_exec ex;
    n->inner_rc = tt_exec_init(&ex, n->inner, r.size);
    if (n->inner_rc == TT_OK)
        n->inner_rc = tt_team_scope(&ex, scope_fn, &r);
    n->inner_quick = tt__test_last_scope_quick();
    for (unsigned k = 0; k < r.size; k++)
        if (atomic_load(&r.hits[0][k]) != 1)
            n->inner_rc = -1;
}

START_TEST(quick_scope_shapes)
{
    tt_pool *p = th_make_pool(3);
    unsigned w = tt_pool_width(p);
    plan full = {.nsec = 2, .width = {w, w}, .barrier = {true, false}};
    one_scope(p, w, &full, NULL);
    th_assert_no_failures();
    ck_assert_int_eq(tt__test_last_scope_quick(), w > 1 ? 1 : 0);

    plan narrow = {.nsec = 1, .width = {2}};
    if (w > 2) {
        one_scope(p, 2, &narrow, NULL);
        th_assert_no_failures();
        ck_assert_int_eq(tt__test_last_scope_quick(), 0);
    }

    /* A reborrowed child at the full width: the general path. */
    tt_exec ex, child;
    run r = {.pl = &full, .size = w};
    ck_assert_int_eq(tt_exec_init(&ex, p, w), TT_OK);
    ck_assert_int_eq(tt_team_scope(tt_exec_reborrow(&ex, &child), scope_fn, &r), TT_OK);
    ck_assert_int_eq(tt__test_last_scope_quick(), 0);
    ck_assert_uint_eq(atomic_load(&r.hits[1][w - 1]), 1);
    ck_assert_uint_eq(atomic_load(&r.bad), 0);
    /* The parent then takes the quick frame, and a consumed token is
     * refused as on the general path. */
    run r2 = {.pl = &full, .size = w};
    ck_assert_int_eq(tt_team_scope(&ex, scope_fn, &r2), TT_OK);
    ck_assert_int_eq(tt__test_last_scope_quick(), w > 1 ? 1 : 0);
    ck_assert_int_eq(tt_team_scope(&ex, scope_fn, &r2), TT_ECONSUMED);
    ck_assert_uint_eq(atomic_load(&r2.hits[0][0]), 1);

    /* A root scope on another pool from inside this one's region (the
     * scope's callback): that pool's private crew, not the quick frame. */
    nested n = {.inner = th_make_pool(2)};
    ck_assert_int_eq(tt_exec_init(&ex, p, w), TT_OK);
    ck_assert_int_eq(tt_team_scope(&ex, nested_scope, &n), TT_OK);
    ck_assert_int_eq(n.inner_rc, TT_OK);
    ck_assert_int_eq(n.inner_quick, 0);
    th_assert_no_failures();
    th_free_pool(n.inner);
    th_free_pool(p);
}
END_TEST

static Suite *kept_suite(void)
{
    Suite *s = suite_create("scope_kept");
    TCase *tc = th_tcase(s, "kept", 240);
    tcase_add_test(tc, kept_random_sequences_leave);
    tcase_add_test(tc, kept_random_sequences_end_join);
    tcase_add_test(tc, kept_random_sequences_passive);
    tcase_add_test(tc, kept_across_threads);
    tcase_add_test(tc, quick_scope_shapes);
#if TT_PARALLEL_ENABLED
    tcase_add_test(tc, kept_spmd_sections);
#endif
    return s;
}

int main(void) { return th_run_suite(kept_suite()); }
