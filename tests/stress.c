/*
 * stress.c -- random programs over threadteam, checked for slot
 * conservation and exactly-once execution. Not part of `make check`; run
 * by `make check-stress`.
 *
 *   stress [--seed S] [--iters N] [--seconds T] [--threads K]
 *          [--max-width W] [--depth D] [--iter-timeout S]
 *          [--skip-known[=AB]] [--stop] [-v]
 *
 * Defaults: seed 1, 5000 iterations, 120 s, 4 callers, widths up to 8,
 * depth 3, 30 s per iteration. STRESS_TRACE=1 prints every node of the
 * program as it runs (for a replayed seed). --skip-known avoids two
 * patterns that exposed library bugs (fixed since; see --help).
 *
 * Iteration i runs the program of seed S+i: one or two pools of widths 1
 * to W (default 8, wider than the machine too; default or dedicated
 * settings, random waits), 1 to K caller threads (default 4, at most 8),
 * each minting a few roots with random budgets and running a random tree
 * of entries on each: tt_fork (nested), tt_for_ranges (static and
 * dynamic), tt_broadcast, tt_external (with an OpenMP region inside, when
 * built with OpenMP),
 * team scopes (tt_team_scope_with + tt_scope_run / run_with / split /
 * fork / reborrow, with barriers inside the sections), reborrows, limits,
 * new roots minted inside tasks (on the same pool from a member, or on the
 * second pool: one direction only, so that no cycle of waits can form), and
 * sometimes a persistent team (tt_pool_into_team + tt_team_lead) on part of
 * the pool while other callers use the rest.
 *
 * Every root is checked with its own live counter (a task counts while it
 * runs user code; a waiter gives its slot up, like the library) and, when
 * TT_LEDGER_ENABLED, with tt_ledger_max_live(tt_exec_ledger_root(&root)):
 * neither may exceed the root's budget. Every range index, fork job,
 * broadcast index, section rank and split part runs exactly once; fork
 * children's budgets are the documented shares; broadcasts are concurrent
 * and run i on member i; tt_can_broadcast agrees with tt_broadcast; every
 * refusal is one the documentation allows, consumes nothing, and the
 * program falls back on the same token.
 *
 * A failing seed is printed with the command that replays it; a hang is
 * caught by a watchdog (--iter-timeout, default 30 s) that prints the seed
 * and exits 3. The last line is the summary:
 *   stress: N passed, F failed (...)
 * Exit status 0 when nothing failed. TT_TEST_QUICK=1 divides the default
 * iteration count by 20.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <threadteam.h>

#include "tt_proc.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define MAXW 32
#define MAXCALLERS 8
#define MAXJOBS 16
#define MAXLEN 2048

/* ------------------------------------------------------------------------ */
/* Options, clocks, randomness                                               */
/* ------------------------------------------------------------------------ */

static struct {
    uint64_t seed;
    long iters;
    double seconds;
    unsigned threads;
    unsigned max_width;
    unsigned depth;
    double iter_timeout;
    bool stop;
    bool verbose;
    bool iters_given;
    bool skip_known; /* skip_a || skip_b */
    bool skip_a, skip_b;
} opt = {1, 5000, 120, 4, 8, 3, 30, false, false, false, false, false, false};

static char prog[256] = "stress";



static uint64_t mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rnd(uint64_t *s)
{
    *s += 0x9e3779b97f4a7c15ull;
    return mix64(*s);
}

static unsigned below(uint64_t *s, unsigned n) { return n ? (unsigned)(rnd(s) % n) : 0; }

/* Deterministic in (seed, i), whatever thread runs it and when. */
static uint64_t child_seed(uint64_t seed, uint64_t i) { return mix64(seed ^ mix64(i * 0x632be59bd9b4e019ull + 1)); }



/* ------------------------------------------------------------------------ */
/* Failures of the current iteration                                         */
/* ------------------------------------------------------------------------ */

static _Atomic unsigned it_failures;
static pthread_mutex_t fail_lock = PTHREAD_MUTEX_INITIALIZER;
static char fail_first[512];
static _Atomic uint64_t cur_seed;

static void fail(const char *fmt, ...)
{
    unsigned n = atomic_fetch_add(&it_failures, 1);
    if (n >= 4)
        return;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "stress: seed %" PRIu64 ": %s\n", atomic_load(&cur_seed), msg);
    pthread_mutex_lock(&fail_lock);
    if (!fail_first[0])
        snprintf(fail_first, sizeof fail_first, "%s", msg);
    pthread_mutex_unlock(&fail_lock);
}

#define CHECK(c, ...)                                                          \
    do {                                                                       \
        if (!(c))                                                              \
            fail(__VA_ARGS__);                                                 \
    } while (0)

static void replay_cmd(uint64_t seed, char *buf, size_t len)
{
    snprintf(buf, len,
             "%s --seed %" PRIu64 " --iters 1 --threads %u --max-width %u --depth %u%s", prog,
             seed, opt.threads, opt.max_width, opt.depth,
             opt.skip_a && opt.skip_b ? " --skip-known"
             : opt.skip_a             ? " --skip-known=A"
             : opt.skip_b             ? " --skip-known=B"
                                      : "");
}

/* ------------------------------------------------------------------------ */
/* Roots and their counters                                                  */
/* ------------------------------------------------------------------------ */

typedef struct iter_state iter_state;

typedef struct root_ctx {
    _Atomic int live;
    _Atomic int max;
    unsigned budget;
    _Atomic int nodes; /* work bound */
    iter_state *it;
    uint64_t ledger_id;
} root_ctx;

static void live_add(root_ctx *r, int n)
{
    int now = atomic_fetch_add(&r->live, n) + n;
    int m = atomic_load(&r->max);
    while (now > m && !atomic_compare_exchange_weak(&r->max, &m, now))
        ;
    if (now > (int)r->budget)
        fail("root of budget %u: %d tasks running at once", r->budget, now);
}
static void live_sub(root_ctx *r, int n) { atomic_fetch_sub(&r->live, n); }

typedef struct pool_info {
    tt_pool *pool;
    unsigned width;
    int index; /* 0 or 1: tasks of pool 0 may enter pool 1, never back */
} pool_info;

struct iter_state {
    uint64_t seed;
    pool_info pools[2];
    unsigned npools;
    _Atomic long roots, entries, refusals;
};

/* What a node knows about its token. */
typedef struct node {
    tt_exec *ex;
    root_ctx *r;
    pool_info *pi;
    bool fork_derived; /* derived from tt_fork / tt_scope_fork */
    bool team;         /* carries team authority */
    unsigned depth;
    uint64_t seed;
} node;

static void run_node(node *n);
static void run_new_root(iter_state *it, pool_info *pi, unsigned depth, uint64_t seed);

/* Around an entry the issuing task waits: it gives its slot up. */
#define ENTRY(n, call)                                                         \
    ({                                                                         \
        live_sub((n)->r, 1);                                                   \
        atomic_fetch_add(&(n)->r->it->entries, 1);                             \
        int rc__ = (call);                                                     \
        live_add((n)->r, 1);                                                   \
        rc__;                                                                  \
    })

static bool on_member(const pool_info *pi)
{
    unsigned k;
    return tt_pool_is_member(pi->pool, &k);
}

/* A short piece of work, sometimes with a yield, so tasks overlap. */
static void work(uint64_t *s)
{
    unsigned k = below(s, 8);
    if (k == 0)
        sched_yield();
    else if (k == 1) {
        uint64_t end = th_proc_now_ns() + 2000;
        while (th_proc_now_ns() < end)
            ;
    }
}

/* A leaf: maybe a nested independent root (same pool from a member, or
 * the second pool). */
static void maybe_new_root(node *n, uint64_t *s)
{
    iter_state *it = n->r->it;
    if (n->depth >= opt.depth || below(s, 10) != 0)
        return;
    if (n->pi->index == 0 && it->npools > 1 && below(s, 2) == 0)
        run_new_root(it, &it->pools[1], n->depth + 1, rnd(s));
    else if (on_member(n->pi))
        run_new_root(it, n->pi, n->depth + 1, rnd(s));
}

/* ------------------------------------------------------------------------ */
/* tt_fork                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct fork_arg {
    node *parent;
    unsigned jobs;
    _Atomic int ran[MAXJOBS];
    _Atomic unsigned child_budget[MAXJOBS];
    bool team;
} fork_arg;

static void fork_job(void *arg, unsigned i, tt_exec *child)
{
    fork_arg *f = arg;
    node *p = f->parent;
    live_add(p->r, 1);
    if (i >= f->jobs || i >= MAXJOBS) {
        fail("fork job index %u of %u", i, f->jobs);
    } else {
        atomic_fetch_add(&f->ran[i], 1);
        atomic_store(&f->child_budget[i], tt_exec_budget(child));
        uint64_t s = child_seed(p->seed, i);
        work(&s);
        if (p->depth < opt.depth && below(&s, 3) != 0) {
            node c = {.ex = child, .r = p->r, .pi = p->pi, .fork_derived = true,
                      .team = f->team, .depth = p->depth + 1, .seed = rnd(&s)};
            run_node(&c);
        } else {
            maybe_new_root(p, &s);
        }
    }
    live_sub(p->r, 1);
}

static void check_shares(fork_arg *f, unsigned budget, const char *what)
{
    for (unsigned i = 0; i < f->jobs; i++)
        CHECK(atomic_load(&f->ran[i]) == 1, "%s: job %u of %u ran %d times", what, i, f->jobs,
              atomic_load(&f->ran[i]));
    if (f->jobs <= budget) {
        unsigned sum = 0, lo = UINT32_MAX, hi = 0;
        for (unsigned i = 0; i < f->jobs; i++) {
            unsigned b = atomic_load(&f->child_budget[i]);
            sum += b;
            lo = b < lo ? b : lo;
            hi = b > hi ? b : hi;
        }
        CHECK(sum == budget && hi - lo <= 1,
              "%s: %u jobs on budget %u: child budgets sum %u, spread %u..%u", what, f->jobs,
              budget, sum, lo, hi);
    } else {
        for (unsigned i = 0; i < f->jobs; i++)
            CHECK(atomic_load(&f->child_budget[i]) == 1,
                  "%s: %u jobs on budget %u: child %u has budget %u", what, f->jobs, budget, i,
                  atomic_load(&f->child_budget[i]));
    }
}

static int op_fork(node *n, uint64_t *s)
{
    fork_arg f;
    memset(&f, 0, sizeof f);
    f.parent = n;
    f.jobs = 1 + below(s, MAXJOBS / 2);
    f.team = n->team;
    unsigned budget = tt_exec_budget(n->ex);
    int rc = ENTRY(n, tt_fork(n->ex, f.jobs, fork_job, &f));
    CHECK(rc == TT_OK, "tt_fork(budget %u, %u jobs): %s", budget, f.jobs, tt_status_name(rc));
    if (rc == TT_OK)
        check_shares(&f, budget, "tt_fork");
    return rc;
}

/* ------------------------------------------------------------------------ */
/* tt_for_ranges                                                             */
/* ------------------------------------------------------------------------ */

typedef struct range_arg {
    node *n;
    size_t len, grain;
    bool dynamic; /* tt_for_ranges_dynamic: chunks of grain, first come */
    pthread_t caller;
    _Atomic bool caller_started;
    _Atomic unsigned char hits[MAXLEN];
    _Atomic unsigned calls;
    _Atomic unsigned short_ranges;
    _Atomic unsigned bad_chunks;    /* dynamic: a call that is not one chunk */
    _Atomic unsigned caller_not_0;  /* dynamic: the caller's first chunk was not 0 */
} range_arg;

static void range_body(void *arg, size_t b, size_t e)
{
    range_arg *r = arg;
    live_add(r->n->r, 1);
    atomic_fetch_add(&r->calls, 1);
    if (e - b < r->grain)
        atomic_fetch_add(&r->short_ranges, 1);
    if (r->dynamic) {
        /* Chunk c is [c * grain, min(len, (c + 1) * grain)); the caller's
         * task starts with chunk 0. */
        if (b % r->grain != 0 || (e - b != r->grain && e != r->len) || e - b > r->grain)
            atomic_fetch_add(&r->bad_chunks, 1);
        if (pthread_equal(pthread_self(), r->caller) &&
            !atomic_exchange(&r->caller_started, true) && b != 0)
            atomic_fetch_add(&r->caller_not_0, 1);
    }
    if (b > e || e > r->len)
        fail("range [%zu, %zu) outside [0, %zu)", b, e, r->len);
    else
        for (size_t i = b; i < e; i++)
            atomic_fetch_add(&r->hits[i], 1);
    uint64_t s = child_seed(r->n->seed, b);
    work(&s);
    live_sub(r->n->r, 1);
}

/* tt_for_ranges, or (dynamic) tt_for_ranges_dynamic: the same coverage,
 * and the shape of each form's calls: at most `budget` ranges of at least
 * grain (static), or exactly one call per chunk of grain, the caller's
 * first being chunk 0 (dynamic). The live counter holds either to the
 * budget. */
static int op_ranges_as(node *n, uint64_t *s, bool dynamic)
{
    range_arg *r = calloc(1, sizeof *r);
    if (!r)
        return TT_ENOMEM;
    r->n = n;
    r->dynamic = dynamic;
    r->caller = pthread_self();
    r->len = below(s, 8) == 0 ? 0 : below(s, MAXLEN);
    r->grain = 1 + below(s, 64);
    const char *what = dynamic ? "tt_for_ranges_dynamic" : "tt_for_ranges";
    unsigned budget = tt_exec_budget(n->ex);
    int rc = dynamic ? ENTRY(n, tt_for_ranges_dynamic(n->ex, r->len, r->grain, range_body, r))
                     : ENTRY(n, tt_for_ranges(n->ex, r->len, r->grain, range_body, r));
    CHECK(rc == TT_OK, "%s(len %zu, grain %zu): %s", what, r->len, r->grain,
          tt_status_name(rc));
    if (rc == TT_OK) {
        for (size_t i = 0; i < r->len; i++) {
            if (atomic_load(&r->hits[i]) != 1) {
                fail("%s(len %zu, grain %zu, budget %u): index %zu ran %u times", what, r->len,
                     r->grain, budget, i, (unsigned)atomic_load(&r->hits[i]));
                break;
            }
        }
        unsigned calls = atomic_load(&r->calls);
        if (dynamic) {
            size_t chunks = r->len / r->grain + (r->len % r->grain != 0);
            CHECK(calls == chunks, "%s(len %zu, grain %zu): %u calls for %zu chunks", what,
                  r->len, r->grain, calls, chunks);
            CHECK(atomic_load(&r->bad_chunks) == 0,
                  "%s(len %zu, grain %zu): %u calls were not one chunk", what, r->len, r->grain,
                  atomic_load(&r->bad_chunks));
            CHECK(atomic_load(&r->caller_not_0) == 0,
                  "%s(len %zu, grain %zu, budget %u): the caller's first chunk was not chunk 0",
                  what, r->len, r->grain, budget);
        } else {
            CHECK(calls <= (budget ? budget : 1), "%s: %u ranges on budget %u", what, calls,
                  budget);
            CHECK(atomic_load(&r->short_ranges) == 0 || calls == 1,
                  "%s(len %zu, grain %zu): %u ranges shorter than grain among %u", what, r->len,
                  r->grain, atomic_load(&r->short_ranges), calls);
        }
    }
    free(r);
    return rc;
}

/* Static two times in three. */
static int op_ranges(node *n, uint64_t *s) { return op_ranges_as(n, s, below(s, 3) == 0); }

/* ------------------------------------------------------------------------ */
/* tt_broadcast                                                              */
/* ------------------------------------------------------------------------ */

typedef struct bcast_arg {
    node *n;
    unsigned budget;
    bool check_member;
    _Atomic int ran[MAXW];
    _Atomic unsigned arrived;
} bcast_arg;

static void bcast_fn(void *arg, unsigned i)
{
    bcast_arg *b = arg;
    live_add(b->n->r, 1);
    if (i >= b->budget || i >= MAXW) {
        fail("broadcast index %u of %u", i, b->budget);
        live_sub(b->n->r, 1);
        return;
    }
    atomic_fetch_add(&b->ran[i], 1);
    if (b->check_member) {
        unsigned k = 0;
        bool m = tt_pool_is_member(b->n->pi->pool, &k);
        CHECK(m && k == i, "broadcast index %u ran on %s %u", i, m ? "member" : "a non-member",
              k);
    }
    /* All at once: everyone waits for everyone. */
    atomic_fetch_add(&b->arrived, 1);
    uint64_t end = th_proc_now_ns() + 10000000000ull;
    while (atomic_load(&b->arrived) < b->budget) {
        if (th_proc_now_ns() > end) {
            fail("broadcast of %u: index %u waited 10 s for the others (not concurrent)",
                 b->budget, i);
            break;
        }
        sched_yield();
    }
    live_sub(b->n->r, 1);
}

/* Returns TT_OK, or the refusal (then nothing was consumed). */
static int op_bcast(node *n, uint64_t *s)
{
    (void)s;
    bcast_arg *b = calloc(1, sizeof *b);
    if (!b)
        return TT_ENOMEM;
    b->n = n;
    b->budget = tt_exec_budget(n->ex);
    b->check_member = !n->team && b->budget > 1 && n->pi->width > 1;
    bool member = on_member(n->pi);
    int want = n->fork_derived ? TT_REFUSED_FORK_CHILD
               : (!n->team && member) ? TT_REFUSED_CALLER_IN_POOL
                                      : TT_OK;
    bool can = tt_can_broadcast(n->ex);
    int rc = ENTRY(n, tt_broadcast(n->ex, bcast_fn, b));
    /* No callee here calls back into a pool, so no broadcast is a callee
     * thread's: nothing is refused for a tt_external holding slots (the
     * library recognises a callee's threads exactly, backend_omp.c). */
    CHECK(rc == want, "tt_broadcast (budget %u, fork-derived %d, team %d, on member %d): %s",
          b->budget, n->fork_derived, n->team, member, tt_status_name(rc));
    CHECK(can == (rc == TT_OK),
          "tt_can_broadcast said %d, tt_broadcast returned %s", can, tt_status_name(rc));
    if (rc == TT_OK) {
        for (unsigned i = 0; i < b->budget && i < MAXW; i++)
            CHECK(atomic_load(&b->ran[i]) == 1, "broadcast index %u of %u ran %d times", i,
                  b->budget, atomic_load(&b->ran[i]));
    } else {
        atomic_fetch_add(&n->r->it->refusals, 1);
    }
    free(b);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* tt_external                                                               */
/* ------------------------------------------------------------------------ */

typedef struct ext_arg {
    node *n;
    unsigned budget;
    bool omp;
    _Atomic int calls;
} ext_arg;

static void ext_fn(void *arg, unsigned width)
{
    ext_arg *e = arg;
    atomic_fetch_add(&e->calls, 1);
    /* The callee gets the members the entry holds: the budget, or fewer on
     * a member's nested root that found fewer free (never more: the
     * callee's threads count under the root's budget). */
    CHECK(width >= 1 && width <= e->budget, "tt_external: width %u, budget %u", width,
          e->budget);
    live_add(e->n->r, (int)width);
#if defined(_OPENMP) && !defined(__SANITIZE_THREAD__)
    /* (Not under TSan: the outlined region's argument block is handed to
     * the team through libgomp's uninstrumented barriers, which TSan
     * reports as a race in the test's own frame.) */
    if (e->omp) {
        /* Atomics: TSan does not see libgomp's barriers. */
        _Atomic int seen, nthreads;
        atomic_store(&seen, 0);
        atomic_store(&nthreads, 0);
#pragma omp parallel num_threads(width)
        {
            atomic_fetch_add(&seen, 1);
            if (omp_get_thread_num() == 0)
                atomic_store(&nthreads, omp_get_num_threads());
        }
        /* Exactly `width` threads, unless a thread limit of the process
         * (OMP_THREAD_LIMIT, which the other callers' regions count
         * against) leaves fewer: never more, so the budget holds. */
        int got = atomic_load(&nthreads);
        bool limited = omp_get_thread_limit() < INT_MAX;
        CHECK(atomic_load(&seen) == got &&
                  (got == (int)width || (limited && got >= 1 && got < (int)width)),
              "OpenMP region inside tt_external(width %u) had %d threads", width, got);
    }
#endif
    live_sub(e->n->r, (int)width);
}

static int op_external(node *n, uint64_t *s)
{
    ext_arg e = {.n = n, .budget = tt_exec_budget(n->ex), .omp = below(s, 6) == 0};
    int rc = ENTRY(n, tt_external(n->ex, ext_fn, &e));
    CHECK(rc == TT_OK, "tt_external(budget %u): %s", e.budget, tt_status_name(rc));
    if (rc == TT_OK)
        CHECK(atomic_load(&e.calls) == 1, "tt_external called its function %d times",
              atomic_load(&e.calls));
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Team scopes                                                               */
/* ------------------------------------------------------------------------ */

typedef struct sect_arg {
    node *n; /* the leader's node (its root counter) */
    unsigned width;
    _Atomic int ran[MAXW];
    _Atomic unsigned slot[MAXW];
    unsigned rounds;
} sect_arg;

static void section_fn(void *arg, tt_section *sec)
{
    sect_arg *a = arg;
    live_add(a->n->r, 1);
    unsigned rank = tt_section_rank(sec), size = tt_section_size(sec);
    if (size != a->width || rank >= size || rank >= MAXW) {
        fail("section rank %u size %u, expected size %u", rank, size, a->width);
        live_sub(a->n->r, 1);
        return;
    }
    atomic_fetch_add(&a->ran[rank], 1);
    for (unsigned round = 1; round <= a->rounds; round++) {
        atomic_store(&a->slot[rank], round);
        tt_section_barrier(sec);
        for (unsigned k = 0; k < size; k++) {
            unsigned v = atomic_load(&a->slot[k]);
            if (v != round) {
                fail("barrier round %u of a section of %u: rank %u sees rank %u at %u", round,
                     size, rank, k, v);
                break;
            }
        }
        tt_section_barrier(sec);
    }
    live_sub(a->n->r, 1);
}

static void run_section_cmd(node *n, tt_scope *scope, unsigned width, uint64_t *s)
{
    sect_arg *a = calloc(1, sizeof *a);
    if (!a)
        return;
    a->n = n;
    a->width = width;
    a->rounds = below(s, 3);
    unsigned size = tt_scope_size(scope);
    int rc = width == size && below(s, 2) ? ENTRY(n, tt_scope_run(scope, section_fn, a))
                                          : ENTRY(n, tt_scope_run_with(scope, width, section_fn, a));
    CHECK(rc == TT_OK, "tt_scope_run_with(%u of %u): %s", width, size, tt_status_name(rc));
    if (rc == TT_OK)
        for (unsigned k = 0; k < width; k++)
            CHECK(atomic_load(&a->ran[k]) == 1, "section of %u: rank %u ran %d times", width, k,
                  atomic_load(&a->ran[k]));
    free(a);
}

static void scope_commands(node *n, tt_scope *scope, unsigned depth, uint64_t *s);

typedef struct split_arg {
    node *n;
    unsigned parts;
    _Atomic int ran[MAXJOBS];
} split_arg;

static void split_fn(void *arg, unsigned part, tt_scope *sub)
{
    split_arg *a = arg;
    live_add(a->n->r, 1);
    if (part >= a->parts || part >= MAXJOBS) {
        fail("split part %u of %u", part, a->parts);
    } else {
        atomic_fetch_add(&a->ran[part], 1);
        uint64_t s = child_seed(a->n->seed, 1000 + part);
        node sn = *a->n;
        sn.seed = rnd(&s);
        sn.depth = a->n->depth + 1;
        /* Pattern A (see --skip-known): the ledger used to count a split
         * part and its own sub-scope section at once. */
        if (!opt.skip_a)
            scope_commands(&sn, sub, sn.depth, &s);
    }
    live_sub(a->n->r, 1);
}

static void scope_commands(node *n, tt_scope *scope, unsigned depth, uint64_t *s)
{
    unsigned size = tt_scope_size(scope);
    unsigned ncmd = 1 + below(s, 4);
    for (unsigned c = 0; c < ncmd; c++) {
        unsigned kind = below(s, depth >= opt.depth ? 2 : 5);
        switch (kind) {
        case 0:
        case 1:
            run_section_cmd(n, scope, kind == 0 ? size : 1 + below(s, size), s);
            break;
        case 2: {
            split_arg a;
            memset(&a, 0, sizeof a);
            a.n = n;
            a.parts = 1 + below(s, size + 2 > MAXJOBS ? MAXJOBS : size + 2);
            int rc = ENTRY(n, tt_scope_split(scope, a.parts, split_fn, &a));
            CHECK(rc == TT_OK, "tt_scope_split(%u) of %u: %s", a.parts, size, tt_status_name(rc));
            if (rc == TT_OK)
                for (unsigned k = 0; k < a.parts; k++)
                    CHECK(atomic_load(&a.ran[k]) == 1, "split part %u of %u ran %d times", k,
                          a.parts, atomic_load(&a.ran[k]));
            break;
        }
        case 3: {
            fork_arg f;
            memset(&f, 0, sizeof f);
            node fn_node = *n;
            fn_node.depth = depth;
            f.parent = &fn_node;
            f.jobs = 1 + below(s, MAXJOBS / 2);
            f.team = true;
            int rc = ENTRY(n, tt_scope_fork(scope, f.jobs, fork_job, &f));
            CHECK(rc == TT_OK, "tt_scope_fork(%u) of %u: %s", f.jobs, size, tt_status_name(rc));
            if (rc == TT_OK)
                check_shares(&f, size, "tt_scope_fork");
            break;
        }
        default: {
            tt_exec child;
            tt_scope_reborrow(scope, &child);
            CHECK(tt_carries_team(&child) && tt_exec_budget(&child) == size,
                  "tt_scope_reborrow: team %d budget %u of %u", tt_carries_team(&child),
                  tt_exec_budget(&child), size);
            node c = {.ex = &child, .r = n->r, .pi = n->pi, .fork_derived = false, .team = true,
                      .depth = depth + 1, .seed = rnd(s)};
            /* The child's entries are the leader's: it waits meanwhile. */
            run_node(&c);
            tt_exec_finish(&child);
            break;
        }
        }
    }
}

typedef struct scope_arg {
    node *n;
    unsigned budget;
    _Atomic int calls;
} scope_arg;

static void scope_fn(void *arg, tt_scope *scope)
{
    scope_arg *a = arg;
    atomic_fetch_add(&a->calls, 1);
    live_add(a->n->r, 1);
    unsigned size = tt_scope_size(scope);
    CHECK(size == a->budget, "team scope of budget %u has %u participants", a->budget, size);
    uint64_t s = child_seed(a->n->seed, 77);
    scope_commands(a->n, scope, a->n->depth + 1, &s);
    live_sub(a->n->r, 1);
}

static int op_scope(node *n, uint64_t *s)
{
    scope_arg a = {.n = n, .budget = tt_exec_budget(n->ex)};
    tt_team_opts o;
    tt_team_opts_init(&o);
    o.acquire_timeout_ns = (uint64_t)(5 + below(s, 30)) * 1000000u;
    if (below(s, 4) == 0)
        o.spin_polls = below(s, 2) ? 0 : 100;
    int rc = ENTRY(n, tt_team_scope_with(n->ex, &o, scope_fn, &a));
    bool may_refuse = !n->team && a.budget > 1;
    CHECK(rc == TT_OK || (may_refuse && rc == TT_REFUSED_UNAVAILABLE),
          "tt_team_scope(budget %u, team %d): %s", a.budget, n->team, tt_status_name(rc));
    if (rc == TT_OK)
        CHECK(atomic_load(&a.calls) == 1, "the scope function ran %d times",
              atomic_load(&a.calls));
    else
        atomic_fetch_add(&n->r->it->refusals, 1);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* A node: one token, a random program on it                                 */
/* ------------------------------------------------------------------------ */

static bool trace_on;
#define TRACE(n, ...)                                                          \
    do {                                                                       \
        if (trace_on) {                                                        \
            char tb__[200];                                                    \
            snprintf(tb__, sizeof tb__, __VA_ARGS__);                          \
            fprintf(stderr, "trace: %*s[d%u b%u%s%s] %s\n", (int)(n)->depth * 2, "",       \
                    (n)->depth, tt_exec_budget((n)->ex), (n)->team ? " team" : "",         \
                    (n)->fork_derived ? " forked" : "", tb__);                           \
        }                                                                      \
    } while (0)

static void run_node(node *n)
{
    uint64_t s = n->seed;
    int nodes = atomic_fetch_add(&n->r->nodes, 1);
    bool leaf_only = n->depth >= opt.depth || nodes > 150;
    /* Narrow first, sometimes. (Pattern B, see --skip-known: a team token
     * narrower than its control block used to hang tt_fork /
     * tt_scope_split.) */
    if (below(&s, 6) == 0 && !(opt.skip_b && n->team)) {
        unsigned b = tt_exec_budget(n->ex);
        if (b > 1)
            tt_exec_limit(n->ex, 1 + below(&s, b));
    }
    for (int attempt = 0; attempt < 3; attempt++) {
        unsigned op = leaf_only ? 1 + below(&s, 4) : below(&s, 7);
        static const char *const opname[] = {"fork", "ranges", "broadcast", "external",
                                             "scope/ranges", "reborrow", "scope"};
        TRACE(n, "%s", opname[op]);
        int rc;
        switch (op) {
        case 0:
            rc = op_fork(n, &s);
            break;
        case 1:
            rc = op_ranges(n, &s);
            break;
        case 2:
            rc = op_bcast(n, &s);
            break;
        case 3:
            rc = op_external(n, &s);
            break;
        case 4:
            rc = leaf_only ? op_ranges(n, &s) : op_scope(n, &s);
            break;
        case 5: {
            /* Reborrow: the child runs a program, then the parent goes on. */
            tt_exec c;
            tt_exec_reborrow(n->ex, &c);
            node cn = *n;
            cn.ex = &c;
            cn.depth = n->depth + 1;
            cn.seed = rnd(&s);
            run_node(&cn);
            tt_exec_finish(&c);
            rc = TT_REFUSED_BUSY; /* go on with the parent */
            break;
        }
        default:
            rc = op_scope(n, &s);
            break;
        }
#if TT_LEDGER_ENABLED
        TRACE(n, "%s -> %s (ledger max %u, own max %d)", opname[op], tt_status_name(rc),
              tt_ledger_max_live(n->r->ledger_id), atomic_load(&n->r->max));
#endif
        if (rc == TT_OK || (rc != TT_REFUSED_FORK_CHILD && rc != TT_REFUSED_CALLER_IN_POOL &&
                            rc != TT_REFUSED_UNAVAILABLE && rc != TT_REFUSED_BUSY))
            return;
        /* A refusal consumed nothing: the same token again. */
    }
    /* Last fallback: a range, which never refuses. */
    op_ranges(n, &s);
}

static void check_root(root_ctx *r, tt_exec *root, const pool_info *pi, const char *what)
{
    CHECK(atomic_load(&r->max) <= (int)r->budget, "%s: own counter saw %d tasks, budget %u", what,
          atomic_load(&r->max), r->budget);
    CHECK(atomic_load(&r->live) == 0, "%s: own counter ends at %d", what, atomic_load(&r->live));
#if TT_LEDGER_ENABLED
    /* The id was read at mint time; an unknown root (0, or a reused record)
     * reads UINT_MAX and fails here rather than passing as "within budget". */
    tt_ledger_root id = r->ledger_id;
    (void)root;
    unsigned mx = tt_ledger_max_live(id);
    CHECK(id != 0, "%s: the root has no ledger id", what);
    CHECK(mx <= r->budget, "%s: ledger max_live %u above budget %u", what, mx, r->budget);
    CHECK(tt_ledger_live(id) == 0, "%s: ledger live %u after the root returned", what,
          tt_ledger_live(id));
    /* Every root on the pool together: at most the width of threads. */
    unsigned peak = tt_ledger_pool_peak(pi->pool);
    CHECK(peak <= pi->width, "%s: the pool's ledger peak %u above its width %u", what, peak,
          pi->width);
    CHECK(tt_ledger_lost() == 0, "%s: the ledger lost %llu counts", what,
          (unsigned long long)tt_ledger_lost());
#else
    (void)root;
    (void)pi;
#endif
}

static void run_new_root(iter_state *it, pool_info *pi, unsigned depth, uint64_t seed)
{
    tt_exec root;
    uint64_t s = seed;
    unsigned ask = 1 + below(&s, pi->width + 1);
    int rc = tt_exec_init(&root, pi->pool, ask);
    CHECK(rc == TT_OK, "tt_exec_init(budget %u): %s", ask, tt_status_name(rc));
    if (rc)
        return;
    root_ctx r = {.budget = tt_exec_budget(&root), .it = it};
#if TT_LEDGER_ENABLED
    r.ledger_id = tt_exec_ledger_root(&root);
#endif
    unsigned want = ask < pi->width ? ask : pi->width;
    CHECK(r.budget == want, "budget %u clamped to %u, expected %u", ask, r.budget, want);
    atomic_fetch_add(&it->roots, 1);
    node n = {.ex = &root, .r = &r, .pi = pi, .depth = depth, .seed = rnd(&s)};
    live_add(&r, 1);
    run_node(&n);
    live_sub(&r, 1);
    tt_exec_finish(&root);
    check_root(&r, &root, pi, "root");
}

/* ------------------------------------------------------------------------ */
/* Persistent team mode                                                      */
/* ------------------------------------------------------------------------ */

static void run_team_mode(iter_state *it, pool_info *pi, uint64_t seed)
{
    uint64_t s = seed;
    unsigned tw = 1 + below(&s, pi->width);
    tt_team *team = NULL;
    int rc = tt_pool_into_team(pi->pool, tw, &team);
    if (rc == TT_REFUSED_UNAVAILABLE || rc == TT_EBUSY) {
        atomic_fetch_add(&it->refusals, 1);
        return;
    }
    CHECK(rc == TT_OK, "tt_pool_into_team(%u of %u): %s", tw, pi->width, tt_status_name(rc));
    if (rc)
        return;
    CHECK(tt_pool_destroy(pi->pool) == TT_EBUSY, "destroy of a team-owned pool not TT_EBUSY");
    unsigned leads = 1 + below(&s, 3);
    for (unsigned l = 0; l < leads; l++) {
        tt_exec lead;
        unsigned ask = 1 + below(&s, tw + 1);
        if (opt.skip_b)
            ask = tw; /* pattern B */
        rc = tt_team_lead(team, ask, &lead);
        CHECK(rc == TT_OK, "tt_team_lead: %s", tt_status_name(rc));
        if (rc)
            break;
        root_ctx r = {.budget = tt_exec_budget(&lead), .it = it};
#if TT_LEDGER_ENABLED
        r.ledger_id = tt_exec_ledger_root(&lead);
#endif
        CHECK(r.budget == (ask < tw ? ask : tw), "team lead budget %u, asked %u of %u", r.budget,
              ask, tw);
        CHECK(tt_carries_team(&lead), "a lead token without team authority");
        atomic_fetch_add(&it->roots, 1);
        node n = {.ex = &lead, .r = &r, .pi = pi, .team = true, .depth = 1, .seed = rnd(&s)};
        live_add(&r, 1);
        run_node(&n);
        live_sub(&r, 1);
        tt_exec_finish(&lead); /* ends the role if no entry did */
        check_root(&r, &lead, pi, "team root");
    }
    tt_pool *back = tt_team_into_pool(team);
    CHECK(back == pi->pool, "tt_team_into_pool returned another pool");
}

/* ------------------------------------------------------------------------ */
/* One iteration                                                             */
/* ------------------------------------------------------------------------ */

typedef struct caller {
    iter_state *it;
    unsigned index;
    uint64_t seed;
    pthread_t thread;
    _Atomic int done;
} caller;

static void *caller_main(void *arg)
{
    caller *c = arg;
    uint64_t s = c->seed;
    unsigned roots = 1 + below(&s, 3);
    for (unsigned k = 0; k < roots; k++) {
        if (c->index == 0 && below(&s, 8) == 0)
            run_team_mode(c->it, &c->it->pools[0], rnd(&s));
        else
            run_new_root(c->it, &c->it->pools[below(&s, 4) == 0 ? c->it->npools - 1 : 0], 0,
                         rnd(&s));
    }
    atomic_store(&c->done, 1);
    return NULL;
}

static _Atomic int onstart_calls;
static void on_start(void *arg, unsigned member)
{
    (void)arg;
    (void)member;
    atomic_fetch_add(&onstart_calls, 1);
}

static tt_pool *make_pool(uint64_t *s, unsigned width, int *kind_out)
{
    tt_pool_attr *a = NULL;
    if (tt_pool_attr_create(&a) != TT_OK)
        return NULL;
    tt_pool_attr_set_threads(a, width);
    static const uint64_t polls[] = {0, 100, 2000, 20000};
    tt_pool_attr_set_spin_polls(a, polls[below(s, 4)]);
    tt_pool_attr_set_idle_spin(a, below(s, 2) ? 0 : 50000);
    tt_pool_attr_set_acquire_timeout(a, (uint64_t)(5 + below(s, 30)) * 1000000u);
    if (below(s, 4) == 0)
        tt_pool_attr_set_idle_serves_pool(a, true);
    int kind = below(s, 4) == 0 ? 1 + (int)below(s, 2) : 0;
    if (kind == 1)
        tt_pool_attr_set_thread_name(a, "stress");
    else if (kind == 2)
        tt_pool_attr_set_on_start(a, on_start, NULL);
    tt_pool *p = NULL;
    int rc = tt_pool_create(&p, a);
    tt_pool_attr_destroy(a);
    if (rc != TT_OK) {
        fail("tt_pool_create(width %u, kind %d): %s", width, kind, tt_status_name(rc));
        return NULL;
    }
    *kind_out = kind;
    return p;
}

static _Atomic int peak_threads;
static _Atomic uint64_t iter_start_ns;
static _Atomic int watchdog_stop;
static unsigned widest;

static void *watchdog_main(void *arg)
{
    (void)arg;
    while (!atomic_load(&watchdog_stop)) {
        int n = th_proc_count_threads();
        int m = atomic_load(&peak_threads);
        while (n > m && !atomic_compare_exchange_weak(&peak_threads, &m, n))
            ;
        uint64_t st = atomic_load(&iter_start_ns);
        if (st && th_proc_now_ns() - st > (uint64_t)(opt.iter_timeout * 1e9)) {
            char cmd[512];
            replay_cmd(atomic_load(&cur_seed), cmd, sizeof cmd);
            fprintf(stderr,
                    "stress: seed %" PRIu64 " still running after %.0f s: a hang\n"
                    "stress: replay: %s\n",
                    atomic_load(&cur_seed), opt.iter_timeout, cmd);
            fflush(stderr);
            _exit(3);
        }
        th_proc_sleep_us(5000);
    }
    return NULL;
}

static void *watchdog_dummy(void *arg) { return arg; }

static bool run_iteration(uint64_t seed, iter_state *it)
{
    memset(it, 0, sizeof *it);
    it->seed = seed;
    uint64_t s = seed;
    it->npools = below(&s, 3) == 0 ? 2 : 1;
    int kinds[2] = {0, 0};
    for (unsigned p = 0; p < it->npools; p++) {
        unsigned w = 1 + below(&s, opt.max_width);
        it->pools[p].width = w;
        it->pools[p].index = (int)p;
        it->pools[p].pool = make_pool(&s, w, &kinds[p]);
        if (!it->pools[p].pool)
            return false;
        unsigned got = tt_pool_width(it->pools[p].pool);
        CHECK(got == (TT_PARALLEL_ENABLED ? w : 1u), "pool width %u, asked %u", got, w);
        it->pools[p].width = got;
        if (got > widest)
            widest = got;
    }
    unsigned ncallers = 1 + below(&s, opt.threads);
    caller callers[MAXCALLERS];
    for (unsigned c = 0; c < ncallers; c++) {
        callers[c] = (caller){.it = it, .index = c, .seed = child_seed(seed, 100 + c)};
        if (pthread_create(&callers[c].thread, NULL, caller_main, &callers[c]) != 0) {
            fail("pthread_create of caller %u", c);
            ncallers = c;
            break;
        }
    }
    for (unsigned c = 0; c < ncallers; c++)
        pthread_join(callers[c].thread, NULL);
    for (unsigned p = 0; p < it->npools; p++) {
        int rc = tt_pool_destroy(it->pools[p].pool);
        CHECK(rc == TT_OK, "tt_pool_destroy after the callers: %s", tt_status_name(rc));
    }
    return atomic_load(&it_failures) == 0;
}

/* ------------------------------------------------------------------------ */
/* main                                                                      */
/* ------------------------------------------------------------------------ */

static void usage(void)
{
    fprintf(stderr,
            "usage: %s [--seed S] [--iters N] [--seconds T] [--threads K] [--max-width W]\n"
            "          [--depth D] [--iter-timeout S] [--skip-known[=AB]] [--stop] [-v]\n"
            "  --skip-known  avoid the patterns of two library bugs this program found\n"
            "                (fixed; the switch is for runs against older libraries):\n"
            "                (A) sub-scope commands inside tt_scope_split parts (the\n"
            "                ledger counted the part and its section twice), (B) team\n"
            "                tokens narrower than their scope (tt_fork and\n"
            "                tt_scope_split on them hung); =A or =B for one of them\n",
            prog);
}

int main(int argc, char **argv)
{
    snprintf(prog, sizeof prog, "%s", argv[0]);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--seed") && v) {
            opt.seed = strtoull(v, NULL, 0);
            i++;
        } else if (!strcmp(a, "--iters") && v) {
            opt.iters = strtol(v, NULL, 0);
            opt.iters_given = true;
            i++;
        } else if (!strcmp(a, "--seconds") && v) {
            opt.seconds = strtod(v, NULL);
            i++;
        } else if (!strcmp(a, "--threads") && v) {
            opt.threads = (unsigned)strtoul(v, NULL, 0);
            i++;
        } else if (!strcmp(a, "--max-width") && v) {
            opt.max_width = (unsigned)strtoul(v, NULL, 0);
            i++;
        } else if (!strcmp(a, "--depth") && v) {
            opt.depth = (unsigned)strtoul(v, NULL, 0);
            i++;
        } else if (!strcmp(a, "--iter-timeout") && v) {
            opt.iter_timeout = strtod(v, NULL);
            i++;
        } else if (!strcmp(a, "--skip-known")) {
            opt.skip_known = opt.skip_a = opt.skip_b = true;
        } else if (!strncmp(a, "--skip-known=", 13)) {
            opt.skip_a = strchr(a + 13, 'A') != NULL;
            opt.skip_b = strchr(a + 13, 'B') != NULL;
            opt.skip_known = opt.skip_a || opt.skip_b;
        } else if (!strcmp(a, "--stop")) {
            opt.stop = true;
        } else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
            opt.verbose = true;
        } else {
            usage();
            return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0 ? 0 : 2;
        }
    }
    if (opt.threads < 1)
        opt.threads = 1;
    if (opt.threads > MAXCALLERS)
        opt.threads = MAXCALLERS;
    if (opt.max_width < 1)
        opt.max_width = 1;
    if (opt.max_width > MAXW)
        opt.max_width = MAXW;
#ifdef _OPENMP
    /* Under OMP_THREAD_LIMIT a wider pool is refused at tt_pool_create
     * (TT_ERANGE, as documented): the program builds none. */
    if (omp_get_thread_limit() > 0 && (unsigned)omp_get_thread_limit() < opt.max_width)
        opt.max_width = (unsigned)omp_get_thread_limit();
#endif
    trace_on = getenv("STRESS_TRACE") != NULL;
    const char *q = getenv("TT_TEST_QUICK");
    if (!opt.iters_given && q && *q && strcmp(q, "0") != 0)
        opt.iters = opt.iters / 20 > 0 ? opt.iters / 20 : 1;

    /* A sanitizer's runtime may start a thread of its own with the first
     * pthread_create: let it, before the baseline. */
    pthread_t dummy;
    if (pthread_create(&dummy, NULL, watchdog_dummy, NULL) == 0)
        pthread_join(dummy, NULL);
    int base_threads = th_proc_count_threads();
    pthread_t wd;
    pthread_create(&wd, NULL, watchdog_main, NULL);
    uint64_t t0 = th_proc_now_ns();
    long passed = 0, failed = 0, roots = 0, entries = 0, refusals = 0;
    uint64_t first_failed = 0;
    iter_state it;
    for (long i = 0; i < opt.iters; i++) {
        if ((double)(th_proc_now_ns() - t0) / 1e9 > opt.seconds)
            break;
        uint64_t seed = opt.seed + (uint64_t)i;
        atomic_store(&cur_seed, seed);
        atomic_store(&it_failures, 0);
        fail_first[0] = 0;
        atomic_store(&iter_start_ns, th_proc_now_ns());
        bool ok = run_iteration(seed, &it);
        atomic_store(&iter_start_ns, 0);
        roots += atomic_load(&it.roots);
        entries += atomic_load(&it.entries);
        refusals += atomic_load(&it.refusals);
        if (ok) {
            passed++;
        } else {
            if (!failed)
                first_failed = seed;
            failed++;
            char cmd[512];
            replay_cmd(seed, cmd, sizeof cmd);
            fprintf(stderr, "stress: FAIL seed %" PRIu64 ": %s\nstress: replay: %s\n", seed,
                    fail_first, cmd);
            if (opt.stop)
                break;
        }
        if (opt.verbose)
            fprintf(stderr, "stress: seed %" PRIu64 " %s (%ld roots so far)\n", seed,
                    ok ? "ok" : "FAILED", roots);
    }
    double elapsed = (double)(th_proc_now_ns() - t0) / 1e9;
    atomic_store(&watchdog_stop, 1);
    pthread_join(wd, NULL);
    /* Everything destroyed: what is left is the cache (at most
     * max(CPUs, widest pool) threads) and this thread. */
    int end_threads = th_proc_count_threads();
    unsigned cap = th_proc_cpus() > widest ? th_proc_cpus() : widest;
    bool bounded = end_threads <= base_threads + (int)cap;
    if (!bounded) {
        fprintf(stderr, "stress: %d threads left after every pool was destroyed (cache cap %u, "
                        "base %d)\n",
                end_threads, cap, base_threads);
        failed++;
    }
    printf("stress: %ld passed, %ld failed (%ld iterations, seeds %" PRIu64 "..%" PRIu64
           ", %ld roots, %ld entries, %ld refusals, callers <= %u, widths <= %u, depth %u, "
           "peak threads %d, threads at the end %d (cache cap %u), %.1f s%s%s)\n",
           passed, failed, passed + failed, opt.seed,
           opt.seed + (uint64_t)(passed + failed) - (passed + failed ? 1 : 0), roots, entries,
           refusals, opt.threads, opt.max_width, opt.depth, atomic_load(&peak_threads),
           end_threads, cap, elapsed, TT_LEDGER_ENABLED ? ", ledger checked" : ", no ledger",
           opt.skip_known ? ", known bugs skipped" : "");
    if (failed && first_failed) {
        char cmd[512];
        replay_cmd(first_failed, cmd, sizeof cmd);
        printf("stress: first failing seed %" PRIu64 ": %s\n", first_failed, cmd);
    }
    return failed ? 1 : 0;
}
