/*
 * test_invariants.c -- the always-compiled invariants (TT__INVARIANT,
 * internal.h) fire in every build, release included, and say what broke.
 *
 * Each case breaks one protocol of the library on purpose, through the
 * internal calls that the test programs may reach (they link the static
 * archive): the entry frame's order (begin, commit, end), the join's
 * count, the thread's inline-hold stack and the pool's entry count. The
 * case runs in a child process of its own (Check forks one per test); its
 * stderr goes to a file, and a SIGABRT handler reads the file back and
 * exits with EXIT_FIRED only when the library's report names the broken
 * invariant ("threadteam: invariant broken at FILE:LINE: WHAT"). A case
 * that does not abort, or aborts with another message, fails. A control
 * case runs the same calls in their order and must not abort.
 */
#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "threadteam.h"
#include "tt_test.h"

enum { EXIT_FIRED = 42 };

static const char *expected; /* the message the case must produce */
static char err_path[64];

static void on_abort(int sig)
{
    (void)sig;
    char buf[4096];
    int fd = open(err_path, O_RDONLY);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    unlink(err_path);
    if (n > 0) {
        buf[n] = 0;
        if (expected && strstr(buf, expected) && strstr(buf, "invariant"))
            _exit(EXIT_FIRED);
    }
    _exit(EXIT_FAILURE);
}

/* Stderr to a file, and the handler that checks it on SIGABRT. */
static void expect(const char *what)
{
    expected = what;
    snprintf(err_path, sizeof err_path, "/tmp/tt-invariant-%ld.err", (long)getpid());
    int fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_ge(dup2(fd, 2), 0);
    close(fd);
    struct sigaction sa = {0};
    sa.sa_handler = on_abort;
    sigemptyset(&sa.sa_mask);
    ck_assert_int_eq(sigaction(SIGABRT, &sa, NULL), 0);
}

/* A token of a new width-2 pool (the control case frees the pool; a case
 * that ends in an invariant leaves it to the child's exit). */
static tt_pool *last_pool;
static tt__exec *token(tt_exec *ex)
{
    last_pool = th_make_pool(2);
    ck_assert_int_eq(tt_exec_init(ex, last_pool, 2), TT_OK);
    return tt__x(ex);
}

static void no_job(void *arg, unsigned i, tt_exec *child)
{
    (void)arg;
    (void)i;
    (void)child;
}

START_TEST(entry_in_order_does_not_fire)
{
    tt_exec ex;
    tt__exec *x = token(&ex);
    tt__entry e;
    ck_assert_int_eq(tt__entry_begin(&e, x), TT_OK);
    ck_assert_int_eq(tt__entry_commit(&e), TT_OK);
    tt__entry_end(&e, true);
    /* The token was consumed by that entry. */
    ck_assert_int_eq(tt_fork(&ex, 1, no_job, NULL), TT_ECONSUMED);
    tt__join j;
    tt__join_init(&j, 1);
    tt__join_done(&j, NULL);
    tt__join_wait(&j, &(tt__wait_policy){.spin_polls = 1}, NULL);
    th_free_pool(last_pool);
}
END_TEST

START_TEST(entry_end_without_commit)
{
    tt_exec ex;
    tt__exec *x = token(&ex);
    expect("entry frame: end without a commit");
    tt__entry e;
    ck_assert_int_eq(tt__entry_begin(&e, x), TT_OK);
    tt__entry_end(&e, true);
}
END_TEST

START_TEST(entry_commit_twice)
{
    tt_exec ex;
    tt__exec *x = token(&ex);
    expect("entry frame: commit without a claim");
    tt__entry e;
    ck_assert_int_eq(tt__entry_begin(&e, x), TT_OK);
    ck_assert_int_eq(tt__entry_commit(&e), TT_OK);
    (void)tt__entry_commit(&e);
}
END_TEST

START_TEST(entry_abort_after_commit)
{
    tt_exec ex;
    tt__exec *x = token(&ex);
    expect("entry frame: abort without a claim");
    tt__entry e;
    ck_assert_int_eq(tt__entry_begin(&e, x), TT_OK);
    ck_assert_int_eq(tt__entry_commit(&e), TT_OK);
    (void)tt__entry_abort(&e, TT_EINVAL);
}
END_TEST

START_TEST(join_completion_too_many)
{
    expect("join: a completion with none pending");
    tt__join j;
    tt__join_init(&j, 1);
    tt__join_done(&j, NULL);
    tt__join_done(&j, NULL);
}
END_TEST

START_TEST(hold_pop_of_empty_stack)
{
    expect("inline hold stack: pop of an empty stack");
    tt__inline_hold h = {0};
    tt__pool_hold_pop(&h);
}
END_TEST

START_TEST(pool_entry_end_without_begin)
{
    tt_pool *p = th_make_pool(2);
    expect("pool entry count: an entry ended that never began");
    tt__pool_entry_end(p);
}
END_TEST

/* With CK_FORK=no (check-valgrind runs every program so, to follow the
 * test bodies) an invariant would end the whole program: only the control
 * case runs then, which valgrind checks like any other. */
static Suite *invariant_suite(bool forking)
{
    Suite *s = suite_create("invariants");
    TCase *tc = tcase_create("invariants");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, entry_in_order_does_not_fire);
    if (forking) {
        tcase_add_exit_test(tc, entry_end_without_commit, EXIT_FIRED);
        tcase_add_exit_test(tc, entry_commit_twice, EXIT_FIRED);
        tcase_add_exit_test(tc, entry_abort_after_commit, EXIT_FIRED);
        tcase_add_exit_test(tc, join_completion_too_many, EXIT_FIRED);
        tcase_add_exit_test(tc, hold_pop_of_empty_stack, EXIT_FIRED);
        tcase_add_exit_test(tc, pool_entry_end_without_begin, EXIT_FIRED);
    }
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    const char *f = getenv("CK_FORK");
    bool forking = !(f && strcmp(f, "no") == 0);
    if (!forking)
        printf("test_invariants: CK_FORK=no: only the control case runs (each other case "
               "ends its process on purpose)\n");
    return th_run_suite(invariant_suite(forking));
}
