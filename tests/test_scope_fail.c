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
        tt_pool *p = tt_make_pool(width);
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
        tt_free_pool(p);
    }
}
END_TEST

/* Every participant fails, one after another between barriers: rank 0's
 * code (the first) wins, and the barriers still complete. */
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
        tt_pool *p = tt_make_pool(width);
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
        tt_free_pool(p);
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
    tt_pool *p = tt_make_pool(3);
    for (unsigned b = 1; b <= tt_pool_width(p); b++) {
        tt_exec ex;
        ck_assert_int_eq(tt_exec_init(&ex, p, b), TT_OK);
        fail_ctx f = {0};
        ck_assert_int_eq(tt_team_scope(&ex, scope_split_fails, &f), CODE_B);
        ck_assert_uint_eq(atomic_load(&f.bad), 0);
        ck_assert_int_eq(f.failed_seen, CODE_B);
        ck_assert_int_eq(f.rc_after, CODE_B);
    }
    tt_free_pool(p);
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
    tt_pool *p = tt_make_pool(3);
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
    tt_free_pool(p);
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
    tt_pool *p = tt_make_pool(2);
    tt_exec ex;
    ck_assert_int_eq(tt_exec_init(&ex, p, tt_pool_width(p)), TT_OK);
    fail_ctx f = {0};
    ck_assert_int_eq(tt_team_scope(&ex, scope_misuse_sections, &f), TT_OK);
    ck_assert_uint_eq(atomic_load(&f.bad), 0);
    tt_free_pool(p);
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
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tt_run_suite(fail_suite()); }
