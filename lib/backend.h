/*
 * backend.h -- the backend table (backend_omp.c, backend_serial.c), its
 * getter tt__backend_get (backend_serial.c) and the runtime checks
 * (omp_runtime.c). Above base.h only. Nothing in this header or below it
 * calls the getter inline: the inline functions that ask the backend live
 * in share.h, the first layer above the backends, so that including a
 * header never makes a call up.
 */
#ifndef TT_BACKEND_H
#define TT_BACKEND_H

#include "base.h"

/* A crew (crew.h): the backend starts and joins its threads. */
typedef struct tt__crew tt__crew;

/* The backend table (BLIS style): the OpenMP backend opens parallel
 * regions; the serial backend has no threads and is always built, so
 * --disable-parallel is the same code with another table. */
typedef void (*tt__region_fn)(void *ctx, unsigned k, unsigned got);

/* Eight words that a region hands its threads by value (region_line). */
typedef struct tt__line {
    uint64_t w[8];
} tt__line;
typedef void (*tt__line_fn)(const tt__line *line, unsigned k, unsigned got);
/* The ICVs that code in a share can set through the OpenMP API (its
 * implicit task's data environment, which ends with its region in
 * OpenMP): nthreads-var, max-active-levels-var, dyn-var,
 * default-device-var, run-sched-var and def-allocator-var. */
typedef struct tt__icvs {
    int nthreads, mal, dyn, dev, sched, chunk;
    uintptr_t alloc;
} tt__icvs;

typedef struct tt__backend {
    const char *name;
    /* Start a private crew's threads on a host thread; every member then
     * runs tt__member_main. */
    int (*start)(struct tt__crew *c);
    /* Join what start created (after every member left tt__member_main). */
    void (*join)(struct tt__crew *c);
    /* The OpenMP thread number at nesting level 1 of the calling thread, or
     * -1 when it is not inside a parallel region. */
    int (*level1_thread_num)(void);
    /* True when the calling thread is inside any parallel region (active or
     * not): its roots cannot open a region on its own team. */
    bool (*in_parallel)(void);
    /* The calling thread's nthreads-var (omp_get_max_threads). */
    unsigned (*max_threads)(void);
    /* Open one parallel region of `width` threads on the calling thread (its
     * own team), dynamic adjustment off for the region only; thread k runs
     * fn(ctx, k, got), got being the team size formed. Returns got. */
    unsigned (*region)(unsigned width, tt__region_fn fn, void *ctx);
    /* region, with two differences for the everyday root (exec_root.c):
     * `line` is copied into the data the runtime hands each thread, so a
     * thread reads the caller's memory once, not a pointer and then what it
     * points to (each a cross-core transfer on the path every root waits
     * for); and the threads start confined (an `omp parallel` in their
     * code gets one thread: the region's max-active-levels-var, which
     * every thread of it inherits, stops at the region's own level), so
     * that no participant writes its own ICVs to get there. The block
     * sits below a gap of the caller's stack, where the caller's next
     * entry pushes no frame (backend_omp.c says why). */
    unsigned (*region_line)(unsigned width, tt__line_fn fn, const tt__line *line);
    /* Confine the calling participant's own OpenMP: an `omp parallel` in a
     * share gets one thread whatever OMP_NESTED, OMP_MAX_ACTIVE_LEVELS or a
     * list-valued OMP_NUM_THREADS say (tt_external is the one door through
     * which a width is handed to such code). Sets the participant's
     * implicit task's nthreads-var, which nothing outside it sees. */
    void (*confine)(void);
    /* Run fn(ctx) on the calling thread as one thread to OpenMP: a team of
     * one (omp_get_num_threads() == 1), so that orphaned worksharing and
     * barriers bind to it, explicit tasks run on this thread, and an
     * `omp parallel` opened inside gets one thread. Every task fn generated
     * is complete when isolate returns, as at the end of a region of its
     * own. Costs a taskgroup when the thread already is one thread to
     * OpenMP inside a team (an earlier isolate, a crew member's life), a
     * few ICV writes outside every region, and one nested one-thread
     * region inside a wider one (backend_omp.c has the figures). */
    void (*isolate)(void (*fn)(void *ctx), void *ctx);
    /* isolate, handing fn the ICVs it starts with where the isolation read
     * them anyway (NULL where it did not), for a sequence of shares in one
     * isolation (tt__share_seq_begin_from). */
    void (*isolate_seq)(void (*fn)(void *ctx, const tt__icvs *start), void *ctx);
    /* Run fn(ctx) and complete every explicit task it generated (and their
     * descendants) before returning, as the end of a region would: for
     * user code whose completion the library reports before the team it
     * runs in ends (a full-width section of a root scope, whose tasks bind
     * to the root's own region). isolate does the same for shares. */
    void (*complete)(void (*fn)(void *ctx), void *ctx);
    /* Read the calling task's settable ICVs, and put back those that
     * differ from a reading (tt__share_seq). */
    void (*icvs_save)(tt__icvs *v);
    void (*icvs_restore)(const tt__icvs *v);
    /* The union of the CPUs of OpenMP's places, when places are defined
     * (OMP_PLACES, or OMP_PROC_BIND, which implies them): false otherwise. */
    bool (*places_cpus)(cpu_set_t *set);
    /* Around tt_external's callback: let exactly `width` threads form one
     * region from the calling thread (nested or its own top-level one), and put things
     * back. */
    void (*external_enter)(unsigned width, int saved[4]);
    void (*external_leave)(const int saved[4]);
    /* The thread limit OpenMP imposes (UINT32_MAX when none). */
    unsigned (*thread_limit)(void);
    /* Around a tt_external callee that runs while the external holds
     * `pool`'s slots: mark the calling thread's data environment, which
     * every region the callee opens inherits (NULL: could not mark), and
     * take the mark off. callee_of: the calling thread runs inside such a
     * callee of `pool` (backend_omp.c says how). */
    void *(*callee_mark)(const void *pool);
    void (*callee_unmark)(void *mark);
    /* Call fn(ctx) as the callee of the external that took `mark` (NULL:
     * unmarked): every region fn opens, at any depth, carries the mark. */
    void (*callee_call)(void *mark, void (*fn)(void *ctx), void *ctx);
    bool (*callee_of)(const void *pool);
    /* True when the last thread to reach a region's end barrier always
     * makes a system call to wake the others, whether any sleeps or not
     * (libgomp): the library then lets a root's caller reach it first
     * (exec.c, region_end). */
    bool (*last_arriver_wakes)(void);
} tt__backend;

extern const tt__backend tt__backend_serial;
#if TT_HAVE_OPENMP
extern const tt__backend tt__backend_omp;
#endif
const tt__backend *tt__backend_get(void);
/* TT_ERUNTIME when the library's OpenMP calls land in another runtime than
 * the application's (backend_omp.c, which names both on stderr once), else
 * TT_OK; TT_OK always without OpenMP. */
int tt__runtime_check(void);
#if TT_HAVE_OPENMP
/* True when the library's omp_* calls land in LLVM's libomp (or Intel's
 * libiomp5), false for GCC's libgomp (omp_runtime.c). */
bool tt__omp_runtime_is_libomp(void);
#endif

#endif /* TT_BACKEND_H */
