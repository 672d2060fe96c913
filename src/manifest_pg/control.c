/*
 * manifest_pg/control.c - live control of a shared job (pg.h,
 * sql/pg/004_control.sql, 011_host_limits.sql): `ferry set` writes the
 * job's row, and each host of the job reads it about once a second
 * (src/shared/control.c).
 */
#define _GNU_SOURCE
#include "manifest_pg/internal.h"

#include <stdlib.h>

struct control_args {
        const char *name; /* set: the job by name; read: the joined one */
        const struct ferry_pg_set *set;
        struct ferry_pg_control *out;
        bool found;
};

/* The columns both statements return, in this order. */
#define CONTROL_COLS                                                           \
        " paused::int::int8, coalesce(host_jobs, 0)::int8,"                    \
        " coalesce(host_bwlimit, -1)::int8, coalesce(window_start, -2)::int8," \
        " coalesce(window_end, -2)::int8"

static void read_control(const PGresult *r, struct ferry_pg_control *out)
{
        out->paused = pg_get_i64(r, 0, 0) != 0;
        out->host_jobs = (unsigned)pg_get_i64(r, 0, 1);
        out->bwlimit = pg_get_i64(r, 0, 2);
        out->window_start = (int)pg_get_i64(r, 0, 3);
        out->window_end = (int)pg_get_i64(r, 0, 4);
}

/* clang-format off */
static const char set_sql[] =
        "UPDATE jobs SET paused = CASE $2::int WHEN -1 THEN paused"
        " ELSE $2::int = 1 END, host_jobs = CASE $3::int WHEN -1 THEN"
        " host_jobs WHEN 0 THEN NULL ELSE $3::int END,"
        " host_bwlimit = CASE WHEN $4::int8 < 0 THEN host_bwlimit ELSE $4 END,"
        " window_start = CASE WHEN $5::int = -2 THEN window_start ELSE $5 END,"
        " window_end = CASE WHEN $5::int = -2 THEN window_end ELSE $6 END"
        " WHERE name = $1 RETURNING" CONTROL_COLS;
static const char read_sql[] =
        "SELECT" CONTROL_COLS " FROM jobs WHERE id = $1";
/* clang-format on */

static int set_step(struct ferry_pg *pg, void *arg)
{
        struct control_args *a = arg;
        const struct ferry_pg_set *w = a->set;
        struct pg_params p;
        PGresult *r = NULL;
        pg_params_init(&p);
        pg_param_text(&p, a->name);
        pg_param_int(&p, w->pause);
        pg_param_int(&p, w->host_jobs);
        pg_param_int(&p, w->bwlimit);
        pg_param_int(&p, w->window_start);
        pg_param_int(&p, w->window_end);
        int rc = pg_exec(pg, set_sql, &p, &r, "control");
        pg_params_release(&p);
        if (rc)
                return rc;
        a->found = PQntuples(r) == 1;
        if (a->found)
                read_control(r, a->out);
        PQclear(r);
        return 0;
}

int ferry_pg_set_control(struct ferry_pg *pg, const char *name,
                         const struct ferry_pg_set *set,
                         struct ferry_pg_control *now)
{
        struct control_args a = {name, set, now, false};
        int rc = pg_retry(pg, set_step, &a);
        if (rc)
                return rc;
        if (!a.found) {
                pg_fail(pg, "the shared manifest has no job '%s'", name);
                return FERRY_EPATH;
        }
        return 0;
}

static int read_step(struct ferry_pg *pg, void *arg)
{
        struct control_args *a = arg;
        struct pg_params p;
        PGresult *r = NULL;
        pg_params_init(&p);
        pg_param_int(&p, pg->job);
        int rc = pg_exec(pg, read_sql, &p, &r, "control");
        pg_params_release(&p);
        if (rc)
                return rc;
        a->found = PQntuples(r) == 1;
        if (a->found)
                read_control(r, a->out);
        PQclear(r);
        return 0;
}

int ferry_pg_control(struct ferry_pg *pg, struct ferry_pg_control *out)
{
        *out = (struct ferry_pg_control){false, 0, -1, -2, -2};
        if (!pg->job)
                return pg_fail(pg, "no job joined");
        struct control_args a = {NULL, NULL, out, false};
        int rc = pg_retry(pg, read_step, &a);
        if (!rc && !a.found)
                return pg_fail(pg, "the job is no longer in the manifest");
        return rc;
}
