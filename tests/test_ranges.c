/*
 * test_ranges.c -- tt_for_ranges: every index of [0, len) exactly once (a
 * counter per index), at most `budget` body calls, every range at least
 * `grain` long except a single range when len < grain, the ranges
 * contiguous, over a grid of (len, grain, budget) on a pool wider than the
 * machine; huge lengths without overflow; nested ranges from a member;
 * single ranges inline on the caller. tt_for_ranges_dynamic: exactly the
 * chunks of `grain`, every index once, at most `budget` at once, over a
 * grid; an irregular loop balanced; every kind of token.
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
    th_live live;
} range_rec;

static void rec_init(range_rec *r, size_t len, bool hits)
{
    memset(r, 0, sizeof *r);
    r->len = len;
    r->caller = pthread_self();
    th_live_init(&r->live);
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
    th_live_enter(&r->live);
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
    th_spin_us(1);
    th_live_leave(&r->live);
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
    TT_REQUIRE(th_live_max(&r->live) <= (int)budget, "%s: %d bodies at once, budget %u", msg,
                  th_live_max(&r->live), budget);
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
    tt_pool *pool = th_make_pool(8);
    static const size_t lens[] = {0, 1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 63, 64, 65, 100, 257, 1000, 4097};
    static const size_t grains[] = {1, 2, 3, 7, 16, 64, 1000, 5000};
    unsigned rounds = th_iters(3);
    unsigned n = 0;
    range_rec *r = malloc(sizeof *r);
    ck_assert_ptr_nonnull(r);
    for (unsigned round = 0; round < rounds; round++) {
        for (size_t li = 0; li < TT_ARRAY_LEN(lens); li++) {
            for (size_t gi = 0; gi < TT_ARRAY_LEN(grains); gi++) {
                for (unsigned b = 1; b <= 8; b++) {
                    /* quick mode: a subset of budgets */
                    if (th_test_quick() && b != 1 && b != 3 && b != 8)
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
    th_free_pool(pool);
    ck_assert_uint_gt(n, 0);
}
END_TEST

START_TEST(test_ranges_random)
{
    tt_pool *pool = th_make_pool(8);
    uint64_t seed = 0x5eed0001u;
    unsigned iters = th_iters(3000);
    range_rec *r = malloc(sizeof *r);
    ck_assert_ptr_nonnull(r);
    for (unsigned it = 0; it < iters; it++) {
        uint64_t s = th_seed_child(seed, it);
        size_t len = th_rng_below(&s, 3) == 0 ? th_rng_below(&s, 20) : th_rng_below(&s, 5000);
        size_t grain = 1 + th_rng_below(&s, th_rng_below(&s, 2) ? 10 : 2000);
        unsigned b = 1 + th_rng_below(&s, 8);
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
    th_free_pool(pool);
}
END_TEST

START_TEST(test_ranges_huge_len)
{
    /* no index memory: only the range arithmetic (no overflow near SIZE_MAX) */
    tt_pool *pool = th_make_pool(8);
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
    th_free_pool(pool);
}
END_TEST

START_TEST(test_ranges_serial_and_limited)
{
    tt_pool *pool = th_make_pool(4);
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
    th_free_pool(pool);
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
    tt_pool *pool = th_make_pool(8);
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
    th_free_pool(pool);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* tt_for_ranges_dynamic                                                     */
/* ------------------------------------------------------------------------ */

typedef struct dyn_rec {
    _Atomic unsigned char *hits;
    size_t len, grain;
    _Atomic size_t calls;
    _Atomic int bad_chunk; /* a call that is not exactly one chunk */
    th_live live;
    th_thread_set threads;
} dyn_rec;

static void dyn_init(dyn_rec *r, size_t len, size_t grain)
{
    memset(r, 0, sizeof *r);
    r->len = len;
    r->grain = grain;
    th_live_init(&r->live);
    th_thread_set_init(&r->threads);
    if (len) {
        r->hits = calloc(len, 1);
        ck_assert_ptr_nonnull(r->hits);
    }
}

static void dyn_free(dyn_rec *r)
{
    free((void *)r->hits);
    r->hits = NULL;
    th_thread_set_destroy(&r->threads);
}

static void dyn_body(void *arg, size_t b, size_t e)
{
    dyn_rec *r = arg;
    th_live_enter(&r->live);
    atomic_fetch_add(&r->calls, 1);
    th_thread_set_add(&r->threads, pthread_self());
    size_t want = r->len - b < r->grain ? r->len : b + r->grain;
    if (b % r->grain != 0 || e != want || b >= r->len)
        atomic_fetch_add(&r->bad_chunk, 1);
    for (size_t i = b; i < e && i < r->len; i++)
        atomic_fetch_add(&r->hits[i], 1);
    th_live_leave(&r->live);
}

/* Chunks of exactly `grain` (the last shorter), one call each, every index
 * once, at most `budget` bodies at once and on at most min(budget, chunks)
 * threads. */
static void check_dyn(dyn_rec *r, unsigned budget, const char *msg)
{
    size_t chunks = r->len / r->grain + (r->len % r->grain != 0);
    TT_REQUIRE(atomic_load(&r->calls) == chunks, "%s: %zu calls for %zu chunks", msg,
               atomic_load(&r->calls), chunks);
    TT_REQUIRE(atomic_load(&r->bad_chunk) == 0, "%s: %d calls were not a chunk", msg,
               atomic_load(&r->bad_chunk));
    for (size_t i = 0; i < r->len; i++)
        TT_REQUIRE(atomic_load(&r->hits[i]) == 1, "%s: index %zu covered %d times", msg, i,
                   (int)atomic_load(&r->hits[i]));
    TT_REQUIRE(th_live_max(&r->live) <= (int)budget, "%s: %d bodies at once, budget %u", msg,
               th_live_max(&r->live), budget);
    unsigned tasks = chunks < budget ? (unsigned)chunks : budget;
    TT_REQUIRE(th_thread_set_size(&r->threads) <= (chunks ? tasks : 0),
               "%s: %u threads for %u tasks", msg, th_thread_set_size(&r->threads), tasks);
}

START_TEST(test_dynamic_grid)
{
    tt_pool *pool = th_make_pool(6);
    static const size_t lens[] = {0, 1, 2, 3, 7, 8, 9, 63, 64, 65, 100, 1000, 4097};
    static const size_t grains[] = {1, 2, 3, 7, 16, 64, 5000};
    dyn_rec *r = malloc(sizeof *r);
    ck_assert_ptr_nonnull(r);
    unsigned n = 0;
    for (unsigned round = 0; round < th_iters(2); round++) {
        for (size_t li = 0; li < TT_ARRAY_LEN(lens); li++) {
            for (size_t gi = 0; gi < TT_ARRAY_LEN(grains); gi++) {
                for (unsigned b = 1; b <= 6; b++) {
                    if (th_test_quick() && b != 1 && b != 2 && b != 6)
                        continue;
                    tt_exec ex;
                    ck_assert_int_eq(tt_exec_init(&ex, pool, b), TT_OK);
                    unsigned eb = tt_exec_budget(&ex);
                    dyn_init(r, lens[li], grains[gi]);
                    int rc = tt_for_ranges_dynamic(&ex, lens[li], grains[gi], dyn_body, r);
                    char msg[96];
                    snprintf(msg, sizeof msg, "dynamic: len %zu, grain %zu, budget %u", lens[li],
                             grains[gi], eb);
                    ck_assert_msg(rc == TT_OK, "%s: %s", msg, tt_status_name(rc));
                    check_dyn(r, eb, msg);
                    ck_assert_int_eq(tt_for_ranges_dynamic(&ex, 1, 1, dyn_body, r),
                                     TT_ECONSUMED);
#if TT_LEDGER_ENABLED
                    ck_assert_uint_le(tt_ledger_max_live(tt_exec_ledger_root(&ex)), eb);
#endif
                    dyn_free(r);
                    n++;
                }
            }
        }
    }
    free(r);
    th_free_pool(pool);
    ck_assert_uint_gt(n, 0);
}
END_TEST

/* An irregular loop: chunk 0 is long and cannot end before every other
 * chunk has (it waits for them, with a timeout). Handed out first come,
 * first served, the other tasks run them meanwhile; with fixed ranges the
 * chunks after 0 in its own range would wait behind it for good. */
typedef struct irregular {
    size_t len;
    _Atomic size_t done;
    _Atomic int timed_out;
    _Atomic int calls;
} irregular;

static TT_TEST_UNUSED void irregular_body(void *arg, size_t b, size_t e)
{
    irregular *g = arg;
    atomic_fetch_add(&g->calls, 1);
    if (b == 0) {
        uint64_t end = th_now_ns() + (uint64_t)(th_timeout(10) * 1e9);
        while (atomic_load(&g->done) < g->len - (e - b) && th_now_ns() < end)
            th_sleep_us(100);
        if (atomic_load(&g->done) < g->len - (e - b))
            atomic_store(&g->timed_out, 1);
    } else {
        th_spin_us((unsigned)(b % 7)); /* uneven, short */
    }
    atomic_fetch_add(&g->done, e - b);
}

START_TEST(test_dynamic_irregular)
{
#if TT_PARALLEL_ENABLED
    tt_pool *pool = th_make_pool(3);
    for (unsigned b = 2; b <= tt_pool_width(pool); b++) {
        for (unsigned round = 0; round < th_iters(10); round++) {
            tt_exec ex;
            ck_assert_int_eq(tt_exec_init(&ex, pool, b), TT_OK);
            irregular g = {.len = 200};
            ck_assert_int_eq(tt_for_ranges_dynamic(&ex, g.len, 4, irregular_body, &g), TT_OK);
            ck_assert_msg(!atomic_load(&g.timed_out),
                          "budget %u: the long chunk's task held the other chunks", b);
            ck_assert_uint_eq(atomic_load(&g.done), g.len);
            ck_assert_int_eq(atomic_load(&g.calls), 50);
        }
    }
    th_free_pool(pool);
#endif
}
END_TEST

/* Tokens of every kind: serial, limited reborrows, fork children (members)
 * and a token with team authority; errors consume nothing. */
typedef struct dyn_jobs {
    dyn_rec recs[4];
    _Atomic unsigned budget[4];
    _Atomic int rc[4];
} dyn_jobs;

static void dyn_job(void *arg, unsigned i, tt_exec *child)
{
    dyn_jobs *d = arg;
    atomic_store(&d->budget[i], tt_exec_budget(child));
    atomic_store(&d->rc[i], tt_for_ranges_dynamic(child, d->recs[i].len, d->recs[i].grain,
                                                  dyn_body, &d->recs[i]));
}

static void dyn_scope(void *arg, tt_scope *scope)
{
    dyn_rec *r = arg;
    tt_exec t;
    int rc = tt_for_ranges_dynamic(tt_scope_reborrow(scope, &t), r->len, r->grain, dyn_body, r);
    TT_CHECK(rc == TT_OK, "dynamic on a team token: %s", tt_status_name(rc));
    rc = tt_for_ranges_dynamic(tt_scope_reborrow(scope, &t), 0, 3, dyn_body, r);
    TT_CHECK(rc == TT_OK, "dynamic len 0 on a team token: %s", tt_status_name(rc));
    TT_CHECK(tt_for_ranges_dynamic(&t, 1, 1, dyn_body, r) == TT_ECONSUMED, "len 0 consumes");
}

START_TEST(test_dynamic_tokens)
{
    tt_pool *pool = th_make_pool(4);
    unsigned w = tt_pool_width(pool);
    dyn_rec *r = malloc(sizeof *r);
    ck_assert_ptr_nonnull(r);
    tt_exec ex;
    ck_assert_int_eq(tt_exec_init(&ex, pool, w), TT_OK);
    ck_assert_int_eq(tt_for_ranges_dynamic(&ex, 10, 0, dyn_body, r), TT_EINVAL);
    ck_assert_int_eq(tt_for_ranges_dynamic(&ex, 10, 1, NULL, r), TT_EINVAL);
    ck_assert_int_eq(tt_for_ranges_dynamic(NULL, 10, 1, dyn_body, r), TT_EINVAL);
    ck_assert_int_eq(tt_for_ranges_dynamic(&ex, 0, 1, dyn_body, r), TT_OK); /* consumes */
    ck_assert_int_eq(tt_for_ranges_dynamic(&ex, 10, 1, dyn_body, r), TT_ECONSUMED);
    tt_exec s;
    tt_exec_init_serial(&s);
    dyn_init(r, 100, 7);
    ck_assert_int_eq(tt_for_ranges_dynamic(&s, 100, 7, dyn_body, r), TT_OK);
    check_dyn(r, 1, "serial token");
    dyn_free(r);
    tt_exec p, c;
    ck_assert_int_eq(tt_exec_init(&p, pool, w), TT_OK);
    for (unsigned lim = 1; lim <= w; lim++) {
        tt_exec_reborrow(&p, &c);
        tt_exec_limit(&c, lim);
        dyn_init(r, 999, 5);
        ck_assert_int_eq(tt_for_ranges_dynamic(&c, 999, 5, dyn_body, r), TT_OK);
        check_dyn(r, tt_exec_budget(&c), "limited reborrow");
        dyn_free(r);
    }
    tt_exec_finish(&p);
    /* fork children (members) */
    dyn_jobs *d = malloc(sizeof *d);
    ck_assert_ptr_nonnull(d);
    for (unsigned j = 0; j < 2; j++)
        dyn_init(&d->recs[j], 300 + j, 3 + j);
    ck_assert_int_eq(tt_exec_init(&ex, pool, w), TT_OK);
    ck_assert_int_eq(tt_fork(&ex, 2, dyn_job, d), TT_OK);
    for (unsigned j = 0; j < 2; j++) {
        ck_assert_int_eq(atomic_load(&d->rc[j]), TT_OK);
        check_dyn(&d->recs[j], atomic_load(&d->budget[j]), "fork child");
        dyn_free(&d->recs[j]);
    }
    free(d);
    /* a token with team authority */
    dyn_init(r, 500, 3);
    ck_assert_int_eq(tt_exec_init(&ex, pool, w), TT_OK);
    ck_assert_int_eq(tt_team_scope(&ex, dyn_scope, r), TT_OK);
    check_dyn(r, w, "team token");
    dyn_free(r);
    th_assert_no_failures();
    free(r);
    th_free_pool(pool);
}
END_TEST

static Suite *ranges_suite(void)
{
    Suite *s = suite_create("ranges");
    TCase *tc = th_tcase(s, "grid", 120);
    tcase_add_test(tc, test_ranges_grid);
    tcase_add_test(tc, test_ranges_random);
    tcase_add_test(tc, test_ranges_huge_len);
    tc = th_tcase(s, "tokens", 60);
    tcase_add_test(tc, test_ranges_serial_and_limited);
    tcase_add_test(tc, test_ranges_nested);
    tc = th_tcase(s, "dynamic", 120);
    tcase_add_test(tc, test_dynamic_grid);
    tcase_add_test(tc, test_dynamic_irregular);
    tcase_add_test(tc, test_dynamic_tokens);
    return s;
}

int main(void) { return th_run_suite(ranges_suite()); }
