/*
 * crew.h -- crews, the threads that run a pool's tasks: the private crew
 * held on a host thread (crew.c) and the caller's own OpenMP team for one
 * root (host_team.c), on the backend table (backend.h). Above the waits,
 * the attributes and the backend table.
 */
#ifndef TT_CREW_H
#define TT_CREW_H

#include "waits.h"
#include "pool_attr.h"
#include "backend.h"

struct tt__crew;
struct tt__member;

/* A unit of work handed to one member. The dispatcher owns it and keeps it
 * alive until the work's join completes. */
typedef struct tt__work {
    void (*run)(struct tt__work *w, struct tt__member *m);
} tt__work;

typedef struct tt__member {
    tt__event mail TT__ALIGNED; /* word = sequence of handed work          */
    tt__work *_Atomic work;     /* the work for the newest sequence        */
    uint32_t seen;              /* serving thread only: last sequence run  */
    unsigned index;
    struct tt__crew *crew;
    /* The thread serving as this member now, as (uintptr_t)pthread_self(),
     * or 0. Written only by that thread (set when it starts serving, cleared
     * when it stops, for a region crew), read by any thread that asks
     * whether it is a member: relaxed, since a thread only ever compares it
     * with its own identity, which only it writes. */
    _Atomic uintptr_t thread_id;
    pid_t tid;
    size_t stack_size;
#if defined(TT_ENABLE_DEBUG) && TT_ENABLE_DEBUG
    /* --enable-debug: set while a post is in flight, so that two writers
     * of one mailbox at once (a gang bookkeeping error) abort. */
    _Atomic uint32_t posting;
#endif
} tt__member;

static inline uintptr_t tt__self_id(void) { return (uintptr_t)pthread_self(); }
_Static_assert(sizeof(pthread_t) <= sizeof(uintptr_t), "pthread_t must fit in uintptr_t");

enum tt__crew_kind {
    TT__CREW_PRIVATE = 1, /* held threads on a private host thread (crew.c) */
    TT__CREW_REGION       /* the caller's own team, one region at a time
                             (host_team.c)                                   */
};

typedef struct tt__crew {
    unsigned width;
    enum tt__crew_kind kind;
    const tt__backend *be;
    struct tt_pool_attr attr; /* copy; thread_name owned by the crew    */
    bool dedicated;
    _Atomic bool oversubscribed; /* width > CPUs of the affinity set     */
    /* How an idle member waits for work: relaxed atomics, because a crew
     * taken from the cache gets the new pool's settings while its members
     * may be spinning. */
    _Atomic uint64_t idle_polls;
    _Atomic uint64_t idle_ns;
    tt__wait_policy team_pol; /* how team waits (joins, barriers) spin   */
    tt__wait_stats *stats;    /* the pool's (region crews) or own_stats  */
    tt__wait_stats own_stats;
    _Atomic uint32_t park_epoch; /* bumped by tt_pool_release_idle      */
    cpu_set_t cpus;           /* the CPU set members take (private crew) */
    bool have_cpus;

    /* Start-up handshake (private crew). */
    _Atomic uint32_t started;  /* members that reached tt__member_main   */
    _Atomic uint32_t got;      /* team size OpenMP formed (0 = not yet)  */
    tt__event startup;         /* posted as members register             */
    _Atomic int start_err;

    pthread_t host;
    bool host_started;
    _Atomic uint32_t exited;   /* members that left tt__member_main      */

    tt__member *members;       /* width entries, cache-line aligned      */
    void *members_mem;
    struct tt__crew *next;     /* cache list (private), free list (region) */
    struct tt__crew *_Atomic next_all; /* every region crew of a pool    */
    /* The callers' line of a region crew: what a root's caller reads and
     * writes about the crew's past roots (exec.c, tt__root_end_begin), in a
     * line of its own, so that no write of it takes a line a member reads.
     * One root at a time holds the crew (the spare's exchange orders one
     * holder before the next), so plain fields. */
    struct {
        uint64_t join_until_ns; /* the roots end with the caller's join until then */
        uint32_t long_roots;    /* roots in a row that took TT__CHAIN_NS or more */
    } lead TT__ALIGNED;
    /* A region crew's control block for root team scopes (scope.h,
     * tt__ctl_keep), made by the first one and kept between them; NULL
     * until then. Used by the root that holds the crew. */
    void *scope_block;
} tt__crew;

/* The sentinel work that tells a serving member to stop. */
extern tt__work tt__work_exit;

/* Allocate a crew's member array (cache-line aligned); 0 or TT_ENOMEM. */
int tt__crew_alloc_members(tt__crew *c, unsigned width);
void tt__crew_free(tt__crew *c);
/* Start a private crew (crew.c): threads held on a private host thread,
 * taken from the process-wide cache when the settings allow. */
int tt__crew_create(const struct tt_pool_attr *attr, unsigned width, tt__crew **out);
/* Take a cached crew of `width` (NULL when none) and give one back (it is
 * joined when the cache is full). */
tt__crew *tt__crew_cache_take(unsigned width, const struct tt_pool_attr *attr);
void tt__crew_cache_put(tt__crew *c);
void tt__crew_note_width(unsigned width);
/* Tell every member to leave and join the threads. */
void tt__crew_destroy(tt__crew *c);
/* Forget cached crews in a fork() child (their threads do not exist). */
void tt__crew_atfork_child(void);
void tt__crew_atfork_prepare(void);
void tt__crew_atfork_parent(void);
/* Body of every private member thread: register, serve until shutdown. */
void tt__member_main(tt__crew *c, unsigned k);
/* Serve work posted to member m until the exit sentinel arrives. */
void tt__member_serve(tt__member *m);
/* Hand `w` to member m (owned by the caller's gang) and wake it. */
void tt__member_post(tt__member *m, tt__work *w);

/* Region crews (host_team.c): the member slots of one root region on the
 * caller's own OpenMP team. */
tt__crew *tt__region_crew_get(tt_pool *p);
void tt__region_crew_put(tt_pool *p, tt__crew *c);
void tt__region_crews_free(tt_pool *p);
/* Enter and leave member k of a region crew (the calling thread). */
static inline void tt__region_member_enter(tt__crew *c, unsigned k)
{
    atomic_store_explicit(&c->members[k].thread_id, tt__self_id(), memory_order_relaxed);
}
static inline void tt__region_member_leave(tt__crew *c, unsigned k)
{
    atomic_store_explicit(&c->members[k].thread_id, 0, memory_order_relaxed);
}

/* The bytes of static TLS of every module loaded now (crew.c). */
size_t tt__static_tls_bytes(void);

#endif /* TT_CREW_H */
