/*
 * isolate_omp.c -- what share isolation costs in the raw OpenMP runtime.
 *
 * threadteam isolates a share (makes it one thread to OpenMP) by running a
 * participant's whole part of a root inside one nested `omp parallel
 * num_threads(1)` (docs/design/placement.md, "A share is one thread to
 * OpenMP"). This program measures that construct on its own, without the
 * library, so that the isolated default's cost can be told apart from the
 * library's:
 *
 *   plain    an `omp parallel num_threads(2)` whose threads each update
 *            half of 1000 doubles (what `omp parallel for` does);
 *   nested1  the same, each thread's half inside a nested `omp parallel
 *            num_threads(1)` (max-active-levels 2, as the library's root
 *            region leaves it);
 *   futex    one FUTEX_WAKE system call that wakes nobody (Linux only):
 *            the price of a system call on this host.
 *
 * Found with it on host vm (2 vCPUs, KVM): libgomp makes two futex wake
 * calls per region of any size at its barriers, even in a team of one
 * (`perf stat -e syscalls:sys_enter_futex`: 2 per plain region, 6 with the
 * two nested ones), and one costs about 1 us under KVM; so the nested
 * regions add about 3 us per outer region there. Built twice, like the
 * other baselines: isolate_omp_gomp (libgomp), isolate_omp_llvm (libomp).
 *
 * usage: isolate_omp [--reps N]   (N rounds of 20000 regions per mode,
 * alternating; prints the median and the best round per mode, us/region)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "bench_common.h"

#include <limits.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#define LEN 1000
#define REGIONS 20000
#define MAX_REPS 64

static double x[LEN];

static void half(int k)
{
    for (int i = k * LEN / 2; i < (k + 1) * LEN / 2; i++)
        x[i] = x[i] * 1.0001 + 1.0;
}

static double run(int mode)
{
    uint64_t t0 = bc_now_ns();
    for (int r = 0; r < REGIONS; r++) {
#pragma omp parallel num_threads(2)
        {
            int k = omp_get_thread_num();
            if (mode == 0) {
                half(k);
            } else {
#pragma omp parallel num_threads(1)
                half(k);
            }
        }
    }
    return (double)(bc_now_ns() - t0) / 1e3 / REGIONS;
}

static double futex_us(void)
{
#if defined(__linux__)
    int word = 0;
    uint64_t t0 = bc_now_ns();
    for (int i = 0; i < REGIONS; i++)
        syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
    return (double)(bc_now_ns() - t0) / 1e3 / REGIONS;
#else
    return -1.0;
#endif
}

int main(int argc, char **argv)
{
    int reps = 7;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: isolate_omp [--reps N]\n");
            return 2;
        }
    }
    if (reps < 1 || reps > MAX_REPS) {
        fprintf(stderr, "isolate_omp: --reps 1..%d\n", MAX_REPS);
        return 2;
    }
    omp_set_max_active_levels(2);
    omp_set_dynamic(0);
    double t[3][MAX_REPS];
    run(0);
    run(1);
    for (int r = 0; r < reps; r++) {
        t[0][r] = run(0);
        t[1][r] = run(1);
        t[2][r] = futex_us();
    }
    static const char *name[3] = {"plain", "nested1", "futex"};
    printf("%s: us per region (futex: per call), %d rounds of %d\n", BC_OMP_RUNTIME, reps, REGIONS);
    for (int m = 0; m < 3; m++) {
        bc_stats st = bc_stats_of(t[m], (size_t)reps);
        printf("%-8s median %.3f best %.3f\n", name[m], st.median, st.min);
    }
    return 0;
}
