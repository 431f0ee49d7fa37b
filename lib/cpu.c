/*
 * cpu.c -- the process's CPUs and thread limits.
 *
 * Every layer above asks these questions (how many CPUs the process may
 * use, how wide a pool may be, whether the kernel will start n more
 * threads), and none of them needs anything of a pool to answer: the
 * answers come from the kernel (/proc, sched_getaffinity, getrlimit) and
 * from OpenMP's own settings through the backend table. So they live
 * here, below the crews (crew.c, host_team.c) and the pools (pool.c) that
 * ask them, and this file calls nothing above it.
 *
 * Nothing here allocates: /proc and /sys are read with plain open/read on
 * stack buffers, so that an allocation that fails can never read as a
 * limit.
 */
#include "cpu.h"
#include "test_hooks.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <sys/resource.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <time.h>

/* ------------------------------------------------------------------------ */
/* CPUs and limits                                                           */
/* ------------------------------------------------------------------------ */

unsigned tt__affinity_cpus(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0)
            return (unsigned)n;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned)n : 1u;
}

bool tt__process_cpus(cpu_set_t *set)
{
    if (tt__backend_get()->places_cpus(set))
        return true;
    CPU_ZERO(set);
    return sched_getaffinity(0, sizeof *set, set) == 0;
}

static _Atomic unsigned cpu_count_hint;


unsigned tt__cpu_count_cached(void)
{
    unsigned n = atomic_load_explicit(&cpu_count_hint, memory_order_relaxed);
    if (n == 0) {
        cpu_set_t set;
        n = tt__process_cpus(&set) && CPU_COUNT(&set) > 0 ? (unsigned)CPU_COUNT(&set)
                                                           : tt__affinity_cpus();
        atomic_store_explicit(&cpu_count_hint, n, memory_order_relaxed);
    }
    return n;
}

/* Widths above this are refused even when the system would allow them:
 * the member list of a gang lives on the entry's stack. */
#define TT__MAX_WIDTH 4096u

/* Read a small /proc or /sys file into buf (NUL-terminated) without
 * allocating: fopen would allocate, and an allocation that fails there must
 * not read as a limit. Returns the bytes read, or -1. */
static ssize_t read_small(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t have = 0;
    while (have + 1 < len) {
        ssize_t n = read(fd, buf + have, len - 1 - have);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        have += (size_t)n;
    }
    close(fd);
    buf[have] = 0;
    return (ssize_t)have;
}

static unsigned long read_threads_max(void)
{
    char buf[64];
    unsigned long v = 0;
    if (read_small("/proc/sys/kernel/threads-max", buf, sizeof buf) <= 0 ||
        sscanf(buf, "%lu", &v) != 1)
        v = 0;
    return v;
}

/* The most threads a pool may ask for: our own cap, OpenMP's thread limit,
 * the kernel's threads-max, and the process's RLIMIT_NPROC. */
unsigned tt__width_limit(const tt__backend *be)
{
    unsigned lim = TT__MAX_WIDTH;
    unsigned omp = be->thread_limit();
    if (omp < lim)
        lim = omp;
    unsigned long tmax = read_threads_max();
    if (tmax > 0 && tmax < lim)
        lim = (unsigned)tmax;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NPROC, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < lim)
        lim = (unsigned)rl.rlim_cur;
    return lim;
}

/* Threads of the process now, from /proc (0 when unknown). */
unsigned tt__process_threads(void)
{
    char buf[4096];
    if (read_small("/proc/self/status", buf, sizeof buf) <= 0)
        return 0;
    const char *t = strstr(buf, "\nThreads:");
    unsigned n = 0;
    if (!t || sscanf(t + 9, "%u", &n) != 1)
        return 0;
    return n;
}

/* ------------------------------------------------------------------------ */
/* Room for more threads                                                     */
/* ------------------------------------------------------------------------ */
/*
 * libgomp ends the process when the kernel refuses one of its threads
 * (gomp_guard.c). Before the library makes libgomp start threads, it checks
 * here that they can be had, against every limit the kernel applies to
 * clone():
 *
 *  - kernel.threads-max against the threads of the whole system (the
 *    fourth field of /proc/loadavg counts them);
 *  - RLIMIT_NPROC against the tasks of the calling process's real user,
 *    every process of that user counted (the kernel counts them per user,
 *    not per process). Only for a user other than root, whom the kernel
 *    exempts. The count walks /proc: in a PID namespace it misses the
 *    user's tasks outside it and may then say yes when the kernel says no
 *    (the retry in gomp_guard.c is then all that is left);
 *  - the pids cgroup (v2) of the process and its ancestors: pids.max
 *    against pids.current.
 *
 * Nothing here allocates (plain open/read/getdents64 on stack buffers), so
 * no allocation failure can read as a limit. The count is a snapshot:
 * another process may take the room between the check and the start.
 */
/* What does not change while the process runs, read once: threads-max
 * and the pids cgroup's directory (empty: no cgroup v2 pids limit seen). */
static unsigned long room_tmax;
static char room_cg[512];
static pthread_once_t room_once = PTHREAD_ONCE_INIT;

static void room_init(void)
{
    room_tmax = read_threads_max();
    char buf[512];
    if (read_small("/proc/self/cgroup", buf, sizeof buf) <= 0 || strncmp(buf, "0::/", 4) != 0)
        return; /* cgroup v1, or none: not read */
    char *path = buf + 3;
    char *nl = strchr(path, '\n');
    if (nl)
        *nl = 0;
    if (strcmp(path, "/") == 0)
        path[0] = 0;
    snprintf(room_cg, sizeof room_cg, "%s", path);
}

#define ROOM_NONE ((long)(LONG_MAX / 4))

/* Threads-max less the threads of the whole system (the fourth field of
 * /proc/loadavg counts them). */
static long slack_threads_max(void)
{
    char buf[128];
    unsigned long run, total;
    if (room_tmax == 0 || read_small("/proc/loadavg", buf, sizeof buf) <= 0 ||
        sscanf(buf, "%*s %*s %*s %lu/%lu", &run, &total) != 2)
        return ROOM_NONE;
    return (long)room_tmax - (long)total;
}

struct tt__dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

/* Tasks of real user `uid`, from /proc/<pid>/status; 0 when unknown. */
static unsigned long user_tasks(uid_t uid)
{
    int dfd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return 0;
    unsigned long sum = 0;
    char dents[4096];
    for (;;) {
        long n = syscall(SYS_getdents64, dfd, dents, sizeof dents);
        if (n <= 0)
            break;
        for (long off = 0; off < n;) {
            struct tt__dirent64 *d = (struct tt__dirent64 *)(dents + off);
            off += d->d_reclen;
            if (d->d_name[0] < '1' || d->d_name[0] > '9')
                continue;
            char path[64], buf[2048];
            snprintf(path, sizeof path, "/proc/%.20s/status", d->d_name);
            if (read_small(path, buf, sizeof buf) <= 0)
                continue;
            const char *u = strstr(buf, "\nUid:");
            const char *t = strstr(buf, "\nThreads:");
            unsigned long ruid, th;
            if (u && t && sscanf(u + 5, "%lu", &ruid) == 1 && sscanf(t + 9, "%lu", &th) == 1 &&
                ruid == (unsigned long)uid)
                sum += th;
        }
    }
    close(dfd);
    return sum;
}

/* RLIMIT_NPROC less the tasks of the real user (root is exempt). */
static long slack_nproc(void)
{
    struct rlimit rl;
    uid_t uid = getuid();
    if (uid == 0 || getrlimit(RLIMIT_NPROC, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return ROOM_NONE;
    unsigned long have = user_tasks(uid);
    if (have == 0)
        have = tt__process_threads();
    return rl.rlim_cur > (rlim_t)ROOM_NONE ? ROOM_NONE : (long)rl.rlim_cur - (long)have;
}

/* pids.max less pids.current, the least over the cgroup and its parents. */
static long slack_cgroup(void)
{
    long least = ROOM_NONE;
    if (room_cg[0] == 0)
        return least;
    char path[sizeof room_cg];
    memcpy(path, room_cg, sizeof path);
    for (;;) {
        char f[sizeof room_cg + 40], v[64];
        unsigned long max, cur;
        snprintf(f, sizeof f, "/sys/fs/cgroup%s/pids.max", path);
        if (read_small(f, v, sizeof v) > 0 && sscanf(v, "%lu", &max) == 1) {
            snprintf(f, sizeof f, "/sys/fs/cgroup%s/pids.current", path);
            if (read_small(f, v, sizeof v) > 0 && sscanf(v, "%lu", &cur) == 1 &&
                (long)max - (long)cur < least)
                least = (long)max - (long)cur;
        }
        char *slash = strrchr(path, '/');
        if (!slash)
            return least;
        *slash = 0;
    }
}

static _Atomic long room_refusals_at; /* test hook: refuse the Nth check */

void tt__test_room_refuse(long nth)
{
    atomic_store_explicit(&room_refusals_at, nth, memory_order_relaxed);
}

/* A check that found the nearest limit `slack` threads away stands for
 * ROOM_FAR_NS: within that time another check for at most slack / 4
 * threads reads nothing (one clock read), when that slack was at least
 * ROOM_FAR_MIN (near a limit every check reads: the library's own threads
 * started since would not show in a stale slack). Reading the limits costs 10 to
 * 100 us (root; threads-max, /proc/loadavg, the pids cgroup) and a few ms
 * under a finite RLIMIT_NPROC (every process of the user is read), which a
 * nested tt_external would otherwise pay on every call. What it misses:
 * three quarters of the room taken by other processes within 100 ms (the
 * retry in gomp_guard.c covers a transient refusal). */
#define ROOM_FAR_NS 100000000ull
#define ROOM_FAR_MIN 256 /* below this, every check reads the limits */
static _Atomic uint64_t room_far_until;
static _Atomic long room_far_slack;

static uint64_t room_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int tt__threads_room(unsigned need)
{
    if (need == 0)
        return TT_OK;
    long v = atomic_load_explicit(&room_refusals_at, memory_order_relaxed);
    if (v > 0 && atomic_fetch_sub_explicit(&room_refusals_at, 1, memory_order_relaxed) == 1)
        return TT_EAGAIN;
    uint64_t now = room_now();
    long far = atomic_load_explicit(&room_far_slack, memory_order_relaxed);
    if (far >= ROOM_FAR_MIN && (long)need * 4 <= far &&
        now < atomic_load_explicit(&room_far_until, memory_order_relaxed))
        return TT_OK;
    pthread_once(&room_once, room_init);
    long slack = slack_threads_max();
    long c = slack_cgroup();
    if (c < slack)
        slack = c;
    if (slack >= (long)need) {
        c = slack_nproc();
        if (c < slack)
            slack = c;
    }
    if (slack < (long)need)
        return TT_EAGAIN;
    /* Two stores a reader may see apart: at worst it uses the other
     * check's slack for the other check's 100 ms. */
    atomic_store_explicit(&room_far_slack, slack, memory_order_relaxed);
    atomic_store_explicit(&room_far_until, now + ROOM_FAR_NS, memory_order_relaxed);
    return TT_OK;
}

/* A root region at `width` on the calling thread: the first time a thread
 * opens one at this width or wider, libgomp starts up to width - 1 threads
 * for its team (it cannot say how many it holds, so all are counted); after
 * that it keeps them and the root path makes no check.
 *
 * The one thread-local variable of the library, and why: what it caches is
 * a property of libgomp's own per-thread state (the calling thread's team,
 * which lives and dies with the thread). A process-wide table keyed by
 * thread id would go stale when the id is reused by a new thread that has
 * no team, and would cost a lookup on every root; this costs one load. A
 * team that the application's own narrower regions shrank afterwards grows
 * again unchecked (the retry in gomp_guard.c still covers a transient
 * refusal). */
static TT__TLS_HOT unsigned room_width;

int tt__region_room(unsigned width)
{
    if (width <= room_width)
        return TT_OK;
    int rc = tt__threads_room(width - 1);
    if (rc == TT_OK)
        room_width = width;
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Moving a thread off a CPU                                                 */
/* ------------------------------------------------------------------------ */

bool tt__pin_allowed(void) { return getenv("LIKWID_PIN") == NULL; }

/* ------------------------------------------------------------------------ */
/* A participant pinned by its scope                                         */
/* ------------------------------------------------------------------------ */

/* The mask the calling thread had before a scope pinned it to one CPU
 * (NULL: not pinned by a scope now). A tt_external's callee runs with it:
 * the participant's pin is the scope's placement, not the callee's. */
static _Thread_local const cpu_set_t *tls_own_mask;

bool tt__cpu_pin(unsigned cpu, cpu_set_t *saved)
{
    if (cpu >= CPU_SETSIZE || !tt__pin_allowed() ||
        sched_getaffinity(0, sizeof *saved, saved) != 0)
        return false;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0)
        return false;
    if (!tls_own_mask)
        tls_own_mask = saved;
    return true;
}

void tt__cpu_unpin(const cpu_set_t *saved)
{
    (void)sched_setaffinity(0, sizeof *saved, saved);
    if (tls_own_mask == saved)
        tls_own_mask = NULL;
}

bool tt__cpu_callee_unpin(cpu_set_t *pinned, const cpu_set_t **own)
{
    *own = tls_own_mask;
    if (!tls_own_mask || !tt__pin_allowed() ||
        sched_getaffinity(0, sizeof *pinned, pinned) != 0 ||
        sched_setaffinity(0, sizeof *tls_own_mask, tls_own_mask) != 0)
        return false;
    tls_own_mask = NULL;
    return true;
}

void tt__cpu_callee_repin(const cpu_set_t *pinned, const cpu_set_t *own)
{
    (void)sched_setaffinity(0, sizeof *pinned, pinned);
    tls_own_mask = own;
}

bool tt__cpu_move_off(int cpu)
{
    if (cpu < 0 || cpu >= CPU_SETSIZE || !tt__pin_allowed())
        return false;
    cpu_set_t mine, other;
    CPU_ZERO(&mine);
    if (sched_getaffinity(0, sizeof mine, &mine) != 0 || CPU_COUNT(&mine) < 2 ||
        !CPU_ISSET(cpu, &mine))
        return false;
    other = mine;
    CPU_CLR(cpu, &other);
    if (sched_setaffinity(0, sizeof other, &other) != 0)
        return false;
    /* The same mask as a moment ago: nothing can refuse it that let the
     * narrower one through. */
    (void)sched_setaffinity(0, sizeof mine, &mine);
    return true;
}

bool tt__cpu_move_due(_Atomic uint64_t *next_ns, uint64_t every_ns)
{
    uint64_t now = tt__mono_ns();
    uint64_t next = atomic_load_explicit(next_ns, memory_order_relaxed);
    return now >= next &&
           atomic_compare_exchange_strong_explicit(next_ns, &next, now + every_ns,
                                                   memory_order_relaxed, memory_order_relaxed);
}
