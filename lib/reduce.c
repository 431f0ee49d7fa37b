/*
 * reduce.c -- reproducible reductions (tt_reduce_ranges and its family).
 *
 * Built on the public tt_for_ranges only: the blocks (which depend on len
 * and grain, never on the budget) are the index space of one tt_for_ranges
 * with grain 1, so a task gets a contiguous run of block numbers. The
 * partials are combined in the fixed pairwise tree of the header: at level
 * s (1, 2, 4, ...) partial b absorbs partial b + s for every multiple b of
 * 2s with b + s < nb. A task does every combination of the tree whose
 * blocks all lie in its own run (bottom-up, so both operands are complete)
 * and marks it in done[b] (the number of levels combined into P[b]); the
 * caller then walks the same tree and does the combinations not marked.
 * Each combination is done exactly once, with the same operands in the
 * same order whatever the task split: the result cannot depend on it.
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

typedef struct reduce_ctx {
    size_t len, nb;            /* indices, blocks                          */
    size_t stride;             /* bytes from one partial to the next       */
    size_t acc_size;
    unsigned char *parts;      /* nb partials of `stride` bytes            */
    unsigned char *done;       /* nb level marks                           */
    tt_reduce_init_fn init;
    tt_reduce_body_fn body;
    tt_reduce_combine_fn combine;
    void *arg;
} reduce_ctx;

/* Block b of nb over [0, len): sizes differ by at most one, larger first. */
static void block_of(size_t len, size_t nb, size_t b, size_t *begin, size_t *end)
{
    size_t q = len / nb, r = len % nb;
    *begin = b * q + (b < r ? b : r);
    *end = *begin + q + (b < r ? 1 : 0);
}

static void *part(const reduce_ctx *k, size_t b) { return k->parts + b * k->stride; }

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
        acc_init(k, acc);
        k->body(k->arg, begin, end, acc);
        k->done[b] = 0;
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
            k->combine(k->arg, part(k, b), part(k, b + s));
            k->done[b] = (unsigned char)(level + 1);
        }
        if (step > b1 - b0 || s > SIZE_MAX / 4)
            break; /* no node of a higher level fits in the run */
    }
}

int tt_reduce_ranges(tt_exec *ex, size_t len, size_t grain, size_t acc_size,
                     tt_reduce_init_fn init, tt_reduce_body_fn body,
                     tt_reduce_combine_fn combine, void *arg, void *result)
{
    if (!body || !combine || !result || grain == 0 || acc_size == 0)
        return TT_EINVAL;
    reduce_ctx k = {.len = len, .acc_size = acc_size, .init = init, .body = body,
                    .combine = combine, .arg = arg};
    if (len == 0) {
        /* Nothing to reduce: the entry still consumes the token. */
        int rc = tt_for_ranges(ex, 0, 1, reduce_task, &k);
        if (rc == TT_OK)
            acc_init(&k, result);
        return rc;
    }
    k.nb = len / grain;
    if (k.nb == 0)
        k.nb = 1;
    const size_t al = alignof(max_align_t);
    if (acc_size > SIZE_MAX - al)
        return TT_ENOMEM;
    k.stride = (acc_size + al - 1) / al * al;
    if (k.nb > (SIZE_MAX - k.nb) / k.stride)
        return TT_ENOMEM;
    size_t bytes = k.nb * k.stride + k.nb;

    alignas(max_align_t) unsigned char stack[REDUCE_STACK_BYTES];
    unsigned char *mem = stack;
    if (bytes > sizeof stack) {
        mem = tt__malloc(bytes); /* alloc.c: failure injection */
        if (!mem)
            return TT_ENOMEM;
    }
    k.parts = mem;
    k.done = mem + k.nb * k.stride;

    int rc = tt_for_ranges(ex, k.nb, 1, reduce_task, &k);
    if (rc == TT_OK) {
        /* The rest of the tree, in its order, skipping what tasks did. */
        unsigned level = 0;
        for (size_t s = 1; s < k.nb; s *= 2, level++) {
            for (size_t b = 0; b + s < k.nb; b += 2 * s) {
                if (k.done[b] > level)
                    continue;
                combine(arg, part(&k, b), part(&k, b + s));
            }
            if (s > SIZE_MAX / 4)
                break;
        }
        memcpy(result, part(&k, 0), acc_size);
    }
    if (mem != stack)
        free(mem);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Sums                                                                      */
/* ------------------------------------------------------------------------ */

typedef struct sum_ctx {
    tt_reduce_d_fn body;
    void *arg;
} sum_ctx;

static void sum_body(void *arg, size_t begin, size_t end, void *acc)
{
    const sum_ctx *c = arg;
    *(double *)acc = c->body(c->arg, begin, end);
}

static void sum_combine(void *arg, void *into, const void *from)
{
    (void)arg;
    *(double *)into += *(const double *)from;
}

int tt_reduce_sum_d(tt_exec *ex, size_t len, size_t grain, tt_reduce_d_fn body, void *arg,
                    double *result)
{
    if (!body || !result)
        return TT_EINVAL;
    sum_ctx c = {.body = body, .arg = arg};
    /* init NULL: all bytes zero, which is +0.0. */
    return tt_reduce_ranges(ex, len, grain, sizeof(double), NULL, sum_body, sum_combine, &c,
                            result);
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
    if (!value || !index || (!x && len > 0))
        return TT_EINVAL;
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
