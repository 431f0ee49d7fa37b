/*
 * internal.h -- private structures of threadteam. Nothing here is installed.
 *
 * An umbrella over the headers of the layers below, for the files at the
 * top of the library (exec.c, team_scope.c and the files cut from it,
 * team.c, reduce.c, cost.c). Every other file of lib/ includes just the
 * headers of its own layer and those below, so that no include and no
 * call runs up: each file calls only into layers below its own, and each
 * header includes only headers below it.
 *
 * The headers, from the bottom up (prefixes, and the files that define
 * what they declare):
 *   base.h        config, includes, TT__ASSERT / TT__INVARIANT, the cache
 *                 line, the monotonic clock, allocation with failure
 *                 injection, thread starts           (alloc.c, gomp_guard.c)
 *   futex.h       the futex system call (only the files that make it)
 *   waits.h       tt__wait_*, events, joins: spin / yield / futex waits
 *                 shaped like libgomp's, and how a root's region ends
 *                                                                 (wait.c)
 *   pool_attr.h   struct tt_pool_attr and its defaults              (attr.c)
 *   backend.h     the backend table and its getter tt__backend_get
 *                                        (backend_omp.c, backend_serial.c)
 *   cpu.h         the process's CPUs and thread limits, room for more
 *                 threads, pinning                                   (cpu.c)
 *   crew.h        tt__crew_*, tt__member_*: the threads that run a pool's
 *                 tasks, the private crew on a host thread (crew.c) and
 *                 the caller's own team for one root (host_team.c)
 *   ledger.h      tt__ledger_*: test support, compiled out without
 *                 --enable-ledger                                 (ledger.c)
 *   pool_slots.h  struct tt_pool, tt__pool_*, tt__gang_*: pools,
 *                 membership, lifecycle, slots, the block partition;
 *                 types and declarations only             (pool.c, gang.c)
 *   share.h       running a share's user code: the first layer above the
 *                 backends, whose inline functions call tt__backend_get
 *   tokens.h      tt__exec_*, tt__token_*: the token, its protocol (mint,
 *                 check, claim, consume, leave, reborrow, limit, finish),
 *                 the ranges' split and chunks, cost kinds (token.c, cost.c)
 *   place.h       tt__place_*: where an entry runs, the members of a token,
 *                 slots taken, inline holds and lending         (place.c)
 *   entry.h       tt__entry_*: the entry frame every entry runs through
 *                                                                (entry.c)
 *   scope.h       tt__ctl_*: team scopes' control blocks, sections,
 *                 splits, entries on team tokens, persistent teams
 *                                                  (team_scope.c, team.c)
 * Pooled entries and the task engine (exec.c) and reductions (reduce.c)
 * sit on top and declare nothing of their own here. test_hooks.h declares
 * the hooks the tests reach the library through.
 */
#ifndef TT_INTERNAL_H
#define TT_INTERNAL_H

#include "base.h"
#include "waits.h"
#include "pool_attr.h"
#include "backend.h"
#include "crew.h"
#include "cpu.h"
#include "ledger.h"
#include "pool_slots.h"
#include "share.h"
#include "tokens.h"
#include "place.h"
#include "entry.h"
#include "scope.h"
#include "test_hooks.h"

#endif /* TT_INTERNAL_H */
