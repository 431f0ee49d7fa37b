/*
 * costs-rows.h -- the built-in dispatch-cost rows, one per host class, in
 * nanoseconds per parallel section. Included by cost.c only.
 *
 * A row is measured (by bench/calibrate, on the host named in its comment)
 * or it is the conservative generic row of the seed: 3 / 15 / 40 us at the
 * widths 2 / 4 / 6, for every kind of token. A class nobody has measured
 * takes the generic row; docs/design/cost-model.md lists which is which
 * and says how to calibrate a node type and install its row without
 * rebuilding the library (TT_DISPATCH_COSTS_FILE).
 *
 * Each entry: { count, { widths }, { costs_ns } }.
 */
#ifndef TT_COSTS_ROWS_H
#define TT_COSTS_ROWS_H

#define TT__ROW_GENERIC { 3, { 2, 4, 6 }, { 3000, 15000, 40000 } }

static const tt_dispatch_costs tt__builtin_rows[TT_HOST_CLASS_COUNT] = {
    /* x86_64-avx512: measured by bench/calibrate on the "one set of threads"
     * core (default settings, median of 7 x 2000 calls, each task the
     * break-even share), 2 vCPUs of an AMD EPYC (AVX-512) under KVM, Debian
     * 12, gcc 12. An outside dispatch is now one region on the caller's own
     * team (3.7 us at width 2). Widths 3 and 4 are oversubscribed there.
     * docs/design/cost-model.md has the run. */
    [TT_HOST_X86_64_AVX512] = {
        .team = { 3, { 2, 3, 4 }, { 491, 11564, 11506 } },
        .in_pool = { 3, { 2, 3, 4 }, { 1568, 10181, 9165 } },
        .outside = { 3, { 2, 3, 4 }, { 3685, 33733, 42782 } },
    },
    /* x86_64-avx2: measured by bench/calibrate on the 0.1.0 core (held
     * private teams; not re-measured on the caller's-team core, whose
     * outside dispatch is a region and cheaper: this row errs on the serial
     * side) (default settings: each task
     * the break-even share, median of 7 x 2000 calls) on the project's
     * build host, 2 vCPUs of an AMD EPYC (family 23) under KVM, Debian 12,
     * gcc 12. Widths 3 and 4 are oversubscribed there (measured so that the
     * row has a slope); the in-pool anchors run on a pool of 2w-1 members.
     * docs/design/cost-model.md has the run. */
    [TT_HOST_X86_64_AVX2] = {
        .team = { 3, { 2, 3, 4 }, { 359, 23699, 15609 } },
        .in_pool = { 3, { 2, 3, 4 }, { 902, 16918, 13135 } },
        .outside = { 3, { 2, 3, 4 }, { 9592, 16300, 17276 } },
    },
    /* x86_64-scalar: not measured; generic. */
    [TT_HOST_X86_64_SCALAR] = { TT__ROW_GENERIC, TT__ROW_GENERIC, TT__ROW_GENERIC },
    /* aarch64-apple: not measured here; generic. */
    [TT_HOST_AARCH64_APPLE] = { TT__ROW_GENERIC, TT__ROW_GENERIC, TT__ROW_GENERIC },
    /* aarch64: not measured; generic. */
    [TT_HOST_AARCH64] = { TT__ROW_GENERIC, TT__ROW_GENERIC, TT__ROW_GENERIC },
    /* generic: the seed's conservative row. */
    [TT_HOST_GENERIC] = { TT__ROW_GENERIC, TT__ROW_GENERIC, TT__ROW_GENERIC },
};

#endif /* TT_COSTS_ROWS_H */
