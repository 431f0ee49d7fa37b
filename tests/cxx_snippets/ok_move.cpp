/* The control snippet: everything here must compile, so that the refusals
 * of the fail_*.cpp snippets are the compiler's refusing the misuse they
 * show, not a broken include path or flag. */
#include <threadteam.hpp>

#include <utility>

void kernel(tt::exec ex) { std::move(ex).for_ranges(10, 1, [](size_t, size_t) {}); }

void use(tt::pool &pool)
{
    tt::exec ex = pool.token(2);
    tt::exec moved = std::move(ex);
    moved.reborrow().fork(2, [](unsigned, tt::exec &&child) { kernel(std::move(child)); });
    std::move(moved).team_scope([](tt::scope &sc) { sc.run([](tt::section &s) { s.barrier(); }); });
}
