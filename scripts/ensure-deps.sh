#!/bin/sh
# ensure-deps.sh GROUP... -- make sure the tools a build step needs are there.
#
# Groups:
#   build     autoconf automake libtool pkg-config check (+ gcc make if absent)
#   valgrind  valgrind
#   bench     clang libomp-dev gnuplot-nox (optional: when missing it only
#             warns; the LLVM libomp baselines of omp/ are skipped, and
#             make bench writes its CSV but no plot without gnuplot)
#   cmake     cmake (optional: scripts/check-install.sh checks the installed
#             CMake package config with it, and says so when it is missing)
#   consumers gfortran libopenblas-openmp-dev openmpi-bin libopenmpi-dev
#             likwid (optional, like bench: the Fortran module, tests/test_blas,
#             examples/mpi and the LIKWID markers are skipped without them;
#             re-run configure after installing them)
#
# When something is missing and we are root on a system with apt-get, the
# packages are installed (apt-get update runs once). Otherwise the exact
# install command is printed and the script fails (except for `bench`).
set -u

have() { command -v "$1" >/dev/null 2>&1; }

missing_all=""      # tools/packages reported as missing
pkgs_fatal=""       # apt packages to install, required groups
pkgs_optional=""    # apt packages to install, optional groups

add_missing() { missing_all="$missing_all $1"; }

check_group() {
    group=$1
    miss=""
    case $group in
    build)
        list="autoconf automake libtool pkg-config check"
        have autoreconf || miss="$miss autoreconf"
        have automake || miss="$miss automake"
        have aclocal || miss="$miss aclocal"
        have libtoolize || miss="$miss libtoolize"
        if have pkg-config; then
            pkg-config --exists check 2>/dev/null || miss="$miss check.pc"
            # pkg.m4 (PKG_CHECK_MODULES) is needed by autoreconf.
            aclocal_dir=$(aclocal --print-ac-dir 2>/dev/null || echo /usr/share/aclocal)
            test -f "$aclocal_dir/pkg.m4" || miss="$miss pkg.m4"
        else
            miss="$miss pkg-config check.pc"
        fi
        extra=""
        have cc || have gcc || { miss="$miss cc"; extra="$extra gcc"; }
        have make || { miss="$miss make"; extra="$extra make"; }
        have nm || { miss="$miss nm"; extra="$extra binutils"; }
        list="$list$extra"
        ;;
    valgrind)
        list="valgrind"
        have valgrind || miss="$miss valgrind"
        ;;
    bench)
        list="clang libomp-dev gnuplot-nox"
        have gnuplot || miss="$miss gnuplot"
        clang_bin=""
        for c in clang clang-19 clang-18 clang-17 clang-16 clang-15 clang-14; do
            if have "$c"; then clang_bin=$c; break; fi
        done
        if test -z "$clang_bin"; then
            miss="$miss clang libomp"
        else
            tmp=$(mktemp -d 2>/dev/null || echo /tmp/tt-ensure-$$)
            mkdir -p "$tmp"
            printf '#include <omp.h>\nint main(void){return omp_get_max_threads()>0&&kmp_get_blocktime()>=0?0:1;}\n' >"$tmp/t.c"
            if ! "$clang_bin" -fopenmp=libomp "$tmp/t.c" -o "$tmp/t" >/dev/null 2>&1 &&
               ! "$clang_bin" -fopenmp "$tmp/t.c" -o "$tmp/t" >/dev/null 2>&1; then
                miss="$miss libomp"
            fi
            rm -rf "$tmp"
        fi
        ;;
    cmake)
        list="cmake"
        have cmake || miss="$miss cmake"
        ;;
    consumers)
        list="gfortran libopenblas-openmp-dev openmpi-bin libopenmpi-dev likwid"
        have gfortran || miss="$miss gfortran"
        if ! test -f /usr/include/x86_64-linux-gnu/openblas-openmp/cblas.h &&
           ! { have pkg-config && pkg-config --exists openblas 2>/dev/null; }; then
            miss="$miss openblas-openmp"
        fi
        have mpicc || miss="$miss mpicc"
        have mpirun || miss="$miss mpirun"
        have likwid-perfctr || miss="$miss likwid"
        ;;
    *)
        echo "ensure-deps.sh: unknown group '$group' (build, valgrind, bench, cmake, consumers)" >&2
        exit 2
        ;;
    esac
    if test -n "$miss"; then
        add_missing "$miss"
        if test "$group" = bench || test "$group" = consumers || test "$group" = cmake; then
            pkgs_optional="$pkgs_optional $list"
        else
            pkgs_fatal="$pkgs_fatal $list"
        fi
    fi
}

if test $# -eq 0; then
    set -- build
fi
for g in "$@"; do
    check_group "$g"
done

test -z "$missing_all" && exit 0

pkgs=$(echo $pkgs_fatal $pkgs_optional)
missing_all=$(echo $missing_all)
echo "ensure-deps: missing: $missing_all"

if test "$(id -u)" = 0 && have apt-get; then
    echo "ensure-deps: installing: $pkgs"
    if apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y $pkgs; then
        # Re-check (a package may not provide what was missing).
        missing_all=""; pkgs_fatal=""; pkgs_optional=""
        for g in "$@"; do check_group "$g"; done
        if test -n "$pkgs_fatal"; then
            echo "ensure-deps: still missing after installing: $(echo $missing_all)" >&2
            exit 1
        fi
        test -n "$missing_all" &&
            echo "ensure-deps: warning: still missing (optional): $(echo $missing_all)" >&2
        exit 0
    fi
    echo "ensure-deps: apt-get install failed" >&2
    test -n "$pkgs_fatal" && exit 1
    exit 0
fi

if have apt-get; then
    how="sudo apt-get install -y $pkgs"
else
    how="install these packages with your system's package manager: $pkgs"
fi
if test -n "$pkgs_fatal"; then
    echo "ensure-deps: error: required tools are missing. Run:" >&2
    echo "" >&2
    echo "    $how" >&2
    echo "" >&2
    exit 1
fi
echo "ensure-deps: warning: optional tools are missing (the LLVM libomp baselines, the bench" >&2
echo "plot, the CMake check, or the Fortran / OpenBLAS / MPI / LIKWID consumers, will be skipped)." >&2
echo "To get them, run:" >&2
echo "    $how" >&2
exit 0
