/*
 * manifest/meta.c - the meta table and the transactions: binding a
 * manifest to its job (SRC and DST) and pointing it at new ones, notes kept
 * under a key, the scan generation, DST's recorded identity; begin, commit and
 * rollback.
 */
#define _GNU_SOURCE
#include "manifest/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum meta_stmt {
        S_BEGIN,
        S_COMMIT,
        S_ROLLBACK,
        S_META_GET,
        S_META_SET,
        S_CURRENT_GEN,
        S_NSTMTS
};

static const char *const meta_sql[S_NSTMTS] = {
        [S_BEGIN] = "BEGIN IMMEDIATE",
        [S_COMMIT] = "COMMIT",
        [S_ROLLBACK] = "ROLLBACK",
        [S_META_GET] = "SELECT value FROM meta WHERE key = ?1",
        [S_META_SET] =
                "INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)",
        [S_CURRENT_GEN] =
                "SELECT coalesce(max(value), 0) FROM meta WHERE key = 'gen'",
};
_Static_assert(S_NSTMTS <= MF_TABLE_MAX, "meta.c: statement table too big");

#define STMT(id) mf_stmt(m, T_META, id, meta_sql[id])

static int meta_get(struct ferry_manifest *m, const char *key,
                    sqlite3_stmt **row)
{
        *row = NULL;
        sqlite3_stmt *s = STMT(S_META_GET);
        if (!s)
                return mf_db_fail(m, "read");
        sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
        int rc = sqlite3_step(s);
        if (rc == SQLITE_ROW) {
                *row = s;
                return 0;
        }
        sqlite3_reset(s);
        return rc == SQLITE_DONE ? 0 : mf_db_fail(m, "read");
}

static int meta_set_text(struct ferry_manifest *m, const char *key,
                         const char *value)
{
        sqlite3_stmt *s = STMT(S_META_SET);
        if (!s)
                return mf_db_fail(m, "write");
        sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
        sqlite3_bind_blob(s, 2, value, (int)strlen(value), SQLITE_STATIC);
        return mf_exec_stmt(m, s, "write");
}

static int meta_set_int(struct ferry_manifest *m, const char *key, int64_t v)
{
        sqlite3_stmt *s = STMT(S_META_SET);
        if (!s)
                return mf_db_fail(m, "write");
        sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 2, v);
        return mf_exec_stmt(m, s, "write");
}

/* Compares a stored path with the current one; 1 = same, 0 = other. */
static int check_path(struct ferry_manifest *m, const char *key,
                      const char *want, char *have, size_t have_size)
{
        sqlite3_stmt *row;
        int rc = meta_get(m, key, &row);
        if (rc)
                return rc;
        if (!row)
                return meta_set_text(m, key, want);
        const void *v = sqlite3_column_blob(row, 0);
        size_t n = (size_t)sqlite3_column_bytes(row, 0);
        snprintf(have, have_size, "%.*s", (int)n, v ? (const char *)v : "");
        bool same = n == strlen(want) && (!n || !memcmp(v, want, n));
        sqlite3_reset(row);
        return same ? 0 : -1;
}

int ferry_manifest_bind_job(struct ferry_manifest *m, const char *src,
                            const char *dst)
{
        char old_src[2048] = "", old_dst[2048] = "";
        int rc = ferry_manifest_begin(m);
        if (rc)
                return rc;
        int a = check_path(m, "src", src, old_src, sizeof(old_src));
        int b = a > 0 ? a : check_path(m, "dst", dst, old_dst, sizeof(old_dst));
        if (a > 0 || b > 0) {
                ferry_manifest_rollback(m);
                return a > 0 ? a : b;
        }
        if (a < 0 || b < 0) {
                ferry_manifest_rollback(m);
                if (!old_dst[0])
                        check_path(m, "dst", dst, old_dst, sizeof(old_dst));
                if (!old_src[0])
                        check_path(m, "src", src, old_src, sizeof(old_src));
                return mf_fail(m,
                               "manifest '%s' belongs to another job: '%s' -> "
                               "'%s' (if that job's source or destination "
                               "moved here, --adopt points it at the new "
                               "paths)",
                               m->path, old_src[0] ? old_src : src,
                               old_dst[0] ? old_dst : dst);
        }
        return ferry_manifest_commit(m);
}

/* The stored path of key, sized from its blob ("" when none): *out is
 * the caller's to free. */
static int stored_path(struct ferry_manifest *m, const char *key, char **out)
{
        sqlite3_stmt *row;
        *out = NULL;
        int rc = meta_get(m, key, &row);
        if (rc)
                return rc;
        const void *v = row ? sqlite3_column_blob(row, 0) : NULL;
        size_t n = row ? (size_t)sqlite3_column_bytes(row, 0) : 0;
        *out = malloc(n + 1);
        if (*out) {
                if (n)
                        memcpy(*out, v, n);
                (*out)[n] = '\0';
        }
        if (row)
                sqlite3_reset(row);
        return *out ? 0 : mf_fail(m, "out of memory");
}

int ferry_manifest_job_paths(struct ferry_manifest *m, char **src, char **dst)
{
        *dst = NULL;
        int rc = stored_path(m, "src", src);
        if (!rc)
                rc = stored_path(m, "dst", dst);
        if (rc) {
                free(*src);
                free(*dst);
                *src = *dst = NULL;
        }
        return rc;
}

int ferry_manifest_repoint_job(struct ferry_manifest *m, const char *src,
                               const char *dst, bool dst_moved,
                               bool move_pending)
{
        int rc = ferry_manifest_begin(m);
        if (!rc)
                rc = meta_set_text(m, "src", src);
        if (!rc)
                rc = meta_set_text(m, "dst", dst);
        if (!rc && dst_moved)
                rc = meta_set_text(m, MF_NOTE_DST_CHECK_ALL, "1");
        if (!rc)
                rc = meta_set_text(m, MF_NOTE_MOVE_PENDING,
                                   move_pending ? "1" : "");
        if (rc) {
                ferry_manifest_rollback(m);
                return rc;
        }
        return ferry_manifest_commit(m);
}

int ferry_manifest_begin(struct ferry_manifest *m)
{
        sqlite3_stmt *s = STMT(S_BEGIN);
        return s ? mf_exec_stmt(m, s, "begin") : mf_db_fail(m, "begin");
}

int ferry_manifest_commit(struct ferry_manifest *m)
{
        sqlite3_stmt *s = STMT(S_COMMIT);
        int rc = s ? mf_exec_stmt(m, s, "commit") : mf_db_fail(m, "commit");
        return rc ? rc : mf_sync_owed(m); /* results.c: done marks durable */
}

int ferry_manifest_rollback(struct ferry_manifest *m)
{
        mf_dcache_clear(m); /* its rows may be among those rolled back */
        if (sqlite3_get_autocommit(m->db))
                return 0;
        sqlite3_stmt *s = STMT(S_ROLLBACK);
        return s ? mf_exec_stmt(m, s, "rollback") : mf_db_fail(m, "rollback");
}

int ferry_manifest_note(struct ferry_manifest *m, const char *key, char *buf,
                        size_t size)
{
        sqlite3_stmt *row;
        buf[0] = '\0';
        int rc = meta_get(m, key, &row);
        if (rc || !row)
                return rc;
        const void *v = sqlite3_column_blob(row, 0);
        int n = sqlite3_column_bytes(row, 0);
        if (v && (size_t)n < size) {
                memcpy(buf, v, (size_t)n);
                buf[n] = '\0';
        }
        sqlite3_reset(row);
        return 0;
}

int ferry_manifest_set_note(struct ferry_manifest *m, const char *key,
                            const char *value)
{
        return meta_set_text(m, key, value);
}

int mf_next_gen(struct ferry_manifest *m, int64_t *gen)
{
        sqlite3_stmt *row;
        int rc = meta_get(m, "gen", &row);
        if (rc)
                return rc;
        int64_t g = row ? sqlite3_column_int64(row, 0) : 0;
        if (row)
                sqlite3_reset(row);
        *gen = g + 1;
        return meta_set_int(m, "gen", g + 1);
}
int ferry_manifest_check_dst(struct ferry_manifest *m, const char *identity,
                             bool *changed)
{
        sqlite3_stmt *row;
        *changed = false;
        int rc = meta_get(m, "dst_identity", &row);
        if (rc)
                return rc;
        if (row) {
                const void *v = sqlite3_column_blob(row, 0);
                size_t n = (size_t)sqlite3_column_bytes(row, 0);
                *changed = n != strlen(identity) ||
                           (n && memcmp(v, identity, n) != 0);
                sqlite3_reset(row);
                if (!*changed)
                        return 0;
        }
        return meta_set_text(m, "dst_identity", identity);
}

int ferry_manifest_current_gen(struct ferry_manifest *m, int64_t *gen)
{
        return mf_select_ints(m, STMT(S_CURRENT_GEN), 0, gen, 1);
}
