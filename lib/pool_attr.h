/*
 * pool_attr.h -- pool attributes (attr.c): the settings a pool is built with
 * and their defaults. Above base.h only.
 */
#ifndef TT_POOL_ATTR_H
#define TT_POOL_ATTR_H

#include "base.h"

struct tt_pool_attr {
    unsigned threads;
    char *thread_name;
    size_t stack_size;
    bool stack_size_set;
    tt_on_start_fn on_start;
    void *on_start_arg;
    bool on_start_set;
    tt_qos qos;
    uint64_t idle_spin_ns;
    bool idle_serves_pool;
    uint64_t acquire_timeout_ns;
    uint64_t spin_polls;
    bool spin_polls_set; /* false: the pool takes the OpenMP settings */
    bool pin_participants;
    bool isolate_shares;   /* false: the owner's promise that shares make no OpenMP call */
    tt_dispatch_costs costs;
    bool costs_set;
};

#define TT__DEFAULT_STACK_SIZE ((size_t)16 << 20)
#define TT__MIN_STACK_SIZE ((size_t)64 << 10)
#define TT__DEFAULT_IDLE_SPIN_NS 1000000ull        /* 1 ms */
#define TT__DEFAULT_ACQUIRE_TIMEOUT_NS 1000000000ull /* 1 s */

void tt__attr_defaults(struct tt_pool_attr *a);
/* True when the settings ask for dedicated members (not cacheable). */
bool tt__attr_dedicated(const struct tt_pool_attr *a);

#endif /* TT_POOL_ATTR_H */
