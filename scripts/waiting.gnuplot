# waiting.gnuplot -- per-section overhead against team width, threadteam,
# libgomp and LLVM libomp; one panel per load. Drawn by scripts/bench-report.sh,
# which extracts the data from docs/design/waiting-data/<host>.csv:
#
#   gnuplot -e "datadir='DIR'; out='docs/design/waiting.png'; loads='none 2:10'; \
#               work='20us'; title='...'; cpus=2" scripts/waiting.gnuplot
#
# DIR/<system>-<load>.dat holds "width overhead_us_per_section p10_call p90_call"
# rows of the `sections` scenario at the given work per section.

if (!exists("datadir")) datadir = "."
if (!exists("out")) out = "waiting.png"
if (!exists("loads")) loads = "none"
if (!exists("work")) work = "20us"
if (!exists("title")) title = "threadteam wait benchmarks"
if (!exists("cpus")) cpus = 0

n = words(loads)
set terminal pngcairo size (n > 1 ? 1200 : 700), 480 font "sans,10"
set output out
set multiplot layout 1, n title title
set logscale y
set grid ytics mytics xtics
set key top left
set xlabel "team width (threads)"
set ylabel sprintf("overhead per section (us), %s of work", work)
set xtics 1
set style line 1 lc rgb "#1b7837" lw 2 pt 7 ps 1.3
set style line 2 lc rgb "#d6604d" lw 2 pt 5 ps 1.3
set style line 3 lc rgb "#4393c3" lw 2 pt 9 ps 1.5
do for [i = 1:n] {
    ld = word(loads, i)
    set title (ld eq "none" ? "quiet" : sprintf("under load %s (K processes : busy %%)", ld))
    if (cpus > 0) { set arrow 1 from first cpus, graph 0 to first cpus, graph 1 nohead dt 2 lc rgb "#888888" }
    plot datadir."/threadteam-".ld.".dat" using 1:2 with linespoints ls 1 title "threadteam", \
         datadir."/libgomp-".ld.".dat" using 1:2 with linespoints ls 2 title "libgomp (gcc)", \
         datadir."/libomp-".ld.".dat" using 1:2 with linespoints ls 3 title "LLVM libomp (clang)"
    unset arrow 1
}
unset multiplot
