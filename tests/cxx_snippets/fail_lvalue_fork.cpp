/* A consuming entry on an lvalue token must not compile: it is
 * std::move(ex).fork(...). */
#include <threadteam.hpp>

void use(tt::pool &pool)
{
    tt::exec ex = pool.token(2);
    ex.fork(2, [](unsigned) {}); // misuse
}
