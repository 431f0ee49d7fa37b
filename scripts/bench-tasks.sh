#!/bin/sh
# bench-tasks.sh -- the task-suite kernels (bench/bench_tasks.c) on tokens
# against their OpenMP-task twins (untied tasks, a depth cutoff), in
# alternating processes: bench_tasks --system tt, tt-free, omp and
# omp-nested, the order rotating every round; pools the repetitions of each
# system and kernel and prints the medians and p90 per call and the ratios
# to OpenMP's medians. Passes as scripts/bench-paths.sh runs them: quiet,
# OMP_WAIT_POLICY=passive, and loaded (K processes busy P % of every 10 ms
# and an OpenMP co-tenant, bench_paths --busy / --cotenant, when bench_paths
# is built beside bench_tasks).
#
# Targets (tt-free: a pool whose shares are declared OpenMP-free; the
# isolated pool's figure, tt, is reported beside it as INFO):
#   quiet
#     fib, nqueens, sort   rows with a serial twin or a base case:
#                          tt-free <= 1.10x the OpenMP-task twin
#     nested               tt-free <= 1.10x the better of omp (inner loop
#                          serialised) and omp-nested (max-active-levels 2)
#     nqueens-port         the straight port (tt_fork at every level, no
#                          twin): tt-free <= 2.0x the OpenMP-task twin
#     fib-port, irregular  INFO (irregular: static ranges against
#                          schedule(dynamic, 64); irregular-dyn,
#                          tt_for_ranges_dynamic against it: <= 1.10x)
#     inline               tt-free's ns per budget-1 fork of 2 jobs minus two
#                          plain calls' (omp-nested's row) <= 25 ns; the
#                          undeferred `omp task` pair beside it (INFO)
#   passive, loaded: the quiet targets' rows <= 1.5x (as bench-paths.sh's), or
#                    their quiet target where it is wider (nqueens-port 2.0x)
#
# usage: scripts/bench-tasks.sh [--prog PATH] [--rounds R] [--reps K]
#                               [--passes "quiet passive load=2,50"]
#                               [--kernels LIST] [--small] [--csv FILE] [--label L]
#   --csv FILE  append one row per kernel, system and pass:
#               label,scenario,param,omp_us,tt_us,ratio,target,verdict,width,
#               omp_p90,tt_p90,rounds,host,load,policy (scenario tasks-KERNEL
#               for the isolated pool, tasks-KERNEL-free for the OpenMP-free
#               one); make bench reads it (scripts/bench.sh, the tasks stage)
#   --small     the smoke sizes (its figures mean nothing)
# Exit 0, or 1 when a target was missed. On a shared host the figures are
# indicative only.
set -eu
LC_ALL=C
export LC_ALL

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
prog=
rounds=3
reps=5
passes="quiet passive load=2,50"
kernels=
small=
csv=
label=${BENCH_LABEL:-threadteam}
while [ $# -gt 0 ]; do
    case $1 in
    --prog) prog=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    --reps) reps=$2; shift ;;
    --passes) passes=$2; shift ;;
    --kernels) kernels=$2; shift ;;
    --small) small=--small ;;
    --csv) csv=$2; shift ;;
    --label) label=$2; shift ;;
    *) echo "usage: $0 [--prog PATH] [--rounds R] [--reps K] [--passes LIST] [--kernels LIST] [--small] [--csv FILE] [--label L]" >&2
       exit 2 ;;
    esac
    shift
done
if [ -z "$prog" ]; then
    for d in "${BUILD_DIR:-}" "$top/build"; do
        if [ -n "$d" ] && [ -x "$d/bench/bench_tasks" ]; then
            prog=$d/bench/bench_tasks
            break
        fi
    done
fi
if [ -z "$prog" ] || [ ! -x "$prog" ]; then
    echo "bench-tasks: bench/bench_tasks not built (make bench-programs)" >&2
    exit 2
fi
paths=$(dirname "$prog")/bench_paths
host=${BENCH_HOST:-$(hostname -s 2>/dev/null || hostname)}
raw=$(mktemp)
loadpids=
stop_load() {
    for p in $loadpids; do kill "$p" 2>/dev/null || true; done
    for p in $loadpids; do wait "$p" 2>/dev/null || true; done
    loadpids=
}
trap 'stop_load; rm -f "$raw" "$raw.one"' EXIT
trap 'exit 130' INT TERM HUP

quant() { # pass system kernel q
    awk -F, -v p="$1" -v s="$2" -v k="$3" '$1 == p && $2 == s && $4 == k { print $7 }' "$raw" | sort -g |
        awk -v q="$4" '{ v[NR] = $1 } END {
            if (NR == 0) { print "nan"; exit }
            x = 1 + q * (NR - 1); i = int(x); f = x - i;
            print (i < NR) ? v[i] + f * (v[i + 1] - v[i]) : v[NR] }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0 && a == a + 0) printf "%.3f", a / b; else print "nan" }'; }
verdict() { # ratio target -> PASS / MISS (target "report": INFO)
    awk -v r="$1" -v t="$2" 'BEGIN { if (t == "report") print "INFO"; else if (r == "nan") print "MISS"; else print (r + 0 <= t + 0) ? "PASS" : "MISS" }'
}
miss=0
row() { # pass kernel param omp_med omp_p90 tt_med tt_p90 target scenario width load policy
    r=$(ratio "$6" "$4")
    v=$(verdict "$r" "$8")
    [ "$v" = MISS ] && miss=$((miss + 1))
    printf '  %-8s %-16s %-22s %11.2f %11.2f %7s  %-6s %s\n' "$1" "$9" "$3" "$4" "$6" "$r" "$8" "$v"
    if [ -n "$csv" ]; then
        [ -s "$csv" ] || echo "label,scenario,param,omp_us,tt_us,ratio,target,verdict,width,omp_p90,tt_p90,rounds,host,load,policy" >"$csv"
        echo "$label,$9,$3,$4,$6,$r,$8,$v,${10},$5,$7,$rounds,$host,${11},${12}" >>"$csv"
    fi
}

for pass in $passes; do
    ptag=$(echo "$pass" | tr ',' ':') # the raw file's first column: no comma
    load=none
    policy=default
    case $pass in
    quiet) ;;
    passive) policy=passive ;;
    load=*)
        load=${pass#load=}
        if [ ! -x "$paths" ]; then
            echo "bench-tasks: $pass skipped: $paths (the load helpers) not built" >&2
            continue
        fi ;;
    *) echo "bench-tasks: unknown pass $pass (quiet, passive, load=K,P)" >&2; exit 2 ;;
    esac
    if [ "$load" != none ]; then
        k=${load%%,*}; pct=${load#*,}
        i=0
        while [ "$i" -lt "$k" ]; do
            "$paths" --busy "$pct" & loadpids="$loadpids $!"
            i=$((i + 1))
        done
        env -u OMP_WAIT_POLICY "$paths" --cotenant "$pct" & loadpids="$loadpids $!"
        sleep 1
    fi
    echo "bench-tasks: pass $pass: $rounds rounds x 4 processes, $reps repetitions each; load $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)"
    systems="tt tt-free omp omp-nested"
    r=0
    while [ "$r" -lt "$rounds" ]; do
        order=$(echo $systems | awk -v r="$r" '{ for (i = 0; i < NF; i++) printf "%s ", $((i + r) % NF + 1) }')
        for s in $order; do
            if [ "$policy" = passive ]; then
                OMP_WAIT_POLICY=passive "$prog" --system "$s" --reps "$reps" $small ${kernels:+--kernels "$kernels"} >"$raw.one"
            else
                "$prog" --system "$s" --reps "$reps" $small ${kernels:+--kernels "$kernels"} >"$raw.one"
            fi || { echo "bench-tasks: $s failed (a wrong result or a peak above the budget)" >&2; exit 1; }
            sed "s/^/$ptag,/" "$raw.one" >>"$raw"
        done
        r=$((r + 1))
    done
    stop_load
    loadname=$load
    [ "$load" != none ] && loadname="$(echo "$load" | tr ',' ':')+omp"
    width=$(awk -F, -v p="$ptag" '$1 == p { print $3; exit }' "$raw")
    printf '\npass %s (load %s, wait policy %s), width %s: medians over %s repetitions\n' "$pass" "$loadname" "$policy" "$width" "$((rounds * reps))"
    printf '  %-8s %-16s %-22s %11s %11s %7s  %-6s %s\n' pass scenario param openmp threadteam ratio target verdict
    for kern in $(awk -F, -v p="$ptag" '$1 == p { print $4 }' "$raw" | awk '!s[$0]++'); do
        param=$(awk -F, -v p="$ptag" -v k="$kern" '$1 == p && $4 == k { print $5; exit }' "$raw")
        om=$(quant "$ptag" omp "$kern" 0.5); op=$(quant "$ptag" omp "$kern" 0.9)
        nm=$(quant "$ptag" omp-nested "$kern" 0.5); np=$(quant "$ptag" omp-nested "$kern" 0.9)
        tm=$(quant "$ptag" tt "$kern" 0.5); tp=$(quant "$ptag" tt "$kern" 0.9)
        fm=$(quant "$ptag" tt-free "$kern" 0.5); fp=$(quant "$ptag" tt-free "$kern" 0.9)
        # The reference: OpenMP's figure (the nested loop: the better setting).
        ref=$om; rp=$op
        if [ "$kern" = nested ] && awk -v a="$nm" -v b="$om" 'BEGIN { exit !(a + 0 < b + 0) }'; then ref=$nm; rp=$np; fi
        case $kern in
        fib | nqueens | sort | nested | irregular-dyn) t=1.10 ;;
        nqueens-port) t=2.0 ;;
        *) t=report ;;
        esac
        # Passive and loaded: 1.5x, or the quiet target where that is wider
        # (the straight port's 2.0x holds in every condition).
        if [ "$pass" != quiet ] && [ "$t" != report ]; then
            t=$(awk -v q="$t" 'BEGIN { print (q + 0 > 1.5) ? q : "1.5" }')
        fi
        if [ "$kern" = inline ]; then
            # ns per fork: the library's own cost is tt-free minus two plain calls.
            over=$(awk -v a="$fm" -v b="$nm" 'BEGIN { printf "%.2f", a - b }')
            v=INFO
            if [ "$pass" = quiet ]; then
                v=$(awk -v o="$over" 'BEGIN { print (o + 0 <= 25) ? "PASS" : "MISS" }')
                [ "$v" = MISS ] && miss=$((miss + 1))
            fi
            printf '  %-8s %-16s %-22s undeferred task %.1f ns, plain %.1f ns, tt %.1f ns, tt-free %.1f ns: tt-free over plain %s ns (<= 25) %s\n' \
                "$ptag" inline "$param" "$om" "$nm" "$tm" "$fm" "$over" "$v"
            if [ -n "$csv" ]; then
                [ -s "$csv" ] || echo "label,scenario,param,omp_us,tt_us,ratio,target,verdict,width,omp_p90,tt_p90,rounds,host,load,policy" >"$csv"
                echo "$label,tasks-inline-over-plain,$param,$nm,$fm,$over,25ns,$v,$width,$np,$fp,$rounds,$host,$loadname,$policy" >>"$csv"
                echo "$label,tasks-inline-vs-task,$param,$om,$tm,$(ratio "$tm" "$om"),report,INFO,$width,$op,$tp,$rounds,$host,$loadname,$policy" >>"$csv"
            fi
            continue
        fi
        row "$ptag" "$kern" "$param" "$ref" "$rp" "$tm" "$tp" report "tasks-$kern" "$width" "$loadname" "$policy"
        row "$ptag" "$kern" "$param" "$ref" "$rp" "$fm" "$fp" "$t" "tasks-$kern-free" "$width" "$loadname" "$policy"
    done
done
echo "bench-tasks: $miss MISS"
[ "$miss" -eq 0 ]
