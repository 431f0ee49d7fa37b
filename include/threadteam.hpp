/*
 * threadteam.hpp -- a header-only C++17 front over the C API of threadteam.
 *
 * Everything here is inline over threadteam.h: the library exports no C++
 * symbol, and its C ABI stays its one ABI. The C header remains the
 * reference for what each entry does (its placement, its shares, what
 * OpenMP sees); this file says only what the C++ form adds.
 *
 *   tt::pool pool(tt::pool_options().threads(8));   // RAII, no attr object
 *   tt::exec ex = pool.token(6);                    // move-only token
 *   std::move(ex).fork(2, [&](unsigned i, tt::exec&& child) {
 *       std::move(child).for_ranges(n, 1024, [&](size_t b, size_t e) { ... });
 *   });
 *
 * Tokens. tt::exec owns one tt_exec. Copying one does not compile; moving
 * one is allowed (the tt_exec itself stays where it was minted: a root or
 * reborrowed token lives in a heap block the object points to, a fork
 * job's child is the library's own). Every entry that consumes a token is
 * an rvalue member (`std::move(ex).fork(...)`), so consumption shows at the
 * call site and use-after-move checks (clang-tidy bugprone-use-after-move)
 * flag a second use. A refused entry (tt::refused) consumes nothing: the
 * token may be used again for the fallback. For phases, `ex.reborrow()`
 * gives a one-shot child and `ex` stays usable after the child was
 * consumed (the parent must outlive the child). A token's destructor
 * finishes it (tt_exec_finish): a team leader's role ends with its token.
 *
 * Callables. Every entry takes any callable; lambdas capture by reference.
 *   fork:        f(unsigned i, tt::exec&& child)  (or tt::exec&, or f(i))
 *   for_ranges, for_ranges_dynamic:  f(size_t begin, size_t end)
 *   broadcast:   f(unsigned i)
 *   external:    f(unsigned width)
 *   team_scope:  f(tt::scope&); scope.run(f(tt::section&)),
 *                scope.split(parts, f(unsigned part, tt::scope& sub)),
 *                scope.fork(jobs, f(unsigned i, tt::exec&& child))
 *   reduce:      identity, body(size_t begin, size_t end, T& acc),
 *                combine(T& into, const T& from) -> T
 *   reduce_sum:  body(size_t begin, size_t end) -> double
 * A callable is called as the caller's object would be: through that object,
 * or, where it is small, trivially copyable and has one call operator that
 * is const (a lambda capturing by reference), through a copy the entry
 * carries in a cache line of its own. A mutable or generic lambda, or a
 * functor with a non-const overload, is always called through the object.
 * The reductions are tt_reduce_ranges / tt_reduce_sum_d /
 * tt_reduce_minloc_d / tt_reduce_maxloc_d underneath: the same blocks and
 * the same tree, so the same bits for every budget, width and run as the C
 * functions with the same callbacks.
 *
 * Errors. An entry that fails throws tt::error (a std::runtime_error with
 * code() and what() = "TT_NAME: tt_strerror's sentence"); a refusal
 * (TT_REFUSED_*) throws tt::refused, derived from tt::error, so a fallback
 * path is one `catch (const tt::refused&)`. Every throwing entry has a
 * try_ twin that returns the code instead (TT_OK, or the library's code).
 *
 * Exceptions out of callables. An exception thrown by a job, range,
 * broadcast call, external callable, reduction callback, scope function,
 * section or split part never reaches std::terminate: the first one is
 * kept, jobs and ranges that have not started yet return at once, and the
 * entry rethrows it on its caller after every started share ended (the
 * try_ twins rethrow it too: it is the caller's exception, not a library
 * code). In a team scope the throw fails the scope (tt_section_fail,
 * tt_scope_fail with the error's code for a tt::error, tt::exception_code
 * for any other exception), so the section's other participants are
 * released from its barriers: their section::barrier() throws tt::error
 * with the scope's code, which unwinds them to the section's end (the
 * first exception, not this one, is the one rethrown). scope.run and its
 * friends throw tt::error(code) once the scope failed.
 *
 * Without exceptions (-fno-exceptions): the header compiles; the try_
 * forms are the API, and a throwing form that meets an error prints it on
 * stderr and calls std::abort().
 *
 * Threads: what the C header says of each entry holds; a tt::exec belongs
 * to one thread as a tt_exec does.
 */
#ifndef THREADTEAM_HPP
#define THREADTEAM_HPP

#include <threadteam.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iterator>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#if defined(__cpp_exceptions) || defined(__EXCEPTIONS)
#define TT_HPP_EXCEPTIONS 1
#else
#define TT_HPP_EXCEPTIONS 0
#endif

namespace tt {

/** The code a scope fails with (tt_scope_failed) when a C++ exception that
 *  is not a tt::error leaves a section, a split part or the scope
 *  function. Outside TT_STATUS_MAP's values. */
constexpr int exception_code = 0x7474; /* 29812 */

/** True for the TT_REFUSED_* codes: nothing ran and nothing was consumed. */
constexpr bool is_refusal(int code) noexcept
{
    return code == TT_REFUSED_FORK_CHILD || code == TT_REFUSED_CALLER_IN_POOL ||
           code == TT_REFUSED_UNAVAILABLE || code == TT_REFUSED_BUSY;
}

/** "TT_NAME: sentence" for a code (tt_status_name, tt_strerror). */
inline std::string message(int code)
{
    return std::string(tt_status_name(code)) + ": " + tt_strerror(code);
}

/** A failed entry: code() is the TT_* code (or a scope's own code). */
class error : public std::runtime_error {
  public:
    explicit error(int code) : std::runtime_error(message(code)), code_(code) {}
    int code() const noexcept { return code_; }

  private:
    int code_;
};

/** A refusal (TT_REFUSED_*): the entry ran and consumed nothing. */
class refused : public error {
  public:
    explicit refused(int code) : error(code) {}
};

namespace detail {

/* Throw the exception of `code` (never TT_OK), or, without exceptions,
 * print it and abort. */
[[noreturn]] inline void raise(int code)
{
#if TT_HPP_EXCEPTIONS
    if (is_refusal(code))
        throw refused(code);
    throw error(code);
#else
    std::fprintf(stderr, "threadteam: %s: %s\n", tt_status_name(code), tt_strerror(code));
    std::abort();
#endif
}

inline void check(int code)
{
    if (code != TT_OK)
        raise(code);
}

/* The first exception out of the callables of one entry. `failed` is the
 * only field the callables' threads read while the entry runs; `first` is
 * written by the one thread that won the flag and read by the entry's
 * caller after the entry returned (the entry's join orders the two). */
struct carrier {
    std::atomic<bool> failed_{false};
#if TT_HPP_EXCEPTIONS
    std::exception_ptr first;
#endif
    bool failed() const noexcept { return failed_.load(std::memory_order_acquire); }
    /* Keep the exception being handled, unless one is kept already. */
    void capture() noexcept
    {
#if TT_HPP_EXCEPTIONS
        bool no = false;
        if (!failed_.load(std::memory_order_relaxed) &&
            failed_.compare_exchange_strong(no, true, std::memory_order_acq_rel))
            first = std::current_exception();
#endif
    }
    void rethrow()
    {
#if TT_HPP_EXCEPTIONS
        if (failed_.load(std::memory_order_acquire) && first)
            std::rethrow_exception(first);
#endif
    }
};

/* Run fn; an exception leaving it is kept in c, and then `on_throw(code)`
 * is called (the code of a tt::error, else exception_code). */
template <class Fn, class OnThrow>
inline void guarded(carrier &c, Fn &&fn, OnThrow &&on_throw) noexcept
{
#if TT_HPP_EXCEPTIONS
    try {
        fn();
    } catch (const error &e) {
        c.capture();
        on_throw(e.code() != TT_OK ? e.code() : exception_code);
    } catch (...) {
        c.capture();
        on_throw(exception_code);
    }
#else
    (void)c;
    (void)on_throw;
    fn();
#endif
}

template <class Fn> inline void guarded(carrier &c, Fn &&fn) noexcept
{
    guarded(c, std::forward<Fn>(fn), [](int) noexcept {});
}

template <class> inline constexpr bool always_false = false;

/* Whether a member function pointer type is const-qualified. */
template <class M> struct const_member : std::false_type {};
template <class R, class C, class... A> struct const_member<R (C::*)(A...) const> : std::true_type {};
template <class R, class C, class... A> struct const_member<R (C::*)(A...) const noexcept> : std::true_type {};

/* F has exactly one call operator, a const one, not a template: a lambda
 * without `mutable` and not generic, or such a functor. A copy called as
 * const then runs the very operator the caller's object runs; a functor
 * with a non-const overload beside a const one keeps its non-const one
 * because it is reached through a pointer. */
template <class F, class = void> struct one_const_call : std::false_type {};
template <class F>
struct one_const_call<F, std::void_t<decltype(&F::operator())>> : const_member<decltype(&F::operator())> {};

template <class F> inline constexpr bool copyable_callable =
    std::is_trivially_copyable_v<F> && sizeof(F) <= 32 && one_const_call<F>::value;

/* The callable an entry's context carries to the threads that run it: a
 * copy, where the callable is small, trivially copyable and has one call
 * operator, const (a lambda capturing by reference), so that a participant
 * finds it in the context's own cache line instead of fetching one more
 * line from the caller's stack; else a pointer to the caller's object. */
template <class F, class... A>
inline constexpr bool held_by_copy = copyable_callable<F> && std::is_invocable_v<const F &, A...>;

template <class F, bool Copy> struct held_fn {
    F *p;
    explicit held_fn(F &f) noexcept : p(&f) {}
    F &get() const noexcept { return *p; }
};
template <class F> struct held_fn<F, true> {
    F v;
    explicit held_fn(F &f) noexcept : v(f) {}
    const F &get() const noexcept { return v; }
};

/* Heap blocks for the tokens the front mints (a tt_exec may not move once
 * minted, so a movable tt::exec points to one). Each is a whole cache
 * line or two, so that the entry's threads reading the token share no
 * line with the caller's other heap data; a few per thread are kept for
 * reuse, which makes a token per call cost no allocator call. */
struct token_blocks {
    static constexpr std::size_t size = (sizeof(tt_exec) + 63) / 64 * 64;
    static constexpr int cap = 4;
    void *kept[cap];
    int n = 0;
    ~token_blocks()
    {
        gone() = true; /* a token destroyed later on this thread frees its block */
        while (n > 0)
            std::free(kept[--n]);
    }
    static bool &gone() noexcept
    {
        thread_local bool g = false;
        return g;
    }
    static token_blocks &mine() noexcept
    {
        thread_local token_blocks t;
        return t;
    }
    static tt_exec *take() noexcept
    {
        void *b = nullptr;
        if (!gone()) {
            token_blocks &t = mine();
            if (t.n > 0)
                b = t.kept[--t.n];
        }
        if (!b)
            b = std::aligned_alloc(64, size);
        if (b)
            std::memset(b, 0, sizeof(tt_exec));
        return static_cast<tt_exec *>(b);
    }
    static void give(tt_exec *b) noexcept
    {
        if (!gone()) {
            token_blocks &t = mine();
            if (t.n < cap) {
                t.kept[t.n++] = b;
                return;
            }
        }
        std::free(b);
    }
};

} // namespace detail

class pool;
class team;
class scope;
class section;

/** The reproducible minimum or maximum and its index (minloc / maxloc). */
struct loc {
    double value;
    std::size_t index;
};

/** A token: a budget of slots of one pool (see the file's head). */
class exec {
  public:
    /** An empty token: entries on it fail with TT_EINVAL (as a moved-from
     *  token's do). Fill it with pool::try_token or by a move. */
    exec() noexcept = default;
    exec(const exec &) = delete;
    exec &operator=(const exec &) = delete;
    exec(exec &&o) noexcept : p_(o.p_), owned_(o.owned_) { o.p_ = nullptr; }
    exec &operator=(exec &&o) noexcept
    {
        if (this != &o) {
            drop();
            p_ = o.p_;
            owned_ = o.owned_;
            o.p_ = nullptr;
        }
        return *this;
    }
    /** Finishes a token minted by the front (tt_exec_finish: nothing for a
     *  consumed one); a fork job's child is left to the library. */
    ~exec() { drop(); }

    /** A serial token: the calling thread only, budget 1. */
    static exec serial()
    {
        exec e;
        detail::check(e.alloc());
        tt_exec_init_serial(e.p_);
        return e;
    }

    /** Whether the object holds a token (false when empty or moved from). */
    bool valid() const noexcept { return p_ != nullptr; }
    unsigned budget() const noexcept { return p_ ? tt_exec_budget(p_) : 0; }
    bool is_serial() const noexcept { return p_ && tt_exec_is_serial(p_); }
    bool carries_team() const noexcept { return p_ && tt_carries_team(p_); }
    bool can_broadcast() const noexcept { return p_ && tt_can_broadcast(p_); }
    /** The C token, for a kernel written against threadteam.h. */
    tt_exec *native() noexcept { return p_; }

    /** Narrow in place to min(budget, max) (tt_exec_limit). */
    exec &limit(unsigned max) & noexcept
    {
        tt_exec_limit(p_, max);
        return *this;
    }
    exec &&limit(unsigned max) && noexcept
    {
        tt_exec_limit(p_, max);
        return std::move(*this);
    }

    /** A one-shot child with this token's pool, budget and flags
     *  (tt_exec_reborrow). This token must outlive the child. */
    exec reborrow() &
    {
        exec c;
        detail::check(c.alloc());
        tt_exec_reborrow(p_, c.p_);
        return c;
    }
    exec reborrow() && = delete; /* the child of a temporary would dangle */

    /** In a fork job, on the job's child token (also after the job moved
     *  it or used it for an entry): end the fork with `code` (nonzero),
     *  tt_fork_fail. The fork's jobs not yet started do not run, and the
     *  fork throws tt::error(code) (try_fork returns it) after the started
     *  ones ended. A job may also just throw. */
    void fail(int code) { detail::check(try_fail(code)); }
    [[nodiscard]] int try_fail(int code) noexcept { return tt_fork_fail(p_, code); }

    /** End the token without an entry (tt_exec_finish). */
    void finish() && noexcept
    {
        if (p_)
            tt_exec_finish(p_);
    }

    /* ---- fork -------------------------------------------------------- */

    /** tt_fork: jobs 0..jobs-1, each with its child token. */
    template <class F> void fork(unsigned jobs, F &&f) &&
    {
        detail::check(fork_impl(jobs, f));
    }
    template <class F>[[nodiscard]] int try_fork(unsigned jobs, F &&f) && noexcept(!TT_HPP_EXCEPTIONS)
    {
        return fork_impl(jobs, f);
    }

    /* ---- ranges ------------------------------------------------------ */

    /** tt_for_ranges: f(begin, end) over [0, len). */
    template <class F> void for_ranges(std::size_t len, std::size_t grain, F &&f) &&
    {
        detail::check(ranges_impl(len, grain, f, false));
    }
    template <class F>
    [[nodiscard]] int try_for_ranges(std::size_t len, std::size_t grain, F &&f) && noexcept(!TT_HPP_EXCEPTIONS)
    {
        return ranges_impl(len, grain, f, false);
    }

    /** tt_for_ranges_dynamic: chunks of `grain` indices handed out first
     *  come first served (for loops whose cost per index varies). After a
     *  throw, the chunks not yet started are skipped. */
    template <class F> void for_ranges_dynamic(std::size_t len, std::size_t grain, F &&f) &&
    {
        detail::check(ranges_impl(len, grain, f, true));
    }
    template <class F>
    [[nodiscard]] int try_for_ranges_dynamic(std::size_t len, std::size_t grain,
                                             F &&f) && noexcept(!TT_HPP_EXCEPTIONS)
    {
        return ranges_impl(len, grain, f, true);
    }

    /* ---- broadcast and external -------------------------------------- */

    /** tt_broadcast: f(i) for i in 0..budget-1, all at once. */
    template <class F> void broadcast(F &&f) &&
    {
        detail::check(broadcast_impl(f));
    }
    template <class F>[[nodiscard]] int try_broadcast(F &&f) && noexcept(!TT_HPP_EXCEPTIONS)
    {
        return broadcast_impl(f);
    }

    /** tt_external: f(width), where an OpenMP library gets `width`. */
    template <class F> void external(F &&f) &&
    {
        detail::check(external_impl(f));
    }
    template <class F>[[nodiscard]] int try_external(F &&f) && noexcept(!TT_HPP_EXCEPTIONS)
    {
        return external_impl(f);
    }

    /* ---- team scopes ------------------------------------------------- */

    /** tt_team_scope: f(scope&) on the calling thread, as the leader. */
    template <class F> void team_scope(F &&f) &&
    {
        detail::check(scope_impl(nullptr, f));
    }
    /** tt_team_scope_with. */
    template <class F> void team_scope(const tt_team_opts &opts, F &&f) &&
    {
        detail::check(scope_impl(&opts, f));
    }
    template <class F>[[nodiscard]] int try_team_scope(F &&f) && noexcept(!TT_HPP_EXCEPTIONS)
    {
        return scope_impl(nullptr, f);
    }
    template <class F>
    [[nodiscard]] int try_team_scope(const tt_team_opts &opts, F &&f) && noexcept(!TT_HPP_EXCEPTIONS)
    {
        return scope_impl(&opts, f);
    }

    /* ---- reductions -------------------------------------------------- */

    /** tt_reduce_ranges over T: each block's partial starts as a copy of
     *  `identity`, body(begin, end, acc) fills it, combine(into, from)
     *  merges two in the fixed tree. Returns the result. */
    template <class T, class Body, class Combine>
    T reduce(std::size_t len, std::size_t grain, T identity, Body &&body, Combine &&combine) &&
    {
        std::optional<T> out;
        detail::check(reduce_impl(len, grain, identity, body, combine, out));
        return std::move(*out);
    }
    template <class T, class Body, class Combine>
    [[nodiscard]] int try_reduce(std::size_t len, std::size_t grain, T identity, Body &&body,
                                 Combine &&combine, T &result) && noexcept(!TT_HPP_EXCEPTIONS)
    {
        std::optional<T> out;
        int rc = reduce_impl(len, grain, identity, body, combine, out);
        if (rc == TT_OK)
            result = std::move(*out);
        return rc;
    }

    /** tt_reduce_sum_d: the sum of body(begin, end) over the blocks. */
    template <class F> double reduce_sum(std::size_t len, std::size_t grain, F &&body) &&
    {
        double r = 0.0;
        detail::check(sum_impl(len, grain, body, &r));
        return r;
    }
    template <class F>
    [[nodiscard]] int try_reduce_sum(std::size_t len, std::size_t grain, F &&body,
                                     double &result) && noexcept(!TT_HPP_EXCEPTIONS)
    {
        return sum_impl(len, grain, body, &result);
    }

    /** tt_reduce_minloc_d / tt_reduce_maxloc_d over x[0..len). */
    loc minloc(const double *x, std::size_t len, std::size_t grain) &&
    {
        loc r{0.0, 0};
        detail::check(tt_reduce_minloc_d(p_, x, len, grain, &r.value, &r.index));
        return r;
    }
    loc maxloc(const double *x, std::size_t len, std::size_t grain) &&
    {
        loc r{0.0, 0};
        detail::check(tt_reduce_maxloc_d(p_, x, len, grain, &r.value, &r.index));
        return r;
    }
    [[nodiscard]] int try_minloc(const double *x, std::size_t len, std::size_t grain, loc &r) && noexcept
    {
        return tt_reduce_minloc_d(p_, x, len, grain, &r.value, &r.index);
    }
    [[nodiscard]] int try_maxloc(const double *x, std::size_t len, std::size_t grain, loc &r) && noexcept
    {
        return tt_reduce_maxloc_d(p_, x, len, grain, &r.value, &r.index);
    }
    /** Over a contiguous container of doubles (std::vector<double>, ...). */
    template <class C> loc minloc(const C &c, std::size_t grain) &&
    {
        return std::move(*this).minloc(std::data(c), std::size(c), grain);
    }
    template <class C> loc maxloc(const C &c, std::size_t grain) &&
    {
        return std::move(*this).maxloc(std::data(c), std::size(c), grain);
    }

  private:
    friend class pool;
    friend class team;
    friend class scope;

    tt_exec *p_ = nullptr;
    bool owned_ = false; /* p_ is a heap block of ours */

    struct borrow_tag {};
    exec(borrow_tag, tt_exec *p) noexcept : p_(p), owned_(false) {}

    /* A heap block for a token minted here: a tt_exec may not move once
     * minted (a moved one reads as a copy, TT_ECOPY), so the object moves
     * and the block stays. */
    int alloc() noexcept
    {
        drop();
        p_ = detail::token_blocks::take();
        if (!p_)
            return TT_ENOMEM;
        owned_ = true;
        return TT_OK;
    }
    void drop() noexcept
    {
        if (!p_)
            return;
        /* A fork job's child is the library's, which ends it when the job
         * returns; a token minted here is finished (a leader role ends). */
        if (owned_) {
            tt_exec_finish(p_);
            detail::token_blocks::give(p_);
        }
        p_ = nullptr;
        owned_ = false;
    }

    /* Which form a job takes: 1 an rvalue child, 2 an lvalue one, 3 no
     * child, 0 none of them. G is F or const F. */
    template <class G>
    static constexpr int job_form = std::is_invocable_v<G &, unsigned, exec &&> ? 1
                                    : std::is_invocable_v<G &, unsigned, exec &> ? 2
                                    : std::is_invocable_v<G &, unsigned>         ? 3
                                                                                 : 0;

    /* Call a job: with an rvalue child, or an lvalue one, or no child. G is
     * const where the job's context holds a copy of the callable. */
    template <class G> static void call_job(G &f, unsigned i, exec &child)
    {
        if constexpr (job_form<G> == 1)
            f(i, std::move(child));
        else if constexpr (job_form<G> == 2)
            f(i, child);
        else if constexpr (job_form<G> == 3)
            f(i);
        else
            static_assert(detail::always_false<G>,
                          "a fork job is f(unsigned i, tt::exec&& child), f(unsigned, tt::exec&) or f(unsigned)");
    }

    /* A job's callable travels as a copy in its context's line where
     * detail::held_fn would copy it (its one call operator is const). */
    template <class F>
    static constexpr bool job_by_copy = detail::copyable_callable<F> && job_form<const F> != 0;

    /* One cache line: the callable (or a pointer to it) and the carrier,
     * the only fields a job's thread reads (see detail::held_fn). */
    template <class F> struct alignas(64) job_ctx {
        detail::held_fn<F, job_by_copy<F>> f;
        detail::carrier c;
        explicit job_ctx(F &fn) noexcept : f(fn) {}
        static void job(void *a, unsigned i, tt_exec *child) noexcept
        {
            job_ctx *x = static_cast<job_ctx *>(a);
            exec ch(borrow_tag{}, child);
            if (x->c.failed())
                return; /* a job started after a throw: skipped */
            detail::guarded(x->c, [&] { call_job(x->f.get(), i, ch); },
                            [&](int code) noexcept { (void)tt_fork_fail(child, code); });
        }
    };

    template <class F> int fork_impl(unsigned jobs, F &f)
    {
        job_ctx<F> x(f);
        int rc = tt_fork(p_, jobs, &job_ctx<F>::job, &x);
        x.c.rethrow();
        return rc;
    }

    template <class F> struct alignas(64) range_ctx {
        detail::held_fn<F, detail::held_by_copy<F, std::size_t, std::size_t>> f;
        detail::carrier c;
        explicit range_ctx(F &fn) noexcept : f(fn) {}
        static void body(void *a, std::size_t b, std::size_t e) noexcept
        {
            range_ctx *x = static_cast<range_ctx *>(a);
            if (x->c.failed())
                return;
            static_assert(std::is_invocable_v<F &, std::size_t, std::size_t>,
                          "a range body is f(size_t begin, size_t end)");
            detail::guarded(x->c, [&] { x->f.get()(b, e); });
        }
    };

    template <class F> int ranges_impl(std::size_t len, std::size_t grain, F &f, bool dynamic)
    {
        range_ctx<F> x(f);
        int rc = dynamic ? tt_for_ranges_dynamic(p_, len, grain, &range_ctx<F>::body, &x)
                         : tt_for_ranges(p_, len, grain, &range_ctx<F>::body, &x);
        x.c.rethrow();
        return rc;
    }

    template <class F> struct unsigned_ctx {
        F *f;
        detail::carrier c;
        static void call(void *a, unsigned i) noexcept
        {
            unsigned_ctx *x = static_cast<unsigned_ctx *>(a);
            static_assert(std::is_invocable_v<F &, unsigned>, "this callable is f(unsigned)");
            detail::guarded(x->c, [&] { (*x->f)(i); });
        }
    };

    template <class F> int broadcast_impl(F &f)
    {
        unsigned_ctx<F> x{&f, {}};
        int rc = tt_broadcast(p_, &unsigned_ctx<F>::call, &x);
        x.c.rethrow();
        return rc;
    }

    template <class F> int external_impl(F &f)
    {
        unsigned_ctx<F> x{&f, {}};
        int rc = tt_external(p_, &unsigned_ctx<F>::call, &x);
        x.c.rethrow();
        return rc;
    }

    template <class F> int scope_impl(const tt_team_opts *opts, F &f);

    template <class F> struct alignas(64) sum_ctx {
        detail::held_fn<F, detail::held_by_copy<F, std::size_t, std::size_t>> f;
        detail::carrier c;
        explicit sum_ctx(F &fn) noexcept : f(fn) {}
        static double body(void *a, std::size_t b, std::size_t e) noexcept
        {
            sum_ctx *x = static_cast<sum_ctx *>(a);
            double r = 0.0;
            if (x->c.failed())
                return r;
            static_assert(std::is_invocable_r_v<double, F &, std::size_t, std::size_t>,
                          "a reduce_sum body is double f(size_t begin, size_t end)");
            detail::guarded(x->c, [&] { r = x->f.get()(b, e); });
            return r;
        }
    };

    template <class F> int sum_impl(std::size_t len, std::size_t grain, F &f, double *out)
    {
        sum_ctx<F> x(f);
        double r = 0.0;
        int rc = tt_reduce_sum_d(p_, len, grain, &sum_ctx<F>::body, &x, &r);
        x.c.rethrow();
        if (rc == TT_OK)
            *out = r;
        return rc;
    }

    /* A partial held in the library's accumulator itself (a trivially
     * copyable T: the library copies the bytes of the result) or through
     * a pointer (any other T: the library copies the pointer; each
     * partial but block 0's is a `from` exactly once in the tree, so
     * combine frees it there, and the caller takes block 0's). */
    template <class T>
    static constexpr bool reduce_inline =
        std::is_trivially_copyable_v<T> && alignof(T) <= alignof(std::max_align_t);

    template <class T, class Body, class Combine> struct reduce_ctx {
        const T *identity;
        Body *body;
        Combine *combine;
        detail::carrier c;

        static T *get(void *acc) noexcept
        {
            if constexpr (reduce_inline<T>)
                return std::launder(static_cast<T *>(acc));
            else
                return *static_cast<T **>(acc);
        }
        static void init(void *a, void *acc) noexcept
        {
            reduce_ctx *x = static_cast<reduce_ctx *>(a);
            if constexpr (reduce_inline<T>) {
                ::new (acc) T(*x->identity);
            } else {
                *static_cast<T **>(acc) = nullptr;
                detail::guarded(x->c, [&] { *static_cast<T **>(acc) = new T(*x->identity); });
            }
        }
        static void body_fn(void *a, std::size_t b, std::size_t e, void *acc) noexcept
        {
            reduce_ctx *x = static_cast<reduce_ctx *>(a);
            T *t = get(acc);
            if (!t || x->c.failed())
                return;
            static_assert(std::is_invocable_v<Body &, std::size_t, std::size_t, T &>,
                          "a reduce body is f(size_t begin, size_t end, T& acc)");
            detail::guarded(x->c, [&] { (*x->body)(b, e, *t); });
        }
        static void combine_fn(void *a, void *into, const void *from) noexcept
        {
            reduce_ctx *x = static_cast<reduce_ctx *>(a);
            T *l = get(into);
            T *r = get(const_cast<void *>(from));
            if (l && r && !x->c.failed()) {
                static_assert(std::is_invocable_v<Combine &, T &, const T &>,
                              "a reduce combine is f(T& into, const T& from)");
                detail::guarded(x->c, [&] { (*x->combine)(*l, *r); });
            }
            if constexpr (!reduce_inline<T>)
                delete r;
        }
    };

    template <class T, class Body, class Combine>
    int reduce_impl(std::size_t len, std::size_t grain, const T &identity, Body &body, Combine &combine,
                    std::optional<T> &out)
    {
        using ctx = reduce_ctx<T, Body, Combine>;
        ctx x{&identity, &body, &combine, {}};
        if constexpr (reduce_inline<T>) {
            alignas(T) unsigned char buf[sizeof(T)];
            int rc = tt_reduce_ranges(p_, len, grain, sizeof(T), &ctx::init, &ctx::body_fn,
                                      &ctx::combine_fn, &x, buf);
            x.c.rethrow();
            if (rc == TT_OK)
                out.emplace(*std::launder(reinterpret_cast<T *>(buf)));
            return rc;
        } else {
            T *res = nullptr;
            int rc = tt_reduce_ranges(p_, len, grain, sizeof(T *), &ctx::init, &ctx::body_fn,
                                      &ctx::combine_fn, &x, &res);
            std::unique_ptr<T> hold(rc == TT_OK ? res : nullptr);
            x.c.rethrow();
            if (rc == TT_OK)
                out.emplace(std::move(*hold));
            return rc;
        }
    }
};

/** Options of a pool, set fluently: tt::pool_options().threads(8). A
 *  setting left alone keeps the library's default. */
class pool_options {
  public:
    pool_options &threads(unsigned n) { threads_ = n; return *this; }
    pool_options &thread_name(std::string name) { name_ = std::move(name); return *this; }
    pool_options &stack_size(std::size_t bytes) { stack_ = bytes; return *this; }
    pool_options &idle_spin(std::uint64_t ns) { idle_spin_ = ns; return *this; }
    pool_options &idle_serves_pool(bool on) { idle_serves_ = on; return *this; }
    pool_options &acquire_timeout(std::uint64_t ns) { acquire_timeout_ = ns; return *this; }
    pool_options &spin_polls(std::uint64_t polls) { spin_polls_ = polls; return *this; }
    pool_options &pin_participants(bool on) { pin_ = on; return *this; }
    pool_options &isolate_shares(bool on) { isolate_ = on; return *this; }

  private:
    friend class pool;
    std::optional<unsigned> threads_;
    std::optional<std::string> name_;
    std::optional<std::size_t> stack_;
    std::optional<std::uint64_t> idle_spin_, acquire_timeout_, spin_polls_;
    std::optional<bool> idle_serves_, pin_, isolate_;

    bool any() const noexcept
    {
        return threads_ || name_ || stack_ || idle_spin_ || acquire_timeout_ || spin_polls_ ||
               idle_serves_ || pin_ || isolate_;
    }
    /* Build a pool from these settings through a short-lived attr. */
    int create(tt_pool **out) const noexcept
    {
        if (!any())
            return tt_pool_create(out, nullptr);
        tt_pool_attr *a = nullptr;
        int rc = tt_pool_attr_create(&a);
        if (rc != TT_OK)
            return rc;
        if (rc == TT_OK && threads_) rc = tt_pool_attr_set_threads(a, *threads_);
        if (rc == TT_OK && name_) rc = tt_pool_attr_set_thread_name(a, name_->c_str());
        if (rc == TT_OK && stack_) rc = tt_pool_attr_set_stack_size(a, *stack_);
        if (rc == TT_OK && idle_spin_) rc = tt_pool_attr_set_idle_spin(a, *idle_spin_);
        if (rc == TT_OK && idle_serves_) rc = tt_pool_attr_set_idle_serves_pool(a, *idle_serves_);
        if (rc == TT_OK && acquire_timeout_) rc = tt_pool_attr_set_acquire_timeout(a, *acquire_timeout_);
        if (rc == TT_OK && spin_polls_) rc = tt_pool_attr_set_spin_polls(a, *spin_polls_);
        if (rc == TT_OK && pin_) rc = tt_pool_attr_set_pin_participants(a, *pin_);
        if (rc == TT_OK && isolate_) rc = tt_pool_attr_set_isolate_shares(a, *isolate_);
        if (rc == TT_OK)
            rc = tt_pool_create(out, a);
        tt_pool_attr_destroy(a);
        return rc;
    }
};

/** A pool (RAII: destroyed with the object). Move-only. */
class pool {
  public:
    /** A pool with the default settings (the application's width). */
    pool() { detail::check(tt_pool_create(&p_, nullptr)); }
    explicit pool(const pool_options &o) { detail::check(o.create(&p_)); }
    /** No pool: fill it with try_create or a move. */
    explicit pool(std::nullptr_t) noexcept {}
    /** Build into `out` without throwing: TT_OK or tt_pool_create's code
     *  (also tt_pool_attr_set_*'s); `out` is left empty on error. */
    [[nodiscard]] static int try_create(pool &out, const pool_options &o = pool_options()) noexcept
    {
        out.reset();
        return o.create(&out.p_);
    }
    pool(const pool &) = delete;
    pool &operator=(const pool &) = delete;
    pool(pool &&o) noexcept : p_(o.p_) { o.p_ = nullptr; }
    pool &operator=(pool &&o) noexcept
    {
        if (this != &o) {
            reset();
            p_ = o.p_;
            o.p_ = nullptr;
        }
        return *this;
    }
    /** tt_pool_destroy. Every token of the pool must be gone by then. */
    ~pool() { reset(); }

    explicit operator bool() const noexcept { return p_ != nullptr; }
    unsigned width() const noexcept { return p_ ? tt_pool_width(p_) : 0; }
    tt_pool *native() noexcept { return p_; }

    /** Mint a root token of `budget` slots (clamped to the width). */
    exec token(unsigned budget)
    {
        exec e;
        detail::check(try_token(budget, e));
        return e;
    }
    /** The same without throwing: TT_OK or tt_exec_init's code (and
     *  TT_ENOMEM); `out` is left empty on error. */
    [[nodiscard]] int try_token(unsigned budget, exec &out) noexcept
    {
        int rc = out.alloc();
        if (rc == TT_OK)
            rc = tt_exec_init(out.p_, p_, budget);
        if (rc != TT_OK)
            out.drop();
        return rc;
    }
    /** tt_pool_release_idle. */
    void release_idle() { detail::check(tt_pool_release_idle(p_)); }

  private:
    friend class team;
    tt_pool *p_ = nullptr;
    void reset() noexcept
    {
        if (p_)
            (void)tt_pool_destroy(p_);
        p_ = nullptr;
    }
};

/** A participant's view of a section (tt_section). */
class section {
  public:
    unsigned rank() const noexcept { return tt_section_rank(s_); }
    unsigned size() const noexcept { return tt_section_size(s_); }
    /** tt_section_barrier. Once the scope failed it throws tt::error with
     *  the scope's code, so that the participant leaves the section. */
    void barrier() { detail::check(try_barrier()); }
    /** TT_OK, or the scope's failure code once it failed. */
    [[nodiscard]] int try_barrier() noexcept { return tt_section_barrier(s_); }
    /** tt_section_fail: fail the scope with `code` (nonzero). */
    void fail(int code) { detail::check(tt_section_fail(s_, code)); }
    tt_section *native() noexcept { return s_; }
    section(const section &) = delete;
    section &operator=(const section &) = delete;

  private:
    friend class scope;
    explicit section(tt_section *s) noexcept : s_(s) {}
    tt_section *s_;
};

/** The leader's handle on a team scope (or a split part's sub-scope). */
class scope {
  public:
    unsigned size() const noexcept { return tt_scope_size(s_); }
    /** The scope's failure code: 0 while it has not failed. */
    int failed() const noexcept { return tt_scope_failed(s_); }
    /** tt_scope_fail: fail the scope with `code` (nonzero). */
    void fail(int code) { detail::check(tt_scope_fail(s_, code)); }
    tt_scope *native() noexcept { return s_; }

    /** tt_scope_run: f(section&) on every participant. */
    template <class F> void run(F &&f) { detail::check(run_impl(0, f)); }
    /** tt_scope_run_with: on the first `width` participants. */
    template <class F> void run_with(unsigned width, F &&f) { detail::check(run_impl(width, f)); }
    template <class F>[[nodiscard]] int try_run(F &&f) noexcept(!TT_HPP_EXCEPTIONS) { return run_impl(0, f); }
    template <class F>[[nodiscard]] int try_run_with(unsigned width, F &&f) noexcept(!TT_HPP_EXCEPTIONS)
    {
        return run_impl(width, f);
    }
    /** tt_scope_split: f(part, sub) for each part, with its sub-scope. */
    template <class F> void split(unsigned parts, F &&f) { detail::check(split_impl(parts, f)); }
    template <class F>[[nodiscard]] int try_split(unsigned parts, F &&f) noexcept(!TT_HPP_EXCEPTIONS)
    {
        return split_impl(parts, f);
    }
    /** tt_scope_fork: f(i, child) with team-authority children. A throw
     *  in a job fails the scope (exception_code or the tt::error's code)
     *  and is rethrown here. */
    template <class F> void fork(unsigned jobs, F &&f) { detail::check(fork_impl(jobs, f)); }
    template <class F>[[nodiscard]] int try_fork(unsigned jobs, F &&f) noexcept(!TT_HPP_EXCEPTIONS)
    {
        return fork_impl(jobs, f);
    }
    /** tt_scope_reborrow: a token with team authority over the scope. */
    exec reborrow()
    {
        exec c;
        detail::check(c.alloc());
        tt_scope_reborrow(s_, c.p_);
        return c;
    }

    scope(const scope &) = delete;
    scope &operator=(const scope &) = delete;

  private:
    friend class exec;
    scope(tt_scope *s, detail::carrier *c) noexcept : s_(s), c_(c) {}
    tt_scope *s_;
    detail::carrier *c_; /* shared by every callable of one tt_team_scope */

    template <class F> struct alignas(64) section_ctx {
        detail::held_fn<F, detail::held_by_copy<F, section &>> f;
        detail::carrier *c;
        section_ctx(F &fn, detail::carrier *cr) noexcept : f(fn), c(cr) {}
        static void call(void *a, tt_section *s) noexcept
        {
            section_ctx *x = static_cast<section_ctx *>(a);
            section sec(s);
            static_assert(std::is_invocable_v<F &, section &>, "a section is f(tt::section&)");
            detail::guarded(*x->c, [&] { x->f.get()(sec); },
                            [&](int code) noexcept { (void)tt_section_fail(s, code); });
        }
    };
    template <class F> int run_impl(unsigned width, F &f)
    {
        section_ctx<F> x(f, c_);
        int rc = width ? tt_scope_run_with(s_, width, &section_ctx<F>::call, &x)
                       : tt_scope_run(s_, &section_ctx<F>::call, &x);
        return rc;
    }

    template <class F> struct alignas(64) split_ctx {
        detail::held_fn<F, detail::held_by_copy<F, unsigned, scope &>> f;
        detail::carrier *c;
        split_ctx(F &fn, detail::carrier *cr) noexcept : f(fn), c(cr) {}
        static void call(void *a, unsigned part, tt_scope *sub) noexcept
        {
            split_ctx *x = static_cast<split_ctx *>(a);
            scope s(sub, x->c);
            static_assert(std::is_invocable_v<F &, unsigned, scope &>,
                          "a split part is f(unsigned part, tt::scope& sub)");
            detail::guarded(*x->c, [&] { x->f.get()(part, s); },
                            [&](int code) noexcept { (void)tt_scope_fail(sub, code); });
        }
    };
    template <class F> int split_impl(unsigned parts, F &f)
    {
        split_ctx<F> x(f, c_);
        return tt_scope_split(s_, parts, &split_ctx<F>::call, &x);
    }

    template <class F> struct alignas(64) job_ctx {
        detail::held_fn<F, exec::job_by_copy<F>> f;
        detail::carrier c; /* this fork's own: its first throw */
        explicit job_ctx(F &fn) noexcept : f(fn) {}
        static void job(void *a, unsigned i, tt_exec *child) noexcept
        {
            job_ctx *x = static_cast<job_ctx *>(a);
            exec ch(exec::borrow_tag{}, child);
            if (x->c.failed())
                return;
            detail::guarded(x->c, [&] { exec::call_job(x->f.get(), i, ch); },
                            [&](int code) noexcept { (void)tt_fork_fail(child, code); });
        }
    };
    template <class F> int fork_impl(unsigned jobs, F &f)
    {
        job_ctx<F> x(f);
        int rc = tt_scope_fork(s_, jobs, &job_ctx<F>::job, &x);
        if (x.c.failed()) {
            /* The scope fails as it would had a section thrown; the
             * scope's carrier gets the exception if it has none. */
#if TT_HPP_EXCEPTIONS
            int code = exception_code;
            try {
                x.c.rethrow();
            } catch (const error &e) {
                code = e.code() != TT_OK ? e.code() : exception_code;
                c_->capture();
                (void)tt_scope_fail(s_, code);
                throw;
            } catch (...) {
                c_->capture();
                (void)tt_scope_fail(s_, code);
                throw;
            }
#endif
        }
        return rc;
    }
};

template <class F> int exec::scope_impl(const tt_team_opts *opts, F &f)
{
    struct ctx {
        F *f;
        detail::carrier c;
        static void call(void *a, tt_scope *s) noexcept
        {
            ctx *x = static_cast<ctx *>(a);
            scope sc(s, &x->c);
            static_assert(std::is_invocable_v<F &, scope &>, "a scope function is f(tt::scope&)");
            detail::guarded(x->c, [&] { (*x->f)(sc); },
                            [&](int code) noexcept { (void)tt_scope_fail(s, code); });
        }
    } x{&f, {}};
    int rc = opts ? tt_team_scope_with(p_, opts, &ctx::call, &x) : tt_team_scope(p_, &ctx::call, &x);
    x.c.rethrow();
    return rc;
}

/** A persistent team (tt_pool_into_team): owns its pool until into_pool. */
class team {
  public:
    /** Turn `p` into a team of `width`. On success the team owns the pool
     *  and `p` is empty; on failure (thrown) `p` is untouched. */
    team(pool &&p, unsigned width) { detail::check(try_make(p, width)); }
    explicit team(std::nullptr_t) noexcept {}
    /** The same without throwing (TT_OK or tt_pool_into_team's code). */
    [[nodiscard]] static int try_create(team &out, pool &p, unsigned width) noexcept
    {
        out.reset();
        return out.try_make(p, width);
    }
    team(const team &) = delete;
    team &operator=(const team &) = delete;
    team(team &&o) noexcept : t_(o.t_) { o.t_ = nullptr; }
    team &operator=(team &&o) noexcept
    {
        if (this != &o) {
            reset();
            t_ = o.t_;
            o.t_ = nullptr;
        }
        return *this;
    }
    /** Dissolves the team and destroys its pool. */
    ~team() { reset(); }

    unsigned width() const noexcept { return t_ ? tt_team_width(t_) : 0; }
    tt_team *native() noexcept { return t_; }

    /** tt_team_lead: the leader's token (waits for the role). */
    exec lead(unsigned budget)
    {
        exec e;
        detail::check(e.alloc());
        detail::check(tt_team_lead(t_, budget, e.p_));
        return e;
    }
    /** tt_team_try_lead: the token, or nothing when refused (another
     *  leader, or members lent out). Errors throw. */
    std::optional<exec> try_lead(unsigned budget)
    {
        exec e;
        int rc = try_lead(budget, e);
        if (is_refusal(rc))
            return std::nullopt;
        detail::check(rc);
        return std::optional<exec>(std::move(e));
    }
    /** The same without throwing: TT_OK or tt_team_try_lead's code. */
    [[nodiscard]] int try_lead(unsigned budget, exec &out) noexcept
    {
        int rc = out.alloc();
        if (rc == TT_OK)
            rc = tt_team_try_lead(t_, budget, out.p_);
        if (rc != TT_OK)
            out.drop();
        return rc;
    }
    /** Dissolve the team and take the pool back (tt_team_into_pool). */
    pool into_pool() &&
    {
        pool p(nullptr);
        if (t_)
            p.p_ = tt_team_into_pool(t_);
        t_ = nullptr;
        return p;
    }

  private:
    tt_team *t_ = nullptr;
    int try_make(pool &p, unsigned width) noexcept
    {
        int rc = tt_pool_into_team(p.p_, width, &t_);
        if (rc == TT_OK)
            p.p_ = nullptr;
        else
            t_ = nullptr;
        return rc;
    }
    void reset() noexcept
    {
        if (!t_)
            return;
        tt_pool *p = tt_team_into_pool(t_);
        if (p)
            (void)tt_pool_destroy(p);
        t_ = nullptr;
    }
};

} // namespace tt

#endif /* THREADTEAM_HPP */
