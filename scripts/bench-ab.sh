#!/bin/sh
# bench-ab.sh -- compare two commits of threadteam on the wait benchmarks.
#
# Builds both revisions (git worktrees under /tmp) and alternates their
# bench/wait_scenarios, in separate processes, for <rounds> rounds (base first
# in odd rounds, head first in even ones), so that a drift of other users'
# load falls on both sides. Prints base, head and head / base per row.
#
# usage: scripts/bench-ab.sh <base-rev> <head-rev> <rounds> [bench args]
#   bench args   options of wait_scenarios (default: --reps 5), e.g.
#                --scenario gaps --widths 4 --load 2:10
# Environment:
#   OMP=1        also run the head's wait_omp_gomp in every round with the same
#                arguments (its acquire rows are libgomp's held team)
#   AB_DIR       where the worktrees go (default /tmp/tt-ab.<pid>)
#   KEEP=1       keep the worktrees and builds afterwards
#   AB_CSV=FILE  also append the summary rows (labels ab-base-<rev>,
#                ab-head-<rev>, ab-omp) to FILE, in the columns of bench.sh
#
# A revision with configure.ac is built with autotools, out of tree
# (autoreconf -fi, ../configure, make, make bench-programs); one without, or
# whose build has no bench programs, is compiled directly (lib/*.c, then the
# bench sources of that revision, or of this checkout when it has none).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
LC_ALL=C
export LC_ALL

if [ $# -lt 3 ]; then
    sed -n '2,/^set -eu/p' "$0" | sed 's/^# \{0,1\}//;/^set -eu/d' >&2
    exit 2
fi
base=$1; head=$2; rounds=$3; shift 3
[ $# -eq 0 ] && set -- --reps 5

base_sha=$(git -C "$top" rev-parse --short "$base^{commit}")
head_sha=$(git -C "$top" rev-parse --short "$head^{commit}")
dir=${AB_DIR:-/tmp/tt-ab.$$}
mkdir -p "$dir"
cleanup() {
    if [ "${KEEP:-0}" != 1 ]; then
        for side in base head; do
            [ -d "$dir/$side" ] && git -C "$top" worktree remove --force "$dir/$side" 2>/dev/null || true
        done
        rm -rf "$dir"
        git -C "$top" worktree prune 2>/dev/null || true
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

direct_build() { # worktree
    w=$1; b=$w/_ab
    mkdir -p "$b"
    hin=$w/include/threadteam.h.in
    sed -e 's/@TT_VERSION_MAJOR@/0/;s/@TT_VERSION_MINOR@/0/;s/@TT_VERSION_PATCH@/0/' \
        -e 's/@PACKAGE_VERSION@/ab/;s/@TT_PARALLEL_ENABLED@/1/;s/@TT_LEDGER_ENABLED@/0/' \
        -e 's/@[A-Z_]*@/0/g' "$hin" > "$b/threadteam.h"
    printf '#define TT_HAVE_OPENMP 1\n#define TT_ENABLE_DEBUG 0\n' > "$b/config.h"
    objs=
    for src in "$w"/lib/*.c; do
        o=$b/$(basename "$src" .c).o
        if gcc -std=c11 -D_GNU_SOURCE -O2 -g -fopenmp -I"$b" -I"$w/lib" -c "$src" -o "$o" 2>"$o.err"; then
            objs="$objs $o"
        else
            echo "bench-ab.sh: $src does not compile, left out" >&2
        fi
    done
    # shellcheck disable=SC2086
    ar rcs "$b/libtt.a" $objs
    bsrc=$w/bench
    [ -f "$bsrc/wait_scenarios.c" ] || bsrc=$top/bench
    osrc=$w/omp
    [ -f "$osrc/wait_omp.c" ] || osrc=$top/omp
    gcc -std=c11 -D_GNU_SOURCE -O2 -g -I"$b" -I"$bsrc" "$bsrc/wait_scenarios.c" "$bsrc/bench_common.c" \
        "$b/libtt.a" -fopenmp -lm -lpthread -o "$b/wait_scenarios"
    gcc -std=c11 -D_GNU_SOURCE -O2 -g -fopenmp -I"$bsrc" "$osrc/wait_omp.c" "$bsrc/bench_common.c" \
        -lm -o "$b/wait_omp_gomp" || true
    echo "$b"
}

build_rev() { # side rev -> prints the directory of the programs
    side=$1; rev=$2; w=$dir/$side
    git -C "$top" worktree add --force --detach "$w" "$rev" >/dev/null 2>&1
    if [ -f "$w/configure.ac" ]; then
        # Out of tree (this project's configure refuses the source tree).
        if (cd "$w" && { [ -x ./autogen.sh ] && ./autogen.sh || autoreconf -fi; } &&
            mkdir -p _ab_build && cd _ab_build && ../configure --quiet &&
            make -j"$(nproc)" >/dev/null &&
            { make bench-programs >/dev/null 2>&1 ||
              make -C bench wait_scenarios >/dev/null; }) >"$w/ab-build.log" 2>&1 &&
            [ -x "$w/_ab_build/bench/wait_scenarios" ]; then
            echo "$w/_ab_build/bench"
            return 0
        fi
        echo "bench-ab.sh: the autotools build of $rev failed or has no bench programs" \
            "(see $w/ab-build.log); compiling directly" >&2
        [ "${KEEP:-0}" = 1 ] || cp "$w/ab-build.log" "$dir/$side-build.log" 2>/dev/null || true
    fi
    direct_build "$w"
}

echo "bench-ab.sh: building base $base_sha and head $head_sha in $dir" >&2
bb=$(build_rev base "$base")
hb=$(build_rev head "$head")
find_in() { for p in "$1/$2" "$1/../omp/$2" "$1/../omp/${2}"; do [ -x "$p" ] && { echo "$p"; return; }; done; echo ""; }
B_TT=$(find_in "$bb" wait_scenarios)
H_TT=$(find_in "$hb" wait_scenarios)
H_OMP=$(find_in "$hb" wait_omp_gomp)

raw_b=$dir/base.csv; raw_h=$dir/head.csv; raw_o=$dir/omp.csv
r=0
while [ "$r" -lt "$rounds" ]; do
    r=$((r + 1))
    if [ $((r % 2)) = 1 ]; then order="B H"; else order="H B"; fi
    for side in $order; do
        if [ "$side" = B ]; then
            echo "bench-ab.sh: round $r/$rounds base $base_sha" >&2
            "$B_TT" --label "ab-base-$base_sha" --csv "$raw_b" --quiet "$@" || echo "bench-ab.sh: base run failed" >&2
        else
            echo "bench-ab.sh: round $r/$rounds head $head_sha" >&2
            "$H_TT" --label "ab-head-$head_sha" --csv "$raw_h" --quiet "$@" || echo "bench-ab.sh: head run failed" >&2
        fi
    done
    if [ "${OMP:-0}" = 1 ] && [ -n "$H_OMP" ]; then
        echo "bench-ab.sh: round $r/$rounds libgomp" >&2
        "$H_OMP" --label "ab-omp" --csv "$raw_o" --quiet "$@" || echo "bench-ab.sh: libgomp run failed" >&2
    fi
done

# Pool each side's repetitions (bench.sh's aggregation), then join by row.
agg() { [ -s "$1" ] && sh "$here/bench.sh" --aggregate "$1" --label "$2" || true; }
{
    agg "$raw_b" "ab-base-$base_sha"
    agg "$raw_h" "ab-head-$head_sha"
    agg "$raw_o" "ab-omp"
} > "$dir/summary.csv"

printf '\nbase %s vs head %s, %s rounds; us per call, median [p10, p90]; s = join+barrier+park sleeps per call\n\n' "$base_sha" "$head_sha" "$rounds"
awk -F, -v bl="ab-base-$base_sha" -v hl="ab-head-$head_sha" '
{
    k = $6 "|" $7 "|" $8 "|" $9 "|" $10
    if ($1 == "ab-omp") { O[$6 "|" ($6 == "acquire" ? "team" : $7) "|" $8 "|" $9 "|" $10] = $13; next }
    if (!(k in S)) { S[k] = 1; ord[++n] = k }
    if ($1 == bl) B[k] = $0; else if ($1 == hl) H[k] = $0
}
function c(line,   f) {
    if (line == "") return "-"
    split(line, f, ",")
    return sprintf("%.2f [%.2f, %.2f]%s", f[13], f[14], f[15], f[17] == "" ? "" : sprintf(" s%.2f", f[17] + f[18] + f[19]))
}
END {
    printf "| %-40s | %-32s | %-32s | %9s | %9s |\n", "scenario|param|metric|width|load", "base", "head", "head/base", "libgomp"
    printf "| %-40s | %-32s | %-32s | %9s | %9s |\n", "---", "---", "---", "---:", "---:"
    for (i = 1; i <= n; i++) {
        k = ord[i]; split(B[k], b, ","); split(H[k], h, ",")
        rt = (B[k] != "" && H[k] != "" && b[13] > 0) ? sprintf("%.3f", h[13] / b[13]) : "-"
        split(k, kk, "|"); ok = kk[1] "|" (kk[1] == "acquire" ? "team" : kk[2]) "|" kk[3] "|" kk[4] "|" kk[5]
        printf "| %-40s | %-32s | %-32s | %9s | %9s |\n", k, c(B[k]), c(H[k]), rt, (ok in O) ? sprintf("%.2f", O[ok]) : "-"
    }
}' "$dir/summary.csv"

if [ -n "${AB_CSV:-}" ]; then
    [ -s "$AB_CSV" ] || sed -n 's/^HEADER="\(.*\)"$/\1/p' "$here/bench.sh" > "$AB_CSV"
    cat "$dir/summary.csv" >> "$AB_CSV"
    echo "bench-ab.sh: summary rows appended to $AB_CSV" >&2
fi
