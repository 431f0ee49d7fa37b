#!/bin/sh
# check-public-api.sh <installed-include-dir> <path-to-libthreadteam.so>
#
# Checks the installed public surface of threadteam:
#  1. threadteam.h includes no OpenMP header and names no OpenMP type or
#     function (the preprocessed header, comments stripped, is searched,
#     case-insensitively, for identifiers omp_*, kmp_*, __kmpc_*, for gomp
#     and #include <omp...>), and it compiles without -fopenmp;
#  2. the shared library exports only tt_* symbols (never tt__* internals).
# Exit status 0 when both hold, 1 otherwise (with the offending lines).
set -u

if test $# -ne 2; then
    echo "usage: $0 <installed-include-dir> <path-to-libthreadteam.so>" >&2
    exit 2
fi
incdir=$1
so=$2
hdr="$incdir/threadteam.h"
CC=${CC:-cc}
NM=${NM:-nm}
status=0

fail() {
    echo "check-public-api: FAIL: $*" >&2
    status=1
}

if test ! -f "$hdr"; then
    echo "check-public-api: FAIL: $hdr not found" >&2
    exit 1
fi
if test ! -f "$so"; then
    echo "check-public-api: FAIL: $so not found" >&2
    exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tt-api.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# --- 1. The header -----------------------------------------------------------
# Direct includes of an OpenMP header (before preprocessing: `#include`
# lines vanish from -E output).
if grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"](omp\.h|omp_lib)' "$hdr" >"$tmp/inc"; then
    fail "$hdr includes an OpenMP header:"
    sed 's/^/    /' "$tmp/inc" >&2
fi

# The preprocessed header (comments stripped; what it pulls in included).
if "$CC" -E -P -x c -I"$incdir" "$hdr" >"$tmp/pp.c" 2>"$tmp/pp.err"; then
    # omp_* / kmp_* / __kmpc_* identifiers (not e.g. tt_comp_x), gomp anywhere.
    if grep -niE '(^|[^[:alnum:]])_*(omp|kmpc?)_|gomp|#[[:space:]]*include[[:space:]]*<omp' "$tmp/pp.c" >"$tmp/omp"; then
        fail "$hdr names OpenMP (preprocessed with $CC -E -P):"
        head -n 20 "$tmp/omp" | sed 's/^/    /' >&2
    fi
else
    fail "$hdr does not preprocess:"
    sed 's/^/    /' "$tmp/pp.err" >&2
fi

# It must compile in a program built without -fopenmp.
printf '#include <threadteam.h>\nint main(void) { return TT_VERSION_MAJOR < 0; }\n' >"$tmp/use.c"
if ! "$CC" -std=c11 -fsyntax-only -I"$incdir" "$tmp/use.c" 2>"$tmp/cc.err"; then
    fail "$hdr does not compile without OpenMP flags:"
    sed 's/^/    /' "$tmp/cc.err" >&2
fi

# --- 2. The exported symbols -------------------------------------------------
if ! "$NM" -D --defined-only "$so" >"$tmp/nm" 2>"$tmp/nm.err"; then
    fail "$NM -D --defined-only $so failed:"
    sed 's/^/    /' "$tmp/nm.err" >&2
else
    # Lines: [address] TYPE NAME[@VERSION]. Global defined types only.
    awk 'NF >= 2 { t = $(NF-1); n = $NF; sub(/@.*/, "", n);
                   if (t ~ /^[BDGRSTVWiu]$/) print t, n }' "$tmp/nm" >"$tmp/syms"
    grep -vE ' tt_[^_]' "$tmp/syms" >"$tmp/bad"
    if test -s "$tmp/bad"; then
        fail "$so exports symbols outside tt_* (or internal tt__*):"
        sed 's/^/    /' "$tmp/bad" >&2
    fi
    if ! grep -qE ' tt_[^_]' "$tmp/syms"; then
        fail "$so exports no tt_* symbol at all"
    fi
fi

if test $status -eq 0; then
    n=$(grep -cE ' tt_[^_]' "$tmp/syms")
    echo "check-public-api: PASS: $hdr is OpenMP-free; $so exports $n symbols, all tt_*"
fi
exit $status
