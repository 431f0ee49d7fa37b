/* A child reborrowed from a temporary would outlive its parent. */
#include <threadteam.hpp>

void use(tt::pool &pool)
{
    tt::exec child = pool.token(2).reborrow(); // misuse
    (void)child;
}
