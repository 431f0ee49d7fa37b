#!/bin/sh
# flake-study.sh -- run a build's test suite many times on a busy machine and
# count the failures of each test program.
#
#   sh scripts/flake-study.sh [-n ROUNDS] [-s SPINNERS] [-o OUTDIR] BUILD_DIR...
#
# Each round runs `make check` in BUILD_DIR/tests (-j2, as `make check` at
# the top does) for every BUILD_DIR given, while SPINNERS processes (default
# 2) spin on the CPUs: the suite then runs on a machine whose CPUs are all
# taken, which is where a test that asserts timing instead of its contract
# fails. Each failing program's log is kept under OUTDIR (default
# flake-study-out/) as ROUND-BUILD-PROGRAM.log; OUTDIR/results.csv has one
# line per program per round (round,build,program,result) and the summary
# printed at the end counts runs and failures per program.
#
# The study answers one question: does any test fail without a defect? A
# failure found here is read (its log says which assertion), and either the
# assertion did not follow from the contract (the test is fixed) or it did
# (the library is). docs/design/testing.md records the runs.
set -u

rounds=10
spinners=2
out=flake-study-out
while getopts n:s:o: opt; do
    case $opt in
    n) rounds=$OPTARG ;;
    s) spinners=$OPTARG ;;
    o) out=$OPTARG ;;
    *)
        echo "usage: $0 [-n ROUNDS] [-s SPINNERS] [-o OUTDIR] BUILD_DIR..." >&2
        exit 2
        ;;
    esac
done
shift $((OPTIND - 1))
if [ $# -eq 0 ]; then
    echo "usage: $0 [-n ROUNDS] [-s SPINNERS] [-o OUTDIR] BUILD_DIR..." >&2
    exit 2
fi
for b in "$@"; do
    if [ ! -f "$b/tests/Makefile" ]; then
        echo "$0: $b is not a configured build (no $b/tests/Makefile)" >&2
        exit 2
    fi
done

# Everything is built before the study starts, and nothing may be rebuilt
# during it: a round whose make fails (a source edited meanwhile) would
# otherwise leave the previous round's results in place.
for b in "$@"; do
    if ! make -s -C "$b" -j2 >/dev/null || ! make -s -C "$b/tests" -j2 check-programs >/dev/null; then
        echo "$0: $b does not build" >&2
        exit 2
    fi
done

mkdir -p "$out"
csv=$out/results.csv
echo "round,build,program,result" >"$csv"

pids=
cleanup() {
    for p in $pids; do kill "$p" 2>/dev/null; done
}
trap cleanup EXIT INT TERM
i=0
while [ "$i" -lt "$spinners" ]; do
    sh -c 'while :; do :; done' &
    pids="$pids $!"
    i=$((i + 1))
done
echo "flake-study: $rounds rounds of $*, $spinners spinning processes, on $(nproc) CPUs"

t0=$(date +%s)
r=1
while [ "$r" -le "$rounds" ]; do
    for b in "$@"; do
        bn=$(basename "$b")
        rm -f "$b"/tests/*.trs "$b"/tests/*.log
        make -s -C "$b/tests" -j2 check >/dev/null 2>&1
        if ! ls "$b"/tests/*.trs >/dev/null 2>&1; then
            # make stopped before any test ran (a build failure): an error
            echo "$r,$bn,make,ERROR" >>"$csv"
            echo "  round $r: $bn: make check ran no test (ERROR)"
        fi
        for trs in "$b"/tests/*.trs; do
            [ -f "$trs" ] || continue
            prog=$(basename "$trs" .trs)
            res=$(sed -n 's/^:test-result: *//p' "$trs" | head -n 1)
            echo "$r,$bn,$prog,$res" >>"$csv"
            case $res in
            FAIL | ERROR | XPASS)
                cp "$b/tests/$prog.log" "$out/$r-$bn-$prog.log" 2>/dev/null
                echo "  round $r: $bn/$prog $res (log: $out/$r-$bn-$prog.log)"
                ;;
            esac
        done
    done
    echo "  round $r done ($(($(date +%s) - t0)) s)"
    r=$((r + 1))
done

echo "flake-study: per program (runs, failures) over $rounds rounds, $spinners spinners:"
awk -F, 'NR > 1 {
        k = $2 "/" $3; runs[k]++
        if ($4 == "FAIL" || $4 == "ERROR" || $4 == "XPASS") fails[k]++
        if ($4 == "SKIP") skips[k]++
    }
    END {
        for (k in runs)
            printf "  %-40s runs %3d  failures %d%s\n", k, runs[k], fails[k] + 0,
                   skips[k] ? "  (skipped " skips[k] ")" : ""
    }' "$csv" | sort
fails=$(awk -F, 'NR > 1 && ($4 == "FAIL" || $4 == "ERROR" || $4 == "XPASS") { f++ } END { print f + 0 }' "$csv")
runs=$(awk 'NR > 1 { n++ } END { print n + 0 }' "$csv")
echo "flake-study: $runs program runs, $fails failures ($(($(date +%s) - t0)) s)"
[ "$fails" -eq 0 ]
