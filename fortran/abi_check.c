/*
 * abi_check.c -- compiled (never run) when the Fortran module is built:
 * the Fortran type tt_exec (fortran/threadteam.f90) is an array of
 * TT_F_EXEC_WORDS integer(c_int64_t), so it has the C struct's size and
 * alignment exactly when these assertions hold. The build passes the
 * number it read from the module source (tt_exec_words) with -D.
 */
#include <stdalign.h>
#include <stdint.h>

#include <threadteam.h>

#ifndef TT_F_EXEC_WORDS
#error "TT_F_EXEC_WORDS (tt_exec_words of fortran/threadteam.f90) not given"
#endif

_Static_assert(sizeof(tt_exec) == TT_F_EXEC_WORDS * sizeof(int64_t),
               "sizeof(tt_exec) differs from the Fortran type tt_exec: update tt_exec_words "
               "in fortran/threadteam.f90");
_Static_assert(alignof(tt_exec) == alignof(int64_t),
               "the alignment of tt_exec differs from the Fortran type's (integer(c_int64_t))");
/* The enum values the module copies as parameters. */
_Static_assert(TT_OK == 0 && TT_EINVAL == 1 && TT_ENOMEM == 2 && TT_EAGAIN == 3 &&
                   TT_ESHORTTEAM == 4 && TT_ERANGE == 5 && TT_ECONSUMED == 6 && TT_ECOPY == 7 &&
                   TT_EBUSY == 8 && TT_EFORKED == 9 && TT_ENOTSUP == 10 &&
                   TT_EWRONGTHREAD == 11 && TT_EDESTROYED == 12,
               "tt_status codes changed: update the parameters of fortran/threadteam.f90");
_Static_assert(TT_REFUSED_FORK_CHILD == 32 && TT_REFUSED_CALLER_IN_POOL == 33 &&
                   TT_REFUSED_UNAVAILABLE == 34 && TT_REFUSED_BUSY == 35,
               "tt_status refusal codes changed: update fortran/threadteam.f90");

int tt_fortran_abi_checked;
