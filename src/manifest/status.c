/*
 * manifest/status.c - what `ferry status` reads, in one read transaction:
 * files and bytes of each row state, the job's SRC and DST, directories
 * and rows gone from SRC, the last run, each failed row or directory
 * with its reason and cause, grouped by cause and sorted by path within
 * one, and then each whose data arrived but whose metadata fell short,
 * grouped by cause the same way.
 */
#define _GNU_SOURCE
#include "manifest/internal.h"

#include "failure.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* files and bytes in state st */
#define COUNT_STATE(st) "sum(state = " st "), sum(size * (state = " st "))"

/* A row's path as bytes (dir/name; "" for SRC itself), which the
 * failures of one cause are sorted by: memcmp order, as `LC_ALL=C sort`
 * sorts. */
#define JOINED_PATH                                                            \
        "CASE WHEN length(name) = 0 THEN CAST(path AS BLOB)"                   \
        " WHEN length(path) = 0 THEN CAST(name AS BLOB)"                       \
        " ELSE CAST(path AS BLOB) || x'2f' || CAST(name AS BLOB) END"

/* Failures grouped by cause (side, step, errno), the most frequent cause
 * first; within one, by path (JOINED_PATH); at most ?1 of each cause
 * (0: all). Columns: path, name, error, side, step, errno, count of the
 * cause, index within it. */
#define FAILURES_SQL(D_SIDE, D_STEP, D_ERRNO, F_SIDE, F_STEP, F_ERRNO)         \
        "SELECT path, name, error, side, step, errno, n, k - 1 FROM ("         \
        " SELECT path, name, error, side, step, errno,"                        \
        "  count(*) OVER (PARTITION BY side, step, errno) AS n,"               \
        "  row_number() OVER (PARTITION BY side, step, errno"                  \
        "   ORDER BY " JOINED_PATH ", ord, id) AS k"                           \
        " FROM (SELECT 0 AS ord, id, path, x'' AS name, error,"                \
        "   " D_SIDE " AS side, " D_STEP " AS step, " D_ERRNO " AS errno"      \
        "   FROM dirs WHERE error IS NOT NULL"                                 \
        "  UNION ALL"                                                          \
        "  SELECT 1, f.id, d.path, f.name, coalesce(f.error, ''),"             \
        "   " F_SIDE ", " F_STEP ", " F_ERRNO                                  \
        "   FROM files f JOIN dirs d ON d.id = f.dir"                          \
        "   WHERE f.state = " SQL_FAILED "))"                                  \
        " WHERE ?1 = 0 OR k <= ?1"                                             \
        " ORDER BY n DESC, side, step, errno, k"

/* Metadata shortfalls (done rows and directories whose metadata fell
 * short), grouped by cause and sorted by path as FAILURES_SQL does; the
 * same columns. */
#define META_SQL                                                               \
        "SELECT path, name, '', 2, step, errno, n, k - 1 FROM ("               \
        " SELECT path, name, step, errno,"                                     \
        "  count(*) OVER (PARTITION BY step, errno) AS n,"                     \
        "  row_number() OVER (PARTITION BY step, errno"                        \
        "   ORDER BY " JOINED_PATH ", ord, id) AS k"                           \
        " FROM (SELECT 0 AS ord, id, path, x'' AS name,"                       \
        "   meta_step AS step, meta_errno AS errno"                            \
        "   FROM dirs WHERE meta_step != 0"                                    \
        "  UNION ALL"                                                          \
        "  SELECT 1, f.id, d.path, f.name, f.meta_step, f.meta_errno"          \
        "   FROM files f JOIN dirs d ON d.id = f.dir"                          \
        "   WHERE f.state = " SQL_DONE " AND f.meta_step != 0))"               \
        " WHERE ?1 = 0 OR k <= ?1"                                             \
        " ORDER BY n DESC, step, errno, k"

enum status_stmt {
        S_BEGIN,
        S_COMMIT,
        S_COUNTS,
        S_BAD_DIRS,
        S_META,
        S_NOT_IN_SOURCE,
        S_DIRS,
        S_LAST_RUN,
        S_FAILURES,
        S_FAILURES_V4,
        S_META_COUNT,
        S_META_FAILURES,
        S_NSTMTS
};

// clang-format off
static const char *const status_sql[S_NSTMTS] = {
        [S_BEGIN] = "BEGIN",
        [S_COMMIT] = "COMMIT",
        /* in enum ferry_state order, pending to vanished */
        [S_COUNTS] =
                "SELECT " COUNT_STATE(SQL_PENDING) ", " COUNT_STATE(SQL_DONE)
                ", " COUNT_STATE(SQL_FAILED) ", " COUNT_STATE(SQL_SKIPPED)
                ", " COUNT_STATE(SQL_VANISHED) " FROM files",
        [S_BAD_DIRS] = "SELECT count(*) FROM dirs WHERE error IS NOT NULL",
        [S_META] = "SELECT key, value FROM meta",
        [S_NOT_IN_SOURCE] =
                "SELECT count(*) FROM files WHERE state IN " SQL_GONE
                " AND state = " SQL_REMOVED,
        [S_DIRS] = "SELECT count(*) FROM dirs",
        [S_LAST_RUN] =
                "SELECT started, coalesce(finished, 0),"
                " coalesce(result, -1) FROM runs ORDER BY id DESC LIMIT 1",
        [S_FAILURES] =
                FAILURES_SQL("fail_side", "fail_step", "fail_errno",
                             "f.fail_side", "f.fail_step", "f.fail_errno"),
        /* a manifest before version 5 (read without write access, so not
         * migrated) records no causes */
        [S_FAILURES_V4] =
                FAILURES_SQL("NULL", "NULL", "NULL", "NULL", "NULL", "NULL"),
        [S_META_COUNT] =
                "SELECT (SELECT count(*) FROM files WHERE state = " SQL_DONE
                " AND meta_step != 0)"
                " + (SELECT count(*) FROM dirs WHERE meta_step != 0)",
        [S_META_FAILURES] = META_SQL,
};
// clang-format on
_Static_assert(S_NSTMTS <= MF_TABLE_MAX, "status.c: statement table too big");
_Static_assert(ST_PENDING == 0 && ST_DONE == 1 && ST_FAILED == 2 &&
                       ST_SKIPPED == 3 && ST_VANISHED == 4,
               "status_counts reads the states in enum order");

#define STMT(id) mf_stmt(m, T_STATUS, id, status_sql[id])

static int status_counts(struct ferry_manifest *m,
                         struct ferry_status_info *info)
{
        int64_t v[10] = {0};
        int rc = mf_select_ints(m, STMT(S_COUNTS), 0, v, 10);
        struct ferry_state_count *c[5] = {&info->pending, &info->done,
                                          &info->failed, &info->skipped,
                                          &info->vanished};
        for (int i = 0; i < 5; i++)
                *c[i] = (struct ferry_state_count){(uint64_t)v[2 * i],
                                                   (uint64_t)v[2 * i + 1]};
        return rc;
}

static int status_meta(struct ferry_manifest *m, struct ferry_status_info *info)
{
        int64_t bad_dirs = 0;
        if (mf_select_ints(m, STMT(S_BAD_DIRS), 0, &bad_dirs, 1))
                return FERRY_EMANIFEST;
        info->failed.files += (uint64_t)bad_dirs;
        sqlite3_stmt *s = STMT(S_META);
        if (!s)
                return mf_db_fail(m, "read");
        while (sqlite3_step(s) == SQLITE_ROW) {
                const char *k = (const char *)sqlite3_column_text(s, 0);
                const char *v = sqlite3_column_blob(s, 1);
                int n = sqlite3_column_bytes(s, 1);
                if (!k || !v)
                        continue;
                if (!strcmp(k, "src"))
                        snprintf(info->src, sizeof(info->src), "%.*s", n, v);
                else if (!strcmp(k, "dst"))
                        snprintf(info->dst, sizeof(info->dst), "%.*s", n, v);
        }
        sqlite3_reset(s);
        int64_t n = 0;
        int rc = mf_select_ints(m, STMT(S_NOT_IN_SOURCE), 0, &n, 1);
        info->not_in_source = (uint64_t)n;
        if (!rc)
                rc = mf_select_ints(m, STMT(S_DIRS), 0, &n, 1);
        info->dirs = (uint64_t)n;
        return rc;
}

static int status_last_run(struct ferry_manifest *m,
                           struct ferry_status_info *info)
{
        sqlite3_stmt *s = STMT(S_LAST_RUN);
        if (!s)
                return mf_db_fail(m, "read");
        info->last_result = -1;
        if (sqlite3_step(s) == SQLITE_ROW) {
                info->last_start = sqlite3_column_int64(s, 0);
                info->last_end = sqlite3_column_int64(s, 1);
                info->last_result = sqlite3_column_int(s, 2);
        }
        sqlite3_reset(s);
        return 0;
}

/* Joins dir and name of the current row of s into *buf ("." for SRC). */
static int failure_path(sqlite3_stmt *s, char **buf, size_t *cap, size_t *len)
{
        size_t dl = (size_t)sqlite3_column_bytes(s, 0);
        size_t nl = (size_t)sqlite3_column_bytes(s, 1);
        if (dl + nl + 2 > *cap) {
                char *p = realloc(*buf, dl + nl + 2);
                if (!p)
                        return ENOMEM;
                *buf = p;
                *cap = dl + nl + 2;
        }
        size_t n = 0;
        if (dl) {
                memcpy(*buf, sqlite3_column_blob(s, 0), dl);
                (*buf)[dl] = nl ? '/' : '\0';
                n = nl ? dl + 1 : dl;
        }
        if (nl)
                memcpy(*buf + n, sqlite3_column_blob(s, 1), nl);
        n += nl;
        if (!n)
                (*buf)[n++] = '.'; /* SRC itself */
        (*buf)[n] = '\0';
        *len = n;
        return 0;
}

/* Rows whose metadata fell short (schema 6 on; none before). */
static int status_meta_count(struct ferry_manifest *m,
                             struct ferry_status_info *info)
{
        int64_t version = 0, n = 0;
        if (mf_schema_version(m, &version))
                return FERRY_EMANIFEST;
        int rc = version < 6 ? 0
                             : mf_select_ints(m, STMT(S_META_COUNT), 0, &n, 1);
        info->meta_failed = (uint64_t)n;
        info->partial = (struct ferry_state_count){0, 0};
        /* files copied in chunks, not done yet (schema 9 on) */
        if (!rc && version >= 9)
                rc = mf_chunk_status(m, &info->partial.files,
                                     &info->partial.bytes);
        return rc;
}

/* Each failed row (meta false), or each row whose metadata fell short
 * (meta true), to req->on_failure. */
static int status_failures(struct ferry_manifest *m,
                           const struct ferry_status_req *req, bool meta)
{
        int64_t version = 0;
        if (mf_schema_version(m, &version))
                return FERRY_EMANIFEST;
        sqlite3_stmt *s = STMT(meta          ? S_META_FAILURES
                               : version < 5 ? S_FAILURES_V4
                                             : S_FAILURES);
        if (!s)
                return mf_db_fail(m, "read");
        sqlite3_bind_int64(s, 1, (sqlite3_int64)req->per_cause);
        char *buf = NULL;
        size_t cap = 0;
        int rc;
        while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
                struct ferry_failure_row row;
                if (failure_path(s, &buf, &cap, &row.path_len))
                        break;
                row.path = buf;
                row.reason = (const char *)sqlite3_column_text(s, 2);
                row.fail.side = (enum ferry_side)sqlite3_column_int(s, 3);
                row.fail.step = (enum ferry_step)sqlite3_column_int(s, 4);
                row.fail.err = sqlite3_column_int(s, 5);
                row.cause_count = (uint64_t)sqlite3_column_int64(s, 6);
                row.cause_index = (uint64_t)sqlite3_column_int64(s, 7);
                row.meta = meta;
                char why[256];
                if (meta) /* "set owner: Operation not permitted" */
                        row.reason = ferry_failure_message(
                                &row.fail, !sqlite3_column_bytes(s, 1), why,
                                sizeof(why));
                req->on_failure(&row, req->arg);
        }
        free(buf);
        sqlite3_reset(s);
        return rc == SQLITE_DONE ? 0 : mf_db_fail(m, "read");
}

/* An immutable read found the manifest changed under it. */
static int moved(struct ferry_manifest *m)
{
        m->moved = true;
        return mf_fail(m,
                       "manifest '%s' changed while status read it without "
                       "write access: run it again",
                       m->path);
}

int ferry_manifest_status(struct ferry_manifest *m,
                          struct ferry_status_info *info,
                          const struct ferry_status_req *req)
{
        /* one read transaction: a consistent snapshot, kept short */
        int rc = mf_exec_sql(m, status_sql[S_BEGIN], "read");
        if (rc)
                return rc;
        rc = status_counts(m, info);
        if (!rc)
                rc = status_meta(m, info);
        if (!rc)
                rc = status_last_run(m, info);
        if (!rc)
                rc = status_meta_count(m, info);
        /* the counts go out before the failures, from the same read;
         * a read without write access that was torn already is not
         * handed on (the caller may read again) */
        bool early = req && req->on_info && m->immutable;
        if (!rc && early && !mf_still_alone(m))
                rc = moved(m);
        if (!rc && req && req->on_info)
                req->on_info(info, req->arg);
        /* failed counts exactly the rows status_failures lists */
        bool more = !rc && req && req->on_failure && info->failed.files;
        if (more)
                rc = status_failures(m, req, false);
        bool meta = !rc && req && req->on_failure && info->meta_failed;
        if (meta)
                rc = status_failures(m, req, true);
        more = more || meta;
        /* a run that starts or ends under a reader without write access
         * fails its queries as it fails the open (reader.c): not torn
         * rows, a read to make again; t35 E met it in 1 of 71 polls */
        if (rc && mf_shared_read_torn(m))
                m->moved = true;
        sqlite3_exec(m->db, status_sql[S_COMMIT], NULL, NULL, NULL);
        /* what was read after the early check may be torn, errors too */
        if (!m->moved && m->immutable && (!early || more) && !mf_still_alone(m))
                rc = moved(m);
        return rc;
}
