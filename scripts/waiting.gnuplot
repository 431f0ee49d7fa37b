# waiting.gnuplot -- the plot of one `make bench` run (scripts/bench-report.sh
# --plot prepares the data and calls this):
#
#   gnuplot -e "datadir='DIR'; out='results.png'; title='...'" scripts/waiting.gnuplot
#
# DIR/paths.dat:    "index label ratio target" -- each everyday path's
#                   threadteam / raw OpenMP (and the CG application's), with
#                   its target ("?" when it has none)
# DIR/sections.dat: "index label threadteam libgomp libomp" -- overhead per
#                   section in us of the `sections` scenario, per work and
#                   width ("?" where a system was not measured)
# Points only: no line joins two measurements, so nothing is drawn where
# nothing was measured. Lower is better in both panels.

if (!exists("datadir")) datadir = "."
if (!exists("out")) out = "results.png"
if (!exists("title")) title = "threadteam: make bench"
if (!exists("have_paths")) have_paths = 1
if (!exists("have_sections")) have_sections = 1

set datafile missing "?"
set terminal pngcairo size 1300, 1050 font "sans,10"
set output out
# Two panels one above the other: the paths panel has 30 and more labels.
set multiplot layout 2, 1 title title font "sans,11"

set style line 1 lc rgb "#1b7837" pt 7 ps 1.6
set style line 2 lc rgb "#d6604d" pt 5 ps 1.4
set style line 3 lc rgb "#4393c3" pt 9 ps 1.6
set style line 4 lc rgb "#444444" pt 2 ps 1.4
set grid ytics
set key below horizontal
set bmargin 11

# Panel 1: ratios to raw OpenMP.
set title "Everyday paths: threadteam time / raw OpenMP time (lower is better; 1 = the same)"
set ylabel "threadteam / raw OpenMP"
unset xlabel
set xtics rotate by -60 left font "sans,9"
set yrange [0:*]
set offsets 0.6, 0.6, 0, 0
set arrow 1 from graph 0, first 1 to graph 1, first 1 nohead dt 2 lc rgb "#888888"
if (have_paths) {
    plot datadir."/paths.dat" using 1:3:xtic(2) with points ls 1 title "threadteam / raw OpenMP", \
         ''                   using 1:4 with points ls 4 title "target (at most)"
} else {
    set yrange [0:2]
    set label 1 "not measured in this run" at graph 0.5, graph 0.5 center
    plot NaN notitle
    unset label 1
}
unset arrow 1

# Panel 2: sections overhead against libgomp and LLVM libomp.
set title "Team sections: overhead per section (log scale; lower is better)"
set ylabel "overhead per section (us)"
set xlabel "work per section, team width (wN)"
set logscale y
set yrange [*:*]
if (have_sections) {
    plot datadir."/sections.dat" using ($1 - 0.15):3:xtic(2) with points ls 1 title "threadteam", \
         ''                      using 1:4 with points ls 2 title "libgomp (gcc)", \
         ''                      using ($1 + 0.15):5 with points ls 3 title "LLVM libomp (clang)"
} else {
    set yrange [0.1:10]
    set label 1 "not measured in this run" at graph 0.5, graph 0.5 center
    plot NaN notitle
}
unset multiplot
