/*
 * test_ranges.c -- tt_for_ranges: every index of [0, len) exactly once (a
 * counter per index), at most `budget` body calls, every range at least
 * `grain` long except a single range when len < grain, the ranges
 * contiguous, over a grid of (len, grain, budget) on a pool wider than the
 * machine; huge lengths without overflow; nested ranges from a member;
 * single ranges inline on the caller.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "tt_test.h"

#define MAX_CALLS 64

typedef struct range_rec {
    _Atomic unsigned char *hits; /* one counter per index (NULL: none) */
    size_t len;
    _Atomic int calls;
    _Atomic size_t begin[MAX_CALLS], end[MAX_CALLS];
    _Atomic int on_caller[MAX_CALLS];
    _Atomic int overflow;
    pthread_t caller;
    tt_live live;
} range_rec;

static void rec_init(range_rec *r, size_t len, bool hits)
{
    memset(r, 0, sizeof *r);
    r->len = len;
    r->caller = pthread_self();
    tt_live_init(&r->live);
    if (hits && len) {
        r->hits = calloc(len, 1);
        ck_assert_ptr_nonnull(r->hits);
    }
}

static void rec_free(range_rec *r)
{
    free((void *)r->hits);
    r->hits = NULL;
}

static void body_rec(void *arg, size_t b, size_t e)
{
    range_rec *r = arg;
    tt_live_enter(&r->live);
    int c = atomic_fetch_add(&r->calls, 1);
    if (c < MAX_CALLS) {
        atomic_store(&r->begin[c], b);
        atomic_store(&r->end[c], e);
        atomic_store(&r->on_caller[c], pthread_equal(pthread_self(), r->caller));
    } else {
        atomic_fetch_add(&r->overflow, 1);
    }
    if (r->hits) {
        for (size_t i = b; i < e && i < r->len; i++)
            atomic_fetch_add(&r->hits[i], 1);
    }
    tt_spin_us(1);
    tt_live_leave(&r->live);
}

static int cmp_begin(const void *a, const void *b)
{
    const size_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* Check the ranges of one call; msg names the case. Test thread only. */
static void check_ranges(range_rec *r, size_t len, size_t grain, unsigned budget, const char *msg)
{
    int calls = atomic_load(&r->calls);
    TT_REQUIRE(atomic_load(&r->overflow) == 0, "%s: more than %d body calls", msg, MAX_CALLS);
    if (len == 0) {
        TT_REQUIRE(calls == 0, "%s: len 0 ran %d bodies", msg, calls);
        return;
    }
    TT_REQUIRE(calls >= 1 && (unsigned)calls <= budget, "%s: %d body calls for budget %u", msg,
                  calls, budget);
    TT_REQUIRE(tt_live_max(&r->live) <= (int)budget, "%s: %d bodies at once, budget %u", msg,
                  tt_live_max(&r->live), budget);
    size_t rs[MAX_CALLS][2];
    for (int c = 0; c < calls; c++) {
        rs[c][0] = atomic_load(&r->begin[c]);
        rs[c][1] = atomic_load(&r->end[c]);
        TT_REQUIRE(rs[c][0] < rs[c][1], "%s: empty or reversed range [%zu, %zu)", msg,
                      rs[c][0], rs[c][1]);
        size_t n = rs[c][1] - rs[c][0];
        if (calls > 1)
            TT_REQUIRE(n >= grain, "%s: range [%zu, %zu) shorter than grain %zu", msg,
                          rs[c][0], rs[c][1], grain);
    }
    if (calls == 1 && len >= grain)
        TT_REQUIRE(rs[0][1] - rs[0][0] >= grain, "%s: the single range is short", msg);
    if (len < grain)
        TT_REQUIRE(calls == 1, "%s: len %zu < grain %zu but %d ranges", msg, len, grain, calls);
    /* contiguous: sorted by begin, each starts where the previous ended */
    qsort(rs, (size_t)calls, sizeof rs[0], cmp_begin);
    TT_REQUIRE(rs[0][0] == 0, "%s: the first range starts at %zu", msg, rs[0][0]);
    for (int c = 1; c < calls; c++)
        TT_REQUIRE(rs[c][0] == rs[c - 1][1], "%s: gap or overlap at %zu/%zu", msg,
                      rs[c - 1][1], rs[c][0]);
    TT_REQUIRE(rs[calls - 1][1] == len, "%s: the last range ends at %zu, len %zu", msg,
                  rs[calls - 1][1], len);
    if (r->hits) {
        for (size_t i = 0; i < len; i++)
            TT_REQUIRE(atomic_load(&r->hits[i]) == 1, "%s: index %zu covered %d times", msg, i,
                          (int)atomic_load(&r->hits[i]));
    }
    if (calls == 1)
        TT_REQUIRE(atomic_load(&r->on_caller[0]), "%s: a single range ran off the caller",
                      msg);
#if !TT_PARALLEL_ENABLED
    for (int c = 0; c < calls; c++)
        TT_REQUIRE(atomic_load(&r->on_caller[c]), "%s: a range ran off the caller", msg);
#endif
}

START_TEST(test_ranges_grid)
{
    tt_pool *pool = tt_make_pool(8);
    static const size_t lens[] = {0, 1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 63, 64, 65, 100, 257, 1000, 4097};
    static const size_t grains[] = {1, 2, 3, 7, 16, 64, 1000, 5000};
    unsigned rounds = tt_iters(3);
    unsigned n = 0;
    range_rec *r = malloc(sizeof *r);
    ck_assert_ptr_nonnull(r);
    for (unsigned round = 0; round < rounds; round++) {
        for (size_t li = 0; li < TT_ARRAY_LEN(lens); li++) {
            for (size_t gi = 0; gi < TT_ARRAY_LEN(grains); gi++) {
                for (unsigned b = 1; b <= 8; b++) {
                    /* quick mode: a subset of budgets */
                    if (tt_test_quick() && b != 1 && b != 3 && b != 8)
                        continue;
                    tt_exec ex;
                    ck_assert_int_eq(tt_exec_init(&ex, pool, b), TT_OK);
                    unsigned eb = tt_exec_budget(&ex);
                    rec_init(r, lens[li], true);
                    int rc = tt_for_ranges(&ex, lens[li], grains[gi], body_rec, r);
                    char msg[96];
                    snprintf(msg, sizeof msg, "len %zu, grain %zu, budget %u", lens[li],
                             grains[gi], eb);
                    ck_assert_msg(rc == TT_OK, "%s: %s", msg, tt_status_name(rc));
                    check_ranges(r, lens[li], grains[gi], eb, msg);
                    rec_free(r);
                    n++;
                }
            }
        }
    }
    free(r);
    tt_free_pool(pool);
    ck_assert_uint_gt(n, 0);
}
END_TEST

START_TEST(test_ranges_random)
{
    tt_pool *pool = tt_make_pool(8);
    uint64_t seed = 0x5eed0001u;
    unsigned iters = tt_iters(3000);
    range_rec *r = malloc(sizeof *r);
    ck_assert_ptr_nonnull(r);
    for (unsigned it = 0; it < iters; it++) {
        uint64_t s = tt_seed_child(seed, it);
        size_t len = tt_rng_below(&s, 3) == 0 ? tt_rng_below(&s, 20) : tt_rng_below(&s, 5000);
        size_t grain = 1 + tt_rng_below(&s, tt_rng_below(&s, 2) ? 10 : 2000);
        unsigned b = 1 + tt_rng_below(&s, 8);
        tt_exec ex;
        ck_assert_int_eq(tt_exec_init(&ex, pool, b), TT_OK);
        rec_init(r, len, true);
        ck_assert_int_eq(tt_for_ranges(&ex, len, grain, body_rec, r), TT_OK);
        char msg[128];
        snprintf(msg, sizeof msg, "seed 0x%llx iter %u: len %zu, grain %zu, budget %u",
                 (unsigned long long)seed, it, len, grain, tt_exec_budget(&ex));
        check_ranges(r, len, grain, tt_exec_budget(&ex), msg);
        rec_free(r);
    }
    free(r);
    tt_free_pool(pool);
}
END_TEST

START_TEST(test_ranges_huge_len)
{
    /* no index memory: only the range arithmetic (no overflow near SIZE_MAX) */
    tt_pool *pool = tt_make_pool(8);
    static const size_t cases[][2] = {
        {SIZE_MAX, 1}, {SIZE_MAX, SIZE_MAX / 2}, {SIZE_MAX, SIZE_MAX / 3}, {SIZE_MAX - 1, 7},
        {SIZE_MAX, SIZE_MAX}, {SIZE_MAX / 2 + 1, SIZE_MAX / 4}, {(size_t)1 << 40, 1},
    };
    range_rec *r = malloc(sizeof *r);
    ck_assert_ptr_nonnull(r);
    for (size_t c = 0; c < TT_ARRAY_LEN(cases); c++) {
        for (unsigned b = 1; b <= 8; b *= 2) {
            tt_exec ex;
            ck_assert_int_eq(tt_exec_init(&ex, pool, b), TT_OK);
            rec_init(r, cases[c][0], false);
            ck_assert_int_eq(tt_for_ranges(&ex, cases[c][0], cases[c][1], body_rec, r), TT_OK);
            char msg[96];
            snprintf(msg, sizeof msg, "len %zu, grain %zu, budget %u", cases[c][0], cases[c][1],
                     tt_exec_budget(&ex));
            check_ranges(r, cases[c][0], cases[c][1], tt_exec_budget(&ex), msg);
        }
    }
    free(r);
    tt_free_pool(pool);
}
END_TEST

START_TEST(test_ranges_serial_and_limited)
{
    tt_pool *pool = tt_make_pool(4);
    range_rec *r = malloc(sizeof *r);
    ck_assert_ptr_nonnull(r);
    /* a serial token: one range [0, len) on the caller */
    tt_exec s;
    tt_exec_init_serial(&s);
    rec_init(r, 1000, true);
    ck_assert_int_eq(tt_for_ranges(&s, 1000, 1, body_rec, r), TT_OK);
    check_ranges(r, 1000, 1, 1, "serial token");
    ck_assert_int_eq(atomic_load(&r->calls), 1);
    rec_free(r);
    /* a limited reborrow: at most the limit */
    tt_exec p, c;
    ck_assert_int_eq(tt_exec_init(&p, pool, 4), TT_OK);
    for (unsigned lim = 1; lim <= 4; lim++) {
        tt_exec_reborrow(&p, &c);
        tt_exec_limit(&c, lim);
        unsigned eb = tt_exec_budget(&c);
        rec_init(r, 999, true);
        ck_assert_int_eq(tt_for_ranges(&c, 999, 1, body_rec, r), TT_OK);
        char msg[64];
        snprintf(msg, sizeof msg, "limit %u", lim);
        check_ranges(r, 999, 1, eb, msg);
        rec_free(r);
    }
    tt_exec_finish(&p);
    free(r);
    tt_free_pool(pool);
}
END_TEST

/* Ranges from a member: inside fork jobs, on the child token. */
typedef struct nested_ranges {
    size_t len, grain;
    range_rec recs[8];
    _Atomic unsigned budget[8];
    _Atomic int rc[8];
} nested_ranges;

static void job_ranges(void *arg, unsigned i, tt_exec *child)
{
    nested_ranges *n = arg;
    /* The caller of a nested call is this job's thread: a single range must run here. */
    n->recs[i].caller = pthread_self();
    atomic_store(&n->budget[i], tt_exec_budget(child));
    atomic_store(&n->rc[i], tt_for_ranges(child, n->len, n->grain, body_rec, &n->recs[i]));
}

START_TEST(test_ranges_nested)
{
    tt_pool *pool = tt_make_pool(8);
    static const unsigned cases[][4] = {
        /* root budget, jobs, len, grain */
        {8, 2, 1000, 1}, {8, 3, 100, 10}, {8, 4, 7, 1}, {6, 2, 5, 10}, {8, 8, 64, 4}, {8, 1, 333, 2},
    };
    nested_ranges *n = malloc(sizeof *n);
    ck_assert_ptr_nonnull(n);
    for (size_t c = 0; c < TT_ARRAY_LEN(cases); c++) {
        unsigned jobs = cases[c][1];
        n->len = cases[c][2];
        n->grain = cases[c][3];
        for (unsigned j = 0; j < jobs; j++) {
            rec_init(&n->recs[j], n->len, true);
            atomic_store(&n->rc[j], -1);
        }
        tt_exec ex;
        ck_assert_int_eq(tt_exec_init(&ex, pool, cases[c][0]), TT_OK);
        ck_assert_int_eq(tt_fork(&ex, jobs, job_ranges, n), TT_OK);
        for (unsigned j = 0; j < jobs; j++) {
            char msg[96];
            snprintf(msg, sizeof msg, "case %zu job %u (child budget %u)", c, j,
                     atomic_load(&n->budget[j]));
            ck_assert_msg(atomic_load(&n->rc[j]) == TT_OK, "%s: %s", msg,
                          tt_status_name(atomic_load(&n->rc[j])));
            check_ranges(&n->recs[j], n->len, n->grain, atomic_load(&n->budget[j]), msg);
            rec_free(&n->recs[j]);
        }
    }
    free(n);
    tt_free_pool(pool);
}
END_TEST

static Suite *ranges_suite(void)
{
    Suite *s = suite_create("ranges");
    TCase *tc = tt_tcase(s, "grid", 120);
    tcase_add_test(tc, test_ranges_grid);
    tcase_add_test(tc, test_ranges_random);
    tcase_add_test(tc, test_ranges_huge_len);
    tc = tt_tcase(s, "tokens", 60);
    tcase_add_test(tc, test_ranges_serial_and_limited);
    tcase_add_test(tc, test_ranges_nested);
    return s;
}

int main(void) { return tt_run_suite(ranges_suite()); }
