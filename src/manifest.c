/*
 * manifest.c - the SQLite manifest (manifest.h).
 *
 * Owns the database connection, the schema and its forward-only migrations
 * (sql/NNN_*.sql, embedded at build time), and one prepared statement per
 * kind of access. Nothing else in ferry speaks SQL.
 *
 * Safety checks on open, before anything is written: the file must carry
 * a sound SQLite header and size (check_header), ferry's application_id and
 * a schema version this build knows (check_identity), and, when it is small
 * enough to read through, pass SQLite's own check (check_content);
 * otherwise the user's file is left untouched and the run stops. Damage
 * met later makes every call fail with a message that says so (db_fail).
 */
#define _GNU_SOURCE
#include "manifest.h"

#include "mvfs.h"

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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
        S_DIR_CHAIN_TOUCH,
        S_DIR_APPLIED,
        S_DIR_DELETE,
        S_DIR_ERROR,
        S_DIR_LISTED,
        S_DIR_COUNT,
        S_DIR_UNSEEN,
        S_FILE_FIND,
        S_FILE_INSERT,
        S_FILE_SEEN,
        S_FILE_UPDATE,
        S_FILE_LEADER,
        S_FILE_DONE,
        S_FILE_STATE,
        S_FILE_DELETE,
        S_FILE_REMOVE_NAME,
        S_SUBTREE_REMOVED,
        S_MARK_UNSEEN,
        S_FORGET_GROUP,
        S_FILE_DST,
        S_FILE_SET_DST,
        S_NSTMTS
};

static const char *const stmt_sql[S_NSTMTS] = {
        [S_BEGIN] = "BEGIN IMMEDIATE",
        [S_COMMIT] = "COMMIT",
        [S_ROLLBACK] = "ROLLBACK",
        [S_META_GET] = "SELECT value FROM meta WHERE key = ?1",
        [S_META_SET] =
                "INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)",
        [S_DIR_FIND] = "SELECT id, mode, uid, gid, mtime_ns, listed FROM dirs"
                       " WHERE path = ?1",
        [S_DIR_INSERT] =
                "INSERT INTO dirs (parent, path, mode, uid, gid, mtime_ns,"
                " state, gen, listed) VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0, ?7,"
                " -1)",
        /* ?7: changed (metadata to apply again), ?8: its rows are marked */
        [S_DIR_UPDATE] =
                "UPDATE dirs SET mode = ?2, uid = ?3, gid = ?4,"
                " mtime_ns = ?5, gen = ?6,"
                " state = CASE WHEN ?7 THEN 0 ELSE state END,"
                " listed = CASE WHEN ?8 THEN -1 ELSE listed END WHERE id = ?1",
        /* the directory of file row ?1 and every one above it */
        [S_DIR_CHAIN_TOUCH] =
                "WITH RECURSIVE up(id) AS (SELECT dir FROM files WHERE id = ?1"
                " UNION SELECT d.parent FROM dirs d JOIN up ON d.id = up.id"
                " WHERE d.parent IS NOT NULL)"
                " UPDATE dirs SET state = 0 WHERE id IN up AND state != 0",
        [S_DIR_TOUCH] =
                "UPDATE dirs SET state = 0 WHERE id = ?1 AND state != 0",
        [S_DIR_APPLIED] = "UPDATE dirs SET state = 1 WHERE id = ?1",
        [S_DIR_DELETE] = "DELETE FROM dirs WHERE id = ?1",
        [S_DIR_ERROR] = "UPDATE dirs SET error = ?2, fail_side = ?3,"
                        " fail_step = ?4, fail_errno = ?5 WHERE id = ?1"
                        " AND (error IS NOT ?2 OR fail_side IS NOT ?3"
                        " OR fail_step IS NOT ?4 OR fail_errno IS NOT ?5)",
        /* ?3: a later scan must mark this directory's rows one by one */
        [S_DIR_LISTED] = "UPDATE dirs SET listed = ?2, mtime_ns = CASE WHEN"
                         " ?3 THEN -1 ELSE mtime_ns END WHERE id = ?1",
        [S_DIR_COUNT] = "SELECT count(*) FROM files WHERE dir = ?1"
                        " AND state != 5",
        [S_DIR_UNSEEN] = "UPDATE files SET state = 5, gen = ?2"
                         " WHERE dir = ?1 AND gen < ?2 AND state != 5",
        [S_FILE_FIND] = "SELECT id, type, size, mtime_ns, ctime_ns, mode, ino,"
                        " state, gen FROM files WHERE dir = ?1 AND name = ?2",
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
                          " AND hl = -1 AND state NOT IN (4, 5) LIMIT 1",
        [S_FILE_DONE] = "UPDATE files SET state = 1, hash = ?2, size = ?3,"
                        " mtime_ns = ?4, ctime_ns = ?5, mode = ?6, uid = ?7,"
                        " gid = ?8, dev = ?9, ino = ?10, error = NULL,"
                        " fail_side = NULL, fail_step = NULL,"
                        " fail_errno = NULL,"
                        " attempts = attempts + 1, dst_type = ?11,"
                        " dst_size = ?12, dst_mtime_ns = ?13 WHERE id = ?1",
        [S_FILE_STATE] =
                "UPDATE files SET state = ?2, error = ?3,"
                " attempts = attempts + (?3 IS NOT NULL), fail_side = ?4,"
                " fail_step = ?5, fail_errno = ?6 WHERE id = ?1",
        [S_FILE_DELETE] = "DELETE FROM files WHERE id = ?1",
        [S_FILE_REMOVE_NAME] = "UPDATE files SET state = 5, gen = ?3"
                               " WHERE dir = ?1 AND name = ?2 AND state != 5",
        [S_MARK_UNSEEN] = "UPDATE files SET state = 5, gen = ?1"
                          " WHERE state != 5 AND dir IN (SELECT id"
                          " FROM dirs WHERE gen < ?1)",
        [S_FORGET_GROUP] = "UPDATE files SET hl = NULL WHERE id = ?1"
                           " AND state IN (4, 5)",
        [S_FILE_DST] = "SELECT dst_type, dst_size, dst_mtime_ns FROM files"
                       " WHERE dir = ?1 AND name = ?2",
        [S_FILE_SET_DST] = "UPDATE files SET dst_type = ?2, dst_size = ?3,"
                           " dst_mtime_ns = ?4 WHERE id = ?1",
        [S_SUBTREE_REMOVED] = "UPDATE files SET state = 5,"
                              " gen = ?1"
                              " WHERE state != 5 AND dir IN (SELECT id"
                              " FROM dirs WHERE path = ?2 OR (path >= ?3"
                              " AND path < ?4))",
};

#define FILE_COLS                                                              \
        "f.id, f.dir, d.path, f.name, f.type, f.size, f.mtime_ns,"             \
        " f.ctime_ns, f.mode, f.uid, f.gid, f.dev, f.ino, f.hash,"             \
        " f.dst_type, f.dst_size, f.dst_mtime_ns"

/* ?1 cursor, ?2 limit, ?3 generation */
// clang-format off
static const char *const query_sql[Q_NQUERIES] = {
        [Q_FIRST_PASS] =
                "SELECT " FILE_COLS " FROM files f JOIN dirs d ON d.id = f.dir"
                " WHERE f.state = 0 AND f.id > ?1"
                " AND f.gen = ?3 AND (f.hl IS NULL OR f.hl = -1)"
                " ORDER BY f.id LIMIT ?2",
        [Q_NEXT_PASS] =
                "SELECT " FILE_COLS ", l.state, l.gen = ?3 OR ld.listed = ?3,"
                " ld.path, l.name, l.hash"
                " FROM files f JOIN dirs d ON d.id = f.dir"
                " LEFT JOIN files l ON f.hl > 0 AND l.id = f.hl"
                " LEFT JOIN dirs ld ON ld.id = l.dir"
                " WHERE f.state = 0 AND f.id > ?1"
                " AND f.gen = ?3 AND (l.state IS NULL OR l.state != 0)"
                " ORDER BY f.id LIMIT ?2",
        [Q_VERIFY] =
                "SELECT " FILE_COLS " FROM files f JOIN dirs d ON d.id = f.dir"
                " WHERE f.state = 1 AND f.type IN (1, 2)"
                " AND (f.gen = ?3 OR d.listed = ?3) AND f.id > ?1"
                " ORDER BY f.id LIMIT ?2",
        [Q_PENDING] =
                "SELECT " FILE_COLS " FROM files f JOIN dirs d ON d.id = f.dir"
                " WHERE f.state = 0 AND f.gen = ?3 AND f.id > ?1"
                " ORDER BY f.id LIMIT ?2",
        /* Each state through its partial index, in id order: "state IN
         * (4, 5) AND state = 5" lets SQLite use files_removed, which a
         * bare "state = 5" or the IN list with ORDER BY id would not (a
         * scan, or a sort of every removed row per page). */
        [Q_REMOVED_FILES] =
                "SELECT " FILE_COLS " FROM files f JOIN dirs d ON d.id = f.dir"
                " WHERE f.id IN (SELECT id FROM (SELECT id FROM files"
                " WHERE state IN (4, 5) AND state = 4 AND id > ?1"
                " ORDER BY id LIMIT ?2) UNION ALL SELECT id FROM (SELECT id"
                " FROM files WHERE state IN (4, 5) AND state = 5 AND id > ?1"
                " ORDER BY id LIMIT ?2))"
                " ORDER BY f.id LIMIT ?2",
        /* pending rows not seen, and those removed by this scan */
        [Q_STALE_TEMPS] =
                "SELECT " FILE_COLS " FROM files f JOIN dirs d ON d.id = f.dir"
                " WHERE f.id IN (SELECT id FROM (SELECT id FROM files"
                " WHERE state = 0 AND gen < ?3 AND id > ?1"
                " ORDER BY id LIMIT ?2) UNION ALL SELECT id FROM (SELECT id"
                " FROM files WHERE state IN (4, 5) AND state = 5"
                " AND gen = ?3 AND hash IS NULL AND id > ?1"
                " ORDER BY id LIMIT ?2))"
                " ORDER BY f.id LIMIT ?2",
        [Q_REMOVED_DIRS] =
                "SELECT id, coalesce(parent, 0), path, '', 0, 0, mtime_ns, 0,"
                " mode, uid, gid, 0, 0, NULL, NULL, NULL, NULL FROM dirs"
                " WHERE gen < ?3 AND id < ?1 ORDER BY id DESC LIMIT ?2",
        [Q_ONE_PENDING] =
                "SELECT " FILE_COLS " FROM files f JOIN dirs d ON d.id = f.dir"
                " WHERE f.id = ?1 AND f.state = 0 AND f.gen = ?3"
                " AND (f.hl IS NULL OR f.hl = -1) LIMIT ?2",
        [Q_PENDING_DIRS] =
                "SELECT id, id, path, '', 0, 0, mtime_ns, 0, mode, uid, gid,"
                " 0, 0, NULL, NULL, NULL, NULL FROM dirs"
                " WHERE state = 0 AND gen = ?3 AND id < ?1"
                " ORDER BY id DESC LIMIT ?2",
};
// clang-format on

struct ferry_manifest {
        sqlite3 *db;
        sqlite3_stmt *stmt[S_NSTMTS];
        sqlite3_stmt *query[Q_NQUERIES];
        char *path;       /* for messages */
        int64_t upserted; /* the row of the last changed or resumed upsert */
        bool immutable;   /* read as a file nobody writes: open_reader */
        bool moved;       /* ... and it changed meanwhile: read it again */
        struct stat st;   /* the file before an immutable read began */
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

static bool is_damage(int code)
{
        return (code & 0xff) == SQLITE_CORRUPT ||
               (code & 0xff) == SQLITE_NOTADB;
}

/* Damage met at any point ends the run with a message that says so. */
static int db_fail(struct ferry_manifest *m, const char *what)
{
        if (is_damage(sqlite3_errcode(m->db)))
                return fail(m, "manifest '%s' is damaged: %s failed: %s",
                            m->path, what, sqlite3_errmsg(m->db));
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
        int rc = sqlite3_exec(m->db, sql, NULL, NULL, &msg);
        if (rc != SQLITE_OK) {
                const char *why = msg ? msg : sqlite3_errmsg(m->db);
                if (is_damage(rc))
                        fail(m, "manifest '%s' is damaged: %s failed: %s",
                             m->path, what, why);
                else
                        fail(m, "manifest %s failed: %s", what, why);
                sqlite3_free(msg);
                return FERRY_EMANIFEST;
        }
        return 0;
}

/* Runs sql, a query of one row, with arg bound to ?1 if it has one, and
 * stores its first n columns (NULL reads as 0) in v. */
static int select_ints(struct ferry_manifest *m, const char *sql, int64_t arg,
                       int64_t *v, int n)
{
        sqlite3_stmt *s;
        if (sqlite3_prepare_v2(m->db, sql, -1, &s, NULL) != SQLITE_OK)
                return db_fail(m, "read");
        if (sqlite3_bind_parameter_count(s) >= 1)
                sqlite3_bind_int64(s, 1, arg);
        int rc = sqlite3_step(s);
        for (int i = 0; rc == SQLITE_ROW && i < n; i++)
                v[i] = sqlite3_column_int64(s, i);
        sqlite3_finalize(s);
        return rc == SQLITE_ROW ? 0 : db_fail(m, "read");
}

static int pragma_int(struct ferry_manifest *m, const char *sql, int64_t *v)
{
        return select_ints(m, sql, 0, v, 1);
}

/*
 * What the file says about itself, read before SQLite opens it: SQLite
 * trusts a short file (it reads the missing bytes as zeros) and reads only
 * the pages a query needs, so damage must be looked for on purpose.
 */
struct file_facts {
        bool exists;
        int64_t size;    /* bytes */
        bool wal_frames; /* a non-empty -wal: the main file may lag it */
};

static uint32_t be32(const unsigned char *p)
{
        return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
               (uint32_t)p[2] << 8 | p[3];
}

static int damaged(struct ferry_error *err, const char *path, const char *fmt,
                   ...) __attribute__((format(printf, 3, 4)));

static int damaged(struct ferry_error *err, const char *path, const char *fmt,
                   ...)
{
        char why[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, sizeof(why), fmt, ap);
        va_end(ap);
        snprintf(err->msg, sizeof(err->msg),
                 "manifest '%s' is damaged: %s (left untouched)", path, why);
        return FERRY_EMANIFEST;
}

/* Has the -wal next to path any content? (It exists during a run, and
 * after a crash until the next run replays it.) */
static bool has_wal_frames(const char *path)
{
        char *wal = NULL;
        struct stat st;
        bool frames = asprintf(&wal, "%s-wal", path) < 0 || stat(wal, &st) != 0
                              ? false
                              : st.st_size > 0;
        free(wal);
        return frames;
}

/*
 * The 100-byte file header and the file size (SQLite's file format, "The
 * Database Header"). In WAL mode the main file lags the -wal until a
 * checkpoint, and a checkpoint cut short by a crash writes page 1 (with the
 * new size) before the pages after it: while the -wal holds frames, the
 * size checks prove nothing and are skipped. The -wal is looked at after
 * the size, so a run that checkpoints and ends meanwhile is no false alarm.
 */
static int check_file(int fd, const char *path, struct file_facts *f,
                      struct ferry_error *err)
{
        unsigned char h[100];
        struct stat st;
        ssize_t n = pread(fd, h, sizeof(h), 0);
        if (n < 16 || memcmp(h, "SQLite format 3", 16) != 0) {
                snprintf(err->msg, sizeof(err->msg),
                         "manifest '%s' is not an SQLite database (left "
                         "untouched)",
                         path);
                return FERRY_EMANIFEST;
        }
        if (fstat(fd, &st)) {
                snprintf(err->msg, sizeof(err->msg),
                         "cannot read manifest '%s': %s", path,
                         strerror(errno));
                return FERRY_EMANIFEST;
        }
        f->size = (int64_t)st.st_size;
        if (n < (ssize_t)sizeof(h))
                return damaged(err, path,
                               "cut to %lld bytes, inside SQLite's header",
                               (long long)f->size);
        uint32_t page = (uint32_t)h[16] << 8 | h[17];
        if (page == 1)
                page = 65536;
        if (page < 512 || page > 65536 || (page & (page - 1)) || h[18] < 1 ||
            h[18] > 2 || h[19] < 1 || h[19] > 2)
                return damaged(err, path, "its header is not valid");
        f->wal_frames = has_wal_frames(path);
        if (f->wal_frames)
                return 0;
        if (f->size % page)
                return damaged(err, path,
                               "cut short: %lld bytes are not a whole number "
                               "of %u-byte pages",
                               (long long)f->size, page);
        /* the in-header size is valid when nonzero and its change counter
         * matches the version-valid-for number */
        uint32_t pages = be32(h + 28);
        if (pages && be32(h + 24) == be32(h + 92) &&
            f->size < (int64_t)pages * page)
                return damaged(err, path,
                               "cut short: %lld of the %u pages its header "
                               "records",
                               (long long)(f->size / page), pages);
        return 0;
}

/* An SQLite database with sound header and size, or nothing at all. */
static int check_header(const char *path, struct file_facts *f,
                        struct ferry_error *err)
{
        memset(f, 0, sizeof(*f));
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
                if (errno == ENOENT)
                        return 0;
                snprintf(err->msg, sizeof(err->msg),
                         "cannot open manifest '%s': %s", path,
                         strerror(errno));
                return FERRY_EMANIFEST;
        }
        f->exists = true;
        int rc = check_file(fd, path, f, err);
        close(fd);
        return rc;
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

/* Why an existing manifest could not be read while it was checked. */
static int refuse_unreadable(struct ferry_manifest *m)
{
        if (is_damage(sqlite3_errcode(m->db)))
                return fail(m, "manifest '%s' is damaged: %s (left untouched)",
                            m->path, sqlite3_errmsg(m->db));
        return fail(m, "manifest '%s' is unreadable: %s", m->path,
                    sqlite3_errmsg(m->db));
}

/* Identity and version checks of an existing manifest; reads only. */
static int check_identity(struct ferry_manifest *m)
{
        int64_t app = 0, version = 0;
        if (pragma_int(m, "PRAGMA application_id", &app) ||
            pragma_int(m, "PRAGMA user_version", &version))
                return refuse_unreadable(m);
        if (app != FERRY_APPLICATION_ID)
                return fail(m,
                            "'%s' is an SQLite database but not a ferry "
                            "manifest (left untouched)",
                            m->path);
        if (version > max_version())
                return fail(m,
                            "manifest '%s' has schema version %lld, newer "
                            "than this ferry knows (%d): upgrade ferry",
                            m->path, (long long)version, max_version());
        int64_t n = 0;
        if (pragma_int(m, "SELECT count(*) FROM sqlite_schema", &n))
                return refuse_unreadable(m);
        return 0;
}

/*
 * How much of an existing manifest is read through before a run or a
 * verify writes to it. SQLite reads only the pages a query needs, so
 * damage deep inside goes unnoticed until some query meets it, after the
 * run has written to the file and to DST. Measured on a manifest of one
 * million rows (141 MB, warm cache): PRAGMA integrity_check, which also
 * matches every index entry to its row, takes 1.6 s; PRAGMA quick_check,
 * which reads every page but does not match indexes (it misses about one
 * damaged page in six), 0.3 s. So: integrity_check up to FULL_CHECK_MAX
 * (about 450,000 files, under a second), quick_check up to QUICK_CHECK_MAX
 * (about 7 million files, a few seconds, more from a cold disk), and
 * beyond that only check_header's checks: damage met later ends the run
 * with FERRY_EMANIFEST (db_fail). status only reads and skips this.
 *
 * Those limits are for --verify (MF_THOROUGH), which reads everything
 * anyway. A plain run pays the check on every re-run, before its scan can
 * start: from a cold cache, integrity_check of a 100,000-file manifest
 * (13 MB) took 0.47 s, about half of a whole no-op re-run (bench scenario
 * d). So a run reads the manifest through only up to RUN_CHECK_MAX (about
 * 30,000 files, 0.15 s); a bigger one gets the header checks, damage met
 * by a query ends the run with exit 3, and --verify finds the rest.
 */
#define FULL_CHECK_MAX  ((int64_t)64 << 20)
#define QUICK_CHECK_MAX ((int64_t)1 << 30)
#define RUN_CHECK_MAX   ((int64_t)4 << 20)

/* Tests set other limits in FERRY_MANIFEST_CHECK="FULL,QUICK" (bytes). */
static void check_limits(bool thorough, int64_t *full, int64_t *quick)
{
        *full = thorough ? FULL_CHECK_MAX : RUN_CHECK_MAX;
        *quick = thorough ? QUICK_CHECK_MAX : 0;
#ifdef FERRY_TESTING
        const char *env = getenv("FERRY_MANIFEST_CHECK");
        if (env && strchr(env, ',')) {
                *full = strtoll(env, NULL, 10);
                *quick = strtoll(strchr(env, ',') + 1, NULL, 10);
        }
#endif
}

static int check_content(struct ferry_manifest *m, int64_t size, bool thorough)
{
        int64_t full, quick;
        check_limits(thorough, &full, &quick);
        const char *sql = size <= full    ? "PRAGMA integrity_check(1)"
                          : size <= quick ? "PRAGMA quick_check(1)"
                                          : NULL;
        if (!sql)
                return 0;
        sqlite3_stmt *s;
        if (sqlite3_prepare_v2(m->db, sql, -1, &s, NULL) != SQLITE_OK)
                return refuse_unreadable(m);
        char why[256] = "";
        int rc = sqlite3_step(s);
        if (rc == SQLITE_ROW) {
                const char *t = (const char *)sqlite3_column_text(s, 0);
                const char *main_db = "*** in database main ***";
                if (t && !strncmp(t, main_db, strlen(main_db)))
                        t += strlen(main_db);
                snprintf(why, sizeof(why), "%s", t ? t + strspn(t, " \n") : "");
        }
        sqlite3_finalize(s);
        if (rc != SQLITE_ROW)
                return refuse_unreadable(m);
        if (!strcmp(why, "ok"))
                return 0;
        for (char *p = why; *p; p++)
                if ((unsigned char)*p < 0x20)
                        *p = ' '; /* one line */
        return fail(m, "manifest '%s' is damaged: %s (left untouched)", m->path,
                    why);
}

static int setup_new(struct ferry_manifest *m)
{
        char sql[96];
        snprintf(sql, sizeof(sql), "PRAGMA application_id = %d;",
                 FERRY_APPLICATION_ID);
        int rc = exec_sql(m, sql, "creation");
        return rc ? rc : migrate(m, 0);
}

static int configure(struct ferry_manifest *m, bool memory)
{
        if (!memory &&
            exec_sql(m, "PRAGMA journal_mode = WAL", "setting WAL mode"))
                return FERRY_EMANIFEST;
        return exec_sql(m,
                        "PRAGMA synchronous = FULL;"
                        "PRAGMA cache_size = -2048;"
                        /* a statement journal (UPDATE of many rows in a
                         * transaction) spills to a temp file past 64 KiB;
                         * in memory it grew ~130 bytes per row (t16) */
                        "PRAGMA temp_store = FILE;"
                        "PRAGMA wal_autocheckpoint = 4000;",
                        "configuration");
}

/*
 * How `ferry status` opens a manifest: read-write if it could write next to
 * it, so that closing removes the -wal and -shm it created (as the last
 * connection; a running job keeps them), read-only otherwise. Its SQL
 * cannot write either way (PRAGMA query_only).
 */
static int status_open_flags(const char *path)
{
        char *dir = strdup(path);
        if (!dir)
                return SQLITE_OPEN_READONLY;
        char *slash = strrchr(dir, '/');
        if (slash)
                slash[slash == dir] = '\0';
        bool writable = access(path, W_OK) == 0 &&
                        access(slash ? dir : ".", W_OK | X_OK) == 0;
        free(dir);
        return writable ? SQLITE_OPEN_READWRITE : SQLITE_OPEN_READONLY;
}

static void remove_new(const char *path)
{
        static const char *const suffix[] = {"", "-wal", "-shm", "-journal"};
        for (size_t i = 0; i < sizeof(suffix) / sizeof(suffix[0]); i++) {
                char p[PATH_MAX];
                if ((size_t)snprintf(p, sizeof(p), "%s%s", path, suffix[i]) <
                    sizeof(p))
                        unlink(p);
        }
}

/*
 * Reading without write access: a read-only mount, or a monitoring user
 * who may read the manifest but not write it or its directory.
 *
 * The manifest is in WAL mode, and SQLite reads a WAL database through
 * its -shm, the shared index of the -wal, which a reader creates when it
 * is missing (sqlite.org/wal.html, "Read-Only Databases"). While a run
 * goes on, or after one was cut short, the -wal and -shm exist (SQLite
 * gives them the manifest's permissions) and a read-only connection uses
 * them as they are. Between runs there are none, and a reader that cannot
 * create them cannot open the manifest at all. The main file then holds
 * every committed row, and it is opened as immutable (URI parameter
 * immutable=1: no -shm, no locks, no -wal looked at).
 *
 * Immutable means that nobody changes the file meanwhile, and nothing
 * stops a run from starting during the read. The run's commits go to a
 * new -wal and leave the main file alone, but a checkpoint (every 4000
 * pages, and at the end of the run) writes into it. So the read counts
 * only if afterwards the main file still has the identity, size, mtime
 * and ctime it had before and still no -wal with frames beside it: a
 * checkpoint copies frames of the -wal, which goes away only when the run
 * closes the manifest after its last checkpoint (and a -wal once written
 * is not emptied before). Otherwise ferry_manifest_moved says so, and the
 * caller reads again.
 */

/* The file path+suffix exists, and holds more than max_size bytes. */
static bool beside(const char *path, const char *suffix, off_t max_size)
{
        char p[PATH_MAX];
        struct stat st;
        if ((size_t)snprintf(p, sizeof(p), "%s%s", path, suffix) >= sizeof(p))
                return true; /* cannot tell: assume it does */
        if (lstat(p, &st))
                return errno != ENOENT;
        return st.st_size > max_size;
}

/* Nothing but the main file holds rows: no -wal with frames (an empty one
 * stays behind a reader that had write access), no -journal. */
static bool on_its_own(const char *path)
{
        return !beside(path, "-wal", 0) && !beside(path, "-journal", -1);
}

/* The main file is on its own (above); *st is it. */
static bool alone(const char *path, struct stat *st)
{
        return on_its_own(path) && stat(path, st) == 0;
}

static bool same_file(const struct stat *a, const struct stat *b)
{
        return a->st_dev == b->st_dev && a->st_ino == b->st_ino &&
               a->st_size == b->st_size &&
               a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
               a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
               a->st_ctim.tv_sec == b->st_ctim.tv_sec &&
               a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* After an immutable read: nobody wrote the main file meanwhile. */
static bool still_alone(const struct ferry_manifest *m)
{
        struct stat st;
        return stat(m->path, &st) == 0 && same_file(&st, &m->st) &&
               on_its_own(m->path);
}

/* The URI that opens path as an immutable file; free with sqlite3_free. */
static char *immutable_uri(const char *path)
{
        sqlite3_str *s = sqlite3_str_new(NULL);
        /* "file:" and a relative path, or "file://" (no authority) and an
         * absolute one; everything but plain characters %-escaped */
        sqlite3_str_appendall(s, path[0] == '/' ? "file://" : "file:");
        for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
                unsigned c = *p;
                if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    (c >= '0' && c <= '9') || c == '/' || c == '.' ||
                    c == '_' || c == '-')
                        sqlite3_str_appendchar(s, 1, (char)c);
                else
                        sqlite3_str_appendf(s, "%%%02X", c);
        }
        sqlite3_str_appendall(s, "?immutable=1");
        return sqlite3_str_finish(s);
}

/* Opens m->db: name with oflags, or as immutable (above). */
static int open_db(struct ferry_manifest *m, const char *name, int oflags,
                   bool immutable)
{
        char *uri = NULL;
        if (immutable) {
                if (!(uri = immutable_uri(name)))
                        return fail(m, "out of memory");
                oflags = SQLITE_OPEN_READONLY | SQLITE_OPEN_URI;
        }
        int rc = sqlite3_open_v2(uri ? uri : name, &m->db,
                                 oflags | SQLITE_OPEN_NOMUTEX,
                                 ferry_mvfs_name());
        sqlite3_free(uri);
        if (rc != SQLITE_OK)
                return fail(m, "cannot open manifest '%s': %s", name,
                            m->db ? sqlite3_errmsg(m->db) : "out of memory");
        /* a run and `ferry status` meet here: wait for each other's locks
         * instead of reporting a busy manifest as unreadable */
        sqlite3_busy_timeout(m->db, 10000);
        sqlite3_extended_result_codes(m->db, 1);
        return 0;
}

/* The last failure came from the -shm or -wal this user cannot make. */
static bool cannot_share(const struct ferry_manifest *m)
{
        int code = m->db ? sqlite3_errcode(m->db) & 0xff : 0;
        return code == SQLITE_CANTOPEN || code == SQLITE_READONLY;
}

/* Opens and checks a manifest for `ferry status`: through its -wal and
 * -shm where it can, else as immutable (above). */
static int open_reader(struct ferry_manifest *m, bool wal_frames)
{
        int rc = open_db(m, m->path, status_open_flags(m->path), false);
        /* a -wal left by a crashed run is replayed by the next run, not by
         * a reader */
        if (!rc && wal_frames)
                sqlite3_db_config(m->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1,
                                  NULL);
        if (!rc)
                rc = exec_sql(m, "PRAGMA query_only = 1", "configuration");
        if (!rc)
                rc = check_identity(m);
        if (!rc || !cannot_share(m))
                return rc;
        if (!alone(m->path, &m->st))
                return fail(m,
                            "manifest '%s' is unreadable without write "
                            "access to its directory: %s",
                            m->path, sqlite3_errmsg(m->db));
        sqlite3_close(m->db);
        m->db = NULL;
        m->immutable = true;
        rc = open_db(m, m->path, 0, true);
        if (!rc)
                rc = exec_sql(m, "PRAGMA query_only = 1", "configuration");
        return rc ? rc : check_identity(m);
}

/* Opens, checks and sets up a manifest for a run or --verify. */
static int open_writer(struct ferry_manifest *m, int flags,
                       const struct file_facts *f)
{
        bool memory = flags & MF_MEMORY;
        int rc = open_db(m, memory ? ":memory:" : m->path,
                         SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, false);
        if (!rc && !memory && sqlite3_db_readonly(m->db, "main") == 1)
                rc = fail(m,
                          "manifest '%s' is not writable: a run%s writes to "
                          "it (`ferry status` only reads)",
                          m->path,
                          flags & MF_THOROUGH
                                  ? " and --verify, which marks the files "
                                    "it finds missing or changed,"
                                  : "");
        if (!rc && f->exists) {
                rc = check_identity(m);
                if (!rc)
                        rc = check_content(m, f->size, flags & MF_THOROUGH);
                /* a -wal is not replayed into a file that is refused */
                if (rc && f->wal_frames)
                        sqlite3_db_config(m->db,
                                          SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1,
                                          NULL);
        }
        if (!rc)
                rc = configure(m, memory);
        if (rc)
                return rc;
        int64_t version = 0;
        rc = f->exists ? pragma_int(m, "PRAGMA user_version", &version)
                       : setup_new(m);
        return !rc && f->exists ? migrate(m, version) : rc;
}

int ferry_manifest_open(const char *path, int flags,
                        struct ferry_manifest **out, struct ferry_error *err)
{
        *out = NULL;
        bool memory = flags & MF_MEMORY, readonly = flags & MF_READONLY;
        struct file_facts f = {.exists = false};
        if (!memory) {
                int rc = check_header(path, &f, err);
                if (rc)
                        return rc;
                if (!f.exists && !(flags & MF_CREATE)) {
                        snprintf(err->msg, sizeof(err->msg),
                                 "no manifest at '%s'", path);
                        return FERRY_EMANIFEST;
                }
        }
        struct ferry_manifest *m = calloc(1, sizeof(*m));
        if (!m || !(m->path = strdup(path ? path : ":memory:"))) {
                free(m);
                snprintf(err->msg, sizeof(err->msg), "out of memory");
                return FERRY_EINTERNAL;
        }
        int rc = readonly ? open_reader(m, f.wal_frames)
                          : open_writer(m, flags, &f);
        if (rc) {
                snprintf(err->msg, sizeof(err->msg), "%s", m->errmsg);
                ferry_manifest_close(m);
                /* A manifest this call created but could not set up (a
                 * write or fsync failed) would be refused by every later
                 * run: remove it, it holds nothing yet. Found with the
                 * manifest fault injection (mwrite:1, msync:1). */
                if (!memory && !readonly && !f.exists)
                        remove_new(path);
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
        free(m->path);
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
                return fail(m,
                            "manifest '%s' belongs to another job: '%s' -> "
                            "'%s'",
                            m->path, old_src[0] ? old_src : src,
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

int ferry_manifest_reset_done(struct ferry_manifest *m)
{
        /* the hash goes too: ferry_manifest_keep_removed reads a hash with
         * no error as "copied" */
        return exec_sql(m,
                        "UPDATE files SET state = 0, hash = NULL"
                        " WHERE state = 1;"
                        "UPDATE dirs SET state = 0;",
                        "reset after a replaced destination");
}

/* Row i of n evenly spaced points in 1..max, without overflow. */
static int64_t spread(int64_t max, unsigned i, unsigned n)
{
        return 1 + max / n * i + max % n * i / n;
}

/* Text of a blob column, NUL-terminated by SQLite ("" for an empty one). */
static const char *column_str(sqlite3_stmt *s, int col)
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

static void bind_time(sqlite3_stmt *s, int i, struct ferry_time t)
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

static struct ferry_time column_time(sqlite3_stmt *s, int col)
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

int ferry_manifest_sample_done(struct ferry_manifest *m, unsigned n,
                               ferry_sample_fn fn, void *arg, unsigned *seen)
{
        *seen = 0;
        int64_t max = 0;
        int rc = ferry_manifest_max_id(m, &max);
        if (rc || !n || max < 1)
                return rc;
        sqlite3_stmt *s;
        if (sqlite3_prepare_v2(m->db,
                               "SELECT f.id, d.path, f.name, f.type, f.size,"
                               " f.mtime_ns FROM files f"
                               " JOIN dirs d ON d.id = f.dir"
                               " WHERE f.id >= ?1 AND f.state = 1"
                               " AND f.type IN (1, 2) ORDER BY f.id LIMIT 1",
                               -1, &s, NULL) != SQLITE_OK)
                return db_fail(m, "read");
        int64_t next = 1;
        bool more = true;
        for (unsigned i = 0; i < n && more; i++) {
                int64_t at = spread(max, i, n);
                sqlite3_bind_int64(s, 1, at > next ? at : next);
                int step = sqlite3_step(s);
                if (step != SQLITE_ROW) {
                        rc = step == SQLITE_DONE ? 0 : db_fail(m, "read");
                        break; /* no done row beyond this point */
                }
                next = sqlite3_column_int64(s, 0) + 1;
                struct ferry_done_file f = {
                        .id = sqlite3_column_int64(s, 0),
                        .dir = column_str(s, 1),
                        .name = column_str(s, 2),
                        .type = (enum ferry_ftype)sqlite3_column_int(s, 3),
                        .size = (uint64_t)sqlite3_column_int64(s, 4),
                        .mtime = column_time(s, 5),
                };
                (*seen)++;
                more = fn(&f, arg);
                sqlite3_reset(s);
        }
        sqlite3_finalize(s);
        return rc;
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
                            size_t len, int64_t *id, bool *marking)
{
        sqlite3_stmt *s = stmt(m, S_DIR_FIND);
        if (!s)
                return db_fail(m, "read");
        bind_bytes(s, 1, path, len);
        int rc = sqlite3_step(s);
        *id = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : 0;
        if (marking)
                *marking = rc != SQLITE_ROW || sqlite3_column_int64(s, 5) < 0;
        sqlite3_reset(s);
        return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : db_fail(m, "read");
}

static size_t parent_len(const char *path, size_t len)
{
        while (len && path[len - 1] != '/')
                len--;
        return len ? len - 1 : 0;
}

/* A new directory D of P: a file row named D in P (a file that became this
 * directory) is no longer in SRC. */
static int remove_file_named(struct ferry_manifest *m, int64_t parent,
                             const char *path, size_t len, int64_t gen)
{
        size_t plen = parent_len(path, len), skip = plen ? plen + 1 : 0;
        sqlite3_stmt *s = stmt(m, S_FILE_REMOVE_NAME);
        if (!s)
                return db_fail(m, "write");
        sqlite3_bind_int64(s, 1, parent);
        bind_bytes(s, 2, path + skip, len - skip);
        sqlite3_bind_int64(s, 3, gen);
        return exec_stmt(m, s, "file update");
}

int ferry_manifest_dir_upsert(struct ferry_manifest *m, const char *path,
                              size_t len, const struct ferry_stat *st,
                              int64_t gen, int64_t *id, bool *is_new,
                              bool *marking)
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
                        !ferry_time_eq(column_time(s, 4), st->mtime);
                /* an unchanged directory cannot have lost entries (its
                 * mtime would have moved), so its rows are only read; the
                 * count in ferry_manifest_dir_listed checks that anyway */
                *marking = changed || sqlite3_column_int64(s, 5) < 0;
                sqlite3_reset(s);
                *is_new = false;
                s = stmt(m, S_DIR_UPDATE);
                if (!s)
                        return db_fail(m, "write");
                sqlite3_bind_int64(s, 1, *id);
                sqlite3_bind_int64(s, 2, st->mode);
                sqlite3_bind_int64(s, 3, st->uid);
                sqlite3_bind_int64(s, 4, st->gid);
                bind_time(s, 5, st->mtime);
                sqlite3_bind_int64(s, 6, gen);
                sqlite3_bind_int(s, 7, changed);
                sqlite3_bind_int(s, 8, *marking);
                return exec_stmt(m, s, "directory update");
        }
        sqlite3_reset(s);
        if (rc != SQLITE_DONE)
                return db_fail(m, "read");
        int64_t parent = 0;
        if (len) {
                rc = ferry_manifest_dir_find(m, path, parent_len(path, len),
                                             &parent, NULL);
                /* a new directory changes its parent's mtime in DST */
                if (!rc && parent)
                        rc = remove_file_named(m, parent, path, len, gen);
                if (!rc && parent)
                        rc = ferry_manifest_dir_touch(m, parent);
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
        bind_time(s, 6, st->mtime);
        sqlite3_bind_int64(s, 7, gen);
        rc = exec_stmt(m, s, "directory insert");
        if (rc)
                return rc;
        *id = sqlite3_last_insert_rowid(m->db);
        *is_new = true;
        *marking = true;
        return 0;
}

int ferry_manifest_dir_listed(struct ferry_manifest *m, int64_t id, int64_t gen,
                              bool marking, uint64_t seen)
{
        bool again = false;
        sqlite3_stmt *s;
        if (marking) {
                /* the rows this scan did not write are gone from SRC */
                if (!(s = stmt(m, S_DIR_UNSEEN)))
                        return db_fail(m, "write");
                sqlite3_bind_int64(s, 1, id);
                sqlite3_bind_int64(s, 2, gen);
                int rc = exec_stmt(m, s, "file update");
                if (rc)
                        return rc;
        } else {
                /* Only read: every row was seen iff there are as many rows
                 * as entries (each entry has its own row). If the mtime
                 * lied, keep them all this time and mark the next time. */
                if (!(s = stmt(m, S_DIR_COUNT)))
                        return db_fail(m, "read");
                sqlite3_bind_int64(s, 1, id);
                int rc = sqlite3_step(s);
                int64_t rows =
                        rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : -1;
                sqlite3_reset(s);
                if (rc != SQLITE_ROW)
                        return db_fail(m, "read");
                again = (uint64_t)rows != seen;
        }
        if (!(s = stmt(m, S_DIR_LISTED)))
                return db_fail(m, "write");
        sqlite3_bind_int64(s, 1, id);
        sqlite3_bind_int64(s, 2, gen);
        sqlite3_bind_int(s, 3, again);
        return exec_stmt(m, s, "directory update");
}

/* Binds path and the range of its subtree, ["path/", "path0") ('0' follows
 * '/'), to the parameters i, i + 1 and i + 2 of s. */
static int bind_subtree(sqlite3_stmt *s, int i, const char *path, size_t len)
{
        char *r = malloc(len + 1);
        if (!r)
                return ENOMEM;
        memcpy(r, path, len);
        bind_bytes(s, i, path, len);
        r[len] = '/';
        sqlite3_bind_blob(s, i + 1, r, (int)len + 1, SQLITE_TRANSIENT);
        r[len] = '0';
        sqlite3_bind_blob(s, i + 2, r, (int)len + 1, SQLITE_TRANSIENT);
        free(r);
        return 0;
}

int ferry_manifest_subtree_removed(struct ferry_manifest *m, const char *path,
                                   size_t len, int64_t gen)
{
        sqlite3_stmt *s = stmt(m, S_SUBTREE_REMOVED);
        if (!s)
                return db_fail(m, "write");
        sqlite3_bind_int64(s, 1, gen);
        if (bind_subtree(s, 2, path, len))
                return fail(m, "out of memory");
        return exec_stmt(m, s, "file update");
}

/* Runs sql, a statement with ?1, once with row bound to it. */
static int exec_sql_id(struct ferry_manifest *m, const char *sql, int64_t row)
{
        sqlite3_stmt *s;
        if (sqlite3_prepare_v2(m->db, sql, -1, &s, NULL) != SQLITE_OK)
                return db_fail(m, "write");
        sqlite3_bind_int64(s, 1, row);
        int rc = exec_stmt(m, s, "update");
        sqlite3_finalize(s);
        return rc;
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

int ferry_manifest_mark_unseen(struct ferry_manifest *m, int64_t gen)
{
        return by_id(m, S_MARK_UNSEEN, gen, "file update");
}

int ferry_manifest_dir_touch(struct ferry_manifest *m, int64_t id)
{
        return by_id(m, S_DIR_TOUCH, id, "directory update");
}

int ferry_manifest_dir_chain_touch(struct ferry_manifest *m, int64_t file)
{
        return by_id(m, S_DIR_CHAIN_TOUCH, file, "directory update");
}

int ferry_manifest_dir_applied(struct ferry_manifest *m, int64_t id)
{
        return by_id(m, S_DIR_APPLIED, id, "directory update");
}

int ferry_manifest_dir_defer(struct ferry_manifest *m, int64_t id)
{
        /* an mtime no directory has: the next scan finds it changed */
        return exec_sql_id(m,
                           "UPDATE dirs SET state = 1, mtime_ns = -1"
                           " WHERE id = ?1",
                           id);
}

int ferry_manifest_dir_delete(struct ferry_manifest *m, int64_t id)
{
        return by_id(m, S_DIR_DELETE, id, "directory delete");
}

/* Binds f's side, step and errno to parameters first.. first + 2; NULLs
 * when f is NULL. */
static void bind_failure(sqlite3_stmt *s, int first,
                         const struct ferry_failure *f)
{
        if (!f)
                return;
        sqlite3_bind_int(s, first, (int)f->side);
        sqlite3_bind_int(s, first + 1, (int)f->step);
        sqlite3_bind_int(s, first + 2, f->err);
}

int ferry_manifest_dir_set_error(struct ferry_manifest *m, int64_t id,
                                 const struct ferry_failure *f,
                                 const char *error)
{
        sqlite3_stmt *s = stmt(m, S_DIR_ERROR);
        if (!s)
                return db_fail(m, "write");
        sqlite3_bind_int64(s, 1, id);
        if (error)
                sqlite3_bind_text(s, 2, error, -1, SQLITE_TRANSIENT);
        bind_failure(s, 3, error ? f : NULL);
        return exec_stmt(m, s, "directory update");
}

int ferry_manifest_keep_subtree(struct ferry_manifest *m, const char *path,
                                size_t len, int64_t gen)
{
        /* its directories count as listed: their rows stay part of SRC */
        const char *sql = len ? "UPDATE dirs SET gen = ?1,"
                                " listed = ?1"
                                " WHERE path = ?2 OR (path >= ?3"
                                " AND path < ?4)"
                              : "UPDATE dirs SET gen = ?1,"
                                " listed = ?1";
        sqlite3_stmt *d;
        if (sqlite3_prepare_v2(m->db, sql, -1, &d, NULL) != SQLITE_OK)
                return db_fail(m, "write");
        sqlite3_bind_int64(d, 1, gen);
        int rc = len && bind_subtree(d, 2, path, len)
                         ? fail(m, "out of memory")
                         : exec_stmt(m, d, "directory update");
        sqlite3_finalize(d);
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
        bind_time(s, first + 1, st->mtime);
        bind_time(s, first + 2, st->ctime);
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
                               bool dir_is_new, bool marking, const char *name,
                               size_t len, const struct ferry_stat *st,
                               int64_t gen, bool hard_links,
                               enum ferry_upsert *res)
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
        int state = sqlite3_column_int(s, 7);
        bool same = sqlite3_column_int(s, 1) == (int)ftype_of(st->mode) &&
                    (uint64_t)sqlite3_column_int64(s, 2) == st->size &&
                    ferry_time_eq(column_time(s, 3), st->mtime) &&
                    ferry_time_eq(column_time(s, 4), st->ctime) &&
                    (uint32_t)sqlite3_column_int64(s, 5) == st->mode &&
                    (uint64_t)sqlite3_column_int64(s, 6) == st->ino &&
                    state != ST_REMOVED;
        /* a name listed twice (a directory changing while it is read)
         * must not be handed out twice */
        m->upserted = sqlite3_column_int64(s, 8) != gen ? id : 0;
        sqlite3_reset(s);
        if (!same) {
                *res = UP_CHANGED;
                return file_update(m, id, st, gen, hard_links);
        }
        bool unchanged = state == ST_DONE || state == ST_SKIPPED;
        *res = unchanged ? UP_UNCHANGED : UP_RESUMED;
        if (unchanged && !marking)
                return 0; /* part of this scan through dirs.listed */
        s = stmt(m, S_FILE_SEEN);
        if (!s)
                return db_fail(m, "write");
        sqlite3_bind_int64(s, 1, id);
        sqlite3_bind_int64(s, 2, gen);
        return exec_stmt(m, s, "file update");
}

/* A removed or vanished first name with no other name to take over: no
 * longer a first name, so later scans do not elect for it again. */
static int forget_group(struct ferry_manifest *m, int64_t old)
{
        return by_id(m, S_FORGET_GROUP, old, "file update");
}

/* One hardlink group: a new first name for the followers of old, the
 * group's other first name if the scan already made one (a name seen after
 * old was known to be gone), else the lowest follower. */
static int elect(struct ferry_manifest *m, int64_t old)
{
        sqlite3_stmt *s;
        if (sqlite3_prepare_v2(m->db,
                               "SELECT ino, dev, coalesce((SELECT min(id)"
                               " FROM files f WHERE f.ino = o.ino AND"
                               " f.dev = o.dev AND f.hl = -1 AND"
                               " f.id != o.id AND f.state NOT IN (2, 4, 5)),"
                               " (SELECT min(id) FROM files f"
                               " WHERE f.ino = o.ino AND f.dev = o.dev AND"
                               " f.hl = o.id AND f.state NOT IN (2, 4, 5)))"
                               " FROM files o WHERE o.id = ?1 AND o.hl = -1",
                               -1, &s, NULL) != SQLITE_OK)
                return db_fail(m, "read");
        sqlite3_bind_int64(s, 1, old);
        int rc = sqlite3_step(s);
        int64_t ino = 0, dev = 0, leader = 0;
        if (rc == SQLITE_ROW) {
                ino = sqlite3_column_int64(s, 0);
                dev = sqlite3_column_int64(s, 1);
                leader = sqlite3_column_int64(s, 2); /* NULL: 0, none */
        }
        sqlite3_finalize(s);
        if (rc != SQLITE_ROW && rc != SQLITE_DONE)
                return db_fail(m, "read");
        if (rc == SQLITE_ROW && !leader)
                return forget_group(m, old);
        if (!leader)
                return 0;
        /* the new first name is copied with data, the old one becomes a
         * follower (linked to it when it is copied again), and so do the
         * other names */
        if (sqlite3_prepare_v2(m->db,
                               "UPDATE files SET hl = CASE WHEN id = ?3"
                               " THEN -1 ELSE ?3 END WHERE ino = ?1"
                               " AND dev = ?2 AND (hl = ?4 OR id = ?4)",
                               -1, &s, NULL) != SQLITE_OK)
                return db_fail(m, "write");
        sqlite3_bind_int64(s, 1, ino);
        sqlite3_bind_int64(s, 2, dev);
        sqlite3_bind_int64(s, 3, leader);
        sqlite3_bind_int64(s, 4, old);
        rc = exec_stmt(m, s, "file update");
        sqlite3_finalize(s);
        return rc;
}

int ferry_manifest_elect_leader(struct ferry_manifest *m, int64_t id)
{
        return elect(m, id);
}

int ferry_manifest_elect_leaders(struct ferry_manifest *m)
{
        sqlite3_stmt *s;
        if (sqlite3_prepare_v2(m->db,
                               "SELECT min(id) FROM (SELECT min(id) AS id"
                               " FROM files WHERE state IN (4, 5) AND"
                               " state = 4 AND id > ?1 AND hl = -1"
                               " UNION ALL SELECT min(id) FROM files WHERE"
                               " state IN (4, 5) AND state = 5 AND id > ?1"
                               " AND hl = -1)",
                               -1, &s, NULL) != SQLITE_OK)
                return db_fail(m, "read");
        int64_t cursor = 0;
        int rc = 0;
        while (!rc) {
                sqlite3_bind_int64(s, 1, cursor);
                int step = sqlite3_step(s);
                if (step != SQLITE_ROW ||
                    sqlite3_column_type(s, 0) == SQLITE_NULL) {
                        sqlite3_reset(s);
                        rc = step == SQLITE_ROW || step == SQLITE_DONE
                                     ? 0
                                     : db_fail(m, "read");
                        break;
                }
                cursor = sqlite3_column_int64(s, 0);
                sqlite3_reset(s);
                rc = elect(m, cursor);
        }
        sqlite3_finalize(s);
        return rc;
}

int64_t ferry_manifest_upserted(const struct ferry_manifest *m)
{
        return m->upserted;
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
        sqlite3_bind_int(s, 11, it->dst.type);
        sqlite3_bind_int64(s, 12, (int64_t)it->dst.size);
        bind_time(s, 13, it->dst.mtime);
        return exec_stmt(m, s, "file update");
}

int ferry_manifest_file_dst(struct ferry_manifest *m, int64_t dir,
                            const char *name, size_t len,
                            struct ferry_dst_rec *rec)
{
        sqlite3_stmt *s = stmt(m, S_FILE_DST);
        if (!s)
                return db_fail(m, "read");
        sqlite3_bind_int64(s, 1, dir);
        bind_bytes(s, 2, name, len);
        int rc = sqlite3_step(s);
        memset(rec, 0, sizeof(*rec));
        if (rc == SQLITE_ROW && sqlite3_column_type(s, 0) != SQLITE_NULL) {
                rec->type = (enum ferry_ftype)sqlite3_column_int(s, 0);
                rec->size = (uint64_t)sqlite3_column_int64(s, 1);
                rec->mtime = column_time(s, 2);
        }
        sqlite3_reset(s);
        return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : db_fail(m, "read");
}

int ferry_manifest_file_set_dst(struct ferry_manifest *m, int64_t id,
                                const struct ferry_dst_rec *rec)
{
        sqlite3_stmt *s = stmt(m, S_FILE_SET_DST);
        if (!s)
                return db_fail(m, "write");
        sqlite3_bind_int64(s, 1, id);
        sqlite3_bind_int(s, 2, rec->type);
        sqlite3_bind_int64(s, 3, (int64_t)rec->size);
        bind_time(s, 4, rec->mtime);
        return exec_stmt(m, s, "file update");
}

int ferry_manifest_interrupted_since(struct ferry_manifest *m, int64_t run_id,
                                     int64_t *since)
{
        int64_t v = 0;
        sqlite3_stmt *s;
        if (sqlite3_prepare_v2(m->db,
                               "SELECT coalesce(min(started), 0) FROM runs"
                               " WHERE id < ?1 AND id > (SELECT coalesce("
                               "max(id), 0) FROM runs WHERE result IN (0, 23,"
                               " 24) AND id < ?1)",
                               -1, &s, NULL) != SQLITE_OK)
                return db_fail(m, "read");
        sqlite3_bind_int64(s, 1, run_id);
        int rc = sqlite3_step(s);
        if (rc == SQLITE_ROW)
                v = sqlite3_column_int64(s, 0);
        sqlite3_finalize(s);
        *since = v;
        return rc == SQLITE_ROW ? 0 : db_fail(m, "read");
}

int ferry_manifest_file_set_state(struct ferry_manifest *m, int64_t id,
                                  enum ferry_state state,
                                  const struct ferry_failure *f,
                                  const char *error)
{
        sqlite3_stmt *s = stmt(m, S_FILE_STATE);
        if (!s)
                return db_fail(m, "write");
        sqlite3_bind_int64(s, 1, id);
        sqlite3_bind_int(s, 2, state);
        if (error)
                sqlite3_bind_text(s, 3, error, -1, SQLITE_TRANSIENT);
        bind_failure(s, 4, f);
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
static int put_leader(struct ferry_batch *b, sqlite3_stmt *s,
                      struct ferry_item *it)
{
        it->link_off = 0;
        if (sqlite3_column_type(s, 17) == SQLITE_NULL ||
            sqlite3_column_int(s, 17) != ST_DONE ||
            !sqlite3_column_int(s, 18) || sqlite3_column_bytes(s, 21) != 16)
                return 0;
        const char *dir = sqlite3_column_blob(s, 19);
        size_t dlen = (size_t)sqlite3_column_bytes(s, 19);
        const char *name = sqlite3_column_blob(s, 20);
        size_t nlen = (size_t)sqlite3_column_bytes(s, 20);
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
        memcpy(it->hash, sqlite3_column_blob(s, 21), 16);
        return rc;
}

static int read_item(struct ferry_batch *b, sqlite3_stmt *s, enum ferry_query q)
{
        struct ferry_item *it = &b->items[b->n];
        memset(it, 0, sizeof(*it));
        it->id = sqlite3_column_int64(s, 0);
        it->dir_id = sqlite3_column_int64(s, 1);
        if (put_blob(b, s, 2, &it->dir_off) || put_blob(b, s, 3, &it->name_off))
                return ENOMEM;
        it->type = (enum ferry_ftype)sqlite3_column_int(s, 4);
        it->st.size = (uint64_t)sqlite3_column_int64(s, 5);
        it->st.mtime = column_time(s, 6);
        it->st.ctime = column_time(s, 7);
        it->st.mode = (uint32_t)sqlite3_column_int64(s, 8);
        it->st.uid = (uint32_t)sqlite3_column_int64(s, 9);
        it->st.gid = (uint32_t)sqlite3_column_int64(s, 10);
        it->st.dev = (uint64_t)sqlite3_column_int64(s, 11);
        it->st.ino = (uint64_t)sqlite3_column_int64(s, 12);
        if (sqlite3_column_bytes(s, 13) == 16)
                memcpy(it->hash, sqlite3_column_blob(s, 13), 16);
        if (sqlite3_column_type(s, 14) != SQLITE_NULL) {
                it->dst.type = (enum ferry_ftype)sqlite3_column_int(s, 14);
                it->dst.size = (uint64_t)sqlite3_column_int64(s, 15);
                it->dst.mtime = column_time(s, 16);
        }
        if (q == Q_NEXT_PASS && put_leader(b, s, it))
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
                if (read_item(b, s, q)) {
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
        int64_t v[2] = {0, 0};
        int rc = select_ints(m,
                             "SELECT count(*), sum(CASE WHEN type = 1"
                             " AND (hl IS NULL OR hl = -1) THEN size END)"
                             " FROM files WHERE state = 0 AND gen >= ?1",
                             gen, v, 2);
        *files = (uint64_t)v[0];
        *bytes = (uint64_t)v[1];
        return rc;
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

/* The count(*) of sql, whose ?1 (if any) is gen. */
static int count_rows(struct ferry_manifest *m, const char *sql, int64_t gen,
                      uint64_t *files)
{
        int64_t n = 0;
        int rc = select_ints(m, sql, gen, &n, 1);
        *files = (uint64_t)n;
        return rc;
}

int ferry_manifest_count_done(struct ferry_manifest *m, uint64_t *files)
{
        return count_rows(m, "SELECT count(*) FROM files WHERE state = 1", 0,
                          files);
}

int ferry_manifest_count_removed(struct ferry_manifest *m, int64_t gen,
                                 uint64_t *files)
{
        return count_rows(m,
                          "SELECT count(*) FROM files WHERE state IN"
                          " (4, 5) AND state = 5 AND gen = ?1",
                          gen, files);
}

int ferry_manifest_keep_removed(struct ferry_manifest *m, int64_t gen)
{
        /* A row removed by scan gen held, before, what it holds now (the
         * marks that remove a row change neither its hash nor its error):
         * a hash with no error is a copy (file_done clears the error; a
         * row made pending again keeps its hash but gets an error, or,
         * after a replaced DST, loses the hash). A first name whose group
         * was all removed lost its mark (forget_group): its other names
         * still point to it. */
        static const char *const sql[] = {
                "UPDATE files SET hl = -1 WHERE state IN (4, 5)"
                " AND state = 5 AND gen = ?1 AND hl IS NULL"
                " AND EXISTS (SELECT 1 FROM files f WHERE f.ino = files.ino"
                " AND f.dev = files.dev AND f.hl = files.id)",
                "UPDATE files SET state = CASE WHEN type = 3 THEN 3"
                " WHEN hash IS NOT NULL AND error IS NULL THEN 1 ELSE 0 END"
                " WHERE state IN (4, 5) AND state = 5 AND gen = ?1",
        };
        int rc = 0;
        for (size_t i = 0; i < sizeof(sql) / sizeof(sql[0]) && !rc; i++)
                rc = exec_sql_id(m, sql[i], gen);
        return rc;
}

int ferry_manifest_not_done(struct ferry_manifest *m, int64_t gen,
                            uint64_t *files)
{
        return count_rows(m,
                          "SELECT count(*) FROM files f JOIN dirs d"
                          " ON d.id = f.dir WHERE f.state IN (0, 2)"
                          " AND (f.gen = ?1 OR d.listed = ?1)",
                          gen, files);
}

static int status_counts(struct ferry_manifest *m,
                         struct ferry_status_info *info)
{
        /* files and bytes of each state, in enum ferry_state order */
        int64_t v[10] = {0};
        int rc = select_ints(m,
                             "SELECT sum(state = 0), sum(size * (state = 0)),"
                             " sum(state = 1), sum(size * (state = 1)),"
                             " sum(state = 2), sum(size * (state = 2)),"
                             " sum(state = 3), sum(size * (state = 3)),"
                             " sum(state = 4), sum(size * (state = 4))"
                             " FROM files",
                             0, v, 10);
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
        int rc = pragma_int(m,
                            "SELECT count(*) FROM files WHERE state IN (4, 5)"
                            " AND state = 5",
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

/* Failures grouped by cause (side, step, errno), the most frequent cause
 * first; within one, directories first, then files by id; at most ?1 of
 * each cause (0: all). Columns: path, name, error, side, step, errno,
 * count of the cause, index within it. */
#define STATUS_FAILURES_SQL(D_SIDE, D_STEP, D_ERRNO, F_SIDE, F_STEP, F_ERRNO)  \
        "SELECT path, name, error, side, step, errno, n, k - 1 FROM ("         \
        " SELECT path, name, error, side, step, errno,"                        \
        "  count(*) OVER (PARTITION BY side, step, errno) AS n,"               \
        "  row_number() OVER (PARTITION BY side, step, errno"                  \
        "   ORDER BY ord, id) AS k"                                            \
        " FROM (SELECT 0 AS ord, id, path, x'' AS name, error,"                \
        "   " D_SIDE " AS side, " D_STEP " AS step, " D_ERRNO " AS errno"      \
        "   FROM dirs WHERE error IS NOT NULL"                                 \
        "  UNION ALL"                                                          \
        "  SELECT 1, f.id, d.path, f.name, coalesce(f.error, ''),"             \
        "   " F_SIDE ", " F_STEP ", " F_ERRNO                                  \
        "   FROM files f JOIN dirs d ON d.id = f.dir WHERE f.state = 2))"      \
        " WHERE ?1 = 0 OR k <= ?1"                                             \
        " ORDER BY n DESC, side, step, errno, k"
static const char status_failures_sql[] =
        STATUS_FAILURES_SQL("fail_side", "fail_step", "fail_errno",
                            "f.fail_side", "f.fail_step", "f.fail_errno");
/* A manifest before version 5 (read without write access, so not
 * migrated) records no causes. */
static const char status_failures_v4_sql[] =
        STATUS_FAILURES_SQL("NULL", "NULL", "NULL", "NULL", "NULL", "NULL");

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

static int status_failures(struct ferry_manifest *m,
                           const struct ferry_status_req *req)
{
        sqlite3_stmt *s;
        int64_t version = 0;
        if (pragma_int(m, "PRAGMA user_version", &version))
                return FERRY_EMANIFEST;
        const char *sql =
                version < 5 ? status_failures_v4_sql : status_failures_sql;
        if (sqlite3_prepare_v2(m->db, sql, -1, &s, NULL) != SQLITE_OK)
                return db_fail(m, "read");
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
                req->on_failure(&row, req->arg);
        }
        free(buf);
        sqlite3_finalize(s);
        return rc == SQLITE_DONE ? 0 : db_fail(m, "read");
}

/* An immutable read found the manifest changed under it. */
static int moved(struct ferry_manifest *m)
{
        m->moved = true;
        return fail(m,
                    "manifest '%s' changed while status read it without "
                    "write access: run it again",
                    m->path);
}

int ferry_manifest_status(struct ferry_manifest *m,
                          struct ferry_status_info *info,
                          const struct ferry_status_req *req)
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
        /* the counts go out before the failures, from the same read;
         * a read without write access that was torn already is not
         * handed on (the caller may read again) */
        bool early = req && req->on_info && m->immutable;
        if (!rc && early && !still_alone(m))
                rc = moved(m);
        if (!rc && req && req->on_info)
                req->on_info(info, req->arg);
        /* failed counts exactly the rows status_failures lists */
        bool more = !rc && req && req->on_failure && info->failed.files;
        if (more)
                rc = status_failures(m, req);
        sqlite3_exec(m->db, "COMMIT", NULL, NULL, NULL);
        /* what was read after the early check may be torn, errors too */
        if (!m->moved && m->immutable && (!early || more) && !still_alone(m))
                rc = moved(m);
        return rc;
}

bool ferry_manifest_moved(const struct ferry_manifest *m)
{
        return m->moved;
}
