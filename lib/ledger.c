/*
 * ledger.c -- test support: live tasks per root token, and pool installs.
 * Compiled to nothing without --enable-ledger.
 *
 * Records live in a fixed table indexed by root id, so that a root can be
 * queried after its token is gone without the library keeping an unbounded
 * list: the newest TT__LEDGER_SLOTS roots are kept, an older one reads 0.
 */
#include "internal.h"

#if TT_LEDGER_ENABLED

#define TT__LEDGER_SLOTS 65536u

typedef struct ledger_rec {
    _Atomic uint64_t id;
    _Atomic uint32_t live;
    _Atomic uint32_t max;
} ledger_rec;

static ledger_rec ledger_table[TT__LEDGER_SLOTS];
static _Atomic uint64_t ledger_next;

void *tt__ledger_new_root(void)
{
    uint64_t id = atomic_fetch_add_explicit(&ledger_next, 1, memory_order_relaxed) + 1;
    ledger_rec *r = &ledger_table[id % TT__LEDGER_SLOTS];
    atomic_store_explicit(&r->live, 0, memory_order_relaxed);
    atomic_store_explicit(&r->max, 0, memory_order_relaxed);
    atomic_store_explicit(&r->id, id, memory_order_release);
    return r;
}

uint64_t tt__ledger_id(const void *root)
{
    const ledger_rec *r = root;
    return r ? atomic_load_explicit(&r->id, memory_order_acquire) : 0;
}

void tt__ledger_enter(void *root, unsigned n)
{
    ledger_rec *r = root;
    if (!r)
        return;
    /* acq_rel: the live count is the measurement, and a reader that sees a
     * maximum must also see the entries that made it. */
    uint32_t now = atomic_fetch_add_explicit(&r->live, n, memory_order_acq_rel) + n;
    uint32_t m = atomic_load_explicit(&r->max, memory_order_relaxed);
    while (now > m &&
           !atomic_compare_exchange_weak_explicit(&r->max, &m, now, memory_order_acq_rel,
                                                  memory_order_relaxed))
        ;
}

void tt__ledger_leave(void *root, unsigned n)
{
    ledger_rec *r = root;
    if (r)
        atomic_fetch_sub_explicit(&r->live, n, memory_order_acq_rel);
}

void tt__ledger_install(tt_pool *pool)
{
    (void)pool; /* counted by the gang acquisition itself */
}

static ledger_rec *find(tt_ledger_root root)
{
    if (root == 0)
        return NULL;
    ledger_rec *r = &ledger_table[root % TT__LEDGER_SLOTS];
    return atomic_load_explicit(&r->id, memory_order_acquire) == root ? r : NULL;
}

unsigned tt_ledger_max_live(tt_ledger_root root)
{
    ledger_rec *r = find(root);
    return r ? atomic_load_explicit(&r->max, memory_order_acquire) : 0;
}

unsigned tt_ledger_live(tt_ledger_root root)
{
    ledger_rec *r = find(root);
    return r ? atomic_load_explicit(&r->live, memory_order_acquire) : 0;
}

uint64_t tt_ledger_installs(const tt_pool *pool)
{
    return pool ? atomic_load_explicit(&((tt_pool *)pool)->installs, memory_order_relaxed) : 0;
}

#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int tt__ledger_disabled;
#endif
