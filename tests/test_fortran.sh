#!/bin/sh
# test_fortran.sh -- run the Fortran example (fortran/example.f90) built by
# fortran/Makefile: a fork whose jobs run tt_for_ranges, a team scope with
# barriers and tt_external, through the Fortran module; the example checks
# every result and exits non-zero on a wrong one. SKIP (77) when configure
# found no Fortran compiler.
prog=${top_builddir:-..}/fortran/example
if test ! -x "$prog"; then
    echo "test_fortran: Fortran: skipped, no compiler (or --disable-fortran): $prog not built"
    exit 77
fi
exec "$prog"
