/*
 * manifest_pg/control.c - live control of a shared job (pg.h,
 * sql/pg/004_control.sql): `ferry set` writes the job's row, and each
 * host of the job reads it about once a second (src/shared/run.c).
 */
#define _GNU_SOURCE
#include "manifest_pg/internal.h"

#include <stdlib.h>

struct control_args {
        const char *name; /* set: the job by name; read: the joined one */
        int pause;        /* 1 pause, 0 resume, -1 leave */
        int host_jobs;    /* > 0 set, 0 each host's own, -1 leave */
        struct ferry_pg_control *out;
        bool found;
};

static void read_control(const PGresult *r, struct ferry_pg_control *out)
{
        out->paused = pg_get_i64(r, 0, 0) != 0;
        out->host_jobs = (unsigned)pg_get_i64(r, 0, 1);
}

static int set_step(struct ferry_pg *pg, void *arg)
{
        struct control_args *a = arg;
        struct pg_params p;
        PGresult *r = NULL;
        pg_params_init(&p);
        pg_param_text(&p, a->name);
        pg_param_int(&p, a->pause);
        pg_param_int(&p, a->host_jobs);
        int rc = pg_exec(pg,
                         "UPDATE jobs SET paused = CASE $2::int WHEN -1 THEN"
                         " paused ELSE $2::int = 1 END, host_jobs = CASE"
                         " $3::int WHEN -1 THEN host_jobs WHEN 0 THEN NULL"
                         " ELSE $3::int END WHERE name = $1 RETURNING"
                         " paused::int::int8, coalesce(host_jobs, 0)::int8",
                         &p, &r, "control");
        pg_params_release(&p);
        if (rc)
                return rc;
        a->found = PQntuples(r) == 1;
        if (a->found)
                read_control(r, a->out);
        PQclear(r);
        return 0;
}

int ferry_pg_set_control(struct ferry_pg *pg, const char *name, int pause,
                         int host_jobs, struct ferry_pg_control *now)
{
        struct control_args a = {name, pause, host_jobs, now, false};
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
        int rc =
                pg_exec(pg,
                        "SELECT paused::int::int8, coalesce(host_jobs, 0)::int8"
                        " FROM jobs WHERE id = $1",
                        &p, &r, "control");
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
        *out = (struct ferry_pg_control){false, 0};
        if (!pg->job)
                return pg_fail(pg, "no job joined");
        struct control_args a = {NULL, -1, -1, out, false};
        int rc = pg_retry(pg, read_step, &a);
        if (!rc && !a.found)
                return pg_fail(pg, "the job is no longer in the manifest");
        return rc;
}
