#!/bin/sh
# errors_from_header.sh HEADER -- one line per public function of the
# header: its name and every code its Errors/Refusal text names, with the
# codes of the functions it refers to ("those of tt_fork", "as
# tt_scope_split") added. The fault test (test_faults.sh) accepts exactly
# these codes from each function; a code that a function returns and its
# Errors line does not list fails it.
#
# A doc comment is read as one line: each line's leading stars go and runs
# of blanks become one, so that a reference broken across lines ("those
# of" at the end of one, "tt_fork" on the next) is still found.
hdr=${1:?usage: errors_from_header.sh threadteam.h}
awk '
/\/\*\*/ { doc = ""; indoc = 1 }
indoc { line = $0; sub(/^[ \t]*\*+/, "", line); doc = doc " " line; gsub(/[ \t]+/, " ", doc) }
/\*\// { indoc = 0; next }
/^(TT_NODISCARD )?[a-z][a-z_ *]*[ *]tt_[a-z_]+\(/ {
    name = $0; sub(/\(.*/, "", name); sub(/.*[ *]/, "", name)
    text = doc; doc = ""
    p = match(text, /(Errors|Refusal)/)
    if (!p) next
    text = substr(text, p)
    codes = ""
    t = text
    while (match(t, /TT_[A-Z_]+/)) {
        c = substr(t, RSTART, RLENGTH)
        if (c != "TT_STATUS_MAP" && index(" " codes " ", " " c " ") == 0) codes = codes " " c
        t = substr(t, RSTART + RLENGTH)
    }
    refs = ""
    t = text
    while (match(t, /(those of|as) tt_[a-z_]+/)) {
        r = substr(t, RSTART, RLENGTH); sub(/.* /, "", r)
        refs = refs " " r
        t = substr(t, RSTART + RLENGTH)
    }
    own[name] = codes; ref[name] = refs; order[++n] = name
}
END {
    for (i = 1; i <= n; i++) {
        f = order[i]; all = own[f]; todo = ref[f]; seen = " " f " "
        while (todo != "") {
            split(todo, q, " "); todo = ""
            for (j in q) {
                g = q[j]
                if (g == "" || index(seen, " " g " ")) continue
                seen = seen g " "
                m = split(own[g], cs, " ")
                for (k = 1; k <= m; k++)
                    if (index(" " all " ", " " cs[k] " ") == 0) all = all " " cs[k]
                todo = todo " " ref[g]
            }
        }
        sub(/^ /, "", all)
        print f " " all
    }
}' "$hdr"
