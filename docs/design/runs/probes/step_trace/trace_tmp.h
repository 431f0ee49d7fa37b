/* docs/design/runs/2026-12-07-scope-cost.md: a per-step trace of a root scope. Copy this file
 * and trace_tmp.c into lib/, run add_stamps.py from the source root (it adds the stamps and
 * trace_tmp.c to lib/Makefile.am; written against the tree of commit b768ec6, so a later tree
 * may need its anchors moved), build with CFLAGS="-O2 -g -DTT_TRACE" and run a probe: at exit it
 * prints, per stamp, the median and p10/p90 of the TSC ticks since the leader's stamp 0 of the
 * same scope (L: the leader, M: participant 1), and four scope-to-scope gaps.
 * lfence before each rdtsc: without it a stamp runs ahead of the loads before it. The two index
 * words sit on lines of their own: on one line, the leader's increment made every member stamp
 * a cache miss. */
#ifndef TT_TRACE_TMP_H
#define TT_TRACE_TMP_H
#ifdef TT_TRACE
#include <x86intrin.h>
#include <stdint.h>
#define TRN 32768
extern uint64_t tt_trl[TRN][16], tt_trm[TRN][16];
extern unsigned tt_trl_i, tt_trm_i;
#define TRL(s) (_mm_lfence(), tt_trl[tt_trl_i % TRN][s] = __rdtsc())
#define TRM(s) (_mm_lfence(), tt_trm[tt_trm_i % TRN][s] = __rdtsc())
#define TRL_NEXT() (tt_trl_i++)
#define TRM_NEXT() (tt_trm_i++)
#else
#define TRL(s) ((void)0)
#define TRM(s) ((void)0)
#define TRL_NEXT() ((void)0)
#define TRM_NEXT() ((void)0)
#endif
#endif
