/*
 * ledger.h -- the ledger (ledger.c): test support that counts the threads
 * running a root's user code; every call is a no-op without
 * --enable-ledger. Above base.h only.
 */
#ifndef TT_LEDGER_H
#define TT_LEDGER_H

#include "base.h"

/* What tt__ledger_pool_suspend saves: the roots of one pool the calling
 * thread stopped counting for (it gives its slot of the pool back while it
 * waits), to count for them again with tt__ledger_pool_resume. */
#define TT__LEDGER_SAVED 8
typedef struct tt__ledger_saved {
    unsigned n;
    uint64_t id[TT__LEDGER_SAVED];
    unsigned depth[TT__LEDGER_SAVED];
} tt__ledger_saved;

/* ------------------------------------------------------------------------ */
/* Ledger (ledger.c); every call is a no-op without --enable-ledger          */
/* ------------------------------------------------------------------------ */

/* The ledger counts threads, not calls: tt__ledger_enter/leave bracket a
 * thread's run of a root's user code (nested brackets of the same root on
 * one thread count once); tt__ledger_suspend stops the count of a thread
 * that waits for its children and returns what tt__ledger_resume needs to
 * restore it; tt__ledger_callee_begin/end mark a thread that runs a
 * tt_external callee, so that the threads of the callee's own OpenMP
 * regions count for the root too. */
#if TT_LEDGER_ENABLED
void tt__ledger_pool_suspend(const tt_pool *pool, tt__ledger_saved *sv);
void tt__ledger_pool_resume(const tt__ledger_saved *sv);
void *tt__ledger_new_root(tt_pool *pool);
void tt__ledger_enter(void *root);
void tt__ledger_leave(void *root);
unsigned tt__ledger_suspend(void *root);
void tt__ledger_resume(void *root, unsigned saved);
uint64_t tt__ledger_callee_begin(void *root);
void tt__ledger_callee_end(uint64_t prev);
static inline void tt__ledger_install(tt_pool *pool) { (void)pool; }
#else
static inline void tt__ledger_pool_suspend(const tt_pool *pool, tt__ledger_saved *sv)
{
    (void)pool;
    sv->n = 0;
}
static inline void tt__ledger_pool_resume(const tt__ledger_saved *sv) { (void)sv; }
static inline void *tt__ledger_new_root(tt_pool *pool) { (void)pool; return NULL; }
static inline void tt__ledger_enter(void *root) { (void)root; }
static inline void tt__ledger_leave(void *root) { (void)root; }
static inline unsigned tt__ledger_suspend(void *root) { (void)root; return 0; }
static inline void tt__ledger_resume(void *root, unsigned saved) { (void)root; (void)saved; }
static inline uint64_t tt__ledger_callee_begin(void *root) { (void)root; return 0; }
static inline void tt__ledger_callee_end(uint64_t prev) { (void)prev; }
static inline void tt__ledger_install(tt_pool *pool) { (void)pool; }
#endif

#endif /* TT_LEDGER_H */
