/*
 * manifest_pg/del_limit.c - --max-delete in a shared job (pg.h,
 * sql/pg/010_max_delete.sql): the limit of a scan generation, one for
 * every host that deletes in it (the first one's), and the shares of it
 * that hosts take before they delete. A share is taken under the job's
 * row lock, so that all of them together never pass the limit; what a
 * host did not delete of its share goes back with its outcomes
 * (delete.c), in their transaction.
 */
#define _GNU_SOURCE
#include "manifest_pg/internal.h"

/* The first host of the gen ($3) that deletes records its limit ($2, -1
 * for none); the others read it. No row: the job has moved on to another
 * gen (claims say so). */
/* clang-format off */
static const char limit_sql[] =
        "UPDATE jobs SET del_limit = CASE WHEN del_gen IS DISTINCT FROM gen"
        " THEN $2 ELSE del_limit END, del_used = CASE WHEN del_gen IS"
        " DISTINCT FROM gen THEN 0 ELSE del_used END, del_held = CASE WHEN"
        " del_gen IS DISTINCT FROM gen THEN 0 ELSE del_held END,"
        " del_gen = gen WHERE id = $1 AND gen = $3 RETURNING del_limit";
static const char budget_sql[] =
        "SELECT del_limit, del_used, del_held FROM jobs"
        " WHERE id = $1 AND del_gen = $2";
static const char take_sql[] =
        "SELECT del_limit, del_used FROM jobs WHERE id = $1 AND del_gen = $2"
        " FOR UPDATE";
static const char took_sql[] =
        "UPDATE jobs SET del_used = del_used + $3 WHERE id = $1"
        " AND del_gen = $2";
static const char give_back_sql[] =
        "UPDATE jobs SET del_used = greatest(del_used - $3, 0),"
        " del_held = del_held + $4 WHERE id = $1 AND del_gen = $2";
/* clang-format on */

struct limit_args {
        int64_t mine;
        int64_t *theirs;
        bool *found;
};

static int limit_step(struct ferry_pg *pg, void *arg)
{
        struct limit_args *a = arg;
        struct pg_params p;
        PGresult *r = NULL;
        pg_params_init(&p);
        pg_param_int(&p, pg->job);
        pg_param_int(&p, a->mine);
        pg_param_int(&p, pg->gen);
        int rc = pg_exec(pg, limit_sql, &p, &r, "job's --max-delete");
        pg_params_release(&p);
        if (rc)
                return rc;
        *a->found = PQntuples(r) == 1;
        if (*a->found)
                *a->theirs = pg_get_i64(r, 0, 0);
        PQclear(r);
        return 0;
}

int ferry_pg_del_limit(struct ferry_pg *pg, int64_t mine, int64_t *theirs,
                       bool *found)
{
        *found = false;
        *theirs = mine;
        if (!pg->job)
                return pg_fail(pg, "no job joined");
        struct limit_args a = {mine, theirs, found};
        return pg_retry(pg, limit_step, &a);
}

/* Runs sql with $1 the job, $2 this host's gen; r: its result. */
static int job_gen_exec(struct ferry_pg *pg, const char *sql, PGresult **r,
                        const int64_t *x, int nx)
{
        struct pg_params p;
        pg_params_init(&p);
        pg_param_int(&p, pg->job);
        pg_param_int(&p, pg->gen);
        for (int k = 0; k < nx; k++)
                pg_param_int(&p, x[k]);
        int rc = pg_exec(pg, sql, &p, r, "job's --max-delete");
        pg_params_release(&p);
        return rc;
}

static int budget_step(struct ferry_pg *pg, void *arg)
{
        struct ferry_pg_del_budget *b = arg;
        PGresult *r = NULL;
        int rc = job_gen_exec(pg, budget_sql, &r, NULL, 0);
        if (rc)
                return rc;
        *b = (struct ferry_pg_del_budget){-1, 0, 0};
        if (PQntuples(r) == 1) {
                b->limit = pg_get_i64(r, 0, 0);
                b->used = (uint64_t)pg_get_i64(r, 0, 1);
                b->held = (uint64_t)pg_get_i64(r, 0, 2);
        }
        PQclear(r);
        return 0;
}

int ferry_pg_del_budget(struct ferry_pg *pg, struct ferry_pg_del_budget *out)
{
        *out = (struct ferry_pg_del_budget){-1, 0, 0};
        if (!pg->job)
                return pg_fail(pg, "no job joined");
        return pg_retry(pg, budget_step, out);
}

struct take_args {
        uint64_t want, *got;
};

static int take_step(struct ferry_pg *pg, void *arg)
{
        struct take_args *a = arg;
        PGresult *r = NULL;
        *a->got = 0;
        int rc = pg_begin(pg);
        if (!rc)
                rc = job_gen_exec(pg, take_sql, &r, NULL, 0);
        if (rc)
                return rc;
        int64_t left = 0;
        if (PQntuples(r) == 1) /* no row: another gen, nothing to delete */
                left = pg_get_i64(r, 0, 0) - pg_get_i64(r, 0, 1);
        PQclear(r);
        int64_t got = left <= 0                  ? 0
                      : (uint64_t)left < a->want ? left
                                                 : (int64_t)a->want;
        if (got)
                rc = job_gen_exec(pg, took_sql, NULL, &got, 1);
        if (!rc && !(rc = pg_commit(pg)))
                *a->got = (uint64_t)got;
        return rc;
}

int ferry_pg_del_take(struct ferry_pg *pg, uint64_t want, uint64_t *got)
{
        *got = 0;
        if (!pg->job)
                return pg_fail(pg, "no job joined");
        struct take_args a = {want, got};
        return pg_retry(pg, take_step, &a);
}

int pg_del_give_back(struct ferry_pg *pg, const struct ferry_pg_del_share *s)
{
        if (!s || (!s->unused && !s->held))
                return 0;
        int64_t x[2] = {(int64_t)s->unused, (int64_t)s->held};
        return job_gen_exec(pg, give_back_sql, NULL, x, 2);
}
