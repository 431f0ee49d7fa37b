/*
 * test_cpp_throw.cpp -- an exception thrown in any callable of the C++
 * front reaches the entry's caller, never std::terminate: from a fork job,
 * a range, a broadcast call, an external callable, the reductions'
 * callbacks, a scope function, a section, a split part and a scope fork
 * job; from several threads at once (one is rethrown, intact); jobs and
 * ranges not yet started are skipped; a section whose participant throws
 * releases the others from its barriers; a token's destructor after a
 * throw hands a team's leader role back. The watchdog fails a hang.
 */
#include "tt_test.hpp"

#include <stdexcept>

namespace {
struct boom : std::runtime_error {
    int who;
    explicit boom(int w) : std::runtime_error("boom"), who(w) {}
};
} // namespace

TT_CASE(throw_from_fork_job_and_skip_unstarted)
{
    tt::pool pool = tt_test::make_pool(2);
    unsigned n = tt_test::iters(200), skipped = 0;
    for (unsigned it = 0; it < n; it++) {
        std::atomic<unsigned> ran{0};
        const unsigned jobs = 200;
        TT_EXPECT_THROW(std::move(pool.token(2)).fork(jobs,
                                                      [&](unsigned i, tt::exec &&) {
                                                          ran++;
                                                          if (i == 0 || i == jobs / 2)
                                                              throw boom((int)i);
                                                          tt_test::spin_us(20);
                                                      }),
                        boom, e.who == 0 || e.who == (int)jobs / 2);
        /* Jobs not started when the first throw came do not run (over
         * the runs: one may lose its CPU before it throws). */
        skipped += ran < jobs;
    }
    TT_EXPECT(skipped > n / 2);
    /* The pool is fine afterwards. */
    std::atomic<unsigned> after{0};
    std::move(pool.token(2)).fork(4, [&](unsigned) { after++; });
    TT_EXPECT(after == 4);
}

TT_CASE(throw_from_ranges_from_every_thread)
{
    tt::pool pool = tt_test::make_pool(4);
    for (unsigned it = 0; it < tt_test::iters(300); it++) {
        std::atomic<size_t> done{0};
        /* Every range throws at once: exactly one arrives, whole. */
        TT_EXPECT_THROW(pool.token(pool.width()).for_ranges(pool.width(), 1,
                                                            [&](size_t b, size_t) {
                                                                done++;
                                                                throw boom((int)b);
                                                            }),
                        boom, e.who >= 0 && e.who < (int)pool.width());
        /* Ranges not started when the first throw came are skipped. */
        std::atomic<size_t> covered{0};
        TT_EXPECT_THROW(pool.token(2).for_ranges(10000, 1,
                                                 [&](size_t b, size_t e) {
                                                     covered += e - b;
                                                     if (b == 0)
                                                         throw std::logic_error("first");
                                                 }),
                        std::logic_error, std::string(e.what()) == "first");
        TT_EXPECT(covered <= 10000);
    }
}

TT_CASE(throw_from_dynamic_ranges_skips_the_rest)
{
    tt::pool pool = tt_test::make_pool(2);
    unsigned n = tt_test::iters(200), skipped = 0;
    for (unsigned it = 0; it < n; it++) {
        std::atomic<size_t> covered{0};
        /* 2000 chunks of 10 us: a throw (slow under the sanitizers: the
         * unwinder's first run) ends well before the other task is through. */
        TT_EXPECT_THROW(pool.token(2).for_ranges_dynamic(20000, 10,
                                                         [&](size_t b, size_t e) {
                                                             covered += e - b;
                                                             if (b == 0)
                                                                 throw boom(9);
                                                             tt_test::spin_us(10);
                                                         }),
                        boom, e.who == 9);
        skipped += covered < 20000;
    }
    /* Per run, a thrower descheduled before its throw may let the other
     * task take every chunk; over the runs, chunks are skipped. */
    TT_EXPECT(skipped > n / 2);
}

TT_CASE(throw_from_nested_fork_keeps_the_inner_exception)
{
    tt::pool pool = tt_test::make_pool(4);
    for (unsigned it = 0; it < tt_test::iters(200); it++) {
        TT_EXPECT_THROW(std::move(pool.token(4)).fork(2,
                                                      [&](unsigned i, tt::exec &&child) {
                                                          std::move(child).fork(2, [&](unsigned j, tt::exec &&g) {
                                                              std::move(g).for_ranges(8, 1, [&](size_t b, size_t e) {
                                                                  if (b <= 3 && 3 < e)
                                                                      throw boom((int)(i * 10 + j));
                                                              });
                                                          });
                                                      }),
                        boom, e.who == 0 || e.who == 1 || e.who == 10 || e.who == 11);
    }
}

TT_CASE(throw_from_broadcast_external_and_reductions)
{
    tt::pool pool = tt_test::make_pool(3);
    unsigned w = pool.width();
    for (unsigned it = 0; it < tt_test::iters(100); it++) {
        TT_EXPECT_THROW(pool.token(w).broadcast([&](unsigned i) { throw boom((int)i); }), boom,
                        e.who >= 0 && e.who < (int)w);
        TT_EXPECT_THROW(pool.token(w).external([&](unsigned width) { throw boom((int)width); }), boom,
                        e.who == (int)w);
        TT_EXPECT_THROW(pool.token(w).reduce_sum(1000, 10,
                                                 [](size_t b, size_t) -> double {
                                                     if (b >= 500)
                                                         throw boom(1);
                                                     return 1.0;
                                                 }),
                        boom, e.who == 1);
        TT_EXPECT_THROW(pool.token(w).reduce(
                            1000, 10, 0L, [](size_t b, size_t e, long &acc) { acc += long(e - b); },
                            [](long &a, const long &) {
                                (void)a;
                                throw boom(2);
                            }),
                        boom, e.who == 2);
        /* The pointer-held type: no partial leaks (ASan, valgrind). */
        TT_EXPECT_THROW(pool.token(w).reduce(
                            1000, 10, std::string(),
                            [](size_t b, size_t, std::string &acc) {
                                acc += "x";
                                if (b == 420)
                                    throw boom(3);
                            },
                            [](std::string &a, const std::string &f) { a += f; }),
                        boom, e.who == 3);
    }
}

TT_CASE(throw_in_team_scope_every_kind)
{
    tt::pool pool = tt_test::make_pool(3);
    unsigned w = pool.width();
    for (unsigned it = 0; it < tt_test::iters(100); it++) {
        /* The scope function itself. */
        TT_EXPECT_THROW(pool.token(w).team_scope([&](tt::scope &) { throw boom(-1); }), boom, e.who == -1);
        /* A section: every participant throws. */
        TT_EXPECT_THROW(pool.token(w).team_scope([&](tt::scope &sc) {
                            sc.run([&](tt::section &s) { throw boom((int)s.rank()); });
                            TT_EXPECT(false); /* run threw tt::error */
                        }),
                        boom, e.who >= 0 && e.who < (int)w);
        /* The scope's code is the error's own for a tt::error. */
        int code = TT_OK;
        try {
            pool.token(w).team_scope([&](tt::scope &sc) {
                sc.run([&](tt::section &s) {
                    if (s.rank() == 0)
                        throw tt::error(4242);
                });
            });
        } catch (const tt::error &e) {
            code = e.code();
        }
        TT_EXPECT(code == 4242);
        /* A split part. */
        TT_EXPECT_THROW(pool.token(w).team_scope([&](tt::scope &sc) {
                            sc.split(2, [&](unsigned part, tt::scope &) {
                                if (part == 1 || w == 1)
                                    throw boom(100 + (int)part);
                            });
                        }),
                        boom, e.who == 101 || e.who == 100);
        /* A scope fork job: the scope fails, the caller gets the throw. */
        int failed_code = -1;
        TT_EXPECT_THROW(pool.token(w).team_scope([&](tt::scope &sc) {
                            try {
                                sc.fork(2, [&](unsigned i, tt::exec &&) { throw boom(200 + (int)i); });
                            } catch (const boom &) {
                                failed_code = sc.failed();
                                throw;
                            }
                        }),
                        boom, e.who == 200 || e.who == 201);
        TT_EXPECT(failed_code == tt::exception_code);
    }
}

/* A participant that throws before a barrier releases the others: their
 * barrier() throws, so each leaves the section (tt_section_barrier returns
 * the scope's code once it failed). */
TT_CASE(throw_before_barrier_releases_the_others)
{
    tt::pool pool = tt_test::make_pool(3);
    unsigned w = pool.width();
    if (w < 2)
        return;
    for (unsigned it = 0; it < tt_test::iters(200); it++) {
        std::atomic<unsigned> released{0};
        unsigned thrower = it % w;
        TT_EXPECT_THROW(pool.token(w).team_scope([&](tt::scope &sc) {
                            sc.run([&](tt::section &s) {
                                if (s.rank() == thrower)
                                    throw boom(7);
                                try {
                                    for (int k = 0; k < 3; k++)
                                        s.barrier();
                                } catch (const tt::error &e) {
                                    TT_EXPECT(e.code() == tt::exception_code);
                                    released++;
                                    throw;
                                }
                            });
                        }),
                        boom, e.who == 7);
        TT_EXPECT(released == w - 1);
    }
}

/* A lead token alive when an exception leaves its block: its destructor
 * hands the role back, so the next try_lead is not refused. */
TT_CASE(token_destructor_after_throw)
{
    tt::pool pool = tt_test::make_pool(2);
    tt::team team(std::move(pool), 2 < pool.width() ? 2 : pool.width());
    for (unsigned it = 0; it < tt_test::iters(100); it++) {
        try {
            tt::exec lead = team.lead(2);
            throw boom(1);
        } catch (const boom &) {
        }
        std::optional<tt::exec> again = team.try_lead(2);
        TT_EXPECT(again.has_value());
        /* And a throw out of an entry on a lead token. */
        try {
            std::move(*again).for_ranges(4, 1, [](size_t, size_t) { throw boom(2); });
        } catch (const boom &) {
        }
        again.reset();
        TT_EXPECT(team.try_lead(1).has_value());
    }
    /* Root tokens never consumed, destroyed by unwinding: the pool is
     * destroyed cleanly after. */
    tt::pool p2 = tt_test::make_pool(2);
    for (int k = 0; k < 10; k++) {
        try {
            tt::exec a = p2.token(2);
            tt::exec b = a.reborrow();
            throw boom(k);
        } catch (const boom &) {
        }
    }
}

/* Several threads at once, each its own root, each throwing from jobs. */
TT_CASE(throws_from_several_roots_at_once)
{
    tt::pool pool = tt_test::make_pool(4);
    std::vector<std::thread> ts;
    for (int t = 0; t < 3; t++)
        ts.emplace_back([&, t] {
            for (unsigned it = 0; it < tt_test::iters(100); it++)
                TT_EXPECT_THROW(std::move(pool.token(2)).fork(4,
                                                              [&](unsigned i, tt::exec &&child) {
                                                                  std::move(child).for_ranges(
                                                                      4, 1, [&](size_t, size_t) {
                                                                          throw boom(t * 100 + (int)i);
                                                                      });
                                                              }),
                                boom, e.who / 100 == t);
        });
    for (auto &t : ts)
        t.join();
}

int main(int argc, char **argv) { return tt_test::main(argc, argv); }
