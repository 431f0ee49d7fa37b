#!/bin/sh
# quiet-step.sh LABEL LOG CMD [ARGS...] -- run one stage of a `make` target
# with its output in a log file, and print one line for it:
#
#   ==> LABEL: ok (12 s)
#   ==> LABEL: FAILED (exit status 2, 12 s); log: LOG
#
# after which the last TT_LOG_TAIL (default 40) lines of the log follow.
# The exit status is CMD's. With V=1 in the environment (make V=1) the
# output goes to the console instead, as without this script.
label=$1
log=$2
shift 2
if test "${V:-0}" = 1; then
    echo "==> $label"
    "$@"
    exit $?
fi
mkdir -p "$(dirname "$log")"
t0=$(date +%s)
"$@" >"$log" 2>&1
rc=$?
t=$(($(date +%s) - t0))
if test "$rc" -eq 0; then
    echo "==> $label: ok ($t s)"
else
    n=${TT_LOG_TAIL:-40}
    echo "==> $label: FAILED (exit status $rc, $t s); log: $log"
    echo "---- last $n lines of $log ----"
    tail -n "$n" "$log"
    echo "---- end of $log ----"
fi
exit "$rc"
