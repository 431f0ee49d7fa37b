/*
 * attr.c -- pool attributes, pthread-attr style: an opaque object with a
 * setter and a getter per setting. Every setter validates its input and
 * returns TT_EINVAL for a NULL object; settings of later stages (waits,
 * pinning) are stored here and read by the pool.
 */
#include "pool_attr.h"
#include "waits.h"

#include <stdlib.h>
#include <string.h>

void tt__attr_defaults(struct tt_pool_attr *a)
{
    memset(a, 0, sizeof *a);
    a->threads = 0;
    a->stack_size = TT__DEFAULT_STACK_SIZE;
    a->qos = TT_QOS_DEFAULT;
    a->idle_spin_ns = TT__DEFAULT_IDLE_SPIN_NS;
    a->idle_serves_pool = false;
    a->acquire_timeout_ns = TT__DEFAULT_ACQUIRE_TIMEOUT_NS;
    a->spin_polls = TT__DEFAULT_SPIN_POLLS; /* replaced at pool creation unless set */
    a->spin_polls_set = false;
    a->pin_participants = false;
    a->isolate_shares = true;
    a->costs_set = false;
}

bool tt__attr_dedicated(const struct tt_pool_attr *a)
{
    return a->thread_name != NULL || a->on_start_set || a->stack_size_set ||
           a->qos != TT_QOS_DEFAULT;
}

int tt_pool_attr_create(tt_pool_attr **attr)
{
    if (!attr)
        return TT__EINVAL("!attr");
    *attr = NULL;
    struct tt_pool_attr *a = tt__malloc(sizeof *a);
    if (!a)
        return TT_ENOMEM;
    tt__attr_defaults(a);
    *attr = a;
    return TT_OK;
}

void tt_pool_attr_destroy(tt_pool_attr *attr)
{
    if (!attr)
        return;
    free(attr->thread_name);
    free(attr);
}

int tt_pool_attr_set_threads(tt_pool_attr *attr, unsigned threads)
{
    if (!attr)
        return TT__EINVAL("!attr");
    attr->threads = threads;
    return TT_OK;
}

int tt_pool_attr_get_threads(const tt_pool_attr *attr, unsigned *threads)
{
    if (!attr)
        return TT__EINVAL("!attr");
    if (!threads)
        return TT__EINVAL("!threads");
    *threads = attr->threads;
    return TT_OK;
}

int tt_pool_attr_set_thread_name(tt_pool_attr *attr, const char *name)
{
    if (!attr)
        return TT__EINVAL("!attr");
    if ((name && !*name))
        return TT__EINVAL("name && !*name");
    char *copy = NULL;
    if (name) {
        copy = tt__strdup(name);
        if (!copy)
            return TT_ENOMEM;
    }
    free(attr->thread_name);
    attr->thread_name = copy;
    return TT_OK;
}

int tt_pool_attr_get_thread_name(const tt_pool_attr *attr, const char **name)
{
    if (!attr)
        return TT__EINVAL("!attr");
    if (!name)
        return TT__EINVAL("!name");
    *name = attr->thread_name;
    return TT_OK;
}

int tt_pool_attr_set_stack_size(tt_pool_attr *attr, size_t bytes)
{
    if (!attr)
        return TT__EINVAL("!attr");
    if (bytes < TT__MIN_STACK_SIZE)
        return TT__EINVAL("bytes < TT__MIN_STACK_SIZE");
    attr->stack_size = bytes;
    attr->stack_size_set = true;
    return TT_OK;
}

int tt_pool_attr_get_stack_size(const tt_pool_attr *attr, size_t *bytes)
{
    if (!attr)
        return TT__EINVAL("!attr");
    if (!bytes)
        return TT__EINVAL("!bytes");
    *bytes = attr->stack_size;
    return TT_OK;
}

int tt_pool_attr_set_on_start(tt_pool_attr *attr, tt_on_start_fn fn, void *arg)
{
    if (!attr)
        return TT__EINVAL("!attr");
    attr->on_start = fn;
    attr->on_start_arg = fn ? arg : NULL;
    attr->on_start_set = fn != NULL;
    return TT_OK;
}

int tt_pool_attr_get_on_start(const tt_pool_attr *attr, tt_on_start_fn *fn, void **arg)
{
    if (!attr)
        return TT__EINVAL("!attr");
    if (!fn)
        return TT__EINVAL("!fn");
    if (!arg)
        return TT__EINVAL("!arg");
    *fn = attr->on_start;
    *arg = attr->on_start_arg;
    return TT_OK;
}

int tt_pool_attr_set_qos(tt_pool_attr *attr, tt_qos qos)
{
    if (!attr)
        return TT__EINVAL("!attr");
    if ((unsigned)qos > (unsigned)TT_QOS_USER_INTERACTIVE)
        return TT__EINVAL("(unsigned)qos > (unsigned)TT_QOS_USER_INTERACTIVE");
    attr->qos = qos;
    return TT_OK;
}

int tt_pool_attr_get_qos(const tt_pool_attr *attr, tt_qos *qos)
{
    if (!attr)
        return TT__EINVAL("!attr");
    if (!qos)
        return TT__EINVAL("!qos");
    *qos = attr->qos;
    return TT_OK;
}

int tt_pool_attr_set_idle_spin(tt_pool_attr *attr, uint64_t ns)
{
    if (!attr)
        return TT__EINVAL("!attr");
    attr->idle_spin_ns = ns;
    return TT_OK;
}

int tt_pool_attr_get_idle_spin(const tt_pool_attr *attr, uint64_t *ns)
{
    if (!attr)
        return TT__EINVAL("!attr");
    if (!ns)
        return TT__EINVAL("!ns");
    *ns = attr->idle_spin_ns;
    return TT_OK;
}

int tt_pool_attr_set_idle_serves_pool(tt_pool_attr *attr, bool on)
{
    if (!attr)
        return TT__EINVAL("!attr");
    attr->idle_serves_pool = on;
    return TT_OK;
}

int tt_pool_attr_get_idle_serves_pool(const tt_pool_attr *attr, bool *on)
{
    if (!attr)
        return TT__EINVAL("!attr");
    if (!on)
        return TT__EINVAL("!on");
    *on = attr->idle_serves_pool;
    return TT_OK;
}

int tt_pool_attr_set_acquire_timeout(tt_pool_attr *attr, uint64_t ns)
{
    if (!attr)
        return TT__EINVAL("!attr");
    attr->acquire_timeout_ns = ns;
    return TT_OK;
}

int tt_pool_attr_get_acquire_timeout(const tt_pool_attr *attr, uint64_t *ns)
{
    if (!attr)
        return TT__EINVAL("!attr");
    if (!ns)
        return TT__EINVAL("!ns");
    *ns = attr->acquire_timeout_ns;
    return TT_OK;
}

int tt_pool_attr_set_spin_polls(tt_pool_attr *attr, uint64_t polls)
{
    if (!attr)
        return TT__EINVAL("!attr");
    attr->spin_polls = polls;
    attr->spin_polls_set = true;
    return TT_OK;
}

int tt_pool_attr_get_spin_polls(const tt_pool_attr *attr, uint64_t *polls)
{
    if (!attr)
        return TT__EINVAL("!attr");
    if (!polls)
        return TT__EINVAL("!polls");
    /* Not set: what a pool built now would take from OpenMP's settings. */
    *polls = attr->spin_polls_set ? attr->spin_polls : tt__omp_waits_get()->spin_polls;
    return TT_OK;
}

int tt_pool_attr_set_pin_participants(tt_pool_attr *attr, bool on)
{
    if (!attr)
        return TT__EINVAL("!attr");
    attr->pin_participants = on;
    return TT_OK;
}

int tt_pool_attr_get_pin_participants(const tt_pool_attr *attr, bool *on)
{
    if (!attr)
        return TT__EINVAL("!attr");
    if (!on)
        return TT__EINVAL("!on");
    *on = attr->pin_participants;
    return TT_OK;
}

int tt_pool_attr_set_isolate_shares(tt_pool_attr *attr, bool on)
{
    if (!attr)
        return TT__EINVAL("!attr");
    attr->isolate_shares = on;
    return TT_OK;
}

int tt_pool_attr_get_isolate_shares(const tt_pool_attr *attr, bool *on)
{
    if (!attr)
        return TT__EINVAL("!attr");
    if (!on)
        return TT__EINVAL("!on");
    *on = attr->isolate_shares;
    return TT_OK;
}
