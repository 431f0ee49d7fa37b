#!/bin/sh
# test_libomp_app.sh -- applications compiled with clang -fopenmp (LLVM
# libomp) that use this build's shared library (issue 21):
#  - libomp_app.c links libthreadteam.so: slot conservation counted in user
#    code, one-thread shares (omp_get_num_threads() == 1, an orphaned
#    `omp for` runs every iteration once), tt_external's exact width, a
#    callee's threads entering the pool again, one set of threads;
#  - libomp_dl.c dlopen()s it, normally (must work: the library's calls
#    land in libomp) and with RTLD_DEEPBIND: a GCC-built library then binds
#    to its own libgomp, and tt_pool_create must refuse with TT_ERUNTIME
#    and name both runtimes on stderr (a clang-built one has libomp either
#    way: one runtime, it must work);
#  - the same program built by gcc -fopenmp (gomp_dl, libgomp): the GCC-built
#    library works there either way, a clang-built one is refused both ways.
# Exit 77 (SKIP, with the reason) without clang and libomp (configure's
# OMP_CLANG), in a serial build, under a sanitizer, or without the shared
# library.
srcdir=${srcdir:-.}
top_builddir=${top_builddir:-..}
skip() { echo "test_libomp_app: skipped: $*"; exit 77; }
test -n "${OMP_CLANG:-}" || skip "no clang that links LLVM libomp (configure looks for it: OMP_CLANG; apt-get install clang libomp-dev)"
test "${TT_PARALLEL_ENABLED:-1}" = 1 || skip "a --disable-parallel build has no OpenMP runtime"
if test "${TT_UNDER_ASAN:-0}" = 1 || test "${TT_UNDER_TSAN:-0}" = 1; then
    skip "under a sanitizer (a clang program cannot load the GCC-sanitized library)"
fi
so=$top_builddir/lib/.libs/libthreadteam.so
test -f "$so" || skip "$so not built (--disable-shared?)"
so=`cd "$(dirname "$so")" && pwd`/libthreadteam.so
# The library's own runtime: what its OpenMP references are linked against.
lib_rt=libgomp
if env LD_PRELOAD= ldd "$so" 2>/dev/null | grep -q 'lib\(i\)\{0,1\}omp[0-9]*\.so'; then lib_rt=libomp; fi

cc="$OMP_CLANG $OMP_CLANG_FLAGS -O1 -g -Wall -Wextra -I$top_builddir/include"
libdir=`dirname "$so"`
$cc -o libomp_app "$srcdir/libomp_app.c" -L"$libdir" -lthreadteam -Wl,-rpath,"$libdir" ||
    { echo "test_libomp_app: FAIL: $OMP_CLANG could not build libomp_app"; exit 1; }
$cc -o libomp_dl "$srcdir/libomp_dl.c" -ldl ||
    { echo "test_libomp_app: FAIL: $OMP_CLANG could not build libomp_dl"; exit 1; }

fail=0
echo "== libomp_app (clang -fopenmp, linked with $so, whose runtime is $lib_rt)"
timeout -k 5 300 ./libomp_app; rc=$?
if test $rc -eq 77; then skip "libomp_app: the application's own region could not get 2 threads"; fi
test $rc -eq 0 || { echo "test_libomp_app: FAIL: libomp_app (exit status $rc)"; fail=1; }

echo "== libomp_dl global (dlopen without RTLD_DEEPBIND): the pool must work on libomp"
timeout -k 5 120 ./libomp_dl "$so" global run; rc=$?
test $rc -eq 0 || { echo "test_libomp_app: FAIL: libomp_dl global (exit status $rc)"; fail=1; }

if test "$lib_rt" = libgomp; then expect=refuse; else expect=run; fi
echo "== libomp_dl deepbind (dlopen with RTLD_DEEPBIND, library on $lib_rt): expect $expect"
timeout -k 5 120 ./libomp_dl "$so" deepbind $expect 2>libomp_dl.err; rc=$?
cat libomp_dl.err
test $rc -eq 0 || { echo "test_libomp_app: FAIL: libomp_dl deepbind (exit status $rc)"; fail=1; }
if test $expect = refuse; then
    if grep -q 'two OpenMP runtimes' libomp_dl.err && grep -q 'libgomp' libomp_dl.err &&
       grep -q 'libomp' libomp_dl.err; then
        echo "test_libomp_app: the refusal names both runtimes"
        if grep -q 'configure CC=clang' libomp_dl.err; then
            echo "test_libomp_app: the refusal names the rebuild that fixes it"
        else
            echo "test_libomp_app: FAIL: the refusal does not say to rebuild with CC=clang"; fail=1
        fi
    else
        echo "test_libomp_app: FAIL: no message naming libgomp and libomp on stderr"; fail=1
    fi
fi
# The other way round: a GCC application (libgomp) loading the library.
# A GCC-built library works there, loaded either way; a clang-built one
# names its OpenMP symbols at libomp's version and binds to libomp whatever
# the application runs: two runtimes, refused.
if command -v gcc >/dev/null 2>&1 &&
    gcc -fopenmp -O1 -g -I"$top_builddir/include" -o gomp_dl "$srcdir/libomp_dl.c" -ldl 2>/dev/null; then
    # Its runtime: libgomp, or libomp when make check-libomp-app preloads it
    # (TT_APP_RUNTIME). Loaded normally, a GCC-built library follows the
    # application's runtime; with RTLD_DEEPBIND, or built by clang, it keeps
    # its own.
    app_rt=${TT_APP_RUNTIME:-libgomp}
    for how in global deepbind; do
        if test "$lib_rt" = "$app_rt" || { test $how = global && test "$lib_rt" = libgomp; }; then
            expect=run
        else
            expect=refuse
        fi
        echo "== gomp_dl $how (gcc -fopenmp application on $app_rt, library on $lib_rt): expect $expect"
        timeout -k 5 120 ./gomp_dl "$so" $how $expect 2>gomp_dl.err; rc=$?
        cat gomp_dl.err
        test $rc -eq 0 || { echo "test_libomp_app: FAIL: gomp_dl $how (exit status $rc)"; fail=1; }
        if test $expect = refuse && ! grep -q 'two OpenMP runtimes' gomp_dl.err; then
            echo "test_libomp_app: FAIL: gomp_dl $how: no message naming both runtimes"; fail=1
        fi
        if test $expect = refuse && test "$lib_rt" = libomp && test "$app_rt" = libgomp &&
           ! grep -q 'configure CC=gcc' gomp_dl.err; then
            echo "test_libomp_app: FAIL: gomp_dl $how: the refusal does not say to rebuild with CC=gcc"; fail=1
        fi
    done
else
    echo "test_libomp_app: the gcc -fopenmp application's cases skipped: gcc -fopenmp cannot build libomp_dl.c"
fi
test $fail -eq 0 && echo "test_libomp_app: PASS"
exit $fail
