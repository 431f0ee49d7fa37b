/* docs/design/runs/2026-12-07-inline-cost.md: the root probe (a second pthread). */
/* Root cost probe: from a second pthread, N roots of a 2-job tt_fork (or raw omp parallel). */
#include <threadteam.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
static volatile double sink[2][8];
static int mode, N, iso;
static tt_pool *pool;
static void tiny(int k) { double v = k; for (int i = 0; i < 50; i++) v = v * 0.999 + 1; sink[k][0] = v; }
static void job(void *a, unsigned i, tt_exec *c) { (void)a; (void)c; tiny((int)i); }
__attribute__((noinline)) void one_tt(void) { tt_exec ex; tt_exec_init(&ex, pool, 2); tt_fork(&ex, 2, job, NULL); }
__attribute__((noinline)) void one_omp(void) {
#pragma omp parallel num_threads(2)
    tiny(omp_get_thread_num());
}
static void *thr(void *a) {
    (void)a;
    for (int i = 0; i < 50; i++) { if (mode) one_omp(); else one_tt(); } /* warm */
    for (int i = 0; i < N; i++) { if (mode) one_omp(); else one_tt(); }
    return NULL;
}
int main(int argc, char **argv) {
    mode = atoi(argv[1]); N = atoi(argv[2]); iso = argc > 3 ? atoi(argv[3]) : 0;
    tt_pool_attr *a; tt_pool_attr_create(&a); tt_pool_attr_set_threads(a, 2);
    tt_pool_attr_set_isolate_shares(a, iso);
    tt_pool_create(&pool, a);
    pthread_t t; pthread_create(&t, NULL, thr, NULL); pthread_join(t, NULL);
    tt_pool_destroy(pool);
    return 0;
}
