/*
 * ledger.c -- test support: how many threads run each root's work at once,
 * and each pool's. Compiled only with --enable-ledger.
 *
 * What is counted, and why threads rather than calls
 * --------------------------------------------------
 * The contract is "under one root token, never more than `budget` tasks run
 * at once", and a task is a thread running the root's user code: a job, a
 * range, a broadcast call, a section, a scope's callback, a split's part, a
 * tt_external callee and every thread of the callee's own OpenMP regions.
 * The ledger therefore counts *threads*: a thread that enters a root's user
 * code while it already runs that root's code (a section run by the scope
 * leader inside its callback, a job run inline by the caller of a fork)
 * counts once. A thread that waits for its children (tt__ledger_suspend)
 * stops counting until it resumes: the budget it held passed to them. Each
 * thread keeps a small table of the roots (and pools) it counts for, with a
 * depth, in thread-local storage.
 *
 * The same count is kept per pool: the threads that run any root's work on
 * the pool at once, which the pool's width bounds (tt_ledger_pool_peak).
 *
 * A callee's threads. tt_external hands a width to a callee that opens its
 * own OpenMP region; those threads run the root's work too. In a ledger
 * build this file defines libgomp's entry points for parallel regions
 * (GOMP_parallel and its combined-loop and sections forms): a region opened
 * by a thread that runs a callee is started with a trampoline that counts
 * each of its threads for the callee's root (and passes the mark on, so
 * regions nested in the callee count too); every other region goes
 * straight to libgomp's function. The definitions reach every call that is
 * linked against this library's static archive (the test programs) and the
 * shared libraries they link (OpenBLAS); a callee that makes threads some
 * other way is not seen.
 *
 * Records, and why nothing aliases
 * --------------------------------
 * Root records live in a fixed table of TT__LEDGER_SLOTS; a root's id picks
 * its slot (id mod slots) and the record's word holds the rest of the id as
 * a tag, beside the live and peak counts, so that every update checks the
 * tag and changes the counts in one compare-and-swap. A new root never
 * takes a slot whose root has threads inside (it skips to the next id), so
 * a running root is never evicted; a slot whose root is idle may be reused,
 * and the old root then reads as unknown: its queries answer UINT_MAX,
 * which fails every budget check, and an entry of it later bumps
 * `ledger_lost` (tt_ledger_lost). Nothing reads 0 for "don't know".
 */
#include "ledger.h"
#include "pool_slots.h"

#if TT_LEDGER_ENABLED

#include <limits.h>

#define TT__LEDGER_SLOTS 65536u
#define TT__LEDGER_SLOT_BITS 16u

/* word = tag (32 bits) | live (16 bits) | peak (16 bits) */
#define W_TAG(w) ((uint32_t)((w) >> 32))
#define W_LIVE(w) ((uint32_t)((w) >> 16) & 0xffffu)
#define W_PEAK(w) ((uint32_t)(w) & 0xffffu)
#define W_MAKE(tag, live, peak) \
    ((uint64_t)(tag) << 32 | (uint64_t)((live) & 0xffffu) << 16 | ((peak) & 0xffffu))

typedef struct ledger_rec {
    _Atomic uint64_t word;
    tt_pool *_Atomic pool;
} ledger_rec;

static ledger_rec ledger_table[TT__LEDGER_SLOTS];
static _Atomic uint64_t ledger_next;
/* Entries of roots whose record was reused, and counts that overflowed a
 * field or a thread's table: anything the ledger could not count. */
static _Atomic uint64_t ledger_lost;

static inline uint32_t tag_of(uint64_t id) { return (uint32_t)(id >> TT__LEDGER_SLOT_BITS); }
static inline ledger_rec *rec_of(uint64_t id) { return &ledger_table[id % TT__LEDGER_SLOTS]; }
static inline uint64_t id_of(const void *h) { return (uint64_t)(uintptr_t)h; }

static void lost(void) { atomic_fetch_add_explicit(&ledger_lost, 1, memory_order_relaxed); }

void *tt__ledger_new_root(tt_pool *pool)
{
    for (unsigned tries = 0; tries < 4 * TT__LEDGER_SLOTS; tries++) {
        uint64_t id = atomic_fetch_add_explicit(&ledger_next, 1, memory_order_relaxed) + 1;
        if (tag_of(id) == 0 || (uint64_t)(uintptr_t)id != id)
            continue; /* tag 0 marks a never-used slot; ids fit a pointer */
        ledger_rec *r = rec_of(id);
        uint64_t w = atomic_load_explicit(&r->word, memory_order_acquire);
        if (W_LIVE(w) != 0)
            continue; /* a running root keeps its record */
        /* acq_rel: the new tag orders before any count of the new root,
         * and an old root's entry that raced in makes the exchange fail. */
        if (!atomic_compare_exchange_strong_explicit(&r->word, &w, W_MAKE(tag_of(id), 0, 0),
                                                     memory_order_acq_rel, memory_order_acquire))
            continue;
        atomic_store_explicit(&r->pool, pool, memory_order_release);
        return (void *)(uintptr_t)id;
    }
    lost();
    return NULL;
}

uint64_t tt__ledger_id(const void *root) { return id_of(root); }

/* ------------------------------------------------------------------------ */
/* Per-thread depths                                                         */
/* ------------------------------------------------------------------------ */

#define TT__LEDGER_NEST 32

typedef struct nest {
    uintptr_t key; /* a root id, or a pool's address */
    bool pool;     /* which of the two */
    unsigned depth;
} nest;

static _Thread_local nest tls_nest[TT__LEDGER_NEST];
static _Thread_local unsigned tls_nests;

static nest *nest_find_kind(uintptr_t key, bool pool)
{
    for (unsigned i = 0; i < tls_nests; i++)
        if (tls_nest[i].key == key && tls_nest[i].pool == pool)
            return &tls_nest[i];
    return NULL;
}

static nest *nest_find(uintptr_t key) { return nest_find_kind(key, false); }

static nest *nest_add(uintptr_t key, bool pool)
{
    if (tls_nests == TT__LEDGER_NEST)
        return NULL;
    tls_nest[tls_nests] = (nest){.key = key, .pool = pool, .depth = 0};
    return &tls_nest[tls_nests++];
}

static void nest_drop(nest *n)
{
    *n = tls_nest[--tls_nests];
}

/* Add `d` (+1 or -1) to the root's live count; false if the record is no
 * longer the root's. */
static bool root_add(uint64_t id, int d)
{
    ledger_rec *r = rec_of(id);
    uint64_t w = atomic_load_explicit(&r->word, memory_order_acquire), nw;
    do {
        if (W_TAG(w) != tag_of(id))
            return false;
        uint32_t live = W_LIVE(w);
        if ((d > 0 && live == 0xffffu) || (d < 0 && live == 0))
            return false;
        live = d > 0 ? live + 1 : live - 1;
        uint32_t peak = W_PEAK(w) > live ? W_PEAK(w) : live;
        nw = W_MAKE(W_TAG(w), live, peak);
        /* acq_rel: the count is the measurement; a reader that sees a peak
         * also sees the entries that made it. */
    } while (!atomic_compare_exchange_weak_explicit(&r->word, &w, nw, memory_order_acq_rel,
                                                    memory_order_acquire));
    return true;
}

/* The pool's word: live (high 32 bits) | peak (low 32 bits). */
static void pool_add(tt_pool *p, int d)
{
    uint64_t w = atomic_load_explicit(&p->ledger_threads, memory_order_relaxed), nw;
    do {
        uint32_t live = (uint32_t)(w >> 32), peak = (uint32_t)w;
        live = d > 0 ? live + 1 : live - 1;
        nw = (uint64_t)live << 32 | (live > peak ? live : peak);
    } while (!atomic_compare_exchange_weak_explicit(&p->ledger_threads, &w, nw,
                                                    memory_order_acq_rel, memory_order_relaxed));
}

static tt_pool *pool_of(uint64_t id)
{
    return atomic_load_explicit(&rec_of(id)->pool, memory_order_acquire);
}

/* This thread starts running work of root `id` (nested entries count once). */
static void thread_in(uint64_t id)
{
    nest *n = nest_find(id);
    if (n) {
        n->depth++;
        return;
    }
    n = nest_add(id, false);
    if (!n) {
        lost();
        return;
    }
    n->depth = 1;
    if (!root_add(id, +1))
        lost(); /* still tracked here, so that the leave pairs with it */
    tt_pool *p = pool_of(id);
    if (p) {
        uintptr_t pk = (uintptr_t)p;
        nest *pn = nest_find_kind(pk, true);
        if (!pn) {
            pn = nest_add(pk, true);
            if (!pn) {
                lost();
                return;
            }
            pool_add(p, +1);
        }
        pn->depth++;
    }
}

static void thread_out(uint64_t id)
{
    nest *n = nest_find(id);
    if (!n || n->depth == 0) {
        lost();
        return;
    }
    if (--n->depth > 0)
        return;
    nest_drop(n);
    if (!root_add(id, -1))
        lost();
    tt_pool *p = pool_of(id);
    if (p) {
        nest *pn = nest_find_kind((uintptr_t)p, true);
        if (!pn) {
            lost();
            return;
        }
        if (--pn->depth == 0) {
            nest_drop(pn);
            pool_add(p, -1);
        }
    }
}

void tt__ledger_enter(void *root)
{
    if (root)
        thread_in(id_of(root));
}

void tt__ledger_leave(void *root)
{
    if (root)
        thread_out(id_of(root));
}

unsigned tt__ledger_suspend(void *root)
{
    if (!root)
        return 0;
    nest *n = nest_find(id_of(root));
    if (!n || n->depth == 0)
        return 0;
    unsigned depth = n->depth;
    n->depth = 1;
    thread_out(id_of(root));
    return depth;
}

void tt__ledger_resume(void *root, unsigned depth)
{
    if (!root || depth == 0)
        return;
    thread_in(id_of(root));
    nest *n = nest_find(id_of(root));
    if (n)
        n->depth += depth - 1;
}

void tt__ledger_pool_suspend(const tt_pool *pool, tt__ledger_saved *sv)
{
    sv->n = 0;
    for (unsigned i = 0; i < tls_nests && sv->n < TT__LEDGER_SAVED; i++)
        if (!tls_nest[i].pool && pool_of(tls_nest[i].key) == pool) {
            sv->id[sv->n] = tls_nest[i].key;
            sv->depth[sv->n++] = tls_nest[i].depth;
        }
    for (unsigned k = 0; k < sv->n; k++) {
        nest *n = nest_find(sv->id[k]);
        n->depth = 1;
        thread_out(sv->id[k]);
    }
}

void tt__ledger_pool_resume(const tt__ledger_saved *sv)
{
    for (unsigned k = 0; k < sv->n; k++) {
        thread_in(sv->id[k]);
        nest *n = nest_find(sv->id[k]);
        if (n)
            n->depth += sv->depth[k] - 1;
    }
}

/* ------------------------------------------------------------------------ */
/* A callee's threads: libgomp's region entry points                        */
/* ------------------------------------------------------------------------ */

/* The root whose tt_external callee this thread runs (0: none). */
static _Thread_local uint64_t tls_callee;

uint64_t tt__ledger_callee_begin(void *root)
{
    uint64_t prev = tls_callee;
    tls_callee = id_of(root);
    return prev;
}

void tt__ledger_callee_end(uint64_t prev) { tls_callee = prev; }

#if defined(_OPENMP) && defined(__GNUC__)
#include <dlfcn.h>

typedef struct tramp {
    void (*fn)(void *);
    void *data;
    uint64_t id;
} tramp;

static void tramp_run(void *arg)
{
    const tramp *t = arg;
    uint64_t prev = tls_callee;
    tls_callee = t->id;
    thread_in(t->id);
    t->fn(t->data);
    thread_out(t->id);
    tls_callee = prev;
}

static void *next_sym(const char *name)
{
    void *f = dlsym(RTLD_NEXT, name);
    if (!f)
        f = dlsym(RTLD_DEFAULT, name);
    return f;
}

/* Each wrapper forwards to libgomp's function of the same name (found once,
 * next in lookup order), with the trampoline when this thread runs a
 * callee. Relaxed loads of the cached pointer: any thread may find it; the
 * value is the same. */
#define TT_GOMP_REAL(var, name, type)                                                   \
    static type _Atomic var;                                                            \
    type real = atomic_load_explicit(&var, memory_order_relaxed);                       \
    if (!real) {                                                                        \
        real = (type)next_sym(name);                                                    \
        atomic_store_explicit(&var, real, memory_order_relaxed);                        \
    }

#define TT_GOMP_WRAP(fn, data)                                                          \
    tramp t_ = {.fn = (fn), .data = (data), .id = tls_callee};                          \
    if (t_.id) {                                                                        \
        fn = tramp_run;                                                                 \
        data = &t_;                                                                     \
    }

typedef void (*gomp_fn)(void *);

void GOMP_parallel(gomp_fn fn, void *data, unsigned num_threads, unsigned flags);
void GOMP_parallel(gomp_fn fn, void *data, unsigned num_threads, unsigned flags)
{
    typedef void (*real_t)(gomp_fn, void *, unsigned, unsigned);
    TT_GOMP_REAL(real_parallel, "GOMP_parallel", real_t);
    TT_GOMP_WRAP(fn, data);
    real(fn, data, num_threads, flags);
}

void GOMP_parallel_sections(gomp_fn fn, void *data, unsigned num_threads, unsigned count,
                            unsigned flags);
void GOMP_parallel_sections(gomp_fn fn, void *data, unsigned num_threads, unsigned count,
                            unsigned flags)
{
    typedef void (*real_t)(gomp_fn, void *, unsigned, unsigned, unsigned);
    TT_GOMP_REAL(real_sections, "GOMP_parallel_sections", real_t);
    TT_GOMP_WRAP(fn, data);
    real(fn, data, num_threads, count, flags);
}

/* parallel for with a chunked schedule: static, dynamic, guided, and the
 * nonmonotonic forms. */
#define TT_GOMP_LOOP_CHUNK(name)                                                        \
    void name(gomp_fn fn, void *data, unsigned num_threads, long start, long end,       \
              long incr, long chunk, unsigned flags);                                   \
    void name(gomp_fn fn, void *data, unsigned num_threads, long start, long end,       \
              long incr, long chunk, unsigned flags)                                    \
    {                                                                                   \
        typedef void (*real_t)(gomp_fn, void *, unsigned, long, long, long, long,       \
                               unsigned);                                               \
        TT_GOMP_REAL(real_##name, #name, real_t);                                       \
        TT_GOMP_WRAP(fn, data);                                                         \
        real(fn, data, num_threads, start, end, incr, chunk, flags);                    \
    }
/* parallel for schedule(runtime) and its forms: no chunk argument. */
#define TT_GOMP_LOOP_RUNTIME(name)                                                      \
    void name(gomp_fn fn, void *data, unsigned num_threads, long start, long end,       \
              long incr, unsigned flags);                                               \
    void name(gomp_fn fn, void *data, unsigned num_threads, long start, long end,       \
              long incr, unsigned flags)                                                \
    {                                                                                   \
        typedef void (*real_t)(gomp_fn, void *, unsigned, long, long, long, unsigned);  \
        TT_GOMP_REAL(real_##name, #name, real_t);                                       \
        TT_GOMP_WRAP(fn, data);                                                         \
        real(fn, data, num_threads, start, end, incr, flags);                           \
    }

TT_GOMP_LOOP_CHUNK(GOMP_parallel_loop_static)
TT_GOMP_LOOP_CHUNK(GOMP_parallel_loop_dynamic)
TT_GOMP_LOOP_CHUNK(GOMP_parallel_loop_guided)
TT_GOMP_LOOP_CHUNK(GOMP_parallel_loop_nonmonotonic_dynamic)
TT_GOMP_LOOP_CHUNK(GOMP_parallel_loop_nonmonotonic_guided)
TT_GOMP_LOOP_RUNTIME(GOMP_parallel_loop_runtime)
TT_GOMP_LOOP_RUNTIME(GOMP_parallel_loop_nonmonotonic_runtime)
TT_GOMP_LOOP_RUNTIME(GOMP_parallel_loop_maybe_nonmonotonic_runtime)
#endif /* _OPENMP */

/* ------------------------------------------------------------------------ */
/* Queries                                                                   */
/* ------------------------------------------------------------------------ */

static bool find(tt_ledger_root root, uint64_t *w)
{
    if (root == 0 || tag_of(root) == 0)
        return false;
    *w = atomic_load_explicit(&rec_of(root)->word, memory_order_acquire);
    return W_TAG(*w) == tag_of(root);
}

unsigned tt_ledger_max_live(tt_ledger_root root)
{
    uint64_t w;
    return find(root, &w) ? W_PEAK(w) : UINT_MAX;
}

unsigned tt_ledger_live(tt_ledger_root root)
{
    uint64_t w;
    return find(root, &w) ? W_LIVE(w) : UINT_MAX;
}

unsigned tt_ledger_pool_peak(const tt_pool *pool)
{
    if (!pool)
        return UINT_MAX;
    return (uint32_t)atomic_load_explicit(&((tt_pool *)pool)->ledger_threads,
                                          memory_order_acquire);
}

unsigned tt_ledger_pool_live(const tt_pool *pool)
{
    if (!pool)
        return UINT_MAX;
    return (uint32_t)(atomic_load_explicit(&((tt_pool *)pool)->ledger_threads,
                                           memory_order_acquire) >> 32);
}

uint64_t tt_ledger_lost(void) { return atomic_load_explicit(&ledger_lost, memory_order_relaxed); }

uint64_t tt_ledger_installs(const tt_pool *pool)
{
    return pool ? atomic_load_explicit(&((tt_pool *)pool)->installs, memory_order_relaxed) : 0;
}

#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int tt__ledger_disabled;
#endif
