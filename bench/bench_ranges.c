/*
 * bench_ranges.c -- tt_for_ranges on a pooled token against `omp parallel
 * for` at the same width, side by side in one run.
 *
 * The two systems never share a process: threadteam's members are libgomp
 * threads, and a pool alive next to the application's own OpenMP team
 * changes libgomp's waits (shared/design/anchors.md, Coexistence). So
 * `bench_ranges` itself starts no thread: it runs itself again as
 * `bench_ranges --system threadteam` and `--system libgomp`, alternating
 * for --rounds rounds, collects their figures and prints one table.
 *
 * A call: a loop over `len` doubles, x[i] = x[i] * a + b, split into at most
 * `width` ranges; on threadteam a token minted per call
 * (tt_exec_init(&ex, pool, width) + tt_for_ranges(&ex, len, 1, ...), the
 * caller entering the pool), on OpenMP `#pragma omp parallel for
 * num_threads(width) schedule(static)`. The serial loop is reported too.
 * Values are microseconds per call: the median over repetitions, each the
 * mean of --calls calls, pooled over all rounds; p10 and p90 beside it.
 * Each row's repetitions follow 40 ms of untimed calls (run_system says
 * why).
 *
 * Options:
 *   --widths LIST  (default: all CPUs of the affinity set)
 *   --lens LIST    loop lengths (default 1000,100000,1000000)
 *   --rounds N     alternations of the two processes (default 3)
 *   --reps N       repetitions per round (default 15)
 *   --calls N      calls per repetition (default: as many as take about 2 ms)
 *   --system S     threadteam | libgomp: run one system and print raw lines
 *   --csv FILE     also append summary rows to FILE in the columns of
 *                  scripts/bench.sh (scenario "ranges"), labelled --label
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "bench_common.h"
#include "threadteam.h"

#include <omp.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define MAXL 16

typedef struct ropts {
    unsigned widths[MAXL], nwidths;
    size_t lens[MAXL];
    unsigned nlens;
    unsigned rounds, reps, calls;
    const char *system;
    const char *csv, *label;
} ropts;

static double *xs;

static void body(void *arg, size_t begin, size_t end)
{
    (void)arg;
    for (size_t i = begin; i < end; i++)
        xs[i] = xs[i] * 0.999999 + 1e-6;
}

/* Calls per repetition: --calls, or as many as take about 2 ms (from a
 * timed trial call), at least 3 and at most 2000. */
static unsigned calls_for(const ropts *o, double trial_us)
{
    if (o->calls)
        return o->calls;
    double c = 2000.0 / (trial_us > 0.01 ? trial_us : 0.01);
    return c < 3 ? 3 : c > 2000 ? 2000 : (unsigned)c;
}

/* The warm-up before each row's repetitions: at least this long and this
 * many calls (see run_system). */
#define WARM_NS 40000000ull
#define WARM_CALLS 20u

/* One call of a row: the serial loop, a token per call and tt_for_ranges,
 * or `omp parallel for`. False (after a message) when threadteam failed. */
static bool one_call(tt_pool *pool, size_t len, unsigned w, bool tt, bool serial)
{
    if (serial) {
        body(NULL, 0, len);
    } else if (tt) {
        tt_exec ex;
        int rc = tt_exec_init(&ex, pool, w);
        if (rc == TT_OK)
            rc = tt_for_ranges(&ex, len, 1, body, NULL);
        if (rc != TT_OK) {
            fprintf(stderr, "bench_ranges: tt_for_ranges: %s\n", tt_strerror(rc));
            return false;
        }
    } else {
#pragma omp parallel for num_threads(w) schedule(static)
        for (size_t i = 0; i < len; i++)
            xs[i] = xs[i] * 0.999999 + 1e-6;
    }
    return true;
}

/* One system in this process: print "R system len width rep us" lines. */
static int run_system(const ropts *o)
{
    bool tt = !strcmp(o->system, "threadteam");
    if (!tt && strcmp(o->system, "libgomp")) {
        fprintf(stderr, "bench_ranges: unknown system %s\n", o->system);
        return 2;
    }
    size_t maxlen = 0;
    for (unsigned i = 0; i < o->nlens; i++)
        if (o->lens[i] > maxlen)
            maxlen = o->lens[i];
    xs = calloc(maxlen, sizeof *xs);
    if (!xs)
        return 1;
    for (unsigned wi = 0; wi < o->nwidths; wi++) {
        unsigned w = o->widths[wi];
        tt_pool *pool = NULL;
        if (tt) {
            tt_pool_attr *attr = NULL;
            int rc = tt_pool_attr_create(&attr);
            if (rc == TT_OK)
                rc = tt_pool_attr_set_threads(attr, w);
            if (rc == TT_OK)
                rc = tt_pool_create(&pool, attr);
            tt_pool_attr_destroy(attr);
            if (rc != TT_OK) {
                fprintf(stderr, "bench_ranges: tt_pool_create: %s\n", tt_strerror(rc));
                return 1;
            }
        }
        for (unsigned li = 0; li < o->nlens; li++) {
            size_t len = o->lens[li];
            for (int serial = 1; serial >= 0; serial--) {
                if (serial && !tt)
                    continue; /* the serial loop once, in the threadteam process */
                /* Untimed calls for WARM_NS first: a process's first calls
                 * start the team's threads, and on a guest whose idle
                 * vCPU the host halted the next few can take milliseconds
                 * each, raw OpenMP's and threadteam's alike, until the
                 * threads run on CPUs of their own (4 to 8 ms a call for
                 * up to five calls on host vm). Sized from a single first
                 * call, a repetition was then 3 or 4 calls, and its mean
                 * one of those: the p90 of the 10^3 row read 575 us. The
                 * repetitions are sized from the warm-up's last calls. */
                uint64_t w0 = bc_now_ns(), wl = w0;
                unsigned wcalls = 0, late = 0;
                while (bc_now_ns() - w0 < WARM_NS || wcalls < WARM_CALLS) {
                    if (!one_call(pool, len, w, tt, serial))
                        return 1;
                    wcalls++;
                    uint64_t t = bc_now_ns();
                    if (t - w0 >= WARM_NS / 2) {
                        if (!late)
                            wl = t;
                        late++;
                    }
                }
                double trial_us = late > 1 ? (double)(bc_now_ns() - wl) / 1000.0 / (late - 1)
                                           : (double)(bc_now_ns() - w0) / 1000.0 / wcalls;
                unsigned calls = calls_for(o, trial_us);
                for (unsigned r = 1; r <= o->reps; r++) {
                    uint64_t t0 = bc_now_ns();
                    for (unsigned k = 0; k < calls; k++)
                        if (!one_call(pool, len, w, tt, serial))
                            return 1;
                    double us = (double)(bc_now_ns() - t0) / 1000.0 / calls;
                    printf("R %s %zu %u %u %.4f\n", serial ? "serial" : o->system, len, w, r, us);
                }
            }
        }
        if (pool)
            tt_pool_destroy(pool);
    }
    fflush(stdout);
    free(xs);
    return 0;
}

/* ---- the parent: alternate the two systems' processes ------------------ */

typedef struct cell {
    double v[4096];
    size_t n;
} cell;

enum { SYS_TT = 0, SYS_GOMP, SYS_SERIAL, SYS_N };
static const char *const sys_names[SYS_N] = {"threadteam", "libgomp", "serial"};
static cell cells[SYS_N][MAXL][MAXL];

static int sys_index(const char *s)
{
    for (int i = 0; i < SYS_N; i++)
        if (!strcmp(s, sys_names[i]))
            return i;
    return -1;
}

static int spawn_one(const ropts *o, char **argv_child, int sys_slot, const char *system)
{
    int fd[2];
    if (pipe(fd) != 0)
        return 1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fd[1], 1);
    posix_spawn_file_actions_addclose(&fa, fd[0]);
    argv_child[sys_slot] = (char *)system;
    pid_t pid;
    int rc = posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv_child, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fd[1]);
    if (rc != 0) {
        close(fd[0]);
        fprintf(stderr, "bench_ranges: cannot run itself: %s\n", strerror(rc));
        return 1;
    }
    FILE *f = fdopen(fd[0], "r");
    char line[256], sys[32];
    size_t len;
    unsigned w, r;
    double us;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "R %31s %zu %u %u %lf", sys, &len, &w, &r, &us) != 5)
            continue;
        int s = sys_index(sys);
        unsigned li = 0, wi = 0;
        while (li < o->nlens && o->lens[li] != len)
            li++;
        while (wi < o->nwidths && o->widths[wi] != w)
            wi++;
        if (s < 0 || li == o->nlens || wi == o->nwidths)
            continue;
        cell *c = &cells[s][li][wi];
        if (c->n < sizeof c->v / sizeof c->v[0])
            c->v[c->n++] = us;
    }
    fclose(f);
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}

/* Summary rows in the columns of scripts/bench.sh (scenario "ranges",
 * param "len<N>"; the serial loop is threadteam's row of metric "serial"). */
static void write_csv(const ropts *o, unsigned li, unsigned wi, const bc_stats *st)
{
    FILE *f = fopen(o->csv, "a");
    if (!f) {
        perror(o->csv);
        return;
    }
    char host[64] = "";
    const char *eh = getenv("BENCH_HOST");
    if (eh && *eh)
        snprintf(host, sizeof host, "%s", eh);
    else if (gethostname(host, sizeof host) != 0)
        snprintf(host, sizeof host, "unknown");
    char *dot = strchr(host, '.');
    if (dot)
        *dot = '\0';
    char date[32];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%MZ", gmtime(&now));
    static const char *const sys_csv[SYS_N] = {"threadteam", "libgomp", "threadteam"};
    for (int s = 0; s < SYS_N; s++)
        if (st[s].n)
            fprintf(f, "%s,%s,%s,%u,%s,ranges,len%zu,%s,%u,none,,%zu,%.3f,%.3f,%.3f,,,,,\n",
                    o->label ? o->label : "", date, host, bc_affinity_cpus(), sys_csv[s],
                    o->lens[li], s == SYS_SERIAL ? "serial" : "call", o->widths[wi], st[s].n,
                    st[s].median, st[s].p10, st[s].p90);
    fclose(f);
}

static unsigned parse_list(const char *s, double *out, unsigned max)
{
    unsigned n = 0;
    char *dup = strdup(s), *save = NULL;
    for (char *t = strtok_r(dup, ",", &save); t && n < max; t = strtok_r(NULL, ",", &save))
        out[n++] = strtod(t, NULL);
    free(dup);
    return n;
}

int main(int argc, char **argv)
{
    ropts o;
    memset(&o, 0, sizeof o);
    o.rounds = 3;
    o.reps = 15;
    char *child_argv[2 * 8 + 4];
    int ca = 0;
    child_argv[ca++] = argv[0];
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        double list[MAXL];
        if (!v && strcmp(a, "--help")) {
            fprintf(stderr, "bench_ranges: %s needs a value\n", a);
            return 2;
        }
        if (!strcmp(a, "--widths")) {
            unsigned n = parse_list(v, list, MAXL);
            for (unsigned k = 0; k < n; k++)
                o.widths[o.nwidths++] = (unsigned)list[k];
        } else if (!strcmp(a, "--lens")) {
            unsigned n = parse_list(v, list, MAXL);
            for (unsigned k = 0; k < n; k++)
                o.lens[o.nlens++] = (size_t)list[k];
        } else if (!strcmp(a, "--rounds")) {
            o.rounds = (unsigned)atoi(v);
        } else if (!strcmp(a, "--reps")) {
            o.reps = (unsigned)atoi(v);
        } else if (!strcmp(a, "--calls")) {
            o.calls = (unsigned)atoi(v);
        } else if (!strcmp(a, "--system")) {
            o.system = v;
        } else if (!strcmp(a, "--csv")) {
            o.csv = v;
        } else if (!strcmp(a, "--label")) {
            o.label = v;
        } else {
            fprintf(stderr, "usage: bench_ranges [--widths L] [--lens L] [--rounds N] "
                            "[--reps N] [--calls N] [--system threadteam|libgomp]\n");
            return !strcmp(a, "--help") ? 0 : 2;
        }
        if (strcmp(a, "--system") && strcmp(a, "--csv") && strcmp(a, "--label") && ca < 2 * 8) {
            child_argv[ca++] = (char *)a;
            child_argv[ca++] = (char *)v;
        }
    }
    if (o.nwidths == 0)
        o.widths[o.nwidths++] = bc_affinity_cpus() < 2 ? 2 : bc_affinity_cpus();
    if (o.nlens == 0) {
        o.lens[0] = 1000;
        o.lens[1] = 100000;
        o.lens[2] = 1000000;
        o.nlens = 3;
    }
    if (o.reps < 1)
        o.reps = 1;
    if (o.reps > 200)
        o.reps = 200;
    if (o.system)
        return run_system(&o);

    child_argv[ca++] = "--system";
    int sys_slot = ca;
    child_argv[ca++] = NULL; /* filled per run */
    child_argv[ca] = NULL;
    int fails = 0;
    for (unsigned r = 0; r < o.rounds; r++) {
        /* Alternate which system goes first. */
        const char *first = r % 2 ? "libgomp" : "threadteam";
        const char *second = r % 2 ? "threadteam" : "libgomp";
        fails += spawn_one(&o, child_argv, sys_slot, first);
        fails += spawn_one(&o, child_argv, sys_slot, second);
    }
    printf("# tt_for_ranges (token per call) vs omp parallel for; us per call, median [p10, p90] "
           "over %u rounds x %u reps, separate processes\n",
           o.rounds, o.reps);
    printf("| len | width | serial | threadteam | libgomp | threadteam / libgomp |\n");
    printf("| ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for (unsigned wi = 0; wi < o.nwidths; wi++)
        for (unsigned li = 0; li < o.nlens; li++) {
            bc_stats st[SYS_N];
            for (int s = 0; s < SYS_N; s++) {
                cell *c = &cells[s][li][wi];
                st[s] = bc_stats_of(c->v, c->n);
            }
            printf("| %zu | %u | %.2f | %.2f [%.2f, %.2f] | %.2f [%.2f, %.2f] | %.2f |\n",
                   o.lens[li], o.widths[wi], st[SYS_SERIAL].median, st[SYS_TT].median,
                   st[SYS_TT].p10, st[SYS_TT].p90, st[SYS_GOMP].median, st[SYS_GOMP].p10,
                   st[SYS_GOMP].p90, st[SYS_TT].median / st[SYS_GOMP].median);
            if (o.csv)
                write_csv(&o, li, wi, st);
        }
    return fails ? 1 : 0;
}
