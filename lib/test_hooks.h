/*
 * test_hooks.h -- every hook the tests use to reach inside the library:
 * the tt__test_* functions and hook variables, and the fault injection and
 * retry counters the fault tests arm and read. Each is defined in the file
 * named above it, and declared only here: lib/ includes this header through
 * internal.h, tests/ include it directly (-I$(top_srcdir)/lib). Nothing here
 * is installed, and the hooks are no part of the API. Test programs that use
 * them link the static library.
 */
#ifndef TT_TEST_HOOKS_H
#define TT_TEST_HOOKS_H

#include <stdbool.h>
#include <stdint.h>

#include "threadteam.h"

/* alloc.c: the alloc_nth-th allocation and the thread_nth-th thread start
 * from now fail (0: none). */
void tt__fault_inject(long alloc_nth, long thread_nth);

/* gomp_guard.c: thread starts retried on EAGAIN so far. */
unsigned long tt__guard_retries(void);

/* wait.c */
bool tt__test_spin_once(uint64_t spin_polls, bool throttled);
uint64_t tt__test_spin_stats(uint64_t spin_polls, uint32_t yield_every, bool reset,
                             uint64_t *preemptions, uint64_t *starved_until,
                             uint64_t *spun);
/* The process's thread count that tt__region_end_order takes (0: the
 * sampled one); returns the previous hook. */
uint32_t tt__test_threads_hook(uint32_t n);
/* When not 0, the cost taken for a futex wake (lib/wait.c, tt__wake_dear);
 * returns the previous hook. */
uint64_t tt__test_wake_ns_hook(uint64_t ns);
/* Whether the calling thread's last root entry that asked for the quick
 * path (a fork of one job per slot, a plain split) took it (exec_root.c). */
int tt__test_last_root_quick(void);
/* Whether this thread's last tt_team_scope (past its checks, not inline)
 * took the quick frame (scope_entries.c). */
int tt__test_last_scope_quick(void);
/* Whether this thread's last tt_external on a token of its pool's width
 * (past its checks) took the quick frame (exec_entries.c). */
int tt__test_last_external_quick(void);
uint64_t tt__test_runnable_hook(bool on, long running, unsigned cpus);
uint64_t tt__test_oversub_samples(void);
uint64_t tt__test_spin_starving(uint64_t spin_polls, uint64_t *starving, uint64_t *preemptions,
                                uint64_t *starved_until, uint64_t *spun);

/* cpu.c: the nth-th room check from now refuses (0: none). */
void tt__test_room_refuse(long nth);

/* crew.c: join and forget every cached crew. */
void tt__test_crew_cache_drain(void);

/* backend_omp.c: the most threads a root's region asks for (0: no cap). */
void tt__test_region_cap(unsigned cap);
/* backend_omp.c: when not 0, every callee mark is taken through the scan
 * of the table, which holds the table's lock this long (so that a fork()
 * finds it held); returns the previous hook. */
uint64_t tt__test_mark_lock_hold_ns(uint64_t ns);

/* pool.c */
/* Every root takes the private crew (tests/test_lifecycle.c). */
void tt__test_force_private_crew(bool on);
unsigned long tt__test_pool_teardowns(void);
void tt__test_entry_count_in(tt_pool *p);
void tt__test_entry_count_out(tt_pool *p);
/* The pool's wait counters (region crews and its private crew):
 * spun_polls, lead_late, scope_end_joins, crowded_waits, nudges and
 * lead_wait_skips (tt__wait_stats, wait.h). */
uint64_t tt__test_pool_spun_polls(const tt_pool *pool);
uint64_t tt__test_pool_lead_late(const tt_pool *pool);
uint64_t tt__test_pool_scope_end_joins(const tt_pool *pool);
uint64_t tt__test_pool_crowded_waits(const tt_pool *pool);
uint64_t tt__test_pool_nudges(const tt_pool *pool);
uint64_t tt__test_pool_lead_wait_skips(const tt_pool *pool);

/* token.c: called, when set, by tt_exec_init between its two reads of the
 * pool, where a destroy can fall. */
extern void (*tt__test_init_window)(tt_pool *pool);

/* exec.c: the end order (enum tt__region_end, wait.h) of the calling
 * thread's last root region. */
int tt__test_last_region_end(void);

/* team_scope.c: when >= 0, the CPU that every thread of a scope is taken
 * to run on; returns the previous value. And whether a scope's waits spin
 * only the throttled budget. */
int tt__test_scope_cpu_hook(int cpu);
bool tt__test_scope_throttled(const tt_scope *scope);

/* team.c: called, when set, by tt_pool_into_team after the pool's state
 * was checked and the team took ownership. */
extern void (*tt__test_into_team_window)(tt_pool *pool);

#endif /* TT_TEST_HOOKS_H */
