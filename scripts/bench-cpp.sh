#!/bin/sh
# bench-cpp.sh -- the C++ front (include/threadteam.hpp) against the same
# calls through the C API (bench/bench_cpp.cpp): the C side and the C++ side
# alternating in separate processes (C first in odd rounds, C++ first in
# even ones; a scenario's two sides back to back), ROUNDS rounds, both
# sides calling the same kernel functions on a token minted per call. Per
# row: the median over the rounds of each side's per-call medians, the
# ratio C++ / C, the same for the 90th percentile, the median and the
# worst of the per-round ratios, and the target: the C++ front adds
# nothing measurable, ratio of the medians <= 1.02 for every row
# (for_ranges, fork, the team scope, the sum).
#
# Usage: scripts/bench-cpp.sh [BENCH_BIN] [ROUNDS] [CSV]
#   BENCH_BIN  default build/bench/bench_cpp
# The CSV (appended; header written when new):
#   label,scenario,param,c_us,cpp_us,ratio,target,verdict,c_p90_us,cpp_p90_us,
#   ratio_p90,round_ratio_median,round_ratio_max,rounds,host
# Environment: BENCH_LABEL (default: the short commit), BENCH_HOST (default
# hostname -s), CPP_REPS (repetitions per process, default 7),
# CPP_SCENARIOS (default "ranges fork scope sum").
LC_ALL=C
export LC_ALL
bin=${1:-build/bench/bench_cpp}
rounds=${2:-7}
csv=${3:-}
host=${BENCH_HOST:-$(hostname -s 2>/dev/null || hostname)}
scenarios=${CPP_SCENARIOS:-ranges fork scope sum}
if [ ! -x "$bin" ]; then
    echo "bench-cpp.sh: $bin not built (no C++17 compiler at configure time, or make bench-programs not run)" >&2
    exit 2
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM HUP
# Each scenario's two sides run one right after the other: the ratio of a
# round pairs processes seconds apart, not four scenarios apart, so that
# the host's slower and faster phases fall on both sides of a pair.
for r in $(seq 1 "$rounds"); do
    if [ $((r % 2)) = 1 ]; then order="c cpp"; else order="cpp c"; fi
    for sc in $scenarios; do
        for sys in $order; do
            if "$bin" --system "$sys" --scenario "$sc" --reps "${CPP_REPS:-7}" > "$tmp/one" 2>"$tmp/err"; then
                sed "s/^/$r /" "$tmp/one" >> "$tmp/$sys"
            else
                cat "$tmp/err" >&2
                echo "bench-cpp.sh: $sys $sc failed" >&2
                exit 1
            fi
        done
    done
done
med() { sort -g | awk '{v[NR]=$1} END {if (NR) print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
col() { awk -v s="$1" -v p="$2" -v c="$3" '$2==s && $3==p {print $c}' "$4"; }
target=1.02
label=${BENCH_LABEL:-$(git rev-parse --short HEAD 2>/dev/null)}
header="label,scenario,param,c_us,cpp_us,ratio,target,verdict,c_p90_us,cpp_p90_us,ratio_p90,round_ratio_median,round_ratio_max,rounds,host"
printf 'C++ front against the C API, %s rounds, host %s\n' "$rounds" "$host"
printf '%-8s %-10s %10s %10s %7s %10s %10s %7s %7s %7s %8s %s\n' scenario param c_us cpp_us ratio \
    c_p90 cpp_p90 r_p90 rr_med rr_max target verdict
miss=0
awk '{print $2, $3}' "$tmp/c" | awk '!seen[$0]++' > "$tmp/keys"
while read -r s p; do
    grep -q "^[0-9]* $s $p " "$tmp/cpp" || continue
    c=$(col "$s" "$p" 4 "$tmp/c" | med)
    t=$(col "$s" "$p" 4 "$tmp/cpp" | med)
    c90=$(col "$s" "$p" 6 "$tmp/c" | med)
    t90=$(col "$s" "$p" 6 "$tmp/cpp" | med)
    awk -v s="$s" -v p="$p" '$2==s && $3==p {print $1, $4}' "$tmp/c" | sort -n > "$tmp/rc"
    rr=$(awk -v s="$s" -v p="$p" '$2==s && $3==p {print $1, $4}' "$tmp/cpp" | sort -n |
        join "$tmp/rc" - | awk '$2 > 0 {print $3 / $2}')
    rrm=$(echo "$rr" | med)
    rrx=$(echo "$rr" | sort -g | tail -n 1)
    ratio=$(awk -v a="$t" -v b="$c" 'BEGIN {printf "%.3f", (b > 0) ? a / b : 0}')
    r90=$(awk -v a="$t90" -v b="$c90" 'BEGIN {printf "%.3f", (b > 0) ? a / b : 0}')
    verdict=$(awk -v r="$ratio" -v g="$target" 'BEGIN {print (r <= g) ? "PASS" : "MISS"}')
    test "$verdict" = MISS && miss=$((miss + 1))
    printf '%-8s %-10s %10.3f %10.3f %7s %10.3f %10.3f %7s %7.3f %7.3f %8s %s\n' "$s" "$p" "$c" "$t" \
        "$ratio" "$c90" "$t90" "$r90" "$rrm" "$rrx" "<=$target" "$verdict"
    if [ -n "$csv" ]; then
        [ -s "$csv" ] || echo "$header" > "$csv"
        echo "$label,$s,$p,$c,$t,$ratio,$target,$verdict,$c90,$t90,$r90,$(printf '%.3f' "$rrm"),$(printf '%.3f' "$rrx"),$rounds,$host" >> "$csv"
    fi
done < "$tmp/keys"
echo "bench-cpp: $rounds rounds, alternating processes; $miss MISS"
[ "$miss" -eq 0 ]
