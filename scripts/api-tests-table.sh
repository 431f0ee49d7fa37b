#!/bin/sh
# api-tests-table.sh: print, for every function the public header declares,
# the test programs and scripts that call it (a Markdown table for
# docs/design/testing.md, "Which tests cover which function").
#
#   sh scripts/api-tests-table.sh > /tmp/table.md
#
# A function is counted as tested by a file of tests/ that names it followed
# by "(" (a call or a function pointer taken in a call). The header is
# include/threadteam.h.in; the C++ front (include/threadteam.hpp), when
# present, counts as a caller only where tests/ call through it.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
hdr=$root/include/threadteam.h.in
# (A declaration may start with TT_NODISCARD.)
funcs=$(sed -n 's/^\(TT_NODISCARD \)\{0,1\}[a-z_][a-z_0-9 *]*[ *]\(tt_[a-z_0-9]*\)(.*/\2/p' "$hdr" |
    sort -u)
echo "| function | tests that call it |"
echo "| --- | --- |"
for f in $funcs; do
    files=$(cd "$root/tests" && grep -l "\\b$f(" ./*.c ./*.cpp ./*.sh ./*.h 2>/dev/null |
        sed 's#^\./##' | tr '\n' ' ' | sed 's/ *$//; s/ /, /g')
    echo "| \`$f\` | ${files:-(none)} |"
done
