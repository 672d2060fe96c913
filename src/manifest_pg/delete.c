/*
 * manifest_pg/delete.c - --delete in a shared job (pg.h, sql/pg/
 * 007_delete.sql): what its guard weighs, the outcomes of delete claims
 * (claims.c makes the claims: PG_DEL_FILES, PG_DEL_DIRS), and how many
 * are still out.
 *
 * An outcome is one transaction, as claims.c's: the rows locked, each
 * one still in the job checked to hold the claim's token and to be still
 * removed (a file row in state 5, a directory of an older gen: a new scan
 * that found it again in SRC makes it live, and the claim stale); then
 * the rows whose DST entry is gone are deleted, those whose entry stayed
 * kept with the gen that tried, and the directories an entry left get
 * their metadata applied again. A row already gone counts as done (an
 * earlier try that committed, its reply lost).
 */
#define _GNU_SOURCE
#include "manifest_pg/internal.h"

#include "manifest_types.h"

#include <stdio.h>
#include <stdlib.h>

/* ---- the guard --------------------------------------------------------- */

/* clang-format off */
static const char check_sql[] =
        "SELECT (NOT EXISTS (SELECT 1 FROM dirs WHERE job = $1 AND gen = $2"
        " AND list_state <> " MF_SQL_INT(PG_LISTED) "))::int::int8,"
        " EXISTS (SELECT 1 FROM files WHERE job = $1 AND gen = $2"
        " AND state <> " MF_SQL_INT(MF_ST_REMOVED) ")::int::int8,"
        " (SELECT count(*) FROM files WHERE job = $1 AND state = "
        MF_SQL_INT(MF_ST_REMOVED) " AND coalesce(del_tried, 0) < $2)::int8,"
        " (SELECT coalesce(sum(files_done), 0) FROM counts"
        " WHERE job = $1)::int8";
/* clang-format on */

static int check_step(struct ferry_pg *pg, void *arg)
{
        struct ferry_pg_delete_check *k = arg;
        struct pg_params p;
        PGresult *r = NULL;
        pg_params_init(&p);
        pg_param_int(&p, pg->job);
        pg_param_int(&p, pg->gen);
        int rc = pg_exec(pg, check_sql, &p, &r, "delete check");
        pg_params_release(&p);
        if (rc)
                return rc;
        k->complete = pg_get_i64(r, 0, 0) != 0;
        k->seen = pg_get_i64(r, 0, 1) != 0;
        k->to_delete = (uint64_t)pg_get_i64(r, 0, 2);
        k->done = (uint64_t)pg_get_i64(r, 0, 3);
        PQclear(r);
        return 0;
}

int ferry_pg_delete_check(struct ferry_pg *pg,
                          struct ferry_pg_delete_check *out)
{
        *out = (struct ferry_pg_delete_check){0};
        if (!pg->job)
                return pg_fail(pg, "no job joined");
        return pg_retry(pg, check_step, out);
}

/* ---- outcomes ---------------------------------------------------------- */

struct deleted_args {
        enum ferry_pg_kind kind;
        int64_t token;
        const struct ferry_pg_del_outcome *o;
        size_t n;
        bool refused;
};

/* Runs sql with $1 the job, $2 the ids of a's rows that pick says, and
 * $3 (and $4) the values of x: nothing when no row is picked. */
enum pick { ALL, FORGET, DIRS_LEFT };
static int exec_ids(struct ferry_pg *pg, const struct deleted_args *a,
                    const char *sql, enum pick pick, const int64_t *x, int nx,
                    PGresult **res)
{
        int64_t *ids = malloc(a->n * sizeof(*ids));
        if (!ids)
                return pg_fail(pg, "out of memory");
        size_t m = 0;
        for (size_t i = 0; i < a->n; i++) {
                const struct ferry_pg_del_outcome *o = &a->o[i];
                if (pick == ALL || (pick == FORGET && o->forget))
                        ids[m++] = o->id;
                else if (pick == DIRS_LEFT && o->deleted)
                        ids[m++] = o->dir;
        }
        struct pg_params p;
        pg_params_init(&p);
        pg_param_int(&p, pg->job);
        pg_param_int_array(&p, ids, m);
        for (int k = 0; k < nx; k++)
                pg_param_int(&p, x[k]);
        int rc = m ? pg_exec(pg, sql, &p, res, "deletion outcome") : 0;
        pg_params_release(&p);
        free(ids);
        return rc;
}

/* Each row of the claim still in the job ($2: ids, $3: token, $4: the
 * host's gen), locked: 1 when it is still the claim's and removed. */
/* clang-format off */
static const char lock_files_sql[] =
        "SELECT (claim_token = $3 AND state = " MF_SQL_INT(MF_ST_REMOVED)
        ")::int::int8 FROM files WHERE job = $1 AND id = ANY($2::int8[])"
        " FOR UPDATE";
static const char lock_dirs_sql[] =
        "SELECT (claim_token = $3 AND gen < $4)::int::int8 FROM dirs"
        " WHERE job = $1 AND id = ANY($2::int8[]) FOR UPDATE";
/* A row that stays ($2: its id, $3: token, $4: gen, $5: why). */
static const char keep_file_sql[] =
        "UPDATE files SET lease_until = NULL, del_tried = $4, error = $5"
        " WHERE job = $1 AND id = $2 AND claim_token = $3";
static const char keep_dir_sql[] =
        "UPDATE dirs SET lease_until = NULL, del_tried = $4"
        " WHERE job = $1 AND id = $2 AND claim_token = $3";
/* The rows that go ($2, $3: token). */
static const char forget_files_sql[] =
        "DELETE FROM files WHERE job = $1 AND id = ANY($2::int8[])"
        " AND claim_token = $3";
static const char forget_dirs_sql[] =
        "DELETE FROM dirs WHERE job = $1 AND id = ANY($2::int8[])"
        " AND claim_token = $3";
/* A directory an entry left has new times: applied again, and a metadata
 * claim that holds it now is refused (its host may have applied it before
 * the entry left). Not one of an older gen (removed itself), nor one gone
 * from SRC at its listing (its error kept): neither has any to apply.
 * ($2: the directories, $3: gen) */
static const char again_sql[] =
        "UPDATE dirs SET state = " MF_SQL_INT(PG_META_TO_APPLY) ","
        " meta_error = NULL, claim_token = NULL, lease_until = NULL"
        " WHERE job = $1 AND id = ANY($2::int8[]) AND gen = $3"
        " AND list_state = " MF_SQL_INT(PG_LISTED) " AND error IS NULL";
/* clang-format on */

static int keep_row(struct ferry_pg *pg, const struct deleted_args *a,
                    const struct ferry_pg_del_outcome *o)
{
        bool files = a->kind == PG_DEL_FILES;
        struct pg_params p;
        pg_params_init(&p);
        pg_param_int(&p, pg->job);
        pg_param_int(&p, o->id);
        pg_param_int(&p, a->token);
        pg_param_int(&p, pg->gen);
        if (files)
                pg_param_text(&p, o->error);
        int rc = pg_exec(pg, files ? keep_file_sql : keep_dir_sql, &p, NULL,
                         "deletion outcome");
        pg_params_release(&p);
        return rc;
}

static int deleted_step(struct ferry_pg *pg, void *arg)
{
        struct deleted_args *a = arg;
        bool files = a->kind == PG_DEL_FILES;
        int64_t x[2] = {a->token, pg->gen};
        a->refused = false;
        PGresult *r = NULL;
        int rc = pg_begin(pg);
        if (!rc)
                rc = exec_ids(pg, a, files ? lock_files_sql : lock_dirs_sql,
                              ALL, x, files ? 1 : 2, &r);
        if (rc)
                return rc;
        for (int i = 0; i < PQntuples(r); i++)
                if (!pg_get_i64(r, i, 0))
                        a->refused = true;
        PQclear(r);
        if (a->refused) /* pg_retry rolls back */
                return 0;
        /* the rows that stay: one statement each (an error is rare) */
        for (size_t i = 0; i < a->n && !rc; i++)
                if (!a->o[i].forget)
                        rc = keep_row(pg, a, &a->o[i]);
        if (!rc)
                rc = exec_ids(pg, a, files ? forget_files_sql : forget_dirs_sql,
                              FORGET, x, 1, NULL);
        if (!rc)
                rc = exec_ids(pg, a, again_sql, DIRS_LEFT, &x[1], 1, NULL);
        return rc ? rc : pg_commit(pg);
}

int ferry_pg_deleted(struct ferry_pg *pg, enum ferry_pg_kind kind,
                     int64_t token, const struct ferry_pg_del_outcome *o,
                     size_t n, bool *refused)
{
        *refused = false;
        if (!pg->job)
                return pg_fail(pg, "no job joined");
        if (kind != PG_DEL_FILES && kind != PG_DEL_DIRS)
                return pg_fail(pg, "a deletion outcome of another claim");
        if (n == 0)
                return 0;
        if (n > FERRY_PG_BATCH_MAX)
                return pg_fail(pg, "outcomes of %zu rows: more than %d", n,
                               FERRY_PG_BATCH_MAX);
        struct deleted_args a = {kind, token, o, n, false};
        int rc = pg_retry(pg, deleted_step, &a);
        *refused = a.refused;
        return rc;
}

/* ---- what is still out ------------------------------------------------- */

/* clang-format off */
static const char deleting_sql[] =
        "WITH j AS (SELECT gen FROM jobs WHERE id = $1)"
        " SELECT ((SELECT count(*) FROM files, j WHERE job = $1 AND state = "
        MF_SQL_INT(MF_ST_REMOVED) " AND lease_until IS NOT NULL"
        " AND coalesce(del_tried, 0) < j.gen)"
        " + (SELECT count(*) FROM dirs d, j WHERE d.job = $1"
        " AND d.gen < j.gen AND d.lease_until IS NOT NULL"
        " AND coalesce(d.del_tried, 0) < j.gen))::int8";
/* clang-format on */

int ferry_pg_deleting(struct ferry_pg *pg, uint64_t *n)
{
        return pg_job_count(pg, deleting_sql, false, n, "deletions");
}

/* clang-format off */
static const char drop_sql[] =
        "UPDATE dirs SET lease_until = NULL WHERE job = $1"
        " AND claim_token = $2 AND state = " MF_SQL_INT(PG_META_TO_APPLY);
/* clang-format on */

struct drop_args {
        int64_t token;
};

static int drop_step(struct ferry_pg *pg, void *arg)
{
        const struct drop_args *a = arg;
        struct pg_params p;
        pg_params_init(&p);
        pg_param_int(&p, pg->job);
        pg_param_int(&p, a->token);
        int rc = pg_exec(pg, drop_sql, &p, NULL, "claim given back");
        pg_params_release(&p);
        return rc;
}

int ferry_pg_meta_drop(struct ferry_pg *pg, int64_t token)
{
        if (!pg->job)
                return pg_fail(pg, "no job joined");
        struct drop_args a = {token};
        return pg_retry(pg, drop_step, &a);
}
