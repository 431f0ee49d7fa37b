#!/bin/sh
# bench-wide.sh -- the wide runs for a many-core machine lent for a few
# minutes (issue 40, item 6): the paths stage's one-section team scope and
# tt_for_ranges rows (scripts/bench-paths.sh) and the roots stage
# (scripts/bench-roots.sh) at each width of WIDTHS (default "16 12"), quiet
# and beside busy processes, every CSV and console into one folder.
#
# Such a machine starts bare and may have no compiler, so the runs use a
# kit built here: `make bench-wide-kit` puts the benchmark programs, the
# libgomp they were linked against and the commit's name into build-wide/
# (ignored by git; a device run carries it). Where the kit's programs do not
# start there (another C library), the script builds them from the tree
# when autoreconf and a compiler are there, else it stops and says so.
#
# Usage: scripts/bench-wide.sh [--kit DIR] [--out DIR] [--widths "16 12"]
#                              [--rounds R] [--load K,P] [--no-roots]
#   --kit DIR    the kit (default build-wide)
#   --out DIR    where the CSVs and the console go (default $OUT, else
#                build-wide/out)
#   --widths L   the widths, each a pool and a raw team of that many threads
#                (OMP_NUM_THREADS; default "16 12"; a width above the CPUs
#                is run too: oversubscription)
#   --rounds R   rounds of each stage (default 3)
#   --load K,P   the loaded pass: K processes busy P % of every 10 ms and one
#                OpenMP co-tenant (default: as many processes as CPUs, 50 %)
#   --no-roots   the paths stage only
# What it writes: wide-paths.csv and wide-roots.csv (the stages' CSVs, one
# row per width, pass and row, labelled COMMIT-wW), wide-console.txt (every
# table as printed), wide-env.txt (the machine: CPUs, lscpu, libgomp).
# On the 2-vCPU development host, widths "2 4" with 3 rounds took 4
# minutes (about 45 s per width and pass of the paths stage, 30 s per
# width of the roots stage); a device call allows 10 minutes, so run it
# there with a timeout that leaves a minute or two, e.g.
#   make bench-wide-kit        (here; then carry build-wide)
#   sh scripts/bench-wide.sh --out "$OUT"     (there, timeout_s 540)
LC_ALL=C
export LC_ALL
kit=build-wide
out=${OUT:-}
widths="16 12"
rounds=3
load=
roots=1
while [ $# -gt 0 ]; do
    case $1 in
    --kit) kit=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --widths) widths=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --load) load=$2; shift 2 ;;
    --no-roots) roots=; shift ;;
    --help | -h) sed -n '2,/^LC_ALL/p' "$0" | sed '$d;s/^# \{0,1\}//' >&2; exit 2 ;;
    *) echo "bench-wide.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
here=$(cd "$(dirname "$0")/.." && pwd)
[ -n "$out" ] || out=$kit/out
mkdir -p "$out" || exit 1
cpus=$(getconf _NPROCESSORS_ONLN 2>/dev/null || nproc)
[ -n "$load" ] || load="$cpus,50"
console=$out/wide-console.txt
: >"$console"
say() { echo "$*" | tee -a "$console"; }

# use_kit DIR: its programs, and its libgomp first (they were linked
# against it).
ld_path0=${LD_LIBRARY_PATH:-}
use_kit() {
    kit=$1
    paths_bin=$kit/bench_paths
    roots_bin=$kit/bench_roots
    LD_LIBRARY_PATH=$ld_path0
    if [ -d "$kit/lib" ]; then
        LD_LIBRARY_PATH=$(cd "$kit/lib" && pwd)${ld_path0:+:$ld_path0}
    fi
    export LD_LIBRARY_PATH
}
use_kit "$kit"
if ! "$paths_bin" --system omp --scenario scope --reps 1 --n 1000 >/dev/null 2>&1; then
    say "bench-wide.sh: $paths_bin does not run here; building from the tree"
    if command -v autoreconf >/dev/null && command -v cc >/dev/null; then
        (cd "$here" && make bench-wide-kit >"$out/wide-build.log" 2>&1) ||
            { say "bench-wide.sh: the build failed (wide-build.log)"; exit 1; }
        use_kit "$here/build-wide"
    else
        say "bench-wide.sh: no kit that runs and no autoreconf/compiler: nothing measured"
        exit 1
    fi
fi
commit=$(cat "$kit/COMMIT" 2>/dev/null || git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown)

{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "commit: $commit"
    echo "cpus online: $cpus"
    lscpu 2>/dev/null | grep -E '^(Model name|Socket|Core|Thread|NUMA node|CPU\(s\)|L3)' || true
    echo "libgomp: $(ldd "$paths_bin" 2>/dev/null | grep gomp)"
} >"$out/wide-env.txt"
cat "$out/wide-env.txt" >>"$console"

rc=0
for w in $widths; do
    export OMP_NUM_THREADS=$w
    for pass in quiet "load=$load"; do
        say "==> width $w, $pass: scope, ranges, ranges-free"
        if [ "$pass" = quiet ]; then set --; else set -- --load "${pass#load=}"; fi
        BENCH_LABEL=$commit-w$w BENCH_HOST=${BENCH_HOST:-wide} sh "$here/scripts/bench-paths.sh" "$@" \
            --scenarios scope,ranges,ranges-free "$paths_bin" "$rounds" "$out/wide-paths.csv" \
            >"$out/one.txt" 2>&1 || rc=1
        tee -a "$console" <"$out/one.txt"
    done
    if [ -n "$roots" ] && [ -x "$roots_bin" ]; then
        say "==> width $w: roots (main, second, fresh thread), quiet and loaded"
        sh "$here/scripts/bench-roots.sh" --prog "$roots_bin" --rounds "$rounds" --width "$w" \
            --passes "quiet load=$load" --csv "$out/wide-roots.csv" --label "$commit-w$w" \
            >"$out/one.txt" 2>&1 || rc=1
        tee -a "$console" <"$out/one.txt"
    fi
done
unset OMP_NUM_THREADS
rm -f "$out/one.txt"
say "bench-wide.sh: done; $(ls "$out" | tr '\n' ' ')"
exit $rc
