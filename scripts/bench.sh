#!/bin/sh
# bench.sh -- `make bench`: threadteam side by side with raw OpenMP.
#
# Stages, each printed as it ends, with a progress line every 20 s meanwhile:
#   waits  bench/bench_ranges (tt_for_ranges vs `omp parallel for`), then
#          bench/wait_scenarios (threadteam), wait_omp_gomp (libgomp) and
#          wait_omp_llvm (LLVM libomp) alternating, each in a process of its
#          own, every scenario and round (the order of the three rotates);
#          one table of medians, p10 / p90 and ratios, then its targets
#   paths  scripts/bench-paths.sh: the everyday paths against raw OpenMP,
#          with their targets
#   reduce scripts/bench-reduce.sh: tt_reduce_sum_d (isolated and
#          OpenMP-free pools) against `omp parallel for reduction(+:s)` at
#          10^3..10^7 doubles, with its target (<= 1.10, OpenMP-free)
#   tasks  scripts/bench-tasks.sh: the task-suite kernels (fib, nqueens,
#          mergesort, a two-level loop, an irregular loop, the inline
#          entry) against their OpenMP-task twins, quiet, passive and
#          loaded, with their targets
#   roots  scripts/bench-roots.sh: a root (a token per call and a 2-job
#          tt_fork of 400 ns jobs) against the `omp parallel` the same thread
#          opens, from the main thread, a second thread and a fresh thread,
#          quiet and passive, with its targets (OpenMP-free pool; the
#          isolated pool's figures reported beside them)
#   cg     scripts/bench-cg.sh: examples/cg, threadteam kernels in an OpenMP
#          code against its all-OpenMP twin (no target: information)
#   cpp    scripts/bench-cpp.sh: the C++ front (threadteam.hpp) against the
#          same calls through the C API (for_ranges, fork, the team scope,
#          the sum), with its target (<= 1.02); when bench_cpp was built
# The short pass keeps to a time budget (see BENCH_BUDGET_S below), so that a
# slow or busy machine gets fewer rounds rather than a much longer run.
# Before it starts it says how long it will take (seconds per round from the
# last run on this machine, kept in OUTDIR/timings.txt, else estimates for a
# quiet 2-CPU host: about 2 minutes for the short pass) and how busy the
# CPUs are. Each stage's load is measured while it runs: the share of all
# CPUs that other processes used (/proc/stat minus this script's own
# processes) and the load average; every row of the results CSV carries its
# stage's figures, and above 10 % the run is called not comparable.
#
# Output, in OUTDIR (default build/bench/ of the build tree), one set per
# run: results-DATE.csv (every figure: the columns below), results-DATE.png
# (scripts/bench-report.sh --plot: each path's ratio to raw OpenMP and the
# sections overhead against libgomp and libomp; needs gnuplot),
# results-DATE.txt (the console output), results-DATE-waits.csv (the
# wait-benchmark summary rows, for scripts/bench-report.sh --docs).
# The last line is the verdict:
#   make bench: TARGETS MET: all N; ...                           exit 0
#   make bench: TARGETS MISSED: K of N (names); ...               exit 1
#   make bench: NO TARGETS MEASURED; ...                          exit 2
# with "the machine was busy ...: not comparable" when other processes used
# more than 10 % of the CPUs during a stage. A miss on a busy machine is still
# a miss (exit 1): rerun on a quiet one before drawing conclusions.
#
# usage: scripts/bench.sh [--short|--full|--quick] [--label L] [--widths LIST] [--load K:P]
#                         [--rounds N] [--reps N] [--paths-rounds N] [--scenarios LIST]
#                         [--out CSV] [--results CSV] [--bindir DIR] [--no-over]
#                         [--no-ranges] [--no-paths] [--no-reduce] [--no-tasks] [--no-cg]
#                         [--no-cpp] [--no-roots]
#                         [--keep-raw FILE]
#                         [-- DRIVER ARGS]
#        scripts/bench.sh --table CSV [--label L]     the table of summary rows
#        scripts/bench.sh --targets CSV [--label L]   the targets, PASS / MISS
#        scripts/bench.sh --aggregate RAW --label L   summary rows of a driver's --csv rows
#
#   --short        the short pass (default, `make bench`)
#   --full         the long pass (`make bench-full`): about 2.5 x the rounds
#   --quick        one round of everything: checks that the pipeline works;
#                  its figures mean nothing
#   --label L      label of the rows (default main-<short git rev>, or local)
#   --widths LIST  team widths (default: all CPUs of the affinity set and three
#                  quarters of them, plus the oversubscribed 2 x CPUs for
#                  `sections` unless --no-over)
#   --load K:P     K processes busy P % of every 10 ms during the run (each
#                  driver process starts and ends its own; only the wait
#                  benchmarks run then)
#   --rounds N, --reps N   rounds and repetitions of the wait benchmarks
#   --paths-rounds N       rounds of scripts/bench-paths.sh
#   --out CSV      also append the wait-benchmark summary rows to CSV
#   --results CSV  the results file (default OUTDIR/results-DATE.csv)
#   --bindir DIR   where the programs are (default: $BENCH_BINDIR, then bench/
#                  and omp/ of $BUILD_DIR (set by make), of ./build, of the
#                  current directory and of the source tree)
#   --no-cpp       skip the C++ front's rows (bench_cpp)
#   --no-roots     skip the roots stage (bench_roots)
#   --no-ranges, --no-paths, --no-reduce, --no-tasks, --no-cg   skip
#                  bench_ranges, the paths, the reproducible sum, the task
#                  kernels, the CG stage
# Environment: BENCH_FULL=1 (as --full), BUILD_DIR, BENCH_BINDIR, BENCH_HOST,
#   BENCH_OUT_DIR (OUTDIR), BENCH_BUDGET_S (short pass: the wait benchmarks
#   start no round after this many seconds, once 3 rounds ran; default 150,
#   0 = no budget; the paths then get 3 to 7 rounds, as many as fit in 120 s
#   at this run's pace, from the waits stage, or the last run's).
#   -- ARGS        passed to every wait driver (e.g. -- --work 20 --gaps 1000)
#
# Results CSV columns: label,date,host,cpus,stage (ranges, waits, paths,
# reduce, tasks, roots, cg, cpp),
# system,scenario,param,metric,width,added_load (--load, or none),median_us,
# p10_us,p90_us,overhead_us (per section / per split),ref_system,ref_us,ratio
# (threadteam / ref),target,verdict (PASS / MISS; rows of metric `target`
# are the wait benchmarks' targets),others_cpu_pct,loadavg_1min.
# Summary CSV columns (--out, -waits.csv): label,date,host,cpus,system,scenario,
# param,metric,width,load,calls,reps,median_us,p10_us,p90_us,
# overhead_us_per_section,join_sleeps,barrier_sleeps,member_parks,preemptions
# (wait counters: means per call).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
LC_ALL=C
export LC_ALL

HEADER="label,date,host,cpus,system,scenario,param,metric,width,load,calls,reps,median_us,p10_us,p90_us,overhead_us_per_section,join_sleeps,barrier_sleeps,member_parks,preemptions"

# ---------------------------------------------------------------------------
# The table and the targets, from summary rows (awk, POSIX: mawk is enough).
# ---------------------------------------------------------------------------

# Common awk code: read the CSV (rows of one label), index the cells.
AWK_LOAD='
BEGIN { FS = "," }
FNR == 1 && $1 == "label" { next }
{
    if (want != "" && $1 != want) next
    if (want == "") lastlabel = $1
    n++
    L[n] = $0
}
function load_rows(   i, f, k, key) {
    for (i = 1; i <= n; i++) {
        split(L[i], f, ",")
        if (want == "" && f[1] != lastlabel) continue
        label = f[1]; host = f[3]; cpus = f[4]
        key = f[5] SUBSEP f[6] SUBSEP f[7] SUBSEP f[8] SUBSEP f[9] SUBSEP f[10]
        MED[key] = f[13]; P10[key] = f[14]; P90[key] = f[15]; OVH[key] = f[16]
        JS[key] = f[17]; BS[key] = f[18]; MP[key] = f[19]; PR[key] = f[20]
        CALLS[key] = f[11]; REPS[key] = f[12]
        k = f[6] SUBSEP f[7] SUBSEP f[8] SUBSEP f[9] SUBSEP f[10]
        if (!(k in SEEN)) { SEEN[k] = 1; nrow++; ROW[nrow] = k }
        if (f[10] != "none") LOADS[f[10]] = 1
    }
}
function has(sys, sc, pa, me, w, ld) { return (sys SUBSEP sc SUBSEP pa SUBSEP me SUBSEP w SUBSEP ld) in MED }
function med(sys, sc, pa, me, w, ld) { return MED[sys SUBSEP sc SUBSEP pa SUBSEP me SUBSEP w SUBSEP ld] }
function ovh(sys, sc, pa, me, w, ld) { return OVH[sys SUBSEP sc SUBSEP pa SUBSEP me SUBSEP w SUBSEP ld] }
# OpenMP has only a held team in `acquire`: its pool / newpool rows use it.
function ompparam(sc, pa) { return (sc == "acquire") ? "team" : pa }
function fmt(v) {
    if (v == "") return "-"
    if (v + 0 >= 1000) return sprintf("%.0f", v)
    if (v + 0 >= 100) return sprintf("%.1f", v)
    return sprintf("%.2f", v)
}
function ratio(a, b) {
    if (a == "" || b == "" || b + 0 <= 0) return "-"
    return sprintf("%.2f", a / b)
}
'

print_table() {
    awk -v want="$2" "$AWK_LOAD"'
function cell(sys, sc, pa, me, w, ld,   k) {
    k = sys SUBSEP sc SUBSEP pa SUBSEP me SUBSEP w SUBSEP ld
    if (!(k in MED)) return "-"
    return fmt(MED[k]) " [" fmt(P10[k]) ", " fmt(P90[k]) "]"
}
function line(a, b, c, d, e, f, g, h, i, j) {
    printf "| %-8s | %-10s | %-16s | %5s | %-5s | %-39s | %-26s | %-26s | %7s | %7s |\n", a, b, c, d, e, f, g, h, i, j
}
END {
    load_rows()
    printf "threadteam wait benchmarks, label %s, host %s, %s CPUs: us per call, median [p10, p90]\n", label, host, cpus
    printf "over all repetitions of all rounds; ratios are threadteam / libgomp and threadteam / libomp.\n"
    printf "OpenMP has no pool to acquire: its acquire rows are all its held team. added: the load\n"
    printf "this script added (--load K:P; - = none); what other processes used is measured per stage.\n\n"
    line("scenario", "param", "metric", "width", "added", "threadteam", "libgomp", "libomp", "tt/gomp", "tt/omp")
    printf "| -------- | ---------- | ---------------- | ----: | ----- | --------------------------------------- | -------------------------- | -------------------------- | ------: | ------: |\n"
    for (r = 1; r <= nrow; r++) {
        split(ROW[r], k, SUBSEP)
        sc = k[1]; pa = k[2]; me = k[3]; w = k[4]; ld = k[5]
        op = ompparam(sc, pa)
        t = med("threadteam", sc, pa, me, w, ld)
        g = med("libgomp", sc, op, me, w, ld)
        o = med("libomp", sc, op, me, w, ld)
        line(sc, pa, me, w, (ld == "none" ? "-" : ld), cell("threadteam", sc, pa, me, w, ld), cell("libgomp", sc, op, me, w, ld), cell("libomp", sc, op, me, w, ld), ratio(t, g), ratio(t, o))
        if (sc == "sections" && me == "call") {
            t = ovh("threadteam", sc, pa, me, w, ld); g = ovh("libgomp", sc, op, me, w, ld); o = ovh("libomp", sc, op, me, w, ld)
            line("", "", "overhead/section", "", "", fmt(t), fmt(g), fmt(o), ratio(t, g), ratio(t, o))
        }
        if (sc == "nested" && me == "call") {
            t = ovh("threadteam", sc, pa, me, w, ld); g = ovh("libgomp", sc, op, me, w, ld); o = ovh("libomp", sc, op, me, w, ld)
            line("", "", "overhead/split", "", "", fmt(t), fmt(g), fmt(o), ratio(t, g), ratio(t, o))
        }
        key = "threadteam" SUBSEP sc SUBSEP pa SUBSEP me SUBSEP w SUBSEP ld
        if ((key in JS) && JS[key] != "" && me != "first")
            line("", "", "waits per call", "", "", sprintf("join %s bar %s park %s pre %s", fmt(JS[key]), fmt(BS[key]), fmt(MP[key]), fmt(PR[key])), "", "", "", "")
    }
}' "$1"
}

print_targets() {
    awk -v want="$2" "$AWK_LOAD"'
function verdict(ok, name, detail) {
    printf "%-4s %-44s  %s\n", (ok ? "PASS" : "MISS"), name, detail
    if (ok) npass++; else nmiss++
}
END {
    load_rows()
    all = (cpus < 2) ? 2 : cpus; over = 2 * cpus
    printf "Targets (label %s, width %s = all CPUs, medians, no added load unless said):\n", label, all
    # sections: overhead per section <= libgomp / 2 and <= libomp
    for (r = 1; r <= nrow; r++) {
        split(ROW[r], k, SUBSEP); sc = k[1]; pa = k[2]; me = k[3]; w = k[4]; ld = k[5]
        if (ld != "none") continue
        if (sc == "sections" && me == "call" && pa == "0us" && w == all) {
            t = ovh("threadteam", sc, pa, me, w, ld); g = ovh("libgomp", sc, pa, me, w, ld); o = ovh("libomp", sc, pa, me, w, ld)
            if (t != "" && g != "") printf "info empty sections w%s (dispatch alone)          tt %.3f us, libgomp %.3f us, libomp %s us\n", w, t, g, (o == "" ? "-" : sprintf("%.3f", o))
            continue
        }
        if (sc == "sections" && me == "call" && pa != "0us" && (w == all || w == over)) {
            t = ovh("threadteam", sc, pa, me, w, ld); g = ovh("libgomp", sc, pa, me, w, ld); o = ovh("libomp", sc, pa, me, w, ld)
            if (t == "" || g == "") continue
            if (w == all) {
                verdict(t <= g / 2, "sections " pa " w" w ": ovh <= libgomp/2", sprintf("tt %.3f us, libgomp %.3f us (x%.2f)", t, g, (g > 0 ? t / g : 0)))
                if (o != "") verdict(t <= o, "sections " pa " w" w ": ovh <= libomp", sprintf("tt %.3f us, libomp %.3f us (x%.2f)", t, o, (o > 0 ? t / o : 0)))
            } else {
                # Width w on `cpus` CPUs: the work of a section alone takes
                # ceil(w / cpus) times its serial time, the members sharing
                # the CPUs by turns, whatever the runtime does. The overhead
                # (over the serial time) holds that share of `work` too, so
                # the target compares what each runtime adds beyond it (at
                # 50 us, libgomp/2 over the serial time is less than the
                # sharing alone: no runtime could meet it).
                share = (int((w + cpus - 1) / cpus) - 1) * (pa + 0)
                verdict(t - share <= (g - share) / 2, "oversubscribed sections " pa " w" w ": ovh beyond sharing <= libgomp/2", sprintf("tt %.3f us, libgomp %.3f us (x%.2f) beyond the %g us of sharing; with it %.3f and %.3f us", t - share, g - share, (g > share ? (t - share) / (g - share) : 0), share, t, g))
            }
        }
        if (sc == "gaps" && me == "first" && w == all) {
            t = med("threadteam", sc, pa, me, w, ld); g = med("libgomp", sc, pa, me, w, ld)
            if (t != "" && g != "") verdict(t <= g, "gaps " pa " w" w ": first <= libgomp", sprintf("tt %.2f us, libgomp %.2f us (x%.2f)", t, g, t / g))
        }
        if (sc == "nested" && me == "call" && w == all) {
            t = ovh("threadteam", sc, pa, me, w, ld); g = ovh("libgomp", sc, pa, me, w, ld)
            if (t != "" && g != "") verdict(t * 10 <= g, "nested w" w ": ovh/split 10x below libgomp", sprintf("tt %.2f us, libgomp %.2f us (libgomp/tt x%.1f; per call x%.2f)", t, g, (t > 0 ? g / t : 999), med("libgomp", sc, pa, me, w, ld) / med("threadteam", sc, pa, me, w, ld)))
        }
    }
    tm = med("threadteam", "acquire", "team", "call", all, "none")
    pm = med("threadteam", "acquire", "pool", "call", all, "none")
    nb = med("threadteam", "acquire", "newpool", "build_destroy", all, "none")
    if (tm != "" && pm != "") verdict(pm <= 2 * tm, "acquire w" all ": pool held <= 2 x team held", sprintf("pool %.1f us, team %.1f us (x%.2f)", pm, tm, pm / tm))
    if (tm != "" && nb != "") verdict(nb <= 5 * tm, "acquire w" all ": new pool <= 5 x team held", sprintf("build..destroy %.1f us, team %.1f us (x%.2f)", nb, tm, nb / tm))
    nc = med("threadteam", "acquire", "newpool", "call", all, "none")
    if (tm != "" && nc != "") verdict(nc <= 1.10 * tm, "acquire w" all ": new pool per call <= 1.10 x team held", sprintf("call %.1f us, team %.1f us (x%.2f)", nc, tm, nc / tm))
    # under load: no threadteam row more than 2x its quiet figure
    for (ld in LOADS) {
        worst = 0; worstrow = ""; cnt = 0; bad = 0
        for (r = 1; r <= nrow; r++) {
            split(ROW[r], k, SUBSEP); sc = k[1]; pa = k[2]; me = k[3]; w = k[4]
            if (k[5] != ld) continue
            q = med("threadteam", sc, pa, me, w, "none"); l = med("threadteam", sc, pa, me, w, ld)
            if (q == "" || l == "" || q + 0 <= 0) continue
            cnt++
            if (l / q > 2) { bad++; badrows = badrows sprintf("\n       %s %s %s w%s: x%.2f (%.1f -> %.1f us)", sc, pa, me, w, l / q, q, l) }
            if (l / q > worst) { worst = l / q; worstrow = sc " " pa " " me " w" w }
        }
        if (cnt) verdict(bad == 0, "load " ld ": every row <= 2 x quiet", sprintf("%d of %d rows above; worst x%.2f (%s)%s", bad, cnt, worst, worstrow, badrows))
        badrows = ""
    }
    printf "%d met, %d missed\n", npass, nmiss
}' "$1"
}

# ---------------------------------------------------------------------------
# Aggregation: per-repetition rows of the drivers -> summary rows.
# ---------------------------------------------------------------------------

aggregate() { # raw.csv label host cpus
    awk -v label="$2" -v host="$3" -v cpus="$4" -v date="$(date -u +%Y-%m-%dT%H:%MZ)" '
BEGIN { FS = "," }
$1 == "label" { next }
function isort(a, m,   i, j, v) {
    for (i = 2; i <= m; i++) { v = a[i]; j = i - 1; while (j >= 1 && a[j] > v) { a[j + 1] = a[j]; j-- } a[j + 1] = v }
}
function q(a, m, p,   pos, i, f) {
    if (m == 0) return ""
    pos = p * (m - 1); i = int(pos); f = pos - i
    if (i + 1 >= m) return a[m]
    return a[i + 1] + f * (a[i + 2] - a[i + 1])
}
{
    key = $2 SUBSEP $3 SUBSEP $4 SUBSEP $5 SUBSEP $6 SUBSEP $8
    if (!(key in N)) { order[++nk] = key; CALLS[key] = $9 }
    N[key]++
    V[key, N[key]] = $11 + 0
    if ($12 != "") { NO[key]++; O[key, NO[key]] = $12 + 0 }
    if ($13 != "") { NW[key]++; J[key] += $13; B[key] += $14; P[key] += $15; R[key] += $16 }
}
END {
    for (x = 1; x <= nk; x++) {
        key = order[x]; split(key, k, SUBSEP)
        m = N[key]; for (i = 1; i <= m; i++) a[i] = V[key, i]
        isort(a, m)
        med = q(a, m, 0.5); p10 = q(a, m, 0.1); p90 = q(a, m, 0.9)
        ov = ""
        if (NO[key] > 0) { mo = NO[key]; for (i = 1; i <= mo; i++) b[i] = O[key, i]; isort(b, mo); ov = sprintf("%.4f", q(b, mo, 0.5)) }
        js = bs = mp = pr = ""
        if (NW[key] > 0) { js = sprintf("%.4f", J[key] / NW[key]); bs = sprintf("%.4f", B[key] / NW[key]); mp = sprintf("%.4f", P[key] / NW[key]); pr = sprintf("%.4f", R[key] / NW[key]) }
        printf "%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%d,%.3f,%.3f,%.3f,%s,%s,%s,%s,%s\n", label, date, host, cpus, k[1], k[2], k[3], k[4], k[5], k[6], CALLS[key], m, med, p10, p90, ov, js, bs, mp, pr
    }
}' "$1"
}

# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------

mode=run
csv_in=
label=
widths=
load=none
rounds=
reps=
scenarios="sections gaps acquire nested"
out=
bindir=${BENCH_BINDIR:-}
over=1
pass=short
[ -n "${BENCH_FULL:-}" ] && [ "${BENCH_FULL:-}" != 0 ] && pass=full
ranges=1
cgbench=1
paths_on=1
reduce_on=1
tasks_on=1
roots_on=1
cpp_on=1
prounds_opt=
out_results=
keep_raw=
while [ $# -gt 0 ]; do
    case $1 in
    --table) mode=table; csv_in=$2; shift ;;
    --targets) mode=targets; csv_in=$2; shift ;;
    --aggregate) mode=aggregate; csv_in=$2; shift ;;
    --short) pass=short ;;
    --full) pass=full ;;
    --quick) pass=quick ;;
    --paths-rounds) prounds_opt=$2; shift ;;
    --results) out_results=$2; shift ;;
    --no-paths) paths_on=0 ;;
    --no-reduce) reduce_on=0 ;;
    --no-tasks) tasks_on=0 ;;
    --no-cpp) cpp_on=0 ;;
    --no-roots) roots_on=0 ;;
    --label) label=$2; shift ;;
    --widths) widths=$2; shift ;;
    --load) load=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    --reps) reps=$2; shift ;;
    --scenarios) scenarios=$(echo "$2" | tr ',' ' '); shift ;;
    --out) out=$2; shift ;;
    --bindir) bindir=$2; shift ;;
    --no-over) over=0 ;;
    --no-ranges) ranges=0 ;;
    --no-cg) cgbench=0 ;;
    --keep-raw) keep_raw=$2; shift ;;
    --help|-h) sed -n '2,/^set -eu/p' "$0" | sed 's/^# \{0,1\}//;/^set -eu/d'; exit 0 ;;
    --) shift; break ;;
    *) echo "bench.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done

case $mode in
table) print_table "$csv_in" "$label"; exit 0 ;;
targets) print_targets "$csv_in" "$label"; exit 0 ;;
aggregate)
    aggregate "$csv_in" "${label:-local}" "${BENCH_HOST:-$(hostname -s 2>/dev/null || hostname)}" \
        "$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN)"
    exit 0 ;;
esac

if [ -z "$label" ]; then
    rev=$(git -C "$top" rev-parse --short HEAD 2>/dev/null || true)
    label=${rev:+main-$rev}
    label=${label:-local}
fi
host=${BENCH_HOST:-$(hostname -s 2>/dev/null || hostname)}
BENCH_HOST=$host
export BENCH_HOST
cpus=$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN)

# The short pass keeps to a time budget: the wait benchmarks stop starting
# rounds after BENCH_BUDGET_S (default 150 s; at least 3 rounds), and the
# paths get as many rounds (3 to 7) as fit in 120 s at the last run's pace.
# An explicit --rounds / --paths-rounds, --full or BENCH_BUDGET_S=0 lift it.
wbudget=0
[ "$pass" = short ] && [ -z "$rounds" ] && wbudget=${BENCH_BUDGET_S:-150}
case $pass in
short) rounds=${rounds:-10}; reps=${reps:-15}; rr="--rounds 3 --reps 9"; prounds=7; cgr="--rounds 4 --reps 5"; rrounds=6; trounds=3; crounds=14; orounds=7 ;;
full) rounds=${rounds:-20}; reps=${reps:-25}; rr="--rounds 5 --reps 21"; prounds=15; cgr="--rounds 10 --reps 7"; rrounds=12; trounds=7; crounds=24; orounds=15 ;;
quick) rounds=${rounds:-1}; reps=${reps:-3}; rr="--rounds 1 --reps 3"; prounds=1; cgr="--rounds 2 --reps 1"; rrounds=1; trounds=1; crounds=1; orounds=1 ;;
esac
[ -n "$prounds_opt" ] && prounds=$prounds_opt

# The programs: --bindir, then the build tree (the current directory when run
# from make), then the source tree.
bd=${BUILD_DIR:-${TT_BUILD_DIR:-}}
find_prog() {
    for d in ${bindir:+"$bindir"} ${bd:+"$bd/bench" "$bd/omp"} "$top/build/bench" "$top/build/omp" \
        "$PWD/bench" "$PWD/omp" "$PWD" "$top/bench" "$top/omp"; do
        if [ -x "$d/$1" ] && [ ! -d "$d/$1" ]; then echo "$d/$1"; return 0; fi
    done
    echo "bench.sh: $1 not found (build it: make -C bench $1, or pass --bindir)" >&2
    return 1
}
TT=$(find_prog wait_scenarios) || exit 2
GOMP=$(find_prog wait_omp_gomp) || exit 2
LLVM=$(find_prog wait_omp_llvm) || exit 2

all=$cpus; [ "$all" -lt 2 ] && all=2
tq=$((cpus * 3 / 4)); [ "$tq" -lt 2 ] && tq=2
if [ -n "$widths" ]; then
    w_default=$widths
    w_sections=$widths
else
    w_default=$all; [ "$tq" != "$all" ] && w_default="$all,$tq"
    w_sections=$w_default
    [ "$over" = 1 ] && w_sections="$w_sections,$((2 * cpus))"
fi

# Where the results go: a stable folder, one set of files per run.
outdir=${BENCH_OUT_DIR:-${bd:-$top/build}/bench}
stamp=$(date -u +%Y-%m-%dT%H%M%S)
mkdir -p "$outdir"
outdir=$(cd "$outdir" && pwd)
results=${out_results:-$outdir/results-$stamp.csv}
png=${results%.csv}.png
txt=${results%.csv}.txt
waits_csv=${results%.csv}-waits.csv
timings=$outdir/timings.txt

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tt-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM HUP
raw=$tmp/raw.csv

# ---------------------------------------------------------------------------
# The machine's load: /proc/stat (all CPUs) against the CPU time of this
# script's own children, so that what other processes used is known.
# ---------------------------------------------------------------------------
# snap: "total_ticks busy_ticks own_ticks" now (own = this shell's reaped
# children; a stage's processes are reaped before its second snap).
snap() {
    s=$(awk '/^cpu / { t = 0; for (i = 2; i <= 9 && i <= NF; i++) t += $i; print t, t - $5 - $6; exit }' /proc/stat 2>/dev/null)
    o=$(awk '{ sub(/^.*\) /, ""); print $12 + $13 + $14 + $15 }' /proc/$$/stat 2>/dev/null)
    echo "${s:-0 0} ${o:-0}"
}
# others_pct A B: the % of all CPUs that other processes kept busy between
# snaps A and B.
others_pct() {
    echo "$1 $2" | awk '{ dt = $4 - $1; db = $5 - $2; dow = $6 - $3
        if (dt <= 0) { print ""; exit }
        v = 100 * (db - dow) / dt; if (v < 0) v = 0; printf "%.0f", v }'
}
loadavg1() { cut -d' ' -f1 /proc/loadavg 2>/dev/null; }

# ---------------------------------------------------------------------------
# Stages: each runs in the background while a progress line is printed every
# 20 s; its table goes to the console when it ends.
# ---------------------------------------------------------------------------
nstages=0
stages=
add_stage() { nstages=$((nstages + 1)); stages="$stages $1"; }
# est NAME ROUNDS DEFAULT_SECONDS_PER_ROUND: seconds, from the last run on this
# machine ($timings) when there is one.
est() {
    per=$(awk -v s="$pass-$1" '$1 == s { v = $2 } END { print v }' "$timings" 2>/dev/null || true)
    [ -n "$per" ] || per=$3
    awk -v r="$2" -v p="$per" 'BEGIN { printf "%.0f", r * p }'
}
fmt_time() { awk -v s="$1" 'BEGIN { if (s < 90) printf "%d s", s; else printf "%.1f min", s / 60 }'; }

stage_no=0
CONSOLE=$tmp/console.txt
: >"$CONSOLE"
# say MSG: a progress line on the console (stderr) and in the console copy.
say() { echo "$*" >&2; echo "$*" >>"$CONSOLE"; }
LOADS=$tmp/loads.txt
: >"$LOADS"
run_stage() { # NAME ESTIMATE_S ROUNDS CMD...
    name=$1; e=$2; nr=$3; shift 3
    rm -f "$tmp/$name.rounds"
    stage_no=$((stage_no + 1))
    say "bench: [$stage_no/$nstages] $name: starting (about $(fmt_time "$e"))"
    a=$(snap)
    t0=$(date +%s)
    "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
    pid=$!
    i=0
    while kill -0 "$pid" 2>/dev/null; do
        sleep 1
        i=$((i + 1))
        if [ $((i % 20)) -eq 0 ] && kill -0 "$pid" 2>/dev/null; then
            last=$(grep -v '^$' "$tmp/$name.err" 2>/dev/null | tail -n 1 | cut -c1-60)
            el=$(($(date +%s) - t0))
            if [ "$el" -gt "$e" ]; then of="longer than the $e s estimated"; else of="of about $e s"; fi
            say "bench: [$stage_no/$nstages] $name: $el s, $of${last:+ ($last)}"
        fi
    done
    if wait "$pid"; then rc=0; else rc=$?; fi
    t=$(($(date +%s) - t0))
    # A stage that stopped early says how many rounds it ran.
    [ -s "$tmp/$name.rounds" ] && nr=$(cat "$tmp/$name.rounds")
    b=$(snap)
    o=$(others_pct "$a" "$b")
    la=$(loadavg1)
    echo "$name ${o:-} ${la:-}" >>"$LOADS"
    # Seconds per round, for the next run's estimate.
    { grep -v "^$pass-$name " "$timings" 2>/dev/null; awk -v s="$pass-$name" -v t="$t" -v r="$nr" 'BEGIN { if (r > 0) printf "%s %.2f\n", s, t / r }'; } >"$tmp/timings.new" &&
        cat "$tmp/timings.new" >"$timings"
    say "bench: [$stage_no/$nstages] $name: done in $(fmt_time "$t"); other processes used ${o:-?} % of the CPUs, load average ${la:-?}"
    grep -v '^bench.sh: round \|^$' "$tmp/$name.err" | tee -a "$CONSOLE" >&2 || true
    echo | tee -a "$CONSOLE"
    tee -a "$CONSOLE" <"$tmp/$name.out"
    [ "$rc" -eq 0 ] || say "bench: $name ended with status $rc; its figures may be missing"
    return 0
}

waits_stage() {
    if [ "$ranges" = 1 ] && [ "$load" = none ] && [ -n "$RANGES" ]; then
        echo "bench.sh: bench_ranges $rr" >&2
        # shellcheck disable=SC2086
        "$RANGES" $rr ${widths:+--widths "$widths"} --csv "$tmp/ranges.csv" --label "$label" ||
            echo "bench.sh: bench_ranges failed" >&2
        echo
    fi
    r=0
    wstart=$(date +%s)
    while [ $r -lt "$rounds" ]; do
        if [ "$wbudget" -gt 0 ] && [ $r -ge 3 ] && [ $(($(date +%s) - wstart)) -ge "$wbudget" ]; then
            echo "bench.sh: time budget of $wbudget s reached: $r of $rounds rounds run (BENCH_BUDGET_S=0 lifts it)" >&2
            break
        fi
        r=$((r + 1))
        i=0
        for s in $scenarios; do
            i=$((i + 1))
            ws=$w_default; [ "$s" = sections ] && ws=$w_sections
            # Rotate the order of the systems by round and scenario.
            case $(((r + i) % 3)) in
            0) order="TT GOMP LLVM" ;;
            1) order="GOMP LLVM TT" ;;
            *) order="LLVM TT GOMP" ;;
            esac
            for sys in $order; do
                eval prog=\$$sys
                printf 'bench.sh: round %d/%d %s %s\n' "$r" "$rounds" "$s" "$sys" >&2
                "$prog" --scenario "$s" --widths "$ws" --reps "$reps" --load "$load" \
                    --label "$label" --csv "$raw" --quiet "$@" ||
                    echo "bench.sh: $prog --scenario $s failed (status $?); its rows are missing" >&2
            done
        done
    done
    echo "$r" >"$tmp/waits.rounds"
    { if [ -s "$tmp/ranges.csv" ]; then grep -v '^label,' "$tmp/ranges.csv" || true; fi; aggregate "$raw" "$label" "$host" "$cpus"; } > "$tmp/summary.csv"
    { echo "$HEADER"; cat "$tmp/summary.csv"; } > "$tmp/s.csv"
    print_table "$tmp/s.csv" "$label"
    echo
    print_targets "$tmp/s.csv" "$label" | tee "$tmp/targets.txt"
}

RANGES=
if [ "$ranges" = 1 ] && [ "$load" = none ]; then RANGES=$(find_prog bench_ranges 2>/dev/null) || RANGES=; fi
PATHS=
if [ "$load" = none ] && [ "$paths_on" = 1 ]; then PATHS=$(find_prog bench_paths 2>/dev/null) || PATHS=; fi
REDUCE=
if [ "$load" = none ] && [ "$reduce_on" = 1 ]; then REDUCE=$(find_prog bench_reduce 2>/dev/null) || REDUCE=; fi
TASKS=
if [ "$load" = none ] && [ "$tasks_on" = 1 ]; then TASKS=$(find_prog bench_tasks 2>/dev/null) || TASKS=; fi
ROOTSB=
if [ "$load" = none ] && [ "$roots_on" = 1 ]; then ROOTSB=$(find_prog bench_roots 2>/dev/null) || ROOTSB=; fi
CPPB=
if [ "$load" = none ] && [ "$cpp_on" = 1 ]; then CPPB=$(find_prog bench_cpp 2>/dev/null) || CPPB=; fi
CG=
if [ "$cgbench" = 1 ] && [ "$load" = none ]; then
    for d in ${bd:+"$bd/examples"} "$top/build/examples" "$PWD/examples"; do
        if [ -x "$d/cg" ]; then CG=$d/cg; break; fi
    done
fi

add_stage waits
[ -n "$PATHS" ] && add_stage paths
[ -n "$REDUCE" ] && add_stage reduce
[ -n "$TASKS" ] && add_stage tasks
[ -n "$ROOTSB" ] && add_stage roots
[ -n "$CG" ] && add_stage cg
[ -n "$CPPB" ] && add_stage cpp
# (defaults: seconds per round on a quiet 2-CPU VM, bench_ranges included in
# the waits rounds)
e_waits=$(est waits "$rounds" "$(awk -v r="$reps" 'BEGIN { printf "%.2f", 7 * r / 15 }')")
ew_round=$(est waits 1 "$(awk -v r="$reps" 'BEGIN { printf "%.2f", 7 * r / 15 }')")
[ "$ew_round" -gt 0 ] || ew_round=1
if [ "$wbudget" -gt 0 ] && [ "$e_waits" -gt "$wbudget" ]; then
    # at least 3 rounds, then rounds until the budget is spent (the last one overruns it)
    e3=$(est waits 3 "$(awk -v r="$reps" 'BEGIN { printf "%.2f", 7 * r / 15 }')")
    pr=$(est waits 1 "$(awk -v r="$reps" 'BEGIN { printf "%.2f", 7 * r / 15 }')")
    e_waits=$wbudget; [ "$e3" -gt "$e_waits" ] && e_waits=$e3
    e_waits=$((e_waits + pr))
fi
if [ "$wbudget" -gt 0 ] && [ -z "$prounds_opt" ]; then
    prounds=$(awk -v p="$(est paths 1 6)" 'BEGIN { n = (p > 0) ? int(120 / p) : 7; if (n > 7) n = 7; if (n < 3) n = 3; print n }')
fi
e_paths=$(est paths "$prounds" 6)
e_cg=$(est cg "$(echo "$cgr" | awk '{ print $2 }')" 3)
e_reduce=$(est reduce "$rrounds" 2)
e_tasks=$(est tasks "$trounds" 40)
e_roots=$(est roots "$orounds" 2)
e_cpp=$(est cpp "$crounds" 4)
total=$e_waits
[ -n "$PATHS" ] && total=$((total + e_paths))
[ -n "$REDUCE" ] && total=$((total + e_reduce))
[ -n "$TASKS" ] && total=$((total + e_tasks))
[ -n "$ROOTSB" ] && total=$((total + e_roots))
[ -n "$CG" ] && total=$((total + e_cg))
[ -n "$CPPB" ] && total=$((total + e_cpp))
src="estimates for two quiet CPUs"
grep -q "^$pass-" "$timings" 2>/dev/null && src="from the last run on this machine"

say "bench: threadteam $label on $host, $cpus CPUs, $pass pass: $nstages stage(s) (${stages# }), about $(fmt_time "$total") ($src)."
say "bench: progress every 20 s; results: $results and ${png##*/}"
say "bench: threadteam $TT | libgomp $GOMP | libomp $LLVM"
# How busy the CPUs are right now (other users' processes), over one second.
a=$(snap); sleep 1; b=$(snap)
busy=$(others_pct "$a" "$b")
say "bench: other processes use ${busy:-?} % of the CPUs now (load average $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null))"
if [ -n "$busy" ] && [ "$busy" -gt 10 ]; then
    say "bench: WARNING: the CPUs are not quiet: the figures will include other processes' load and" \
        "are not comparable with a quiet run; every row records the load measured while it ran"
fi

start=$(date +%s)
ws0=$(date +%s)
run_stage waits "$e_waits" "$rounds" waits_stage "$@"
waits_t=$(($(date +%s) - ws0))
[ -n "$keep_raw" ] && [ -f "$raw" ] && cp "$raw" "$keep_raw"
if [ -n "$PATHS" ]; then
    # The everyday paths of an OpenMP code (bench/bench_paths.c), against
    # raw OpenMP, alternating processes, with their targets.
    BENCH_LABEL=$label
    export BENCH_LABEL
    if [ "$wbudget" -gt 0 ] && [ -z "$prounds_opt" ] && [ -s "$tmp/waits.rounds" ]; then
        # This run's pace: the waits stage's seconds per round against the
        # estimate it started with; a slow or busy machine gets fewer rounds.
        prounds=$(awk -v a="$waits_t" -v r="$(cat "$tmp/waits.rounds")" -v ew="$ew_round" -v p="$(est paths 1 6)" '
            BEGIN { f = (ew > 0 && r > 0) ? (a / r) / ew : 1; if (f < 1) f = 1
                    n = int(120 / (p * f)); if (n > 7) n = 7; if (n < 3) n = 3; print n }')
        e_paths=$(est paths "$prounds" 6)
        [ "$prounds" -lt 7 ] && say "bench: paths: $prounds rounds (the time budget, at this run's pace)"
    fi
    # The build's own runtime, as every other stage (the application on
    # libomp: make bench-libomp, scripts/bench-paths.sh --runtime libomp).
    run_stage paths "$e_paths" "$prounds" env BENCH_RUNTIME=auto sh "$here/bench-paths.sh" "$PATHS" "$prounds" "$tmp/paths.csv"
fi
if [ -n "$REDUCE" ]; then
    # The reproducible sum (bench/bench_reduce.c) against `omp parallel for
    # reduction(+:s)`, isolated and OpenMP-free pools, alternating processes.
    run_stage reduce "$e_reduce" "$rrounds" sh "$here/bench-reduce.sh" --prog "$REDUCE" --rounds "$rrounds" \
        --label "$label" --csv "$tmp/reduce.csv"
fi
if [ -n "$TASKS" ]; then
    # The task-suite kernels (bench/bench_tasks.c) against their OpenMP-task
    # twins: quiet, OMP_WAIT_POLICY=passive and loaded passes.
    run_stage tasks "$e_tasks" "$trounds" sh "$here/bench-tasks.sh" --prog "$TASKS" --rounds "$trounds" \
        --label "$label" --csv "$tmp/tasks.csv"
fi
if [ -n "$ROOTSB" ]; then
    # A root against the `omp parallel` of the same thread (bench/bench_roots.c),
    # main, second and fresh thread: quiet and OMP_WAIT_POLICY=passive passes.
    run_stage roots "$e_roots" "$orounds" sh "$here/bench-roots.sh" --prog "$ROOTSB" --rounds "$orounds" \
        --label "$label" --csv "$tmp/roots.csv"
fi
if [ -n "$CG" ]; then
    # The CG application (examples/cg): threadteam kernels inside an OpenMP
    # code against its all-OpenMP twin.
    # shellcheck disable=SC2086
    run_stage cg "$e_cg" "$(echo "$cgr" | awk '{ print $2 }')" sh "$here/bench-cg.sh" --cg "$CG" $cgr --label "$label" --csv "$tmp/cg.csv"
fi
if [ -n "$CPPB" ]; then
    # The C++ front against the same calls through the C API
    # (bench/bench_cpp.cpp), alternating processes, target 1.02.
    run_stage cpp "$e_cpp" "$crounds" env BENCH_LABEL="$label" sh "$here/bench-cpp.sh" "$CPPB" "$crounds" "$tmp/cpp.csv"
fi
end=$(date +%s)

# ---------------------------------------------------------------------------
# One CSV of every figure, with the load of the stage it was measured in.
# ---------------------------------------------------------------------------
date=$(date -u +%Y-%m-%dT%H:%MZ)
RHEADER="label,date,host,cpus,stage,system,scenario,param,metric,width,added_load,median_us,p10_us,p90_us,overhead_us,ref_system,ref_us,ratio,target,verdict,others_cpu_pct,loadavg_1min"
[ -s "$tmp/summary.csv" ] && { echo "$HEADER"; cat "$tmp/summary.csv"; } >"$waits_csv"
{
    echo "$RHEADER"
    # Wait benchmarks and bench_ranges (the summary rows of this script).
    [ -s "$tmp/summary.csv" ] && awk -F, -v OFS=, -v loads="$LOADS" '
        BEGIN { while ((getline l < loads) > 0) { split(l, f, " "); O[f[1]] = f[2]; LA[f[1]] = f[3] } }
        $1 == "label" { next }
        { st = ($6 == "ranges") ? "ranges" : "waits"
          print $1, $2, $3, $4, st, $5, $6, $7, $8, $9, $10, $13, $14, $15, $16, "", "", "", "", "", O["waits"], LA["waits"] }' "$tmp/summary.csv"
    # Their targets.
    [ -s "$tmp/targets.txt" ] && awk -v OFS=, -v l="$label" -v d="$date" -v h="$host" -v c="$cpus" -v loads="$LOADS" '
        BEGIN { while ((getline x < loads) > 0) { split(x, f, " "); O[f[1]] = f[2]; LA[f[1]] = f[3] } }
        $1 == "PASS" || $1 == "MISS" {
            v = $1; sub(/^(PASS|MISS) +/, ""); name = $0; sub(/  +.*$/, "", name); gsub(/,/, ";", name)
            print l, d, h, c, "waits", "threadteam", name, "", "target", "", "none", "", "", "", "", "", "", "", "", v, O["waits"], LA["waits"] }' "$tmp/targets.txt"
    # The everyday paths (scripts/bench-paths.sh's CSV; columns found by name).
    [ -s "$tmp/paths.csv" ] && awk -F, -v OFS=, -v d="$date" -v h="$host" -v c="$cpus" -v l0="$label" -v loads="$LOADS" '
        BEGIN { while ((getline x < loads) > 0) { split(x, f, " "); O[f[1]] = f[2]; LA[f[1]] = f[3] } }
        NR == 1 || $1 == "label" { for (i = 1; i <= NF; i++) C[$i] = i; next }
        function g(n) { return (n in C) ? $(C[n]) : "" }
        { lab = g("label"); if (lab == "") lab = l0
          w = g("width"); ld = g("load"); if (ld == "") ld = "none"
          print lab, d, h, c, "paths", "threadteam", g("scenario"), g("param"), "call", w, ld, g("tt_us"), "", "", "", "openmp", g("omp_us"), g("ratio"), g("target"), g("verdict"), O["paths"], LA["paths"] }' "$tmp/paths.csv"
    # The reproducible sum (scripts/bench-reduce.sh's CSV).
    [ -s "$tmp/reduce.csv" ] && awk -F, -v OFS=, -v d="$date" -v c="$cpus" -v loads="$LOADS" '
        BEGIN { while ((getline x < loads) > 0) { split(x, f, " "); O[f[1]] = f[2]; LA[f[1]] = f[3] } }
        NR == 1 { for (i = 1; i <= NF; i++) C[$i] = i; next }
        function g(n) { return (n in C) ? $(C[n]) : "" }
        { print g("label"), d, g("host"), c, "reduce", "threadteam", g("scenario"), g("param"), "call", g("width"), "none", g("tt_us"), "", g("tt_p90"), "", "openmp", g("omp_us"), g("ratio"), g("target"), g("verdict"), O["reduce"], LA["reduce"] }' "$tmp/reduce.csv"
    # The task kernels (scripts/bench-tasks.sh's CSV; load and policy per pass).
    [ -s "$tmp/tasks.csv" ] && awk -F, -v OFS=, -v d="$date" -v c="$cpus" -v loads="$LOADS" '
        BEGIN { while ((getline x < loads) > 0) { split(x, f, " "); O[f[1]] = f[2]; LA[f[1]] = f[3] } }
        NR == 1 { for (i = 1; i <= NF; i++) C[$i] = i; next }
        function g(n) { return (n in C) ? $(C[n]) : "" }
        { sc = g("scenario"); if (g("policy") != "" && g("policy") != "default") sc = sc "-" g("policy")
          print g("label"), d, g("host"), c, "tasks", "threadteam", sc, g("param"), "call", g("width"), g("load"), g("tt_us"), "", g("tt_p90"), "", "openmp", g("omp_us"), g("ratio"), g("target"), g("verdict"), O["tasks"], LA["tasks"] }' "$tmp/tasks.csv"
    # The roots (scripts/bench-roots.sh's CSV; same columns as the tasks').
    [ -s "$tmp/roots.csv" ] && awk -F, -v OFS=, -v d="$date" -v c="$cpus" -v loads="$LOADS" '
        BEGIN { while ((getline x < loads) > 0) { split(x, f, " "); O[f[1]] = f[2]; LA[f[1]] = f[3] } }
        NR == 1 { for (i = 1; i <= NF; i++) C[$i] = i; next }
        function g(n) { return (n in C) ? $(C[n]) : "" }
        { sc = g("scenario"); if (g("policy") != "" && g("policy") != "default") sc = sc "-" g("policy")
          print g("label"), d, g("host"), c, "roots", "threadteam", sc, g("param"), "call", g("width"), g("load"), g("tt_us"), "", g("tt_p90"), "", "openmp", g("omp_us"), g("ratio"), g("target"), g("verdict"), O["roots"], LA["roots"] }' "$tmp/roots.csv"
    # The C++ front against the C API (scripts/bench-cpp.sh's CSV).
    [ -s "$tmp/cpp.csv" ] && awk -F, -v OFS=, -v d="$date" -v c="$cpus" -v loads="$LOADS" '
        BEGIN { while ((getline x < loads) > 0) { split(x, f, " "); O[f[1]] = f[2]; LA[f[1]] = f[3] } }
        NR == 1 { for (i = 1; i <= NF; i++) C[$i] = i; next }
        function g(n) { return (n in C) ? $(C[n]) : "" }
        { print g("label"), d, g("host"), c, "cpp", "threadteam-c++", "cpp-" g("scenario"), g("param"), "call", "", "none", g("cpp_us"), "", g("cpp_p90_us"), "", "threadteam-c", g("c_us"), g("ratio"), g("target"), g("verdict"), O["cpp"], LA["cpp"] }' "$tmp/cpp.csv"
    # The CG application, per phase (ms -> us).
    [ -s "$tmp/cg.csv" ] && awk -F, -v OFS=, -v dt="$date" -v loads="$LOADS" '
        BEGIN { while ((getline x < loads) > 0) { split(x, f, " "); O[f[1]] = f[2]; LA[f[1]] = f[3] } }
        NR == 1 || $1 == "label" { for (i = 1; i <= NF; i++) C[$i] = i; next }
        function g(n) { return (n in C) ? $(C[n]) : "" }
        { k = g("phase"); m = g("mode"); lab = g("label"); h = g("host"); c = g("cpus"); n = g("n")
          MED[m, k] = g("median_ms") * 1000; P10[m, k] = g("p10_ms") * 1000; P90[m, k] = g("p90_ms") * 1000
          if (!(k in seen)) { seen[k] = 1; ord[++no] = k } }
        END { for (j = 1; j <= no; j++) { k = ord[j]
            r = (MED["omp", k] > 0) ? sprintf("%.3f", MED["tt", k] / MED["omp", k]) : ""
            print lab, dt, h, c, "cg", "threadteam", "cg", "n=" n " " k, "solve", "", "none", sprintf("%.1f", MED["tt", k]), sprintf("%.1f", P10["tt", k]), sprintf("%.1f", P90["tt", k]), "", "openmp", sprintf("%.1f", MED["omp", k]), r, "", "", O["cg"], LA["cg"] } }' "$tmp/cg.csv"
    true
} >"$results"
if [ -n "$out" ] && [ -s "$tmp/summary.csv" ]; then
    mkdir -p "$(dirname "$out")"
    [ -s "$out" ] || echo "$HEADER" > "$out"
    cat "$tmp/summary.csv" >> "$out"
    echo "bench: $(wc -l < "$tmp/summary.csv") rows appended to $out" >&2
fi

# ---------------------------------------------------------------------------
# The plot, and one verdict line.
# ---------------------------------------------------------------------------
if sh "$here/bench-report.sh" --plot "$results" --png "$png" >"$tmp/plot.log" 2>&1; then
    plotmsg="plot $png"
else
    plotmsg="no plot ($(grep -v '^ *$' "$tmp/plot.log" | tail -n 1))"
    png=
fi
cp "$CONSOLE" "$txt"
echo
echo "bench: measured in $(fmt_time $((end - start))); results $results (every figure, with the load it was measured under), $plotmsg, console output $txt"

maxo=$(awk '{ if ($2 != "" && $2 + 0 > m) m = $2 + 0 } END { print m + 0 }' "$LOADS")
verdict=$(awk -F, -v maxo="$maxo" -v cpus="$cpus" '
    NR == 1 { for (i = 1; i <= NF; i++) C[$i] = i; next }
    $(C["verdict"]) == "PASS" { met++ }
    $(C["verdict"]) == "MISS" { miss++; n = $(C["scenario"]) ($(C["param"]) != "" ? " " $(C["param"]) : "")
        if (miss <= 3) names = names (names == "" ? "" : "; ") n; else if (miss == 4) names = names "; ..." }
    END {
        tot = met + miss
        busy = (maxo > 10) ? sprintf("; the machine was busy (other processes used up to %d %% of the %d CPUs): not comparable, rerun on a quiet machine", maxo, cpus) : sprintf("; other processes used at most %d %% of the CPUs", maxo)
        if (tot == 0) { printf "NO TARGETS MEASURED%s", busy; exit 3 }
        if (miss == 0) printf "TARGETS MET: all %d%s", tot, busy
        else { printf "TARGETS MISSED: %d of %d (%s)%s", miss, tot, names, busy; exit 1 }
    }' "$results") && vrc=0 || vrc=$?
echo "make bench: $verdict"
echo "make bench: $verdict" >>"$txt"
[ "$vrc" -eq 0 ] && exit 0
[ "$vrc" -eq 1 ] && exit 1
exit 2
