/*
 * cost_rows.c -- the value types of the cost model: saturating arithmetic,
 * host classes (and their detection), width-cost rows (their anchors,
 * interpolation and growth above the largest anchor, tt_width_for_by).
 * Pure arithmetic on value types, but for the host class, detected once
 * (pthread_once). cost.c builds the rule and the defaults on them; the
 * design record is docs/design/cost-model.md.
 */
#include "cost_rows.h"

#include <pthread.h>
#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

/* ------------------------------------------------------------------------ */
/* Saturating arithmetic                                                     */
/* ------------------------------------------------------------------------ */

#if defined(__SIZEOF_INT128__)
__extension__ typedef unsigned __int128 u128;
#endif

/* floor(a * b / c), saturating; c > 0. */
static uint64_t muldiv(uint64_t a, uint64_t b, uint64_t c)
{
    uint64_t p;
    if (TT__LIKELY(!__builtin_mul_overflow(a, b, &p)))
        return p / c; /* always so between anchors: cost * width < 2^60 */
#if defined(__SIZEOF_INT128__)
    u128 q = (u128)a * b / c;
    return q > UINT64_MAX ? UINT64_MAX : (uint64_t)q;
#else
    long double q = (long double)a * (long double)b / (long double)c;
    return q >= 18446744073709551615.0L ? UINT64_MAX : (uint64_t)q;
#endif
}

/* a/b > c/d for b, d > 0. */
static bool ratio_gt(uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
#if defined(__SIZEOF_INT128__)
    return (u128)a * d > (u128)c * b;
#else
    return (long double)a * d > (long double)c * b;
#endif
}

/* ------------------------------------------------------------------------ */
/* Host classes                                                              */
/* ------------------------------------------------------------------------ */

static const char *const class_names[TT_HOST_CLASS_COUNT] = {
    [TT_HOST_X86_64_AVX512] = "x86_64-avx512",
    [TT_HOST_X86_64_AVX2] = "x86_64-avx2",
    [TT_HOST_X86_64_SCALAR] = "x86_64-scalar",
    [TT_HOST_AARCH64_APPLE] = "aarch64-apple",
    [TT_HOST_AARCH64] = "aarch64",
    [TT_HOST_GENERIC] = "generic",
};

const char *tt_host_class_name(tt_host_class cls)
{
    if ((unsigned)cls >= (unsigned)TT_HOST_CLASS_COUNT)
        return "unknown";
    return class_names[cls];
}

int tt_host_class_from_name(const char *name, tt_host_class *out)
{
    if (!name)
        return TT__EINVAL("!name");
    if (!out)
        return TT__EINVAL("!out");
    for (unsigned i = 0; i < (unsigned)TT_HOST_CLASS_COUNT; i++) {
        if (strcmp(name, class_names[i]) == 0) {
            *out = (tt_host_class)i;
            return TT_OK;
        }
    }
    return TT__EINVAL("no host class has this name");
}

#if defined(__x86_64__)
static uint64_t xgetbv0(void)
{
    uint32_t lo, hi;
    __asm__ __volatile__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

static tt_host_class detect_x86_64(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return TT_HOST_X86_64_SCALAR;
    const bool fma = c & (1u << 12);
    const bool osxsave = c & (1u << 27);
    const bool avx = c & (1u << 28);
    /* XGETBV faults unless the OS set CR4.OSXSAVE, which OSXSAVE reports. */
    if (!osxsave || !avx)
        return TT_HOST_X86_64_SCALAR;
    const uint64_t xcr0 = xgetbv0();
    const uint64_t ymm_state = 0x6;  /* SSE | AVX (upper YMM)           */
    const uint64_t zmm_state = 0xe0; /* opmask | ZMM_Hi256 | Hi16_ZMM    */
    if ((xcr0 & ymm_state) != ymm_state)
        return TT_HOST_X86_64_SCALAR;
    if (__get_cpuid_max(0, NULL) < 7)
        return TT_HOST_X86_64_SCALAR;
    __cpuid_count(7, 0, a, b, c, d);
    const bool avx2 = b & (1u << 5);
    const bool avx512f = b & (1u << 16);
    const bool avx512dq = b & (1u << 17);
    const bool avx512cd = b & (1u << 28);
    const bool avx512bw = b & (1u << 30);
    const bool avx512vl = b & (1u << 31);
    if (!avx2 || !fma)
        return TT_HOST_X86_64_SCALAR;
    if (avx512f && avx512dq && avx512cd && avx512bw && avx512vl &&
        (xcr0 & zmm_state) == zmm_state)
        return TT_HOST_X86_64_AVX512;
    return TT_HOST_X86_64_AVX2;
}
#endif

static tt_host_class detected_class;
static pthread_once_t detect_once = PTHREAD_ONCE_INIT;

static void detect_init(void)
{
#if defined(__x86_64__)
    detected_class = detect_x86_64();
#elif defined(__aarch64__) && defined(__APPLE__)
    detected_class = TT_HOST_AARCH64_APPLE;
#elif defined(__aarch64__)
    detected_class = TT_HOST_AARCH64;
#else
    detected_class = TT_HOST_GENERIC;
#endif
}

tt_host_class tt_host_class_detect(void)
{
    pthread_once(&detect_once, detect_init);
    return detected_class;
}

/* ------------------------------------------------------------------------ */
/* Width-cost rows                                                           */
/* ------------------------------------------------------------------------ */

static bool anchors_ok(size_t n, const unsigned *w, const uint64_t *c)
{
    if (n < 1 || n > TT_WIDTH_COSTS_MAX_ANCHORS)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (w[i] < 2 || w[i] > TT_WIDTH_COSTS_MAX_WIDTH || c[i] > TT_WIDTH_COSTS_MAX_COST_NS)
            return false;
        if (i > 0 && w[i] <= w[i - 1])
            return false;
    }
    return true;
}

int tt_width_costs_from_anchors(size_t n, const unsigned *widths, const uint64_t *costs_ns,
                                tt_width_costs *out)
{
    if (!widths)
        return TT__EINVAL("!widths");
    if (!costs_ns)
        return TT__EINVAL("!costs_ns");
    if (!out)
        return TT__EINVAL("!out");
    if (!anchors_ok(n, widths, costs_ns))
        return TT__EINVAL("!anchors_ok(n, widths, costs_ns)");
    tt_width_costs wc;
    memset(&wc, 0, sizeof wc);
    wc.count = (unsigned)n;
    memcpy(wc.width, widths, n * sizeof *widths);
    memcpy(wc.cost_ns, costs_ns, n * sizeof *costs_ns);
    *out = wc;
    return TT_OK;
}

void tt_width_costs_flat(uint64_t cost_ns, tt_width_costs *out)
{
    memset(out, 0, sizeof *out);
    out->count = 1;
    out->width[0] = 2;
    out->cost_ns[0] = cost_ns > TT_WIDTH_COSTS_MAX_COST_NS ? TT_WIDTH_COSTS_MAX_COST_NS : cost_ns;
}

bool tt_width_costs_valid(const tt_width_costs *wc)
{
    return wc && anchors_ok(wc->count, wc->width, wc->cost_ns);
}

/* The slope above the largest anchor as num/den (num 0: flat). */
static void growth_slope(const tt_width_costs *wc, unsigned n, uint64_t *num, uint64_t *den)
{
    *num = 0;
    *den = 1;
    if (n < 2)
        return;
    const unsigned wl = wc->width[n - 1], wp = wc->width[n - 2], w0 = wc->width[0];
    const uint64_t cl = wc->cost_ns[n - 1], cp = wc->cost_ns[n - 2], c0 = wc->cost_ns[0];
    if (wl > wp && cl > cp) {
        *num = cl - cp;
        *den = wl - wp;
    }
    if (wl > w0 && cl > c0 && ratio_gt(cl - c0, wl - w0, *num, *den)) {
        *num = cl - c0;
        *den = wl - w0;
    }
}

/* Linear interpolation between anchors i and i+1 at width w in (w_i, w_i+1]. */
static uint64_t interp(const tt_width_costs *wc, unsigned i, unsigned w)
{
    const uint64_t c0 = wc->cost_ns[i], c1 = wc->cost_ns[i + 1];
    const unsigned w0 = wc->width[i], w1 = wc->width[i + 1];
    if (w1 <= w0)
        return c1; /* not a valid row; stay inside the struct */
    if (c1 >= c0)
        return c0 + muldiv(c1 - c0, w - w0, w1 - w0);
    return c0 - muldiv(c0 - c1, w - w0, w1 - w0);
}

/* Above the largest anchor, with the growth slope num/den. */
static inline uint64_t above_by(const tt_width_costs *wc, unsigned n, unsigned w, uint64_t num,
                                uint64_t den)
{
    return tt__cost_sat_add(wc->cost_ns[n - 1], num ? muldiv(num, w - wc->width[n - 1], den) : 0);
}

uint64_t tt__cost_above(const tt_width_costs *wc, unsigned n, unsigned w)
{
    uint64_t num, den;
    growth_slope(wc, n, &num, &den);
    return above_by(wc, n, w, num, den);
}

uint64_t tt_width_costs_at(const tt_width_costs *wc, unsigned width)
{
    if (!wc || width <= 1)
        return 0;
    const unsigned n = tt__cost_row_count(wc);
    if (n == 0)
        return 0;
    if (width <= wc->width[0])
        return wc->cost_ns[0];
    for (unsigned i = 0; i + 1 < n; i++)
        if (width <= wc->width[i + 1])
            return interp(wc, i, width);
    return tt__cost_above(wc, n, width);
}

unsigned tt_width_for_by(const tt_width_costs *wc, unsigned max_width, uint64_t est_ns,
                         uint64_t sections)
{
    if (max_width <= 1)
        return 1;
    const unsigned n = wc ? tt__cost_row_count(wc) : 0;
    /* One pass over the anchors: the cheapest one, and where the costs stop
     * falling for good (from `mono` on, D(k) never decreases: the anchors
     * rise or stay, interpolation follows them, the growth is >= 0). */
    uint64_t dmin = 0;
    unsigned mono = 2;
    if (n) {
        dmin = wc->cost_ns[n - 1];
        unsigned from = n - 1;
        for (unsigned i = n - 1; i-- > 0;) {
            if (wc->cost_ns[i] < dmin)
                dmin = wc->cost_ns[i];
            if (from == i + 1 && wc->cost_ns[i] <= wc->cost_ns[i + 1])
                from = i;
        }
        mono = from == 0 ? 2 : wc->width[from];
    }
    /* Every width >= 2 pays at least sections * dmin: when that alone is no
     * less than the serial time, serial wins (ties go to the smaller). This
     * is the common answer for small work, and it costs no division. */
    if (tt__cost_sat_mul(sections, dmin) >= est_ns)
        return 1;

    uint64_t num = 0, den = 1;
    if (n)
        growth_slope(wc, n, &num, &den);
    const unsigned top = n ? wc->width[n - 1] : 2;
    const bool flat_tail = num == 0;

    unsigned best_k = 1;
    uint64_t best = est_ns; /* k = 1: serial, no dispatch */
    unsigned seg = 0;       /* anchor segment of k, advanced as k grows */
    for (unsigned k = 2; k <= max_width; k++) {
        uint64_t d;
        if (n == 0) {
            d = 0;
        } else if (k <= wc->width[0]) {
            d = wc->cost_ns[0];
        } else {
            while (seg + 1 < n && k > wc->width[seg + 1])
                seg++;
            d = seg + 1 < n ? interp(wc, seg, k) : above_by(wc, n, k, num, den);
        }
        const uint64_t disp = tt__cost_sat_mul(sections, d);
        if (k >= mono && disp >= best)
            break; /* f(k') >= disp(k') >= disp(k) >= best for every k' >= k */
        const uint64_t f = tt__cost_sat_add(disp, est_ns / k);
        if (f < best) {
            best = f;
            best_k = k;
        }
        if (flat_tail && k >= top) {
            /* D is flat from here: f(k') = disp + floor(est / k') does not
             * increase, so the best later width is the smallest one that
             * reaches floor(est / max_width). */
            if (k == max_width)
                break;
            const uint64_t q = est_ns / max_width;
            uint64_t ks = est_ns / (q + 1) + 1;
            if (ks <= k)
                ks = (uint64_t)k + 1;
            if (ks <= max_width) {
                const uint64_t fs = tt__cost_sat_add(disp, est_ns / ks);
                if (fs < best) {
                    best = fs;
                    best_k = (unsigned)ks;
                }
            }
            break;
        }
    }
    return best_k;
}
