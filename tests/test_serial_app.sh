#!/bin/sh
# test_serial_app.sh -- an OpenMP application (serial_app.c, compiled here
# with the compiler's OpenMP flag) linked against the library of this build,
# the --disable-parallel one included: "the same API" keeps the one-thread
# rule of shares there too (issue 39, item 8). SKIP (77) without the shared
# library or a compiler that takes -fopenmp.
srcdir=${srcdir:-.}
top_builddir=${top_builddir:-..}
skip() { echo "test_serial_app: $*: skipped"; exit 77; }
if test "${TT_UNDER_TSAN:-0}" = 1 || test "${TT_UNDER_ASAN:-0}" = 1; then
    skip "under a sanitizer (the program is built without it)"
fi
libdir=$top_builddir/lib/.libs
test -f "$libdir/libthreadteam.so" || skip "no shared library in $libdir"
cc=${CC:-cc}
out=serial_app
$cc -fopenmp -O1 -g -I"$top_builddir/include" -o "$out" "$srcdir/serial_app.c" \
    -L"$libdir" -lthreadteam -Wl,-rpath,"$libdir" 2>serial_app.err ||
    skip "$cc -fopenmp could not build serial_app ($(head -n 1 serial_app.err))"
unset OMP_NUM_THREADS OMP_NESTED OMP_MAX_ACTIVE_LEVELS
if command -v timeout >/dev/null 2>&1; then
    timeout 120 ./"$out"
else
    ./"$out"
fi
