/* strerror.c -- a sentence and a name for every return code, both made
 * from the one table in threadteam.h (TT_STATUS_MAP), the one report the
 * library makes of a broken invariant (TT__INVARIANT in base.h), and the
 * TT_DEBUG line of a TT_EINVAL (TT__EINVAL in base.h). */
#include "base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *tt_strerror(int code)
{
    switch (code) {
#define TT__SENTENCE(name, value, sentence) case name: return sentence;
    TT_STATUS_MAP(TT__SENTENCE)
#undef TT__SENTENCE
    default: return "Unknown threadteam return code.";
    }
}

const char *tt_status_name(int code)
{
    switch (code) {
#define TT__NAME(name, value, sentence) case name: return #name;
    TT_STATUS_MAP(TT__NAME)
#undef TT__NAME
    default: return "TT_UNKNOWN";
    }
}

/* A broken invariant is a bug of the library (or memory it owns written by
 * someone else): no code can be returned that the caller could act on, and
 * running on would lose slots or hang far from the cause. One write, so
 * that the line arrives whole when other threads write too. */
void tt__invariant_failed(const char *file, int line, const char *what)
{
    fprintf(stderr, "threadteam: invariant broken at %s:%d: %s\n", file, line, what);
    abort();
}

/* TT_DEBUG, read once: 0 not yet, 1 off, 2 on. A race between two first
 * readers reads the same environment twice, harmlessly. */
static _Atomic int debug_state;

static bool debug_on(void)
{
    int s = atomic_load_explicit(&debug_state, memory_order_relaxed);
    if (s == 0) {
        const char *v = getenv("TT_DEBUG");
        s = (v && *v && strcmp(v, "0") != 0) ? 2 : 1;
        atomic_store_explicit(&debug_state, s, memory_order_relaxed);
    }
    return s == 2;
}

int tt__einval(const char *func, const char *what)
{
    if (debug_on())
        fprintf(stderr, "threadteam: %s: TT_EINVAL: %s\n", func, what);
    return TT_EINVAL;
}
