/*
 * exec_entries.c -- the entries on pooled tokens: tt_fork (and its lean
 * inline path), tt_for_ranges (and its lean inline path),
 * tt_for_ranges_dynamic, tt_broadcast and tt_external. Each builds an entry
 * record and runs it through the task engine (exec.c, exec.h); a token with
 * team authority goes to the team's entries (scope_entries.c) instead.
 */
#include "exec.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* tt_fork                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct fork_entry {
    entry e;
    tt_job_fn job;
    void *arg;
    unsigned jobs, ntasks;
    uint32_t child_flags;
    void *team;
    /* The fork's failure word (tt_fork_fail through a child token): 0, or
     * the first code. Read before each job starts. */
    _Atomic int fail;
    /* With more jobs than tasks: the next job not yet handed out (task t
     * starts with job t). Each task takes the next one when it is free, so
     * a task stuck in a long job leaves the rest to the others (as
     * schedule(dynamic, 1)). */
    _Atomic unsigned next;
} fork_entry;

static bool fork_failed(fork_entry *f)
{
    return atomic_load_explicit(&f->fail, memory_order_acquire) != 0;
}

/* Task t's jobs: task t starts with job t (the caller's task with job 0,
 * as it runs the first share itself), then, with more jobs than tasks,
 * takes the lowest job not yet taken each time it is free (the one task
 * of an inline run takes them in order, without the counter). A failed
 * fork starts no more jobs (a job taken after the failure is dropped).
 * One loop, so that the job's frame is built in one place. */
static void fork_body(entry *e, const task *t)
{
    fork_entry *f = (fork_entry *)e;
    bool one = f->jobs <= f->ntasks, alone = f->ntasks == 1;
    tt__share_seq seq;
    tt__share_seq_begin(&seq, e->pool, one ? 1 : 2);
    for (unsigned i = t->index, first = 1; i < f->jobs && !fork_failed(f); first = 0) {
        if (!first)
            tt__share_seq_next(&seq);
        tt_exec child;
        tt__token_spec s = tt__exec_child_spec(e, t, f->child_flags, f->team);
        s.fork_fail = &f->fail;
        tt__job_run(&child, &s, f->job, f->arg, i);
        if (one)
            break;
        i = alone ? i + 1 : atomic_fetch_add_explicit(&f->next, 1, memory_order_relaxed);
    }
}

/* The lean inline fork (tt__entry_lean): the jobs one after the other on
 * the caller, each with a child of budget 1 that holds the token's members
 * (what run_inline and fork_body do for one task of share 1, without the
 * placement, the slot and the entry record, none of which such a token
 * needs). This is the path of fine recursion below a budget of 1: its cost
 * per call and its stack frame per level are what a straight port of
 * recursive task code pays (docs/design/runs/2026-12-07-inline-cost.md). */
typedef struct lean_fork {
    tt__exec *x;
    tt_job_fn job;
    void *arg;
    unsigned jobs;
    tt_exec *child;    /* fork_lean's, for every job */
    _Atomic int *fail; /* fork_lean's failure word (tt_fork_fail) */
} lean_fork;

/* Job i's child, minted in place: budget 1 and the token's members. A
 * task's token is this thread's (tt__exec_check), so its owner is. */
static inline tt__token_spec lean_child(const tt__exec *x, _Atomic int *fail)
{
    bool gang = x->gang && x->gang_cnt > 0;
    return (tt__token_spec){.pool = x->pool, .pool_gen = x->pool_gen, .budget = 1,
                            .flags = TT__F_FORK_CHILD | TT__F_IN_TASK, .ledger = x->ledger,
                            .owner = (x->flags & TT__F_IN_TASK) ? x->owner : pthread_self(),
                            .gang = gang ? x->gang : NULL, .gang_off = gang ? x->gang_off : 0,
                            .gang_cnt = gang ? x->gang_cnt : 0, .fork_fail = fail};
}

/* Whether a lean fork failed: its jobs and their children run on this
 * thread only (tt_fork_fail checks the child's owner), so a plain load. */
static inline bool lean_failed(_Atomic int *fail)
{
    return atomic_load_explicit(fail, memory_order_relaxed) != 0;
}

static inline void lean_job(const tt__exec *x, tt_job_fn job, void *arg, unsigned i,
                            tt_exec *child, _Atomic int *fail)
{
    tt__token_spec s = lean_child(x, fail);
    tt__job_run(child, &s, job, arg, i);
}

/* The jobs as one isolated share (tt__share_run), each after the first
 * with the ICVs the first started with (tt__share_seq, from the reading
 * the isolation took). */
static void lean_fork_isolated(void *ctx, const tt__icvs *start)
{
    const lean_fork *f = ctx;
    tt__share_seq seq;
    tt__share_seq_begin_from(&seq, f->x->pool, f->jobs, start);
    for (unsigned i = 0; i < f->jobs && !lean_failed(f->fail); i++) {
        if (i)
            tt__share_seq_next(&seq);
        lean_job(f->x, f->job, f->arg, i, f->child, f->fail);
    }
}

__attribute__((noinline)) static void lean_fork_run_isolated(tt__exec *x, unsigned jobs,
                                                             tt_job_fn job, void *arg,
                                                             tt_exec *child, _Atomic int *fail)
{
    lean_fork f = {.x = x, .job = job, .arg = arg, .jobs = jobs, .child = child, .fail = fail};
    tt__backend_get()->isolate_seq(lean_fork_isolated, &f);
}

/* The whole lean fork in one frame, as small as the child token it holds
 * (tt_fork's call to it is its last, a jump: a lean fork's recursion stacks
 * this frame, and the job's, once per level). On a pool whose shares are
 * OpenMP-free the jobs run with nothing around them. */
__attribute__((noinline)) static int fork_lean(tt__exec *x, unsigned jobs, tt_job_fn job,
                                               void *arg)
{
    unsigned saved;
    int rc = tt__entry_lean_begin(x, &saved);
    if (rc)
        return rc;
    tt_exec child; /* one for every job: a job's child ends with the job */
    _Atomic int fail = 0;
    if (tt__pool_isolates(x->pool)) {
        lean_fork_run_isolated(x, jobs, job, arg, &child, &fail);
    } else {
        for (unsigned i = 0; i < jobs && !lean_failed(&fail); i++)
            lean_job(x, job, arg, i, &child, &fail);
    }
    tt__entry_lean_end(x, saved);
    return atomic_load_explicit(&fail, memory_order_relaxed);
}

/* Every other fork: its frame (the entry record, the placement, the task
 * array) stays out of tt_fork's own, which a lean fork's recursion stacks
 * once per level. */
__attribute__((noinline)) static int fork_entered(tt__exec *x, unsigned jobs, tt_job_fn job,
                                                  void *arg)
{
    unsigned budget = x->budget;
    {
        /* One job per slot: the quick root, where it applies (exec_root.c;
         * n 0 asks for nothing). */
        _Atomic int fail;
        atomic_init(&fail, 0);
        tt__quick q = {.kind = TT__QUICK_FORK, .n = jobs == budget ? jobs : 0, .fn.job = job,
                       .arg = arg, .fail = &fail};
        int rc;
        if (tt__exec_root_quick(x, &q, &rc))
            return rc == TT_OK ? atomic_load_explicit(&fail, memory_order_acquire) : rc;
    }
    unsigned ntasks = jobs < budget ? jobs : budget;
    fork_entry f = {
        .e = {.body = fork_body, .pool = x->pool, .pool_gen = x->pool_gen, .ledger = x->ledger},
        .job = job, .arg = arg, .jobs = jobs, .ntasks = ntasks,
        .child_flags = TT__F_FORK_CHILD | TT__F_IN_TASK,
        .team = NULL,
    };
    atomic_init(&f.fail, 0);
    atomic_init(&f.next, ntasks); /* jobs 0..ntasks-1 are the tasks' first */
    int rc = tt__exec_enter_and_run(x, &f.e,
                                    (run_spec){.ntasks = ntasks, .budget = budget, .need = budget});
    if (rc == TT_OK)
        rc = atomic_load_explicit(&f.fail, memory_order_acquire);
    return rc;
}

int tt_fork(tt_exec *ex, unsigned jobs, tt_job_fn job, void *arg)
{
    tt__exec *x = ex ? tt__x(ex) : NULL;
    int rc = tt__exec_check(x);
    if (rc)
        return rc;
    if (!job)
        return TT__EINVAL("!job");
    if (jobs == 0)
        return TT__EINVAL("jobs == 0");
    if (x->flags & TT__F_TEAM)
        return tt__team_fork(x, jobs, job, arg);
    if (tt__entry_lean(x))
        return fork_lean(x, jobs, job, arg);
    return fork_entered(x, jobs, job, arg);
}

/* ------------------------------------------------------------------------ */
/* tt_for_ranges                                                             */
/* ------------------------------------------------------------------------ */

static void nothing_body(entry *e, const task *t)
{
    (void)e;
    (void)t;
}

/* The lean inline ranges (tt__entry_lean): the one range [0, len) on the
 * caller, as run_inline does for one task; none when len is 0. */
typedef struct lean_range {
    tt_range_fn body;
    void *arg;
    size_t len;
    void *ledger;
} lean_range;

static void lean_range_run(void *ctx)
{
    const lean_range *r = ctx;
    tt__ledger_enter(r->ledger);
    r->body(r->arg, 0, r->len);
    tt__ledger_leave(r->ledger);
}

static int ranges_lean(tt__exec *x, size_t len, tt_range_fn body, void *arg)
{
    unsigned saved;
    int rc = tt__entry_lean_begin(x, &saved);
    if (rc)
        return rc;
    if (len > 0) {
        lean_range r = {.body = body, .arg = arg, .len = len, .ledger = x->ledger};
        tt__share_run(x->pool, lean_range_run, &r);
    }
    tt__entry_lean_end(x, saved);
    return TT_OK;
}

static int ranges_entered(tt__exec *x, size_t len, size_t grain, tt_range_fn body, void *arg);

int tt_for_ranges(tt_exec *ex, size_t len, size_t grain, tt_range_fn body, void *arg)
{
    tt__exec *x = ex ? tt__x(ex) : NULL;
    int rc = tt__exec_check(x);
    if (rc)
        return rc;
    if (!body)
        return TT__EINVAL("!body");
    if (grain == 0)
        return TT__EINVAL("grain == 0");
    if (x->flags & TT__F_TEAM)
        return tt__team_for_ranges(x, len, grain, body, arg);
    if (tt__entry_lean(x))
        return ranges_lean(x, len, body, arg);
    return ranges_entered(x, len, grain, body, arg);
}

__attribute__((noinline)) static int ranges_entered(tt__exec *x, size_t len, size_t grain,
                                                    tt_range_fn body, void *arg)
{
    unsigned ntasks = len == 0 ? 0 : tt__range_tasks(len, grain, x->budget);
    {
        /* The plain split: the quick root, where it applies (exec_root.c;
         * fewer than 2 ranges ask for nothing). */
        tt__quick q = {.kind = TT__QUICK_RANGES, .n = ntasks, .fn.range = body, .arg = arg,
                       .len = len};
        int rc;
        if (tt__exec_root_quick(x, &q, &rc))
            return rc;
    }
    range_entry r = {
        .e = {.body = len == 0 ? nothing_body : tt__exec_range_body, .pool = x->pool,
              .pool_gen = x->pool_gen, .ledger = x->ledger},
        .body = body, .arg = arg, .len = len, .ntasks = ntasks,
    };
    return tt__exec_enter_and_run(x, &r.e,
                                  (run_spec){.ntasks = ntasks, .budget = ntasks, .need = ntasks});
}

/* ------------------------------------------------------------------------ */
/* tt_for_ranges_dynamic                                                     */
/* ------------------------------------------------------------------------ */

typedef struct chunk_entry {
    entry e;
    tt__chunks k;
} chunk_entry;

/* A task takes chunks until none is left; each chunk is a share of its
 * own to OpenMP (what one sets ends with it), as a fork's jobs are. */
static void chunk_body(entry *e, const task *t)
{
    chunk_entry *c = (chunk_entry *)e;
    tt__share_seq seq;
    tt__share_seq_begin(&seq, e->pool, 2);
    size_t begin, end;
    for (bool first = true; tt__chunks_take(&c->k, first, t->index, &begin, &end);
         first = false) {
        if (!first)
            tt__share_seq_next(&seq);
        tt__ledger_enter(e->ledger);
        c->k.body(c->k.arg, begin, end);
        tt__ledger_leave(e->ledger);
    }
}

int tt_for_ranges_dynamic(tt_exec *ex, size_t len, size_t grain, tt_range_fn body, void *arg)
{
    tt__exec *x = ex ? tt__x(ex) : NULL;
    int rc = tt__exec_check(x);
    if (rc)
        return rc;
    if (!body)
        return TT__EINVAL("!body");
    if (grain == 0)
        return TT__EINVAL("grain == 0");
    chunk_entry c = {
        .e = {.body = len == 0 ? nothing_body : chunk_body, .pool = x->pool,
              .pool_gen = x->pool_gen, .ledger = x->ledger},
    };
    tt__chunks_init(&c.k, len, grain, body, arg);
    if (x->flags & TT__F_TEAM) {
        if (len == 0)
            return tt__team_for_ranges(x, 0, grain, body, arg); /* consumes, runs nothing */
        return tt__team_for_chunks(x, &c.k);
    }
    unsigned ntasks = tt__chunks_tasks(&c.k, x->budget);
    atomic_store_explicit(&c.k.next, ntasks, memory_order_relaxed);
    return tt__exec_enter_and_run(x, &c.e,
                                  (run_spec){.ntasks = ntasks, .budget = ntasks, .need = ntasks});
}

/* ------------------------------------------------------------------------ */
/* tt_broadcast                                                              */
/* ------------------------------------------------------------------------ */

typedef struct bcast_entry {
    entry e;
    tt_bcast_fn fn;
    void *arg;
} bcast_entry;

static void bcast_body(entry *e, const task *t)
{
    bcast_entry *b = (bcast_entry *)e;
    tt__ledger_enter(e->ledger);
    b->fn(b->arg, t->index);
    tt__ledger_leave(e->ledger);
}

int tt_broadcast(tt_exec *ex, tt_bcast_fn fn, void *arg)
{
    tt__exec *x = ex ? tt__x(ex) : NULL;
    int rc = tt__exec_check(x);
    if (rc)
        return rc;
    if (!fn)
        return TT__EINVAL("!fn");
    /* One rule with tt_can_broadcast (token.c). */
    rc = tt__token_broadcast_verdict(x);
    if (rc)
        return rc;
    if (x->flags & TT__F_TEAM)
        return tt__team_broadcast(x, fn, arg);
    unsigned budget = x->budget;
    bcast_entry b = {.e = {.body = bcast_body, .pool = x->pool, .pool_gen = x->pool_gen,
                           .ledger = x->ledger},
                     .fn = fn, .arg = arg};
    return tt__exec_enter_and_run(
        x, &b.e, (run_spec){.ntasks = budget, .budget = budget, .need = budget, .prefix = true});
}

/* ------------------------------------------------------------------------ */
/* tt_external                                                               */
/* ------------------------------------------------------------------------ */

typedef struct ext_entry {
    entry e;
    tt_external_fn fn;
    void *arg;
    unsigned width;  /* what the callee is handed: the members held      */
    bool nested;     /* the callee's region is nested in the caller's    */
} ext_entry;

typedef struct ext_run {
    struct ext_entry *x;
    unsigned width;
} ext_run;

static void ext_thunk(void *ctx);
static void ext_isolated_thunk(void *ctx);

/* Call the callee with `width`. `holding`: the external holds slots of the
 * pool while the callee runs, so a thread of the callee that enters the
 * pool must not wait for them: the pool counts the external, and the
 * backend marks the callee's threads (tt__pool_external_callee). */
static void ext_call(ext_entry *x, unsigned width, bool holding)
{
    const tt__backend *be = tt__backend_get();
    tt_pool *pool = x->e.pool;
    int saved[4];
    void *mark = NULL;
    be->external_enter(width, saved);
    if (holding) {
        atomic_fetch_add_explicit(&pool->externals, 1, memory_order_acq_rel);
        mark = be->callee_mark(pool);
        if (!mark)
            atomic_fetch_add_explicit(&pool->externals_unmarked, 1, memory_order_acq_rel);
    }
    /* Ledger: this thread counts, and so does every thread of the regions
     * the callee opens from here (ledger.c). */
    uint64_t prev = tt__ledger_callee_begin(x->e.ledger);
    tt__ledger_enter(x->e.ledger);
    /* A callee handed one thread is one thread to OpenMP, as a share is; a
     * wider one gets its width (the one door). Either runs with the mark
     * in force, so that its threads are known as the external's own. */
    ext_run r = {x, width};
    /* A participant that its scope pinned to one CPU calls the callee with
     * its own mask (the callee's threads start from it), and is pinned
     * again after. */
    cpu_set_t pin;
    const cpu_set_t *own;
    bool unpinned = tt__cpu_callee_unpin(&pin, &own);
    be->callee_call(mark, width == 1 ? ext_isolated_thunk : ext_thunk, &r);
    if (unpinned)
        tt__cpu_callee_repin(&pin, own);
    tt__ledger_leave(x->e.ledger);
    tt__ledger_callee_end(prev);
    if (holding) {
        if (mark)
            be->callee_unmark(mark);
        else
            atomic_fetch_sub_explicit(&pool->externals_unmarked, 1, memory_order_acq_rel);
        atomic_fetch_sub_explicit(&pool->externals, 1, memory_order_acq_rel);
    }
    be->external_leave(saved);
}

static void ext_thunk(void *ctx)
{
    ext_run *r = ctx;
    r->x->fn(r->x->arg, r->width);
}

static void ext_isolated_thunk(void *ctx)
{
    ext_run *r = ctx;
    tt__share_run(r->x->e.pool, ext_thunk, r);
}

static void ext_body(entry *e, const task *t)
{
    ext_entry *x = (ext_entry *)e;
    /* The members this entry holds (t->cnt is 1: the callee runs on the
     * first; the others were reserved so that nobody else uses their
     * slots while the callee's threads do). */
    (void)t;
    ext_call(x, x->width, true);
}

/* A callee thread of another tt_external that calls tt_external: the
 * callee runs here with width 1 (this thread is already counted). */
static void ext_entry_inline(entry *e)
{
    ext_entry *x = (ext_entry *)e;
    x->width = 1;
    ext_call(x, 1, false);
}

/* Inline: budget 1, a pool of width 1, or a team token whose leader holds
 * the team's width. Room for the callee's team before anything is
 * consumed. */
static int ext_inline(tt__entry *fr, ext_entry *e, unsigned width, bool team)
{
    tt__entry_hold(fr, NULL);
    int rc = width <= 1                         ? TT_OK
             : tt__backend_get()->in_parallel() ? tt__threads_room(width - 1)
                                                : tt__region_room(width);
    if (rc == TT_OK)
        rc = tt__entry_commit(fr);
    if (rc)
        return tt__entry_abort(fr, rc);
    /* A team token's scope holds the slots of the callee's threads: a
     * thread of its region that calls back into the pool must be known as
     * the external's own, and never wait for them. */
    ext_call(e, width, team && width > 1);
    tt__entry_end(fr, true);
    return TT_OK;
}

/* A full-width root on a plain thread: the callee runs on this very thread
 * with nthreads-var = width, so its region is this thread's own top-level
 * region on the same hot team. No region of ours, no nested region, no
 * thread created. */
static int ext_top(tt__entry *fr, ext_entry *e, tt__placement *pl, unsigned width)
{
    tt_pool *pool = fr->x->pool;
    int rc = tt__region_room(width);
    if (rc == TT_OK)
        rc = tt__entry_commit(fr);
    if (rc)
        return tt__entry_abort(fr, rc);
    uint32_t slots[width];
    tt__reserve r = {.need = width, .timeout_ns = UINT64_MAX};
    tt__place_reserve(pool, pl, &r, slots, slots);
    ext_call(e, width, true);
    tt__place_unreserve(pool, pl);
    tt__entry_end(fr, true);
    return TT_OK;
}

/* A member's nested root: the callee gets the members it holds (room for
 * its nested team before anything is consumed). */
static int ext_member_root(tt__entry *fr, ext_entry *e, tt__placement *pl, unsigned width)
{
    tt_pool *pool = fr->x->pool;
    int rc = tt__threads_room(width - 1);
    if (rc == TT_OK)
        rc = tt__entry_commit(fr);
    if (rc)
        return tt__entry_abort(fr, rc);
    uint32_t slots[width], gang[width];
    tt__reserve r = {.need = width, .timeout_ns = UINT64_MAX};
    tt__place_reserve(pool, pl, &r, slots, gang);
    e->width = pl->cnt;
    ext_call(e, e->width, true);
    tt__place_unreserve(pool, pl);
    tt__entry_end(fr, true);
    return TT_OK;
}

/* Whether this thread's last tt_external took the quick frame (a test hook
 * reads it; stored when the call returns, after any nested in its callee). */
static TT__TLS_HOT bool last_external_quick;

int tt__test_last_external_quick(void) { return last_external_quick; }

static int external(tt_exec *ex, tt_external_fn fn, void *arg, bool *quick);

int tt_external(tt_exec *ex, tt_external_fn fn, void *arg)
{
    bool quick = false;
    int rc = external(ex, fn, arg, &quick);
    last_external_quick = quick;
    return rc;
}

static int external(tt_exec *ex, tt_external_fn fn, void *arg, bool *quick)
{
    tt__exec *x = ex ? tt__x(ex) : NULL;
    int rc = tt__exec_check(x);
    if (rc)
        return rc;
    if (!fn)
        return TT__EINVAL("!fn");
    unsigned width = x->budget;
    /* The callee opens its own team of `width` threads: a caller that spun
     * while it runs would take a CPU from it. */
    ext_entry e = {.e = {.body = ext_body, .pool = x->pool, .pool_gen = x->pool_gen, .sleepy = true,
                         .ledger = x->ledger},
                   .fn = fn, .arg = arg, .width = width};
    /* A plain thread's full-width root (ext_top's case) where nothing asks
     * for the general path: the quick frame (entry.h), without a crew. */
    if (width >= 2 && x->pool && width == x->pool->width) {
        tt__entry_quick q;
        int took = tt__entry_quick_begin(&q, x, width, false, &rc);
        if (took < 0)
            return rc;
        if (took > 0) {
            *quick = true;
            ext_call(&e, width, true);
            tt__entry_quick_end(&q, true);
            return TT_OK;
        }
    }
    tt__entry fr;
    rc = tt__entry_begin(&fr, x);
    if (rc)
        return rc;
    if (width == 1 || !x->pool || x->pool->width <= 1 || (x->flags & TT__F_TEAM))
        return ext_inline(&fr, &e, width, (x->flags & TT__F_TEAM) != 0);
    tt__placement pl;
    rc = tt__place_members(x, &pl);
    if (rc)
        return tt__entry_abort(&fr, rc);
    /* A thread that runs inside a callee of this pool's own external (the
     * caller of a full-width external calling back), or a scope leader
     * that holds the scope's slots, is no plain thread here: the slots are
     * held, it takes the general path, which never waits for them. */
    if (pl.self < 0 && width == x->pool->width && !tt__pool_uses_private_crew(x->pool) &&
        !tt__place_no_wait(x->pool))
        return ext_top(&fr, &e, &pl, width);
    if (pl.self >= 0 && !pl.gang)
        return ext_member_root(&fr, &e, &pl, width);
    if (pl.gang)
        e.width = pl.cnt < width ? pl.cnt : width;
    return tt__exec_run_entry(&fr, &e.e,
                              (run_spec){.ntasks = 1, .budget = width, .need = width, .one = true,
                                         .inline_one = ext_entry_inline});
}
