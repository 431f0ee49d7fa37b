/*
 * team.c -- team scopes and persistent teams (tt_team_scope, tt_team).
 *
 * Tokens with team authority (TT__F_TEAM) are minted only here, so until a
 * team hands one out, the entries below are never reached.
 */
#include "internal.h"

int tt__team_fork(tt__exec *x, unsigned jobs, tt_job_fn job, void *arg)
{
    (void)x; (void)jobs; (void)job; (void)arg;
    return TT_ENOTSUP;
}

int tt__team_for_ranges(tt__exec *x, size_t len, size_t grain, tt_range_fn body, void *arg)
{
    (void)x; (void)len; (void)grain; (void)body; (void)arg;
    return TT_ENOTSUP;
}

int tt__team_broadcast(tt__exec *x, tt_bcast_fn fn, void *arg)
{
    (void)x; (void)fn; (void)arg;
    return TT_ENOTSUP;
}

void tt__team_token_end(tt__exec *x) { (void)x; }
