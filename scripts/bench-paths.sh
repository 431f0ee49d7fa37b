#!/bin/sh
# bench-paths.sh -- the everyday paths (bench/bench_paths.c) side by side:
# raw OpenMP and threadteam alternating in separate processes, ROUNDS
# rounds; prints the median of each system's per-call medians, the ratio
# threadteam / OpenMP and the target of the "one set of threads" design:
#   ranges    <= 1.10x `omp parallel for` at every size
#   coexist   <= 1.10x (the application's regions with an idle pool alive)
#   alternate <= 1.15x (its regions alternating with pooled calls)
#   external  <= 1.10x the direct dgemm call at the same width, n = 32..512
#             (only when bench_paths was built with OpenBLAS)
# Usage: scripts/bench-paths.sh [BENCH_BIN] [ROUNDS] [CSV]
bin=${1:-build/bench/bench_paths}
rounds=${2:-7}
csv=${3:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for r in $(seq 1 "$rounds"); do
    for sys in omp tt; do
        for sc in ranges coexist alternate external; do
            "$bin" --system "$sys" --scenario "$sc" --reps 7 >> "$tmp/$sys" 2>/dev/null ||
                test "$sc" = external || exit 1
        done
    done
done
miss=0
printf '%-12s %-10s %12s %12s %8s %8s %s\n' scenario param omp_us tt_us ratio target verdict
for key in "ranges n=1000" "ranges n=100000" "ranges n=1000000" "coexist 5us" "alternate 5us" \
    "external n=32" "external n=64" "external n=128" "external n=256" "external n=512"; do
    set -- $key
    grep -q "^$1 $2 " "$tmp/omp" || continue
    o=$(awk -v s="$1" -v p="$2" '$1==s && $2==p {print $3}' "$tmp/omp" | sort -g |
        awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}')
    t=$(awk -v s="$1" -v p="$2" '$1==s && $2==p {print $3}' "$tmp/tt" | sort -g |
        awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}')
    case $1 in alternate) target=1.15 ;; *) target=1.10 ;; esac
    ratio=$(awk -v a="$t" -v b="$o" 'BEGIN {printf "%.3f", a / b}')
    verdict=$(awk -v r="$ratio" -v g="$target" 'BEGIN {print (r <= g) ? "PASS" : "MISS"}')
    test "$verdict" = MISS && miss=$((miss + 1))
    printf '%-12s %-10s %12.3f %12.3f %8s %8s %s\n' "$1" "$2" "$o" "$t" "$ratio" "<=$target" "$verdict"
    if test -n "$csv"; then
        test -f "$csv" || echo "label,scenario,param,omp_us,tt_us,ratio,target,verdict" > "$csv"
        echo "${BENCH_LABEL:-$(git rev-parse --short HEAD 2>/dev/null)},$1,$2,$o,$t,$ratio,$target,$verdict" >> "$csv"
    fi
done
echo "bench-paths: $rounds rounds, alternating processes; $miss MISS"
