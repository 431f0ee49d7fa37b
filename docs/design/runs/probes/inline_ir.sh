#!/bin/sh
# (docs/design/runs/2026-12-07-inline-cost.md) PROG: the built inline_cost.c; modes: 0 fork,
# 1 plain calls, 2 reborrow + tt_for_ranges, 4 undeferred omp task pair, 5 reborrow + team scope
# of one section; ISO (2nd argument) 1: an isolated pool. Units: one fork of 2 jobs, one call.
# Ir per unit inside the measured function only: (Ir(D=14) - Ir(D=10)) / (units(14) - units(10))
# fork/plain/task: 2^(D+1) - 1 inner nodes (two trees of depth D, i.e. 2^(D+1)-2 calls); ranges: 2^D calls
m=$1; iso=${2:-0}; B=${3:-}
case $m in 0) f=run_fork;; 1) f=run_plain;; 2) f=run_ranges;; 4) f=run_task;; 5) f=run_scope;; esac
ir() { valgrind --tool=callgrind --toggle-collect=$f --callgrind-out-file=${TMPDIR:-/tmp}/cg.$$ ${PROG:-./inline_cost} $m $1 $iso >/dev/null 2>${TMPDIR:-/tmp}/vg.$$; grep -o 'Collected : [0-9]*' ${TMPDIR:-/tmp}/vg.$$ | awk '{print $3}'; rm -f ${TMPDIR:-/tmp}/cg.$$ ${TMPDIR:-/tmp}/vg.$$; }
a=$(ir 10); b=$(ir 14)
if [ $m = 2 ] || [ $m = 5 ]; then u=$(( (1<<14) - (1<<10) )); else u=$(( (1<<15) - (1<<11) )); fi
echo "mode $m iso $iso: Ir per entry $(( (b - a) / u )) (D=10: $a, D=14: $b)"
