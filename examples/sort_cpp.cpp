/*
 * sort_cpp.cpp -- sort.c in C++ (threadteam.hpp; OpenMP twin: sort_omp.c,
 * tasks): a merge sort whose two halves are the two jobs of a fork.
 *
 * Each job gets its child token (its share of the budget) and recurses
 * with it, so the sort never runs more than the pool's width of threads
 * at once, at any depth. Below the cutoff, or once a token is serial, it
 * sorts serially: `if (ex.is_serial()) return serial(...)`.
 *
 *   c++ -std=c++17 -O2 -fopenmp sort_cpp.cpp -o sort_cpp $(pkg-config --cflags --libs threadteam)
 */
#include <threadteam.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

static const size_t cutoff = 8192; /* below this, sort serially */

/* Sort a[0..n) with the budget of `ex` (taken by value: the call uses it up). */
static void msort(tt::exec ex, double *a, double *tmp, size_t n)
{
    if (n < cutoff || ex.is_serial()) {
        std::sort(a, a + n);
        return;
    }
    size_t m = n / 2;
    std::move(ex).fork(2, [&](unsigned i, tt::exec &&child) {
        if (i == 0)
            msort(std::move(child), a, tmp, m);
        else
            msort(std::move(child), a + m, tmp + m, n - m);
    });
    std::merge(a, a + m, a + m, a + n, tmp);
    std::memcpy(a, tmp, n * sizeof *a);
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 2000000;
    if (n < 2)
        return 2;
    std::vector<double> a(n), tmp(n), ref(n);
    unsigned seed = 12345; /* the same numbers as sort_omp.c */
    for (size_t i = 0; i < n; i++)
        ref[i] = a[i] = double(seed = seed * 1103515245u + 12345u) / 4294967296.0;

    tt::pool pool;
    msort(pool.token(pool.width()), a.data(), tmp.data(), n);

    std::sort(ref.begin(), ref.end());
    bool ok = a == ref;
    std::printf("sorted %zu numbers: first %.17g, middle %.17g, last %.17g\n", n, a[0], a[n / 2],
                a[n - 1]);
    std::printf("result: %.17g\n", a[n / 2]);
    std::printf("sort_cpp: %s\n", ok ? "ok" : "WRONG (differs from std::sort)");
    return ok ? 0 : 1;
}
