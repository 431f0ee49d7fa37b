/*
 * cost_rows.h -- the value types of the cost model and their arithmetic
 * (cost_rows.c): saturating arithmetic, host classes, width-cost rows.
 * cost.c, which holds the one rule, the text format and the process
 * default, calls into them. Above base.h only.
 */
#ifndef TT_COST_ROWS_H
#define TT_COST_ROWS_H

#include "base.h"

static inline uint64_t tt__cost_sat_add(uint64_t a, uint64_t b)
{
    uint64_t r;
    return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

static inline uint64_t tt__cost_sat_mul(uint64_t a, uint64_t b)
{
    uint64_t r;
    return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

/* The anchors of a row that count (at most TT_WIDTH_COSTS_MAX_ANCHORS). */
static inline unsigned tt__cost_row_count(const tt_width_costs *wc)
{
    return wc->count > TT_WIDTH_COSTS_MAX_ANCHORS ? TT_WIDTH_COSTS_MAX_ANCHORS : wc->count;
}

/* The cost at width w above the largest of the row's n anchors, on the
 * row's growth slope. */
uint64_t tt__cost_above(const tt_width_costs *wc, unsigned n, unsigned w);

#endif /* TT_COST_ROWS_H */
