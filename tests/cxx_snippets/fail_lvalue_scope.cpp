/* team_scope consumes its token: not on an lvalue. */
#include <threadteam.hpp>

void use(tt::pool &pool)
{
    tt::exec ex = pool.token(2);
    ex.team_scope([](tt::scope &) {}); // misuse
}
