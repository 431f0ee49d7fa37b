/*
 * tt_test.h -- shared helpers of the threadteam Check programs.
 *
 * Header-only: every test program is one translation unit that includes it
 * once. Nothing here includes omp.h, so the helpers build in a
 * --disable-parallel configuration (TT_PARALLEL_ENABLED 0) without OpenMP.
 *
 * What it gives:
 *  - th_tcase(): a TCase with a Check timeout (which Check scales by
 *    CK_TIMEOUT_MULTIPLIER) and a watchdog fixture that aborts the process
 *    a little after that timeout, so a hang also fails when Check runs
 *    without fork (CK_FORK=no, as under valgrind), where Check enforces no
 *    timeout of its own;
 *  - TT_CHECK(): an assertion usable on any thread (jobs, bodies, pool
 *    members): it records the failure instead of long-jumping out of the
 *    library's frames; th_assert_no_failures() turns the record into a
 *    Check failure on the test's own thread. Use ck_assert only on the
 *    test's thread, outside every callback;
 *  - th_live: a live-task counter that tracks its maximum (atomics);
 *  - th_tbarrier: a reusable barrier whose wait fails after a timeout
 *    instead of hanging;
 *  - pools of a given width with test spin settings; the expected width in
 *    this build (th_expect_width: 1 under --disable-parallel);
 *  - /proc/self/task: thread counts, thread names, whether a tid lives;
 *  - iteration scaling: TT_TEST_QUICK=1 divides iteration counts by 20
 *    (th_iters), TT_TEST_SCALE=<k> divides them by k;
 *  - a seeded PRNG (splitmix64), clocks, a short busy spin.
 *
 * Environment:
 *   TT_TEST_QUICK=1           iteration counts / 20 (valgrind, tsan)
 *   TT_TEST_SCALE=k           iteration counts / k (overrides QUICK)
 *   CK_TIMEOUT_MULTIPLIER=m   Check's own multiplier; also scales the
 *                             watchdog and the barrier timeouts
 *   TT_TEST_SPIN_POLLS=n      spin_polls of the test pools
 *                             (default 20000; 200 when quick)
 */
#ifndef TT_TEST_H
#define TT_TEST_H

#include <check.h>

#include "tt_proc.h"
#include <threadteam.h>

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
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
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#if defined(__GNUC__)
#define TT_TEST_UNUSED __attribute__((unused))
#else
#define TT_TEST_UNUSED
#endif

/* ------------------------------------------------------------------------ */
/* Build configuration                                                       */
/* ------------------------------------------------------------------------ */

/* Whether the process's OpenMP runtime is LLVM libomp (make
 * check-libomp-app preloads it under the GCC build): its entry point is
 * there. */
static inline bool th_runtime_is_libomp(void)
{
    return dlsym(RTLD_DEFAULT, "__kmpc_fork_call") != NULL;
}

/* The width a pool asked for `w` threads gets in this build. */
static inline unsigned th_expect_width(unsigned w)
{
#if TT_PARALLEL_ENABLED
    return w;
#else
    (void)w;
    return 1;
#endif
}

/* The budget a root minted for `b` slots of a pool of `w` threads gets. */
static inline unsigned th_expect_budget(unsigned w, unsigned b)
{
    unsigned ww = th_expect_width(w);
    return b < ww ? b : ww;
}

/* ------------------------------------------------------------------------ */
/* Environment and scaling                                                   */
/* ------------------------------------------------------------------------ */

static inline long th_env_long(const char *name, long dflt)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return dflt;
    char *end = NULL;
    long v = strtol(s, &end, 10);
    return (end && end != s) ? v : dflt;
}

static inline bool th_test_quick(void)
{
    return th_env_long("TT_TEST_QUICK", 0) != 0;
}

/* The divisor of every iteration count. */
static inline long th_test_divisor(void)
{
    long k = th_env_long("TT_TEST_SCALE", 0);
    if (k > 0)
        return k;
    return th_test_quick() ? 20 : 1;
}

/* n iterations, scaled down by the divisor, at least 1. */
static inline unsigned th_iters(unsigned n)
{
    long d = th_test_divisor();
    unsigned v = (unsigned)((long)n / d);
    return v ? v : 1u;
}

/* Multiplier of every timeout (Check's own variable, so both agree). */
static inline double th_timeout_mult(void)
{
    const char *s = getenv("CK_TIMEOUT_MULTIPLIER");
    if (s && *s) {
        double m = strtod(s, NULL);
        if (m >= 1.0)
            return m;
    }
    return 1.0;
}

/* A timeout of `s` seconds, scaled. */
static inline double th_timeout(double s) { return s * th_timeout_mult(); }

/* ------------------------------------------------------------------------ */
/* Clocks, spins, ids                                                        */
/* ------------------------------------------------------------------------ */

static inline uint64_t th_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Busy-wait about `us` microseconds (makes overlaps observable). */
static inline void th_spin_us(unsigned us)
{
    uint64_t end = th_now_ns() + (uint64_t)us * 1000u;
    while (th_now_ns() < end)
        ;
}

static inline void th_sleep_us(unsigned us)
{
    struct timespec ts = {(time_t)(us / 1000000u), (long)(us % 1000000u) * 1000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static inline pid_t th_gettid(void) { return (pid_t)syscall(SYS_gettid); }

/* CPUs in the calling thread's affinity set. */
static inline unsigned th_affinity_cpus(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return (unsigned)CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned)n : 1u;
}

/* The first CPU of `set` other than `skip` (-1: none skipped); -1 when
 * there is none. */
static inline int th_first_cpu_of(const cpu_set_t *set, int skip)
{
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (c != skip && CPU_ISSET(c, set))
            return c;
    return -1;
}

/* Bind the calling thread to `cpu` alone (sched_setaffinity's result). */
static inline int th_bind_to_cpu(int cpu)
{
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    return sched_setaffinity(0, sizeof one, &one);
}

/* ------------------------------------------------------------------------ */
/* PRNG: splitmix64                                                          */
/* ------------------------------------------------------------------------ */

static inline uint64_t th_mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline uint64_t th_rng_next(uint64_t *s)
{
    *s += 0x9e3779b97f4a7c15ull;
    return th_mix64(*s);
}

/* Uniform in [0, n) (n > 0; the bias is irrelevant here). */
static inline unsigned th_rng_below(uint64_t *s, unsigned n)
{
    return (unsigned)(th_rng_next(s) % n);
}

/* A child seed: deterministic in (seed, i), independent of execution order. */
static inline uint64_t th_seed_child(uint64_t seed, uint64_t i)
{
    return th_mix64(seed ^ th_mix64(i + 0x632be59bd9b4e019ull));
}

/* ------------------------------------------------------------------------ */
/* Failures recorded on any thread                                           */
/* ------------------------------------------------------------------------ */

static _Atomic unsigned th_fail_count;
static pthread_mutex_t th_fail_lock = PTHREAD_MUTEX_INITIALIZER;
static char th_fail_first[512];

static TT_TEST_UNUSED void th_note_failure(const char *file, int line, const char *fmt, ...)
{
    unsigned n = atomic_fetch_add(&th_fail_count, 1);
    if (n < 8) {
        char msg[400];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        fprintf(stderr, "%s:%d: check failed: %s\n", file, line, msg);
        pthread_mutex_lock(&th_fail_lock);
        if (n == 0 || !th_fail_first[0])
            snprintf(th_fail_first, sizeof th_fail_first, "%s:%d: %s", file, line, msg);
        pthread_mutex_unlock(&th_fail_lock);
    }
}

/* An assertion for any thread: records, never jumps. */
#define TT_CHECK(cond, ...)                                                    \
    do {                                                                       \
        if (!(cond))                                                           \
            th_note_failure(__FILE__, __LINE__, __VA_ARGS__);                  \
    } while (0)

static inline unsigned th_failures(void) { return atomic_load(&th_fail_count); }

static inline void th_reset_failures(void)
{
    pthread_mutex_lock(&th_fail_lock);
    th_fail_first[0] = 0;
    pthread_mutex_unlock(&th_fail_lock);
    atomic_store(&th_fail_count, 0);
}

/* On the test's own thread: fail the test when any TT_CHECK failed. */
#define th_assert_no_failures()                                                \
    do {                                                                       \
        unsigned th_n = th_failures();                                        \
        if (th_n) {                                                           \
            char th_msg[sizeof th_fail_first];                               \
            pthread_mutex_lock(&th_fail_lock);                                \
            memcpy(th_msg, th_fail_first, sizeof th_msg);                   \
            pthread_mutex_unlock(&th_fail_lock);                              \
            th_reset_failures();                                               \
            ck_abort_msg("%u check(s) failed; first: %s", th_n, th_msg);     \
        }                                                                      \
    } while (0)

/* ck_assert_msg for hot loops, on the test's thread: Check records every
 * passing assertion (a write to its channel when it forks), this only
 * reaches Check when the condition fails. */
#define TT_REQUIRE(cond, ...)                                                  \
    do {                                                                       \
        if (!(cond))                                                           \
            ck_abort_msg(__VA_ARGS__);                                         \
    } while (0)

/* ------------------------------------------------------------------------ */
/* Live counter with maximum                                                 */
/* ------------------------------------------------------------------------ */

typedef struct th_live {
    _Atomic int live;
    _Atomic int max;
    _Atomic long entries;
} th_live;

static inline void th_live_init(th_live *l)
{
    atomic_store(&l->live, 0);
    atomic_store(&l->max, 0);
    atomic_store(&l->entries, 0);
}

/* Add n running tasks; returns the new count and raises the maximum. */
static inline int th_live_add(th_live *l, int n)
{
    int now = atomic_fetch_add(&l->live, n) + n;
    atomic_fetch_add(&l->entries, 1);
    int m = atomic_load(&l->max);
    while (now > m && !atomic_compare_exchange_weak(&l->max, &m, now))
        ;
    return now;
}
static inline int th_live_enter(th_live *l) { return th_live_add(l, 1); }
static inline void th_live_sub(th_live *l, int n) { atomic_fetch_sub(&l->live, n); }
static inline void th_live_leave(th_live *l) { th_live_sub(l, 1); }
static inline int th_live_max(th_live *l) { return atomic_load(&l->max); }
static inline int th_live_now(th_live *l) { return atomic_load(&l->live); }

/* ------------------------------------------------------------------------ */
/* Barrier with a timeout                                                    */
/* ------------------------------------------------------------------------ */

/* A reusable barrier of `parties`. A wait that does not complete within its
 * timeout breaks the barrier: it and every later wait return -1 at once, so
 * a test fails instead of hanging. */
typedef struct th_tbarrier {
    pthread_mutex_t m;
    pthread_cond_t c;
    unsigned parties, count;
    unsigned long gen;
    bool broken;
} th_tbarrier;

static inline void th_tbarrier_init(th_tbarrier *b, unsigned parties)
{
    pthread_mutex_init(&b->m, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&b->c, &ca);
    pthread_condattr_destroy(&ca);
    b->parties = parties;
    b->count = 0;
    b->gen = 0;
    b->broken = false;
}

static inline void th_tbarrier_destroy(th_tbarrier *b)
{
    pthread_cond_destroy(&b->c);
    pthread_mutex_destroy(&b->m);
}

/* 1 for the last arriver, 0 for the others, -1 on timeout or when broken. */
static inline int th_tbarrier_wait(th_tbarrier *b, double timeout_s)
{
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    double t = th_timeout(timeout_s);
    dl.tv_sec += (time_t)t;
    dl.tv_nsec += (long)((t - (double)(time_t)t) * 1e9);
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&b->m);
    if (b->broken) {
        pthread_mutex_unlock(&b->m);
        return -1;
    }
    unsigned long gen = b->gen;
    if (++b->count == b->parties) {
        b->count = 0;
        b->gen++;
        pthread_cond_broadcast(&b->c);
        pthread_mutex_unlock(&b->m);
        return 1;
    }
    while (gen == b->gen && !b->broken) {
        if (pthread_cond_timedwait(&b->c, &b->m, &dl) == ETIMEDOUT && gen == b->gen) {
            b->broken = true;
            pthread_cond_broadcast(&b->c);
            break;
        }
    }
    int rc = (gen != b->gen) ? 0 : -1;
    pthread_mutex_unlock(&b->m);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* A one-shot flag to wait on with a timeout                                 */
/* ------------------------------------------------------------------------ */

typedef struct th_flag {
    _Atomic int v;
} th_flag;

static inline void th_flag_set(th_flag *f, int v) { atomic_store(&f->v, v); }
static inline int th_flag_get(th_flag *f) { return atomic_load(&f->v); }

/* Wait until the flag reaches at least v; false on timeout. */
static inline bool th_flag_wait_ge(th_flag *f, int v, double timeout_s)
{
    uint64_t end = th_now_ns() + (uint64_t)(th_timeout(timeout_s) * 1e9);
    while (atomic_load(&f->v) < v) {
        if (th_now_ns() > end)
            return false;
        th_sleep_us(100);
    }
    return true;
}

/* ------------------------------------------------------------------------ */
/* Pools with test settings                                                  */
/* ------------------------------------------------------------------------ */

static inline uint64_t th_test_spin_polls(void)
{
    long v = th_env_long("TT_TEST_SPIN_POLLS", -1);
    if (v >= 0)
        return (uint64_t)v;
    return th_test_quick() ? 200u : 20000u;
}

/* The attributes of a test pool. A field left 0 takes a default: the
 * suite's spin polls (th_test_spin_polls), the library's idle spin and
 * acquire timeout; a name makes the pool dedicated. exact_waits sets
 * spin_polls and idle_spin_ns as given, 0 included (0 = sleep at once):
 * without it a pool meant never to spin would spin with the defaults. */
typedef struct th_test_pool_opts {
    unsigned width; /* 0: the library's default width */
    uint64_t spin_polls, idle_spin_ns, acquire_ns;
    const char *name;
    bool exact_waits;
} th_test_pool_opts;

/* A pool with the given attributes, e.g. TT_TEST_POOL(.width = 3,
 * .acquire_ns = UINT64_MAX). Fails the test (on its own thread) when the
 * pool cannot be built or has another width than the build allows. */
#define TT_TEST_POOL(...) th_test_pool((th_test_pool_opts){__VA_ARGS__})
static inline tt_pool *th_test_pool(th_test_pool_opts o)
{
    tt_pool_attr *a = NULL;
    ck_assert_int_eq(tt_pool_attr_create(&a), TT_OK);
    ck_assert_int_eq(tt_pool_attr_set_threads(a, o.width), TT_OK);
    ck_assert_int_eq(tt_pool_attr_set_spin_polls(a, o.spin_polls || o.exact_waits
                                                        ? o.spin_polls
                                                        : th_test_spin_polls()),
                     TT_OK);
    if (o.idle_spin_ns || o.exact_waits)
        ck_assert_int_eq(tt_pool_attr_set_idle_spin(a, o.idle_spin_ns), TT_OK);
    if (o.acquire_ns)
        ck_assert_int_eq(tt_pool_attr_set_acquire_timeout(a, o.acquire_ns), TT_OK);
    if (o.name)
        ck_assert_int_eq(tt_pool_attr_set_thread_name(a, o.name), TT_OK);
    tt_pool *p = NULL;
    int rc = tt_pool_create(&p, a);
    tt_pool_attr_destroy(a);
    ck_assert_msg(rc == TT_OK, "tt_pool_create(width %u): %s", o.width, tt_status_name(rc));
    ck_assert_ptr_nonnull(p);
    if (o.width)
        ck_assert_uint_eq(tt_pool_width(p), th_expect_width(o.width));
    return p;
}

/* A pool of `width` threads (0: all CPUs) with the given waits. */
static inline tt_pool *th_make_pool_spin(unsigned width, uint64_t spin_polls, uint64_t idle_spin_ns)
{
    return TT_TEST_POOL(.width = width, .spin_polls = spin_polls, .idle_spin_ns = idle_spin_ns,
                        .exact_waits = true);
}

/* A pool of `width` threads with the test waits (short spins). */
static inline tt_pool *th_make_pool(unsigned width)
{
    return th_make_pool_spin(width, th_test_spin_polls(), 100000u /* 100 us */);
}

static inline void th_free_pool(tt_pool *p)
{
    int rc = tt_pool_destroy(p);
    ck_assert_msg(rc == TT_OK, "tt_pool_destroy: %s", tt_status_name(rc));
}

/* ------------------------------------------------------------------------ */
/* /proc/self/task                                                           */
/* ------------------------------------------------------------------------ */

/* Threads of this process now (-1 when /proc is not there). */
static inline int th_count_threads(void) { return th_proc_count_threads(); }

/* The name (comm) of thread `tid` into buf; false when it is gone. */
static inline bool th_thread_comm(pid_t tid, char *buf, size_t len)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/comm", (int)tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    bool ok = fgets(buf, (int)len, f) != NULL;
    fclose(f);
    if (ok)
        buf[strcspn(buf, "\n")] = 0;
    return ok;
}

static inline bool th_tid_alive(pid_t tid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d", (int)tid);
    return access(path, F_OK) == 0;
}

/* The tid of a thread named exactly `name`, or 0; *count (may be NULL) gets
 * how many threads have that name. */
static inline pid_t th_find_thread_named(const char *name, int *count)
{
    DIR *d = opendir("/proc/self/task");
    pid_t found = 0;
    int n = 0;
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.')
                continue;
            char comm[64];
            pid_t tid = (pid_t)atoi(e->d_name);
            if (th_thread_comm(tid, comm, sizeof comm) && strcmp(comm, name) == 0) {
                n++;
                found = tid;
            }
        }
        closedir(d);
    }
    if (count)
        *count = n;
    return found;
}

/* Threads whose name starts with `prefix`. */
static inline int th_count_threads_prefixed(const char *prefix)
{
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    if (d) {
        struct dirent *e;
        size_t pl = strlen(prefix);
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.')
                continue;
            char comm[64];
            if (th_thread_comm((pid_t)atoi(e->d_name), comm, sizeof comm) &&
                strncmp(comm, prefix, pl) == 0)
                n++;
        }
        closedir(d);
    }
    return n;
}

/* Wait (up to timeout_s) until the process has `n` threads; returns the
 * last count seen. Threads that exit leave /proc a moment after they
 * signalled their exit. */
/* The process's thread count once it holds still: two reads 2 ms apart
 * that agree (at most 1 s). A thread joined a moment ago can still be
 * listed in /proc; a test that takes the count as its baseline and then
 * waits for the count to come back to it would wait for a thread that is
 * gone. */
static inline int th_count_threads_settled(void)
{
    int c = th_count_threads();
    for (int i = 0; i < 500; i++) {
        th_sleep_us(2000);
        int d = th_count_threads();
        if (d == c)
            break;
        c = d;
    }
    return c;
}

static inline int th_wait_thread_count(int n, double timeout_s)
{
    uint64_t end = th_now_ns() + (uint64_t)(th_timeout(timeout_s) * 1e9);
    int c;
    while ((c = th_count_threads()) != n && th_now_ns() < end)
        th_sleep_us(1000);
    return c;
}

/* ------------------------------------------------------------------------ */
/* Threads                                                                   */
/* ------------------------------------------------------------------------ */

/* Join t; after timeout_s record a failure and return false (t is left
 * running: the test then fails, and Check or the watchdog ends it). */
static inline bool th_join_timeout(pthread_t t, double timeout_s)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += (time_t)th_timeout(timeout_s);
    int rc = pthread_timedjoin_np(t, NULL, &dl);
    if (rc != 0) {
        th_note_failure(__FILE__, __LINE__, "thread did not finish within %.0f s (%s)",
                        th_timeout(timeout_s), strerror(rc));
        return false;
    }
    return true;
}

/* ------------------------------------------------------------------------ */
/* Watchdog and tcases                                                       */
/* ------------------------------------------------------------------------ */

#define TH_MAX_TCASES 24
static struct {
    const char *name;
    double seconds;
} th_tcase_timeouts[TH_MAX_TCASES];
static unsigned th_tcase_count;

static pthread_mutex_t th_wd_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t th_wd_cond;
static bool th_wd_stop;
static bool th_wd_running;
static pthread_t th_wd_thread;
static int th_wd_tid; /* the watchdog's kernel thread id (Linux), or 0 */
static double th_wd_seconds;
static char th_wd_name[128];

static void *th_watchdog_main(void *arg)
{
    (void)arg;
#if defined(__linux__)
    pthread_setname_np(pthread_self(), "tt-watchdog");
    __atomic_store_n(&th_wd_tid, (int)th_gettid(), __ATOMIC_RELAXED);
#endif
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    dl.tv_sec += (time_t)th_wd_seconds + 1;
    pthread_mutex_lock(&th_wd_lock);
    while (!th_wd_stop) {
        if (pthread_cond_timedwait(&th_wd_cond, &th_wd_lock, &dl) == ETIMEDOUT && !th_wd_stop) {
            fprintf(stderr,
                    "tt watchdog: tcase '%s' still running after %.0f s: aborting (a hang)\n",
                    th_wd_name, th_wd_seconds);
            fflush(stderr);
            fflush(stdout);
            abort();
        }
    }
    pthread_mutex_unlock(&th_wd_lock);
    return NULL;
}

/* Start the watchdog of tcase slot `slot` (set up by th_tcase). */
static void th_watchdog_start(unsigned slot)
{
    const char *name = slot < th_tcase_count ? th_tcase_timeouts[slot].name : "?";
    double secs = slot < th_tcase_count ? th_tcase_timeouts[slot].seconds : 60;
    th_reset_failures();
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&th_wd_cond, &ca);
    pthread_condattr_destroy(&ca);
    th_wd_stop = false;
    /* A little after Check's own timeout, so that Check reports a timeout
     * when it forks; without fork this is the only one. */
    th_wd_seconds = th_timeout(secs) + 10;
    snprintf(th_wd_name, sizeof th_wd_name, "%s", name);
    th_wd_running = pthread_create(&th_wd_thread, NULL, th_watchdog_main, NULL) == 0;
}

static void th_watchdog_teardown(void)
{
    if (th_wd_running) {
        pthread_mutex_lock(&th_wd_lock);
        th_wd_stop = true;
        pthread_cond_broadcast(&th_wd_cond);
        pthread_mutex_unlock(&th_wd_lock);
        pthread_join(th_wd_thread, NULL);
        th_wd_running = false;
        /* A joined thread can still be listed in /proc/self/task for a
         * moment. Without fork (CK_FORK=no) the next test starts right
         * away, and one that counts the process's threads at its start
         * (test_attr.c, test_pool_qos) counted this one too, and then
         * found one fewer (TT_TEST_QUICK=1 CK_FORK=no: 1 run in 6). So the
         * teardown waits until it is gone (at most 1 s). */
        int tid = __atomic_exchange_n(&th_wd_tid, 0, __ATOMIC_RELAXED);
        if (tid > 0) {
            char path[64];
            snprintf(path, sizeof path, "/proc/self/task/%d", tid);
            for (int i = 0; i < 10000 && access(path, F_OK) == 0; i++)
                th_sleep_us(100);
        }
    }
    pthread_cond_destroy(&th_wd_cond);
}

/* A fixture takes no argument: one setup function per tcase slot. */
#define TH_WD_SETUP(n)                                                        \
    static void th_wd_setup_##n(void) { th_watchdog_start(n); }
TH_WD_SETUP(0) TH_WD_SETUP(1) TH_WD_SETUP(2) TH_WD_SETUP(3) TH_WD_SETUP(4)
TH_WD_SETUP(5) TH_WD_SETUP(6) TH_WD_SETUP(7) TH_WD_SETUP(8) TH_WD_SETUP(9)
TH_WD_SETUP(10) TH_WD_SETUP(11) TH_WD_SETUP(12) TH_WD_SETUP(13) TH_WD_SETUP(14)
TH_WD_SETUP(15) TH_WD_SETUP(16) TH_WD_SETUP(17) TH_WD_SETUP(18) TH_WD_SETUP(19)
TH_WD_SETUP(20) TH_WD_SETUP(21) TH_WD_SETUP(22) TH_WD_SETUP(23)
#undef TH_WD_SETUP
static void (*const th_wd_setups[TH_MAX_TCASES])(void) = {
    th_wd_setup_0,  th_wd_setup_1,  th_wd_setup_2,  th_wd_setup_3,  th_wd_setup_4,
    th_wd_setup_5,  th_wd_setup_6,  th_wd_setup_7,  th_wd_setup_8,  th_wd_setup_9,
    th_wd_setup_10, th_wd_setup_11, th_wd_setup_12, th_wd_setup_13, th_wd_setup_14,
    th_wd_setup_15, th_wd_setup_16, th_wd_setup_17, th_wd_setup_18, th_wd_setup_19,
    th_wd_setup_20, th_wd_setup_21, th_wd_setup_22, th_wd_setup_23,
};

/* A tcase named `name` in suite s, with a timeout of `seconds` (scaled by
 * CK_TIMEOUT_MULTIPLIER, by Check and by the watchdog). At most
 * TH_MAX_TCASES per program. */
static TT_TEST_UNUSED TCase *th_tcase(Suite *s, const char *name, double seconds)
{
    TCase *tc = tcase_create(name);
    tcase_set_timeout(tc, seconds);
    if (th_tcase_count < TH_MAX_TCASES) {
        unsigned slot = th_tcase_count++;
        th_tcase_timeouts[slot].name = name;
        th_tcase_timeouts[slot].seconds = seconds;
        tcase_add_checked_fixture(tc, th_wd_setups[slot], th_watchdog_teardown);
    } else {
        fprintf(stderr, "tt_test.h: more than %d tcases: '%s' has no watchdog\n",
                TH_MAX_TCASES, name);
    }
    suite_add_tcase(s, tc);
    return tc;
}

/* Run the suite and turn the failures into the exit status. */
static TT_TEST_UNUSED int th_run_suite(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

/* ------------------------------------------------------------------------ */
/* Small utilities                                                           */
/* ------------------------------------------------------------------------ */

#define TT_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Every return code of the library. */
static const int th_all_codes[] TT_TEST_UNUSED = {
    TT_OK,         TT_EINVAL,       TT_ENOMEM,         TT_EAGAIN,
    TT_ESHORTTEAM, TT_ERANGE,       TT_ECONSUMED,      TT_ECOPY,
    TT_EBUSY,      TT_EFORKED,      TT_ENOTSUP,        TT_EWRONGTHREAD,
    TT_EDESTROYED, TT_ERUNTIME,     TT_REFUSED_FORK_CHILD, TT_REFUSED_CALLER_IN_POOL, TT_REFUSED_UNAVAILABLE,
    TT_REFUSED_BUSY,
};

/* Index of the thread `self` in a table of up to n ids, adding it when new;
 * returns its index (n on overflow). Lock-free for a handful of threads. */
typedef struct th_thread_set {
    _Atomic(pthread_t) ids[64];
    _Atomic unsigned n;
    pthread_mutex_t lock;
} th_thread_set;

static inline void th_thread_set_init(th_thread_set *s)
{
    atomic_store(&s->n, 0);
    pthread_mutex_init(&s->lock, NULL);
}
static inline void th_thread_set_destroy(th_thread_set *s) { pthread_mutex_destroy(&s->lock); }

static inline unsigned th_thread_set_add(th_thread_set *s, pthread_t self)
{
    pthread_mutex_lock(&s->lock);
    unsigned n = atomic_load(&s->n);
    for (unsigned i = 0; i < n; i++) {
        if (pthread_equal(atomic_load(&s->ids[i]), self)) {
            pthread_mutex_unlock(&s->lock);
            return i;
        }
    }
    unsigned idx = n;
    if (n < 64) {
        atomic_store(&s->ids[n], self);
        atomic_store(&s->n, n + 1);
    }
    pthread_mutex_unlock(&s->lock);
    return idx;
}
static inline unsigned th_thread_set_size(th_thread_set *s) { return atomic_load(&s->n); }

#endif /* TT_TEST_H */
