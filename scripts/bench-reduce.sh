#!/bin/sh
# bench-reduce.sh -- tt_reduce_sum_d against `omp parallel for
# reduction(+:s)` at 10^3..10^7 doubles (bench/bench_reduce).
#
# Runs `bench_reduce --system tt`, `--system tt-free` and `--system omp`
# in alternating processes (the order rotates every round), pools the
# repetitions of each system and length, and prints the median and p90 in
# microseconds per call and the ratios of the medians to omp's (lower is
# better for threadteam; the target is <= 1.10). tt is the default pool,
# whose shares are isolated (one nested one-thread region per participant);
# tt-free is a pool whose owner declared its shares OpenMP-free
# (tt_pool_attr_set_isolate_shares(false)). Where isolation cannot meet the
# target, the target holds for tt-free and tt's cost is reported beside it.
# Not part of `make bench`.
#
# usage: scripts/bench-reduce.sh [--prog PATH] [--rounds R] [--reps K]
#                                [--lens LIST] [--grain G] [--base PATH]
#   --prog PATH  the program (default: bench/bench_reduce of $BUILD_DIR or
#                ./build; build it with `make bench-programs`)
#   --csv FILE   also append one row per length and system to FILE (created
#                with its header): label,scenario,param,omp_us,tt_us,ratio,
#                target,verdict,width,omp_p90,tt_p90,rounds,host; scenario
#                reduce (isolated; target `report`: PASS at <= 1.10, else
#                INFO, the specification's rule) and reduce-free (target
#                1.10: PASS, INFO where the isolated row passed, else MISS);
#                make bench reads it (scripts/bench.sh, the reduce stage)
#   --label L    the CSV's label (default: $BENCH_LABEL, else "threadteam")
#   --base PATH  an A/B: also run this build's bench_reduce (another
#                commit's, e.g. a worktree's) as `base` tt and tt-free in
#                the same rotation, and print its rows and its ratios to
#                the same omp figures
#   --rounds R   process pairs (default 4); --reps K repetitions per
#                process and length (default 15)
# On a host shared with other work the figures are indicative only.
set -eu
LC_ALL=C
export LC_ALL

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
prog=
rounds=4
reps=15
lens=1000,10000,100000,1000000,10000000
grain=2048
base=
csv=
label=${BENCH_LABEL:-threadteam}
while [ $# -gt 0 ]; do
    case $1 in
    --prog) prog=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    --reps) reps=$2; shift ;;
    --lens) lens=$2; shift ;;
    --grain) grain=$2; shift ;;
    --base) base=$2; shift ;;
    --csv) csv=$2; shift ;;
    --label) label=$2; shift ;;
    *) echo "usage: $0 [--prog PATH] [--rounds R] [--reps K] [--lens LIST] [--grain G] [--base PATH] [--csv FILE] [--label L]" >&2
       exit 2 ;;
    esac
    shift
done
if [ -z "$prog" ]; then
    for d in "${BUILD_DIR:-}" "$top/build"; do
        if [ -n "$d" ] && [ -x "$d/bench/bench_reduce" ]; then
            prog=$d/bench/bench_reduce
            break
        fi
    done
fi
if [ -z "$prog" ] || [ ! -x "$prog" ]; then
    echo "bench-reduce: bench/bench_reduce not built (make bench-programs)" >&2
    exit 2
fi

raw=$(mktemp)
trap 'rm -f "$raw"' EXIT INT TERM
echo "bench-reduce: load before: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)"
# How far apart the first two CPUs are (bench/core_distance.c, beside the
# program): what a handoff between cores costs now.
distance() {
    d=$(dirname "$prog")/core_distance
    if [ -x "$d" ]; then "$d" 2>/dev/null | sed 's/^core_distance: //'; else echo "n/a (core_distance not built)"; fi
}
echo "bench-reduce: cores before: $(distance)"
if [ -n "$base" ] && [ ! -x "$base" ]; then
    echo "bench-reduce: --base $base: not an executable" >&2
    exit 2
fi
# One process: "system" or "base:system" (the base build's, its rows
# renamed base-tt and base-tt-free).
run1() {
    case $1 in
    base:*) "$base" --system "${1#base:}" --lens "$lens" --reps "$reps" --grain "$grain" \
                2>/dev/null | sed 's/^/base-/' >>"$raw" ;;
    *) "$prog" --system "$1" --lens "$lens" --reps "$reps" --grain "$grain" >>"$raw" 2>/dev/null ;;
    esac
}
systems="tt tt-free omp"
[ -n "$base" ] && systems="tt tt-free omp base:tt base:tt-free"
nsys=$(echo $systems | wc -w)
echo "bench-reduce: $rounds rounds x $nsys processes, $reps repetitions each, lens $lens, grain $grain"
r=0
while [ $r -lt "$rounds" ]; do
    # Rotate the order every round, so that a drift of the host's speed
    # falls on every system.
    order=$(echo $systems | awk -v r=$r '{ for (i = 0; i < NF; i++) printf "%s ", $((i + r) % NF + 1) }')
    for s in $order; do
        run1 "$s"
    done
    r=$((r + 1))
    echo "bench-reduce: round $r of $rounds done"
done
echo "bench-reduce: load after: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)"
echo "bench-reduce: cores after: $(distance)"

# Quantile q of the sorted values of one (system, len).
quant() { # system len q
    awk -F, -v s="$1" -v l="$2" '$1 == s && $3 == l { print $5 }' "$raw" | sort -g |
        awk -v q="$3" '{ v[NR] = $1 } END {
            if (NR == 0) { print "nan"; exit }
            p = 1 + q * (NR - 1); i = int(p); f = p - i;
            print (i < NR) ? v[i] + f * (v[i + 1] - v[i]) : v[NR] }'
}

width=$(awk -F, 'NR == 1 { print $2 }' "$raw")
printf '\nwidth %s; microseconds per call (median / p90 over %s repetitions each)\n' \
    "$width" "$((rounds * reps))"
printf '%10s  %9s %9s  %9s %9s  %9s %9s  %7s %7s  %s\n' len tt_med tt_p90 free_med free_p90 \
    omp_med omp_p90 tt/omp free/omp verdict
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "nan" }'; }
host=${BENCH_HOST:-$(hostname 2>/dev/null || echo unknown)}
for l in $(echo "$lens" | tr ',' ' '); do
    tm=$(quant tt "$l" 0.5)
    tp=$(quant tt "$l" 0.9)
    fm=$(quant tt-free "$l" 0.5)
    fp=$(quant tt-free "$l" 0.9)
    om=$(quant omp "$l" 0.5)
    op=$(quant omp "$l" 0.9)
    rt=$(ratio "$tm" "$om")
    rf=$(ratio "$fm" "$om")
    # The target: the isolated default, or failing that the OpenMP-free pool
    # (vt, vf: the CSV's verdicts of the two rows; v: the console's).
    vt=$(awk -v t="$rt" 'BEGIN { print (t + 0 <= 1.10) ? "PASS" : "INFO" }')
    vf=$(awk -v t="$rt" -v f="$rf" 'BEGIN { print (f + 0 <= 1.10) ? "PASS" : (t + 0 <= 1.10) ? "INFO" : "MISS" }')
    if [ "$vt" = PASS ]; then v=PASS
    elif [ "$vf" = PASS ]; then v="PASS(free; isolated INFO)"
    else v=MISS; fi
    printf '%10s  %9.2f %9.2f  %9.2f %9.2f  %9.2f %9.2f  %7s %7s  %s\n' "$l" "$tm" "$tp" "$fm" "$fp" \
        "$om" "$op" "$rt" "$rf" "$v"
    if [ -n "$csv" ]; then
        [ -s "$csv" ] || echo "label,scenario,param,omp_us,tt_us,ratio,target,verdict,width,omp_p90,tt_p90,rounds,host" >"$csv"
        echo "$label,reduce,n=$l,$om,$tm,$rt,report,$vt,$width,$op,$tp,$rounds,$host" >>"$csv"
        echo "$label,reduce-free,n=$l,$om,$fm,$rf,1.10,$vf,$width,$op,$fp,$rounds,$host" >>"$csv"
    fi
    if [ -n "$base" ]; then
        tm=$(quant base-tt "$l" 0.5)
        tp=$(quant base-tt "$l" 0.9)
        fm=$(quant base-tt-free "$l" 0.5)
        fp=$(quant base-tt-free "$l" 0.9)
        printf '%10s  %9.2f %9.2f  %9.2f %9.2f  %9s %9s  %7s %7s  %s\n' "base" "$tm" "$tp" "$fm" \
            "$fp" "" "" "$(ratio "$tm" "$om")" "$(ratio "$fm" "$om")" "(--base)"
    fi
done
