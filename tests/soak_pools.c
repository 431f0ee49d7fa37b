/*
 * soak_pools.c -- pools built and dropped in a loop: the thread count of
 * the process stays bounded and nothing leaks. Not part of `make check`;
 * run by `make check-stress`.
 *
 *   soak_pools [--default N] [--dedicated M] [--threads K] [--max-width W]
 *              [--rss-slack-kb S] [--heap-slack-kb H] [-v]
 *
 * Phase 1, default settings (the crew cache): N pools (default 100000),
 * 80% of them on one thread (a "home" width most of the time, now and then
 * a random width 1..W that makes the cache evict), 20% on K threads at once
 * (default 2). Every pool runs a tt_for_ranges that covers each index once;
 * every 8th also a broadcast whose members are registered, so that one
 * member thread serving two live pools at once is caught. The thread count
 * of the process (/proc/self/task) is checked after every destroy of the
 * single-thread part (at most base + max(CPUs, widest pool)) and sampled
 * every millisecond by a monitor thread against the bound of the phase
 * (base + cap + 2 W while a fresh crew is starting: the library's
 * RLIMIT_NPROC probe threads, when the limit is finite, briefly double a
 * new crew).
 *
 * Phase 2, dedicated settings: M pools (default 2000) with a thread name,
 * an on_start hook (whose thread-local state has a pthread-key destructor)
 * or a stack size, widths 1..W: after every destroy the thread count is
 * back to what it was, and every destructor has run.
 *
 * Leaks: resident memory (/proc/self/statm) and the heap in use (mallinfo2)
 * are read after a warm-up and at the end; growth beyond the slack
 * (default 8 MiB resident, 1 MiB heap) fails. Exit status 0 when every
 * check passed; the last line is the summary. TT_TEST_QUICK=1 divides the
 * default counts by 20.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <threadteam.h>

#include "tt_proc.h"

#include <dirent.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static struct {
    long ndefault, ndedicated;
    unsigned threads, max_width;
    long rss_slack_kb, heap_slack_kb;
    bool verbose;
} opt = {100000, 2000, 2, 0, 8192, 1024, false};

static _Atomic long failures;

static void fail(const char *fmt, ...)
{
    long n = atomic_fetch_add(&failures, 1);
    if (n >= 10)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "soak_pools: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}



static uint64_t rnd(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}


/* The count once it is at most `most` (exited threads leave /proc a moment
 * after their join), or what it is after 200 ms. */
static int threads_at_most(int most)
{
    uint64_t end = th_proc_now_ns() + 200000000ull;
    int c;
    while ((c = th_proc_count_threads()) > most && th_proc_now_ns() < end)
        th_proc_sleep_us(200);
    return c;
}


/* The thread count once it has stopped moving: threads of a libgomp pool
 * whose owner (a caller thread that opened root regions) has exited leave
 * asynchronously, after that thread's joined. Stable for 50 ms, or the
 * value after 5 s. */
static int threads_settled(void)
{
    uint64_t end = th_proc_now_ns() + 5000000000ull;
    int c = th_proc_count_threads(), same = 0;
    while (same < 250 && th_proc_now_ns() < end) {
        th_proc_sleep_us(200);
        int n = th_proc_count_threads();
        same = n == c ? same + 1 : 0;
        c = n;
    }
    return c;
}

static long rss_kb(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, res = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &size, &res) != 2)
            res = 0;
        fclose(f);
    }
    return res * (sysconf(_SC_PAGESIZE) / 1024);
}

static long heap_kb(void)
{
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
    struct mallinfo2 mi = mallinfo2();
    return (long)((mi.uordblks + mi.hblkhd) / 1024);
#else
    return -1;
#endif
}

/* ------------------------------------------------------------------------ */
/* Pools                                                                     */
/* ------------------------------------------------------------------------ */

enum { K_DEFAULT, K_NAMED, K_ONSTART, K_STACK };

static pthread_key_t tls_key;
static _Atomic long dtor_count, onstart_count;

static void tls_dtor(void *v)
{
    free(v);
    atomic_fetch_add(&dtor_count, 1);
}

static void on_start(void *arg, unsigned member)
{
    (void)arg;
    unsigned *st = malloc(sizeof *st);
    if (st) {
        *st = member;
        pthread_setspecific(tls_key, st);
    }
    atomic_fetch_add(&onstart_count, 1);
}

static tt_pool *make_pool(unsigned width, int kind)
{
    tt_pool_attr *a = NULL;
    if (tt_pool_attr_create(&a) != TT_OK) {
        fail("tt_pool_attr_create");
        return NULL;
    }
    tt_pool_attr_set_threads(a, width);
    tt_pool_attr_set_spin_polls(a, 2000);
    tt_pool_attr_set_idle_spin(a, 20000);
    if (kind == K_NAMED)
        tt_pool_attr_set_thread_name(a, "soak");
    else if (kind == K_ONSTART)
        tt_pool_attr_set_on_start(a, on_start, NULL);
    else if (kind == K_STACK)
        tt_pool_attr_set_stack_size(a, (size_t)1 << 20);
    tt_pool *p = NULL;
    int rc = tt_pool_create(&p, a);
    tt_pool_attr_destroy(a);
    if (rc != TT_OK) {
        fail("tt_pool_create(width %u, kind %d): %s", width, kind, tt_status_name(rc));
        return NULL;
    }
    return p;
}

enum { LEN = 64 };

typedef struct cover {
    _Atomic unsigned char hits[LEN];
} cover;

static void cover_body(void *arg, size_t b, size_t e)
{
    cover *c = arg;
    for (size_t i = b; i < e; i++)
        atomic_fetch_add(&c->hits[i], 1);
}

static void use_pool(tt_pool *p)
{
    cover c;
    memset(&c, 0, sizeof c);
    tt_exec ex;
    int rc = tt_exec_init(&ex, p, tt_pool_width(p));
    if (rc == TT_OK)
        rc = tt_for_ranges(&ex, LEN, 1, cover_body, &c);
    if (rc != TT_OK) {
        fail("tt_for_ranges: %s", tt_status_name(rc));
        return;
    }
    for (unsigned i = 0; i < LEN; i++)
        if (atomic_load(&c.hits[i]) != 1) {
            fail("index %u ran %u times", i, (unsigned)atomic_load(&c.hits[i]));
            return;
        }
}

/* Member threads of live pools: one owner at a time. */
#define OWN_SLOTS 1024
static pthread_mutex_t own_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    pid_t tid;
    const void *pool;
} own[OWN_SLOTS];

typedef struct tids {
    unsigned n;
    pid_t tid[64];
} tids;

static void tid_fn(void *arg, unsigned i)
{
    tids *t = arg;
    if (i < 64)
        t->tid[i] = (pid_t)syscall(SYS_gettid);
}

static void register_members(tt_pool *p, tids *t)
{
    t->n = tt_pool_width(p);
    if (t->n < 2 || t->n > 64) {
        t->n = 0;
        return;
    }
    tt_exec ex;
    if (tt_exec_init(&ex, p, t->n) != TT_OK || tt_broadcast(&ex, tid_fn, t) != TT_OK) {
        fail("broadcast for member ids");
        t->n = 0;
        return;
    }
    pthread_mutex_lock(&own_lock);
    for (unsigned i = 0; i < t->n; i++) {
        for (unsigned j = 0; j < OWN_SLOTS; j++)
            if (own[j].pool && own[j].tid == t->tid[i])
                fail("thread %d serves two live pools at once", (int)t->tid[i]);
        for (unsigned j = 0; j < OWN_SLOTS; j++)
            if (!own[j].pool) {
                own[j].pool = p;
                own[j].tid = t->tid[i];
                break;
            }
    }
    pthread_mutex_unlock(&own_lock);
}

static void unregister_members(tt_pool *p)
{
    pthread_mutex_lock(&own_lock);
    for (unsigned j = 0; j < OWN_SLOTS; j++)
        if (own[j].pool == p)
            own[j].pool = NULL;
    pthread_mutex_unlock(&own_lock);
}

/* ------------------------------------------------------------------------ */
/* The monitor                                                               */
/* ------------------------------------------------------------------------ */

static _Atomic int mon_bound;  /* current bound, 0: none */
static _Atomic int mon_peak;   /* peak of the whole run */
static _Atomic int mon_over;   /* the largest count above the bound */
static _Atomic int mon_stop;

static void *monitor_main(void *arg)
{
    (void)arg;
    while (!atomic_load(&mon_stop)) {
        int n = th_proc_count_threads();
        int m = atomic_load(&mon_peak);
        while (n > m && !atomic_compare_exchange_weak(&mon_peak, &m, n))
            ;
        int b = atomic_load(&mon_bound);
        if (b > 0 && n > b) {
            int o = atomic_load(&mon_over);
            while (n > o && !atomic_compare_exchange_weak(&mon_over, &o, n))
                ;
        }
        th_proc_sleep_us(1000);
    }
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Phases                                                                    */
/* ------------------------------------------------------------------------ */

static unsigned widest; /* widest pool built (phase 1 counts) */
static pthread_mutex_t widest_lock = PTHREAD_MUTEX_INITIALIZER;

static void note_width(unsigned w)
{
    pthread_mutex_lock(&widest_lock);
    if (w > widest)
        widest = w;
    pthread_mutex_unlock(&widest_lock);
}

static unsigned cap_now(void)
{
    pthread_mutex_lock(&widest_lock);
    unsigned c = th_proc_cpus() > widest ? th_proc_cpus() : widest;
    pthread_mutex_unlock(&widest_lock);
    return c;
}

typedef struct worker {
    unsigned index;
    long iters;
    bool check_each; /* single-threaded: exact bound after each destroy */
    int base;
    long built;
} worker;

static void *default_worker(void *arg)
{
    worker *w = arg;
    uint64_t s = 0x5eed + w->index;
    unsigned home = 2 + w->index % (opt.max_width > 2 ? opt.max_width - 1 : 1);
    if (home > opt.max_width)
        home = opt.max_width;
    for (long i = 0; i < w->iters && atomic_load(&failures) == 0; i++) {
        unsigned width = (rnd(&s) % 10 == 0) ? 1 + (unsigned)(rnd(&s) % opt.max_width) : home;
        tt_pool *p = make_pool(width, K_DEFAULT);
        if (!p)
            break;
        unsigned got = tt_pool_width(p);
        note_width(got);
        /* Every 8th pool registers its member threads for the whole of its
         * use: a thread registered for two live pools at once fails. */
        tids t = {0};
        bool reg = (i % 8) == 0;
        if (reg)
            register_members(p, &t);
        use_pool(p);
        if (reg)
            unregister_members(p);
        int rc = tt_pool_destroy(p);
        if (rc != TT_OK)
            fail("tt_pool_destroy: %s", tt_status_name(rc));
        w->built++;
        if (w->check_each) {
            int bound = w->base + (int)cap_now();
            int n = threads_at_most(bound);
            if (n > bound)
                fail("after destroy %ld (width %u): %d threads, bound %d (base %d + cache cap %u)",
                     i, got, n, bound, w->base, cap_now());
        }
    }
    return NULL;
}

static void phase_default(long n, int base)
{
    long single = n - n / 5, multi = n / 5;
    unsigned W = opt.max_width;
    /* While one thread runs: base + cap + a fresh crew (and its probes). */
    note_width(W > 1 ? 2 : 1);
    atomic_store(&mon_bound, base + (int)(th_proc_cpus() > W ? th_proc_cpus() : W) + 2 * (int)W);
    worker w0 = {.index = 0, .iters = single, .check_each = true, .base = base};
    default_worker(&w0);
    /* K threads at once: each may hold a live crew and start a fresh one. */
    unsigned k = opt.threads;
    atomic_store(&mon_bound,
                 base + (int)k + (int)(th_proc_cpus() > W ? th_proc_cpus() : W) + 3 * (int)k * (int)W);
    worker ws[16];
    pthread_t th[16];
    if (k > 16)
        k = 16;
    for (unsigned i = 0; i < k; i++) {
        ws[i] = (worker){.index = i + 1, .iters = multi / k, .base = base};
        pthread_create(&th[i], NULL, default_worker, &ws[i]);
    }
    long built = w0.built;
    for (unsigned i = 0; i < k; i++) {
        pthread_join(th[i], NULL);
        built += ws[i].built;
    }
    atomic_store(&mon_bound, 0);
    int bound = base + (int)cap_now();
    int after = threads_at_most(bound);
    if (after > bound)
        fail("after the default phase: %d threads, bound %d", after, bound);
    if (opt.verbose)
        fprintf(stderr, "soak_pools: default phase: %ld pools, %d threads after (bound %d)\n",
                built, after, bound);
}

static void phase_dedicated(long n)
{
    int base = threads_settled();
    long want_dtors = 0;
    static const int kinds[] = {K_NAMED, K_ONSTART, K_STACK};
    atomic_store(&mon_bound, base + 2 * (int)opt.max_width);
    for (long i = 0; i < n && atomic_load(&failures) == 0; i++) {
        int kind = kinds[i % 3];
        unsigned width = 1 + (unsigned)((i / 3) % opt.max_width);
        tt_pool *p = make_pool(width, kind);
        if (!p)
            break;
        unsigned got = tt_pool_width(p);
        if (kind == K_ONSTART && got > 1)
            want_dtors += got;
        use_pool(p);
        int alive = th_proc_count_threads();
        int rc = tt_pool_destroy(p);
        if (rc != TT_OK)
            fail("tt_pool_destroy (dedicated): %s", tt_status_name(rc));
        /* Exactly when destroy returned: every destructor has run. */
        long d = atomic_load(&dtor_count);
        if (d != want_dtors)
            fail("dedicated pool %ld (width %u): %ld thread-local destructors ran, expected %ld",
                 i, got, d, want_dtors);
        int after = threads_at_most(base);
        if (after != base)
            fail("dedicated pool %ld (width %u, kind %d): %d threads after destroy, %d before "
                 "(%d alive)",
                 i, got, kind, after, base, alive);
    }
    atomic_store(&mon_bound, 0);
    if (atomic_load(&onstart_count) != want_dtors)
        fail("on_start ran %ld times, expected %ld", atomic_load(&onstart_count), want_dtors);
}

int main(int argc, char **argv)
{
    bool given = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--default") && v) {
            opt.ndefault = strtol(v, NULL, 0);
            given = true;
            i++;
        } else if (!strcmp(a, "--dedicated") && v) {
            opt.ndedicated = strtol(v, NULL, 0);
            given = true;
            i++;
        } else if (!strcmp(a, "--threads") && v) {
            opt.threads = (unsigned)strtoul(v, NULL, 0);
            i++;
        } else if (!strcmp(a, "--max-width") && v) {
            opt.max_width = (unsigned)strtoul(v, NULL, 0);
            i++;
        } else if (!strcmp(a, "--rss-slack-kb") && v) {
            opt.rss_slack_kb = strtol(v, NULL, 0);
            i++;
        } else if (!strcmp(a, "--heap-slack-kb") && v) {
            opt.heap_slack_kb = strtol(v, NULL, 0);
            i++;
        } else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
            opt.verbose = true;
        } else {
            fprintf(stderr,
                    "usage: %s [--default N] [--dedicated M] [--threads K] [--max-width W]\n"
                    "          [--rss-slack-kb S] [--heap-slack-kb H] [-v]\n",
                    argv[0]);
            return 2;
        }
    }
    const char *q = getenv("TT_TEST_QUICK");
    if (!given && q && *q && strcmp(q, "0") != 0) {
        opt.ndefault /= 20;
        opt.ndedicated /= 20;
    }
    if (opt.max_width == 0)
        opt.max_width = th_proc_cpus() > 4 ? th_proc_cpus() : 4;
    if (opt.max_width > 64)
        opt.max_width = 64;
    if (opt.threads == 0)
        opt.threads = 1;
    pthread_key_create(&tls_key, tls_dtor);

    pthread_t mon;
    pthread_create(&mon, NULL, monitor_main, NULL);
    int base = th_proc_count_threads(); /* this thread and the monitor */
    uint64_t t0 = th_proc_now_ns();
    long rss0 = rss_kb(), heap0 = heap_kb();

    /* Warm-up: every width once, default and dedicated, so the cache, the
     * pool objects, malloc's arenas and libgomp reach their steady state. */
    long warm = opt.ndefault / 50;
    if (warm < 50)
        warm = 50;
    if (warm > opt.ndefault)
        warm = opt.ndefault;
    for (unsigned w = 1; w <= opt.max_width; w++) {
        tt_pool *p = make_pool(w, K_DEFAULT);
        tt_pool *d = make_pool(w, K_NAMED);
        if (p) {
            use_pool(p);
            tt_pool_destroy(p);
        }
        if (d) {
            use_pool(d);
            tt_pool_destroy(d);
        }
        note_width(w);
    }
    phase_default(warm, base);
    long rss1 = rss_kb(), heap1 = heap_kb();
    uint64_t t1 = th_proc_now_ns();
    phase_default(opt.ndefault - warm, base);
    uint64_t t2 = th_proc_now_ns();
    long rss2 = rss_kb(), heap2 = heap_kb();
    phase_dedicated(opt.ndedicated);
    uint64_t t3 = th_proc_now_ns();
    long rss3 = rss_kb(), heap3 = heap_kb();

    atomic_store(&mon_stop, 1);
    pthread_join(mon, NULL);
    int over = atomic_load(&mon_over);
    if (over)
        fail("the monitor saw %d threads, above the bound of its phase", over);
    long drss = rss3 - rss1, dheap = heap3 - heap1;
    /* Under a sanitizer the shadow memory grows and malloc is its own:
     * report, do not judge. */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
    bool judge_memory = false;
#else
    bool judge_memory = true;
#endif
    if (judge_memory && drss > opt.rss_slack_kb)
        fail("resident memory grew by %ld KiB after the warm-up (slack %ld KiB)", drss,
             opt.rss_slack_kb);
    if (judge_memory && heap1 >= 0 && dheap > opt.heap_slack_kb)
        fail("heap in use grew by %ld KiB after the warm-up (slack %ld KiB)", dheap,
             opt.heap_slack_kb);
    double el = (double)(th_proc_now_ns() - t0) / 1e9;
    printf("soak_pools: %s: %ld default pools (%.1f us each), %ld dedicated pools (%.1f us each), "
           "callers 1 and %u, widths 1..%u, peak threads %d (base %d, cache cap %u), "
           "RSS %ld -> %ld -> %ld -> %ld KiB (after warm-up %+ld), heap %ld -> %ld -> %ld -> %ld "
           "KiB (after warm-up %+ld), %.1f s\n",
           atomic_load(&failures) ? "FAILED" : "ok", opt.ndefault,
           opt.ndefault > warm ? (double)(t2 - t1) / 1e3 / (double)(opt.ndefault - warm) : 0.0,
           opt.ndedicated, opt.ndedicated ? (double)(t3 - t2) / 1e3 / (double)opt.ndedicated : 0.0,
           opt.threads, opt.max_width, atomic_load(&mon_peak), base, cap_now(), rss0, rss1, rss2,
           rss3, drss, heap0, heap1, heap2, heap3, dheap, el);
    return atomic_load(&failures) ? 1 : 0;
}
