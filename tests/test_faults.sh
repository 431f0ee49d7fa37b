#!/bin/sh
# test_faults.sh -- resource failures come back as codes (issue 19).
#
# fault_entries runs every entry kind on a default and a dedicated pool
# (and a second thread's first roots). Here it runs
#  1. under fault_shim.so failing the Nth pthread_create (EAGAIN), for
#     every N the program reaches;
#  2. under fault_shim.so failing the Nth allocation, for every N up to
#     FAULT_ALLOC_MAX (make check: a sample of at most 60 N spread over all
#     reached calls; FAULT_FULL=1, as check-stress sets it: every N);
#  3. as user nobody under a real RLIMIT_NPROC of 1 to 12 (setpriv; root
#     only, else that part is skipped).
# Each run must exit 0: every code TT_OK or on its function's Errors line
# (the list comes from the header by errors_from_header.sh), every result
# right, no thread left; libgomp's exit (status 1), a crash or a hang
# (timeout) fails. Exit 77 (SKIP) when the programs were not built.
# The premise is libgomp's: gomp_guard.c retries libgomp's own thread
# starts and allocations, so that injected failures reach the library as
# codes. LLVM's libomp ends the process itself on such a failure ("OMP:
# Error #34: System unable to allocate necessary resources for OMP thread",
# "OMP: Error #101: Out of heap memory", abort), and the guard leaves it
# alone (README, "Compilers and runtimes"). TT_APP_RUNTIME=libomp: the
# application's runtime is libomp although the build's is libgomp (make
# check-libomp-app preloads it).
if test "${TT_OMP_RUNTIME:-}" = libomp || test "${TT_APP_RUNTIME:-}" = libomp; then
  echo "test_faults: skipped: the OpenMP runtime is LLVM libomp, which aborts on a failed thread start or allocation (no guard for it)"
  exit 77
fi
srcdir=${srcdir:-.}
top_builddir=${top_builddir:-..}
prog=./fault_entries
shim=$PWD/.libs/fault_shim.so
test -x "$prog" && test -f "$shim" || { echo "fault_entries or fault_shim.so not built"; exit 77; }
# The sanitizers' runtimes interpose pthread_create and the allocator
# themselves and must come first in the link order, so a preloaded shim
# counts nothing there (the counting runs never finish): the faults are
# injected in the default, serial and ledger builds.
if test "${TT_UNDER_ASAN:-0}" = 1 || test "${TT_UNDER_TSAN:-0}" = 1; then
    echo "test_faults: SKIP under a sanitizer (its runtime interposes what the shim fails)"
    exit 77
fi
errs=$PWD/faults-errors.txt
sh "$srcdir/errors_from_header.sh" "$top_builddir/include/threadteam.h" > "$errs" || exit 1
export FAULT_ERRORS="$errs"
limit=${FAULT_TIMEOUT:-60}
fails=0 runs=0

run() { # what, then env assignments for the run
  what=$1; shift
  runs=$((runs + 1))
  out=`env "$@" timeout -k 5 "$limit" "$prog" 2>&1`; rc=$?
  if test $rc -ne 0; then
    fails=$((fails + 1))
    case $rc in 124|137) why="hang (timeout ${limit} s)";; 1) why="exit 1 (libgomp?)";;
      2) why="a code off its Errors line or a wrong result";; 3) why="a thread left";;
      *) why="status $rc";; esac
    echo "FAIL: $what: $why"
    echo "$out" | tail -5 | sed 's/^/    /'
  fi
}

count() { # kind: the calls reached with nothing failed
  env FAULT_SHIM_REPORT=1 "FAULT_SHIM_$1_AT=1000000000" LD_PRELOAD="$shim" "$prog" 2>&1 >/dev/null |
    sed -n "s/^fault_shim: threads \([0-9]*\) allocs \([0-9]*\).*/\1 \2/p"
}

set -- `count THREAD`
nthreads=$1
set -- `count ALLOC`
nallocs=$2
echo "fault_entries reaches $nthreads pthread_create and $nallocs allocation calls"
test -n "$nthreads" && test -n "$nallocs" || { echo "FAIL: the counting runs did not finish"; exit 1; }

start=`date +%s`
n=1
while test $n -le $((nthreads + 2)); do
  run "pthread_create #$n fails" LD_PRELOAD="$shim" FAULT_SHIM_THREAD_AT=$n
  n=$((n + 1))
done
echo "pthread_create: $((nthreads + 2)) runs, `expr $(date +%s) - $start` s"

start=`date +%s`
step=1
if test -z "$FAULT_FULL" && test "$nallocs" -gt 60; then step=$((nallocs / 60)); fi
n=1 k=0
while test $n -le $((nallocs + 2)); do
  run "allocation #$n fails" LD_PRELOAD="$shim" FAULT_SHIM_ALLOC_AT=$n
  n=$((n + step)); k=$((k + 1))
done
echo "allocations: $k runs (every ${step}th), `expr $(date +%s) - $start` s"

# A dedicated pool alone (issue 39): the window opens once its attributes
# are set (a thread name that could not be copied is TT_ENOMEM from
# tt_pool_attr_set_thread_name, and the pool would not be dedicated), and
# when tt_pool_destroy returned, its members must be gone: at once, with
# no pause of the runtime and no wait (exit 3 otherwise).
start=`date +%s`
k=0
for kind in THREAD ALLOC; do
  set -- `env FAULT_DEDICATED_ONLY=1 FAULT_WIDTH=2 FAULT_SHIM_REPORT=1 "FAULT_SHIM_${kind}_AT=1000000000" \
    LD_PRELOAD="$shim" "$prog" 2>&1 >/dev/null | sed -n "s/^fault_shim: threads \([0-9]*\) allocs \([0-9]*\).*/\1 \2/p"`
  if test $kind = THREAD; then reach=$1; else reach=$2; fi
  test -n "$reach" || { echo "FAIL: the dedicated pool's counting run did not finish"; fails=$((fails + 1)); continue; }
  n=1
  while test $n -le $((reach + 2)); do
    run "dedicated pool alone, $kind #$n fails" LD_PRELOAD="$shim" FAULT_DEDICATED_ONLY=1 FAULT_WIDTH=2 \
      "FAULT_SHIM_${kind}_AT=$n"
    n=$((n + 1)); k=$((k + 1))
  done
done
echo "a dedicated pool alone: $k runs, `expr $(date +%s) - $start` s"

grp=nogroup
getent group nogroup >/dev/null 2>&1 || grp=nobody
if test "`id -u`" = 0 && command -v setpriv >/dev/null 2>&1 && command -v prlimit >/dev/null 2>&1 &&
   getent passwd nobody >/dev/null 2>&1 && getent group $grp >/dev/null 2>&1; then
  tmp=`mktemp -d` && cp "$prog" "$errs" "$tmp/" && chmod -R a+rx "$tmp"
  # width 4; width 4 beside an idle application thread; width 2 (a
  # dedicated pool's tt_external callee nests width - 1 threads more).
  for v in "FAULT_WIDTH=4" "FAULT_WIDTH=4 FAULT_IDLE=1" "FAULT_WIDTH=2 FAULT_IDLE=1"; do
    for l in 1 2 3 4 5 6 7 8 10 12; do
      runs=$((runs + 1))
      out=`cd "$tmp" && env FAULT_ERRORS="$tmp/faults-errors.txt" $v timeout -k 5 "$limit" \
        setpriv --reuid=nobody --regid=$grp --clear-groups prlimit --nproc=$l:$l ./fault_entries 2>&1`
      rc=$?
      if test $rc -ne 0; then
        fails=$((fails + 1)); echo "FAIL: RLIMIT_NPROC=$l as nobody, $v: status $rc"; echo "$out" | tail -5 | sed 's/^/    /'
      fi
    done
  done
  rm -rf "$tmp"
  echo "RLIMIT_NPROC 1..12 as nobody: done"
else
  echo "RLIMIT_NPROC as an unprivileged user: skipped (needs root, setpriv, prlimit, user nobody)"
fi

# 4. FAULT_VALGRIND=1 (check-stress): a sample of pthread_create N under
#    valgrind memcheck, with the threads-only shim: no error, no block
#    definitely lost.
if test -n "$FAULT_VALGRIND" && command -v valgrind >/dev/null 2>&1; then
  vshim=$PWD/.libs/fault_shim_threads.so
  for n in 1 2 3 5 8 12 17 24 30 36; do
    runs=$((runs + 1))
    out=`env LD_PRELOAD="$vshim" FAULT_SHIM_THREAD_AT=$n timeout -k 5 600 valgrind -q --leak-check=full \
      --errors-for-leak-kinds=definite --error-exitcode=9 --fair-sched=yes \
      --suppressions="$srcdir/valgrind.supp" "$prog" 2>&1`; rc=$?
    if test $rc -ne 0; then
      fails=$((fails + 1)); echo "FAIL: valgrind, pthread_create #$n fails: status $rc"; echo "$out" | tail -20 | sed 's/^/    /'
    fi
  done
  echo "valgrind: 10 runs done"
fi

echo "test_faults: $runs runs, $fails failed"
test $fails -eq 0
