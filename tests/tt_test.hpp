/*
 * tt_test.hpp -- the small harness of the C++ tests (tests/test_cpp*.cpp).
 *
 * tests/tt_test.h is C (C11 atomics, Check): the C++ programs use this
 * instead. A test is a function registered with TT_CASE; TT_EXPECT records
 * a failure from any thread (jobs, ranges, sections) without unwinding; a
 * watchdog (alarm) ends a program that hangs with status 1. Exit status:
 * 0 when every case passed, 1 otherwise, 77 (skip) when the program has
 * nothing to test in this build.
 *
 * Environment: TT_TEST_QUICK=1 divides iteration counts by 20 (the
 * sanitizer and valgrind runs), CK_TIMEOUT_MULTIPLIER scales the watchdog,
 * TT_UNDER_ASAN=1 (make check-asan) turns LeakSanitizer on for the run.
 */
#ifndef TT_TEST_HPP
#define TT_TEST_HPP

#include <threadteam.hpp>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace tt_test {

inline std::atomic<int> failures{0};

inline void fail_at(const char *file, int line, const char *what)
{
    failures.fetch_add(1);
    std::fprintf(stderr, "%s:%d: check failed: %s\n", file, line, what);
}

#define TT_EXPECT(cond)                                                                            \
    do {                                                                                           \
        if (!(cond))                                                                               \
            ::tt_test::fail_at(__FILE__, __LINE__, #cond);                                         \
    } while (0)

/* TT_EXPECT_THROW(stmt, type, check): stmt must throw `type`; `check` is an
 * expression over `e` (the caught exception). */
#define TT_EXPECT_THROW(stmt, type, check)                                                         \
    do {                                                                                           \
        bool tt__thrown = false;                                                                   \
        try {                                                                                      \
            stmt;                                                                                  \
        } catch (const type &e) {                                                                  \
            tt__thrown = true;                                                                     \
            if (!(check))                                                                          \
                ::tt_test::fail_at(__FILE__, __LINE__, "caught " #type " but: " #check);           \
        } catch (...) {                                                                            \
            tt__thrown = true;                                                                     \
            ::tt_test::fail_at(__FILE__, __LINE__, #stmt " threw something else than " #type);     \
        }                                                                                          \
        if (!tt__thrown)                                                                           \
            ::tt_test::fail_at(__FILE__, __LINE__, #stmt " did not throw " #type);                 \
    } while (0)

struct test_case {
    const char *name;
    std::function<void()> fn;
};

inline std::vector<test_case> &cases()
{
    static std::vector<test_case> v;
    return v;
}

struct registrar {
    registrar(const char *name, std::function<void()> fn) { cases().push_back({name, std::move(fn)}); }
};

#define TT_CASE(name)                                                                              \
    static void name();                                                                            \
    static ::tt_test::registrar name##_reg(#name, name);                                           \
    static void name()

/* Iterations: n, divided by 20 under TT_TEST_QUICK=1. */
inline unsigned iters(unsigned n)
{
    const char *q = std::getenv("TT_TEST_QUICK");
    if (q && std::strcmp(q, "1") == 0)
        n = n / 20 ? n / 20 : 1;
    return n;
}

inline void on_alarm(int)
{
    static const char msg[] = "tt_test: watchdog: the program hung\n";
    ssize_t r = write(2, msg, sizeof msg - 1);
    (void)r;
    _exit(1);
}

/* Under make check-asan (TT_UNDER_ASAN=1) the suite runs with
 * detect_leaks=0, for libgomp's sake; the C++ tests leak nothing of their
 * own or of the front's, so they run again with LeakSanitizer on. */
inline void leaks_on_under_asan(char **argv)
{
    const char *asan = std::getenv("TT_UNDER_ASAN");
    if (!asan || std::strcmp(asan, "1") != 0 || std::getenv("TT_TEST_LEAKS_ON"))
        return;
    const char *old = std::getenv("ASAN_OPTIONS");
    std::string opts = std::string(old ? old : "") + (old && *old ? ":" : "") + "detect_leaks=1";
    setenv("ASAN_OPTIONS", opts.c_str(), 1);
    setenv("TT_TEST_LEAKS_ON", "1", 1);
    execv("/proc/self/exe", argv);
    /* exec failed: run as we are */
}

/* Run every case (or the ones named on the command line). */
inline int main(int argc, char **argv, unsigned timeout_s = 240)
{
    leaks_on_under_asan(argv);
    const char *m = std::getenv("CK_TIMEOUT_MULTIPLIER");
    unsigned mult = m ? (unsigned)std::atoi(m) : 1;
    std::signal(SIGALRM, on_alarm);
    alarm(timeout_s * (mult ? mult : 1));
    int ran = 0;
    for (auto &c : cases()) {
        bool pick = argc < 2;
        for (int i = 1; i < argc; i++)
            pick = pick || std::strcmp(argv[i], c.name) == 0;
        if (!pick)
            continue;
        int before = failures.load();
        std::printf("case %s\n", c.name);
        std::fflush(stdout);
        try {
            c.fn();
        } catch (const std::exception &e) {
            fail_at(c.name, 0, (std::string("uncaught exception: ") + e.what()).c_str());
        } catch (...) {
            fail_at(c.name, 0, "uncaught exception");
        }
        std::printf("%s %s\n", failures.load() == before ? "PASS" : "FAIL", c.name);
        ran++;
    }
    std::printf("%d cases, %d failed checks\n", ran, failures.load());
    return failures.load() ? 1 : 0;
}

/* A live counter and its maximum. */
struct live {
    std::atomic<int> now{0}, max{0};
    void enter()
    {
        int v = now.fetch_add(1) + 1;
        int m = max.load();
        while (v > m && !max.compare_exchange_weak(m, v)) {
        }
    }
    void leave() { now.fetch_sub(1); }
};

inline void spin_us(unsigned us)
{
    auto end = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
    while (std::chrono::steady_clock::now() < end) {
    }
}

/* A pool of `w` threads with the test suite's spin setting. */
inline tt::pool make_pool(unsigned w)
{
    return tt::pool(tt::pool_options().threads(w).spin_polls(2000));
}

} // namespace tt_test

#endif
