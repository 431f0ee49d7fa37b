/*
 * test_scope_fail.c -- errors out of callbacks: tt_scope_fail,
 * tt_section_fail and tt_scope_failed (the header's "Errors out of
 * callbacks"): the first failure wins, a failed scope runs no more
 * sections, tt_team_scope returns the code, and an entry on a reborrowed
 * or team token has a code of its own.
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "threadteam.h"
#include "tt_test.h"

enum { CODE_A = 1001, CODE_B = 1002 };

typedef struct fail_ctx {
    _Atomic unsigned sections_run; /* participant-runs of count_section */
    _Atomic unsigned bad;
    int rc_after;                  /* tt_scope_run after the failure    */
    int failed_seen;               /* tt_scope_failed after the failure */
    unsigned size;
} fail_ctx;

static void count_section(void *arg, tt_section *s)
{
    fail_ctx *f = arg;
    (void)s;
    atomic_fetch_add(&f->sections_run, 1);
}

/* The scope function fails, then tries to run a section. */
static void scope_fails(void *arg, tt_scope *scope)
{
    fail_ctx *f = arg;
    f->size = tt_scope_size(scope);
    if (tt_scope_failed(scope) != 0)
        atomic_fetch_add(&f->bad, 1);
    if (tt_scope_run(scope, count_section, f) != TT_OK)
        atomic_fetch_add(&f->bad, 1);
    if (tt_scope_fail(scope, CODE_A) != TT_OK)
        atomic_fetch_add(&f->bad, 1);
    /* A later failure is ignored (and is no error). */
    if (tt_scope_fail(scope, CODE_B) != TT_OK)
        atomic_fetch_add(&f->bad, 1);
    f->failed_seen = tt_scope_failed(scope);
    f->rc_after = tt_scope_run(scope, count_section, f);
    /* Splits and forks are refused the same way. */
    if (tt_scope_split(scope, 2, NULL, NULL) != TT_EINVAL) /* argument errors first */
        atomic_fetch_add(&f->bad, 1);
    if (tt_scope_run_with(scope, 1, count_section, f) != CODE_A)
        atomic_fetch_add(&f->bad, 1);
}

START_TEST(scope_function_fails)
{
    for (unsigned width = 1; width <= 4; width++) {
        tt_pool *p = th_make_pool(width);
        for (unsigned b = 1; b <= tt_pool_width(p); b++) {
            tt_exec ex;
            ck_assert_int_eq(tt_exec_init(&ex, p, b), TT_OK);
            fail_ctx f = {0};
            ck_assert_int_eq(tt_team_scope(&ex, scope_fails, &f), CODE_A);
            ck_assert_uint_eq(atomic_load(&f.bad), 0);
            ck_assert_int_eq(f.failed_seen, CODE_A);
            ck_assert_int_eq(f.rc_after, CODE_A);
            /* Only the section before the failure ran. */
            ck_assert_uint_eq(atomic_load(&f.sections_run), f.size);
            /* The token was consumed; the pool is whole again. */
            ck_assert_int_eq(tt_team_scope(&ex, scope_fails, &f), TT_ECONSUMED);
            ck_assert_int_eq(tt_exec_init(&ex, p, tt_pool_width(p)), TT_OK);
            fail_ctx g = {0};
            ck_assert_int_eq(tt_team_scope(&ex, scope_fails, &g), CODE_A);
        }
        th_free_pool(p);
    }
}
END_TEST

/* Every participant fails, one after another between barriers: rank 0's
 * code (the first) wins, and the barriers (which return the code once the
 * section failed) never hang. */
static void section_fails(void *arg, tt_section *s)
{
    fail_ctx *f = arg;
    unsigned n = tt_section_size(s), r = tt_section_rank(s);
    for (unsigned k = 0; k < n; k++) {
        if (k == r && tt_section_fail(s, 2000 + (int)r) != TT_OK)
            atomic_fetch_add(&f->bad, 1);
        tt_section_barrier(s);
    }
    atomic_fetch_add(&f->sections_run, 1);
}

static void scope_section_fails(void *arg, tt_scope *scope)
{
    fail_ctx *f = arg;
    f->size = tt_scope_size(scope);
    int rc = tt_scope_run(scope, section_fails, f);
    f->failed_seen = rc;
    if (rc == TT_OK)
        return;
    /* The usual pattern passes the code on; here it is already stored. */
    tt_scope_fail(scope, rc);
    f->rc_after = tt_scope_run(scope, count_section, f);
}

START_TEST(section_fails_first_wins)
{
    for (unsigned width = 1; width <= 4; width++) {
        tt_pool *p = th_make_pool(width);
        for (unsigned b = 1; b <= tt_pool_width(p); b++) {
            tt_exec ex;
            ck_assert_int_eq(tt_exec_init(&ex, p, b), TT_OK);
            fail_ctx f = {0};
            ck_assert_int_eq(tt_team_scope(&ex, scope_section_fails, &f), 2000);
            ck_assert_uint_eq(atomic_load(&f.bad), 0);
            ck_assert_int_eq(f.failed_seen, 2000);
            ck_assert_int_eq(f.rc_after, 2000);
            /* Every participant ran the failing section to its end; the
             * section after the failure never ran. */
            ck_assert_uint_eq(atomic_load(&f.sections_run), f.size);
        }
        th_free_pool(p);
    }
}
END_TEST

/* A split part fails its sub-scope: the whole scope fails. */
static void part_fails(void *arg, unsigned part, tt_scope *sub)
{
    fail_ctx *f = arg;
    if (part == 1 && tt_scope_fail(sub, CODE_B) != TT_OK)
        atomic_fetch_add(&f->bad, 1);
    if (part == 1 && tt_scope_run(sub, count_section, f) != CODE_B)
        atomic_fetch_add(&f->bad, 1);
}

static void scope_split_fails(void *arg, tt_scope *scope)
{
    fail_ctx *f = arg;
    f->failed_seen = tt_scope_split(scope, 3, part_fails, f);
    f->rc_after = tt_scope_fork(scope, 2, NULL, NULL) == TT_EINVAL ? tt_scope_failed(scope) : -1;
}

START_TEST(split_part_fails_scope)
{
    tt_pool *p = th_make_pool(3);
    for (unsigned b = 1; b <= tt_pool_width(p); b++) {
        tt_exec ex;
        ck_assert_int_eq(tt_exec_init(&ex, p, b), TT_OK);
        fail_ctx f = {0};
        ck_assert_int_eq(tt_team_scope(&ex, scope_split_fails, &f), CODE_B);
        ck_assert_uint_eq(atomic_load(&f.bad), 0);
        ck_assert_int_eq(f.failed_seen, CODE_B);
        ck_assert_int_eq(f.rc_after, CODE_B);
    }
    th_free_pool(p);
}
END_TEST

/* An entry on a reborrowed scope token has its own code. */
static void inner_fails(void *arg, tt_scope *scope)
{
    (void)arg;
    tt_scope_fail(scope, CODE_B);
}

static void scope_nested(void *arg, tt_scope *scope)
{
    fail_ctx *f = arg;
    tt_exec child;
    f->failed_seen = tt_team_scope(tt_scope_reborrow(scope, &child), inner_fails, NULL);
    f->rc_after = tt_scope_failed(scope);
    if (tt_scope_run(scope, count_section, f) != TT_OK)
        atomic_fetch_add(&f->bad, 1);
}

START_TEST(reborrowed_scope_has_own_code)
{
    tt_pool *p = th_make_pool(3);
    for (unsigned b = 1; b <= tt_pool_width(p); b++) {
        tt_exec ex;
        ck_assert_int_eq(tt_exec_init(&ex, p, b), TT_OK);
        fail_ctx f = {0};
        ck_assert_int_eq(tt_team_scope(&ex, scope_nested, &f), TT_OK);
        ck_assert_int_eq(f.failed_seen, CODE_B);
        ck_assert_int_eq(f.rc_after, 0);
        ck_assert_uint_eq(atomic_load(&f.bad), 0);
    }
    /* A persistent team: each lead's scope starts unfailed. */
    tt_team *team = NULL;
    ck_assert_int_eq(tt_pool_into_team(p, tt_pool_width(p), &team), TT_OK);
    for (int round = 0; round < 3; round++) {
        tt_exec ex;
        ck_assert_int_eq(tt_team_lead(team, tt_team_width(team), &ex), TT_OK);
        fail_ctx f = {0};
        int want = round == 1 ? CODE_A : TT_OK;
        ck_assert_int_eq(tt_team_scope(&ex, round == 1 ? scope_fails : scope_nested, &f), want);
        ck_assert_uint_eq(atomic_load(&f.bad), 0);
    }
    tt_pool *back = tt_team_into_pool(team);
    ck_assert_ptr_eq(back, p);
    th_free_pool(p);
}
END_TEST

/* Misuse: NULL, code 0, another thread. */
typedef struct other_thread {
    tt_scope *scope;
    int rc;
} other_thread;

static void *fail_from_other(void *arg)
{
    other_thread *o = arg;
    o->rc = tt_scope_fail(o->scope, CODE_A);
    return NULL;
}

static void scope_misuse(void *arg, tt_scope *scope)
{
    fail_ctx *f = arg;
    if (tt_scope_fail(scope, 0) != TT_EINVAL)
        atomic_fetch_add(&f->bad, 1);
    other_thread o = {.scope = scope, .rc = -1};
    pthread_t t;
    if (pthread_create(&t, NULL, fail_from_other, &o) == 0) {
        pthread_join(t, NULL);
        if (o.rc != TT_EWRONGTHREAD)
            atomic_fetch_add(&f->bad, 1);
    }
    if (tt_scope_failed(scope) != 0)
        atomic_fetch_add(&f->bad, 1);
}

static void zero_section(void *arg, tt_section *s)
{
    fail_ctx *f = arg;
    if (tt_section_fail(s, 0) != TT_EINVAL)
        atomic_fetch_add(&f->bad, 1);
}

static void scope_misuse_sections(void *arg, tt_scope *scope)
{
    scope_misuse(arg, scope);
    if (tt_scope_run(scope, zero_section, arg) != TT_OK)
        atomic_fetch_add(&((fail_ctx *)arg)->bad, 1);
}

START_TEST(fail_misuse)
{
    ck_assert_int_eq(tt_scope_fail(NULL, 1), TT_EINVAL);
    ck_assert_int_eq(tt_section_fail(NULL, 1), TT_EINVAL);
    ck_assert_int_eq(tt_scope_failed(NULL), 0);
    tt_pool *p = th_make_pool(2);
    tt_exec ex;
    ck_assert_int_eq(tt_exec_init(&ex, p, tt_pool_width(p)), TT_OK);
    fail_ctx f = {0};
    ck_assert_int_eq(tt_team_scope(&ex, scope_misuse_sections, &f), TT_OK);
    ck_assert_uint_eq(atomic_load(&f.bad), 0);
    th_free_pool(p);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Barriers that a failure releases                                          */
/* ------------------------------------------------------------------------ */

enum { BARRIERS = 4 };

typedef struct bar_ctx {
    unsigned victim;     /* the participant that fails                     */
    unsigned fail_after; /* ... after passing this many barriers           */
    _Atomic unsigned arrived[BARRIERS + 1]; /* participants before barrier k */
    _Atomic int got[8][BARRIERS];           /* what barrier k returned      */
    _Atomic unsigned ended;
    _Atomic unsigned bad;
    unsigned size;
} bar_ctx;

/* The victim passes `fail_after` barriers, fails and leaves the section at
 * once (it never reaches the next barrier); the others go through every
 * barrier and must be released. A participant that got TT_OK from barrier
 * k saw everyone arrive there. */
static void victim_section(void *arg, tt_section *s)
{
    bar_ctx *b = arg;
    unsigned r = tt_section_rank(s), n = tt_section_size(s);
    for (unsigned k = 0; k < BARRIERS; k++) {
        if (r == b->victim && k == b->fail_after) {
            if (tt_section_fail(s, CODE_A) != TT_OK)
                atomic_fetch_add(&b->bad, 1);
            atomic_fetch_add(&b->ended, 1);
            return;
        }
        atomic_fetch_add(&b->arrived[k], 1);
        int rc = tt_section_barrier(s);
        if (r < 8)
            atomic_store(&b->got[r][k], rc == TT_OK ? 1 : rc == CODE_A ? 2 : 3);
        if (rc == TT_OK && atomic_load(&b->arrived[k]) != n)
            atomic_fetch_add(&b->bad, 1); /* released before everyone arrived */
    }
    atomic_fetch_add(&b->ended, 1);
}

static void scope_victim(void *arg, tt_scope *scope)
{
    bar_ctx *b = arg;
    b->size = tt_scope_size(scope);
    if (tt_scope_run(scope, victim_section, b) != CODE_A)
        atomic_fetch_add(&b->bad, 1);
}

START_TEST(barrier_released_by_failure)
{
    for (unsigned width = 2; width <= 4; width++) {
        tt_pool *p = th_make_pool(width);
        unsigned w = tt_pool_width(p);
        for (unsigned it = 0; it < th_iters(150); it++) {
            tt_exec ex;
            ck_assert_int_eq(tt_exec_init(&ex, p, w), TT_OK);
            bar_ctx b;
            memset(&b, 0, sizeof b);
            b.victim = it % w;
            b.fail_after = (it / w) % BARRIERS;
            ck_assert_int_eq(tt_team_scope(&ex, scope_victim, &b), CODE_A);
            ck_assert_uint_eq(atomic_load(&b.bad), 0);
            ck_assert_uint_eq(atomic_load(&b.ended), b.size);
            for (unsigned r = 0; r < b.size && r < 8; r++) {
                if (r == b.victim)
                    continue;
                /* Before the failure every barrier completed; from the one
                 * the victim never reached on, each returned the code. */
                for (unsigned k = 0; k < BARRIERS; k++) {
                    int want = k < b.fail_after ? 1 : 2;
                    ck_assert_msg(atomic_load(&b.got[r][k]) == want,
                                  "width %u, victim %u after %u: rank %u barrier %u gave %d", w,
                                  b.victim, b.fail_after, r, k, atomic_load(&b.got[r][k]));
                }
            }
        }
        th_free_pool(p);
    }
}
END_TEST

/* A failure from outside a section (another group of a split fails the
 * scope while this group's section runs its barriers): the section's
 * participants all arrive, and every one of them sees the same results
 * (TT_OK up to some barrier, the code from there on). */
typedef struct split_bar {
    _Atomic int got[8][BARRIERS];
    _Atomic unsigned bad;
    th_flag go;
} split_bar;

static void group_section(void *arg, tt_section *s)
{
    split_bar *b = arg;
    unsigned r = tt_section_rank(s);
    for (unsigned k = 0; k < BARRIERS; k++) {
        if (k == 1 && r == 0)
            th_flag_set(&b->go, 1); /* the other group fails now */
        th_spin_us(50);
        int rc = tt_section_barrier(s);
        if (r < 8)
            atomic_store(&b->got[r][k], rc);
    }
}

static void split_bar_part(void *arg, unsigned part, tt_scope *sub)
{
    split_bar *b = arg;
    if (part == 0) {
        int rc = tt_scope_run(sub, group_section, b);
        if (rc != TT_OK && rc != CODE_B)
            atomic_fetch_add(&b->bad, 1);
    } else {
        th_flag_wait_ge(&b->go, 1, 10);
        if (tt_scope_fail(sub, CODE_B) != TT_OK)
            atomic_fetch_add(&b->bad, 1);
    }
}

static void scope_split_bar(void *arg, tt_scope *scope)
{
    split_bar *b = arg;
    if (tt_scope_split(scope, 2, split_bar_part, b) != CODE_B)
        atomic_fetch_add(&b->bad, 1);
}

START_TEST(barrier_failure_from_other_group)
{
    tt_pool *p = th_make_pool(4);
    unsigned w = tt_pool_width(p);
    if (w < 3) {
        th_free_pool(p);
        return;
    }
    for (unsigned it = 0; it < th_iters(100); it++) {
        tt_exec ex;
        ck_assert_int_eq(tt_exec_init(&ex, p, w), TT_OK);
        split_bar b;
        memset(&b, 0, sizeof b);
        ck_assert_int_eq(tt_team_scope(&ex, scope_split_bar, &b), CODE_B);
        ck_assert_uint_eq(atomic_load(&b.bad), 0);
        unsigned g0 = (w + 1) / 2; /* group 0's participants */
        bool failed = false;
        for (unsigned k = 0; k < BARRIERS; k++) {
            int rc0 = atomic_load(&b.got[0][k]);
            ck_assert_msg(rc0 == TT_OK || rc0 == CODE_B, "barrier %u gave %d", k, rc0);
            ck_assert_msg(!failed || rc0 == CODE_B, "TT_OK after the code, barrier %u", k);
            failed = rc0 == CODE_B;
            for (unsigned r = 1; r < g0 && r < 8; r++)
                ck_assert_msg(atomic_load(&b.got[r][k]) == rc0,
                              "barrier %u: rank 0 got %d, rank %u got %d", k, rc0, r,
                              atomic_load(&b.got[r][k]));
        }
    }
    th_free_pool(p);
}
END_TEST

/* The next section after a failed one starts clean: a team token's entry
 * (its own failure code) runs a section whose victim leaves it; then the
 * scope's own next section synchronises at every barrier again. */
static void clean_section(void *arg, tt_section *s)
{
    bar_ctx *b = arg;
    unsigned n = tt_section_size(s);
    for (unsigned k = 0; k < BARRIERS; k++) {
        atomic_fetch_add(&b->arrived[k], 1);
        int rc = tt_section_barrier(s);
        if (rc != TT_OK || atomic_load(&b->arrived[k]) != n)
            atomic_fetch_add(&b->bad, 1);
    }
    atomic_fetch_add(&b->ended, 1);
}

static void scope_clean(void *arg, tt_scope *scope)
{
    bar_ctx *b = arg;
    if (tt_scope_run(scope, clean_section, b) != TT_OK)
        atomic_fetch_add(&b->bad, 1);
}

typedef struct next_ctx {
    bar_ctx failing, clean;
    int inner_rc, failed_after;
} next_ctx;

static void inner_victim_scope(void *arg, tt_scope *scope)
{
    bar_ctx *b = arg;
    b->size = tt_scope_size(scope);
    int rc = tt_scope_run(scope, victim_section, b);
    if (rc != TT_OK)
        tt_scope_fail(scope, rc); /* pass it on: the entry returns it */
}

static void scope_next_clean(void *arg, tt_scope *scope)
{
    next_ctx *c = arg;
    tt_exec t;
    c->inner_rc = tt_team_scope(tt_scope_reborrow(scope, &t), inner_victim_scope, &c->failing);
    c->failed_after = tt_scope_failed(scope);
    c->clean.size = tt_scope_size(scope);
    if (tt_scope_run(scope, clean_section, &c->clean) != TT_OK)
        atomic_fetch_add(&c->clean.bad, 1);
}

START_TEST(barrier_next_section_clean)
{
    tt_pool *p = th_make_pool(3);
    unsigned w = tt_pool_width(p);
    for (unsigned it = 0; it < th_iters(100); it++) {
        tt_exec ex;
        ck_assert_int_eq(tt_exec_init(&ex, p, w), TT_OK);
        next_ctx c;
        memset(&c, 0, sizeof c);
        c.failing.victim = w > 1 ? 1 + it % (w - 1) : 0;
        c.failing.fail_after = it % BARRIERS;
        ck_assert_int_eq(tt_team_scope(&ex, scope_next_clean, &c), TT_OK);
        ck_assert_int_eq(c.inner_rc, CODE_A);
        ck_assert_int_eq(c.failed_after, 0);
        ck_assert_uint_eq(atomic_load(&c.failing.bad), 0);
        ck_assert_uint_eq(atomic_load(&c.clean.bad), 0);
        ck_assert_uint_eq(atomic_load(&c.clean.ended), c.clean.size);
    }
    /* A persistent team: a lead's scope fails in a section whose victim
     * left; the next lead's sections synchronise again. */
    tt_team *team = NULL;
    ck_assert_int_eq(tt_pool_into_team(p, w, &team), TT_OK);
    for (unsigned it = 0; it < th_iters(40); it++) {
        tt_exec ex;
        ck_assert_int_eq(tt_team_lead(team, w, &ex), TT_OK);
        bar_ctx b;
        memset(&b, 0, sizeof b);
        if (it % 2 == 0) {
            b.victim = it % w;
            b.fail_after = it % BARRIERS;
            ck_assert_int_eq(tt_team_scope(&ex, scope_victim, &b), CODE_A);
        } else {
            b.size = w;
            ck_assert_int_eq(tt_team_scope(&ex, scope_clean, &b), TT_OK);
            ck_assert_uint_eq(atomic_load(&b.ended), w);
        }
        ck_assert_uint_eq(atomic_load(&b.bad), 0);
    }
    ck_assert_ptr_eq(tt_team_into_pool(team), p);
    th_free_pool(p);
}
END_TEST

static Suite *fail_suite(void)
{
    Suite *s = suite_create("scope_fail");
    TCase *tc = tcase_create("fail");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, scope_function_fails);
    tcase_add_test(tc, section_fails_first_wins);
    tcase_add_test(tc, split_part_fails_scope);
    tcase_add_test(tc, reborrowed_scope_has_own_code);
    tcase_add_test(tc, fail_misuse);
    tcase_add_test(tc, barrier_released_by_failure);
    tcase_add_test(tc, barrier_failure_from_other_group);
    tcase_add_test(tc, barrier_next_section_clean);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return th_run_suite(fail_suite()); }
