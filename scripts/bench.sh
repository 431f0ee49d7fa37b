#!/bin/sh
# bench.sh -- the wait benchmarks of threadteam side by side with raw OpenMP.
#
# Runs bench/wait_scenarios (threadteam), wait_omp_gomp (libgomp) and
# wait_omp_llvm (LLVM libomp) alternating, each in a process of its own, for
# every scenario and round (the order of the three rotates), pools their
# repetitions, and prints one table with medians, p10 / p90 and the ratios
# threadteam / libgomp and threadteam / libomp, then the targets of the
# benchmark. First of all it runs bench/bench_ranges (tt_for_ranges against
# `omp parallel for`, its own small table). `make bench` runs the short pass
# (about two minutes on 2 CPUs), `make bench-full` (BENCH_FULL=1) the long one.
#
# usage: scripts/bench.sh [--short|--full] [--label L] [--widths LIST] [--load K:P]
#                         [--rounds N] [--reps N] [--scenarios LIST] [--out CSV]
#                         [--bindir DIR] [--no-over] [--keep-raw FILE] [-- DRIVER ARGS]
#        scripts/bench.sh --table CSV [--label L]     the table of summary rows
#        scripts/bench.sh --targets CSV [--label L]   the targets, PASS / MISS
#        scripts/bench.sh --aggregate RAW --label L   summary rows of a driver's --csv rows
#
#   --short        the short pass (default): about two minutes on 2 CPUs
#   --full         the long pass: more rounds and repetitions
#   --label L      label of the rows (default main-<short git rev>, or local)
#   --widths LIST  team widths (default: all CPUs of the affinity set and three
#                  quarters of them, plus the oversubscribed 2 x CPUs for
#                  `sections` unless --no-over)
#   --load K:P     K processes busy P % of every 10 ms during the run (each
#                  driver process starts and ends its own)
#   --out CSV      append the summary rows to CSV (with a header when new)
#   --bindir DIR   where the programs are (default: $BENCH_BINDIR, then bench/
#                  and omp/ of $BUILD_DIR (set by make), of ./build, of the
#                  current directory and of the source tree)
#   --no-ranges    skip bench_ranges
#   --no-cg        skip the CG application (scripts/bench-cg.sh, examples/cg:
#                  threadteam kernels in an OpenMP code vs all OpenMP)
# Environment: BENCH_FULL=1 (as --full), BUILD_DIR, BENCH_BINDIR, BENCH_HOST.
#   -- ARGS        passed to every driver (e.g. -- --work 20 --gaps 1000)
#
# Summary CSV columns: label,date,host,cpus,system,scenario,param,metric,width,
# load,calls,reps,median_us,p10_us,p90_us,overhead_us_per_section,join_sleeps,
# barrier_sleeps,member_parks,preemptions (wait counters: means per call).
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
    printf "OpenMP has no pool to acquire: its acquire rows are all its held team.\n\n"
    line("scenario", "param", "metric", "width", "load", "threadteam", "libgomp", "libomp", "tt/gomp", "tt/omp")
    printf "| -------- | ---------- | ---------------- | ----: | ----- | --------------------------------------- | -------------------------- | -------------------------- | ------: | ------: |\n"
    for (r = 1; r <= nrow; r++) {
        split(ROW[r], k, SUBSEP)
        sc = k[1]; pa = k[2]; me = k[3]; w = k[4]; ld = k[5]
        op = ompparam(sc, pa)
        t = med("threadteam", sc, pa, me, w, ld)
        g = med("libgomp", sc, op, me, w, ld)
        o = med("libomp", sc, op, me, w, ld)
        line(sc, pa, me, w, ld, cell("threadteam", sc, pa, me, w, ld), cell("libgomp", sc, op, me, w, ld), cell("libomp", sc, op, me, w, ld), ratio(t, g), ratio(t, o))
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
    printf "%-4s %-44s %s\n", (ok ? "PASS" : "MISS"), name, detail
    if (ok) npass++; else nmiss++
}
END {
    load_rows()
    all = (cpus < 2) ? 2 : cpus; over = 2 * cpus
    printf "Targets (label %s, width %s = all CPUs, medians, load none unless said):\n", label, all
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
                verdict(t <= g / 2, "oversubscribed sections " pa " w" w ": ovh <= libgomp/2", sprintf("tt %.3f us, libgomp %.3f us (x%.2f)", t, g, (g > 0 ? t / g : 0)))
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
keep_raw=
while [ $# -gt 0 ]; do
    case $1 in
    --table) mode=table; csv_in=$2; shift ;;
    --targets) mode=targets; csv_in=$2; shift ;;
    --aggregate) mode=aggregate; csv_in=$2; shift ;;
    --short) pass=short ;;
    --full) pass=full ;;
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

case $pass in
short) rounds=${rounds:-10}; reps=${reps:-15} ;;
full) rounds=${rounds:-20}; reps=${reps:-25} ;;
esac

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
TT=$(find_prog wait_scenarios)
GOMP=$(find_prog wait_omp_gomp)
LLVM=$(find_prog wait_omp_llvm)

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

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tt-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM HUP
raw=$tmp/raw.csv

echo "bench.sh: label $label, host $host, $cpus CPUs, load $load, $pass pass: $rounds rounds x $reps reps" >&2
echo "bench.sh: threadteam $TT | libgomp $GOMP | libomp $LLVM" >&2
# How busy the CPUs are right now (other users' processes), over one second.
busy_now() {
    a=$(sed -n 's/^cpu  *//p' /proc/stat 2>/dev/null) || return 0
    sleep 1
    b=$(sed -n 's/^cpu  *//p' /proc/stat 2>/dev/null) || return 0
    echo "$a $b" | awk '{ n = NF / 2; for (i = 1; i <= n; i++) { d = $(i + n) - $i; t += d; if (i == 4 || i == 5) idle += d }
        if (t > 0) printf "%.2f", 1 - idle / t; else print "0" }'
}
busy=$(busy_now)
echo "bench.sh: CPUs busy before the run: ${busy:-?} (load average $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null))" >&2
if [ -n "$busy" ] && awk -v b="$busy" 'BEGIN { exit !(b > 0.10) }'; then
    echo "bench.sh: WARNING: other processes keep the CPUs ${busy} busy: the figures include their load;" \
        "rerun on a quiet host for numbers to commit" >&2
fi

start=$(date +%s)
if [ "$ranges" = 1 ] && [ "$load" = none ]; then
    if RANGES=$(find_prog bench_ranges 2>/dev/null); then
        if [ "$pass" = full ]; then rr="--rounds 5 --reps 21"; else rr="--rounds 3 --reps 9"; fi
        echo "bench.sh: bench_ranges $rr" >&2
        # shellcheck disable=SC2086
        "$RANGES" $rr ${widths:+--widths "$widths"} --csv "$tmp/ranges.csv" --label "$label" ||
            echo "bench.sh: bench_ranges failed" >&2
        echo
    else
        echo "bench.sh: bench_ranges not built, skipped" >&2
    fi
fi
r=0
while [ $r -lt "$rounds" ]; do
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
            printf 'bench.sh: round %d/%d %-8s %-10s widths %s\n' "$r" "$rounds" "$s" "$sys" "$ws" >&2
            "$prog" --scenario "$s" --widths "$ws" --reps "$reps" --load "$load" \
                --label "$label" --csv "$raw" --quiet "$@" ||
                echo "bench.sh: $prog --scenario $s failed (status $?); its rows are missing" >&2
        done
    done
done
end=$(date +%s)
echo "bench.sh: measured in $((end - start)) s" >&2

[ -n "$keep_raw" ] && cp "$raw" "$keep_raw"
{ [ -s "$tmp/ranges.csv" ] && cat "$tmp/ranges.csv"; aggregate "$raw" "$label" "$host" "$cpus"; } > "$tmp/summary.csv"
if [ -n "$out" ]; then
    mkdir -p "$(dirname "$out")"
    [ -s "$out" ] || echo "$HEADER" > "$out"
    cat "$tmp/summary.csv" >> "$out"
    echo "bench.sh: $(wc -l < "$tmp/summary.csv") rows appended to $out" >&2
fi
{ echo "$HEADER"; cat "$tmp/summary.csv"; } > "$tmp/s.csv"
echo
print_table "$tmp/s.csv" "$label"
echo
print_targets "$tmp/s.csv" "$label"

# The everyday paths of an OpenMP code (bench/bench_paths.c): a token per
# call and tt_for_ranges, the application's regions beside an idle pool and
# alternating with pooled calls, OpenBLAS through tt_external, each against
# the raw OpenMP a user would write instead, alternating processes, with
# their targets (scripts/bench-paths.sh).
if [ "$load" = none ] && paths=$(find_prog bench_paths 2>/dev/null); then
    if [ "$pass" = full ]; then prounds=11; else prounds=5; fi
    echo
    sh "$here/bench-paths.sh" "$paths" "$prounds" ${out:+"$(dirname "$out")/paths-$host.csv"} ||
        echo "bench.sh: bench-paths.sh failed" >&2
fi

# The CG application (examples/cg): threadteam kernels inside an OpenMP code
# against its all-OpenMP twin, end to end and phase by phase, in alternating
# processes (scripts/bench-cg.sh; its own table).
if [ "$cgbench" = 1 ] && [ "$load" = none ]; then
    cgprog=
    for d in ${bd:+"$bd/examples"} "$top/build/examples" "$PWD/examples"; do
        if [ -x "$d/cg" ]; then cgprog=$d/cg; break; fi
    done
    if [ -n "$cgprog" ]; then
        if [ "$pass" = full ]; then cgr="--rounds 10 --reps 7"; else cgr="--rounds 4 --reps 5"; fi
        echo
        # shellcheck disable=SC2086
        sh "$here/bench-cg.sh" --cg "$cgprog" $cgr --label "$label" ||
            echo "bench.sh: bench-cg.sh failed" >&2
    else
        echo "bench.sh: examples/cg not built, CG section skipped" >&2
    fi
fi
