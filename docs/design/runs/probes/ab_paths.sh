#!/bin/bash
# docs/design/runs/2026-12-07-scope-cost.md: several bench_paths builds side by side, each
# build's raw OpenMP side against its own threadteam side, alternating processes.
# ab_paths.sh ROUNDS SCEN N BIN...: per round, for each BIN, its omp side and its tt side (the
# order alternating by round), 7 reps each; prints each BIN's median per-call tt time and the
# median of its per-round tt/omp ratios.
# Each build's ratio uses its own raw side: a row's raw side moves by a few per cent from one
# build to another (where the code lands), so a ratio against another build's raw side
# measures that too. (The first version of this script took every BIN's ratio against one
# raw side, BASE's; the figures of scope-cost.md's first A/B tables were taken that way.)
R=$1; S=$2; N=$3; shift 3
out=${TMPDIR:-/tmp}/ab_paths.$$
for ((r = 0; r < R; r++)); do
  line=
  for b in "$@"; do
    if ((r % 2 == 0)); then order="omp tt"; else order="tt omp"; fi
    for sys in $order; do
      v=$("$b" --system "$sys" --scenario "$S" --n "$N" --reps 7 | tail -1 | awk '{print $3}')
      if [ "$sys" = omp ]; then o=$v; else t=$v; fi
    done
    line="$line $o $t"
  done
  echo "$line"
done > "$out"
python3 - "$out" "$@" <<'PY'
import statistics as s, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
for i, b in enumerate(sys.argv[2:]):
    o = [r[2 * i] for r in rows]
    t = [r[2 * i + 1] for r in rows]
    print(f'{b}: omp median {s.median(o):.3f}, tt median {s.median(t):.3f}, '
          f'ratio-median x{s.median(b_ / a for a, b_ in zip(o, t)):.3f}')
PY
rm -f "$out"
