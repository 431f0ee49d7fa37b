#!/bin/sh
# test_nodiscard.sh -- TT_NODISCARD (threadteam.h): a program that drops
# the code of an entry, of tt_exec_init, tt_pool_create or a team's lead
# gets a compiler warning for each such call (so -Werror makes it an
# error), a program that uses every code compiles clean under -Werror, and
# defining TT_NO_WARN_UNUSED before the include silences the warnings.
# Compiles only (-c: GCC reports a dropped code after parsing, so not
# under -fsyntax-only), with the compiler the library was built with
# (TT_CC) and, when configure found one, clang (OMP_CLANG). Exit 77
# (SKIP) for a compiler that is neither GCC nor clang.
top_builddir=${top_builddir:-..}
inc=$top_builddir/include
test -f "$inc/threadteam.h" || { echo "test_nodiscard: $inc/threadteam.h not built"; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0

# Every marked function, called once with its code dropped. One call a
# line, so that each warning names its line.
marked="tt_pool_create tt_exec_init tt_fork tt_for_ranges tt_for_ranges_dynamic tt_broadcast
tt_external tt_reduce_ranges tt_reduce_sum_d tt_reduce_minloc_d tt_reduce_maxloc_d tt_team_scope
tt_team_scope_with tt_scope_run tt_scope_run_with tt_scope_split tt_scope_fork tt_pool_into_team
tt_team_lead tt_team_try_lead"
cat > "$tmp/calls.h" <<'EOC'
#include <threadteam.h>
static void job(void *a, unsigned i, tt_exec *c) { (void)a; (void)i; (void)c; }
static void range(void *a, size_t b, size_t e) { (void)a; (void)b; (void)e; }
static void bc(void *a, unsigned i) { (void)a; (void)i; }
static void ext(void *a, unsigned w) { (void)a; (void)w; }
static void body(void *a, size_t b, size_t e, void *acc) { (void)a; (void)b; (void)e; (void)acc; }
static void comb(void *a, void *i, const void *f) { (void)a; (void)i; (void)f; }
static double sum(void *a, size_t b, size_t e) { (void)a; (void)b; (void)e; return 0; }
static void sfn(void *a, tt_scope *s) { (void)a; (void)s; }
static void sec(void *a, tt_section *s) { (void)a; (void)s; }
static void part(void *a, unsigned p, tt_scope *s) { (void)a; (void)p; (void)s; }
#define CALLS(U)                                                                \
    U(tt_pool_create(&pool, NULL))                                             \
    U(tt_exec_init(ex, pool, 2))                                               \
    U(tt_fork(ex, 2, job, NULL))                                               \
    U(tt_for_ranges(ex, 10, 1, range, NULL))                                   \
    U(tt_for_ranges_dynamic(ex, 10, 1, range, NULL))                           \
    U(tt_broadcast(ex, bc, NULL))                                              \
    U(tt_external(ex, ext, NULL))                                              \
    U(tt_reduce_ranges(ex, 10, 1, 8, NULL, body, comb, NULL, &d))              \
    U(tt_reduce_sum_d(ex, 10, 1, sum, NULL, &d))                               \
    U(tt_reduce_minloc_d(ex, &d, 1, 1, &d, &z))                                \
    U(tt_reduce_maxloc_d(ex, &d, 1, 1, &d, &z))                                \
    U(tt_team_scope(ex, sfn, NULL))                                            \
    U(tt_team_scope_with(ex, NULL, sfn, NULL))                                 \
    U(tt_scope_run(scope, sec, NULL))                                          \
    U(tt_scope_run_with(scope, 1, sec, NULL))                                  \
    U(tt_scope_split(scope, 2, part, NULL))                                    \
    U(tt_scope_fork(scope, 2, job, NULL))                                      \
    U(tt_pool_into_team(pool, 2, &team))                                       \
    U(tt_team_lead(team, 2, ex))                                               \
    U(tt_team_try_lead(team, 2, ex))
EOC
# The dropped codes: one statement a line (the macro is expanded by hand so
# that every warning points at a line of its own).
{
    echo '#include "calls.h"'
    echo 'void dropped(tt_exec *ex, tt_scope *scope);'
    echo 'void dropped(tt_exec *ex, tt_scope *scope) {'
    echo '    tt_pool *pool = NULL; tt_team *team = NULL; double d = 0; size_t z = 0;'
    sed -n 's/^ *U(\(.*\)) *\\\{0,1\}$/    \1;/p' "$tmp/calls.h"
    echo '    (void)pool; (void)team; (void)d; (void)z; }'
} > "$tmp/dropped.c"
# The same calls with every code used.
cat > "$tmp/used.c" <<'EOC'
#include "calls.h"
int used(tt_exec *ex, tt_scope *scope);
int used(tt_exec *ex, tt_scope *scope)
{
    tt_pool *pool = NULL;
    tt_team *team = NULL;
    double d = 0;
    size_t z = 0;
    int rc = 0;
#define USE(call) rc |= (call);
    CALLS(USE)
    /* Not marked: a barrier's or a failure call's code may be dropped. */
    tt_section_barrier(NULL);
    tt_fork_fail(ex, 1);
    tt_scope_fail(scope, 1);
    return rc;
}
EOC
ncalls=$(grep -c '^    tt_[a-z_]*(' "$tmp/dropped.c")
test "$ncalls" -eq "$(echo $marked | wc -w)" || {
    echo "test_nodiscard: $ncalls calls in the snippet, $(echo $marked | wc -w) marked functions"; exit 1; }

compilers=${TT_CC:-cc}
test -n "${OMP_CLANG:-}" && compilers="$compilers
$OMP_CLANG"
ran=0
while IFS= read -r cc; do
    test -n "$cc" || continue
    if ! printf '#if !defined(__GNUC__) && !defined(__clang__)\n#error\n#endif\n' |
            $cc -x c -fsyntax-only - 2>/dev/null; then
        echo "test_nodiscard: $cc is neither GCC nor clang: skipped"
        continue
    fi
    ran=1
    f="-std=c11 -Wall -Wextra -I$inc -I$tmp -c -o /dev/null"
    # 1. Each dropped code warns, on its own line.
    $cc $f "$tmp/dropped.c" 2> "$tmp/warn.txt"
    for fn in $marked; do
        line=$(grep -n "^    $fn(" "$tmp/dropped.c" | cut -d: -f1)
        if ! grep -E "dropped\.c:$line:[0-9]+: (warning|error):.*(unused[- ]result|nodiscard|warn_unused_result)" "$tmp/warn.txt" >/dev/null; then
            echo "FAIL ($cc): dropping the code of $fn (line $line) gave no warning"
            fail=1
        fi
    done
    # 2. -Werror: the dropped codes do not compile.
    if $cc $f -Werror "$tmp/dropped.c" 2>/dev/null; then
        echo "FAIL ($cc): dropped codes compiled under -Werror"
        fail=1
    fi
    # 3. Every code used: clean under -Werror.
    if ! $cc $f -Werror "$tmp/used.c" 2> "$tmp/used.txt"; then
        echo "FAIL ($cc): the snippet that uses every code did not compile clean:"
        sed 's/^/    /' "$tmp/used.txt"
        fail=1
    fi
    # 4. TT_NO_WARN_UNUSED silences them.
    if ! $cc $f -Werror -DTT_NO_WARN_UNUSED "$tmp/dropped.c" 2> "$tmp/off.txt"; then
        echo "FAIL ($cc): TT_NO_WARN_UNUSED left warnings:"
        sed 's/^/    /' "$tmp/off.txt"
        fail=1
    fi
    echo "test_nodiscard: $cc: $(echo $marked | wc -w) functions checked"
done <<EOL
$compilers
EOL
test $ran = 1 || exit 77
exit $fail
