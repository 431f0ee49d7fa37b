#!/bin/sh
# check-install.sh [DESTDIR]  (default /tmp/tt-stage)
#
# Installs threadteam into DESTDIR (`make install DESTDIR=...` of the
# top-level Makefile; PREFIX from the environment is honoured), then builds
# a small outside program against the staged install with pkg-config --
# without any OpenMP flag -- and runs it: once linked with the shared library
# (LD_LIBRARY_PATH to the staged lib), once with the static one
# (pkg-config --static, which must bring the OpenMP runtime via Libs.private).
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
destdir=${1:-/tmp/tt-stage}
case $destdir in
/*) ;;
*) destdir=$(pwd)/$destdir ;;
esac
CC=${CC:-cc}
MAKE=${MAKE:-make}

echo "==> check-install: make install DESTDIR=$destdir"
rm -rf "$destdir"
if test -n "${PREFIX:-}"; then
    "$MAKE" -C "$root" install DESTDIR="$destdir" PREFIX="$PREFIX"
else
    "$MAKE" -C "$root" install DESTDIR="$destdir"
fi

dirs=$("$MAKE" -s --no-print-directory -C "$root/build" print-install-dirs)
libdir=$(printf '%s\n' "$dirs" | sed -n 's/^libdir=//p')
includedir=$(printf '%s\n' "$dirs" | sed -n 's/^includedir=//p')
stagelib=$destdir$libdir

for f in "$destdir$includedir/threadteam.h" "$stagelib/libthreadteam.so" \
         "$stagelib/pkgconfig/threadteam.pc"; do
    if test ! -f "$f"; then
        echo "check-install: FAIL: $f was not installed" >&2
        exit 1
    fi
done

PKG_CONFIG_PATH=$stagelib/pkgconfig
PKG_CONFIG_SYSROOT_DIR=$destdir
export PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR
cflags=$(pkg-config --cflags threadteam)
libs=$(pkg-config --libs threadteam)
slibs=$(pkg-config --static --libs threadteam)
echo "check-install: pkg-config --cflags: $cflags"
echo "check-install: pkg-config --libs:   $libs"
echo "check-install: pkg-config --static --libs: $slibs"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tt-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

cat >"$tmp/outside.c" <<'EOF'
/* An outside program: includes only <threadteam.h>, built without OpenMP. */
#include <threadteam.h>

#include <stdio.h>
#include <stdlib.h>

#define LEN 10007u

static unsigned char hits[LEN];

static void body(void *arg, size_t begin, size_t end)
{
    (void)arg;
    for (size_t i = begin; i < end; i++)
        hits[i]++;
}

static int check(int rc, const char *what)
{
    if (rc != TT_OK) {
        fprintf(stderr, "outside: %s: %s\n", what, tt_strerror(rc));
        exit(1);
    }
    return rc;
}

int main(void)
{
    tt_pool *pool = NULL;
    tt_exec ex;

    check(tt_pool_create(&pool, NULL), "tt_pool_create");
    unsigned width = tt_pool_width(pool);
    check(tt_exec_init(&ex, pool, width > 0 ? width : 1), "tt_exec_init");
    check(tt_for_ranges(&ex, LEN, 64, body, NULL), "tt_for_ranges");
    for (size_t i = 0; i < LEN; i++) {
        if (hits[i] != 1) {
            fprintf(stderr, "outside: index %zu visited %u times\n", i, hits[i]);
            return 1;
        }
    }
    check(tt_pool_destroy(pool), "tt_pool_destroy");
    printf("outside: threadteam %s, pool width %u, %u indices once each: ok\n",
           TT_VERSION_STRING, width, LEN);
    return 0;
}
EOF

echo "==> check-install: shared"
# shellcheck disable=SC2086
"$CC" -std=c11 -Wall -Wextra -Werror $cflags -o "$tmp/outside" "$tmp/outside.c" $libs
LD_LIBRARY_PATH=$stagelib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$tmp/outside"
if command -v ldd >/dev/null 2>&1; then
    got=$(LD_LIBRARY_PATH=$stagelib ldd "$tmp/outside" | sed -n 's/.*libthreadteam[^ ]* => \([^ ]*\).*/\1/p')
    case $got in
    "$stagelib"/*) ;;
    *)
        echo "check-install: FAIL: the program loaded libthreadteam from '$got', not $stagelib" >&2
        exit 1
        ;;
    esac
fi

if test -f "$stagelib/libthreadteam.a"; then
    echo "==> check-install: static (pkg-config --static)"
    # Force the archive: -l:libthreadteam.a instead of -lthreadteam.
    slibs_a=$(printf '%s\n' "$slibs" | sed 's/-lthreadteam\([[:space:]]\|$\)/-l:libthreadteam.a\1/')
    # shellcheck disable=SC2086
    "$CC" -std=c11 -Wall -Wextra -Werror $cflags -o "$tmp/outside_static" "$tmp/outside.c" $slibs_a
    "$tmp/outside_static"
else
    echo "check-install: no libthreadteam.a installed (--disable-static): static link not checked"
fi

# The Fortran module (when the build had a Fortran compiler): the module,
# the archive and threadteam-fortran.pc are installed, and the Fortran
# example builds outside the tree with only pkg-config, then runs.
FC=${FC:-gfortran}
if test -f "$stagelib/pkgconfig/threadteam-fortran.pc"; then
    if ! command -v "$FC" >/dev/null 2>&1; then
        echo "check-install: FAIL: threadteam-fortran.pc installed but $FC not found" >&2
        exit 1
    fi
    echo "==> check-install: Fortran ($FC, pkg-config threadteam-fortran)"
    fflags=$(pkg-config --cflags threadteam-fortran)
    flibs=$(pkg-config --libs threadteam-fortran)
    echo "check-install: pkg-config --cflags --libs threadteam-fortran: $fflags $flibs"
    for f in "$destdir$includedir/threadteam/fortran/threadteam.mod" "$stagelib/libthreadteam_fortran.a"; do
        if test ! -f "$f"; then
            echo "check-install: FAIL: $f was not installed" >&2
            exit 1
        fi
    done
    cp "$root/fortran/example.f90" "$tmp/example.f90"
    # shellcheck disable=SC2086
    (cd "$tmp" && "$FC" -fopenmp -o example_f example.f90 $fflags $flibs)
    LD_LIBRARY_PATH=$stagelib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$tmp/example_f"
elif command -v gfortran >/dev/null 2>&1; then
    echo "check-install: FAIL: gfortran exists but threadteam-fortran.pc was not installed" \
         "(configure did not find the Fortran compiler?)" >&2
    exit 1
else
    echo "check-install: no Fortran compiler: Fortran module not checked"
fi

echo "check-install: PASS"
