/*
 * host_team.c -- roots on the caller's own OpenMP team.
 *
 * A root entry made on a thread that is outside any parallel region (the
 * main thread of an OpenMP code, or any plain thread) is one `omp parallel`
 * region opened on that thread, at the pool's width: its threads are the
 * thread's own libgomp team, the very threads that the application's own
 * regions and OpenMP-built vendor libraries use, kept hot by libgomp
 * between regions. The caller is participant 0 and runs the first share.
 *
 * Why (docs/design/placement.md has the figures): a pool that held its own
 * team beside the application's made every everyday path slower than raw
 * OpenMP. libgomp throttles every wait of every team once it manages more
 * threads than CPUs, a region nested in a held member creates its threads
 * on every call, and a caller that posts all the work and waits is one
 * runnable thread too many.
 *
 * Why always the pool's width: libgomp ends the surplus threads of a team
 * that shrinks and starts new ones when it grows again, so regions of
 * alternating widths cost a hundred times what regions of one width cost
 * (docs/design/runs/2026-12-06-wait-constants.md). Participants that a root does not need leave at
 * once and wait in libgomp's end-of-region barrier, as in raw OpenMP.
 *
 * Inside the region work reaches participants through the library's own
 * dispatch (mailboxes, joins, its own barriers), because OpenMP barriers and
 * worksharing bind to the whole team and would deadlock when only part of
 * it runs a section. Each participant k registers as member k of a region
 * crew: the member slots of one root, taken from the pool for the region
 * and given back after, so that a nested entry in a share can find "which
 * member am I" (tt__pool_member_of) without a thread-local variable.
 */
#include "share.h"

#include <stdlib.h>

tt__crew *tt__region_crew_get(tt_pool *p)
{
    /* Acquire: pairs with the release of the put that left it there, so
     * the previous root's writes to the crew come before this one's. */
    tt__crew *spare = atomic_exchange_explicit(&p->region_spare, NULL, memory_order_acquire);
    if (spare)
        return spare;
    pthread_mutex_lock(&p->lock);
    tt__crew *c = p->region_free;
    if (c)
        p->region_free = c->next;
    pthread_mutex_unlock(&p->lock);
    if (c) {
        c->next = NULL;
        return c;
    }
    c = tt__calloc_lines(1, sizeof *c);
    if (!c)
        return NULL;
    c->kind = TT__CREW_REGION;
    c->be = tt__backend_get();
    c->stats = &p->stats;
    c->attr = p->attr;
    c->attr.thread_name = NULL;
    if (tt__crew_alloc_members(c, p->width) != TT_OK) {
        free(c);
        return NULL;
    }
    bool over = p->width > tt__cpu_count_cached();
    atomic_store_explicit(&c->oversubscribed, over, memory_order_relaxed);
    atomic_store_explicit(&c->idle_polls, p->attr.idle_spin_ns == 0 ? 0 : p->attr.spin_polls,
                          memory_order_relaxed);
    atomic_store_explicit(&c->idle_ns, p->attr.idle_spin_ns, memory_order_relaxed);
    c->team_pol = (tt__wait_policy){.spin_polls = p->attr.spin_polls, .throttled = over};
    /* Publish on the pool's list of every region crew (newest first), which
     * membership checks walk without a lock: release pairs with their
     * acquire load of the head. */
    tt__crew *head = atomic_load_explicit(&p->regions, memory_order_relaxed);
    do {
        atomic_store_explicit(&c->next_all, head, memory_order_relaxed);
    } while (!atomic_compare_exchange_weak_explicit(&p->regions, &head, c, memory_order_release,
                                                    memory_order_relaxed));
    return c;
}

void tt__region_crew_put(tt_pool *p, tt__crew *c)
{
    tt__crew *none = NULL;
    if (atomic_compare_exchange_strong_explicit(&p->region_spare, &none, c, memory_order_release,
                                                memory_order_relaxed))
        return;
    pthread_mutex_lock(&p->lock);
    c->next = p->region_free;
    p->region_free = c;
    pthread_mutex_unlock(&p->lock);
}

void tt__region_crews_free(tt_pool *p)
{
    tt__crew *c = atomic_exchange_explicit(&p->regions, NULL, memory_order_acquire);
    while (c) {
        tt__crew *n = atomic_load_explicit(&c->next_all, memory_order_relaxed);
        tt__crew_free(c);
        c = n;
    }
    p->region_free = NULL;
    atomic_store_explicit(&p->region_spare, NULL, memory_order_relaxed);
}
