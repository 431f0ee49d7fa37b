#!/bin/sh
# bench-paths.sh -- the everyday paths (bench/bench_paths.c) side by side:
# raw OpenMP and threadteam alternating in separate processes (OpenMP first
# in odd rounds, threadteam first in even ones; a scenario's two sides
# back to back), ROUNDS rounds; prints per row the median over the rounds
# of each system's per-call medians, the ratio threadteam / OpenMP, the
# same for the 90th percentile of single calls, the median and the worst
# of the per-round ratios, and the target:
#   quiet, default wait policy (ratio of the medians):
#     ranges        <= 1.10x `omp parallel for` at 10^5 and 10^6 doubles; at
#                   10^3 the isolated default is reported (INFO: one nested
#                   one-thread region per participant, ~2.5 us per root)
#     ranges-free   the same on a pool whose shares are declared OpenMP-free
#                   (tt_pool_attr_set_isolate_shares(false)): <= 1.10x at
#                   every size
#     scope         <= 1.10x `omp parallel` with the same split: a token per
#                   call and a team scope whose one section splits an axpy
#                   over 10^3, 10^5, 10^6 doubles by rank; at 10^3 <= 1.35x
#                   (the handoffs a held region needs; the agreed change of
#                   the specification), 2.0x under passive (at the pool's full
#                   width the scope's participants are its region's team, not
#                   isolated: no -free twin)
#     coexist       <= 1.10x (the application's regions with an idle pool alive)
#     alternate     <= 1.15x (its regions alternating with pooled calls)
#     external      <= 1.10x the direct dgemm call at the same width, n = 32..512
#                   (only when bench_paths was built with OpenBLAS)
#     other-thread  steady <= 1.10x the `omp parallel` of that thread;
#                   first  <= 2.0x the first `omp parallel` of a fresh thread
#                   (first-scope: its first team scope of one section, the same)
#     S-free        scenario S on a pool whose shares are declared OpenMP-free,
#                   same target as S. Where S-free was measured and the
#                   isolated S misses its target while S-free meets it, S
#                   is reported (INFO): the specification's rule, the target
#                   holds for OpenMP-free pools and the isolated cost is
#                   reported beside it. A miss of S-free is a MISS.
#   under --load or --wait-policy passive: every row, median and p90, <= 1.5x
#   (the scope at 10^3 doubles under passive: <= 2.0x)
#
# Usage: scripts/bench-paths.sh [options] [BENCH_BIN] [ROUNDS] [CSV]
#   --load K,P          (shown as K:P+omp) K processes busy P % of every 10 ms, and one co-tenant
#                       OpenMP process (all CPUs) meeting at barriers for P % of
#                       every 10 ms, started here for the whole run (both sides
#                       run under it); reported in every row
#   --wait-policy passive   run both sides under OMP_WAIT_POLICY=passive
#   --scenarios LIST    comma-separated (default ranges,ranges-free,scope,coexist,alternate,
#                       alternate-free,external,other-thread,other-thread-free)
#   --runtime R         the application's OpenMP runtime, for both sides (raw
#                       OpenMP and threadteam): auto (default: the one BENCH_BIN
#                       links), libgomp, or libomp (LLVM). A GCC-built BENCH_BIN
#                       then runs with libomp preloaded (LD_PRELOAD; LIBOMP=path,
#                       default clang's or the system's libomp.so.5), so that its
#                       regions and the library's calls land in libomp's GOMP
#                       layer, as in a clang application linking the GCC-built
#                       library (runtime column: libomp-preload); a clang build's
#                       bench_paths (build-clang/bench/bench_paths) runs as it is
#                       (libomp). Also BENCH_RUNTIME=R.
# The CSV gets one row per configuration; the first eight columns are the
# original ones (label,scenario,param,omp_us,tt_us,ratio,target,verdict), the
# rest are added at the end: load,policy,omp_p50_us,tt_p50_us,omp_p90_us,
# tt_p90_us,ratio_p90,round_ratio_median,round_ratio_max,rounds,host,runtime.
# A CSV with an older header gets the new one, its old rows padded with empty
# fields.
# Environment: BENCH_LABEL (default: the short commit), BENCH_HOST (default
# hostname -s), PATHS_REPS (repetitions per process, default 7), PATHS_PASSES
# (when no --load or --wait-policy is given: the passes to run one after the
# other, e.g. "quiet load=2,50 passive"; default "quiet"), which is how
# `make bench` (scripts/bench.sh calls this script with positional arguments
# only) runs the loaded and passive passes too.
LC_ALL=C
export LC_ALL
load=none
policy=default
scenarios=ranges,ranges-free,scope,coexist,alternate,alternate-free,external,other-thread,other-thread-free
runtime=${BENCH_RUNTIME:-auto}
while [ $# -gt 0 ]; do
    case $1 in
    --load) load=$2; shift 2 ;;
    --load=*) load=${1#--load=}; shift ;;
    --wait-policy) policy=$2; shift 2 ;;
    --wait-policy=*) policy=${1#--wait-policy=}; shift ;;
    --scenarios) scenarios=$2; shift 2 ;;
    --scenarios=*) scenarios=${1#--scenarios=}; shift ;;
    --runtime) runtime=$2; shift 2 ;;
    --runtime=*) runtime=${1#--runtime=}; shift ;;
    --help | -h) sed -n '2,/^LC_ALL/p' "$0" | sed '$d;s/^# \{0,1\}//' >&2; exit 2 ;;
    --*) echo "bench-paths.sh: unknown option $1" >&2; exit 2 ;;
    *) break ;;
    esac
done
if [ "$load" = none ] && [ "$policy" = default ] && [ -n "${PATHS_PASSES:-}" ] &&
    [ "${PATHS_PASSES}" != quiet ]; then
    rc=0
    BENCH_RUNTIME=$runtime
    export BENCH_RUNTIME
    for pass in $PATHS_PASSES; do
        case $pass in
        quiet) PATHS_PASSES= sh "$0" --scenarios "$scenarios" "$@" || rc=1 ;;
        load=*) PATHS_PASSES= sh "$0" --scenarios "$scenarios" --load "${pass#load=}" "$@" || rc=1 ;;
        passive) PATHS_PASSES= sh "$0" --scenarios "$scenarios" --wait-policy passive "$@" || rc=1 ;;
        *) echo "bench-paths.sh: unknown pass $pass (quiet, load=K,P, passive)" >&2; rc=2 ;;
        esac
    done
    exit "$rc"
fi
bin=${1:-build/bench/bench_paths}
rounds=${2:-7}
csv=${3:-}
host=${BENCH_HOST:-$(hostname -s 2>/dev/null || hostname)}
case $policy in
default) ;;
passive | active) OMP_WAIT_POLICY=$policy; export OMP_WAIT_POLICY ;;
*) echo "bench-paths.sh: --wait-policy passive|active|default" >&2; exit 2 ;;
esac
# The runtime both sides run on (run: the command prefix).
run=
bin_rt=libgomp
if env LD_PRELOAD= ldd "$bin" 2>/dev/null | grep -q 'lib\(i\)\{0,1\}omp[0-9]*\.so'; then bin_rt=libomp; fi
case $runtime in
auto) rtname=$bin_rt ;;
libgomp)
    [ "$bin_rt" = libgomp ] || { echo "bench-paths.sh: $bin is built on libomp, not libgomp" >&2; exit 2; }
    rtname=libgomp ;;
libomp)
    if [ "$bin_rt" = libomp ]; then
        rtname=libomp
    else
        lib=${LIBOMP:-}
        if [ -z "$lib" ]; then
            for c in $(clang -print-file-name=libomp.so.5 2>/dev/null) /usr/lib/x86_64-linux-gnu/libomp.so.5 \
                /usr/lib/llvm-*/lib/libomp.so.5 /usr/lib64/libomp.so /usr/local/lib/libomp.so; do
                case $c in /*) if [ -f "$c" ]; then lib=$(readlink -f "$c"); break; fi ;; esac
            done
        fi
        [ -n "$lib" ] && [ -f "$lib" ] ||
            { echo "bench-paths.sh: --runtime libomp: libomp not found (apt-get install libomp-dev, or LIBOMP=path)" >&2; exit 2; }
        run="env LD_PRELOAD=$lib"
        rtname=libomp-preload
    fi ;;
*) echo "bench-paths.sh: --runtime auto|libgomp|libomp" >&2; exit 2 ;;
esac
tmp=$(mktemp -d)
loadpids=
stop_load() {
    for p in $loadpids; do kill "$p" 2>/dev/null; done
    for p in $loadpids; do wait "$p" 2>/dev/null; done
    loadpids=
}
trap 'stop_load; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM HUP
if [ "$load" != none ]; then
    k=${load%%,*}; pct=${load#*,}
    case $k$pct in *[!0-9]*|'') echo "bench-paths.sh: --load K,P (numbers)" >&2; exit 2 ;; esac
    i=0
    while [ "$i" -lt "$k" ]; do
        "$bin" --busy "$pct" & loadpids="$loadpids $!"
        i=$((i + 1))
    done
    # the co-tenant keeps libgomp's default waits whatever this run's policy
    env -u OMP_WAIT_POLICY "$bin" --cotenant "$pct" & loadpids="$loadpids $!"
    sleep 1 # let the load settle into its period
    loadname="$k:$pct+omp"
else
    loadname=none
fi
scen_list=$(echo "$scenarios" | tr ',' ' ')
# How far apart the first two CPUs are now (bench/core_distance.c): a
# handoff between cores costs what this says, and on a host whose CPUs move
# it changes from minute to minute; printed with the rows.
distance() {
    d=$(dirname "$bin")/core_distance
    if [ -x "$d" ]; then "$d" 2>/dev/null | sed 's/^core_distance: //'; else echo "n/a (core_distance not built)"; fi
}
dist_before=$(distance)
# Each scenario's two sides run back to back, so that a round's ratio pairs
# processes seconds apart (the host's slower and faster phases fall on both
# sides of a pair), not a whole side's scenarios apart.
for r in $(seq 1 "$rounds"); do
    if [ $((r % 2)) = 1 ]; then order="omp tt"; else order="tt omp"; fi
    for sc in $scen_list; do
        for sys in $order; do
            if $run "$bin" --system "$sys" --scenario "$sc" --reps "${PATHS_REPS:-7}" > "$tmp/one" 2>/dev/null; then
                sed "s/^/$r /" "$tmp/one" >> "$tmp/$sys"
            else
                test "$sc" = external || { echo "bench-paths.sh: $sys $sc failed" >&2; exit 1; }
            fi
        done
    done
done
miss=0
# target_of SCENARIO PARAM: the quiet target of a row (S-free: S's).
target_of() {
    case "${1%-free} $2" in alternate*) echo 1.15 ;; "other-thread first"*) echo 2.0 ;;
    "scope n=1000") echo 1.35 ;; *) echo 1.10 ;; esac
}
# free_meets SCENARIO PARAM: whether SCENARIO-free was measured for PARAM and
# its ratio of medians meets the target.
free_meets() {
    case $1 in *-free) return 1 ;; esac
    grep -q "^[0-9]* $1-free $2 " "$tmp/omp" 2>/dev/null || return 1
    grep -q "^[0-9]* $1-free $2 " "$tmp/tt" 2>/dev/null || return 1
    fo=$(col "$1-free" "$2" 4 "$tmp/omp" | med)
    ft=$(col "$1-free" "$2" 4 "$tmp/tt" | med)
    awk -v a="$ft" -v b="$fo" -v g="$(target_of "$1" "$2")" 'BEGIN {exit !(b > 0 && a / b <= g)}'
}
med() { sort -g | awk '{v[NR]=$1} END {if (NR) print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
col() { awk -v s="$1" -v p="$2" -v c="$3" '$2==s && $3==p {print $c}' "$4"; }
printf 'load %s, wait policy %s, %s rounds, host %s, OpenMP runtime %s\n' "$loadname" "$policy" "$rounds" "$host" "$rtname"
printf 'cores before the rounds: %s\ncores after the rounds:  %s\n' "$dist_before" "$(distance)"
printf '%-17s %-10s %10s %10s %7s %10s %10s %7s %7s %7s %8s %s\n' scenario param omp_us tt_us ratio \
    omp_p90 tt_p90 r_p90 rr_med rr_max target verdict
label=${BENCH_LABEL:-$(git rev-parse --short HEAD 2>/dev/null)}
header="label,scenario,param,omp_us,tt_us,ratio,target,verdict,load,policy,omp_p50_us,tt_p50_us,omp_p90_us,tt_p90_us,ratio_p90,round_ratio_median,round_ratio_max,rounds,host,runtime"
if [ -n "$csv" ] && [ -f "$csv" ] && [ "$(head -n 1 "$csv")" != "$header" ]; then
    # an older header (8 or 19 columns): extend it, pad the old rows
    { echo "$header"; tail -n +2 "$csv" | awk -F, -v OFS=, '{for (i = NF + 1; i <= 20; i++) $i = ""; print}'; } \
        > "$tmp/csv" && cat "$tmp/csv" > "$csv"
fi
for key in "ranges n=1000" "ranges n=100000" "ranges n=1000000" \
    "ranges-free n=1000" "ranges-free n=100000" "ranges-free n=1000000" \
    "scope n=1000" "scope n=100000" "scope n=1000000" "coexist 5us" "alternate 5us" \
    "alternate-free 5us" \
    "external n=32" "external n=64" "external n=128" "external n=256" "external n=512" \
    "other-thread steady" "other-thread first" "other-thread first-scope" \
    "other-thread-free steady" "other-thread-free first" "other-thread-free first-scope"; do
    set -- $key
    [ -f "$tmp/omp" ] && [ -f "$tmp/tt" ] || break
    grep -q "^[0-9]* $1 $2 " "$tmp/omp" || continue
    grep -q "^[0-9]* $1 $2 " "$tmp/tt" || continue
    o=$(col "$1" "$2" 4 "$tmp/omp" | med)
    t=$(col "$1" "$2" 4 "$tmp/tt" | med)
    o50=$(col "$1" "$2" 5 "$tmp/omp" | med)
    t50=$(col "$1" "$2" 5 "$tmp/tt" | med)
    o90=$(col "$1" "$2" 6 "$tmp/omp" | med)
    t90=$(col "$1" "$2" 6 "$tmp/tt" | med)
    # per-round ratios: this round's threadteam over this round's OpenMP
    rr=$(awk -v s="$1" -v p="$2" '$2==s && $3==p {v[$1]=$4} END {for (r in v) print r, v[r]}' "$tmp/omp" |
        sort -n > "$tmp/ro"; awk -v s="$1" -v p="$2" '$2==s && $3==p {print $1, $4}' "$tmp/tt" |
        sort -n | join "$tmp/ro" - | awk '$2 > 0 {print $3 / $2}')
    rrm=$(echo "$rr" | med)
    rrx=$(echo "$rr" | sort -g | tail -n 1)
    ratio=$(awk -v a="$t" -v b="$o" 'BEGIN {printf "%.3f", a / b}')
    r90=$(awk -v a="$t90" -v b="$o90" 'BEGIN {printf "%.3f", (b > 0) ? a / b : 0}')
    if [ "$loadname" = none ] && [ "$policy" = default ]; then
        target=$(target_of "$1" "$2")
        verdict=$(awk -v r="$ratio" -v g="$target" 'BEGIN {print (r <= g) ? "PASS" : "MISS"}')
        # Shares isolated by default (one nested one-thread region per
        # participant, about 2.5 us per root): where that misses and the
        # same path on a pool whose shares are declared OpenMP-free meets
        # the target, the isolated default's cost is reported beside it.
        if [ "$verdict" = MISS ] && free_meets "$1" "$2"; then target=report; verdict=INFO; fi
    else
        target=1.5
        # The agreed specification change (issue 40, item 6): the held
        # region's handoffs on 10^3 doubles under passive waits.
        if [ "$policy" = passive ] && [ "$loadname" = none ] && [ "$1 $2" = "scope n=1000" ]; then target=2.0; fi
        verdict=$(awk -v r="$ratio" -v q="$r90" -v g="$target" 'BEGIN {print (r <= g && q <= g) ? "PASS" : "MISS"}')
    fi
    test "$verdict" = MISS && miss=$((miss + 1))
    printf '%-17s %-10s %10.3f %10.3f %7s %10.3f %10.3f %7s %7.3f %7.3f %8s %s\n' "$1" "$2" "$o" "$t" \
        "$ratio" "$o90" "$t90" "$r90" "$rrm" "$rrx" "<=$target" "$verdict"
    if test -n "$csv"; then
        test -f "$csv" || echo "$header" > "$csv"
        echo "$label,$1,$2,$o,$t,$ratio,$target,$verdict,$loadname,$policy,$o50,$t50,$o90,$t90,$r90,$(printf '%.3f' "$rrm"),$(printf '%.3f' "$rrx"),$rounds,$host,$rtname" >> "$csv"
    fi
done
echo "bench-paths: $rounds rounds, alternating processes, load $loadname, wait policy $policy, OpenMP runtime $rtname; $miss MISS"
