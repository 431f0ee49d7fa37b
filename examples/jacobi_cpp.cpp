/*
 * jacobi_cpp.cpp -- jacobi.c in C++ (threadteam.hpp; OpenMP twin:
 * jacobi_omp.c, `parallel` + `for` with its implicit barriers).
 *
 * team_scope reserves the threads once; its section runs on all of them at
 * once, each sweeping its own rows, and barrier() separates the sweeps. An
 * exception in a participant fails the scope: the others' barrier() throws
 * instead of waiting, and team_scope rethrows the first exception.
 *
 *   c++ -std=c++17 -O2 -fopenmp jacobi_cpp.cpp -o jacobi_cpp $(pkg-config --cflags --libs threadteam)
 */
#include <threadteam.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

/* One Jacobi sweep of rows [lo, hi) (interior rows only): from u into v. */
static void sweep_rows(size_t n, const double *u, double *v, size_t lo, size_t hi)
{
    for (size_t i = lo; i < hi; i++)
        for (size_t j = 1; j + 1 < n; j++)
            v[i * n + j] = 0.25 * (u[(i - 1) * n + j] + u[(i + 1) * n + j] + u[i * n + j - 1] +
                                   u[i * n + j + 1]);
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 512;
    unsigned sweeps = argc > 2 ? unsigned(std::strtoul(argv[2], nullptr, 10)) : 200;
    if (n < 3)
        return 2;
    /* The top row is held at 1, the rest of the edge at 0. */
    std::vector<double> gu(n * n, 0.0), gv(n * n, 0.0);
    for (size_t j = 0; j < n; j++)
        gu[j] = gv[j] = 1.0;
    std::vector<double> ru = gu, rv = gv;

    tt::pool pool;
    pool.token(pool.width()).team_scope([&](tt::scope &sc) {
        sc.run([&](tt::section &s) {
            size_t rows = n - 2, r = s.rank(), p = s.size();
            size_t lo = 1 + rows * r / p, hi = 1 + rows * (r + 1) / p;
            double *u = gu.data(), *v = gv.data();
            for (unsigned k = 0; k < sweeps; k++) {
                sweep_rows(n, u, v, lo, hi);
                s.barrier(); /* throws if another participant failed */
                std::swap(u, v);
            }
        });
    });

    /* Check: the same sweeps serially give the same bits. */
    for (unsigned k = 0; k < sweeps; k++) {
        sweep_rows(n, ru.data(), rv.data(), 1, n - 1);
        std::swap(ru, rv);
    }
    const std::vector<double> &out = sweeps % 2 ? gv : gu; /* where the last sweep wrote */
    bool ok = std::memcmp(out.data(), ru.data(), n * n * sizeof(double)) == 0;
    double total = 0.0;
    for (double x : out)
        total += x;
    std::printf("jacobi %zux%zu, %u sweeps: sum of u %.17g\n", n, n, sweeps, total);
    std::printf("result: %.17g\n", total);
    std::printf("jacobi_cpp: %s\n", ok ? "ok" : "WRONG (differs from the serial sweeps)");
    return ok ? 0 : 1;
}
