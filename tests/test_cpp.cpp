/*
 * test_cpp.cpp -- the C++ front (include/threadteam.hpp): pools, tokens,
 * every entry with lambdas, budget conservation counted in user code at
 * every depth, errors and refusals as types, the non-throwing forms, and
 * the reductions bit for bit against the C functions.
 * (Exceptions out of callables: test_cpp_throw.cpp.)
 */
#include "tt_test.hpp"

#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <vector>
#include <thread>

using tt_test::live;

/* ------------------------------------------------------------------------ */
/* Pools and tokens                                                          */
/* ------------------------------------------------------------------------ */

TT_CASE(pool_and_token_basics)
{
    tt::pool pool = tt_test::make_pool(4);
    unsigned w = pool.width();
    TT_EXPECT(w == (TT_PARALLEL_ENABLED ? 4u : 1u));
    tt::exec ex = pool.token(3);
    TT_EXPECT(ex.valid());
    TT_EXPECT(ex.budget() == (w < 3 ? w : 3));
    TT_EXPECT(ex.is_serial() == (ex.budget() == 1));
    TT_EXPECT(!ex.carries_team());

    /* Moving keeps the token usable: the tt_exec stays where it was. */
    tt::exec moved = std::move(ex);
    TT_EXPECT(!ex.valid()); // NOLINT(bugprone-use-after-move): the test
    TT_EXPECT(moved.budget() == (w < 3 ? w : 3));
    std::atomic<size_t> covered{0};
    std::move(moved).for_ranges(1000, 10, [&](size_t b, size_t e) { covered += e - b; });
    TT_EXPECT(covered == 1000);

    tt::exec s = tt::exec::serial();
    TT_EXPECT(s.is_serial() && s.budget() == 1);
    unsigned calls = 0;
    std::move(s).fork(3, [&](unsigned, tt::exec &&child) {
        calls++;
        TT_EXPECT(child.is_serial());
    });
    TT_EXPECT(calls == 3);

    /* A default pool, a pool built without throwing, an empty pool. */
    tt::pool d;
    TT_EXPECT(d.width() >= 1);
    tt::pool n(nullptr);
    TT_EXPECT(!n && n.width() == 0);
    int rc = tt::pool::try_create(n, tt::pool_options().threads(2).thread_name("cxx"));
    TT_EXPECT(rc == TT_OK && n && n.width() == (TT_PARALLEL_ENABLED ? 2u : 1u));
    TT_EXPECT(tt::pool::try_create(n, tt::pool_options().stack_size(1)) != TT_OK);
    TT_EXPECT(!n);
}

TT_CASE(consumed_and_empty_tokens_throw_their_code)
{
    tt::pool pool = tt_test::make_pool(2);
    tt::exec ex = pool.token(2);
    tt::exec child = ex.reborrow();
    std::move(child).for_ranges(10, 1, [](size_t, size_t) {});
    /* The reborrowed child is spent; the parent is usable (phases). */
    TT_EXPECT_THROW(std::move(child).for_ranges(10, 1, [](size_t, size_t) {}), tt::error,
                    e.code() == TT_ECONSUMED &&
                        std::string(e.what()).find(tt_strerror(TT_ECONSUMED)) != std::string::npos &&
                        std::string(e.what()).rfind("TT_ECONSUMED", 0) == 0);
    std::move(ex).fork(2, [](unsigned) {});
    TT_EXPECT_THROW(std::move(ex).fork(2, [](unsigned) {}), tt::error, e.code() == TT_ECONSUMED);
    int rc = std::move(ex).try_fork(2, [](unsigned) {});
    TT_EXPECT(rc == TT_ECONSUMED);

    tt::exec empty;
    TT_EXPECT_THROW(std::move(empty).for_ranges(1, 1, [](size_t, size_t) {}), tt::error,
                    e.code() == TT_EINVAL);
    TT_EXPECT_THROW(pool.token(0), tt::error, e.code() == TT_EINVAL);
    tt::exec out;
    TT_EXPECT(pool.try_token(0, out) == TT_EINVAL && !out.valid());
    TT_EXPECT(pool.try_token(2, out) == TT_OK && out.valid());
    /* An error is no refusal. */
    bool refused = false;
    try {
        std::move(empty).broadcast([](unsigned) {});
    } catch (const tt::refused &) {
        refused = true;
    } catch (const tt::error &) {
    }
    TT_EXPECT(!refused);
}

TT_CASE(dynamic_ranges_cover_every_index_once)
{
    tt::pool pool = tt_test::make_pool(4);
    for (unsigned it = 0; it < tt_test::iters(200); it++) {
        size_t len = 1 + it * 37 % 5000, grain = 1 + it % 64;
        std::vector<std::atomic<int>> hit(len);
        live l;
        pool.token(3).for_ranges_dynamic(len, grain, [&](size_t b, size_t e) {
            l.enter();
            TT_EXPECT(e > b && e - b <= grain);
            for (size_t i = b; i < e; i++)
                hit[i]++;
            l.leave();
        });
        for (auto &h : hit)
            TT_EXPECT(h == 1);
        TT_EXPECT(l.max <= 3);
    }
    int rc = pool.token(2).try_for_ranges_dynamic(10, 0, [](size_t, size_t) {});
    TT_EXPECT(rc == TT_EINVAL);
}

TT_CASE(reborrow_phases_and_limit)
{
    tt::pool pool = tt_test::make_pool(4);
    tt::exec ex = pool.token(4);
    std::atomic<size_t> sum{0};
    for (int phase = 0; phase < 5; phase++)
        ex.reborrow().for_ranges(100, 1, [&](size_t b, size_t e) { sum += e - b; });
    TT_EXPECT(sum == 500);
    live l;
    std::move(ex).limit(2).for_ranges(64, 1, [&](size_t, size_t) {
        l.enter();
        tt_test::spin_us(200);
        l.leave();
    });
    TT_EXPECT(l.max <= 2);
}

TT_CASE(a_job_fails_its_fork_with_a_code)
{
    tt::pool pool = tt_test::make_pool(2);
    unsigned n = tt_test::iters(100);
    for (unsigned it = 0; it < n; it++) {
        std::atomic<unsigned> ran{0};
        std::atomic<bool> failed{false}, starved{false};
        TT_EXPECT_THROW(std::move(pool.token(2)).fork(100,
                                                      [&](unsigned i, tt::exec &&child) {
                                                          ran++;
                                                          tt::exec mine = std::move(child);
                                                          if (i == 0) {
                                                              mine.fail(1234);
                                                              failed = true;
                                                              return;
                                                          }
                                                          /* Every other job starts its
                                                           * work after the failure, so
                                                           * only the jobs started before
                                                           * it (the other task's first)
                                                           * may run, whatever the load. */
                                                          for (unsigned w = 0; !failed && w < 1000000; w++)
                                                              tt_test::spin_us(10);
                                                          /* 10 s without the failure: a thread
                                                           * starved that long (valgrind's
                                                           * scheduler) ran jobs before it. */
                                                          if (!failed)
                                                              starved = true;
                                                      }),
                        tt::error, e.code() == 1234);
        TT_EXPECT(ran <= 2 || starved);
        int rc = std::move(pool.token(2)).try_fork(4, [&](unsigned i, tt::exec &child) {
            if (i == 3)
                TT_EXPECT(child.try_fail(77) == TT_OK);
        });
        TT_EXPECT(rc == 77);
    }
}

/* ------------------------------------------------------------------------ */
/* Budget conservation at every depth, counted in user code                  */
/* ------------------------------------------------------------------------ */

namespace {
struct level {
    live *counter;
    unsigned budget;
};

/* A fork job and a split part take the form their callable declares,
 * whether the front carries the callable as a copy in its context (small,
 * trivially copyable, the same form when called as const) or through a
 * pointer (a mutable lambda, a large capture, a form only a non-const
 * overload has). */
struct job_forms {
    std::atomic<unsigned> *rvalue, *as_const;
    void operator()(unsigned, tt::exec &&) { rvalue->fetch_add(1); }
    void operator()(unsigned) const { as_const->fetch_add(1); }
};

/* A body with a non-const call operator beside a const one: the entry
 * calls the non-const one, as a call through the caller's object would. */
struct overloaded_body {
    std::atomic<unsigned> *mine, *as_const;
    void operator()(std::size_t, std::size_t) { mine->fetch_add(1); }
    void operator()(std::size_t, std::size_t) const { as_const->fetch_add(1); }
    void operator()(tt::section &) { mine->fetch_add(1); }
    void operator()(tt::section &) const { as_const->fetch_add(1); }
};
struct overloaded_sum {
    std::atomic<unsigned> *mine;
    double operator()(std::size_t b, std::size_t e)
    {
        mine->fetch_add(1);
        return double(e - b);
    }
    double operator()(std::size_t, std::size_t) const { return -1.0; }
};

TT_CASE(fork_and_split_call_the_form_the_callable_declares)
{
    {
        tt::pool pool = tt_test::make_pool(2);
        std::atomic<unsigned> mine{0}, cn{0};
        overloaded_body ob{&mine, &cn};
        pool.token(2).for_ranges(1000, 1, ob);
        TT_EXPECT(mine >= 1 && cn == 0);
        unsigned before = mine;
        pool.token(2).team_scope([&](tt::scope &sc) { sc.run(ob); });
        TT_EXPECT(mine > before && cn == 0);
        overloaded_sum os{&mine};
        TT_EXPECT(pool.token(2).reduce_sum(1000, 100, os) == 1000.0);
    }
    tt::pool pool = tt_test::make_pool(2);
    for (int rep = 0; rep < 50; rep++) {
        std::atomic<unsigned> rv{0}, cn{0};
        job_forms jf{&rv, &cn};
        std::move(pool.token(2)).fork(5, jf);
        TT_EXPECT(rv == 5 && cn == 0);
        const job_forms cjf{&rv, &cn};
        std::move(pool.token(2)).fork(3, cjf); /* a const callable: only (unsigned) */
        TT_EXPECT(rv == 5 && cn == 3);

        /* A mutable lambda: each job sees the one object the caller passed. */
        std::atomic<unsigned> seen{0};
        auto counted = [&seen, calls = 0u](unsigned) mutable {
            calls++; /* the object's own state, written by one job at a time below */
            seen.fetch_add(1);
        };
        std::move(pool.token(1)).fork(4, counted);
        TT_EXPECT(seen == 4);

        /* A capture larger than a copy's room, by value. */
        double big[8];
        for (int i = 0; i < 8; i++)
            big[i] = i + rep;
        std::atomic<long> sum{0};
        std::move(pool.token(2)).fork(8, [big, &sum](unsigned i, tt::exec &) { sum += long(big[i]); });
        TT_EXPECT(sum == 28 + 8 * rep);

        /* An lvalue child, a small by-reference capture: jobs run with their child. */
        std::atomic<unsigned> budgets{0};
        std::move(pool.token(2)).fork(2, [&](unsigned, tt::exec &child) { budgets += child.budget(); });
        TT_EXPECT(budgets == 2);

        /* Split parts through a copied and through a pointer-held callable. */
        std::atomic<unsigned> parts{0}, wide{0};
        pool.token(2).team_scope([&](tt::scope &sc) {
            sc.split(2, [&](unsigned, tt::scope &) { parts++; });
            sc.split(2, [big, rep, &wide](unsigned p, tt::scope &) { wide += unsigned(big[p]) - unsigned(rep); });
        });
        TT_EXPECT(parts == 2 && wide == 1);
    }
}

/* Every call sees its own callable, however its context is held or
 * reused from call to call: calls whose lambdas differ only in the values
 * they captured, entries of other types one after the other, captureless
 * lambdas, nests of seven levels on one thread, a call after a throw, and
 * several threads at once. (Written for a front that kept each context in
 * a per-thread line and rewrote only what differed; a write it skipped
 * failed 49 of 50 calls of each entry here.) */
static void kept_nest(tt::exec &&ex, unsigned depth, std::atomic<unsigned long> &leaves)
{
    if (depth == 0) {
        leaves++;
        return;
    }
    std::move(ex).fork(2, [depth, &leaves](unsigned i, tt::exec &&child) {
        kept_nest(std::move(child), depth - 1, leaves);
        if (i == 0)
            leaves += depth * 1000; /* this level's own capture */
    });
}

TT_CASE(every_call_sees_its_own_callable)
{
    tt::pool pool = tt_test::make_pool(2);
    const std::size_t n = 1000;
    /* Each entry alone, call after call: its line is renewed in place. */
    for (unsigned i = 0; i < 50; i++) {
        std::atomic<unsigned long> sum{0};
        pool.token(2).for_ranges(n, 1, [&sum, i](std::size_t b, std::size_t e) { sum += i * (e - b); });
        TT_EXPECT(sum == i * n);
    }
    for (unsigned i = 0; i < 50; i++) {
        std::atomic<unsigned> jobs{0};
        std::move(pool.token(2)).fork(2, [&jobs, i](unsigned k) { jobs += k + i; });
        TT_EXPECT(jobs == 1 + 2 * i);
    }
    for (unsigned i = 0; i < 50; i++)
        TT_EXPECT(pool.token(2).reduce_sum(n, 100, [i](std::size_t b, std::size_t e) {
            return double(i) * double(e - b);
        }) == double(i) * double(n));
    for (unsigned i = 0; i < 50; i++) {
        std::atomic<unsigned> sec{0};
        pool.token(2).team_scope([&](tt::scope &sc) { sc.run([&sec, i](tt::section &x) { sec += x.rank() + i; }); });
        TT_EXPECT(sec == (pool.width() == 2 ? 1u + 2 * i : i));
    }
    for (unsigned i = 0; i < 200; i++) {
        /* The same lambda type, a new capture each call. */
        std::atomic<unsigned long> sum{0};
        pool.token(2).for_ranges(n, 1, [&sum, i](std::size_t b, std::size_t e) { sum += i * (e - b); });
        TT_EXPECT(sum == i * n);
        /* Another type at the same depth, then a captureless one. */
        std::atomic<unsigned> jobs{0};
        std::move(pool.token(2)).fork(3, [&jobs, i](unsigned k) { jobs += k + i; });
        TT_EXPECT(jobs == 3 + 3 * i);
        std::move(pool.token(2)).fork(2, [](unsigned) {});
        double s = pool.token(2).reduce_sum(n, 100, [i](std::size_t b, std::size_t e) { return double(i) * double(e - b); });
        TT_EXPECT(s == double(i) * double(n));
        std::atomic<unsigned> sec{0};
        pool.token(2).team_scope([&](tt::scope &sc) {
            sc.run([&sec, i](tt::section &x) { sec += x.rank() + i; });
            sc.fork(2, [&sec, i](unsigned k) { sec += 10 * (k + i); });
        });
        TT_EXPECT(sec == (pool.width() == 2 ? 1u + 2 * i : i) + 10 * (1 + 2 * i));
    }
    /* Deeper than the four lines of a thread: every level its own capture. */
    for (unsigned rep = 0; rep < 20; rep++) {
        std::atomic<unsigned long> leaves{0};
        kept_nest(pool.token(rep % 2 ? 2 : 1), 7, leaves);
        unsigned long want = 1ul << 7;
        for (unsigned long d = 1, nodes = 1ul << 6; d <= 7; d++, nodes >>= 1)
            want += nodes * d * 1000;
        TT_EXPECT(leaves == want);
    }
#if TT_HPP_EXCEPTIONS
    /* A throw, then the same lambda type: the next call throws nothing. */
    for (unsigned i = 0; i < 20; i++) {
        std::atomic<unsigned> ran{0};
        auto body = [&ran, i](std::size_t b, std::size_t e) {
            if (i % 2 == 0 && b == 0)
                throw std::runtime_error("kept");
            ran += unsigned(e - b);
        };
        bool threw = false;
        try {
            pool.token(2).for_ranges(100, 10, body);
        } catch (const std::runtime_error &) {
            threw = true;
        }
        TT_EXPECT(threw == (i % 2 == 0));
        if (i % 2)
            TT_EXPECT(ran == 100);
    }
#endif
    /* Threads at once, each with its own lines. */
    std::vector<std::thread> ts;
    std::atomic<int> bad{0};
    for (unsigned t = 0; t < 3; t++)
        ts.emplace_back([&, t] {
            for (unsigned i = 0; i < 100; i++) {
                std::atomic<unsigned long> sum{0};
                pool.token(2).for_ranges(n, 1, [&sum, i, t](std::size_t b, std::size_t e) { sum += (i + t) * (e - b); });
                if (sum != (i + t) * n)
                    bad++;
            }
        });
    for (auto &th : ts)
        th.join();
    TT_EXPECT(bad == 0);
}

/* A random tree of forks and ranges under `ex`; every leaf counts itself
 * live in the counter of every token above it and checks each against
 * that token's budget. */
void nest(tt::exec &&ex, std::vector<level> chain, std::uint64_t seed, int depth)
{
    live mine;
    chain.push_back({&mine, ex.budget()});
    std::mt19937_64 rng(seed);
    auto leaf = [&chain] {
        for (auto &l : chain)
            l.counter->enter();
        for (auto &l : chain)
            TT_EXPECT(l.counter->now.load() <= (int)l.budget);
        tt_test::spin_us(20);
        for (auto &l : chain)
            l.counter->leave();
    };
    int kind = depth >= 4 ? 2 : (int)(rng() % 3);
    if (kind == 0) {
        unsigned jobs = 1 + (unsigned)(rng() % 5);
        std::move(ex).fork(jobs, [&](unsigned i, tt::exec &&child) {
            nest(std::move(child), chain, seed * 31 + i + 1, depth + 1);
        });
    } else if (kind == 1) {
        tt::exec mine_ex = std::move(ex);
        unsigned phases = 1 + (unsigned)(rng() % 2);
        for (unsigned p = 0; p < phases; p++)
            nest(mine_ex.reborrow(), chain, seed * 17 + p, depth + 1);
    } else {
        std::move(ex).for_ranges(1 + rng() % 40, 1, [&](size_t b, size_t e) {
            for (size_t k = b; k < e; k++)
                leaf();
        });
    }
    TT_EXPECT(mine.max.load() <= (int)ex.budget() || ex.budget() == 0);
}
} // namespace

TT_CASE(budget_conserved_at_every_depth)
{
    tt::pool pool = tt_test::make_pool(4);
    unsigned n = tt_test::iters(200);
    for (unsigned it = 0; it < n; it++) {
        live root;
        unsigned b = 1 + it % pool.width();
        nest(pool.token(b), {{&root, b}}, it + 1, 0);
        TT_EXPECT(root.max.load() <= (int)b);
        TT_EXPECT(root.now.load() == 0);
    }
}

/* ------------------------------------------------------------------------ */
/* The drop-in pattern of docs/porting.md                                    */
/* ------------------------------------------------------------------------ */

namespace {
tt::pool &app_pool()
{
    static tt::pool *p = new tt::pool(tt::pool_options().threads(4).spin_polls(2000));
    return *p;
}
live dropin_live;
std::atomic<long> dropin_total{0};
/* A legacy entry point that mints its own token from the process's pool. */
void legacy(size_t n)
{
    app_pool().token(app_pool().width()).for_ranges(n, 1, [&](size_t b, size_t e) {
        dropin_live.enter();
        tt_test::spin_us(30);
        dropin_total += long(e - b);
        dropin_live.leave();
    });
}
} // namespace

/* The application's own regions calling the legacy function: 3 threads of
 * an omp parallel, then 3 omp tasks. (Named ttomp_*: tests/tsan.supp does
 * not report the hand-over of the regions' shared variables through
 * libgomp's uninstrumented barriers.) */
void ttomp_dropin_regions(std::atomic<long> &in_region);
void ttomp_dropin_regions(std::atomic<long> &in_region)
{
#pragma omp parallel num_threads(3)
    {
        in_region++;
        legacy(16);
    }
#pragma omp parallel num_threads(2)
#pragma omp single
    {
        for (int t = 0; t < 3; t++) {
#pragma omp task
            legacy(16);
        }
    }
}

/* The legacy function works when called from plain code, a fork job, a
 * range, an application's omp parallel region and omp tasks, and the
 * pool's width caps all of it together. */
TT_CASE(drop_in_pattern_from_everywhere)
{
    unsigned w = app_pool().width();
    for (unsigned it = 0; it < tt_test::iters(40); it++) {
        dropin_total = 0;
        std::atomic<long> in_region{0}; /* 3, or 1 where OpenMP is off */
        legacy(16);
        std::move(app_pool().token(w)).fork(4, [&](unsigned, tt::exec &&) { legacy(16); });
        app_pool().token(w).for_ranges(4, 1, [&](size_t b, size_t e) {
            for (size_t k = b; k < e; k++)
                legacy(16);
        });
        ttomp_dropin_regions(in_region);
        TT_EXPECT(in_region == (TT_PARALLEL_ENABLED ? 3 : 1));
        TT_EXPECT(dropin_total == 16 * (1 + 4 + 4 + in_region + 3));
    }
    TT_EXPECT(dropin_live.max.load() <= (int)w);
}

/* ------------------------------------------------------------------------ */
/* Broadcast, external, team scopes, persistent teams                        */
/* ------------------------------------------------------------------------ */

TT_CASE(broadcast_external_scope)
{
    tt::pool pool = tt_test::make_pool(3);
    unsigned w = pool.width();
    std::vector<std::atomic<int>> seen(w);
    std::move(pool.token(w)).broadcast([&](unsigned i) { seen[i]++; });
    for (auto &s : seen)
        TT_EXPECT(s == 1);

    unsigned got = 0;
    pool.token(w).external([&](unsigned width) { got = width; });
    TT_EXPECT(got == w);

    std::vector<int> data(w * 4, 0);
    std::atomic<int> after{0};
    pool.token(w).team_scope([&](tt::scope &sc) {
        TT_EXPECT(sc.size() == w);
        sc.run([&](tt::section &s) {
            TT_EXPECT(s.size() == w && s.rank() < w);
            data[s.rank()] = 1;
            s.barrier();
            int total = 0;
            for (unsigned r = 0; r < w; r++)
                total += data[r];
            if (total == (int)w)
                after++;
            s.barrier();
        });
        sc.split(2, [&](unsigned part, tt::scope &sub) {
            sub.run([&](tt::section &s) { data[w + part * w + s.rank()] = 2; });
        });
        sc.fork(2, [&](unsigned, tt::exec &&child) {
            TT_EXPECT(child.carries_team());
            std::move(child).for_ranges(10, 1, [](size_t, size_t) {});
        });
        double s = sc.reborrow().reduce_sum(100, 10, [](size_t b, size_t e) { return double(e - b); });
        TT_EXPECT(s == 100.0);
    });
    TT_EXPECT(after == (int)w);
}

TT_CASE(persistent_team)
{
    tt::pool pool = tt_test::make_pool(2);
    unsigned w = pool.width();
    tt::team team(std::move(pool), w);
    TT_EXPECT(!pool); // NOLINT(bugprone-use-after-move): the team owns it
    {
        tt::exec lead = team.lead(2);
        TT_EXPECT(lead.carries_team() && lead.budget() == w);
        /* While the role is held, try_lead is refused (no exception). */
        std::thread other([&] { TT_EXPECT(!team.try_lead(2).has_value()); });
        other.join();
        std::atomic<int> n{0};
        std::move(lead).fork(2, [&](unsigned) { n++; });
        TT_EXPECT(n == 2);
    }
    std::optional<tt::exec> again = team.try_lead(2);
    TT_EXPECT(again.has_value());
    again.reset(); /* its destructor hands the role back */
    tt::exec out;
    TT_EXPECT(team.try_lead(1, out) == TT_OK);
    out = tt::exec();
    tt::pool back = std::move(team).into_pool();
    TT_EXPECT(back && back.width() >= 1);
}

/* ------------------------------------------------------------------------ */
/* Refusals                                                                  */
/* ------------------------------------------------------------------------ */

TT_CASE(refusals_are_their_own_type)
{
    tt::pool pool = tt_test::make_pool(2);
    std::atomic<int> fallbacks{0};
    std::move(pool.token(2)).fork(2, [&](unsigned, tt::exec &&child) {
        try {
            std::move(child).broadcast([](unsigned) {});
            TT_EXPECT(false);
        } catch (const tt::refused &r) {
            TT_EXPECT(r.code() == TT_REFUSED_FORK_CHILD);
            /* Nothing was consumed: the same token takes the fallback. */
            std::move(child).for_ranges(4, 1, [&](size_t, size_t) {});
            fallbacks++;
        }
    });
    TT_EXPECT(fallbacks == 2);
    int rc = TT_OK;
    std::move(pool.token(2)).fork(1, [&](unsigned, tt::exec &&child) {
        rc = std::move(child).try_broadcast([](unsigned) {});
    });
    TT_EXPECT(rc == TT_REFUSED_FORK_CHILD);
    TT_EXPECT(tt::is_refusal(TT_REFUSED_BUSY) && !tt::is_refusal(TT_EBUSY));
    static_assert(std::is_base_of_v<tt::error, tt::refused>);
    static_assert(std::is_base_of_v<std::runtime_error, tt::error>);
}

/* ------------------------------------------------------------------------ */
/* Reductions: the same bits as the C functions                              */
/* ------------------------------------------------------------------------ */

namespace {
std::vector<double> noisy(size_t n, unsigned seed)
{
    std::mt19937_64 g(seed);
    std::uniform_real_distribution<double> d(-1e6, 1e6);
    std::vector<double> x(n);
    for (auto &v : x)
        v = d(g) * std::pow(10.0, double(g() % 20) - 10.0);
    return x;
}

struct cdata {
    const double *x;
};
double c_sum(void *a, size_t b, size_t e)
{
    const double *x = static_cast<cdata *>(a)->x;
    double s = 0;
    for (size_t i = b; i < e; i++)
        s += x[i];
    return s;
}
/* A compensated sum in a caller-sized accumulator, in C form. */
struct kahan {
    double s, c;
};
void c_kinit(void *, void *acc) { *static_cast<kahan *>(acc) = {0.0, 0.0}; }
void c_kbody(void *a, size_t b, size_t e, void *acc)
{
    const double *x = static_cast<cdata *>(a)->x;
    kahan *k = static_cast<kahan *>(acc);
    for (size_t i = b; i < e; i++) {
        double y = x[i] - k->c, t = k->s + y;
        k->c = (t - k->s) - y;
        k->s = t;
    }
}
void c_kcombine(void *, void *into, const void *from)
{
    kahan *a = static_cast<kahan *>(into);
    const kahan *b = static_cast<const kahan *>(from);
    double y = b->s - a->c - b->c, t = a->s + y;
    a->c = (t - a->s) - y;
    a->s = t;
}
/* Four sums by residue, the non-trivial-type case's C twin. */
struct four {
    double v[4];
};
void c_fbody(void *a, size_t b, size_t e, void *acc)
{
    const double *x = static_cast<cdata *>(a)->x;
    four *f = static_cast<four *>(acc);
    for (size_t i = b; i < e; i++)
        f->v[i % 4] += x[i];
}
void c_fcombine(void *, void *into, const void *from)
{
    for (int k = 0; k < 4; k++)
        static_cast<four *>(into)->v[k] += static_cast<const four *>(from)->v[k];
}
bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }
} // namespace

TT_CASE(reductions_bit_identical_to_c)
{
    tt::pool pool = tt_test::make_pool(4);
    for (size_t n : {size_t(0), size_t(1), size_t(1000), size_t(100003)}) {
        std::vector<double> x = noisy(n, (unsigned)n + 7);
        cdata cd{x.data()};
        for (size_t grain : {size_t(1), size_t(64), size_t(5000)}) {
            if (n > 10000 && grain == 1)
                continue;
            tt_exec cex;
            TT_EXPECT(tt_exec_init(&cex, pool.native(), 1) == TT_OK);
            double want = -1;
            TT_EXPECT(tt_reduce_sum_d(&cex, n, grain, c_sum, &cd, &want) == TT_OK);
            kahan kw{};
            TT_EXPECT(tt_exec_init(&cex, pool.native(), 3) == TT_OK);
            TT_EXPECT(tt_reduce_ranges(&cex, n, grain, sizeof(kahan), c_kinit, c_kbody, c_kcombine,
                                       &cd, &kw) == TT_OK);
            four fw{};
            TT_EXPECT(tt_exec_init(&cex, pool.native(), 2) == TT_OK);
            TT_EXPECT(tt_reduce_ranges(&cex, n, grain, sizeof(four), nullptr, c_fbody, c_fcombine,
                                       &cd, &fw) == TT_OK);
            double mv, xv;
            size_t mi, xi;
            TT_EXPECT(tt_exec_init(&cex, pool.native(), 4) == TT_OK);
            TT_EXPECT(tt_reduce_minloc_d(&cex, x.data(), n, grain, &mv, &mi) == TT_OK);
            TT_EXPECT(tt_exec_init(&cex, pool.native(), 4) == TT_OK);
            TT_EXPECT(tt_reduce_maxloc_d(&cex, x.data(), n, grain, &xv, &xi) == TT_OK);

            for (unsigned b = 1; b <= pool.width(); b++) {
                double s = pool.token(b).reduce_sum(n, grain, [&](size_t lo, size_t hi) {
                    return c_sum(&cd, lo, hi);
                });
                TT_EXPECT(same_bits(s, want));
                kahan k = pool.token(b).reduce(
                    n, grain, kahan{0.0, 0.0},
                    [&](size_t lo, size_t hi, kahan &acc) { c_kbody(&cd, lo, hi, &acc); },
                    [](kahan &a, const kahan &f) { c_kcombine(nullptr, &a, &f); });
                TT_EXPECT(same_bits(k.s, kw.s) && same_bits(k.c, kw.c));
                /* A type the library cannot copy bytewise: held by pointer. */
                std::vector<double> v = pool.token(b).reduce(
                    n, grain, std::vector<double>(4, 0.0),
                    [&](size_t lo, size_t hi, std::vector<double> &acc) {
                        for (size_t i = lo; i < hi; i++)
                            acc[i % 4] += x[i];
                    },
                    [](std::vector<double> &a, const std::vector<double> &f) {
                        for (int q = 0; q < 4; q++)
                            a[q] += f[q];
                    });
                TT_EXPECT(v.size() == 4);
                for (int q = 0; q < 4 && v.size() == 4; q++)
                    TT_EXPECT(same_bits(v[q], fw.v[q]));
                tt::loc mn = pool.token(b).minloc(x, grain);
                tt::loc mx = pool.token(b).maxloc(x.data(), n, grain);
                TT_EXPECT((same_bits(mn.value, mv) || (std::isnan(mn.value) && std::isnan(mv))) &&
                          mn.index == mi);
                TT_EXPECT((same_bits(mx.value, xv) || (std::isnan(mx.value) && std::isnan(xv))) &&
                          mx.index == xi);
                double t = -1;
                TT_EXPECT(pool.token(b).try_reduce_sum(
                              n, grain, [&](size_t lo, size_t hi) { return c_sum(&cd, lo, hi); }, t) ==
                          TT_OK);
                TT_EXPECT(same_bits(t, want));
            }
        }
    }
    TT_EXPECT_THROW(pool.token(2).reduce_sum(10, 0, [](size_t, size_t) { return 0.0; }), tt::error,
                    e.code() == TT_EINVAL);
}

int main(int argc, char **argv) { return tt_test::main(argc, argv); }
