/*
 * manifest_pg/remaining.c - what is left of the joined job: rows pending
 * or leased of a kind (ferry_pg_remaining), failed rows made pending again
 * at a join (ferry_pg_retry_failed), and the job's counts
 * (ferry_pg_counts, 005_counts.sql). Moved out of job.c, which joins and
 * adds rows.
 */
#define _GNU_SOURCE
#include "manifest_pg/internal.h"

#include "manifest_types.h"

#include <stdlib.h>
#include <string.h>

/* ---- what remains ---------------------------------------------------- */

struct remaining_args {
        enum ferry_pg_kind kind;
        uint64_t pending, leased;
};

static int remaining_step(struct ferry_pg *pg, void *arg)
{
        struct remaining_args *a = arg;
        struct pg_params p;
        PGresult *r = NULL;
        pg_params_init(&p);
        pg_param_int(&p, pg->job);
        int rc = pg_exec(
                pg,
                a->kind == PG_DIRS
                        ? "SELECT count(*)::int8, count(*) FILTER (WHERE "
                          "lease_until >= now())::int8 FROM dirs WHERE job = "
                          "$1 AND list_state = " MF_SQL_INT(PG_LIST_PENDING)
                : a->kind == PG_DIR_META
                        ? "SELECT count(*)::int8, count(*) FILTER (WHERE "
                          "lease_until >= now())::int8 FROM dirs WHERE job = "
                          "$1 AND state = " MF_SQL_INT(
                                  PG_META_TO_APPLY) " AND list_state "
                                                    "= " MF_SQL_INT(PG_LISTED)
                        : "SELECT count(*)::int8, count(*) FILTER (WHERE "
                          "lease_until >= now())::int8 FROM files WHERE job = "
                          "$1 AND state = " MF_SQL_INT(MF_ST_PENDING),
                &p, &r, "count");
        pg_params_release(&p);
        if (rc)
                return rc;
        a->pending = (uint64_t)pg_get_i64(r, 0, 0);
        a->leased = (uint64_t)pg_get_i64(r, 0, 1);
        PQclear(r);
        return 0;
}

int ferry_pg_remaining(struct ferry_pg *pg, enum ferry_pg_kind kind,
                       uint64_t *pending, uint64_t *leased)
{
        if (!pg->job)
                return pg_fail(pg, "no job joined");
        struct remaining_args a = {kind, 0, 0};
        int rc = pg_retry(pg, remaining_step, &a);
        *pending = a.pending;
        *leased = a.leased;
        return rc;
}

/* ---- failed rows, and the job's counts ------------------------------- */

/* clang-format off */
static const char retry_failed_sql[] =
        "WITH f AS (UPDATE files SET state = "
        MF_SQL_INT(MF_ST_PENDING) ", claim_token = NULL,"
        " lease_until = NULL, claimed_by = NULL,"
        " lwait = lgroup IS NOT NULL WHERE job = $1"
        " AND state = " MF_SQL_INT(MF_ST_FAILED) " AND gen = (SELECT gen"
        " FROM jobs WHERE id = $1) RETURNING 1),"
        /* and the directories the retries will write into (a copy, a
         * subdirectory made) get their times again: one statement for
         * them all, no row updated twice */
        " d AS (UPDATE dirs SET state = " MF_SQL_INT(PG_META_TO_APPLY) ","
        " meta_error = NULL, lease_until = NULL WHERE job = $1"
        " AND (state = " MF_SQL_INT(PG_META_FAILED) " OR id IN"
        " (SELECT dir FROM files WHERE job = $1 AND state = "
        MF_SQL_INT(MF_ST_FAILED) " AND gen = (SELECT gen FROM jobs WHERE"
        " id = $1)) OR id IN (SELECT parent FROM dirs WHERE job = $1"
        " AND list_state = " MF_SQL_INT(PG_LIST_FAILED) "))"
        " RETURNING 1),"
        /* (of any gen: one gone since is then listed as gone; one the
         * selection now leaves out, as empty: src/shared/scan.c) */
        " l AS (UPDATE dirs SET list_state = " MF_SQL_INT(PG_LIST_PENDING) ","
        " error = NULL, lease_until = NULL WHERE job = $1"
        " AND list_state = " MF_SQL_INT(PG_LIST_FAILED) " RETURNING 1)"
        " SELECT ((SELECT count(*) FROM f) + (SELECT count(*) FROM d) +"
        " (SELECT count(*) FROM l))::int8";
/* clang-format on */

int ferry_pg_retry_failed(struct ferry_pg *pg, uint64_t *n)
{
        return pg_job_count(pg, retry_failed_sql, PG_JOB_ONLY, n,
                            "retry of failed rows");
}

/* The job's counts: the sum of its rows of counts (sql/pg/005_counts.sql),
 * as many as connections that changed its rows, not its rows. */
static int counts_step(struct ferry_pg *pg, void *arg)
{
        struct ferry_pg_counts *c = arg;
        struct pg_params p;
        PGresult *r = NULL;
        pg_params_init(&p);
        pg_param_int(&p, pg->job);
        int rc = pg_exec(pg,
                         "SELECT coalesce(sum(files), 0)::int8,"
                         " coalesce(sum(files_done), 0)::int8,"
                         " coalesce(sum(files_failed), 0)::int8,"
                         " coalesce(sum(bytes), 0)::int8,"
                         " coalesce(sum(bytes_done), 0)::int8,"
                         " coalesce(sum(dirs), 0)::int8,"
                         " coalesce(sum(dirs_list_failed), 0)::int8,"
                         " coalesce(sum(dirs_meta_failed), 0)::int8,"
                         " coalesce(sum(files_vanished), 0)::int8"
                         " FROM counts WHERE job = $1",
                         &p, &r, "count");
        pg_params_release(&p);
        if (rc)
                return rc;
        uint64_t *v[] = {&c->files,       &c->files_done,  &c->files_failed,
                         &c->bytes,       &c->bytes_done,  &c->dirs,
                         &c->dirs_failed, &c->meta_failed, &c->files_vanished};
        for (int i = 0; i < 9; i++)
                *v[i] = (uint64_t)pg_get_i64(r, 0, i);
        PQclear(r);
        return 0;
}

int ferry_pg_counts(struct ferry_pg *pg, struct ferry_pg_counts *out)
{
        memset(out, 0, sizeof(*out));
        if (!pg->job)
                return pg_fail(pg, "no job joined");
        return pg_retry(pg, counts_step, out);
}
