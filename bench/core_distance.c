/*
 * core_distance.c -- how far apart two CPUs of this process are, as the
 * time one cache line takes to go from one to the other and back.
 *
 *   core_distance [--trips N] [--reps R]
 *
 * prints one line:
 *   core_distance: CPUs A,B: X ns a round trip (median of R runs of N trips; min M, max W)
 *
 * Why a benchmark needs it: every root hands cache lines between the
 * caller's core and its members' (libgomp's dock and barrier, the shares'
 * records, the library's handshakes), and what one handoff costs depends on
 * where the two CPUs sit. On the 2-vCPU development hosts (a PVM guest on an
 * AMD EPYC host) the same two vCPUs measured 190 to 340 TSC cycles a round
 * trip in some minutes and 1070 to 1250 in others, as the hypervisor moved
 * them, and `tt_for_ranges` on 10^3 doubles ran at raw `omp parallel for`
 * speed in the first phase and 1.15 to 1.25 of it in the second. So the
 * benchmark scripts print this line before and after their rounds
 * (scripts/bench-paths.sh, scripts/bench-reduce.sh): a ratio is read with
 * the phase it was taken in.
 *
 * The two threads are pinned to the first two CPUs of the process's
 * affinity set, the CPUs a width-2 root would most likely use; with fewer
 * than two CPUs the line says so and the program exits 0. No threadteam
 * and no OpenMP: two pthreads and one atomic word on a line of its own.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static _Alignas(64) _Atomic unsigned long word;
static unsigned long trips = 20000;

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void pin(int cpu)
{
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    (void)pthread_setaffinity_np(pthread_self(), sizeof one, &one);
}

/* The other side: waits for each odd value and answers with the next even
 * one. */
static void *echo(void *arg)
{
    pin(*(int *)arg);
    for (unsigned long i = 0; i < trips; i++) {
        unsigned long want = 2 * i + 1;
        while (atomic_load_explicit(&word, memory_order_acquire) != want)
            ;
        atomic_store_explicit(&word, want + 1, memory_order_release);
    }
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    unsigned reps = 5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--trips") && i + 1 < argc)
            trips = strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = (unsigned)strtoul(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "usage: core_distance [--trips N] [--reps R]\n");
            return 2;
        }
    }
    if (trips == 0 || reps == 0 || reps > 100) {
        fprintf(stderr, "core_distance: --trips >= 1, --reps 1..100\n");
        return 2;
    }
    cpu_set_t set;
    int cpus[2], n = 0;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
            if (CPU_ISSET(c, &set))
                cpus[n++] = c;
    if (n < 2) {
        printf("core_distance: fewer than two CPUs in the affinity set: n/a\n");
        return 0;
    }
    double ns[100];
    for (unsigned r = 0; r < reps; r++) {
        atomic_store(&word, 0);
        pthread_t t;
        if (pthread_create(&t, NULL, echo, &cpus[1]) != 0) {
            fprintf(stderr, "core_distance: pthread_create failed\n");
            return 1;
        }
        pin(cpus[0]);
        double t0 = now_ns();
        for (unsigned long i = 0; i < trips; i++) {
            atomic_store_explicit(&word, 2 * i + 1, memory_order_release);
            while (atomic_load_explicit(&word, memory_order_acquire) != 2 * i + 2)
                ;
        }
        ns[r] = (now_ns() - t0) / (double)trips;
        pthread_join(t, NULL);
    }
    qsort(ns, reps, sizeof ns[0], cmp_double);
    printf("core_distance: CPUs %d,%d: %.0f ns a round trip (median of %u runs of %lu trips; "
           "min %.0f, max %.0f)\n",
           cpus[0], cpus[1], ns[reps / 2], reps, trips, ns[0], ns[reps - 1]);
    return 0;
}
