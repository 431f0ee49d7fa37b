/* docs/design/runs/2026-12-07-layout-cost.md: from a second pthread, N fork roots (mode 0) or
 * root team scopes of one section (mode 1) on a pool of width 2. */
#include <threadteam.h>
#include <pthread.h>
#include <stdlib.h>
static volatile double sink[4];
static int mode, N;
static tt_pool *pool;
static void tiny(int k) { double v = k; for (int i = 0; i < 50; i++) v = v * 0.999 + 1; sink[k & 3] = v; }
static void job(void *a, unsigned i, tt_exec *c) { (void)a; (void)c; tiny((int)i); }
static void sec(void *a, tt_section *s) { (void)a; tiny((int)tt_section_rank(s)); }
static void scope_fn(void *a, tt_scope *s) { (void)a; if (tt_scope_run(s, sec, NULL)) abort(); }
__attribute__((noinline)) void one(void) {
    tt_exec ex; if (tt_exec_init(&ex, pool, 2)) abort();
    if (mode == 0) { if (tt_fork(&ex, 2, job, NULL)) abort(); }
    else { if (tt_team_scope(&ex, scope_fn, NULL)) abort(); }
}
static void *thr(void *a) { (void)a; for (int i = 0; i < 50 + N; i++) one(); return NULL; }
int main(int argc, char **argv) {
    mode = atoi(argv[1]); N = atoi(argv[2]);
    tt_pool_attr *a; tt_pool_attr_create(&a); tt_pool_attr_set_threads(a, 2);
    if (tt_pool_create(&pool, a)) abort();
    pthread_t t; pthread_create(&t, NULL, thr, NULL); pthread_join(t, NULL);
    tt_pool_destroy(pool); return 0;
}
