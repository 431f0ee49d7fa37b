/*
 * libomp_dl.c -- an application compiled with clang -fopenmp (LLVM libomp)
 * that dlopen()s libthreadteam.so (tests/test_two_runtimes.sh).
 *
 *   libomp_dl LIB deepbind EXPECT   dlopen(LIB, RTLD_NOW | RTLD_DEEPBIND)
 *   libomp_dl LIB global EXPECT     dlopen(LIB, RTLD_NOW)
 *
 * EXPECT is "refuse" or "run". With RTLD_DEEPBIND a GCC-built library
 * binds its omp_* and GOMP_* calls to its own libgomp while this program's
 * regions run on libomp: two runtimes, two sets of threads, which
 * tt_pool_create must refuse (TT_ERUNTIME, both runtimes named on stderr).
 * Loaded normally, its calls land in libomp (the application's runtime):
 * the pool is built, a 2-job fork runs, and the process keeps the threads
 * that the application's own region made (one set of threads).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <dlfcn.h>
#include <omp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "threadteam.h"

static unsigned count_threads(void)
{
    unsigned n = 0;
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

static _Atomic unsigned jobs_ran;

static void job(void *arg, unsigned i, tt_exec *child)
{
    (void)arg;
    (void)i;
    (void)child;
    atomic_fetch_add(&jobs_ran, 1);
}

#define SYM(h, name) ((__typeof__(&name))dlsym(h, #name))

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s LIB deepbind|global refuse|run\n", argv[0]);
        return 2;
    }
    const char *lib = argv[1];
    int deep = strcmp(argv[2], "deepbind") == 0;
    int expect_refuse = strcmp(argv[3], "refuse") == 0;
    alarm(60);
    /* The application's own region first: libomp's threads exist. */
    omp_set_dynamic(0);
    unsigned got = 0;
#pragma omp parallel num_threads(2)
    {
        if (omp_get_thread_num() == 0)
            got = (unsigned)omp_get_num_threads();
    }
    if (got != 2) {
        printf("libomp_dl: SKIP: the application's region got %u threads, not 2\n", got);
        return 77;
    }
    unsigned before = count_threads();
    void *h = dlopen(lib, RTLD_NOW | (deep ? RTLD_DEEPBIND : 0));
    if (!h) {
        printf("libomp_dl: FAIL: dlopen(%s): %s\n", lib, dlerror());
        return 1;
    }
    int (*pool_create)(tt_pool **, const tt_pool_attr *) = SYM(h, tt_pool_create);
    int (*pool_destroy)(tt_pool *) = SYM(h, tt_pool_destroy);
    int (*attr_create)(tt_pool_attr **) = SYM(h, tt_pool_attr_create);
    int (*attr_threads)(tt_pool_attr *, unsigned) = SYM(h, tt_pool_attr_set_threads);
    void (*attr_destroy)(tt_pool_attr *) = SYM(h, tt_pool_attr_destroy);
    int (*exec_init)(tt_exec *, tt_pool *, unsigned) = SYM(h, tt_exec_init);
    int (*fork)(tt_exec *, unsigned, tt_job_fn, void *) = SYM(h, tt_fork);
    const char *(*status_name)(int) = SYM(h, tt_status_name);
    if (!pool_create || !pool_destroy || !attr_create || !attr_threads || !attr_destroy ||
        !exec_init || !fork || !status_name) {
        printf("libomp_dl: FAIL: %s lacks the public functions\n", lib);
        return 1;
    }
    tt_pool_attr *a = NULL;
    if (attr_create(&a) != TT_OK || attr_threads(a, 2) != TT_OK) {
        printf("libomp_dl: FAIL: attributes\n");
        return 1;
    }
    tt_pool *p = NULL;
    int rc = pool_create(&p, a);
    attr_destroy(a);
    printf("libomp_dl (%s): tt_pool_create: %s\n", argv[2], status_name(rc));
    if (expect_refuse) {
        if (rc != TT_ERUNTIME || p != NULL) {
            printf("libomp_dl: FAIL: expected TT_ERUNTIME (two OpenMP runtimes), got %s\n",
                   status_name(rc));
            if (rc == TT_OK)
                pool_destroy(p);
            return 1;
        }
        return 0;
    }
    if (rc != TT_OK) {
        printf("libomp_dl: FAIL: expected TT_OK, got %s\n", status_name(rc));
        return 1;
    }
    for (int r = 0; r < 50; r++) {
        tt_exec ex;
        rc = exec_init(&ex, p, 2);
        if (rc == TT_OK)
            rc = fork(&ex, 2, job, NULL);
        if (rc != TT_OK) {
            printf("libomp_dl: FAIL: fork: %s\n", status_name(rc));
            return 1;
        }
    }
    unsigned after = count_threads();
    pool_destroy(p);
    if (atomic_load(&jobs_ran) != 100) {
        printf("libomp_dl: FAIL: %u of 100 jobs ran\n", atomic_load(&jobs_ran));
        return 1;
    }
    if (after != before) {
        printf("libomp_dl: FAIL: %u threads before the library's forks, %u after (a second set "
               "of threads)\n",
               before, after);
        return 1;
    }
    printf("libomp_dl (%s): 100 jobs ran, %u threads before and after\n", argv[2], after);
    return 0;
}
