#!/bin/sh
# bench-waits.sh -- both passes of the wait benchmarks on this checkout: quiet,
# then under load, rows appended to docs/design/waiting-data/<host>.csv with the
# label naming the commit.
#
# usage: scripts/bench-waits.sh <label> [widths] [load]
#   label   e.g. main-4c73c2b (the commit measured), then the PR head
#   widths  e.g. 64,48; "" (default) = all CPUs of the affinity set and three
#           quarters of them, plus the oversubscribed 2 x CPUs for `sections`
#   load    K:P for the second pass (default 2:10); "none" runs the quiet pass only
#
# Environment: BENCH_PASS=short|full (default short, about two minutes a pass on
# 2 quiet CPUs: the wait benchmarks only, no paths or CG stage), BENCH_HOST (default hostname -s), BENCH_BINDIR (where the programs
# are), BENCH_ARGS (more options for scripts/bench.sh, e.g. "--scenarios gaps").
# The tables of both passes: scripts/bench.sh --table / --targets on the CSV.
# (`make bench` and scripts/bench-report.sh --docs record a whole run.)
set -eu

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)

if [ $# -lt 1 ] || [ -z "$1" ]; then
    sed -n '2,/^set -eu/p' "$0" | sed 's/^# \{0,1\}//;/^set -eu/d' >&2
    exit 2
fi
label=$1
widths=${2:-}
load=${3:-2:10}
host=${BENCH_HOST:-$(hostname -s 2>/dev/null || hostname)}
out=$top/docs/design/waiting-data/$host.csv
pass=${BENCH_PASS:-short}

set -- --"$pass" --label "$label" --out "$out" --no-paths --no-cg
[ -n "$widths" ] && set -- "$@" --widths "$widths"
[ -n "${BENCH_BINDIR:-}" ] && set -- "$@" --bindir "$BENCH_BINDIR"
# shellcheck disable=SC2086
set -- "$@" ${BENCH_ARGS:-}

echo "== quiet pass ==" >&2
# (bench.sh exits 1 when a target is missed: go on to the loaded pass.)
sh "$here/bench.sh" "$@" --load none || true
if [ "$load" != none ]; then
    echo "== pass under load $load ==" >&2
    sh "$here/bench.sh" "$@" --load "$load" || true
    echo
    echo "== both passes =="
    sh "$here/bench.sh" --targets "$out" --label "$label"
fi
echo "bench-waits.sh: rows in $out; tables: scripts/bench.sh --table $out --label $label" >&2
