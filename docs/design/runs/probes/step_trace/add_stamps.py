# docs/design/runs/2026-12-07-scope-cost.md: add the step stamps (trace_tmp.h) to lib/; see trace_tmp.h.
def sub(path, old, new, count=1):
    s=open(path).read()
    assert s.count(old)>=1, (path, old)
    s=s.replace(old,new,count)
    open(path,'w').write(s)
sub('lib/Makefile.am','\texec_root.c \\','\texec_root.c \\\n\ttrace_tmp.c \\')
for f in ['lib/scope_entries.c','lib/team_scope.c','lib/scope_split.c']:
    sub(f,'#include "internal.h"\n','#include "internal.h"\n#include "trace_tmp.h"\n')
sub('lib/place.c','#include "place.h"\n','#include "place.h"\n#include "trace_tmp.h"\n')
sub('lib/scope_entries.c','''    tt__exec *x = ex ? tt__x(ex) : NULL;
    int rc = tt__exec_check(x);
    if (rc)
        return rc;
    if (!fn)''','''    TRL(0);
    tt__exec *x = ex ? tt__x(ex) : NULL;
    int rc = tt__exec_check(x);
    if (rc)
        return rc;
    if (!fn)''')
sub('lib/scope_entries.c','''    tt__backend_get()->region_line(pool->width, scope_line_member, &line);''','''    TRL(1);
    tt__backend_get()->region_line(pool->width, scope_line_member, &line);
    TRL(7);''')
sub('lib/scope_entries.c','''    if (p->k == 0) {
        /* The callback is the root's user code on this thread. */''','''    if (p->k == 0) {
        TRL(2);
        /* The callback is the root's user code on this thread. */''')
sub('lib/scope_entries.c','''            tt__ctl_issue(c, CMD_LEAVE, 0);
            return;''','''            tt__ctl_issue(c, CMD_LEAVE, 0);
            TRL(6);
            return;''')
sub('lib/scope_entries.c','''    tt__entry_end(&fr, ran);
    return ran ?''','''    tt__entry_end(&fr, ran);
    TRL(8); TRL_NEXT();
    return ran ?''')
sub('lib/scope_entries.c','''static void scope_line_member(const tt__line *l, unsigned k, unsigned got)
{''','''static void scope_line_member(const tt__line *l, unsigned k, unsigned got)
{
    if (k == 1) TRM(0);''')
sub('lib/scope_entries.c','''                                (flags & SCOPE_F_ISOLATE) != 0, scope_participate, &part);
}''','''                                (flags & SCOPE_F_ISOLATE) != 0, scope_participate, &part);
    if (k == 1) { TRM(5); TRM_NEXT(); }
}''')
sub('lib/team_scope.c','''        tt__ctl_issue(c, CMD_SECTION, width - 1);
        tt__ctl_run_section(c, 0);
        tt__ctl_wait_join(c);''','''        tt__ctl_issue(c, CMD_SECTION, width - 1);
        TRL(3);
        tt__ctl_run_section(c, 0);
        TRL(4);
        tt__ctl_wait_join(c);
        TRL(5);''')
sub('lib/scope_split.c','''            tt__ctl_note_cpu(c, rank, st);
            tt__ctl_run_section(c, rank);
            tt__join_done(&c->join, st);''','''            tt__ctl_note_cpu(c, rank, st);
            tt__ctl_run_section(c, rank);
            TRM(2);
            tt__join_done(&c->join, st);
            TRM(3);''')
sub('lib/scope_split.c','''    uint64_t cmd = next_cmd(c, &seen, st);
    for (;;) {''','''    uint64_t cmd = next_cmd(c, &seen, st);
    TRM(1);
    for (;;) {''')
sub('lib/scope_split.c','''        if (!run_cmd(c, rank, cmd, st))
            return;''','''        if (!run_cmd(c, rank, cmd, st)) {
            TRM(4);
            return;
        }''')
sub('lib/scope_entries.c','''    rc = tt__entry_begin(&fr, x);
    if (rc)
        return rc;
    tt_pool *pool = x->pool;
    unsigned budget = x->budget;
    if (budget == 1''','''    rc = tt__entry_begin(&fr, x);
    if (rc)
        return rc;
    TRL(10);
    tt_pool *pool = x->pool;
    unsigned budget = x->budget;
    if (budget == 1''')
sub('lib/scope_entries.c','''    rc = scope_reserve(x, &pl, s.timeout, slots, gang);
    if (rc == TT_OK)
        rc = tt__entry_commit(&fr);''','''    rc = scope_reserve(x, &pl, s.timeout, slots, gang);
    TRL(11);
    if (rc == TT_OK)
        rc = tt__entry_commit(&fr);
    TRL(12);''')
sub('lib/scope_entries.c','''    tt__place_unreserve(pool, &pl);
    /* A team narrower''','''    tt__place_unreserve(pool, &pl);
    TRL(9);
    /* A team narrower''')
sub('lib/scope_entries.c','''    TT__CTL_KEEP(c, region_team, budget == pool->width);''','''    TT__CTL_KEEP(c, region_team, budget == pool->width);
    TRL(13);''')
sub('lib/scope_entries.c','''        cpu_set_t saved;
        bool pinned''','''        TRM(6);
        cpu_set_t saved;
        bool pinned''')
sub('lib/scope_split.c','''    bool serve_isolated = c->region_team && tt__pool_isolates(c->pool);
    uint64_t cmd''','''    bool serve_isolated = c->region_team && tt__pool_isolates(c->pool);
    TRM(7);
    uint64_t cmd''')
sub('lib/place.c','''    tt__place_drop_crew(pool, pl);
    if (pl->acquired)
        tt__gang_release(pool, pl->acquired, pl->slots);
    pl->acquired = 0;''','''    tt__place_drop_crew(pool, pl);
    TRL(14);
    if (pl->acquired)
        tt__gang_release(pool, pl->acquired, pl->slots);
    TRL(15);
    pl->acquired = 0;''')
