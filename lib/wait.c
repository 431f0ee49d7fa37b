/*
 * wait.c -- waits shaped like libgomp's (config/linux/wait.h): spin a
 * bounded number of polls, yield a few times, then sleep on a futex.
 *
 * Memory orders. Every wait is a handshake between one waker and one or
 * more waiters on a 32-bit word:
 *  - the waker publishes the data the waiter will read, then stores or
 *    decrements the word with release order; the waiter's acquire load of
 *    the word then makes that data visible;
 *  - the decision to make a futex system call needs a Dekker-style check:
 *    the waiter announces itself (sleepers++ or the SLEEPING bit) and then
 *    re-reads the word; the waker changes the word and then reads the
 *    announcement. Both sides use seq_cst for that pair, so at least one of
 *    them sees the other: either the waiter sees the new word and does not
 *    sleep, or the waker sees the sleeper and wakes it. Nothing weaker than
 *    seq_cst orders a store before a later load of another location.
 */
#include "waits.h"
#include "cpu.h"
#include "test_hooks.h"
#include "futex.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* The application's wait settings                                           */
/* ------------------------------------------------------------------------ */
/*
 * libgomp (env.c, GCC 12) reads OMP_WAIT_POLICY and GOMP_SPINCOUNT once:
 *   unset    spin 300000, throttled 100
 *   active   spin 3*10^10 ("5 minutes"), throttled 1000
 *   passive  spin 0, throttled 0
 * GOMP_SPINCOUNT (a number with an optional k/M/G/T suffix, or
 * "infinite"/"infinity") replaces the spin count whatever the policy, and
 * the throttled count never exceeds the spin count. A libgomp spin is a
 * relaxed load and a cpu_relax per iteration, which is exactly one poll of
 * tt__wait_spin_ne, so counts convert one to one. The one difference: where
 * no variable is set, the spin is TT__DEFAULT_SPIN_POLLS (2^21 on aarch64,
 * where a poll is cheaper; 300000 elsewhere, libgomp's default). libgomp
 * throttles once it manages more threads than CPUs; the library's waits
 * throttle per pool and per scope (waiting.md, Throttling).
 */
static int parse_policy(const char *env)
{
    if (!env)
        return -1;
    while (isspace((unsigned char)*env))
        env++;
    int r;
    if (strncasecmp(env, "active", 6) == 0)
        r = 1, env += 6;
    else if (strncasecmp(env, "passive", 7) == 0)
        r = 0, env += 7;
    else
        return -1; /* libgomp warns and ignores it */
    while (isspace((unsigned char)*env))
        env++;
    return *env == '\0' ? r : -1;
}

static bool parse_spincount(const char *env, uint64_t *out)
{
    if (!env)
        return false;
    while (isspace((unsigned char)*env))
        env++;
    if (strncasecmp(env, "infinite", 8) == 0 || strncasecmp(env, "infinity", 8) == 0) {
        env += 8;
        while (isspace((unsigned char)*env))
            env++;
        if (*env != '\0')
            return false;
        *out = UINT64_MAX;
        return true;
    }
    if (*env == '-' || *env == '\0')
        return false;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(env, &end, 10);
    if (errno || end == env)
        return false;
    uint64_t mult = 1;
    switch (*end) {
    case 'k': case 'K': mult = 1000ull; end++; break;
    case 'M': mult = 1000000ull; end++; break;
    case 'G': mult = 1000000000ull; end++; break;
    case 'T': mult = 1000000000000ull; end++; break;
    default: break;
    }
    while (isspace((unsigned char)*end))
        end++;
    if (*end != '\0')
        return false;
    *out = (v > UINT64_MAX / mult) ? UINT64_MAX : (uint64_t)v * mult;
    return true;
}

void tt__omp_waits_parse(const char *policy, const char *spincount, tt__omp_waits *out)
{
    out->policy = parse_policy(policy);
    uint64_t sc = 0;
    out->spincount_set = parse_spincount(spincount, &sc);
    if (out->spincount_set)
        out->spin_polls = sc;
    else if (out->policy > 0)
        out->spin_polls = 30000000000ull;
    else if (out->policy == 0)
        out->spin_polls = 0;
    else
        out->spin_polls = TT__DEFAULT_SPIN_POLLS;
    out->throttled_polls = out->policy > 0 ? 1000u : out->policy == 0 ? 0u : TT__THROTTLED_POLLS;
    if (out->throttled_polls > out->spin_polls)
        out->throttled_polls = out->spin_polls;
}

static tt__omp_waits omp_waits;
static pthread_once_t omp_waits_once = PTHREAD_ONCE_INIT;
/* Read by every throttled wait without a call: set once, after parsing. */
static _Atomic uint64_t throttled_now = TT__THROTTLED_POLLS;

static void omp_waits_read(void)
{
    tt__omp_waits_parse(getenv("OMP_WAIT_POLICY"), getenv("GOMP_SPINCOUNT"), &omp_waits);
    /* The throttled cap of a wait: libgomp's throttled count, except that
     * under passive it is the default one (a pool whose spin_polls was set
     * explicitly still throttles like libgomp's default; a pool that took
     * passive spins 0 anyway). */
    uint64_t t = omp_waits.policy == 0 ? TT__THROTTLED_POLLS : omp_waits.throttled_polls;
    if (omp_waits.policy != 0 && omp_waits.spincount_set && t > omp_waits.spin_polls)
        t = omp_waits.spin_polls;
    atomic_store_explicit(&throttled_now, t, memory_order_relaxed);
}

const tt__omp_waits *tt__omp_waits_get(void)
{
    pthread_once(&omp_waits_once, omp_waits_read);
    return &omp_waits;
}

uint64_t tt__throttled_polls(void)
{
    return atomic_load_explicit(&throttled_now, memory_order_relaxed);
}

void tt__futex_wait(_Atomic uint32_t *word, uint32_t expected)
{
#if TT__HAVE_FUTEX
    /* A spurious return (EINTR, EAGAIN because the word already changed) is
     * fine: every caller loops on its condition. */
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
#else
    if (atomic_load_explicit(word, memory_order_acquire) == expected)
        sched_yield();
#endif
}

void tt__futex_wake(_Atomic uint32_t *word, int count)
{
#if TT__HAVE_FUTEX
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, count, NULL, NULL, 0);
#else
    (void)word;
    (void)count;
#endif
}

/* A gap this long between two clock reads of a spin (TT__CLOCK_EVERY polls,
 * a few microseconds when the waiter runs) means the waiter was descheduled:
 * another thread wanted this CPU, perhaps the very thread it waits for. */
#define TT__PREEMPT_NS 100000ull
/* Read the clock only every so many polls, so that the fast path of a spin
 * is a load and a pause (a vDSO clock read costs about as much as one
 * pause; one per 64 polls is under 2 % of the spin). */
#define TT__CLOCK_EVERY 64u
/* After a waiter of a pool saw itself descheduled, the pool's idle waits
 * (members waiting for work: the waits that yield as they spin) spin only
 * the throttled budget and sleep without yields for this long. Team waits
 * (joins, barriers, reserved members between sections) keep their budget:
 * throttled, back-to-back sections would sleep at every hand-off, because
 * every sleep hands the CPU to the load and the next hand-off then finds
 * the partner descheduled (docs/design/runs/2026-12-06-wait-constants.md). */
#ifndef TT__STARVED_NS
#define TT__STARVED_NS 10000000ull
#endif

/* ------------------------------------------------------------------------ */
/* Is the machine oversubscribed?                                            */
/* ------------------------------------------------------------------------ */
/*
 * A gap in the clock tells a waiter that it was descheduled itself; it
 * cannot tell that the thread it waits for is the one without a CPU (a
 * join waits for a count, not for a thread). The kernel's count of
 * runnable threads can: when more threads are runnable than the CPUs this
 * process may use, some runnable thread is waiting for a CPU, quite
 * possibly the one this spin waits for, and every poll of the spin keeps a
 * CPU from it. So a spin that has gone on for a while asks, at most once
 * per TT__OVERSUB_EVERY_NS in the whole process, and every spinner of that
 * window uses the answer.
 *
 * The count is machine-wide while the CPU count is the process's
 * (tt__cpu_count_cached: its affinity or OpenMP places): a process bound to
 * 2 CPUs of a busy 64-CPU machine sees itself oversubscribed when it is
 * not. That errs on the side this signal exists for (sleep rather than
 * spin), and costs a wait a futex wake-up (a few microseconds) where it
 * would have seen the change spinning.
 */

/* A spin samples only once it has lasted this long: long enough that one
 * sample (open, read and close of /proc/loadavg, a few microseconds) adds
 * at most about a quarter to the spin, and that the hand-offs the spin
 * exists for (sections in a held scope) end before it and never sample
 * (docs/design/runs/2026-12-06-wait-constants.md). It is
 * well below TT__PREEMPT_NS (100 us), which is how long a descheduled
 * waiter takes to notice that it was; this signal is for the waiter that
 * still runs while the thread it waits for does not. */
#ifndef TT__OVERSUB_AFTER_NS
#define TT__OVERSUB_AFTER_NS 20000ull
#endif
/* Oversubscribed means more than cpus + TT__OVERSUB_MARGIN runnable threads.
 * The count is a snapshot that includes the sampler, the thread it waits
 * for when that one runs, and any kernel worker that happens to be
 * runnable: on a quiet machine one or two extra are common. A margin of 2
 * is the smallest that leaves quiet runs as fast as without the signal
 * while it still stops spins under load
 * (docs/design/runs/2026-12-06-wait-constants.md). */
#ifndef TT__OVERSUB_MARGIN
#define TT__OVERSUB_MARGIN 2
#endif
/* At most one sample per this long per process: a few microseconds per
 * 10 ms is under 0.1 % of one CPU even when spins never stop; and the answer of a sample holds
 * for this long, as long as a descheduled waiter's window (TT__STARVED_NS). */
#define TT__OVERSUB_EVERY_NS 10000000ull

/* The earliest time (tt__mono_ns) of the next sample; the thread whose
 * compare-exchange moves it takes the sample. */
static _Atomic uint64_t oversub_next_ns;
/* The last sample said oversubscribed: until this time spinners take that
 * answer without reading /proc. Both words are hints: no other data is
 * published through them, so every access is relaxed; a spinner that reads
 * a stale value spins at most one clock check longer, or sleeps one wait
 * early. */
static _Atomic uint64_t oversub_until_ns;

/* Test hook: when set, the runnable count and the CPU count come from
 * here, not from /proc and the process (relaxed: set by a test before its
 * spins, in the same thread, and only ever a hint). */
static _Atomic bool runnable_hooked;
static _Atomic long runnable_hook_running;
static _Atomic unsigned runnable_hook_cpus;
/* Samples taken, for the tests (relaxed: a statistic). */
static _Atomic uint64_t oversub_samples;

long tt__loadavg_parse_running(const char *s)
{
    if (!s)
        return -1;
    /* Three load averages: non-empty fields, each followed by spaces. */
    for (int f = 0; f < 3; f++) {
        if (*s == '\0' || *s == ' ')
            return -1;
        while (*s != '\0' && *s != ' ')
            s++;
        if (*s != ' ')
            return -1;
        while (*s == ' ')
            s++;
    }
    /* running/total, both decimal; a count that does not fit in a long is
     * not a count this file can hold, so the line is unknown, not huge. */
    long running = 0;
    const char *d = s;
    for (; *s >= '0' && *s <= '9'; s++) {
        int digit = *s - '0';
        if (running > (LONG_MAX - digit) / 10)
            return -1;
        running = running * 10 + digit;
    }
    if (s == d || *s != '/')
        return -1;
    s++;
    d = s;
    long total = 0;
    for (; *s >= '0' && *s <= '9'; s++) {
        int digit = *s - '0';
        if (total > (LONG_MAX - digit) / 10)
            return -1;
        total = total * 10 + digit;
    }
    if (s == d || (*s != ' ' && *s != '\n' && *s != '\0'))
        return -1;
    return running;
}

/* Runnable threads on the machine now, the reader included (the fourth
 * field of /proc/loadavg, the kernel's nr_running at the read), or -1 when
 * unknown (no /proc in this container, a line this parser does not know).
 * No stdio and no allocation: a spinning waiter may run anywhere, and one
 * read returns the whole line (the kernel formats it at once). */
static long runnable_now(void)
{
    char buf[128];
    int fd;
    do
        fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
    while (fd < 0 && errno == EINTR);
    if (fd < 0)
        return -1;
    ssize_t n;
    do
        n = read(fd, buf, sizeof buf - 1);
    while (n < 0 && errno == EINTR);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    return tt__loadavg_parse_running(buf);
}

/* Whether the thread calling at `now` takes the sample of the window that
 * *next_ns ends: the one whose compare-exchange moves the window on (relaxed:
 * the exchange elects a sampler and orders nothing else). The others keep
 * the answer they have. */
static bool sample_due(_Atomic uint64_t *next_ns, uint64_t now)
{
    uint64_t next = atomic_load_explicit(next_ns, memory_order_relaxed);
    return now >= next &&
           atomic_compare_exchange_strong_explicit(next_ns, &next, now + TT__OVERSUB_EVERY_NS,
                                                   memory_order_relaxed, memory_order_relaxed);
}

/* Whether the machine had more runnable threads than this process's CPUs
 * at the last sample, sampling now when the last one is older than
 * TT__OVERSUB_EVERY_NS and no other thread is taking it. An unknown count
 * says no: the spin goes on as it would without this signal. */
static bool machine_oversubscribed(uint64_t now)
{
    if (!sample_due(&oversub_next_ns, now))
        return now < atomic_load_explicit(&oversub_until_ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&oversub_samples, 1, memory_order_relaxed);
    long running;
    unsigned cpus;
    if (atomic_load_explicit(&runnable_hooked, memory_order_relaxed)) {
        running = atomic_load_explicit(&runnable_hook_running, memory_order_relaxed);
        cpus = atomic_load_explicit(&runnable_hook_cpus, memory_order_relaxed);
    } else {
        running = runnable_now();
        cpus = tt__cpu_count_cached();
    }
    if (running < 0 || (unsigned long)running <= cpus + TT__OVERSUB_MARGIN)
        return false;
    atomic_store_explicit(&oversub_until_ns, now + TT__OVERSUB_EVERY_NS, memory_order_relaxed);
    return true;
}

/*
 * How a root's region ends (exec.c, region_end): which of its threads
 * reaches the runtime's end-of-region barrier last, since that one pays
 * for the release.
 *
 * libgomp throttles every wait of the process to 100 polls once it manages
 * more threads than CPUs (gomp_managed_threads > gomp_available_cpus, both
 * internal). Then the caller waits for the other participants in a join of
 * the library's (TT__END_LEAD_WAITS): in libgomp's barrier it would sleep.
 * The process's thread count stands for libgomp's, sampled from
 * /proc/self/status at most every TT__OVERSUB_EVERY_NS by the thread that
 * moves the window (a read costs tens of microseconds; one root in 10 ms
 * pays it). A thread that is not libgomp's makes the count high: the join
 * then runs where libgomp does not throttle, which costs a root one cache
 * line and changes whose spin budget the caller follows, nothing more.
 *
 * Otherwise, where the runtime's last arriver always makes a system call
 * (`last_wakes`, libgomp: it stores the new generation, which releases the
 * spinning threads at once, and then calls futex_wake whether anyone sleeps
 * or not), the other participants wait a little for the caller
 * (TT__END_LEAD_FIRST), so that one of them makes that call after the
 * caller was let go.
 *
 * On an oversubscribed machine (the runnable signal above) neither: the
 * join's spin makes a second thread's steady roots slower there, and a
 * spin for the caller's sake is a CPU taken from someone who may need it
 * (docs/design/runs/2026-12-06-wait-constants.md). Relaxed: hints, as above.
 */
static _Atomic uint64_t threads_next_ns;
static _Atomic uint32_t threads_seen;

/* Test hook: when not 0, the process's thread count (a test process may
 * hold threads of its harness's that are not libgomp's). */
static _Atomic uint32_t threads_hook;

uint32_t tt__test_threads_hook(uint32_t n)
{
    return atomic_exchange_explicit(&threads_hook, n, memory_order_relaxed);
}

/* The cost of a futex wake that finds nobody asleep: what libgomp's last
 * arriver at a barrier pays. It swings with the host (0.1 us in one phase
 * of the development VM, 1.1 us in another: a PVM guest's system calls),
 * so it is sampled, not assumed: three calls, the least taken (one may be
 * interrupted), beside the thread count (relaxed: a hint). */
static _Atomic uint64_t wake_ns_seen;
static _Atomic uint32_t wake_probe_word;

/* Test hook: when not 0, the cost taken for a wake call, in ns. */
static _Atomic uint64_t wake_ns_hook;

uint64_t tt__test_wake_ns_hook(uint64_t ns)
{
    return atomic_exchange_explicit(&wake_ns_hook, ns, memory_order_relaxed);
}

static void sample_wake(void)
{
    uint64_t least = UINT64_MAX;
    for (int i = 0; i < 3; i++) {
        uint64_t t0 = tt__mono_ns();
        tt__futex_wake(&wake_probe_word, 1);
        uint64_t d = tt__mono_ns() - t0;
        if (d < least)
            least = d;
    }
    atomic_store_explicit(&wake_ns_seen, least, memory_order_relaxed);
}

bool tt__wake_dear(void)
{
    uint64_t ns = atomic_load_explicit(&wake_ns_hook, memory_order_relaxed);
    if (ns == 0)
        ns = atomic_load_explicit(&wake_ns_seen, memory_order_relaxed);
    return ns >= TT__WAKE_DEAR_NS;
}

enum tt__region_end tt__region_end_order(bool last_wakes)
{
    return tt__region_end_order_at(last_wakes, tt__mono_ns());
}

enum tt__region_end tt__region_end_order_at(bool last_wakes, uint64_t now)
{
    if (sample_due(&threads_next_ns, now)) {
        atomic_store_explicit(&threads_seen, tt__process_threads(), memory_order_relaxed);
        if (last_wakes)
            sample_wake();
    }
    uint32_t n = atomic_load_explicit(&threads_hook, memory_order_relaxed);
    if (n == 0)
        n = atomic_load_explicit(&threads_seen, memory_order_relaxed);
    /* 0: unknown, taken for "libgomp does not throttle". */
    bool throttled = n > tt__cpu_count_cached();
    if (!throttled && !last_wakes)
        return TT__END_BARRIER;
    if (machine_oversubscribed(now))
        return TT__END_BARRIER;
    return throttled ? TT__END_LEAD_WAITS : TT__END_LEAD_FIRST;
}

/*
 * The widest root region this thread has opened. A region wider than any
 * before it on this thread makes the runtime start team threads (libgomp
 * keeps a thread's team between its regions), and the root's end then
 * waits in the runtime's barrier alone (TT__END_BARRIER), as raw OpenMP's
 * would. A new team thread starts on its parent's CPU, wakes the parent
 * and is preempted by it, and a load balancer does not move a thread that
 * ran a moment ago; a caller that spun in the library's join (or waited
 * for its members to wait for it) kept the new thread off its only CPU
 * until a tick while the other CPU idled, milliseconds where raw OpenMP
 * takes tens of microseconds (docs/design/runs/2026-12-06-wait-constants.md).
 * libgomp's own barrier, throttled there, sleeps after 100 polls and
 * lets the new thread run. A thread whose team was made by the
 * application's own regions pays the barrier once, on its first root.
 */
static TT__TLS_HOT unsigned region_width_seen;

bool tt__region_new_team(unsigned width)
{
    if (width <= region_width_seen)
        return false;
    region_width_seen = width;
    return true;
}

/*
 * A wait that follows a wake call of its own. The threads it woke take a
 * futex wake-up to come back (tens of microseconds of scheduling delay, as
 * for libgomp's team), so the leader's join after a section issued to
 * sleeping members spins past TT__OVERSUB_AFTER_NS and takes the window's
 * sample there, on the path of the section's end: if a member arrives
 * while the leader reads /proc/loadavg, it waits for the read, which
 * shows in the first section after a sleep
 * (docs/design/runs/2026-12-06-wait-constants.md). Taking the sample right after
 * the wake call costs the same read, but while the members wake: the
 * leader's own part of the section and the read both end well before a
 * woken thread can arrive. The answer is the one the join would have
 * had (the woken threads are runnable, and counted, either way), and the
 * join then takes it from the window without reading. A wait that would
 * not spin that long (passive, or throttled to TT__THROTTLED_POLLS, a few
 * microseconds) never samples, so nothing is read for it.
 */
void tt__wait_woke(const tt__wait_policy *pol)
{
    if (pol->throttled || pol->spin_polls <= tt__throttled_polls())
        return;
    (void)machine_oversubscribed(tt__mono_ns());
}

/* A spin that gives up because someone may be starving: count why (`ctr`,
 * one of stats' preemptions or starving) and open the pool's window, in
 * which its idle waits spin only the throttled budget (relaxed: counters
 * and a hint, nothing is published through them). */
static void starve_window(tt__wait_stats *stats, _Atomic uint64_t *ctr, uint64_t now)
{
    atomic_fetch_add_explicit(ctr, 1, memory_order_relaxed);
    atomic_store_explicit(&stats->starved_until_ns, now + TT__STARVED_NS, memory_order_relaxed);
}

uint64_t tt__wait_polls(const tt__wait_policy *pol)
{
    /* A crowded wait does not poll: the thread it waits for shares this
     * CPU and runs only once this one yields or sleeps. */
    if (pol->crowded)
        return 0;
    const uint64_t thr = tt__throttled_polls();
    return pol->throttled && pol->spin_polls > thr ? thr : pol->spin_polls;
}

bool tt__wait_spin_ne(_Atomic uint32_t *word, uint32_t old, const tt__wait_policy *pol,
                      tt__wait_stats *stats)
{
    uint64_t polls = tt__wait_polls(pol);
    const uint64_t thr = tt__throttled_polls();
    uint64_t last = 0, start = 0;
    /* No yields: the budget is 0 (passive), or this wait gives the CPU
     * away at once because someone is being starved. */
    bool no_yields = pol->spin_polls == 0;
    if (polls >= TT__CLOCK_EVERY) {
        last = start = tt__mono_ns();
        if (pol->yield_every && stats &&
            start < atomic_load_explicit(&stats->starved_until_ns, memory_order_relaxed)) {
            if (polls > thr)
                polls = thr;
            no_yields = true;
        }
    }
    uint64_t i;
    for (i = 0; i < polls; i++) {
        if (atomic_load_explicit(word, memory_order_acquire) != old)
            return true;
        tt__cpu_relax();
        if (pol->yield_every && (i % pol->yield_every) == pol->yield_every - 1)
            sched_yield();
        if ((i & (TT__CLOCK_EVERY - 1)) == TT__CLOCK_EVERY - 1) {
            uint64_t now = tt__mono_ns();
            /* Descheduled: the CPU is wanted elsewhere, maybe by the
             * thread this wait is for (the seed's "throttled after a waiter
             * was descheduled"). Oversubscribed: more runnable threads than
             * CPUs, one of which may be the thread this wait is for, kept
             * from a CPU by this very spin. Either way: stop spinning,
             * sleep without yields (a yield on a full run queue may cost a
             * slice) and throttle the pool's idle waits for a while. */
            bool descheduled = now - last > TT__PREEMPT_NS;
            if (descheduled ||
                (now - start > TT__OVERSUB_AFTER_NS && machine_oversubscribed(now))) {
                if (stats)
                    starve_window(stats, descheduled ? &stats->preemptions : &stats->starving,
                                  now);
                no_yields = true;
                break;
            }
            if (pol->spin_ns && now - start > pol->spin_ns)
                break;
            if (pol->stop && atomic_load_explicit(pol->stop, memory_order_relaxed) != pol->stop_val)
                break;
            last = now;
        }
    }
    unsigned yields = no_yields ? 0u : TT__YIELDS;
    uint64_t before = yields && (polls >= TT__CLOCK_EVERY || pol->crowded) ? tt__mono_ns() : 0;
    for (unsigned y = 0; y < yields; y++) {
        if (atomic_load_explicit(word, memory_order_acquire) != old)
            return true;
        sched_yield();
        if (before) {
            /* A yield that gave the CPU away for long: other threads want
             * it, so sleep now instead of yielding on (each yield may cost
             * a scheduler slice on a loaded machine). */
            uint64_t now = tt__mono_ns();
            if (now - before > TT__PREEMPT_NS)
                break;
            before = now;
        }
    }
    if (atomic_load_explicit(word, memory_order_acquire) != old)
        return true;
    /* The slow path (the caller sleeps next): count what this wait spun. */
    if (stats && i)
        atomic_fetch_add_explicit(&stats->spun_polls, i, memory_order_relaxed);
    return false;
}

uint32_t tt__event_wait_ne(tt__event *ev, uint32_t old, const tt__wait_policy *pol,
                           tt__wait_stats *stats, _Atomic uint64_t *slept_ctr)
{
    uint32_t v;
    if (tt__wait_spin_ne(&ev->word, old, pol, stats))
        return atomic_load_explicit(&ev->word, memory_order_acquire);
    for (;;) {
        atomic_fetch_add_explicit(&ev->sleepers, 1, memory_order_seq_cst);
        v = atomic_load_explicit(&ev->word, memory_order_seq_cst);
        if (v == old) {
            if (slept_ctr)
                atomic_fetch_add_explicit(slept_ctr, 1, memory_order_relaxed);
            tt__futex_wait(&ev->word, old);
        }
        atomic_fetch_sub_explicit(&ev->sleepers, 1, memory_order_relaxed);
        v = atomic_load_explicit(&ev->word, memory_order_acquire);
        if (v != old)
            return v;
    }
}

bool tt__event_post(tt__event *ev, uint32_t value, tt__wait_stats *stats)
{
    atomic_store_explicit(&ev->word, value, memory_order_seq_cst);
    if (atomic_load_explicit(&ev->sleepers, memory_order_seq_cst) != 0) {
        if (stats)
            atomic_fetch_add_explicit(&stats->wakes, 1, memory_order_relaxed);
        tt__futex_wake(&ev->word, INT_MAX);
        return true;
    }
    return false;
}

void tt__event_bump(tt__event *ev, tt__wait_stats *stats)
{
    atomic_fetch_add_explicit(&ev->word, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&ev->sleepers, memory_order_seq_cst) != 0) {
        if (stats)
            atomic_fetch_add_explicit(&stats->wakes, 1, memory_order_relaxed);
        tt__futex_wake(&ev->word, INT_MAX);
    }
}

void tt__join_done(tt__join *j, tt__wait_stats *stats)
{
    /* acq_rel: release publishes the task's writes to the waiter; acquire
     * is not needed for data but keeps the RMW chain ordered for TSan. */
    uint32_t old = atomic_fetch_sub_explicit(&j->word, 1, memory_order_acq_rel);
    /* Join counts: one completion per pending task, never one too many
     * (always checked: one compare on the value the RMW returned). */
    TT__INVARIANT((old & ~TT__JOIN_SLEEPING) >= 1, "join: a completion with none pending");
    if ((old & ~TT__JOIN_SLEEPING) == 1 && (old & TT__JOIN_SLEEPING)) {
        /* The waiter sleeps (or is about to): wake it. After the decrement
         * the waiter may already have returned and its frame be reused; the
         * futex call reads no user memory, and a stray wake on a reused
         * address is harmless because every futex waiter loops. */
        if (stats)
            atomic_fetch_add_explicit(&stats->wakes, 1, memory_order_relaxed);
        tt__futex_wake(&j->word, 1);
    }
}

void tt__join_wait(tt__join *j, const tt__wait_policy *pol, tt__wait_stats *stats)
{
    uint32_t v = atomic_load_explicit(&j->word, memory_order_acquire);
    while (v != 0) {
        /* Spin while the count moves; each change restarts nothing but the
         * comparison value. */
        if (tt__wait_spin_ne(&j->word, v, pol, stats)) {
            v = atomic_load_explicit(&j->word, memory_order_acquire);
            continue;
        }
        /* Announce the sleep in the word itself, so that the completer that
         * brings the count to zero sees it in its own RMW. */
        if (!atomic_compare_exchange_strong_explicit(&j->word, &v, v | TT__JOIN_SLEEPING,
                                                     memory_order_acq_rel,
                                                     memory_order_acquire))
            continue;
        v |= TT__JOIN_SLEEPING;
        while ((v & ~TT__JOIN_SLEEPING) != 0) {
            if (stats)
                atomic_fetch_add_explicit(&stats->join_sleeps, 1, memory_order_relaxed);
            tt__futex_wait(&j->word, v);
            v = atomic_load_explicit(&j->word, memory_order_acquire);
        }
        v &= ~TT__JOIN_SLEEPING;
    }
}

/* Test hook: one spin, throttled or not, on a word that never changes;
 * returns whether the word changed (never). A throttled spin ends after
 * TT__THROTTLED_POLLS polls whatever `spin_polls` says, which the test
 * proves by asking for 2^40 polls under a timeout. */
bool tt__test_spin_once(uint64_t spin_polls, bool throttled)
{
    _Atomic uint32_t word = 0;
    tt__wait_policy pol = {.spin_polls = spin_polls, .throttled = throttled};
    return tt__wait_spin_ne(&word, 0, &pol, NULL);
}

/* Test hook: one spin of `spin_polls` polls on a word that never changes,
 * counted in a set of counters kept between calls (zeroed when `reset`),
 * with the yield cadence of an idle member when `yield_every` is not 0.
 * Returns the spin's wall time in nanoseconds and the counters' preemptions
 * and starved_until_ns. A waiter that is descheduled during the spin stops
 * it, and a later idle spin (yield_every != 0) within TT__STARVED_NS spins
 * the throttled budget. */
uint64_t tt__test_spin_stats(uint64_t spin_polls, uint32_t yield_every, bool reset,
                             uint64_t *preemptions, uint64_t *starved_until,
                             uint64_t *spun)
{
    static tt__wait_stats st;
    if (reset)
        memset(&st, 0, sizeof st);
    _Atomic uint32_t word = 0;
    tt__wait_policy pol = {.spin_polls = spin_polls, .yield_every = yield_every};
    uint64_t t0 = tt__mono_ns();
    (void)tt__wait_spin_ne(&word, 0, &pol, &st);
    uint64_t dt = tt__mono_ns() - t0;
    *preemptions = atomic_load_explicit(&st.preemptions, memory_order_relaxed);
    *starved_until = atomic_load_explicit(&st.starved_until_ns, memory_order_relaxed);
    *spun = atomic_load_explicit(&st.spun_polls, memory_order_relaxed);
    return dt;
}

/* Test hook: replace the runnable count and the CPU count that the
 * oversubscription check compares (on: `running` runnable threads on
 * `cpus` CPUs; running < 0 reads as an unreadable /proc), or go back to
 * /proc and the process's CPUs (on false). Either way the cached answer
 * and the sampling window are forgotten, so the next spin past
 * TT__OVERSUB_AFTER_NS samples afresh. Returns the samples taken so far. */
uint64_t tt__test_runnable_hook(bool on, long running, unsigned cpus)
{
    atomic_store_explicit(&runnable_hook_running, running, memory_order_relaxed);
    atomic_store_explicit(&runnable_hook_cpus, cpus, memory_order_relaxed);
    atomic_store_explicit(&runnable_hooked, on, memory_order_relaxed);
    atomic_store_explicit(&oversub_until_ns, 0, memory_order_relaxed);
    atomic_store_explicit(&oversub_next_ns, 0, memory_order_relaxed);
    return atomic_load_explicit(&oversub_samples, memory_order_relaxed);
}

/* Test hook: the samples of the runnable count taken so far. */
uint64_t tt__test_oversub_samples(void)
{
    return atomic_load_explicit(&oversub_samples, memory_order_relaxed);
}

/* Test hook: one spin of `spin_polls` polls on a word that never changes,
 * with fresh counters. Returns its wall time in nanoseconds and the
 * counters' starving, preemptions, starved_until_ns and spun_polls (the
 * polls spun before the spin gave up). */
uint64_t tt__test_spin_starving(uint64_t spin_polls, uint64_t *starving, uint64_t *preemptions,
                                uint64_t *starved_until, uint64_t *spun)
{
    tt__wait_stats st;
    memset(&st, 0, sizeof st);
    _Atomic uint32_t word = 0;
    tt__wait_policy pol = {.spin_polls = spin_polls};
    uint64_t t0 = tt__mono_ns();
    (void)tt__wait_spin_ne(&word, 0, &pol, &st);
    uint64_t dt = tt__mono_ns() - t0;
    *starving = atomic_load_explicit(&st.starving, memory_order_relaxed);
    *preemptions = atomic_load_explicit(&st.preemptions, memory_order_relaxed);
    *starved_until = atomic_load_explicit(&st.starved_until_ns, memory_order_relaxed);
    *spun = atomic_load_explicit(&st.spun_polls, memory_order_relaxed);
    return dt;
}

void tt__lead_first_wait(_Atomic uint32_t *done, uint64_t spin_polls, tt__wait_stats *stats)
{
    uint64_t polls = spin_polls < TT__LEAD_FIRST_POLLS ? spin_polls : TT__LEAD_FIRST_POLLS;
    /* One look even under a budget of 0 (a caller that is done is not
     * late). */
    for (uint64_t i = 0;; i++) {
        if (atomic_load_explicit(done, memory_order_acquire))
            return;
        if (i == polls)
            break;
        tt__cpu_relax();
    }
    /* The caller is still at work: the barrier's own wait takes over.
     * Counted on this slow path only: a counter on the fast one would be a
     * shared line written by every participant on every root. */
    if (stats)
        atomic_fetch_add_explicit(&stats->lead_late, 1, memory_order_relaxed);
}
