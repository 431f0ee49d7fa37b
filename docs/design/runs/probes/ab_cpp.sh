#!/bin/sh
# docs/design/runs/2026-12-07-cpp-context-line.md: the C++ front against the C API for several
# bench_cpp builds, each build's C side against its own C++ side, alternating processes.
# ab_cpp.sh ROUNDS SCENARIO BIN...: per round, for each BIN, its C side and its C++ side (the
# order alternating by round), 7 reps each; prints per BIN the median of its per-round C++ / C
# ratios (the 10^3-double row; the sum's 10^4) and its C side's median.
# A row's C side moves by about 2 % from one build to another, so a ratio against another
# build's C side measures that too: keep each build's sides together.
R=$1; S=$2; shift 2
out=${TMPDIR:-/tmp}/ab_cpp.$$
: >"$out"
for r in $(seq 1 "$R"); do
    for b in "$@"; do
        if [ $((r % 2)) = 1 ]; then o="c cpp"; else o="cpp c"; fi
        for sys in $o; do
            "$b" --system "$sys" --scenario "$S" --reps 7 |
                awk -v r="$r" -v b="$b" -v s="$sys" '$2 == "n=1000" || $2 == "n=10000" {print r, b, s, $3}' >>"$out"
        done
    done
done
for b in "$@"; do
    awk -v b="$b" '$2 == b {v[$1 " " $3] = $4} END {for (k in v) {split(k, a, " "); if (a[2] == "c") print v[a[1] " cpp"] / v[k]}}' "$out" |
        sort -g | awk -v b="$b" '{a[NR] = $1} END {m = NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2
            printf "%s: C++/C per-round median %.3f (min %.3f, max %.3f, %d rounds)\n", b, m, a[1], a[NR], NR}'
    awk -v b="$b" '$2 == b && $3 == "c" {print $4}' "$out" | sort -g |
        awk -v b="$b" '{a[NR] = $1} END {m = NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2
            printf "%s: C side median %.3f us\n", b, m}'
done
rm -f "$out"
