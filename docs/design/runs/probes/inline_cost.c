/* docs/design/runs/2026-12-07-inline-cost.md: the inline-entry probe. Build against a build
 * tree: gcc -O2 -g -fopenmp -pthread -Ibuild/include inline_cost.c build/lib/.libs/libthreadteam.a */
/* Instruction counts of inline entries: recursion of depth D, each level a
 * budget-1 fork of 2 jobs (or a plain call), under a budget-1 child token. */
#include <threadteam.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <omp.h>

static volatile unsigned long leaves;
static int mode; /* 0 fork, 1 plain, 2 ranges, 3 reduce-ish (for_ranges), 4 omp task */
typedef struct { int d; } A;

__attribute__((noinline)) void plain_rec(int d) {
    if (d == 0) { leaves++; return; }
    plain_rec(d - 1); plain_rec(d - 1);
}
static void job(void *arg, unsigned i, tt_exec *child) {
    (void)i; int d = *(int *)arg;
    if (d == 0) { leaves++; return; }
    int dd = d - 1;
    tt_fork(child, 2, job, &dd);
}
static void rbody(void *arg, size_t b, size_t e) { (void)arg; leaves += e - b; }
static void rjob(void *arg, unsigned i, tt_exec *child) {
    (void)i; int n = *(int *)arg;
    for (int k = 0; k < n; k++) { tt_exec r; tt_exec_reborrow(child, &r); tt_for_ranges(&r, 2, 1, rbody, NULL); }
}
static void sec(void *arg, tt_section *s) { (void)arg; (void)s; leaves++; }
static void scopefn(void *arg, tt_scope *sc) { (void)arg; tt_scope_run(sc, sec, NULL); }
__attribute__((noinline)) void run_scope(tt_exec *c, int n) {
    for (int k = 0; k < n; k++) { tt_exec r; tt_exec_reborrow(c, &r); tt_team_scope(&r, scopefn, NULL); }
}
__attribute__((noinline)) void task_rec(int d) {
    if (d == 0) { leaves++; return; }
    #pragma omp task if(0)
    task_rec(d - 1);
    #pragma omp task if(0)
    task_rec(d - 1);
}
__attribute__((noinline)) void run_fork(tt_exec *c, int d) { tt_fork(c, 2, job, &d); }
__attribute__((noinline)) void run_plain(int d) { plain_rec(d); plain_rec(d); }
__attribute__((noinline)) void run_ranges(tt_exec *c, int n) { rjob(&n, 0, c); }
__attribute__((noinline)) void run_task(int d) { task_rec(d); task_rec(d); }
static int D;
static void top(void *arg, unsigned i, tt_exec *child) {
    (void)arg; if (i) return;
    if (mode == 0) run_fork(child, D);
    else if (mode == 1) run_plain(D);
    else if (mode == 2) run_ranges(child, 1 << D);
    else if (mode == 5) run_scope(child, 1 << D);
    else if (mode == 4) { _Pragma("omp parallel num_threads(1)") _Pragma("omp single") run_task(D); }
}
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc, char **argv) {
    mode = atoi(argv[1]); D = atoi(argv[2]); int iso = argc > 3 ? atoi(argv[3]) : 0;
    tt_pool_attr *a; tt_pool_attr_create(&a); tt_pool_attr_set_threads(a, 2);
    tt_pool_attr_set_isolate_shares(a, iso);
    tt_pool *p; if (tt_pool_create(&p, a)) return 1;
    tt_exec ex; tt_exec_init(&ex, p, 2);
    double t0 = now();
    int rc = tt_fork(&ex, 2, top, NULL);
    double t1 = now();
    if (getenv("TIME")) fprintf(stderr, "mode %d iso %d: %.2f ns per node\n", mode, iso, (t1 - t0) * 1e9 / ((2 << D) - 1));
    printf("rc %d leaves %lu\n", rc, leaves);
    tt_pool_destroy(p); tt_pool_attr_destroy(a);
    return 0;
}
