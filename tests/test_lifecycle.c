/*
 * test_lifecycle.c -- pool lifecycle: the process-wide cache of default
 * crews (reuse, the thread cap, one pool at a time, the building thread's
 * CPU set), dedicated members joined by destroy (thread-local destructors
 * made in on_start have run when it returns), destroy from a member
 * (signal only; TT_EDESTROYED afterwards; the last entry out releases),
 * destroy while busy (TT_EBUSY, nothing changed), fork() children
 * (TT_EFORKED, destroy without joining, new pools work, no hang), process
 * exit with pools alive and from inside a member, dlopen/dlclose of a
 * module that links threadteam, and failures: thread starts refused
 * (failure injection and RLIMIT_NPROC), allocations failing at every point,
 * OMP_THREAD_LIMIT.
 *
 * Links the static library: tt__fault_inject is internal and not exported
 * from the shared one.
 *
 * Children: a test whose outcome depends on the process-wide state (the
 * cache, the widest pool built) runs in a fork() child, which starts with
 * an empty cache (the library's atfork handler forgets the parent's crews),
 * or in a fresh exec of this program (`test_lifecycle --child MODE ...`)
 * when it also needs the "widest pool built" to start from nothing. A
 * child never calls ck_assert (under CK_FORK=no that would long-jump into
 * the suite inside the child): it records with TT_CHECK and exits with a
 * status that the parent asserts. Every child has an alarm() and the parent
 * a deadline, so a hang fails the test instead of stalling it.
 *
 * --disable-parallel (TT_PARALLEL_ENABLED 0): every pool has width 1 and
 * no thread is ever started; the tests assert exactly that where they
 * would otherwise count members.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "tt_test.h"
#include "test_hooks.h"

/* tt__test_force_private_crew (test_hooks.h): every root runs on its pool's
 * private crew, as in a fork() child of a multi-threaded parent. The
 * isolated children of this file test the private crew and its cache
 * (whether a child of the test runner is multi-threaded at fork time is not
 * the test's to decide), and run under ThreadSanitizer as exec'd processes,
 * where no fork is seen. */

#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

/* ThreadSanitizer cannot follow threads started in a fork() child of a
 * multi-threaded process ("dup thread with used id"), so under TSan the
 * children that only isolate process-wide state run as fresh execs of this
 * program, and the tests of fork() itself are skipped. */
/* AddressSanitizer too: its allocator's locks can be copied held into a
 * fork() child of a multi-threaded parent (seen: a child hung in the
 * allocator on its first malloc), as glibc's are not. */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define LC_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define LC_TSAN 1
#endif
#endif
#ifndef LC_TSAN
#define LC_TSAN 0
#endif


#define LC_MAXW 64

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

static char lc_self[PATH_MAX]; /* this program, for exec'd children */

static void lc_noop_range(void *arg, size_t b, size_t e)
{
    (void)arg;
    (void)b;
    (void)e;
}

static void lc_noop_job(void *arg, unsigned i, tt_exec *c)
{
    (void)arg;
    (void)i;
    (void)c;
}

static void lc_noop_bcast(void *arg, unsigned i)
{
    (void)arg;
    (void)i;
}

static void lc_noop_ext(void *arg, unsigned w)
{
    (void)arg;
    (void)w;
}

static void lc_noop_scope(void *arg, tt_scope *s)
{
    (void)arg;
    (void)s;
}

/* A sanitizer's runtime may start a thread of its own with the process's
 * first pthread_create: start (and join) one before any thread count is
 * taken as a baseline. The joined thread leaves /proc/self/task a moment
 * after its join returns, and under load that moment is long enough for a
 * baseline taken at once to count it: CI's make check on e9c0044 failed
 * lc_cache_cap_model so ("step 0 (create): 6 threads, model 7" with base
 * 2 where the process had 1 thread). So the count waits for its tid to
 * go. */
static void *lc_nothing(void *arg)
{
    *(_Atomic pid_t *)arg = th_gettid();
    return NULL;
}
static void lc_settle_runtime(void)
{
    pthread_t t;
    _Atomic pid_t tid = 0;
    if (pthread_create(&t, NULL, lc_nothing, &tid) != 0)
        return;
    pthread_join(t, NULL);
    uint64_t end = th_now_ns() + (uint64_t)(th_timeout(2.0) * 1e9);
    while (th_tid_alive(atomic_load(&tid)) && th_now_ns() < end)
        th_sleep_us(200);
}

/* Threads of the process once it settled at `want` (a joined thread leaves
 * /proc/self/task a moment after its join returned). */
static int lc_threads_settle(int want) { return th_wait_thread_count(want, 2.0); }

/* Threads once at most `most` remain (or after 2 s): the count seen. */
static int lc_threads_at_most(int most)
{
    uint64_t end = th_now_ns() + (uint64_t)(th_timeout(2.0) * 1e9);
    int c;
    while ((c = th_count_threads()) > most && th_now_ns() < end)
        th_sleep_us(1000);
    return c;
}

/* Pool kinds: the default settings (cacheable) or one dedicated setting. */
enum {
    LC_DEFAULT = 0,
    LC_NAMED,   /* thread_name */
    LC_ONSTART, /* on_start hook (with thread-local state) */
    LC_STACK,   /* stack_size */
    LC_QOS,     /* qos */
    LC_KINDS
};
static const char *const lc_kind_name[LC_KINDS] = {"default", "thread_name", "on_start",
                                                   "stack_size", "qos"};

/* on_start state: a pthread key whose destructor counts and frees what the
 * hook made, and a __thread marker that proves the hook ran on the thread
 * that later serves member k's work. */
static pthread_key_t lc_key;
static pthread_once_t lc_key_once = PTHREAD_ONCE_INIT;
static _Atomic int lc_dtor_count;
static _Atomic int lc_onstart_count;
static _Atomic uint64_t lc_onstart_mask;
static __thread unsigned lc_tls_marker;

/* Every state on_start made, so that it stays reachable: in a fork()
 * child the threads whose thread-local data pointed to it do not exist. */
#define LC_STATES 512
static _Atomic(unsigned *) lc_states[LC_STATES];

static void lc_dtor(void *v)
{
    for (unsigned i = 0; i < LC_STATES; i++) {
        unsigned *expect = v;
        if (atomic_compare_exchange_strong(&lc_states[i], &expect, NULL))
            break;
    }
    free(v);
    atomic_fetch_add(&lc_dtor_count, 1);
}

static void lc_key_make(void) { pthread_key_create(&lc_key, lc_dtor); }

static void lc_on_start(void *arg, unsigned member)
{
    (void)arg;
    pthread_once(&lc_key_once, lc_key_make);
    unsigned *state = malloc(sizeof *state);
    if (state) {
        *state = member;
        for (unsigned i = 0; i < LC_STATES; i++) {
            unsigned *expect = NULL;
            if (atomic_compare_exchange_strong(&lc_states[i], &expect, state))
                break;
        }
        pthread_setspecific(lc_key, state);
    }
    lc_tls_marker = member + 1;
    atomic_fetch_add(&lc_onstart_count, 1);
    if (member < 64)
        atomic_fetch_or(&lc_onstart_mask, (uint64_t)1 << member);
}

static void lc_onstart_reset(void)
{
    atomic_store(&lc_dtor_count, 0);
    atomic_store(&lc_onstart_count, 0);
    atomic_store(&lc_onstart_mask, 0);
}

/* Attributes of a kind, with the test waits (short spins: 2 cores). NULL
 * when an allocation failed (only under failure injection). */
static tt_pool_attr *lc_attr(unsigned width, int kind)
{
    tt_pool_attr *a = NULL;
    if (tt_pool_attr_create(&a) != TT_OK)
        return NULL;
    tt_pool_attr_set_threads(a, width);
    tt_pool_attr_set_spin_polls(a, th_test_spin_polls());
    tt_pool_attr_set_idle_spin(a, 100000u);
    switch (kind) {
    case LC_NAMED:
        if (tt_pool_attr_set_thread_name(a, "lcname") != TT_OK) {
            tt_pool_attr_destroy(a);
            return NULL;
        }
        break;
    case LC_ONSTART:
        tt_pool_attr_set_on_start(a, lc_on_start, NULL);
        break;
    case LC_STACK:
        tt_pool_attr_set_stack_size(a, (size_t)2 << 20);
        break;
    case LC_QOS:
        tt_pool_attr_set_qos(a, TT_QOS_UTILITY);
        break;
    default:
        break;
    }
    return a;
}

/* A pool of a kind; records a failure (any thread, any process) and
 * returns NULL when it cannot be built. */
static tt_pool *lc_pool_raw(unsigned width, int kind)
{
    tt_pool_attr *a = lc_attr(width, kind);
    TT_CHECK(a != NULL, "attributes for a %s pool", lc_kind_name[kind]);
    if (!a)
        return NULL;
    tt_pool *p = NULL;
    int rc = tt_pool_create(&p, a);
    tt_pool_attr_destroy(a);
    TT_CHECK(rc == TT_OK, "tt_pool_create(%s, width %u): %s", lc_kind_name[kind], width,
             tt_status_name(rc));
    if (rc == TT_OK)
        TT_CHECK(tt_pool_width(p) == th_expect_width(width), "width %u, asked %u",
                 tt_pool_width(p), width);
    return rc == TT_OK ? p : NULL;
}

static bool lc_use(tt_pool *p);

/* A default pool starts no thread when it is built. In a fork() child
 * (where every LC_ISOLATED test runs) its roots run on its private crew,
 * which starts on first need: lc_pool starts it, so that the
 * thread counts of the cache tests see it. */
static tt_pool *lc_pool(unsigned width, int kind)
{
    tt_pool *p = lc_pool_raw(width, kind);
    if (p && kind == LC_DEFAULT && tt_pool_width(p) > 1)
        TT_CHECK(lc_use(p), "first use of a default pool");
    return p;
}

static void lc_destroy(tt_pool *p)
{
    int rc = tt_pool_destroy(p);
    TT_CHECK(rc == TT_OK, "tt_pool_destroy: %s", tt_status_name(rc));
}

/* A tt_for_ranges over the whole pool that checks every index once. */
typedef struct lc_cover {
    size_t len;
    _Atomic unsigned char *hits;
} lc_cover;

static void lc_cover_body(void *arg, size_t b, size_t e)
{
    lc_cover *c = arg;
    for (size_t i = b; i < e && i < c->len; i++)
        atomic_fetch_add(&c->hits[i], 1);
}

/* Use the pool once: every index of a range exactly once, with the whole
 * width. Returns false (and records) on any problem. */
static bool lc_use(tt_pool *p)
{
    enum { N = 1000 };
    _Atomic unsigned char hits[N];
    for (size_t i = 0; i < N; i++)
        atomic_store(&hits[i], 0);
    lc_cover c = {.len = N, .hits = hits};
    tt_exec ex;
    int rc = tt_exec_init(&ex, p, tt_pool_width(p));
    TT_CHECK(rc == TT_OK, "tt_exec_init: %s", tt_status_name(rc));
    if (rc)
        return false;
    rc = tt_for_ranges(&ex, N, 1, lc_cover_body, &c);
    TT_CHECK(rc == TT_OK, "tt_for_ranges: %s", tt_status_name(rc));
    bool ok = rc == TT_OK;
    for (size_t i = 0; i < N; i++) {
        if (atomic_load(&hits[i]) != 1) {
            TT_CHECK(0, "index %zu ran %u times", i, (unsigned)atomic_load(&hits[i]));
            ok = false;
            break;
        }
    }
    return ok;
}

/* The status of a first fork over the whole pool; with `check_unconsumed`,
 * a failed entry must have left its token usable (tt_exec_finish ends it). */
static void lc_count_job(void *arg, unsigned i, tt_exec *c)
{
    (void)i;
    (void)c;
    atomic_fetch_add((_Atomic unsigned *)arg, 1);
}

/* The first use of a pool whose private crew cannot start: a fork never
 * fails for want of threads (its jobs run on the calling thread, slots
 * conserved), so the code is the one of a broadcast, which needs its
 * threads at once and is refused without consuming its token. */
static int lc_first_use_rc(tt_pool *p, bool check_unconsumed, bool rearm)
{
    tt_exec ex;
    int rc = tt_exec_init(&ex, p, tt_pool_width(p));
    if (rc)
        return rc;
    _Atomic unsigned ran = 0;
    int frc = tt_fork(&ex, tt_pool_width(p), lc_count_job, (void *)&ran);
    TT_CHECK(frc == TT_OK && ran == tt_pool_width(p), "first fork: %s, %u of %u jobs ran",
             tt_status_name(frc), (unsigned)ran, tt_pool_width(p));
    rc = tt_exec_init(&ex, p, tt_pool_width(p));
    if (rc)
        return rc;
    if (rearm)
        tt__fault_inject(0, 1); /* the fork's failed start disarmed it */
    rc = tt_broadcast(&ex, lc_noop_bcast, NULL);
    if (rc != TT_OK && check_unconsumed)
        TT_CHECK(tt_exec_budget(&ex) == tt_pool_width(p) && tt_carries_team(&ex) == false &&
                     tt_can_broadcast(&ex),
                 "a failed first use consumed its token");
    if (rc != TT_OK)
        tt_exec_finish(&ex);
    return rc;
}

/* What each member reports in a broadcast over the whole pool. */
typedef struct lc_members {
    tt_pool *pool;
    unsigned n;
    pid_t tid[LC_MAXW];
    cpu_set_t cpus[LC_MAXW];
    int is_member[LC_MAXW];
    unsigned member[LC_MAXW];
    int key_state[LC_MAXW]; /* *pthread_getspecific(lc_key), or -1 */
    unsigned marker[LC_MAXW];
} lc_members;

static void lc_members_fn(void *arg, unsigned i)
{
    lc_members *m = arg;
    if (i >= LC_MAXW)
        return;
    m->tid[i] = th_gettid();
    CPU_ZERO(&m->cpus[i]);
    sched_getaffinity(0, sizeof m->cpus[i], &m->cpus[i]);
    unsigned k = 0;
    m->is_member[i] = tt_pool_is_member(m->pool, &k);
    m->member[i] = k;
    unsigned *st = NULL;
    if (atomic_load(&lc_onstart_count) > 0)
        st = pthread_getspecific(lc_key);
    m->key_state[i] = st ? (int)*st : -1;
    m->marker[i] = lc_tls_marker;
}

/* Broadcast over every member of p and collect what they report. */
static bool lc_members_of(tt_pool *p, lc_members *m)
{
    memset(m, 0, sizeof *m);
    m->pool = p;
    m->n = tt_pool_width(p);
    tt_exec ex;
    int rc = tt_exec_init(&ex, p, m->n);
    TT_CHECK(rc == TT_OK, "tt_exec_init: %s", tt_status_name(rc));
    if (rc)
        return false;
    rc = tt_broadcast(&ex, lc_members_fn, m);
    TT_CHECK(rc == TT_OK, "tt_broadcast: %s", tt_status_name(rc));
    return rc == TT_OK;
}

static bool lc_tid_in(pid_t t, const lc_members *m)
{
    for (unsigned i = 0; i < m->n; i++)
        if (m->tid[i] == t)
            return true;
    return false;
}

/* Same member threads in the same order. */
static bool lc_same_tids(const lc_members *a, const lc_members *b)
{
    if (a->n != b->n)
        return false;
    for (unsigned i = 0; i < a->n; i++)
        if (a->tid[i] != b->tid[i])
            return false;
    return true;
}

static bool lc_disjoint_tids(const lc_members *a, const lc_members *b)
{
    for (unsigned i = 0; i < a->n; i++)
        if (lc_tid_in(a->tid[i], b))
            return false;
    return true;
}

/* ---- children ------------------------------------------------------------ */

static void lc_describe_status(int st, char *buf, size_t len)
{
    if (WIFEXITED(st))
        snprintf(buf, len, "exit status %d", WEXITSTATUS(st));
    else if (WIFSIGNALED(st))
        snprintf(buf, len, "killed by signal %d (%s)%s", WTERMSIG(st), strsignal(WTERMSIG(st)),
                 WTERMSIG(st) == SIGALRM ? ": a hang (watchdog alarm)" : "");
    else
        snprintf(buf, len, "status 0x%x", st);
}

/* Wait for child pid up to timeout_s (scaled); kill it after. */
static int lc_wait_child(pid_t pid, double timeout_s)
{
    uint64_t end = th_now_ns() + (uint64_t)(th_timeout(timeout_s) * 1e9);
    int st = 0;
    for (;;) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            return st;
        if (r < 0 && errno != EINTR)
            return -1;
        if (th_now_ns() > end) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            fprintf(stderr, "test_lifecycle: child %d killed after %.0f s\n", (int)pid,
                    th_timeout(timeout_s));
            return st;
        }
        th_sleep_us(2000);
    }
}

/* Run fn in a fork() child with an alarm of timeout_s; the child's status
 * is fn's return value, or 1 when a TT_CHECK failed in it.
 *
 * The child reports its status through a pipe too (on_exit() for a child
 * that calls exit() itself), and the parent takes that report over the
 * exit code: under valgrind --error-exitcode a child's exit code reflects
 * what valgrind found in it, and a fork child always "loses" what only
 * the parent's other threads referred to (their thread-local data, an
 * allocation in flight on another thread). Leaks are judged in the test
 * process itself; a child's job is its status. */
typedef int (*lc_child_fn)(void *arg);

static int lc_status_fd = -1;

static void lc_report_status(int status, void *arg)
{
    (void)arg;
    if (lc_status_fd >= 0) {
        unsigned char b = (unsigned char)status;
        if (write(lc_status_fd, &b, 1) == 1)
            lc_status_fd = -1; /* once */
    }
}

static int lc_fork_run(lc_child_fn fn, void *arg, double timeout_s)
{
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        close(fds[0]);
        lc_status_fd = fds[1];
        on_exit(lc_report_status, NULL);
        /* Check's runner handles SIGALRM by killing the whole test process
         * group; a child must die of its own alarm alone. */
        signal(SIGALRM, SIG_DFL);
        alarm((unsigned)th_timeout(timeout_s) + 1);
        th_reset_failures();
        tt__test_force_private_crew(true);
        lc_settle_runtime();
        int rc = fn(arg);
        if (rc == 0 && th_failures())
            rc = 1;
        fflush(NULL);
        lc_report_status(rc, NULL);
        _exit(rc);
    }
    close(fds[1]);
    /* Read after the child is gone, without blocking: a grandchild may
     * still hold the write end. */
    fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK);
    int st = lc_wait_child(pid, timeout_s + 5);
    unsigned char b;
    ssize_t got = read(fds[0], &b, 1);
    close(fds[0]);
    if (got == 1 && st >= 0 && WIFEXITED(st))
        st = (int)b << 8; /* the child's own report, as an exit status */
    return st;
}

#define lc_assert_status(st, want, what)                                       \
    do {                                                                       \
        int lc__st = (st);                                                     \
        char lc__d[160];                                                       \
        lc_describe_status(lc__st, lc__d, sizeof lc__d);                       \
        ck_assert_msg(lc__st >= 0 && WIFEXITED(lc__st) &&                      \
                          WEXITSTATUS(lc__st) == (want),                       \
                      "%s: child ended with %s (expected exit status %d)",     \
                      (what), lc__d, (want));                                  \
    } while (0)

#define lc_assert_child_ok(st, what) lc_assert_status(st, 0, what)

/* Exec this program again as `--child MODE ARG` (a fresh process: no
 * cache, no widest pool), with extra environment "NAME=VALUE" entries. */
static int lc_exec_self(const char *mode, const char *arg, const char *const *env,
                        double timeout_s)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        signal(SIGALRM, SIG_DFL);
        alarm((unsigned)th_timeout(timeout_s) + 1);
        for (const char *const *e = env; e && *e; e++)
            putenv((char *)*e);
        char *argv[] = {lc_self, (char *)"--child", (char *)mode, (char *)(arg ? arg : ""), NULL};
        execv(lc_self, argv);
        fprintf(stderr, "test_lifecycle: execv(%s): %s\n", lc_self, strerror(errno));
        _exit(127);
    }
    return lc_wait_child(pid, timeout_s + 5);
}

/* A child that only isolates process-wide state (the cache, the widest
 * pool): a fork() child, or under TSan a fresh exec that runs the same
 * function (found by name in lc_children[], at the end of this file). */
static int lc_isolated_run(const char *name, lc_child_fn fn, intptr_t arg, double timeout_s)
{
#if LC_TSAN
    (void)fn;
    char a[128];
    snprintf(a, sizeof a, "%s:%ld", name, (long)arg);
    return lc_exec_self("run", a, NULL, timeout_s);
#else
    (void)name;
    return lc_fork_run(fn, (void *)arg, timeout_s);
#endif
}
#define LC_ISOLATED(fn, arg, t) lc_isolated_run(#fn, fn, (intptr_t)(arg), (t))

/* The tests of fork() itself, under TSan. */
#define LC_SKIP_UNDER_TSAN(what)                                               \
    do {                                                                       \
        if (LC_TSAN) {                                                         \
            fprintf(stderr, "%s: skipped under ThreadSanitizer (it cannot "     \
                            "follow threads started after a multi-threaded "   \
                            "fork)\n", (what));                                \
            return;                                                            \
        }                                                                      \
    } while (0)

/* ------------------------------------------------------------------------ */
/* The cache of default crews                                                */
/* ------------------------------------------------------------------------ */

/* Reuse: a default pool's crew goes to the cache on destroy and the next
 * default pool of that width takes the very same threads; a dedicated pool
 * neither takes nor gives a cached crew; two live pools never share one. */
static int lc_child_cache_reuse(void *arg)
{
    (void)arg;
    const unsigned w = 2;
    const int add = TT_PARALLEL_ENABLED ? (int)w : 0;
    int base = th_count_threads();
    lc_members m1, m2, md, m3, m4;

    tt_pool *p = lc_pool(w, LC_DEFAULT);
    if (!p)
        return 1;
    TT_CHECK(th_count_threads() == base + add, "alive: %d threads, expected %d",
             th_count_threads(), base + add);
    lc_members_of(p, &m1);
    lc_destroy(p);
    /* Cached: the threads stay. */
    TT_CHECK(lc_threads_settle(base + add) == base + add, "cached: %d threads, expected %d",
             th_count_threads(), base + add);

    p = lc_pool(w, LC_DEFAULT);
    if (!p)
        return 1;
    TT_CHECK(th_count_threads() == base + add, "reused: %d threads, expected %d (no new thread)",
             th_count_threads(), base + add);
    lc_members_of(p, &m2);
    TT_CHECK(lc_same_tids(&m1, &m2), "the second default pool did not take the cached crew");
    TT_CHECK(lc_use(p), "reused pool");
    lc_destroy(p);

    /* A dedicated pool of the same width starts its own threads and does
     * not take the cached crew; its destroy joins them. */
    tt_pool *d = lc_pool(w, LC_NAMED);
    if (!d)
        return 1;
    TT_CHECK(th_count_threads() == base + 2 * add, "dedicated alive: %d threads, expected %d",
             th_count_threads(), base + 2 * add);
    lc_members_of(d, &md);
    if (TT_PARALLEL_ENABLED)
        TT_CHECK(lc_disjoint_tids(&m1, &md), "a dedicated pool took a cached crew");
    lc_destroy(d);
    TT_CHECK(lc_threads_settle(base + add) == base + add,
             "dedicated destroyed: %d threads, expected %d", th_count_threads(), base + add);

    /* The next default pool takes the cached (default) crew, not the
     * dedicated one's threads; a second live pool gets other threads. */
    p = lc_pool(w, LC_DEFAULT);
    tt_pool *q = lc_pool(w, LC_DEFAULT);
    if (!p || !q)
        return 1;
    lc_members_of(p, &m3);
    lc_members_of(q, &m4);
    TT_CHECK(lc_same_tids(&m1, &m3), "the cached crew was not reused after a dedicated pool");
    if (TT_PARALLEL_ENABLED) {
        TT_CHECK(lc_disjoint_tids(&m3, &m4), "two live pools share member threads");
        TT_CHECK(lc_disjoint_tids(&md, &m4), "a default pool got a dedicated pool's threads");
    }
    TT_CHECK(th_count_threads() == base + 2 * add, "two alive: %d threads, expected %d",
             th_count_threads(), base + 2 * add);
    TT_CHECK(lc_use(p) && lc_use(q), "two live pools");
    lc_destroy(p);
    lc_destroy(q);
    int n = lc_threads_at_most(base + 2 * add);
    /* One or both crews stay cached, as the cap allows. */
    TT_CHECK(n == base + add || n == base + 2 * add, "after both: %d threads (base %d)", n, base);
    if (!TT_PARALLEL_ENABLED)
        TT_CHECK(n == base, "a thread was started without parallel support");
    return 0;
}

START_TEST(lc_cache_reuse)
{
    lc_assert_child_ok(LC_ISOLATED(lc_child_cache_reuse, NULL, 20), "cache reuse");
}
END_TEST

/* The thread cap, against a model of the cache: oldest first, a take finds
 * the oldest crew of the width, a put appends and joins the oldest entries
 * while the cache holds more than max(CPUs, widest pool built) threads.
 * Runs in a fresh exec of this program (the widest pool starts at 0). */
typedef struct lc_model {
    unsigned cw[256]; /* cached crews' widths, oldest first */
    unsigned n;
    unsigned total;   /* threads cached */
    unsigned widest;
    unsigned cpus;
} lc_model;

static bool lc_model_take(lc_model *m, unsigned w)
{
    for (unsigned i = 0; i < m->n; i++) {
        if (m->cw[i] == w) {
            memmove(&m->cw[i], &m->cw[i + 1], (m->n - i - 1) * sizeof m->cw[0]);
            m->n--;
            m->total -= w;
            return true;
        }
    }
    return false;
}

static void lc_model_put(lc_model *m, unsigned w)
{
    if (m->n < 256) {
        m->cw[m->n++] = w;
        m->total += w;
    }
    unsigned cap = m->cpus > m->widest ? m->cpus : m->widest;
    while (m->total > cap && m->n) {
        m->total -= m->cw[0];
        memmove(&m->cw[0], &m->cw[1], (m->n - 1) * sizeof m->cw[0]);
        m->n--;
    }
}

static int lc_mode_cache_model(const char *arg)
{
    uint64_t seed = arg && *arg ? strtoull(arg, NULL, 0) : 1;
    lc_model m = {.cpus = th_affinity_cpus()};
    int base = th_count_threads();
    enum { LIVE = 3 };
    tt_pool *live[LIVE] = {0};
    unsigned lw[LIVE] = {0};
    int lk[LIVE] = {0};
    unsigned nlive = 0, live_threads = 0;
    unsigned steps = th_iters(120);
    if (steps < 30)
        steps = 30;
    unsigned maxw = 8;
    for (unsigned s = 0; s < steps; s++) {
        bool create = nlive == 0 || (nlive < LIVE && th_rng_below(&seed, 2) == 0);
        if (create) {
            unsigned w = 1 + th_rng_below(&seed, maxw);
            /* Dedicated pools only at widths that cannot move the cap
             * (whether they count as "built" is not part of the model). */
            int kind = LC_DEFAULT;
            if (w <= m.cpus && w > 1 && th_rng_below(&seed, 4) == 0)
                kind = LC_ONSTART;
            tt_pool *p = lc_pool(w, kind);
            if (!p)
                return 1;
            unsigned ew = TT_PARALLEL_ENABLED ? w : 1;
            if (ew > 1) {
                if (ew > m.widest && kind == LC_DEFAULT)
                    m.widest = ew;
                if (kind == LC_DEFAULT)
                    lc_model_take(&m, ew);
                live_threads += ew;
            }
            live[nlive] = p;
            lw[nlive] = ew;
            lk[nlive] = kind;
            nlive++;
            TT_CHECK(lc_use(p), "step %u: use", s);
        } else {
            unsigned i = th_rng_below(&seed, nlive);
            int rc = tt_pool_destroy(live[i]);
            TT_CHECK(rc == TT_OK, "step %u: destroy: %s", s, tt_status_name(rc));
            if (lw[i] > 1) {
                live_threads -= lw[i];
                if (lk[i] == LC_DEFAULT)
                    lc_model_put(&m, lw[i]);
            }
            live[i] = live[nlive - 1];
            lw[i] = lw[nlive - 1];
            lk[i] = lk[nlive - 1];
            nlive--;
        }
        int want = base + (int)live_threads + (int)m.total;
        int got = lc_threads_settle(want);
        TT_CHECK(got == want,
                 "step %u (%s): %d threads, model %d (live %u, cached %u in %u crews, cap %u)", s,
                 create ? "create" : "destroy", got, want, live_threads, m.total, m.n,
                 m.cpus > m.widest ? m.cpus : m.widest);
        if (got != want)
            return 1;
    }
    while (nlive)
        lc_destroy(live[--nlive]);
    unsigned cap = m.cpus > m.widest ? m.cpus : m.widest;
    int end = th_count_threads();
    TT_CHECK(end <= base + (int)cap, "at the end %d threads, cap %u + base %d", end, cap, base);
    if (!TT_PARALLEL_ENABLED)
        TT_CHECK(end == base, "threads were started without parallel support");
    return th_failures() ? 1 : 0;
}

START_TEST(lc_cache_cap_model)
{
    static const char *const seeds[] = {"1", "7", "12345"};
    for (unsigned i = 0; i < TT_ARRAY_LEN(seeds); i++) {
        char what[64];
        snprintf(what, sizeof what, "cache model, seed %s", seeds[i]);
        lc_assert_child_ok(lc_exec_self("cache-model", seeds[i], NULL, 30), what);
    }
}
END_TEST

/* Each member takes the building thread's CPU set, also a cached crew
 * taken by a pool built on a thread with another set. */
typedef struct lc_aff {
    cpu_set_t set;
    tt_pool *pool;
    lc_members m;
    int kind;
    bool destroy;
} lc_aff;

static void *lc_aff_thread(void *arg)
{
    lc_aff *a = arg;
    if (sched_setaffinity(0, sizeof a->set, &a->set) != 0) {
        TT_CHECK(0, "sched_setaffinity: %s", strerror(errno));
        return NULL;
    }
    if (!a->pool)
        a->pool = lc_pool(2, a->kind);
    if (a->pool) {
        lc_members_of(a->pool, &a->m);
        if (a->destroy) {
            lc_destroy(a->pool);
            a->pool = NULL;
        }
    }
    return NULL;
}

static int lc_child_cache_affinity(void *arg)
{
    (void)arg;
    cpu_set_t all;
    CPU_ZERO(&all);
    sched_getaffinity(0, sizeof all, &all);
    int cpus[2] = {-1, -1}, nc = 0;
    for (int c = 0; c < CPU_SETSIZE && nc < 2; c++)
        if (CPU_ISSET(c, &all))
            cpus[nc++] = c;
    cpu_set_t one, two;
    CPU_ZERO(&one);
    CPU_SET(cpus[0], &one);
    if (nc == 2) {
        CPU_ZERO(&two);
        CPU_SET(cpus[1], &two);
    } else {
        two = all; /* one CPU: the full set differs from nothing; still run */
    }
    for (int kind = LC_DEFAULT; kind <= LC_NAMED; kind++) {
        lc_aff a = {.set = one, .kind = kind, .destroy = true};
        pthread_t t;
        pthread_create(&t, NULL, lc_aff_thread, &a);
        pthread_join(t, NULL);
        for (unsigned i = 0; i < a.m.n; i++)
            TT_CHECK(CPU_EQUAL(&a.m.cpus[i], &one), "%s: member %u has not the builder's set",
                     lc_kind_name[kind], i);
        /* A default crew now sits in the cache; built on a thread with the
         * other set, the pool's members take that set. */
        lc_aff b = {.set = two, .kind = kind, .destroy = true};
        pthread_create(&t, NULL, lc_aff_thread, &b);
        pthread_join(t, NULL);
        if (kind == LC_DEFAULT && TT_PARALLEL_ENABLED)
            TT_CHECK(lc_same_tids(&a.m, &b.m), "the cached crew was not reused");
        for (unsigned i = 0; i < b.m.n; i++)
            TT_CHECK(CPU_EQUAL(&b.m.cpus[i], &two),
                     "%s: member %u kept the set of the earlier builder", lc_kind_name[kind], i);
    }
    return 0;
}

START_TEST(lc_cache_affinity)
{
    lc_assert_child_ok(LC_ISOLATED(lc_child_cache_affinity, NULL, 20), "cache affinity");
}
END_TEST

/* A cached crew belongs to one pool at a time: threads that build and drop
 * default pools concurrently never see one member thread in two live
 * pools. */
static pthread_mutex_t lc_own_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    pid_t tid;
    const void *pool;
} lc_own[256];

static void lc_own_add(const lc_members *m, const void *pool)
{
    pthread_mutex_lock(&lc_own_lock);
    for (unsigned i = 0; i < m->n; i++) {
        bool placed = false;
        for (unsigned j = 0; j < 256; j++) {
            if (lc_own[j].tid == m->tid[i] && lc_own[j].pool && lc_own[j].pool != pool)
                TT_CHECK(0, "thread %d serves two live pools", (int)m->tid[i]);
        }
        for (unsigned j = 0; j < 256 && !placed; j++) {
            if (!lc_own[j].pool) {
                lc_own[j].tid = m->tid[i];
                lc_own[j].pool = pool;
                placed = true;
            }
        }
    }
    pthread_mutex_unlock(&lc_own_lock);
}

static void lc_own_drop(const void *pool)
{
    pthread_mutex_lock(&lc_own_lock);
    for (unsigned j = 0; j < 256; j++)
        if (lc_own[j].pool == pool)
            lc_own[j].pool = NULL;
    pthread_mutex_unlock(&lc_own_lock);
}

static void *lc_churn_thread(void *arg)
{
    uint64_t seed = (uint64_t)(uintptr_t)arg;
    unsigned iters = th_iters(150);
    for (unsigned it = 0; it < iters && !th_failures(); it++) {
        unsigned w = 2 + th_rng_below(&seed, 2);
        tt_pool *p = lc_pool(w, LC_DEFAULT);
        if (!p)
            break;
        lc_members m;
        lc_members_of(p, &m);
        for (unsigned i = 0; TT_PARALLEL_ENABLED && i < m.n; i++)
            TT_CHECK(m.is_member[i] && m.member[i] == i, "broadcast %u not on member %u", i, i);
        lc_own_add(&m, p);
        lc_use(p);
        lc_own_drop(p);
        lc_destroy(p);
    }
    return NULL;
}

static int lc_child_cache_exclusive(void *arg)
{
    (void)arg;
    enum { K = 3 };
    pthread_t t[K];
    for (unsigned i = 0; i < K; i++)
        pthread_create(&t[i], NULL, lc_churn_thread, (void *)(uintptr_t)(i + 1));
    for (unsigned i = 0; i < K; i++)
        pthread_join(t[i], NULL);
    return 0;
}

START_TEST(lc_cache_exclusive)
{
    lc_assert_child_ok(LC_ISOLATED(lc_child_cache_exclusive, NULL, 40), "cache exclusive");
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Dedicated members                                                         */
/* ------------------------------------------------------------------------ */

/* on_start state: when tt_pool_destroy returns, every member has exited
 * and the thread-local destructors of what on_start made have run. */
START_TEST(lc_dedicated_tls_destructors)
{
    static const unsigned widths[] = {2, 4, 8};
    static const int extra[] = {LC_DEFAULT, LC_NAMED, LC_STACK, LC_QOS};
    for (unsigned wi = 0; wi < TT_ARRAY_LEN(widths); wi++) {
        for (unsigned xi = 0; xi < TT_ARRAY_LEN(extra); xi++) {
            unsigned w = widths[wi];
            unsigned ew = th_expect_width(w);
            int base = th_count_threads();
            lc_onstart_reset();
            tt_pool_attr *a = lc_attr(w, extra[xi]);
            ck_assert_ptr_nonnull(a);
            ck_assert_int_eq(tt_pool_attr_set_on_start(a, lc_on_start, NULL), TT_OK);
            tt_pool *p = NULL;
            ck_assert_int_eq(tt_pool_create(&p, a), TT_OK);
            tt_pool_attr_destroy(a);
            /* A width-1 pool has no member thread: nothing runs on_start. */
            int members = ew > 1 ? (int)ew : 0;
            ck_assert_int_eq(atomic_load(&lc_onstart_count), members);
            if (members)
                ck_assert_uint_eq(atomic_load(&lc_onstart_mask), ((uint64_t)1 << ew) - 1);
            ck_assert_int_eq(th_count_threads(), base + members);
            if (members) {
                lc_members m;
                lc_members_of(p, &m);
                for (unsigned i = 0; i < m.n; i++) {
                    ck_assert_msg(m.key_state[i] == (int)i && m.marker[i] == i + 1,
                                  "member %u does not see its on_start state (%d, %u)", i,
                                  m.key_state[i], m.marker[i]);
                }
            }
            ck_assert_msg(lc_use(p), "use");
            ck_assert_int_eq(atomic_load(&lc_dtor_count), 0);
            ck_assert_int_eq(tt_pool_destroy(p), TT_OK);
            /* Exactly when destroy returned, not some time later. */
            ck_assert_msg(atomic_load(&lc_dtor_count) == members,
                          "width %u + %s: %d thread-local destructors ran when destroy returned, "
                          "expected %d",
                          w, lc_kind_name[extra[xi]], atomic_load(&lc_dtor_count), members);
            ck_assert_msg(lc_threads_settle(base) == base, "width %u: %d threads left, base %d", w,
                          th_count_threads(), base);
            th_assert_no_failures();
        }
    }
}
END_TEST

/* Each dedicated setting on its own makes members that destroy joins:
 * their names are visible while the pool lives and gone after. */
START_TEST(lc_dedicated_each_setting_joins)
{
    for (int kind = LC_NAMED; kind < LC_KINDS; kind++) {
        for (unsigned w = 2; w <= 3; w++) {
            unsigned ew = th_expect_width(w);
            int members = ew > 1 ? (int)ew : 0;
            int base = th_count_threads();
            lc_onstart_reset();
            tt_pool *p = lc_pool(w, kind);
            th_assert_no_failures();
            ck_assert_int_eq(th_count_threads(), base + members);
            lc_members m;
            lc_members_of(p, &m);
            if (kind == LC_NAMED && members) {
                for (unsigned i = 0; i < ew; i++) {
                    char want[32], got[64] = "";
                    snprintf(want, sizeof want, "lcname%u", i);
                    ck_assert_msg(th_thread_comm(m.tid[i], got, sizeof got) &&
                                      strcmp(got, want) == 0,
                                  "member %u is named '%s', expected '%s'", i, got, want);
                }
            }
            ck_assert_int_eq(tt_pool_destroy(p), TT_OK);
            ck_assert_msg(lc_threads_settle(base) == base, "%s width %u: %d threads, base %d",
                          lc_kind_name[kind], w, th_count_threads(), base);
            for (unsigned i = 0; members && i < m.n; i++)
                ck_assert_msg(!th_tid_alive(m.tid[i]), "%s: member %u (tid %d) still alive",
                              lc_kind_name[kind], i, (int)m.tid[i]);
            if (kind == LC_NAMED)
                ck_assert_int_eq(th_count_threads_prefixed("lcname"), 0);
            th_assert_no_failures();
        }
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Destroy from a member, destroy while busy                                 */
/* ------------------------------------------------------------------------ */

typedef struct lc_dm {
    tt_pool *pool;
    tt_exec *pre; /* a root minted on the caller before the entry */
    _Atomic int started0; /* job 0 holds its child token */
    _Atomic int destroyed;
    _Atomic int member_ok;
    int rc_destroy, rc_again, rc_init;
    int rc_child1, rc_child0, rc_nested;
    int threads_inside; /* the members still exist after the signal */
} lc_dm;

static void lc_dm_job(void *arg, unsigned i, tt_exec *child)
{
    lc_dm *d = arg;
    unsigned k;
    if (i == 1) {
        atomic_store(&d->member_ok, tt_pool_is_member(d->pool, &k) ? 1 : -1);
        /* Job 0's child token exists before the destroy. */
        uint64_t end0 = th_now_ns() + (uint64_t)(th_timeout(5) * 1e9);
        while (!atomic_load(&d->started0) && th_now_ns() < end0)
            th_sleep_us(200);
        TT_CHECK(atomic_load(&d->started0), "job 0 did not start within 5 s");
        /* A nested root minted before the destroy... */
        tt_exec nested;
        int rc = tt_exec_init(&nested, d->pool, 2);
        TT_CHECK(rc == TT_OK, "nested init: %s", tt_status_name(rc));
        d->rc_destroy = tt_pool_destroy(d->pool);
        d->rc_again = tt_pool_destroy(d->pool);
        tt_exec e;
        d->rc_init = tt_exec_init(&e, d->pool, 1);
        d->rc_child1 = tt_for_ranges(child, 10, 1, lc_noop_range, NULL);
        /* ...is refused after it. */
        d->rc_nested = tt_fork(&nested, 2, lc_noop_job, NULL);
        d->threads_inside = th_count_threads();
        atomic_store(&d->destroyed, 1);
    } else {
        /* The sibling's token was minted before the destroy and is used
         * after it. */
        atomic_store(&d->started0, 1);
        uint64_t end = th_now_ns() + (uint64_t)(th_timeout(5) * 1e9);
        while (!atomic_load(&d->destroyed) && th_now_ns() < end)
            th_sleep_us(200);
        TT_CHECK(atomic_load(&d->destroyed), "job 1 did not destroy within 5 s");
        d->rc_child0 = tt_fork(child, 1, lc_noop_job, NULL);
    }
}

static TT_TEST_UNUSED int lc_child_destroy_from_member(void *arg)
{
    int kind = (int)(intptr_t)arg;
    int base = th_count_threads();
    tt_pool *p = lc_pool(2, kind);
    if (!p)
        return 1;
    lc_dm d = {.pool = p};
    tt_exec pre, ex;
    TT_CHECK(tt_exec_init(&pre, p, 2) == TT_OK, "pre");
    TT_CHECK(tt_exec_init(&ex, p, 2) == TT_OK, "ex");
    int rc = tt_fork(&ex, 2, lc_dm_job, &d);
    TT_CHECK(rc == TT_OK, "tt_fork: %s", tt_status_name(rc));
    TT_CHECK(atomic_load(&d.member_ok) == 1, "job 1 did not run on a member");
    TT_CHECK(d.rc_destroy == TT_OK, "destroy from a member: %s", tt_status_name(d.rc_destroy));
    TT_CHECK(d.rc_again == TT_EDESTROYED, "second destroy from the member: %s",
             tt_status_name(d.rc_again));
    TT_CHECK(d.rc_init == TT_EDESTROYED, "tt_exec_init after the signal: %s",
             tt_status_name(d.rc_init));
    TT_CHECK(d.rc_child1 == TT_EDESTROYED, "entry on the job's own child: %s",
             tt_status_name(d.rc_child1));
    TT_CHECK(d.rc_child0 == TT_EDESTROYED, "entry on a sibling job's child: %s",
             tt_status_name(d.rc_child0));
    TT_CHECK(d.rc_nested == TT_EDESTROYED, "entry on a nested root minted before: %s",
             tt_status_name(d.rc_nested));
    TT_CHECK(d.threads_inside == base + 2, "the signal alone ended threads (%d, base %d)",
             d.threads_inside, base);
    /* Tokens minted on the caller before the destroy: every entry refuses. */
    TT_CHECK(tt_for_ranges(&pre, 10, 1, lc_noop_range, NULL) == TT_EDESTROYED, "pre for");
    TT_CHECK(tt_fork(&pre, 2, lc_noop_job, NULL) == TT_EDESTROYED, "pre fork");
    TT_CHECK(tt_broadcast(&pre, lc_noop_bcast, NULL) == TT_EDESTROYED, "pre bcast");
    TT_CHECK(tt_external(&pre, lc_noop_ext, NULL) == TT_EDESTROYED, "pre external");
    TT_CHECK(tt_team_scope(&pre, lc_noop_scope, NULL) == TT_EDESTROYED, "pre scope");
    TT_CHECK(!tt_can_broadcast(&pre), "can_broadcast on a token of a destroyed pool");
    /* The last entry out (the caller's) released everything: a dedicated
     * crew is joined, a default one is cached. */
    int want = base + (kind == LC_DEFAULT ? 2 : 0);
    TT_CHECK(lc_threads_settle(want) == want, "%s: %d threads after the last entry, expected %d",
             lc_kind_name[kind], th_count_threads(), want);
    /* The library goes on. */
    tt_pool *q = lc_pool(2, kind);
    if (q) {
        TT_CHECK(lc_use(q), "a new pool");
        lc_destroy(q);
    }
    return 0;
}

START_TEST(lc_destroy_from_member)
{
#if TT_PARALLEL_ENABLED
    lc_assert_child_ok(LC_ISOLATED(lc_child_destroy_from_member, LC_DEFAULT, 20),
                       "default pool destroyed from a member");
    lc_assert_child_ok(LC_ISOLATED(lc_child_destroy_from_member, LC_ONSTART, 20),
                       "dedicated pool destroyed from a member");
#else
    /* No member exists: nothing to destroy from. */
#endif
}
END_TEST

/* Children the library mints after the signal, for an entry that was
 * already running: 3 jobs on budget 2; jobs 0 and 1 are the two tasks'
 * first, job 0 destroys the pool, job 1 waits until it did, and job 2,
 * handed to whichever task frees up first, gets its child token after the
 * signal. "New entries on tokens of that pool return TT_EDESTROYED".
 * (Regression: such a child used to carry the pool's new generation, and
 * its entry ran; children now keep their entry's.) */
typedef struct lc_late {
    tt_pool *pool;
    _Atomic int rc_destroy;
    int rc_late[3];
    _Atomic int ran[3];
    th_flag destroyed;
} lc_late;

static void lc_late_job(void *arg, unsigned i, tt_exec *child)
{
    lc_late *d = arg;
    if (i >= 3)
        return;
    atomic_fetch_add(&d->ran[i], 1);
    if (i == 0) {
        d->rc_destroy = tt_pool_destroy(d->pool);
        th_flag_set(&d->destroyed, 1);
    } else if (i == 1) {
        TT_CHECK(th_flag_wait_ge(&d->destroyed, 1, 10), "job 0 never destroyed the pool");
    }
    d->rc_late[i] = tt_for_ranges(child, 10, 1, lc_noop_range, NULL);
}

static TT_TEST_UNUSED int lc_child_destroy_late_children(void *arg)
{
    (void)arg;
    tt_pool *p = lc_pool(2, LC_NAMED);
    if (!p)
        return 1;
    lc_late d = {.pool = p, .rc_late = {-1, -1, -1}};
    th_flag_set(&d.destroyed, 0);
    tt_exec ex;
    TT_CHECK(tt_exec_init(&ex, p, 2) == TT_OK, "init");
    int rc = tt_fork(&ex, 3, lc_late_job, &d);
    TT_CHECK(rc == TT_OK, "fork: %s", tt_status_name(rc));
    TT_CHECK(d.rc_destroy == TT_OK, "destroy from a member: %s", tt_status_name(d.rc_destroy));
    TT_CHECK(d.rc_late[0] == TT_EDESTROYED, "job 0's own child: %s", tt_status_name(d.rc_late[0]));
    TT_CHECK(d.rc_late[1] == TT_EDESTROYED, "job 1's child, after the destroy: %s",
             tt_status_name(d.rc_late[1]));
    TT_CHECK(d.rc_late[2] == TT_EDESTROYED,
             "job 2's child, minted by the library after the destroy signal: entry returned %s, "
             "expected TT_EDESTROYED",
             tt_status_name(d.rc_late[2]));
    return 0;
}

START_TEST(lc_destroy_from_member_late_children)
{
#if TT_PARALLEL_ENABLED
    lc_assert_child_ok(LC_ISOLATED(lc_child_destroy_late_children, NULL, 20),
                       "children minted after a destroy from a member");
#endif
}
END_TEST

/* Destroy from a member while another root holds other members: the last
 * of both entries out tears the pool down (dedicated: joins). */
typedef struct lc_dm2 {
    tt_pool *pool;
    th_flag destroyed;
    th_flag a_inside;
    int rc_destroy;
    int rc_a_after;
} lc_dm2;

static void lc_dm2_a_job(void *arg, unsigned i, tt_exec *child)
{
    lc_dm2 *d = arg;
    if (i == 0) {
        th_flag_set(&d->a_inside, 1);
        TT_CHECK(th_flag_wait_ge(&d->destroyed, 1, 5), "B did not destroy");
        d->rc_a_after = tt_for_ranges(child, 10, 1, lc_noop_range, NULL);
    }
}

static void *lc_dm2_a(void *arg)
{
    lc_dm2 *d = arg;
    tt_exec ex;
    TT_CHECK(tt_exec_init(&ex, d->pool, 2) == TT_OK, "A init");
    int rc = tt_fork(&ex, 2, lc_dm2_a_job, d);
    TT_CHECK(rc == TT_OK, "A fork: %s", tt_status_name(rc));
    return NULL;
}

static void lc_dm2_b_job(void *arg, unsigned i, tt_exec *child)
{
    (void)child;
    lc_dm2 *d = arg;
    if (i == 1) {
        d->rc_destroy = tt_pool_destroy(d->pool);
        th_flag_set(&d->destroyed, 1);
    }
}

static TT_TEST_UNUSED int lc_child_destroy_two_roots(void *arg)
{
    (void)arg;
    int base = th_count_threads();
    tt_pool *p = lc_pool(4, LC_NAMED);
    if (!p)
        return 1;
    lc_dm2 d = {.pool = p};
    pthread_t a;
    pthread_create(&a, NULL, lc_dm2_a, &d);
    TT_CHECK(th_flag_wait_ge(&d.a_inside, 1, 5), "A did not start");
    tt_exec ex;
    TT_CHECK(tt_exec_init(&ex, p, 2) == TT_OK, "B init");
    int rc = tt_fork(&ex, 2, lc_dm2_b_job, &d);
    TT_CHECK(rc == TT_OK, "B fork: %s", tt_status_name(rc));
    th_join_timeout(a, 10);
    TT_CHECK(d.rc_destroy == TT_OK, "destroy from a member: %s", tt_status_name(d.rc_destroy));
    TT_CHECK(d.rc_a_after == TT_EDESTROYED, "A's child after the signal: %s",
             tt_status_name(d.rc_a_after));
    /* The last entry out tore the pool down and joined its members. */
    TT_CHECK(lc_threads_settle(base) == base, "after both entries: %d threads, base %d",
             th_count_threads(), base);
    return 0;
}

START_TEST(lc_destroy_from_member_two_roots)
{
#if TT_PARALLEL_ENABLED
    lc_assert_child_ok(LC_ISOLATED(lc_child_destroy_two_roots, NULL, 20), "two roots");
#endif
}
END_TEST

/* Destroy from a member inside a persistent team: once the team is
 * dissolved (tt_team_into_pool), the pool's resources are released, by
 * the dissolution or by the destroy that follows. (Regression: into_pool
 * used to clear team_owned without looking at `doomed`, and the destroy
 * that followed returned TT_EDESTROYED: the crew ran for the life of the
 * process.) */
static tt_pool *lc_team_pool;
static _Atomic int lc_team_rc = -1;

static void lc_team_destroy_job(void *arg, unsigned i, tt_exec *child)
{
    (void)arg;
    (void)child;
    if (i == 1)
        atomic_store(&lc_team_rc, tt_pool_destroy(lc_team_pool));
}

static TT_TEST_UNUSED int lc_child_destroy_in_team(void *arg)
{
    (void)arg;
    int base = th_count_threads();
    tt_pool *p = lc_pool(2, LC_NAMED);
    if (!p)
        return 1;
    lc_team_pool = p;
    tt_team *team = NULL;
    TT_CHECK(tt_pool_into_team(p, 2, &team) == TT_OK, "into_team");
    if (!team)
        return 1;
    tt_exec ex;
    TT_CHECK(tt_team_lead(team, 2, &ex) == TT_OK, "lead");
    int rc = tt_fork(&ex, 2, lc_team_destroy_job, NULL);
    TT_CHECK(rc == TT_OK, "team fork: %s", tt_status_name(rc));
    TT_CHECK(atomic_load(&lc_team_rc) == TT_OK, "destroy from a team member: %s",
             tt_status_name(atomic_load(&lc_team_rc)));
    tt_pool *back = tt_team_into_pool(team);
    if (lc_threads_settle(base) != base && back) {
        rc = tt_pool_destroy(back);
        TT_CHECK(rc == TT_OK || rc == TT_EDESTROYED, "destroy after into_pool: %s",
                 tt_status_name(rc));
    }
    TT_CHECK(lc_threads_settle(base) == base,
             "pool destroyed from a team member: after tt_team_into_pool (and a destroy) its "
             "%d member threads still run (%d threads, base %d)",
             2, th_count_threads(), base);
    return 0;
}

START_TEST(lc_destroy_from_team_member)
{
#if TT_PARALLEL_ENABLED
    lc_assert_child_ok(LC_ISOLATED(lc_child_destroy_in_team, NULL, 20),
                       "pool destroyed from a team member");
#endif
}
END_TEST

/* TT_EBUSY while another thread is inside an entry; nothing changed: the
 * pool still works, and once the entry ended the destroy succeeds. */
typedef struct lc_busy {
    tt_pool *pool;
    unsigned budget;
    int entry; /* 0 fork, 1 for_ranges budget 1 (inline), 2 team scope */
    th_flag inside, release;
    int rc;
} lc_busy;

static void lc_busy_wait(lc_busy *b)
{
    th_flag_set(&b->inside, 1);
    TT_CHECK(th_flag_wait_ge(&b->release, 1, 10), "never released");
}

static void lc_busy_job(void *arg, unsigned i, tt_exec *c)
{
    (void)c;
    if (i == 0)
        lc_busy_wait(arg);
}

static void lc_busy_body(void *arg, size_t b, size_t e)
{
    (void)b;
    (void)e;
    lc_busy_wait(arg);
}

static void lc_busy_scope(void *arg, tt_scope *s)
{
    (void)s;
    lc_busy_wait(arg);
}

static void *lc_busy_thread(void *arg)
{
    lc_busy *b = arg;
    tt_exec ex;
    TT_CHECK(tt_exec_init(&ex, b->pool, b->budget) == TT_OK, "init");
    switch (b->entry) {
    case 0:
        b->rc = tt_fork(&ex, 2, lc_busy_job, b);
        break;
    case 1:
        b->rc = tt_for_ranges(&ex, 10, 100, lc_busy_body, b);
        break;
    default:
        b->rc = tt_team_scope(&ex, lc_busy_scope, b);
        break;
    }
    return NULL;
}

static void lc_destroy_busy_case(unsigned budget, int entry, const char *what)
{
    int base = th_count_threads();
    tt_pool *p = th_make_pool(4);
    lc_busy b = {.pool = p, .budget = budget, .entry = entry};
    pthread_t t;
    pthread_create(&t, NULL, lc_busy_thread, &b);
    ck_assert_msg(th_flag_wait_ge(&b.inside, 1, 5), "%s: the entry did not start", what);
    int rc = tt_pool_destroy(p);
    /* Whatever the result, let the entry finish before asserting. */
    tt_exec ex;
    int rc_use = TT_OK;
    if (rc == TT_EBUSY && tt_pool_width(p) > budget) {
        /* Nothing changed: the pool serves another root meanwhile (when a
         * slot is free: the width caps every root together, the inline
         * one included, so on a pool of width 1 it would wait). */
        ck_assert_int_eq(tt_exec_init(&ex, p, 1), TT_OK);
        rc_use = tt_for_ranges(&ex, 10, 1, lc_noop_range, NULL);
    }
    th_flag_set(&b.release, 1);
    ck_assert(th_join_timeout(t, 10));
    TT_CHECK(rc == TT_EBUSY,
             "%s: tt_pool_destroy while another thread is inside an entry on the pool "
             "returned %s, expected TT_EBUSY",
             what, tt_status_name(rc));
    ck_assert_int_eq(rc_use, TT_OK);
    ck_assert_int_eq(b.rc, TT_OK);
    if (rc == TT_EBUSY) /* otherwise it is gone already */
        ck_assert_int_eq(tt_pool_destroy(p), TT_OK);
    int after = lc_threads_at_most(base + (int)th_expect_width(4));
    ck_assert_msg(after <= base + (int)th_expect_width(4), "%s: %d threads, base %d", what, after,
                  base);
}

START_TEST(lc_destroy_busy)
{
#if TT_PARALLEL_ENABLED
    lc_destroy_busy_case(2, 0, "a fork of budget 2 (members reserved)");
    lc_destroy_busy_case(3, 2, "a team scope of budget 3");
#endif
    th_assert_no_failures();
}
END_TEST

/* The same with entries that run inline on their caller (budget 1): a
 * tt_for_ranges, a team scope of the leader alone and a fork. Entries are
 * counted whatever they reserve, so the destroy is refused (TT_EBUSY) all
 * the same. (0.1.0 decided "busy" from member reservations only and tore
 * the pool down under such an entry.) */
START_TEST(lc_destroy_busy_inline_entry)
{
    lc_destroy_busy_case(1, 1, "a budget-1 tt_for_ranges (inline)");
    lc_destroy_busy_case(1, 2, "a budget-1 team scope (leader alone)");
    lc_destroy_busy_case(1, 0, "a budget-1 tt_fork (inline)");
    th_assert_no_failures();
}
END_TEST

/* ------------------------------------------------------------------------ */
/* fork()                                                                    */
/* ------------------------------------------------------------------------ */

typedef struct lc_fk {
    tt_pool *def, *ded, *teamp;
    tt_team *team;
    tt_exec pre; /* minted before the fork on def */
} lc_fk;

/* In the child of a process with pools: every old pool refuses with
 * TT_EFORKED, destroys with TT_OK without joining, and new pools work. */
static int lc_forked_checks(lc_fk *f)
{
    tt_exec ex;
    TT_CHECK(tt_exec_init(&ex, f->def, 2) == TT_EFORKED, "init on default pool");
    TT_CHECK(tt_exec_init(&ex, f->ded, 1) == TT_EFORKED, "init on dedicated pool");
    TT_CHECK(tt_fork(&f->pre, 2, lc_noop_job, NULL) == TT_EFORKED, "fork");
    TT_CHECK(tt_for_ranges(&f->pre, 10, 1, lc_noop_range, NULL) == TT_EFORKED, "for_ranges");
    TT_CHECK(tt_broadcast(&f->pre, lc_noop_bcast, NULL) == TT_EFORKED, "broadcast");
    TT_CHECK(tt_external(&f->pre, lc_noop_ext, NULL) == TT_EFORKED, "external");
    TT_CHECK(tt_team_scope(&f->pre, lc_noop_scope, NULL) == TT_EFORKED, "team scope");
    TT_CHECK(!tt_can_broadcast(&f->pre), "can_broadcast");
    tt_team *t2 = NULL;
    TT_CHECK(tt_pool_into_team(f->ded, 1, &t2) == TT_EFORKED, "into_team");
    if (f->team) {
        TT_CHECK(tt_team_lead(f->team, 1, &ex) == TT_EFORKED, "team lead");
        TT_CHECK(tt_team_try_lead(f->team, 1, &ex) == TT_EFORKED, "team try_lead");
    }
    TT_CHECK(tt_pool_destroy(f->def) == TT_OK, "destroy default");
    TT_CHECK(tt_pool_destroy(f->ded) == TT_OK, "destroy dedicated");
    if (f->teamp)
        TT_CHECK(tt_pool_destroy(f->teamp) == TT_OK, "destroy the team's pool");
    /* New pools: the cache was forgotten, the widths start afresh. */
    int base = th_count_threads();
    for (int kind = LC_DEFAULT; kind <= LC_NAMED; kind++) {
        for (unsigned w = 2; w <= 3; w++) {
            tt_pool *p = lc_pool(w, kind);
            if (!p)
                return 1;
            TT_CHECK(lc_use(p), "new pool in the child");
            lc_members m;
            TT_CHECK(lc_members_of(p, &m), "broadcast in the child");
            lc_destroy(p);
        }
    }
    int after = th_count_threads();
    TT_CHECK(after <= base + 3 * (TT_PARALLEL_ENABLED ? 2 : 0), "child threads %d, base %d",
             after, base);
    return 0;
}

static void lc_build_fk(lc_fk *f, bool team)
{
    memset(f, 0, sizeof *f);
    f->def = lc_pool(2, LC_DEFAULT);
    f->ded = lc_pool(2, LC_ONSTART);
    tt_pool *cached = lc_pool(3, LC_DEFAULT);
    if (cached) {
        lc_use(cached);
        lc_destroy(cached);
    }
    if (f->def)
        lc_use(f->def);
    if (f->ded)
        lc_use(f->ded);
    if (team) {
        f->teamp = lc_pool(2, LC_DEFAULT);
        if (f->teamp)
            TT_CHECK(tt_pool_into_team(f->teamp, th_expect_width(2), &f->team) == TT_OK,
                     "into_team");
    }
    if (f->def)
        TT_CHECK(tt_exec_init(&f->pre, f->def, 2) == TT_OK, "pre");
}

static void lc_free_fk(lc_fk *f)
{
    tt_exec_finish(&f->pre);
    if (f->team)
        tt_team_into_pool(f->team);
    if (f->teamp)
        lc_destroy(f->teamp);
    if (f->def)
        lc_destroy(f->def);
    if (f->ded)
        lc_destroy(f->ded);
}

static int lc_child_forked(void *arg)
{
    lc_fk *f = arg;
    int rc = lc_forked_checks(f);
    /* A grandchild of a process that built pools after its own fork. */
    tt_pool *p = lc_pool(2, LC_DEFAULT);
    if (p) {
        lc_fk g = {.def = p, .ded = lc_pool(2, LC_NAMED)};
        TT_CHECK(tt_exec_init(&g.pre, p, 2) == TT_OK, "grandchild: tt_exec_init");
        int st = lc_fork_run((lc_child_fn)lc_forked_checks, &g, 10);
        TT_CHECK(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "grandchild: status 0x%x", st);
        lc_destroy(g.ded);
        lc_destroy(p);
    }
    return rc;
}

START_TEST(lc_fork_child_refuses_and_rebuilds)
{
    LC_SKIP_UNDER_TSAN("lc_fork_child_refuses_and_rebuilds");
    lc_fk f;
    lc_build_fk(&f, true);
    th_assert_no_failures();
    int st = lc_fork_run(lc_child_forked, &f, 20);
    /* The parent is untouched. */
    bool used = lc_use(f.def) && lc_use(f.ded);
    lc_free_fk(&f);
    lc_assert_child_ok(st, "fork child");
    ck_assert(used);
    th_assert_no_failures();
}
END_TEST

/* A persistent team in a fork child: dissolving it must not wait for
 * members that do not exist there. (Regression: tt_team_into_pool issued
 * the end command and waited for the absent members' join forever.) */
static int lc_child_team_into_pool(void *arg)
{
    lc_fk *f = arg;
    tt_pool *back = tt_team_into_pool(f->team);
    TT_CHECK(back == f->teamp, "into_pool returned %p", (void *)back);
    if (back)
        TT_CHECK(tt_pool_destroy(back) == TT_OK, "destroy");
    return 0;
}

START_TEST(lc_fork_child_team_into_pool)
{
    LC_SKIP_UNDER_TSAN("lc_fork_child_team_into_pool");
    lc_fk f;
    lc_build_fk(&f, true);
    th_assert_no_failures();
    int st = lc_fork_run(lc_child_team_into_pool, &f, 5);
    lc_free_fk(&f); /* before the asserts: a failure leaks nothing */
    lc_assert_child_ok(st, "tt_team_into_pool in a fork child");
    th_assert_no_failures();
}
END_TEST

/* The same while another thread of the parent holds the team's leader
 * role at the fork: that thread does not exist in the child, so nobody
 * will ever end its role there; tt_team_into_pool in the child must not
 * wait for it. */
typedef struct lc_holder {
    tt_team *team;
    th_flag led, release;
    int rc;
} lc_holder;

static void *lc_hold_lead(void *arg)
{
    lc_holder *h = arg;
    tt_exec ex;
    h->rc = tt_team_lead(h->team, 1, &ex);
    th_flag_set(&h->led, 1);
    th_flag_wait_ge(&h->release, 1, 20);
    if (h->rc == TT_OK)
        tt_exec_finish(&ex);
    return NULL;
}

START_TEST(lc_fork_child_team_into_pool_led)
{
    LC_SKIP_UNDER_TSAN("lc_fork_child_team_into_pool_led");
    lc_fk f;
    lc_build_fk(&f, true);
    th_assert_no_failures();
    ck_assert_ptr_nonnull(f.team);
    lc_holder h = {.team = f.team};
    pthread_t t;
    pthread_create(&t, NULL, lc_hold_lead, &h);
    bool led = th_flag_wait_ge(&h.led, 1, 5) && h.rc == TT_OK;
    int st = led ? lc_fork_run(lc_child_team_into_pool, &f, 5) : -1;
    th_flag_set(&h.release, 1);
    bool joined = th_join_timeout(t, 10);
    lc_free_fk(&f);
    ck_assert_msg(led, "the holder did not lead: %s", tt_status_name(h.rc));
    lc_assert_child_ok(st, "tt_team_into_pool in a fork child while another parent thread led");
    ck_assert(joined);
    th_assert_no_failures();
}
END_TEST

/* fork() while other threads are inside entries, while others build and
 * drop default pools (the cache and pool-object locks), and while one
 * makes nested externals (the table of callee marks and its lock): no
 * child hangs, every child sees TT_EFORKED and can build new pools and
 * use them, an external too. */
typedef struct lc_bg {
    lc_fk *f;
    _Atomic int stop;
    _Atomic long loops;
} lc_bg;

static void *lc_bg_entries(void *arg)
{
    lc_bg *b = arg;
    while (!atomic_load(&b->stop)) {
        tt_exec ex;
        /* The parent's entries run while children fork off: each runs. */
        if (tt_exec_init(&ex, b->f->def, 2) == TT_OK) {
            int rc = tt_for_ranges(&ex, 64, 1, lc_noop_range, NULL);
            TT_CHECK(rc == TT_OK, "background ranges: %s", tt_status_name(rc));
        }
        if (tt_exec_init(&ex, b->f->ded, 2) == TT_OK) {
            int rc = tt_broadcast(&ex, lc_noop_bcast, NULL);
            TT_CHECK(rc == TT_OK, "background broadcast: %s", tt_status_name(rc));
        }
        atomic_fetch_add(&b->loops, 1);
    }
    return NULL;
}

/* An external whose callee makes an external of its own on another pool.
 * With the private crews this test forces, each callee runs on a member
 * of its pool, so each mark is taken on a thread of its own and would go
 * through the table's fast path; the test hook set below sends every mark
 * through the scan under the table's lock instead. */
static void lc_nested_ext(void *arg, unsigned w)
{
    (void)w;
    tt_exec ex;
    if (tt_exec_init(&ex, arg, 2) == TT_OK) {
        int rc = tt_external(&ex, lc_noop_ext, NULL);
        TT_CHECK(rc == TT_OK, "inner external: %s", tt_status_name(rc));
    }
}

static void *lc_bg_externals(void *arg)
{
    lc_bg *b = arg;
    while (!atomic_load(&b->stop)) {
        tt_exec ex;
        if (tt_exec_init(&ex, b->f->def, 2) == TT_OK) {
            int rc = tt_external(&ex, lc_nested_ext, b->f->ded);
            TT_CHECK(rc == TT_OK, "background external: %s", tt_status_name(rc));
        }
    }
    return NULL;
}

static void *lc_bg_churn(void *arg)
{
    lc_bg *b = arg;
    while (!atomic_load(&b->stop)) {
        tt_pool *p = NULL;
        tt_pool_attr *a = lc_attr(2 + (unsigned)(atomic_load(&b->loops) % 2), LC_DEFAULT);
        if (a && tt_pool_create(&p, a) == TT_OK)
            tt_pool_destroy(p);
        tt_pool_attr_destroy(a);
    }
    return NULL;
}

static int lc_child_forked_busy(void *arg)
{
    lc_fk *f = arg;
    tt_exec ex;
    TT_CHECK(tt_exec_init(&ex, f->def, 2) == TT_EFORKED, "init");
    TT_CHECK(tt_pool_destroy(f->def) == TT_OK, "destroy default");
    TT_CHECK(tt_pool_destroy(f->ded) == TT_OK, "destroy dedicated");
    tt_pool *p = lc_pool(2, LC_DEFAULT);
    if (!p)
        return 1;
    TT_CHECK(lc_use(p), "use");
    /* The child's first external takes a mark under the table's lock,
     * which a background thread of the parent may have held at the
     * fork. */
    if (tt_exec_init(&ex, p, 2) == TT_OK)
        TT_CHECK(tt_external(&ex, lc_noop_ext, NULL) == TT_OK, "external");
    lc_destroy(p);
    return 0;
}

START_TEST(lc_fork_while_busy)
{
    LC_SKIP_UNDER_TSAN("lc_fork_while_busy");
    /* The parent's entries run on private crews. A root on the caller's
     * own team opens an OpenMP region per entry, and a fork() while another
     * thread is starting or ending an OpenMP team is libgomp's unsupported
     * case (its global locks may be copied held, and the child hangs in its
     * first region whatever this library does): the application's own
     * regions have the same limit. What this test checks is the library's
     * own state across such a fork. */
    tt__test_force_private_crew(true);
    lc_fk f;
    lc_build_fk(&f, false);
    th_assert_no_failures();
    lc_bg b = {.f = &f};
    pthread_t t1, t2, t3;
    pthread_create(&t1, NULL, lc_bg_entries, &b);
    pthread_create(&t2, NULL, lc_bg_churn, &b);
    pthread_create(&t3, NULL, lc_bg_externals, &b);
#if TT_PARALLEL_ENABLED
    /* The externals' thread holds the marks' lock most of the time, so
     * that the forks find it held (the OpenMP backend's table; a build
     * without OpenMP has none). */
    uint64_t hold_was = tt__test_mark_lock_hold_ns(200000);
#endif
    unsigned n = th_iters(20);
    if (n < 3)
        n = 3;
    int bad = 0;
    unsigned bad_at = 0;
    for (unsigned i = 0; i < n && !bad; i++) {
        int st = lc_fork_run(lc_child_forked_busy, &f, 10);
        if (!(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
            bad = st ? st : -1;
            bad_at = i + 1;
        }
        th_sleep_us(1000);
    }
    /* Stop and free everything before asserting. */
    atomic_store(&b.stop, 1);
    bool joined = th_join_timeout(t1, 10) && th_join_timeout(t2, 10) && th_join_timeout(t3, 10);
#if TT_PARALLEL_ENABLED
    tt__test_mark_lock_hold_ns(hold_was);
#endif
    lc_free_fk(&f);
    char what[64];
    snprintf(what, sizeof what, "fork %u of %u while busy", bad_at, n);
    if (bad)
        lc_assert_child_ok(bad, what);
    ck_assert(joined);
    th_assert_no_failures();
}
END_TEST

/* fork() from inside a member (a fork job): the child is the member's
 * thread alone; old pools refuse, destroy, new pools work. */
typedef struct lc_fm {
    lc_fk *f;
    int status;
} lc_fm;

static void lc_fork_in_member_job(void *arg, unsigned i, tt_exec *c)
{
    (void)c;
    lc_fm *m = arg;
    if (i == 1)
        m->status = lc_fork_run(lc_child_forked_busy, m->f, 10);
}

START_TEST(lc_fork_from_member)
{
    LC_SKIP_UNDER_TSAN("lc_fork_from_member");
    /* A member of a private crew forks (see lc_fork_while_busy). */
    tt__test_force_private_crew(true);
    lc_fk f;
    lc_build_fk(&f, false);
    th_assert_no_failures();
    lc_fm m = {.f = &f, .status = -1};
    tt_exec ex;
    ck_assert_int_eq(tt_exec_init(&ex, f.def, 2), TT_OK);
    int rc = tt_fork(&ex, 2, lc_fork_in_member_job, &m);
    lc_free_fk(&f);
    ck_assert_int_eq(rc, TT_OK);
    lc_assert_child_ok(m.status, "fork from a member");
    th_assert_no_failures();
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Process exit                                                              */
/* ------------------------------------------------------------------------ */

static tt_pool *lc_exit_pools[4];

static void lc_atexit_destroy(void)
{
    for (unsigned i = 0; i < 4; i++)
        if (lc_exit_pools[i])
            tt_pool_destroy(lc_exit_pools[i]);
}

static void lc_spin_job(void *arg, unsigned i, tt_exec *c)
{
    (void)arg;
    (void)i;
    (void)c;
    for (;;)
        th_sleep_us(1000);
}

static void *lc_spin_thread(void *arg)
{
    tt_exec ex;
    /* Never returns: the process exits while the jobs spin. */
    if (tt_exec_init(&ex, arg, 2) == TT_OK && tt_fork(&ex, 2, lc_spin_job, NULL) != TT_OK)
        TT_CHECK(0, "the spinning fork was refused");
    return NULL;
}

/* variant 0: pools of every kind alive, a held team leader, exit(0) from
 * main; 1: the same while another thread is inside an entry forever;
 * 2: an atexit handler destroys the pools. */
static int lc_child_exit_alive(void *arg)
{
    int variant = (int)(intptr_t)arg;
    lc_exit_pools[0] = lc_pool(2, LC_DEFAULT);
    lc_exit_pools[1] = lc_pool(3, LC_ONSTART);
    lc_exit_pools[2] = lc_pool(2, LC_NAMED);
    tt_pool *cached = lc_pool(4, LC_DEFAULT);
    if (cached) {
        lc_use(cached);
        lc_destroy(cached);
    }
    for (unsigned i = 0; i < 3; i++)
        if (lc_exit_pools[i])
            lc_use(lc_exit_pools[i]);
    tt_pool *tp = lc_pool(2, LC_DEFAULT);
    tt_team *team = NULL;
    tt_exec lead;
    if (tp && tt_pool_into_team(tp, 2, &team) == TT_OK)
        TT_CHECK(tt_team_lead(team, 2, &lead) == TT_OK, "tt_team_lead");
    if (variant == 1 && lc_exit_pools[0]) {
        pthread_t t;
        pthread_create(&t, NULL, lc_spin_thread, lc_exit_pools[0]);
        th_sleep_us(20000);
    }
    if (variant == 2)
        atexit(lc_atexit_destroy);
    if (th_failures())
        return 1;
    fflush(NULL);
    exit(0);
}

START_TEST(lc_exit_with_pools_alive)
{
    lc_assert_child_ok(LC_ISOLATED(lc_child_exit_alive, 0, 15),
                       "exit() with pools alive");
    lc_assert_child_ok(LC_ISOLATED(lc_child_exit_alive, 1, 15),
                       "exit() while another thread is inside an entry");
    lc_assert_child_ok(LC_ISOLATED(lc_child_exit_alive, 2, 15),
                       "exit() with an atexit handler that destroys the pools");
}
END_TEST

/* exit() from inside a member: a fork job, a broadcast function, a team
 * section on a reserved member, a tt_external callback on a member. */
typedef struct lc_ex {
    int variant;
    tt_pool *pool;
} lc_ex;

static void lc_exit_now(void)
{
    fflush(NULL);
    exit(7);
}

static void lc_exit_job(void *arg, unsigned i, tt_exec *c)
{
    (void)arg;
    (void)c;
    if (i == 1)
        lc_exit_now();
    for (;;)
        th_sleep_us(1000);
}

static void lc_exit_bcast(void *arg, unsigned i)
{
    (void)arg;
    if (i == 1)
        lc_exit_now();
    for (;;)
        th_sleep_us(1000);
}

static void lc_exit_section(void *arg, tt_section *s)
{
    (void)arg;
    if (tt_section_rank(s) == 1)
        lc_exit_now();
    tt_section_barrier(s); /* never completes */
}

static void lc_exit_scope(void *arg, tt_scope *s)
{
    int rc = tt_scope_run(s, lc_exit_section, arg); /* never returns */
    TT_CHECK(0, "tt_scope_run returned %s", tt_status_name(rc));
}

static void lc_exit_ext(void *arg, unsigned w)
{
    (void)arg;
    (void)w;
    lc_exit_now();
}

static TT_TEST_UNUSED int lc_child_exit_member(void *arg)
{
    int variant = (int)(intptr_t)arg;
    tt_pool *p = lc_pool(2, variant % 2 ? LC_ONSTART : LC_DEFAULT);
    if (!p)
        return 1;
    lc_use(p);
    tt_exec ex;
    if (tt_exec_init(&ex, p, 2) != TT_OK)
        return 2;
    int rc;
    switch (variant / 2) {
    case 0:
        rc = tt_fork(&ex, 2, lc_exit_job, NULL);
        break;
    case 1:
        rc = tt_broadcast(&ex, lc_exit_bcast, NULL);
        break;
    case 2:
        rc = tt_team_scope(&ex, lc_exit_scope, NULL);
        break;
    default:
        rc = tt_external(&ex, lc_exit_ext, NULL);
        break;
    }
    /* Not reached: the member exited the process (a refusal returns 4). */
    return rc == TT_OK ? 3 : 4;
}

START_TEST(lc_exit_from_member)
{
#if TT_PARALLEL_ENABLED
    static const char *const what[] = {"fork job", "broadcast", "team section", "external"};
    for (int v = 0; v < 8; v++) {
        char msg[96];
        snprintf(msg, sizeof msg, "exit() from a member in a %s (%s pool)", what[v / 2],
                 v % 2 ? "dedicated" : "default");
        int st = LC_ISOLATED(lc_child_exit_member, v, 15);
        /* LLVM libomp (14) tears itself down in an atexit handler while the
         * process's other threads still run; one of them that calls into
         * it then, here the root's caller in the runtime's own barrier,
         * can re-enter its initialisation, whose assertion aborts the
         * process ("Assertion failure at kmp_runtime.cpp(7163):
         * __kmp_all_nth == 0"): once in several hundred children of
         * make check-libomp-app. That abort is libomp's, and would be the
         * same in raw OpenMP code whose worker calls exit(). So a child
         * that died of SIGABRT there runs again, twice at most; one of the
         * three must exit with the member's status. libgomp has no such
         * handler, and its runs get one try. */
        for (int retry = 0; retry < 2 && th_runtime_is_libomp() && st >= 0 &&
                            WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT;
             retry++) {
            fprintf(stderr, "%s: SIGABRT on libomp (its atexit teardown): run again\n", msg);
            st = LC_ISOLATED(lc_child_exit_member, v, 15);
        }
        lc_assert_status(st, 7, msg);
    }
#endif
}
END_TEST

/* ------------------------------------------------------------------------ */
/* dlopen / dlclose of a module that links threadteam                        */
/* ------------------------------------------------------------------------ */

static bool lc_file_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static void lc_self_dir(char *buf, size_t len)
{
    snprintf(buf, len, "%s", lc_self);
    char *slash = strrchr(buf, '/');
    if (slash)
        *slash = 0;
    else
        snprintf(buf, len, ".");
}

/* The module: $TT_DLMOD, or dlmod.so next to this program (libtool puts it
 * in .libs/). */
static bool lc_find_dlmod(char *out, size_t len)
{
    const char *env = getenv("TT_DLMOD");
    if (env && *env) {
        snprintf(out, len, "%s", env);
        return lc_file_exists(out);
    }
    char dir[PATH_MAX];
    lc_self_dir(dir, sizeof dir);
    static const char *const cand[] = {"%s/.libs/dlmod.so", "%s/dlmod.so", "%s/../.libs/dlmod.so",
                                       "%s/../dlmod.so"};
    for (unsigned i = 0; i < TT_ARRAY_LEN(cand); i++) {
        snprintf(out, len, cand[i], dir);
        if (lc_file_exists(out))
            return true;
    }
    return false;
}

/* Directories where an uninstalled libthreadteam.so may be. */
static void lc_lib_path_env(char *out, size_t len)
{
    char dir[PATH_MAX];
    lc_self_dir(dir, sizeof dir);
    const char *old = getenv("LD_LIBRARY_PATH");
    const char *lib = getenv("TT_LIBDIR");
    snprintf(out, len, "LD_LIBRARY_PATH=%.1024s%s%.1024s/../lib/.libs:%.1024s/../../lib/.libs:%.1024s%s%.2048s",
             lib ? lib : "", lib ? ":" : "", dir, dir, dir, old ? ":" : "", old ? old : "");
}

/* In the exec'd child: dlopen the module, call it, dlclose it, check that
 * libthreadteam stayed mapped (-z nodelete), keep running 100 ms (cached
 * members are still running library code), exit 0. Exit codes name what
 * went wrong. */
static bool lc_maps_has(const char *needle)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return false;
    char line[1024];
    bool found = false;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, needle) != NULL;
    fclose(f);
    return found;
}

static int lc_mode_dlopen(const char *arg)
{
    int variant = 0, rounds = 1;
    char path[PATH_MAX];
    if (sscanf(arg, "%d:%d:%4095s", &variant, &rounds, path) != 3) {
        fprintf(stderr, "dlopen child: bad argument '%s'\n", arg);
        return 20;
    }
    int base = th_count_threads();
    for (int r = 0; r < rounds; r++) {
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            fprintf(stderr, "dlopen child: dlopen(%s): %s\n", path, dlerror());
            return 21;
        }
        int (*run)(int) = (int (*)(int))dlsym(h, "dlmod_run");
        const char *(*libpath)(void) = (const char *(*)(void))dlsym(h, "dlmod_lib_path");
        if (!run || !libpath) {
            fprintf(stderr, "dlopen child: dlsym: %s\n", dlerror());
            return 22;
        }
        const char *lp = libpath();
        if (!lp || !strstr(lp, "libthreadteam")) {
            fprintf(stderr,
                    "dlopen child: the module's tt_pool_create resolves to '%s', not to "
                    "libthreadteam.so (this test needs the module to use the shared library)\n",
                    lp ? lp : "(null)");
            return 23;
        }
        int rc = run(variant);
        if (rc != 0) {
            fprintf(stderr, "dlopen child: dlmod_run(%d) = %d\n", variant, rc);
            return 24;
        }
        if (dlclose(h) != 0) {
            fprintf(stderr, "dlopen child: dlclose: %s\n", dlerror());
            return 25;
        }
        if (lc_maps_has("dlmod.so")) {
            /* Not an error of threadteam's: the module is simply kept. */
            fprintf(stderr, "dlopen child: note: dlmod.so still mapped after dlclose\n");
        }
        if (!lc_maps_has("libthreadteam")) {
            fprintf(stderr, "dlopen child: libthreadteam.so was unmapped by dlclose: it is not "
                            "linked with -z nodelete\n");
            return 26;
        }
        void *again = dlopen("libthreadteam.so.0", RTLD_NOW | RTLD_NOLOAD);
        if (!again)
            again = dlopen("libthreadteam.so", RTLD_NOW | RTLD_NOLOAD);
        if (!again && !lc_maps_has("libthreadteam")) {
            fprintf(stderr, "dlopen child: libthreadteam is no longer loaded\n");
            return 27;
        }
        if (again)
            dlclose(again);
    }
    /* Keep running while cached members (variant 1) or live pools
     * (variant 2) run the library's code. */
    th_sleep_us(100000);
    int n = th_count_threads();
    if (variant == 0 && n != base) {
        fprintf(stderr, "dlopen child: %d threads left by a module that destroyed its dedicated "
                        "pool (base %d)\n",
                n, base);
        return 28;
    }
    if ((variant == 1 || variant == 2) && TT_PARALLEL_ENABLED && n <= base) {
        fprintf(stderr, "dlopen child: note: no cached member survived (%d threads)\n", n);
    }
    fflush(NULL);
    exit(0);
}

START_TEST(lc_dlopen_dlclose)
{
    char mod[PATH_MAX];
    ck_assert_msg(lc_find_dlmod(mod, sizeof mod),
                  "dlmod.so not found next to %s (build tests/dlmod.la, or set TT_DLMOD)",
                  lc_self);
    char envbuf[8192];
    lc_lib_path_env(envbuf, sizeof envbuf);
    const char *env[] = {envbuf, NULL};
    /* variant:rounds:path. 0: dedicated + default pools, all destroyed;
     * 1: leaves a default crew in the cache; 2: leaves a pool alive. */
    static const struct {
        int variant, rounds;
        const char *what;
    } cases[] = {
        {0, 1, "module builds, uses and destroys its pools"},
        {1, 1, "module leaves a default crew in the cache"},
        {1, 3, "dlopen/dlclose three times, the cache reused across loads"},
        {2, 1, "module leaves a live pool behind"},
    };
    for (unsigned i = 0; i < TT_ARRAY_LEN(cases); i++) {
        char arg[PATH_MAX + 32];
        snprintf(arg, sizeof arg, "%d:%d:%s", cases[i].variant, cases[i].rounds, mod);
        lc_assert_child_ok(lc_exec_self("dlopen", arg, env, 20), cases[i].what);
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Failures                                                                  */
/* ------------------------------------------------------------------------ */

/* Thread starts refused by failure injection: TT_EAGAIN, *pool NULL, no
 * thread left, and the library works afterwards. */
static int lc_child_fail_thread(void *arg)
{
    (void)arg;
    lc_onstart_reset();
    int base = th_count_threads();
    static const int kinds[] = {LC_DEFAULT, LC_ONSTART, LC_NAMED};
    static const unsigned widths[] = {2, 3, 4};
    for (unsigned i = 0; i < TT_ARRAY_LEN(kinds); i++) {
        for (unsigned wi = 0; wi < TT_ARRAY_LEN(widths); wi++) {
            tt_pool_attr *a = lc_attr(widths[wi], kinds[i]);
            tt_pool *p = (tt_pool *)&base; /* must be reset to NULL */
            tt__fault_inject(0, 1);
            int rc = tt_pool_create(&p, a);
            if (TT_PARALLEL_ENABLED && kinds[i] == LC_DEFAULT) {
                /* A default pool starts no thread when it is built: its
                 * private crew starts on first need, and that entry reports
                 * the refusal, consuming nothing. */
                TT_CHECK(rc == TT_OK, "default width %u: %s", widths[wi], tt_status_name(rc));
                rc = rc == TT_OK ? lc_first_use_rc(p, true, true) : rc;
                tt__fault_inject(0, 0);
                tt_pool_attr_destroy(a);
                TT_CHECK(rc == TT_EAGAIN, "default width %u, first use: %s, expected TT_EAGAIN",
                         widths[wi], tt_status_name(rc));
                TT_CHECK(lc_threads_settle(base) == base, "%d threads left, base %d",
                         th_count_threads(), base);
                if (p != (tt_pool *)&base && p)
                    lc_destroy(p);
                continue;
            }
            tt__fault_inject(0, 0);
            tt_pool_attr_destroy(a);
            if (!TT_PARALLEL_ENABLED) {
                TT_CHECK(rc == TT_OK, "serial build: %s", tt_status_name(rc));
                if (rc == TT_OK)
                    lc_destroy(p);
                continue;
            }
            TT_CHECK(rc == TT_EAGAIN, "%s width %u: %s, expected TT_EAGAIN", lc_kind_name[kinds[i]],
                     widths[wi], tt_status_name(rc));
            TT_CHECK(p == NULL, "*pool not NULL after a failure");
            TT_CHECK(lc_threads_settle(base) == base, "%d threads left, base %d",
                     th_count_threads(), base);
            TT_CHECK(atomic_load(&lc_onstart_count) == 0, "on_start ran for a failed pool");
        }
    }
    /* The Nth start: the first pool starts, the second is refused. */
    tt__fault_inject(0, 2);
    tt_pool *p1 = lc_pool(2, LC_DEFAULT);
    tt_pool *p2 = NULL;
    tt_pool_attr *a = lc_attr(2, LC_NAMED);
    int rc = tt_pool_create(&p2, a);
    tt__fault_inject(0, 0);
    tt_pool_attr_destroy(a);
    if (TT_PARALLEL_ENABLED)
        TT_CHECK(rc == TT_EAGAIN && !p2, "second start: %s", tt_status_name(rc));
    else if (p2)
        lc_destroy(p2);
    if (p1) {
        TT_CHECK(lc_use(p1), "the first pool works");
        lc_destroy(p1); /* cached */
    }
    /* A cached crew starts no thread: the armed fault is still there for
     * the next pool that needs one. */
    tt__fault_inject(0, 1);
    tt_pool *p3 = lc_pool(2, LC_DEFAULT);
    tt_pool *p4 = NULL;
    a = lc_attr(2, LC_NAMED);
    rc = tt_pool_create(&p4, a);
    tt__fault_inject(0, 0);
    tt_pool_attr_destroy(a);
    if (TT_PARALLEL_ENABLED)
        TT_CHECK(rc == TT_EAGAIN, "after a cached take the fault hits the next start: %s",
                 tt_status_name(rc));
    else if (p4)
        lc_destroy(p4);
    if (p3)
        lc_destroy(p3);
    /* Usable afterwards. */
    for (int kind = LC_DEFAULT; kind <= LC_ONSTART; kind++) {
        tt_pool *p = lc_pool(4, kind);
        if (p) {
            TT_CHECK(lc_use(p), "after the failures");
            lc_destroy(p);
        }
    }
    return 0;
}

START_TEST(lc_fail_thread_start_injected)
{
    lc_assert_child_ok(LC_ISOLATED(lc_child_fail_thread, NULL, 20), "thread start failures");
}
END_TEST

/* Threads of user `uid` on the whole system (RLIMIT_NPROC counts them). */
static int lc_user_threads(uid_t uid)
{
    DIR *d = opendir("/proc");
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        char path[300];
        snprintf(path, sizeof path, "/proc/%s/task", e->d_name);
        DIR *t = opendir(path);
        if (!t)
            continue;
        struct dirent *te;
        while ((te = readdir(t)) != NULL) {
            if (te->d_name[0] == '.')
                continue;
            char sp[600];
            snprintf(sp, sizeof sp, "/proc/%s/task/%s/status", e->d_name, te->d_name);
            FILE *f = fopen(sp, "r");
            if (!f)
                continue;
            char line[256];
            while (fgets(line, sizeof line, f)) {
                unsigned ruid;
                if (sscanf(line, "Uid: %u", &ruid) == 1) {
                    if (ruid == (unsigned)uid)
                        n++;
                    break;
                }
            }
            fclose(f);
        }
        closedir(t);
    }
    closedir(d);
    return n;
}

static void *lc_park(void *arg)
{
    th_flag *f = arg;
    th_flag_wait_ge(f, 1, 10);
    return NULL;
}

/* RLIMIT_NPROC at "this user's threads + 1". Root (CAP_SYS_RESOURCE or
 * CAP_SYS_ADMIN) is exempt, so as root the child becomes `nobody` first.
 * Exit 0: checked; 10: the limit is not enforced here (reported, the
 * injection test covers the path). */
static int lc_child_nproc(void *arg)
{
    (void)arg;
    if (geteuid() == 0) {
        if (setgid(65534) != 0 || setuid(65534) != 0) {
            fprintf(stderr, "nproc: cannot become nobody: %s\n", strerror(errno));
            return 10;
        }
        prctl(PR_SET_DUMPABLE, 1, 0, 0, 0); /* keep /proc/self readable */
    }
    int base = th_count_threads();
    int mine = lc_user_threads(getuid());
    struct rlimit old, rl;
    getrlimit(RLIMIT_NPROC, &old);
    rl = old;
    rl.rlim_cur = (rlim_t)mine + 1;
    if (setrlimit(RLIMIT_NPROC, &rl) != 0) {
        fprintf(stderr, "nproc: setrlimit: %s\n", strerror(errno));
        return 10;
    }
    /* Is it enforced? One more thread is allowed, a second is not. */
    th_flag go = {0};
    pthread_t t1, t2;
    int r1 = pthread_create(&t1, NULL, lc_park, &go);
    int r2 = pthread_create(&t2, NULL, lc_park, &go);
    th_flag_set(&go, 1);
    if (r1 == 0)
        pthread_join(t1, NULL);
    if (r2 == 0)
        pthread_join(t2, NULL);
    lc_threads_settle(base);
    if (r1 != 0 || r2 == 0) {
        fprintf(stderr,
                "nproc: RLIMIT_NPROC=%d is not enforced here (first start %s, second %s)\n",
                mine + 1, strerror(r1), r2 ? strerror(r2) : "succeeded");
        return 10;
    }
    for (int kind = LC_DEFAULT; kind <= LC_NAMED; kind++) {
        tt_pool *p = (tt_pool *)&base;
        tt_pool_attr *a = lc_attr(2, kind);
        int rc = tt_pool_create(&p, a);
        tt_pool_attr_destroy(a);
        if (TT_PARALLEL_ENABLED && kind == LC_DEFAULT) {
            /* Built without a thread; the first entry that needs the
             * private crew is refused. */
            TT_CHECK(rc == TT_OK, "default width 2 under RLIMIT_NPROC=%d: %s", mine + 1,
                     tt_status_name(rc));
            if (rc == TT_OK) {
                rc = lc_first_use_rc(p, true, false);
                TT_CHECK(rc == TT_EAGAIN, "default width 2 under RLIMIT_NPROC=%d, first use: %s",
                         mine + 1, tt_status_name(rc));
                lc_destroy(p);
            }
        } else if (TT_PARALLEL_ENABLED) {
            TT_CHECK(rc == TT_EAGAIN, "%s width 2 under RLIMIT_NPROC=%d: %s, expected TT_EAGAIN",
                     lc_kind_name[kind], mine + 1, tt_status_name(rc));
            TT_CHECK(p == NULL, "*pool not NULL");
        } else if (rc == TT_OK) {
            lc_destroy(p);
        }
        TT_CHECK(lc_threads_settle(base) == base, "%d threads left, base %d", th_count_threads(),
                 base);
        /* A width beyond the limit itself is TT_ERANGE. */
        a = lc_attr((unsigned)mine + 2, kind);
        rc = tt_pool_create(&p, a);
        tt_pool_attr_destroy(a);
        if (TT_PARALLEL_ENABLED)
            TT_CHECK(rc == TT_ERANGE, "width %d above RLIMIT_NPROC=%d: %s, expected TT_ERANGE",
                     mine + 2, mine + 1, tt_status_name(rc));
        else if (rc == TT_OK)
            lc_destroy(p);
    }
    /* Back to the old soft limit: pools build again. */
    setrlimit(RLIMIT_NPROC, &old);
    tt_pool *p = lc_pool(2, LC_NAMED);
    if (p) {
        TT_CHECK(lc_use(p), "after the limit was raised");
        lc_destroy(p);
    }
    return 0;
}

START_TEST(lc_fail_thread_start_nproc)
{
    int st = LC_ISOLATED(lc_child_nproc, NULL, 20);
    if (st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 10) {
        fprintf(stderr, "lc_fail_thread_start_nproc: RLIMIT_NPROC cannot be enforced in this "
                        "environment; relying on the injected thread failures\n");
        return;
    }
    lc_assert_child_ok(st, "RLIMIT_NPROC");
}
END_TEST

/* After an operation armed with tt__fault_inject(n, 0): whether the fault
 * is still pending, i.e. the operation made fewer than n allocations.
 * tt_pool_attr_create makes exactly one. */
static bool lc_fault_pending(long n)
{
    for (long k = 0; k < n; k++) {
        tt_pool_attr *a = NULL;
        if (tt_pool_attr_create(&a) != TT_OK)
            return true;
        tt_pool_attr_destroy(a);
    }
    return false;
}

/* tt_pool_create with the Nth allocation failing, N = 1, 2, ... until it
 * succeeds. Returns the allocations the successful call made. */
static long lc_alloc_loop_pool(unsigned width, int kind)
{
    int base = th_count_threads();
    for (long n = 1; n < 200; n++) {
        lc_onstart_reset();
        tt_pool_attr *a = lc_attr(width, kind);
        TT_CHECK(a != NULL, "attr");
        if (!a)
            return -1;
        tt_pool *p = (tt_pool *)&base;
        tt__fault_inject(n, 0);
        int rc = tt_pool_create(&p, a);
        bool pending = rc == TT_OK && lc_fault_pending(n);
        tt__fault_inject(0, 0);
        tt_pool_attr_destroy(a);
        if (rc == TT_OK) {
            TT_CHECK(pending,
                     "%s width %u: allocation %ld failed inside tt_pool_create, which returned "
                     "TT_OK",
                     lc_kind_name[kind], width, n);
            TT_CHECK(lc_use(p), "the pool built after the failures");
            lc_destroy(p);
            return n - 1;
        }
        TT_CHECK(rc == TT_ENOMEM, "%s width %u, allocation %ld failing: %s, expected TT_ENOMEM",
                 lc_kind_name[kind], width, n, tt_status_name(rc));
        TT_CHECK(p == NULL, "*pool not NULL after a failure");
        TT_CHECK(lc_threads_settle(base) == base, "%s width %u, allocation %ld: %d threads, base %d",
                 lc_kind_name[kind], width, n, th_count_threads(), base);
        TT_CHECK(atomic_load(&lc_dtor_count) == atomic_load(&lc_onstart_count),
                 "on_start state of a failed pool not released");
        if (th_failures())
            return -1;
    }
    TT_CHECK(0, "tt_pool_create never succeeded");
    return -1;
}

/* Retire a few pool objects, so that the next creations reuse them and
 * their allocation sequence does not shift by the pool object's own. */
static void lc_prime_shells(void)
{
    tt_pool *p[4] = {0};
    for (unsigned i = 0; i < 4; i++)
        p[i] = lc_pool(1, LC_DEFAULT);
    for (unsigned i = 0; i < 4; i++)
        if (p[i])
            lc_destroy(p[i]);
}

static int lc_child_fail_alloc_pool(void *arg)
{
    (void)arg;
    static const unsigned widths[] = {2, 4};
    static const int kinds[] = {LC_DEFAULT, LC_NAMED, LC_ONSTART};
    for (unsigned k = 0; k < TT_ARRAY_LEN(kinds); k++) {
        for (unsigned w = 0; w < TT_ARRAY_LEN(widths); w++) {
            /* A: as the process is (in a fresh process the pool object is
             * allocated too). B: pool objects retired and reused, and a
             * new crew (a default pool's cached crew is held by a live
             * pool meanwhile). C: a default pool finds its crew cached. */
            long na = lc_alloc_loop_pool(widths[w], kinds[k]);
            lc_prime_shells();
            tt_pool *hold = kinds[k] == LC_DEFAULT ? lc_pool(widths[w], LC_DEFAULT) : NULL;
            long nb = lc_alloc_loop_pool(widths[w], kinds[k]);
            if (hold)
                lc_destroy(hold);
            long nc = lc_alloc_loop_pool(widths[w], kinds[k]);
            if (getenv("TT_TEST_VERBOSE"))
                fprintf(stderr, "alloc: %s width %u: %ld, %ld, %ld allocations\n",
                        lc_kind_name[kinds[k]], widths[w], na, nb, nc);
            if (na < 0 || nb < 0 || nc < 0)
                return 1;
        }
    }
    return 0;
}

START_TEST(lc_fail_alloc_pool_create)
{
    lc_assert_child_ok(LC_ISOLATED(lc_child_fail_alloc_pool, NULL, 50), "allocation failures");
}
END_TEST

/* tt_pool_attr_create and its setters, then tt_pool_create from them, with
 * the Nth allocation of the whole sequence failing. */
START_TEST(lc_fail_alloc_attr)
{
    int base = th_count_threads();
    bool done = false;
    for (long n = 1; n < 200 && !done; n++) {
        tt__fault_inject(n, 0);
        tt_pool_attr *a = (tt_pool_attr *)&base;
        int rc = tt_pool_attr_create(&a);
        if (rc != TT_OK) {
            tt__fault_inject(0, 0);
            ck_assert_int_eq(rc, TT_ENOMEM);
            ck_assert_ptr_null(a);
            continue;
        }
        const char *name = NULL;
        ck_assert_int_eq(tt_pool_attr_set_threads(a, 2), TT_OK);
        rc = tt_pool_attr_set_thread_name(a, "lcA");
        if (rc != TT_OK) {
            tt__fault_inject(0, 0);
            ck_assert_int_eq(rc, TT_ENOMEM);
            ck_assert_int_eq(tt_pool_attr_get_thread_name(a, &name), TT_OK);
            ck_assert_ptr_null(name);
            tt_pool_attr_destroy(a);
            continue;
        }
        rc = tt_pool_attr_set_thread_name(a, "lcB");
        if (rc != TT_OK) {
            tt__fault_inject(0, 0);
            ck_assert_int_eq(rc, TT_ENOMEM);
            /* Nothing changed: the old name stays. */
            ck_assert_int_eq(tt_pool_attr_get_thread_name(a, &name), TT_OK);
            ck_assert_str_eq(name, "lcA");
            tt_pool_attr_destroy(a);
            continue;
        }
        ck_assert_int_eq(tt_pool_attr_set_on_start(a, lc_on_start, NULL), TT_OK);
        ck_assert_int_eq(tt_pool_attr_set_stack_size(a, (size_t)1 << 20), TT_OK);
        ck_assert_int_eq(tt_pool_attr_set_qos(a, TT_QOS_UTILITY), TT_OK);
        ck_assert_int_eq(tt_pool_attr_set_idle_spin(a, 100000), TT_OK);
        ck_assert_int_eq(tt_pool_attr_set_spin_polls(a, th_test_spin_polls()), TT_OK);
        ck_assert_int_eq(tt_pool_attr_set_acquire_timeout(a, 1000000), TT_OK);
        ck_assert_int_eq(tt_pool_attr_set_pin_participants(a, false), TT_OK);
        ck_assert_int_eq(tt_pool_attr_set_idle_serves_pool(a, false), TT_OK);
        tt_pool *p = (tt_pool *)&base;
        lc_onstart_reset();
        rc = tt_pool_create(&p, a);
        bool pending = rc == TT_OK && lc_fault_pending(n);
        tt__fault_inject(0, 0);
        tt_pool_attr_destroy(a);
        if (rc != TT_OK) {
            ck_assert_msg(rc == TT_ENOMEM, "allocation %ld: %s", n, tt_status_name(rc));
            ck_assert_ptr_null(p);
            ck_assert_int_eq(lc_threads_settle(base), base);
            ck_assert_int_eq(atomic_load(&lc_dtor_count), atomic_load(&lc_onstart_count));
            continue;
        }
        ck_assert_msg(pending, "allocation %ld failed and nothing reported it", n);
        ck_assert_msg(lc_use(p), "use");
        ck_assert_int_eq(tt_pool_destroy(p), TT_OK);
        ck_assert_int_eq(lc_threads_settle(base), base);
        done = true;
    }
    ck_assert_msg(done, "the sequence never succeeded");
    th_assert_no_failures();
}
END_TEST

/* tt_pool_into_team with the Nth allocation failing: TT_ENOMEM, the pool
 * untouched (no member left reserved, not owned: a later into_team works). */
START_TEST(lc_fail_alloc_into_team)
{
    static const struct {
        unsigned pool_w, team_w;
    } cases[] = {{2, 2}, {4, 3}, {4, 1}};
    for (unsigned c = 0; c < TT_ARRAY_LEN(cases); c++) {
        tt_pool *p = th_make_pool(cases[c].pool_w);
        unsigned tw = th_expect_width(cases[c].team_w);
        bool done = false;
        for (long n = 1; n < 100 && !done; n++) {
            tt_team *team = (tt_team *)p;
            tt__fault_inject(n, 0);
            int rc = tt_pool_into_team(p, tw, &team);
            bool pending = rc == TT_OK && lc_fault_pending(n);
            tt__fault_inject(0, 0);
            if (rc != TT_OK) {
                ck_assert_msg(rc == TT_ENOMEM, "allocation %ld: %s", n, tt_status_name(rc));
                ck_assert_ptr_null(team);
                /* Untouched: every member free within a short timeout. */
                tt_exec ex;
                ck_assert_int_eq(tt_exec_init(&ex, p, tt_pool_width(p)), TT_OK);
                tt_team_opts o;
                tt_team_opts_init(&o);
                o.acquire_timeout_ns = 200000000u;
                ck_assert_msg(tt_team_scope_with(&ex, &o, lc_noop_scope, NULL) == TT_OK,
                              "members left reserved after a failed tt_pool_into_team");
                continue;
            }
            ck_assert_msg(pending, "allocation %ld failed and tt_pool_into_team returned TT_OK", n);
            ck_assert_int_eq(tt_pool_destroy(p), TT_EBUSY);
            tt_exec ex;
            ck_assert_int_eq(tt_team_lead(team, tw, &ex), TT_OK);
            ck_assert_int_eq(tt_for_ranges(&ex, 100, 1, lc_noop_range, NULL), TT_OK);
            ck_assert_ptr_eq(tt_team_into_pool(team), p);
            done = true;
        }
        ck_assert(done);
        ck_assert(lc_use(p));
        th_free_pool(p);
        th_assert_no_failures();
    }
}
END_TEST

/* OMP_THREAD_LIMIT (read by libgomp at start, so a fresh exec): a width
 * above it is TT_ERANGE; a pool at the limit is built at its full width or
 * refused, never silently narrower. */
static int lc_mode_thread_limit(const char *arg)
{
    (void)arg;
    unsigned lim = 3;
    int base = th_count_threads();
    tt_pool *p = (tt_pool *)&base;
    tt_pool_attr *a = lc_attr(lim + 1, LC_DEFAULT);
    int rc = tt_pool_create(&p, a);
    tt_pool_attr_destroy(a);
    if (TT_PARALLEL_ENABLED) {
        TT_CHECK(rc == TT_ERANGE, "width %u over OMP_THREAD_LIMIT=%u: %s", lim + 1, lim,
                 tt_status_name(rc));
        TT_CHECK(p == NULL, "*pool not NULL");
    } else if (rc == TT_OK) {
        lc_destroy(p);
    }
    for (int kind = LC_DEFAULT; kind <= LC_NAMED; kind++) {
        a = lc_attr(lim, kind);
        rc = tt_pool_create(&p, a);
        tt_pool_attr_destroy(a);
        TT_CHECK(rc == TT_OK || rc == TT_ESHORTTEAM, "width %u at the limit: %s", lim,
                 tt_status_name(rc));
        if (rc == TT_OK) {
            TT_CHECK(tt_pool_width(p) == th_expect_width(lim), "width %u", tt_pool_width(p));
            lc_members m;
            TT_CHECK(lc_members_of(p, &m), "broadcast over the whole width");
            TT_CHECK(lc_use(p), "use");
            lc_destroy(p);
        }
    }
    TT_CHECK(lc_threads_at_most(base + (TT_PARALLEL_ENABLED ? (int)lim : 0)) <=
                 base + (TT_PARALLEL_ENABLED ? (int)lim : 0),
             "threads");
    return th_failures() ? 1 : 0;
}

START_TEST(lc_fail_omp_thread_limit)
{
    const char *env[] = {"OMP_THREAD_LIMIT=3", NULL};
    lc_assert_child_ok(lc_exec_self("thread-limit", "", env, 20), "OMP_THREAD_LIMIT=3");
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Found by tests/stress.c (team bugs, kept here as deterministic            */
/* regressions)                                                              */
/* ------------------------------------------------------------------------ */

/* (B) A team token narrower than its control block: tt_team_lead(team,
 * budget < width) or tt_exec_limit on a team token, then tt_fork (which is
 * tt_scope_fork on the team) or tt_team_scope + tt_scope_split. The split
 * builds its groups over the view's size but split_part() finds a
 * participant's group with find_group(c->size, ...), the control block's
 * full size: participant 1 joined group 0 as its rank 1, group 1 had no
 * leader, and the leader waited for a join that never came (stress seed
 * 15 hung there). Fixed: the split is done over the view. */
typedef struct lc_narrow {
    _Atomic int ran[8];
} lc_narrow;

static void lc_narrow_job(void *arg, unsigned i, tt_exec *c)
{
    (void)c;
    lc_narrow *n = arg;
    if (i < 8)
        atomic_fetch_add(&n->ran[i], 1);
}

static void lc_narrow_part(void *arg, unsigned part, tt_scope *sub)
{
    (void)sub;
    lc_narrow *n = arg;
    if (part < 8)
        atomic_fetch_add(&n->ran[part], 1);
}

static void lc_narrow_scope(void *arg, tt_scope *s)
{
    TT_CHECK(tt_scope_split(s, 2, lc_narrow_part, arg) == TT_OK, "split");
}

static TT_TEST_UNUSED int lc_child_narrow_team(void *arg)
{
    int how = (int)(intptr_t)arg;
    tt_pool *p = lc_pool(4, LC_DEFAULT);
    if (!p)
        return 1;
    tt_team *team = NULL;
    TT_CHECK(tt_pool_into_team(p, 4, &team) == TT_OK, "into_team");
    if (!team)
        return 1;
    lc_narrow n;
    memset(&n, 0, sizeof n);
    tt_exec ex;
    int rc;
    if (how == 0) {
        TT_CHECK(tt_team_lead(team, 2, &ex) == TT_OK, "lead");
        rc = tt_fork(&ex, 2, lc_narrow_job, &n);
    } else {
        TT_CHECK(tt_team_lead(team, 4, &ex) == TT_OK, "lead");
        tt_exec_limit(&ex, 2);
        rc = tt_team_scope(&ex, lc_narrow_scope, &n);
    }
    TT_CHECK(rc == TT_OK, "entry: %s", tt_status_name(rc));
    for (unsigned i = 0; i < 2; i++)
        TT_CHECK(atomic_load(&n.ran[i]) == 1, "job/part %u ran %d times", i,
                 atomic_load(&n.ran[i]));
    TT_CHECK(tt_team_into_pool(team) == p, "into_pool");
    lc_destroy(p);
    return 0;
}

START_TEST(lc_team_narrow_token)
{
#if TT_PARALLEL_ENABLED
    lc_assert_child_ok(LC_ISOLATED(lc_child_narrow_team, 0, 5),
                       "tt_fork on a tt_team_lead token of budget 2 on a team of 4");
    lc_assert_child_ok(LC_ISOLATED(lc_child_narrow_team, 1, 5),
                       "tt_scope_split in a scope of a team token limited to 2 of 4");
#endif
}
END_TEST

/* (A) The ledger counts a tt_scope_split part (lead_group's
 * tt__ledger_enter around the part's callback) and, at the same time, the
 * section that part runs on its own sub-scope (the part's thread is that
 * section's rank 0): tt_ledger_max_live read budget + 1 although no more
 * than `budget` threads ran. (A scope's own callback is not counted, and a
 * scope_fork job is suspended around its entries; a split part was
 * neither. Fixed.) */
static void lc_ledger_section(void *arg, tt_section *s)
{
    (void)arg;
    tt_section_barrier(s); /* every participant alive at once */
}

static void lc_ledger_part(void *arg, unsigned part, tt_scope *sub)
{
    (void)arg;
    (void)part;
    TT_CHECK(tt_scope_run(sub, lc_ledger_section, NULL) == TT_OK, "sub-scope section");
}

static TT_TEST_UNUSED void lc_ledger_scope(void *arg, tt_scope *s)
{
    (void)arg;
    TT_CHECK(tt_scope_split(s, 1, lc_ledger_part, NULL) == TT_OK, "split");
}

START_TEST(lc_ledger_split_part)
{
#if TT_LEDGER_ENABLED
    tt_pool *p = th_make_pool(2);
    for (unsigned b = 1; b <= tt_pool_width(p); b++) {
        tt_exec ex;
        ck_assert_int_eq(tt_exec_init(&ex, p, b), TT_OK);
        ck_assert_int_eq(tt_team_scope(&ex, lc_ledger_scope, NULL), TT_OK);
        unsigned mx = tt_ledger_max_live(tt_exec_ledger_root(&ex));
        TT_CHECK(mx <= b,
                      "a split part running a section on its sub-scope: ledger max_live %u, "
                      "budget %u (the part and its own rank 0 counted twice)",
                      mx, b);
    }
    th_free_pool(p);
    th_assert_no_failures();
#endif
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Suite                                                                     */
/* ------------------------------------------------------------------------ */

static Suite *lifecycle_suite(void)
{
    Suite *s = suite_create("lifecycle");
    TCase *tc = th_tcase(s, "cache", 120);
    tcase_add_test(tc, lc_cache_reuse);
    tcase_add_test(tc, lc_cache_cap_model);
    tcase_add_test(tc, lc_cache_affinity);
    tcase_add_test(tc, lc_cache_exclusive);

    tc = th_tcase(s, "dedicated", 60);
    tcase_add_test(tc, lc_dedicated_tls_destructors);
    tcase_add_test(tc, lc_dedicated_each_setting_joins);

    tc = th_tcase(s, "destroy", 60);
    tcase_add_test(tc, lc_destroy_from_member);
    tcase_add_test(tc, lc_destroy_from_member_two_roots);
    tcase_add_test(tc, lc_destroy_from_member_late_children);
    tcase_add_test(tc, lc_destroy_busy);
    tcase_add_test(tc, lc_destroy_busy_inline_entry);

    tc = th_tcase(s, "fork", 120);
    tcase_add_test(tc, lc_fork_child_refuses_and_rebuilds);
    tcase_add_test(tc, lc_fork_while_busy);
    tcase_add_test(tc, lc_fork_from_member);

    /* Regressions of library bugs these tests found (docs/design/misuse.md,
     * "Found by these tests"). */
    tc = th_tcase(s, "regressions", 60);
    tcase_add_test(tc, lc_destroy_from_team_member);
    tcase_add_test(tc, lc_fork_child_team_into_pool);
    tcase_add_test(tc, lc_fork_child_team_into_pool_led);
    tcase_add_test(tc, lc_team_narrow_token);
    tcase_add_test(tc, lc_ledger_split_part);

    tc = th_tcase(s, "exit", 120);
    tcase_add_test(tc, lc_exit_with_pools_alive);
    tcase_add_test(tc, lc_exit_from_member);

    tc = th_tcase(s, "dlopen", 60);
    tcase_add_test(tc, lc_dlopen_dlclose);

    tc = th_tcase(s, "failures", 120);
    tcase_add_test(tc, lc_fail_thread_start_injected);
    tcase_add_test(tc, lc_fail_thread_start_nproc);
    tcase_add_test(tc, lc_fail_alloc_pool_create);
    tcase_add_test(tc, lc_fail_alloc_attr);
    tcase_add_test(tc, lc_fail_alloc_into_team);
    tcase_add_test(tc, lc_fail_omp_thread_limit);
    return s;
}

/* The children LC_ISOLATED runs, by name (for the exec'd form). */
static const struct {
    const char *name;
    lc_child_fn fn;
} lc_children[] = {
#define LC_CHILD(f) {#f, f}
    LC_CHILD(lc_child_cache_reuse),           LC_CHILD(lc_child_cache_affinity),
    LC_CHILD(lc_child_cache_exclusive),       LC_CHILD(lc_child_destroy_from_member),
    LC_CHILD(lc_child_destroy_late_children), LC_CHILD(lc_child_destroy_two_roots),
    LC_CHILD(lc_child_destroy_in_team),       LC_CHILD(lc_child_exit_alive),
    LC_CHILD(lc_child_exit_member),           LC_CHILD(lc_child_fail_thread),
    LC_CHILD(lc_child_nproc),                 LC_CHILD(lc_child_fail_alloc_pool),
    LC_CHILD(lc_child_narrow_team),
#undef LC_CHILD
};

static int lc_mode_run(const char *arg)
{
    char name[96];
    long a = 0;
    if (sscanf(arg, "%95[^:]:%ld", name, &a) != 2) {
        fprintf(stderr, "test_lifecycle: bad child '%s'\n", arg);
        return 2;
    }
    for (unsigned i = 0; i < TT_ARRAY_LEN(lc_children); i++) {
        if (strcmp(lc_children[i].name, name) == 0) {
            int rc = lc_children[i].fn((void *)(intptr_t)a);
            fflush(NULL);
            return rc == 0 && th_failures() ? 1 : rc;
        }
    }
    fprintf(stderr, "test_lifecycle: no child named '%s'\n", name);
    return 2;
}

int main(int argc, char **argv)
{
    ssize_t n = readlink("/proc/self/exe", lc_self, sizeof lc_self - 1);
    if (n > 0)
        lc_self[n] = 0;
    else
        snprintf(lc_self, sizeof lc_self, "%s", argv[0]);
    if (argc >= 3 && strcmp(argv[1], "--child") == 0) {
        const char *arg = argc >= 4 ? argv[3] : "";
        th_reset_failures();
        lc_settle_runtime();
        tt__test_force_private_crew(true);
        if (strcmp(argv[2], "run") == 0)
            return lc_mode_run(arg);
        if (strcmp(argv[2], "cache-model") == 0)
            return lc_mode_cache_model(arg);
        if (strcmp(argv[2], "dlopen") == 0)
            return lc_mode_dlopen(arg);
        if (strcmp(argv[2], "thread-limit") == 0)
            return lc_mode_thread_limit(arg);
        fprintf(stderr, "test_lifecycle: unknown child mode '%s'\n", argv[2]);
        return 2;
    }
    return th_run_suite(lifecycle_suite());
}
