/* docs/design/runs/2026-12-07-root-cost.md: a root's time, main thread or a second one.
 * root_time MODE N ISO WHERE [ITERS]: MODE 1 raw omp parallel, 0 a token and tt_fork of 2 jobs;
 * N roots; ISO the pool isolates shares; WHERE 0 main thread, 1 a second thread (main joins),
 * 2 a second thread beside the main thread's docked team; ITERS the kernel's length (100: 0.15 us).
 * Prints ns per root. Both sides call root_kernel with the same argument. */
#include <threadteam.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
typedef struct { double *out; int iters; } karg;
static int mode, N, iso, where;
static tt_pool *pool;
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e6+t.tv_nsec*1e-3;}
__attribute__((noinline)) void root_kernel(const karg *a, unsigned k) { double v = k; for (int i = 0; i < a->iters; i++) v = v * 0.999 + 1; a->out[k * 8] = v; }
static void job(void *a, unsigned i, tt_exec *c) { (void)c; root_kernel(a, i); }
__attribute__((noinline)) void one_tt(const karg *a) { tt_exec ex; if (tt_exec_init(&ex, pool, 2)) abort(); if (tt_fork(&ex, 2, job, (void *)a)) abort(); }
__attribute__((noinline)) void one_omp(const karg *a) {
#pragma omp parallel num_threads(2)
    root_kernel(a, (unsigned)omp_get_thread_num());
}
static double res;
static karg A;
static void *thr(void *x) {
    (void)x;
    for (int i = 0; i < 200; i++) { if (mode) one_omp(&A); else one_tt(&A); }
    double t0 = now();
    for (int i = 0; i < N; i++) { if (mode) one_omp(&A); else one_tt(&A); }
    res = (now() - t0) * 1e3 / N;
    return NULL;
}
int main(int argc, char **argv) {
    mode = atoi(argv[1]); N = atoi(argv[2]); iso = atoi(argv[3]); where = atoi(argv[4]);
    A.iters = argc > 5 ? atoi(argv[5]) : 100;
    A.out = aligned_alloc(64, 64 * 4);
    if (!mode) {
    tt_pool_attr *a; tt_pool_attr_create(&a); tt_pool_attr_set_threads(a, 2);
    tt_pool_attr_set_isolate_shares(a, iso);
    if (tt_pool_create(&pool, a)) abort();
    }
    if (where == 2) { one_omp(&A); if (!mode) one_tt(&A); }
    if (where) { pthread_t t; pthread_create(&t, NULL, thr, NULL); pthread_join(t, NULL); }
    else thr(NULL);
    printf("%.0f\n", res);
    if (pool) tt_pool_destroy(pool);
    return 0;
}
