/* einval.h -- TT_EINVAL that says which argument was wrong.
 *
 * Every TT_EINVAL the library returns goes through TT__EINVAL(what), where
 * `what` names the failed check (most often the C expression of the test on
 * the caller's argument, "!body", "grain == 0"). With TT_DEBUG set in the
 * environment (to anything but 0 or empty), each such return writes one line
 * to stderr, "threadteam: FUNCTION: TT_EINVAL: WHAT", so that a caller can
 * tell which of a call's arguments was refused; without it nothing is
 * written and the cost is one cached load. The library keeps no per-thread
 * error state: the line is the detail. Bottom layer: it calls nothing of
 * the library (strerror.c). */
#ifndef TT_EINVAL_H
#define TT_EINVAL_H

/* Returns TT_EINVAL; writes the line above under TT_DEBUG. */
__attribute__((cold)) int tt__einval(const char *func, const char *what);

#define TT__EINVAL(what) tt__einval(__func__, (what))

#endif
