/*
 * exec_root.c -- the quick root: the everyday root of a plain thread (a
 * fork of one job per slot, or a plain split of tt_for_ranges), run on the
 * caller's own team with one line of the caller's memory for the region's
 * threads to read.
 *
 * Why a path of its own. A root's region threads run on other cores, and
 * every line of the caller's memory they read is a line the caller must
 * take back, with a cross-core round trip, before its next write to it
 * completes; a locked instruction waits for every such write before it. On
 * the general path (exec.c) a member read the region record, the role
 * array, the task array and two lines of the entry record, all on the
 * caller's stack, and the caller's next root then wrote the same stack
 * lines (its token, its placement, its frame) between the compare-and-swaps
 * of its claim, its slots and its consume: with a member, the caller's own
 * steps before and after the region took about 2200 cycles, against about
 * 700 when the same root ran without one (a team capped at one thread), and
 * the member spent about 1100 cycles more than raw OpenMP's before its job
 * started (docs/design/runs/2026-12-07-root-cost.md). Raw `omp parallel`
 * hands its threads one data block.
 *
 * So the quick root writes everything a region thread needs into one
 * cache-line-aligned line (quick_line) just before the region, the backend
 * hands it to the region's threads by value in the runtime's own data block
 * (region_line, which builds that block below a gap of the caller's stack),
 * and the region threads read that and nothing else of the caller's: task k is
 * job k or range k on region thread k (the identity map that plan_tasks
 * makes for a full gang), a job's child token is minted from the line, and
 * its members are named by a constant table instead of the caller's gang
 * array. The end order's handshake keeps its own line (tt__root_end).
 *
 * The contracts are the general path's, step for step: the entry frame
 * (claim, the pool's entry count, consume, leave: entry.c), slots taken
 * all or nothing without jumping a queue, the region crew for membership,
 * the region's end order, a short team's tasks run on the threads it got,
 * the ledger's counts. What it does not handle it does not start: a thread
 * that holds or leads anything of the pool, a tt_external running on the
 * pool, a token that is not a plain root, a pool wider than one slot word,
 * slots taken or queued for, a root that would run on the private crew.
 * Then it returns false having taken nothing, and the general path runs.
 */
#include "exec.h"

#include <string.h>

/* Member k of a quick root is region thread k, and its job's child holds
 * member k: gang[k] == k. Pools of at most TT__QUICK_MAX (64) slots take
 * this path (entry.h). */
#define ID4(b) (b), (b) + 1, (b) + 2, (b) + 3
#define ID16(b) ID4(b), ID4((b) + 4), ID4((b) + 8), ID4((b) + 12)
static const uint32_t identity_gang[TT__QUICK_MAX] = {ID16(0), ID16(16), ID16(32), ID16(48)};

enum { QUICK_ISO = 1u << 0 };

/* Everything a region thread reads of the caller, in one line. */
typedef struct quick_line {
    union {
        tt_job_fn job;
        tt_range_fn range;
    } fn;
    void *arg;
    tt_pool *pool;
    tt__crew *crew;
    union {
        _Atomic int *fail; /* fork: the failure word, written on failure only */
        size_t len;        /* ranges */
    } u;
    void *ledger;
    tt__root_end *fin;
    uint32_t pool_gen;
    uint8_t n; /* <= TT__QUICK_MAX */
    uint8_t kind;
    uint8_t flags; /* QUICK_ISO */
    uint8_t end;   /* enum tt__region_end */
} TT__ALIGNED quick_line;

_Static_assert(sizeof(quick_line) == TT__CACHELINE, "quick_line: one line");
_Static_assert(sizeof(quick_line) == sizeof(tt__line), "quick_line: the backend's line");

typedef struct quick_part {
    const quick_line *l;
    unsigned k;
} quick_part;

/* Job j's child: budget 1, members gang[off, off + cnt) (cnt 0: none). */
static void quick_job(const quick_line *l, unsigned j, uint32_t cnt)
{
    tt_exec child;
    tt__token_spec s = {.pool = l->pool, .pool_gen = l->pool_gen, .budget = 1,
                        .flags = TT__F_FORK_CHILD | TT__F_IN_TASK, .ledger = l->ledger,
                        .owner = pthread_self(), .gang = cnt ? identity_gang : NULL,
                        .gang_off = cnt ? j : 0, .gang_cnt = cnt, .fork_fail = l->u.fail};
    tt__job_run(&child, &s, l->fn.job, l->arg, j);
}

static void quick_range(const quick_line *l, unsigned j)
{
    size_t begin, end;
    tt__range_of(l->u.len, l->n, j, &begin, &end);
    tt__ledger_enter(l->ledger);
    l->fn.range(l->arg, begin, end);
    tt__ledger_leave(l->ledger);
}

/* Participant k's task: job k or range k. A fork's first jobs start
 * without a look at the failure word: each is the first job of its task,
 * which the general path starts as soon as its member does. */
static void quick_task(void *ctx)
{
    const quick_part *p = ctx;
    if (p->l->kind == TT__QUICK_FORK)
        quick_job(p->l, p->k, 1);
    else
        quick_range(p->l, p->k);
}

/* A team that came out short (exec.c, short_participate): thread k runs
 * tasks k, k + got, ..., one after the other, each a share of its own and
 * without members; a fork's job after a failure does not start. */
typedef struct quick_short_part {
    const quick_line *l;
    unsigned k, got;
} quick_short_part;

static void quick_short(void *ctx)
{
    const quick_short_part *p = ctx;
    const quick_line *l = p->l;
    tt__share_seq seq;
    tt__share_seq_begin(&seq, l->pool, p->k + p->got < l->n ? 2 : 1);
    for (unsigned j = p->k; j < l->n; j += p->got) {
        if (j != p->k) {
            if (l->kind == TT__QUICK_FORK && atomic_load_explicit(l->u.fail, memory_order_acquire))
                break;
            tt__share_seq_next(&seq);
        }
        if (l->kind == TT__QUICK_FORK)
            quick_job(l, j, 0);
        else
            quick_range(l, j);
    }
}

/* Region thread k: the line arrives by value (backend region_line), in
 * the thread's own copy. */
static void quick_member(const tt__line *line, unsigned k, unsigned got)
{
    quick_line own;
    memcpy(&own, line, sizeof own);
    const quick_line *l = &own;
    bool iso = l->flags & QUICK_ISO;
    if (got < l->n) {
        if (k >= l->n)
            return;
        quick_short_part sp = {l, k, got};
        tt__region_participate_line(l->crew, k, iso, quick_short, &sp);
        return;
    }
    if (k >= l->n)
        return; /* not needed: leave at once */
    quick_part part = {l, k};
    tt__region_participate_line(l->crew, k, iso, quick_task, &part);
    tt__root_end_wait(l->fin, l->end, l->crew, k);
}

/* Whether this thread's last pooled root (fork or ranges) took the quick
 * path (a test hook reads it; one store per root, to a line of this
 * thread's own). */
static TT__TLS_HOT bool last_root_quick;

int tt__test_last_root_quick(void) { return last_root_quick; }

static bool root_quick(tt__exec *x, const tt__quick *q, int *rc);

bool tt__exec_root_quick(tt__exec *x, const tt__quick *q, int *rc)
{
    bool quick = root_quick(x, q, rc);
    last_root_quick = quick;
    return quick;
}

static bool root_quick(tt__exec *x, const tt__quick *q, int *rc)
{
    tt_pool *p = x->pool;
    tt__entry_quick h;
    int took = tt__entry_quick_begin(&h, x, q->n, true, rc);
    if (took <= 0)
        return took < 0;
    tt__crew *crew = h.crew;
    tt__root_end fin;
    quick_line l = {.arg = q->arg, .pool = p, .crew = crew, .ledger = x->ledger, .fin = &fin,
                    .pool_gen = x->pool_gen, .n = (uint8_t)q->n, .kind = q->kind,
                    .flags = p->attr.isolate_shares ? QUICK_ISO : 0};
    if (q->kind == TT__QUICK_FORK) {
        l.fn.job = q->fn.job;
        l.u.fail = q->fail;
    } else {
        l.fn.range = q->fn.range;
        l.u.len = q->len;
    }
    uint64_t watch;
    l.end = tt__root_end_begin(&fin, p, crew, q->n, &watch);
    tt__line line;
    memcpy(&line, &l, sizeof line);
    tt__backend_get()->region_line(p->width, quick_member, &line);
    tt__root_end_after(crew, watch);
    tt__entry_quick_end(&h, true);
    *rc = TT_OK;
    return true;
}
