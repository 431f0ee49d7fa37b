/*
 * sum_cpp.cpp -- sum.c in C++ (threadteam.hpp; OpenMP twin: sum_omp.c).
 *
 * reduce_sum cuts [0, n) into blocks that depend on n and the grain only,
 * sums each block in one task and adds the block sums in a fixed order:
 * the same bits on 1 thread and on all of them, and the same bits as
 * sum.c's tt_reduce_sum_d.
 *
 *   c++ -std=c++17 -O2 -fopenmp sum_cpp.cpp -o sum_cpp $(pkg-config --cflags --libs threadteam)
 */
#include <threadteam.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 10000000;
    if (n < 1000)
        return 2;
    std::vector<double> x(n);
    for (size_t i = 0; i < n; i++)
        x[i] = 1.0 / double(i + 1); /* the harmonic series */

    tt::pool pool; /* width: OMP_NUM_THREADS; errors throw tt::error */
    auto block_sum = [&](size_t begin, size_t end) {
        double s = 0.0;
        for (size_t i = begin; i < end; i++)
            s += x[i];
        return s;
    };
    /* Each sum mints its own token: every thread, then one. */
    double sum = pool.token(pool.width()).reduce_sum(n, 4096, block_sum);
    double sum1 = pool.token(1).reduce_sum(n, 4096, block_sum);

    double dn = double(n);
    double expect = std::log(dn) + 0.57721566490153286 + 1.0 / (2 * dn) - 1.0 / (12 * dn * dn);
    std::printf("sum of 1/i for i = 1..%zu on %u threads: %.17g\n", n, pool.width(), sum);
    std::printf("result: %.17g\n", sum);
    if (std::memcmp(&sum, &sum1, sizeof sum) != 0) {
        std::fprintf(stderr, "sum_cpp: 1 thread gave %.17g, not the same bits\n", sum1);
        return 1;
    }
    if (std::fabs(sum - expect) > 1e-9 * expect) {
        std::fprintf(stderr, "sum_cpp: wrong result, expected about %.17g\n", expect);
        return 1;
    }
    std::printf("sum_cpp: ok (same bits on 1 and %u threads)\n", pool.width());
    return 0;
}
