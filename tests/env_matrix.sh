#!/bin/sh
# env_matrix.sh -- the core contracts (tests/env_probe.c) under each OpenMP
# environment an HPC job script may set, one line each. Run by make check
# in parallel builds.
#
# Every setting must keep: the budget at every depth (counted in user code),
# one-thread regions inside shares, tt_external's exact width, concurrent
# broadcasts, participants placed where the application's threads are, and a
# private crew over the process's CPUs. What each setting changes otherwise
# is in docs/design/placement.md ("The OpenMP environment").
probe=./env_probe
test -x "$probe" || { echo "env_matrix: $probe not built" >&2; exit 99; }
ncpu=$(nproc 2>/dev/null || echo 2)
fail=0
pass=0
run() {
    # run NAME ARGS -- ENV...
    name=$1; shift
    args=$1; shift
    if out=$(env "$@" timeout 120 "$probe" $args 2>&1); then
        pass=$((pass + 1))
        printf 'env_matrix: %-44s %s\n' "$name" "$(printf '%s\n' "$out" | tail -n 1)"
    else
        fail=$((fail + 1))
        printf 'env_matrix: %-44s FAILED\n%s\n' "$name" "$out"
    fi
}
run "(no OMP_* setting)"                   --exact-threads
run "OMP_NUM_THREADS=3"                    --exact-threads OMP_NUM_THREADS=3
run "OMP_PLACES=cores OMP_PROC_BIND=true"  --exact-threads OMP_PLACES=cores OMP_PROC_BIND=true
run "OMP_PLACES=threads OMP_PROC_BIND=close" "" OMP_PLACES=threads OMP_PROC_BIND=close
run "OMP_PROC_BIND=spread"                 "" OMP_PROC_BIND=spread
run "OMP_PROC_BIND=master"                 "" OMP_PROC_BIND=master
run "OMP_PROC_BIND=spread,close"           "" OMP_PROC_BIND=spread,close
run "OMP_NESTED=true"                      "" OMP_NESTED=true
run "OMP_MAX_ACTIVE_LEVELS=2"              "" OMP_MAX_ACTIVE_LEVELS=2
run "OMP_NUM_THREADS=2,2"                  "" OMP_NUM_THREADS=2,2
run "OMP_NUM_THREADS=2,3"                  "" OMP_NUM_THREADS=2,3
run "OMP_NESTED=true OMP_NUM_THREADS=2"    "" OMP_NESTED=true OMP_NUM_THREADS=2
run "OMP_MAX_ACTIVE_LEVELS=2 OMP_NUM_THREADS=2" "" OMP_MAX_ACTIVE_LEVELS=2 OMP_NUM_THREADS=2
run "OMP_MAX_ACTIVE_LEVELS=0"              "" OMP_MAX_ACTIVE_LEVELS=0
run "OMP_THREAD_LIMIT=$ncpu"               "" OMP_THREAD_LIMIT=$ncpu
run "OMP_DYNAMIC=true"                     "" OMP_DYNAMIC=true
run "OMP_WAIT_POLICY=passive"              --exact-threads OMP_WAIT_POLICY=passive
run "GOMP_SPINCOUNT=0"                     --exact-threads GOMP_SPINCOUNT=0
# LLVM libomp's own spin setting (ignored by libgomp, as GOMP_SPINCOUNT by libomp).
run "KMP_BLOCKTIME=0"                      --exact-threads KMP_BLOCKTIME=0
# LLVM libomp's own binding setting (OMP_PLACES/OMP_PROC_BIND's counterpart).
run "KMP_AFFINITY=compact"                 "" KMP_AFFINITY=compact
run "KMP_AFFINITY=granularity=fine,scatter" "" KMP_AFFINITY=granularity=fine,scatter
run "OMP_NUM_THREADS=4 (oversubscribed)"   --exact-threads OMP_NUM_THREADS=4
echo "env_matrix: $pass passed, $fail failed"
test "$fail" -eq 0
