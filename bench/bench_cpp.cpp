/*
 * bench_cpp.cpp -- the C++ front (include/threadteam.hpp) against the same
 * call through the C API. One side per process (scripts/bench-cpp.sh
 * alternates them and takes medians); both sides run the same kernel
 * functions (noinline, so that each side calls them and neither gets a
 * differently optimised copy), on a token minted per call:
 *
 *   --system c|cpp   tt_exec_init + the C entry with a C callback, or
 *                    pool.token(W) + the C++ entry with a lambda
 *   --scenario S     ranges  axpy over N doubles: tt_for_ranges against
 *                            exec::for_ranges (--n 1000,100000,1000000)
 *                    fork    W jobs, each an axpy over its block of N
 *                            doubles: tt_fork against exec::fork
 *                    scope   a team scope whose one section splits an axpy
 *                            over N doubles by rank: tt_team_scope +
 *                            tt_scope_run against team_scope + scope::run
 *                    sum     a dot product of N doubles, grain 2048:
 *                            tt_reduce_sum_d against exec::reduce_sum
 *                            (--n 10000,1000000 by default)
 *   --reps N, --calls N, --n LIST
 * Prints one line per configuration, as bench_paths does: `scenario param
 * us_per_call p50 p90` (the median over the repetitions of the mean call,
 * then the median and 90th percentile of the single calls).
 * Width: the pool's default (omp_get_max_threads()).
 */
#include <threadteam.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define BENCH_NOINLINE __attribute__((noinline))

namespace {

double now_us()
{
    using namespace std::chrono;
    return double(duration_cast<nanoseconds>(steady_clock::now().time_since_epoch()).count()) * 1e-3;
}

double median(std::vector<double> v)
{
    if (v.empty())
        return 0.0;
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double p90(std::vector<double> v)
{
    if (v.empty())
        return 0.0;
    std::sort(v.begin(), v.end());
    size_t k = (9 * v.size() + 9) / 10;
    return v[k > 0 ? k - 1 : 0];
}

void need_ok(int rc, const char *what)
{
    if (rc != TT_OK) {
        std::fprintf(stderr, "bench_cpp: %s: %s\n", what, tt_strerror(rc));
        std::exit(1);
    }
}

/* ---- the kernels, shared by both sides ------------------------------- */

struct axpy {
    double a;
    const double *x;
    double *y;
};

BENCH_NOINLINE void axpy_range(const axpy *p, size_t b, size_t e)
{
    for (size_t i = b; i < e; i++)
        p->y[i] += p->a * p->x[i];
}

BENCH_NOINLINE double dot_range(const double *x, const double *y, size_t b, size_t e)
{
    double s = 0.0;
    for (size_t i = b; i < e; i++)
        s += x[i] * y[i];
    return s;
}

/* ---- the C side's callbacks ------------------------------------------ */

void c_axpy_body(void *arg, size_t b, size_t e) { axpy_range(static_cast<const axpy *>(arg), b, e); }

struct fork_arg {
    const axpy *p;
    size_t n;
    unsigned jobs;
};

void c_fork_job(void *arg, unsigned i, tt_exec *child)
{
    (void)child;
    const fork_arg *f = static_cast<const fork_arg *>(arg);
    axpy_range(f->p, f->n * i / f->jobs, f->n * (i + 1) / f->jobs);
}

struct scope_arg {
    const axpy *p;
    size_t n;
};

void c_section(void *arg, tt_section *s)
{
    const scope_arg *a = static_cast<const scope_arg *>(arg);
    unsigned r = tt_section_rank(s), z = tt_section_size(s);
    axpy_range(a->p, a->n * r / z, a->n * (r + 1) / z);
}

void c_scope(void *arg, tt_scope *scope) { need_ok(tt_scope_run(scope, c_section, arg), "tt_scope_run"); }

struct dot_arg {
    const double *x, *y;
};

double c_dot_body(void *arg, size_t b, size_t e)
{
    const dot_arg *d = static_cast<const dot_arg *>(arg);
    return dot_range(d->x, d->y, b, e);
}

volatile double sink;

} // namespace

int main(int argc, char **argv)
{
    std::string system = "c", scenario = "ranges";
    int reps = 11, calls = 0;
    std::vector<size_t> sizes;
    for (int i = 1; i < argc; i++) {
        if (!std::strcmp(argv[i], "--system") && i + 1 < argc)
            system = argv[++i];
        else if (!std::strcmp(argv[i], "--scenario") && i + 1 < argc)
            scenario = argv[++i];
        else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = std::atoi(argv[++i]);
        else if (!std::strcmp(argv[i], "--calls") && i + 1 < argc)
            calls = std::atoi(argv[++i]);
        else if (!std::strcmp(argv[i], "--n") && i + 1 < argc) {
            for (char *t = std::strtok(argv[++i], ","); t; t = std::strtok(nullptr, ","))
                sizes.push_back(std::strtoull(t, nullptr, 10));
        } else {
            std::fprintf(stderr, "usage: bench_cpp --system c|cpp --scenario ranges|fork|scope|sum "
                                 "[--n LIST] [--reps N] [--calls N]\n");
            return 2;
        }
    }
    bool cpp = system == "cpp";
    if (!cpp && system != "c") {
        std::fprintf(stderr, "bench_cpp: --system c|cpp\n");
        return 2;
    }
    if (reps < 1 || reps > 1000)
        reps = 11;
    if (sizes.empty()) {
        if (scenario == "sum")
            sizes = {10000, 1000000};
        else
            sizes = {1000, 100000, 1000000};
    }
    const int sc = scenario == "ranges" ? 0 : scenario == "fork" ? 1 : scenario == "scope" ? 2 : scenario == "sum" ? 3 : -1;
    if (sc < 0) {
        std::fprintf(stderr, "bench_cpp: unknown scenario %s\n", scenario.c_str());
        return 2;
    }
    tt::pool pool;
    const unsigned W = pool.width();

    for (size_t n : sizes) {
        std::vector<double> x(n), y(n);
        for (size_t i = 0; i < n; i++) {
            x[i] = double(i);
            y[i] = 1.0;
        }
        axpy p{1e-9, x.data(), y.data()};
        fork_arg fa{&p, n, W};
        scope_arg sa{&p, n};
        dot_arg da{x.data(), y.data()};
        int c = calls ? calls : (n <= 10000 ? 4000 : n <= 100000 ? 800 : 100);

        /* One call of the configuration on the chosen side. */
        auto one = [&]() {
            if (sc == 0) {
                if (cpp) {
                    pool.token(W).for_ranges(n, 1, [&](size_t b, size_t e) { axpy_range(&p, b, e); });
                } else {
                    tt_exec ex;
                    need_ok(tt_exec_init(&ex, pool.native(), W), "tt_exec_init");
                    need_ok(tt_for_ranges(&ex, n, 1, c_axpy_body, &p), "tt_for_ranges");
                }
            } else if (sc == 1) {
                if (cpp) {
                    std::move(pool.token(W)).fork(W, [&](unsigned i, tt::exec &&) {
                        axpy_range(&p, n * i / W, n * (i + 1) / W);
                    });
                } else {
                    tt_exec ex;
                    need_ok(tt_exec_init(&ex, pool.native(), W), "tt_exec_init");
                    need_ok(tt_fork(&ex, W, c_fork_job, &fa), "tt_fork");
                }
            } else if (sc == 2) {
                if (cpp) {
                    pool.token(W).team_scope([&](tt::scope &sc) {
                        sc.run([&](tt::section &s) {
                            unsigned r = s.rank(), z = s.size();
                            axpy_range(&p, n * r / z, n * (r + 1) / z);
                        });
                    });
                } else {
                    tt_exec ex;
                    need_ok(tt_exec_init(&ex, pool.native(), W), "tt_exec_init");
                    need_ok(tt_team_scope(&ex, c_scope, &sa), "tt_team_scope");
                }
            } else {
                double s = 0.0;
                if (cpp) {
                    s = pool.token(W).reduce_sum(n, 2048, [&](size_t b, size_t e) {
                        return dot_range(x.data(), y.data(), b, e);
                    });
                } else {
                    tt_exec ex;
                    need_ok(tt_exec_init(&ex, pool.native(), W), "tt_exec_init");
                    need_ok(tt_reduce_sum_d(&ex, n, 2048, c_dot_body, &da, &s), "tt_reduce_sum_d");
                }
                sink = s;
            }
        };
        std::vector<double> rep_us, single;
        single.reserve(size_t(c) * size_t(reps));
        for (int r = -1; r < reps; r++) {
            double t0 = now_us();
            for (int k = 0; k < c; k++) {
                double a = now_us();
                one();
                if (r >= 0)
                    single.push_back(now_us() - a);
            }
            if (r >= 0)
                rep_us.push_back((now_us() - t0) / c);
        }
        std::printf("%s n=%zu %.3f %.3f %.3f\n", scenario.c_str(), n, median(rep_us), median(single),
                    p90(single));
        std::fflush(stdout);
    }
    return 0;
}
