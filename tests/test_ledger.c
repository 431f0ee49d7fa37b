/*
 * test_ledger.c -- slot conservation: under one root token never more than
 * `budget` tasks run at once, at any depth, and a parent waiting for its
 * children keeps no slot.
 *
 * A seeded PRNG builds random trees of nested entries (fork, reborrow,
 * limit, for_ranges, external, broadcast at the root), depth up to 4, on
 * pools of widths 2, 4 and 8 (wider than the machine too), budgets 1 to 8;
 * thousands of trees, one after the other and from several plain threads
 * at once. A live counter per tree is incremented at the entry of every job
 * and body and decremented at its exit, and a job that makes a nested entry
 * decrements before it and increments after: its maximum must stay at most
 * the root's budget. With --enable-ledger the library's own ledger says the
 * same (tt_ledger_max_live <= budget, tt_ledger_live 0 after the entry),
 * and the ledger's own contract is checked. A failure prints the seed.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "tt_test.h"

#include <limits.h>

#if TT_PARALLEL_ENABLED && defined(_OPENMP)
#include <omp.h>
#define TT_TREE_OMP 1
#else
#define TT_TREE_OMP 0
#endif

#define MAX_DEPTH 4

typedef struct tree {
    tt_pool *pool;
    unsigned budget; /* the root's, after the clamp */
    uint64_t seed;
    th_live live;
    _Atomic int nodes;
    _Atomic int rc_bad;
    _Atomic int first_bad_rc;
} tree;

typedef struct node {
    tree *t;
    uint64_t seed;
    unsigned depth;
} node;

static void note_rc(tree *t, int rc, const char *what)
{
    if (rc != TT_OK) {
        if (atomic_fetch_add(&t->rc_bad, 1) == 0) {
            atomic_store(&t->first_bad_rc, rc);
            th_note_failure(__FILE__, __LINE__, "seed 0x%llx: %s returned %s",
                            (unsigned long long)t->seed, what, tt_status_name(rc));
        }
    }
}

static void tree_job(void *arg, unsigned i, tt_exec *child);

static void leaf_work(tree *t, uint64_t s)
{
    atomic_fetch_add(&t->nodes, 1);
    th_spin_us(1 + (unsigned)(s % 3));
}

static void tree_body(void *arg, size_t b, size_t e)
{
    (void)e;
    node *n = arg;
    th_live_enter(&n->t->live);
    leaf_work(n->t, th_seed_child(n->seed, b));
    th_live_leave(&n->t->live);
}

static void tree_bcast(void *arg, unsigned i)
{
    node *n = arg;
    th_live_enter(&n->t->live);
    leaf_work(n->t, th_seed_child(n->seed, i));
    th_live_leave(&n->t->live);
}

#if TT_TREE_OMP
/* The region is in a function named ttomp_*: under TSan, accesses inside
 * regions run by libgomp's reused threads look unsynchronised (libgomp's
 * barriers are invisible to TSan), and tests/tsan.supp names that prefix. */
static void ttomp_tree_region(node *n, unsigned width)
{
#pragma omp parallel num_threads(width)
    {
        th_live_enter(&n->t->live);
        leaf_work(n->t, th_seed_child(n->seed, (uint64_t)omp_get_thread_num()));
        th_live_leave(&n->t->live);
    }
}
#endif

/* The external callback: `width` threads of the root run in it. */
static void tree_ext(void *arg, unsigned width)
{
    node *n = arg;
#if TT_TREE_OMP
    ttomp_tree_region(n, width);
#else
    for (unsigned k = 0; k < width; k++) {
        th_live_enter(&n->t->live);
        leaf_work(n->t, th_seed_child(n->seed, k));
        th_live_leave(&n->t->live);
    }
#endif
}

/* One nested entry on `ex` chosen by the PRNG. `kids` is the node handed
 * to the children (seed and depth set by the caller). */
static void random_entry(tree *t, tt_exec *ex, uint64_t *s, node *kids, bool may_broadcast)
{
    unsigned op = th_rng_below(s, may_broadcast ? 6 : 5);
    tt_exec r, *use = ex;
    /* sometimes through a reborrow, sometimes narrowed */
    unsigned how = th_rng_below(s, 4);
    if (how >= 1) {
        tt_exec_reborrow(ex, &r);
        use = &r;
    }
    if (how >= 2) {
        unsigned lim = 1 + th_rng_below(s, 8);
        tt_exec_limit(use, lim);
    }
    switch (op) {
    case 0:
    case 1: {
        unsigned jobs = 1 + th_rng_below(s, 5);
        note_rc(t, tt_fork(use, jobs, tree_job, kids), "tt_fork");
        break;
    }
    case 2: {
        size_t len = th_rng_below(s, 41);
        size_t grain = 1 + th_rng_below(s, 8);
        if (th_rng_below(s, 2))
            note_rc(t, tt_for_ranges_dynamic(use, len, grain, tree_body, kids),
                    "tt_for_ranges_dynamic");
        else
            note_rc(t, tt_for_ranges(use, len, grain, tree_body, kids), "tt_for_ranges");
        break;
    }
    case 3:
        note_rc(t, tt_external(use, tree_ext, kids), "tt_external");
        break;
    case 4: {
        /* two phases on reborrows, then the parent itself */
        tt_exec a;
        tt_exec_reborrow(use, &a);
        note_rc(t, tt_fork(&a, 1 + th_rng_below(s, 3), tree_job, kids), "tt_fork (phase 1)");
        tt_exec_reborrow(use, &a);
        note_rc(t, tt_for_ranges(&a, 1 + th_rng_below(s, 20), 2, tree_body, kids),
                "tt_for_ranges (phase 2)");
        note_rc(t, tt_fork(use, 2, tree_job, kids), "tt_fork (phase 3)");
        break;
    }
    default:
        note_rc(t, tt_broadcast(use, tree_bcast, kids), "tt_broadcast");
        break;
    }
}

static void tree_job(void *arg, unsigned i, tt_exec *child)
{
    node *parent = arg;
    tree *t = parent->t;
    uint64_t s = th_seed_child(parent->seed, i);
    th_live_enter(&t->live);
    leaf_work(t, s);
    unsigned d = parent->depth + 1;
    /* deeper nodes are leaves more often */
    bool leaf = d >= MAX_DEPTH || th_rng_below(&s, 10) < 2 * d;
    if (!leaf) {
        node kids = {t, th_rng_next(&s), d};
        /* the job waits for its children: it gives its slot up */
        th_live_leave(&t->live);
        random_entry(t, child, &s, &kids, false);
        th_live_enter(&t->live);
        leaf_work(t, s);
    }
    th_live_leave(&t->live);
}

/* Run one tree of `budget` on pool from the calling (plain) thread.
 * Returns the max live seen (and checks the ledger). Any thread. */
static _Atomic long g_tree_tasks;

static int run_tree(tt_pool *pool, unsigned budget, uint64_t seed, unsigned *eff_budget)
{
    tree t;
    memset(&t, 0, sizeof t);
    t.pool = pool;
    t.seed = seed;
    th_live_init(&t.live);
    tt_exec root;
    int rc = tt_exec_init(&root, pool, budget);
    if (rc != TT_OK) {
        th_note_failure(__FILE__, __LINE__, "seed 0x%llx: tt_exec_init: %s",
                        (unsigned long long)seed, tt_status_name(rc));
        return 1 << 20;
    }
    t.budget = tt_exec_budget(&root);
    *eff_budget = t.budget;
    uint64_t s = seed;
    node kids = {&t, th_rng_next(&s), 0};
    random_entry(&t, &root, &s, &kids, true);
    int max = th_live_max(&t.live);
    atomic_fetch_add(&g_tree_tasks, atomic_load(&t.nodes));
    TT_CHECK(th_live_now(&t.live) == 0, "seed 0x%llx: %d tasks still counted live after the entry",
             (unsigned long long)seed, th_live_now(&t.live));
    TT_CHECK(max <= (int)t.budget,
             "seed 0x%llx (pool width %u, budget %u): %d tasks of one root ran at once",
             (unsigned long long)seed, tt_pool_width(pool), t.budget, max);
#if TT_LEDGER_ENABLED
    tt_ledger_root lr = tt_exec_ledger_root(&root);
    TT_CHECK(lr != 0, "seed 0x%llx: a root without a ledger id", (unsigned long long)seed);
    unsigned lmax = tt_ledger_max_live(lr), llive = tt_ledger_live(lr);
    TT_CHECK(lmax <= t.budget, "seed 0x%llx (width %u, budget %u): ledger max_live %u",
             (unsigned long long)seed, tt_pool_width(pool), t.budget, lmax);
    TT_CHECK(llive == 0, "seed 0x%llx: ledger live %u after the entry", (unsigned long long)seed,
             llive);
    if (atomic_load(&t.nodes) > 0)
        TT_CHECK(lmax >= 1, "seed 0x%llx: the ledger saw nothing of %d tasks",
                 (unsigned long long)seed, atomic_load(&t.nodes));
#endif
    return max;
}

START_TEST(test_random_trees)
{
    static const unsigned widths[] = {2, 4, 8};
    unsigned per = th_iters(300);
    unsigned trees = 0;
    int worst = 0;
    for (size_t wi = 0; wi < TT_ARRAY_LEN(widths); wi++) {
        tt_pool *pool = th_make_pool(widths[wi]);
        for (unsigned b = 1; b <= 8; b++) {
            for (unsigned k = 0; k < per; k++) {
                uint64_t seed = th_mix64(((uint64_t)widths[wi] << 40) ^ ((uint64_t)b << 32) ^ k);
                unsigned eb = 0;
                int max = run_tree(pool, b, seed, &eb);
                if (max > (int)eb)
                    worst = max - (int)eb > worst ? max - (int)eb : worst;
                trees++;
                if (th_failures())
                    break; /* the first failing seed is reported */
            }
            if (th_failures())
                break;
        }
        th_free_pool(pool);
        if (th_failures())
            break;
    }
    printf("random trees: %u trees, %ld tasks\n", trees, atomic_load(&g_tree_tasks));
    th_assert_no_failures();
    ck_assert_int_eq(worst, 0);
    ck_assert_uint_eq(trees, per * 8 * TT_ARRAY_LEN(widths));
}
END_TEST

typedef struct tree_thread {
    tt_pool *pool;
    unsigned t, count;
} tree_thread;

static void *tree_thread_main(void *arg)
{
    tree_thread *tt = arg;
    for (unsigned k = 0; k < tt->count && !th_failures(); k++) {
        uint64_t seed = th_mix64(0xc0ffeeull ^ ((uint64_t)tt->t << 48) ^ k);
        unsigned b = 1 + (unsigned)(seed % 8);
        unsigned eb = 0;
        (void)run_tree(tt->pool, b, seed, &eb);
    }
    return NULL;
}

START_TEST(test_random_trees_concurrent_roots)
{
    static const unsigned widths[] = {4, 8};
    for (size_t wi = 0; wi < TT_ARRAY_LEN(widths); wi++) {
        tt_pool *pool = th_make_pool(widths[wi]);
        tree_thread a[3];
        pthread_t th[3];
        for (unsigned t = 0; t < 3; t++) {
            a[t] = (tree_thread){pool, t + 10 * (unsigned)wi, th_iters(500)};
            ck_assert_int_eq(pthread_create(&th[t], NULL, tree_thread_main, &a[t]), 0);
        }
        for (unsigned t = 0; t < 3; t++)
            ck_assert(th_join_timeout(th[t], 120));
        th_free_pool(pool);
        th_assert_no_failures();
    }
}
END_TEST

/* A parent waiting for its children keeps no slot: a chain of nested
 * single-job forks, 12 deep, at whose bottom a fork of `budget` jobs meets at
 * a barrier of `budget` parties. Along the chain one task is live; at the
 * bottom all `budget` jobs run at once (the barrier completes only then), so
 * none of the 12 waiting parents kept a slot of the root's budget. */
typedef struct chain_ctx {
    th_live live;
    unsigned depth, budget;
    th_tbarrier bar;
    _Atomic int deepest, bottom_jobs;
#if TT_LEDGER_ENABLED
    tt_ledger_root root;
    _Atomic unsigned ledger_seen_max;
#endif
} chain_ctx;

static void chain_bottom(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    (void)child;
    chain_ctx *c = arg;
    th_live_enter(&c->live);
    atomic_fetch_add(&c->bottom_jobs, 1);
    TT_CHECK(th_tbarrier_wait(&c->bar, 20) >= 0,
             "the bottom fork's %u jobs did not run at once", c->budget);
    th_live_leave(&c->live);
}

static void chain_job(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    chain_ctx *c = arg;
    th_live_enter(&c->live);
#if TT_LEDGER_ENABLED
    unsigned l = tt_ledger_live(c->root);
    unsigned m = atomic_load(&c->ledger_seen_max);
    while (l > m && !atomic_compare_exchange_weak(&c->ledger_seen_max, &m, l))
        ;
    TT_CHECK(tt_exec_ledger_root(child) == c->root, "a fork child has another ledger root");
#endif
    if (c->depth > 0) {
        c->depth--;
        atomic_fetch_add(&c->deepest, 1);
        th_live_leave(&c->live);
        int rc = tt_fork(child, 1, chain_job, c);
        TT_CHECK(rc == TT_OK, "chain fork: %s", tt_status_name(rc));
        th_live_enter(&c->live);
    } else {
        th_live_leave(&c->live);
        int rc = tt_fork(child, c->budget, chain_bottom, c);
        TT_CHECK(rc == TT_OK, "bottom fork: %s", tt_status_name(rc));
        th_live_enter(&c->live);
    }
    th_live_leave(&c->live);
}

START_TEST(test_waiting_parent_keeps_no_slot)
{
    tt_pool *pool = th_make_pool(4);
    for (unsigned b = 1; b <= 2; b++) {
        chain_ctx c;
        memset(&c, 0, sizeof c);
        th_live_init(&c.live);
        c.depth = 12;
        tt_exec ex;
        ck_assert_int_eq(tt_exec_init(&ex, pool, b), TT_OK);
        c.budget = tt_exec_budget(&ex); /* 1 in a serial build */
        th_tbarrier_init(&c.bar, c.budget);
#if TT_LEDGER_ENABLED
        c.root = tt_exec_ledger_root(&ex);
        ck_assert_uint_ne(c.root, 0);
#endif
        ck_assert_int_eq(tt_fork(&ex, 1, chain_job, &c), TT_OK);
        th_assert_no_failures();
        ck_assert_int_eq(atomic_load(&c.deepest), 12);
        ck_assert_int_eq(atomic_load(&c.bottom_jobs), (int)c.budget);
        /* the chain: one at a time; the bottom: the whole budget at once */
        ck_assert_int_eq(th_live_max(&c.live), (int)c.budget);
#if TT_LEDGER_ENABLED
        /* inside the 13 chain jobs the ledger counted one live task */
        ck_assert_uint_eq(atomic_load(&c.ledger_seen_max), 1);
        ck_assert_uint_eq(tt_ledger_max_live(c.root), c.budget);
        ck_assert_uint_eq(tt_ledger_live(c.root), 0);
#endif
        th_tbarrier_destroy(&c.bar);
    }
    th_free_pool(pool);
    th_assert_no_failures();
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The ledger's own contract (only with --enable-ledger)                     */
/* ------------------------------------------------------------------------ */

#if TT_LEDGER_ENABLED
typedef struct lj {
    tt_ledger_root root;
    th_tbarrier bar;
    _Atomic int bad;
    _Atomic unsigned live_inside;
} lj;

static void ledger_job(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    lj *c = arg;
    if (tt_exec_ledger_root(child) != c->root)
        atomic_fetch_add(&c->bad, 1);
    tt_exec g;
    tt_exec_reborrow(child, &g);
    if (tt_exec_ledger_root(&g) != c->root)
        atomic_fetch_add(&c->bad, 1);
    tt_exec_finish(&g);
    /* all at once: the ledger sees them together */
    if (th_tbarrier_wait(&c->bar, 20) < 0)
        atomic_fetch_add(&c->bad, 1);
    unsigned l = tt_ledger_live(c->root);
    unsigned m = atomic_load(&c->live_inside);
    while (l > m && !atomic_compare_exchange_weak(&c->live_inside, &m, l))
        ;
    if (th_tbarrier_wait(&c->bar, 20) < 0)
        atomic_fetch_add(&c->bad, 1);
}
#endif

START_TEST(test_ledger_contract)
{
#if TT_LEDGER_ENABLED
    tt_pool *pool = th_make_pool(4);
    unsigned w = tt_pool_width(pool);
    ck_assert_uint_eq(tt_exec_ledger_root(NULL), 0);
    tt_exec g;
    memset(&g, 0xa5, sizeof g);
    ck_assert_uint_eq(tt_exec_ledger_root(&g), 0);
    /* "not known" is UINT_MAX, which no budget check passes */
    ck_assert_uint_eq(tt_ledger_max_live(0), UINT_MAX);
    ck_assert_uint_eq(tt_ledger_live(0), UINT_MAX);
    ck_assert_uint_eq(tt_ledger_pool_peak(NULL), UINT_MAX);
    ck_assert_uint_eq(tt_ledger_pool_live(NULL), UINT_MAX);
    ck_assert_uint_eq(tt_ledger_installs(NULL), 0);
    uint64_t lost0 = tt_ledger_lost();

    /* distinct roots, shared by derived tokens */
    tt_exec a, b, c;
    ck_assert_int_eq(tt_exec_init(&a, pool, 4), TT_OK);
    ck_assert_int_eq(tt_exec_init(&b, pool, 4), TT_OK);
    tt_ledger_root ra = tt_exec_ledger_root(&a), rb = tt_exec_ledger_root(&b);
    ck_assert_uint_ne(ra, 0);
    ck_assert_uint_ne(rb, 0);
    ck_assert_uint_ne(ra, rb);
    tt_exec_reborrow(&a, &c);
    ck_assert_uint_eq(tt_exec_ledger_root(&c), ra);
    tt_exec_limit(&c, 2);
    ck_assert_uint_eq(tt_exec_ledger_root(&c), ra);
    tt_exec_finish(&c);
    ck_assert_uint_eq(tt_ledger_max_live(ra), 0); /* nothing ran yet */
    ck_assert_uint_eq(tt_ledger_max_live(ra + 1000000), UINT_MAX); /* never minted */
    tt_exec s;
    tt_exec_init_serial(&s);
    ck_assert_uint_ne(tt_exec_ledger_root(&s), 0);
    tt_exec_finish(&s);

    /* a fork of w concurrent jobs: max_live is exactly w */
    lj j;
    memset(&j, 0, sizeof j);
    j.root = ra;
    th_tbarrier_init(&j.bar, w);
    ck_assert_int_eq(tt_fork(&a, w, ledger_job, &j), TT_OK);
    th_tbarrier_destroy(&j.bar);
    ck_assert_int_eq(atomic_load(&j.bad), 0);
    ck_assert_uint_eq(tt_ledger_max_live(ra), w);
    ck_assert_uint_eq(atomic_load(&j.live_inside), w);
    ck_assert_uint_eq(tt_ledger_live(ra), 0);
    /* the root id stays readable after the token is consumed */
    ck_assert_uint_eq(tt_exec_ledger_root(&a), ra);
    tt_exec_finish(&b);
    ck_assert_uint_eq(tt_ledger_max_live(rb), 0);

    /* the pool's peak: the w jobs at once */
    ck_assert_uint_eq(tt_ledger_pool_peak(pool), w);
    ck_assert_uint_eq(tt_ledger_pool_live(pool), 0);

    /* An idle root's record may be reused after 65536 newer roots: it then
     * reads "not known", never another root's counts. */
    for (unsigned k = 0; k < 65536u + 16u; k++) {
        tt_exec t;
        tt_exec_init_serial(&t);
    }
    ck_assert_uint_eq(tt_ledger_max_live(ra), UINT_MAX);
    ck_assert_uint_eq(tt_ledger_live(ra), UINT_MAX);
    ck_assert_uint_eq(tt_ledger_lost(), lost0);
    th_free_pool(pool);
#else
    /* without the ledger the slot checks above rest on the live counters */
    tt_pool *pool = th_make_pool(2);
    ck_assert_uint_eq(tt_pool_width(pool), th_expect_width(2));
    th_free_pool(pool);
#endif
}
END_TEST

#if TT_LEDGER_ENABLED
/* A running root keeps its record however many roots are minted while it
 * runs (the old ledger reused it after 65536 and then read the new root's
 * counts, 0, which passed "<= budget"). */
typedef struct mint_job_ctx {
    tt_ledger_root root;
    _Atomic unsigned live_after, max_after;
} mint_job_ctx;

static void mint_many_job(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    (void)child;
    mint_job_ctx *c = arg;
    for (unsigned k = 0; k < 3u * 65536u; k++) {
        tt_exec t;
        tt_exec_init_serial(&t);
    }
    atomic_store(&c->live_after, tt_ledger_live(c->root));
    atomic_store(&c->max_after, tt_ledger_max_live(c->root));
}

START_TEST(test_ledger_running_root_kept)
{
    tt_pool *pool = th_make_pool(2);
    uint64_t lost0 = tt_ledger_lost();
    tt_exec ex;
    ck_assert_int_eq(tt_exec_init(&ex, pool, 1), TT_OK);
    mint_job_ctx c = {.root = tt_exec_ledger_root(&ex)};
    ck_assert_int_eq(tt_fork(&ex, 1, mint_many_job, &c), TT_OK);
    ck_assert_uint_eq(atomic_load(&c.live_after), 1);
    ck_assert_uint_eq(atomic_load(&c.max_after), 1);
    ck_assert_uint_eq(tt_ledger_max_live(c.root), 1);
    ck_assert_uint_eq(tt_ledger_live(c.root), 0);
    ck_assert_uint_eq(tt_ledger_lost(), lost0);
    th_free_pool(pool);
}
END_TEST

/* The ledger counts threads: a scope's callback counts on the leader (once,
 * with the sections the leader runs), a split's parts count, sections of
 * every participant count, and the whole never passes the budget. */
typedef struct scope_led {
    tt_ledger_root root;
    th_tbarrier bar;
    _Atomic unsigned in_callback, in_part_min, in_section_max;
    _Atomic int bad;
} scope_led;

static void led_note_max(_Atomic unsigned *m, unsigned v)
{
    unsigned cur = atomic_load(m);
    while (v > cur && !atomic_compare_exchange_weak(m, &cur, v))
        ;
}

static void led_section(void *arg, tt_section *s)
{
    scope_led *c = arg;
    if (th_tbarrier_wait(&c->bar, 20) < 0)
        atomic_fetch_add(&c->bad, 1);
    led_note_max(&c->in_section_max, tt_ledger_live(c->root));
    tt_section_barrier(s);
}

static void led_part(void *arg, unsigned i, tt_scope *scope)
{
    (void)i;
    (void)scope;
    scope_led *c = arg;
    unsigned l = tt_ledger_live(c->root);
    unsigned m = atomic_load(&c->in_part_min);
    while (l < m && !atomic_compare_exchange_weak(&c->in_part_min, &m, l))
        ;
}

static void led_scope(void *arg, tt_scope *scope)
{
    scope_led *c = arg;
    atomic_store(&c->in_callback, tt_ledger_live(c->root));
    if (tt_scope_run(scope, led_section, c) != TT_OK)
        atomic_fetch_add(&c->bad, 1);
    if (tt_scope_split(scope, 2, led_part, c) != TT_OK)
        atomic_fetch_add(&c->bad, 1);
}

START_TEST(test_ledger_counts_threads)
{
    tt_pool *pool = th_make_pool(3);
    unsigned w = tt_pool_width(pool);
    tt_exec ex;
    ck_assert_int_eq(tt_exec_init(&ex, pool, w), TT_OK);
    scope_led c = {.root = tt_exec_ledger_root(&ex), .in_part_min = UINT_MAX};
    th_tbarrier_init(&c.bar, w);
    ck_assert_int_eq(tt_team_scope(&ex, led_scope, &c), TT_OK);
    th_tbarrier_destroy(&c.bar);
    ck_assert_int_eq(atomic_load(&c.bad), 0);
    /* the callback is the root's code on the leader: one thread */
    ck_assert_uint_eq(atomic_load(&c.in_callback), 1);
    /* every participant inside a section at once: w, the leader once */
    ck_assert_uint_eq(atomic_load(&c.in_section_max), w);
    ck_assert_uint_eq(tt_ledger_max_live(c.root), w);
    /* a split's part runs the root's code: at least its own thread */
    ck_assert_uint_ge(atomic_load(&c.in_part_min), 1);
    ck_assert_uint_ne(atomic_load(&c.in_part_min), UINT_MAX);
    ck_assert_uint_eq(tt_ledger_live(c.root), 0);
    ck_assert_uint_le(tt_ledger_pool_peak(pool), w);
    th_free_pool(pool);
}
END_TEST

#if TT_TREE_OMP
/* A callee's own threads count: a callee that opens a region of `width`
 * threads, all inside at once, shows `width` live; one that opens more
 * than it was handed (num_threads(width + 1)) shows the excess, which is
 * what a ledger is for. */
typedef struct callee_led {
    tt_ledger_root root;
    unsigned extra;
    _Atomic unsigned seen_max, threads;
} callee_led;

static void led_callee(void *arg, unsigned width)
{
    callee_led *c = arg;
#pragma omp parallel num_threads(width + c->extra)
    {
        atomic_fetch_add(&c->threads, 1);
#pragma omp barrier
        led_note_max(&c->seen_max, tt_ledger_live(c->root));
#pragma omp barrier
    }
}

START_TEST(test_ledger_counts_callee_threads)
{
    tt_pool *pool = th_make_pool(2);
    unsigned w = tt_pool_width(pool);
    for (unsigned extra = 0; extra <= 1; extra++) {
        tt_exec ex;
        ck_assert_int_eq(tt_exec_init(&ex, pool, w), TT_OK);
        callee_led c = {.root = tt_exec_ledger_root(&ex), .extra = extra};
        ck_assert_int_eq(tt_external(&ex, led_callee, &c), TT_OK);
        unsigned formed = atomic_load(&c.threads);
        ck_assert_uint_eq(formed, w + extra);
        ck_assert_uint_eq(atomic_load(&c.seen_max), formed);
        ck_assert_uint_eq(tt_ledger_max_live(c.root), formed);
        ck_assert_uint_eq(tt_ledger_live(c.root), 0);
        if (extra)
            ck_assert_uint_gt(tt_ledger_max_live(c.root), tt_exec_budget(&ex));
    }
    ck_assert_uint_eq(tt_ledger_pool_live(pool), 0);
    th_free_pool(pool);
}
END_TEST
#endif
#endif

/* The width caps every root of a pool together, inline ones too: plain
 * threads whose budget-1 roots run inline on themselves never run more
 * than the width at once (counted in user code). Before inline runs took
 * a slot, 3 threads ran side by side on a pool of width 1. */
typedef struct cap_ctx {
    tt_pool *pool;
    th_live live;
    unsigned rounds;
    _Atomic int bad;
} cap_ctx;

static void cap_job(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    (void)child;
    cap_ctx *c = arg;
    th_live_enter(&c->live);
    th_spin_us(20);
    th_live_leave(&c->live);
}

static void cap_range(void *arg, size_t b, size_t e)
{
    (void)b;
    (void)e;
    cap_job(arg, 0, NULL);
}

static void *cap_thread(void *arg)
{
    cap_ctx *c = arg;
    for (unsigned r = 0; r < c->rounds; r++) {
        tt_exec ex;
        if (tt_exec_init(&ex, c->pool, 1) != TT_OK) {
            atomic_fetch_add(&c->bad, 1);
            continue;
        }
        int rc = (r & 1) ? tt_fork(&ex, 2, cap_job, c) : tt_for_ranges(&ex, 10, 1, cap_range, c);
        if (rc != TT_OK)
            atomic_fetch_add(&c->bad, 1);
    }
    return NULL;
}

START_TEST(test_inline_roots_capped)
{
    for (unsigned w = 1; w <= 2; w++) {
        tt_pool *pool = th_make_pool(w);
        unsigned width = tt_pool_width(pool);
        cap_ctx c = {.pool = pool, .rounds = th_iters(300)};
        th_live_init(&c.live);
        pthread_t th[3];
        for (int t = 0; t < 3; t++)
            ck_assert_int_eq(pthread_create(&th[t], NULL, cap_thread, &c), 0);
        for (int t = 0; t < 3; t++)
            ck_assert(th_join_timeout(th[t], 120));
        ck_assert_int_eq(atomic_load(&c.bad), 0);
        ck_assert_msg(th_live_max(&c.live) <= (int)width,
                      "%d inline jobs at once on a pool of width %u", th_live_max(&c.live), width);
#if TT_LEDGER_ENABLED
        ck_assert_uint_le(tt_ledger_pool_peak(pool), width);
#endif
        th_free_pool(pool);
    }
}
END_TEST

static Suite *ledger_suite(void)
{
    Suite *s = suite_create("ledger");
    TCase *tc = th_tcase(s, "trees", 180);
    tcase_add_test(tc, test_random_trees);
    tcase_add_test(tc, test_random_trees_concurrent_roots);
    tc = th_tcase(s, "slots", 60);
    tcase_add_test(tc, test_waiting_parent_keeps_no_slot);
    tcase_add_test(tc, test_ledger_contract);
    tcase_add_test(tc, test_inline_roots_capped);
#if TT_LEDGER_ENABLED
    tcase_add_test(tc, test_ledger_running_root_kept);
    tcase_add_test(tc, test_ledger_counts_threads);
#if TT_TREE_OMP
    tcase_add_test(tc, test_ledger_counts_callee_threads);
#endif
#endif
    return s;
}

int main(void) { return th_run_suite(ledger_suite()); }
