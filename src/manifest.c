/*
 * manifest.c - the SQLite manifest (include/ferry/manifest.h).
 *
 * Owns the database connection, the schema and its forward-only migrations
 * (sql/NNN_*.sql, embedded at build time), and one prepared statement per
 * kind of access. Nothing else in ferry speaks SQL.
 *
 * Safety checks on open, before anything is written: the file must carry
 * SQLite's header, ferry's application_id and a schema version this build
 * knows; otherwise the user's file is left untouched and the run stops.
 */
#define _GNU_SOURCE
#include "ferry/manifest.h"

#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum stmt_id {
        S_BEGIN,
        S_COMMIT,
        S_ROLLBACK,
        S_META_GET,
        S_META_SET,
        S_DIR_FIND,
        S_DIR_INSERT,
        S_DIR_UPDATE,
        S_DIR_TOUCH,
        S_DIR_APPLIED,
        S_DIR_DELETE,
        S_DIR_ERROR,
        S_FILE_FIND,
        S_FILE_INSERT,
        S_FILE_SEEN,
        S_FILE_UPDATE,
        S_FILE_LEADER,
        S_FILE_DONE,
        S_FILE_STATE,
        S_FILE_DELETE,
        S_NSTMTS
};

static const char *const stmt_sql[S_NSTMTS] = {
        [S_BEGIN] = "BEGIN IMMEDIATE",
        [S_COMMIT] = "COMMIT",
        [S_ROLLBACK] = "ROLLBACK",
        [S_META_GET] = "SELECT value FROM meta WHERE key = ?1",
        [S_META_SET] =
                "INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)",
        [S_DIR_FIND] =
                "SELECT id, mode, uid, gid, mtime_ns FROM dirs WHERE path = ?1",
        [S_DIR_INSERT] =
                "INSERT INTO dirs (parent, path, mode, uid, gid, mtime_ns,"
                " state, gen) VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0, ?7)",
        [S_DIR_UPDATE] =
                "UPDATE dirs SET mode = ?2, uid = ?3, gid = ?4,"
                " mtime_ns = ?5, gen = ?6,"
                " state = CASE WHEN ?7 THEN 0 ELSE state END WHERE id = ?1",
        [S_DIR_TOUCH] =
                "UPDATE dirs SET state = 0 WHERE id = ?1 AND state != 0",
        [S_DIR_APPLIED] = "UPDATE dirs SET state = 1 WHERE id = ?1",
        [S_DIR_DELETE] = "DELETE FROM dirs WHERE id = ?1",
        [S_DIR_ERROR] = "UPDATE dirs SET error = ?2 WHERE id = ?1"
                        " AND error IS NOT ?2",
        [S_FILE_FIND] = "SELECT id, type, size, mtime_ns, ctime_ns, mode, ino,"
                        " state FROM files WHERE dir = ?1 AND name = ?2",
        [S_FILE_INSERT] = "INSERT INTO files (dir, name, type, size, mtime_ns,"
                          " ctime_ns, mode, uid, gid, dev, ino, hl, state, gen)"
                          " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10,"
                          " ?11, ?12, ?13, ?14)",
        [S_FILE_SEEN] = "UPDATE files SET gen = ?2, state = CASE WHEN state = 4"
                        " THEN 0 ELSE state END WHERE id = ?1",
        [S_FILE_UPDATE] =
                "UPDATE files SET type = ?2, size = ?3, mtime_ns = ?4,"
                " ctime_ns = ?5, mode = ?6, uid = ?7, gid = ?8,"
                " dev = ?9, ino = ?10, hl = ?11, state = ?12,"
                " gen = ?13, hash = NULL WHERE id = ?1",
        [S_FILE_LEADER] = "SELECT id FROM files WHERE ino = ?1 AND dev = ?2"
                          " AND hl = -1 LIMIT 1",
        [S_FILE_DONE] = "UPDATE files SET state = 1, hash = ?2, size = ?3,"
                        " mtime_ns = ?4, ctime_ns = ?5, mode = ?6, uid = ?7,"
                        " gid = ?8, dev = ?9, ino = ?10, error = NULL,"
                        " attempts = attempts + 1 WHERE id = ?1",
        [S_FILE_STATE] =
                "UPDATE files SET state = ?2, error = ?3,"
                " attempts = attempts + (?3 IS NOT NULL) WHERE id = ?1",
        [S_FILE_DELETE] = "DELETE FROM files WHERE id = ?1",
};

#define FILE_COLS                                                              \
        "f.id, f.dir, d.path, f.name, f.type, f.size, f.mtime_ns,"             \
        " f.ctime_ns, f.mode, f.uid, f.gid, f.dev, f.ino, f.hash"

/* ?1 cursor, ?2 limit, ?3 generation */
// clang-format off
static const char *const query_sql[Q_NQUERIES] = {
        [Q_FIRST_PASS] =
                "SELECT " FILE_COLS " FROM files f JOIN dirs d ON d.id = f.dir"
                " WHERE f.state = 0 AND f.id > ?1"
                " AND f.gen = ?3 AND (f.hl IS NULL OR f.hl = -1)"
                " ORDER BY f.id LIMIT ?2",
        [Q_NEXT_PASS] =
                "SELECT " FILE_COLS ", l.state, l.gen, ld.path, l.name, l.hash"
                " FROM files f JOIN dirs d ON d.id = f.dir"
                " LEFT JOIN files l ON f.hl > 0 AND l.id = f.hl"
                " LEFT JOIN dirs ld ON ld.id = l.dir"
                " WHERE f.state = 0 AND f.id > ?1"
                " AND f.gen = ?3 AND (l.state IS NULL OR l.state != 0)"
                " ORDER BY f.id LIMIT ?2",
        [Q_VERIFY] =
                "SELECT " FILE_COLS " FROM files f JOIN dirs d ON d.id = f.dir"
                " WHERE f.state = 1 AND f.type IN (1, 2) AND f.gen = ?3"
                " AND f.id > ?1"
                " ORDER BY f.id LIMIT ?2",
        [Q_PENDING] =
                "SELECT " FILE_COLS " FROM files f JOIN dirs d ON d.id = f.dir"
                " WHERE f.state = 0 AND f.gen = ?3 AND f.id > ?1"
                " ORDER BY f.id LIMIT ?2",
        [Q_REMOVED_FILES] =
                "SELECT " FILE_COLS " FROM files f JOIN dirs d ON d.id = f.dir"
                " WHERE (f.gen < ?3 OR f.state = 4) AND f.id > ?1"
                " ORDER BY f.id LIMIT ?2",
        [Q_STALE_TEMPS] =
                "SELECT " FILE_COLS " FROM files f JOIN dirs d ON d.id = f.dir"
                " WHERE f.state = 0 AND f.gen < ?3 AND f.id > ?1"
                " ORDER BY f.id LIMIT ?2",
        [Q_REMOVED_DIRS] =
                "SELECT id, coalesce(parent, 0), path, '', 0, 0, mtime_ns, 0,"
                " mode, uid, gid, 0, 0, NULL FROM dirs"
                " WHERE gen < ?3 AND id < ?1 ORDER BY id DESC LIMIT ?2",
        [Q_PENDING_DIRS] =
                "SELECT id, id, path, '', 0, 0, mtime_ns, 0, mode, uid, gid,"
                " 0, 0, NULL FROM dirs"
                " WHERE state = 0 AND gen = ?3 AND id < ?1"
                " ORDER BY id DESC LIMIT ?2",
};
// clang-format on

struct ferry_manifest {
        sqlite3 *db;
        sqlite3_stmt *stmt[S_NSTMTS];
        sqlite3_stmt *query[Q_NQUERIES];
        char errmsg[1024];
};

static int fail(struct ferry_manifest *m, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));

static int fail(struct ferry_manifest *m, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(m->errmsg, sizeof(m->errmsg), fmt, ap);
        va_end(ap);
        return FERRY_EMANIFEST;
}

static int db_fail(struct ferry_manifest *m, const char *what)
{
        return fail(m, "manifest %s failed: %s", what, sqlite3_errmsg(m->db));
}

const char *ferry_manifest_errmsg(const struct ferry_manifest *m)
{
        return m->errmsg;
}

/* Prepares lazily: a read-only status never needs the write statements. */
static sqlite3_stmt *stmt(struct ferry_manifest *m, enum stmt_id id)
{
        if (!m->stmt[id] && sqlite3_prepare_v3(m->db, stmt_sql[id], -1,
                                               SQLITE_PREPARE_PERSISTENT,
                                               &m->stmt[id], NULL) != SQLITE_OK)
                return NULL;
        sqlite3_reset(m->stmt[id]);
        sqlite3_clear_bindings(m->stmt[id]);
        return m->stmt[id];
}

/* Steps a statement that returns no rows. */
static int exec_stmt(struct ferry_manifest *m, sqlite3_stmt *s,
                     const char *what)
{
        int rc = sqlite3_step(s);
        sqlite3_reset(s);
        if (rc != SQLITE_DONE)
                return db_fail(m, what);
        return 0;
}

static int exec_sql(struct ferry_manifest *m, const char *sql, const char *what)
{
        char *msg = NULL;
        if (sqlite3_exec(m->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
                fail(m, "manifest %s failed: %s", what,
                     msg ? msg : sqlite3_errmsg(m->db));
                sqlite3_free(msg);
                return FERRY_EMANIFEST;
        }
        return 0;
}

static int pragma_int(struct ferry_manifest *m, const char *sql, int64_t *v)
{
        sqlite3_stmt *s;
        if (sqlite3_prepare_v2(m->db, sql, -1, &s, NULL) != SQLITE_OK)
                return db_fail(m, "read");
        int rc = sqlite3_step(s);
        if (rc == SQLITE_ROW)
                *v = sqlite3_column_int64(s, 0);
        sqlite3_finalize(s);
        return rc == SQLITE_ROW ? 0 : db_fail(m, "read");
}

/* Reads the first 16 bytes: an SQLite database or nothing at all. */
static int check_header(const char *path, struct ferry_error *err, bool *exists)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
                if (errno == ENOENT) {
                        *exists = false;
                        return 0;
                }
                snprintf(err->msg, sizeof(err->msg),
                         "cannot open manifest '%s': %s", path,
                         strerror(errno));
                return FERRY_EMANIFEST;
        }
        *exists = true;
        char head[16];
        ssize_t n = read(fd, head, sizeof(head));
        close(fd);
        if (n != (ssize_t)sizeof(head) ||
            memcmp(head, "SQLite format 3", 16) != 0) {
                snprintf(err->msg, sizeof(err->msg),
                         "manifest '%s' is not an SQLite database (left "
                         "untouched)",
                         path);
                return FERRY_EMANIFEST;
        }
        return 0;
}

static int max_version(void)
{
        return ferry_n_migrations
                       ? ferry_migrations[ferry_n_migrations - 1].version
                       : 0;
}

static int migrate(struct ferry_manifest *m, int64_t from)
{
        for (int i = 0; i < ferry_n_migrations; i++) {
                const struct ferry_migration *mg = &ferry_migrations[i];
                if (mg->version <= from)
                        continue;
                char sql[128];
                snprintf(sql, sizeof(sql), "PRAGMA user_version = %d;",
                         mg->version);
                int rc = exec_sql(m, "BEGIN IMMEDIATE", "migration");
                if (!rc)
                        rc = exec_sql(m, mg->sql, mg->name);
                if (!rc)
                        rc = exec_sql(m, sql, "migration");
                if (!rc)
                        rc = exec_sql(m, "COMMIT", "migration");
                if (rc) {
                        sqlite3_exec(m->db, "ROLLBACK", NULL, NULL, NULL);
                        return rc;
                }
        }
        return 0;
}

/* Identity and version checks of an existing manifest; reads only. */
static int check_identity(struct ferry_manifest *m, const char *path)
{
        int64_t app = 0, version = 0;
        if (pragma_int(m, "PRAGMA application_id", &app))
                return fail(m, "manifest '%s' is unreadable or corrupt: %s",
                            path, sqlite3_errmsg(m->db));
        if (pragma_int(m, "PRAGMA user_version", &version))
                return fail(m, "manifest '%s' is unreadable or corrupt", path);
        if (app != FERRY_APPLICATION_ID)
                return fail(m,
                            "'%s' is an SQLite database but not a ferry "
                            "manifest (left untouched)",
                            path);
        if (version > max_version())
                return fail(m,
                            "manifest '%s' has schema version %lld, newer "
                            "than this ferry knows (%d): upgrade ferry",
                            path, (long long)version, max_version());
        int64_t n = 0;
        if (pragma_int(m, "SELECT count(*) FROM sqlite_schema", &n))
                return fail(m, "manifest '%s' is corrupt: %s", path,
                            sqlite3_errmsg(m->db));
        return 0;
}

static int setup_new(struct ferry_manifest *m)
{
        char sql[96];
        snprintf(sql, sizeof(sql), "PRAGMA application_id = %d;",
                 FERRY_APPLICATION_ID);
        int rc = exec_sql(m, sql, "creation");
        return rc ? rc : migrate(m, 0);
}

static int configure(struct ferry_manifest *m, bool readonly, bool memory)
{
        if (readonly)
                return 0;
        if (!memory &&
            exec_sql(m, "PRAGMA journal_mode = WAL", "setting WAL mode"))
                return FERRY_EMANIFEST;
        return exec_sql(m,
                        "PRAGMA synchronous = FULL;"
                        "PRAGMA cache_size = -2048;"
                        "PRAGMA temp_store = MEMORY;"
                        "PRAGMA wal_autocheckpoint = 4000;",
                        "configuration");
}

int ferry_manifest_open(const char *path, int flags,
                        struct ferry_manifest **out, struct ferry_error *err)
{
        *out = NULL;
        bool memory = flags & MF_MEMORY, readonly = flags & MF_READONLY;
        bool exists = false;
        if (!memory) {
                int rc = check_header(path, err, &exists);
                if (rc)
                        return rc;
                if (!exists && !(flags & MF_CREATE)) {
                        snprintf(err->msg, sizeof(err->msg),
                                 "no manifest at '%s'", path);
                        return FERRY_EMANIFEST;
                }
        }
        struct ferry_manifest *m = calloc(1, sizeof(*m));
        if (!m) {
                snprintf(err->msg, sizeof(err->msg), "out of memory");
                return FERRY_EINTERNAL;
        }
        int oflags = readonly ? SQLITE_OPEN_READONLY
                              : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
        int rc = FERRY_OK;
        if (sqlite3_open_v2(memory ? ":memory:" : path, &m->db,
                            oflags | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
                rc = fail(m, "cannot open manifest '%s': %s", path,
                          m->db ? sqlite3_errmsg(m->db) : "out of memory");
                goto out;
        }
        /* a run and `ferry status` meet here: wait for each other's locks
         * instead of reporting a busy manifest as unreadable */
        sqlite3_busy_timeout(m->db, 10000);
        sqlite3_extended_result_codes(m->db, 1);
        if (exists) {
                rc = check_identity(m, path);
                if (rc)
                        goto out;
        }
        rc = configure(m, readonly, memory);
        if (rc)
                goto out;
        if (!readonly) {
                int64_t version = 0;
                rc = exists ? pragma_int(m, "PRAGMA user_version", &version)
                            : setup_new(m);
                if (!rc && exists)
                        rc = migrate(m, version);
        }
out:
        if (rc) {
                snprintf(err->msg, sizeof(err->msg), "%s", m->errmsg);
                ferry_manifest_close(m);
                return rc;
        }
        *out = m;
        return 0;
}

void ferry_manifest_close(struct ferry_manifest *m)
{
        if (!m)
                return;
        for (int i = 0; i < S_NSTMTS; i++)
                sqlite3_finalize(m->stmt[i]);
        for (int i = 0; i < Q_NQUERIES; i++)
                sqlite3_finalize(m->query[i]);
        sqlite3_close(m->db);
        free(m);
}

static int meta_get(struct ferry_manifest *m, const char *key,
                    sqlite3_stmt **row)
{
        *row = NULL;
        sqlite3_stmt *s = stmt(m, S_META_GET);
        if (!s)
                return db_fail(m, "read");
        sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
        int rc = sqlite3_step(s);
        if (rc == SQLITE_ROW) {
                *row = s;
                return 0;
        }
        sqlite3_reset(s);
        *row = NULL;
        return rc == SQLITE_DONE ? 0 : db_fail(m, "read");
}

static int meta_set_text(struct ferry_manifest *m, const char *key,
                         const char *value)
{
        sqlite3_stmt *s = stmt(m, S_META_SET);
        if (!s)
                return db_fail(m, "write");
        sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
        sqlite3_bind_blob(s, 2, value, (int)strlen(value), SQLITE_STATIC);
        return exec_stmt(m, s, "write");
}

static int meta_set_int(struct ferry_manifest *m, const char *key, int64_t v)
{
        sqlite3_stmt *s = stmt(m, S_META_SET);
        if (!s)
                return db_fail(m, "write");
        sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 2, v);
        return exec_stmt(m, s, "write");
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
                return fail(m, "manifest belongs to another job: '%s' -> '%s'",
                            old_src[0] ? old_src : src,
                            old_dst[0] ? old_dst : dst);
        }
        return ferry_manifest_commit(m);
}

int ferry_manifest_begin(struct ferry_manifest *m)
{
        sqlite3_stmt *s = stmt(m, S_BEGIN);
        return s ? exec_stmt(m, s, "begin") : db_fail(m, "begin");
}

int ferry_manifest_commit(struct ferry_manifest *m)
{
        sqlite3_stmt *s = stmt(m, S_COMMIT);
        return s ? exec_stmt(m, s, "commit") : db_fail(m, "commit");
}

int ferry_manifest_rollback(struct ferry_manifest *m)
{
        if (sqlite3_get_autocommit(m->db))
                return 0;
        sqlite3_stmt *s = stmt(m, S_ROLLBACK);
        return s ? exec_stmt(m, s, "rollback") : db_fail(m, "rollback");
}

int ferry_manifest_next_gen(struct ferry_manifest *m, int64_t *gen)
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

int ferry_manifest_run_start(struct ferry_manifest *m, const char *command,
                             int64_t *run_id)
{
        sqlite3_stmt *s;
        if (sqlite3_prepare_v2(m->db,
                               "INSERT INTO runs (started, pid, command)"
                               " VALUES (?1, ?2, ?3)",
                               -1, &s, NULL) != SQLITE_OK)
                return db_fail(m, "write");
        sqlite3_bind_int64(s, 1, (int64_t)time(NULL));
        sqlite3_bind_int64(s, 2, (int64_t)getpid());
        sqlite3_bind_text(s, 3, command, -1, SQLITE_STATIC);
        int rc = sqlite3_step(s);
        sqlite3_finalize(s);
        if (rc != SQLITE_DONE)
                return db_fail(m, "write");
        *run_id = sqlite3_last_insert_rowid(m->db);
        return 0;
}

int ferry_manifest_run_finish(struct ferry_manifest *m, int64_t run_id,
                              int result)
{
        sqlite3_stmt *s;
        if (sqlite3_prepare_v2(m->db,
                               "UPDATE runs SET finished = ?2, result = ?3"
                               " WHERE id = ?1",
                               -1, &s, NULL) != SQLITE_OK)
                return db_fail(m, "write");
        sqlite3_bind_int64(s, 1, run_id);
        sqlite3_bind_int64(s, 2, (int64_t)time(NULL));
        sqlite3_bind_int(s, 3, result);
        int rc = sqlite3_step(s);
        sqlite3_finalize(s);
        return rc == SQLITE_DONE ? 0 : db_fail(m, "write");
}

int ferry_manifest_check_dst(struct ferry_manifest *m, const char *identity,
                             bool *replaced)
{
        sqlite3_stmt *row;
        *replaced = false;
        int rc = meta_get(m, "dst_identity", &row);
        if (rc)
                return rc;
        if (row) {
                const void *v = sqlite3_column_blob(row, 0);
                size_t n = (size_t)sqlite3_column_bytes(row, 0);
                *replaced = n != strlen(identity) ||
                            (n && memcmp(v, identity, n) != 0);
                sqlite3_reset(row);
                if (!*replaced)
                        return 0;
                rc = exec_sql(m,
                              "UPDATE files SET state = 0 WHERE state = 1;"
                              "UPDATE dirs SET state = 0;",
                              "reset after a replaced destination");
                if (rc)
                        return rc;
        }
        return meta_set_text(m, "dst_identity", identity);
}

int ferry_manifest_retry_failed(struct ferry_manifest *m)
{
        return exec_sql(m, "UPDATE files SET state = 0 WHERE state = 2",
                        "reset of failed rows");
}

static void bind_bytes(sqlite3_stmt *s, int i, const char *p, size_t len)
{
        /* never NULL: '' must stay an empty blob, not NULL */
        sqlite3_bind_blob(s, i, len ? p : "", (int)len, SQLITE_STATIC);
}

int ferry_manifest_dir_find(struct ferry_manifest *m, const char *path,
                            size_t len, int64_t *id)
{
        sqlite3_stmt *s = stmt(m, S_DIR_FIND);
        if (!s)
                return db_fail(m, "read");
        bind_bytes(s, 1, path, len);
        int rc = sqlite3_step(s);
        *id = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : 0;
        sqlite3_reset(s);
        return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : db_fail(m, "read");
}

static size_t parent_len(const char *path, size_t len)
{
        while (len && path[len - 1] != '/')
                len--;
        return len ? len - 1 : 0;
}

int ferry_manifest_dir_upsert(struct ferry_manifest *m, const char *path,
                              size_t len, const struct ferry_stat *st,
                              int64_t gen, int64_t *id, bool *is_new)
{
        sqlite3_stmt *s = stmt(m, S_DIR_FIND);
        if (!s)
                return db_fail(m, "read");
        bind_bytes(s, 1, path, len);
        int rc = sqlite3_step(s);
        if (rc == SQLITE_ROW) {
                *id = sqlite3_column_int64(s, 0);
                bool changed =
                        (uint32_t)sqlite3_column_int64(s, 1) != st->mode ||
                        (uint32_t)sqlite3_column_int64(s, 2) != st->uid ||
                        (uint32_t)sqlite3_column_int64(s, 3) != st->gid ||
                        sqlite3_column_int64(s, 4) != st->mtime_ns;
                sqlite3_reset(s);
                *is_new = false;
                s = stmt(m, S_DIR_UPDATE);
                if (!s)
                        return db_fail(m, "write");
                sqlite3_bind_int64(s, 1, *id);
                sqlite3_bind_int64(s, 2, st->mode);
                sqlite3_bind_int64(s, 3, st->uid);
                sqlite3_bind_int64(s, 4, st->gid);
                sqlite3_bind_int64(s, 5, st->mtime_ns);
                sqlite3_bind_int64(s, 6, gen);
                sqlite3_bind_int(s, 7, changed);
                return exec_stmt(m, s, "directory update");
        }
        sqlite3_reset(s);
        if (rc != SQLITE_DONE)
                return db_fail(m, "read");
        int64_t parent = 0;
        if (len) {
                rc = ferry_manifest_dir_find(m, path, parent_len(path, len),
                                             &parent);
                if (rc)
                        return rc;
        }
        s = stmt(m, S_DIR_INSERT);
        if (!s)
                return db_fail(m, "write");
        if (len)
                sqlite3_bind_int64(s, 1, parent);
        bind_bytes(s, 2, path, len);
        sqlite3_bind_int64(s, 3, st->mode);
        sqlite3_bind_int64(s, 4, st->uid);
        sqlite3_bind_int64(s, 5, st->gid);
        sqlite3_bind_int64(s, 6, st->mtime_ns);
        sqlite3_bind_int64(s, 7, gen);
        rc = exec_stmt(m, s, "directory insert");
        if (rc)
                return rc;
        *id = sqlite3_last_insert_rowid(m->db);
        *is_new = true;
        return 0;
}

static int by_id(struct ferry_manifest *m, enum stmt_id id, int64_t row,
                 const char *what)
{
        sqlite3_stmt *s = stmt(m, id);
        if (!s)
                return db_fail(m, what);
        sqlite3_bind_int64(s, 1, row);
        return exec_stmt(m, s, what);
}

int ferry_manifest_dir_touch(struct ferry_manifest *m, int64_t id)
{
        return by_id(m, S_DIR_TOUCH, id, "directory update");
}

int ferry_manifest_dir_applied(struct ferry_manifest *m, int64_t id)
{
        return by_id(m, S_DIR_APPLIED, id, "directory update");
}

int ferry_manifest_dir_delete(struct ferry_manifest *m, int64_t id)
{
        return by_id(m, S_DIR_DELETE, id, "directory delete");
}

int ferry_manifest_dir_set_error(struct ferry_manifest *m, int64_t id,
                                 const char *error)
{
        sqlite3_stmt *s = stmt(m, S_DIR_ERROR);
        if (!s)
                return db_fail(m, "write");
        sqlite3_bind_int64(s, 1, id);
        if (error)
                sqlite3_bind_text(s, 2, error, -1, SQLITE_TRANSIENT);
        return exec_stmt(m, s, "directory update");
}

int ferry_manifest_keep_subtree(struct ferry_manifest *m, const char *path,
                                size_t len, int64_t gen)
{
        /* the subtree of "p" is every path in ["p/", "p0"): '0' follows '/' */
        char *lo = malloc(len + 2), *hi = malloc(len + 2);
        sqlite3_stmt *d = NULL, *f = NULL;
        int rc = FERRY_EINTERNAL;
        if (!lo || !hi)
                goto out;
        memcpy(lo, path, len);
        memcpy(hi, path, len);
        lo[len] = '/';
        hi[len] = '0';
        size_t n = len ? len + 1 : 0; /* the root: every row */
        const char *sql_d = len ? "UPDATE dirs SET gen = ?1 WHERE path >= ?2"
                                  " AND path < ?3"
                                : "UPDATE dirs SET gen = ?1";
        const char *sql_f = len ? "UPDATE files SET gen = ?1 WHERE dir IN"
                                  " (SELECT id FROM dirs WHERE path = ?4 OR"
                                  " (path >= ?2 AND path < ?3))"
                                : "UPDATE files SET gen = ?1";
        if (sqlite3_prepare_v2(m->db, sql_d, -1, &d, NULL) != SQLITE_OK ||
            sqlite3_prepare_v2(m->db, sql_f, -1, &f, NULL) != SQLITE_OK) {
                rc = db_fail(m, "write");
                goto out;
        }
        sqlite3_stmt *both[2] = {d, f};
        for (int i = 0; i < 2; i++) {
                sqlite3_bind_int64(both[i], 1, gen);
                if (len) {
                        bind_bytes(both[i], 2, lo, n);
                        bind_bytes(both[i], 3, hi, n);
                }
        }
        if (len)
                bind_bytes(f, 4, path, len);
        rc = exec_stmt(m, d, "directory update");
        if (!rc)
                rc = exec_stmt(m, f, "file update");
out:
        sqlite3_finalize(d);
        sqlite3_finalize(f);
        free(lo);
        free(hi);
        return rc;
}

int ferry_manifest_file_delete(struct ferry_manifest *m, int64_t id)
{
        return by_id(m, S_FILE_DELETE, id, "file delete");
}

static enum ferry_ftype ftype_of(uint32_t mode)
{
        if (S_ISREG(mode))
                return FT_REG;
        if (S_ISLNK(mode))
                return FT_LINK;
        return FT_SPECIAL;
}

/* The hl column for a new or changed row: NULL (0 here), -1 or a leader. */
static int hardlink_of(struct ferry_manifest *m, const struct ferry_stat *st,
                       bool hard_links, int64_t self, int64_t *hl)
{
        *hl = 0;
        if (!hard_links || !S_ISREG(st->mode) || st->nlink < 2)
                return 0;
        sqlite3_stmt *s = stmt(m, S_FILE_LEADER);
        if (!s)
                return db_fail(m, "read");
        sqlite3_bind_int64(s, 1, (int64_t)st->ino);
        sqlite3_bind_int64(s, 2, (int64_t)st->dev);
        int rc = sqlite3_step(s);
        int64_t leader = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : 0;
        sqlite3_reset(s);
        if (rc != SQLITE_ROW && rc != SQLITE_DONE)
                return db_fail(m, "read");
        *hl = leader && leader != self ? leader : -1;
        return 0;
}

static void bind_stat(sqlite3_stmt *s, int first, const struct ferry_stat *st)
{
        /* size, mtime, ctime, mode, uid, gid, dev, ino in this order */
        sqlite3_bind_int64(s, first, (int64_t)st->size);
        sqlite3_bind_int64(s, first + 1, st->mtime_ns);
        sqlite3_bind_int64(s, first + 2, st->ctime_ns);
        sqlite3_bind_int64(s, first + 3, st->mode);
        sqlite3_bind_int64(s, first + 4, st->uid);
        sqlite3_bind_int64(s, first + 5, st->gid);
        sqlite3_bind_int64(s, first + 6, (int64_t)st->dev);
        sqlite3_bind_int64(s, first + 7, (int64_t)st->ino);
}

static void bind_hl(sqlite3_stmt *s, int i, int64_t hl)
{
        if (hl)
                sqlite3_bind_int64(s, i, hl);
        else
                sqlite3_bind_null(s, i);
}

static int file_insert(struct ferry_manifest *m, int64_t dir, const char *name,
                       size_t len, const struct ferry_stat *st, int64_t gen,
                       bool hard_links)
{
        int64_t hl;
        int rc = hardlink_of(m, st, hard_links, 0, &hl);
        if (rc)
                return rc;
        sqlite3_stmt *s = stmt(m, S_FILE_INSERT);
        if (!s)
                return db_fail(m, "write");
        enum ferry_ftype t = ftype_of(st->mode);
        sqlite3_bind_int64(s, 1, dir);
        bind_bytes(s, 2, name, len);
        sqlite3_bind_int(s, 3, t);
        bind_stat(s, 4, st);
        bind_hl(s, 12, hl);
        sqlite3_bind_int(s, 13, t == FT_SPECIAL ? ST_SKIPPED : ST_PENDING);
        sqlite3_bind_int64(s, 14, gen);
        return exec_stmt(m, s, "file insert");
}

static int file_update(struct ferry_manifest *m, int64_t id,
                       const struct ferry_stat *st, int64_t gen,
                       bool hard_links)
{
        int64_t hl;
        int rc = hardlink_of(m, st, hard_links, id, &hl);
        if (rc)
                return rc;
        sqlite3_stmt *s = stmt(m, S_FILE_UPDATE);
        if (!s)
                return db_fail(m, "write");
        enum ferry_ftype t = ftype_of(st->mode);
        sqlite3_bind_int64(s, 1, id);
        sqlite3_bind_int(s, 2, t);
        bind_stat(s, 3, st);
        bind_hl(s, 11, hl);
        sqlite3_bind_int(s, 12, t == FT_SPECIAL ? ST_SKIPPED : ST_PENDING);
        sqlite3_bind_int64(s, 13, gen);
        return exec_stmt(m, s, "file update");
}

int ferry_manifest_file_upsert(struct ferry_manifest *m, int64_t dir,
                               bool dir_is_new, const char *name, size_t len,
                               const struct ferry_stat *st, int64_t gen,
                               bool hard_links, enum ferry_upsert *res)
{
        if (dir_is_new) {
                *res = UP_NEW;
                return file_insert(m, dir, name, len, st, gen, hard_links);
        }
        sqlite3_stmt *s = stmt(m, S_FILE_FIND);
        if (!s)
                return db_fail(m, "read");
        sqlite3_bind_int64(s, 1, dir);
        bind_bytes(s, 2, name, len);
        int rc = sqlite3_step(s);
        if (rc == SQLITE_DONE) {
                sqlite3_reset(s);
                *res = UP_NEW;
                return file_insert(m, dir, name, len, st, gen, hard_links);
        }
        if (rc != SQLITE_ROW) {
                sqlite3_reset(s);
                return db_fail(m, "read");
        }
        int64_t id = sqlite3_column_int64(s, 0);
        bool same = sqlite3_column_int(s, 1) == (int)ftype_of(st->mode) &&
                    (uint64_t)sqlite3_column_int64(s, 2) == st->size &&
                    sqlite3_column_int64(s, 3) == st->mtime_ns &&
                    sqlite3_column_int64(s, 4) == st->ctime_ns &&
                    (uint32_t)sqlite3_column_int64(s, 5) == st->mode &&
                    (uint64_t)sqlite3_column_int64(s, 6) == st->ino;
        int state = sqlite3_column_int(s, 7);
        sqlite3_reset(s);
        if (!same) {
                *res = UP_CHANGED;
                return file_update(m, id, st, gen, hard_links);
        }
        *res = state == ST_DONE || state == ST_SKIPPED ? UP_UNCHANGED
                                                       : UP_RESUMED;
        s = stmt(m, S_FILE_SEEN);
        if (!s)
                return db_fail(m, "write");
        sqlite3_bind_int64(s, 1, id);
        sqlite3_bind_int64(s, 2, gen);
        return exec_stmt(m, s, "file update");
}

int ferry_manifest_file_done(struct ferry_manifest *m,
                             const struct ferry_item *it)
{
        sqlite3_stmt *s = stmt(m, S_FILE_DONE);
        if (!s)
                return db_fail(m, "write");
        sqlite3_bind_int64(s, 1, it->id);
        sqlite3_bind_blob(s, 2, it->hash, 16, SQLITE_STATIC);
        bind_stat(s, 3, &it->st);
        return exec_stmt(m, s, "file update");
}

int ferry_manifest_file_set_state(struct ferry_manifest *m, int64_t id,
                                  enum ferry_state state, const char *error)
{
        sqlite3_stmt *s = stmt(m, S_FILE_STATE);
        if (!s)
                return db_fail(m, "write");
        sqlite3_bind_int64(s, 1, id);
        sqlite3_bind_int(s, 2, state);
        if (error)
                sqlite3_bind_text(s, 3, error, -1, SQLITE_TRANSIENT);
        return exec_stmt(m, s, "file update");
}

static sqlite3_stmt *query(struct ferry_manifest *m, enum ferry_query q)
{
        if (!m->query[q] && sqlite3_prepare_v3(m->db, query_sql[q], -1,
                                               SQLITE_PREPARE_PERSISTENT,
                                               &m->query[q], NULL) != SQLITE_OK)
                return NULL;
        sqlite3_reset(m->query[q]);
        return m->query[q];
}

static int put_blob(struct ferry_batch *b, sqlite3_stmt *s, int col,
                    uint32_t *off)
{
        const void *p = sqlite3_column_blob(s, col);
        size_t n = (size_t)sqlite3_column_bytes(s, col);
        return ferry_batch_str(b, p ? p : "", n, off);
}

/* The leader's destination path "dir/name" of a hardlink follower. */
static int put_leader(struct ferry_batch *b, sqlite3_stmt *s, int64_t gen,
                      struct ferry_item *it)
{
        it->link_off = 0;
        if (sqlite3_column_type(s, 14) == SQLITE_NULL ||
            sqlite3_column_int(s, 14) != ST_DONE ||
            sqlite3_column_int64(s, 15) != gen ||
            sqlite3_column_bytes(s, 18) != 16)
                return 0;
        const char *dir = sqlite3_column_blob(s, 16);
        size_t dlen = (size_t)sqlite3_column_bytes(s, 16);
        const char *name = sqlite3_column_blob(s, 17);
        size_t nlen = (size_t)sqlite3_column_bytes(s, 17);
        char *path = malloc(dlen + nlen + 2);
        if (!path)
                return ENOMEM;
        size_t n = 0;
        if (dlen) {
                memcpy(path, dir, dlen);
                path[dlen] = '/';
                n = dlen + 1;
        }
        memcpy(path + n, name ? name : "", nlen);
        int rc = ferry_batch_str(b, path, n + nlen, &it->link_off);
        free(path);
        memcpy(it->hash, sqlite3_column_blob(s, 18), 16);
        return rc;
}

static int read_item(struct ferry_batch *b, sqlite3_stmt *s, enum ferry_query q,
                     int64_t gen)
{
        struct ferry_item *it = &b->items[b->n];
        memset(it, 0, sizeof(*it));
        it->id = sqlite3_column_int64(s, 0);
        it->dir_id = sqlite3_column_int64(s, 1);
        if (put_blob(b, s, 2, &it->dir_off) || put_blob(b, s, 3, &it->name_off))
                return ENOMEM;
        it->type = (enum ferry_ftype)sqlite3_column_int(s, 4);
        it->st.size = (uint64_t)sqlite3_column_int64(s, 5);
        it->st.mtime_ns = sqlite3_column_int64(s, 6);
        it->st.ctime_ns = sqlite3_column_int64(s, 7);
        it->st.mode = (uint32_t)sqlite3_column_int64(s, 8);
        it->st.uid = (uint32_t)sqlite3_column_int64(s, 9);
        it->st.gid = (uint32_t)sqlite3_column_int64(s, 10);
        it->st.dev = (uint64_t)sqlite3_column_int64(s, 11);
        it->st.ino = (uint64_t)sqlite3_column_int64(s, 12);
        if (sqlite3_column_bytes(s, 13) == 16)
                memcpy(it->hash, sqlite3_column_blob(s, 13), 16);
        if (q == Q_NEXT_PASS && put_leader(b, s, gen, it))
                return ENOMEM;
        b->n++;
        return 0;
}

int ferry_manifest_fill(struct ferry_manifest *m, enum ferry_query q,
                        int64_t gen, int64_t *cursor, struct ferry_batch *b,
                        size_t max, uint64_t max_bytes)
{
        uint64_t bytes = 0;
        sqlite3_stmt *s = query(m, q);
        if (!s)
                return db_fail(m, "query");
        if (max > b->cap - b->n)
                max = b->cap - b->n;
        sqlite3_bind_int64(s, 1, *cursor);
        sqlite3_bind_int64(s, 2, (int64_t)max);
        sqlite3_bind_int64(s, 3, gen);
        int rc;
        while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
                if (read_item(b, s, q, gen)) {
                        sqlite3_reset(s);
                        return fail(m, "out of memory");
                }
                *cursor = b->items[b->n - 1].id;
                bytes += b->items[b->n - 1].st.size;
                if (bytes >= max_bytes)
                        break;
        }
        sqlite3_reset(s);
        return rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : db_fail(m, "query");
}

int ferry_manifest_pending(struct ferry_manifest *m, int64_t gen,
                           uint64_t *files, uint64_t *bytes)
{
        sqlite3_stmt *s;
        if (sqlite3_prepare_v2(
                    m->db,
                    "SELECT count(*), coalesce(sum(CASE WHEN type = 1"
                    " AND (hl IS NULL OR hl = -1) THEN size END), 0)"
                    " FROM files WHERE state = 0 AND gen >= ?1",
                    -1, &s, NULL) != SQLITE_OK)
                return db_fail(m, "read");
        sqlite3_bind_int64(s, 1, gen);
        int rc = sqlite3_step(s);
        *files = (uint64_t)sqlite3_column_int64(s, 0);
        *bytes = (uint64_t)sqlite3_column_int64(s, 1);
        sqlite3_finalize(s);
        return rc == SQLITE_ROW ? 0 : db_fail(m, "read");
}

int ferry_manifest_max_id(struct ferry_manifest *m, int64_t *id)
{
        return pragma_int(m, "SELECT coalesce(max(id), 0) FROM files", id);
}

int ferry_manifest_current_gen(struct ferry_manifest *m, int64_t *gen)
{
        return pragma_int(m,
                          "SELECT coalesce(max(value), 0) FROM meta"
                          " WHERE key = 'gen'",
                          gen);
}

int ferry_manifest_not_done(struct ferry_manifest *m, int64_t gen,
                            uint64_t *files)
{
        sqlite3_stmt *s;
        if (sqlite3_prepare_v2(m->db,
                               "SELECT count(*) FROM files"
                               " WHERE state IN (0, 2) AND gen = ?1",
                               -1, &s, NULL) != SQLITE_OK)
                return db_fail(m, "read");
        sqlite3_bind_int64(s, 1, gen);
        int rc = sqlite3_step(s);
        *files = (uint64_t)sqlite3_column_int64(s, 0);
        sqlite3_finalize(s);
        return rc == SQLITE_ROW ? 0 : db_fail(m, "read");
}

static int status_counts(struct ferry_manifest *m,
                         struct ferry_status_info *info)
{
        sqlite3_stmt *s;
        if (sqlite3_prepare_v2(m->db,
                               "SELECT state, count(*), coalesce(sum(size), 0)"
                               " FROM files GROUP BY state",
                               -1, &s, NULL) != SQLITE_OK)
                return db_fail(m, "read");
        int rc;
        while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
                struct ferry_state_count c = {
                        (uint64_t)sqlite3_column_int64(s, 1),
                        (uint64_t)sqlite3_column_int64(s, 2)};
                switch (sqlite3_column_int(s, 0)) {
                case ST_PENDING: info->pending = c; break;
                case ST_DONE: info->done = c; break;
                case ST_FAILED: info->failed = c; break;
                case ST_SKIPPED: info->skipped = c; break;
                case ST_VANISHED: info->vanished = c; break;
                default: break;
                }
        }
        sqlite3_finalize(s);
        return rc == SQLITE_DONE ? 0 : db_fail(m, "read");
}

static int status_meta(struct ferry_manifest *m, struct ferry_status_info *info)
{
        int64_t bad_dirs = 0;
        if (pragma_int(m, "SELECT count(*) FROM dirs WHERE error IS NOT NULL",
                       &bad_dirs))
                return FERRY_EMANIFEST;
        info->failed.files += (uint64_t)bad_dirs;
        sqlite3_stmt *s;
        if (sqlite3_prepare_v2(m->db, "SELECT key, value FROM meta", -1, &s,
                               NULL) != SQLITE_OK)
                return db_fail(m, "read");
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
        sqlite3_finalize(s);
        int64_t n = 0;
        int rc = pragma_int(
                m,
                "SELECT count(*) FROM files WHERE gen < (SELECT"
                " coalesce(max(value), 0) FROM meta WHERE key = 'gen')",
                &n);
        info->not_in_source = (uint64_t)n;
        if (!rc)
                rc = pragma_int(m, "SELECT count(*) FROM dirs", &n);
        info->dirs = (uint64_t)n;
        return rc;
}

static int status_last_run(struct ferry_manifest *m,
                           struct ferry_status_info *info)
{
        sqlite3_stmt *s;
        if (sqlite3_prepare_v2(m->db,
                               "SELECT started, coalesce(finished, 0),"
                               " coalesce(result, -1) FROM runs"
                               " ORDER BY id DESC LIMIT 1",
                               -1, &s, NULL) != SQLITE_OK)
                return db_fail(m, "read");
        info->last_result = -1;
        if (sqlite3_step(s) == SQLITE_ROW) {
                info->last_start = sqlite3_column_int64(s, 0);
                info->last_end = sqlite3_column_int64(s, 1);
                info->last_result = sqlite3_column_int(s, 2);
        }
        sqlite3_finalize(s);
        return 0;
}

static int status_failures(struct ferry_manifest *m, ferry_failure_fn fn,
                           void *arg)
{
        sqlite3_stmt *s;
        if (sqlite3_prepare_v2(m->db,
                               "SELECT path, '', error FROM dirs"
                               " WHERE error IS NOT NULL"
                               " UNION ALL"
                               " SELECT d.path, f.name, coalesce(f.error, '')"
                               " FROM files f JOIN dirs d ON d.id = f.dir"
                               " WHERE f.state = 2",
                               -1, &s, NULL) != SQLITE_OK)
                return db_fail(m, "read");
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
        sqlite3_finalize(s);
        return rc == SQLITE_DONE ? 0 : db_fail(m, "read");
}

int ferry_manifest_status(struct ferry_manifest *m,
                          struct ferry_status_info *info,
                          ferry_failure_fn on_failure, void *arg)
{
        /* one read transaction: a consistent snapshot, kept short */
        int rc = exec_sql(m, "BEGIN", "read");
        if (rc)
                return rc;
        rc = status_counts(m, info);
        if (!rc)
                rc = status_meta(m, info);
        if (!rc)
                rc = status_last_run(m, info);
        if (!rc && on_failure)
                rc = status_failures(m, on_failure, arg);
        sqlite3_exec(m->db, "COMMIT", NULL, NULL, NULL);
        return rc;
}
