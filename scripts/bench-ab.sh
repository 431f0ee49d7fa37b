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
#   AB_LOAD=K,P  run the whole comparison under load started here: K processes
#                busy P % of every 10 ms and one co-tenant OpenMP process (all
#                CPUs) meeting at barriers for P % of every 10 ms (the helpers
#                of this checkout's bench/bench_paths.c); the load column of
#                every row then says "<wait_scenarios' --load>+ab:K:P+omp"
#   PATHS=1      also alternate the everyday paths (this checkout's
#                bench/bench_paths.c, linked against each side's library, and
#                raw OpenMP) for the same rounds: PATHS_SCENARIOS (default
#                ranges,other-thread; any scenario of bench_paths.c, S-free
#                too), PATHS_REPS (default 7); prints base,
#                head, head/base and head/OpenMP (median and p90 per call) with
#                the targets of scripts/bench-paths.sh
#   AB_PATHS_CSV=FILE  append those rows to FILE (label,date,host,cpus,load,
#                policy,scenario,param,system,median_us,p50_us,p90_us,rounds)
#   OMP_WAIT_POLICY, GOMP_SPINCOUNT  are passed on to every side (a passive A/B)
# With OMP=1 the table also gives libgomp's p90 and whether head's p90 is at
# most libgomp's (the target of the team-scope wait scenarios under load).
#
# The acceptance check of the waits (issue 18), on a quiet host, then loaded:
#   OMP=1 PATHS=1 AB_CSV=docs/design/waiting-data/ab-<host>.csv \
#     AB_PATHS_CSV=docs/design/waiting-data/ab-paths-<host>.csv \
#     scripts/bench-ab.sh <base> HEAD 6 --reps 5 --widths <cpus>
#   OMP=1 PATHS=1 AB_LOAD=2,50 AB_CSV=... AB_PATHS_CSV=... \
#     scripts/bench-ab.sh <base> HEAD 6 --reps 5 --widths <cpus>
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
    # A worktree kept by an earlier run (KEEP=1) at the same commit, with its
    # programs built, is used as it is: a quiet run and a loaded one then
    # compare the same builds.
    if [ -x "$w/_ab_build/bench/wait_scenarios" ] &&
        [ "$(git -C "$w" rev-parse HEAD 2>/dev/null)" = "$(git -C "$top" rev-parse "$rev^{commit}")" ]; then
        echo "bench-ab.sh: reusing the build of $rev in $w" >&2
        echo "$w/_ab_build/bench"
        return 0
    fi
    git -C "$top" worktree add --force --detach "$w" "$rev" >/dev/null 2>&1
    if [ -f "$w/configure.ac" ]; then
        # Out of tree (this project's configure refuses the source tree).
        if (cd "$w" && { [ -x ./autogen.sh ] && ./autogen.sh || autoreconf -fi; } &&
            mkdir -p _ab_build && cd _ab_build && ../configure --quiet &&
            nice make -j"$(nproc)" >/dev/null &&
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
host=${BENCH_HOST:-$(hostname -s 2>/dev/null || hostname)}

# The everyday paths, and the load helpers: this checkout's bench_paths.c
# linked statically against each side's library.
paths_build() { # bench-dir out -> builds out from the side's library
    bdir=$1; out=$2
    lib=; inc=
    for l in "$bdir/../lib/.libs/libthreadteam.a" "$bdir/libtt.a"; do [ -f "$l" ] && { lib=$l; break; }; done
    for i in "$bdir/../include" "$bdir"; do [ -f "$i/threadteam.h" ] && { inc=$i; break; }; done
    [ -n "$lib" ] && [ -n "$inc" ] || return 1
    mkdir -p "$dir/cfg"
    printf '#define TT_HAVE_OPENBLAS 0\n' > "$dir/cfg/config.h"
    gcc -std=c11 -D_GNU_SOURCE -O2 -g ${align:-} -fopenmp -I"$dir/cfg" -I"$inc" "$top/bench/bench_paths.c" \
        "$lib" -fopenmp -lpthread -lm -o "$out" 2>"$out.err"
}
B_PATHS=; H_PATHS=
if [ "${PATHS:-0}" = 1 ] || [ -n "${AB_LOAD:-}" ]; then
    # Every loop head aligned, as configure does for the timed programs
    # (configure.ac, "Loop alignment"): the two sides' libraries import
    # different functions, which moves the benchmark's loops otherwise.
    align=
    if echo 'int x;' | gcc -falign-loops=64 -Werror -x c -c -o /dev/null - 2>/dev/null; then
        align=-falign-loops=64
    fi
    paths_build "$hb" "$dir/paths-head" && H_PATHS=$dir/paths-head ||
        echo "bench-ab.sh: cannot build bench_paths against head (see $dir/paths-head.err)" >&2
    paths_build "$bb" "$dir/paths-base" && B_PATHS=$dir/paths-base ||
        echo "bench-ab.sh: cannot build bench_paths against base (see $dir/paths-base.err)" >&2
fi

loadpids=
stop_load() {
    for p in $loadpids; do kill "$p" 2>/dev/null || true; done
    for p in $loadpids; do wait "$p" 2>/dev/null || true; done
    loadpids=
}
trap 'stop_load; cleanup' EXIT
abload=none
if [ -n "${AB_LOAD:-}" ]; then
    [ -n "$H_PATHS" ] || { echo "bench-ab.sh: AB_LOAD needs bench_paths" >&2; exit 1; }
    k=${AB_LOAD%%,*}; pct=${AB_LOAD#*,}
    i=0
    while [ "$i" -lt "$k" ]; do
        "$H_PATHS" --busy "$pct" & loadpids="$loadpids $!"
        i=$((i + 1))
    done
    env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT "$H_PATHS" --cotenant "$pct" & loadpids="$loadpids $!"
    sleep 1
    abload="$k:$pct+omp"
    echo "bench-ab.sh: load $abload started (pids$loadpids)" >&2
fi
policy=${OMP_WAIT_POLICY:-default}
raw_pb=$dir/paths-base.txt; raw_ph=$dir/paths-head.txt; raw_po=$dir/paths-omp.txt
run_paths() { # binary system out round
    for sc in $(echo "${PATHS_SCENARIOS:-ranges,other-thread}" | tr ',' ' '); do
        "$1" --system "$2" --scenario "$sc" --reps "${PATHS_REPS:-7}" 2>/dev/null | sed "s/^/$4 /" >> "$3" ||
            echo "bench-ab.sh: paths $2 $sc failed" >&2
    done
}

raw_b=$dir/base.csv; raw_h=$dir/head.csv; raw_o=$dir/omp.csv
# Every run starts its raw files afresh: a kept directory (KEEP=1) holds
# the previous run's, whose rows the summaries below would otherwise pool
# with this run's (a loaded run's tails in a quiet run's table).
: >"$raw_b"; : >"$raw_h"; : >"$raw_o"; : >"$raw_pb"; : >"$raw_ph"; : >"$raw_po"
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
    if [ "${PATHS:-0}" = 1 ] && [ -n "$H_PATHS" ] && [ -n "$B_PATHS" ]; then
        echo "bench-ab.sh: round $r/$rounds paths ($order, then raw OpenMP)" >&2
        for side in $order; do
            if [ "$side" = B ]; then run_paths "$B_PATHS" tt "$raw_pb" "$r"; else run_paths "$H_PATHS" tt "$raw_ph" "$r"; fi
        done
        run_paths "$H_PATHS" omp "$raw_po" "$r"
    fi
done
stop_load

# Pool each side's repetitions (bench.sh's aggregation), then join by row.
agg() { [ -s "$1" ] && sh "$here/bench.sh" --aggregate "$1" --label "$2" || true; }
{
    agg "$raw_b" "ab-base-$base_sha"
    agg "$raw_h" "ab-head-$head_sha"
    agg "$raw_o" "ab-omp"
} > "$dir/summary.csv"
if [ "$abload" != none ]; then
    awk -F, -v OFS=, -v l="$abload" '{ $10 = $10 "+ab:" l; print }' "$dir/summary.csv" > "$dir/summary.tmp" &&
        mv "$dir/summary.tmp" "$dir/summary.csv"
fi

printf '\nbase %s vs head %s, %s rounds, host %s, load %s, wait policy %s; us per call, median [p10, p90]; s = join+barrier+park sleeps per call\n\n' "$base_sha" "$head_sha" "$rounds" "$host" "$abload" "$policy"
awk -F, -v bl="ab-base-$base_sha" -v hl="ab-head-$head_sha" '
{
    k = $6 "|" $7 "|" $8 "|" $9 "|" $10
    if ($1 == "ab-omp") { ok0 = $6 "|" ($6 == "acquire" ? "team" : $7) "|" $8 "|" $9 "|" $10; O[ok0] = $13; OP[ok0] = $15; next }
    if (!(k in S)) { S[k] = 1; ord[++n] = k }
    if ($1 == bl) B[k] = $0; else if ($1 == hl) H[k] = $0
}
function c(line,   f) {
    if (line == "") return "-"
    split(line, f, ",")
    return sprintf("%.2f [%.2f, %.2f]%s", f[13], f[14], f[15], f[17] == "" ? "" : sprintf(" s%.2f", f[17] + f[18] + f[19]))
}
END {
    printf "| %-40s | %-32s | %-32s | %9s | %9s | %11s | %14s |\n", "scenario|param|metric|width|load", "base", "head", "head/base", "libgomp", "libgomp p90", "head p90<=gomp"
    printf "| %-40s | %-32s | %-32s | %9s | %9s | %11s | %14s |\n", "---", "---", "---", "---:", "---:", "---:", "---"
    for (i = 1; i <= n; i++) {
        k = ord[i]; split(B[k], b, ","); split(H[k], h, ",")
        rt = (B[k] != "" && H[k] != "" && b[13] > 0) ? sprintf("%.3f", h[13] / b[13]) : "-"
        split(k, kk, "|"); ok = kk[1] "|" (kk[1] == "acquire" ? "team" : kk[2]) "|" kk[3] "|" kk[4] "|" kk[5]
        v = (ok in OP && H[k] != "") ? ((h[15] <= OP[ok]) ? "PASS" : "MISS") : "-"
        printf "| %-40s | %-32s | %-32s | %9s | %9s | %11s | %14s |\n", k, c(B[k]), c(H[k]), rt, (ok in O) ? sprintf("%.2f", O[ok]) : "-", (ok in OP) ? sprintf("%.2f", OP[ok]) : "-", v
    }
}' "$dir/summary.csv"

if [ -n "${AB_CSV:-}" ]; then
    [ -s "$AB_CSV" ] || sed -n 's/^HEADER="\(.*\)"$/\1/p' "$here/bench.sh" > "$AB_CSV"
    cat "$dir/summary.csv" >> "$AB_CSV"
    echo "bench-ab.sh: summary rows appended to $AB_CSV" >&2
fi

# The everyday paths: per row the median over the rounds of each side's
# per-call median and p90, head/base, head/OpenMP, and bench-paths.sh's target.
if [ "${PATHS:-0}" = 1 ] && [ -s "$raw_ph" ] && [ -s "$raw_po" ]; then
    printf '\neveryday paths, %s rounds, load %s, wait policy %s: us per call (median of the rounds), p90 in brackets\n\n' "$rounds" "$abload" "$policy"
    printf '| %-20s | %-20s | %-20s | %-20s | %9s | %9s | %9s | %6s | %s |\n' "scenario param" base head omp head/base head/omp p90/omp target verdict
    printf '| %-20s | %-20s | %-20s | %-20s | %9s | %9s | %9s | %6s | %s |\n' --- --- --- --- ---: ---: ---: --- ---
    date=$(date -u +%Y-%m-%dT%H:%MZ)
    cpus=$(nproc 2>/dev/null || echo 0)
    for key in "ranges n=1000" "ranges n=100000" "ranges n=1000000" \
        "ranges-free n=1000" "ranges-free n=100000" "ranges-free n=1000000" \
        "scope n=1000" "scope n=100000" "scope n=1000000" "coexist 5us" "alternate 5us" \
        "alternate-free 5us" "external n=32" "external n=64" "external n=128" "external n=256" \
        "external n=512" "other-thread steady" "other-thread first" "other-thread first-scope" \
        "other-thread-free steady" "other-thread-free first" "other-thread-free first-scope"; do
        set -- $key
        grep -q "^[0-9]* $1 $2 " "$raw_ph" || continue
        m() { awk -v s="$1" -v p="$2" -v c="$3" '$2==s && $3==p {print $c}' "$4" | sort -g |
            awk '{v[NR]=$1} END {if (NR) print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2; else print 0}'; }
        bm=$(m "$1" "$2" 4 "$raw_pb"); b9=$(m "$1" "$2" 6 "$raw_pb"); b5=$(m "$1" "$2" 5 "$raw_pb")
        hm=$(m "$1" "$2" 4 "$raw_ph"); h9=$(m "$1" "$2" 6 "$raw_ph"); h5=$(m "$1" "$2" 5 "$raw_ph")
        om=$(m "$1" "$2" 4 "$raw_po"); o9=$(m "$1" "$2" 6 "$raw_po"); o5=$(m "$1" "$2" 5 "$raw_po")
        if [ "$abload" = none ] && [ "$policy" = default ]; then
            case "${1%-free} $2" in alternate*) tg=1.15 ;; "other-thread first"*) tg=2.0 ;; *) tg=1.10 ;; esac
            vd=$(awk -v a="$hm" -v b="$om" -v g="$tg" 'BEGIN {print (b > 0 && a / b <= g) ? "PASS" : "MISS"}')
        else
            tg=1.5
            vd=$(awk -v a="$hm" -v b="$om" -v c="$h9" -v d="$o9" -v g="$tg" 'BEGIN {print (b > 0 && d > 0 && a / b <= g && c / d <= g) ? "PASS" : "MISS"}')
        fi
        awk -v k="$1 $2" -v bm="$bm" -v b9="$b9" -v hm="$hm" -v h9="$h9" -v om="$om" -v o9="$o9" -v tg="$tg" -v vd="$vd" 'BEGIN {
            printf "| %-20s | %-20s | %-20s | %-20s | %9.3f | %9.3f | %9.3f | %6s | %s |\n", k,
                sprintf("%.2f [%.2f]", bm, b9), sprintf("%.2f [%.2f]", hm, h9), sprintf("%.2f [%.2f]", om, o9),
                (bm > 0) ? hm / bm : 0, (om > 0) ? hm / om : 0, (o9 > 0) ? h9 / o9 : 0, "<=" tg, vd }'
        if [ -n "${AB_PATHS_CSV:-}" ]; then
            [ -s "$AB_PATHS_CSV" ] || echo "label,date,host,cpus,load,policy,scenario,param,system,median_us,p50_us,p90_us,rounds" > "$AB_PATHS_CSV"
            {
                echo "ab-base-$base_sha,$date,$host,$cpus,$abload,$policy,$1,$2,threadteam,$bm,$b5,$b9,$rounds"
                echo "ab-head-$head_sha,$date,$host,$cpus,$abload,$policy,$1,$2,threadteam,$hm,$h5,$h9,$rounds"
                echo "ab-omp,$date,$host,$cpus,$abload,$policy,$1,$2,libgomp,$om,$o5,$o9,$rounds"
            } >> "$AB_PATHS_CSV"
        fi
    done
fi
