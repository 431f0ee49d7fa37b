#!/bin/sh
# check-install.sh [DESTDIR]  (default /tmp/tt-stage)
#
# DESTDIR is a staging folder, not an installation: it must be new, empty, or
# one that an earlier run of this script made (it then deletes and refills
# it); any other folder is refused, so a real install is never touched.
# Installs threadteam into DESTDIR (`make install DESTDIR=...` of the
# top-level Makefile; PREFIX from the environment is honoured), then builds
# a small outside program against the staged install with pkg-config --
# without any OpenMP flag -- and runs it: once linked with the shared library
# (LD_LIBRARY_PATH to the staged lib), once with the static one
# (pkg-config --static, which must bring the OpenMP runtime via Libs.private).
# Then the first program of README.md, built with the README's own link line
# (pkg-config and -Wl,-rpath), and a small CMake project that uses
# find_package(threadteam) and its imported targets (threadteam::threadteam,
# shared and static, and threadteam::threadteam_fortran when the Fortran
# module is installed). CMake is optional: without it that part says so.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
destdir=${1:-/tmp/tt-stage}
case $destdir in
/*) ;;
*) destdir=$(pwd)/$destdir ;;
esac
CC=${CC:-cc}
CXX=${CXX:-c++}
MAKE=${MAKE:-make}

# cmake for the find_package check (installed as root with apt-get; optional).
sh "$root/scripts/ensure-deps.sh" cmake || true

# The staging folder is this script's own: it deletes a folder only when an
# earlier run of it made that folder (the mark file below), and refuses a
# folder that exists with other contents, such as a real installation.
mark=.threadteam-check-install
if test -e "$destdir" && test ! -f "$destdir/$mark" &&
   test -n "$(ls -A "$destdir" 2>/dev/null)"; then
    echo "check-install: $destdir exists and was not made by check-install.sh;" \
         "give an empty or new folder (it stages an install there and deletes it next time)" >&2
    exit 2
fi
echo "==> check-install: make install DESTDIR=$destdir"
if test -f "$destdir/$mark"; then
    rm -rf "$destdir"
fi
mkdir -p "$destdir"
: >"$destdir/$mark"
if test -n "${PREFIX:-}"; then
    "$MAKE" -C "$root" install DESTDIR="$destdir" PREFIX="$PREFIX"
else
    "$MAKE" -C "$root" install DESTDIR="$destdir"
fi

dirs=$("$MAKE" -s --no-print-directory -C "$root/build" print-install-dirs)
libdir=$(printf '%s\n' "$dirs" | sed -n 's/^libdir=//p')
prefix=$(printf '%s\n' "$dirs" | sed -n 's/^prefix=//p')
includedir=$(printf '%s\n' "$dirs" | sed -n 's/^includedir=//p')
stagelib=$destdir$libdir

for f in "$destdir$includedir/threadteam.h" "$destdir$includedir/threadteam.hpp" "$stagelib/libthreadteam.so" \
         "$stagelib/pkgconfig/threadteam.pc" "$stagelib/cmake/threadteam/threadteam-config.cmake" \
         "$stagelib/cmake/threadteam/threadteam-config-version.cmake"; do
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

# The README's first program, with the README's link line: it must print its
# check line.
if test -f "$root/README.md"; then
    echo "==> check-install: the first program of README.md (pkg-config, -Wl,-rpath)"
    awk '/^```c$/ { f = 1; next } /^```$/ { if (f) exit } f' "$root/README.md" >"$tmp/first.c"
    # shellcheck disable=SC2086
    "$CC" -O2 -std=c11 -Wall -Wextra -Werror "$tmp/first.c" -o "$tmp/first" $cflags $libs -Wl,-rpath,"$stagelib"
    out=$("$tmp/first")
    printf '%s\n' "$out" | sed 's/^/check-install: README: /'
    case $out in
    *"ok: "*) ;;
    *)
        echo "check-install: FAIL: the README's program did not print its ok line" >&2
        exit 1
        ;;
    esac
fi

# A C++ program over the installed threadteam.hpp (header-only: the same
# pkg-config line as C), when a C++17 compiler is here.
have_cxx=no
cat >"$tmp/outside_cpp.cpp" <<'EOF'
#include <threadteam.hpp>

#include <cstdio>
#include <stdexcept>

int main()
{
    tt::pool pool(tt::pool_options().threads(2));
    double s = pool.token(2).reduce_sum(1000, 100, [](size_t b, size_t e) { return double(e - b); });
    bool caught = false;
    try {
        std::move(pool.token(2)).fork(2, [](unsigned i, tt::exec &&child) {
            std::move(child).for_ranges(10, 1, [&](size_t, size_t) {
                if (i == 1)
                    throw std::runtime_error("from a range");
            });
        });
    } catch (const std::runtime_error &) {
        caught = true;
    }
    if (s != 1000.0 || !caught)
        return 1;
    std::printf("ok: C++ front, width %u, sum %g, an exception carried out of a range\n", pool.width(), s);
    return 0;
}
EOF
if command -v "$CXX" >/dev/null 2>&1 &&
   echo 'int main() { return __cplusplus >= 201703L ? 0 : 1; }' >"$tmp/cxx17.cpp" &&
   "$CXX" -std=c++17 -o "$tmp/cxx17" "$tmp/cxx17.cpp" 2>/dev/null && "$tmp/cxx17"; then
    have_cxx=yes
    echo "==> check-install: C++ ($CXX -std=c++17, threadteam.hpp, pkg-config)"
    # shellcheck disable=SC2086
    "$CXX" -std=c++17 -O2 -Wall -Wextra -Werror $cflags -o "$tmp/outside_cpp" "$tmp/outside_cpp.cpp" \
        $libs -Wl,-rpath,"$stagelib"
    out=$("$tmp/outside_cpp") || {
        echo "check-install: FAIL: the C++ program failed" >&2
        exit 1
    }
    printf '%s\n' "$out" | sed 's/^/check-install: C++: /'
else
    echo "check-install: no C++17 compiler ($CXX): the C++ front not checked (apt-get install g++)"
fi

# The README's first C++ program (its first ```cpp block), when there is
# one and a C++17 compiler: built with the README's line, it must run.
if test "$have_cxx" = yes && test -f "$root/README.md" && grep -q '^```cpp$' "$root/README.md"; then
    echo "==> check-install: the first C++ program of README.md"
    awk '/^```cpp$/ { f = 1; next } /^```$/ { if (f) exit } f' "$root/README.md" >"$tmp/first_cpp.cpp"
    # shellcheck disable=SC2086
    "$CXX" -std=c++17 -O2 -Wall -Wextra -Werror "$tmp/first_cpp.cpp" -o "$tmp/first_cpp" $cflags $libs \
        -Wl,-rpath,"$stagelib"
    out=$("$tmp/first_cpp") || {
        echo "check-install: FAIL: the README's C++ program failed" >&2
        exit 1
    }
    printf '%s\n' "$out" | sed 's/^/check-install: README (C++): /'
fi

# A CMake project: find_package(threadteam) through CMAKE_PREFIX_PATH.
if command -v cmake >/dev/null 2>&1; then
    echo "==> check-install: CMake ($(cmake --version | head -n 1)), find_package(threadteam)"
    proj=$tmp/cmake-proj
    mkdir -p "$proj"
    cp "$tmp/outside.c" "$proj/outside.c"
    cp "$tmp/outside_cpp.cpp" "$proj/outside_cpp.cpp"
    fortran=OFF
    if test -f "$stagelib/pkgconfig/threadteam-fortran.pc" && command -v "$FC" >/dev/null 2>&1; then
        fortran=ON
        cp "$root/fortran/example.f90" "$proj/example.f90"
    fi
    cat >"$proj/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.9)
project(tt_consumer C)
option(WITH_FORTRAN "build the Fortran example" OFF)
if(WITH_FORTRAN)
  find_package(threadteam 0.1 REQUIRED COMPONENTS fortran)
else()
  find_package(threadteam 0.1 REQUIRED)
endif()
message(STATUS "threadteam ${threadteam_VERSION}: ${threadteam_LIBRARY_DIR}")
add_executable(outside outside.c)
set_property(TARGET outside PROPERTY C_STANDARD 11)
target_link_libraries(outside PRIVATE threadteam::threadteam)
option(WITH_CXX "build the C++ program (threadteam.hpp)" OFF)
if(WITH_CXX)
  enable_language(CXX)
  add_executable(outside_cpp outside_cpp.cpp)
  set_property(TARGET outside_cpp PROPERTY CXX_STANDARD 17)
  target_link_libraries(outside_cpp PRIVATE threadteam::threadteam)
endif()
if(WITH_FORTRAN)
  enable_language(Fortran)
  find_package(OpenMP REQUIRED COMPONENTS Fortran)
  add_executable(example_f example.f90)
  target_link_libraries(example_f PRIVATE threadteam::threadteam_fortran OpenMP::OpenMP_Fortran)
endif()
EOF
    cxxopt=OFF
    test "$have_cxx" = yes && cxxopt=ON
    for kind in shared static; do
        b=$proj/build-$kind
        static=OFF
        test "$kind" = static && static=ON
        if test "$kind" = static && test ! -f "$stagelib/libthreadteam.a"; then
            echo "check-install: no libthreadteam.a: CMake static link not checked"
            continue
        fi
        if ! cmake -S "$proj" -B "$b" -DCMAKE_PREFIX_PATH="$destdir$prefix" \
            -Dthreadteam_USE_STATIC=$static -DWITH_FORTRAN=$fortran -DWITH_CXX=$cxxopt >"$b.log" 2>&1 ||
           ! cmake --build "$b" >>"$b.log" 2>&1; then
            cat "$b.log" >&2
            echo "check-install: FAIL: the CMake project ($kind) did not build" >&2
            exit 1
        fi
        # No LD_LIBRARY_PATH: CMake's build-tree rpath must find the staged library.
        "$b/outside" | sed "s/^/check-install: cmake $kind: /"
        if test "$cxxopt" = ON; then
            out=$("$b/outside_cpp") || {
                echo "check-install: FAIL: the CMake-built C++ program failed ($kind)" >&2
                exit 1
            }
            printf '%s\n' "$out" | sed "s/^/check-install: cmake $kind: /"
        fi
        if test "$kind" = shared && command -v ldd >/dev/null 2>&1; then
            got=$(ldd "$b/outside" | sed -n 's/.*libthreadteam[^ ]* => \([^ ]*\).*/\1/p')
            case $got in
            "$stagelib"/*) ;;
            *)
                echo "check-install: FAIL: the CMake program loaded libthreadteam from '$got', not $stagelib" >&2
                exit 1
                ;;
            esac
        fi
        if test "$fortran" = ON; then
            "$b/example_f" >/dev/null || {
                echo "check-install: FAIL: the CMake-built Fortran example failed ($kind)" >&2
                exit 1
            }
            echo "check-install: cmake $kind: Fortran example (threadteam::threadteam_fortran): ok"
        fi
    done
else
    echo "check-install: cmake not found: find_package(threadteam) not checked (apt-get install cmake)"
fi

echo "check-install: PASS"
