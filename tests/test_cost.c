/*
 * test_cost.c -- the cost model: host classes, width-cost rows (anchors,
 * interpolation, growth above the largest anchor), tt_width_for_by against
 * a brute-force minimum, the one rule at its boundaries, the cost file
 * format and its errors, the process default from TT_DISPATCH_COSTS_FILE,
 * and the token-level queries on serial and pooled tokens.
 *
 * The pure functions need no pool. The environment tests fork a child of
 * their own, because the process default is read once per process.
 */
#include <check.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "threadteam.h"

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

static uint64_t sat_add(uint64_t a, uint64_t b)
{
    uint64_t r;
    return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

static uint64_t sat_mul(uint64_t a, uint64_t b)
{
    uint64_t r;
    return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

/* The definition of tt_width_for_by, evaluated at every width. */
static unsigned brute_width_for(const tt_width_costs *wc, unsigned max_width, uint64_t est,
                                uint64_t sections)
{
    unsigned best_k = 1;
    uint64_t best = est;
    for (unsigned k = 2; k <= max_width; k++) {
        uint64_t f = sat_add(sat_mul(sections, tt_width_costs_at(wc, k)), est / k);
        if (f < best) {
            best = f;
            best_k = k;
        }
    }
    return best_k;
}

/* Iteration counts: TT_TEST_QUICK=1 (valgrind, TSan) divides them by 20. */
static int iters(int n)
{
    const char *q = getenv("TT_TEST_QUICK");
    return q && *q && strcmp(q, "0") != 0 ? (n / 20 > 10 ? n / 20 : 10) : n;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    /* xorshift64*: deterministic, so a failure reproduces. */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}
static uint64_t rnd_below(uint64_t n) { return n ? rnd() % n : 0; }

static tt_width_costs row3(unsigned w0, uint64_t c0, unsigned w1, uint64_t c1, unsigned w2,
                           uint64_t c2)
{
    tt_width_costs wc;
    unsigned w[3] = { w0, w1, w2 };
    uint64_t c[3] = { c0, c1, c2 };
    ck_assert_int_eq(tt_width_costs_from_anchors(3, w, c, &wc), TT_OK);
    return wc;
}

static const char *good_text = "# a comment line\n"
                               "\n"
                               "class x86_64-avx2   # trailing comment\n"
                               "team    2:1200 4:2500 8:4100\n"
                               "  in_pool\t2:2600 4:4000\r\n"
                               "outside 2:5200\n";

static void fill_sentinel(tt_dispatch_costs *dc) { memset(dc, 0xa5, sizeof *dc); }
static bool is_sentinel(const tt_dispatch_costs *dc)
{
    tt_dispatch_costs s;
    fill_sentinel(&s);
    return memcmp(&s, dc, sizeof s) == 0;
}

/* Write `len` bytes to a new temporary file; returns its malloc'd path. */
/* A temporary file holding `data`, or NULL (no Check call: the children
 * use it too). */
static char *temp_file_or_null(const void *data, size_t len)
{
    char *path = strdup("/tmp/tt_test_cost_XXXXXX");
    if (!path)
        return NULL;
    int fd = mkstemp(path);
    if (fd < 0) {
        free(path);
        return NULL;
    }
    const char *p = data;
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n <= 0) {
            close(fd);
            unlink(path);
            free(path);
            return NULL;
        }
        p += n;
        len -= (size_t)n;
    }
    close(fd);
    return path;
}

static char *temp_file(const void *data, size_t len)
{
    char *path = temp_file_or_null(data, len);
    ck_assert_ptr_nonnull(path);
    return path;
}

static char self_exe[4096] = "/proc/self/exe";

/* Run this program again as a child, `self --child ARGS...`, so that it
 * starts with a fresh process default whatever ran before (also under
 * CK_FORK=no). Returns the child's exit status (0 = pass); its stderr is
 * captured in *err_out (malloc'd; may be NULL). */
static int in_child(char *const *args, char **err_out)
{
    char *argv[16];
    int n = 0;
    argv[n++] = self_exe;
    argv[n++] = (char *)"--child";
    for (; args[n - 2] && n < 15; n++)
        argv[n] = args[n - 2];
    argv[n] = NULL;
    int pipefd[2];
    ck_assert_int_eq(pipe(pipefd), 0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(pipefd[0]);
        dup2(pipefd[1], 2);
        execv(self_exe, argv);
        _exit(127);
    }
    close(pipefd[1]);
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    ck_assert_ptr_nonnull(buf);
    for (;;) {
        if (len + 1 >= cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            ck_assert_ptr_nonnull(buf);
        }
        ssize_t got = read(pipefd[0], buf + len, cap - len - 1);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        len += (size_t)got;
    }
    buf[len] = '\0';
    close(pipefd[0]);
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    if (WEXITSTATUS(status) != 0)
        fprintf(stderr, "child %s said:\n%s", args[0], buf);
    if (err_out)
        *err_out = buf;
    else
        free(buf);
    ck_assert(WIFEXITED(status));
    return WEXITSTATUS(status);
}

#define CHILD_CHECK(c)                                                                   \
    do {                                                                                 \
        if (!(c)) {                                                                      \
            fprintf(stderr, "child check failed: %s (line %d)\n", #c, __LINE__);          \
            return 1;                                                                    \
        }                                                                                \
    } while (0)

/* ------------------------------------------------------------------------ */
/* Host classes                                                              */
/* ------------------------------------------------------------------------ */

START_TEST(test_class_names)
{
    static const char *names[] = { "x86_64-avx512", "x86_64-avx2", "x86_64-scalar",
                                   "aarch64-apple", "aarch64",     "generic" };
    ck_assert_int_eq(TT_HOST_CLASS_COUNT, 6);
    for (int i = 0; i < TT_HOST_CLASS_COUNT; i++) {
        ck_assert_str_eq(tt_host_class_name((tt_host_class)i), names[i]);
        tt_host_class c = TT_HOST_CLASS_COUNT;
        ck_assert_int_eq(tt_host_class_from_name(names[i], &c), TT_OK);
        ck_assert_int_eq(c, i);
    }
    ck_assert_str_eq(tt_host_class_name(TT_HOST_CLASS_COUNT), "unknown");
    ck_assert_str_eq(tt_host_class_name((tt_host_class)-1), "unknown");
    tt_host_class c = TT_HOST_GENERIC;
    ck_assert_int_eq(tt_host_class_from_name("unknown", &c), TT_EINVAL);
    ck_assert_int_eq(tt_host_class_from_name("x86_64-AVX2", &c), TT_EINVAL);
    ck_assert_int_eq(tt_host_class_from_name("", &c), TT_EINVAL);
    ck_assert_int_eq(c, TT_HOST_GENERIC);
    ck_assert_int_eq(tt_host_class_from_name(NULL, &c), TT_EINVAL);
    ck_assert_int_eq(tt_host_class_from_name("generic", NULL), TT_EINVAL);
}
END_TEST

START_TEST(test_class_detect)
{
    tt_host_class c = tt_host_class_detect();
    ck_assert_int_lt(c, TT_HOST_CLASS_COUNT);
    ck_assert_int_eq(tt_host_class_detect(), c); /* cached, stable */
#if defined(__x86_64__)
    /* GCC's own dispatch checks the CPU and the OS's XSAVE state too. */
    __builtin_cpu_init();
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
                        __builtin_cpu_supports("avx512cd");
    if (avx512)
        ck_assert_int_eq(c, TT_HOST_X86_64_AVX512);
    else if (avx2)
        ck_assert_int_eq(c, TT_HOST_X86_64_AVX2);
    else
        ck_assert_int_eq(c, TT_HOST_X86_64_SCALAR);
#elif defined(__aarch64__) && defined(__APPLE__)
    ck_assert_int_eq(c, TT_HOST_AARCH64_APPLE);
#elif defined(__aarch64__)
    ck_assert_int_eq(c, TT_HOST_AARCH64);
#else
    ck_assert_int_eq(c, TT_HOST_GENERIC);
#endif
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Width-cost rows                                                           */
/* ------------------------------------------------------------------------ */

START_TEST(test_anchors_errors)
{
    tt_width_costs wc, before;
    memset(&wc, 0x5a, sizeof wc);
    before = wc;
    unsigned w[TT_WIDTH_COSTS_MAX_ANCHORS + 1];
    uint64_t c[TT_WIDTH_COSTS_MAX_ANCHORS + 1];
    for (unsigned i = 0; i <= TT_WIDTH_COSTS_MAX_ANCHORS; i++) {
        w[i] = 2 + i;
        c[i] = 1000 * (i + 1);
    }
    ck_assert_int_eq(tt_width_costs_from_anchors(0, w, c, &wc), TT_EINVAL);
    ck_assert_int_eq(tt_width_costs_from_anchors(TT_WIDTH_COSTS_MAX_ANCHORS + 1, w, c, &wc),
                     TT_EINVAL);
    ck_assert_int_eq(tt_width_costs_from_anchors(2, NULL, c, &wc), TT_EINVAL);
    ck_assert_int_eq(tt_width_costs_from_anchors(2, w, NULL, &wc), TT_EINVAL);
    ck_assert_int_eq(tt_width_costs_from_anchors(2, w, c, NULL), TT_EINVAL);
    unsigned zero[2] = { 0, 4 }, one[2] = { 1, 4 }, same[2] = { 4, 4 }, down[2] = { 4, 2 },
             huge[2] = { 2, TT_WIDTH_COSTS_MAX_WIDTH + 1 };
    ck_assert_int_eq(tt_width_costs_from_anchors(2, zero, c, &wc), TT_EINVAL);
    ck_assert_int_eq(tt_width_costs_from_anchors(2, one, c, &wc), TT_EINVAL);
    ck_assert_int_eq(tt_width_costs_from_anchors(2, same, c, &wc), TT_EINVAL);
    ck_assert_int_eq(tt_width_costs_from_anchors(2, down, c, &wc), TT_EINVAL);
    ck_assert_int_eq(tt_width_costs_from_anchors(2, huge, c, &wc), TT_EINVAL);
    uint64_t big[2] = { 1, TT_WIDTH_COSTS_MAX_COST_NS + 1 };
    ck_assert_int_eq(tt_width_costs_from_anchors(2, w, big, &wc), TT_EINVAL);
    ck_assert_mem_eq(&wc, &before, sizeof wc);

    ck_assert_int_eq(tt_width_costs_from_anchors(TT_WIDTH_COSTS_MAX_ANCHORS, w, c, &wc), TT_OK);
    ck_assert_uint_eq(wc.count, TT_WIDTH_COSTS_MAX_ANCHORS);
    ck_assert(tt_width_costs_valid(&wc));
    unsigned edge[2] = { 2, TT_WIDTH_COSTS_MAX_WIDTH };
    uint64_t edgec[2] = { 0, TT_WIDTH_COSTS_MAX_COST_NS };
    ck_assert_int_eq(tt_width_costs_from_anchors(2, edge, edgec, &wc), TT_OK);

    ck_assert(!tt_width_costs_valid(NULL));
    tt_width_costs empty;
    memset(&empty, 0, sizeof empty);
    ck_assert(!tt_width_costs_valid(&empty));
    wc.count = TT_WIDTH_COSTS_MAX_ANCHORS + 1;
    ck_assert(!tt_width_costs_valid(&wc));
}
END_TEST

START_TEST(test_interpolation)
{
    /* The seed's generic row. */
    tt_width_costs g = row3(2, 3000, 4, 15000, 6, 40000);
    ck_assert_uint_eq(tt_width_costs_at(&g, 0), 0);
    ck_assert_uint_eq(tt_width_costs_at(&g, 1), 0);
    ck_assert_uint_eq(tt_width_costs_at(&g, 2), 3000);
    ck_assert_uint_eq(tt_width_costs_at(&g, 3), 9000);
    ck_assert_uint_eq(tt_width_costs_at(&g, 4), 15000);
    ck_assert_uint_eq(tt_width_costs_at(&g, 5), 27500);
    ck_assert_uint_eq(tt_width_costs_at(&g, 6), 40000);

    /* Below the first anchor: the first anchor's cost. */
    tt_width_costs h = row3(4, 1000, 8, 2000, 16, 6000);
    ck_assert_uint_eq(tt_width_costs_at(&h, 2), 1000);
    ck_assert_uint_eq(tt_width_costs_at(&h, 3), 1000);
    ck_assert_uint_eq(tt_width_costs_at(&h, 6), 1500);
    ck_assert_uint_eq(tt_width_costs_at(&h, 7), 1750);
    ck_assert_uint_eq(tt_width_costs_at(&h, 12), 4000);

    /* A falling segment (noise in a measurement) interpolates down. */
    tt_width_costs f = row3(2, 1000, 4, 3000, 8, 2000);
    ck_assert_uint_eq(tt_width_costs_at(&f, 6), 2500);

    /* Between anchors the cost lies between the neighbours, at every width. */
    for (unsigned k = 2; k <= 16; k++) {
        uint64_t v = tt_width_costs_at(&h, k);
        ck_assert_uint_ge(v, 1000);
        ck_assert_uint_le(v, 6000);
        if (k > 2)
            ck_assert_uint_ge(v, tt_width_costs_at(&h, k - 1)); /* rising row */
    }

    ck_assert_uint_eq(tt_width_costs_at(NULL, 5), 0);
    tt_width_costs empty;
    memset(&empty, 0, sizeof empty);
    ck_assert_uint_eq(tt_width_costs_at(&empty, 5), 0);
}
END_TEST

START_TEST(test_growth_above)
{
    /* Slope of the last two anchors: 12.5 us per width. */
    tt_width_costs g = row3(2, 3000, 4, 15000, 6, 40000);
    ck_assert_uint_eq(tt_width_costs_at(&g, 7), 52500);
    ck_assert_uint_eq(tt_width_costs_at(&g, 8), 65000);
    ck_assert_uint_eq(tt_width_costs_at(&g, 64), 40000 + 12500 * 58);
    for (unsigned k = 7; k < 5000; k++) {
        ck_assert_uint_gt(tt_width_costs_at(&g, k), 40000); /* never the largest anchor's */
        ck_assert_uint_gt(tt_width_costs_at(&g, k), tt_width_costs_at(&g, k - 1));
    }

    /* A last segment that falls (noise): the mean slope from the first
     * anchor, (2000 - 1000) / (8 - 2) per width, so it still grows. */
    tt_width_costs f = row3(2, 1000, 4, 3000, 8, 2000);
    ck_assert_uint_eq(tt_width_costs_at(&f, 14), 2000 + 1000);
    for (unsigned k = 9; k < 1000; k++)
        ck_assert_uint_gt(tt_width_costs_at(&f, k), 2000);

    /* The steeper of the two slopes: the mean slope here. */
    tt_width_costs m = row3(2, 0, 4, 10000, 12, 10800);
    /* last: 800/8 = 100 ns per width; mean: 10800/10 = 1080 ns per width */
    ck_assert_uint_eq(tt_width_costs_at(&m, 22), 10800 + 10800);

    /* Two anchors: their slope. */
    tt_width_costs two;
    unsigned w[2] = { 2, 4 };
    uint64_t c[2] = { 2000, 3000 };
    ck_assert_int_eq(tt_width_costs_from_anchors(2, w, c, &two), TT_OK);
    ck_assert_uint_eq(tt_width_costs_at(&two, 10), 6000);

    /* Flat rows stay flat: one anchor, or anchors of one cost. */
    tt_width_costs flat;
    tt_width_costs_flat(7777, &flat);
    ck_assert(tt_width_costs_valid(&flat));
    ck_assert_uint_eq(tt_width_costs_at(&flat, 1), 0);
    ck_assert_uint_eq(tt_width_costs_at(&flat, 2), 7777);
    ck_assert_uint_eq(tt_width_costs_at(&flat, 100000), 7777);
    tt_width_costs flat3 = row3(2, 500, 4, 500, 8, 500);
    ck_assert_uint_eq(tt_width_costs_at(&flat3, 4096), 500);
    tt_width_costs_flat(UINT64_MAX, &flat);
    ck_assert_uint_eq(tt_width_costs_at(&flat, 3), TT_WIDTH_COSTS_MAX_COST_NS);

    /* Saturation: the steepest row at the widest width. */
    unsigned sw[2] = { 2, 3 };
    uint64_t sc[2] = { 0, TT_WIDTH_COSTS_MAX_COST_NS };
    tt_width_costs steep;
    ck_assert_int_eq(tt_width_costs_from_anchors(2, sw, sc, &steep), TT_OK);
    ck_assert_uint_eq(tt_width_costs_at(&steep, UINT32_MAX), UINT64_MAX);
    ck_assert_uint_eq(tt_width_costs_at(&steep, 1000), 998 * TT_WIDTH_COSTS_MAX_COST_NS);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* tt_width_for_by                                                           */
/* ------------------------------------------------------------------------ */

static tt_width_costs random_row(void)
{
    unsigned n = 1 + (unsigned)rnd_below(6);
    unsigned w[8];
    uint64_t c[8];
    unsigned at = 2 + (unsigned)rnd_below(4);
    uint64_t cost = rnd_below(20000);
    for (unsigned i = 0; i < n; i++) {
        w[i] = at;
        c[i] = cost;
        at += 1 + (unsigned)rnd_below(12);
        /* mostly rising, sometimes falling or flat */
        switch (rnd_below(4)) {
        case 0:
            cost = cost > 3000 ? cost - rnd_below(3000) : cost;
            break;
        case 1:
            break;
        default:
            cost += rnd_below(30000);
        }
    }
    tt_width_costs wc;
    ck_assert_int_eq(tt_width_costs_from_anchors(n, w, c, &wc), TT_OK);
    return wc;
}

START_TEST(test_width_for_brute_force)
{
    static const uint64_t sections_set[] = { 0, 1, 2, 3, 10, 100, 1000000, UINT64_MAX / 3,
                                             UINT64_MAX };
    for (int iter = 0, n = iters(4000); iter < n; iter++) {
        tt_width_costs wc = random_row();
        unsigned maxw = (unsigned)rnd_below(200);
        /* est from 0 to ~1 s, spread over the decades */
        uint64_t est = rnd_below(10) == 0 ? rnd_below(10) : rnd_below((uint64_t)1 << rnd_below(31));
        if (rnd_below(50) == 0)
            est = UINT64_MAX - rnd_below(3);
        uint64_t s = rnd_below(3) ? 1 + rnd_below(4)
                                  : sections_set[rnd_below(sizeof sections_set / sizeof *sections_set)];
        unsigned got = tt_width_for_by(&wc, maxw, est, s);
        unsigned want = brute_width_for(&wc, maxw, est, s);
        if (got != want) {
            char buf[TT_DISPATCH_COSTS_TEXT_MAX];
            tt_dispatch_costs dc = { wc, wc, wc };
            tt_dispatch_costs_format(&dc, TT_HOST_CLASS_COUNT, buf, sizeof buf);
            ck_abort_msg("width_for_by(max %u, est %llu, sections %llu) = %u, brute force %u; "
                         "row:\n%s",
                         maxw, (unsigned long long)est, (unsigned long long)s, got, want, buf);
        }
        ck_assert_uint_ge(got, 1);
        ck_assert_uint_le(got, maxw > 1 ? maxw : 1);
    }
}
END_TEST

START_TEST(test_width_for_wide)
{
    /* Wide budgets, beyond the anchors, where the loop stops early. */
    tt_width_costs flat;
    tt_width_costs_flat(1000, &flat);
    tt_width_costs g = row3(2, 3000, 4, 15000, 6, 40000);
    tt_width_costs gentle = row3(2, 1000, 16, 1100, 64, 1200);
    const tt_width_costs *rows[] = { &flat, &g, &gentle, NULL };
    static const uint64_t ests[] = { 0, 1, 999, 5000, 123456, 10000000, 1000000000ull,
                                     77777777777ull };
    for (int r = 0; r < 4; r++)
        for (size_t e = 0; e < sizeof ests / sizeof *ests; e++)
            for (uint64_t s = 0; s < 3; s++) {
                unsigned got = tt_width_for_by(rows[r], 20000, ests[e], s);
                unsigned want = brute_width_for(rows[r], 20000, ests[e], s);
                ck_assert_msg(got == want, "row %d est %llu s %llu: %u vs %u", r,
                              (unsigned long long)ests[e], (unsigned long long)s, got, want);
            }

    /* A flat row and the widest budget: answered analytically, at once. */
    ck_assert_uint_eq(tt_width_for_by(&flat, UINT32_MAX, 5000000, 1), 5000001);
    ck_assert_uint_eq(tt_width_for_by(&flat, UINT32_MAX, UINT64_MAX, 1), UINT32_MAX);
    ck_assert_uint_eq(tt_width_for_by(NULL, UINT32_MAX, 1000, 1), 1001);
    ck_assert_uint_eq(tt_width_for_by(&flat, UINT32_MAX, 1500, 1), 1501); /* 1000 + 0 */
    ck_assert_uint_eq(tt_width_for_by(&flat, UINT32_MAX, 1000, 1), 1);    /* a tie: serial */
    /* A rising row stops where dispatch alone exceeds the best. */
    unsigned k = tt_width_for_by(&g, UINT32_MAX, 1000000000ull, 1);
    ck_assert_uint_gt(k, 6);
    ck_assert_uint_lt(k, 1000);

    /* Degenerate budgets. */
    ck_assert_uint_eq(tt_width_for_by(&g, 0, 1000000000ull, 1), 1);
    ck_assert_uint_eq(tt_width_for_by(&g, 1, 1000000000ull, 1), 1);
    /* Free dispatch: the widest width that still lowers est / k. */
    ck_assert_uint_eq(tt_width_for_by(&g, 64, 1000000, 0), 64);
    ck_assert_uint_eq(tt_width_for_by(&g, 64, 10, 0), 11); /* 10 / 11 == 0 */
    /* No work: serial. */
    ck_assert_uint_eq(tt_width_for_by(&g, 64, 0, 1), 1);
}
END_TEST

START_TEST(test_width_for_examples)
{
    /* Generic row, one section: serial until est/2 > D(2) = 3 us. */
    tt_width_costs g = row3(2, 3000, 4, 15000, 6, 40000);
    ck_assert_uint_eq(tt_width_for_by(&g, 8, 6000, 1), 1);
    ck_assert_uint_eq(tt_width_for_by(&g, 8, 6002, 1), 2);
    /* 3 beats 2 when 9000 + est/3 < 3000 + est/2: est > 36000. */
    ck_assert_uint_eq(tt_width_for_by(&g, 8, 36000, 1), 2);
    ck_assert_uint_eq(tt_width_for_by(&g, 8, 36006, 1), 3);
    /* 4 beats 3 when 15000 + est/4 < 9000 + est/3: est > 72000. */
    ck_assert_uint_eq(tt_width_for_by(&g, 8, 72000, 1), 3);
    ck_assert_uint_eq(tt_width_for_by(&g, 8, 72012, 1), 4);
    /* Ten sections cost ten dispatches. */
    ck_assert_uint_eq(tt_width_for_by(&g, 8, 60000, 10), 1);
    ck_assert_uint_eq(tt_width_for_by(&g, 8, 60002, 10), 2);
    /* The budget caps the answer. */
    ck_assert_uint_eq(tt_width_for_by(&g, 3, 10000000, 1), 3);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The one rule                                                              */
/* ------------------------------------------------------------------------ */

START_TEST(test_pays_at_boundaries)
{
    ck_assert_int_ge(TT_PAYS, 2);
    /* est >= TT_PAYS * sections * cost, exactly at the edge */
    ck_assert(tt_pays_at(TT_PAYS * 3 * 1000, 3, 1000));
    ck_assert(!tt_pays_at(TT_PAYS * 3 * 1000 - 1, 3, 1000));
    ck_assert(tt_pays_at(TT_PAYS * 1000, 1, 1000));
    ck_assert(!tt_pays_at(TT_PAYS * 1000 - 1, 1, 1000));
    /* serial never pays, whatever the work */
    ck_assert(!tt_pays_at(UINT64_MAX, 1, UINT64_MAX));
    ck_assert(!tt_pays_at(UINT64_MAX, 0, UINT64_MAX));
    /* free dispatch or no sections: any work pays */
    ck_assert(tt_pays_at(0, 5, 0));
    ck_assert(tt_pays_at(0, 0, 12345));
    /* saturation: the product overflows to UINT64_MAX */
    ck_assert(!tt_pays_at(UINT64_MAX - 1, UINT64_MAX, 2));
    ck_assert(tt_pays_at(UINT64_MAX, UINT64_MAX, 2));
    ck_assert(!tt_pays_at(UINT64_MAX - 1, 2, UINT64_MAX / 2));
    ck_assert(tt_pays_at(UINT64_MAX - 1, 1, (UINT64_MAX - 1) / TT_PAYS));
}
END_TEST

START_TEST(test_pays_agrees_with_width_for)
{
    /* At width 2, width_for picks 2 exactly when est > 2 * sections * D(2),
     * and TT_PAYS (2) draws the line at est >= that: they differ only at
     * the tie, where width_for keeps the serial run. */
    for (int iter = 0, n = iters(20000); iter < n; iter++) {
        tt_width_costs wc = random_row();
        uint64_t d = tt_width_costs_at(&wc, 2);
        uint64_t s = 1 + rnd_below(10);
        uint64_t edge = 2 * s * d;
        uint64_t est = edge + rnd_below(7) - 3;
        if (edge < 3)
            est = rnd_below(10);
        bool pays = tt_pays_at(est, s, d);
        unsigned k = tt_width_for_by(&wc, 2, est, s);
        if (est == edge)
            ck_assert(pays && k == 1);
        else
            ck_assert_msg(pays == (k == 2), "est %llu s %llu d %llu: pays %d k %u",
                          (unsigned long long)est, (unsigned long long)s,
                          (unsigned long long)d, pays, k);
        /* And a width that pays is never slower than serial. */
        for (unsigned w = 2; w < 40; w++) {
            uint64_t dw = tt_width_costs_at(&wc, w);
            if (tt_pays_at(est, s, dw))
                ck_assert_uint_le(s * dw + est / w, est);
        }
    }
}
END_TEST

START_TEST(test_serial_token)
{
    tt_exec ex;
    tt_exec_init_serial(&ex);
    ck_assert_uint_eq(tt_dispatch_cost(&ex, 2), UINT64_MAX);
    ck_assert_uint_eq(tt_dispatch_cost(&ex, 64), UINT64_MAX);
    ck_assert(!tt_pays(&ex, UINT64_MAX, 1, 2));
    ck_assert_uint_eq(tt_width_for(&ex, 1000000000ull, 1), 1);
    ck_assert_uint_eq(tt_dispatch_cost(NULL, 2), UINT64_MAX);
    ck_assert(!tt_pays(NULL, UINT64_MAX, 1, 2));
    ck_assert_uint_eq(tt_width_for(NULL, 1000000000ull, 1), 1);
    tt_exec_finish(&ex);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Built-in rows, attributes, pools                                          */
/* ------------------------------------------------------------------------ */

START_TEST(test_builtin_rows)
{
    tt_dispatch_costs dc;
    for (int i = 0; i < TT_HOST_CLASS_COUNT; i++) {
        ck_assert_int_eq(tt_dispatch_costs_for_class((tt_host_class)i, &dc), TT_OK);
        ck_assert(tt_dispatch_costs_valid(&dc));
        /* every built-in row rises above its anchors */
        const tt_width_costs *rows[3] = { &dc.team, &dc.in_pool, &dc.outside };
        for (int r = 0; r < 3; r++) {
            unsigned top = rows[r]->width[rows[r]->count - 1];
            ck_assert_uint_gt(tt_width_costs_at(rows[r], top + 1),
                              rows[r]->cost_ns[rows[r]->count - 1]);
        }
    }
    ck_assert_int_eq(tt_dispatch_costs_for_class(TT_HOST_GENERIC, &dc), TT_OK);
    const tt_width_costs *rows[3] = { &dc.team, &dc.in_pool, &dc.outside };
    for (int r = 0; r < 3; r++) {
        ck_assert_uint_eq(rows[r]->count, 3);
        ck_assert_uint_eq(tt_width_costs_at(rows[r], 2), 3000);
        ck_assert_uint_eq(tt_width_costs_at(rows[r], 4), 15000);
        ck_assert_uint_eq(tt_width_costs_at(rows[r], 6), 40000);
    }
    ck_assert_int_eq(tt_dispatch_costs_for_class(TT_HOST_CLASS_COUNT, &dc), TT_EINVAL);
    ck_assert_int_eq(tt_dispatch_costs_for_class(TT_HOST_GENERIC, NULL), TT_EINVAL);
    ck_assert(!tt_dispatch_costs_valid(NULL));
}
END_TEST

static tt_dispatch_costs three_flat(uint64_t team, uint64_t in_pool, uint64_t outside)
{
    tt_dispatch_costs dc;
    tt_width_costs_flat(team, &dc.team);
    tt_width_costs_flat(in_pool, &dc.in_pool);
    tt_width_costs_flat(outside, &dc.outside);
    return dc;
}

START_TEST(test_attr_costs)
{
    tt_pool_attr *attr = NULL;
    ck_assert_int_eq(tt_pool_attr_create(&attr), TT_OK);
    tt_dispatch_costs got, host;
    tt_dispatch_costs_host_default(&host);
    ck_assert_int_eq(tt_pool_attr_get_dispatch_costs(attr, &got), TT_OK);
    ck_assert_mem_eq(&got, &host, sizeof got);

    tt_dispatch_costs mine = three_flat(111, 222, 333);
    ck_assert_int_eq(tt_pool_attr_set_dispatch_costs(attr, &mine), TT_OK);
    ck_assert_int_eq(tt_pool_attr_get_dispatch_costs(attr, &got), TT_OK);
    ck_assert_mem_eq(&got, &mine, sizeof got);

    tt_dispatch_costs bad = mine;
    bad.in_pool.count = 0;
    ck_assert_int_eq(tt_pool_attr_set_dispatch_costs(attr, &bad), TT_EINVAL);
    bad = mine;
    bad.outside.width[0] = 1;
    ck_assert_int_eq(tt_pool_attr_set_dispatch_costs(attr, &bad), TT_EINVAL);
    ck_assert_int_eq(tt_pool_attr_get_dispatch_costs(attr, &got), TT_OK);
    ck_assert_mem_eq(&got, &mine, sizeof got); /* unchanged */

    ck_assert_int_eq(tt_pool_attr_set_dispatch_costs(attr, NULL), TT_OK);
    ck_assert_int_eq(tt_pool_attr_get_dispatch_costs(attr, &got), TT_OK);
    ck_assert_mem_eq(&got, &host, sizeof got);

    ck_assert_int_eq(tt_pool_attr_set_dispatch_costs(NULL, &mine), TT_EINVAL);
    ck_assert_int_eq(tt_pool_attr_get_dispatch_costs(NULL, &got), TT_EINVAL);
    ck_assert_int_eq(tt_pool_attr_get_dispatch_costs(attr, NULL), TT_EINVAL);
    ck_assert_int_eq(tt_pool_dispatch_costs(NULL, &got), TT_EINVAL);
    tt_pool_attr_destroy(attr);
}
END_TEST

struct kind_probe {
    tt_pool *pool;
    int rc;
    uint64_t cost2;
    unsigned width_for;
};

/* On member 0 of a broadcast: a root minted there is an in-pool token. */
static void probe_member(void *arg, unsigned i)
{
    struct kind_probe *p = arg;
    if (i != 0)
        return;
    tt_exec inner;
    p->rc = tt_exec_init(&inner, p->pool, 2);
    if (p->rc != TT_OK)
        return;
    p->cost2 = tt_dispatch_cost(&inner, 2);
    p->width_for = tt_width_for(&inner, 1000000000ull, 1);
    tt_exec_finish(&inner);
}

START_TEST(test_pool_token_kinds)
{
    tt_pool_attr *attr = NULL;
    ck_assert_int_eq(tt_pool_attr_create(&attr), TT_OK);
    ck_assert_int_eq(tt_pool_attr_set_threads(attr, 2), TT_OK);
    tt_dispatch_costs mine = three_flat(111, 222, 333);
    ck_assert_int_eq(tt_pool_attr_set_dispatch_costs(attr, &mine), TT_OK);
    tt_pool *pool = NULL;
    ck_assert_int_eq(tt_pool_create(&pool, attr), TT_OK);
    tt_pool_attr_destroy(attr); /* the pool keeps its copy */

    tt_dispatch_costs got;
    ck_assert_int_eq(tt_pool_dispatch_costs(pool, &got), TT_OK);
    ck_assert_mem_eq(&got, &mine, sizeof got);

    const bool parallel = tt_pool_width(pool) >= 2;
    tt_exec ex;
    ck_assert_int_eq(tt_exec_init(&ex, pool, 2), TT_OK);
    if (parallel) {
        /* a plain thread: the outside row */
        ck_assert_uint_eq(tt_dispatch_cost(&ex, 2), 333);
        ck_assert_uint_eq(tt_dispatch_cost(&ex, 9), 333); /* clamped to the budget */
        ck_assert_uint_eq(tt_dispatch_cost(&ex, 1), UINT64_MAX);
        ck_assert_uint_eq(tt_dispatch_cost(&ex, 0), UINT64_MAX);
        ck_assert(tt_pays(&ex, 666, 1, 2));
        ck_assert(!tt_pays(&ex, 665, 1, 2));
        ck_assert(tt_pays(&ex, 666 * 4, 4, 2));
        ck_assert_uint_eq(tt_width_for(&ex, 1000000000ull, 1), 2);
        ck_assert_uint_eq(tt_width_for(&ex, 666, 1), 1);
        /* from a member of the pool: the in_pool row */
        struct kind_probe probe = { pool, -1, 0, 0 };
        ck_assert_int_eq(tt_broadcast(&ex, probe_member, &probe), TT_OK);
        ck_assert_int_eq(probe.rc, TT_OK);
        ck_assert_uint_eq(probe.cost2, 222);
        ck_assert_uint_eq(probe.width_for, 2);
        /* consumed: nothing runs on it any more */
        ck_assert_uint_eq(tt_dispatch_cost(&ex, 2), UINT64_MAX);
    } else {
        ck_assert_uint_eq(tt_dispatch_cost(&ex, 2), UINT64_MAX);
        ck_assert_uint_eq(tt_width_for(&ex, 1000000000ull, 1), 1);
        tt_exec_finish(&ex);
    }

    /* a budget-1 token of the same pool is serial */
    tt_exec one;
    ck_assert_int_eq(tt_exec_init(&one, pool, 1), TT_OK);
    ck_assert_uint_eq(tt_dispatch_cost(&one, 2), UINT64_MAX);
    ck_assert_uint_eq(tt_width_for(&one, 1000000000ull, 1), 1);
    tt_exec_finish(&one);
    ck_assert_int_eq(tt_pool_destroy(pool), TT_OK);
}
END_TEST

struct scope_probe {
    tt_scope *scope;
    uint64_t cost2, cost1, cost9, other_thread, token2;
    unsigned token_width_for;
};

static void *scope_from_other_thread(void *arg)
{
    struct scope_probe *p = arg;
    p->other_thread = tt_scope_dispatch_cost(p->scope, 2);
    return NULL;
}

static void probe_scope(void *arg, tt_scope *scope)
{
    struct scope_probe *p = arg;
    p->scope = scope;
    p->cost2 = tt_scope_dispatch_cost(scope, 2);
    p->cost1 = tt_scope_dispatch_cost(scope, 1);
    p->cost9 = tt_scope_dispatch_cost(scope, 9);
    pthread_t th;
    if (pthread_create(&th, NULL, scope_from_other_thread, p) == 0)
        pthread_join(th, NULL);
    /* a token with team authority: the team row */
    tt_exec child;
    tt_scope_reborrow(scope, &child);
    p->token2 = tt_dispatch_cost(&child, 2);
    p->token_width_for = tt_width_for(&child, 1000000000ull, 1);
    tt_exec_finish(&child);
}

START_TEST(test_scope_kind)
{
    ck_assert_uint_eq(tt_scope_dispatch_cost(NULL, 2), UINT64_MAX);
    tt_pool_attr *attr = NULL;
    ck_assert_int_eq(tt_pool_attr_create(&attr), TT_OK);
    ck_assert_int_eq(tt_pool_attr_set_threads(attr, 2), TT_OK);
    tt_dispatch_costs mine = three_flat(111, 222, 333);
    ck_assert_int_eq(tt_pool_attr_set_dispatch_costs(attr, &mine), TT_OK);
    tt_pool *pool = NULL;
    ck_assert_int_eq(tt_pool_create(&pool, attr), TT_OK);
    tt_pool_attr_destroy(attr);
    const bool parallel = tt_pool_width(pool) >= 2;

    tt_exec ex;
    ck_assert_int_eq(tt_exec_init(&ex, pool, 2), TT_OK);
    struct scope_probe p = { NULL, 0, 0, 0, 0, 0, 0 };
    ck_assert_int_eq(tt_team_scope(&ex, probe_scope, &p), TT_OK);
    ck_assert_uint_eq(p.cost1, UINT64_MAX);
    ck_assert_uint_eq(p.other_thread, UINT64_MAX);
    if (parallel) {
        ck_assert_uint_eq(p.cost2, 111);
        ck_assert_uint_eq(p.cost9, 111); /* clamped to the scope's size */
        ck_assert_uint_eq(p.token2, 111);
        ck_assert_uint_eq(p.token_width_for, 2);
    } else {
        ck_assert_uint_eq(p.cost2, UINT64_MAX);
        ck_assert_uint_eq(p.token2, UINT64_MAX);
        ck_assert_uint_eq(p.token_width_for, 1);
    }
    ck_assert_int_eq(tt_pool_destroy(pool), TT_OK);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The file format                                                           */
/* ------------------------------------------------------------------------ */

START_TEST(test_parse_good)
{
    tt_dispatch_costs dc;
    tt_host_class cls = TT_HOST_GENERIC;
    tt_cost_error err;
    ck_assert_int_eq(tt_dispatch_costs_parse(good_text, &dc, &cls, &err), TT_OK);
    ck_assert_int_eq(cls, TT_HOST_X86_64_AVX2);
    ck_assert_uint_eq(dc.team.count, 3);
    ck_assert_uint_eq(dc.team.width[2], 8);
    ck_assert_uint_eq(dc.team.cost_ns[2], 4100);
    ck_assert_uint_eq(dc.in_pool.count, 2);
    ck_assert_uint_eq(dc.in_pool.cost_ns[1], 4000);
    ck_assert_uint_eq(dc.outside.count, 1);
    ck_assert_uint_eq(dc.outside.cost_ns[0], 5200);
    ck_assert(tt_dispatch_costs_valid(&dc));

    /* no class line; rows in any order; no final newline */
    ck_assert_int_eq(
        tt_dispatch_costs_parse("outside 2:3\nteam 2:1\nin_pool 2:2", &dc, &cls, NULL), TT_OK);
    ck_assert_int_eq(cls, TT_HOST_CLASS_COUNT);
    ck_assert_uint_eq(dc.team.cost_ns[0], 1);
    ck_assert_uint_eq(dc.in_pool.cost_ns[0], 2);
    ck_assert_uint_eq(dc.outside.cost_ns[0], 3);
    /* cls may be NULL */
    ck_assert_int_eq(tt_dispatch_costs_parse(good_text, &dc, NULL, NULL), TT_OK);

    /* the widest row */
    char text[4096];
    size_t pos = 0;
    for (int r = 0; r < 3; r++) {
        static const char *keys[3] = { "team", "in_pool", "outside" };
        pos += (size_t)snprintf(text + pos, sizeof text - pos, "%s", keys[r]);
        for (unsigned i = 0; i < TT_WIDTH_COSTS_MAX_ANCHORS; i++)
            pos += (size_t)snprintf(text + pos, sizeof text - pos, " %u:%llu", 2 + 3 * i,
                                    (unsigned long long)TT_WIDTH_COSTS_MAX_COST_NS - i);
        pos += (size_t)snprintf(text + pos, sizeof text - pos, "\n");
    }
    ck_assert_int_eq(tt_dispatch_costs_parse(text, &dc, NULL, NULL), TT_OK);
    ck_assert_uint_eq(dc.outside.count, TT_WIDTH_COSTS_MAX_ANCHORS);
}
END_TEST

struct bad_case {
    const char *text;
    unsigned line;
    const char *needle; /* a word the message must contain */
};

static const struct bad_case bad_cases[] = {
    { "team 2:1\nin_pool 2:1\nfoo 2:1\noutside 2:1\n", 3, "unknown key" },
    { "team 2:1\nin_pool 2:1\noutside 2:1\nteam 2:5\n", 4, "duplicate" },
    { "team 2:1\nin_pool 2:1\n", 0, "outside" },
    { "# nothing\n\n", 0, "missing" },
    { "", 0, "missing" },
    { "team 2:1 4:2 4:3\nin_pool 2:1\noutside 2:1\n", 1, "not above" },
    { "team 4:1 2:2\nin_pool 2:1\noutside 2:1\n", 1, "not above" },
    { "team 2:1\nin_pool 0:1\noutside 2:1\n", 2, "below 2" },
    { "team 2:1\nin_pool 1:1\noutside 2:1\n", 2, "below 2" },
    { "team 2:1\nin_pool 2:1\noutside 2:12x\n", 3, "not a decimal" },
    { "team 2:1\nin_pool 2:1\noutside 2:-5\n", 3, "not a decimal" },
    { "team 2:1\nin_pool 2:1\noutside x:5\n", 3, "not a decimal" },
    { "team 2:1\nin_pool 2:1\noutside 2:\n", 3, "not a decimal" },
    { "team 2:1\nin_pool 2:1\noutside :5\n", 3, "not a decimal" },
    { "team 2:1\nin_pool 2:1\noutside +2:5\n", 3, "not a decimal" },
    { "team 2:1\nin_pool 2:1\noutside 2:1.5\n", 3, "not a decimal" },
    { "team 2:1\nin_pool 2:1\noutside 2:99999999999999999999999\n", 3, "not a decimal" },
    { "team 2:1\nin_pool 2:1\noutside 2:1000000000001\n", 3, "above" },
    { "team 2:1\nin_pool 2:1\noutside 1048577:5\n", 3, "above" },
    { "team 2:1\nin_pool 2:1\noutside 2000\n", 3, "width:nanoseconds" },
    { "team 2:1\nin_pool 2:1\noutside 2 : 1\n", 3, "width:nanoseconds" },
    { "team\nin_pool 2:1\noutside 2:1\n", 1, "no anchors" },
    { "team # 2:1\nin_pool 2:1\noutside 2:1\n", 1, "no anchors" },
    { "class x86_64-avx3\nteam 2:1\nin_pool 2:1\noutside 2:1\n", 1, "unknown host class" },
    { "class\nteam 2:1\nin_pool 2:1\noutside 2:1\n", 1, "class" },
    { "class generic aarch64\nteam 2:1\nin_pool 2:1\noutside 2:1\n", 1, "one name" },
    { "class generic\nclass generic\nteam 2:1\nin_pool 2:1\noutside 2:1\n", 2, "duplicate" },
    { "Team 2:1\nin_pool 2:1\noutside 2:1\n", 1, "unknown key" },
    { "team: 2:1\nin_pool 2:1\noutside 2:1\n", 1, "unknown key" },
};

START_TEST(test_parse_errors)
{
    for (size_t i = 0; i < sizeof bad_cases / sizeof *bad_cases; i++) {
        tt_dispatch_costs dc;
        fill_sentinel(&dc);
        tt_host_class cls = TT_HOST_AARCH64;
        tt_cost_error err;
        memset(&err, 0, sizeof err);
        int rc = tt_dispatch_costs_parse(bad_cases[i].text, &dc, &cls, &err);
        ck_assert_msg(rc == TT_EINVAL, "case %zu: rc %d", i, rc);
        ck_assert_msg(err.line == bad_cases[i].line, "case %zu: line %u, want %u (%s)", i,
                      err.line, bad_cases[i].line, err.message);
        ck_assert_msg(strstr(err.message, bad_cases[i].needle), "case %zu: message '%s'", i,
                      err.message);
        ck_assert_msg(is_sentinel(&dc), "case %zu: output touched", i);
        ck_assert_int_eq(cls, TT_HOST_AARCH64);
        /* err may be NULL */
        ck_assert_int_eq(tt_dispatch_costs_parse(bad_cases[i].text, &dc, NULL, NULL), TT_EINVAL);
    }

    /* too many anchors */
    char text[4096];
    size_t pos = (size_t)snprintf(text, sizeof text, "in_pool 2:1\noutside 2:1\nteam");
    for (unsigned i = 0; i <= TT_WIDTH_COSTS_MAX_ANCHORS; i++)
        pos += (size_t)snprintf(text + pos, sizeof text - pos, " %u:1", 2 + i);
    tt_dispatch_costs dc;
    fill_sentinel(&dc);
    tt_cost_error err;
    ck_assert_int_eq(tt_dispatch_costs_parse(text, &dc, NULL, &err), TT_EINVAL);
    ck_assert_uint_eq(err.line, 3);
    ck_assert_ptr_nonnull(strstr(err.message, "too many anchors"));
    ck_assert(is_sentinel(&dc));

    /* a very long token is quoted, not overrun */
    char longtext[2048];
    memset(longtext, 'z', sizeof longtext - 1);
    longtext[sizeof longtext - 1] = '\0';
    ck_assert_int_eq(tt_dispatch_costs_parse(longtext, &dc, NULL, &err), TT_EINVAL);
    ck_assert_uint_eq(err.line, 1);
    ck_assert_uint_lt(strlen(err.message), sizeof err.message);

    ck_assert_int_eq(tt_dispatch_costs_parse(NULL, &dc, NULL, &err), TT_EINVAL);
    ck_assert_int_eq(tt_dispatch_costs_parse(good_text, NULL, NULL, &err), TT_EINVAL);
}
END_TEST

START_TEST(test_format_round_trip)
{
    for (int iter = 0, n = iters(300); iter < n; iter++) {
        tt_dispatch_costs dc = { random_row(), random_row(), random_row() };
        tt_host_class cls = (tt_host_class)rnd_below(TT_HOST_CLASS_COUNT + 1);
        char buf[TT_DISPATCH_COSTS_TEXT_MAX];
        ck_assert_int_eq(tt_dispatch_costs_format(&dc, cls, buf, sizeof buf), TT_OK);
        tt_dispatch_costs back;
        memset(&back, 0, sizeof back);
        tt_host_class bcls = TT_HOST_GENERIC;
        tt_cost_error err;
        ck_assert_msg(tt_dispatch_costs_parse(buf, &back, &bcls, &err) == TT_OK, "%s: %s", buf,
                      err.message);
        ck_assert_int_eq(bcls, cls);
        ck_assert_mem_eq(&back, &dc, sizeof dc);
    }
    /* the largest row fits in TT_DISPATCH_COSTS_TEXT_MAX */
    tt_width_costs big;
    unsigned w[TT_WIDTH_COSTS_MAX_ANCHORS];
    uint64_t c[TT_WIDTH_COSTS_MAX_ANCHORS];
    for (unsigned i = 0; i < TT_WIDTH_COSTS_MAX_ANCHORS; i++) {
        w[i] = TT_WIDTH_COSTS_MAX_WIDTH - TT_WIDTH_COSTS_MAX_ANCHORS + 1 + i;
        c[i] = TT_WIDTH_COSTS_MAX_COST_NS;
    }
    ck_assert_int_eq(tt_width_costs_from_anchors(TT_WIDTH_COSTS_MAX_ANCHORS, w, c, &big), TT_OK);
    tt_dispatch_costs dc = { big, big, big };
    char buf[TT_DISPATCH_COSTS_TEXT_MAX];
    ck_assert_int_eq(tt_dispatch_costs_format(&dc, TT_HOST_X86_64_AVX512, buf, sizeof buf), TT_OK);
    /* too small a buffer */
    char small[16] = "xxx";
    ck_assert_int_eq(tt_dispatch_costs_format(&dc, TT_HOST_GENERIC, small, sizeof small),
                     TT_EINVAL);
    ck_assert_str_eq(small, "");
    /* bad arguments */
    ck_assert_int_eq(tt_dispatch_costs_format(NULL, TT_HOST_GENERIC, buf, sizeof buf), TT_EINVAL);
    ck_assert_int_eq(tt_dispatch_costs_format(&dc, TT_HOST_GENERIC, NULL, 10), TT_EINVAL);
    ck_assert_int_eq(tt_dispatch_costs_format(&dc, (tt_host_class)99, buf, sizeof buf), TT_EINVAL);
    dc.team.count = 0;
    ck_assert_int_eq(tt_dispatch_costs_format(&dc, TT_HOST_GENERIC, buf, sizeof buf), TT_EINVAL);
}
END_TEST

START_TEST(test_load)
{
    char *path = temp_file(good_text, strlen(good_text));
    tt_dispatch_costs dc, want;
    tt_host_class cls = TT_HOST_GENERIC;
    tt_cost_error err;
    ck_assert_int_eq(tt_dispatch_costs_load(path, &dc, &cls, &err), TT_OK);
    ck_assert_int_eq(tt_dispatch_costs_parse(good_text, &want, NULL, NULL), TT_OK);
    ck_assert_mem_eq(&dc, &want, sizeof dc);
    ck_assert_int_eq(cls, TT_HOST_X86_64_AVX2);
    unlink(path);
    free(path);

    /* a missing file */
    fill_sentinel(&dc);
    ck_assert_int_eq(tt_dispatch_costs_load("/nonexistent/tt/costs", &dc, &cls, &err), TT_EINVAL);
    ck_assert_uint_eq(err.line, 0);
    ck_assert_ptr_nonnull(strstr(err.message, "cannot open"));
    ck_assert(is_sentinel(&dc));

    /* a bad line in a file: its line number */
    const char *bad = "class generic\nteam 2:1\nin_pool 2:1 2:3\noutside 2:1\n";
    path = temp_file(bad, strlen(bad));
    ck_assert_int_eq(tt_dispatch_costs_load(path, &dc, &cls, &err), TT_EINVAL);
    ck_assert_uint_eq(err.line, 3);
    ck_assert(is_sentinel(&dc));
    unlink(path);
    free(path);

    /* a NUL byte */
    const char nul[] = "team 2:1\nin_pool 2:1\0\noutside 2:1\n";
    path = temp_file(nul, sizeof nul - 1);
    ck_assert_int_eq(tt_dispatch_costs_load(path, &dc, &cls, &err), TT_EINVAL);
    ck_assert_uint_eq(err.line, 2);
    ck_assert_ptr_nonnull(strstr(err.message, "NUL"));
    unlink(path);
    free(path);

    /* too large: a valid text padded with comment lines past 1 MiB */
    size_t big = ((size_t)1 << 20) + 100;
    char *text = malloc(big);
    ck_assert_ptr_nonnull(text);
    memset(text, '\n', big);
    memcpy(text, good_text, strlen(good_text));
    text[strlen(good_text)] = '#';
    path = temp_file(text, big);
    ck_assert_int_eq(tt_dispatch_costs_load(path, &dc, &cls, &err), TT_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.message, "larger"));
    ck_assert(is_sentinel(&dc));
    unlink(path);
    free(path);
    /* exactly 1 MiB is fine */
    path = temp_file(text, (size_t)1 << 20);
    ck_assert_int_eq(tt_dispatch_costs_load(path, &dc, &cls, &err), TT_OK);
    unlink(path);
    free(path);
    free(text);

    /* a directory */
    ck_assert_int_eq(tt_dispatch_costs_load("/tmp", &dc, &cls, &err), TT_EINVAL);
    ck_assert_int_eq(tt_dispatch_costs_load(NULL, &dc, &cls, &err), TT_EINVAL);
    ck_assert_int_eq(tt_dispatch_costs_load("/tmp", NULL, &cls, &err), TT_EINVAL);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The process default and TT_DISPATCH_COSTS_FILE (each in a fresh child)    */
/* ------------------------------------------------------------------------ */

static bool rows_equal(const tt_dispatch_costs *a, const tt_dispatch_costs *b)
{
    return memcmp(a, b, sizeof *a) == 0;
}

static int child_unset(void)
{
    unsetenv(TT_DISPATCH_COSTS_ENV);
    tt_dispatch_costs dc, builtin;
    tt_dispatch_costs_host_default(&dc);
    CHILD_CHECK(tt_dispatch_costs_for_class(tt_host_class_detect(), &builtin) == TT_OK);
    CHILD_CHECK(rows_equal(&dc, &builtin));
    bool from_file = true;
    tt_cost_error err;
    CHILD_CHECK(tt_dispatch_costs_env_status(&from_file, &err) == TT_OK);
    CHILD_CHECK(!from_file);
    CHILD_CHECK(err.line == 0 && err.message[0] == '\0');
    CHILD_CHECK(tt_dispatch_costs_env_status(NULL, NULL) == TT_OK);
    return 0;
}

START_TEST(test_env_unset)
{
    char *err = NULL;
    char *args[] = { (char *)"unset", NULL };
    ck_assert_int_eq(in_child(args, &err), 0);
    ck_assert_str_eq(err, ""); /* nothing printed */
    free(err);
}
END_TEST

/* A child's expectations: with TT_DISPATCH_COSTS_FILE=path, the status is
 * rc at line `line` with `needle` in the message, and the default is the
 * row of the file want_path ("-": the built-in row of the host). */
struct env_case {
    const char *path;
    int want_rc;
    unsigned want_line;
    const char *needle;
    const char *want_path;
};

static int run_env_case(const struct env_case *c, char **err_out)
{
    char rc[16], line[16];
    snprintf(rc, sizeof rc, "%d", c->want_rc);
    snprintf(line, sizeof line, "%u", c->want_line);
    char *args[] = { (char *)"env",          (char *)c->path, rc, line,
                     (char *)(c->needle ? c->needle : "-"), (char *)c->want_path, NULL };
    return in_child(args, err_out);
}

static void *default_reader(void *arg)
{
    tt_dispatch_costs *out = arg;
    tt_dispatch_costs_host_default(out);
    return NULL;
}

static char *host_class_text(const char *cls_line, char *text, size_t size);

static int child_env(const struct env_case *c0)
{
    struct env_case own = *c0;
    const struct env_case *c = c0;
    char *made = NULL;
    if (strcmp(c0->path, "@class") == 0) {
        /* A file for the class this process detects. The child is exec'd:
         * under valgrind it runs natively, and valgrind's CPUID hides
         * AVX-512 from the parent, so only the child can name its class. */
        char line[64];
        snprintf(line, sizeof line, "class %s", tt_host_class_name(tt_host_class_detect()));
        char text[512];
        host_class_text(line, text, sizeof text);
        made = temp_file_or_null(text, strlen(text));
        CHILD_CHECK(made != NULL);
        own.path = own.want_path = made;
        c = &own;
    }
    const int rc = 0;
    tt_dispatch_costs want;
    if (strcmp(c->want_path, "-") == 0)
        CHILD_CHECK(tt_dispatch_costs_for_class(tt_host_class_detect(), &want) == TT_OK);
    else
        CHILD_CHECK(tt_dispatch_costs_load(c->want_path, &want, NULL, NULL) == TT_OK);
    CHILD_CHECK(setenv(TT_DISPATCH_COSTS_ENV, c->path, 1) == 0);
    /* first use from several threads at once: one load, one answer */
    enum { N = 4 };
    pthread_t th[N];
    tt_dispatch_costs seen[N];
    for (int i = 0; i < N; i++)
        CHILD_CHECK(pthread_create(&th[i], NULL, default_reader, &seen[i]) == 0);
    for (int i = 0; i < N; i++)
        pthread_join(th[i], NULL);
    tt_dispatch_costs dc;
    tt_dispatch_costs_host_default(&dc);
    for (int i = 0; i < N; i++)
        CHILD_CHECK(rows_equal(&seen[i], &dc));
    CHILD_CHECK(rows_equal(&dc, &want));
    bool from_file = false;
    tt_cost_error err;
    CHILD_CHECK(tt_dispatch_costs_env_status(&from_file, &err) == c->want_rc);
    CHILD_CHECK(from_file == (c->want_rc == TT_OK && c->path[0] != '\0'));
    CHILD_CHECK(err.line == c->want_line);
    if (strcmp(c->needle, "-") != 0)
        CHILD_CHECK(strstr(err.message, c->needle) != NULL);
    /* a pool attribute without a row of its own reads the default */
    tt_pool_attr *attr = NULL;
    CHILD_CHECK(tt_pool_attr_create(&attr) == TT_OK);
    tt_dispatch_costs got;
    CHILD_CHECK(tt_pool_attr_get_dispatch_costs(attr, &got) == TT_OK);
    CHILD_CHECK(rows_equal(&got, &dc));
    tt_pool_attr_destroy(attr);
    /* the environment is read once: a change later has no effect */
    CHILD_CHECK(setenv(TT_DISPATCH_COSTS_ENV, "/nonexistent", 1) == 0);
    tt_dispatch_costs again;
    tt_dispatch_costs_host_default(&again);
    CHILD_CHECK(rows_equal(&again, &dc));
    if (made) {
        unlink(made);
        free(made);
    }
    return rc;
}

static char *host_class_text(const char *cls_line, char *text, size_t size)
{
    snprintf(text, size,
             "# written by test_cost\n%s\nteam 2:101 4:202\nin_pool 2:303 8:404\noutside "
             "2:505 3:606 5:707\n",
             cls_line);
    return text;
}

static char *host_class_file(const char *cls_line)
{
    char text[512];
    host_class_text(cls_line, text, sizeof text);
    return temp_file(text, strlen(text));
}

START_TEST(test_env_good)
{
    struct env_case c = { "@class", TT_OK, 0, NULL, "@class" };
    char *err = NULL;
    ck_assert_int_eq(run_env_case(&c, &err), 0);
    ck_assert_str_eq(err, "");
    free(err);

    /* without a class line the file applies to any host */
    char *path = host_class_file("");
    c.path = c.want_path = path;
    ck_assert_int_eq(run_env_case(&c, NULL), 0);
    unlink(path);
    free(path);

    /* an empty variable is unset */
    struct env_case e = { "", TT_OK, 0, NULL, "-" };
    ck_assert_int_eq(run_env_case(&e, NULL), 0);
}
END_TEST

START_TEST(test_env_bad)
{
    /* a garbage number on line 3: the built-in row stays, the error says
     * where, once on stderr and in the status */
    const char *bad = "class generic\nteam 2:1\nin_pool 2:1x\noutside 2:1\n";
    char *path = temp_file(bad, strlen(bad));
    struct env_case c = { path, TT_EINVAL, 3, "not a decimal", "-" };
    char *err = NULL;
    ck_assert_int_eq(run_env_case(&c, &err), 0);
    ck_assert_ptr_nonnull(strstr(err, "threadteam: TT_DISPATCH_COSTS_FILE="));
    ck_assert_ptr_nonnull(strstr(err, "line 3"));
    ck_assert_ptr_nonnull(strstr(err, "stays in force"));
    /* printed once, though many threads and calls read the default */
    ck_assert_ptr_null(strstr(strstr(err, "threadteam:") + 1, "threadteam:"));
    free(err);
    unlink(path);
    free(path);

    /* a missing file */
    struct env_case m = { "/nonexistent/tt/costs", TT_EINVAL, 0, "cannot open", "-" };
    ck_assert_int_eq(run_env_case(&m, &err), 0);
    ck_assert_ptr_nonnull(strstr(err, "cannot open"));
    free(err);

    /* a missing row */
    const char *missing = "team 2:1\noutside 2:1\n";
    path = temp_file(missing, strlen(missing));
    struct env_case r = { path, TT_EINVAL, 0, "in_pool", "-" };
    ck_assert_int_eq(run_env_case(&r, NULL), 0);
    unlink(path);
    free(path);

    /* a file for another class */
    tt_host_class other =
        tt_host_class_detect() == TT_HOST_GENERIC ? TT_HOST_AARCH64 : TT_HOST_GENERIC;
    char line[64];
    snprintf(line, sizeof line, "class %s", tt_host_class_name(other));
    path = host_class_file(line);
    struct env_case o = { path, TT_EINVAL, 0, "this host is", "-" };
    ck_assert_int_eq(run_env_case(&o, &err), 0);
    ck_assert_ptr_nonnull(strstr(err, "is for class"));
    free(err);
    unlink(path);
    free(path);
}
END_TEST

/* ------------------------------------------------------------------------ */

static Suite *cost_suite(void)
{
    Suite *s = suite_create("cost");

    TCase *tc = tcase_create("host_class");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_class_names);
    tcase_add_test(tc, test_class_detect);
    suite_add_tcase(s, tc);

    tc = tcase_create("width_costs");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_anchors_errors);
    tcase_add_test(tc, test_interpolation);
    tcase_add_test(tc, test_growth_above);
    suite_add_tcase(s, tc);

    tc = tcase_create("width_for");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_width_for_brute_force);
    tcase_add_test(tc, test_width_for_wide);
    tcase_add_test(tc, test_width_for_examples);
    suite_add_tcase(s, tc);

    tc = tcase_create("pays");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_pays_at_boundaries);
    tcase_add_test(tc, test_pays_agrees_with_width_for);
    tcase_add_test(tc, test_serial_token);
    suite_add_tcase(s, tc);

    tc = tcase_create("rows");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_builtin_rows);
    tcase_add_test(tc, test_attr_costs);
    tcase_add_test(tc, test_pool_token_kinds);
    tcase_add_test(tc, test_scope_kind);
    suite_add_tcase(s, tc);

    tc = tcase_create("format");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_parse_good);
    tcase_add_test(tc, test_parse_errors);
    tcase_add_test(tc, test_format_round_trip);
    tcase_add_test(tc, test_load);
    suite_add_tcase(s, tc);

    tc = tcase_create("environment");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_env_unset);
    tcase_add_test(tc, test_env_good);
    tcase_add_test(tc, test_env_bad);
    suite_add_tcase(s, tc);

    return s;
}

/* `test_cost --child unset` and `test_cost --child env PATH RC LINE NEEDLE
 * WANT_PATH`: the halves of the environment tests that need a fresh
 * process. */
static int child_main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[2], "unset") == 0)
        return child_unset();
    if (argc == 8 && strcmp(argv[2], "env") == 0) {
        struct env_case c = { argv[3], atoi(argv[4]), (unsigned)strtoul(argv[5], NULL, 10),
                              argv[6], argv[7] };
        return child_env(&c);
    }
    fprintf(stderr, "test_cost: bad child arguments\n");
    return 2;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "--child") == 0)
        return child_main(argc, argv);
    /* The program's own path (under valgrind, readlink names the program,
     * while exec of /proc/self/exe would start valgrind's tool). */
    ssize_t n = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
    if (n > 0)
        self_exe[n] = '\0';
    else if (argc >= 1 && strlen(argv[0]) < sizeof self_exe)
        strcpy(self_exe, argv[0]);
    SRunner *sr = srunner_create(cost_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
