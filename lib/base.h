/*
 * base.h -- the bottom of lib/: configuration, the includes every file
 * needs, the cache line, the monotonic clock, TT__ASSERT and TT__INVARIANT,
 * and the allocation and thread-start wrappers with failure injection
 * (alloc.c, gomp_guard.c). It calls into nothing of the library.
 */
#ifndef TT_BASE_H
#define TT_BASE_H

#include "config.h"
#include "threadteam.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sched.h>
#include <sys/types.h>
#include <time.h>

#define TT__CACHELINE 64
#define TT__ALIGNED __attribute__((aligned(TT__CACHELINE)))

/* The monotonic clock every wait and sample reads (clock_gettime in the
 * vDSO: no system call on the usual clock sources). Inline here,
 * so that the files that read it (wait.c, cpu.c) need nothing of each
 * other for it. */
static inline uint64_t tt__mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* 1 in a ThreadSanitizer build (GCC defines __SANITIZE_THREAD__, clang has
 * the feature): the library then states in C11 atomics the orderings that
 * libgomp's barriers give, which TSan cannot see (backend_omp.c). */
#if defined(__SANITIZE_THREAD__)
#define TT__TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TT__TSAN 1
#endif
#endif
#ifndef TT__TSAN
#define TT__TSAN 0
#endif

#if defined(TT_ENABLE_DEBUG) && TT_ENABLE_DEBUG
#include <stdio.h>
#include <stdlib.h>
#define TT__ASSERT(c)                                                          \
    do {                                                                       \
        if (!(c)) {                                                            \
            fprintf(stderr, "threadteam: assertion failed: %s (%s:%d)\n", #c,  \
                    __FILE__, __LINE__);                                       \
            abort();                                                           \
        }                                                                      \
    } while (0)
#else
/* Off, the expression is still compiled and type-checked (never evaluated:
 * sizeof does not evaluate its operand), so a check cannot rot unseen in
 * the builds that leave it out. */
#define TT__ASSERT(c) ((void)sizeof((c) ? 1 : 0))
#endif

#define TT__LIKELY(x) __builtin_expect(!!(x), 1)
#define TT__UNLIKELY(x) __builtin_expect(!!(x), 0)

/* Invariants, always compiled (release builds too, as Argobots does): the
 * few states whose corruption would otherwise show up far away, as a hang
 * or a slot lost for good (a token's busy word, a scope's command and join,
 * the thread's hold stack, the pairing of an entry's begin and end). Each
 * is an integer compare on a path that touches the field anyway, never in
 * the inner loop of a wait; TT__ASSERT (--enable-debug) keeps the costly
 * checks. On failure: file, line and what broke on stderr, then abort(). */
__attribute__((cold, noreturn, noinline)) void tt__invariant_failed(const char *file, int line,
                                                                   const char *what);
#define TT__INVARIANT(c, what)                                                 \
    do {                                                                       \
        if (TT__UNLIKELY(!(c)))                                                \
            tt__invariant_failed(__FILE__, __LINE__, what);                    \
    } while (0)

/* Allocation and thread start with failure injection (alloc.c). Tests
 * link the static library and arm tt__fault_inject. */
void *tt__malloc(size_t n);
void *tt__calloc(size_t n, size_t size);
char *tt__strdup(const char *s);
int tt__memalign(void **p, size_t align, size_t n);
/* n zeroed objects of `size` bytes on cache lines of their own: aligned to
 * TT__CACHELINE and padded to a whole number of lines (alloc.c says why);
 * NULL on failure. Freed with free(). */
void *tt__calloc_lines(size_t n, size_t size);
bool tt__fault_thread(void);

/* Thread-local words that every root reads (the region's room, the hold
 * count, the lead roles, the team's width, the test hooks' last paths):
 * initial-exec, so that the shared library reads each with one load from
 * the thread pointer instead of a __tls_get_addr call (about 8 calls per
 * root, 60 ns from the main thread and more from others: the run is in
 * docs/design/runs/2026-12-07-root-cost.md). They take a few dozen bytes
 * of the static TLS that glibc keeps for libraries loaded with dlopen, as
 * libgomp's own thread state does. */
#define TT__TLS_HOT __thread __attribute__((tls_model("initial-exec")))

/* Thread starts with bounded retries (gomp_guard.c): tt__thread_create is
 * pthread_create retried on EAGAIN a bounded number of times (libgomp's own
 * thread starts and allocations are retried the same way). */
int tt__thread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg);
unsigned tt__guard_slots(void);

/* TT_EINVAL that says which argument was wrong (strerror.c). Every
 * TT_EINVAL the library returns goes through TT__EINVAL(what), where `what`
 * names the failed check (most often the C expression of the test on the
 * caller's argument: "!body", "grain == 0"). With TT_DEBUG set in the
 * environment (to anything but 0 or empty), each such return writes one
 * line to stderr, "threadteam: FUNCTION: TT_EINVAL: WHAT"; without it
 * nothing is written and the cost is one cached load. The library keeps no
 * per-thread error state: the line is the detail. */
__attribute__((cold)) int tt__einval(const char *func, const char *what);
#define TT__EINVAL(what) tt__einval(__func__, (what))

#endif /* TT_BASE_H */
