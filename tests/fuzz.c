/*
 * fuzz.c -- the misuse fuzzer: random sequences of public calls from 1 to 8
 * threads, misuse mixed in, and only documented answers accepted.
 *
 * usage: fuzz [--sequences N] [--seed S] [-v]
 *
 * Each sequence draws its threads (1..8), one or two pools (widths 1..4:
 * wider than this machine too; sometimes built by the sequence and
 * destroyed while the others use it) and gives every thread a few token
 * slots. Every thread then makes 4..24 steps, each a public call chosen at
 * random: mint a root (budget 0..9), tt_fork / tt_for_ranges (static or
 * dynamic) / tt_broadcast / tt_external / tt_team_scope on a slot, reborrow (into a
 * chain, onto itself, into a cycle), limit (0 too), finish, copy a token
 * by memcpy, NULL arguments, absurd sizes (jobs 0, grain 0, len SIZE_MAX),
 * destroy of a pool under load, tt_can_broadcast against tt_broadcast.
 * Jobs, ranges, broadcast calls and sections nest a few more random calls
 * on their child tokens (using a child twice, broadcasting on a fork child,
 * entering a busy parent).
 *
 * Checks, after every step:
 *   - the return code is one that the header lists for that function;
 *   - a call that returned TT_OK ran what it promised (every job once,
 *     every index once, every broadcast index once, the callee once with a
 *     width in 1..budget, the scope callback once);
 *   - with --enable-ledger: every root minted in the sequence has
 *     tt_ledger_max_live <= its budget (UINT_MAX, "not known", fails), each
 *     pool's tt_ledger_pool_peak <= its width, and tt_ledger_lost() == 0.
 * A sequence that runs past 60 s is reported as a hang. A failure prints
 * the seed, and so does a sequence that kills the process (an ASan report,
 * a debug assertion, a crash); `fuzz --seed S --sequences 1` replays it. make check-stress runs
 * 10^5 sequences of the AddressSanitizer build (with the ledger).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <threadteam.h>

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#if defined(_OPENMP)
#include <omp.h>
#endif

#define MAXT 8
#define SLOTS 4
#define MAXROOTS 512

/* ------------------------------------------------------------------------ */
/* Documented codes                                                          */
/* ------------------------------------------------------------------------ */

/* Codes are small non-negative numbers: one bit each (63 for anything out
 * of range, which no mask contains). */
static uint64_t bit(int rc) { return rc >= 0 && rc < 63 ? 1ull << rc : 1ull << 63; }

/* The header's Errors lines (include/threadteam.h.in). */
static uint64_t codes_entry, codes_dyn, codes_bcast, codes_scope, codes_init, codes_destroy,
    codes_ext;

/* The codes of one function, from FUZZ_ERRORS: a file of lines "name CODE
 * CODE ..." that tests/errors_from_header.sh derives from the installed
 * header (make check-stress writes it), so that the fuzzer accepts exactly
 * what the Errors lines say. 0 when the file has no line for `fn`. */
static uint64_t codes_from_file(const char *path, const char *fn)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[1024];
    uint64_t mask = 0;
    size_t n = strlen(fn);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, fn, n) != 0 || line[n] != ' ')
            continue;
        mask = bit(TT_OK);
        for (char *tok = strtok(line + n, " \n"); tok; tok = strtok(NULL, " \n"))
            for (int c = 0; c < 63; c++)
                if (strcmp(tt_status_name(c), tok) == 0)
                    mask |= bit(c);
        break;
    }
    fclose(f);
    return mask;
}

static void codes_setup(void)
{
    const char *path = getenv("FUZZ_ERRORS");
    if (path) {
        codes_entry = codes_from_file(path, "tt_fork");
        codes_dyn = codes_from_file(path, "tt_for_ranges_dynamic");
        codes_bcast = codes_from_file(path, "tt_broadcast");
        codes_scope = codes_from_file(path, "tt_team_scope");
        codes_init = codes_from_file(path, "tt_exec_init");
        codes_destroy = codes_from_file(path, "tt_pool_destroy");
        codes_ext = codes_from_file(path, "tt_external");
        if (codes_entry && codes_dyn && codes_bcast && codes_scope && codes_init &&
            codes_destroy && codes_ext)
            return;
        fprintf(stderr, "fuzz: %s lacks a function's line; using the built-in lists\n", path);
    }
    const int entry[] = {TT_OK,  TT_EINVAL, TT_ECONSUMED, TT_ECOPY, TT_EBUSY, TT_EWRONGTHREAD,
                         TT_EFORKED, TT_EDESTROYED, TT_ENOMEM};
    for (size_t i = 0; i < sizeof entry / sizeof *entry; i++)
        codes_entry |= bit(entry[i]);
    codes_dyn = codes_entry;
    /* A broadcast, an external and a team scope need their threads: a
     * private crew that cannot start is TT_EAGAIN, one that came out short
     * a refusal. A fork or ranges never fails for want of threads. */
    codes_bcast = codes_entry | bit(TT_REFUSED_FORK_CHILD) | bit(TT_REFUSED_CALLER_IN_POOL) |
                  bit(TT_REFUSED_UNAVAILABLE) | bit(TT_EAGAIN);
    codes_scope = codes_entry | bit(TT_REFUSED_UNAVAILABLE) | bit(TT_EAGAIN);
    codes_init = bit(TT_OK) | bit(TT_EINVAL) | bit(TT_EFORKED) | bit(TT_EDESTROYED);
    codes_destroy = bit(TT_OK) | bit(TT_EBUSY) | bit(TT_EDESTROYED);
    codes_ext = codes_entry | bit(TT_EAGAIN) | bit(TT_REFUSED_UNAVAILABLE);
}

/* ------------------------------------------------------------------------ */
/* Failures                                                                  */
/* ------------------------------------------------------------------------ */

static _Atomic unsigned failures;
static _Atomic uint64_t cur_seed;
static bool verbose;

#define FAIL(...)                                                                        \
    do {                                                                                 \
        if (atomic_fetch_add(&failures, 1) < 20) {                                       \
            fprintf(stderr, "fuzz: seed %llu: ", (unsigned long long)atomic_load(&cur_seed)); \
            fprintf(stderr, __VA_ARGS__);                                                \
            fputc('\n', stderr);                                                         \
        }                                                                                \
    } while (0)

#define EXPECT(mask, rc, what)                                                           \
    do {                                                                                 \
        if (!((mask) & bit(rc)))                                                         \
            FAIL("%s returned %s (%d), not a documented code", what, tt_status_name(rc), rc); \
    } while (0)

/* ------------------------------------------------------------------------ */
/* Random numbers                                                            */
/* ------------------------------------------------------------------------ */

static uint64_t rnd(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static unsigned below(uint64_t *s, unsigned n) { return n ? (unsigned)(rnd(s) % n) : 0; }

/* ------------------------------------------------------------------------ */
/* A sequence                                                                */
/* ------------------------------------------------------------------------ */

typedef struct seq {
    tt_pool *pool[2];
    unsigned width[2];
    bool own[2];                /* built by this sequence (may be destroyed) */
    _Atomic bool destroyed[2];  /* destroyed by a step: no new roots on it   */
    unsigned nthreads;
    /* Roots minted in the sequence: ledger id and budget. */
    _Atomic unsigned nroots;
    uint64_t root_id[MAXROOTS];
    unsigned root_budget[MAXROOTS];
    pthread_barrier_t start;
} seq;

typedef struct thr {
    seq *q;
    uint64_t s;
    tt_exec slot[SLOTS];
    bool used[SLOTS];
} thr;

static void note_root(seq *q, tt_exec *ex)
{
#if TT_LEDGER_ENABLED
    unsigned i = atomic_fetch_add(&q->nroots, 1);
    if (i < MAXROOTS) {
        q->root_budget[i] = tt_exec_budget(ex);
        /* Published by the store below; readers stop at nroots (acquire of
         * the later count is enough for this test: a torn read fails). */
        __atomic_store_n(&q->root_id[i], tt_exec_ledger_root(ex), __ATOMIC_RELEASE);
    }
#else
    (void)q;
    (void)ex;
#endif
}

static void check_ledger(seq *q)
{
#if TT_LEDGER_ENABLED
    unsigned n = atomic_load(&q->nroots);
    if (n > MAXROOTS)
        n = MAXROOTS;
    for (unsigned i = 0; i < n; i++) {
        uint64_t id = __atomic_load_n(&q->root_id[i], __ATOMIC_ACQUIRE);
        if (id == 0)
            continue; /* being written */
        unsigned mx = tt_ledger_max_live(id);
        if (mx > q->root_budget[i])
            FAIL("ledger: root %llu ran %u threads at once, budget %u", (unsigned long long)id,
                 mx, q->root_budget[i]);
    }
    for (int p = 0; p < 2; p++)
        if (q->pool[p] && !atomic_load(&q->destroyed[p])) {
            unsigned pk = tt_ledger_pool_peak(q->pool[p]);
            if (pk > q->width[p])
                FAIL("ledger: pool %d peak %u above its width %u", p, pk, q->width[p]);
        }
    if (tt_ledger_lost())
        FAIL("ledger: %llu counts lost", (unsigned long long)tt_ledger_lost());
#else
    (void)q;
#endif
}

/* ------------------------------------------------------------------------ */
/* Calls on a token, nested a little                                         */
/* ------------------------------------------------------------------------ */

static void calls(thr *t, tt_exec *ex, unsigned depth);

typedef struct job_ctx {
    thr *t;
    unsigned depth;
    unsigned jobs;
    uint64_t seed;
    _Atomic unsigned ran[8];
    _Atomic unsigned total;
} job_ctx;

/* A nested call runs on whatever thread runs the job: it gets a private
 * PRNG and private slots (a thr of its own, sharing the sequence). */
static void nested(job_ctx *c, tt_exec *child, unsigned i)
{
    if (c->depth >= 2)
        return;
    thr sub;
    memset(&sub, 0, sizeof sub);
    sub.q = c->t->q;
    sub.s = c->seed ^ (0x1234567ull * (i + 1));
    if (below(&sub.s, 3) == 0)
        return;
    calls(&sub, child, c->depth + 1);
    for (int k = 0; k < SLOTS; k++)
        if (sub.used[k])
            tt_exec_finish(&sub.slot[k]);
}

/* A job that only runs (for the forks of misuse cases). */
static void fz_leaf(void *arg, unsigned i, tt_exec *child)
{
    (void)arg;
    (void)i;
    (void)child;
}

static void fz_job(void *arg, unsigned i, tt_exec *child)
{
    job_ctx *c = arg;
    if (i < 8)
        atomic_fetch_add(&c->ran[i], 1);
    atomic_fetch_add(&c->total, 1);
    nested(c, child, i);
    /* Misuse: the child again (consumed if the nested call entered). */
    if ((c->seed >> (i % 32)) & 1) {
        int rc = tt_fork(child, 1, fz_leaf, NULL);
        EXPECT(codes_entry, rc, "tt_fork on a used child");
    }
}

typedef struct range_ctx {
    size_t len;
    _Atomic size_t covered;
    _Atomic unsigned calls;
} range_ctx;

static void fz_range(void *arg, size_t b, size_t e)
{
    range_ctx *r = arg;
    if (e < b || e > r->len)
        FAIL("tt_for_ranges: range [%zu, %zu) outside [0, %zu)", b, e, r->len);
    atomic_fetch_add(&r->covered, e - b);
    atomic_fetch_add(&r->calls, 1);
}

typedef struct bc_ctx {
    unsigned budget;
    _Atomic unsigned ran[16];
} bc_ctx;

static void fz_bcast(void *arg, unsigned i)
{
    bc_ctx *b = arg;
    if (i >= b->budget || i >= 16)
        FAIL("tt_broadcast: index %u of %u", i, b->budget);
    else
        atomic_fetch_add(&b->ran[i], 1);
}

typedef struct ext_ctx {
    unsigned budget;
    bool omp;
    _Atomic unsigned calls, width;
} ext_ctx;

static void fz_external(void *arg, unsigned width)
{
    ext_ctx *e = arg;
    atomic_fetch_add(&e->calls, 1);
    atomic_store(&e->width, width);
#if defined(_OPENMP) && !defined(__SANITIZE_THREAD__)
    if (e->omp) {
        _Atomic unsigned n = 0;
#pragma omp parallel
        atomic_fetch_add(&n, 1);
        if (atomic_load(&n) > width)
            FAIL("tt_external: the callee's region had %u threads, width %u", atomic_load(&n),
                 width);
    }
#endif
}

typedef struct scope_ctx {
    thr *t;
    unsigned depth;
    uint64_t seed;
    _Atomic unsigned calls, sections;
} scope_ctx;

static void fz_section(void *arg, tt_section *s)
{
    scope_ctx *c = arg;
    atomic_fetch_add(&c->sections, 1);
    tt_section_barrier(s);
}

static void fz_part(void *arg, unsigned part, tt_scope *sub)
{
    (void)part;
    scope_ctx *c = arg;
    int rc = tt_scope_run(sub, fz_section, c);
    EXPECT(bit(TT_OK), rc, "tt_scope_run on a split's sub-scope");
}

static void fz_scope(void *arg, tt_scope *scope)
{
    scope_ctx *c = arg;
    atomic_fetch_add(&c->calls, 1);
    uint64_t s = c->seed;
    unsigned size = tt_scope_size(scope);
    switch (below(&s, 5)) {
    case 0: {
        unsigned before = atomic_load(&c->sections);
        int rc = tt_scope_run(scope, fz_section, c);
        EXPECT(bit(TT_OK), rc, "tt_scope_run");
        if (rc == TT_OK && atomic_load(&c->sections) - before != size)
            FAIL("tt_scope_run: %u sections for a scope of %u",
                 atomic_load(&c->sections) - before, size);
        break;
    }
    case 1: {
        int rc = tt_scope_run_with(scope, below(&s, size + 2), fz_section, c);
        EXPECT(bit(TT_OK) | bit(TT_EINVAL), rc, "tt_scope_run_with");
        break;
    }
    case 2: {
        int rc = tt_scope_split(scope, below(&s, 4), fz_part, c);
        EXPECT(bit(TT_OK) | bit(TT_EINVAL), rc, "tt_scope_split");
        break;
    }
    case 3: {
        job_ctx j = {.t = c->t, .depth = c->depth + 1, .jobs = 1 + below(&s, 4), .seed = rnd(&s)};
        int rc = tt_scope_fork(scope, j.jobs, fz_job, &j);
        EXPECT(bit(TT_OK), rc, "tt_scope_fork");
        if (rc == TT_OK && atomic_load(&j.total) < j.jobs)
            FAIL("tt_scope_fork: %u of %u jobs ran", atomic_load(&j.total), j.jobs);
        break;
    }
    default: {
        /* Misuse: NULL section. */
        int rc = tt_scope_run(scope, NULL, c);
        EXPECT(bit(TT_EINVAL), rc, "tt_scope_run(NULL section)");
        break;
    }
    }
}

/* One call on ex (which it may consume), chosen at random. */
static void calls(thr *t, tt_exec *ex, unsigned depth)
{
    seq *q = t->q;
    uint64_t *s = &t->s;
    unsigned op = below(s, 14);
    int rc;
    switch (op) {
    case 0:
    case 1: {
        job_ctx j = {.t = t, .depth = depth, .jobs = below(s, 6), .seed = rnd(s)};
        tt_job_fn fn = below(s, 12) == 0 ? NULL : fz_job;
        rc = tt_fork(ex, j.jobs, fn, &j);
        EXPECT(codes_entry, rc, "tt_fork");
        if (rc == TT_OK)
            for (unsigned i = 0; i < j.jobs && i < 8; i++)
                if (atomic_load(&j.ran[i]) < 1)
                    FAIL("tt_fork: job %u of %u did not run", i, j.jobs);
        break;
    }
    case 2:
    case 3: {
        size_t len = below(s, 8) == 0 ? 0 : below(s, 5000);
        size_t grain = below(s, 10) == 0 ? 0 : 1 + below(s, 600);
        if (below(s, 20) == 0) {
            len = SIZE_MAX; /* absurd: one range of everything */
            grain = SIZE_MAX;
        }
        range_ctx r = {.len = len};
        if (op == 3 && below(s, 2) == 0) {
            /* The dynamic form: one call per chunk of grain. */
            rc = tt_for_ranges_dynamic(ex, len, grain, fz_range, &r);
            EXPECT(codes_dyn, rc, "tt_for_ranges_dynamic");
            size_t chunks = grain ? len / grain + (len % grain != 0) : 0;
            if (rc == TT_OK && (atomic_load(&r.covered) != len || atomic_load(&r.calls) != chunks))
                FAIL("tt_for_ranges_dynamic(len %zu, grain %zu): covered %zu in %u calls", len,
                     grain, atomic_load(&r.covered), atomic_load(&r.calls));
            break;
        }
        rc = tt_for_ranges(ex, len, grain, fz_range, &r);
        EXPECT(codes_entry, rc, "tt_for_ranges");
        if (rc == TT_OK && atomic_load(&r.covered) != len)
            FAIL("tt_for_ranges: covered %zu of %zu", atomic_load(&r.covered), len);
        break;
    }
    case 4: {
        bc_ctx b = {.budget = tt_exec_budget(ex)};
        bool can = tt_can_broadcast(ex);
        rc = tt_broadcast(ex, fz_bcast, &b);
        EXPECT(codes_bcast, rc, "tt_broadcast");
        if (rc == TT_OK) {
            for (unsigned i = 0; i < b.budget && i < 16; i++)
                if (atomic_load(&b.ran[i]) != 1)
                    FAIL("tt_broadcast: index %u ran %u times", i, atomic_load(&b.ran[i]));
            if (!can)
                FAIL("tt_can_broadcast said no, tt_broadcast ran");
        }
        break;
    }
    case 5: {
        ext_ctx e = {.budget = tt_exec_budget(ex), .omp = below(s, 3) == 0};
        rc = tt_external(ex, below(s, 12) == 0 ? NULL : fz_external, &e);
        EXPECT(codes_ext, rc, "tt_external");
        if (rc == TT_OK) {
            unsigned w = atomic_load(&e.width);
            if (atomic_load(&e.calls) != 1 || w < 1 || w > e.budget)
                FAIL("tt_external: %u calls, width %u, budget %u", atomic_load(&e.calls), w,
                     e.budget);
        }
        break;
    }
    case 6: {
        scope_ctx c = {.t = t, .depth = depth, .seed = rnd(s)};
        tt_team_opts o;
        tt_team_opts_init(&o);
        o.acquire_timeout_ns = (uint64_t)below(s, 3) * 2000000u; /* 0, 2 or 4 ms */
        rc = tt_team_scope_with(ex, &o, fz_scope, &c);
        EXPECT(codes_scope, rc, "tt_team_scope");
        if (rc == TT_OK && atomic_load(&c.calls) != 1)
            FAIL("tt_team_scope: callback ran %u times", atomic_load(&c.calls));
        break;
    }
    case 7: {
        /* A reborrowed child, used; sometimes the parent while it is in. */
        tt_exec child;
        tt_exec_reborrow(ex, &child);
        if (below(s, 2))
            tt_exec_limit(&child, below(s, 4));
        calls(t, &child, depth + 1);
        tt_exec_finish(&child);
        break;
    }
    case 8: {
        /* Reborrow cycles: a token onto itself, or parent <-> child. */
        /* (b outlives a: a parent must outlive its child, or the chain
         * walk reads a dead token, which is undefined) */
        tt_exec a, b;
        tt_exec_reborrow(ex, &a);
        if (below(s, 2))
            tt_exec_reborrow(&a, &a);
        else {
            tt_exec_reborrow(&a, &b);
            tt_exec_reborrow(&b, &a);
            rc = tt_fork(&b, 1, fz_leaf, NULL);
            EXPECT(bit(TT_EINVAL) | bit(TT_ECONSUMED) | bit(TT_ECOPY), rc, "tt_fork in a cycle");
        }
        rc = tt_fork(&a, 1, fz_leaf, NULL);
        EXPECT(bit(TT_EINVAL) | bit(TT_ECONSUMED) | bit(TT_ECOPY), rc, "tt_fork in a cycle");
        break;
    }
    case 9: {
        /* A copy: the copy and then the original. */
        tt_exec copy;
        memcpy(&copy, ex, sizeof copy);
        rc = tt_fork(&copy, 1, fz_leaf, NULL);
        EXPECT(codes_entry, rc, "tt_fork on a copy");
        if (rc == TT_OK)
            FAIL("tt_fork on a memcpy'd token returned TT_OK");
        calls(t, ex, depth + 1);
        break;
    }
    case 10:
        tt_exec_finish(ex);
        rc = tt_for_ranges(ex, 10, 1, fz_range, &(range_ctx){.len = 10});
        EXPECT(bit(TT_ECONSUMED) | bit(TT_EINVAL), rc, "tt_for_ranges on a finished token");
        break;
    case 11:
        /* NULLs. */
        EXPECT(bit(TT_EINVAL), tt_fork(NULL, 1, fz_job, NULL), "tt_fork(NULL)");
        /* (on a token that may be consumed already: its check comes first) */
        EXPECT(codes_bcast & ~bit(TT_OK), tt_broadcast(ex, NULL, NULL), "tt_broadcast(NULL fn)");
        EXPECT(bit(TT_EINVAL), tt_external(NULL, fz_external, NULL), "tt_external(NULL)");
        EXPECT(codes_scope & ~bit(TT_OK), tt_team_scope(ex, NULL, NULL), "tt_team_scope(NULL fn)");
        break;
    default: {
        /* The same token twice: the second is refused as consumed. */
        rc = tt_for_ranges(ex, 3, 1, fz_range, &(range_ctx){.len = 3});
        EXPECT(codes_entry, rc, "tt_for_ranges");
        if (rc == TT_OK) {
            int rc2 = tt_for_ranges(ex, 3, 1, fz_range, &(range_ctx){.len = 3});
            if (rc2 != TT_ECONSUMED)
                FAIL("a consumed token's second entry returned %s", tt_status_name(rc2));
        }
        break;
    }
    }
    (void)q;
}

/* ------------------------------------------------------------------------ */
/* Threads of a sequence                                                     */
/* ------------------------------------------------------------------------ */

static void *thread_main(void *arg)
{
    thr *t = arg;
    seq *q = t->q;
    pthread_barrier_wait(&q->start);
    unsigned steps = 4 + below(&t->s, 21);
    for (unsigned k = 0; k < steps; k++) {
        unsigned i = below(&t->s, SLOTS);
        unsigned what = below(&t->s, 10);
        if (what <= 2 || !t->used[i]) {
            /* Mint a root (budget 0 is misuse: TT_EINVAL). */
            int p = (int)below(&t->s, q->pool[1] ? 2 : 1);
            if (atomic_load(&q->destroyed[p]))
                continue;
            if (t->used[i])
                tt_exec_finish(&t->slot[i]);
            int rc = tt_exec_init(&t->slot[i], q->pool[p], below(&t->s, 10));
            EXPECT(codes_init, rc, "tt_exec_init");
            t->used[i] = true;
            if (rc == TT_OK)
                note_root(q, &t->slot[i]);
        } else if (what == 3 && q->own[1] && below(&t->s, 4) == 0) {
            /* Destroy the sequence's own pool under load. */
            if (!atomic_exchange(&q->destroyed[1], true)) {
                int rc = tt_pool_destroy(q->pool[1]);
                EXPECT(codes_destroy, rc, "tt_pool_destroy");
                if (rc != TT_OK)
                    atomic_store(&q->destroyed[1], false);
            }
        } else {
            calls(t, &t->slot[i], 0);
        }
        check_ledger(q);
    }
    for (int i = 0; i < SLOTS; i++)
        if (t->used[i])
            tt_exec_finish(&t->slot[i]);
    return NULL;
}

static tt_pool *shared_pool[4];
static unsigned shared_width[4];

static void run_sequence(uint64_t seed)
{
    atomic_store(&cur_seed, seed);
    uint64_t s = seed * 0x2545f4914f6cdd1dull + 1;
    seq *q = calloc(1, sizeof *q);
    thr *ts = calloc(MAXT, sizeof *ts);
    if (!q || !ts) {
        FAIL("out of memory");
        free(q);
        free(ts);
        return;
    }
    unsigned k = below(&s, 4);
    q->pool[0] = shared_pool[k];
    q->width[0] = shared_width[k];
    if (below(&s, 8) == 0) {
        /* A pool of its own, which a step may destroy under load. */
        tt_pool_attr *a = NULL;
        tt_pool_attr_create(&a);
        tt_pool_attr_set_threads(a, 1 + below(&s, 4));
        if (tt_pool_create(&q->pool[1], a) == TT_OK) {
            q->own[1] = true;
            q->width[1] = tt_pool_width(q->pool[1]);
        } else {
            q->pool[1] = NULL;
        }
        tt_pool_attr_destroy(a);
    } else if (below(&s, 2)) {
        unsigned k2 = below(&s, 4);
        q->pool[1] = shared_pool[k2];
        q->width[1] = shared_width[k2];
    }
    q->nthreads = 1 + below(&s, MAXT);
    pthread_barrier_init(&q->start, NULL, q->nthreads);
    pthread_t th[MAXT];
    for (unsigned i = 0; i < q->nthreads; i++) {
        ts[i].q = q;
        ts[i].s = rnd(&s);
        if (i > 0 && pthread_create(&th[i], NULL, thread_main, &ts[i]) != 0) {
            FAIL("pthread_create");
            exit(1);
        }
    }
    thread_main(&ts[0]);
    for (unsigned i = 1; i < q->nthreads; i++) {
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += 60;
        if (pthread_timedjoin_np(th[i], NULL, &dl) != 0) {
            FAIL("a thread still runs after 60 s: a hang (replay: --seed %llu --sequences 1)",
                 (unsigned long long)seed);
            fflush(stderr);
            _exit(1);
        }
    }
    check_ledger(q);
    if (q->own[1] && !atomic_load(&q->destroyed[1])) {
        int rc = tt_pool_destroy(q->pool[1]);
        if (rc != TT_OK)
            FAIL("tt_pool_destroy at the end: %s", tt_status_name(rc));
    }
    pthread_barrier_destroy(&q->start);
    free(q);
    free(ts);
}

/* A sequence that kills the process (an AddressSanitizer report with
 * abort_on_error=1, a failed debug assertion, a crash) must still name its
 * seed, or the failure cannot be replayed: this handler writes it with
 * write(2) only (async-signal-safe) and re-raises with the default action. */
static void died(int sig)
{
    char buf[96], num[24];
    int n = 0;
    uint64_t v = atomic_load(&cur_seed);
    do
        num[n++] = (char)('0' + v % 10);
    while ((v /= 10) && n < (int)sizeof num);
    const char *pre = "fuzz: died in the sequence of seed ";
    size_t len = 0;
    while (pre[len]) {
        buf[len] = pre[len];
        len++;
    }
    while (n)
        buf[len++] = num[--n];
    buf[len++] = '\n';
    ssize_t w = write(2, buf, len);
    (void)w;
    signal(sig, SIG_DFL);
    raise(sig);
}

int main(int argc, char **argv)
{
    uint64_t sequences = 1000, seed = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--sequences") && i + 1 < argc)
            sequences = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "-v"))
            verbose = true;
        else {
            fprintf(stderr, "usage: %s [--sequences N] [--seed S] [-v]\n", argv[0]);
            return 2;
        }
    }
    signal(SIGABRT, died); /* AddressSanitizer's abort_on_error=1 ends in abort() */
#if !defined(__SANITIZE_ADDRESS__)
    /* (Under ASan its own SIGSEGV handler prints the report; keep it.) */
    signal(SIGSEGV, died);
    signal(SIGBUS, died);
#endif
    codes_setup();
    for (int k = 0; k < 4; k++) {
        tt_pool_attr *a = NULL;
        tt_pool_attr_create(&a);
        tt_pool_attr_set_threads(a, 1 + (unsigned)k);
        if (tt_pool_create(&shared_pool[k], a) != TT_OK) {
            fprintf(stderr, "fuzz: pool of width %d: cannot build\n", k + 1);
            return 1;
        }
        shared_width[k] = tt_pool_width(shared_pool[k]);
        tt_pool_attr_destroy(a);
    }
    time_t t0 = time(NULL);
    unsigned first_bad = 0;
    uint64_t bad_seed = 0;
    for (uint64_t i = 0; i < sequences; i++) {
        unsigned before = atomic_load(&failures);
        run_sequence(seed + i);
        if (atomic_load(&failures) != before && !first_bad++)
            bad_seed = seed + i;
        if (verbose && (i + 1) % 10000 == 0)
            fprintf(stderr, "fuzz: %llu sequences, %ld s\n", (unsigned long long)(i + 1),
                    (long)(time(NULL) - t0));
    }
    for (int k = 0; k < 4; k++) {
        int rc = tt_pool_destroy(shared_pool[k]);
        if (rc != TT_OK)
            FAIL("tt_pool_destroy of a shared pool: %s", tt_status_name(rc));
    }
    unsigned f = atomic_load(&failures);
    printf("fuzz: %llu sequences (seeds %llu..%llu), %u failures, %ld s%s\n",
           (unsigned long long)sequences, (unsigned long long)seed,
           (unsigned long long)(seed + sequences - 1), f, (long)(time(NULL) - t0),
           TT_LEDGER_ENABLED ? ", ledger checked after every step" : "");
    if (f)
        printf("fuzz: first failing sequence: %s --seed %llu --sequences 1\n", argv[0],
               (unsigned long long)bad_seed);
    return f ? 1 : 0;
}
