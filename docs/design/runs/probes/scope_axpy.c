/* docs/design/runs/2026-12-07-scope-cost.md: the bench paths scope row alone (tt side). */
/* scope_axpy N ISO: the bench's scope row (axpy of N doubles, one section), tt only; prints ns per scope */
#include <threadteam.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
typedef struct { double a; const double *x; double *y; } axpy;
typedef struct { axpy *p; size_t n; } scope_axpy;
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e6+t.tv_nsec*1e-3;}
static void axpy_body(void *arg, size_t b, size_t e) { axpy *p = arg; for (size_t i = b; i < e; i++) p->y[i] += p->a * p->x[i]; }
static void sec(void *arg, tt_section *s) { scope_axpy *a = arg; unsigned r = tt_section_rank(s), n = tt_section_size(s); axpy_body(a->p, a->n * r / n, a->n * (r + 1) / n); }
static void scopefn(void *a, tt_scope *s) { if (tt_scope_run(s, sec, a)) abort(); }
int main(int argc, char **argv) {
  size_t n = atoi(argv[1]); int iso = atoi(argv[2]); int N = 30000;
  double *x = malloc(n * 8), *y = malloc(n * 8); for (size_t i = 0; i < n; i++) { x[i] = i; y[i] = 1; }
  axpy p = {1e-9, x, y}; scope_axpy sa = {&p, n};
  tt_pool_attr *a; tt_pool_attr_create(&a); tt_pool_attr_set_isolate_shares(a, iso); tt_pool *pool; if (tt_pool_create(&pool, a)) abort();
  double t0 = 0;
  for (int i = -200; i < N; i++) { if (i == 0) t0 = now(); tt_exec ex; tt_exec_init(&ex, pool, 2); if (tt_team_scope(&ex, scopefn, &sa)) abort(); }
  printf("%.0f\n", (now() - t0) * 1e3 / N);
}
