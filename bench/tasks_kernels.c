/*
 * tasks_kernels.c -- the kernels of tasks_kernels.h, each on threadteam and
 * as OpenMP tasks (BOTS style: untied tasks, a depth cutoff below which the
 * serial twin runs). The serial leaves are shared by both sides.
 */
#include "tasks_kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#else
/* A build without OpenMP (--disable-parallel): the OpenMP twins run
 * serially, their pragmas ignored. */
#pragma GCC diagnostic ignored "-Wunknown-pragmas"
#endif

/* ------------------------------------------------------------------------ */
/* Peak concurrency (threadteam side)                                       */
/* ------------------------------------------------------------------------ */

bool tk_counting;
static _Atomic int live, live_max;

void tk_peak_reset(void)
{
    atomic_store(&live, 0);
    atomic_store(&live_max, 0);
}

int tk_peak(void) { return atomic_load(&live_max); }

static inline void peak_enter(void)
{
    if (!tk_counting)
        return;
    int n = atomic_fetch_add(&live, 1) + 1;
    int m = atomic_load(&live_max);
    while (n > m && !atomic_compare_exchange_weak(&live_max, &m, n)) {
    }
}

static inline void peak_leave(void)
{
    if (tk_counting)
        atomic_fetch_sub(&live, 1);
}

int tk_fib_cutoff = 10, tk_nq_cutoff = 3;

/* ------------------------------------------------------------------------ */
/* fib                                                                       */
/* ------------------------------------------------------------------------ */

long tk_fib_seq(int n) { return n < 2 ? n : tk_fib_seq(n - 1) + tk_fib_seq(n - 2); }

long tk_fib_expect(int n)
{
    long a = 0, b = 1;
    for (int i = 0; i < n; i++) {
        long t = a + b;
        a = b;
        b = t;
    }
    return a;
}

typedef struct fib_node {
    int n;
    bool twin;
    long r[2];
    int rc[2];
} fib_node;

static long fib_tt(tt_exec *ex, int n, bool twin, int *rc);

static void fib_job(void *arg, unsigned i, tt_exec *child)
{
    fib_node *p = arg;
    p->r[i] = fib_tt(child, p->n - 1 - (int)i, p->twin, &p->rc[i]);
}

static long fib_tt(tt_exec *ex, int n, bool twin, int *rc)
{
    if (n < 2) {
        peak_enter();
        peak_leave();
        return n;
    }
    /* The idiom for fine recursion: below a budget of 1 the serial twin. */
    if (twin && tt_exec_is_serial(ex)) {
        peak_enter();
        long r = tk_fib_seq(n);
        peak_leave();
        return r;
    }
    fib_node nd = {.n = n, .twin = twin};
    int e = tt_fork(ex, 2, fib_job, &nd);
    if (e == TT_OK)
        e = nd.rc[0] ? nd.rc[0] : nd.rc[1];
    if (e)
        *rc = e;
    return nd.r[0] + nd.r[1];
}

int tk_fib_tt(tt_exec *ex, int n, bool twin, long *out)
{
    int rc = TT_OK;
    *out = fib_tt(ex, n, twin, &rc);
    return rc;
}

static long fib_omp(int n, int d)
{
    if (n < 2)
        return n;
    if (d >= tk_fib_cutoff)
        return tk_fib_seq(n);
    long x, y;
#pragma omp task untied shared(x) firstprivate(n, d)
    x = fib_omp(n - 1, d + 1);
#pragma omp task untied shared(y) firstprivate(n, d)
    y = fib_omp(n - 2, d + 1);
#pragma omp taskwait
    return x + y;
}

long tk_fib_omp(int n)
{
    long r = 0;
#pragma omp parallel shared(r)
#pragma omp single
    r = fib_omp(n, 0);
    return r;
}

/* ------------------------------------------------------------------------ */
/* nqueens                                                                   */
/* ------------------------------------------------------------------------ */

#define NQ_MAX 20

/* Whether the first n queens of a (one per row, a[i] its column) leave
 * each other alone: BOTS's ok(). */
static int nq_ok(int n, const char *a)
{
    for (int i = 0; i < n; i++) {
        char p = a[i];
        for (int j = i + 1; j < n; j++) {
            char q = a[j];
            if (q == p || q == p - (j - i) || q == p + (j - i))
                return 0;
        }
    }
    return 1;
}

long tk_nqueens_seq(int n, int j, const char *a)
{
    if (j == n)
        return 1;
    char b[NQ_MAX];
    memcpy(b, a, (size_t)j);
    long s = 0;
    for (int i = 0; i < n; i++) {
        b[j] = (char)i;
        if (nq_ok(j + 1, b))
            s += tk_nqueens_seq(n, j + 1, b);
    }
    return s;
}

long tk_nqueens_expect(int n)
{
    static const long known[] = {1, 1, 0, 0, 2, 10, 4, 40, 92, 352, 724, 2680, 14200, 73712,
                                 365596, 2279184};
    return n >= 0 && n < (int)(sizeof known / sizeof known[0]) ? known[n] : -1;
}

typedef struct nq_node {
    int n, j;
    bool twin;
    const char *a;
    long cnt[NQ_MAX];
    int rc[NQ_MAX];
} nq_node;

static long nq_tt(tt_exec *ex, int n, int j, const char *a, bool twin, int *rc);

static void nq_job(void *arg, unsigned i, tt_exec *child)
{
    nq_node *p = arg;
    char b[NQ_MAX];
    memcpy(b, p->a, (size_t)p->j);
    b[p->j] = (char)i;
    p->cnt[i] = nq_ok(p->j + 1, b) ? nq_tt(child, p->n, p->j + 1, b, p->twin, &p->rc[i]) : 0;
}

static long nq_tt(tt_exec *ex, int n, int j, const char *a, bool twin, int *rc)
{
    if (j == n) {
        peak_enter();
        peak_leave();
        return 1;
    }
    if (twin && tt_exec_is_serial(ex)) {
        peak_enter();
        long r = tk_nqueens_seq(n, j, a);
        peak_leave();
        return r;
    }
    nq_node nd = {.n = n, .j = j, .twin = twin, .a = a};
    int e = tt_fork(ex, (unsigned)n, nq_job, &nd);
    long s = 0;
    for (int i = 0; i < n; i++) {
        s += nd.cnt[i];
        if (e == TT_OK && nd.rc[i])
            e = nd.rc[i];
    }
    if (e)
        *rc = e;
    return s;
}

int tk_nqueens_tt(tt_exec *ex, int n, bool twin, long *out)
{
    if (n < 1 || n > NQ_MAX)
        return TT_EINVAL;
    int rc = TT_OK;
    char a[NQ_MAX] = {0};
    *out = nq_tt(ex, n, 0, a, twin, &rc);
    return rc;
}

static void nq_omp(int n, int j, const char *a, long *sol, int depth)
{
    if (j == n) {
        *sol = 1;
        return;
    }
    if (depth >= tk_nq_cutoff) {
        *sol = tk_nqueens_seq(n, j, a);
        return;
    }
    long csols[NQ_MAX] = {0};
    for (int i = 0; i < n; i++) {
#pragma omp task untied firstprivate(i) shared(csols)
        {
            char b[NQ_MAX];
            memcpy(b, a, (size_t)j);
            b[j] = (char)i;
            if (nq_ok(j + 1, b))
                nq_omp(n, j + 1, b, &csols[i], depth + 1);
        }
    }
#pragma omp taskwait
    long s = 0;
    for (int i = 0; i < n; i++)
        s += csols[i];
    *sol = s;
}

long tk_nqueens_omp(int n)
{
    long r = 0;
    char a[NQ_MAX] = {0};
    if (n < 1 || n > NQ_MAX)
        return -1;
#pragma omp parallel shared(r, a)
#pragma omp single
    nq_omp(n, 0, a, &r, 0);
    return r;
}

/* ------------------------------------------------------------------------ */
/* mergesort                                                                 */
/* ------------------------------------------------------------------------ */

static uint64_t mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void tk_sort_fill(int *a, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++)
        a[i] = (int)(mix64(seed + i) >> 33);
}

static int cmp_int(const void *x, const void *y)
{
    int a = *(const int *)x, b = *(const int *)y;
    return (a > b) - (a < b);
}

/* The base case: the libc sort. The merge of two sorted halves, through
 * tmp. Both shared by the two sides. */
void tk_sort_seq(int *a, int *tmp, size_t n)
{
    (void)tmp;
    qsort(a, n, sizeof *a, cmp_int);
}

static void merge(int *a, int *tmp, size_t n1, size_t n)
{
    size_t i = 0, j = n1, k = 0;
    while (i < n1 && j < n)
        tmp[k++] = a[j] < a[i] ? a[j++] : a[i++];
    while (i < n1)
        tmp[k++] = a[i++];
    while (j < n)
        tmp[k++] = a[j++];
    memcpy(a, tmp, n * sizeof *a);
}

bool tk_sort_check(const int *a, size_t n, uint64_t seed)
{
    uint64_t sum = 0, want = 0;
    for (size_t i = 0; i < n; i++) {
        if (i && a[i - 1] > a[i])
            return false;
        sum += (uint64_t)a[i];
        want += (uint64_t)(int)(mix64(seed + i) >> 33);
    }
    return sum == want;
}

typedef struct sort_node {
    int *a, *tmp;
    size_t n;
    int rc[2];
} sort_node;

static int sort_tt(tt_exec *ex, int *a, int *tmp, size_t n);

static void sort_job(void *arg, unsigned i, tt_exec *child)
{
    sort_node *p = arg;
    size_t h = p->n / 2;
    p->rc[i] = i == 0 ? sort_tt(child, p->a, p->tmp, h)
                      : sort_tt(child, p->a + h, p->tmp + h, p->n - h);
}

static int sort_tt(tt_exec *ex, int *a, int *tmp, size_t n)
{
    if (n <= TK_SORT_BASE) {
        peak_enter();
        tk_sort_seq(a, tmp, n);
        peak_leave();
        return TT_OK;
    }
    sort_node nd = {.a = a, .tmp = tmp, .n = n};
    int e = tt_fork(ex, 2, sort_job, &nd);
    if (e == TT_OK)
        e = nd.rc[0] ? nd.rc[0] : nd.rc[1];
    if (e)
        return e;
    peak_enter();
    merge(a, tmp, n / 2, n);
    peak_leave();
    return TT_OK;
}

int tk_sort_tt(tt_exec *ex, int *a, int *tmp, size_t n) { return sort_tt(ex, a, tmp, n); }

static void sort_omp(int *a, int *tmp, size_t n)
{
    if (n <= TK_SORT_BASE) {
        tk_sort_seq(a, tmp, n);
        return;
    }
    size_t h = n / 2;
#pragma omp task untied firstprivate(a, tmp, h)
    sort_omp(a, tmp, h);
#pragma omp task untied firstprivate(a, tmp, h, n)
    sort_omp(a + h, tmp + h, n - h);
#pragma omp taskwait
    merge(a, tmp, h, n);
}

void tk_sort_omp(int *a, int *tmp, size_t n)
{
#pragma omp parallel
#pragma omp single
    sort_omp(a, tmp, n);
}

/* ------------------------------------------------------------------------ */
/* The two-level loop                                                        */
/* ------------------------------------------------------------------------ */

/* One cell's work, the shared leaf: a short dependent chain. */
static inline double cell_work(size_t c)
{
    double v = (double)(c % 1024) * 0.5;
    for (int k = 0; k < 48; k++)
        v = v * 0.999 + 1.0;
    return v;
}

static size_t dom_first(const tk_nested *k, unsigned d)
{
    return (size_t)d * (d + 1) / 2 * k->unit; /* sum of weights 1..d */
}

static size_t dom_cells(const tk_nested *k, unsigned d) { return (size_t)(d + 1) * k->unit; }

int tk_nested_init(tk_nested *k, unsigned dom, size_t unit)
{
    k->dom = dom;
    k->unit = unit;
    k->out = calloc(dom_first(k, dom), sizeof *k->out);
    return k->out ? TT_OK : TT_ENOMEM;
}

void tk_nested_free(tk_nested *k) { free(k->out); }

bool tk_nested_check(const tk_nested *k)
{
    for (size_t c = 0; c < dom_first(k, k->dom); c++)
        if (k->out[c] != cell_work(c))
            return false;
    return true;
}

typedef struct cells_ctx {
    const tk_nested *k;
    size_t first;
} cells_ctx;

static void cells_body(void *arg, size_t begin, size_t end)
{
    const cells_ctx *c = arg;
    peak_enter();
    for (size_t i = begin; i < end; i++)
        c->k->out[c->first + i] = cell_work(c->first + i);
    peak_leave();
}

typedef struct nested_ctx {
    tk_nested *k;
    int rc[64];
} nested_ctx;

static void dom_job(void *arg, unsigned d, tt_exec *child)
{
    nested_ctx *n = arg;
    cells_ctx c = {n->k, dom_first(n->k, d)};
    n->rc[d % 64] = tt_for_ranges(child, dom_cells(n->k, d), 256, cells_body, &c);
}

int tk_nested_tt(tt_exec *ex, tk_nested *k)
{
    nested_ctx n = {.k = k};
    if (k->dom == 0 || k->dom > 64)
        return TT_EINVAL;
    int rc = tt_fork(ex, k->dom, dom_job, &n);
    for (unsigned d = 0; rc == TT_OK && d < k->dom; d++)
        rc = n.rc[d];
    return rc;
}

void tk_nested_omp(tk_nested *k, bool active_inner)
{
#ifdef _OPENMP
    int saved = omp_get_max_active_levels();
    omp_set_max_active_levels(active_inner ? 2 : 1);
#else
    (void)active_inner;
#endif
#pragma omp parallel for schedule(static)
    for (unsigned d = 0; d < k->dom; d++) {
        size_t first = dom_first(k, d), cells = dom_cells(k, d);
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < cells; i++)
            k->out[first + i] = cell_work(first + i);
    }
#ifdef _OPENMP
    omp_set_max_active_levels(saved);
#endif
}

/* ------------------------------------------------------------------------ */
/* The irregular loop: y = A x, a random sparse matrix                       */
/* ------------------------------------------------------------------------ */

int tk_sparse_init(tk_sparse *s, size_t rows, uint64_t seed)
{
    memset(s, 0, sizeof *s);
    s->rows = rows;
    s->rowptr = malloc((rows + 1) * sizeof *s->rowptr);
    if (!s->rowptr)
        return TT_ENOMEM;
    /* The first eighth of the rows are long (a dense block, as where a
     * mesh is refined): a split into equal row counts is uneven. */
    s->rowptr[0] = 0;
    for (size_t r = 0; r < rows; r++) {
        size_t len = 4 + (mix64(seed ^ (r * 2 + 1)) % 8) + (r < rows / 8 ? 96 : 0);
        s->rowptr[r + 1] = s->rowptr[r] + len;
    }
    size_t nnz = s->rowptr[rows];
    s->col = malloc(nnz * sizeof *s->col);
    s->val = malloc(nnz * sizeof *s->val);
    s->x = malloc(rows * sizeof *s->x);
    s->y = calloc(rows, sizeof *s->y);
    if (!s->col || !s->val || !s->x || !s->y)
        return TT_ENOMEM;
    for (size_t i = 0; i < nnz; i++) {
        uint64_t z = mix64(seed + i);
        s->col[i] = (uint32_t)(z % rows);
        s->val[i] = (double)(z >> 40) / (double)(1u << 24);
    }
    for (size_t r = 0; r < rows; r++)
        s->x[r] = 1.0 + (double)(r % 7);
    return TT_OK;
}

void tk_sparse_free(tk_sparse *s)
{
    free(s->rowptr);
    free(s->col);
    free(s->val);
    free(s->x);
    free(s->y);
}

static inline double row_dot(const tk_sparse *s, size_t r)
{
    double t = 0;
    for (size_t i = s->rowptr[r]; i < s->rowptr[r + 1]; i++)
        t += s->val[i] * s->x[s->col[i]];
    return t;
}

bool tk_sparse_check(const tk_sparse *s)
{
    for (size_t r = 0; r < s->rows; r++)
        if (s->y[r] != row_dot(s, r))
            return false;
    return true;
}

static void rows_body(void *arg, size_t begin, size_t end)
{
    tk_sparse *s = arg;
    peak_enter();
    for (size_t r = begin; r < end; r++)
        s->y[r] = row_dot(s, r);
    peak_leave();
}

int tk_sparse_tt(tt_exec *ex, tk_sparse *s, size_t grain)
{
    return tt_for_ranges(ex, s->rows, grain, rows_body, s);
}

int tk_sparse_tt_dynamic(tt_exec *ex, tk_sparse *s, size_t grain)
{
    return tt_for_ranges_dynamic(ex, s->rows, grain, rows_body, s);
}

void tk_sparse_omp(tk_sparse *s, int chunk)
{
    (void)chunk;
#pragma omp parallel for schedule(dynamic, chunk)
    for (size_t r = 0; r < s->rows; r++)
        s->y[r] = row_dot(s, r);
}

/* ------------------------------------------------------------------------ */
/* The inline entry: a tree of budget-1 forks of 2 jobs                      */
/* ------------------------------------------------------------------------ */

static _Atomic long inline_leaves;

static void inline_job(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    int d = *(const int *)arg;
    if (d == 0) {
        atomic_fetch_add_explicit(&inline_leaves, 1, memory_order_relaxed);
        return;
    }
    int dd = d - 1;
    if (tt_fork(child, 2, inline_job, &dd) != TT_OK)
        atomic_fetch_add_explicit(&inline_leaves, 1L << 40, memory_order_relaxed);
}

typedef struct inline_ctx {
    int depth, rc;
} inline_ctx;

static void inline_root(void *arg, unsigned i, tt_exec *child)
{
    (void)i;
    inline_ctx *c = arg;
    c->rc = tt_fork(child, 2, inline_job, &c->depth);
}

/* 2^(depth + 1) - 1 forks of 2 jobs under a budget-1 child token (the
 * lean path); TT_OK when every leaf ran once. */
int tk_inline_tt(tt_exec *ex, long depth)
{
    inline_ctx c = {.depth = (int)depth - 1};
    atomic_store(&inline_leaves, 0);
    tt_exec_limit(ex, 1);
    int rc = tt_fork(ex, 1, inline_root, &c);
    if (rc == TT_OK)
        rc = c.rc;
    if (rc == TT_OK && atomic_load(&inline_leaves) != 2L << (depth - 1))
        rc = TT_EINVAL;
    return rc;
}

static __attribute__((noinline)) void omp_undeferred(int d)
{
    if (d == 0) {
        atomic_fetch_add_explicit(&inline_leaves, 1, memory_order_relaxed);
        return;
    }
#pragma omp task if (0)
    omp_undeferred(d - 1);
#pragma omp task if (0)
    omp_undeferred(d - 1);
}

void tk_inline_omp(long depth)
{
    atomic_store(&inline_leaves, 0);
#pragma omp parallel num_threads(1)
    omp_undeferred((int)depth);
}

static __attribute__((noinline)) void plain_rec(int d)
{
    if (d == 0) {
        atomic_fetch_add_explicit(&inline_leaves, 1, memory_order_relaxed);
        return;
    }
    plain_rec(d - 1);
    plain_rec(d - 1);
}

void tk_inline_plain(long depth)
{
    atomic_store(&inline_leaves, 0);
    plain_rec((int)depth);
}
