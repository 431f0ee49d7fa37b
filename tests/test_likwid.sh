#!/bin/sh
# test_likwid.sh -- threadteam under LIKWID's likwid-pin (Debian package
# likwid). Checks that likwid-pin sets LIKWID_PIN in the environment of the
# program it starts (the variable on which threadteam leaves affinity alone),
# and that the CG application (examples/cg: tt_fork, tt_for_ranges, team
# scopes between its own OpenMP regions) gives the same answer as its
# all-OpenMP twin when likwid-pin pins its threads. SKIP (77) without
# likwid-pin or with fewer than 2 CPUs.
if test "${TT_UNDER_ASAN:-0}" = 1; then
    echo "test_likwid.sh: skipped under AddressSanitizer (likwid-pin preloads its library ahead of ASan's runtime)"
    exit 77
fi
if test "${TT_UNDER_TSAN:-0}" = 1; then
    echo "$(basename "$0"): skipped under ThreadSanitizer (the application's own OpenMP regions run on uninstrumented libgomp)"
    exit 77
fi
pin=$(command -v likwid-pin 2>/dev/null)
if test -z "$pin"; then
    echo "test_likwid: likwid-pin not found (apt-get install likwid): skipped"
    exit 77
fi
cpus=$(nproc 2>/dev/null || echo 1)
if test "$cpus" -lt 2; then
    echo "test_likwid: $cpus CPU: skipped"
    exit 77
fi
prog=${top_builddir:-..}/examples/cg
if test ! -x "$prog"; then
    echo "test_likwid: $prog not built" >&2
    exit 1
fi
# likwid-pin runs its command through a shell of its own, so the probe is
# a script file rather than `sh -c '...'`.
probe=$(mktemp "${TMPDIR:-/tmp}/tt-likwid.XXXXXX")
trap 'rm -f "$probe"' EXIT
printf '#!/bin/sh\nif [ -n "${LIKWID_PIN+x}" ]; then echo "set:$LIKWID_PIN"; else echo unset; fi\n' >"$probe"
chmod +x "$probe"
got=$("$pin" -q -c 0,1 "$probe" 2>/dev/null)
echo "test_likwid: likwid-pin -c 0,1: LIKWID_PIN ${got:-not reported}"
case $got in
set:*) ;;
*)
    echo "test_likwid: FAIL: likwid-pin did not set LIKWID_PIN: threadteam would pin under it" >&2
    exit 1
    ;;
esac
OMP_NUM_THREADS=2
export OMP_NUM_THREADS
timeout 120 "$pin" -q -c 0,1 "$prog" --check --n 64
