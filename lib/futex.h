/*
 * futex.h -- the operating-system side of the waits: the futex system call
 * and the headers it needs. Only wait.c and the files that make system
 * calls of their own include it (crew.c, pool.c, backend_omp.c); the waits
 * themselves are declared in wait.h.
 */
#ifndef TT_FUTEX_H
#define TT_FUTEX_H

#include <stdint.h>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#define TT__HAVE_FUTEX 1
#else
#define TT__HAVE_FUTEX 0
#endif

#endif /* TT_FUTEX_H */
