/*
 * backend_serial.c -- the backend without threads. It is always built: a
 * --disable-parallel build uses it for every pool, and a parallel build
 * uses it for width-1 pools, which never dispatch (every entry on a budget
 * of 1 runs inline).
 */
#include "internal.h"

#include <string.h>

static int serial_start(tt__crew *c)
{
    (void)c;
    return TT_ENOTSUP; /* a serial pool has no crew */
}

static void serial_join(tt__crew *c) { (void)c; }

static int serial_level1_thread_num(void) { return -1; }

static bool serial_in_parallel(void) { return false; }
static void serial_confine(void) {}
/* Without OpenMP every thread already is one thread to OpenMP. */
static void serial_isolate(void (*fn)(void *ctx), void *ctx) { fn(ctx); }
static void serial_isolate_seq(void (*fn)(void *ctx, const tt__icvs *start), void *ctx)
{
    fn(ctx, NULL);
}
static void serial_icvs_save(tt__icvs *v) { memset(v, 0, sizeof *v); }
static void serial_icvs_restore(const tt__icvs *v) { (void)v; }
static unsigned serial_max_threads(void) { return 1; }
static unsigned serial_region(unsigned width, tt__region_fn fn, void *ctx)
{
    (void)width;
    fn(ctx, 0, 1);
    return 1;
}
static bool serial_places_cpus(cpu_set_t *set)
{
    (void)set;
    return false;
}

static void serial_external_enter(unsigned width, int saved[4])
{
    (void)width;
    (void)saved;
}

static void serial_external_leave(const int saved[4]) { (void)saved; }

static unsigned serial_thread_limit(void) { return UINT32_MAX; }

/* No threads, so no callee threads to recognise. */
static void *serial_callee_mark(const void *pool)
{
    (void)pool;
    return NULL;
}
static void serial_callee_unmark(void *mark) { (void)mark; }
static void serial_callee_call(void *mark, void (*fn)(void *ctx), void *ctx)
{
    (void)mark;
    fn(ctx);
}
static bool serial_callee_of(const void *pool)
{
    (void)pool;
    return false;
}

static bool serial_last_arriver_wakes(void)
{
    return false; /* no barriers */
}

const tt__backend tt__backend_serial = {
    .name = "serial",
    .start = serial_start,
    .join = serial_join,
    .level1_thread_num = serial_level1_thread_num,
    .in_parallel = serial_in_parallel,
    .confine = serial_confine,
    .isolate = serial_isolate,
    .isolate_seq = serial_isolate_seq,
    .complete = serial_isolate,
    .icvs_save = serial_icvs_save,
    .icvs_restore = serial_icvs_restore,
    .max_threads = serial_max_threads,
    .region = serial_region,
    .places_cpus = serial_places_cpus,
    .external_enter = serial_external_enter,
    .external_leave = serial_external_leave,
    .thread_limit = serial_thread_limit,
    .callee_mark = serial_callee_mark,
    .callee_unmark = serial_callee_unmark,
    .callee_call = serial_callee_call,
    .callee_of = serial_callee_of,
    .last_arriver_wakes = serial_last_arriver_wakes,
};

const tt__backend *tt__backend_get(void)
{
#if TT_HAVE_OPENMP
    return &tt__backend_omp;
#else
    return &tt__backend_serial;
#endif
}

#if !TT_HAVE_OPENMP
/* No OpenMP calls of the library's own: no runtime to disagree with. */
int tt__runtime_check(void) { return TT_OK; }
#endif
