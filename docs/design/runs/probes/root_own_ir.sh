#!/bin/sh
# (docs/design/runs/2026-12-07-inline-cost.md) FILE: the caller thread's part of
# valgrind --tool=callgrind --separate-threads=yes --toggle-collect=one_tt (or one_omp) root_cost 0|1 2000
# own.sh FILE ROOTS: Ir per root outside the spin waits and the /proc samples
callgrind_annotate --auto=no --inclusive=no --threshold=100 "$1" 2>/dev/null | awk -v n="$2" '
/^ *[0-9,]+ +\(/ && !/PROGRAM TOTALS/ { v=$1; gsub(/,/,"",v); line=$0
  spin = (line ~ /0x000000000001f930|0x000000000001f6d0|tt__wait_spin_ne|tt__cpu_relax/)
  proc = (line ~ /strstr|vfscanf|loadavg|open64|read\.c|close\.c|sscanf|strtol|rawmemchr|_IO_|read_small|tt__process_threads|asynccancel|machine_oversubscribed|strops|genops|isoc99/)
  if (spin) s += v; else if (proc) p += v; else o += v }
END { printf "own %.0f Ir/root, spin %.0f, /proc sampling %.0f\n", o/n, s/n, p/n }'
