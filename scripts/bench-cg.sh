#!/bin/sh
# bench-cg.sh -- the OpenMP application of examples/cg.c, threadteam solver
# against its all-OpenMP twin, end to end and phase by phase.
#
# Runs `cg --mode tt` and `cg --mode omp` in alternating processes (the
# order flips every round), each process doing one warm-up solve and --reps
# timed solves, pools the solves of each mode and prints the medians (and
# p10 / p90) of the total and of each phase: matvec, dots, update, with the
# ratio threadteam / OpenMP. scripts/bench.sh runs it as its last section
# (skip with --no-cg there).
#
# usage: scripts/bench-cg.sh [--cg PATH] [--n N] [--rounds R] [--reps K]
#                            [--csv FILE] [--label L]
#   --cg PATH    the program (default: examples/cg of $BUILD_DIR, ./build,
#                the current directory)
#   --n N        grid side (default 256: 65536 unknowns)
#   --rounds R   process pairs (default 6); --reps K solves per process
#                (default 5)
#   --csv FILE   append the medians as CSV rows
#                (label,date,host,cpus,mode,n,phase,median_ms,p10_ms,p90_ms)
set -eu
LC_ALL=C
export LC_ALL

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
cg=
n=256
rounds=6
reps=5
csv=
label=local
while [ $# -gt 0 ]; do
    case $1 in
    --cg) cg=$2; shift ;;
    --n) n=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    --reps) reps=$2; shift ;;
    --csv) csv=$2; shift ;;
    --label) label=$2; shift ;;
    --help|-h) sed -n '2,/^set -eu/p' "$0" | sed 's/^# \{0,1\}//;/^set -eu/d'; exit 0 ;;
    *) echo "bench-cg.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done
if [ -z "$cg" ]; then
    for d in ${BUILD_DIR:+"$BUILD_DIR/examples"} "$top/build/examples" "$PWD/examples" "$PWD"; do
        if [ -x "$d/cg" ]; then cg=$d/cg; break; fi
    done
fi
if [ -z "$cg" ] || [ ! -x "$cg" ]; then
    echo "bench-cg.sh: examples/cg not found (run make, or pass --cg)" >&2
    exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tt-bench-cg.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
raw=$tmp/raw.csv
: >"$raw"
echo "bench-cg.sh: $cg, n=$n ($((n * n)) unknowns), $rounds rounds x 2 processes x $reps solves" >&2
r=0
while [ "$r" -lt "$rounds" ]; do
    if [ $((r % 2)) -eq 0 ]; then order="tt omp"; else order="omp tt"; fi
    for m in $order; do
        "$cg" --mode "$m" --n "$n" --reps "$reps" --csv >>"$raw"
    done
    r=$((r + 1))
done

# Rows: mode,n,iters,total_ms,matvec_ms,dots_ms,update_ms
host=$(hostname -s 2>/dev/null || hostname)
cpus=$(nproc 2>/dev/null || echo 1)
date=$(date +%Y-%m-%d)
summary=$tmp/summary.csv
for m in tt omp; do
    col=4
    for phase in total matvec dots update; do
        grep "^$m," "$raw" | cut -d, -f$col | sort -n | awk -v m="$m" -v ph="$phase" '
            { v[NR] = $1 }
            END {
                if (NR == 0) exit
                med = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
                i10 = int(0.1 * (NR - 1)) + 1; i90 = int(0.9 * (NR - 1)) + 1
                printf "%s,%s,%.3f,%.3f,%.3f\n", m, ph, med, v[i10], v[i90]
            }' >>"$summary"
        col=$((col + 1))
    done
done
iters=$(grep '^tt,' "$raw" | head -1 | cut -d, -f3)
iters_omp=$(grep '^omp,' "$raw" | head -1 | cut -d, -f3)
echo
echo "CG on the 2-D Poisson matrix, n=$n, $iters iterations (omp: $iters_omp), $cpus CPUs, medians of $((rounds / 2 * reps))+ solves per mode (ms per solve)"
awk -F, '
    { med[$1, $2] = $3; p10[$1, $2] = $4; p90[$1, $2] = $5 }
    END {
        printf "| phase | threadteam + OpenMP | all OpenMP | ratio |\n| --- | ---: | ---: | ---: |\n"
        n = split("total matvec dots update", ph, " ")
        for (i = 1; i <= n; i++) {
            p = ph[i]
            r = (med["omp", p] > 0) ? sprintf("%.2f", med["tt", p] / med["omp", p]) : "-"
            printf "| %s | %.2f (%.2f-%.2f) | %.2f (%.2f-%.2f) | %s |\n", p,
                med["tt", p], p10["tt", p], p90["tt", p], med["omp", p], p10["omp", p], p90["omp", p], r
        }
    }' "$summary"
echo "(phases: matvec = tt_fork of 2 jobs each running tt_for_ranges vs omp parallel for;"
echo " dots = tt_reduce_sum_d of p.q vs omp parallel for over the same blocks and tree;"
echo " update = tt_reduce_sum_d of x += a p, r -= a q with r.r, then the application's own"
echo " omp parallel for of p = r + b p, vs omp parallel for over the same blocks and tree,"
echo " then the same p = r + b p;"
echo " threadteam's pool declares its shares OpenMP-free: its kernels make no OpenMP call)"
if [ -n "$csv" ]; then
    [ -f "$csv" ] || echo "label,date,host,cpus,mode,n,phase,median_ms,p10_ms,p90_ms" >"$csv"
    awk -F, -v l="$label" -v d="$date" -v h="$host" -v c="$cpus" -v n="$n" \
        '{ printf "%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n", l, d, h, c, $1, n, $2, $3, $4, $5 }' \
        "$summary" >>"$csv"
fi
