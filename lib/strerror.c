/* strerror.c -- a sentence and a name for every return code, both made
 * from the one table in threadteam.h (TT_STATUS_MAP). */
#include "internal.h"

const char *tt_strerror(int code)
{
    switch (code) {
#define TT__SENTENCE(name, value, sentence) case name: return sentence;
    TT_STATUS_MAP(TT__SENTENCE)
#undef TT__SENTENCE
    default: return "Unknown threadteam return code.";
    }
}

const char *tt_status_name(int code)
{
    switch (code) {
#define TT__NAME(name, value, sentence) case name: return #name;
    TT_STATUS_MAP(TT__NAME)
#undef TT__NAME
    default: return "TT_UNKNOWN";
    }
}
