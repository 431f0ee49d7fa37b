/*
 * token.c -- the token protocol: minting, checking, entering and leaving,
 * and the calls that inspect or derive a token without an entry.
 *
 * Every token, whatever made it (tt_exec_init, tt_exec_reborrow, a fork
 * job's child in exec_entries.c, a scope token or a team lead in team.c),
 * is minted by tt__token_mint, and every entry goes through tt__exec_check
 * and the entry frame (entry.c: claim, consume, leave), so the rules below
 * hold for every kind of token:
 *
 *  - A refusal consumes nothing. Everything that can refuse an entry
 *    (the chain's state, a busy token or ancestor, a command in flight on
 *    a team token's control block, the pool's state) is decided before the
 *    compare-and-swap that consumes the token, and every failure after a
 *    claim undoes the claim.
 *  - The ancestor walk is bounded: a reborrow chain that loops (a token
 *    reborrowed into one of its own ancestors, or into itself) is found by
 *    a tortoise-and-hare walk and reported as TT_EINVAL.
 *  - A team-lead token ends the leader role exactly once: at its own entry's
 *    leave, at tt_exec_finish, or, when finished while a reborrowed
 *    descendant is inside an entry, when that entry leaves
 *    (TT__BUSY_ENDING).
 *
 * token.c asks placement one thing (whether the calling thread may wait
 * for the pool's slots, tt__place_no_wait), and calls nothing above it: of
 * a team it reads only the hook at the head of the control block a team
 * token carries (tt__team_hook: whether a command is in flight, and the
 * function that ends a leader role, which the persistent team fills in).
 */
#include "place.h"
#include "test_hooks.h"

#include <string.h>

/* The team hooks of a token (x->team is a control block whose head is a
 * tt__team_hook). */
static bool team_busy(const tt__exec *x)
{
    return (x->flags & TT__F_TEAM) && x->team && ((const tt__team_hook *)x->team)->busy;
}

/* End the leader role of a token minted by tt_team_lead (others: nothing). */
static void lead_end(tt__exec *x)
{
    if (!(x->flags & TT__F_LEAD) || !x->team)
        return;
    const tt__team_hook *h = x->team;
    if (h->lead_end)
        h->lead_end(x);
}

/* ------------------------------------------------------------------------ */
/* Minting                                                                   */
/* ------------------------------------------------------------------------ */

/* tt__token_mint is inline (internal.h): a lean fork mints a child per job. */

void tt__token_mint_invalid(tt__exec *x)
{
    memset(x, 0, sizeof(tt_exec));
    x->self = x;
    atomic_store_explicit(&x->busy, 0, memory_order_relaxed);
    atomic_store_explicit(&x->magic, TT__MAGIC_INVALID, memory_order_relaxed);
}

/* Test hook (tests/test_races.c): called by tt_exec_init between its two
 * reads of the pool, where a destroy can fall. */
void (*tt__test_init_window)(tt_pool *pool);

int tt_exec_init(tt_exec *ex, tt_pool *pool, unsigned budget)
{
    if (!ex)
        return TT__EINVAL("!ex");
    tt__exec *x = tt__x(ex);
    int rc = TT_OK;
    uint32_t gen = 0;
    if (!pool) {
        rc = TT__EINVAL("!pool");
    } else if (budget == 0) {
        rc = TT__EINVAL("budget == 0");
    } else if (tt__pool_forked(pool)) {
        rc = TT_EFORKED;
    } else {
        /* The generation first, then the state. Every destroy moves the
         * state (DOOMED, ENDING) before it bumps the generation, both with
         * release: a generation read here that is already bumped comes
         * with the moved state, so the mint is refused; one read before
         * the bump makes a token that every entry after the destroy
         * refuses (its generation is old). Read the other way round, a
         * destroy between the reads minted a live-looking token on the
         * new generation of a dying pool (test_races.c,
         * test_init_racing_member_destroy). */
        gen = atomic_load_explicit(&pool->gen, memory_order_acquire);
        if (tt__test_init_window)
            tt__test_init_window(pool);
        if (atomic_load_explicit(&pool->state, memory_order_acquire) != TT__POOL_LIVE)
            rc = TT_EDESTROYED; /* destroyed (from a member, or for good) */
    }
    if (rc) {
        tt__token_mint_invalid(x);
        return rc;
    }
    if (budget > pool->width)
        budget = pool->width;
    tt__token_spec s = {
        .pool = pool,
        .pool_gen = gen,
        .budget = budget,
        .ledger = tt__ledger_new_root(pool),
    };
    tt__token_mint(x, &s);
    return TT_OK;
}

void tt_exec_init_serial(tt_exec *ex)
{
    if (!ex)
        return;
    tt__token_spec s = {.budget = 1, .flags = TT__F_SERIAL, .ledger = tt__ledger_new_root(NULL)};
    tt__token_mint(tt__x(ex), &s);
}

/* ------------------------------------------------------------------------ */
/* Checking                                                                  */
/* ------------------------------------------------------------------------ */

static bool magic_known(uint32_t m)
{
    return m == TT__MAGIC_LIVE || m == TT__MAGIC_CONSUMED || m == TT__MAGIC_FINISHED;
}

int tt__token_check_one(const tt__exec *x)
{
    uint32_t m = atomic_load_explicit(&x->magic, memory_order_acquire);
    if (!magic_known(m))
        return TT__EINVAL("the token was never initialised (or is not a tt_exec)");
    if (x->self != x)
        return TT_ECOPY;
    if (m != TT__MAGIC_LIVE)
        return TT_ECONSUMED;
    return TT_OK;
}

/* Check every ancestor of x, in order. The walk is bounded: `slow` moves
 * one step for every two of `p`, so on a chain that loops p meets slow
 * (Floyd), and a loop is TT_EINVAL. */
static int check_chain(const tt__exec *x)
{
    const tt__exec *slow = x;
    unsigned steps = 0;
    for (const tt__exec *p = x->parent; p; p = p->parent) {
        if (p == slow)
            return TT__EINVAL("the token's reborrow chain loops");
        int rc = tt__token_check_one(p);
        if (rc)
            return rc;
        if (++steps % 2 == 0)
            slow = slow->parent;
    }
    return TT_OK;
}

/* Everything an entry checks before it may run or refuse: the token and
 * each reborrow ancestor are live originals, the chain does not loop, the
 * limit is valid, the thread may use the token, and the pool was built in
 * this process and not destroyed. */
int tt__exec_check(const tt__exec *x)
{
    if (!x)
        return TT__EINVAL("the token is NULL");
    int rc = tt__token_check_one(x);
    if (rc)
        return rc;
    rc = check_chain(x);
    if (rc)
        return rc;
    if (x->flags & TT__F_BAD_LIMIT)
        return TT__EINVAL("tt_exec_limit was given a maximum of 0");
    /* A token handed to a task belongs to the task's thread. */
    if ((x->flags & (TT__F_IN_TASK | TT__F_OWNED)) && !pthread_equal(x->owner, pthread_self()))
        return TT_EWRONGTHREAD;
    if (x->pool) {
        if (atomic_load_explicit(&x->pool->gen, memory_order_acquire) != x->pool_gen)
            return TT_EDESTROYED;
        if (tt__pool_forked(x->pool))
            return TT_EFORKED;
    }
    return TT_OK;
}

/* True when an entry on the (checked) token would be refused with TT_EBUSY
 * now: the token's own entry or a reborrowed descendant's is in flight, an
 * ancestor is lent to another descendant, or a command is in flight on the
 * control block of a team token. */
static bool chain_busy(const tt__exec *x)
{
    if (atomic_load_explicit(&x->busy, memory_order_acquire) != 0)
        return true;
    for (const tt__exec *p = x->parent; p; p = p->parent)
        if (atomic_load_explicit(&p->busy, memory_order_acquire) != 0)
            return true;
    return team_busy(x);
}

/* The one rule behind tt_broadcast and tt_can_broadcast: what a broadcast
 * on x would return now without running (TT_OK: it would run). */
int tt__token_broadcast_verdict(const tt__exec *x)
{
    int rc = tt__exec_check(x);
    if (rc)
        return rc;
    if (x->flags & TT__F_FORK_CHILD)
        return TT_REFUSED_FORK_CHILD;
    bool no_slots = false;
    if (x->pool && !(x->flags & TT__F_TEAM)) {
        /* The membership check reads the pool's crews: under an entry
         * count, so that a concurrent destroy is refused meanwhile. */
        rc = tt__pool_entry_begin(x->pool, x->pool_gen);
        if (rc)
            return rc;
        bool member = tt__pool_member_of(x->pool, NULL) >= 0;
        /* A caller that holds slots of the pool, or runs in the callee of
         * an external that holds them, never waits for them: a broadcast
         * runs on slots 0..budget-1 free now, or is refused (exec.c,
         * prepare_plain, takes them by the same rule). */
        no_slots = !member && x->budget > 1 && x->pool->width > 1 &&
                   tt__place_no_wait(x->pool) && !tt__gang_prefix_free(x->pool, x->budget);
        tt__pool_entry_end(x->pool);
        if (member)
            return TT_REFUSED_CALLER_IN_POOL;
    }
    if (chain_busy(x))
        return TT_EBUSY;
    if (no_slots)
        return TT_REFUSED_UNAVAILABLE;
    return TT_OK;
}

bool tt_can_broadcast(const tt_exec *ex)
{
    return tt__token_broadcast_verdict(ex ? tt__cx(ex) : NULL) == TT_OK;
}

/* ------------------------------------------------------------------------ */
/* Entering and leaving                                                      */
/* ------------------------------------------------------------------------ */

/* Give back the ancestors of x claimed by an entry, from x's parent up to
 * (not including) `stop`. An ancestor finished meanwhile (a team-lead token
 * whose finish found this descendant inside) ends its leader role here,
 * after every word was released. */
static void release_ancestors(tt__exec *x, const tt__exec *stop)
{
    tt__exec *ending[8];
    unsigned nend = 0;
    for (tt__exec *p = x->parent; p != stop; p = p->parent) {
        uint32_t old = atomic_fetch_and_explicit(&p->busy, TT__BUSY_ENDING, memory_order_acq_rel);
        TT__INVARIANT((old & ~TT__BUSY_ENDING) != 0,
                      "token: an ancestor given back that was not lent to an entry");
        if ((old & TT__BUSY_ENDING) && (old & ~TT__BUSY_ENDING)) {
            if (nend < sizeof ending / sizeof ending[0])
                ending[nend++] = p;
            else
                lead_end(p); /* not reached: one lead per chain */
        }
    }
    for (unsigned i = 0; i < nend; i++)
        lead_end(ending[i]);
}

/* Claim the token for an entry, without consuming it. Every refusal comes
 * before the consumption and undoes what it claimed, so a refused entry
 * consumes nothing. TT_EBUSY: a command is in flight on a team token's
 * control block (the scope's leader is inside a section or a split), a
 * reborrowed descendant is inside an entry (its count sits in busy), or an
 * ancestor is lent to another descendant; TT_EDESTROYED: the pool is gone.
 * The ancestors count this entry, so that their own entries see it, and the
 * pool counts it as an entry (or already counts the entry of the task a
 * task's token was handed to: tt__exec_counts_pool): from the claim on, a
 * destroy from another thread is refused (TT_EBUSY) instead of tearing the
 * pool down under the entry, so an entry touches the pool (its crews,
 * slots, lock) only after its claim. */
int tt__exec_claim(tt__exec *x)
{
    if (team_busy(x))
        return TT_EBUSY;
    uint32_t zero = 0;
    /* acq_rel pairs with the release in leave() of a child on another
     * thread, and with ancestors' counts below. */
    if (!atomic_compare_exchange_strong_explicit(&x->busy, &zero, TT__BUSY_ENTRY,
                                                 memory_order_acq_rel, memory_order_acquire))
        return TT_EBUSY;
    /* Each ancestor is lent to one descendant entry at a time: a sibling
     * reborrow entering meanwhile, or the ancestor's own entry, sees a
     * non-zero word and is refused. */
    for (tt__exec *p = x->parent; p; p = p->parent) {
        uint32_t z = 0;
        if (!atomic_compare_exchange_strong_explicit(&p->busy, &z, 1, memory_order_acq_rel,
                                                     memory_order_acquire)) {
            release_ancestors(x, p);
            atomic_store_explicit(&x->busy, 0, memory_order_release);
            return TT_EBUSY;
        }
    }
    if (tt__exec_counts_pool(x)) {
        int rc = tt__pool_entry_begin(x->pool, x->pool_gen);
        if (rc) {
            release_ancestors(x, NULL);
            atomic_store_explicit(&x->busy, 0, memory_order_release);
            return rc;
        }
    }
    return TT_OK;
}

/* The claim and the consume of the lean frame (entry.c): nothing can
 * refuse in between, so both come here, in one call. A token without team
 * authority that needs no count of its pool (tt__entry_lean). */
int tt__exec_enter_lean(tt__exec *x)
{
    TT__ASSERT(!(x->flags & TT__F_TEAM) && !tt__exec_counts_pool(x));
    if (x->flags & TT__F_IN_TASK) {
        /* A token handed to a task, and its reborrows (which copy its
         * flags and owner): tt__exec_check refused every other thread
         * (TT_EWRONGTHREAD), so the words of the whole chain are this
         * thread's alone, and plain reads and writes decide what the
         * compare-and-swaps below decide for tokens other threads may
         * race into. */
        if (atomic_load_explicit(&x->busy, memory_order_relaxed) != 0)
            return TT_EBUSY;
        for (tt__exec *p = x->parent; p; p = p->parent)
            if (atomic_load_explicit(&p->busy, memory_order_relaxed) != 0)
                return TT_EBUSY;
        if (atomic_load_explicit(&x->magic, memory_order_relaxed) != TT__MAGIC_LIVE)
            return TT_ECONSUMED;
        for (tt__exec *p = x->parent; p; p = p->parent)
            atomic_store_explicit(&p->busy, 1, memory_order_relaxed);
        atomic_store_explicit(&x->busy, TT__BUSY_ENTRY, memory_order_relaxed);
        atomic_store_explicit(&x->magic, TT__MAGIC_CONSUMED, memory_order_relaxed);
        return TT_OK;
    }
    uint32_t zero = 0;
    if (!atomic_compare_exchange_strong_explicit(&x->busy, &zero, TT__BUSY_ENTRY,
                                                 memory_order_acq_rel, memory_order_acquire))
        return TT_EBUSY;
    for (tt__exec *p = x->parent; p; p = p->parent) {
        uint32_t z = 0;
        if (!atomic_compare_exchange_strong_explicit(&p->busy, &z, 1, memory_order_acq_rel,
                                                     memory_order_acquire)) {
            release_ancestors(x, p);
            atomic_store_explicit(&x->busy, 0, memory_order_release);
            return TT_EBUSY;
        }
    }
    int rc = tt__exec_consume(x);
    if (rc)
        tt__exec_unclaim(x);
    return rc;
}

/* The lean frame's leave: tt__exec_leave, with plain writes on a token
 * handed to a task (as in tt__exec_enter_lean; such a chain holds no lead
 * token, whose flags no task token copies, so no role ends here). */
void tt__exec_leave_lean(tt__exec *x)
{
    if (!(x->flags & TT__F_IN_TASK)) {
        tt__exec_leave(x);
        return;
    }
    TT__INVARIANT(atomic_load_explicit(&x->busy, memory_order_relaxed) == TT__BUSY_ENTRY,
                  "token: left an entry that was not claimed");
    for (tt__exec *p = x->parent; p; p = p->parent) {
        TT__INVARIANT(atomic_load_explicit(&p->busy, memory_order_relaxed) == 1,
                      "token: an ancestor given back that was not lent to an entry");
        atomic_store_explicit(&p->busy, 0, memory_order_relaxed);
    }
    atomic_store_explicit(&x->busy, 0, memory_order_relaxed);
}

/* Undo a claim: the entry was refused after it, and nothing was consumed. */
void tt__exec_unclaim(tt__exec *x)
{
    TT__INVARIANT(atomic_load_explicit(&x->busy, memory_order_relaxed) & TT__BUSY_ENTRY,
                  "token: an entry undone that was not claimed");
    if (tt__exec_counts_pool(x))
        tt__pool_entry_end(x->pool);
    release_ancestors(x, NULL);
    atomic_store_explicit(&x->busy, 0, memory_order_release);
}

/* Consume a claimed token with a compare-and-swap, so that of two threads
 * that raced into one token (a misuse: tokens are not shared) only one
 * runs. On TT_ECONSUMED the caller undoes its claim, after it gave back
 * what it took under the claim. */
int tt__exec_consume(tt__exec *x)
{
    uint32_t live = TT__MAGIC_LIVE;
    if (!atomic_compare_exchange_strong_explicit(&x->magic, &live, TT__MAGIC_CONSUMED,
                                                 memory_order_acq_rel, memory_order_acquire))
        return TT_ECONSUMED;
    TT__INVARIANT(atomic_load_explicit(&x->busy, memory_order_relaxed) & TT__BUSY_ENTRY,
                  "token: consumed without a claim");
    return TT_OK;
}

/* Give a consumed token back: a refusal found only after the consume (a
 * region whose team came out short, so that a broadcast or a team scope
 * that needs the missing threads ran nothing). The claim is still held, so
 * no other entry saw the token consumed; the caller then unclaims. */
void tt__exec_unconsume(tt__exec *x)
{
    TT__INVARIANT(atomic_load_explicit(&x->magic, memory_order_relaxed) == TT__MAGIC_CONSUMED,
                  "token: given back unused but not consumed");
    atomic_store_explicit(&x->magic, TT__MAGIC_LIVE, memory_order_release);
}

void tt__exec_leave(tt__exec *x)
{
    TT__INVARIANT(atomic_load_explicit(&x->busy, memory_order_relaxed) & TT__BUSY_ENTRY,
                  "token: left an entry that was not claimed");
    release_ancestors(x, NULL);
    atomic_store_explicit(&x->busy, 0, memory_order_release);
    /* A token minted by tt_team_lead ends the leader role when consumed. */
    lead_end(x);
    if (tt__exec_counts_pool(x))
        tt__pool_entry_end(x->pool);
}


/* ------------------------------------------------------------------------ */
/* Inspecting and deriving                                                   */
/* ------------------------------------------------------------------------ */

unsigned tt_exec_budget(const tt_exec *ex)
{
    if (!ex)
        return 0;
    const tt__exec *x = tt__cx(ex);
    if (!magic_known(atomic_load_explicit(&x->magic, memory_order_relaxed)))
        return 0;
    return x->budget;
}

bool tt_exec_is_serial(const tt_exec *ex) { return tt_exec_budget(ex) == 1; }

tt_exec *tt_exec_reborrow(tt_exec *parent, tt_exec *child)
{
    if (!child)
        return NULL;
    tt__exec *c = tt__x(child);
    if (!parent) {
        tt__token_mint_invalid(c);
        return child;
    }
    tt__exec *p = tt__x(parent);
    if (!magic_known(atomic_load_explicit(&p->magic, memory_order_relaxed))) {
        /* Not a token at all: its fields are garbage, read none of them. */
        tt__token_mint_invalid(c);
        return child;
    }
    /* Copy what the parent holds whatever its state: a copied or consumed
     * parent is found by the child's first entry through the chain. The
     * spec is read before the child is minted, so that child == parent
     * (or a child that is an ancestor of parent) makes a chain that loops,
     * which the first entry reports (TT_EINVAL). */
    tt__token_spec s = {
        .pool = p->pool,
        .pool_gen = p->pool_gen,
        .budget = p->budget,
        .flags = p->flags & ~(uint32_t)TT__F_LEAD,
        .gang = p->gang,
        .gang_off = p->gang_off,
        .gang_cnt = p->gang_cnt,
        .ledger = p->ledger,
        .team = p->team,
        .owner = p->owner,
        .parent = p,
    };
    tt__token_mint(c, &s);
    return child;
}

tt_exec *tt_exec_limit(tt_exec *ex, unsigned max)
{
    if (!ex)
        return NULL;
    tt__exec *x = tt__x(ex);
    if (x->self != x || atomic_load_explicit(&x->magic, memory_order_relaxed) != TT__MAGIC_LIVE)
        return ex; /* the next entry reports the copy or the consumption */
    if (max == 0) {
        x->flags |= TT__F_BAD_LIMIT;
        return ex;
    }
    if (max < x->budget)
        x->budget = max;
    if (x->gang_cnt > x->budget)
        x->gang_cnt = x->budget;
    return ex;
}

void tt_exec_finish(tt_exec *ex)
{
    if (!ex)
        return;
    tt__exec *x = tt__x(ex);
    if (x->self != x)
        return;
    uint32_t live = TT__MAGIC_LIVE;
    if (!atomic_compare_exchange_strong_explicit(&x->magic, &live, TT__MAGIC_FINISHED,
                                                 memory_order_acq_rel, memory_order_relaxed))
        return;
    if (!(x->flags & TT__F_LEAD))
        return;
    /* A team-lead token: the role ends now, or, when a reborrowed
     * descendant is inside an entry, when that entry gives the token back
     * (release_ancestors). Exactly one of the two sees the other's mark. */
    uint32_t old = atomic_fetch_or_explicit(&x->busy, TT__BUSY_ENDING, memory_order_acq_rel);
    if ((old & ~TT__BUSY_ENDING) == 0)
        lead_end(x);
}

/* A fork job fails its fork through the child token it was handed: the
 * token names its fork's failure word (minted by the fork), whatever the
 * token's state (a job may have consumed or finished it already). The first
 * code stored wins; the fork reads the word before each job it starts. */
int tt_fork_fail(tt_exec *child, int code)
{
    if (!child)
        return TT__EINVAL("!child");
    if (code == 0)
        return TT__EINVAL("code == 0");
    tt__exec *x = tt__x(child);
    uint32_t m = atomic_load_explicit(&x->magic, memory_order_acquire);
    if (!magic_known(m))
        return TT__EINVAL("the token was never initialised (or is not a tt_exec)");
    if (x->self != x)
        return TT_ECOPY;
    if (!x->fork_fail)
        return TT__EINVAL("the token is not a fork job's child");
    if (!pthread_equal(x->owner, pthread_self()))
        return TT_EWRONGTHREAD;
    int none = 0;
    atomic_compare_exchange_strong_explicit(x->fork_fail, &none, code, memory_order_acq_rel,
                                            memory_order_acquire);
    return TT_OK;
}

bool tt_carries_team(const tt_exec *ex)
{
    if (!ex)
        return false;
    const tt__exec *x = tt__cx(ex);
    return tt__token_check_one(x) == TT_OK && (x->flags & TT__F_TEAM) != 0;
}

/* ------------------------------------------------------------------------ */
/* Ledger accessor                                                           */
/* ------------------------------------------------------------------------ */

#if TT_LEDGER_ENABLED
uint64_t tt__ledger_id(const void *root);
tt_ledger_root tt_exec_ledger_root(const tt_exec *ex)
{
    if (!ex)
        return 0;
    const tt__exec *x = tt__cx(ex);
    if (!magic_known(atomic_load_explicit(&x->magic, memory_order_relaxed)))
        return 0;
    return tt__ledger_id(x->ledger);
}
#endif
