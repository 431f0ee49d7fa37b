/*
 * wait_omp.c -- the wait scenarios of bench/wait_scenarios.c on raw OpenMP:
 * the baseline threadteam is compared with.
 *
 * Built twice from this one file: wait_omp_gomp (gcc -fopenmp, libgomp) and
 * wait_omp_llvm (clang -fopenmp, LLVM libomp). Same command line as
 * bench/wait_scenarios (see its header comment, or --help). The runtime is
 * left at its defaults (no OMP_WAIT_POLICY, no GOMP_SPINCOUNT, no
 * KMP_BLOCKTIME) unless the caller sets them in the environment.
 *
 *   sections  a call is 200 `omp parallel num_threads(w)` regions, each
 *             member doing the section's busy work;
 *   gaps      10 such regions of 5 us, the caller sleeps before each call;
 *   acquire   the held team only (OpenMP has no pool to acquire): the time
 *             of 50 regions of 20 us (param "team");
 *   nested    100 splits per call: an outer `omp parallel num_threads(w/2)`
 *             whose every thread opens an inner `omp parallel
 *             num_threads(2)` doing 20 us (omp_set_max_active_levels(2)).
 *
 * Run it in a process of its own: threadteam's pool threads are libgomp
 * threads and change libgomp's waits (docs: shared/design/anchors.md,
 * Coexistence). scripts/bench.sh alternates the three systems' processes.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "bench_common.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

static _Atomic int short_team; /* a region got fewer threads than asked */

static void region(unsigned width, uint64_t iters)
{
#pragma omp parallel num_threads(width)
    {
        if (omp_get_thread_num() == 0 && (unsigned)omp_get_num_threads() != width)
            short_team = 1;
        bc_spin(iters);
    }
}

static void nested_split(unsigned width, uint64_t iters)
{
    unsigned outer = width / 2 ? width / 2 : 1;
#pragma omp parallel num_threads(outer)
    {
#pragma omp parallel num_threads(2)
        {
            if (omp_get_thread_num() == 0 && omp_get_num_threads() != 2)
                short_team = 1;
            bc_spin(iters);
        }
    }
}

static int ctx_token;

static void *omp_open(const bc_call *c)
{
    if (c->scenario == BC_NESTED)
        omp_set_max_active_levels(2);
    return &ctx_token;
}

static void omp_close(void *ctx, const bc_call *c)
{
    (void)ctx;
    if (c->scenario == BC_NESTED)
        omp_set_max_active_levels(1);
}

static int omp_rep(void *ctx, const bc_call *c, bc_rep *out)
{
    (void)ctx;
    uint64_t total = 0, first = 0;
    switch (c->scenario) {
    case BC_GAPS:
        for (unsigned k = 0; k < c->calls; k++) {
            bc_sleep_us(c->gap_us);
            uint64_t t0 = bc_now_ns();
            region(c->width, c->iters);
            uint64_t t1 = bc_now_ns();
            for (unsigned s = 1; s < c->sections; s++)
                region(c->width, c->iters);
            uint64_t t2 = bc_now_ns();
            first += t1 - t0;
            total += t2 - t0;
        }
        out->first_us = (double)first / 1000.0 / c->calls;
        break;
    case BC_NESTED: {
        uint64_t t0 = bc_now_ns();
        for (unsigned k = 0; k < c->calls; k++)
            for (unsigned s = 0; s < c->sections; s++)
                nested_split(c->width, c->iters);
        total = bc_now_ns() - t0;
        break;
    }
    default: { /* sections, acquire (held team) */
        uint64_t t0 = bc_now_ns();
        for (unsigned k = 0; k < c->calls; k++)
            for (unsigned s = 0; s < c->sections; s++)
                region(c->width, c->iters);
        total = bc_now_ns() - t0;
        break;
    }
    }
    out->call_us = (double)total / 1000.0 / c->calls;
    out->waits = bc_no_waits;
    if (short_team) {
        fprintf(stderr, "%s: OpenMP formed a smaller team than width %u\n", BC_OMP_RUNTIME,
                c->width);
        short_team = 0;
        return 1;
    }
    return 0;
}

static const char usage[] =
    "usage: wait_omp_{gomp,llvm} [options]  (" BC_OMP_RUNTIME " build)\n"
    "The wait scenarios on raw OpenMP; the same options as bench/wait_scenarios.\n";

int main(int argc, char **argv)
{
    const bc_driver d = {BC_OMP_RUNTIME, 1, omp_open, omp_close, omp_rep};
    return bc_main(argc, argv, &d, usage);
}
