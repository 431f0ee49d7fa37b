/*
 * test_tasks.c -- the task-suite kernels of bench/tasks_kernels.c, small:
 * every result checked on threadteam (an OpenMP-free and an isolated pool,
 * budgets 1 and 2, the serial twins and the straight ports) and on the
 * OpenMP-task twins, and no more than the budget of threadteam bodies ever
 * running at once. make check runs them so that the benchmark's kernels
 * cannot rot.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "tt_test.h"
#include "tasks_kernels.h"

static tt_pool *kernel_pool(bool iso)
{
    tt_pool_attr *a = NULL;
    ck_assert_int_eq(tt_pool_attr_create(&a), TT_OK);
    ck_assert_int_eq(tt_pool_attr_set_threads(a, 2), TT_OK);
    ck_assert_int_eq(tt_pool_attr_set_spin_polls(a, th_test_spin_polls()), TT_OK);
    ck_assert_int_eq(tt_pool_attr_set_isolate_shares(a, iso), TT_OK);
    tt_pool *p = NULL;
    ck_assert_int_eq(tt_pool_create(&p, a), TT_OK);
    tt_pool_attr_destroy(a);
    return p;
}

/* The OpenMP-task twins are the application's own regions and tasks on
 * uninstrumented libgomp, whose synchronisation ThreadSanitizer cannot
 * see: under it they are left out (their results are checked in the other
 * builds). */
static bool twins_run(void) { return getenv("TT_UNDER_TSAN") == NULL; }

/* Run `body` on a token of budget b of each pool kind, counting the peak. */
typedef void (*kernel_fn)(tt_exec *ex, unsigned budget);

static void on_pools(kernel_fn fn)
{
    for (int iso = 0; iso < 2; iso++) {
        tt_pool *p = kernel_pool(iso != 0);
        unsigned w = tt_pool_width(p);
        for (unsigned b = 1; b <= w; b++) {
            tt_exec ex;
            ck_assert_int_eq(tt_exec_init(&ex, p, b), TT_OK);
            tk_counting = true;
            tk_peak_reset();
            fn(&ex, b);
            tk_counting = false;
            ck_assert_msg(tk_peak() >= 1 && tk_peak() <= (int)b,
                          "peak %d bodies at once on a budget of %u (iso %d)", tk_peak(), b,
                          iso);
        }
        th_free_pool(p);
    }
}

static void fib_k(tt_exec *ex, unsigned b)
{
    (void)b;
    long v;
    ck_assert_int_eq(tk_fib_tt(ex, 18, true, &v), TT_OK);
    ck_assert_int_eq(v, tk_fib_expect(18));
}

static void fib_port_k(tt_exec *ex, unsigned b)
{
    (void)b;
    long v;
    ck_assert_int_eq(tk_fib_tt(ex, 14, false, &v), TT_OK);
    ck_assert_int_eq(v, tk_fib_expect(14));
}

START_TEST(test_tasks_fib)
{
    on_pools(fib_k);
    on_pools(fib_port_k);
    tk_fib_cutoff = 4;
    if (twins_run())
        ck_assert_int_eq(tk_fib_omp(18), tk_fib_expect(18));
    ck_assert_int_eq(tk_fib_expect(30), 832040);
}
END_TEST

static void nq_k(tt_exec *ex, unsigned b)
{
    (void)b;
    long v;
    ck_assert_int_eq(tk_nqueens_tt(ex, 8, true, &v), TT_OK);
    ck_assert_int_eq(v, 92);
}

static void nq_port_k(tt_exec *ex, unsigned b)
{
    (void)b;
    long v;
    ck_assert_int_eq(tk_nqueens_tt(ex, 7, false, &v), TT_OK);
    ck_assert_int_eq(v, 40);
}

START_TEST(test_tasks_nqueens)
{
    on_pools(nq_k);
    on_pools(nq_port_k);
    tk_nq_cutoff = 2;
    if (twins_run())
        ck_assert_int_eq(tk_nqueens_omp(8), 92);
    char a[1] = {0};
    ck_assert_int_eq(tk_nqueens_seq(6, 0, a), 4);
}
END_TEST

#define SORT_N 40000
static int sort_a[SORT_N], sort_tmp[SORT_N];

static void sort_k(tt_exec *ex, unsigned b)
{
    tk_sort_fill(sort_a, SORT_N, b);
    ck_assert_int_eq(tk_sort_tt(ex, sort_a, sort_tmp, SORT_N), TT_OK);
    ck_assert(tk_sort_check(sort_a, SORT_N, b));
}

START_TEST(test_tasks_sort)
{
    on_pools(sort_k);
    if (!twins_run())
        return;
    tk_sort_fill(sort_a, SORT_N, 9);
    ck_assert(!tk_sort_check(sort_a, SORT_N, 9)); /* the check can fail */
    tk_sort_omp(sort_a, sort_tmp, SORT_N);
    ck_assert(tk_sort_check(sort_a, SORT_N, 9));
}
END_TEST

static void nested_k(tt_exec *ex, unsigned b)
{
    (void)b;
    for (unsigned dom = 2; dom <= 4; dom++) {
        tk_nested k;
        ck_assert_int_eq(tk_nested_init(&k, dom, 1500), TT_OK);
        ck_assert(dom == 2 || !tk_nested_check(&k));
        tt_exec r;
        tt_exec_reborrow(ex, &r);
        ck_assert_int_eq(tk_nested_tt(&r, &k), TT_OK);
        ck_assert(tk_nested_check(&k));
        tk_nested_free(&k);
    }
}

START_TEST(test_tasks_nested)
{
    on_pools(nested_k);
    for (int active = 0; active < 2 && twins_run(); active++) {
        tk_nested k;
        ck_assert_int_eq(tk_nested_init(&k, 3, 1500), TT_OK);
        tk_nested_omp(&k, active != 0);
        ck_assert(tk_nested_check(&k));
        tk_nested_free(&k);
    }
}
END_TEST

static void sparse_k(tt_exec *ex, unsigned b)
{
    (void)b;
    tk_sparse s;
    ck_assert_int_eq(tk_sparse_init(&s, 5000, 3), TT_OK);
    ck_assert(!tk_sparse_check(&s));
    ck_assert_int_eq(tk_sparse_tt(ex, &s, 64), TT_OK);
    ck_assert(tk_sparse_check(&s));
    tk_sparse_free(&s);
}

/* The same rows through tt_for_ranges_dynamic (the bench's irregular-dyn). */
static void sparse_dyn_k(tt_exec *ex, unsigned b)
{
    (void)b;
    tk_sparse s;
    ck_assert_int_eq(tk_sparse_init(&s, 5000, 5), TT_OK);
    ck_assert(!tk_sparse_check(&s));
    ck_assert_int_eq(tk_sparse_tt_dynamic(ex, &s, 64), TT_OK);
    ck_assert(tk_sparse_check(&s));
    tk_sparse_free(&s);
}

START_TEST(test_tasks_irregular)
{
    on_pools(sparse_k);
    on_pools(sparse_dyn_k);
    if (!twins_run())
        return;
    tk_sparse s;
    ck_assert_int_eq(tk_sparse_init(&s, 5000, 3), TT_OK);
    tk_sparse_omp(&s, 64);
    ck_assert(tk_sparse_check(&s));
    tk_sparse_free(&s);
}
END_TEST

static void inline_k(tt_exec *ex, unsigned b)
{
    (void)b;
    ck_assert_int_eq(tk_inline_tt(ex, 8), TT_OK);
    tk_counting = true; /* no leaf body counted: the peak check needs one */
    tt_exec r;
    tt_exec_init_serial(&r);
    long v;
    ck_assert_int_eq(tk_fib_tt(&r, 5, true, &v), TT_OK);
}

START_TEST(test_tasks_inline)
{
    on_pools(inline_k);
    if (twins_run())
        tk_inline_omp(8);
    tk_inline_plain(8);
}
END_TEST

static Suite *tasks_suite(void)
{
    Suite *s = suite_create("tasks");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, th_timeout(120));
    tcase_add_test(tc, test_tasks_fib);
    tcase_add_test(tc, test_tasks_nqueens);
    tcase_add_test(tc, test_tasks_sort);
    tcase_add_test(tc, test_tasks_nested);
    tcase_add_test(tc, test_tasks_irregular);
    tcase_add_test(tc, test_tasks_inline);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return th_run_suite(tasks_suite()); }
