/* A consuming entry on a job's child token taken as an lvalue must not
 * compile either. */
#include <threadteam.hpp>

void use(tt::pool &pool)
{
    std::move(pool.token(2)).fork(2, [](unsigned, tt::exec &&child) {
        child.for_ranges(10, 1, [](size_t, size_t) {}); // misuse
    });
}
