/*
 * cost.c -- the cost model: the built-in and the environment's dispatch
 * costs (their text format), and the one rule (tt_pays, tt_width_for).
 * Host classes and width-cost rows, the values it works on, are in
 * cost_rows.c.
 *
 * Everything here is pure arithmetic on value types except the process
 * default, which is computed once (pthread_once): the detected class's
 * built-in row, replaced by the row of the file named in
 * TT_DISPATCH_COSTS_FILE when that file is valid. The design record is
 * docs/design/cost-model.md.
 */
#include "internal.h"
#include "cost_rows.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "costs-rows.h"

/* ------------------------------------------------------------------------ */
/* The one rule on tokens                                                    */
/* ------------------------------------------------------------------------ */

bool tt_pays_at(uint64_t est_ns, uint64_t sections, uint64_t cost_ns)
{
    if (cost_ns == UINT64_MAX)
        return false;
    return est_ns >= tt__cost_sat_mul(tt__cost_sat_mul(TT_PAYS, sections), cost_ns);
}

/* The row for a token as seen from the calling thread, or NULL when the
 * token would run nothing in parallel. The kind is SERIAL for a token that
 * is not live or has budget 1 or no crew, so *budget is read after it. */
static const tt_width_costs *token_row(const tt_exec *ex, unsigned *budget)
{
    if (!ex)
        return NULL;
    const enum tt__cost_kind kind = tt__exec_cost_kind(ex);
    if (kind == TT__KIND_SERIAL)
        return NULL;
    const tt__exec *x = tt__cx(ex);
    *budget = x->budget;
    if (*budget <= 1)
        return NULL;
    const tt_dispatch_costs *costs = tt__pool_costs(x->pool);
    switch (kind) {
    case TT__KIND_TEAM:
        return &costs->team;
    case TT__KIND_IN_POOL:
        return &costs->in_pool;
    case TT__KIND_OUTSIDE:
        return &costs->outside;
    case TT__KIND_SERIAL:
    default:
        return NULL;
    }
}

uint64_t tt_dispatch_cost(const tt_exec *ex, unsigned width)
{
    unsigned budget = 0;
    const tt_width_costs *row = token_row(ex, &budget);
    if (!row)
        return UINT64_MAX;
    if (width > budget)
        width = budget;
    if (width <= 1)
        return UINT64_MAX;
    return tt_width_costs_at(row, width);
}

uint64_t tt_scope_dispatch_cost(const tt_scope *scope, unsigned width)
{
    if (!scope)
        return UINT64_MAX;
    /* The scope's layout is team.c's: a team token reborrowed from it names
     * its pool and size, and is left invalid off the leader's thread. The
     * token is only read, never entered, so nothing needs ending. */
    tt_exec probe;
    tt_scope_reborrow((tt_scope *)scope, &probe);
    const tt__exec *x = tt__cx(&probe);
    if (atomic_load_explicit(&x->magic, memory_order_relaxed) != TT__MAGIC_LIVE || !x->pool ||
        x->pool->width <= 1)
        return UINT64_MAX;
    if (width > x->budget)
        width = x->budget;
    if (width <= 1)
        return UINT64_MAX;
    return tt_width_costs_at(&tt__pool_costs(x->pool)->team, width);
}

bool tt_pays(const tt_exec *ex, uint64_t est_ns, uint64_t sections, unsigned width)
{
    return tt_pays_at(est_ns, sections, tt_dispatch_cost(ex, width));
}

static uint64_t row_min(const tt_width_costs *wc)
{
    const unsigned n = tt__cost_row_count(wc);
    uint64_t m = n ? wc->cost_ns[0] : 0;
    for (unsigned i = 1; i < n; i++)
        if (wc->cost_ns[i] < m)
            m = wc->cost_ns[i];
    return m;
}

unsigned tt_width_for(const tt_exec *ex, uint64_t est_ns, uint64_t sections)
{
    /* Small work first, before the kind is asked (which looks up the calling
     * thread): when the cheapest section of any kind already costs the
     * serial time, serial wins whatever the kind. */
    if (tt_exec_budget(ex) <= 1)
        return 1;
    const tt__exec *x = tt__cx(ex);
    if (!x->pool)
        return 1;
    const tt_dispatch_costs *costs = tt__pool_costs(x->pool);
    uint64_t dmin = row_min(&costs->team), m;
    if ((m = row_min(&costs->in_pool)) < dmin)
        dmin = m;
    if ((m = row_min(&costs->outside)) < dmin)
        dmin = m;
    if (tt__cost_sat_mul(sections, dmin) >= est_ns)
        return 1;
    unsigned budget = 0;
    const tt_width_costs *row = token_row(ex, &budget);
    if (!row)
        return 1;
    return tt_width_for_by(row, budget, est_ns, sections);
}

/* ------------------------------------------------------------------------ */
/* The text format                                                           */
/* ------------------------------------------------------------------------ */

static int fail(tt_cost_error *err, unsigned line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(tt_cost_error *err, unsigned line, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        err->line = line;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
    }
    return TT__EINVAL("the dispatch-costs text does not parse (the tt_cost_error says where)");
}

static bool is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/* Parse [s, e) as decimal digits into *v, at most `max`. */
static bool parse_u64(const char *s, const char *e, uint64_t max, uint64_t *v)
{
    if (s == e)
        return false;
    uint64_t r = 0;
    for (const char *p = s; p < e; p++) {
        if (*p < '0' || *p > '9')
            return false;
        if (r > (UINT64_MAX - 9) / 10)
            return false;
        r = r * 10 + (uint64_t)(*p - '0');
        if (r > max)
            return false;
    }
    *v = r;
    return true;
}

enum { KEY_TEAM = 0, KEY_IN_POOL, KEY_OUTSIDE, KEY_ROWS };
static const char *const row_keys[KEY_ROWS] = { "team", "in_pool", "outside" };

#define TOK_SHOW 40 /* characters of a bad token quoted in a message */

/* One row's anchors from the tokens of [p, e) (comment already cut). */
static int parse_row(const char *p, const char *e, unsigned line, const char *key,
                     tt_width_costs *out, tt_cost_error *err)
{
    tt_width_costs wc;
    memset(&wc, 0, sizeof wc);
    for (;;) {
        while (p < e && is_blank(*p))
            p++;
        if (p == e)
            break;
        const char *t = p;
        while (p < e && !is_blank(*p))
            p++;
        const int tl = (int)(p - t);
        const int show = tl > TOK_SHOW ? TOK_SHOW : tl;
        const char *colon = memchr(t, ':', (size_t)tl);
        if (!colon)
            return fail(err, line, "%s: anchor '%.*s' is not width:nanoseconds", key, show, t);
        uint64_t w, c;
        if (!parse_u64(t, colon, UINT64_MAX, &w))
            return fail(err, line, "%s: width in '%.*s' is not a decimal number", key, show, t);
        if (w < 2)
            return fail(err, line,
                        "%s: width %llu in '%.*s' is below 2 (width 1 is serial and costs "
                        "nothing)",
                        key, (unsigned long long)w, show, t);
        if (w > TT_WIDTH_COSTS_MAX_WIDTH)
            return fail(err, line, "%s: width in '%.*s' is above %u", key, show, t,
                        TT_WIDTH_COSTS_MAX_WIDTH);
        if (!parse_u64(colon + 1, p, UINT64_MAX, &c))
            return fail(err, line, "%s: cost in '%.*s' is not a decimal number of nanoseconds",
                        key, show, t);
        if (c > TT_WIDTH_COSTS_MAX_COST_NS)
            return fail(err, line, "%s: cost in '%.*s' is above %llu ns", key, show, t,
                        (unsigned long long)TT_WIDTH_COSTS_MAX_COST_NS);
        if (wc.count > 0 && w <= wc.width[wc.count - 1])
            return fail(err, line, "%s: width %llu is not above the previous width %u", key,
                        (unsigned long long)w, wc.width[wc.count - 1]);
        if (wc.count == TT_WIDTH_COSTS_MAX_ANCHORS)
            return fail(err, line, "%s: too many anchors (at most %d)", key,
                        TT_WIDTH_COSTS_MAX_ANCHORS);
        wc.width[wc.count] = (unsigned)w;
        wc.cost_ns[wc.count] = c;
        wc.count++;
    }
    if (wc.count == 0)
        return fail(err, line, "%s: the row has no anchors", key);
    *out = wc;
    return TT_OK;
}

/* The rest of a 'class' line, [q, e) after the key: one host class name. */
static int parse_class(const char *q, const char *e, unsigned line, tt_host_class *klass,
                       tt_cost_error *err)
{
    while (q < e && is_blank(*q))
        q++;
    const char *n = q;
    while (q < e && !is_blank(*q))
        q++;
    const int nlen = (int)(q - n);
    while (q < e && is_blank(*q))
        q++;
    if (nlen == 0)
        return fail(err, line, "'class' needs a host class name");
    if (q != e)
        return fail(err, line, "'class' takes one name, found more");
    char name[32];
    if ((size_t)nlen >= sizeof name)
        return fail(err, line, "unknown host class '%.*s'", nlen > TOK_SHOW ? TOK_SHOW : nlen, n);
    memcpy(name, n, (size_t)nlen);
    name[nlen] = '\0';
    if (tt_host_class_from_name(name, klass) != TT_OK)
        return fail(err, line, "unknown host class '%s'", name);
    return TT_OK;
}

static int parse_text(const char *text, size_t len, tt_dispatch_costs *out, tt_host_class *cls,
                      tt_cost_error *err)
{
    tt_dispatch_costs dc;
    memset(&dc, 0, sizeof dc);
    tt_width_costs *rows[KEY_ROWS] = { &dc.team, &dc.in_pool, &dc.outside };
    unsigned row_line[KEY_ROWS] = { 0, 0, 0 };
    tt_host_class klass = TT_HOST_CLASS_COUNT;
    unsigned class_line = 0;

    const char *p = text, *end = text + len;
    unsigned line = 0;
    while (p < end) {
        line++;
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        const char *hash = memchr(p, '#', (size_t)(le - p));
        const char *e = hash ? hash : le;
        const char *q = p;
        p = nl ? nl + 1 : end;

        while (q < e && is_blank(*q))
            q++;
        if (q == e)
            continue; /* blank or comment */
        const char *k = q;
        while (q < e && !is_blank(*q))
            q++;
        const int kl = (int)(q - k);
        const int show = kl > TOK_SHOW ? TOK_SHOW : kl;

        if (kl == 5 && memcmp(k, "class", 5) == 0) {
            if (class_line)
                return fail(err, line, "duplicate 'class' line (the first is line %u)",
                            class_line);
            int rc = parse_class(q, e, line, &klass, err);
            if (rc != TT_OK)
                return rc;
            class_line = line;
            continue;
        }

        int key = -1;
        for (int i = 0; i < KEY_ROWS; i++)
            if ((size_t)kl == strlen(row_keys[i]) && memcmp(k, row_keys[i], (size_t)kl) == 0)
                key = i;
        if (key < 0)
            return fail(err, line,
                        "unknown key '%.*s' (expected class, team, in_pool or outside)", show, k);
        if (row_line[key])
            return fail(err, line, "duplicate '%s' row (the first is line %u)", row_keys[key],
                        row_line[key]);
        int rc = parse_row(q, e, line, row_keys[key], rows[key], err);
        if (rc != TT_OK)
            return rc;
        row_line[key] = line;
    }
    for (int i = 0; i < KEY_ROWS; i++)
        if (!row_line[i])
            return fail(err, 0, "missing '%s' row", row_keys[i]);
    *out = dc;
    if (cls)
        *cls = klass;
    return TT_OK;
}

int tt_dispatch_costs_parse(const char *text, tt_dispatch_costs *out, tt_host_class *cls,
                            tt_cost_error *err)
{
    if (!text || !out)
        return fail(err, 0, "no text or no output");
    return parse_text(text, strlen(text), out, cls, err);
}

#define TT__COST_FILE_MAX ((size_t)1 << 20)

int tt_dispatch_costs_load(const char *path, tt_dispatch_costs *out, tt_host_class *cls,
                           tt_cost_error *err)
{
    if (!path || !out)
        return fail(err, 0, "no path or no output");
    FILE *f = fopen(path, "rb");
    if (!f)
        return fail(err, 0, "cannot open: %s", strerror(errno));
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    if (!buf) {
        fclose(f);
        fail(err, 0, "out of memory");
        return TT_ENOMEM;
    }
    for (;;) {
        if (len == cap) {
            if (cap >= TT__COST_FILE_MAX + 1) {
                free(buf);
                fclose(f);
                return fail(err, 0, "file is larger than %zu bytes", TT__COST_FILE_MAX);
            }
            size_t ncap = cap * 2 > TT__COST_FILE_MAX + 1 ? TT__COST_FILE_MAX + 1 : cap * 2;
            char *nb = realloc(buf, ncap);
            if (!nb) {
                free(buf);
                fclose(f);
                fail(err, 0, "out of memory");
                return TT_ENOMEM;
            }
            buf = nb;
            cap = ncap;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) {
            if (ferror(f)) {
                int e = errno;
                free(buf);
                fclose(f);
                return fail(err, 0, "read error: %s", strerror(e));
            }
            break;
        }
    }
    fclose(f);
    if (len > TT__COST_FILE_MAX) {
        free(buf);
        return fail(err, 0, "file is larger than %zu bytes", TT__COST_FILE_MAX);
    }
    const char *nul = memchr(buf, '\0', len);
    if (nul) {
        unsigned line = 1;
        for (const char *q = buf; q < nul; q++)
            line += *q == '\n';
        free(buf);
        return fail(err, line, "the file holds a NUL byte (not a text file?)");
    }
    int rc = parse_text(buf, len, out, cls, err);
    free(buf);
    return rc;
}

static bool append(char *buf, size_t len, size_t *pos, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static bool append(char *buf, size_t len, size_t *pos, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *pos, len - *pos, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= len - *pos)
        return false;
    *pos += (size_t)n;
    return true;
}

int tt_dispatch_costs_format(const tt_dispatch_costs *costs, tt_host_class cls, char *buf,
                             size_t len)
{
    if (!buf)
        return TT__EINVAL("!buf");
    if (len > 0)
        buf[0] = '\0';
    if (!costs)
        return TT__EINVAL("!costs");
    if (!tt_dispatch_costs_valid(costs))
        return TT__EINVAL("!tt_dispatch_costs_valid(costs)");
    if ((unsigned)cls > (unsigned)TT_HOST_CLASS_COUNT)
        return TT__EINVAL("cls is out of range");
    if (len == 0)
        return TT__EINVAL("len == 0");
    const tt_width_costs *rows[KEY_ROWS] = { &costs->team, &costs->in_pool, &costs->outside };
    size_t pos = 0;
    bool ok = true;
    if (cls != TT_HOST_CLASS_COUNT)
        ok = append(buf, len, &pos, "class %s\n", tt_host_class_name(cls));
    for (int r = 0; ok && r < KEY_ROWS; r++) {
        ok = append(buf, len, &pos, "%-7s", row_keys[r]);
        for (unsigned i = 0; ok && i < rows[r]->count; i++)
            ok = append(buf, len, &pos, " %u:%llu", rows[r]->width[i],
                        (unsigned long long)rows[r]->cost_ns[i]);
        ok = ok && append(buf, len, &pos, "\n");
    }
    if (!ok) {
        buf[0] = '\0';
        return TT__EINVAL("len is too short for the text");
    }
    return TT_OK;
}

bool tt_dispatch_costs_valid(const tt_dispatch_costs *costs)
{
    return costs && tt_width_costs_valid(&costs->team) && tt_width_costs_valid(&costs->in_pool) &&
           tt_width_costs_valid(&costs->outside);
}

/* ------------------------------------------------------------------------ */
/* Built-in rows and the process default                                     */
/* ------------------------------------------------------------------------ */

int tt_dispatch_costs_for_class(tt_host_class cls, tt_dispatch_costs *out)
{
    if (!out)
        return TT__EINVAL("!out");
    if ((unsigned)cls >= (unsigned)TT_HOST_CLASS_COUNT)
        return TT__EINVAL("(unsigned)cls >= (unsigned)TT_HOST_CLASS_COUNT");
    *out = tt__builtin_rows[cls];
    return TT_OK;
}

static tt_dispatch_costs default_costs;
static bool default_from_file;
static int env_rc = TT_OK;
static tt_cost_error env_err;
static pthread_once_t default_once = PTHREAD_ONCE_INIT;

static void default_init(void)
{
    const tt_host_class host = tt_host_class_detect();
    default_costs = tt__builtin_rows[host];
    const char *path = getenv(TT_DISPATCH_COSTS_ENV);
    if (!path || !*path)
        return;
    tt_dispatch_costs fc;
    tt_host_class fcls = TT_HOST_CLASS_COUNT;
    tt_cost_error e;
    memset(&e, 0, sizeof e);
    int rc = tt_dispatch_costs_load(path, &fc, &fcls, &e);
    if (rc == TT_OK && fcls != TT_HOST_CLASS_COUNT && fcls != host) {
        rc = TT_EINVAL;
        e.line = 0;
        snprintf(e.message, sizeof e.message,
                 "the file is for class %s, this host is %s (drop the class line to use it "
                 "anyway)",
                 tt_host_class_name(fcls), tt_host_class_name(host));
    }
    if (rc != TT_OK) {
        env_rc = rc;
        env_err = e;
        if (e.line)
            fprintf(stderr,
                    "threadteam: %s=%s: line %u: %s; the built-in row of %s stays in force\n",
                    TT_DISPATCH_COSTS_ENV, path, e.line, e.message, tt_host_class_name(host));
        else
            fprintf(stderr, "threadteam: %s=%s: %s; the built-in row of %s stays in force\n",
                    TT_DISPATCH_COSTS_ENV, path, e.message, tt_host_class_name(host));
        return;
    }
    default_costs = fc;
    default_from_file = true;
}

static _Atomic bool default_ready;

static void default_init_once(void)
{
    default_init();
    atomic_store_explicit(&default_ready, true, memory_order_release);
}

static const tt_dispatch_costs *host_default(void)
{
    if (TT__UNLIKELY(!atomic_load_explicit(&default_ready, memory_order_acquire)))
        pthread_once(&default_once, default_init_once);
    return &default_costs;
}

void tt_dispatch_costs_host_default(tt_dispatch_costs *out)
{
    *out = *host_default();
}

int tt_dispatch_costs_env_status(bool *from_file, tt_cost_error *err)
{
    host_default();
    if (from_file)
        *from_file = default_from_file;
    if (err) {
        if (env_rc != TT_OK)
            *err = env_err;
        else
            memset(err, 0, sizeof *err);
    }
    return env_rc;
}

const tt_dispatch_costs *tt__pool_costs(const tt_pool *pool)
{
    if (pool && pool->attr.costs_set)
        return &pool->attr.costs;
    return host_default();
}

int tt_pool_attr_set_dispatch_costs(tt_pool_attr *attr, const tt_dispatch_costs *costs)
{
    if (!attr)
        return TT__EINVAL("!attr");
    if (!costs) {
        attr->costs_set = false;
        memset(&attr->costs, 0, sizeof attr->costs);
        return TT_OK;
    }
    if (!tt_dispatch_costs_valid(costs))
        return TT__EINVAL("!tt_dispatch_costs_valid(costs)");
    attr->costs = *costs;
    attr->costs_set = true;
    return TT_OK;
}

int tt_pool_attr_get_dispatch_costs(const tt_pool_attr *attr, tt_dispatch_costs *out)
{
    if (!attr)
        return TT__EINVAL("!attr");
    if (!out)
        return TT__EINVAL("!out");
    *out = attr->costs_set ? attr->costs : *host_default();
    return TT_OK;
}

int tt_pool_dispatch_costs(const tt_pool *pool, tt_dispatch_costs *out)
{
    if (!pool)
        return TT__EINVAL("!pool");
    if (!out)
        return TT__EINVAL("!out");
    *out = *tt__pool_costs(pool);
    return TT_OK;
}
