/*
 * test_races.c -- a destroy racing entries on the pool's tokens.
 *
 * Every entry counts itself in (its claim) before it touches the pool's
 * crews, slots or lock, so a destroy from another thread either sees it and
 * returns TT_EBUSY, or wins and the entry returns TT_EDESTROYED: never a
 * crash, a hang or a use of freed memory (this file runs under
 * AddressSanitizer in make check-asan, and under TSan and valgrind).
 * The two threads meet at a barrier and then race with random delays, many
 * times, over every kind of entry and every inspection that reads the pool
 * (tt_can_broadcast, tt_dispatch_cost).
 *
 * Also: a destroy from a member while a plain thread is queued for the
 * pool's slots (it claimed, it waits) does not tear the pool down under the
 * queued thread: the last entry out (that thread) ends the pool.
 */
#include "tt_test.h"
#include "test_hooks.h"

enum { K_FORK, K_RANGES, K_BCAST, K_EXT, K_SCOPE, K_CANB, K_COST, K_COUNT };

enum { NTOK = 48 };

typedef struct race {
    tt_pool *pool;
    unsigned width; /* the pool's width (1 in a serial build) */
    th_tbarrier go;
    int kind0;
    int rc[NTOK];
    int kind[NTOK];
    tt_exec ex[NTOK];
    _Atomic int ran;
    _Atomic int ran_after_refusal;
    _Atomic int refused;
} race;

static void r_job(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    (void)child;
    race *r = arg;
    atomic_fetch_add(&r->ran, 1);
    if (atomic_load(&r->refused))
        atomic_fetch_add(&r->ran_after_refusal, 1);
}
static void r_body(void *arg, size_t b, size_t e)
{
    (void)b;
    (void)e;
    r_job(arg, 0, NULL);
}
static void r_bcast(void *arg, unsigned i) { r_job(arg, i, NULL); }
static void r_ext(void *arg, unsigned w)
{
    (void)w;
    r_job(arg, 0, NULL);
}
static void r_section(void *arg, tt_section *s)
{
    (void)s;
    r_job(arg, 0, NULL);
}
static void r_scope(void *arg, tt_scope *scope)
{
    int rc = tt_scope_run(scope, r_section, arg);
    TT_CHECK(rc == TT_OK, "tt_scope_run: %s", tt_status_name(rc));
}

static int one_entry(race *r, int kind, tt_exec *ex)
{
    switch (kind) {
    case K_FORK: return tt_fork(ex, 3, r_job, r);
    case K_RANGES: return tt_for_ranges(ex, 64, 1, r_body, r);
    case K_BCAST: return tt_broadcast(ex, r_bcast, r);
    case K_EXT: return tt_external(ex, r_ext, r);
    case K_SCOPE: return tt_team_scope(ex, r_scope, r);
    case K_CANB: return tt_can_broadcast(ex) ? TT_OK : TT_EDESTROYED;
    default:
        /* UINT64_MAX: nothing would run in parallel, which on a width-1
         * pool (a serial build) is always so, destroyed or not */
        if (r->width <= 1) {
            (void)tt_dispatch_cost(ex, 2);
            return -1; /* says nothing: not in the ordering check */
        }
        return tt_dispatch_cost(ex, 2) == UINT64_MAX ? TT_EDESTROYED : TT_OK;
    }
}

/* Entries back to back on pre-minted tokens, while the test thread
 * destroys the pool: every entry runs or is refused with TT_EDESTROYED. */
static void *entry_main(void *arg)
{
    race *r = arg;
    th_tbarrier_wait(&r->go, 30);
    for (int i = 0; i < NTOK; i++) {
        r->kind[i] = (r->kind0 + i) % K_COUNT;
        r->rc[i] = one_entry(r, r->kind[i], &r->ex[i]);
        if (r->rc[i] == TT_EDESTROYED)
            atomic_store(&r->refused, 1);
    }
    return NULL;
}

START_TEST(test_destroy_races_entries)
{
    uint64_t seed = 0x7ace;
    unsigned rounds = th_iters(400);
    unsigned busy = 0, refused_rounds = 0;
    for (unsigned i = 0; i < rounds; i++) {
        race *r = calloc(1, sizeof *r);
        ck_assert_ptr_nonnull(r);
        unsigned w = 2 + th_rng_below(&seed, 2);
        r->pool = th_make_pool(w);
        r->width = tt_pool_width(r->pool);
        r->kind0 = (int)th_rng_below(&seed, K_COUNT);
        for (int k = 0; k < NTOK; k++)
            ck_assert_int_eq(tt_exec_init(&r->ex[k], r->pool, w), TT_OK);
        unsigned my_delay = th_rng_below(&seed, 300);
        th_tbarrier_init(&r->go, 2);
        pthread_t t;
        ck_assert_int_eq(pthread_create(&t, NULL, entry_main, r), 0);
        th_tbarrier_wait(&r->go, 30);
        th_spin_us(my_delay);
        int drc;
        while ((drc = tt_pool_destroy(r->pool)) == TT_EBUSY)
            busy++;
        ck_assert_msg(drc == TT_OK, "destroy racing entries: %s", tt_status_name(drc));
        ck_assert(th_join_timeout(t, 60));
        bool refused = false;
        char trail[NTOK * 8 + 1];
        trail[0] = 0;
        for (int k = 0; k < NTOK; k++)
            snprintf(trail + strlen(trail), sizeof trail - strlen(trail), " %d:%d", r->kind[k],
                     r->rc[k]);
        for (int k = 0; k < NTOK; k++) {
            if (r->rc[k] == -1)
                continue;
            ck_assert_msg(r->rc[k] == TT_OK || r->rc[k] == TT_EDESTROYED,
                          "kind %d: an entry racing a destroy returned %s", r->kind[k],
                          tt_status_name(r->rc[k]));
            /* once one is refused, every later one is too */
            if (refused)
                ck_assert_msg(r->rc[k] == TT_EDESTROYED,
                              "entry %d (kind %d) returned %s after an earlier refusal "
                              "(kind:rc of all:%s)",
                              k, r->kind[k], tt_status_name(r->rc[k]), trail);
            refused = refused || r->rc[k] == TT_EDESTROYED;
        }
        refused_rounds += refused;
        ck_assert_int_eq(atomic_load(&r->ran_after_refusal), 0);
        th_tbarrier_destroy(&r->go);
        free(r);
    }
    fprintf(stderr, "destroy race: %u rounds, %u destroys refused first, %u rounds with refused "
                    "entries\n", rounds, busy, refused_rounds);
    /* (A serial build runs every entry inline in a few hundred ns: its
     * destroys mostly come after the entries.) */
    if (rounds >= 200 && TT_PARALLEL_ENABLED)
        ck_assert_msg(busy > 0 && refused_rounds > 0, "no race: %u refused destroys, %u rounds",
                      busy, refused_rounds);
    th_assert_no_failures();
}
END_TEST

/* A member destroys its pool while a plain thread waits for the slots its
 * root holds: the destroy returns TT_OK at once, the queued thread's entry
 * completes or is refused with TT_EDESTROYED, and the pool ends when the
 * last entry leaves (no crash, no hang). */
typedef struct queued {
    tt_pool *pool;
    th_flag in_job, waiter_started;
    int member_destroy_rc;
    int waiter_rc;
    tt_exec wex;
} queued;

static TT_TEST_UNUSED void *waiter_main(void *arg)
{
    queued *q = arg;
    th_flag_set(&q->waiter_started, 1);
    static race none;
    q->waiter_rc = tt_fork(&q->wex, 2, r_job, &none);
    return NULL;
}

static TT_TEST_UNUSED void holder_job(void *arg, unsigned i, tt_exec *child)
{
    (void)child;
    queued *q = arg;
    if (i == 0) {
        th_flag_wait_ge(&q->waiter_started, 1, 30);
        th_sleep_us(2000); /* the waiter claims and queues for the slots */
        q->member_destroy_rc = tt_pool_destroy(q->pool);
        th_sleep_us(2000);
    }
}

START_TEST(test_member_destroy_with_queued_waiter)
{
#if TT_PARALLEL_ENABLED
    for (unsigned r = 0; r < th_iters(20); r++) {
        queued q;
        memset(&q, 0, sizeof q);
        q.pool = th_make_pool(2);
        ck_assert_int_eq(tt_exec_init(&q.wex, q.pool, 2), TT_OK);
        tt_exec ex;
        ck_assert_int_eq(tt_exec_init(&ex, q.pool, 2), TT_OK);
        pthread_t t;
        ck_assert_int_eq(pthread_create(&t, NULL, waiter_main, &q), 0);
        ck_assert_int_eq(tt_fork(&ex, 2, holder_job, &q), TT_OK);
        ck_assert(th_join_timeout(t, 60));
        ck_assert_int_eq(q.member_destroy_rc, TT_OK);
        ck_assert_msg(q.waiter_rc == TT_OK || q.waiter_rc == TT_EDESTROYED, "queued waiter: %s",
                      tt_status_name(q.waiter_rc));
        /* the pool is gone: a second destroy says so */
        ck_assert_int_eq(tt_pool_destroy(q.pool), TT_EDESTROYED);
    }
#endif
}
END_TEST

/* Stale entries across pool-object reuse. Pool objects are kept and
 * reused (lib/pool.c, shell_get), so a token minted on a destroyed pool
 * still points at an object that a later tt_pool_create may hand out again.
 * An entry on such a token counts itself in before it reads the
 * generation, then refuses (TT_EDESTROYED) and counts itself out: if a
 * reuse reset the count in between, the count out would wrap, and the new
 * pool would refuse its destroy forever (the defect of 0.1.0). Here one
 * thread hammers stale tokens while this one builds and destroys pools on
 * the recycled objects: every stale entry refuses and runs nothing, and
 * every new pool can be destroyed (TT_EBUSY is allowed while a stale entry
 * is counted in, never for good). */
typedef struct stale {
    tt_exec ex[8];
    _Atomic bool stop;
    _Atomic int wrong;  /* a stale entry that did not refuse */
    _Atomic int ran;    /* work that ran on a stale token   */
    _Atomic long tries;
    th_flag started;    /* set after the first try           */
} stale;

static void stale_job(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    (void)child;
    atomic_fetch_add(&((stale *)arg)->ran, 1);
}

static void *stale_main(void *arg)
{
    stale *st = arg;
    unsigned k = 0;
    while (!atomic_load(&st->stop)) {
        tt_exec *ex = &st->ex[k++ % 8];
        int rc = (k & 1) ? tt_fork(ex, 2, stale_job, st) : tt_can_broadcast(ex) ? TT_OK
                                                                                  : TT_EDESTROYED;
        if (rc != TT_EDESTROYED)
            atomic_fetch_add(&st->wrong, 1);
        atomic_fetch_add(&st->tries, 1);
        th_flag_set(&st->started, 1);
    }
    return NULL;
}

START_TEST(test_stale_entries_across_reuse)
{
    stale st;
    memset(&st, 0, sizeof st);
    /* Eight tokens on eight pools, all destroyed: their objects go back to
     * the list that tt_pool_create takes from. */
    tt_pool *old[8];
    for (int i = 0; i < 8; i++) {
        old[i] = th_make_pool(1 + i % 2);
        ck_assert_int_eq(tt_exec_init(&st.ex[i], old[i], 1 + i % 2), TT_OK);
    }
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(tt_pool_destroy(old[i]), TT_OK);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, stale_main, &st), 0);
    /* The rounds start once the stale thread is running (a quick run's 20
     * rounds can otherwise end before it has been scheduled at all). */
    ck_assert_msg(th_flag_wait_ge(&st.started, 1, 30), "the stale thread never ran");
    unsigned rounds = th_iters(400);
    for (unsigned r = 0; r < rounds; r++) {
        tt_pool *p = th_make_pool(1 + r % 2);
        tt_exec ex;
        ck_assert_int_eq(tt_exec_init(&ex, p, 1), TT_OK);
        ck_assert_int_eq(tt_fork(&ex, 1, stale_job, &(stale){0}), TT_OK);
        uint64_t end = th_now_ns() + 10ull * 1000000000ull;
        int rc;
        while ((rc = tt_pool_destroy(p)) == TT_EBUSY && th_now_ns() < end)
            sched_yield();
        ck_assert_msg(rc == TT_OK, "round %u: a new pool on a recycled object: destroy %s", r,
                      tt_status_name(rc));
    }
    atomic_store(&st.stop, true);
    ck_assert(th_join_timeout(t, 60));
    ck_assert_msg(atomic_load(&st.wrong) == 0, "%d stale entries did not refuse",
                  atomic_load(&st.wrong));
    ck_assert_int_eq(atomic_load(&st.ran), 0);
    ck_assert(atomic_load(&st.tries) > 0);
}
END_TEST

/* The window itself, made by hand: an entry counts itself in on a pool
 * object that a destroy has just retired (its generation check comes
 * next), tt_pool_create reuses that object (the list of retired objects is
 * last-in first-out, so the next create takes it), and only then does the
 * entry see the new generation and count itself out. 0.1.0 reset the
 * count when it reused the object: the count out wrapped, and the new pool
 * refused its destroy forever. */

START_TEST(test_entry_count_survives_reuse)
{
    tt_pool *p = th_make_pool(2);
    ck_assert_int_eq(tt_pool_destroy(p), TT_OK);
    tt__test_entry_count_in(p);
    tt_pool *q = th_make_pool(2);
    ck_assert_msg(q == p, "the retired pool object was not reused (the test needs it)");
    /* the stale entry is still counted: the new pool is busy, not broken */
    ck_assert_int_eq(tt_pool_destroy(q), TT_EBUSY);
    tt__test_entry_count_out(p);
    ck_assert_int_eq(tt_pool_destroy(q), TT_OK);
}
END_TEST

/* Destroy is one state machine: whatever the interleaving of a destroy
 * from a member (which only signals), the last entry out (which then tears
 * the pool down) and destroys from plain threads, exactly one thread tears
 * the pool down, and every other destroy returns TT_EDESTROYED (or
 * TT_EBUSY while entries run). On 784228d the last entry out cleared the
 * pool's `doomed` flag under the lock and tore down outside it, and a plain
 * thread's destroy that read `retired` still false took the normal path:
 * two teardowns of one object (two live pools on it, or a double free). */

typedef struct double_destroy {
    tt_pool *pool;
    th_tbarrier go;
    unsigned delay_us;
    _Atomic int plain_rc; /* a code no destroy may return here    */
    _Atomic int plain_ok;
    _Atomic int member_rc;
    _Atomic bool stop;
} double_destroy;

/* Destroys the pool over and over until told to stop (the pool object is
 * not reused meanwhile: nothing else builds a pool in this test until the
 * thread is joined). */
static void *plain_destroyer(void *arg)
{
    double_destroy *d = arg;
    th_tbarrier_wait(&d->go, th_timeout(30));
    while (!atomic_load(&d->stop)) {
        int rc = tt_pool_destroy(d->pool);
        if (rc == TT_OK)
            atomic_fetch_add(&d->plain_ok, 1);
        else if (rc != TT_EBUSY && rc != TT_EDESTROYED)
            atomic_store(&d->plain_rc, rc);
    }
    return NULL;
}

static void member_destroy_job(void *arg, unsigned i, tt_exec *child)
{
    (void)child;
    double_destroy *d = arg;
    if (i == 0) {
        th_tbarrier_wait(&d->go, th_timeout(30));
        th_spin_us(d->delay_us);
        atomic_store(&d->member_rc, tt_pool_destroy(d->pool));
    }
    th_spin_us(d->delay_us / 2);
}

START_TEST(test_second_destroy_never_tears_down_twice)
{
#if TT_PARALLEL_ENABLED
    uint64_t seed = 0x5eed;
    for (unsigned r = 0; r < th_iters(200); r++) {
        double_destroy d;
        memset(&d, 0, sizeof d);
        d.pool = th_make_pool(2);
        d.delay_us = th_rng_below(&seed, 200);
        th_tbarrier_init(&d.go, 2);
        unsigned long before = tt__test_pool_teardowns();
        pthread_t t;
        ck_assert_int_eq(pthread_create(&t, NULL, plain_destroyer, &d), 0);
        tt_exec ex;
        ck_assert_int_eq(tt_exec_init(&ex, d.pool, 2), TT_OK);
        ck_assert_int_eq(tt_fork(&ex, 2, member_destroy_job, &d), TT_OK);
        th_spin_us(50); /* the destroyer goes on through the teardown */
        atomic_store(&d.stop, true);
        ck_assert(th_join_timeout(t, 60));
        th_tbarrier_destroy(&d.go);
        ck_assert_int_eq(atomic_load(&d.member_rc), TT_OK);
        ck_assert_msg(atomic_load(&d.plain_rc) == TT_OK, "plain destroy: %s",
                      tt_status_name(atomic_load(&d.plain_rc)));
        ck_assert_int_le(atomic_load(&d.plain_ok), 1);
        /* Another destroy says it is gone, whoever tore it down. */
        ck_assert_int_eq(tt_pool_destroy(d.pool), TT_EDESTROYED);
        ck_assert_uint_eq(tt__test_pool_teardowns() - before, 1);
        /* The object went back once: two new pools are two objects. */
        tt_pool *a = th_make_pool(2), *b = th_make_pool(2);
        ck_assert_ptr_ne(a, b);
        ck_assert_int_eq(tt_pool_destroy(a), TT_OK);
        ck_assert_int_eq(tt_pool_destroy(b), TT_OK);
    }
#endif
}
END_TEST

/* A destroyed pool's handle that no later pool reused: minting on it is
 * TT_EDESTROYED (on 784228d it minted, and the entry crashed in the slot
 * bitmap that the destroy had freed). */
START_TEST(test_init_on_destroyed_handle)
{
    tt_pool *p = th_make_pool(2);
    ck_assert_int_eq(tt_pool_destroy(p), TT_OK);
    tt_exec ex;
    ck_assert_int_eq(tt_exec_init(&ex, p, 2), TT_EDESTROYED);
    ck_assert_int_eq(tt_fork(&ex, 2, stale_job, NULL), TT_EINVAL);
    tt_team *team = NULL;
    ck_assert_int_eq(tt_pool_into_team(p, 1, &team), TT_EDESTROYED);
    ck_assert_ptr_null(team);
    ck_assert_int_eq(tt_pool_destroy(p), TT_EDESTROYED);
}
END_TEST

/* tt_exec_init racing a destroy from a member. tt_exec_init reads the
 * pool's state and its generation; a member's destroy (DOOMED) changes the
 * state, then bumps the generation. On 9ec513d it read the state first: a
 * doom between the two reads minted a token with the post-doom generation,
 * whose entries the doomed pool then accepted ("new entries are refused
 * from now on", misuse.md), and an entry that counted itself in after the
 * last holder had torn the pool down used the freed slot bitmap (the
 * fuzzer's AddressSanitizer SEGV in take_lowest, seed 59465). The test hook
 * runs the doom in that window: the mint is refused, or the token's entry
 * is, and nothing runs. */

typedef struct doom_window {
    tt_pool *pool;
    th_flag in_job, go_doom, doomed, release;
    int member_rc;
    _Atomic int ran;
} doom_window;

static doom_window *dw_now;

static void dw_hook(tt_pool *pool)
{
    if (!dw_now || pool != dw_now->pool)
        return;
    th_flag_set(&dw_now->go_doom, 1);
    th_flag_wait_ge(&dw_now->doomed, 1, th_timeout(30));
}

static void dw_job(void *arg, unsigned i, tt_exec *child)
{
    (void)child;
    doom_window *d = arg;
    if (i != 0)
        return;
    th_flag_set(&d->in_job, 1);
    th_flag_wait_ge(&d->go_doom, 1, th_timeout(30));
    d->member_rc = tt_pool_destroy(d->pool);
    th_flag_set(&d->doomed, 1);
    th_flag_wait_ge(&d->release, 1, th_timeout(30));
}

static void dw_body(void *arg, size_t b, size_t e)
{
    (void)b;
    (void)e;
    atomic_fetch_add(&((doom_window *)arg)->ran, 1);
}

static void *dw_holder(void *arg)
{
    doom_window *d = arg;
    tt_exec ex;
    /* The fork runs (its job dooms the pool from inside it). */
    if (tt_exec_init(&ex, d->pool, 2) == TT_OK) {
        int rc = tt_fork(&ex, 2, dw_job, d);
        TT_CHECK(rc == TT_OK, "the holder's fork: %s", tt_status_name(rc));
    }
    return NULL;
}

/* Set up the window: a pool of `width` members, a holder thread whose job
 * (on a member) waits to destroy it, and `*hook` pointing at dw_hook until
 * dw_close, so that the next pass through the window dooms the pool. */
static void dw_open(doom_window *d, unsigned width, void (**hook)(tt_pool *), pthread_t *t)
{
    memset(d, 0, sizeof *d);
    d->pool = th_make_pool(width);
    ck_assert_int_eq(pthread_create(t, NULL, dw_holder, d), 0);
    /* The holder's own mint is done and its job runs on a member. */
    ck_assert(th_flag_wait_ge(&d->in_job, 1, th_timeout(30)));
    dw_now = d;
    *hook = dw_hook;
}

/* The call under test has passed the window: unhook, and check that the
 * member's destroy succeeded (the caller then tries the entry that must be
 * refused). */
static void dw_close(doom_window *d, void (**hook)(tt_pool *))
{
    *hook = NULL;
    dw_now = NULL;
    ck_assert_int_eq(d->member_rc, TT_OK);
}

/* Let the holder's job return, join the holder, and check that no body
 * ran on the doomed pool. */
static void dw_release(doom_window *d, pthread_t t)
{
    th_flag_set(&d->release, 1);
    ck_assert(th_join_timeout(t, 60));
    ck_assert_int_eq(atomic_load(&d->ran), 0);
}

START_TEST(test_init_racing_member_destroy)
{
#if TT_PARALLEL_ENABLED
    doom_window d;
    pthread_t t;
    dw_open(&d, 2, &tt__test_init_window, &t);
    tt_exec ex;
    int rc = tt_exec_init(&ex, d.pool, 1);
    dw_close(&d, &tt__test_init_window);
    int erc = TT_EDESTROYED;
    if (rc == TT_OK)
        erc = tt_for_ranges(&ex, 64, 1, dw_body, &d);
    dw_release(&d, t);
    ck_assert_msg(rc == TT_EDESTROYED || erc == TT_EDESTROYED,
                  "a token minted across a member's destroy: tt_exec_init %s, its entry %s",
                  tt_status_name(rc), tt_status_name(erc));
    ck_assert_int_eq(tt_pool_destroy(d.pool), TT_EDESTROYED);
#endif
}
END_TEST

/* The same window in tt_pool_into_team: it checked the pool's state under
 * the pool's lock and read the generation for its leads' tokens after it
 * (found in review after the tt_exec_init fix). A member's destroy between
 * the two gave the team the doomed pool's new generation, and its leads'
 * entries ran on a pool that refuses new entries. The generation is now
 * read under the lock, before the state. */

START_TEST(test_into_team_racing_member_destroy)
{
#if TT_PARALLEL_ENABLED
    doom_window d;
    pthread_t t;
    dw_open(&d, 3, &tt__test_into_team_window, &t);
    tt_team *team = NULL;
    int rc = tt_pool_into_team(d.pool, 1, &team);
    dw_close(&d, &tt__test_into_team_window);
    int lrc = TT_EDESTROYED, erc = TT_EDESTROYED;
    if (rc == TT_OK) {
        tt_exec ex;
        lrc = tt_team_lead(team, 1, &ex);
        if (lrc == TT_OK) {
            erc = tt_for_ranges(&ex, 64, 1, dw_body, &d);
            /* A refused entry consumed nothing: the role ends here. */
            if (erc != TT_OK)
                tt_exec_finish(&ex);
        }
    }
    dw_release(&d, t);
    ck_assert_msg(rc == TT_EDESTROYED || lrc == TT_EDESTROYED || erc == TT_EDESTROYED,
                  "a team built across a member's destroy: into_team %s, lead %s, its entry %s",
                  tt_status_name(rc), tt_status_name(lrc), tt_status_name(erc));
    if (team)
        (void)tt_team_into_pool(team);
#endif
}
END_TEST

/* Tokens minted and entered while another thread destroys the pool from
 * outside: every mint and entry is TT_OK or TT_EDESTROYED, never a use of
 * the torn-down pool (make check-asan runs this under AddressSanitizer).
 * A plain destroy bumped the generation before it marked the pool ENDING,
 * so a tt_exec_init between the two minted on the new generation, and its
 * budget-1 entry took an inline slot from the freed bitmap. */
typedef struct mint_race {
    tt_pool *pool;
    th_tbarrier go;
    _Atomic int wrong;
    _Atomic int ran;
} mint_race;

static void mr_body(void *arg, size_t b, size_t e)
{
    (void)b;
    (void)e;
    atomic_fetch_add(&((mint_race *)arg)->ran, 1);
}

static void *mr_main(void *arg)
{
    mint_race *m = arg;
    th_tbarrier_wait(&m->go, th_timeout(30));
    for (int k = 0; k < 64; k++) {
        tt_exec ex;
        int rc = tt_exec_init(&ex, m->pool, 1 + (unsigned)(k & 1));
        if (rc == TT_OK)
            rc = tt_for_ranges(&ex, 8, 1, mr_body, m);
        if (rc != TT_OK && rc != TT_EDESTROYED)
            atomic_fetch_add(&m->wrong, 1);
        if (rc == TT_EDESTROYED)
            break;
    }
    return NULL;
}

START_TEST(test_mint_racing_destroy)
{
    uint64_t seed = 0x317;
    for (unsigned r = 0; r < th_iters(300); r++) {
        mint_race m;
        memset(&m, 0, sizeof m);
        m.pool = th_make_pool(2);
        th_tbarrier_init(&m.go, 2);
        pthread_t t;
        ck_assert_int_eq(pthread_create(&t, NULL, mr_main, &m), 0);
        th_tbarrier_wait(&m.go, th_timeout(30));
        th_spin_us(th_rng_below(&seed, 40));
        int drc;
        while ((drc = tt_pool_destroy(m.pool)) == TT_EBUSY)
            ;
        ck_assert_int_eq(drc, TT_OK);
        ck_assert(th_join_timeout(t, 60));
        th_tbarrier_destroy(&m.go);
        ck_assert_int_eq(atomic_load(&m.wrong), 0);
    }
}
END_TEST

/* Slots handed between plain threads: several threads run roots of random
 * budgets (and broadcasts, which take the prefix) on one pool, so that
 * they queue for each other's slots. On pools of one bitmap word the
 * takes and give-backs skip the mutex while nobody queues (gang.c); a
 * give-back that missed a queued thread would leave it asleep with its
 * slots free (a hang, caught by the timeouts), and a take that raced
 * another would run more jobs at once than the width (caught by the live
 * count). Width 65 takes the locked path of wide pools. */
typedef struct handoff {
    tt_pool *pool;
    unsigned width, rounds;
    uint64_t seed;
    th_live *live; /* one count for all threads: the width caps them together */
    _Atomic int bad_rc;
    _Atomic unsigned jobs;
    unsigned expected; /* the jobs and calls its roots asked for */
} handoff;

static void ho_job(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    (void)child;
    handoff *h = arg;
    th_live_enter(h->live);
    th_spin_us(2);
    atomic_fetch_add(&h->jobs, 1);
    th_live_leave(h->live);
}
static void ho_bcast(void *arg, unsigned i) { ho_job(arg, i, NULL); }

static void *ho_main(void *arg)
{
    handoff *h = arg;
    uint64_t seed = h->seed;
    for (unsigned r = 0; r < h->rounds; r++) {
        unsigned b = 1 + th_rng_below(&seed, h->width);
        tt_exec ex;
        int rc = tt_exec_init(&ex, h->pool, b);
        if (rc == TT_OK)
            rc = th_rng_below(&seed, 4) == 0 ? tt_broadcast(&ex, ho_bcast, h)
                                             : tt_fork(&ex, b, ho_job, h);
        h->expected += b;
        if (rc != TT_OK)
            atomic_fetch_add(&h->bad_rc, 1);
    }
    return NULL;
}

static void slot_handoff(unsigned width, unsigned rounds)
{
    enum { NT = 4 };
    handoff h[NT];
    tt_pool *pool = th_make_pool(width);
    unsigned w = th_expect_width(width);
    th_live live;
    th_live_init(&live);
    pthread_t t[NT];
    for (unsigned i = 0; i < NT; i++) {
        memset(&h[i], 0, sizeof h[i]);
        h[i].pool = pool;
        h[i].width = w;
        h[i].rounds = rounds;
        h[i].seed = th_seed_child(0x5107, i);
        h[i].live = &live;
    }
    for (unsigned i = 0; i < NT; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, ho_main, &h[i]), 0);
    for (unsigned i = 0; i < NT; i++)
        ck_assert_msg(th_join_timeout(t[i], th_timeout(120)), "width %u: thread %u hung", width, i);
    int peak = th_live_max(&live);
    bool ok = true;
    for (unsigned i = 0; i < NT; i++)
        ok = ok && atomic_load(&h[i].bad_rc) == 0 && atomic_load(&h[i].jobs) == h[i].expected;
    /* Destroyed before the checks, so that a failure leaks nothing under
     * valgrind (CK_FORK=no). */
    ck_assert_int_eq(tt_pool_destroy(pool), TT_OK);
    for (unsigned i = 0; i < NT; i++) {
        ck_assert_int_eq(atomic_load(&h[i].bad_rc), 0);
        /* Every job and call ran once (a budget above the width is
         * clamped by tt_exec_init, and the roots asked for b <= width). */
        ck_assert_uint_eq(atomic_load(&h[i].jobs), h[i].expected);
    }
    ck_assert(ok);
    ck_assert_int_le(peak, (int)w);
}

START_TEST(test_slot_handoff)
{
    slot_handoff(2, th_iters(2000));
    slot_handoff(3, th_iters(1000));
    slot_handoff(65, th_iters(20));
}
END_TEST

static Suite *races_suite(void)
{
    Suite *s = suite_create("races");
    TCase *tc = th_tcase(s, "destroy", 120);
    tcase_add_test(tc, test_destroy_races_entries);
    tcase_add_test(tc, test_member_destroy_with_queued_waiter);
    tcase_add_test(tc, test_stale_entries_across_reuse);
    tcase_add_test(tc, test_entry_count_survives_reuse);
    tcase_add_test(tc, test_second_destroy_never_tears_down_twice);
    tcase_add_test(tc, test_init_on_destroyed_handle);
    tcase_add_test(tc, test_init_racing_member_destroy);
    tcase_add_test(tc, test_mint_racing_destroy);
    tcase_add_test(tc, test_slot_handoff);
    tcase_add_test(tc, test_into_team_racing_member_destroy);
    return s;
}

int main(void) { return th_run_suite(races_suite()); }
