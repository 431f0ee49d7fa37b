/*
 * blas_cpp.cpp -- blas.c in C++ (threadteam.hpp; OpenMP twin: blas_omp.c):
 * an OpenMP library (OpenBLAS's dgemm) called through external().
 *
 * external hands the callable `width` threads of the token's budget:
 * OpenBLAS's own `omp parallel` inside gets exactly that many and no more.
 *
 *   c++ -std=c++17 -O2 -fopenmp blas_cpp.cpp -o blas_cpp $(pkg-config --cflags --libs threadteam) -lopenblas
 * (this tree builds it against OpenBLAS only when configure found its
 * OpenMP build; otherwise the program only says so and exits 77.)
 */
#include <threadteam.hpp>

#include <cstdio>
#include <cstdlib>
#include <vector>

#ifndef TT_EXAMPLE_OPENBLAS
int main()
{
    std::printf("blas_cpp: skipped (built without OpenBLAS)\n");
    return 77;
}
#else
#include <cblas.h>

int main(int argc, char **argv)
{
    int n = argc > 1 ? std::atoi(argv[1]) : 300;
    if (n < 1)
        return 2;
    std::vector<double> a(size_t(n) * n), b(size_t(n) * n), c(size_t(n) * n);
    for (size_t i = 0; i < a.size(); i++) {
        a[i] = double(i % 7) - 3.0; /* small integers: the products are exact */
        b[i] = double(i % 5) - 2.0;
    }
    tt::pool pool;
    unsigned got = 0;
    pool.token(pool.width()).external([&](unsigned width) {
        got = width; /* OpenBLAS opens its region here with `width` threads */
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, a.data(), n, b.data(), n,
                    0.0, c.data(), n);
    });
    int bad = 0;
    double trace = 0.0;
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++) {
            double s = 0.0;
            for (int k = 0; k < n; k++)
                s += a[size_t(i) * n + k] * b[size_t(k) * n + j];
            bad += s != c[size_t(i) * n + j];
        }
        trace += c[size_t(i) * n + i];
    }
    std::printf("dgemm %dx%d on %u threads: trace %.17g\n", n, n, got, trace);
    std::printf("result: %.17g\n", trace);
    std::printf("blas_cpp: %s\n", bad ? "WRONG (differs from the triple loop)" : "ok");
    return bad ? 1 : 0;
}
#endif
