/*
 * omp_runtime.c -- which OpenMP runtime answers the library's calls
 * (libgomp or LLVM's libomp), and whether the application's calls land in
 * the same one (TT_ERUNTIME otherwise). Below the OpenMP backend
 * (backend_omp.c), which asks it; compiled only with OpenMP.
 */
#include "backend.h"

#if TT_HAVE_OPENMP

#include <dlfcn.h>
#include <link.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>

/* Which runtime the library's omp_* calls land in: LLVM's libomp (also
 * Intel's libiomp5) or GCC's libgomp. Decided by the module that defines
 * the omp_get_level the library calls, so that a GCC-built library loaded
 * by a clang-built application (libomp's GOMP layer answering) counts as
 * libomp too. Two differences matter here: libomp keeps the workers of a
 * region in its process-wide thread pool after the region ends (a private
 * crew's members are plain threads there, plain_host_main in backend_omp.c),
 * and its host `teams` construct leaves its thread_limit behind
 * (omp_callee_call, backend_omp.c). */
static _Atomic int runtime_kind; /* 0: not known yet, 1: libgomp, 2: libomp */

bool tt__omp_runtime_is_libomp(void)
{
    int k = atomic_load_explicit(&runtime_kind, memory_order_relaxed);
    if (k == 0) {
        Dl_info di;
        k = 1;
        if (dladdr((void *)&omp_get_level, &di) && di.dli_fname &&
            (strstr(di.dli_fname, "libomp") || strstr(di.dli_fname, "libiomp")))
            k = 2;
        else if (dlsym(RTLD_DEFAULT, "__kmpc_fork_call") && !dlsym(RTLD_DEFAULT, "GOMP_teams_reg"))
            k = 2; /* linked statically into the program: no libgomp at all */
        atomic_store_explicit(&runtime_kind, k, memory_order_relaxed);
    }
    return k == 2;
}

/* ------------------------------------------------------------------------ */
/* Two runtimes in one process                                               */
/* ------------------------------------------------------------------------ */
/*
 * One set of threads means that the library's omp_* and GOMP_* calls land
 * in the application's runtime. They do not when the library's own
 * references bind elsewhere than the application's: a clang/libomp
 * application that dlopen()s the GCC-built library with RTLD_DEEPBIND (the
 * library's dependency libgomp answers it, libomp the application), or a
 * library linked statically or -Bsymbolic against a runtime of its own.
 * Both would then run: the pool's regions on one runtime's threads, the
 * application's on the other's, and neither runtime sees the other's
 * threads. tt_pool_create refuses then (TT_ERUNTIME).
 *
 * The application's runtime is what the program's global scope gives for
 * omp_get_num_threads (dlsym on the main program's handle: the program, its
 * dependencies and LD_PRELOAD, in that order); the library's is where its
 * own reference to omp_get_num_threads points. Where the library is part
 * of the program itself (libthreadteam.a linked in) both references bind in
 * the same scope, and the address may be a PLT entry of the program, so
 * nothing is compared. A program without OpenMP of its own has no runtime
 * to disagree with. Decided once per process.
 */
static _Atomic int runtimes_state; /* 0: not known yet, 1: one runtime, 2: two */

static const char *module_name(const struct link_map *lm)
{
    if (lm && lm->l_name && lm->l_name[0])
        return lm->l_name;
    return "the program";
}

/* The advice of TT_ERUNTIME's line: the rebuild that makes the two runtimes
 * one, told from the runtimes' file names. */
static const char *runtime_fix(const char *mine, const char *app)
{
    bool mine_gomp = strstr(mine, "libgomp") != NULL;
    bool app_omp = strstr(app, "libomp") != NULL || strstr(app, "libiomp") != NULL;
    bool mine_omp = strstr(mine, "libomp") != NULL || strstr(mine, "libiomp") != NULL;
    bool app_gomp = strstr(app, "libgomp") != NULL;
    if (mine_gomp && app_omp)
        return "Rebuild threadteam with the application's compiler (./configure CC=clang "
               "links LLVM libomp), or load this GCC-built library without RTLD_DEEPBIND so "
               "that its OpenMP calls land in libomp's GOMP layer.";
    if (mine_omp && app_gomp)
        return "Rebuild threadteam with the application's compiler (./configure CC=gcc links "
               "GCC's libgomp).";
    return "Build threadteam with the compiler that builds the application, and load it "
           "without RTLD_DEEPBIND and without an OpenMP runtime linked into it.";
}

int tt__runtime_check(void)
{
    int s = atomic_load_explicit(&runtimes_state, memory_order_acquire);
    if (s == 0) {
        s = 1;
        Dl_info self, mine, app;
        struct link_map *lm_self = NULL, *lm_mine = NULL, *lm_app = NULL, *lm_main = NULL;
        void *main_h = dlopen(NULL, RTLD_LAZY);
        void *app_fn = main_h ? dlsym(main_h, "omp_get_num_threads") : NULL;
        if (main_h && app_fn && dlinfo(main_h, RTLD_DI_LINKMAP, &lm_main) == 0 &&
            dladdr1((void *)&tt__runtime_check, &self, (void **)&lm_self, RTLD_DL_LINKMAP) &&
            lm_self && lm_self != lm_main &&
            dladdr1((void *)&omp_get_num_threads, &mine, (void **)&lm_mine, RTLD_DL_LINKMAP) &&
            dladdr1(app_fn, &app, (void **)&lm_app, RTLD_DL_LINKMAP) && lm_mine && lm_app &&
            lm_mine != lm_app) {
            s = 2;
            fprintf(stderr,
                    "threadteam: tt_pool_create: two OpenMP runtimes in one process: the "
                    "library (%s) calls the OpenMP runtime in %s, the application calls the one "
                    "in %s; the pool is not built (TT_ERUNTIME). %s\n",
                    module_name(lm_self), module_name(lm_mine), module_name(lm_app),
                    runtime_fix(module_name(lm_mine), module_name(lm_app)));
        }
        if (main_h)
            dlclose(main_h);
        atomic_store_explicit(&runtimes_state, s, memory_order_release);
    }
    return s == 2 ? TT_ERUNTIME : TT_OK;
}

#endif /* TT_HAVE_OPENMP */
