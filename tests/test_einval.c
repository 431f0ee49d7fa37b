/*
 * test_einval.c -- a TT_EINVAL says which argument was wrong: with TT_DEBUG
 * set, every TT_EINVAL return writes one line to stderr naming the call and
 * the failed check ("threadteam: tt_pool_attr_get_threads: TT_EINVAL:
 * !threads"); without it, nothing is written. Each case runs in a child
 * process of its own, since the library reads TT_DEBUG once per process,
 * with its stderr sent to a file that the parent reads back.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <threadteam.h>

#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static double body_d(void *arg, size_t b, size_t e)
{
    (void)arg;
    return (double)(e - b);
}

/* The misuses: each returns TT_EINVAL for the argument named beside it. */
static int misuse(void)
{
    tt_pool_attr *attr = NULL;
    if (tt_pool_attr_create(&attr) != TT_OK)
        return 1;
    int bad = 0;
    bad += tt_pool_attr_get_threads(attr, NULL) != TT_EINVAL;  /* !threads */
    bad += tt_pool_attr_set_threads(NULL, 2) != TT_EINVAL;     /* !attr */
    tt_pool_attr_destroy(attr);
    tt_exec ex;
    tt_exec_init_serial(&ex);
    double r = 0.0;
    bad += tt_reduce_sum_d(&ex, 10, 0, body_d, NULL, &r) != TT_EINVAL; /* grain == 0 */
    bad += tt_exec_init(&ex, NULL, 1) != TT_EINVAL;                    /* !pool */
    tt_exec_init_serial(&ex);
    bad += tt_fork(&ex, 2, NULL, NULL) != TT_EINVAL;                   /* !job */
    bad += tt_for_ranges(&ex, 10, 1, NULL, NULL) != TT_EINVAL;         /* !body */
    tt_exec_finish(&ex);
    return bad;
}

/* Runs misuse() in a child with TT_DEBUG as given (NULL: unset); returns
 * what the child wrote on stderr (malloc'd), or NULL when it failed. */
static char *child_stderr(const char *debug)
{
    char path[] = "/tmp/tt-einval-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        if (debug)
            setenv("TT_DEBUG", debug, 1);
        else
            unsetenv("TT_DEBUG");
        dup2(fd, 2);
        _exit(misuse() == 0 ? 0 : 3);
    }
    int st = 0;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the misuses did not all return TT_EINVAL");
    char *buf = calloc(1, 8192);
    ck_assert_ptr_nonnull(buf);
    ssize_t n = pread(fd, buf, 8191, 0);
    ck_assert_int_ge(n, 0);
    close(fd);
    unlink(path);
    return buf;
}

START_TEST(test_einval_names_the_argument)
{
    char *out = child_stderr("1");
    const char *want[] = {
        "threadteam: tt_pool_attr_get_threads: TT_EINVAL: !threads\n",
        "threadteam: tt_pool_attr_set_threads: TT_EINVAL: !attr\n",
        "TT_EINVAL: grain == 0\n",
        "threadteam: tt_exec_init: TT_EINVAL: !pool\n",
        "threadteam: tt_fork: TT_EINVAL: !job\n",
        ": TT_EINVAL: !body\n",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        ck_assert_msg(strstr(out, want[i]) != NULL, "missing \"%s\" in:\n%s", want[i], out);
    free(out);
}
END_TEST

START_TEST(test_einval_silent_without_debug)
{
    const char *values[] = {NULL, "0", ""};
    for (size_t i = 0; i < 3; i++) {
        char *out = child_stderr(values[i]);
        ck_assert_msg(out[0] == '\0', "TT_DEBUG=%s: wrote \"%s\"", values[i] ? values[i] : "(unset)",
                      out);
        free(out);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("einval");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_einval_names_the_argument);
    tcase_add_test(tc, test_einval_silent_without_debug);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
