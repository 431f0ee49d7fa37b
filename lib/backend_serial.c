/*
 * backend_serial.c -- the backend without threads. It is always built: a
 * --disable-parallel build uses it for every pool, and a parallel build
 * uses it for width-1 pools, which never dispatch (every entry on a budget
 * of 1 runs inline).
 */
#include "backend.h"

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

#if !TT_HAVE_OPENMP
/*
 * The application's OpenMP, seen from a library without any.
 *
 * A --disable-parallel library makes no OpenMP call of its own, but the
 * application that links it may be an OpenMP program, and "the same API"
 * includes the one-thread rule of shares (c-api: "A share is one thread to
 * OpenMP"): an `omp parallel` in a fork job forms one thread, an orphaned
 * `omp for` in a job run inside the application's region binds to a team
 * of one (not to the application's team, whose other threads never reach
 * it: with the inline slot of a width-1 pool that was a deadlock). So the
 * serial backend confines a share the way the OpenMP backend does, through
 * the runtime's entry points referenced weakly: where the process has no
 * OpenMP runtime they are NULL and a share is just called. GOMP_parallel
 * and GOMP_taskgroup_* are libgomp's ABI, which LLVM libomp provides too.
 * The prototypes are written here because this file is built without
 * omp.h; omp_sched_t is an enum, passed as int.
 */
extern int omp_get_level(void) __attribute__((weak));
extern int omp_get_active_level(void) __attribute__((weak));
extern int omp_get_num_threads(void) __attribute__((weak));
extern int omp_get_max_threads(void) __attribute__((weak));
extern void omp_set_num_threads(int n) __attribute__((weak));
extern int omp_get_max_active_levels(void) __attribute__((weak));
extern void omp_set_max_active_levels(int n) __attribute__((weak));
extern int omp_get_dynamic(void) __attribute__((weak));
extern void omp_set_dynamic(int on) __attribute__((weak));
extern void omp_get_schedule(int *kind, int *chunk) __attribute__((weak));
extern void omp_set_schedule(int kind, int chunk) __attribute__((weak));
extern void GOMP_parallel(void (*fn)(void *), void *data, unsigned num_threads,
                          unsigned flags) __attribute__((weak));
extern void GOMP_taskgroup_start(void) __attribute__((weak));
extern void GOMP_taskgroup_end(void) __attribute__((weak));

static bool app_omp(void)
{
    return omp_get_level && omp_get_active_level && omp_get_num_threads && omp_get_max_threads &&
           omp_set_num_threads && omp_get_max_active_levels && omp_set_max_active_levels &&
           omp_get_dynamic && omp_set_dynamic && omp_get_schedule && omp_set_schedule &&
           GOMP_parallel && GOMP_taskgroup_start && GOMP_taskgroup_end;
}

static void serial_icvs_save(tt__icvs *v)
{
    memset(v, 0, sizeof *v);
    if (!app_omp())
        return;
    v->nthreads = omp_get_max_threads();
    v->mal = omp_get_max_active_levels();
    v->dyn = omp_get_dynamic();
    omp_get_schedule(&v->sched, &v->chunk);
}

static void serial_icvs_restore(const tt__icvs *v)
{
    if (!app_omp())
        return;
    tt__icvs now;
    serial_icvs_save(&now);
    if (now.nthreads != v->nthreads)
        omp_set_num_threads(v->nthreads);
    if (now.mal != v->mal)
        omp_set_max_active_levels(v->mal);
    if (now.dyn != v->dyn)
        omp_set_dynamic(v->dyn);
    if (now.sched != v->sched || now.chunk != v->chunk)
        omp_set_schedule(v->sched, v->chunk);
}

typedef struct app_call {
    void (*fn)(void *ctx);
    void *ctx;
} app_call;

static void app_confined(void *data)
{
    app_call *k = data;
    omp_set_num_threads(1);
    omp_set_max_active_levels(omp_get_active_level());
    k->fn(k->ctx);
}

/* The OpenMP backend's omp_isolate, in the application's runtime. */
static void serial_isolate(void (*fn)(void *ctx), void *ctx)
{
    if (!app_omp()) {
        fn(ctx); /* no OpenMP in the process: already one thread */
        return;
    }
    bool one = omp_get_num_threads() == 1 && omp_get_max_threads() == 1 &&
               omp_get_max_active_levels() <= omp_get_active_level();
    if (one || omp_get_level() == 0) {
        tt__icvs saved;
        serial_icvs_save(&saved);
        if (!one) {
            omp_set_num_threads(1);
            omp_set_max_active_levels(0);
        }
        if (omp_get_level() == 0) {
            fn(ctx);
        } else {
            /* A team of one that outlives the share: its tasks complete
             * here, as at the end of a region of its own. */
            GOMP_taskgroup_start();
            fn(ctx);
            GOMP_taskgroup_end();
        }
        serial_icvs_restore(&saved);
        return;
    }
    /* Inside the application's region: one nested region of one thread. */
    app_call k = {fn, ctx};
    GOMP_parallel(app_confined, &k, 1, 0);
}

static void serial_complete(void (*fn)(void *ctx), void *ctx)
{
    if (!app_omp()) {
        fn(ctx);
        return;
    }
    GOMP_taskgroup_start();
    fn(ctx);
    GOMP_taskgroup_end();
}
#else
/* The serial backend of a parallel build serves no share (every pool runs
 * on the OpenMP backend there). */
static void serial_isolate(void (*fn)(void *ctx), void *ctx) { fn(ctx); }
static void serial_complete(void (*fn)(void *ctx), void *ctx) { fn(ctx); }
static void serial_icvs_save(tt__icvs *v) { memset(v, 0, sizeof *v); }
static void serial_icvs_restore(const tt__icvs *v) { (void)v; }
#endif

/* A share sequence in one isolation: the start ICVs are read again by the
 * sequence (NULL), which is what the confinement above leaves in force. */
typedef struct seq_call {
    void (*fn)(void *ctx, const tt__icvs *start);
    void *ctx;
} seq_call;

static void seq_trampoline(void *p)
{
    seq_call *c = p;
    c->fn(c->ctx, NULL);
}

static void serial_isolate_seq(void (*fn)(void *ctx, const tt__icvs *start), void *ctx)
{
    seq_call c = {fn, ctx};
    serial_isolate(seq_trampoline, &c);
}
static unsigned serial_max_threads(void) { return 1; }
static unsigned serial_region(unsigned width, tt__region_fn fn, void *ctx)
{
    (void)width;
    fn(ctx, 0, 1);
    return 1;
}
static unsigned serial_region_line(unsigned width, tt__line_fn fn, const tt__line *line)
{
    (void)width;
    fn(line, 0, 1);
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
    .complete = serial_complete,
    .icvs_save = serial_icvs_save,
    .icvs_restore = serial_icvs_restore,
    .max_threads = serial_max_threads,
    .region = serial_region,
    .region_line = serial_region_line,
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
