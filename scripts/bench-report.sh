#!/bin/sh
# bench-report.sh -- the plot and the committed record of a `make bench` run.
#
# usage: scripts/bench-report.sh --plot RESULTS.csv [--png OUT.png]
#        scripts/bench-report.sh --docs [RESULTS.csv]
#
#   --plot   draw RESULTS.csv (a results-DATE.csv of scripts/bench.sh) into
#            OUT.png (default: RESULTS.png) with scripts/waiting.gnuplot: each
#            everyday path's ratio to raw OpenMP (with its target) and the
#            sections overhead of threadteam, libgomp and LLVM libomp
#   --docs   record a run in the repository: copy RESULTS.csv (default: the
#            newest build/bench/results-*.csv) and its -waits.csv to
#            docs/design/waiting-data/results-HOST.csv / -waits.csv, draw
#            docs/design/waiting.png and write docs/design/waiting-results.md
#            (the tables, the targets, the load the run was measured under)
# Needs gnuplot for the plot (scripts/ensure-deps.sh bench installs it).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
LC_ALL=C
export LC_ALL

mode=
csv=
png=
while [ $# -gt 0 ]; do
    case $1 in
    --plot) mode=plot; csv=$2; shift ;;
    --png) png=$2; shift ;;
    --docs) mode=docs; if [ $# -gt 1 ] && [ "${2#-}" = "$2" ]; then csv=$2; shift; fi ;;
    --help|-h) sed -n '2,/^set -eu/p' "$0" | sed 's/^# \{0,1\}//;/^set -eu/d'; exit 0 ;;
    *) echo "bench-report.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done
[ -n "$mode" ] || { echo "bench-report.sh: --plot CSV or --docs [CSV] (see --help)" >&2; exit 2; }

if [ -z "$csv" ]; then
    # shellcheck disable=SC2012
    csv=$(ls -t "$top"/build/bench/results-*.csv 2>/dev/null | grep -v -- '-waits\.csv$' | head -n 1 || true)
fi
if [ -z "$csv" ] || [ ! -s "$csv" ]; then
    echo "bench-report.sh: no results CSV (run make bench first)" >&2
    exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tt-report.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# The plot's data and title from a results CSV (columns found by name).
prepare() { # CSV DIR -> DIR/paths.dat, DIR/sections.dat, prints the title
    awk -F, -v dir="$2" '
NR == 1 { for (i = 1; i <= NF; i++) C[$i] = i; next }
function g(n) { return (n in C) ? $(C[n]) : "" }
{
    if (label == "") { label = g("label"); host = g("host"); cpus = g("cpus"); date = g("date") }
    o = g("others_cpu_pct"); if (o != "" && o + 0 > maxo) maxo = o + 0
    st = g("stage")
    if ((st == "paths" || st == "reduce" || st == "cpp") && g("ratio") != "") {
        np++; PL[np] = g("scenario") " " g("param"); PR[np] = g("ratio"); PT[np] = (g("target") == "" ? "?" : g("target"))
    }
    if (st == "cg" && g("ratio") != "" && g("param") ~ / total$/) {
        np++; PL[np] = "CG solve " g("param"); sub(/ total$/, "", PL[np]); PR[np] = g("ratio"); PT[np] = "?"
    }
    if (st == "waits" && g("scenario") == "sections" && g("metric") == "call" && g("added_load") == "none" && g("overhead_us") != "") {
        k = g("param") " w" g("width")
        if (!(k in SK)) { SK[k] = 1; ns++; SL[ns] = k; SW[ns] = g("width") + 0; SP[ns] = g("param") + 0 }
        v = g("overhead_us") + 0; if (v < 0.01) v = 0.01
        V[k, g("system")] = v
    }
}
function q(x) { return (x == "") ? "?" : x }
END {
    f = dir "/paths.dat"
    for (i = 1; i <= np; i++) printf "%d \"%s\" %s %s\n", i - 1, PL[i], PR[i], PT[i] > f
    if (np == 0) print "0 \"(no paths measured)\" ? ?" > f
    printf "%d %d\n", (np > 0), (ns > 0) > (dir "/have")
    # sections: by width, then work
    for (i = 1; i <= ns; i++) ord[i] = i
    for (i = 2; i <= ns; i++) { x = ord[i]; j = i - 1
        while (j >= 1 && (SW[ord[j]] > SW[x] || (SW[ord[j]] == SW[x] && SP[ord[j]] > SP[x]))) { ord[j + 1] = ord[j]; j-- }
        ord[j + 1] = x }
    f = dir "/sections.dat"
    for (i = 1; i <= ns; i++) { k = SL[ord[i]]
        printf "%d \"%s\" %s %s %s\n", i - 1, k, q(V[k, "threadteam"]), q(V[k, "libgomp"]), q(V[k, "libomp"]) > f }
    if (ns == 0) print "0 \"(no sections measured)\" ? ? ?" > f
    busy = (maxo > 10) ? sprintf("BUSY machine: other processes used up to %d%% of the CPUs, figures not comparable", maxo) : sprintf("other processes used at most %d%% of the CPUs", maxo)
    printf "threadteam %s on %s (%s CPUs), %s; %s\n", label, host, cpus, date, busy
}' "$1"
}

plot() { # CSV PNG
    if ! command -v gnuplot >/dev/null 2>&1; then
        echo "bench-report.sh: gnuplot not found (apt-get install gnuplot-nox): no plot" >&2
        return 1
    fi
    mkdir -p "$tmp/plot"
    title=$(prepare "$1" "$tmp/plot")
    [ -n "${TT_REPORT_KEEP:-}" ] && cp "$tmp"/plot/*.dat "$TT_REPORT_KEEP"/
    set -- "$1" "$2" $(cat "$tmp/plot/have")
    gnuplot -e "datadir='$tmp/plot'; out='$2'; title='$title'; have_paths=$3; have_sections=$4" "$here/waiting.gnuplot"
    echo "bench-report.sh: wrote $2" >&2
}

case $mode in
plot)
    plot "$csv" "${png:-${csv%.csv}.png}"
    exit $?
    ;;
esac

# --docs
data=$top/docs/design/waiting-data
host=$(awk -F, 'NR == 2 { for (i = 1; i <= NF; i++) if (H[i] == "host") print $i; exit } NR == 1 { for (i = 1; i <= NF; i++) H[i] = $i }' "$csv")
host=${host:-local}
mkdir -p "$data"
cp "$csv" "$data/results-$host.csv"
waits=${csv%.csv}-waits.csv
[ -s "$waits" ] && cp "$waits" "$data/results-$host-waits.csv"
txt=${csv%.csv}.txt
plot "$csv" "$top/docs/design/waiting.png" || true
title=$(prepare "$csv" "$tmp")
md=$top/docs/design/waiting-results.md
{
    echo "# Benchmark results"
    echo
    echo "Generated by \`scripts/bench-report.sh --docs\` from one \`make bench\` run:"
    echo "$title."
    echo "Do not edit by hand: run \`make bench\`, then \`scripts/bench-report.sh --docs\`. The CSV of"
    echo "every figure (each row with the load of the stage it was measured in) is"
    echo "[\`waiting-data/results-$host.csv\`](waiting-data/results-$host.csv); the method is in the header"
    echo "comments of \`scripts/bench.sh\`, \`bench/wait_scenarios.c\` and \`bench/bench_paths.c\`."
    echo "Lower is better everywhere: times are microseconds per call, ratios threadteam / the other system."
    echo
    echo "![each everyday path's ratio to raw OpenMP, and the sections overhead against libgomp and LLVM libomp](waiting.png)"
    echo
    echo "## Load during the run"
    echo
    echo "| stage | other processes' share of the CPUs | load average (1 min, the benchmark included) |"
    echo "| --- | ---: | ---: |"
    awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) C[$i] = i; next }
        { s = $(C["stage"]); if (!(s in seen)) { seen[s] = 1; printf "| %s | %s %% | %s |\n", s, $(C["others_cpu_pct"]), $(C["loadavg_1min"]) } }' "$csv"
    if [ -s "$waits" ]; then
        echo
        echo "## Sections, gaps, acquire, nested: threadteam, libgomp, LLVM libomp"
        echo
        sh "$here/bench.sh" --table "$waits" | sed '1,5d'
        echo
        echo '```'
        sh "$here/bench.sh" --targets "$waits"
        echo '```'
    fi
    echo
    echo "## The everyday paths against raw OpenMP"
    echo
    echo "| path | raw OpenMP (us) | threadteam (us) | ratio | target | verdict |"
    echo "| (cpp-* rows: the C API's time, then the C++ front's) | | | | | |"
    echo "| --- | ---: | ---: | ---: | ---: | --- |"
    awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) C[$i] = i; next }
        $(C["stage"]) == "paths" || $(C["stage"]) == "reduce" || $(C["stage"]) == "cpp" { printf "| %s %s | %s | %s | %s | <= %s | %s |\n", $(C["scenario"]), $(C["param"]), $(C["ref_us"]), $(C["median_us"]), $(C["ratio"]), $(C["target"]), $(C["verdict"]) }' "$csv"
    echo
    echo "## The task-suite kernels against their OpenMP-task twins"
    echo
    echo "| kernel (load) | OpenMP (us; inline: ns) | threadteam | ratio | target | verdict |"
    echo "| --- | ---: | ---: | ---: | ---: | --- |"
    awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) C[$i] = i; next }
        $(C["stage"]) == "tasks" { printf "| %s %s (%s) | %s | %s | %s | %s | %s |\n", $(C["scenario"]), $(C["param"]), $(C["added_load"]), $(C["ref_us"]), $(C["median_us"]), $(C["ratio"]), $(C["target"]), $(C["verdict"]) }' "$csv"
    echo
    echo "## A root against the \`omp parallel\` of the same thread"
    echo
    echo "| place (load) | OpenMP (us) | threadteam | ratio | target | verdict |"
    echo "| --- | ---: | ---: | ---: | ---: | --- |"
    awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) C[$i] = i; next }
        $(C["stage"]) == "roots" { printf "| %s %s (%s) | %s | %s | %s | %s | %s |\n", $(C["scenario"]), $(C["param"]), $(C["added_load"]), $(C["ref_us"]), $(C["median_us"]), $(C["ratio"]), $(C["target"]), $(C["verdict"]) }' "$csv"
    echo
    echo "## The CG application (examples/cg.c) against its all-OpenMP twin"
    echo
    echo "| phase | all OpenMP (ms per solve) | threadteam + OpenMP (ms) | ratio |"
    echo "| --- | ---: | ---: | ---: |"
    awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) C[$i] = i; next }
        $(C["stage"]) == "cg" { printf "| %s | %.2f | %.2f | %s |\n", $(C["param"]), $(C["ref_us"]) / 1000, $(C["median_us"]) / 1000, $(C["ratio"]) }' "$csv"
    if [ -s "$txt" ]; then
        echo
        echo "## The verdict"
        echo
        echo '```'
        grep '^make bench:' "$txt" || true
        echo '```'
    fi
} >"$md"
echo "bench-report.sh: wrote $md" >&2
