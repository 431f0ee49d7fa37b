#!/bin/sh
# test_examples.sh -- the small programs of examples/ and their OpenMP
# twins: each program checks its own result (exit 1 when wrong, 77 when it
# was built without what it needs); here each pair runs and the numbers of
# their "result:" lines must agree (exactly, or to a relative tolerance
# where the OpenMP twin's order of additions differs).
if test "${TT_UNDER_TSAN:-0}" = 1; then
    echo "$(basename "$0"): skipped under ThreadSanitizer (the twins' OpenMP regions run on uninstrumented libgomp)"
    exit 77
fi
dir=${top_builddir:-..}/examples
status=0
ran=0

# Each program gets 300 s (exit status 124 past that): a twin that hangs
# in a vendor library fails the pair instead of the suite. (OpenBLAS
# 0.3.21's OpenMP build, Debian's, never returned from blas_omp's dgemm
# under OMP_DYNAMIC=true, which the suite clears: tests/Makefile.am.)
limit() {
    if command -v timeout >/dev/null 2>&1; then
        timeout "${TT_EXAMPLE_TIMEOUT:-300}" "$@"
    else
        "$@"
    fi
}

# pair NAME TOLERANCE ARGS...: run NAME and NAME_omp with ARGS.
pair() {
    name=$1 tol=$2
    shift 2
    for p in "$name" "${name}_omp"; do
        if test ! -x "$dir/$p"; then
            echo "test_examples: $dir/$p not built" >&2
            status=1
            return
        fi
    done
    out=$(limit "$dir/$name" "$@")
    rc=$?
    if test $rc = 77; then
        echo "$name: skipped ($out)"
        return
    fi
    out_omp=$(limit "$dir/${name}_omp" "$@")
    rc_omp=$?
    printf '%s\n%s\n' "$out" "$out_omp"
    if test $rc != 0 || test $rc_omp != 0; then
        echo "test_examples: $name exited $rc, ${name}_omp $rc_omp" >&2
        status=1
        return
    fi
    a=$(printf '%s\n' "$out" | sed -n 's/^result: //p')
    b=$(printf '%s\n' "$out_omp" | sed -n 's/^result: //p')
    if test -z "$a" || test -z "$b" ||
       ! awk -v a="$a" -v b="$b" -v t="$tol" 'BEGIN {
            d = a - b; if (d < 0) d = -d; m = a < 0 ? -a : a;
            exit !(d <= t * m) }'; then
        echo "test_examples: $name result '$a', ${name}_omp '$b' (tolerance $tol)" >&2
        status=1
        return
    fi
    ran=$((ran + 1))
}

pair sum 1e-12 1000000
pair sort 0 200000
pair jacobi 0 128 100
pair blas 0 120

# cxx NAME ARGS...: the C++ twin NAME_cpp (include/threadteam.hpp) prints
# the C program's result exactly (sum_cpp: the same reduction, the same
# bits). Not built when configure found no C++17 compiler: skipped, with
# its reason.
cxx() {
    name=$1
    shift
    if test ! -x "$dir/${name}_cpp"; then
        if test -z "${TT_CXX:-}"; then
            echo "${name}_cpp: skipped (${TT_CXX_SKIP_REASON:-no C++17 compiler})"
        else
            echo "test_examples: $dir/${name}_cpp not built" >&2
            status=1
        fi
        return
    fi
    out=$(limit "$dir/${name}_cpp" "$@")
    rc=$?
    if test $rc = 77; then
        echo "${name}_cpp: skipped ($out)"
        return
    fi
    out_c=$(limit "$dir/$name" "$@")
    rc_c=$?
    printf '%s\n' "$out"
    a=$(printf '%s\n' "$out" | sed -n 's/^result: //p')
    b=$(printf '%s\n' "$out_c" | sed -n 's/^result: //p')
    if test $rc != 0 || test $rc_c != 0 || test -z "$a" || test "x$a" != "x$b"; then
        echo "test_examples: ${name}_cpp exited $rc with '$a', $name $rc_c with '$b'" >&2
        status=1
        return
    fi
    cxx_ran=$((cxx_ran + 1))
}
cxx_ran=0
cxx sum 1000000
cxx sort 200000
cxx jacobi 128 100
cxx blas 120
echo "test_examples: $ran pairs agree, $cxx_ran C++ twins print the C programs' results"
exit $status
