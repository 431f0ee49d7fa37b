/* docs/design/runs/2026-12-07-scope-cost.md: a one-section team scope against raw omp parallel. */
/* scope_time MODE N ISO [ITERS]: MODE 1 raw omp parallel, 0 a team scope of one section, 2 tt_fork of 2 jobs.
 * Prints ns per root. Both sides call root_kernel with the same argument. */
#include <threadteam.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
typedef struct { double *out; int iters; } karg;
static int mode, N, iso;
static tt_pool *pool;
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e6+t.tv_nsec*1e-3;}
__attribute__((noinline)) void root_kernel(const karg *a, unsigned k) { double v = k; for (int i = 0; i < a->iters; i++) v = v * 0.999 + 1; a->out[k * 8] = v; }
static void job(void *a, unsigned i, tt_exec *c) { (void)c; root_kernel(a, i); }
static void sec(void *a, tt_section *s) { root_kernel(a, tt_section_rank(s)); }
static void scopefn(void *a, tt_scope *s) { if (tt_scope_run(s, sec, a)) abort(); }
__attribute__((noinline)) void one_tt(const karg *a) { tt_exec ex; if (tt_exec_init(&ex, pool, 2)) abort();
  if (mode == 2) { if (tt_fork(&ex, 2, job, (void *)a)) abort(); } else if (tt_team_scope(&ex, scopefn, (void *)a)) abort(); }
__attribute__((noinline)) void one_omp(const karg *a) {
#pragma omp parallel num_threads(2)
    root_kernel(a, (unsigned)omp_get_thread_num());
}
static double res;
static karg A;
int main(int argc, char **argv) {
    mode = atoi(argv[1]); N = atoi(argv[2]); iso = atoi(argv[3]);
    A.iters = argc > 4 ? atoi(argv[4]) : 100;
    A.out = aligned_alloc(64, 64 * 4);
    if (mode != 1) {
    tt_pool_attr *a; tt_pool_attr_create(&a); tt_pool_attr_set_threads(a, 2);
    tt_pool_attr_set_isolate_shares(a, iso);
    if (tt_pool_create(&pool, a)) abort();
    }
    for (int i = 0; i < 200; i++) { if (mode == 1) one_omp(&A); else one_tt(&A); }
    double t0 = now();
    for (int i = 0; i < N; i++) { if (mode == 1) one_omp(&A); else one_tt(&A); }
    res = (now() - t0) * 1e3 / N;
    printf("%.0f\n", res);
    if (pool) tt_pool_destroy(pool);
    return 0;
}
