#!/bin/bash
# docs/design/runs/2026-12-07-root-cost.md: alternate commands, print median and p90 of the numbers they print
# med.sh ROUNDS "label:cmd" ... : alternate the commands ROUNDS times, print median and p90 of their printed numbers
R=$1; shift
declare -A vals
for ((r=0;r<R;r++)); do for spec in "$@"; do l=${spec%%:*}; c=${spec#*:}; v=$(eval "$c" 2>/dev/null | grep -o '[0-9]*$' | tail -1); vals[$l]+="$v "; done; done
for spec in "$@"; do l=${spec%%:*}; echo "$l $(echo ${vals[$l]} | tr ' ' '\n' | sort -n | awk '{a[NR]=$1} END {printf "median %d p90 %d (n=%d)", a[int((NR+1)/2)], a[int(NR*0.9+0.5)], NR}')"; done
