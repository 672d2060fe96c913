/*
 * manifest/core.c - what every verb of the manifest uses: error messages,
 * the statement cache (one lazily prepared statement per entry of each
 * file's table), and binding and reading columns: names as BLOBs, times
 * (sql/004_far_times.sql) and stats. Owns no SQL of its own.
 */
#define _GNU_SOURCE
#include "manifest/internal.h"

#include "buf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int mf_fail(struct ferry_manifest *m, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(m->errmsg, sizeof(m->errmsg), fmt, ap);
        va_end(ap);
        return FERRY_EMANIFEST;
}

bool mf_is_damage(int code)
{
        return (code & 0xff) == SQLITE_CORRUPT ||
               (code & 0xff) == SQLITE_NOTADB;
}

int mf_db_fail(struct ferry_manifest *m, const char *what)
{
        if (mf_check_refusal(m)) /* the COMMIT its gate refused, or after */
                return FERRY_EMANIFEST;
        if (mf_is_damage(sqlite3_errcode(m->db)))
                return mf_fail(m, "manifest '%s' is damaged: %s failed: %s",
                               m->path, what, sqlite3_errmsg(m->db));
        return mf_fail(m, "manifest %s failed: %s", what,
                       sqlite3_errmsg(m->db));
}

const char *ferry_manifest_errmsg(const struct ferry_manifest *m)
{
        return m->errmsg;
}

/* Prepares lazily: a read-only status never needs the write statements. */
sqlite3_stmt *mf_stmt(struct ferry_manifest *m, enum mf_table t, int id,
                      const char *sql)
{
        sqlite3_stmt **s = &m->stmt[t][id];
        if (!*s && sqlite3_prepare_v3(m->db, sql, -1, SQLITE_PREPARE_PERSISTENT,
                                      s, NULL) != SQLITE_OK)
                return NULL;
        sqlite3_reset(*s);
        sqlite3_clear_bindings(*s);
        return *s;
}

void mf_finalize_all(struct ferry_manifest *m)
{
        for (int t = 0; t < MF_NTABLES; t++)
                for (int i = 0; i < MF_TABLE_MAX; i++) {
                        sqlite3_finalize(m->stmt[t][i]);
                        m->stmt[t][i] = NULL;
                }
}

int mf_exec_stmt(struct ferry_manifest *m, sqlite3_stmt *s, const char *what)
{
        if (!s)
                return mf_db_fail(m, what);
        int rc = sqlite3_step(s);
        sqlite3_reset(s);
        if (rc != SQLITE_DONE)
                return mf_db_fail(m, what);
        return 0;
}

int mf_exec_id(struct ferry_manifest *m, sqlite3_stmt *s, int64_t row,
               const char *what)
{
        if (!s)
                return mf_db_fail(m, what);
        sqlite3_bind_int64(s, 1, row);
        return mf_exec_stmt(m, s, what);
}

int mf_exec_sql(struct ferry_manifest *m, const char *sql, const char *what)
{
        char *msg = NULL;
        int rc = sqlite3_exec(m->db, sql, NULL, NULL, &msg);
        if (rc != SQLITE_OK) {
                const char *why = msg ? msg : sqlite3_errmsg(m->db);
                if (mf_is_damage(rc))
                        mf_fail(m, "manifest '%s' is damaged: %s failed: %s",
                                m->path, what, why);
                else
                        mf_fail(m, "manifest %s failed: %s", what, why);
                sqlite3_free(msg);
                return FERRY_EMANIFEST;
        }
        return 0;
}

int mf_select_ints(struct ferry_manifest *m, sqlite3_stmt *s, int64_t arg,
                   int64_t *v, int n)
{
        if (!s)
                return mf_db_fail(m, "read");
        if (sqlite3_bind_parameter_count(s) >= 1)
                sqlite3_bind_int64(s, 1, arg);
        int rc = sqlite3_step(s);
        for (int i = 0; rc == SQLITE_ROW && i < n; i++)
                v[i] = sqlite3_column_int64(s, i);
        sqlite3_reset(s);
        return rc == SQLITE_ROW ? 0 : mf_db_fail(m, "read");
}

void mf_bind_bytes(sqlite3_stmt *s, int i, const char *p, size_t len)
{
        /* never NULL: '' must stay an empty blob, not NULL */
        sqlite3_bind_blob(s, i, len ? p : "", (int)len, SQLITE_STATIC);
}

const char *mf_column_str(sqlite3_stmt *s, int col)
{
        const char *p = (const char *)sqlite3_column_text(s, col);
        return p ? p : "";
}

/*
 * Times (sql/004_far_times.sql): nanoseconds in an INTEGER while they fit
 * (every time from 1677-09-22 to 2262-04-11), else a 12-byte BLOB of the
 * big-endian seconds and nanoseconds.
 */
#define TIME_BLOB  12
#define NS_SEC_MAX 9223372035LL /* |sec| * 1e9 + nsec fits in int64_t */

void mf_bind_time(sqlite3_stmt *s, int i, struct ferry_time t)
{
        if (t.sec >= -NS_SEC_MAX && t.sec <= NS_SEC_MAX) {
                sqlite3_bind_int64(s, i, t.sec * 1000000000 + t.nsec);
                return;
        }
        unsigned char b[TIME_BLOB];
        uint64_t sec = (uint64_t)t.sec;
        for (int k = 0; k < 8; k++)
                b[k] = (unsigned char)(sec >> (56 - 8 * k));
        for (int k = 0; k < 4; k++)
                b[8 + k] = (unsigned char)(t.nsec >> (24 - 8 * k));
        sqlite3_bind_blob(s, i, b, TIME_BLOB, SQLITE_TRANSIENT);
}

struct ferry_time mf_column_time(sqlite3_stmt *s, int col)
{
        if (sqlite3_column_type(s, col) == SQLITE_BLOB &&
            sqlite3_column_bytes(s, col) == TIME_BLOB) {
                const unsigned char *b = sqlite3_column_blob(s, col);
                uint64_t sec = 0;
                uint32_t nsec = 0;
                for (int k = 0; k < 8; k++)
                        sec = sec << 8 | b[k];
                for (int k = 0; k < 4; k++)
                        nsec = nsec << 8 | b[8 + k];
                if (nsec > 1000000000)
                        nsec = 1000000000; /* damaged: equals no real time */
                return (struct ferry_time){(int64_t)sec, nsec};
        }
        int64_t ns = sqlite3_column_int64(s, col);
        int64_t sec = ns / 1000000000, rem = ns % 1000000000;
        if (rem < 0) {
                rem += 1000000000;
                sec--;
        }
        return (struct ferry_time){sec, (uint32_t)rem};
}

void mf_bind_stat(sqlite3_stmt *s, int first, const struct ferry_stat *st)
{
        sqlite3_bind_int64(s, first, (int64_t)st->size);
        mf_bind_time(s, first + 1, st->mtime);
        mf_bind_time(s, first + 2, st->ctime);
        sqlite3_bind_int64(s, first + 3, st->mode);
        sqlite3_bind_int64(s, first + 4, st->uid);
        sqlite3_bind_int64(s, first + 5, st->gid);
        sqlite3_bind_int64(s, first + 6, (int64_t)st->dev);
        sqlite3_bind_int64(s, first + 7, (int64_t)st->ino);
}

void mf_bind_failure(sqlite3_stmt *s, int first, const struct ferry_failure *f)
{
        if (!f)
                return;
        sqlite3_bind_int(s, first, (int)f->side);
        sqlite3_bind_int(s, first + 1, (int)f->step);
        sqlite3_bind_int(s, first + 2, f->err);
}

int mf_bind_subtree(sqlite3_stmt *s, int i, const char *path, size_t len)
{
        struct ferry_buf r = FERRY_BUF_INIT;
        ferry_buf_add(&r, path, len);
        ferry_buf_add(&r, "/", 1);
        if (r.oom)
                return ENOMEM;
        mf_bind_bytes(s, i, path, len);
        sqlite3_bind_blob(s, i + 1, r.buf, (int)r.len, SQLITE_TRANSIENT);
        r.buf[len] = '0'; /* '0' follows '/' */
        sqlite3_bind_blob(s, i + 2, r.buf, (int)r.len, SQLITE_TRANSIENT);
        ferry_buf_release(&r);
        return 0;
}

enum ferry_ftype mf_ftype_of(uint32_t mode)
{
        if (S_ISREG(mode))
                return FT_REG;
        if (S_ISLNK(mode))
                return FT_LINK;
        return FT_SPECIAL;
}

size_t mf_parent_len(const char *path, size_t len)
{
        while (len && path[len - 1] != '/')
                len--;
        return len ? len - 1 : 0;
}
