/*
 * tt_proc.h -- small process helpers shared by the test programs: the
 * Check programs (through tt_test.h) and the stress programs, which do not
 * link Check. Everything is static inline; nothing here uses threadteam.
 */
#ifndef TT_PROC_H
#define TT_PROC_H

#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <time.h>

/* Monotonic clock in nanoseconds. */
static inline uint64_t th_proc_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Sleep `us` microseconds, resuming after signals. */
static inline void th_proc_sleep_us(unsigned us)
{
    struct timespec ts = {(time_t)(us / 1000000u), (long)(us % 1000000u) * 1000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Threads of this process now (-1 when /proc is not there). */
static inline int th_proc_count_threads(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

/* CPUs of the calling thread's affinity set (at least 1). */
static inline unsigned th_proc_cpus(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return (unsigned)CPU_COUNT(&set);
    return 1;
}

#endif /* TT_PROC_H */
