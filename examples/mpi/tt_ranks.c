/*
 * tt_ranks.c -- threadteam in MPI ranks: every rank builds its pool over
 * the CPUs the launcher bound it to (tt_pool_create with NULL attributes:
 * the width is the CPU count of the rank's affinity set), runs a
 * tt_for_ranges on it, and reports its pool width and CPU set to rank 0.
 * Rank 0 prints one line per rank and checks that every pool is as wide as
 * its rank's CPU set, and, with --expect-disjoint (ranks bound with
 * --bind-to core or a pe=W mapping), that ranks on one host share no CPU.
 *
 *   mpirun -np 2 --bind-to core --map-by core ./tt_ranks --expect-disjoint
 *
 * Exit status 0 when every check holds, 1 otherwise (on every rank).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <mpi.h>
#include <threadteam.h>

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MASK_BYTES (CPU_SETSIZE / 8)

typedef struct report {
    unsigned width, cpus, visited_ok;
    int rc;
    char host[64];
    unsigned char mask[MASK_BYTES];
} report;

static unsigned char *g_hits;

static void body(void *arg, size_t begin, size_t end)
{
    (void)arg;
    for (size_t i = begin; i < end; i++)
        g_hits[i]++;
}

static void cpu_list(const unsigned char *mask, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = 0;
    for (int c = 0; c < CPU_SETSIZE && used + 8 < len; c++) {
        if (!(mask[c / 8] & (1u << (c % 8))))
            continue;
        int e = c;
        while (e + 1 < CPU_SETSIZE && (mask[(e + 1) / 8] & (1u << ((e + 1) % 8))))
            e++;
        used += (size_t)snprintf(buf + used, len - used, "%s%d", used ? "," : "", c);
        if (e > c)
            used += (size_t)snprintf(buf + used, len - used, "-%d", e);
        c = e;
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int expect_disjoint = argc > 1 && strcmp(argv[1], "--expect-disjoint") == 0;

    report me;
    memset(&me, 0, sizeof me);
    gethostname(me.host, sizeof me.host - 1);
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        me.cpus = (unsigned)CPU_COUNT(&set);
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &set))
                me.mask[c / 8] |= (unsigned char)(1u << (c % 8));
    }

    /* The pool: NULL attributes, so its width is this rank's CPU count. */
    tt_pool *pool = NULL;
    me.rc = tt_pool_create(&pool, NULL);
    if (me.rc == TT_OK) {
        me.width = tt_pool_width(pool);
        size_t len = 100000;
        g_hits = calloc(len, 1);
        tt_exec ex;
        me.rc = tt_exec_init(&ex, pool, me.width);
        if (me.rc == TT_OK)
            me.rc = tt_for_ranges(&ex, len, 1000, body, NULL);
        me.visited_ok = 1;
        for (size_t i = 0; i < len; i++)
            if (g_hits[i] != 1)
                me.visited_ok = 0;
        free(g_hits);
        int drc = tt_pool_destroy(pool);
        if (me.rc == TT_OK)
            me.rc = drc;
    }

    report *all = rank == 0 ? calloc((size_t)size, sizeof *all) : NULL;
    MPI_Gather(&me, (int)sizeof me, MPI_BYTE, all, (int)sizeof me, MPI_BYTE, 0, MPI_COMM_WORLD);
    int bad = 0;
    if (rank == 0) {
        for (int r = 0; r < size; r++) {
            char list[512];
            cpu_list(all[r].mask, list, sizeof list);
            printf("rank %d on %s: CPUs {%s} (%u), pool width %u, for_ranges %s, %s\n", r,
                   all[r].host, list, all[r].cpus, all[r].width,
                   all[r].visited_ok ? "ok" : "WRONG", tt_status_name(all[r].rc));
            if (all[r].rc != TT_OK || !all[r].visited_ok || all[r].cpus == 0) {
                printf("  FAIL: rank %d: the pool did not work\n", r);
                bad = 1;
            }
            if (all[r].width != all[r].cpus) {
                printf("  FAIL: rank %d: pool width %u, but the rank is bound to %u CPUs\n", r,
                       all[r].width, all[r].cpus);
                bad = 1;
            }
            for (int q = 0; expect_disjoint && q < r; q++) {
                if (strcmp(all[q].host, all[r].host) != 0)
                    continue;
                for (int b = 0; b < MASK_BYTES; b++)
                    if (all[q].mask[b] & all[r].mask[b]) {
                        printf("  FAIL: ranks %d and %d on %s share CPUs\n", q, r, all[r].host);
                        bad = 1;
                        break;
                    }
            }
        }
        printf("tt_ranks: %d ranks: %s\n", size, bad ? "FAIL" : "ok");
        free(all);
    }
    MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return bad;
}
