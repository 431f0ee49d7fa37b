/*
 * dlmod.c -- a small module, linked against libthreadteam.so, that
 * test_lifecycle dlopen()s, calls and dlclose()s. The library is linked
 * with -z nodelete, so it stays mapped after the module is unloaded: cached
 * members (variant 1) and live pools (variant 2) keep running its code
 * while the process goes on.
 *
 *   dlmod_run(0): two dedicated pools (thread_name, widths 2 and 3), each
 *                 built, used by a tt_for_ranges that covers every index
 *                 once, and destroyed (its threads joined): nothing is
 *                 left running.
 *   dlmod_run(1): a default pool of width 2, used and destroyed: its crew
 *                 is left in the process-wide cache.
 *   dlmod_run(2): a default pool of width 2, used and left alive.
 *   dlmod_lib_path(): the file that tt_pool_create resolved to (so the
 *                 test knows the module uses the shared library).
 *
 * Returns 0 on success, a positive step number on failure. Built as a
 * libtool module: check_LTLIBRARIES = dlmod.la, dlmod_la_LDFLAGS = -module
 * -rpath /nowhere -avoid-version, dlmod_la_LIBADD = ../lib/libthreadteam.la.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <threadteam.h>

#include <dlfcn.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#define DLMOD_EXPORT __attribute__((visibility("default")))

int dlmod_run(int variant) DLMOD_EXPORT;
const char *dlmod_lib_path(void) DLMOD_EXPORT;

enum { N = 4096 };
static _Atomic unsigned char hits[N];

static void body(void *arg, size_t b, size_t e)
{
    (void)arg;
    for (size_t i = b; i < e && i < N; i++)
        atomic_fetch_add(&hits[i], 1);
}

static int use(tt_pool *p)
{
    for (size_t i = 0; i < N; i++)
        atomic_store(&hits[i], 0);
    tt_exec ex;
    if (tt_exec_init(&ex, p, tt_pool_width(p)) != TT_OK)
        return 1;
    if (tt_for_ranges(&ex, N, 16, body, NULL) != TT_OK)
        return 2;
    for (size_t i = 0; i < N; i++)
        if (atomic_load(&hits[i]) != 1)
            return 3;
    return 0;
}

static int build(tt_pool **p, unsigned width, const char *name)
{
    tt_pool_attr *a = NULL;
    if (tt_pool_attr_create(&a) != TT_OK)
        return 1;
    int rc = tt_pool_attr_set_threads(a, width);
    if (rc == TT_OK && name)
        rc = tt_pool_attr_set_thread_name(a, name);
    /* Short waits: the test machine may have 2 cores. */
    if (rc == TT_OK)
        rc = tt_pool_attr_set_spin_polls(a, 20000);
    if (rc == TT_OK)
        rc = tt_pool_attr_set_idle_spin(a, 100000);
    if (rc == TT_OK)
        rc = tt_pool_create(p, a);
    tt_pool_attr_destroy(a);
    return rc == TT_OK ? 0 : 1;
}

int dlmod_run(int variant)
{
    tt_pool *p = NULL;
    switch (variant) {
    case 0: {
        /* Dedicated pools only: their destroy joins every member, so
         * nothing of the module's is left running. */
        if (build(&p, 2, "dlmod"))
            return 10;
        if (use(p))
            return 11;
        if (tt_pool_destroy(p) != TT_OK)
            return 12;
        if (build(&p, 3, "dlmod3"))
            return 13;
        if (use(p))
            return 14;
        if (tt_pool_destroy(p) != TT_OK)
            return 15;
        return 0;
    }
    case 1:
        if (build(&p, 2, NULL))
            return 20;
        if (use(p))
            return 21;
        if (tt_pool_destroy(p) != TT_OK)
            return 22;
        return 0;
    case 2:
        if (build(&p, 2, NULL))
            return 30;
        if (use(p))
            return 31;
        return 0; /* left alive on purpose */
    default:
        return 99;
    }
}

const char *dlmod_lib_path(void)
{
    Dl_info info;
    memset(&info, 0, sizeof info);
    if (dladdr((void *)&tt_pool_create, &info) == 0)
        return NULL;
    return info.dli_fname;
}
