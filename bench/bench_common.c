/*
 * bench_common.c -- shared code of the wait benchmarks (see bench_common.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "bench_common.h"

#include <errno.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

const char *const bc_scenario_names[BC_SCENARIO_COUNT] = {"sections", "gaps", "acquire",
                                                          "nested"};
const bc_waits bc_no_waits = {NAN, NAN, NAN, NAN};

/* ------------------------------------------------------------------------ */
/* Clock and busy work                                                       */
/* ------------------------------------------------------------------------ */

uint64_t bc_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static double iters_per_us;

void bc_spin(uint64_t iters)
{
    uint64_t x = iters | 1u;
    for (uint64_t i = 0; i < iters; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        __asm__ __volatile__("" : "+r"(x));
    }
    __asm__ __volatile__("" ::"r"(x));
}

void bc_calibrate(void)
{
    if (iters_per_us > 0)
        return;
    /* Grow the count until one run takes at least 2 ms, then take the
     * fastest of several runs of about 10 ms each: the fastest run is the
     * one nothing interrupted. */
    uint64_t n = 1000;
    for (;;) {
        uint64_t t0 = bc_now_ns();
        bc_spin(n);
        uint64_t dt = bc_now_ns() - t0;
        if (dt >= 2000000u) {
            n = (uint64_t)((double)n * 10e6 / (double)dt);
            break;
        }
        n *= 2;
    }
    double best = 0;
    for (int r = 0; r < 7; r++) {
        uint64_t t0 = bc_now_ns();
        bc_spin(n);
        uint64_t dt = bc_now_ns() - t0;
        double rate = (double)n / ((double)dt / 1000.0);
        if (rate > best)
            best = rate;
    }
    iters_per_us = best;
}

double bc_iters_per_us(void)
{
    bc_calibrate();
    return iters_per_us;
}

uint64_t bc_iters_for_us(double us)
{
    bc_calibrate();
    double n = us * iters_per_us;
    return n < 0.5 ? 0 : (uint64_t)(n + 0.5);
}

void bc_sleep_us(double us)
{
    if (us <= 0)
        return;
    struct timespec ts;
    uint64_t ns = (uint64_t)(us * 1000.0);
    ts.tv_sec = (time_t)(ns / 1000000000u);
    ts.tv_nsec = (long)(ns % 1000000000u);
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

double bc_serial_baseline_us(unsigned sections, uint64_t iters)
{
    /* The fastest of several runs: the work's own cost, undisturbed. */
    double best = 0;
    for (int r = 0; r < 15; r++) {
        uint64_t t0 = bc_now_ns();
        for (unsigned s = 0; s < sections; s++)
            bc_spin(iters);
        double us = (double)(bc_now_ns() - t0) / 1000.0;
        if (r == 0 || us < best)
            best = us;
    }
    return best;
}

/* ------------------------------------------------------------------------ */
/* Statistics                                                                */
/* ------------------------------------------------------------------------ */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double quantile(const double *v, size_t n, double q)
{
    if (n == 0)
        return NAN;
    double pos = q * (double)(n - 1);
    size_t i = (size_t)pos;
    double f = pos - (double)i;
    if (i + 1 >= n)
        return v[n - 1];
    return v[i] + f * (v[i + 1] - v[i]);
}

bc_stats bc_stats_of(double *v, size_t n)
{
    bc_stats s = {NAN, NAN, NAN, NAN, NAN, NAN, n};
    if (n == 0)
        return s;
    qsort(v, n, sizeof *v, cmp_double);
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += v[i];
    s.median = quantile(v, n, 0.5);
    s.p10 = quantile(v, n, 0.1);
    s.p90 = quantile(v, n, 0.9);
    s.min = v[0];
    s.max = v[n - 1];
    s.mean = sum / (double)n;
    return s;
}

/* ------------------------------------------------------------------------ */
/* Command line                                                              */
/* ------------------------------------------------------------------------ */

unsigned bc_affinity_cpus(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return (unsigned)CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned)n : 1u;
}

const char bc_usage_options[] =
    "Options:\n"
    "  --scenario LIST  sections,gaps,acquire,nested or all (default all)\n"
    "  --widths LIST    team widths, e.g. 4,8 (oversubscribed ones too); default: all\n"
    "                   CPUs of the affinity set and three quarters of them (at least 2)\n"
    "  --calls N        calls per repetition (default: per scenario and parameter)\n"
    "  --reps N         repetitions, one value each (default 11, at most 256)\n"
    "  --warmup N       untimed calls before the repetitions (default 2)\n"
    "  --load K:P       K child processes, each busy P %% of every 10 ms, for the run\n"
    "  --csv FILE       append one row per repetition to FILE\n"
    "  --label TEXT     label of the CSV rows (e.g. main-4c73c2b)\n"
    "  --work LIST      sections: work per section in us (default 0,5,20,50; 0 = empty)\n"
    "  --gaps LIST      gaps: the caller's sleep between calls in us (default 0,100,1000,10000)\n"
    "  --max-seconds S  stop a configuration's repetitions after S seconds, once it has 3\n"
    "                   (default 5; 0: no cap)\n"
    "  --quiet          no table on stdout\n";

static void die_usage(const char *prog, const char *usage, const char *why, const char *arg)
{
    if (why)
        fprintf(stderr, "%s: %s%s%s\n", prog, why, arg ? ": " : "", arg ? arg : "");
    fprintf(stderr, "%s%s", usage, bc_usage_options);
    exit(2);
}

static unsigned parse_uint(const char *prog, const char *usage, const char *s, unsigned lo)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > 1000000u)
        die_usage(prog, usage, "bad number", s);
    return (unsigned)v;
}

static unsigned parse_list(const char *prog, const char *usage, const char *s, double *out,
                           unsigned max)
{
    unsigned n = 0;
    char *dup = strdup(s), *save = NULL;
    for (char *tok = strtok_r(dup, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *end;
        double v = strtod(tok, &end);
        if (end == tok || *end || v < 0 || n == max)
            die_usage(prog, usage, "bad list", s);
        out[n++] = v;
    }
    free(dup);
    if (n == 0)
        die_usage(prog, usage, "empty list", s);
    return n;
}

static bool width_seen(const bc_opts *o, unsigned w)
{
    for (unsigned i = 0; i < o->nwidths; i++)
        if (o->widths[i] == w)
            return true;
    return false;
}

void bc_parse(int argc, char **argv, const char *system, const char *usage, bc_opts *o)
{
    const char *prog = argv[0];
    memset(o, 0, sizeof *o);
    o->system = system;
    o->reps = 11;
    o->warmup = 2;
    o->label = "";
    o->max_seconds = 5;
    o->cpus = bc_affinity_cpus();
    bool any_scenario = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED_ARG()                                                                                 \
    do {                                                                                           \
        if (!v)                                                                                    \
            die_usage(prog, usage, "missing value for", a);                                      \
        i++;                                                                                       \
    } while (0)
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("%s%s", usage, bc_usage_options);
            exit(0);
        } else if (!strcmp(a, "--scenario")) {
            NEED_ARG();
            char *dup = strdup(v), *save = NULL;
            for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                bool ok = false;
                for (int s = 0; s < BC_SCENARIO_COUNT; s++)
                    if (!strcmp(t, "all") || !strcmp(t, bc_scenario_names[s])) {
                        o->scenario[s] = true;
                        ok = true;
                    }
                if (!ok)
                    die_usage(prog, usage, "unknown scenario", t);
            }
            free(dup);
            any_scenario = true;
        } else if (!strcmp(a, "--widths")) {
            NEED_ARG();
            double w[BC_MAX_WIDTHS];
            unsigned n = parse_list(prog, usage, v, w, BC_MAX_WIDTHS);
            for (unsigned k = 0; k < n; k++) {
                unsigned wi = (unsigned)w[k];
                if (wi < 1 || (double)wi != w[k])
                    die_usage(prog, usage, "bad width", v);
                if (!width_seen(o, wi))
                    o->widths[o->nwidths++] = wi;
            }
        } else if (!strcmp(a, "--calls")) {
            NEED_ARG();
            o->calls = parse_uint(prog, usage, v, 1);
        } else if (!strcmp(a, "--reps")) {
            NEED_ARG();
            o->reps = parse_uint(prog, usage, v, 1);
            if (o->reps > BC_MAX_REPS)
                o->reps = BC_MAX_REPS;
        } else if (!strcmp(a, "--warmup")) {
            NEED_ARG();
            o->warmup = parse_uint(prog, usage, v, 0);
        } else if (!strcmp(a, "--load")) {
            NEED_ARG();
            unsigned k, p;
            char tail;
            if (!strcmp(v, "none") || !strcmp(v, "0")) {
                o->load_procs = 0;
            } else if (sscanf(v, "%u:%u%c", &k, &p, &tail) == 2 && p <= 100 && k <= 1024) {
                o->load_procs = p ? k : 0;
                o->load_pct = p;
            } else {
                die_usage(prog, usage, "bad load (K:P)", v);
            }
        } else if (!strcmp(a, "--csv")) {
            NEED_ARG();
            o->csv = v;
        } else if (!strcmp(a, "--label")) {
            NEED_ARG();
            o->label = v;
        } else if (!strcmp(a, "--work")) {
            NEED_ARG();
            o->nwork = parse_list(prog, usage, v, o->work, BC_MAX_PARAMS);
        } else if (!strcmp(a, "--gaps")) {
            NEED_ARG();
            o->ngaps = parse_list(prog, usage, v, o->gaps, BC_MAX_PARAMS);
        } else if (!strcmp(a, "--max-seconds")) {
            NEED_ARG();
            char *end;
            o->max_seconds = strtod(v, &end);
            if (end == v || *end || o->max_seconds < 0)
                die_usage(prog, usage, "bad number", v);
        } else if (!strcmp(a, "--quiet")) {
            o->quiet = true;
        } else {
            die_usage(prog, usage, "unknown option", a);
        }
#undef NEED_ARG
    }
    if (!any_scenario)
        for (int s = 0; s < BC_SCENARIO_COUNT; s++)
            o->scenario[s] = true;
    if (o->nwidths == 0) {
        unsigned all = o->cpus < 2 ? 2 : o->cpus;
        unsigned three_q = o->cpus * 3 / 4;
        if (three_q < 2)
            three_q = 2;
        o->widths[o->nwidths++] = all;
        if (!width_seen(o, three_q))
            o->widths[o->nwidths++] = three_q;
    }
    if (o->nwork == 0) {
        /* 0: empty sections, the dispatch alone (EPCC style); 5, 20 and
         * 50 us are the scenario's sections. */
        o->work[0] = 0;
        o->work[1] = 5;
        o->work[2] = 20;
        o->work[3] = 50;
        o->nwork = 4;
    }
    if (o->ngaps == 0) {
        o->gaps[0] = 0;
        o->gaps[1] = 100;
        o->gaps[2] = 1000;
        o->gaps[3] = 10000;
        o->ngaps = 4;
    }
}

unsigned bc_default_calls(const bc_opts *o, enum bc_scenario s, double param_us)
{
    if (o->calls)
        return o->calls;
    /* Short repetitions (a few ms): on a host with other users, a median
     * over many short repetitions is less often hit by another process's
     * time slice than one over few long ones. */
    switch (s) {
    case BC_SECTIONS: /* a call is 1 to 10 ms */
        return 1;
    case BC_GAPS: /* a call is 50 us + the gap */
        return param_us >= 10000 ? 2 : param_us >= 1000 ? 3 : 10;
    case BC_ACQUIRE: /* 1 ms */
        return 2;
    case BC_NESTED: /* 2 ms on threadteam, far more on libgomp */
        return 1;
    default:
        return 1;
    }
}

/* ------------------------------------------------------------------------ */
/* Load                                                                      */
/* ------------------------------------------------------------------------ */

#define BC_MAX_LOAD 1024
static pid_t load_pids[BC_MAX_LOAD];
static volatile sig_atomic_t load_count;
static char load_name[32] = "none";
/* Signals after which the load must not outlive the run. */
static const int load_sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGSEGV,
                                SIGABRT, SIGBUS, SIGFPE, SIGPIPE};

static void load_child(unsigned pct, pid_t parent)
{
    /* Die with the parent, also when it is killed by SIGKILL; the check of
     * the parent's pid closes the race of a parent that died before. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    load_count = 0;
    for (size_t i = 0; i < sizeof load_sigs / sizeof load_sigs[0]; i++)
        signal(load_sigs[i], SIG_DFL);
    if (getppid() != parent)
        _exit(0);
    const uint64_t period = 10000000u; /* 10 ms */
    const uint64_t busy = period * pct / 100u;
    uint64_t next = bc_now_ns();
    for (;;) {
        if (getppid() != parent)
            _exit(0);
        uint64_t start = next;
        while (bc_now_ns() - start < busy)
            bc_spin(1000);
        next = start + period;
        uint64_t now = bc_now_ns();
        if (now < next) {
            struct timespec ts = {(time_t)(next / 1000000000u), (long)(next % 1000000000u)};
            clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
        } else {
            next = now; /* fell behind (preempted): start a new period */
        }
    }
}

void bc_load_stop(void)
{
    int n = load_count;
    load_count = 0;
    for (int i = 0; i < n; i++)
        if (load_pids[i] > 0)
            kill(load_pids[i], SIGKILL);
    for (int i = 0; i < n; i++)
        if (load_pids[i] > 0)
            waitpid(load_pids[i], NULL, 0);
}

static void load_signal(int sig)
{
    /* Async-signal-safe: kill and waitpid only, then die of the signal. */
    int n = load_count;
    load_count = 0;
    for (int i = 0; i < n; i++)
        if (load_pids[i] > 0)
            kill(load_pids[i], SIGKILL);
    signal(sig, SIG_DFL);
    raise(sig);
}

void bc_load_start(const bc_opts *o)
{
    if (o->load_procs == 0)
        return;
    snprintf(load_name, sizeof load_name, "%u:%u", o->load_procs, o->load_pct);
    for (size_t i = 0; i < sizeof load_sigs / sizeof load_sigs[0]; i++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = load_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(load_sigs[i], &sa, NULL);
    }
    atexit(bc_load_stop);
    fflush(NULL);
    pid_t parent = getpid();
    for (unsigned k = 0; k < o->load_procs && k < BC_MAX_LOAD; k++) {
        pid_t pid = fork();
        if (pid == 0) {
            load_child(o->load_pct, parent);
            _exit(0);
        }
        if (pid < 0) {
            perror("fork (load)");
            exit(1);
        }
        load_pids[load_count] = pid;
        load_count = load_count + 1;
    }
    /* Let the load settle into its period before anything is timed. */
    bc_sleep_us(50000);
}

const char *bc_load_name(const bc_opts *o)
{
    (void)o;
    return load_name;
}

/* ------------------------------------------------------------------------ */
/* Series, CSV and table                                                     */
/* ------------------------------------------------------------------------ */

void bc_series_init(bc_series *s, const char *scenario, const char *param, const char *metric,
                    unsigned width, unsigned calls, unsigned sections, double baseline_us)
{
    memset(s, 0, sizeof *s);
    s->scenario = scenario;
    snprintf(s->param, sizeof s->param, "%s", param);
    s->metric = metric;
    s->width = width;
    s->calls = calls;
    s->sections = sections;
    s->baseline_us = baseline_us;
}

void bc_series_add(bc_series *s, double per_call_us, bc_waits w)
{
    if (s->n >= BC_MAX_REPS)
        return;
    s->value[s->n] = per_call_us;
    s->waits[s->n] = w;
    s->n++;
}

static void fmt_num(char *buf, size_t len, double v, const char *fmt)
{
    if (isnan(v))
        buf[0] = '\0';
    else
        snprintf(buf, len, fmt, v);
}

#define BC_CSV_RAW_HEADER                                                                          \
    "label,system,scenario,param,metric,width,cpus,load,calls,rep,value_us,overhead_us,"          \
    "join_sleeps,barrier_sleeps,member_parks,preemptions\n"

void bc_table_header(const bc_opts *o)
{
    if (o->quiet)
        return;
    printf("# %s: %u CPUs in the affinity set, load %s, %u reps, spin %.1f iters/us\n", o->system,
           o->cpus, load_name, o->reps, bc_iters_per_us());
    printf("%-9s %-12s %-13s %5s %5s %11s %11s %11s %13s\n", "scenario", "param", "metric",
           "width", "calls", "median_us", "p10_us", "p90_us", "ovh_us/sect");
}

void bc_series_emit(const bc_opts *o, bc_series *s)
{
    double ovh[BC_MAX_REPS];
    for (unsigned i = 0; i < s->n; i++)
        ovh[i] = s->sections && !isnan(s->baseline_us)
                     ? (s->value[i] - s->baseline_us) / (double)s->sections
                     : NAN;
    if (o->csv) {
        FILE *f = fopen(o->csv, "a");
        if (!f) {
            perror(o->csv);
            exit(1);
        }
        fseek(f, 0, SEEK_END);
        if (ftell(f) == 0)
            fputs(BC_CSV_RAW_HEADER, f);
        for (unsigned i = 0; i < s->n; i++) {
            char ov[32], js[32], bs[32], mp[32], pr[32];
            fmt_num(ov, sizeof ov, ovh[i], "%.4f");
            fmt_num(js, sizeof js, s->waits[i].join_sleeps, "%.4f");
            fmt_num(bs, sizeof bs, s->waits[i].barrier_sleeps, "%.4f");
            fmt_num(mp, sizeof mp, s->waits[i].member_parks, "%.4f");
            fmt_num(pr, sizeof pr, s->waits[i].preemptions, "%.4f");
            fprintf(f, "%s,%s,%s,%s,%s,%u,%u,%s,%u,%u,%.4f,%s,%s,%s,%s,%s\n", o->label, o->system,
                    s->scenario, s->param, s->metric, s->width, o->cpus, load_name, s->calls, i,
                    s->value[i], ov, js, bs, mp, pr);
        }
        fclose(f);
    }
    if (!o->quiet) {
        double v[BC_MAX_REPS];
        memcpy(v, s->value, s->n * sizeof v[0]);
        bc_stats st = bc_stats_of(v, s->n);
        char ov[32] = "";
        if (s->sections && !isnan(s->baseline_us)) {
            bc_stats so = bc_stats_of(ovh, s->n);
            fmt_num(ov, sizeof ov, so.median, "%.3f");
        }
        printf("%-9s %-12s %-13s %5u %5u %11.2f %11.2f %11.2f %13s\n", s->scenario, s->param,
               s->metric, s->width, s->calls, st.median, st.p10, st.p90, ov);
        if (s->n && !isnan(s->waits[0].join_sleeps)) {
            double js = 0, bs = 0, mp = 0, pr = 0;
            for (unsigned i = 0; i < s->n; i++) {
                js += s->waits[i].join_sleeps;
                bs += s->waits[i].barrier_sleeps;
                mp += s->waits[i].member_parks;
                pr += s->waits[i].preemptions;
            }
            double n = (double)s->n;
            printf("%-9s   waits per call: join %.2f  barrier %.2f  parks %.2f  preempt %.2f\n", "",
                   js / n, bs / n, mp / n, pr / n);
        }
        fflush(stdout);
    }
}

/* ------------------------------------------------------------------------ */
/* The harness                                                               */
/* ------------------------------------------------------------------------ */

const char *const bc_acquire_names[BC_ACQ_COUNT] = {"team", "pool", "newpool"};

/* Serial baselines, measured before any thread or load exists. */
typedef struct bc_baselines {
    double sections[BC_MAX_PARAMS]; /* BC_SECTIONS_PER_CALL x work[i]     */
    double gap_call, gap_first;     /* BC_GAP_SECTIONS x 5 us, and one    */
    double acquire;                 /* BC_ACQUIRE_SECTIONS x 20 us        */
    double nested;                  /* BC_NESTED_SPLITS x 20 us           */
} bc_baselines;

static void fmt_param_us(char *buf, size_t len, double us)
{
    snprintf(buf, len, "%gus", us);
}

static int run_config(const bc_opts *o, const bc_driver *d, bc_call c, const char *param,
                      double base_call, double base_first)
{
    void *ctx = d->open(&c);
    if (!ctx) {
        fprintf(stderr, "%s: %s %s width %u: could not be set up, skipped\n", d->system,
                bc_scenario_names[c.scenario], param, c.width);
        return 1;
    }
    const char *scen = bc_scenario_names[c.scenario];
    bc_series call, first, build;
    bc_series_init(&call, scen, param, "call", c.width, c.calls, c.sections, base_call);
    bc_series_init(&first, scen, param, "first", c.width, c.calls, 1, base_first);
    bc_series_init(&build, scen, param, "build_destroy", c.width, c.calls, c.sections, base_call);
    int err = 0;
    bc_rep r;
    if (o->warmup) {
        bc_call wc = c;
        wc.calls = o->warmup;
        err = d->rep(ctx, &wc, &r);
    }
    uint64_t t_start = bc_now_ns();
    for (unsigned i = 0; i < o->reps && !err; i++) {
        /* A time cap per configuration keeps a run on a crowded host
         * bounded; at least three repetitions are always taken. */
        if (i >= 3 && o->max_seconds > 0 &&
            (double)(bc_now_ns() - t_start) / 1e9 > o->max_seconds)
            break;
        memset(&r, 0, sizeof r);
        r.first_us = r.build_us = NAN;
        r.waits = bc_no_waits;
        err = d->rep(ctx, &c, &r);
        if (err)
            break;
        bc_series_add(&call, r.call_us, r.waits);
        if (!isnan(r.first_us))
            bc_series_add(&first, r.first_us, r.waits);
        if (!isnan(r.build_us))
            bc_series_add(&build, r.build_us, r.waits);
    }
    d->close(ctx, &c);
    if (err)
        fprintf(stderr, "%s: %s %s width %u: failed, series dropped\n", d->system, scen, param,
                c.width);
    else {
        if (first.n)
            bc_series_emit(o, &first);
        bc_series_emit(o, &call);
        if (build.n)
            bc_series_emit(o, &build);
    }
    return err ? 1 : 0;
}

int bc_main(int argc, char **argv, const bc_driver *d, const char *usage)
{
    bc_opts o;
    bc_parse(argc, argv, d->system, usage, &o);

    /* Calibrate and take the serial baselines while this process is alone. */
    bc_calibrate();
    bc_baselines b;
    memset(&b, 0, sizeof b);
    const uint64_t it5 = bc_iters_for_us(BC_GAP_WORK_US), it20 = bc_iters_for_us(20.0);
    if (o.scenario[BC_SECTIONS])
        for (unsigned i = 0; i < o.nwork; i++)
            b.sections[i] = bc_serial_baseline_us(BC_SECTIONS_PER_CALL, bc_iters_for_us(o.work[i]));
    if (o.scenario[BC_GAPS]) {
        b.gap_call = bc_serial_baseline_us(BC_GAP_SECTIONS, it5);
        b.gap_first = b.gap_call / BC_GAP_SECTIONS;
    }
    if (o.scenario[BC_ACQUIRE])
        b.acquire = bc_serial_baseline_us(BC_ACQUIRE_SECTIONS, it20);
    if (o.scenario[BC_NESTED])
        b.nested = bc_serial_baseline_us(BC_NESTED_SPLITS, it20);

    bc_load_start(&o);
    BC_MARKER_INIT();
    bc_table_header(&o);

    int failures = 0;
    char param[32];
    for (int s = 0; s < BC_SCENARIO_COUNT; s++) {
        if (!o.scenario[s])
            continue;
        BC_MARKER_START(bc_scenario_names[s]);
        for (unsigned wi = 0; wi < o.nwidths; wi++) {
            bc_call c;
            memset(&c, 0, sizeof c);
            c.scenario = (enum bc_scenario)s;
            c.width = o.widths[wi];
            switch (s) {
            case BC_SECTIONS:
                for (unsigned i = 0; i < o.nwork; i++) {
                    c.sections = BC_SECTIONS_PER_CALL;
                    c.iters = bc_iters_for_us(o.work[i]);
                    c.calls = bc_default_calls(&o, BC_SECTIONS, o.work[i]);
                    fmt_param_us(param, sizeof param, o.work[i]);
                    failures += run_config(&o, d, c, param, b.sections[i], NAN);
                }
                break;
            case BC_GAPS:
                for (unsigned i = 0; i < o.ngaps; i++) {
                    c.sections = BC_GAP_SECTIONS;
                    c.iters = it5;
                    c.gap_us = o.gaps[i];
                    c.calls = bc_default_calls(&o, BC_GAPS, o.gaps[i]);
                    fmt_param_us(param, sizeof param, o.gaps[i]);
                    failures += run_config(&o, d, c, param, b.gap_call, b.gap_first);
                }
                break;
            case BC_ACQUIRE:
                for (unsigned v = 0; v < d->acquire_variants && v < BC_ACQ_COUNT; v++) {
                    c.sections = BC_ACQUIRE_SECTIONS;
                    c.iters = it20;
                    c.variant = (int)v;
                    c.calls = bc_default_calls(&o, BC_ACQUIRE, 20.0);
                    failures += run_config(&o, d, c, bc_acquire_names[v], b.acquire, NAN);
                }
                break;
            case BC_NESTED:
                c.sections = BC_NESTED_SPLITS;
                c.iters = it20;
                c.calls = bc_default_calls(&o, BC_NESTED, 20.0);
                failures += run_config(&o, d, c, "pairs", b.nested, NAN);
                break;
            default:
                break;
            }
        }
        BC_MARKER_STOP(bc_scenario_names[s]);
    }
    BC_MARKER_CLOSE();
    bc_load_stop();
    return failures ? 1 : 0;
}
