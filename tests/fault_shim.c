/*
 * fault_shim.c -- an LD_PRELOAD object that makes the Nth pthread_create
 * (EAGAIN) or the Nth allocation (malloc, calloc, realloc, posix_memalign,
 * aligned_alloc, memalign: NULL) of a process fail, as a user's own fault
 * injector would. Calls are counted only while the program holds the
 * window open (fault_shim_window(1), found with dlsym), on every thread.
 *
 *   FAULT_SHIM_THREAD_AT=N  fail the Nth pthread_create in the window
 *   FAULT_SHIM_ALLOC_AT=N   fail the Nth allocation in the window
 *   FAULT_SHIM_RUN=K        fail K calls in a row from the Nth (default 1)
 *
 * fault_shim_hits() says how many calls were failed. Built with
 * FAULT_SHIM_THREADS_ONLY (fault_shim_threads.so) it leaves the allocator
 * alone, for runs under valgrind.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <stdio.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

static _Atomic int window;
static _Atomic long thread_calls, alloc_calls, hits;
static long thread_at = -1, alloc_at = -1, run = 1;

__attribute__((constructor)) static void shim_init(void)
{
    const char *s;
    if ((s = getenv("FAULT_SHIM_THREAD_AT")))
        thread_at = atol(s);
    if ((s = getenv("FAULT_SHIM_ALLOC_AT")))
        alloc_at = atol(s);
    if ((s = getenv("FAULT_SHIM_RUN")))
        run = atol(s);
}

void fault_shim_window(int open) { atomic_store(&window, open); }
long fault_shim_hits(void) { return atomic_load(&hits); }
long fault_shim_calls(int allocs) { return allocs ? atomic_load(&alloc_calls) : atomic_load(&thread_calls); }

/* A failed call sets errno as the real one does (glibc's own callers
 * assert on it: allocate_stack wants ENOMEM). */
static int fail(_Atomic long *calls, long at)
{
    if (at <= 0 || !atomic_load_explicit(&window, memory_order_relaxed))
        return 0;
    long n = atomic_fetch_add(calls, 1) + 1;
    if (n >= at && n < at + run) {
        atomic_fetch_add(&hits, 1);
        if (calls == &alloc_calls)
            errno = ENOMEM;
        return 1;
    }
    return 0;
}

typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

int pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg)
{
    static create_fn real;
    if (!real)
        real = (create_fn)dlsym(RTLD_NEXT, "pthread_create");
    if (fail(&thread_calls, thread_at))
        return EAGAIN;
    return real(t, a, fn, arg);
}

#ifndef FAULT_SHIM_THREADS_ONLY /* valgrind replaces the allocator itself */
void *malloc(size_t n) { return fail(&alloc_calls, alloc_at) ? NULL : __libc_malloc(n); }
void *calloc(size_t n, size_t s) { return fail(&alloc_calls, alloc_at) ? NULL : __libc_calloc(n, s); }
void *realloc(void *p, size_t n) { return fail(&alloc_calls, alloc_at) ? NULL : __libc_realloc(p, n); }
void *memalign(size_t al, size_t n) { return fail(&alloc_calls, alloc_at) ? NULL : __libc_memalign(al, n); }
void *aligned_alloc(size_t al, size_t n) { return memalign(al, n); }
int posix_memalign(void **p, size_t al, size_t n)
{
    if (fail(&alloc_calls, alloc_at))
        return ENOMEM;
    void *q = __libc_memalign(al, n);
    if (!q)
        return ENOMEM;
    *p = q;
    return 0;
}
#endif

__attribute__((destructor)) static void shim_report(void)
{
    if (getenv("FAULT_SHIM_REPORT")) {
        char buf[128];
        int n = snprintf(buf, sizeof buf, "fault_shim: threads %ld allocs %ld hits %ld\n",
                         (long)atomic_load(&thread_calls), (long)atomic_load(&alloc_calls),
                         (long)atomic_load(&hits));
        if (n > 0)
            (void)!write(2, buf, (size_t)n);
    }
}
