/*
 * wait.h -- the operating-system side of the waits: the futex system call.
 * Only wait.c and the backends include it. The monotonic clock the waits
 * read (tt__mono_ns) is in internal.h, for cpu.c reads it too.
 */
#ifndef TT_WAIT_H
#define TT_WAIT_H

#include <stdint.h>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#define TT__HAVE_FUTEX 1
#else
#define TT__HAVE_FUTEX 0
#endif

#endif /* TT_WAIT_H */
