/*
 * backend_serial.c -- the backend without threads. It is always built: a
 * --disable-parallel build uses it for every pool, and a parallel build
 * uses it for width-1 pools, which never dispatch (every entry on a budget
 * of 1 runs inline).
 */
#include "internal.h"

static int serial_start(tt__crew *c)
{
    (void)c;
    return TT_ENOTSUP; /* a serial pool has no crew */
}

static void serial_join(tt__crew *c) { (void)c; }

static int serial_level1_thread_num(void) { return -1; }

static void serial_external_enter(unsigned width, int saved[4])
{
    (void)width;
    (void)saved;
}

static void serial_external_leave(const int saved[4]) { (void)saved; }

static unsigned serial_thread_limit(void) { return UINT32_MAX; }

const tt__backend tt__backend_serial = {
    .name = "serial",
    .start = serial_start,
    .join = serial_join,
    .level1_thread_num = serial_level1_thread_num,
    .external_enter = serial_external_enter,
    .external_leave = serial_external_leave,
    .thread_limit = serial_thread_limit,
};

const tt__backend *tt__backend_get(void)
{
#if TT_HAVE_OPENMP
    return &tt__backend_omp;
#else
    return &tt__backend_serial;
#endif
}
