/*
 * ext_probe.c -- what a full-width tt_external costs the library itself:
 * a token per call and tt_external of an empty callee on a pool of the
 * process's default width, against the plain call of the same callee
 * (performance.md and placement.md quote it: 102 ns before the quick
 * frame, 79 ns with it, on host vm).
 *
 *   gcc -O2 -g -fopenmp -Ibuild/include docs/design/runs/probes/ext_probe.c \
 *       build/lib/.libs/libthreadteam.a -o ext_probe -ldl
 *   ./ext_probe 300000
 *
 * Five runs of N calls each; `callgrind` on the same program counts the
 * instructions (1285 a call before, 1032 with the quick frame).
 */
#include <threadteam.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile int sink;

static void empty(void *a, unsigned w)
{
    (void)a;
    sink += (int)w;
}

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1000000;
    tt_pool_attr *a;
    tt_pool *pool;
    if (tt_pool_attr_create(&a) != TT_OK || tt_pool_create(&pool, a) != TT_OK)
        return 1;
    tt_pool_attr_destroy(a);
    unsigned w = tt_pool_width(pool);
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now_ns();
        for (int i = 0; i < n; i++) {
            tt_exec ex;
            if (tt_exec_init(&ex, pool, w) != TT_OK || tt_external(&ex, empty, NULL) != TT_OK)
                return 2;
        }
        double t1 = now_ns();
        for (int i = 0; i < n; i++)
            empty(NULL, w);
        double t2 = now_ns();
        printf("width %u: tt_external of an empty callee %.1f ns a call, the plain call %.1f ns\n", w,
               (t1 - t0) / n, (t2 - t1) / n);
    }
    return tt_pool_destroy(pool) == TT_OK ? 0 : 3;
}
