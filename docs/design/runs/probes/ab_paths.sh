#!/bin/bash
# docs/design/runs/2026-12-07-scope-cost.md: raw OpenMP against the threadteam side of
# several bench_paths binaries, alternating processes.
# ab_paths.sh ROUNDS SCEN N BIN...: per round, the omp side of BASE (default
# build/bench/bench_paths), then the tt side of each BIN, 7 reps each; prints each BIN's
# median per-call time and the median of its per-round tt/omp ratios.
R=$1; S=$2; N=$3; shift 3
out=${TMPDIR:-/tmp}/ab_paths.$$
for ((r = 0; r < R; r++)); do
  line=$(${BASE:-build/bench/bench_paths} --system omp --scenario "$S" --n "$N" --reps 7 | tail -1 | awk '{print $3}')
  for b in "$@"; do line="$line $("$b" --system tt --scenario "$S" --n "$N" --reps 7 | tail -1 | awk '{print $3}')"; done
  echo "$line"
done > "$out"
python3 - "$out" "$@" <<'PY'
import statistics as s, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
print('omp median', s.median(r[0] for r in rows))
for i, b in enumerate(sys.argv[2:]):
    print(f'{b}: median {s.median(r[i + 1] for r in rows):.3f} '
          f'ratio-median x{s.median(r[i + 1] / r[0] for r in rows):.3f}')
PY
rm -f "$out"
