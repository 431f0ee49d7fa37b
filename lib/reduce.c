/*
 * reduce.c -- reproducible reductions (tt_reduce_ranges and its family).
 *
 * Built on the public tt_for_ranges (and alloc.c's tt__malloc): the blocks
 * (which depend on len and grain, never on the budget) are the index space
 * of one tt_for_ranges with grain 1, so a task gets a contiguous run of
 * block numbers. The partials are combined in the fixed pairwise tree of
 * the header: at level s (1, 2, 4, ...) partial b absorbs partial b + s for
 * every multiple b of 2s with b + s < nb. A task does every combination of
 * the tree whose blocks all lie in its own run (bottom-up, so both operands
 * are complete) and records it in slot b's mark (the number of levels
 * combined into P[b]); the caller then walks the same tree and does the
 * combinations not marked.
 * Each combination is done exactly once, with the same operands in the
 * same order whatever the task split: the result cannot depend on it.
 *
 * Where the cache lines go. On a 2-way split of a short reduction every
 * line that one core writes and the other then reads is a transfer,
 * hundreds of cycles one way between cores that sit far apart, where a sum
 * of 10^4 doubles is microseconds of additions per thread. So a reduction
 * whose member reads and writes more of the caller's lines than a plain
 * tt_for_ranges pays for each of them: the context (two lines), the sum's
 * own context (a third), the level marks (an array the caller then reads
 * beside the partials). Hence:
 *  - the context's first line holds all that a task reads to run a block,
 *    and it is aligned to a line; a sum of doubles keeps its callback in
 *    that line (dsum) instead of a context of its own;
 *  - slot b holds partial b and, in its last byte, its level mark, so the
 *    caller reads a member's mark and partial in one line;
 *  - the slots start on a line, away from the caller's other stack data,
 *    and when they are few (up to 32 for doubles: as many as fit on the
 *    stack a line each) each slot has a line of its own, so that no two
 *    tasks write one line. Many slots are packed: a task's run is long,
 *    and only the line at each end of it may be shared.
 * The runs: docs/design/runs/2026-12-07-comment-records.md, "Reduction
 * lines".
 */
#include "internal.h"

#include <math.h>
#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Partials up to this many bytes (with their level marks) stay on the
 * caller's stack. */
#define REDUCE_STACK_BYTES 2048
/* A cache line on the x86-64 and AArch64 hosts this is built for: the
 * alignment of the context and of the slots (see above). */
#define REDUCE_LINE 64

typedef struct reduce_ctx {
    /* The first line: what a task reads to run its blocks. */
    alignas(REDUCE_LINE) size_t len;
    size_t nb;                 /* blocks                                   */
    size_t stride;             /* bytes from one slot to the next          */
    unsigned char *parts;      /* nb slots: a partial, then its level mark */
    tt_reduce_body_fn body;    /* NULL: a sum of doubles, dsum             */
    tt_reduce_d_fn dsum;       /* tt_reduce_sum_d's body                   */
    void *arg;
    tt_reduce_init_fn init;
    /* The second line: read by a task only for combinations inside a run
     * of several blocks, or for a NULL init. */
    tt_reduce_combine_fn combine;
    size_t acc_size;
    size_t grain;              /* the caller's: nb = len / grain          */
} reduce_ctx;

/* Block b of nb over [0, len): sizes differ by at most one, larger first. */
static void block_of(size_t len, size_t nb, size_t b, size_t *begin, size_t *end)
{
    size_t q = len / nb, r = len % nb;
    *begin = b * q + (b < r ? b : r);
    *end = *begin + q + (b < r ? 1 : 0);
}

static void *part(const reduce_ctx *k, size_t b) { return k->parts + b * k->stride; }

/* The level mark of slot b: its last byte, past the partial. */
static unsigned char *mark(const reduce_ctx *k, size_t b)
{
    return k->parts + (b + 1) * k->stride - 1;
}

static void combine_parts(const reduce_ctx *k, size_t into, size_t from)
{
    if (k->dsum)
        *(double *)part(k, into) += *(const double *)part(k, from);
    else
        k->combine(k->arg, part(k, into), part(k, from));
}

static void acc_init(const reduce_ctx *k, void *acc)
{
    if (k->init)
        k->init(k->arg, acc);
    else
        memset(acc, 0, k->acc_size);
}

/* One task: blocks [b0, b1), then the tree's combinations inside them. */
static void reduce_task(void *arg, size_t b0, size_t b1)
{
    reduce_ctx *k = arg;
    for (size_t b = b0; b < b1; b++) {
        size_t begin, end;
        block_of(k->len, k->nb, b, &begin, &end);
        void *acc = part(k, b);
        if (k->dsum) {
            *(double *)acc = k->dsum(k->arg, begin, end);
        } else {
            acc_init(k, acc);
            k->body(k->arg, begin, end, acc);
        }
        *mark(k, b) = 0;
    }
    unsigned level = 0;
    for (size_t s = 1; s < k->nb; s *= 2, level++) {
        size_t step = 2 * s;
        /* The first multiple of 2s at or after b0. */
        size_t b = (b0 + step - 1) / step * step;
        for (; b + s < k->nb; b += step) {
            size_t hi = b + step < k->nb ? b + step : k->nb;
            if (hi > b1)
                break; /* this node (and every later one) leaves the run */
            combine_parts(k, b, b + s);
            *mark(k, b) = (unsigned char)(level + 1);
        }
        if (step > b1 - b0 || s > SIZE_MAX / 4)
            break; /* no node of a higher level fits in the run */
    }
}

/* Blocks, slots and the tree for a context whose callbacks are set. */
static int reduce_run(tt_exec *ex, reduce_ctx *k, void *result)
{
    if (k->len == 0) {
        /* Nothing to reduce: the entry still consumes the token. */
        int rc = tt_for_ranges(ex, 0, 1, reduce_task, k);
        if (rc == TT_OK)
            acc_init(k, result);
        return rc;
    }
    k->nb = k->len / k->grain;
    if (k->nb == 0)
        k->nb = 1;
    /* A slot: the partial, one byte for its mark, rounded up so that every
     * partial is aligned for any object type. */
    const size_t al = alignof(max_align_t);
    if (k->acc_size > SIZE_MAX - 2 * al)
        return TT_ENOMEM;
    k->stride = (k->acc_size + 1 + al - 1) / al * al;
    /* Few slots: a line each, when they still fit on the stack, so that
     * no two tasks write one line (see above). */
    if (k->stride <= REDUCE_STACK_BYTES) {
        size_t lined = (k->stride + REDUCE_LINE - 1) / REDUCE_LINE * REDUCE_LINE;
        if (k->nb <= REDUCE_STACK_BYTES / lined)
            k->stride = lined;
    }
    /* No object is larger than PTRDIFF_MAX: refuse before asking malloc. */
    if (k->nb > (size_t)PTRDIFF_MAX / k->stride)
        return TT_ENOMEM;
    size_t bytes = k->nb * k->stride;

    alignas(REDUCE_LINE) unsigned char stack[REDUCE_STACK_BYTES];
    unsigned char *mem = stack;
    if (bytes > sizeof stack) {
        mem = tt__malloc(bytes); /* alloc.c: failure injection */
        if (!mem)
            return TT_ENOMEM;
    }
    k->parts = mem;

    int rc = tt_for_ranges(ex, k->nb, 1, reduce_task, k);
    if (rc == TT_OK) {
        /* The rest of the tree, in its order, skipping what tasks did. */
        unsigned level = 0;
        for (size_t s = 1; s < k->nb; s *= 2, level++) {
            for (size_t b = 0; b + s < k->nb; b += 2 * s) {
                if (*mark(k, b) > level)
                    continue;
                combine_parts(k, b, b + s);
            }
            if (s > SIZE_MAX / 4)
                break;
        }
        memcpy(result, part(k, 0), k->acc_size);
    }
    if (mem != stack)
        free(mem);
    return rc;
}

int tt_reduce_ranges(tt_exec *ex, size_t len, size_t grain, size_t acc_size,
                     tt_reduce_init_fn init, tt_reduce_body_fn body,
                     tt_reduce_combine_fn combine, void *arg, void *result)
{
    if (!body)
        return TT__EINVAL("!body");
    if (!combine)
        return TT__EINVAL("!combine");
    if (!result)
        return TT__EINVAL("!result");
    if (grain == 0)
        return TT__EINVAL("grain == 0");
    if (acc_size == 0)
        return TT__EINVAL("acc_size == 0");
    reduce_ctx k = {.len = len, .grain = grain, .acc_size = acc_size, .init = init,
                    .body = body, .combine = combine, .arg = arg};
    return reduce_run(ex, &k, result);
}

/* ------------------------------------------------------------------------ */
/* Sums                                                                      */
/* ------------------------------------------------------------------------ */

/* A block's partial is body(arg, begin, end); two partials combine by +
 * (combine_parts). With no block (len 0) the result is init NULL's all
 * bytes zero, which is +0.0. */
int tt_reduce_sum_d(tt_exec *ex, size_t len, size_t grain, tt_reduce_d_fn body, void *arg,
                    double *result)
{
    if (!body)
        return TT__EINVAL("!body");
    if (!result)
        return TT__EINVAL("!result");
    if (grain == 0)
        return TT__EINVAL("grain == 0");
    reduce_ctx k = {.len = len, .grain = grain, .acc_size = sizeof(double), .dsum = body,
                    .arg = arg};
    return reduce_run(ex, &k, result);
}

/* ------------------------------------------------------------------------ */
/* Minimum and maximum with index                                            */
/* ------------------------------------------------------------------------ */

typedef struct loc_acc {
    double value;
    size_t index; /* SIZE_MAX: no element yet */
} loc_acc;

typedef struct loc_ctx {
    const double *x;
    bool max;
} loc_ctx;

static void loc_init(void *arg, void *acc)
{
    (void)arg;
    *(loc_acc *)acc = (loc_acc){.value = NAN, .index = SIZE_MAX};
}

/* Whether (v, i) wins over the accumulator: strictly better, or as good
 * with a lower index. NaN never wins (v < NaN and v > NaN are false, and
 * the empty accumulator is taken care of first). */
static bool loc_better(const loc_ctx *c, const loc_acc *a, double v, size_t i)
{
    if (isnan(v))
        return false;
    if (a->index == SIZE_MAX)
        return true;
    if (c->max ? v > a->value : v < a->value)
        return true;
    return v == a->value && i < a->index;
}

static void loc_body(void *arg, size_t begin, size_t end, void *acc)
{
    const loc_ctx *c = arg;
    loc_acc *a = acc;
    for (size_t i = begin; i < end; i++) {
        if (loc_better(c, a, c->x[i], i)) {
            a->value = c->x[i];
            a->index = i;
        }
    }
}

static void loc_combine(void *arg, void *into, const void *from)
{
    const loc_acc *f = from;
    if (f->index != SIZE_MAX && loc_better(arg, into, f->value, f->index))
        *(loc_acc *)into = *f;
}

static int reduce_loc(tt_exec *ex, const double *x, size_t len, size_t grain, double *value,
                      size_t *index, bool max)
{
    if (!value)
        return TT__EINVAL("!value");
    if (!index)
        return TT__EINVAL("!index");
    if ((!x && len > 0))
        return TT__EINVAL("!x && len > 0");
    loc_ctx c = {.x = x, .max = max};
    loc_acc out;
    int rc = tt_reduce_ranges(ex, len, grain, sizeof out, loc_init, loc_body, loc_combine, &c,
                              &out);
    if (rc == TT_OK) {
        *value = out.value;
        *index = out.index;
    }
    return rc;
}

int tt_reduce_minloc_d(tt_exec *ex, const double *x, size_t len, size_t grain, double *value,
                       size_t *index)
{
    return reduce_loc(ex, x, len, grain, value, index, false);
}

int tt_reduce_maxloc_d(tt_exec *ex, const double *x, size_t len, size_t grain, double *value,
                       size_t *index)
{
    return reduce_loc(ex, x, len, grain, value, index, true);
}
