/*
 * tasks_kernels.h -- task-suite kernels written twice: on threadteam tokens
 * (tt_fork, tt_for_ranges) and as OpenMP tasks the way the Barcelona OpenMP
 * Tasks Suite writes them (untied tasks, a depth cutoff), both sides calling
 * the same leaf kernels. bench/bench_tasks.c times them; tests/test_tasks.c
 * runs them small, checks every result and that no more than the budget of
 * threadteam bodies ever ran at once.
 *
 * Kernels:
 *   fib N          fib(N); threadteam with the serial twin as cutoff
 *                  (tt_exec_is_serial), and the straight port (tt_fork at
 *                  every level, no twin: fib-port)
 *   nqueens N      the solutions of N queens; the same two forms
 *                  (nqueens, nqueens-port)
 *   sort N         a mergesort of N ints, 2048-element base case (each side
 *                  splits in two down to it)
 *   nested D       a two-level loop: an outer loop over D uneven subdomains
 *                  (weights 1..D), an inner loop over each one's cells;
 *                  threadteam forks the subdomains and splits each one's
 *                  cells with tt_for_ranges; OpenMP nests two `parallel
 *                  for`, inner serialised (the default) or active
 *                  (max-active-levels 2: omp-nested)
 *   irregular R    y = A x over a random sparse matrix of R rows whose
 *                  lengths are skewed (a few long rows): tt_for_ranges
 *                  against `omp parallel for schedule(dynamic, 64)`
 *   inline         the cost of one budget-1 tt_fork of 2 empty jobs,
 *                  against an undeferred `omp task` pair and two plain calls
 */
#ifndef TASKS_KERNELS_H
#define TASKS_KERNELS_H

#include <threadteam.h>

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Peak concurrency of threadteam bodies: every leaf body on the threadteam
 * side enters and leaves while tk_counting is set (a verification run). */
extern bool tk_counting;
void tk_peak_reset(void);
int tk_peak(void);

/* The OpenMP side's depth cutoffs (below them the serial twin runs), as
 * BOTS sets them: fib 10 levels, nqueens 3 rows. */
extern int tk_fib_cutoff, tk_nq_cutoff;

/* Serial leaf kernels (shared). */
long tk_fib_seq(int n);
long tk_nqueens_seq(int n, int row, const char *board);
void tk_sort_seq(int *a, int *tmp, size_t n);

/* fib */
int tk_fib_tt(tt_exec *ex, int n, bool twin, long *out);
long tk_fib_omp(int n);
long tk_fib_expect(int n);

/* nqueens */
int tk_nqueens_tt(tt_exec *ex, int n, bool twin, long *out);
long tk_nqueens_omp(int n);
long tk_nqueens_expect(int n); /* -1: not known */

/* sort: fills a with a seeded permutation-like sequence first (tk_sort_fill) */
#define TK_SORT_BASE 2048
void tk_sort_fill(int *a, size_t n, uint64_t seed);
int tk_sort_tt(tt_exec *ex, int *a, int *tmp, size_t n);
void tk_sort_omp(int *a, int *tmp, size_t n);
bool tk_sort_check(const int *a, size_t n, uint64_t seed);

/* nested loop over `dom` subdomains of `cells` cells per unit of weight */
typedef struct tk_nested {
    unsigned dom;
    size_t unit;   /* cells per unit of weight: subdomain d has (d + 1) * unit */
    double *out;   /* one value per cell, all subdomains */
} tk_nested;
int tk_nested_init(tk_nested *k, unsigned dom, size_t unit);
void tk_nested_free(tk_nested *k);
int tk_nested_tt(tt_exec *ex, tk_nested *k);
void tk_nested_omp(tk_nested *k, bool active_inner);
bool tk_nested_check(const tk_nested *k);

/* irregular: a random CSR matrix */
typedef struct tk_sparse {
    size_t rows;
    size_t *rowptr;
    uint32_t *col;
    double *val, *x, *y;
} tk_sparse;
int tk_sparse_init(tk_sparse *s, size_t rows, uint64_t seed);
void tk_sparse_free(tk_sparse *s);
int tk_sparse_tt(tt_exec *ex, tk_sparse *s, size_t grain);
void tk_sparse_omp(tk_sparse *s, int chunk);
bool tk_sparse_check(const tk_sparse *s);
/* The same rows with tt_for_ranges_dynamic: chunks of grain rows handed out
 * as threads free up, as schedule(dynamic, grain) does. */
int tk_sparse_tt_dynamic(tt_exec *ex, tk_sparse *s, size_t grain);

/* inline: `calls` budget-1 forks of 2 empty jobs under a budget-1 token */
int tk_inline_tt(tt_exec *ex, long calls);
void tk_inline_omp(long calls);
void tk_inline_plain(long calls);

#endif
