#!/bin/sh
# test_cpp_compile_fail.sh -- what threadteam.hpp refuses at compile time.
# Each cxx_snippets/fail_*.cpp shows one misuse (copying a token, a
# consuming entry on an lvalue token, a reborrow from a temporary) on a line
# marked "// misuse": the compiler must refuse it, with its first error on
# that line (so that a snippet cannot pass by failing for another reason).
# cxx_snippets/ok_*.cpp must compile with the same command, so that the
# script cannot pass vacuously (a wrong include path, a missing compiler).
# TT_CXX (the C++ compiler configure found, empty when none) and
# TT_CXX_INCLUDES come from tests/Makefile.am.
if test -z "$TT_CXX"; then
    echo "test_cpp_compile_fail: skipped: ${TT_CXX_SKIP_REASON:-no C++17 compiler}"
    exit 77
fi
dir=${srcdir:-.}/cxx_snippets
status=0
n=0
compile() {
    # shellcheck disable=SC2086 # TT_CXX and TT_CXX_INCLUDES are word lists
    $TT_CXX -std=c++17 -fsyntax-only $TT_CXX_INCLUDES "$1" 2>&1
}
for f in "$dir"/ok_*.cpp; do
    if ! out=$(compile "$f"); then
        printf '%s\n' "$out" >&2
        echo "test_cpp_compile_fail: FAIL: the control $f does not compile" >&2
        status=1
    else
        echo "ok: $(basename "$f") compiles"
    fi
done
for f in "$dir"/fail_*.cpp; do
    n=$((n + 1))
    line=$(grep -n '// misuse' "$f" | head -n 1 | cut -d: -f1)
    if test -z "$line"; then
        echo "test_cpp_compile_fail: $f has no line marked // misuse" >&2
        status=1
        continue
    fi
    if out=$(compile "$f"); then
        echo "test_cpp_compile_fail: FAIL: $f compiled; it must not" >&2
        status=1
        continue
    fi
    first=$(printf '%s\n' "$out" | grep -m 1 'error' )
    case "$first" in
    *"$(basename "$f"):$line:"*)
        echo "ok: $(basename "$f") refused at line $line: ${first#*error: }" ;;
    *)
        printf '%s\n' "$out" >&2
        echo "test_cpp_compile_fail: FAIL: $f refused, but not at its misuse (line $line)" >&2
        status=1 ;;
    esac
done
echo "test_cpp_compile_fail: $n snippets refused as expected, compiler $TT_CXX"
exit $status
