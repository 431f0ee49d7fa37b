/*
 * wait.h -- the operating-system side of the waits: the futex system call
 * and a monotonic clock. Only wait.c and the backends include it.
 */
#ifndef TT_WAIT_H
#define TT_WAIT_H

#include <stdint.h>
#include <time.h>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#define TT__HAVE_FUTEX 1
#else
#define TT__HAVE_FUTEX 0
#endif

static inline uint64_t tt__mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif /* TT_WAIT_H */
