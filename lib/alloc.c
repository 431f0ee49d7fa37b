/*
 * alloc.c -- the library's allocations and thread starts go through here,
 * so that tests can make the Nth one fail (failure injection) and check
 * that each failure returns its code, leaks nothing and leaves no thread
 * behind. The counters are process-wide relaxed atomics; with no injection
 * armed, the cost is one load per allocation, and allocations happen when
 * pools, attributes and teams are built, and for a reduction's partials
 * when they do not fit on the caller's stack (reduce.c). Three do not come
 * here, each with its failure handled where it is made: the buffer of
 * tt_dispatch_costs_load (a file loader, TT_ENOMEM), the thread array of a
 * private crew's host under libomp (backend_omp.c: a short crew), and the
 * probe threads of the thread-limit check (crew.c: counted, not kept).
 */
#include "base.h"
#include "test_hooks.h"

#include <stdlib.h>
#include <string.h>

/* 0: off. N > 0: the Nth call from now fails, and injection disarms. */
static _Atomic long fault_alloc_at;
static _Atomic long fault_thread_at;

void tt__fault_inject(long alloc_nth, long thread_nth)
{
    atomic_store_explicit(&fault_alloc_at, alloc_nth, memory_order_relaxed);
    atomic_store_explicit(&fault_thread_at, thread_nth, memory_order_relaxed);
}

static bool fault_hit(_Atomic long *at)
{
    long v = atomic_load_explicit(at, memory_order_relaxed);
    while (v > 0) {
        if (atomic_compare_exchange_weak_explicit(at, &v, v - 1, memory_order_relaxed,
                                                  memory_order_relaxed))
            return v == 1;
    }
    return false;
}

bool tt__fault_thread(void) { return fault_hit(&fault_thread_at); }

void *tt__malloc(size_t n) { return fault_hit(&fault_alloc_at) ? NULL : malloc(n); }

void *tt__calloc(size_t n, size_t size)
{
    return fault_hit(&fault_alloc_at) ? NULL : calloc(n, size);
}

char *tt__strdup(const char *s) { return fault_hit(&fault_alloc_at) ? NULL : strdup(s); }

/*
 * The objects whose words the library's threads share (a pool and its slot
 * word, crews, teams) take cache lines of their own. From malloc they
 * would share their first and last lines with whatever the application
 * allocated next to them: a member writing the end of the caller's array
 * then takes the line of the pool's entry count or the crew's fields from
 * the caller's core at every root, hundreds of nanoseconds where the raw
 * region pays nothing (docs/design/runs/2026-12-07-scope-cost.md). It also
 * gives the structs that align a field to a line the alignment they ask
 * for, which malloc does not.
 */
void *tt__calloc_lines(size_t n, size_t size)
{
    if (size != 0 && n > SIZE_MAX / size)
        return NULL;
    size_t bytes = n * size;
    bytes = (bytes + TT__CACHELINE - 1) / TT__CACHELINE * TT__CACHELINE;
    if (bytes == 0)
        bytes = TT__CACHELINE;
    void *p = NULL;
    if (fault_hit(&fault_alloc_at) || posix_memalign(&p, TT__CACHELINE, bytes) != 0)
        return NULL;
    memset(p, 0, bytes);
    return p;
}

int tt__memalign(void **p, size_t align, size_t n)
{
    if (fault_hit(&fault_alloc_at)) {
        *p = NULL;
        return -1;
    }
    return posix_memalign(p, align, n);
}
