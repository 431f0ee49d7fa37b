/* Copying a token must not compile. */
#include <threadteam.hpp>

void use(tt::pool &pool)
{
    tt::exec ex = pool.token(2);
    tt::exec copy = ex; // misuse
    (void)copy;
}
