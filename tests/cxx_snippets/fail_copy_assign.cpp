/* Copy-assigning a token must not compile. */
#include <threadteam.hpp>

void use(tt::pool &pool)
{
    tt::exec ex = pool.token(2);
    tt::exec other = pool.token(1);
    other = ex; // misuse
}
