/*
 * manifest/status.c - what `ferry status` reads, in one read transaction:
 * files and bytes of each row state, the job's SRC and DST, directories
 * and rows gone from SRC, the last run, and each failed row or directory
 * with its reason.
 */
#define _GNU_SOURCE
#include "manifest/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* files and bytes in state st */
#define COUNT_STATE(st) "sum(state = " st "), sum(size * (state = " st "))"

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
                "SELECT path, '', error FROM dirs WHERE error IS NOT NULL"
                " UNION ALL"
                " SELECT d.path, f.name, coalesce(f.error, '')"
                " FROM files f JOIN dirs d ON d.id = f.dir"
                " WHERE f.state = " SQL_FAILED,
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

static int status_failures(struct ferry_manifest *m, ferry_failure_fn fn,
                           void *arg)
{
        sqlite3_stmt *s = STMT(S_FAILURES);
        if (!s)
                return mf_db_fail(m, "read");
        char *buf = NULL;
        size_t cap = 0;
        int rc;
        while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
                size_t dl = (size_t)sqlite3_column_bytes(s, 0);
                size_t nl = (size_t)sqlite3_column_bytes(s, 1);
                if (dl + nl + 2 > cap) {
                        cap = dl + nl + 2;
                        char *p = realloc(buf, cap);
                        if (!p)
                                break;
                        buf = p;
                }
                size_t n = 0;
                if (dl) {
                        memcpy(buf, sqlite3_column_blob(s, 0), dl);
                        buf[dl] = nl ? '/' : '\0';
                        n = nl ? dl + 1 : dl;
                }
                if (nl)
                        memcpy(buf + n, sqlite3_column_blob(s, 1), nl);
                n += nl;
                if (!n)
                        buf[n++] = '.'; /* SRC itself */
                buf[n] = '\0';
                fn(buf, n, (const char *)sqlite3_column_text(s, 2), arg);
        }
        free(buf);
        sqlite3_reset(s);
        return rc == SQLITE_DONE ? 0 : mf_db_fail(m, "read");
}

int ferry_manifest_status(struct ferry_manifest *m,
                          struct ferry_status_info *info,
                          ferry_failure_fn on_failure, void *arg)
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
        if (!rc && on_failure)
                rc = status_failures(m, on_failure, arg);
        sqlite3_exec(m->db, status_sql[S_COMMIT], NULL, NULL, NULL);
        if (m->immutable && !mf_still_alone(m)) {
                /* what was read may be torn, errors included */
                m->moved = true;
                rc = mf_fail(m,
                             "manifest '%s' changed while status read it "
                             "without write access: run it again",
                             m->path);
        }
        return rc;
}
