/*
 * manifest_pg/delete.c - --delete in a shared job (pg.h, sql/pg/
 * 007_delete.sql): what its guard weighs, the outcomes of delete claims
 * (claims.c makes the claims: PG_DEL_FILES, PG_DEL_DIRS), and how many
 * are still out.
 *
 * An outcome is one transaction. The claim's rows are locked, and those
 * that still hold its token and are still removed (a file row in state
 * 5, a directory of an older gen: a newer scan that found one in SRC
 * again made it live) are its own; each row is fenced on its own, as
 * another host records the rows it took over. Of its own rows, those
 * whose DST entry is gone are deleted, those whose entry stayed kept
 * with the gen that tried, those not tried (past the fence) given back;
 * and the directories of every row tried get their metadata applied
 * again. A row already gone counts as done (an earlier try that
 * committed, its reply lost; or another host's).
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
        const struct ferry_pg_del_share *share;
        /* of the claim's rows still in the job, sorted: those still its
         * own (nmine), those another claim took or a newer gen made live
         * (nother); a row in neither is gone (recorded already) */
        int64_t *mine, *other;
        size_t nmine, nother;
        uint64_t lost;
};

/* Runs sql with $1 the job, $2 the n ids, and $3 (and $4) the values of
 * x: nothing when n is 0. */
static int exec_ids(struct ferry_pg *pg, const char *sql, const int64_t *ids,
                    size_t n, const int64_t *x, int nx, PGresult **res)
{
        if (!n)
                return 0;
        struct pg_params p;
        pg_params_init(&p);
        pg_param_int(&p, pg->job);
        pg_param_int_array(&p, ids, n);
        for (int k = 0; k < nx; k++)
                pg_param_int(&p, x[k]);
        int rc = pg_exec(pg, sql, &p, res, "deletion outcome");
        pg_params_release(&p);
        return rc;
}

/* The claim's rows that are still its own and still removed ($2: ids, $3:
 * token, $4: the host's gen), locked: a row another claim took after the
 * lease ran out is its host's to record, and a row a newer gen found in
 * SRC again is live. */
/* clang-format off */
static const char lock_files_sql[] =
        "SELECT id, (claim_token = $3 AND state = " MF_SQL_INT(MF_ST_REMOVED)
        ")::int::int8 FROM files WHERE job = $1 AND id = ANY($2::int8[])"
        " FOR UPDATE";
static const char lock_dirs_sql[] =
        "SELECT id, (claim_token = $3 AND gen < $4)::int::int8 FROM dirs"
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
/* The claim's rows with no outcome (past the fence: not tried) go back
 * at once ($2: every row of the claim, $3: token, $4: gen). */
static const char back_files_sql[] =
        "UPDATE files SET lease_until = NULL WHERE job = $1"
        " AND id = ANY($2::int8[]) AND claim_token = $3 AND state = "
        MF_SQL_INT(MF_ST_REMOVED) " AND lease_until IS NOT NULL";
static const char back_dirs_sql[] =
        "UPDATE dirs SET lease_until = NULL WHERE job = $1"
        " AND id = ANY($2::int8[]) AND claim_token = $3 AND gen < $4"
        " AND lease_until IS NOT NULL";
/* The directory of every row tried may have lost an entry (now, or by an
 * earlier try whose outcome never came: a host killed after its unlink
 * finds nothing there now), so it has new times: applied again, and a
 * metadata claim that holds it now is refused (its host may have applied
 * it before the entry left). Not one of an older gen (removed itself),
 * nor one gone from SRC at its listing (its error kept): neither has any
 * to apply. A newer gen's is, whoever's the rows are now. ($2: the
 * directories, $3: gen) */
static const char again_sql[] =
        "UPDATE dirs SET state = " MF_SQL_INT(PG_META_TO_APPLY) ","
        " meta_error = NULL, claim_token = NULL, lease_until = NULL"
        " WHERE job = $1 AND id = ANY($2::int8[]) AND gen >= $3"
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

static int by_id(const void *x, const void *y)
{
        int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
        return (a > b) - (a < b);
}

static bool in(const int64_t *set, size_t n, int64_t id)
{
        return n && bsearch(&id, set, n, sizeof(id), by_id) != NULL;
}

/* Locks the claim's rows (its ids: ids) and sorts those still in the job
 * into a->mine and a->other. */
static int lock_mine(struct ferry_pg *pg, struct deleted_args *a,
                     const int64_t *ids, const int64_t *x)
{
        PGresult *r = NULL;
        bool files = a->kind == PG_DEL_FILES;
        int rc = exec_ids(pg, files ? lock_files_sql : lock_dirs_sql, ids, a->n,
                          x, files ? 1 : 2, &r);
        a->nmine = a->nother = 0;
        if (rc)
                return rc;
        int rows = r ? PQntuples(r) : 0;
        for (int i = 0; i < rows && (size_t)i < a->n; i++)
                if (pg_get_i64(r, i, 1))
                        a->mine[a->nmine++] = pg_get_i64(r, i, 0);
                else
                        a->other[a->nother++] = pg_get_i64(r, i, 0);
        PQclear(r);
        qsort(a->mine, a->nmine, sizeof(*a->mine), by_id);
        qsort(a->other, a->nother, sizeof(*a->other), by_id);
        return 0;
}

static int deleted_step(struct ferry_pg *pg, void *arg)
{
        struct deleted_args *a = arg;
        bool files = a->kind == PG_DEL_FILES;
        int64_t x[2] = {a->token, pg->gen};
        int64_t *ids = malloc(2 * a->n * sizeof(*ids) + 1);
        if (!ids)
                return pg_fail(pg, "out of memory");
        int64_t *dirs = ids + a->n;
        for (size_t i = 0; i < a->n; i++)
                ids[i] = a->o[i].id;
        int rc = pg_begin(pg);
        if (!rc)
                rc = lock_mine(pg, a, ids, x);
        /* the rows of the claim's that stay: one statement each (an error
         * is rare); those that go; the directories of all of them */
        size_t nforget = 0, ndirs = 0;
        a->lost = 0;
        for (size_t i = 0; i < a->n && !rc; i++) {
                const struct ferry_pg_del_outcome *o = &a->o[i];
                if (!o->tried)
                        continue;
                dirs[ndirs++] = o->dir;
                if (!in(a->mine, a->nmine, o->id))
                        a->lost += in(a->other, a->nother, o->id);
                else if (o->forget)
                        ids[nforget++] = o->id;
                else
                        rc = keep_row(pg, a, o);
        }
        if (!rc)
                rc = exec_ids(pg, files ? forget_files_sql : forget_dirs_sql,
                              ids, nforget, x, 1, NULL);
        if (!rc)
                rc = exec_ids(pg, again_sql, dirs, ndirs, &x[1], 1, NULL);
        for (size_t i = 0; i < a->n; i++)
                ids[i] = a->o[i].id;
        if (!rc)
                rc = exec_ids(pg, files ? back_files_sql : back_dirs_sql, ids,
                              a->n, x, files ? 1 : 2, NULL);
        if (!rc)
                rc = pg_del_give_back(pg, a->share);
        free(ids);
        return rc ? rc : pg_commit(pg);
}

int ferry_pg_deleted(struct ferry_pg *pg, enum ferry_pg_kind kind,
                     int64_t token, const struct ferry_pg_del_outcome *o,
                     size_t n, const struct ferry_pg_del_share *share,
                     uint64_t *lost)
{
        *lost = 0;
        if (!pg->job)
                return pg_fail(pg, "no job joined");
        if (kind != PG_DEL_FILES && kind != PG_DEL_DIRS)
                return pg_fail(pg, "a deletion outcome of another claim");
        if (n == 0 && !(share && (share->unused || share->held)))
                return 0;
        if (n > FERRY_PG_BATCH_MAX)
                return pg_fail(pg, "outcomes of %zu rows: more than %d", n,
                               FERRY_PG_BATCH_MAX);
        struct deleted_args a = {kind, token, o, n, share, NULL, NULL, 0, 0, 0};
        a.mine = malloc(2 * n * sizeof(*a.mine));
        if (!a.mine)
                return pg_fail(pg, "out of memory");
        a.other = a.mine + n;
        int rc = pg_retry(pg, deleted_step, &a);
        free(a.mine);
        *lost = a.lost;
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
        return pg_job_count(pg, deleting_sql, PG_JOB_ONLY, n, "deletions");
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
