/*
 * manifest_pg/verify.c - what a verify of a shared job needs of the
 * manifest (src/shared/verify.c): the job found by its name without
 * making it or joining it as a host, its done file rows read a page at a
 * time, and the rows the verify found missing or differing made pending
 * again for the next copy run.
 *
 * Pages are keyset pages (id > the last page's last id, in id order, by
 * the primary key): each is one short statement, so a verify of millions
 * of rows holds no transaction open and no more than a page in memory.
 */
#define _GNU_SOURCE
#include "manifest_pg/internal.h"
#include "manifest_pg/pg_dry.h"

#include "manifest_types.h"

#include <stdlib.h>
#include <string.h>

struct find_args {
        const char *name, *src_fp, *dst_fp; /* src_fp NULL: the job's */
};

static int find_step(struct ferry_pg *pg, void *arg)
{
        const struct find_args *a = arg;
        struct pg_params p;
        PGresult *r = NULL;
        pg_params_init(&p);
        pg_param_text(&p, a->name);
        int rc = pg_exec(pg,
                         "SELECT id, src_fp, dst_fp,"
                         " floor(extract(epoch FROM coalesce(gen_started,"
                         " created)))::int8"
                         " FROM jobs WHERE name = $1",
                         &p, &r, "job lookup");
        pg_params_release(&p);
        if (rc)
                return rc;
        if (PQntuples(r) != 1) {
                PQclear(r);
                pg_fail(pg,
                        "the shared manifest has no job '%s' (a verify "
                        "makes none: check --job-name)",
                        a->name);
                return FERRY_EPATH;
        }
        rc = pg_job_check_fps(pg, a->name, r,
                              a->src_fp ? a->src_fp : PQgetvalue(r, 0, 1),
                              a->dst_fp);
        if (!rc) {
                pg->job = pg_get_i64(r, 0, 0);
                pg->created = pg_get_i64(r, 0, 3);
        }
        PQclear(r);
        return rc;
}

int ferry_pg_job_find(struct ferry_pg *pg, const char *name, const char *src_fp,
                      const char *dst_fp)
{
        struct find_args a = {name, src_fp, dst_fp};
        return pg_retry(pg, find_step, &a);
}

int pg_job_find_any_src(struct ferry_pg *pg, const char *name,
                        const char *dst_fp)
{
        struct find_args a = {name, NULL, dst_fp};
        return pg_retry(pg, find_step, &a);
}

/* ---- done rows, a page at a time ------------------------------------ */

/* the columns of a PG_FILES claim (pg_get_row), its token's place 0, and
 * the hash last (18) */
/* clang-format off */
static const char done_files_sql[] =
        "SELECT 0::int8, f.id, f.dir, d.path, f.name, f.type::int8, f.size,"
        " f.mtime_ns, f.ctime_ns, f.mode::int8, f.uid, f.gid, f.dev, f.ino,"
        " f.rdev, " PG_DST_COLS("f") ", f.hash FROM files f"
        " JOIN dirs d ON d.id = f.dir"
        " WHERE f.job = $1 AND f.state = " MF_SQL_INT(MF_ST_DONE)
        " AND f.id > $2::int8 ORDER BY f.id LIMIT $3::int8";
/* clang-format on */

/* a dry run's (src/shared/dryrun.c): the pending rows and the failed ones
 * (a host's join makes those pending again: job.c), as done_files_sql
 * with the link count (18) and whether the claim that would take one
 * finds it unmarked (19: claims.c); and the directories still to list,
 * and those that failed (remaining.c: a join lists them again), as rows
 * of a claim of directories (name NULL) */
static const char pending_files_sql[] =
        "SELECT 0::int8, f.id, f.dir, d.path, f.name, "
        "f.type::int8, f.size,"
        " f.mtime_ns, f.ctime_ns, f.mode::int8, f.uid, f.gid, "
        "f.dev, f.ino,"
        " f.rdev, " PG_DST_COLS(
                "f") ", coalesce(f.nlink, 1),"
                     " (f.unmarked OR f.lease_until IS NOT "
                     "NULL)::int::int8"
                     " FROM files f JOIN dirs d ON d.id = f.dir"
                     " WHERE f.job = $1 AND f.state IN "
                     "(" MF_SQL_INT(MF_ST_PENDING) ", " MF_SQL_INT(
                             MF_ST_FAILED) ") AND f.id > $2::int8 "
                                           "ORDER BY f.id"
                                           " LIMIT $3::int8";
static const char unlisted_dirs_sql[] =
        "SELECT 0::int8, d.id, coalesce(d.parent, 0), d.path, NULL::bytea,"
        " 0::int8, 0::int8, 0::int8, 0::int8, 0::int8, 0::int8, 0::int8,"
        " 0::int8, 0::int8, 0::int8, 0::int8, 0::int8, 0::int8 FROM dirs d"
        " WHERE d.job = $1 AND d.list_state IN (" MF_SQL_INT(
                PG_LIST_PENDING) ", " MF_SQL_INT(PG_LIST_FAILED) ")"
                                                                 " AND d.id > "
                                                                 "$2::int8 "
                                                                 "ORDER BY "
                                                                 "d.id LIMIT "
                                                                 "$3::int8";

enum page_kind { PAGE_DONE, PAGE_PENDING, PAGE_UNLISTED };

struct page_args {
        int64_t after;
        size_t max;
        struct ferry_pg_page *page;
        enum page_kind kind;
};

static int page_step(struct ferry_pg *pg, void *arg)
{
        struct page_args *a = arg;
        struct pg_params p;
        PGresult *r = NULL;
        pg_params_init(&p);
        pg_param_int(&p, pg->job);
        pg_param_int(&p, a->after);
        pg_param_int(&p, (int64_t)a->max);
        int rc = pg_exec(pg,
                         a->kind == PAGE_DONE      ? done_files_sql
                         : a->kind == PAGE_PENDING ? pending_files_sql
                                                   : unlisted_dirs_sql,
                         &p, &r, "read of rows");
        pg_params_release(&p);
        if (rc || (rc = pg_page_of_result(pg, r, a->page)))
                return rc;
        struct ferry_pg_row *rows = a->page->rows;
        for (size_t i = 0; i < a->page->n; i++) {
                if (a->kind == PAGE_DONE)
                        rows[i].hash =
                                pg_get_bytes(r, (int)i, 18, &rows[i].hash_len);
                if (a->kind == PAGE_PENDING) {
                        rows[i].nlink = (uint64_t)pg_get_i64(r, (int)i, 18);
                        rows[i].unmarked = pg_get_i64(r, (int)i, 19) != 0;
                }
        }
        return 0;
}

int pg_page_of_result(struct ferry_pg *pg, PGresult *r,
                      struct ferry_pg_page *page)
{
        size_t n = (size_t)PQntuples(r);
        if (n == 0) {
                PQclear(r);
                return 0;
        }
        struct ferry_pg_row *rows = calloc(n, sizeof(*rows));
        if (!rows) {
                PQclear(r);
                return pg_fail(pg, "out of memory");
        }
        for (size_t i = 0; i < n; i++)
                pg_get_row(r, (int)i, &rows[i]);
        page->n = n;
        page->rows = rows;
        page->res = r;
        return 0;
}

static int page_of(struct ferry_pg *pg, enum page_kind kind, int64_t after,
                   size_t max, struct ferry_pg_page *page)
{
        memset(page, 0, sizeof(*page));
        if (!pg->job)
                return pg_fail(pg, "no job found");
        if (max == 0 || max > FERRY_PG_BATCH_MAX)
                return pg_fail(pg, "a page of %zu rows: out of range", max);
        struct page_args a = {after, max, page, kind};
        return pg_retry(pg, page_step, &a);
}

int ferry_pg_done_files(struct ferry_pg *pg, int64_t after, size_t max,
                        struct ferry_pg_page *page)
{
        return page_of(pg, PAGE_DONE, after, max, page);
}

int ferry_pg_pending_files(struct ferry_pg *pg, int64_t after, size_t max,
                           struct ferry_pg_page *page)
{
        return page_of(pg, PAGE_PENDING, after, max, page);
}

int ferry_pg_unlisted_dirs(struct ferry_pg *pg, int64_t after, size_t max,
                           struct ferry_pg_page *page)
{
        return page_of(pg, PAGE_UNLISTED, after, max, page);
}

void ferry_pg_page_release(struct ferry_pg_page *page)
{
        free(page->rows);
        PQclear(page->res);
        memset(page, 0, sizeof(*page));
}

/* ---- rows to copy again --------------------------------------------- */

/* One statement: the rows pending, and every directory from theirs up
 * to the root to apply again (no row updated twice). Run again after a
 * lost reply, it finds the rows pending already and changes nothing
 * more. */
/* clang-format off */
static const char files_again_sql[] =
        "WITH RECURSIVE f AS (UPDATE files SET state = "
        MF_SQL_INT(MF_ST_PENDING) ", hash = NULL, error = NULL,"
        " lwait = lgroup IS NOT NULL,"
        " claim_token = NULL, lease_until = NULL, claimed_by = NULL"
        " WHERE job = $1 AND id = ANY($2::int8[]) AND state = "
        MF_SQL_INT(MF_ST_DONE) " RETURNING dir),"
        " up (id) AS (SELECT dir FROM f UNION SELECT d.parent FROM dirs d"
        " JOIN up ON d.id = up.id WHERE d.parent IS NOT NULL),"
        " d AS (UPDATE dirs SET state = " MF_SQL_INT(PG_META_TO_APPLY) ","
        " meta_error = NULL, lease_until = NULL WHERE job = $1"
        " AND id IN (SELECT id FROM up) RETURNING 1)"
        " SELECT (SELECT count(*) FROM f)::int8";
/* clang-format on */

struct again_args {
        const int64_t *ids;
        size_t n;
        uint64_t changed;
};

static int again_step(struct ferry_pg *pg, void *arg)
{
        struct again_args *a = arg;
        struct pg_params p;
        PGresult *r = NULL;
        pg_params_init(&p);
        pg_param_int(&p, pg->job);
        pg_param_int_array(&p, a->ids, a->n);
        int rc = pg_exec(pg, files_again_sql, &p, &r, "rows to copy again");
        pg_params_release(&p);
        if (rc)
                return rc;
        a->changed = (uint64_t)pg_get_i64(r, 0, 0);
        PQclear(r);
        return 0;
}

int ferry_pg_files_again(struct ferry_pg *pg, const int64_t *ids, size_t n,
                         uint64_t *n_again)
{
        *n_again = 0;
        if (!pg->job)
                return pg_fail(pg, "no job found");
        if (n > FERRY_PG_BATCH_MAX)
                return pg_fail(pg, "%zu rows to copy again: more than %d", n,
                               FERRY_PG_BATCH_MAX);
        struct again_args a = {ids, n, 0};
        int rc = n ? pg_retry(pg, again_step, &a) : 0;
        *n_again = a.changed;
        return rc;
}
