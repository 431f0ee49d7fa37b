/*
 * test_reduce.c -- reproducible reductions (tt_reduce_ranges, tt_reduce_sum_d,
 * tt_reduce_minloc_d, tt_reduce_maxloc_d).
 *
 * The results must be the same bits for every budget, pool width, run and
 * the serial build (make check runs this same program in build-serial). The
 * expected value is never hard-coded: it is computed here by a local,
 * serial implementation of the header's documented blocks and fixed tree,
 * on data whose sum depends on the order of the additions (magnitudes 1e16,
 * 1 and -1e16 mixed), which the test checks too.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "threadteam.h"
#include "tt_test.h"
#include "test_hooks.h"


/* ------------------------------------------------------------------------ */
/* The documented partition and tree, written out here independently         */
/* ------------------------------------------------------------------------ */

static size_t ref_blocks(size_t len, size_t grain)
{
    size_t nb = len / grain;
    return nb ? nb : 1;
}

static void ref_block(size_t len, size_t nb, size_t b, size_t *begin, size_t *end)
{
    size_t q = len / nb, r = len % nb;
    *begin = b * q + (b < r ? b : r);
    *end = *begin + q + (b < r ? 1 : 0);
}

/* Recursive form of the tree: node (b, s) covers blocks [b, b + 2s); its
 * value is combine(node(b, s/2), node(b + s, s/2)) when b + s < nb. Written
 * as a recursion (not the header's loop) so that a mistake in one does not
 * hide in the other. */
static double ref_node(const double *p, size_t nb, size_t b, size_t span)
{
    if (span == 1)
        return p[b];
    size_t half = span / 2;
    double left = ref_node(p, nb, b, half);
    if (b + half >= nb)
        return left;
    return left + ref_node(p, nb, b + half, half);
}

static double ref_sum(const double *x, size_t len, size_t grain)
{
    if (len == 0)
        return 0.0;
    size_t nb = ref_blocks(len, grain);
    double *p = malloc(nb * sizeof *p);
    ck_assert_ptr_nonnull(p);
    for (size_t b = 0; b < nb; b++) {
        size_t lo, hi;
        ref_block(len, nb, b, &lo, &hi);
        double s = 0.0;
        for (size_t i = lo; i < hi; i++)
            s += x[i];
        p[b] = s;
    }
    size_t span = 1;
    while (span < nb)
        span *= 2;
    double r = ref_node(p, nb, 0, span);
    free(p);
    return r;
}

static bool same_bits(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }

/* Order-sensitive data: big values that cancel, and small ones that are
 * lost or not depending on where they meet the big ones. */
static double *make_data(size_t len, uint64_t seed)
{
    double *x = malloc((len ? len : 1) * sizeof *x);
    ck_assert_ptr_nonnull(x);
    for (size_t i = 0; i < len; i++) {
        uint64_t r = th_rng_next(&seed);
        switch (r % 5) {
        case 0: x[i] = 1e16; break;
        case 1: x[i] = -1e16; break;
        case 2: x[i] = 1.0; break;
        case 3: x[i] = (double)(r >> 11) * 0x1p-53 - 0.5; break;
        default: x[i] = (double)(r % 1000) * 3.0; break;
        }
    }
    return x;
}

static double slice_sum(void *arg, size_t begin, size_t end)
{
    const double *x = arg;
    double s = 0.0;
    for (size_t i = begin; i < end; i++)
        s += x[i];
    return s;
}

static const size_t k_lens[] = {1, 2, 3, 7, 64, 1000, 4099, 20011};
static const size_t k_grains[] = {1, 2, 3, 16, 100, 1024, 50000};
#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* Sum on `ex` and compare with the reference. */
static void check_sum_on(tt_exec *ex, const double *x, size_t len, size_t grain, double want,
                         const char *what)
{
    double got = -1.0;
    int rc = tt_reduce_sum_d(ex, len, grain, slice_sum, (void *)x, &got);
    ck_assert_msg(rc == TT_OK, "%s len %zu grain %zu: %s", what, len, grain,
                  tt_status_name(rc));
    ck_assert_msg(same_bits(got, want), "%s len %zu grain %zu: %.17g, want %.17g", what, len,
                  grain, got, want);
}

START_TEST(sum_bits_every_budget_and_width)
{
    unsigned cpus = th_affinity_cpus();
    unsigned widths[] = {1, 2, 3, 4, 2 * cpus + 1};
    tt_pool *pools[N_OF(widths)];
    for (size_t wi = 0; wi < N_OF(widths); wi++)
        pools[wi] = th_make_pool(widths[wi]);
    bool order_matters = false;
    for (size_t li = 0; li < N_OF(k_lens); li++) {
        size_t len = k_lens[li];
        double *x = make_data(len, 17 + li);
        double seq = 0.0;
        for (size_t i = 0; i < len; i++)
            seq += x[i];
        for (size_t gi = 0; gi < N_OF(k_grains); gi++) {
            size_t grain = k_grains[gi];
            double want = ref_sum(x, len, grain);
            if (!same_bits(want, seq))
                order_matters = true;
            tt_exec ex;
            tt_exec_init_serial(&ex);
            check_sum_on(&ex, x, len, grain, want, "serial token");
            for (size_t wi = 0; wi < N_OF(widths); wi++) {
                tt_pool *p = pools[wi];
                for (unsigned b = 1; b <= tt_pool_width(p); b++) {
                    ck_assert_int_eq(tt_exec_init(&ex, p, b), TT_OK);
                    check_sum_on(&ex, x, len, grain, want, "pool token");
                }
            }
        }
        free(x);
    }
    for (size_t wi = 0; wi < N_OF(widths); wi++)
        th_free_pool(pools[wi]);
    /* The data must make the order visible, or the test proves nothing. */
    ck_assert_msg(order_matters, "the test data sums the same in every order");
}
END_TEST

START_TEST(sum_bits_many_runs)
{
    size_t len = 100003, grain = 512;
    double *x = make_data(len, 99);
    double want = ref_sum(x, len, grain);
    tt_pool *p = th_make_pool(4);
    unsigned runs = th_iters(200);
    for (unsigned r = 0; r < runs; r++) {
        tt_exec ex;
        ck_assert_int_eq(tt_exec_init(&ex, p, 1 + r % tt_pool_width(p)), TT_OK);
        check_sum_on(&ex, x, len, grain, want, "repeated");
    }
    th_free_pool(p);
    free(x);
}
END_TEST

/* The same reduction from a tt_fork job's child token and from a team scope
 * (through tt_scope_reborrow): the same bits. */
typedef struct nested_arg {
    const double *x;
    size_t len, grain;
    double want;
    _Atomic unsigned bad;
} nested_arg;

static void nested_job(void *arg, unsigned i, tt_exec *child)
{
    nested_arg *n = arg;
    (void)i;
    double got;
    if (tt_reduce_sum_d(child, n->len, n->grain, slice_sum, (void *)n->x, &got) != TT_OK ||
        !same_bits(got, n->want))
        atomic_fetch_add(&n->bad, 1);
}

static void nested_scope(void *arg, tt_scope *scope)
{
    nested_arg *n = arg;
    tt_exec child;
    double got;
    if (tt_reduce_sum_d(tt_scope_reborrow(scope, &child), n->len, n->grain, slice_sum,
                        (void *)n->x, &got) != TT_OK ||
        !same_bits(got, n->want))
        atomic_fetch_add(&n->bad, 1);
}

START_TEST(sum_from_tasks_and_scopes)
{
    size_t len = 30011, grain = 37;
    double *x = make_data(len, 5);
    nested_arg n = {.x = x, .len = len, .grain = grain, .want = ref_sum(x, len, grain)};
    tt_pool *p = th_make_pool(4);
    for (unsigned b = 1; b <= tt_pool_width(p); b++) {
        tt_exec ex;
        ck_assert_int_eq(tt_exec_init(&ex, p, b), TT_OK);
        ck_assert_int_eq(tt_fork(&ex, 3, nested_job, &n), TT_OK);
        ck_assert_int_eq(tt_exec_init(&ex, p, b), TT_OK);
        ck_assert_int_eq(tt_team_scope(&ex, nested_scope, &n), TT_OK);
    }
    ck_assert_uint_eq(atomic_load(&n.bad), 0);
    th_free_pool(p);
    free(x);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* A user combine over a struct: blocks and order are the documented ones    */
/* ------------------------------------------------------------------------ */

/* An accumulator that records what it covers: the combine checks that it
 * joins adjacent index runs, lower on the left, and counts the blocks; a
 * running value mixes the order in (not commutative), so any other tree
 * gives another result. */
typedef struct span_acc {
    size_t first, end;   /* the indices covered, [first, end)       */
    uint64_t blocks;     /* blocks folded in                        */
    uint64_t mix;        /* order-dependent hash of the tree        */
    unsigned bad;        /* non-adjacent or misordered joins seen   */
} span_acc;

typedef struct span_arg {
    size_t len, grain;
    _Atomic unsigned bad_blocks;
} span_arg;

static void span_init(void *arg, void *acc)
{
    (void)arg;
    *(span_acc *)acc = (span_acc){.first = SIZE_MAX, .end = SIZE_MAX};
}

static void span_body(void *arg, size_t begin, size_t end, void *acc)
{
    span_arg *a = arg;
    span_acc *s = acc;
    /* The block must be the documented one: find its number. */
    size_t nb = ref_blocks(a->len, a->grain), b = 0, lo, hi;
    for (b = 0; b < nb; b++) {
        ref_block(a->len, nb, b, &lo, &hi);
        if (lo == begin)
            break;
    }
    if (b == nb || hi != end || s->first != SIZE_MAX)
        atomic_fetch_add(&a->bad_blocks, 1);
    s->first = begin;
    s->end = end;
    s->blocks = 1;
    s->mix = th_mix64(begin * 1000003u + end);
}

static void span_combine(void *arg, void *into, const void *from)
{
    (void)arg;
    span_acc *l = into;
    const span_acc *r = from;
    if (l->end != r->first)
        l->bad++;
    l->end = r->end;
    l->blocks += r->blocks;
    l->mix = th_mix64(l->mix * 31u + r->mix);
    l->bad += r->bad;
}

static span_acc ref_span_node(const span_acc *p, size_t nb, size_t b, size_t span)
{
    if (span == 1)
        return p[b];
    size_t half = span / 2;
    span_acc l = ref_span_node(p, nb, b, half);
    if (b + half < nb) {
        span_acc r = ref_span_node(p, nb, b + half, half);
        span_combine(NULL, &l, &r);
    }
    return l;
}

static span_acc ref_span(size_t len, size_t grain)
{
    size_t nb = ref_blocks(len, grain);
    span_acc *p = malloc(nb * sizeof *p);
    ck_assert_ptr_nonnull(p);
    span_arg a = {.len = len, .grain = grain};
    for (size_t b = 0; b < nb; b++) {
        size_t lo, hi;
        ref_block(len, nb, b, &lo, &hi);
        span_init(&a, &p[b]);
        span_body(&a, lo, hi, &p[b]);
    }
    size_t span = 1;
    while (span < nb)
        span *= 2;
    span_acc r = ref_span_node(p, nb, 0, span);
    free(p);
    return r;
}

START_TEST(user_combine_struct)
{
    unsigned widths[] = {1, 2, 3, 4, 2 * th_affinity_cpus() + 1};
    size_t lens[] = {1, 5, 100, 1023, 1024, 1025, 7777};
    size_t grains[] = {1, 2, 10, 333, 5000};
    for (size_t wi = 0; wi < N_OF(widths); wi++) {
        tt_pool *p = th_make_pool(widths[wi]);
        for (size_t li = 0; li < N_OF(lens); li++) {
            for (size_t gi = 0; gi < N_OF(grains); gi++) {
                size_t len = lens[li], grain = grains[gi];
                span_acc want = ref_span(len, grain);
                ck_assert_uint_eq(want.bad, 0);
                for (unsigned b = 1; b <= tt_pool_width(p); b++) {
                    tt_exec ex;
                    ck_assert_int_eq(tt_exec_init(&ex, p, b), TT_OK);
                    span_arg a = {.len = len, .grain = grain};
                    span_acc got;
                    memset(&got, 0xa5, sizeof got);
                    ck_assert_int_eq(tt_reduce_ranges(&ex, len, grain, sizeof got, span_init,
                                                      span_body, span_combine, &a, &got),
                                     TT_OK);
                    ck_assert_uint_eq(atomic_load(&a.bad_blocks), 0);
                    ck_assert_uint_eq(got.bad, 0);
                    ck_assert_uint_eq(got.first, 0);
                    ck_assert_uint_eq(got.end, len);
                    ck_assert_uint_eq(got.blocks, ref_blocks(len, grain));
                    ck_assert_msg(got.mix == want.mix,
                                  "width %u budget %u len %zu grain %zu: another tree",
                                  tt_pool_width(p), b, len, grain);
                }
            }
        }
        th_free_pool(p);
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Minimum / maximum with index                                              */
/* ------------------------------------------------------------------------ */

static void ref_loc(const double *x, size_t len, bool max, double *v, size_t *idx)
{
    *v = NAN;
    *idx = SIZE_MAX;
    for (size_t i = 0; i < len; i++) {
        if (isnan(x[i]))
            continue;
        if (*idx == SIZE_MAX || (max ? x[i] > *v : x[i] < *v)) {
            *v = x[i];
            *idx = i;
        }
    }
}

START_TEST(minloc_maxloc_ties_lowest_index)
{
    unsigned widths[] = {1, 2, 3, 4, 2 * th_affinity_cpus() + 1};
    size_t len = 5003;
    double *x = malloc(len * sizeof *x);
    ck_assert_ptr_nonnull(x);
    uint64_t seed = 42;
    for (size_t i = 0; i < len; i++) {
        /* Few distinct values: the extremes occur many times. Some NaN. */
        uint64_t r = th_rng_next(&seed);
        x[i] = r % 97 == 0 ? NAN : (double)(int)(r % 7) - 3.0;
    }
    x[0] = NAN; /* a NaN first must not win */
    for (int max = 0; max <= 1; max++) {
        double wv;
        size_t wi;
        ref_loc(x, len, max, &wv, &wi);
        ck_assert_uint_ne(wi, SIZE_MAX);
        /* Ties exist (or the test proves nothing about them). */
        size_t ties = 0;
        for (size_t i = 0; i < len; i++)
            ties += x[i] == wv;
        ck_assert_uint_gt(ties, 10);
        for (size_t k = 0; k < N_OF(widths); k++) {
            tt_pool *p = th_make_pool(widths[k]);
            for (unsigned b = 1; b <= tt_pool_width(p); b++) {
                for (size_t grain = 1; grain <= 4096; grain *= 8) {
                    tt_exec ex;
                    ck_assert_int_eq(tt_exec_init(&ex, p, b), TT_OK);
                    double v = 0;
                    size_t idx = 0;
                    int rc = max ? tt_reduce_maxloc_d(&ex, x, len, grain, &v, &idx)
                                 : tt_reduce_minloc_d(&ex, x, len, grain, &v, &idx);
                    ck_assert_int_eq(rc, TT_OK);
                    ck_assert_msg(idx == wi && same_bits(v, wv),
                                  "%s budget %u grain %zu: %g at %zu, want %g at %zu",
                                  max ? "max" : "min", b, grain, v, idx, wv, wi);
                }
            }
            th_free_pool(p);
        }
    }
    /* Every element NaN, and len 0: NaN at SIZE_MAX. */
    for (size_t i = 0; i < 100; i++)
        x[i] = NAN;
    for (size_t n = 0; n <= 100; n += 100) {
        tt_exec ex;
        tt_exec_init_serial(&ex);
        double v = 0;
        size_t idx = 0;
        ck_assert_int_eq(tt_reduce_minloc_d(&ex, n ? x : NULL, n, 3, &v, &idx), TT_OK);
        ck_assert(isnan(v));
        ck_assert_uint_eq(idx, SIZE_MAX);
    }
    free(x);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Errors, consumption, memory                                               */
/* ------------------------------------------------------------------------ */

static void add_body(void *arg, size_t begin, size_t end, void *acc)
{
    (void)arg;
    *(double *)acc += (double)(end - begin);
}

static void add_combine(void *arg, void *into, const void *from)
{
    (void)arg;
    *(double *)into += *(const double *)from;
}

static void seven_init(void *arg, void *acc)
{
    (void)arg;
    *(double *)acc = 7.0;
}

START_TEST(errors_and_consumption)
{
    tt_pool *p = th_make_pool(2);
    tt_exec ex;
    ck_assert_int_eq(tt_exec_init(&ex, p, 2), TT_OK);
    double r = -1.0;
    /* Argument errors consume nothing and leave result alone. */
    ck_assert_int_eq(tt_reduce_ranges(&ex, 10, 1, sizeof r, NULL, NULL, add_combine, NULL, &r),
                     TT_EINVAL);
    ck_assert_int_eq(tt_reduce_ranges(&ex, 10, 1, sizeof r, NULL, add_body, NULL, NULL, &r),
                     TT_EINVAL);
    ck_assert_int_eq(tt_reduce_ranges(&ex, 10, 1, sizeof r, NULL, add_body, add_combine, NULL,
                                      NULL),
                     TT_EINVAL);
    ck_assert_int_eq(tt_reduce_ranges(&ex, 10, 0, sizeof r, NULL, add_body, add_combine, NULL, &r),
                     TT_EINVAL);
    ck_assert_int_eq(tt_reduce_ranges(&ex, 10, 1, 0, NULL, add_body, add_combine, NULL, &r),
                     TT_EINVAL);
    ck_assert_int_eq(tt_reduce_sum_d(&ex, 10, 1, NULL, NULL, &r), TT_EINVAL);
    ck_assert_int_eq(tt_reduce_sum_d(&ex, 10, 1, slice_sum, NULL, NULL), TT_EINVAL);
    ck_assert_int_eq(tt_reduce_sum_d(&ex, 10, 0, slice_sum, NULL, &r), TT_EINVAL);
    size_t idx = 5;
    ck_assert_int_eq(tt_reduce_minloc_d(&ex, NULL, 10, 1, &r, &idx), TT_EINVAL);
    ck_assert_int_eq(tt_reduce_maxloc_d(&ex, &r, 1, 1, NULL, &idx), TT_EINVAL);
    ck_assert_int_eq(tt_reduce_maxloc_d(&ex, &r, 1, 1, &r, NULL), TT_EINVAL);
    ck_assert_int_eq(tt_reduce_maxloc_d(&ex, &r, 1, 0, &r, &idx), TT_EINVAL);
    /* Partials that cannot be allocated: TT_ENOMEM, nothing consumed. */
    static char big;
    ck_assert_int_eq(tt_reduce_ranges(&ex, SIZE_MAX / 2, 1, SIZE_MAX / 4, NULL, add_body,
                                      add_combine, NULL, &big),
                     TT_ENOMEM);
    /* Accumulators so large that a slot's size would wrap, one block or
     * many: TT_ENOMEM, never a wrapped size. */
    for (size_t slack = 0; slack < 200; slack += 7) {
        ck_assert_int_eq(tt_reduce_ranges(&ex, 1, 1, SIZE_MAX - slack, NULL, add_body,
                                          add_combine, NULL, &big),
                         TT_ENOMEM);
        ck_assert_int_eq(tt_reduce_ranges(&ex, 3, 1, SIZE_MAX - slack, NULL, add_body,
                                          add_combine, NULL, &big),
                         TT_ENOMEM);
    }
    ck_assert(r == -1.0 && idx == 5);
    /* The token is still usable: the reduction runs and consumes it. */
    ck_assert_int_eq(tt_reduce_ranges(&ex, 1000, 10, sizeof r, NULL, add_body, add_combine,
                                      NULL, &r),
                     TT_OK);
    ck_assert(r == 1000.0);
    r = -1.0;
    ck_assert_int_eq(tt_reduce_ranges(&ex, 1000, 10, sizeof r, NULL, add_body, add_combine,
                                      NULL, &r),
                     TT_ECONSUMED);
    ck_assert_int_eq(tt_reduce_sum_d(&ex, 10, 1, slice_sum, &r, &r), TT_ECONSUMED);
    ck_assert_int_eq(tt_reduce_minloc_d(&ex, &r, 1, 1, &r, &idx), TT_ECONSUMED);
    ck_assert(r == -1.0 && idx == 5);
    /* len 0: the identity (init's), and the token is consumed. */
    ck_assert_int_eq(tt_exec_init(&ex, p, 2), TT_OK);
    ck_assert_int_eq(tt_reduce_ranges(&ex, 0, 10, sizeof r, seven_init, add_body, add_combine,
                                      NULL, &r),
                     TT_OK);
    ck_assert(r == 7.0);
    ck_assert_int_eq(tt_reduce_sum_d(&ex, 0, 1, slice_sum, NULL, &r), TT_ECONSUMED);
    /* init runs for every block: 7 per block on top of the counts. */
    ck_assert_int_eq(tt_exec_init(&ex, p, 2), TT_OK);
    ck_assert_int_eq(tt_reduce_ranges(&ex, 1000, 100, sizeof r, seven_init, add_body,
                                      add_combine, NULL, &r),
                     TT_OK);
    ck_assert(r == 1000.0 + 7.0 * 10);
    /* An invalid token. */
    tt_exec bad;
    memset(&bad, 0, sizeof bad);
    ck_assert_int_eq(tt_reduce_sum_d(&bad, 10, 1, slice_sum, &r, &r), TT_EINVAL);
    ck_assert_int_eq(tt_reduce_sum_d(NULL, 10, 1, slice_sum, &r, &r), TT_EINVAL);
    th_free_pool(p);
}
END_TEST

/* The partials of many blocks live in one allocation: when it fails the
 * reduction returns TT_ENOMEM, consumes nothing and writes nothing, and the
 * same token then runs it. */
START_TEST(partials_allocation_fails)
{
    tt_pool *p = th_make_pool(2);
    size_t len = 20000;
    double *x = make_data(len, 7);
    double want = ref_sum(x, len, 1), got = -1.0;
    tt_exec ex;
    /* A first reduction builds whatever the pool builds on its first root. */
    ck_assert_int_eq(tt_exec_init(&ex, p, 2), TT_OK);
    check_sum_on(&ex, x, len, 1, want, "warm");
    ck_assert_int_eq(tt_exec_init(&ex, p, 2), TT_OK);
    tt__fault_inject(1, 0);
    int rc = tt_reduce_sum_d(&ex, len, 1, slice_sum, x, &got);
    tt__fault_inject(0, 0);
    ck_assert_msg(rc == TT_ENOMEM, "%s", tt_status_name(rc));
    ck_assert(got == -1.0);
    check_sum_on(&ex, x, len, 1, want, "after the failure");
    /* Few partials stay on the caller's stack: no allocation to fail. */
    ck_assert_int_eq(tt_exec_init(&ex, p, 2), TT_OK);
    tt__fault_inject(1, 0);
    rc = tt_reduce_sum_d(&ex, len, len / 8, slice_sum, x, &got);
    tt__fault_inject(0, 0);
    ck_assert_msg(rc == TT_OK, "%s", tt_status_name(rc));
    ck_assert(same_bits(got, ref_sum(x, len, len / 8)));
    free(x);
    th_free_pool(p);
}
END_TEST

static Suite *reduce_suite(void)
{
    Suite *s = suite_create("reduce");
    TCase *tc = tcase_create("reduce");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, sum_bits_every_budget_and_width);
    tcase_add_test(tc, sum_bits_many_runs);
    tcase_add_test(tc, sum_from_tasks_and_scopes);
    tcase_add_test(tc, user_combine_struct);
    tcase_add_test(tc, minloc_maxloc_ties_lowest_index);
    tcase_add_test(tc, errors_and_consumption);
    tcase_add_test(tc, partials_allocation_fails);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return th_run_suite(reduce_suite()); }
