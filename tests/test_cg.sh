#!/bin/sh
# test_cg.sh -- the OpenMP application of examples/cg.c: its threadteam
# solver (tt_fork + tt_for_ranges matvec, tt_reduce_sum_d dot product and
# fused update with norm, between its own omp parallel regions) and its
# all-OpenMP solver
# must converge with the same iteration count and residual history
# (cg --check exits 1 otherwise). n = 128 keeps it under a few seconds.
if test "${TT_UNDER_TSAN:-0}" = 1; then
    echo "$(basename "$0"): skipped under ThreadSanitizer (the application's own OpenMP regions run on uninstrumented libgomp)"
    exit 77
fi
prog=${top_builddir:-..}/examples/cg
if test ! -x "$prog"; then
    echo "test_cg: $prog not built" >&2
    exit 1
fi
# Twice: on the pool the solver builds (shares declared OpenMP-free, its
# kernels make no OpenMP call) and on the default pool, whose shares are
# isolated (--isolated).
"$prog" --check --n "${TT_CG_N:-128}" || exit 1
exec "$prog" --check --isolated --n "${TT_CG_N:-128}"
