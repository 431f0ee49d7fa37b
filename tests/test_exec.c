/*
 * test_exec.c -- the token: minting, every entry's error codes, one use and
 * no copies, reborrow and limit, refusals that consume nothing, the status
 * strings, tokens used on the wrong thread, lazy and inline entries (no
 * thread is started for them), and the basics of pool shutdown.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "tt_test.h"

#include <limits.h>
#include <sys/wait.h>

/* ------------------------------------------------------------------------ */
/* Counting pthread_create: a process that only uses serial tokens, budget-1
 * tokens and width-1 pools must start no thread. The definition here
 * interposes on the C library's for every caller in the process (the
 * library, libgomp); it forwards to the real one. Not under TSan, which
 * intercepts pthread_create itself. */
/* ------------------------------------------------------------------------ */
#if defined(__linux__) && !defined(__SANITIZE_THREAD__)
#include <dlfcn.h>
#define TT_HAVE_CREATE_COUNTER 1
static _Atomic long tt_pthread_creates;
typedef int (*tt_create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
int pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg)
{
    static _Atomic(tt_create_fn) real;
    tt_create_fn r = atomic_load(&real);
    if (!r) {
        void *sym = dlsym(RTLD_NEXT, "pthread_create");
        memcpy(&r, &sym, sizeof r); /* POSIX: a function address in a void * */
        atomic_store(&real, r);
    }
    atomic_fetch_add(&tt_pthread_creates, 1);
    return r(t, a, fn, arg);
}
#else
#define TT_HAVE_CREATE_COUNTER 0
#endif

static tt_pool *g_pool4; /* width 4 for the tests that share one */

static void pool4_setup(void) { g_pool4 = th_make_pool(4); }
static void pool4_teardown(void)
{
    th_free_pool(g_pool4);
    g_pool4 = NULL;
}

/* ------------------------------------------------------------------------ */
/* Entries that count what ran                                               */
/* ------------------------------------------------------------------------ */

typedef struct ran {
    _Atomic int calls;
    _Atomic int last_width;
    pthread_t caller;
    _Atomic int off_caller; /* calls that ran on another thread */
} ran;

static void ran_init(ran *r)
{
    atomic_store(&r->calls, 0);
    atomic_store(&r->last_width, -1);
    atomic_store(&r->off_caller, 0);
    r->caller = pthread_self();
}

static void ran_note(ran *r)
{
    atomic_fetch_add(&r->calls, 1);
    if (!pthread_equal(pthread_self(), r->caller))
        atomic_fetch_add(&r->off_caller, 1);
}

static void job_count(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    (void)child;
    ran_note(arg);
}
static void body_count(void *arg, size_t b, size_t e)
{
    (void)b;
    (void)e;
    ran_note(arg);
}
static void bcast_count(void *arg, unsigned i)
{
    (void)i;
    ran_note(arg);
}
static void ext_count(void *arg, unsigned width)
{
    ran *r = arg;
    atomic_store(&r->last_width, (int)width);
    ran_note(r);
}

enum { E_FORK, E_RANGES, E_BCAST, E_EXT, E_COUNT };
static const char *const entry_name[E_COUNT] = {"tt_fork", "tt_for_ranges", "tt_broadcast",
                                                "tt_external"};

static int do_entry(int kind, tt_exec *ex, ran *r)
{
    switch (kind) {
    case E_FORK: return tt_fork(ex, 3, job_count, r);
    case E_RANGES: return tt_for_ranges(ex, 10, 1, body_count, r);
    case E_BCAST: return tt_broadcast(ex, bcast_count, r);
    default: return tt_external(ex, ext_count, r);
    }
}

/* An entry with a NULL function. */
static int do_entry_nullfn(int kind, tt_exec *ex)
{
    switch (kind) {
    case E_FORK: return tt_fork(ex, 3, NULL, NULL);
    case E_RANGES: return tt_for_ranges(ex, 10, 1, NULL, NULL);
    case E_BCAST: return tt_broadcast(ex, NULL, NULL);
    default: return tt_external(ex, NULL, NULL);
    }
}

#define ck_rc(got, want)                                                       \
    ck_assert_msg((got) == (want), "%s: got %s, want %s", #got, tt_status_name(got),     \
                  tt_status_name(want))

/* ------------------------------------------------------------------------ */
/* Minting                                                                   */
/* ------------------------------------------------------------------------ */

START_TEST(test_init_errors)
{
    tt_exec ex;
    ck_rc(tt_exec_init(NULL, g_pool4, 1), TT_EINVAL);
    ck_rc(tt_exec_init(&ex, NULL, 2), TT_EINVAL);
    ck_assert_uint_eq(tt_exec_budget(&ex), 0);
    for (int k = 0; k < E_COUNT; k++) {
        ran r;
        ran_init(&r);
        ck_assert_msg(tt_exec_init(&ex, NULL, 2) == TT_EINVAL, "init NULL pool");
        int rc = do_entry(k, &ex, &r);
        ck_assert_msg(rc == TT_EINVAL, "%s on a token minted for a NULL pool: %s", entry_name[k],
                      tt_status_name(rc));
        ck_assert_int_eq(atomic_load(&r.calls), 0);
        ck_assert_msg(tt_exec_init(&ex, g_pool4, 0) == TT_EINVAL, "budget 0");
        ck_assert_uint_eq(tt_exec_budget(&ex), 0);
        rc = do_entry(k, &ex, &r);
        ck_assert_msg(rc == TT_EINVAL, "%s on a budget-0 token: %s", entry_name[k],
                      tt_status_name(rc));
        ck_assert_int_eq(atomic_load(&r.calls), 0);
    }
    ck_assert(!tt_can_broadcast(&ex));
    ck_assert(!tt_carries_team(&ex));
}
END_TEST

START_TEST(test_budget_clamp)
{
    unsigned w = tt_pool_width(g_pool4);
    ck_assert_uint_eq(w, th_expect_width(4));
    static const unsigned asks[] = {1, 2, 3, 4, 5, 8, 100, UINT_MAX};
    for (size_t i = 0; i < TT_ARRAY_LEN(asks); i++) {
        tt_exec ex;
        ck_rc(tt_exec_init(&ex, g_pool4, asks[i]), TT_OK);
        unsigned want = asks[i] < w ? asks[i] : w;
        ck_assert_msg(tt_exec_budget(&ex) == want, "budget %u on width %u: got %u, want %u",
                      asks[i], w, tt_exec_budget(&ex), want);
        ck_assert(tt_exec_is_serial(&ex) == (want == 1));
        /* the budget stays readable after the token is consumed */
        ran r;
        ran_init(&r);
        ck_rc(tt_fork(&ex, 1, job_count, &r), TT_OK);
        ck_assert_uint_eq(tt_exec_budget(&ex), want);
    }
}
END_TEST

START_TEST(test_serial_token)
{
    tt_exec ex;
    tt_exec_init_serial(&ex);
    ck_assert_uint_eq(tt_exec_budget(&ex), 1);
    ck_assert(tt_exec_is_serial(&ex));
    ck_assert(!tt_carries_team(&ex));
    ck_assert(tt_can_broadcast(&ex));
    ck_assert_uint_eq(tt_exec_budget(NULL), 0);
    ck_assert(!tt_exec_is_serial(NULL));
    ck_assert(!tt_carries_team(NULL));
    ck_assert(!tt_can_broadcast(NULL));

    /* a budget-2 root is not serial (when the build has a width 2) */
    tt_exec r2;
    ck_rc(tt_exec_init(&r2, g_pool4, 2), TT_OK);
    ck_assert(tt_exec_is_serial(&r2) == (th_expect_width(2) == 1));
    tt_exec_finish(&r2);
}
END_TEST

static void job_carries(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    ran *r = arg;
    TT_CHECK(!tt_carries_team(child), "a fork child carries a team");
    tt_exec g;
    tt_exec_reborrow(child, &g);
    TT_CHECK(!tt_carries_team(&g), "a reborrow of a fork child carries a team");
    tt_exec_limit(&g, 1);
    TT_CHECK(!tt_carries_team(&g), "a limited reborrow carries a team");
    tt_exec_finish(&g);
    ran_note(r);
}

START_TEST(test_carries_team_ordinary)
{
    tt_exec ex, c, s;
    ck_rc(tt_exec_init(&ex, g_pool4, 4), TT_OK);
    ck_assert(!tt_carries_team(&ex));
    tt_exec_reborrow(&ex, &c);
    ck_assert(!tt_carries_team(&c));
    tt_exec_limit(&c, 2);
    ck_assert(!tt_carries_team(&c));
    ran r;
    ran_init(&r);
    ck_rc(tt_fork(&c, 4, job_carries, &r), TT_OK);
    ck_assert_int_eq(atomic_load(&r.calls), 4);
    ck_assert(!tt_carries_team(&c)); /* consumed */
    tt_exec_init_serial(&s);
    ck_assert(!tt_carries_team(&s));
    tt_exec_finish(&ex);
    th_assert_no_failures();
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Entry errors                                                              */
/* ------------------------------------------------------------------------ */

START_TEST(test_null_args)
{
    for (int k = 0; k < E_COUNT; k++) {
        ran r;
        ran_init(&r);
        int rc = do_entry(k, NULL, &r);
        ck_assert_msg(rc == TT_EINVAL, "%s(NULL): %s", entry_name[k], tt_status_name(rc));
        tt_exec ex;
        ck_rc(tt_exec_init(&ex, g_pool4, 2), TT_OK);
        rc = do_entry_nullfn(k, &ex);
        ck_assert_msg(rc == TT_EINVAL, "%s with a NULL function: %s", entry_name[k],
                      tt_status_name(rc));
        tt_exec_finish(&ex);
    }
    /* jobs 0 and grain 0 */
    tt_exec ex;
    ran r;
    ran_init(&r);
    ck_rc(tt_exec_init(&ex, g_pool4, 2), TT_OK);
    ck_rc(tt_fork(&ex, 0, job_count, &r), TT_EINVAL);
    ck_rc(tt_for_ranges(&ex, 10, 0, body_count, &r), TT_EINVAL);
    ck_rc(tt_for_ranges(&ex, 0, 0, body_count, &r), TT_EINVAL);
    ck_assert_int_eq(atomic_load(&r.calls), 0);
    tt_exec_finish(&ex);
    /* NULL is harmless where the header allows it */
    tt_exec_finish(NULL);
    ck_assert_ptr_null(tt_exec_limit(NULL, 3));
    ck_assert_ptr_null(tt_exec_reborrow(&ex, NULL));
}
END_TEST

START_TEST(test_uninitialised_token)
{
    static const unsigned char fills[] = {0x00, 0xa5, 0xff, 0x01};
    for (size_t f = 0; f < TT_ARRAY_LEN(fills); f++) {
        for (int k = 0; k < E_COUNT; k++) {
            tt_exec ex;
            memset(&ex, fills[f], sizeof ex);
            ran r;
            ran_init(&r);
            int rc = do_entry(k, &ex, &r);
            ck_assert_msg(rc == TT_EINVAL, "%s on a token filled with 0x%02x: %s", entry_name[k],
                          fills[f], tt_status_name(rc));
            ck_assert_int_eq(atomic_load(&r.calls), 0);
            ck_assert_uint_eq(tt_exec_budget(&ex), 0);
            ck_assert(!tt_can_broadcast(&ex));
            ck_assert(!tt_carries_team(&ex));
            /* limit and finish leave garbage alone */
            tt_exec_limit(&ex, 2);
            tt_exec_finish(&ex);
            rc = do_entry(k, &ex, &r);
            ck_assert_msg(rc == TT_EINVAL, "%s on garbage 0x%02x after limit and finish: %s",
                          entry_name[k], fills[f], tt_status_name(rc));
            ck_assert_int_eq(atomic_load(&r.calls), 0);
        }
    }
}
END_TEST

/* Regression (docs/design/misuse.md, found #9): tt_exec_reborrow read the
 * pool of a garbage parent and crashed; now a reborrow of any fill is a
 * token whose entries return TT_EINVAL. */
START_TEST(test_reborrow_of_uninitialised)
{
    static const unsigned char fills[] = {0x00, 0xa5, 0xff, 0x01};
    for (size_t f = 0; f < TT_ARRAY_LEN(fills); f++) {
        for (int k = 0; k < E_COUNT; k++) {
            tt_exec ex, c;
            memset(&ex, fills[f], sizeof ex);
            ran r;
            ran_init(&r);
            ck_assert_ptr_eq(tt_exec_reborrow(&ex, &c), &c);
            int rc = do_entry(k, &c, &r);
            ck_assert_msg(rc == TT_EINVAL, "%s on a reborrow of garbage 0x%02x: %s",
                          entry_name[k], fills[f], tt_status_name(rc));
            ck_assert_int_eq(atomic_load(&r.calls), 0);
            ck_assert_uint_eq(tt_exec_budget(&c), 0);
        }
    }
}
END_TEST

START_TEST(test_byte_copy)
{
    for (int k = 0; k < E_COUNT; k++) {
        ran r;
        ran_init(&r);
        tt_exec a;
        ck_rc(tt_exec_init(&a, g_pool4, 2), TT_OK);
        tt_exec b = a; /* assignment */
        tt_exec m;
        memcpy(&m, &a, sizeof a);
        ck_assert(!tt_can_broadcast(&b));
        ck_assert(!tt_carries_team(&b));
        int rc = do_entry(k, &b, &r);
        ck_assert_msg(rc == TT_ECOPY, "%s on an assigned copy: %s", entry_name[k],
                      tt_status_name(rc));
        rc = do_entry(k, &m, &r);
        ck_assert_msg(rc == TT_ECOPY, "%s on a memcpy copy: %s", entry_name[k],
                      tt_status_name(rc));
        ck_assert_int_eq(atomic_load(&r.calls), 0);
        /* a reborrow of the copy reports the copy */
        tt_exec c;
        tt_exec_reborrow(&b, &c);
        rc = do_entry(k, &c, &r);
        ck_assert_msg(rc == TT_ECOPY, "%s on a reborrow of a copy: %s", entry_name[k],
                      tt_status_name(rc));
        ck_assert_int_eq(atomic_load(&r.calls), 0);
        /* the original is still usable */
        rc = do_entry(k, &a, &r);
        ck_assert_msg(rc == TT_OK, "%s on the original after copies failed: %s", entry_name[k],
                      tt_status_name(rc));
        ck_assert_int_gt(atomic_load(&r.calls), 0);
    }
    /* a copy of a reborrowed child */
    tt_exec p, c;
    ck_rc(tt_exec_init(&p, g_pool4, 2), TT_OK);
    tt_exec_reborrow(&p, &c);
    tt_exec cc = c;
    ran r;
    ran_init(&r);
    ck_rc(tt_fork(&cc, 2, job_count, &r), TT_ECOPY);
    ck_rc(tt_fork(&c, 2, job_count, &r), TT_OK);
    ck_rc(tt_fork(&p, 2, job_count, &r), TT_OK);
    ck_assert_int_eq(atomic_load(&r.calls), 4);
}
END_TEST

START_TEST(test_consumed_token)
{
    for (int k = 0; k < E_COUNT; k++) {
        for (int k2 = 0; k2 < E_COUNT; k2++) {
            ran r;
            ran_init(&r);
            tt_exec a;
            ck_rc(tt_exec_init(&a, g_pool4, 2), TT_OK);
            ck_rc(do_entry(k, &a, &r), TT_OK);
            int before = atomic_load(&r.calls);
            ck_assert_int_gt(before, 0);
            int rc = do_entry(k2, &a, &r);
            ck_assert_msg(rc == TT_ECONSUMED, "%s after %s: %s", entry_name[k2], entry_name[k],
                          tt_status_name(rc));
            ck_assert_int_eq(atomic_load(&r.calls), before);
            ck_assert(!tt_can_broadcast(&a));
            ck_assert_uint_eq(tt_exec_budget(&a), th_expect_budget(4, 2));
        }
    }
    /* a serial token is one-shot too */
    tt_exec s;
    ran r;
    ran_init(&r);
    tt_exec_init_serial(&s);
    ck_rc(tt_fork(&s, 2, job_count, &r), TT_OK);
    ck_rc(tt_fork(&s, 2, job_count, &r), TT_ECONSUMED);
    ck_assert_int_eq(atomic_load(&r.calls), 2);
}
END_TEST

START_TEST(test_finish)
{
    for (int k = 0; k < E_COUNT; k++) {
        ran r;
        ran_init(&r);
        tt_exec a;
        ck_rc(tt_exec_init(&a, g_pool4, 3), TT_OK);
        tt_exec_finish(&a);
        tt_exec_finish(&a); /* finishing an ended token does nothing */
        int rc = do_entry(k, &a, &r);
        ck_assert_msg(rc == TT_ECONSUMED, "%s after tt_exec_finish: %s", entry_name[k],
                      tt_status_name(rc));
        ck_assert_int_eq(atomic_load(&r.calls), 0);
        ck_assert(!tt_can_broadcast(&a));
        ck_assert_uint_eq(tt_exec_budget(&a), th_expect_budget(4, 3));
        /* a reborrow of a finished parent */
        tt_exec c;
        tt_exec_reborrow(&a, &c);
        rc = do_entry(k, &c, &r);
        ck_assert_msg(rc == TT_ECONSUMED, "%s on a reborrow of a finished token: %s",
                      entry_name[k], tt_status_name(rc));
        ck_assert_int_eq(atomic_load(&r.calls), 0);
    }
    tt_exec s;
    tt_exec_init_serial(&s);
    tt_exec_finish(&s);
    ran r;
    ran_init(&r);
    ck_rc(tt_fork(&s, 1, job_count, &r), TT_ECONSUMED);
    ck_assert_int_eq(atomic_load(&r.calls), 0);
}
END_TEST

START_TEST(test_len_zero_consumes)
{
    ran r;
    ran_init(&r);
    tt_exec a;
    ck_rc(tt_exec_init(&a, g_pool4, 4), TT_OK);
    ck_rc(tt_for_ranges(&a, 0, 1, body_count, &r), TT_OK);
    ck_assert_int_eq(atomic_load(&r.calls), 0);
    for (int k = 0; k < E_COUNT; k++) {
        int rc = do_entry(k, &a, &r);
        ck_assert_msg(rc == TT_ECONSUMED, "%s after a len-0 tt_for_ranges: %s", entry_name[k],
                      tt_status_name(rc));
    }
    ck_assert_int_eq(atomic_load(&r.calls), 0);
    /* also on a serial token, and with a large grain */
    tt_exec s;
    tt_exec_init_serial(&s);
    ck_rc(tt_for_ranges(&s, 0, 1000, body_count, &r), TT_OK);
    ck_rc(tt_for_ranges(&s, 5, 1, body_count, &r), TT_ECONSUMED);
    ck_assert_int_eq(atomic_load(&r.calls), 0);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Limit                                                                     */
/* ------------------------------------------------------------------------ */

START_TEST(test_limit_zero)
{
    for (int k = 0; k < E_COUNT; k++) {
        ran r;
        ran_init(&r);
        tt_exec a;
        ck_rc(tt_exec_init(&a, g_pool4, 4), TT_OK);
        ck_assert_ptr_eq(tt_exec_limit(&a, 0), &a);
        ck_assert(!tt_can_broadcast(&a));
        int rc = do_entry(k, &a, &r);
        ck_assert_msg(rc == TT_EINVAL, "%s after tt_exec_limit(ex, 0): %s", entry_name[k],
                      tt_status_name(rc));
        ck_assert_int_eq(atomic_load(&r.calls), 0);
        tt_exec_finish(&a);
    }
    /* on a serial token too */
    tt_exec s;
    ran r;
    ran_init(&r);
    tt_exec_init_serial(&s);
    tt_exec_limit(&s, 0);
    ck_rc(tt_fork(&s, 1, job_count, &r), TT_EINVAL);
    ck_assert_int_eq(atomic_load(&r.calls), 0);
    tt_exec_finish(&s);
}
END_TEST

typedef struct shares {
    _Atomic unsigned budget_of[64];
    _Atomic int ran_of[64];
    th_thread_set threads;
} shares;

static void job_share(void *arg, unsigned i, tt_exec *child)
{
    shares *s = arg;
    atomic_store(&s->budget_of[i], tt_exec_budget(child));
    atomic_fetch_add(&s->ran_of[i], 1);
    th_thread_set_add(&s->threads, pthread_self());
}

START_TEST(test_limit_narrows)
{
    tt_exec a;
    ck_rc(tt_exec_init(&a, g_pool4, 4), TT_OK);
    unsigned b = tt_exec_budget(&a);
    ck_assert_uint_eq(b, th_expect_budget(4, 4));
    ck_assert_ptr_eq(tt_exec_limit(&a, 8), &a); /* never widens */
    ck_assert_uint_eq(tt_exec_budget(&a), b);
    ck_assert_ptr_eq(tt_exec_limit(&a, 3), &a);
    ck_assert_uint_eq(tt_exec_budget(&a), th_expect_budget(4, 3));
    ck_assert_ptr_eq(tt_exec_limit(&a, 5), &a);
    ck_assert_uint_eq(tt_exec_budget(&a), th_expect_budget(4, 3));
    ck_assert_ptr_eq(tt_exec_limit(&a, 2), &a);
    unsigned nb = tt_exec_budget(&a);
    ck_assert_uint_eq(nb, th_expect_budget(4, 2));

    /* the narrowed token forks as a budget-2 token: 2 tasks of share 1 */
    shares s;
    memset(&s, 0, sizeof s);
    th_thread_set_init(&s.threads);
    ck_rc(tt_fork(&a, 4, job_share, &s), TT_OK);
    for (unsigned i = 0; i < 4; i++) {
        ck_assert_int_eq(atomic_load(&s.ran_of[i]), 1);
        ck_assert_uint_eq(atomic_load(&s.budget_of[i]), 1);
    }
    ck_assert_uint_le(th_thread_set_size(&s.threads), nb);
    th_thread_set_destroy(&s.threads);

    /* a limit on a reborrowed child narrows the child only */
    tt_exec p, c;
    ck_rc(tt_exec_init(&p, g_pool4, 4), TT_OK);
    tt_exec_reborrow(&p, &c);
    tt_exec_limit(&c, 1);
    ck_assert_uint_eq(tt_exec_budget(&c), 1);
    ck_assert(tt_exec_is_serial(&c));
    ck_assert_uint_eq(tt_exec_budget(&p), th_expect_budget(4, 4));
    tt_exec_finish(&c);
    tt_exec_finish(&p);

    /* the serial token stays at 1 */
    tt_exec sx;
    tt_exec_init_serial(&sx);
    tt_exec_limit(&sx, 7);
    ck_assert_uint_eq(tt_exec_budget(&sx), 1);
    tt_exec_finish(&sx);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Reborrow                                                                  */
/* ------------------------------------------------------------------------ */

START_TEST(test_reborrow_basic)
{
    tt_exec p;
    ck_rc(tt_exec_init(&p, g_pool4, 3), TT_OK);
    ran r;
    ran_init(&r);
    for (int round = 0; round < 5; round++) {
        for (int k = 0; k < E_COUNT; k++) {
            tt_exec c;
            ck_assert_ptr_eq(tt_exec_reborrow(&p, &c), &c);
            ck_assert_uint_eq(tt_exec_budget(&c), tt_exec_budget(&p));
            int before = atomic_load(&r.calls);
            int rc = do_entry(k, &c, &r);
            ck_assert_msg(rc == TT_OK, "%s on a reborrow: %s", entry_name[k], tt_status_name(rc));
            ck_assert_int_gt(atomic_load(&r.calls), before);
            /* the child is one-shot */
            rc = do_entry(k, &c, &r);
            ck_assert_msg(rc == TT_ECONSUMED, "second %s on a reborrow: %s", entry_name[k],
                          tt_status_name(rc));
        }
    }
    /* a grandchild, then the child, then the parent */
    tt_exec c, g;
    tt_exec_reborrow(&p, &c);
    tt_exec_reborrow(&c, &g);
    ck_assert_uint_eq(tt_exec_budget(&g), tt_exec_budget(&p));
    ck_rc(tt_fork(&g, 2, job_count, &r), TT_OK);
    ck_rc(tt_fork(&c, 2, job_count, &r), TT_OK);
    /* the parent is usable after its children were consumed */
    int before = atomic_load(&r.calls);
    ck_rc(tt_fork(&p, 3, job_count, &r), TT_OK);
    ck_assert_int_eq(atomic_load(&r.calls), before + 3);
    ck_rc(tt_fork(&p, 3, job_count, &r), TT_ECONSUMED);

    /* a serial parent gives a serial child */
    tt_exec s, sc;
    tt_exec_init_serial(&s);
    tt_exec_reborrow(&s, &sc);
    ck_assert(tt_exec_is_serial(&sc));
    ck_rc(tt_fork(&sc, 2, job_count, &r), TT_OK);
    ck_rc(tt_fork(&s, 2, job_count, &r), TT_OK);
}
END_TEST

START_TEST(test_reborrow_of_consumed)
{
    for (int k = 0; k < E_COUNT; k++) {
        ran r;
        ran_init(&r);
        /* consumed before the reborrow */
        tt_exec p, c;
        ck_rc(tt_exec_init(&p, g_pool4, 2), TT_OK);
        ck_rc(tt_fork(&p, 1, job_count, &r), TT_OK);
        tt_exec_reborrow(&p, &c);
        int rc = do_entry(k, &c, &r);
        ck_assert_msg(rc == TT_ECONSUMED, "%s on a child of a consumed parent: %s",
                      entry_name[k], tt_status_name(rc));
        ck_assert_int_eq(atomic_load(&r.calls), 1);
        /* consumed after the reborrow, before the child's entry */
        tt_exec p2, c2;
        ck_rc(tt_exec_init(&p2, g_pool4, 2), TT_OK);
        tt_exec_reborrow(&p2, &c2);
        ck_rc(tt_fork(&p2, 1, job_count, &r), TT_OK);
        rc = do_entry(k, &c2, &r);
        ck_assert_msg(rc == TT_ECONSUMED, "%s on a child whose parent was consumed since: %s",
                      entry_name[k], tt_status_name(rc));
        ck_assert_int_eq(atomic_load(&r.calls), 2);
        /* through two levels */
        tt_exec p3, c3, g3;
        ck_rc(tt_exec_init(&p3, g_pool4, 2), TT_OK);
        tt_exec_reborrow(&p3, &c3);
        tt_exec_reborrow(&c3, &g3);
        tt_exec_finish(&p3);
        rc = do_entry(k, &g3, &r);
        ck_assert_msg(rc == TT_ECONSUMED, "%s on a grandchild of a finished root: %s",
                      entry_name[k], tt_status_name(rc));
        ck_assert_int_eq(atomic_load(&r.calls), 2);
        ck_assert(!tt_can_broadcast(&g3));
        /* NULL parent */
        tt_exec c4;
        ck_assert_ptr_eq(tt_exec_reborrow(NULL, &c4), &c4);
        rc = do_entry(k, &c4, &r);
        ck_assert_msg(rc == TT_EINVAL, "%s on a reborrow of NULL: %s", entry_name[k],
                      tt_status_name(rc));
        ck_assert_int_eq(atomic_load(&r.calls), 2);
    }
}
END_TEST

/* Inside a reborrowed child's job: entries on the parent are busy. */
typedef struct busy_ctx {
    tt_exec *parent;
    tt_exec *mid; /* for the grandchild case: the child between, or NULL */
    ran r;        /* what ran on the parent (must stay 0) */
    _Atomic int jobs;
} busy_ctx;

static void job_busy(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    (void)child;
    busy_ctx *b = arg;
    atomic_fetch_add(&b->jobs, 1);
    tt_exec *targets[2] = {b->parent, b->mid};
    for (int t = 0; t < 2; t++) {
        tt_exec *x = targets[t];
        if (!x)
            continue;
        const char *who = t == 0 ? "parent" : "middle child";
        int rc = tt_fork(x, 2, job_count, &b->r);
        TT_CHECK(rc == TT_EBUSY, "tt_fork on the %s while its child is inside an entry: %s", who,
                 tt_status_name(rc));
        rc = tt_for_ranges(x, 10, 1, body_count, &b->r);
        TT_CHECK(rc == TT_EBUSY, "tt_for_ranges on the busy %s: %s", who, tt_status_name(rc));
        rc = tt_external(x, ext_count, &b->r);
        TT_CHECK(rc == TT_EBUSY, "tt_external on the busy %s: %s", who, tt_status_name(rc));
        bool can = tt_can_broadcast(x);
        TT_CHECK(!can, "tt_can_broadcast true on the busy %s", who);
        rc = tt_broadcast(x, bcast_count, &b->r);
        /* from a member of the pool the refusal may come first */
        TT_CHECK(rc == TT_EBUSY || rc == TT_REFUSED_CALLER_IN_POOL,
                 "tt_broadcast on the busy %s: %s", who, tt_status_name(rc));
        TT_CHECK(can == (rc == TT_OK), "tt_can_broadcast disagrees with tt_broadcast");
    }
}

static void run_busy_case(unsigned budget, bool grandchild)
{
    busy_ctx b;
    memset(&b, 0, sizeof b);
    ran_init(&b.r);
    tt_exec p, c, g;
    ck_rc(tt_exec_init(&p, g_pool4, budget), TT_OK);
    tt_exec_reborrow(&p, &c);
    b.parent = &p;
    tt_exec *use = &c;
    if (grandchild) {
        tt_exec_reborrow(&c, &g);
        b.mid = &c;
        use = &g;
    }
    unsigned jobs = budget;
    ck_rc(tt_fork(use, jobs, job_busy, &b), TT_OK);
    ck_assert_int_eq(atomic_load(&b.jobs), (int)jobs);
    ck_assert_int_eq(atomic_load(&b.r.calls), 0);
    th_assert_no_failures();
    /* after the child's entry, the parent (and the middle child) work */
    ran r;
    ran_init(&r);
    if (grandchild)
        ck_rc(tt_fork(&c, 2, job_count, &r), TT_OK);
    ck_assert(tt_can_broadcast(&p));
    ck_rc(tt_fork(&p, 2, job_count, &r), TT_OK);
    ck_assert_int_eq(atomic_load(&r.calls), grandchild ? 4 : 2);
}

START_TEST(test_parent_busy_inline)
{
    /* budget 1: the child's job runs inline on this thread */
    run_busy_case(1, false);
    run_busy_case(1, true);
}
END_TEST

START_TEST(test_parent_busy_dispatched)
{
    /* budget 2: the child's jobs run on members (inline without parallel) */
    run_busy_case(2, false);
    run_busy_case(4, true);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Refusals consume nothing                                                  */
/* ------------------------------------------------------------------------ */

static void job_refused_then_used(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    ran *r = arg;
    ran inner;
    ran_init(&inner);
    int rc = tt_broadcast(child, bcast_count, &inner);
    TT_CHECK(rc == TT_REFUSED_FORK_CHILD, "broadcast on a fork child: %s", tt_status_name(rc));
    TT_CHECK(!tt_can_broadcast(child), "tt_can_broadcast true on a fork child");
    TT_CHECK(atomic_load(&inner.calls) == 0, "a refused broadcast ran something");
    /* through a reborrow: refused, then the reborrow works */
    tt_exec g;
    tt_exec_reborrow(child, &g);
    rc = tt_broadcast(&g, bcast_count, &inner);
    TT_CHECK(rc == TT_REFUSED_FORK_CHILD, "broadcast on a reborrowed fork child: %s",
             tt_status_name(rc));
    rc = tt_for_ranges(&g, 8, 1, body_count, &inner);
    TT_CHECK(rc == TT_OK, "tt_for_ranges on a reborrow after a refusal: %s", tt_status_name(rc));
    /* through a limit: refused, then the same token forks */
    tt_exec_limit(child, 1);
    rc = tt_broadcast(child, bcast_count, &inner);
    TT_CHECK(rc == TT_REFUSED_FORK_CHILD, "broadcast on a limited fork child: %s",
             tt_status_name(rc));
    int before = atomic_load(&inner.calls);
    rc = tt_fork(child, 2, job_count, &inner);
    TT_CHECK(rc == TT_OK, "tt_fork on a fork child after refusals: %s", tt_status_name(rc));
    TT_CHECK(atomic_load(&inner.calls) == before + 2, "the fork after a refusal ran %d jobs",
             atomic_load(&inner.calls) - before);
    rc = tt_fork(child, 1, job_count, &inner);
    TT_CHECK(rc == TT_ECONSUMED, "the fork child after its entry: %s", tt_status_name(rc));
    ran_note(r);
}

START_TEST(test_refusal_consumes_nothing)
{
    static const unsigned budgets[] = {1, 2, 4};
    for (size_t bi = 0; bi < TT_ARRAY_LEN(budgets); bi++) {
        ran r;
        ran_init(&r);
        tt_exec ex;
        ck_rc(tt_exec_init(&ex, g_pool4, budgets[bi]), TT_OK);
        unsigned jobs = budgets[bi] == 1 ? 1 : budgets[bi];
        ck_rc(tt_fork(&ex, jobs, job_refused_then_used, &r), TT_OK);
        ck_assert_int_eq(atomic_load(&r.calls), (int)jobs);
        th_assert_no_failures();
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Status strings                                                            */
/* ------------------------------------------------------------------------ */

START_TEST(test_strerror_and_names)
{
    static const char *const names[] = {
        "TT_OK",         "TT_EINVAL",       "TT_ENOMEM",         "TT_EAGAIN",
        "TT_ESHORTTEAM", "TT_ERANGE",       "TT_ECONSUMED",      "TT_ECOPY",
        "TT_EBUSY",      "TT_EFORKED",      "TT_ENOTSUP",        "TT_EWRONGTHREAD",
        "TT_EDESTROYED", "TT_ERUNTIME", "TT_REFUSED_FORK_CHILD", "TT_REFUSED_CALLER_IN_POOL", "TT_REFUSED_UNAVAILABLE",
        "TT_REFUSED_BUSY",
    };
    ck_assert_uint_eq(TT_ARRAY_LEN(names), TT_ARRAY_LEN(th_all_codes));
    ck_assert_int_eq(TT_OK, 0);
    size_t n = TT_ARRAY_LEN(th_all_codes);
    for (size_t i = 0; i < n; i++) {
        int c = th_all_codes[i];
        if (c != TT_OK)
            ck_assert_int_gt(c, 0);
        const char *s = tt_strerror(c);
        ck_assert_ptr_nonnull(s);
        ck_assert_msg(strlen(s) > 3, "tt_strerror(%d) is not a sentence: '%s'", c, s);
        const char *nm = tt_status_name(c);
        ck_assert_ptr_nonnull(nm);
        ck_assert_str_eq(nm, names[i]);
        for (size_t j = 0; j < i; j++) {
            ck_assert_msg(strcmp(s, tt_strerror(th_all_codes[j])) != 0,
                          "tt_strerror(%s) == tt_strerror(%s)", names[i], names[j]);
            ck_assert_int_ne(c, th_all_codes[j]);
        }
    }
    static const int unknown[] = {-1, 14, 31, 36, 999, INT_MAX, INT_MIN};
    for (size_t u = 0; u < TT_ARRAY_LEN(unknown); u++) {
        const char *s = tt_strerror(unknown[u]);
        const char *nm = tt_status_name(unknown[u]);
        ck_assert_ptr_nonnull(s);
        ck_assert_ptr_nonnull(nm);
        ck_assert_uint_gt(strlen(s), 0);
        for (size_t i = 0; i < n; i++) {
            ck_assert_msg(strcmp(s, tt_strerror(th_all_codes[i])) != 0,
                          "unknown code %d has the sentence of %s", unknown[u], names[i]);
            ck_assert_msg(strcmp(nm, names[i]) != 0, "unknown code %d is named %s", unknown[u],
                          names[i]);
        }
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* A task's token used on another thread                                     */
/* ------------------------------------------------------------------------ */

typedef struct wrong_ctx {
    tt_exec *child;
    int kind;
    int rc;
    ran r;
} wrong_ctx;

static void *wrong_thread_main(void *arg)
{
    wrong_ctx *w = arg;
    w->rc = do_entry(w->kind, w->child, &w->r);
    return NULL;
}

typedef struct wrong_job {
    _Atomic int jobs;
    _Atomic int bad;
} wrong_job;

static void job_hand_to_thread(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    wrong_job *wj = arg;
    atomic_fetch_add(&wj->jobs, 1);
    static const int kinds[] = {E_FORK, E_RANGES, E_EXT};
    for (size_t k = 0; k < TT_ARRAY_LEN(kinds); k++) {
        wrong_ctx w;
        memset(&w, 0, sizeof w);
        w.child = child;
        w.kind = kinds[k];
        w.rc = -1;
        ran_init(&w.r);
        pthread_t t;
        if (pthread_create(&t, NULL, wrong_thread_main, &w) != 0) {
            TT_CHECK(0, "pthread_create failed");
            continue;
        }
        pthread_join(t, NULL);
        TT_CHECK(w.rc == TT_EWRONGTHREAD,
                 "%s with a fork child (budget %u) on another pthread: %s (want TT_EWRONGTHREAD)",
                 entry_name[kinds[k]], tt_exec_budget(child), tt_status_name(w.rc));
        TT_CHECK(atomic_load(&w.r.calls) == 0, "%s on the wrong thread ran %d calls",
                 entry_name[kinds[k]], atomic_load(&w.r.calls));
        if (w.rc != TT_EWRONGTHREAD)
            atomic_fetch_add(&wj->bad, 1);
        if (w.rc == TT_OK)
            break; /* the child is consumed now */
    }
}

START_TEST(test_wrongthread_dispatched)
{
#if TT_PARALLEL_ENABLED
    /* children of tasks that run on members (a plain thread's entry) */
    static const unsigned budgets[] = {2, 4};
    for (size_t bi = 0; bi < TT_ARRAY_LEN(budgets); bi++) {
        wrong_job wj;
        memset(&wj, 0, sizeof wj);
        tt_exec ex;
        ck_rc(tt_exec_init(&ex, g_pool4, budgets[bi]), TT_OK);
        ck_rc(tt_fork(&ex, budgets[bi], job_hand_to_thread, &wj), TT_OK);
        ck_assert_int_eq(atomic_load(&wj.jobs), (int)budgets[bi]);
        th_assert_no_failures();
    }
#else
    /* no members without parallel: see test_wrongthread_inline_child */
    ck_assert_uint_eq(tt_pool_width(g_pool4), 1);
#endif
}
END_TEST

/* Regression: a child of a task that runs inline (budget 1, one job, or
 * any fork without parallel) carried no owner, so another thread could use
 * it and run tasks beside the job still live (more than the root's budget).
 * Now such a child is bound to the job's thread like any other. */
START_TEST(test_wrongthread_inline_child)
{
    /* budget 1 (one task inline on this thread), and one job of a budget-2
     * root (one task inline, child budget 2) */
    static const unsigned budgets[] = {1, 2};
    for (size_t bi = 0; bi < TT_ARRAY_LEN(budgets); bi++) {
        wrong_job wj;
        memset(&wj, 0, sizeof wj);
        tt_exec ex;
        ck_rc(tt_exec_init(&ex, g_pool4, budgets[bi]), TT_OK);
        ck_rc(tt_fork(&ex, 1, job_hand_to_thread, &wj), TT_OK);
        ck_assert_int_eq(atomic_load(&wj.jobs), 1);
        th_assert_no_failures();
    }
    wrong_job wj;
    memset(&wj, 0, sizeof wj);
    tt_exec s;
    tt_exec_init_serial(&s);
    ck_rc(tt_fork(&s, 1, job_hand_to_thread, &wj), TT_OK);
    th_assert_no_failures();
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Lazy and inline                                                           */
/* ------------------------------------------------------------------------ */

typedef struct inline_ctx {
    pthread_t caller;
    _Atomic int calls, off_caller, order_bad;
    _Atomic int next_job;
    _Atomic int members; /* calls that ran on a member of pool */
    tt_pool *pool;
    unsigned want_child_budget;
    _Atomic int bad_budget;
} inline_ctx;

static void inline_note(inline_ctx *c)
{
    atomic_fetch_add(&c->calls, 1);
    if (!pthread_equal(pthread_self(), c->caller))
        atomic_fetch_add(&c->off_caller, 1);
    if (c->pool && tt_pool_is_member(c->pool, NULL))
        atomic_fetch_add(&c->members, 1);
}

static void inline_job(void *arg, unsigned i, tt_exec *child)
{
    inline_ctx *c = arg;
    inline_note(c);
    if ((int)i != atomic_fetch_add(&c->next_job, 1))
        atomic_fetch_add(&c->order_bad, 1);
    if (tt_exec_budget(child) != c->want_child_budget)
        atomic_fetch_add(&c->bad_budget, 1);
}
static void inline_body(void *arg, size_t b, size_t e)
{
    inline_ctx *c = arg;
    inline_note(c);
    TT_CHECK(b == 0 && e == 100, "a single inline range is [%zu, %zu)", b, e);
}
static void inline_bcast(void *arg, unsigned i)
{
    inline_ctx *c = arg;
    inline_note(c);
    TT_CHECK(i == 0, "an inline broadcast ran fn(%u)", i);
}
static void inline_ext(void *arg, unsigned w)
{
    inline_ctx *c = arg;
    inline_note(c);
    TT_CHECK(w == 1, "an inline tt_external got width %u", w);
}

static void inline_ctx_init(inline_ctx *c, tt_pool *pool, unsigned want_child_budget)
{
    memset(c, 0, sizeof *c);
    c->caller = pthread_self();
    c->pool = pool;
    c->want_child_budget = want_child_budget;
}

/* Every entry of a budget-1 token (ex minted by `mint`) runs on the caller. */
static void check_all_inline(tt_pool *pool, void (*mint)(tt_exec *, tt_pool *))
{
    inline_ctx c;
    tt_exec ex;
    inline_ctx_init(&c, pool, 1);
    mint(&ex, pool);
    ck_rc(tt_fork(&ex, 5, inline_job, &c), TT_OK);
    ck_assert_int_eq(atomic_load(&c.calls), 5);
    ck_assert_int_eq(atomic_load(&c.order_bad), 0);
    ck_assert_int_eq(atomic_load(&c.bad_budget), 0);
    mint(&ex, pool);
    ck_rc(tt_for_ranges(&ex, 100, 1, inline_body, &c), TT_OK);
    mint(&ex, pool);
    ck_rc(tt_broadcast(&ex, inline_bcast, &c), TT_OK);
    mint(&ex, pool);
    ck_rc(tt_external(&ex, inline_ext, &c), TT_OK);
    ck_assert_int_eq(atomic_load(&c.calls), 8);
    ck_assert_int_eq(atomic_load(&c.off_caller), 0);
    ck_assert_int_eq(atomic_load(&c.members), 0);
    th_assert_no_failures();
}

static void mint_serial(tt_exec *ex, tt_pool *pool)
{
    (void)pool;
    tt_exec_init_serial(ex);
}
static void mint_budget1(tt_exec *ex, tt_pool *pool)
{
    ck_rc(tt_exec_init(ex, pool, 1), TT_OK);
}
static tt_exec g_limit_parent;
static void mint_limited(tt_exec *ex, tt_pool *pool)
{
    (void)pool;
    tt_exec_reborrow(&g_limit_parent, ex);
    tt_exec_limit(ex, 1);
}

START_TEST(test_inline_entries)
{
    check_all_inline(g_pool4, mint_serial);
    check_all_inline(g_pool4, mint_budget1);
    ck_rc(tt_exec_init(&g_limit_parent, g_pool4, 4), TT_OK);
    check_all_inline(g_pool4, mint_limited);
    tt_exec_finish(&g_limit_parent);

    /* one task of a wider token runs inline too: one job, or one range */
    inline_ctx c;
    tt_exec ex;
    unsigned b = th_expect_budget(4, 4);
    inline_ctx_init(&c, g_pool4, b);
    ck_rc(tt_exec_init(&ex, g_pool4, 4), TT_OK);
    ck_rc(tt_fork(&ex, 1, inline_job, &c), TT_OK);
    ck_rc(tt_exec_init(&ex, g_pool4, 4), TT_OK);
    ck_rc(tt_for_ranges(&ex, 100, 51, inline_body, &c), TT_OK); /* 100 < 2 * 51 */
    ck_assert_int_eq(atomic_load(&c.calls), 2);
    ck_assert_int_eq(atomic_load(&c.off_caller), 0);
    ck_assert_int_eq(atomic_load(&c.bad_budget), 0);
    th_assert_no_failures();
}
END_TEST

/* Serial work that must start no thread: serial tokens, width-1 pools,
 * budget-1 tokens, with nesting. Returns the failures seen (and counts the
 * threads inside the jobs). */
typedef struct nothread_ctx {
    int threads_expected;
    _Atomic int bad;
    _Atomic int calls;
} nothread_ctx;

static void nothread_leaf(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    (void)child;
    nothread_ctx *c = arg;
    atomic_fetch_add(&c->calls, 1);
    int n = th_count_threads();
    if (n != c->threads_expected) {
        fprintf(stderr, "inside a serial job: %d threads, want %d\n", n, c->threads_expected);
        atomic_fetch_add(&c->bad, 1);
    }
}

static void nothread_body(void *arg, size_t b, size_t e)
{
    (void)b;
    (void)e;
    nothread_leaf(arg, 0, NULL);
}

static void nothread_bcast(void *arg, unsigned i) { nothread_leaf(arg, i, NULL); }
static void nothread_ext(void *arg, unsigned w) { nothread_leaf(arg, w, NULL); }

static void nothread_job(void *arg, unsigned i, tt_exec *child)
{
    nothread_leaf(arg, i, child);
    tt_exec g;
    tt_exec_reborrow(child, &g);
    if (tt_fork(&g, 3, nothread_leaf, arg) != TT_OK)
        atomic_fetch_add(&((nothread_ctx *)arg)->bad, 1);
    if (tt_for_ranges(child, 50, 3, nothread_body, arg) != TT_OK)
        atomic_fetch_add(&((nothread_ctx *)arg)->bad, 1);
}

static int serial_work(nothread_ctx *c)
{
    int bad = 0;
    tt_exec ex;
    tt_exec_init_serial(&ex);
    bad += tt_fork(&ex, 4, nothread_job, c) != TT_OK;
    tt_exec_init_serial(&ex);
    bad += tt_for_ranges(&ex, 100, 1, nothread_body, c) != TT_OK;
    tt_exec_init_serial(&ex);
    bad += tt_broadcast(&ex, nothread_bcast, c) != TT_OK;
    tt_exec_init_serial(&ex);
    bad += tt_external(&ex, nothread_ext, c) != TT_OK;

    /* width-1 pools start no thread either, and neither do their tokens */
    tt_pool_attr *a = NULL;
    bad += tt_pool_attr_create(&a) != TT_OK;
    bad += tt_pool_attr_set_threads(a, 1) != TT_OK;
    tt_pool *p = NULL;
    bad += tt_pool_create(&p, a) != TT_OK;
    tt_pool_attr_destroy(a);
    if (!p)
        return bad + 1;
    bad += tt_pool_width(p) != 1;
    bad += tt_pool_member_stack_size(p) != 0;
    for (unsigned b = 1; b <= 3; b++) {
        bad += tt_exec_init(&ex, p, b) != TT_OK;
        bad += tt_exec_budget(&ex) != 1;
        bad += tt_fork(&ex, 5, nothread_job, c) != TT_OK;
        bad += tt_exec_init(&ex, p, b) != TT_OK;
        bad += tt_broadcast(&ex, nothread_bcast, c) != TT_OK;
        bad += tt_exec_init(&ex, p, b) != TT_OK;
        bad += tt_external(&ex, nothread_ext, c) != TT_OK;
    }
    tt_wait_counts wc;
    bad += tt_pool_wait_counts(p, &wc) != TT_OK;
    bad += (wc.join_sleeps | wc.barrier_sleeps | wc.member_parks | wc.preemptions | wc.starving |
            wc.wakes) != 0;
    bad += tt_pool_destroy(p) != TT_OK;
    return bad + atomic_load(&c->bad);
}

START_TEST(test_serial_starts_no_thread_forked)
{
    /* In a child process (fork copies one thread only), so that nothing
     * else of this test program is counted. */
    fflush(stdout);
    fflush(stderr);
    /* the verdict comes back through a pipe: under valgrind the child's
     * exit status is valgrind's (it counts the parent's threads' memory as
     * lost in the child) */
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(fds[0]);
        int before = th_count_threads();
        nothread_ctx c = {.threads_expected = 1};
#if TT_HAVE_CREATE_COUNTER
        long creates0 = atomic_load(&tt_pthread_creates);
#endif
        int bad = serial_work(&c);
        int after = th_count_threads();
        if (before != 1 || after != 1) {
            fprintf(stderr, "serial work in a fresh process: %d threads before, %d after\n",
                    before, after);
            bad++;
        }
#if TT_HAVE_CREATE_COUNTER
        long made = atomic_load(&tt_pthread_creates) - creates0;
        if (made != 0) {
            fprintf(stderr, "serial work called pthread_create %ld times\n", made);
            bad++;
        }
#endif
        if (atomic_load(&c.calls) < 50) {
            fprintf(stderr, "serial work ran only %d calls\n", atomic_load(&c.calls));
            bad++;
        }
        char verdict = bad ? 'F' : 'K';
        if (write(fds[1], &verdict, 1) != 1)
            _exit(3);
        close(fds[1]);
        _exit(0);
    }
    close(fds[1]);
    char verdict = 0;
    ssize_t n = read(fds[0], &verdict, 1);
    close(fds[0]);
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(n == 1 && verdict == 'K',
                  "serial work started a thread or failed in a fresh process (verdict '%c', "
                  "status 0x%x)",
                  n == 1 ? verdict : '?', status);
}
END_TEST

START_TEST(test_serial_starts_no_thread_here)
{
    /* In this process: the thread count and pthread_create calls do not
     * move over serial work, whatever ran before. */
    int before = th_count_threads();
    nothread_ctx c = {.threads_expected = before};
#if TT_HAVE_CREATE_COUNTER
    long creates0 = atomic_load(&tt_pthread_creates);
#endif
    int bad = serial_work(&c);
    ck_assert_int_eq(bad, 0);
    ck_assert_int_eq(th_count_threads(), before);
#if TT_HAVE_CREATE_COUNTER
    ck_assert_int_eq(atomic_load(&tt_pthread_creates) - creates0, 0);
#if TT_PARALLEL_ENABLED
    /* the counter sees the library's threads (so the zero above means
     * something): a width-2 pool with dedicated members starts at least one
     * when it is built */
    long c1 = atomic_load(&tt_pthread_creates);
    tt_pool_attr *a = NULL;
    ck_rc(tt_pool_attr_create(&a), TT_OK);
    ck_rc(tt_pool_attr_set_threads(a, 2), TT_OK);
    ck_rc(tt_pool_attr_set_thread_name(a, "ttcnt"), TT_OK);
    tt_pool *p = NULL;
    ck_rc(tt_pool_create(&p, a), TT_OK);
    tt_pool_attr_destroy(a);
    long made = atomic_load(&tt_pthread_creates) - c1;
    th_free_pool(p);
    ck_assert_msg(made >= 1, "the pthread_create counter missed a width-2 pool's threads");
#endif
#endif
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Shutdown basics                                                           */
/* ------------------------------------------------------------------------ */

START_TEST(test_destroy_null)
{
    ck_rc(tt_pool_destroy(NULL), TT_OK);
}
END_TEST

typedef struct destroy_in_member {
    tt_pool *pool;
    th_tbarrier bar;
    _Atomic int jobs, members;
    _Atomic int rcs[8];
    _Atomic int after_init[8];  /* tt_exec_init on the pool after the destroy */
    _Atomic int after_entry[8]; /* an entry on the job's child after it */
} destroy_in_member;

static TT_TEST_UNUSED void job_destroy_self(void *arg, unsigned i, tt_exec *child)
{
    destroy_in_member *d = arg;
    atomic_fetch_add(&d->jobs, 1);
    if (tt_pool_is_member(d->pool, NULL))
        atomic_fetch_add(&d->members, 1);
    /* both children exist; then one job destroys, then the other tries */
    TT_CHECK(th_tbarrier_wait(&d->bar, 20) >= 0, "barrier timed out");
    if (i == 0)
        atomic_store(&d->rcs[i], tt_pool_destroy(d->pool));
    TT_CHECK(th_tbarrier_wait(&d->bar, 20) >= 0, "barrier timed out");
    if (i == 1)
        atomic_store(&d->rcs[i], tt_pool_destroy(d->pool));
    tt_exec r;
    atomic_store(&d->after_init[i], tt_exec_init(&r, d->pool, 2));
    ran rr;
    ran_init(&rr);
    atomic_store(&d->after_entry[i], tt_fork(child, 2, job_count, &rr));
    TT_CHECK(atomic_load(&rr.calls) == 0, "an entry ran on a pool destroyed from a member");
}

/* From a member: the destroy only signals shutdown and returns (TT_OK); a
 * second one reads TT_EDESTROYED; new entries are refused; the entry in
 * progress completes and the last one out tears the pool down. */
START_TEST(test_destroy_from_member)
{
#if TT_PARALLEL_ENABLED
    tt_pool *p = th_make_pool(2);
    destroy_in_member d;
    memset(&d, 0, sizeof d);
    d.pool = p;
    th_tbarrier_init(&d.bar, 2);
    tt_exec ex;
    ck_rc(tt_exec_init(&ex, p, 2), TT_OK);
    ck_rc(tt_fork(&ex, 2, job_destroy_self, &d), TT_OK);
    th_tbarrier_destroy(&d.bar);
    ck_assert_int_eq(atomic_load(&d.jobs), 2);
    ck_assert_int_eq(atomic_load(&d.members), 2);
    ck_assert_msg(atomic_load(&d.rcs[0]) == TT_OK, "tt_pool_destroy from a member: %s",
                  tt_status_name(atomic_load(&d.rcs[0])));
    ck_assert_msg(atomic_load(&d.rcs[1]) == TT_EDESTROYED,
                  "a second tt_pool_destroy from a member: %s",
                  tt_status_name(atomic_load(&d.rcs[1])));
    for (int i = 0; i < 2; i++) {
        ck_assert_msg(atomic_load(&d.after_init[i]) == TT_EDESTROYED,
                      "tt_exec_init on a pool destroyed from a member: %s",
                      tt_status_name(atomic_load(&d.after_init[i])));
        ck_assert_msg(atomic_load(&d.after_entry[i]) == TT_EDESTROYED,
                      "an entry on a child token after the destroy: %s",
                      tt_status_name(atomic_load(&d.after_entry[i])));
    }
    th_assert_no_failures();
    /* the pool is gone now: p is not used again */
#else
    ck_assert_uint_eq(tt_pool_width(g_pool4), 1); /* no members to call from */
#endif
}
END_TEST

/* A thread that holds an entry on a pool until released. */
typedef struct holder {
    tt_pool *pool;
    unsigned budget, jobs;
    th_flag started; /* jobs that began */
    th_flag release;
    int rc;
} holder;

static void job_hold(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    (void)child;
    holder *h = arg;
    atomic_fetch_add(&h->started.v, 1);
    if (!th_flag_wait_ge(&h->release, 1, 30))
        TT_CHECK(0, "a holding job was never released");
}

static TT_TEST_UNUSED void *holder_main(void *arg)
{
    holder *h = arg;
    tt_exec ex;
    h->rc = tt_exec_init(&ex, h->pool, h->budget);
    if (h->rc == TT_OK)
        h->rc = tt_fork(&ex, h->jobs, job_hold, h);
    /* nothing here touches the pool after the entry */
    return NULL;
}

/* While another thread is inside an entry (budget b, jobs j), a destroy is
 * TT_EBUSY and changes nothing. Returns false when the destroy wrongly
 * succeeded (then the pool is gone). */
static bool destroy_while_entry(unsigned width, unsigned budget, unsigned jobs)
{
    tt_pool *p = th_make_pool(width);
    holder h;
    memset(&h, 0, sizeof h);
    h.pool = p;
    h.budget = budget;
    h.jobs = jobs;
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, holder_main, &h), 0);
    unsigned eff = th_expect_budget(width, budget);
    unsigned want_started = jobs < eff ? jobs : eff;
    ck_assert_msg(th_flag_wait_ge(&h.started, (int)want_started, 20),
                  "the holding entry did not start");
    int rc = tt_pool_destroy(p);
    bool ok = rc == TT_EBUSY;
    if (ok) {
        ck_assert_uint_eq(tt_pool_width(p), th_expect_width(width));
    }
    th_flag_set(&h.release, 1);
    ck_assert(th_join_timeout(t, 30));
    ck_rc(h.rc, TT_OK);
    th_assert_no_failures();
    if (!ok) {
        fprintf(stderr,
                "tt_pool_destroy while another thread is inside an entry of budget %u: %s "
                "(want TT_EBUSY); the pool was freed\n",
                budget, tt_status_name(rc));
        return false;
    }
    /* the pool still works, then goes */
    ran r;
    ran_init(&r);
    tt_exec ex;
    ck_rc(tt_exec_init(&ex, p, width), TT_OK);
    ck_rc(tt_fork(&ex, width, job_count, &r), TT_OK);
    ck_assert_int_eq(atomic_load(&r.calls), (int)width);
    th_free_pool(p);
    return true;
}

START_TEST(test_destroy_while_entry_dispatched)
{
#if TT_PARALLEL_ENABLED
    ck_assert_msg(destroy_while_entry(2, 2, 2), "destroy during a dispatched entry");
    ck_assert_msg(destroy_while_entry(4, 2, 2), "destroy during a budget-2 entry on width 4");
#else
    ck_assert_uint_eq(tt_pool_width(g_pool4), 1); /* see the inline case */
#endif
}
END_TEST

/* Regression (docs/design/misuse.md, found #1): an inline entry (budget 1;
 * or every entry without parallel) reserved no member, and tt_pool_destroy
 * only looked at reserved members; now every entry is counted. */
START_TEST(test_destroy_while_entry_inline)
{
    ck_assert_msg(destroy_while_entry(2, 1, 1),
                  "tt_pool_destroy did not see an inline (budget 1) entry running on the pool");
}
END_TEST

START_TEST(test_destroy_while_waiting)
{
#if TT_PARALLEL_ENABLED
    /* one thread holds all members, another waits to enter: busy */
    tt_pool *p = th_make_pool(2);
    holder h1, h2;
    memset(&h1, 0, sizeof h1);
    memset(&h2, 0, sizeof h2);
    h1.pool = h2.pool = p;
    h1.budget = h2.budget = 2;
    h1.jobs = h2.jobs = 2;
    pthread_t t1, t2;
    ck_assert_int_eq(pthread_create(&t1, NULL, holder_main, &h1), 0);
    ck_assert(th_flag_wait_ge(&h1.started, 2, 20));
    ck_assert_int_eq(pthread_create(&t2, NULL, holder_main, &h2), 0);
    th_sleep_us(20000); /* let it queue */
    ck_rc(tt_pool_destroy(p), TT_EBUSY);
    th_flag_set(&h1.release, 1);
    ck_assert(th_flag_wait_ge(&h2.started, 2, 20));
    ck_rc(tt_pool_destroy(p), TT_EBUSY);
    th_flag_set(&h2.release, 1);
    ck_assert(th_join_timeout(t1, 30));
    ck_assert(th_join_timeout(t2, 30));
    ck_rc(h1.rc, TT_OK);
    ck_rc(h2.rc, TT_OK);
    th_assert_no_failures();
    th_free_pool(p);
#else
    ck_assert_uint_eq(tt_pool_width(g_pool4), 1);
#endif
}
END_TEST

static Suite *exec_suite(void)
{
    Suite *s = suite_create("exec");
    TCase *tc;

    tc = th_tcase(s, "mint", 30);
    tcase_add_checked_fixture(tc, pool4_setup, pool4_teardown);
    tcase_add_test(tc, test_init_errors);
    tcase_add_test(tc, test_budget_clamp);
    tcase_add_test(tc, test_serial_token);
    tcase_add_test(tc, test_carries_team_ordinary);

    tc = th_tcase(s, "entry_errors", 30);
    tcase_add_checked_fixture(tc, pool4_setup, pool4_teardown);
    tcase_add_test(tc, test_null_args);
    tcase_add_test(tc, test_uninitialised_token);
    tcase_add_test(tc, test_reborrow_of_uninitialised);
    tcase_add_test(tc, test_byte_copy);
    tcase_add_test(tc, test_consumed_token);
    tcase_add_test(tc, test_finish);
    tcase_add_test(tc, test_len_zero_consumes);
    tcase_add_test(tc, test_limit_zero);
    tcase_add_test(tc, test_limit_narrows);

    tc = th_tcase(s, "reborrow", 30);
    tcase_add_checked_fixture(tc, pool4_setup, pool4_teardown);
    tcase_add_test(tc, test_reborrow_basic);
    tcase_add_test(tc, test_reborrow_of_consumed);
    tcase_add_test(tc, test_parent_busy_inline);
    tcase_add_test(tc, test_parent_busy_dispatched);
    tcase_add_test(tc, test_refusal_consumes_nothing);

    tc = th_tcase(s, "strings", 10);
    tcase_add_test(tc, test_strerror_and_names);

    tc = th_tcase(s, "wrongthread", 30);
    tcase_add_checked_fixture(tc, pool4_setup, pool4_teardown);
    tcase_add_test(tc, test_wrongthread_dispatched);
    tcase_add_test(tc, test_wrongthread_inline_child);

    tc = th_tcase(s, "inline", 30);
    tcase_add_checked_fixture(tc, pool4_setup, pool4_teardown);
    tcase_add_test(tc, test_inline_entries);
    tcase_add_test(tc, test_serial_starts_no_thread_here);

    /* no shared pool: a forked process should see one thread */
    tc = th_tcase(s, "no_thread", 30);
    tcase_add_test(tc, test_serial_starts_no_thread_forked);

    tc = th_tcase(s, "shutdown", 60);
    tcase_add_checked_fixture(tc, pool4_setup, pool4_teardown);
    tcase_add_test(tc, test_destroy_null);
    tcase_add_test(tc, test_destroy_from_member);
    tcase_add_test(tc, test_destroy_while_entry_dispatched);
    tcase_add_test(tc, test_destroy_while_entry_inline);
    tcase_add_test(tc, test_destroy_while_waiting);
    return s;
}

int main(void) { return th_run_suite(exec_suite()); }
