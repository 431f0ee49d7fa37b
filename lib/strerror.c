/* strerror.c -- a sentence and a name for every return code. */
#include "internal.h"

const char *tt_strerror(int code)
{
    switch (code) {
    case TT_OK: return "Success.";
    case TT_EINVAL: return "Invalid argument: a NULL pointer, a zero budget, width, grain or job count, an uninitialised token, or a limit of zero.";
    case TT_ENOMEM: return "Out of memory; nothing was changed.";
    case TT_EAGAIN: return "The operating system refused to start a thread; nothing is left running.";
    case TT_ESHORTTEAM: return "OpenMP formed a team of fewer threads than the pool asked for (OMP_THREAD_LIMIT or a dynamic adjustment); the pool was not built.";
    case TT_ERANGE: return "The width is larger than the thread limit of the process, the kernel or OpenMP.";
    case TT_ECONSUMED: return "The token was already consumed by an entry or ended by tt_exec_finish; nothing ran.";
    case TT_ECOPY: return "The token is a byte copy of a real token (assignment or memcpy); tokens are used only where they were minted; nothing ran.";
    case TT_EBUSY: return "Busy: a reborrowed child of this token is inside an entry, or the pool still has entries running or a team owns it; nothing was changed.";
    case TT_EFORKED: return "The process was forked after this pool was built; its threads do not exist here. Destroy the pool and build a new one.";
    case TT_ENOTSUP: return "Not supported by this build or platform.";
    case TT_EWRONGTHREAD: return "A token handed to a task was used on another thread than that task's; nothing ran.";
    case TT_EDESTROYED: return "The token's pool was destroyed (or a destroy is under way); nothing ran.";
    case TT_REFUSED_FORK_CHILD: return "Refused: broadcast on a token derived from tt_fork, whose siblings may hold the members a broadcast needs; nothing was consumed.";
    case TT_REFUSED_CALLER_IN_POOL: return "Refused: broadcast from a member of the token's own pool, which may be a member the broadcast needs; nothing was consumed.";
    case TT_REFUSED_UNAVAILABLE: return "Refused: the team's members could not be reserved within the acquire timeout; nothing was consumed.";
    case TT_REFUSED_BUSY: return "Refused: another leader holds the team; nothing was consumed.";
    default: return "Unknown threadteam return code.";
    }
}

const char *tt_status_name(int code)
{
    switch (code) {
#define TT__NAME(c) case c: return #c;
    TT__NAME(TT_OK)
    TT__NAME(TT_EINVAL)
    TT__NAME(TT_ENOMEM)
    TT__NAME(TT_EAGAIN)
    TT__NAME(TT_ESHORTTEAM)
    TT__NAME(TT_ERANGE)
    TT__NAME(TT_ECONSUMED)
    TT__NAME(TT_ECOPY)
    TT__NAME(TT_EBUSY)
    TT__NAME(TT_EFORKED)
    TT__NAME(TT_ENOTSUP)
    TT__NAME(TT_EWRONGTHREAD)
    TT__NAME(TT_EDESTROYED)
    TT__NAME(TT_REFUSED_FORK_CHILD)
    TT__NAME(TT_REFUSED_CALLER_IN_POOL)
    TT__NAME(TT_REFUSED_UNAVAILABLE)
    TT__NAME(TT_REFUSED_BUSY)
#undef TT__NAME
    default: return "TT_UNKNOWN";
    }
}
