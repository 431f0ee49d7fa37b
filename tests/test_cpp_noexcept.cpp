/*
 * test_cpp_noexcept.cpp -- the C++ front built with -fno-exceptions: the
 * header compiles, and the try_ forms report every code (pool, token,
 * entries, refusals, reductions, teams) without throwing.
 */
#include <threadteam.hpp>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <unistd.h>

#if TT_HPP_EXCEPTIONS
#error "test_cpp_noexcept must be built with -fno-exceptions"
#endif

static int failures = 0;
#define EXPECT(c)                                                                                  \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c);            \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

int main()
{
    alarm(240);
    tt::pool pool(nullptr);
    EXPECT(tt::pool::try_create(pool, tt::pool_options().threads(2)) == TT_OK);
    unsigned w = pool.width();
    EXPECT(w == (TT_PARALLEL_ENABLED ? 2u : 1u));

    tt::exec ex;
    EXPECT(pool.try_token(0, ex) == TT_EINVAL && !ex.valid());
    EXPECT(pool.try_token(2, ex) == TT_OK);
    std::atomic<unsigned> n{0};
    EXPECT(std::move(ex).try_fork(3, [&](unsigned, tt::exec &&child) {
        int rc = std::move(child).try_broadcast([](unsigned) {});
        EXPECT(rc == TT_REFUSED_FORK_CHILD);
        EXPECT(std::move(child).try_for_ranges(4, 1, [&](size_t b, size_t e) { n += unsigned(e - b); }) ==
               TT_OK);
    }) == TT_OK);
    EXPECT(n == 12);
    EXPECT(std::move(ex).try_fork(1, [](unsigned) {}) == TT_ECONSUMED);

    double s = -1;
    EXPECT(pool.try_token(2, ex) == TT_OK);
    EXPECT(std::move(ex).try_reduce_sum(100, 10, [](size_t b, size_t e) { return double(e - b); }, s) ==
           TT_OK);
    EXPECT(s == 100.0);
    long r = -1;
    EXPECT(pool.try_token(2, ex) == TT_OK);
    EXPECT(std::move(ex).try_reduce(
               100, 7, 0L, [](size_t b, size_t e, long &acc) { acc += long(e - b); },
               [](long &a, const long &f) { a += f; }, r) == TT_OK);
    EXPECT(r == 100);
    EXPECT(pool.try_token(2, ex) == TT_OK);
    EXPECT(std::move(ex).try_reduce_sum(100, 0, [](size_t, size_t) { return 0.0; }, s) == TT_EINVAL);

    std::atomic<unsigned> ranks{0};
    EXPECT(pool.try_token(w, ex) == TT_OK);
    EXPECT(std::move(ex).try_team_scope([&](tt::scope &sc) {
        EXPECT(sc.try_run([&](tt::section &sec) {
            ranks += sec.rank() + 1;
            EXPECT(sec.try_barrier() == TT_OK);
        }) == TT_OK);
    }) == TT_OK);
    EXPECT(ranks == w * (w + 1) / 2);

    tt::team team(nullptr);
    EXPECT(tt::team::try_create(team, pool, w) == TT_OK);
    EXPECT(!pool);
    tt::exec lead;
    EXPECT(team.try_lead(w, lead) == TT_OK);
    tt::exec other;
    EXPECT(team.try_lead(w, other) == TT_REFUSED_BUSY);
    lead = tt::exec(); /* finishes the lead token: the role ends */
    EXPECT(team.try_lead(w, other) == TT_OK);
    std::printf("test_cpp_noexcept: %d failed checks\n", failures);
    return failures ? 1 : 0;
}
