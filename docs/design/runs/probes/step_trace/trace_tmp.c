#ifdef TT_TRACE
#include "trace_tmp.h"
#include <stdio.h>
#include <stdlib.h>
uint64_t tt_trl[TRN][16] __attribute__((aligned(64))), tt_trm[TRN][16] __attribute__((aligned(64)));
unsigned tt_trl_i __attribute__((aligned(128))); unsigned tt_trm_i __attribute__((aligned(128)));
static int cmpu(const void *a, const void *b) { int64_t x = *(const int64_t *)a, y = *(const int64_t *)b; return x < y ? -1 : x > y; }
static void cyc(const char *name, uint64_t (*a)[16], int sa, uint64_t (*b)[16], int sb, unsigned n)
{
    static int64_t d[TRN];
    unsigned m = 0;
    for (unsigned i = 1000; i + 1 < n; i++) d[m++] = (int64_t)(a[i + 1][sa] - b[i][sb]);
    qsort(d, m, sizeof *d, cmpu);
    fprintf(stderr, "%s p50 %lld p10 %lld p90 %lld\n", name, (long long)d[m / 2], (long long)d[m / 10], (long long)d[m * 9 / 10]);
}
__attribute__((destructor)) static void dump(void)
{
    unsigned n = tt_trl_i < TRN ? tt_trl_i : TRN;
    if (n < 1000 || tt_trm_i != tt_trl_i) { fprintf(stderr, "trace: n %u %u\n", tt_trl_i, tt_trm_i); }
    if (n < 1000) return;
    cyc("M0next-M5", tt_trm, 0, tt_trm, 5, n);
    cyc("L0next-L8", tt_trl, 0, tt_trl, 8, n);
    cyc("L0next-L7", tt_trl, 0, tt_trl, 7, n);
    cyc("M0next-L7", tt_trm, 0, tt_trl, 7, n);
    static int64_t d[TRN];
    for (int who = 0; who < 2; who++)
        for (int s = 0; s < 16; s++) {
            uint64_t (*a)[16] = who ? tt_trm : tt_trl;
            if (!a[5][s]) continue;
            unsigned m = 0;
            for (unsigned i = 1000; i < n; i++) d[m++] = (int64_t)(a[i][s] - tt_trl[i][0]);
            qsort(d, m, sizeof *d, cmpu);
            (void)0;
            fprintf(stderr, "%c%-2d p50 %7lld p10 %7lld p90 %7lld\n", who ? 'M' : 'L', s, (long long)d[m / 2], (long long)d[m / 10], (long long)d[m * 9 / 10]);
        }
}
#endif
