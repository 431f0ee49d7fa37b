/*
 * bench_common.h -- what the wait benchmarks share: the clock, calibrated
 * busy work, order statistics, the command line, the load generator, the
 * per-repetition CSV rows and the LIKWID marker regions.
 *
 * Compiled into each driver (bench/wait_scenarios, omp/wait_omp as
 * wait_omp_gomp and wait_omp_llvm, bench/bench_ranges) so that threadteam
 * and raw OpenMP are timed by the same code. Nothing here uses OpenMP or
 * threadteam: the drivers own their systems.
 */
#ifndef TT_BENCH_COMMON_H
#define TT_BENCH_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

/* The OpenMP runtime a raw-OpenMP baseline (omp/<name>.c) is built against: each
 * is compiled twice, by GCC (libgomp) and by clang (LLVM libomp). */
#if defined(__clang__)
#define BC_OMP_RUNTIME "libomp"
#else
#define BC_OMP_RUNTIME "libgomp"
#endif

/* ------------------------------------------------------------------------ */
/* Clock and busy work                                                       */
/* ------------------------------------------------------------------------ */

/** CLOCK_MONOTONIC in nanoseconds. */
uint64_t bc_now_ns(void);

/** Calibrate the spin loop against the clock (once per process; later calls
 *  return at once). Call it before any thread of the system under test or
 *  any load process exists, so that nothing else runs during it. */
void bc_calibrate(void);

/** Spin-loop iterations per microsecond found by bc_calibrate. */
double bc_iters_per_us(void);

/** Iterations of busy work that take `us` microseconds. */
uint64_t bc_iters_for_us(double us);

/** Busy work: `iters` iterations of a dependent integer chain (no memory
 *  traffic, no clock reads, so a preempted worker still owes its work). */
void bc_spin(uint64_t iters);

/** Sleep `us` microseconds (0: return at once). */
void bc_sleep_us(double us);

/* ------------------------------------------------------------------------ */
/* Order statistics                                                          */
/* ------------------------------------------------------------------------ */

typedef struct bc_stats {
    double median, p10, p90, min, max, mean;
    size_t n;
} bc_stats;

/** Statistics of v[0..n) (v is sorted in place). Quantiles interpolate
 *  linearly between order statistics. */
bc_stats bc_stats_of(double *v, size_t n);

/* ------------------------------------------------------------------------ */
/* Command line, shared by every wait driver                                 */
/* ------------------------------------------------------------------------ */

#define BC_MAX_WIDTHS 32
#define BC_MAX_PARAMS 8

enum bc_scenario {
    BC_SECTIONS = 0,
    BC_GAPS,
    BC_ACQUIRE,
    BC_NESTED,
    BC_SCENARIO_COUNT
};

typedef struct bc_opts {
    const char *system;          /* "threadteam", "libgomp", "libomp"   */
    bool scenario[BC_SCENARIO_COUNT];
    unsigned widths[BC_MAX_WIDTHS];
    unsigned nwidths;
    unsigned calls;              /* 0: the scenario's default            */
    unsigned reps;               /* repetitions (one value each)         */
    unsigned warmup;             /* untimed calls before the reps        */
    unsigned load_procs;         /* --load K:P                           */
    unsigned load_pct;
    const char *csv;             /* append per-repetition rows here      */
    const char *label;
    bool quiet;                  /* no table on stdout                   */
    double max_seconds;          /* cap per configuration (0: none)      */
    /* Scenario parameters (µs), overridable for experiments. */
    double work[BC_MAX_PARAMS];  /* sections: work per section           */
    unsigned nwork;
    double gaps[BC_MAX_PARAMS];  /* gaps: caller's sleep between calls   */
    unsigned ngaps;
    unsigned cpus;               /* CPUs of the affinity set             */
} bc_opts;

/** Names of the scenarios ("sections", "gaps", "acquire", "nested"). */
extern const char *const bc_scenario_names[BC_SCENARIO_COUNT];

/** The options' help text, printed after the program's own usage line. */
extern const char bc_usage_options[];

/** Parse the common options (see the header comment of
 *  bench/wait_scenarios.c). Exits with a usage message on a bad option.
 *  `usage` is the program's own text, printed for --help. */
void bc_parse(int argc, char **argv, const char *system, const char *usage, bc_opts *o);

/** CPUs in the calling thread's affinity set. */
unsigned bc_affinity_cpus(void);

/* Defaults per scenario (a call of each). */
#define BC_SECTIONS_PER_CALL 200u
#define BC_GAP_SECTIONS 10u
#define BC_GAP_WORK_US 5.0
#define BC_ACQUIRE_SECTIONS 50u
#define BC_ACQUIRE_WORK_US 20.0
#define BC_NESTED_SPLITS 100u
#define BC_NESTED_WORK_US 20.0

/** Default calls per repetition of a scenario (when --calls is not given). */
unsigned bc_default_calls(const bc_opts *o, enum bc_scenario s, double param_us);

/* ------------------------------------------------------------------------ */
/* Load: K child processes, each busy P % of every 10 ms                     */
/* ------------------------------------------------------------------------ */

/** Start the load of `o` (nothing for K = 0). The children die with the
 *  process (PR_SET_PDEATHSIG) and are killed in an atexit handler and in
 *  handlers of the fatal signals. Call it before any thread exists: a fork
 *  after libgomp started threads may hang the child. */
void bc_load_start(const bc_opts *o);
/** Stop the load now (also done at exit). */
void bc_load_stop(void);
/** "none" or "K:P", for the CSV. */
const char *bc_load_name(const bc_opts *o);

/* ------------------------------------------------------------------------ */
/* Serial baseline: sections * work on the calling thread alone              */
/* ------------------------------------------------------------------------ */

/** Time in µs (the fastest of 15 runs) of `sections` sections of `iters`
 *  busy iterations run serially on the calling thread (measured before any other thread runs,
 *  so the overhead of a system is call - baseline, free of the calibration
 *  error). */
double bc_serial_baseline_us(unsigned sections, uint64_t iters);

/* ------------------------------------------------------------------------ */
/* Results                                                                   */
/* ------------------------------------------------------------------------ */

/** Wait counters per call (NaN for systems without counters). */
typedef struct bc_waits {
    double join_sleeps, barrier_sleeps, member_parks, preemptions;
} bc_waits;

extern const bc_waits bc_no_waits;

/** One measured quantity of one configuration: the values of its
 *  repetitions, each the mean over `calls` calls, in µs. */
typedef struct bc_series {
    const char *scenario;
    char param[32];       /* "5us", "gap1000us", "team", "pairs", ...     */
    const char *metric;   /* "call", "first", "build_destroy"             */
    unsigned width;
    unsigned calls;
    unsigned sections;    /* sections per call, for the overhead (0: none) */
    double baseline_us;   /* serial sections * work (NaN: no overhead)    */
    double value[256];
    bc_waits waits[256];
    unsigned n;
} bc_series;

/** Start a series. */
void bc_series_init(bc_series *s, const char *scenario, const char *param,
                    const char *metric, unsigned width, unsigned calls,
                    unsigned sections, double baseline_us);
/** Add one repetition: its per-call value and wait counters. */
void bc_series_add(bc_series *s, double per_call_us, bc_waits w);
/** Write the series' rows to the CSV file (if any) and its line to the
 *  table on stdout (unless quiet). */
void bc_series_emit(const bc_opts *o, bc_series *s);

/** Print the table's header on stdout (unless quiet). */
void bc_table_header(const bc_opts *o);

/** Maximum repetitions a series holds. */
#define BC_MAX_REPS 256u

/* ------------------------------------------------------------------------ */
/* The harness: scenarios, widths, repetitions; a driver supplies the calls  */
/* ------------------------------------------------------------------------ */

/** Variants of `acquire` (threadteam has all three; OpenMP only the first). */
enum bc_acquire_variant { BC_ACQ_TEAM = 0, BC_ACQ_POOL, BC_ACQ_NEWPOOL, BC_ACQ_COUNT };
extern const char *const bc_acquire_names[BC_ACQ_COUNT];

/** What one repetition runs. */
typedef struct bc_call {
    enum bc_scenario scenario;
    unsigned width;
    unsigned sections;  /* sections per call (nested: splits per call)   */
    uint64_t iters;     /* busy work of one section, per participant     */
    double gap_us;      /* gaps: the caller's sleep before each call     */
    int variant;        /* acquire: enum bc_acquire_variant              */
    unsigned calls;     /* calls in this repetition                      */
} bc_call;

/** What one repetition measured, each per call. */
typedef struct bc_rep {
    double call_us;     /* the whole call                                */
    double first_us;    /* gaps: start of the call to the end of section 1 */
    double build_us;    /* acquire/newpool: build to destroy             */
    bc_waits waits;     /* bc_no_waits when the system has no counters   */
} bc_rep;

typedef struct bc_driver {
    const char *system;
    unsigned acquire_variants;  /* how many of enum bc_acquire_variant    */
    /* Build what a configuration holds (a pool, a team) and return it, or
     * NULL with a message on stderr (the configuration is skipped). */
    void *(*open)(const bc_call *c);
    void (*close)(void *ctx, const bc_call *c);
    /* Run c->calls calls; return 0, or an error with a message on stderr. */
    int (*rep)(void *ctx, const bc_call *c, bc_rep *out);
} bc_driver;

/** The whole driver: parse the command line, calibrate, measure the serial
 *  baselines, start the load, run every selected scenario at every width
 *  and print / write the results. Returns the process's exit status. */
int bc_main(int argc, char **argv, const bc_driver *d, const char *usage);

/* ------------------------------------------------------------------------ */
/* LIKWID marker regions (configure --with-likwid: TT_HAVE_LIKWID)           */
/* ------------------------------------------------------------------------ */

#if defined(TT_HAVE_LIKWID) && TT_HAVE_LIKWID
#ifndef LIKWID_PERFMON
#define LIKWID_PERFMON
#endif
/* likwid.h: LIKWID 4 defines the marker macros there, LIKWID 5 includes
 * likwid-marker.h from it; configure checks for likwid.h. */
#include <likwid.h>
#define BC_MARKER_INIT() LIKWID_MARKER_INIT
#define BC_MARKER_START(name) LIKWID_MARKER_START(name)
#define BC_MARKER_STOP(name) LIKWID_MARKER_STOP(name)
#define BC_MARKER_CLOSE() LIKWID_MARKER_CLOSE
#else
#define BC_MARKER_INIT() ((void)0)
#define BC_MARKER_START(name) ((void)(name))
#define BC_MARKER_STOP(name) ((void)(name))
#define BC_MARKER_CLOSE() ((void)0)
#endif

#endif /* TT_BENCH_COMMON_H */
