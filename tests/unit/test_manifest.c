/*
 * test_manifest.c - the SQLite manifest (src/manifest.h): schema
 * identity, refusal of files that are not ferry manifests (left byte for
 * byte untouched), job binding, upsert results, names as BLOBs, hardlink
 * leaders and followers, fill()'s limits, and status counts. SQLite itself
 * (a second connection) is the oracle for what was stored.
 */
#define _GNU_SOURCE
#include "unit.h"

#include "manifest.h"
#include "manifest/internal.h" /* MF_HL_LEADER */

#include <sqlite3.h>

struct fixture {
        char dir[PATH_MAX];
        char db[PATH_MAX + 16];
        struct ferry_manifest *m;
        struct ferry_error err;
};

/* dir_upsert's *marking, when a test does not look at it */
static bool unit_marking;

static void fx_open(struct fixture *fx)
{
        unit_tmpdir(fx->dir, "manifest");
        snprintf(fx->db, sizeof(fx->db), "%s/m.db", fx->dir);
        fx->m = NULL;
        int rc = ferry_manifest_open(fx->db, MF_CREATE, &fx->m, &fx->err);
        CHECK_EQ(rc, 0);
        if (rc)
                fprintf(stderr, "  open: %s\n", fx->err.msg);
        CHECK_EQ(ferry_manifest_bind_job(fx->m, "/the/src", "/the/dst"), 0);
}

/* mf_file_upsert, with what the row became in *res. */
static int file_upsert(struct ferry_manifest *m, int64_t dir, bool dir_is_new,
                       bool marking, const char *name, size_t len,
                       const struct ferry_stat *st, int64_t gen,
                       bool hard_links, enum ferry_upsert *res)
{
        struct ferry_entry_rec rec;
        int rc = mf_file_upsert(m, dir, dir_is_new, marking, name, len, st, gen,
                                hard_links, &rec);
        *res = rec.res;
        return rc;
}

static void fx_close(struct fixture *fx)
{
        ferry_manifest_close(fx->m);
        fx->m = NULL;
        unit_rmtree(fx->dir);
}

static struct ferry_stat mkstat(uint32_t mode, uint64_t size, int64_t mtime,
                                uint64_t ino, uint32_t nlink)
{
        struct ferry_stat st;
        memset(&st, 0, sizeof(st));
        st.mode = mode;
        st.size = size;
        st.blocks = (size + 511) / 512;
        st.mtime = (struct ferry_time){mtime, 500};
        st.ctime = (struct ferry_time){mtime + 7, 0};
        st.atime = (struct ferry_time){mtime + 3, 0};
        st.dev = 0xfe00;
        st.ino = ino;
        st.nlink = nlink;
        st.uid = 1000;
        st.gid = 100;
        return st;
}

/* One integer from the manifest, read through a connection of our own;
 * -999 when the query has no row or fails. */
static int64_t sql_int(const char *db, const char *sql, int64_t arg)
{
        sqlite3 *h = NULL;
        sqlite3_stmt *s = NULL;
        int64_t v = -999;
        if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
            sqlite3_prepare_v2(h, sql, -1, &s, NULL) == SQLITE_OK) {
                if (sqlite3_bind_parameter_count(s) >= 1)
                        sqlite3_bind_int64(s, 1, arg);
                if (sqlite3_step(s) == SQLITE_ROW)
                        v = sqlite3_column_type(s, 0) == SQLITE_NULL
                                    ? -1000
                                    : sqlite3_column_int64(s, 0);
        }
        sqlite3_finalize(s);
        sqlite3_close(h);
        return v;
}
#define SQL_NULL (-1000)

static int sql_exec(const char *db, const char *sql)
{
        sqlite3 *h = NULL;
        int rc = sqlite3_open(db, &h);
        if (rc == SQLITE_OK)
                rc = sqlite3_exec(h, sql, NULL, NULL, NULL);
        sqlite3_close(h);
        return rc;
}

static char *slurp(const char *path, size_t *len)
{
        return unit_read_file(AT_FDCWD, path, len);
}

/* path's size; -1 when it cannot be stat'ed. */
static off_t file_size(const char *path)
{
        struct stat st;
        return stat(path, &st) ? -1 : st.st_size;
}

static bool file_exists(const char *path)
{
        struct stat s;
        return stat(path, &s) == 0;
}

/* ---- identity ---- */

static void test_create_and_reopen(void)
{
        CHECK(ferry_n_migrations >= 1);
        for (int i = 1; i < ferry_n_migrations; i++)
                CHECK(ferry_migrations[i].version >
                      ferry_migrations[i - 1].version);
        const int latest = ferry_migrations[ferry_n_migrations - 1].version;

        struct fixture fx;
        fx_open(&fx);
        ferry_manifest_close(fx.m);
        fx.m = NULL;
        CHECK_EQ(sql_int(fx.db, "PRAGMA application_id", 0),
                 FERRY_APPLICATION_ID);
        CHECK_EQ(sql_int(fx.db, "PRAGMA user_version", 0), latest);
        CHECK_EQ(sql_int(fx.db,
                         "SELECT count(*) FROM sqlite_schema WHERE type ="
                         " 'table' AND name IN ('meta','dirs','files','runs')",
                         0),
                 4);

        /* reopen: writable, then read-only */
        CHECK_EQ(ferry_manifest_open(fx.db, MF_CREATE, &fx.m, &fx.err), 0);
        CHECK_EQ(ferry_manifest_bind_job(fx.m, "/the/src", "/the/dst"), 0);
        ferry_manifest_close(fx.m);
        CHECK_EQ(ferry_manifest_open(fx.db, 0, &fx.m, &fx.err), 0);
        ferry_manifest_close(fx.m);
        CHECK_EQ(ferry_manifest_open(fx.db, MF_READONLY, &fx.m, &fx.err), 0);
        ferry_manifest_close(fx.m);
        fx.m = NULL;
        CHECK_EQ(sql_int(fx.db, "PRAGMA user_version", 0), latest);

        /* a missing file is created only when asked */
        char missing[PATH_MAX + 16];
        snprintf(missing, sizeof(missing), "%s/none.db", fx.dir);
        struct ferry_manifest *m = (struct ferry_manifest *)&m;
        CHECK_EQ(ferry_manifest_open(missing, 0, &m, &fx.err), FERRY_EMANIFEST);
        CHECK(m == NULL);
        CHECK(strstr(fx.err.msg, "none.db") != NULL);
        CHECK_EQ(ferry_manifest_open(missing, MF_READONLY, &m, &fx.err),
                 FERRY_EMANIFEST);
        CHECK(!file_exists(missing));

        /* in memory: no file at all */
        CHECK_EQ(ferry_manifest_open(missing, MF_MEMORY | MF_CREATE, &m,
                                     &fx.err),
                 0);
        CHECK_EQ(ferry_manifest_bind_job(m, "/a", "/b"), 0);
        ferry_manifest_close(m);
        CHECK(!file_exists(missing));
        fx_close(&fx);
}

/* Opens path and expects a refusal that leaves the file as it was. */
static void expect_refused(const char *path, const char *what,
                           const char *msg_part)
{
        size_t before_len = 0, after_len = 0;
        char *before = slurp(path, &before_len);
        struct ferry_manifest *m = NULL;
        struct ferry_error err = {""};
        int rc = ferry_manifest_open(path, MF_CREATE, &m, &err);
        if (rc != FERRY_EMANIFEST) {
                unit_fail(__FILE__, __LINE__,
                          "%s: open returned %d, not FERRY_EMANIFEST", what,
                          rc);
                ferry_manifest_close(m);
        } else {
                fprintf(stderr, "  %s: refused: %s\n", what, err.msg);
                CHECK(m == NULL);
                if (msg_part && !strstr(err.msg, msg_part))
                        unit_fail(__FILE__, __LINE__,
                                  "%s: message '%s' lacks '%s'", what, err.msg,
                                  msg_part);
        }
        char *after = slurp(path, &after_len);
        if (!before || !after || before_len != after_len ||
            memcmp(before, after, before_len))
                unit_fail(__FILE__, __LINE__, "%s: the file was changed", what);
        else
                atomic_fetch_add(&unit_passed, 1);
        char side[PATH_MAX + 16];
        snprintf(side, sizeof(side), "%s-wal", path);
        CHECK(!file_exists(side));
        snprintf(side, sizeof(side), "%s-journal", path);
        CHECK(!file_exists(side));
        free(before);
        free(after);
}

static void make_foreign_db(const char *path, const char *extra)
{
        char sql[512];
        snprintf(sql, sizeof(sql),
                 "CREATE TABLE files (id INTEGER PRIMARY KEY, name TEXT);"
                 "INSERT INTO files (name) VALUES ('someone else''s');%s",
                 extra);
        CHECK_EQ(sql_exec(path, sql), SQLITE_OK);
}

static void test_refuses_what_is_not_a_manifest(void)
{
        char dir[PATH_MAX], path[PATH_MAX + 32];
        unit_tmpdir(dir, "manifest");
        int root = open(dir, O_RDONLY | O_DIRECTORY);

        snprintf(path, sizeof(path), "%s/text.db", dir);
        const char text[] = "my precious notes\nnot a database at all\n";
        unit_write_file(root, "text.db", text, sizeof(text) - 1);
        expect_refused(path, "text file", "not an SQLite database");

        /* 0 bytes: what a first run killed between SQLite's open and its
         * first write leaves (t55 met it). Made anew with MF_EMPTY_NEW (the
         * job's while DST does not exist); else refused, as the journal of
         * a copy cut to nothing; a reader says it is empty. */
        snprintf(path, sizeof(path), "%s/empty.db", dir);
        unit_write_file(root, "empty.db", "", 0);
        expect_refused(path, "empty file", "is empty (0 bytes)");
        {
                struct ferry_manifest *m = NULL;
                struct ferry_error err = {""};
                CHECK_EQ(ferry_manifest_open(path, MF_READONLY, &m, &err),
                         FERRY_EMANIFEST);
                CHECK(strstr(err.msg, "is empty (0 bytes)") != NULL);
                CHECK(file_size(path) == 0);
                CHECK_EQ(ferry_manifest_open(path, MF_CREATE | MF_EMPTY_NEW, &m,
                                             &err),
                         0);
                ferry_manifest_close(m);
                CHECK(file_size(path) > 0);
                CHECK_EQ(ferry_manifest_open(path, 0, &m, &err), 0);
                ferry_manifest_close(m);
        }
        snprintf(path, sizeof(path), "%s/empty-wal.db", dir);
        unit_write_file(root, "empty-wal.db", "", 0);
        {
                char wal[4096];
                unit_fill(wal, sizeof(wal), 7);
                unit_write_file(root, "empty-wal.db-wal", wal, sizeof(wal));
                struct ferry_manifest *m = NULL;
                struct ferry_error err = {""};
                CHECK_EQ(ferry_manifest_open(path, MF_CREATE | MF_EMPTY_NEW, &m,
                                             &err),
                         FERRY_EMANIFEST);
                CHECK(strstr(err.msg, "not an SQLite database") != NULL);
                CHECK(file_size(path) == 0);
                char side[sizeof(path) + 8];
                snprintf(side, sizeof(side), "%s-wal", path);
                CHECK(file_size(side) == (off_t)sizeof(wal));
                unlinkat(root, "empty-wal.db-wal", 0);
        }

        snprintf(path, sizeof(path), "%s/short.db", dir);
        unit_write_file(root, "short.db", "SQLite for", 10);
        expect_refused(path, "10-byte file", NULL);

        /* SQLite's magic followed by garbage */
        char junk[8192];
        unit_fill(junk, sizeof(junk), 42);
        memcpy(junk, "SQLite format 3", 16);
        snprintf(path, sizeof(path), "%s/junk.db", dir);
        unit_write_file(root, "junk.db", junk, sizeof(junk));
        expect_refused(path, "SQLite header then garbage", NULL);

        snprintf(path, sizeof(path), "%s/foreign.db", dir);
        make_foreign_db(path, "PRAGMA application_id = 305419896;");
        expect_refused(path, "foreign SQLite db", "not a ferry manifest");

        snprintf(path, sizeof(path), "%s/plain.db", dir);
        make_foreign_db(path, "");
        expect_refused(path, "SQLite db without application_id",
                       "not a ferry manifest");

        /* a ferry manifest from the future */
        snprintf(path, sizeof(path), "%s/future.db", dir);
        struct ferry_manifest *m = NULL;
        struct ferry_error err;
        CHECK_EQ(ferry_manifest_open(path, MF_CREATE, &m, &err), 0);
        ferry_manifest_close(m);
        char sql[64];
        snprintf(sql, sizeof(sql), "PRAGMA user_version = %d;",
                 ferry_migrations[ferry_n_migrations - 1].version + 1);
        CHECK_EQ(sql_exec(path, sql), SQLITE_OK);
        expect_refused(path, "newer schema", "newer");
        /* read-only (status) refuses it as well */
        CHECK_EQ(ferry_manifest_open(path, MF_READONLY, &m, &err),
                 FERRY_EMANIFEST);
        close(root);
        unit_rmtree(dir);
}

/* Adds rows file rows to the open manifest of fx (many pages), and
 * closes it. */
static void add_rows(struct fixture *fx, int rows)
{
        int64_t gen, dir;
        bool is_new;
        struct ferry_stat dst = mkstat(S_IFDIR | 0755, 0, 1, 1, 2);
        CHECK_EQ(ferry_manifest_begin(fx->m), 0);
        mf_next_gen(fx->m, &gen);
        mf_dir_upsert(fx->m, "", 0, &dst, gen, &dir, &is_new, &unit_marking);
        for (int i = 0; i < rows; i++) {
                char name[128];
                int n = snprintf(name, sizeof(name),
                                 "file-%06d-with-a-long-enough-name", i);
                struct ferry_stat st = mkstat(S_IFREG | 0644, (uint64_t)i,
                                              1000 + i, 10 + (uint64_t)i, 1);
                enum ferry_upsert res;
                file_upsert(fx->m, dir, is_new, true, name, (size_t)n, &st, gen,
                            true, &res);
        }
        CHECK_EQ(ferry_manifest_commit(fx->m), 0);
        ferry_manifest_close(fx->m);
        fx->m = NULL;
}

/* A real manifest with enough rows for several pages, then cut short. */
static void test_refuses_truncated_manifest(void)
{
        struct fixture fx;
        fx_open(&fx);
        add_rows(&fx, 3000);
        size_t len = 0;
        char *whole = slurp(fx.db, &len);
        CHECK(whole && len > 16 * 4096);

        char path[PATH_MAX + 32];
        snprintf(path, sizeof(path), "%s/cut.db", fx.dir);
        size_t cuts[] = {100, 4096, len / 2, len - 4096};
        const char *names[] = {"truncated inside page 1", "truncated to page 1",
                               "truncated to half", "last page missing"};
        for (size_t i = 0; i < 4; i++) {
                unlink(path);
                int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
                CHECK(write(fd, whole, cuts[i]) == (ssize_t)cuts[i]);
                close(fd);
                expect_refused(path, names[i], "damaged");
        }
        free(whole);
        fx_close(&fx);
}

/* Overwrites 8 bytes at off of path with 0xff. */
static void poke(const char *path, off_t off)
{
        int fd = open(path, O_WRONLY);
        CHECK(fd >= 0 &&
              pwrite(fd, "\xff\xff\xff\xff\xff\xff\xff\xff", 8, off) == 8);
        close(fd);
}

/* The offset of the root page of the files table: every query of files
 * (and PRAGMA quick_check) reads it. */
static off_t files_root(const char *db)
{
        int64_t root = sql_int(db,
                               "SELECT rootpage FROM sqlite_schema WHERE"
                               " name = 'files'",
                               0);
        int64_t page = sql_int(db, "PRAGMA page_size", 0);
        CHECK(root > 1 && page >= 512);
        return (off_t)((root - 1) * page);
}

/* Is the file at path byte for byte the bytes in want? */
static bool same_bytes(const char *path, const char *want, size_t want_len)
{
        size_t len = 0;
        char *have = slurp(path, &len);
        bool same = have && len == want_len && !memcmp(have, want, len);
        free(have);
        return same;
}

/* Damage deep inside, where no query of the open path looks, is found by
 * the check of the whole file that small manifests get: integrity_check up
 * to one limit, quick_check up to another. Beyond both, the first query
 * that reads it meets it, and the message says so. */
static void test_refuses_deep_damage(void)
{
        struct fixture fx;
        fx_open(&fx);
        add_rows(&fx, 3000);
        poke(fx.db, files_root(fx.db));
        expect_refused(fx.db, "files root damaged (integrity_check)",
                       "damaged");
#ifndef FERRY_TESTING
        fprintf(stderr, "  the rest skipped: built without FERRY_TESTING, "
                        "so FERRY_MANIFEST_CHECK cannot set the limits\n");
#else
        setenv("FERRY_MANIFEST_CHECK", "0,1099511627776", 1);
        expect_refused(fx.db, "files root damaged (quick_check)", "damaged");

        /* no check at open: a run and status meet the damage later */
        setenv("FERRY_MANIFEST_CHECK", "0,0", 1);
        size_t len = 0;
        char *before = slurp(fx.db, &len);
        struct ferry_status_info info;
        CHECK_EQ(ferry_manifest_open(fx.db, MF_CREATE, &fx.m, &fx.err), 0);
        CHECK_EQ(ferry_manifest_status(fx.m, &info, NULL), FERRY_EMANIFEST);
        CHECK(strstr(ferry_manifest_errmsg(fx.m), "is damaged") != NULL);
        fprintf(stderr, "  met later: %s\n", ferry_manifest_errmsg(fx.m));
        ferry_manifest_close(fx.m);
        unsetenv("FERRY_MANIFEST_CHECK");
        CHECK_EQ(ferry_manifest_open(fx.db, MF_READONLY, &fx.m, &fx.err), 0);
        CHECK_EQ(ferry_manifest_status(fx.m, &info, NULL), FERRY_EMANIFEST);
        CHECK(strstr(ferry_manifest_errmsg(fx.m), "is damaged") != NULL);
        ferry_manifest_close(fx.m);
        fx.m = NULL;
        CHECK(same_bytes(fx.db, before, len));
        free(before);
#endif
        fx_close(&fx);
}

/* A -wal left with frames by a crashed run: the main file may lag it, so
 * its size proves nothing; it is not checkpointed into a file that is
 * refused, nor by status. */
static void test_wal_left_by_a_crash(void)
{
        struct fixture fx;
        fx_open(&fx);
        add_rows(&fx, 3000);
        char wal[PATH_MAX + 32];
        snprintf(wal, sizeof(wal), "%s-wal", fx.db);
        sqlite3 *h = NULL;
        CHECK_EQ(sqlite3_open(fx.db, &h), SQLITE_OK);
        sqlite3_db_config(h, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
        CHECK_EQ(sqlite3_exec(h,
                              "INSERT INTO meta (key, value) VALUES ('x', 7);"
                              "UPDATE files SET attempts = 1 WHERE id > 2900;",
                              NULL, NULL, NULL),
                 SQLITE_OK);
        sqlite3_close(h);
        size_t db_len = 0, wal_len = 0;
        char *db_bytes = slurp(fx.db, &db_len);
        char *wal_bytes = slurp(wal, &wal_len);
        CHECK(wal_bytes && wal_len > 0);

        /* sound: status reads it and leaves both files as they were */
        struct ferry_status_info info;
        struct ferry_manifest *m = NULL;
        CHECK_EQ(ferry_manifest_open(fx.db, MF_READONLY, &m, &fx.err), 0);
        CHECK_EQ(ferry_manifest_status(m, &info, NULL), 0);
        ferry_manifest_close(m);
        CHECK(same_bytes(fx.db, db_bytes, db_len));
        CHECK(same_bytes(wal, wal_bytes, wal_len));

        /* damaged in the main file: refused, main file and -wal as found */
        poke(fx.db, files_root(fx.db));
        free(db_bytes);
        db_bytes = slurp(fx.db, &db_len);
        CHECK_EQ(ferry_manifest_open(fx.db, MF_CREATE, &m, &fx.err),
                 FERRY_EMANIFEST);
        CHECK(strstr(fx.err.msg, "damaged") != NULL);
        CHECK(same_bytes(fx.db, db_bytes, db_len));
        CHECK(same_bytes(wal, wal_bytes, wal_len));
        CHECK_EQ(ferry_manifest_open(fx.db, MF_READONLY, &m, &fx.err), 0);
        CHECK_EQ(ferry_manifest_status(m, &info, NULL), FERRY_EMANIFEST);
        ferry_manifest_close(m);
        CHECK(same_bytes(fx.db, db_bytes, db_len));
        CHECK(same_bytes(wal, wal_bytes, wal_len));
        free(db_bytes);
        free(wal_bytes);
        fx_close(&fx);
}

/* status leaves no -wal or -shm behind, unless a run is using them. */
static void test_status_leaves_no_wal(void)
{
        struct fixture fx;
        fx_open(&fx);
        add_rows(&fx, 100);
        char wal[PATH_MAX + 32], shm[PATH_MAX + 32];
        snprintf(wal, sizeof(wal), "%s-wal", fx.db);
        snprintf(shm, sizeof(shm), "%s-shm", fx.db);
        CHECK(!file_exists(wal) && !file_exists(shm));
        struct ferry_status_info info;
        struct ferry_manifest *r = NULL;
        CHECK_EQ(ferry_manifest_open(fx.db, MF_READONLY, &r, &fx.err), 0);
        CHECK_EQ(ferry_manifest_status(r, &info, NULL), 0);
        CHECK_EQ(info.pending.files, 100);
        ferry_manifest_close(r);
        CHECK(!file_exists(wal) && !file_exists(shm));

        /* while a writer works: status reads, and the writer goes on */
        CHECK_EQ(ferry_manifest_open(fx.db, MF_CREATE, &fx.m, &fx.err), 0);
        CHECK_EQ(ferry_manifest_begin(fx.m), 0);
        CHECK_EQ(mf_file_set_state(fx.m, 1, ST_DONE, NULL, NULL), 0);
        CHECK_EQ(ferry_manifest_commit(fx.m), 0);
        CHECK_EQ(ferry_manifest_open(fx.db, MF_READONLY, &r, &fx.err), 0);
        CHECK_EQ(ferry_manifest_status(r, &info, NULL), 0);
        CHECK_EQ(info.done.files, 1);
        ferry_manifest_close(r);
        CHECK(file_exists(wal));
        CHECK_EQ(ferry_manifest_begin(fx.m), 0);
        CHECK_EQ(mf_file_set_state(fx.m, 2, ST_DONE, NULL, NULL), 0);
        CHECK_EQ(ferry_manifest_commit(fx.m), 0);
        ferry_manifest_close(fx.m);
        fx.m = NULL;
        CHECK(!file_exists(wal) && !file_exists(shm));
        CHECK_EQ(
                sql_int(fx.db, "SELECT count(*) FROM files WHERE state = 1", 0),
                2);
        fx_close(&fx);
}

static void test_bind_job(void)
{
        struct fixture fx;
        fx_open(&fx); /* bound to /the/src -> /the/dst */
        CHECK_EQ(ferry_manifest_bind_job(fx.m, "/the/src", "/the/dst"), 0);
        CHECK_EQ(ferry_manifest_bind_job(fx.m, "/other/src", "/the/dst"),
                 FERRY_EMANIFEST);
        const char *msg = ferry_manifest_errmsg(fx.m);
        CHECK(strstr(msg, "another job") != NULL);
        CHECK(strstr(msg, "/the/src") != NULL); /* names the real job */
        CHECK(strstr(msg, "/the/dst") != NULL);
        CHECK_EQ(ferry_manifest_bind_job(fx.m, "/the/src", "/the/dst2"),
                 FERRY_EMANIFEST);
        CHECK(strstr(ferry_manifest_errmsg(fx.m), "another job") != NULL);
        CHECK_EQ(ferry_manifest_bind_job(fx.m, "/the/sr", "/the/dst"),
                 FERRY_EMANIFEST); /* a prefix is another path */
        /* a refused bind leaves no transaction open and nothing changed */
        CHECK_EQ(ferry_manifest_begin(fx.m), 0);
        CHECK_EQ(ferry_manifest_commit(fx.m), 0);
        ferry_manifest_close(fx.m);
        CHECK_EQ(ferry_manifest_open(fx.db, 0, &fx.m, &fx.err), 0);
        CHECK_EQ(ferry_manifest_bind_job(fx.m, "/other", "/dst"),
                 FERRY_EMANIFEST);
        CHECK_EQ(ferry_manifest_bind_job(fx.m, "/the/src", "/the/dst"), 0);
        struct ferry_status_info info;
        memset(&info, 0, sizeof(info));
        CHECK_EQ(ferry_manifest_status(fx.m, &info, NULL), 0);
        CHECK_STR(info.src, "/the/src");
        CHECK_STR(info.dst, "/the/dst");
        fx_close(&fx);
}

/* --adopt: a job whose trees moved is pointed at the new paths; the
 * stored paths read back whole however long (sized from the blob), and
 * the notes of a re-point are set */
static void test_repoint_job(void)
{
        struct fixture fx;
        char *src = NULL, *dst = NULL, note[8];
        fx_open(&fx); /* bound to /the/src -> /the/dst */
        CHECK_EQ(ferry_manifest_job_paths(fx.m, &src, &dst), 0);
        CHECK_STR(src, "/the/src");
        CHECK_STR(dst, "/the/dst");
        free(src);
        free(dst);
        CHECK_EQ(ferry_manifest_repoint_job(fx.m, "/new/src", "/the/dst", false,
                                            true),
                 0);
        CHECK_EQ(ferry_manifest_bind_job(fx.m, "/new/src", "/the/dst"), 0);
        CHECK_EQ(ferry_manifest_note(fx.m, MF_NOTE_DST_CHECK_ALL, note,
                                     sizeof(note)),
                 0);
        CHECK_STR(note, ""); /* only SRC moved */
        CHECK_EQ(ferry_manifest_note(fx.m, MF_NOTE_MOVE_PENDING, note,
                                     sizeof(note)),
                 0);
        CHECK_STR(note, "1");
        /* a path of 3000 bytes */
        char *longdst = malloc(3001);
        CHECK(longdst != NULL);
        memset(longdst, 'd', 3000);
        longdst[0] = '/';
        longdst[3000] = '\0';
        CHECK_EQ(ferry_manifest_repoint_job(fx.m, "/new/src", longdst, true,
                                            false),
                 0);
        CHECK_EQ(ferry_manifest_job_paths(fx.m, &src, &dst), 0);
        CHECK_STR(src, "/new/src");
        CHECK_STR(dst, longdst);
        free(src);
        free(dst);
        CHECK_EQ(ferry_manifest_note(fx.m, MF_NOTE_DST_CHECK_ALL, note,
                                     sizeof(note)),
                 0);
        CHECK_STR(note, "1");
        CHECK_EQ(ferry_manifest_note(fx.m, MF_NOTE_MOVE_PENDING, note,
                                     sizeof(note)),
                 0);
        CHECK_STR(note, "");
        CHECK_EQ(ferry_manifest_bind_job(fx.m, "/new/src", longdst), 0);
        CHECK_EQ(ferry_manifest_bind_job(fx.m, "/the/src", "/the/dst"),
                 FERRY_EMANIFEST);
        free(longdst);
        fx_close(&fx);
}

/* the library refuses --adopt on a verify, as the command line does (a
 * verify never re-points a job): before it looks at any path */
static void test_adopt_not_with_verify(void)
{
        struct ferry_options opt;
        ferry_options_init(&opt);
        opt.src = "/nonexistent/src";
        opt.dst = "/nonexistent/dst";
        opt.adopt = true;
        opt.verify = FERRY_VERIFY_DEST;
        struct ferry_job *job = NULL;
        struct ferry_error err = {{0}};
        CHECK_EQ(ferry_job_open(&opt, &job, &err), FERRY_EUSAGE);
        CHECK(job == NULL);
        CHECK(strstr(err.msg, "--adopt") != NULL);
}

/* ---- rows ---- */

struct named {
        const char *name;
        size_t len;
};

static void test_upserts_and_byte_names(void)
{
        struct fixture fx;
        fx_open(&fx);
        char longname[256];
        memset(longname, 'L', 255);
        longname[255] = '\0';
        const struct named names[] = {
                {"plain", 5},
                {"new\nline", 8},
                {"\xff\xfe not utf-8", 12},
                {"tab\there\r", 9},
                {"emoji \xf0\x9f\x98\x80", 10},
                {longname, 255},
        };
        enum { N = sizeof(names) / sizeof(names[0]) };
        const char sub[] = "sub\ndir \xc3\x28";
        int64_t gen = 0, root = 0, dsub = 0, again = 0;
        bool is_new = false;
        struct ferry_stat dst = mkstat(S_IFDIR | 0755, 0, 5, 2, 3);

        CHECK_EQ(ferry_manifest_begin(fx.m), 0);
        CHECK_EQ(mf_next_gen(fx.m, &gen), 0);
        CHECK_EQ(gen, 1);
        CHECK_EQ(mf_dir_upsert(fx.m, "", 0, &dst, gen, &root, &is_new,
                               &unit_marking),
                 0);
        CHECK(is_new);
        CHECK_EQ(mf_dir_upsert(fx.m, sub, sizeof(sub) - 1, &dst, gen, &dsub,
                               &is_new, &unit_marking),
                 0);
        CHECK(is_new && dsub != root);
        CHECK_EQ(mf_dir_upsert(fx.m, "", 0, &dst, gen, &again, &is_new,
                               &unit_marking),
                 0);
        CHECK(!is_new && again == root);
        int64_t found = 0;
        CHECK_EQ(mf_dir_find(fx.m, sub, sizeof(sub) - 1, &found, NULL), 0);
        CHECK_EQ(found, dsub);
        CHECK_EQ(mf_dir_find(fx.m, "sub", 3, &found, NULL), 0);
        CHECK_EQ(found, 0);

        for (int i = 0; i < N; i++) {
                struct ferry_stat st =
                        mkstat(S_IFREG | 0600, 100 + i, 1000 + i, 50 + i, 1);
                enum ferry_upsert res = 0;
                CHECK_EQ(file_upsert(fx.m, dsub, false, true, names[i].name,
                                     names[i].len, &st, gen, true, &res),
                         0);
                CHECK_EQ(res, UP_NEW);
        }
        CHECK_EQ(ferry_manifest_commit(fx.m), 0);
        CHECK_EQ(sql_int(fx.db, "SELECT parent FROM dirs WHERE id = ?1", dsub),
                 root);
        CHECK_EQ(sql_int(fx.db,
                         "SELECT count(*) FROM files WHERE typeof(name) !="
                         " 'blob'",
                         0),
                 0);
        CHECK_EQ(sql_int(fx.db,
                         "SELECT count(*) FROM dirs WHERE typeof(path) !="
                         " 'blob'",
                         0),
                 0);

        /* the names come back byte for byte */
        int64_t max_id = 0, cursor = 0;
        max_id = sql_int(fx.db, "SELECT max(id) FROM files", 0);
        CHECK_EQ(max_id, N);
        struct ferry_batch *b = ferry_batch_new(WORK_COPY, 64);
        CHECK_EQ(mf_fill(fx.m, Q_FIRST_PASS, gen, &cursor, b, 64, UINT64_MAX),
                 0);
        CHECK_EQ(b->n, N);
        CHECK_EQ(cursor, max_id);
        for (size_t i = 0; i < b->n && i < N; i++) {
                const struct ferry_item *it = &b->items[i];
                const char *nm = ferry_batch_at(b, it->name_off);
                const char *dp = ferry_batch_at(b, it->dir_off);
                CHECK(strlen(nm) == names[i].len &&
                      !memcmp(nm, names[i].name, names[i].len));
                CHECK(strlen(dp) == sizeof(sub) - 1 &&
                      !memcmp(dp, sub, sizeof(sub) - 1));
                CHECK_EQ(it->dir_id, dsub);
                CHECK_EQ(it->type, FT_REG);
                CHECK_EQ(it->st.size, 100 + i);
                CHECK_EQ(it->st.mtime.sec, 1000 + (int64_t)i);
                CHECK_EQ(it->st.mtime.nsec, 500);
                CHECK_EQ(it->st.ctime.sec, 1007 + (int64_t)i);
                CHECK_EQ(it->st.ctime.nsec, 0);
                CHECK_EQ(it->st.mode, S_IFREG | 0600);
                CHECK_EQ(it->st.ino, 50 + i);
                CHECK_EQ(it->st.uid, 1000);
                CHECK_EQ(it->st.gid, 100);
                CHECK_EQ(it->link_off, 0);
        }

        /* gen 2: nothing changed, nothing copied yet: resumed */
        struct ferry_item done = b->items[0];
        memset(done.hash, 0xab, sizeof(done.hash));
        CHECK_EQ(ferry_manifest_begin(fx.m), 0);
        CHECK_EQ(mf_next_gen(fx.m, &gen), 0);
        CHECK_EQ(gen, 2);
        for (int i = 0; i < N; i++) {
                struct ferry_stat st =
                        mkstat(S_IFREG | 0600, 100 + i, 1000 + i, 50 + i, 1);
                enum ferry_upsert res = 0;
                file_upsert(fx.m, dsub, false, true, names[i].name,
                            names[i].len, &st, gen, true, &res);
                CHECK_EQ(res, UP_RESUMED);
        }
        /* the first is copied, the second fails */
        CHECK_EQ(mf_file_done(fx.m, &done), 0);
        CHECK_EQ(mf_file_set_state(fx.m, b->items[1].id, ST_FAILED, NULL,
                                   "read source: EIO"),
                 0);
        CHECK_EQ(ferry_manifest_commit(fx.m), 0);
        CHECK_EQ(sql_int(fx.db, "SELECT state FROM files WHERE id = ?1",
                         done.id),
                 ST_DONE);
        CHECK_EQ(sql_int(fx.db, "SELECT length(hash) FROM files WHERE id = ?1",
                         done.id),
                 16);
        CHECK_EQ(sql_int(fx.db, "SELECT attempts FROM files WHERE id = ?1",
                         b->items[1].id),
                 1);

        /* gen 3: done and unchanged, failed, changed, type change */
        CHECK_EQ(ferry_manifest_begin(fx.m), 0);
        CHECK_EQ(mf_next_gen(fx.m, &gen), 0);
        enum ferry_upsert res = 0;
        struct ferry_stat st = mkstat(S_IFREG | 0600, 100, 1000, 50, 1);
        file_upsert(fx.m, dsub, false, true, names[0].name, names[0].len, &st,
                    gen, true, &res);
        CHECK_EQ(res, UP_UNCHANGED);
        st = mkstat(S_IFREG | 0600, 101, 1001, 51, 1);
        file_upsert(fx.m, dsub, false, true, names[1].name, names[1].len, &st,
                    gen, true, &res);
        CHECK_EQ(res, UP_RESUMED);                      /* failed before */
        st = mkstat(S_IFREG | 0600, 102, 99999, 52, 1); /* new mtime */
        file_upsert(fx.m, dsub, false, true, names[2].name, names[2].len, &st,
                    gen, true, &res);
        CHECK_EQ(res, UP_CHANGED);
        st = mkstat(S_IFLNK | 0777, 103, 1003, 53, 1); /* now a symlink */
        file_upsert(fx.m, dsub, false, true, names[3].name, names[3].len, &st,
                    gen, true, &res);
        CHECK_EQ(res, UP_CHANGED);
        struct ferry_stat fifo = mkstat(S_IFIFO | 0600, 0, 7, 99, 1);
        file_upsert(fx.m, root, false, true, "fifo", 4, &fifo, gen, true, &res);
        CHECK_EQ(res, UP_NEW);
        CHECK_EQ(ferry_manifest_commit(fx.m), 0);
        CHECK_EQ(sql_int(fx.db,
                         "SELECT type FROM files WHERE dir = ?1 AND name ="
                         " CAST('tab' || char(9) || 'here' || char(13) AS"
                         " BLOB)",
                         dsub),
                 FT_LINK);
        CHECK_EQ(sql_int(fx.db,
                         "SELECT state FROM files WHERE name = "
                         "CAST('fifo' AS BLOB)",
                         0),
                 ST_SKIPPED);

        /* gen 4: the done row's ctime alone moves: pending for its
         * metadata (the copier's ctime rule decides), hash kept */
        CHECK_EQ(ferry_manifest_begin(fx.m), 0);
        CHECK_EQ(mf_next_gen(fx.m, &gen), 0);
        file_upsert(fx.m, root, false, true, "fifo", 4, &fifo, gen, true, &res);
        CHECK_EQ(res, UP_UNCHANGED); /* skipped counts as handled */
        st = mkstat(S_IFREG | 0600, 100, 1000, 50, 1);
        st.ctime.nsec++; /* chmod or link: only ctime moved */
        file_upsert(fx.m, dsub, false, true, names[0].name, names[0].len, &st,
                    gen, true, &res);
        CHECK_EQ(res, UP_META);
        /* a new directory's entries go in without a lookup */
        int64_t fresh = 0;
        CHECK_EQ(mf_dir_upsert(fx.m, "fresh", 5, &dst, gen, &fresh, &is_new,
                               &unit_marking),
                 0);
        CHECK(is_new);
        file_upsert(fx.m, fresh, true, true, "x", 1, &st, gen, true, &res);
        CHECK_EQ(res, UP_NEW);
        CHECK_EQ(ferry_manifest_commit(fx.m), 0);
        CHECK_EQ(sql_int(fx.db, "SELECT state FROM files WHERE id = ?1",
                         done.id),
                 ST_PENDING);
        CHECK(sql_int(fx.db, "SELECT hash FROM files WHERE id = ?1", done.id) !=
              SQL_NULL);
        CHECK_EQ(
                sql_int(fx.db, "SELECT need FROM files WHERE id = ?1", done.id),
                MF_NEED_META);

        /* gen 5: its size moves too: its data, pending, hash gone */
        CHECK_EQ(ferry_manifest_begin(fx.m), 0);
        CHECK_EQ(mf_next_gen(fx.m, &gen), 0);
        st.size++;
        file_upsert(fx.m, dsub, false, true, names[0].name, names[0].len, &st,
                    gen, true, &res);
        CHECK_EQ(res, UP_CHANGED);
        CHECK_EQ(ferry_manifest_commit(fx.m), 0);
        CHECK_EQ(
                sql_int(fx.db, "SELECT hash FROM files WHERE id = ?1", done.id),
                SQL_NULL);
        CHECK_EQ(
                sql_int(fx.db, "SELECT need FROM files WHERE id = ?1", done.id),
                MF_NEED_DATA);

        /* a rolled back transaction leaves nothing */
        CHECK_EQ(ferry_manifest_begin(fx.m), 0);
        file_upsert(fx.m, root, false, true, "ghost", 5, &st, gen, true, &res);
        CHECK_EQ(ferry_manifest_rollback(fx.m), 0);
        CHECK_EQ(ferry_manifest_rollback(fx.m), 0); /* none open: fine */
        CHECK_EQ(sql_int(fx.db,
                         "SELECT count(*) FROM files WHERE name ="
                         " CAST('ghost' AS BLOB)",
                         0),
                 0);
        ferry_batch_free(b);
        fx_close(&fx);
}

/* Upserts one regular file; for a new row, returns its id. */
static int64_t add_file(struct fixture *fx, int64_t dir, const char *name,
                        uint64_t ino, uint64_t dev, uint32_t nlink,
                        uint64_t size, int64_t gen, bool hard_links)
{
        struct ferry_stat st = mkstat(S_IFREG | 0644, size, 5000, ino, nlink);
        st.dev = dev;
        enum ferry_upsert res;
        CHECK_EQ(file_upsert(fx->m, dir, false, true, name, strlen(name), &st,
                             gen, hard_links, &res),
                 0);
        int64_t id = -1;
        CHECK_EQ(mf_max_id(fx->m, &id), 0);
        return id;
}

static bool batch_has(const struct ferry_batch *b, int64_t id,
                      const struct ferry_item **out)
{
        for (size_t i = 0; i < b->n; i++)
                if (b->items[i].id == id) {
                        if (out)
                                *out = &b->items[i];
                        return true;
                }
        return false;
}

/* Replaces *b by a new batch holding all rows of query q. */
static void fill_all(struct fixture *fx, enum mf_query q, int64_t gen,
                     struct ferry_batch **b)
{
        int64_t cursor = 0;
        ferry_batch_free(*b);
        *b = ferry_batch_new(WORK_COPY, 64);
        CHECK_EQ(mf_fill(fx->m, q, gen, &cursor, *b, 64, UINT64_MAX), 0);
}

/* The directory rows of set, deepest first: their count; the ids of the
 * first ones in ids (up to 8), the first one's path in first. */
static size_t walk_all(struct fixture *fx, enum ferry_dir_set set, int64_t gen,
                       int64_t *ids, char *first, size_t size)
{
        struct ferry_dir_walk *w = NULL;
        size_t all = 0, n = 0;
        const struct ferry_dir_row *rows = NULL;
        first[0] = '\0';
        CHECK_EQ(ferry_manifest_dir_walk(fx->m, set, gen, &w), 0);
        do {
                CHECK_EQ(ferry_manifest_dir_walk_next(fx->m, w, &rows, &n), 0);
                for (size_t i = 0; i < n; i++, all++) {
                        if (all < 8)
                                ids[all] = rows[i].id;
                        if (!all)
                                snprintf(first, size, "%s", rows[i].path);
                }
        } while (n);
        ferry_manifest_dir_walk_end(w);
        return all;
}

static void test_hardlinks(void)
{
        struct fixture fx;
        fx_open(&fx);
        int64_t gen, root, d;
        bool is_new;
        struct ferry_stat dst = mkstat(S_IFDIR | 0755, 0, 5, 2, 3);
        CHECK_EQ(ferry_manifest_begin(fx.m), 0);
        mf_next_gen(fx.m, &gen);
        mf_dir_upsert(fx.m, "", 0, &dst, gen, &root, &is_new, &unit_marking);
        mf_dir_upsert(fx.m, "d", 1, &dst, gen, &d, &is_new, &unit_marking);
        int64_t a = add_file(&fx, d, "a", 100, 7, 2, 10, gen, true);
        int64_t bb = add_file(&fx, root, "b", 100, 7, 2, 10, gen, true);
        int64_t c = add_file(&fx, root, "c", 200, 7, 1, 10, gen, true);
        int64_t e = add_file(&fx, root, "e", 100, 8, 2, 10, gen, true);
        int64_t x = add_file(&fx, root, "x", 300, 7, 2, 10, gen, false);
        int64_t y = add_file(&fx, root, "y", 300, 7, 2, 10, gen, false);
        int64_t p = add_file(&fx, root, "p", 400, 7, 2, 10, gen, true);
        int64_t q = add_file(&fx, root, "q", 400, 7, 2, 10, gen, true);
        CHECK_EQ(ferry_manifest_commit(fx.m), 0);

        const char *hl = "SELECT coalesce(hl, -1000) FROM files WHERE id = ?1";
        CHECK_EQ(sql_int(fx.db, hl, a), -1);       /* first name: leader */
        CHECK_EQ(sql_int(fx.db, hl, bb), a);       /* follower */
        CHECK_EQ(sql_int(fx.db, hl, c), SQL_NULL); /* nlink 1 */
        CHECK_EQ(sql_int(fx.db, hl, e), -1);       /* same ino, other dev */
        CHECK_EQ(sql_int(fx.db, hl, x), SQL_NULL); /* --no-hard-links */
        CHECK_EQ(sql_int(fx.db, hl, y), SQL_NULL);
        CHECK_EQ(sql_int(fx.db, hl, p), -1);
        CHECK_EQ(sql_int(fx.db, hl, q), p);

        /* bytes to copy leave followers out */
        uint64_t files = 0, bytes = 0;
        CHECK_EQ(ferry_manifest_count(fx.m, COUNT_TO_COPY, gen, &files, &bytes),
                 0);
        CHECK_EQ(files, 8);
        CHECK_EQ(bytes, 60);

        struct ferry_batch *b = NULL;
        fill_all(&fx, Q_FIRST_PASS, gen, &b);
        CHECK_EQ(b->n, 6);
        CHECK(batch_has(b, a, NULL) && !batch_has(b, bb, NULL));
        CHECK(!batch_has(b, q, NULL));

        /* leaders pending: their followers wait */
        fill_all(&fx, Q_NEXT_PASS, gen, &b);
        CHECK(!batch_has(b, bb, NULL) && !batch_has(b, q, NULL));
        CHECK(batch_has(b, c, NULL));

        /* a is copied, p failed */
        struct ferry_item it;
        memset(&it, 0, sizeof(it));
        it.id = a;
        it.st = mkstat(S_IFREG | 0644, 10, 5000, 100, 2);
        it.st.dev = 7;
        for (int i = 0; i < 16; i++)
                it.hash[i] = (uint8_t)(i * 17);
        CHECK_EQ(ferry_manifest_begin(fx.m), 0);
        CHECK_EQ(mf_file_done(fx.m, &it), 0);
        CHECK_EQ(mf_file_set_state(fx.m, p, ST_FAILED, NULL, "boom"), 0);
        CHECK_EQ(ferry_manifest_commit(fx.m), 0);

        fill_all(&fx, Q_NEXT_PASS, gen, &b);
        const struct ferry_item *f = NULL;
        CHECK(batch_has(b, bb, &f));
        if (f) {
                /* linked to the leader's path in DST, with its hash */
                CHECK(f->link_off != 0);
                CHECK_STR(ferry_batch_at(b, f->link_off), "d/a");
                CHECK_MEM(f->hash, it.hash, 16);
        }
        f = NULL;
        CHECK(batch_has(b, q, &f)); /* leader failed: copied on its own */
        if (f)
                CHECK_EQ(f->link_off, 0);
        CHECK(!batch_has(b, a, NULL)); /* done rows are not handed out */

        /* the coordinator makes q the first name instead: copied with data, and
         * p links to it once it is retried */
        CHECK_EQ(ferry_manifest_begin(fx.m), 0);
        CHECK_EQ(mf_elect_leader(fx.m, p), 0);
        CHECK_EQ(mf_elect_leader(fx.m, bb), 0); /* a follower */
        CHECK_EQ(ferry_manifest_commit(fx.m), 0);
        CHECK_EQ(sql_int(fx.db, hl, q), -1);
        CHECK_EQ(sql_int(fx.db, hl, p), q);
        CHECK_EQ(sql_int(fx.db, hl, bb), a);
        CHECK_EQ(ferry_manifest_begin(fx.m), 0);
        CHECK_EQ(mf_retry_failed(fx.m), 0);
        CHECK_EQ(ferry_manifest_commit(fx.m), 0);
        fill_all(&fx, Q_NEXT_PASS, gen, &b);
        CHECK(batch_has(b, q, NULL) && !batch_has(b, p, NULL));
        /* a removed first name: every removed leader is replaced */
        CHECK_EQ(sql_exec(fx.db, "UPDATE files SET state = 5 WHERE hl = -1"
                                 " AND ino = 100 AND dev = 7"),
                 SQLITE_OK);
        CHECK_EQ(ferry_manifest_begin(fx.m), 0);
        CHECK_EQ(mf_elect_leaders(fx.m), 0);
        CHECK_EQ(ferry_manifest_commit(fx.m), 0);
        CHECK_EQ(sql_int(fx.db, hl, bb), -1);
        CHECK_EQ(sql_int(fx.db, hl, a), bb);

        /* two failures in one group: a failed name is never elected */
        CHECK_EQ(ferry_manifest_begin(fx.m), 0);
        int64_t l1 = add_file(&fx, root, "l1", 500, 7, 3, 10, gen, true);
        int64_t l2 = add_file(&fx, root, "l2", 500, 7, 3, 10, gen, true);
        int64_t l3 = add_file(&fx, root, "l3", 500, 7, 3, 10, gen, true);
        CHECK_EQ(mf_file_set_state(fx.m, l1, ST_FAILED, NULL, "x"), 0);
        CHECK_EQ(mf_elect_leader(fx.m, l1), 0);
        CHECK_EQ(mf_file_set_state(fx.m, l2, ST_FAILED, NULL, "y"), 0);
        CHECK_EQ(mf_elect_leader(fx.m, l2), 0);
        CHECK_EQ(ferry_manifest_commit(fx.m), 0);
        CHECK_EQ(sql_int(fx.db, hl, l3), -1);
        CHECK_EQ(sql_int(fx.db, hl, l1), l3);
        CHECK_EQ(sql_int(fx.db, hl, l2), l3);
        /* a removed first name alone is no first name any more */
        CHECK_EQ(sql_exec(fx.db, "UPDATE files SET state = 5 WHERE ino = 300"
                                 " OR ino = 400"),
                 SQLITE_OK);
        CHECK_EQ(ferry_manifest_begin(fx.m), 0);
        CHECK_EQ(mf_elect_leaders(fx.m), 0);
        CHECK_EQ(ferry_manifest_commit(fx.m), 0);
        CHECK_EQ(sql_int(fx.db,
                         "SELECT count(*) FROM files WHERE state = 5 AND"
                         " hl = ?1",
                         -1),
                 0);

        /* a hardlink that changes back to one name loses its leader */
        CHECK_EQ(ferry_manifest_begin(fx.m), 0);
        mf_next_gen(fx.m, &gen);
        struct ferry_stat st = mkstat(S_IFREG | 0644, 10, 5000, 100, 1);
        st.dev = 7;
        st.ctime.nsec += 1;
        enum ferry_upsert res;
        file_upsert(fx.m, root, false, true, "b", 1, &st, gen, true, &res);
        CHECK_EQ(res, UP_CHANGED);
        CHECK_EQ(ferry_manifest_commit(fx.m), 0);
        CHECK_EQ(sql_int(fx.db, hl, bb), SQL_NULL);
        ferry_batch_free(b);
        fx_close(&fx);
}

static void test_fill_limits_and_queries(void)
{
        struct fixture fx;
        fx_open(&fx);
        int64_t gen, root, da, dab;
        bool is_new;
        struct ferry_stat dst = mkstat(S_IFDIR | 0755, 0, 5, 2, 3);
        CHECK_EQ(ferry_manifest_begin(fx.m), 0);
        mf_next_gen(fx.m, &gen);
        mf_dir_upsert(fx.m, "", 0, &dst, gen, &root, &is_new, &unit_marking);
        mf_dir_upsert(fx.m, "a", 1, &dst, gen, &da, &is_new, &unit_marking);
        mf_dir_upsert(fx.m, "a/b", 3, &dst, gen, &dab, &is_new, &unit_marking);
        for (int i = 1; i <= 10; i++) {
                char name[16];
                snprintf(name, sizeof(name), "f%02d", i);
                add_file(&fx, da, name, (uint64_t)i, 7, 1, 100, gen, true);
        }
        CHECK_EQ(ferry_manifest_commit(fx.m), 0);
        CHECK_EQ(sql_int(fx.db, "SELECT parent FROM dirs WHERE id = ?1", dab),
                 da);

        struct ferry_batch *b = ferry_batch_new(WORK_COPY, 100);
        int64_t cursor = 0;

        /* pages of 3: every row once, in order */
        ferry_batch_free(b);
        b = ferry_batch_new(WORK_COPY, 100);
        cursor = 0;
        int64_t last = 0;
        int pages = 0;
        bool ordered = true;
        for (;;) {
                size_t before = b->n;
                CHECK_EQ(mf_fill(fx.m, Q_FIRST_PASS, gen, &cursor, b, 3,
                                 UINT64_MAX),
                         0);
                if (b->n == before)
                        break;
                CHECK(b->n - before <= 3);
                for (size_t i = before; i < b->n; i++) {
                        ordered &= b->items[i].id > last;
                        last = b->items[i].id;
                }
                pages++;
        }
        CHECK(ordered);
        CHECK_EQ(b->n, 10);
        CHECK_EQ(pages, 4);

        /* the batch's room limits max */
        struct ferry_batch *small = ferry_batch_new(WORK_COPY, 4);
        cursor = 0;
        CHECK_EQ(mf_fill(fx.m, Q_FIRST_PASS, gen, &cursor, small, 100,
                         UINT64_MAX),
                 0);
        CHECK_EQ(small->n, 4);
        ferry_batch_free(small);

        /* the byte limit stops early, and is no error */
        small = ferry_batch_new(WORK_COPY, 100);
        cursor = 0;
        CHECK_EQ(mf_fill(fx.m, Q_FIRST_PASS, gen, &cursor, small, 100, 250), 0);
        CHECK_EQ(small->n, 3);
        CHECK_EQ(cursor, 3);
        ferry_batch_free(small);

        /* another generation sees only what its scan saw */
        fill_all(&fx, Q_FIRST_PASS, gen + 1, &b);
        CHECK_EQ(b->n, 0);
        CHECK_EQ(ferry_manifest_begin(fx.m), 0);
        mf_next_gen(fx.m, &gen);
        mf_dir_upsert(fx.m, "", 0, &dst, gen, &root, &is_new, &unit_marking);
        mf_dir_upsert(fx.m, "a", 1, &dst, gen, &da, &is_new, &unit_marking);
        for (int i = 1; i <= 4; i++) {
                char name[16];
                snprintf(name, sizeof(name), "f%02d", i);
                add_file(&fx, da, name, (uint64_t)i, 7, 1, 100, gen, true);
        }
        /* "a" was marked row by row (its listed is still -1): the rows
         * its listing did not name are removed; "a/b" was not seen */
        CHECK(unit_marking);
        CHECK_EQ(mf_dir_listed(fx.m, da, gen, unit_marking, 4), 0);
        CHECK_EQ(mf_mark_unseen(fx.m, gen), 0);
        CHECK_EQ(ferry_manifest_commit(fx.m), 0);
        CHECK_EQ(sql_int(fx.db, "SELECT count(*) FROM files WHERE state = ?1",
                         ST_REMOVED),
                 6);
        fill_all(&fx, Q_FIRST_PASS, gen, &b);
        CHECK_EQ(b->n, 4);
        fill_all(&fx, Q_PENDING, gen, &b);
        CHECK_EQ(b->n, 4);
        fill_all(&fx, Q_REMOVED_FILES, gen, &b);
        CHECK_EQ(b->n, 6);
        fill_all(&fx, Q_STALE_TEMPS, gen, &b);
        CHECK_EQ(b->n, 6);
        int64_t ids[8];
        char first[64];
        CHECK_EQ(walk_all(&fx, DIRS_REMOVED, gen, ids, first, sizeof(first)),
                 1);
        CHECK_STR(first, "a/b");
        /* dirs to apply, deepest (highest id) first */
        size_t nd =
                walk_all(&fx, DIRS_TO_APPLY, gen, ids, first, sizeof(first));
        CHECK_EQ(nd, 2);
        if (nd == 2) {
                CHECK_EQ(ids[0], da);
                CHECK_EQ(ids[1], root);
        }
        CHECK_EQ(ferry_manifest_begin(fx.m), 0);
        CHECK_EQ(mf_dir_applied(fx.m, da), 0);
        CHECK_EQ(ferry_manifest_commit(fx.m), 0);
        CHECK_EQ(walk_all(&fx, DIRS_TO_APPLY, gen, ids, first, sizeof(first)),
                 1);
        CHECK_EQ(ferry_manifest_begin(fx.m), 0);
        CHECK_EQ(mf_dir_touch(fx.m, da), 0);
        CHECK_EQ(ferry_manifest_commit(fx.m), 0);
        CHECK_EQ(walk_all(&fx, DIRS_TO_APPLY, gen, ids, first, sizeof(first)),
                 2);

        /* verify hands out done files only */
        fill_all(&fx, Q_FIRST_PASS, gen, &b);
        struct ferry_item one = b->items[0];
        CHECK_EQ(ferry_manifest_begin(fx.m), 0);
        CHECK_EQ(mf_file_done(fx.m, &one), 0);
        CHECK_EQ(ferry_manifest_commit(fx.m), 0);
        fill_all(&fx, Q_VERIFY, gen, &b);
        CHECK_EQ(b->n, 1);
        if (b->n)
                CHECK_EQ(b->items[0].id, one.id);

        /* deletes */
        CHECK_EQ(ferry_manifest_begin(fx.m), 0);
        CHECK_EQ(mf_file_delete(fx.m, one.id), 0);
        CHECK_EQ(mf_dir_delete(fx.m, dab), 0);
        CHECK_EQ(ferry_manifest_commit(fx.m), 0);
        CHECK_EQ(walk_all(&fx, DIRS_REMOVED, gen, ids, first, sizeof(first)),
                 0);
        CHECK_EQ(sql_int(fx.db, "SELECT count(*) FROM files", 0), 9);
        ferry_batch_free(b);
        fx_close(&fx);
}

struct failures {
        int calls;
        char path[256];
        size_t len;
        char reason[128];
        struct ferry_failure fail;
        uint64_t count, index;
};

static void on_failure(const struct ferry_failure_row *r, void *arg)
{
        struct failures *f = arg;
        f->calls++;
        f->len = r->path_len;
        snprintf(f->path, sizeof(f->path), "%.*s", (int)r->path_len, r->path);
        snprintf(f->reason, sizeof(f->reason), "%s", r->reason);
        f->fail = r->fail;
        f->count = r->cause_count;
        f->index = r->cause_index;
}

/* The failures a status hands on, in order (up to 16). */
struct failure_list {
        int n;
        char path[16][32];
        struct ferry_failure fail[16];
        uint64_t count[16], index[16];
};

static void list_failure(const struct ferry_failure_row *r, void *arg)
{
        struct failure_list *l = arg;
        if (l->n >= 16)
                return;
        snprintf(l->path[l->n], sizeof(l->path[0]), "%.*s", (int)r->path_len,
                 r->path);
        l->fail[l->n] = r->fail;
        l->count[l->n] = r->cause_count;
        l->index[l->n] = r->cause_index;
        l->n++;
}

static void count_info(const struct ferry_status_info *info, void *arg)
{
        struct failure_list *l = arg;
        CHECK_EQ(l->n, 0); /* before any failure */
        CHECK_EQ(info->failed.files, 6);
        l->n = 0;
}

/* Failures come grouped by cause, the most frequent first, at most
 * per_cause of each, with the cause's count; rows of an older ferry (no
 * cause) group together; the counts go out first, from the same read. */
static void test_status_causes(void)
{
        struct fixture fx;
        fx_open(&fx);
        int64_t gen, root, d;
        bool is_new;
        struct ferry_stat dst = mkstat(S_IFDIR | 0755, 0, 5, 2, 3);
        CHECK_EQ(ferry_manifest_begin(fx.m), 0);
        mf_next_gen(fx.m, &gen);
        mf_dir_upsert(fx.m, "", 0, &dst, gen, &root, &is_new, &unit_marking);
        mf_dir_upsert(fx.m, "d", 1, &dst, gen, &d, &is_new, &unit_marking);
        const struct ferry_failure acces = {FERRY_SIDE_SRC, FERRY_STEP_OPEN,
                                            EACCES};
        const struct ferry_failure full = {FERRY_SIDE_DST, FERRY_STEP_WRITE,
                                           ENOSPC};
        const char *names[] = {"a", "b", "c", "e", "f"};
        for (int i = 0; i < 5; i++) {
                int64_t id = add_file(&fx, root, names[i], 10 + (uint64_t)i, 7,
                                      1, 1, gen, true);
                mf_file_set_state(fx.m, id, ST_FAILED, i < 3 ? &acces : NULL,
                                  "x");
        }
        CHECK_EQ(mf_dir_set_error(fx.m, d, &full, "y"), 0);
        CHECK_EQ(ferry_manifest_commit(fx.m), 0);

        struct failure_list l;
        memset(&l, 0, sizeof(l));
        struct ferry_status_req req = {count_info, list_failure, &l, 0};
        struct ferry_status_info info;
        CHECK_EQ(ferry_manifest_status(fx.m, &info, &req), 0);
        CHECK_EQ(l.n, 6);
        static const char *const order[] = {"a", "b", "c", "e", "f", "d"};
        for (int i = 0; i < 6 && i < l.n; i++)
                CHECK_STR(l.path[i], order[i]);
        CHECK_EQ(l.count[0], 3);
        CHECK_EQ(l.index[2], 2);
        CHECK_EQ(l.fail[0].err, EACCES);
        CHECK_EQ(l.fail[3].side, FERRY_SIDE_NONE); /* no cause recorded */
        CHECK_EQ(l.count[3], 2);
        CHECK_EQ(l.index[3], 0);
        CHECK_EQ(l.fail[5].side, FERRY_SIDE_DST);
        CHECK_EQ(l.fail[5].step, FERRY_STEP_WRITE);
        CHECK_EQ(l.count[5], 1);

        /* at most 2 of each cause */
        memset(&l, 0, sizeof(l));
        req.per_cause = 2;
        CHECK_EQ(ferry_manifest_status(fx.m, &info, &req), 0);
        CHECK_EQ(l.n, 5);
        CHECK_STR(l.path[1], "b");
        CHECK_EQ(l.count[1], 3); /* the count is the cause's, in all */
        CHECK_STR(l.path[2], "e");
        CHECK_STR(l.path[4], "d");
        fx_close(&fx);
}

static void test_status_counts(void)
{
        struct fixture fx;
        fx_open(&fx);
        int64_t gen, root, d, run;
        bool is_new;
        struct ferry_stat dst = mkstat(S_IFDIR | 0755, 0, 5, 2, 3);
        CHECK_EQ(ferry_manifest_begin(fx.m), 0);
        CHECK_EQ(ferry_manifest_run_start(fx.m, "ferry src dst", &run), 0);
        bool replaced = true;
        CHECK_EQ(ferry_manifest_check_dst(fx.m, "65024:2", &replaced), 0);
        CHECK(!replaced);
        mf_next_gen(fx.m, &gen);
        mf_dir_upsert(fx.m, "", 0, &dst, gen, &root, &is_new, &unit_marking);
        mf_dir_upsert(fx.m, "d\n1", 3, &dst, gen, &d, &is_new, &unit_marking);
        int64_t done1 = add_file(&fx, root, "done1", 1, 7, 1, 10, gen, true);
        int64_t done2 = add_file(&fx, d, "done2", 2, 7, 1, 20, gen, true);
        add_file(&fx, root, "pending", 3, 7, 1, 5, gen, true);
        int64_t failed = add_file(&fx, d, "bad\xff", 4, 7, 1, 40, gen, true);
        int64_t gone = add_file(&fx, root, "gone", 5, 7, 1, 80, gen, true);
        struct ferry_stat fifo = mkstat(S_IFIFO | 0600, 0, 7, 99, 1);
        enum ferry_upsert res;
        file_upsert(fx.m, root, false, true, "fifo", 4, &fifo, gen, true, &res);
        struct ferry_item it;
        memset(&it, 0, sizeof(it));
        it.id = done1;
        it.st = mkstat(S_IFREG | 0644, 10, 5000, 1, 1);
        CHECK_EQ(mf_file_done(fx.m, &it), 0);
        it.id = done2;
        it.st = mkstat(S_IFREG | 0644, 20, 5000, 2, 1);
        CHECK_EQ(mf_file_done(fx.m, &it), 0);
        const struct ferry_failure eio = {FERRY_SIDE_SRC, FERRY_STEP_READ, EIO};
        mf_file_set_state(fx.m, failed, ST_FAILED, &eio,
                          "read source: Input/output error");
        mf_file_set_state(fx.m, gone, ST_VANISHED, NULL, NULL);
        CHECK_EQ(ferry_manifest_run_finish(fx.m, run, FERRY_EPARTIAL), 0);
        CHECK_EQ(ferry_manifest_commit(fx.m), 0);

        struct ferry_status_info info;
        struct failures fl;
        memset(&info, 0, sizeof(info));
        memset(&fl, 0, sizeof(fl));
        struct ferry_status_req req = {NULL, on_failure, &fl, 0};
        CHECK_EQ(ferry_manifest_status(fx.m, &info, &req), 0);
        CHECK_EQ(info.done.files, 2);
        CHECK_EQ(info.done.bytes, 30);
        CHECK_EQ(info.pending.files, 1);
        CHECK_EQ(info.pending.bytes, 5);
        CHECK_EQ(info.failed.files, 1);
        CHECK_EQ(info.failed.bytes, 40);
        CHECK_EQ(info.vanished.files, 1);
        CHECK_EQ(info.skipped.files, 1);
        CHECK_EQ(info.dirs, 2);
        CHECK_EQ(info.not_in_source, 0);
        CHECK_EQ(info.last_result, FERRY_EPARTIAL);
        CHECK(info.last_start > 0 && info.last_end >= info.last_start);
        CHECK_STR(info.src, "/the/src");
        CHECK_STR(info.dst, "/the/dst");
        CHECK_EQ(fl.calls, 1);
        CHECK_EQ(fl.len, 8);
        CHECK_MEM(fl.path, "d\n1/bad\xff", 8);
        CHECK_STR(fl.reason, "read source: Input/output error");
        CHECK_EQ(fl.fail.side, FERRY_SIDE_SRC); /* the cause, as recorded */
        CHECK_EQ(fl.fail.step, FERRY_STEP_READ);
        CHECK_EQ(fl.fail.err, EIO);
        CHECK_EQ(fl.count, 1);
        CHECK_EQ(fl.index, 0);

        uint64_t n = 0, bytes = 0;
        CHECK_EQ(ferry_manifest_count(fx.m, COUNT_NOT_DONE, gen, &n, NULL), 0);
        CHECK_EQ(n, 2); /* pending + failed */
        CHECK_EQ(ferry_manifest_count(fx.m, COUNT_TO_COPY, gen, &n, &bytes), 0);
        CHECK_EQ(n, 1);
        CHECK_EQ(bytes, 5);

        /* read-only, while the writer holds the file open */
        struct ferry_manifest *ro = NULL;
        CHECK_EQ(ferry_manifest_open(fx.db, MF_READONLY, &ro, &fx.err), 0);
        struct ferry_status_info info2;
        memset(&info2, 0, sizeof(info2));
        CHECK_EQ(ferry_manifest_status(ro, &info2, NULL), 0);
        CHECK_EQ(info2.done.files, 2);
        CHECK_EQ(info2.failed.files, 1);
        ferry_manifest_close(ro);
        /* and through the public API */
        struct ferry_error err;
        memset(&info2, 0, sizeof(info2));
        memset(&fl, 0, sizeof(fl));
        CHECK_EQ(ferry_status_read(fx.db, NULL, NULL, &req, &info2, &err), 0);
        CHECK_EQ(info2.pending.files, 1);
        CHECK_EQ(info2.running_pid, 0);
        CHECK_EQ(fl.calls, 1);

        /* next run: failed rows retried; a new generation alone removes
         * nothing (only a complete scan says what is gone) */
        CHECK_EQ(ferry_manifest_begin(fx.m), 0);
        CHECK_EQ(mf_retry_failed(fx.m), 0);
        mf_next_gen(fx.m, &gen);
        CHECK_EQ(ferry_manifest_commit(fx.m), 0);
        memset(&info, 0, sizeof(info));
        CHECK_EQ(ferry_manifest_status(fx.m, &info, NULL), 0);
        CHECK_EQ(info.failed.files, 0);
        CHECK_EQ(info.pending.files, 2);
        CHECK_EQ(info.not_in_source, 0);

        /* a changed identity is recorded and changes no row by itself */
        CHECK_EQ(ferry_manifest_begin(fx.m), 0);
        CHECK_EQ(ferry_manifest_check_dst(fx.m, "65024:2", &replaced), 0);
        CHECK(!replaced);
        CHECK_EQ(ferry_manifest_check_dst(fx.m, "65024:3", &replaced), 0);
        CHECK(replaced);
        CHECK_EQ(ferry_manifest_check_dst(fx.m, "65024:3", &replaced), 0);
        CHECK(!replaced);
        CHECK_EQ(ferry_manifest_commit(fx.m), 0);
        memset(&info, 0, sizeof(info));
        CHECK_EQ(ferry_manifest_status(fx.m, &info, NULL), 0);
        CHECK_EQ(info.done.files, 2);

        /* a replaced destination: everything done is pending again */
        CHECK_EQ(ferry_manifest_begin(fx.m), 0);
        CHECK_EQ(ferry_manifest_reset_done(fx.m), 0);
        CHECK_EQ(ferry_manifest_commit(fx.m), 0);
        memset(&info, 0, sizeof(info));
        CHECK_EQ(ferry_manifest_status(fx.m, &info, NULL), 0);
        CHECK_EQ(info.done.files, 0);
        CHECK_EQ(info.pending.files, 4);
        CHECK_EQ(
                sql_int(fx.db, "SELECT count(*) FROM dirs WHERE state != 0", 0),
                0);
        fx_close(&fx);
}

struct sample_log {
        unsigned calls, stop_after;
        int64_t sizes[64];
        char paths[64][32];
};

static bool log_sample(const struct ferry_done_file *f, void *arg)
{
        struct sample_log *l = arg;
        l->sizes[l->calls] = (int64_t)f->size;
        snprintf(l->paths[l->calls], sizeof(l->paths[0]), "%s|%s|%d", f->dir,
                 f->name, (int)f->type);
        l->calls++;
        return l->calls != l->stop_after;
}

/* The sample of done rows is spread over the table, never repeats a row,
 * and sees only done regular files and symlinks. */
static void test_sample_done(void)
{
        struct fixture fx;
        fx_open(&fx);
        struct sample_log l;
        unsigned seen = 99;
        memset(&l, 0, sizeof(l));
        CHECK_EQ(ferry_manifest_sample_done(fx.m, 32, log_sample, &l, &seen),
                 0);
        CHECK_EQ(seen, 0); /* no rows at all */

        int64_t gen, root, d;
        bool is_new;
        struct ferry_stat dst = mkstat(S_IFDIR | 0755, 0, 5, 2, 3);
        CHECK_EQ(ferry_manifest_begin(fx.m), 0);
        mf_next_gen(fx.m, &gen);
        mf_dir_upsert(fx.m, "", 0, &dst, gen, &root, &is_new, &unit_marking);
        mf_dir_upsert(fx.m, "d\n1", 3, &dst, gen, &d, &is_new, &unit_marking);
        /* 100 files of size i; those with i % 10 == 3 are done (10 rows),
         * and 97 as well, but a symlink; 98 is a done fifo */
        for (uint64_t i = 1; i <= 100; i++) {
                char name[16];
                snprintf(name, sizeof(name), "f%llu", (unsigned long long)i);
                struct ferry_stat st =
                        mkstat(i == 97   ? S_IFLNK | 0777
                               : i == 98 ? S_IFIFO | 0600
                                         : S_IFREG | 0644,
                               i, 5000 + (int64_t)i, 1000 + i, 1);
                enum ferry_upsert res;
                CHECK_EQ(file_upsert(fx.m, i <= 50 ? root : d, false, true,
                                     name, strlen(name), &st, gen, true, &res),
                         0);
                int64_t id;
                CHECK_EQ(mf_max_id(fx.m, &id), 0);
                if (i % 10 == 3 || i == 97 || i == 98) {
                        struct ferry_item it;
                        memset(&it, 0, sizeof(it));
                        it.id = id;
                        it.st = st;
                        CHECK_EQ(mf_file_done(fx.m, &it), 0);
                }
        }
        CHECK_EQ(ferry_manifest_commit(fx.m), 0);
        CHECK_EQ(
                sql_int(fx.db, "SELECT count(*) FROM files WHERE state = 1", 0),
                12);

        /* 4 points (1, 26, 51, 76): the first done row at or after each */
        memset(&l, 0, sizeof(l));
        CHECK_EQ(ferry_manifest_sample_done(fx.m, 4, log_sample, &l, &seen), 0);
        CHECK_EQ(seen, 4);
        CHECK_EQ(l.calls, 4);
        CHECK_EQ(l.sizes[0], 3);
        CHECK_EQ(l.sizes[1], 33);
        CHECK_EQ(l.sizes[2], 53);
        CHECK_EQ(l.sizes[3], 83);
        CHECK_STR(l.paths[0], "|f3|1");
        CHECK_STR(l.paths[2], "d\n1|f53|1");

        /* more points than done rows: each row once, in id order, the
         * fifo left out, the symlink in */
        memset(&l, 0, sizeof(l));
        CHECK_EQ(ferry_manifest_sample_done(fx.m, 32, log_sample, &l, &seen),
                 0);
        CHECK_EQ(seen, 11);
        for (unsigned i = 0; i < 10; i++)
                CHECK_EQ(l.sizes[i], 10 * (int64_t)i + 3);
        CHECK_STR(l.paths[10], "d\n1|f97|2");

        /* the callback stops it */
        memset(&l, 0, sizeof(l));
        l.stop_after = 2;
        CHECK_EQ(ferry_manifest_sample_done(fx.m, 32, log_sample, &l, &seen),
                 0);
        CHECK_EQ(seen, 2);
        fx_close(&fx);
}

/* Rows below a directory the scan could not read stay "seen": exactly
 * the subtree, not siblings that share a prefix ("a.x", "a0", "ab"). */
static void test_keep_subtree(void)
{
        struct fixture fx;
        fx_open(&fx);
        const char *dirs[] = {"",   "a",  "a/b", "a/b/c", "a.x",
                              "a0", "ab", "b",   "b/a"};
        enum { ND = sizeof(dirs) / sizeof(dirs[0]) };
        int64_t gen, id[ND];
        bool is_new;
        struct ferry_stat dst = mkstat(S_IFDIR | 0755, 0, 5, 2, 3);
        CHECK_EQ(ferry_manifest_begin(fx.m), 0);
        mf_next_gen(fx.m, &gen);
        for (int i = 0; i < ND; i++) {
                mf_dir_upsert(fx.m, dirs[i], strlen(dirs[i]), &dst, gen, &id[i],
                              &is_new, &unit_marking);
                add_file(&fx, id[i], "f", 100 + (uint64_t)i, 7, 1, 1, gen,
                         true);
        }
        CHECK_EQ(ferry_manifest_commit(fx.m), 0);

        /* the next scan sees the root and "a", but cannot read "a" */
        CHECK_EQ(ferry_manifest_begin(fx.m), 0);
        mf_next_gen(fx.m, &gen);
        int64_t again;
        mf_dir_upsert(fx.m, "", 0, &dst, gen, &again, &is_new, &unit_marking);
        mf_dir_upsert(fx.m, "a", 1, &dst, gen, &again, &is_new, &unit_marking);
        CHECK_EQ(mf_keep_subtree(fx.m, "a", 1, gen), 0);
        const struct ferry_failure acces = {FERRY_SIDE_SRC, FERRY_STEP_OPENDIR,
                                            EACCES};
        CHECK_EQ(mf_dir_set_error(fx.m, id[1], &acces,
                                  "cannot read: Permission denied"),
                 0);
        /* the root was read whole and named no file: its row is gone */
        CHECK_EQ(mf_dir_listed(fx.m, id[0], gen, true, 0), 0);
        CHECK_EQ(mf_mark_unseen(fx.m, gen), 0);
        CHECK_EQ(ferry_manifest_commit(fx.m), 0);
        const bool kept[ND] = {false, true,  true,  true, false,
                               false, false, false, false};
        char part[160];
        snprintf(part, sizeof(part),
                 "SELECT (f.gen = %lld OR d.listed = %lld) AND f.state != 5"
                 " FROM files f JOIN dirs d ON d.id = f.dir WHERE f.dir = ?1",
                 (long long)gen, (long long)gen);
        for (int i = 0; i < ND; i++) {
                int64_t in = sql_int(fx.db, part, id[i]);
                if ((in == 1) != kept[i])
                        unit_fail(__FILE__, __LINE__,
                                  "file in '%s': part of the scan %lld, "
                                  "kept should be %d",
                                  dirs[i], (long long)in, kept[i]);
                else
                        atomic_fetch_add(&unit_passed, 1);
                if (i >= 2) { /* dirs upserted again are not asked */
                        int64_t dgen = sql_int(
                                fx.db, "SELECT gen FROM dirs WHERE id = ?1",
                                id[i]);
                        CHECK((dgen == gen) == kept[i]);
                }
        }
        /* the directory's error is listed with the failures */
        struct ferry_status_info info;
        memset(&info, 0, sizeof(info));
        struct failures fl;
        memset(&fl, 0, sizeof(fl));
        struct ferry_status_req req = {NULL, on_failure, &fl, 0};
        CHECK_EQ(ferry_manifest_status(fx.m, &info, &req), 0);
        CHECK_EQ(fl.calls, 1);
        CHECK_STR(fl.path, "a");
        CHECK_STR(fl.reason, "cannot read: Permission denied");
        CHECK_EQ(fl.fail.side, FERRY_SIDE_SRC);
        CHECK_EQ(fl.fail.step, FERRY_STEP_OPENDIR);
        CHECK_EQ(fl.fail.err, EACCES);
        CHECK_EQ(info.not_in_source, 6); /* files not kept */
        /* NULL clears it */
        CHECK_EQ(ferry_manifest_begin(fx.m), 0);
        CHECK_EQ(mf_dir_set_error(fx.m, id[1], NULL, NULL), 0);
        CHECK_EQ(ferry_manifest_commit(fx.m), 0);
        memset(&fl, 0, sizeof(fl));
        CHECK_EQ(ferry_manifest_status(fx.m, &info, &req), 0);
        CHECK_EQ(fl.calls, 0);
        fx_close(&fx);
}

/* upsert_named: one regular file, unchanged on every call; returns what the
 * row became. */
static struct ferry_entry_rec upsert_rec(struct fixture *fx, int64_t dir,
                                         bool marking, const char *name,
                                         int64_t gen)
{
        struct ferry_stat st = mkstat(S_IFREG | 0644, 10, 5000,
                                      (uint64_t)(unsigned char)name[0], 1);
        struct ferry_entry_rec rec;
        CHECK_EQ(mf_file_upsert(fx->m, dir, false, marking, name, strlen(name),
                                &st, gen, true, &rec),
                 0);
        return rec;
}

static enum ferry_upsert upsert_named(struct fixture *fx, int64_t dir,
                                      bool marking, const char *name,
                                      int64_t gen)
{
        return upsert_rec(fx, dir, marking, name, gen).res;
}

static int64_t next_scan(struct fixture *fx, const char *path,
                         const struct ferry_stat *st, int64_t *dir,
                         bool *marking)
{
        int64_t gen;
        bool is_new;
        CHECK_EQ(ferry_manifest_begin(fx->m), 0);
        CHECK_EQ(mf_next_gen(fx->m, &gen), 0);
        CHECK_EQ(mf_dir_upsert(fx->m, path, strlen(path), st, gen, dir, &is_new,
                               marking),
                 0);
        return gen;
}

static size_t count_query(struct fixture *fx, enum mf_query q, int64_t gen)
{
        struct ferry_batch *b = NULL;
        fill_all(fx, q, gen, &b);
        size_t n = b->n;
        ferry_batch_free(b);
        return n;
}

/* A re-run writes only what changed: an unchanged directory's done rows are
 * read, counted, and kept part of the scan through dirs.listed. */
static void test_listed_marking(void)
{
        struct fixture fx;
        fx_open(&fx);
        struct ferry_stat dst = mkstat(S_IFDIR | 0755, 0, 5, 2, 3);
        int64_t d, root, gen;
        bool marking;

        /* 1: a new directory: rows written, marked */
        gen = next_scan(&fx, "d", &dst, &d, &marking);
        CHECK(marking);
        CHECK_EQ(upsert_named(&fx, d, marking, "x", gen), UP_NEW);
        CHECK_EQ(upsert_named(&fx, d, marking, "y", gen), UP_NEW);
        CHECK_EQ(upsert_named(&fx, d, marking, "z", gen), UP_NEW);
        CHECK_EQ(mf_dir_listed(fx.m, d, gen, marking, 3), 0);
        CHECK_EQ(ferry_manifest_commit(fx.m), 0);
        CHECK_EQ(sql_exec(fx.db, "UPDATE files SET state = 1,"
                                 " hash = zeroblob(16)"),
                 SQLITE_OK);
        int64_t first = gen;

        /* 2: nothing changed: no row written, all part of the scan */
        gen = next_scan(&fx, "d", &dst, &d, &marking);
        CHECK(!marking);
        CHECK_EQ(upsert_named(&fx, d, marking, "x", gen), UP_UNCHANGED);
        CHECK_EQ(upsert_named(&fx, d, marking, "y", gen), UP_UNCHANGED);
        CHECK_EQ(upsert_named(&fx, d, marking, "z", gen), UP_UNCHANGED);
        CHECK_EQ(mf_dir_listed(fx.m, d, gen, marking, 3), 0);
        CHECK_EQ(mf_mark_unseen(fx.m, gen), 0);
        CHECK_EQ(ferry_manifest_commit(fx.m), 0);
        CHECK_EQ(sql_int(fx.db, "SELECT max(gen) FROM files", 0), first);
        CHECK_EQ(count_query(&fx, Q_VERIFY, gen), 3);
        CHECK_EQ(count_query(&fx, Q_REMOVED_FILES, gen), 0);

        /* 3: z is gone but the mtime says nothing changed: the count
         * differs, so all rows are kept this time and the next scan marks */
        gen = next_scan(&fx, "d", &dst, &d, &marking);
        CHECK(!marking);
        upsert_named(&fx, d, marking, "x", gen);
        upsert_named(&fx, d, marking, "y", gen);
        CHECK_EQ(mf_dir_listed(fx.m, d, gen, marking, 2), 0);
        CHECK_EQ(mf_mark_unseen(fx.m, gen), 0);
        CHECK_EQ(ferry_manifest_commit(fx.m), 0);
        CHECK_EQ(count_query(&fx, Q_VERIFY, gen), 3);
        CHECK_EQ(count_query(&fx, Q_REMOVED_FILES, gen), 0);

        /* 4: marked one by one: z is removed, x and y stay done */
        gen = next_scan(&fx, "d", &dst, &d, &marking);
        CHECK(marking);
        CHECK_EQ(upsert_named(&fx, d, marking, "x", gen), UP_UNCHANGED);
        CHECK_EQ(upsert_named(&fx, d, marking, "y", gen), UP_UNCHANGED);
        CHECK_EQ(mf_dir_listed(fx.m, d, gen, marking, 2), 0);
        CHECK_EQ(mf_mark_unseen(fx.m, gen), 0);
        CHECK_EQ(ferry_manifest_commit(fx.m), 0);
        CHECK_EQ(count_query(&fx, Q_VERIFY, gen), 2);
        CHECK_EQ(count_query(&fx, Q_REMOVED_FILES, gen), 1);
        CHECK_EQ(
                sql_int(fx.db, "SELECT state FROM files WHERE name = X'7a'", 0),
                ST_REMOVED);
        /* a done row removed is no temp file to look for */
        CHECK_EQ(count_query(&fx, Q_STALE_TEMPS, gen), 0);

        /* 5: "d" became a file; a file "f" appears next to it */
        gen = next_scan(&fx, "", &dst, &root, &marking);
        CHECK_EQ(upsert_named(&fx, root, marking, "d", gen), UP_NEW);
        CHECK_EQ(mf_subtree_removed(fx.m, "d", 1, gen), 0);
        CHECK_EQ(upsert_named(&fx, root, marking, "f", gen), UP_NEW);
        CHECK_EQ(mf_dir_listed(fx.m, root, gen, marking, 2), 0);
        CHECK_EQ(mf_mark_unseen(fx.m, gen), 0);
        CHECK_EQ(ferry_manifest_commit(fx.m), 0);
        CHECK_EQ(sql_int(fx.db, "SELECT count(*) FROM files WHERE state = ?1",
                         ST_REMOVED),
                 3);
        CHECK_EQ(count_query(&fx, Q_VERIFY, gen), 0);
        CHECK_EQ(count_query(&fx, Q_PENDING, gen), 2);

        /* 6: "f" became a directory: the file row is removed; x comes back
         * into the old "d" as it was, and is copied again */
        int64_t f;
        gen = next_scan(&fx, "", &dst, &root, &marking);
        bool is_new = false;
        CHECK_EQ(mf_dir_upsert(fx.m, "f", 1, &dst, gen, &f, &is_new, &marking),
                 0);
        CHECK(is_new && marking);
        CHECK_EQ(sql_int(fx.db, "SELECT count(*) FROM files WHERE state = ?1",
                         ST_REMOVED),
                 3); /* not committed yet */
        CHECK_EQ(ferry_manifest_commit(fx.m), 0);
        CHECK_EQ(sql_int(fx.db,
                         "SELECT state FROM files WHERE name = X'66' AND dir"
                         " = ?1",
                         root),
                 ST_REMOVED);
        CHECK_EQ(ferry_manifest_begin(fx.m), 0);
        struct ferry_entry_rec x = upsert_rec(&fx, d, true, "x", gen);
        CHECK_EQ(x.res, UP_CHANGED);
        CHECK(x.id > 0 && x.again);
        /* the same name listed twice in one scan is noted once */
        x = upsert_rec(&fx, d, true, "x", gen);
        CHECK_EQ(x.res, UP_RESUMED);
        CHECK(!x.again);
        CHECK_EQ(ferry_manifest_commit(fx.m), 0);
        CHECK_EQ(
                sql_int(fx.db, "SELECT state FROM files WHERE name = X'78'", 0),
                ST_PENDING);
        fx_close(&fx);
}

/* A version 1 manifest is upgraded on open: its directories are marked row
 * by row by the next scan (listed -1), its rows are kept. */
static void test_upgrade_from_1(void)
{
        struct fixture fx;
        fx_open(&fx);
        ferry_manifest_close(fx.m);
        fx.m = NULL;
        unlink(fx.db);
        char sql[256];
        CHECK_EQ(ferry_migrations[0].version, 1);
        snprintf(sql, sizeof(sql),
                 "PRAGMA journal_mode = WAL; PRAGMA application_id = %d;"
                 " PRAGMA user_version = 1;",
                 FERRY_APPLICATION_ID);
        CHECK_EQ(sql_exec(fx.db, sql), SQLITE_OK);
        CHECK_EQ(sql_exec(fx.db, ferry_migrations[0].sql), SQLITE_OK);
        CHECK_EQ(sql_exec(fx.db,
                          "INSERT INTO dirs (id, path, mode, uid, gid,"
                          " mtime_ns, state, gen) VALUES (1, X'', 16877, 0,"
                          " 0, 5, 1, 3);"
                          "INSERT INTO files (dir, name, type, size,"
                          " mtime_ns, ctime_ns, mode, uid, gid, dev, ino,"
                          " state, hash, gen) VALUES (1, X'61', 1, 1, 1, 1,"
                          " 33188, 0, 0, 1, 1, 1, zeroblob(16), 3);"),
                 SQLITE_OK);
        CHECK_EQ(ferry_manifest_open(fx.db, 0, &fx.m, &fx.err), 0);
        ferry_manifest_close(fx.m);
        fx.m = NULL;
        CHECK_EQ(sql_int(fx.db, "PRAGMA user_version", 0),
                 ferry_migrations[ferry_n_migrations - 1].version);
        CHECK_EQ(sql_int(fx.db, "SELECT listed FROM dirs WHERE id = ?1", 1),
                 -1);
        CHECK_EQ(sql_int(fx.db, "SELECT state FROM files WHERE dir = ?1", 1),
                 ST_DONE);
        fx_close(&fx);
}

/* Times outside 64-bit nanoseconds (1677-2262) come back as they went in,
 * and an unchanged file with such a time is found unchanged. */
static void test_far_times(void)
{
        struct fixture fx;
        fx_open(&fx);
        const struct ferry_time times[] = {
                {10413792000LL, 123456789},  /* 2300-01-01 */
                {15032304000LL, 0},          /* 2446-05-10, ext4's last */
                {-30610224000LL, 250000000}, /* 1000-01-01 */
                {9223372036LL, 854775808},   /* 1 ns past 2262's end */
                {-9223372037LL, 145224191},  /* 1 ns before 1677's start */
                {-1, 999999999},             /* 1 ns before 1970 */
                {-2147483648LL, 0},          /* 1901-12-13, ext4's first */
                {INT64_MAX, 999999999},
                {INT64_MIN, 0},
        };
        enum { N = sizeof(times) / sizeof(times[0]) };
        int64_t gen = 0, root = 0;
        bool is_new = false;
        struct ferry_stat dir = mkstat(S_IFDIR | 0755, 0, 5, 2, 3);
        dir.mtime = times[0];
        CHECK_EQ(ferry_manifest_begin(fx.m), 0);
        CHECK_EQ(mf_next_gen(fx.m, &gen), 0);
        CHECK_EQ(mf_dir_upsert(fx.m, "", 0, &dir, gen, &root, &is_new,
                               &unit_marking),
                 0);
        char name[16];
        for (int i = 0; i < N; i++) {
                struct ferry_stat st = mkstat(S_IFREG | 0600, 1, 0, 10 + i, 1);
                st.mtime = times[i];
                st.ctime = times[N - 1 - i];
                enum ferry_upsert res = 0;
                snprintf(name, sizeof(name), "f%d", i);
                CHECK_EQ(file_upsert(fx.m, root, false, true, name,
                                     strlen(name), &st, gen, true, &res),
                         0);
                CHECK_EQ(res, UP_NEW);
        }
        CHECK_EQ(ferry_manifest_commit(fx.m), 0);
        /* inside 1677-2262 an INTEGER of nanoseconds, as before */
        CHECK_EQ(sql_int(fx.db,
                         "SELECT count(*) FROM files WHERE"
                         " typeof(mtime_ns) = 'blob'",
                         0),
                 7);

        /* read back by a copy query */
        int64_t cursor = 0;
        struct ferry_batch *b = ferry_batch_new(WORK_COPY, 64);
        CHECK_EQ(mf_fill(fx.m, Q_FIRST_PASS, gen, &cursor, b, 64, UINT64_MAX),
                 0);
        CHECK_EQ(b->n, N);
        for (size_t i = 0; i < b->n && i < N; i++) {
                const struct ferry_item *it = &b->items[i];
                CHECK(ferry_time_eq(it->st.mtime, times[i]));
                CHECK(ferry_time_eq(it->st.ctime, times[N - 1 - i]));
        }
        ferry_batch_free(b);

        /* the next scan sees the same times: nothing changed */
        CHECK_EQ(ferry_manifest_begin(fx.m), 0);
        CHECK_EQ(mf_next_gen(fx.m, &gen), 0);
        bool marking = true;
        CHECK_EQ(
                mf_dir_upsert(fx.m, "", 0, &dir, gen, &root, &is_new, &marking),
                0);
        CHECK(!is_new);
        for (int i = 0; i < N; i++) {
                struct ferry_stat st = mkstat(S_IFREG | 0600, 1, 0, 10 + i, 1);
                st.mtime = times[i];
                st.ctime = times[N - 1 - i];
                enum ferry_upsert res = 0;
                snprintf(name, sizeof(name), "f%d", i);
                CHECK_EQ(file_upsert(fx.m, root, false, true, name,
                                     strlen(name), &st, gen, true, &res),
                         0);
                CHECK(res != UP_NEW && res != UP_CHANGED);
                st.mtime.nsec ^= 1; /* one nanosecond is a change */
                CHECK_EQ(file_upsert(fx.m, root, false, true, name,
                                     strlen(name), &st, gen, true, &res),
                         0);
                CHECK_EQ(res, UP_CHANGED);
        }
        CHECK_EQ(ferry_manifest_commit(fx.m), 0);
        fx_close(&fx);
}

/* ---- row values: sql/ against manifest_types.h ---- */

/* a value of manifest_types.h as SQL writes it */
#define N_(x) MF_SQL_INT(x)

/* One text from the manifest, read through a connection of our own, into
 * buf ("" when the query has no row or fails). */
static void sql_text(const char *db, const char *sql, char *buf, size_t size)
{
        sqlite3 *h = NULL;
        sqlite3_stmt *s = NULL;
        buf[0] = '\0';
        if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
            sqlite3_prepare_v2(h, sql, -1, &s, NULL) == SQLITE_OK &&
            sqlite3_step(s) == SQLITE_ROW && sqlite3_column_text(s, 0))
                snprintf(buf, size, "%s", sqlite3_column_text(s, 0));
        sqlite3_finalize(s);
        sqlite3_close(h);
}

static bool is_file_state(long v)
{
        static const enum ferry_state all[] = {ST_PENDING,  ST_DONE,
                                               ST_FAILED,   ST_SKIPPED,
                                               ST_VANISHED, ST_REMOVED};
        for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
                if (v == (long)all[i])
                        return true;
        return false;
}

/* Every "state = N", "state != N" and "state IN (N, ...)" of a migration
 * names a value of enum ferry_state; returns how many numbers it saw. */
static int check_state_literals(const char *name, const char *sql)
{
        int seen = 0;
        for (const char *p = sql; (p = strstr(p, "state")); p += 5) {
                const char *q = p + 5;
                while (*q == ' ')
                        q++;
                bool list = !strncmp(q, "IN", 2);
                if (list)
                        q += 2;
                else if (*q == '=')
                        q++;
                else if (!strncmp(q, "!=", 2))
                        q += 2;
                else
                        continue;
                while (*q == ' ' || (list && *q == '('))
                        q++;
                do {
                        while (*q == ' ' || *q == ',')
                                q++;
                        char *end;
                        long v = strtol(q, &end, 10);
                        if (end == q)
                                break;
                        if (!is_file_state(v))
                                unit_fail(__FILE__, __LINE__,
                                          "%s: state %ld is no ferry_state",
                                          name, v);
                        seen++;
                        q = end;
                } while (list && *q == ',');
        }
        return seen;
}

/* The numbers that the migrations in sql/ write for states, types and
 * sentinels, in its statements, indexes, defaults and comments, are the ones of
 * manifest_types.h, which the statements of src/manifest/ are built from.
 * The schema is read back from sqlite_master of a new manifest. */
static void test_sql_agrees_with_enums(void)
{
        int literals = 0;
        for (int i = 0; i < ferry_n_migrations; i++)
                literals += check_state_literals(ferry_migrations[i].name,
                                                 ferry_migrations[i].sql);
        CHECK(literals >= 4); /* the scanner found the ones known today */
        // clang-format off
        static const char *const said[] = {
                /* 001: the comments that name the values */
                "File states: " N_(MF_ST_PENDING) " pending, "
                N_(MF_ST_DONE) " done, " N_(MF_ST_FAILED) " failed, "
                N_(MF_ST_SKIPPED) " skipped (special file),\n-- "
                N_(MF_ST_VANISHED) " vanished",
                "Types: " N_(MF_FT_REG) " regular, " N_(MF_FT_LINK)
                " symlink,\n-- " N_(MF_FT_SPECIAL) " special",
                "state " N_(MF_DS_TO_APPLY) " means its mode and times still"
                " have to be applied",
                "hl: NULL (not hardlinked), " N_(MF_HL_LEADER) " (first",
                /* 002 */
                "File state " N_(MF_ST_REMOVED) " (removed)",
                "its state is not " N_(MF_ST_REMOVED) ".",
                "listed: the generation",
                N_(MF_LISTED_MARKING) "\n-- while a scan marks its rows",
                "Existing directories start at " N_(MF_LISTED_MARKING) ":",
                /* 003 */
                "WHERE state = " N_(MF_ST_DONE) ";",
        };
        // clang-format on
        for (size_t k = 0; k < sizeof(said) / sizeof(said[0]); k++) {
                bool found = false;
                for (int i = 0; i < ferry_n_migrations && !found; i++)
                        found = strstr(ferry_migrations[i].sql, said[k]);
                if (!found)
                        unit_fail(__FILE__, __LINE__,
                                  "sql/ does not say \"%s\"", said[k]);
        }
        struct fixture fx;
        fx_open(&fx);
        char sql[512];
        sql_text(fx.db,
                 "SELECT sql FROM sqlite_master WHERE name = 'files_pending'",
                 sql, sizeof(sql));
        CHECK_STR(sql, "CREATE INDEX files_pending ON files (state) WHERE "
                       "state = " N_(MF_ST_PENDING));
        sql_text(fx.db,
                 "SELECT sql FROM sqlite_master WHERE name = 'files_removed'",
                 sql, sizeof(sql));
        CHECK_STR(sql,
                  "CREATE INDEX files_removed ON files (state) WHERE "
                  "state IN (" N_(MF_ST_VANISHED) ", " N_(MF_ST_REMOVED) ")");
        sql_text(fx.db,
                 "SELECT dflt_value FROM pragma_table_info('files')"
                 " WHERE name = 'state'",
                 sql, sizeof(sql));
        CHECK_STR(sql, N_(MF_ST_PENDING));
        sql_text(fx.db,
                 "SELECT dflt_value FROM pragma_table_info('dirs')"
                 " WHERE name = 'state'",
                 sql, sizeof(sql));
        CHECK_STR(sql, N_(MF_DS_TO_APPLY));
        sql_text(fx.db,
                 "SELECT dflt_value FROM pragma_table_info('dirs')"
                 " WHERE name = 'listed'",
                 sql, sizeof(sql));
        CHECK_STR(sql, N_(MF_LISTED_MARKING));
        fx_close(&fx);
}

/* ---- operation-level calls, on in-memory manifests ---- */

static struct ferry_manifest *mem_open(void)
{
        struct ferry_manifest *m = NULL;
        struct ferry_error err;
        CHECK_EQ(ferry_manifest_open(NULL, MF_MEMORY | MF_CREATE, &m, &err), 0);
        if (m)
                CHECK_EQ(ferry_manifest_begin(m), 0);
        return m;
}

/* A listing chunk of dir (mtime dmt) with the names in names (sizes 10,
 * 20, ...; a name "=NAME" is a fifo, "%NAME" a second link of inode 900,
 * "&NAME" of inode 901). */
static struct ferry_listing *chunk(const char *dir, int64_t dmt, bool first,
                                   bool last, const char *const *names,
                                   size_t seen)
{
        struct ferry_listing *l = ferry_listing_new(dir, strlen(dir), 16);
        CHECK(l != NULL);
        l->dir_st = mkstat(S_IFDIR | 0755, 0, dmt, 1, 2);
        l->first = first;
        l->last = last;
        l->seen = seen;
        for (size_t i = 0; names[i]; i++) {
                const char *n = names[i];
                struct ferry_stat st =
                        mkstat(S_IFREG | 0644, 10 * (i + 1), 1000, 100 + i, 1);
                if (n[0] == '=')
                        st.mode = S_IFIFO | 0644;
                if (n[0] == '%' || n[0] == '&') {
                        st.ino = n[0] == '%' ? 900 : 901;
                        st.nlink = 2;
                        st.size = 5;
                }
                if (n[0] == '=' || n[0] == '%' || n[0] == '&')
                        n++;
                CHECK_EQ(ferry_listing_add(l, n, strlen(n), &st), 0);
        }
        return l;
}

/* Records a chunk; out gets the entries' results. */
static int record(struct ferry_manifest *m, struct ferry_listing *l,
                  int64_t gen, bool hard_links, struct ferry_entry_rec *out)
{
        struct ferry_listing_rec how = {.gen = gen, .hard_links = hard_links};
        int rc = ferry_manifest_record_listing(m, l, &how, out);
        if (rc)
                fprintf(stderr, "  record_listing: %s\n",
                        ferry_manifest_errmsg(m));
        ferry_listing_free(l);
        return rc;
}

/* The names a pass hands out, "dir/name" joined by spaces, into buf. */
static void handed(struct ferry_manifest *m, enum ferry_pass pass, int64_t gen,
                   char *buf, size_t size)
{
        struct ferry_handout h;
        ferry_manifest_handout_start(&h, pass, gen);
        struct ferry_batch *b = ferry_batch_new(WORK_COPY, 64);
        CHECK_EQ(ferry_manifest_handout(m, &h, b, 64, UINT64_MAX), 0);
        size_t n = 0;
        buf[0] = '\0';
        for (size_t i = 0; i < b->n; i++) {
                const char *d = ferry_batch_at(b, b->items[i].dir_off);
                n += (size_t)snprintf(buf + n, size - n, "%s%s%s%s",
                                      i ? " " : "", d, *d ? "/" : "",
                                      ferry_batch_at(b, b->items[i].name_off));
        }
        ferry_batch_free(b);
}

static uint64_t count(struct ferry_manifest *m, enum ferry_count what,
                      int64_t gen)
{
        uint64_t files = 0;
        CHECK_EQ(ferry_manifest_count(m, what, gen, &files, NULL), 0);
        return files;
}

/* The paths of a directory set, deepest first, joined by spaces. */
static void walked(struct ferry_manifest *m, enum ferry_dir_set set,
                   int64_t gen, char *buf, size_t size)
{
        struct ferry_dir_walk *w = NULL;
        const struct ferry_dir_row *rows;
        size_t n = 0, at = 0;
        buf[0] = '\0';
        CHECK_EQ(ferry_manifest_dir_walk(m, set, gen, &w), 0);
        while (w && !ferry_manifest_dir_walk_next(m, w, &rows, &n) && n)
                for (size_t i = 0; i < n; i++)
                        at += (size_t)snprintf(buf + at, size - at, "%s[%s]",
                                               at ? " " : "", rows[i].path);
        ferry_manifest_dir_walk_end(w);
}

/* Applies the metadata of every directory of gen (DIR_APPLIED). */
static void apply_all(struct ferry_manifest *m, int64_t gen)
{
        struct ferry_dir_walk *w = NULL;
        const struct ferry_dir_row *rows;
        size_t n = 0;
        CHECK_EQ(ferry_manifest_dir_walk(m, DIRS_TO_APPLY, gen, &w), 0);
        while (w && !ferry_manifest_dir_walk_next(m, w, &rows, &n) && n)
                for (size_t i = 0; i < n; i++)
                        CHECK_EQ(ferry_manifest_dir_outcome(
                                         m, &rows[i], DIR_APPLIED, NULL, NULL),
                                 0);
        ferry_manifest_dir_walk_end(w);
}

/* A listing, its results, a later chunk of a directory, a file that
 * replaced a directory, a complete scan, outcomes and the passes. */
static void test_record_listing(void)
{
        struct ferry_manifest *m = mem_open();
        if (!m)
                return;
        char buf[512];
        int64_t gen = 0;
        uint64_t files = 9, bytes = 9;
        CHECK_EQ(ferry_manifest_scan_start(m, &gen, &files, &bytes), 0);
        CHECK_EQ(gen, 1);
        CHECK_EQ(files, 0);
        struct ferry_entry_rec out[8];
        const char *root[] = {"a", "b", "=f", NULL};
        CHECK_EQ(record(m, chunk("", 50, true, true, root, 3), gen, false, out),
                 0);
        CHECK_EQ(out[0].res, UP_NEW);
        CHECK_EQ(out[2].res, UP_NEW);
        CHECK(out[0].id > 0 && out[1].id > out[0].id && out[2].id > out[1].id);
        CHECK(!out[0].again && !out[1].again);
        /* d in two chunks: the second finds the row the first made */
        const char *d1[] = {"x", NULL}, *d2[] = {"y", NULL};
        CHECK_EQ(record(m, chunk("d", 60, true, false, d1, 0), gen, false, out),
                 0);
        CHECK_EQ(record(m, chunk("d", 60, false, true, d2, 2), gen, false, out),
                 0);
        CHECK_EQ(out[0].res, UP_NEW);
        CHECK_EQ(ferry_manifest_scan_complete(m, gen), 0);
        handed(m, PASS_COPY_FIRST, gen, buf, sizeof(buf));
        CHECK_STR(buf, "a b d/x d/y");
        CHECK_EQ(count(m, COUNT_TO_COPY, 0), 4); /* the fifo is skipped */
        walked(m, DIRS_TO_APPLY, gen, buf, sizeof(buf));
        CHECK_STR(buf, "[d] []");

        /* outcomes: a done, b failed; d/x done then found missing in DST */
        struct ferry_handout h;
        ferry_manifest_handout_start(&h, PASS_COPY_FIRST, gen);
        struct ferry_batch *b = ferry_batch_new(WORK_COPY, 8);
        CHECK_EQ(ferry_manifest_handout(m, &h, b, 8, UINT64_MAX), 0);
        CHECK_EQ(b->n, 4);
        CHECK(ferry_manifest_handout_passed(&h, b->items[3].id));
        const struct ferry_failure eio = {FERRY_SIDE_SRC, FERRY_STEP_READ, EIO};
        struct ferry_outcome o[] = {
                {.kind = FO_DONE, .id = b->items[0].id, .item = &b->items[0]},
                {.kind = FO_FAILED,
                 .id = b->items[1].id,
                 .why = "EIO",
                 .fail = &eio},
                {.kind = FO_DONE, .id = b->items[2].id, .item = &b->items[2]},
        };
        bool fresh = false;
        CHECK_EQ(ferry_manifest_record_outcomes(m, o, 3, &fresh), 0);
        CHECK(fresh); /* a failure may hand a group on */
        CHECK_EQ(count(m, COUNT_DONE, 0), 2);
        CHECK_EQ(count(m, COUNT_NOT_DONE, gen), 2); /* b failed, d/y */
        apply_all(m, gen);
        walked(m, DIRS_TO_APPLY, gen, buf, sizeof(buf));
        CHECK_STR(buf, "");
        struct ferry_dst_rec claim = {FT_REG, 3, {7, 0}};
        const struct ferry_failure missing = {FERRY_SIDE_DST,
                                              FERRY_STEP_MISSING, 0};
        struct ferry_outcome again = {.kind = FO_AGAIN,
                                      .id = b->items[2].id,
                                      .why = "verify: destination is missing",
                                      .fail = &missing,
                                      .dst_missing = true,
                                      .claim = &claim};
        CHECK_EQ(ferry_manifest_record_outcomes(m, &again, 1, NULL), 0);
        walked(m, DIRS_TO_APPLY, gen, buf, sizeof(buf));
        CHECK_STR(buf, "[d] []"); /* its directory and every one above */
        struct ferry_dst_rec rec;
        CHECK_EQ(mf_file_dst(m, b->items[2].dir_id, "x", 1, &rec), 0);
        CHECK_EQ(rec.size, 3);
        CHECK_EQ(count(m, COUNT_DONE, 0), 1);
        ferry_batch_free(b);
        apply_all(m, gen);

        /* gen 2: b retried, "d" is a file now; a is unchanged */
        CHECK_EQ(ferry_manifest_scan_start(m, &gen, &files, &bytes), 0);
        CHECK_EQ(gen, 2);
        CHECK_EQ(files, 3); /* b, d/x, d/y */
        const char *root2[] = {"a", "b", "=f", "d", NULL};
        CHECK_EQ(
                record(m, chunk("", 70, true, true, root2, 4), gen, false, out),
                0);
        CHECK_EQ(out[0].res, UP_UNCHANGED);
        CHECK_EQ(out[1].res, UP_RESUMED);
        CHECK(out[1].again); /* a row of scan 1: hand it out again */
        CHECK(!out[0].again);
        CHECK_EQ(out[3].res, UP_NEW);
        /* the rows below the directory d are gone at once */
        CHECK_EQ(count(m, COUNT_GONE, gen), 2);
        CHECK_EQ(ferry_manifest_scan_complete(m, gen), 0);
        handed(m, PASS_REMOVED, gen, buf, sizeof(buf));
        CHECK_STR(buf, "d/x d/y");
        walked(m, DIRS_REMOVED, gen, buf, sizeof(buf));
        CHECK_STR(buf, "[d]");
        handed(m, PASS_COPY_FIRST, gen, buf, sizeof(buf));
        CHECK_STR(buf, "b d");
        /* --delete refused: d's rows back as they were (x pending, y
         * pending), SRC's root left to the next run */
        CHECK_EQ(ferry_manifest_delete_refused(m, gen), 0);
        CHECK_EQ(count(m, COUNT_GONE, gen), 0);
        walked(m, DIRS_TO_APPLY, gen, buf, sizeof(buf));
        CHECK_STR(buf, ""); /* the root: deferred, applied */

        /* a removed directory deleted from DST: its parent to apply */
        struct ferry_dir_walk *w = NULL;
        const struct ferry_dir_row *rows;
        size_t n = 0;
        CHECK_EQ(ferry_manifest_dir_walk(m, DIRS_REMOVED, gen, &w), 0);
        CHECK_EQ(ferry_manifest_dir_walk_next(m, w, &rows, &n), 0);
        CHECK_EQ(n, 1);
        if (n == 1) {
                CHECK_STR(rows[0].path, "d");
                CHECK(rows[0].parent > 0);
                CHECK_EQ(ferry_manifest_dir_outcome(m, &rows[0], DIR_DELETED,
                                                    NULL, NULL),
                         0);
        }
        ferry_manifest_dir_walk_end(w);
        walked(m, DIRS_TO_APPLY, gen, buf, sizeof(buf));
        CHECK_STR(buf, "[]");
        walked(m, DIRS_REMOVED, gen, buf, sizeof(buf));
        CHECK_STR(buf, "");
        ferry_manifest_close(m);
}

/* An unreadable directory keeps its rows; a later chunk with no directory
 * before it is refused. */
static void test_record_listing_unread(void)
{
        struct ferry_manifest *m = mem_open();
        if (!m)
                return;
        char buf[256];
        int64_t gen = 0;
        uint64_t files, bytes;
        struct ferry_entry_rec out[4];
        const char *root[] = {"a", NULL}, *none[] = {NULL};
        CHECK_EQ(ferry_manifest_scan_start(m, &gen, &files, &bytes), 0);
        CHECK_EQ(record(m, chunk("", 50, true, true, root, 1), gen, false, out),
                 0);
        CHECK_EQ(
                record(m, chunk("d", 60, true, true, root, 1), gen, false, out),
                0);
        CHECK_EQ(ferry_manifest_scan_complete(m, gen), 0);
        CHECK_EQ(ferry_manifest_scan_start(m, &gen, &files, &bytes), 0);
        CHECK_EQ(record(m, chunk("", 50, true, true, root, 1), gen, false, out),
                 0);
        struct ferry_listing *l = chunk("d", 61, true, true, none, 0);
        l->open_err = EACCES;
        struct ferry_listing_rec how = {.gen = gen,
                                        .error = "cannot read directory"};
        CHECK_EQ(ferry_manifest_record_listing(m, l, &how, out), 0);
        ferry_listing_free(l);
        CHECK_EQ(ferry_manifest_scan_complete(m, gen), 0);
        CHECK_EQ(count(m, COUNT_GONE, gen), 0);
        /* d/a is still part of the scan, not handed out by it */
        CHECK_EQ(count(m, COUNT_NOT_DONE, gen), 2);
        handed(m, PASS_COPY_FIRST, gen, buf, sizeof(buf));
        CHECK_STR(buf, "a");
        l = chunk("nowhere", 1, false, true, root, 1);
        out[0] = (struct ferry_entry_rec){.res = UP_NEW, .id = 99};
        CHECK(ferry_manifest_record_listing(m, l, &how, out) != 0);
        /* refused whole: no entry may look recorded to the caller */
        CHECK_EQ(out[0].res, 0);
        ferry_listing_free(l);
        ferry_manifest_close(m);
}

/* The failures a status of m (in a write transaction) hands on. */
static void status_of(struct ferry_manifest *m, struct failure_list *l,
                      struct ferry_status_info *info)
{
        memset(l, 0, sizeof(*l));
        struct ferry_status_req req = {NULL, list_failure, l, 0};
        CHECK_EQ(ferry_manifest_commit(m), 0);
        CHECK_EQ(ferry_manifest_status(m, info, &req), 0);
        CHECK_EQ(ferry_manifest_begin(m), 0);
}

/* A failure's cause is kept beside its message by the operation-level
 * calls: a file's (record_outcomes), a directory's metadata (dir_outcome)
 * and an unreadable directory (record_listing); a failure recorded again
 * without one has none. */
static void test_outcomes_keep_causes(void)
{
        struct ferry_manifest *m = mem_open();
        if (!m)
                return;
        int64_t gen = 0;
        uint64_t files, bytes;
        struct ferry_entry_rec out[4];
        const char *root[] = {"a", "b", NULL}, *none[] = {NULL};
        CHECK_EQ(ferry_manifest_scan_start(m, &gen, &files, &bytes), 0);
        CHECK_EQ(record(m, chunk("", 50, true, true, root, 2), gen, false, out),
                 0);
        int64_t a = out[0].id, b = out[1].id;
        CHECK_EQ(
                record(m, chunk("d", 60, true, true, none, 0), gen, false, out),
                0);
        const struct ferry_failure acces = {FERRY_SIDE_SRC, FERRY_STEP_OPENDIR,
                                            EACCES};
        struct ferry_listing *l = chunk("u", 61, true, true, none, 0);
        l->open_err = EACCES;
        struct ferry_listing_rec how = {
                .gen = gen,
                .error = "cannot read directory: Permission denied",
                .fail = &acces};
        CHECK_EQ(ferry_manifest_record_listing(m, l, &how, out), 0);
        ferry_listing_free(l);
        CHECK_EQ(ferry_manifest_scan_complete(m, gen), 0);

        const struct ferry_failure eio = {FERRY_SIDE_SRC, FERRY_STEP_READ, EIO};
        const struct ferry_failure eperm = {FERRY_SIDE_DST, FERRY_STEP_CHMOD,
                                            EPERM};
        struct ferry_outcome o[] = {
                {.kind = FO_FAILED, .id = a, .why = "read", .fail = &eio},
                {.kind = FO_FAILED, .id = b, .why = "old"}, /* no cause */
        };
        CHECK_EQ(ferry_manifest_record_outcomes(m, o, 2, NULL), 0);
        struct ferry_dir_walk *w = NULL;
        const struct ferry_dir_row *rows;
        size_t n = 0;
        CHECK_EQ(ferry_manifest_dir_walk(m, DIRS_TO_APPLY, gen, &w), 0);
        while (w && !ferry_manifest_dir_walk_next(m, w, &rows, &n) && n)
                for (size_t i = 0; i < n; i++) {
                        bool d = !strcmp(rows[i].path, "d");
                        CHECK_EQ(ferry_manifest_dir_outcome(
                                         m, &rows[i],
                                         d ? DIR_FAILED : DIR_APPLIED,
                                         d ? &eperm : NULL,
                                         d ? "set directory mode" : NULL),
                                 0);
                }
        ferry_manifest_dir_walk_end(w);

        /* by cause: none (b), SRC opendir (u), SRC read (a), DST (d) */
        struct failure_list fl;
        struct ferry_status_info info;
        status_of(m, &fl, &info);
        CHECK_EQ(info.failed.files, 4);
        CHECK_EQ(fl.n, 4);
        static const char *const order[] = {"b", "u", "a", "d"};
        for (int i = 0; i < 4 && i < fl.n; i++)
                CHECK_STR(fl.path[i], order[i]);
        CHECK_EQ(fl.fail[0].side, FERRY_SIDE_NONE);
        CHECK_EQ(fl.fail[1].side, FERRY_SIDE_SRC);
        CHECK_EQ(fl.fail[1].step, FERRY_STEP_OPENDIR);
        CHECK_EQ(fl.fail[1].err, EACCES);
        CHECK_EQ(fl.fail[2].step, FERRY_STEP_READ);
        CHECK_EQ(fl.fail[2].err, EIO);
        CHECK_EQ(fl.fail[3].side, FERRY_SIDE_DST);
        CHECK_EQ(fl.fail[3].step, FERRY_STEP_CHMOD);
        CHECK_EQ(fl.fail[3].err, EPERM);

        /* a failed again without a cause: a and b are one cause now */
        o[0].fail = NULL;
        CHECK_EQ(ferry_manifest_record_outcomes(m, o, 1, NULL), 0);
        status_of(m, &fl, &info);
        CHECK_EQ(fl.n, 4);
        CHECK_STR(fl.path[0], "a");
        CHECK_EQ(fl.count[0], 2);
        CHECK_EQ(fl.fail[0].side, FERRY_SIDE_NONE);
        ferry_manifest_close(m);
}

/* Hardlink groups: the first name is handed out alone; a failed first
 * name hands its group on at once (record_outcomes), a removed one once
 * the scan is complete (scan_complete). */
static void test_outcomes_elect_leaders(void)
{
        struct ferry_manifest *m = mem_open();
        if (!m)
                return;
        char buf[256];
        int64_t gen = 0;
        uint64_t files, bytes;
        struct ferry_entry_rec out[8];
        const char *root[] = {"%x", "%y", "&p", "&q", NULL};
        CHECK_EQ(ferry_manifest_scan_start(m, &gen, &files, &bytes), 0);
        CHECK_EQ(record(m, chunk("", 50, true, true, root, 4), gen, true, out),
                 0);
        int64_t x = out[0].id;
        CHECK_EQ(ferry_manifest_scan_complete(m, gen), 0);
        handed(m, PASS_COPY_FIRST, gen, buf, sizeof(buf));
        CHECK_STR(buf, "x p");
        struct ferry_outcome fail = {.kind = FO_FAILED, .id = x, .why = "EIO"};
        bool fresh = false;
        CHECK_EQ(ferry_manifest_record_outcomes(m, &fail, 1, &fresh), 0);
        CHECK(fresh);
        handed(m, PASS_COPY_FIRST, gen, buf, sizeof(buf));
        CHECK_STR(buf, "y p");
        /* gen 2: p is gone (the root changed: its rows are marked) */
        const char *root2[] = {"%x", "%y", "&q", NULL};
        CHECK_EQ(ferry_manifest_scan_start(m, &gen, &files, &bytes), 0);
        CHECK_EQ(record(m, chunk("", 51, true, true, root2, 3), gen, true, out),
                 0);
        handed(m, PASS_COPY_FIRST, gen, buf, sizeof(buf));
        CHECK_STR(buf, "y"); /* q still follows p, which is removed */
        CHECK_EQ(ferry_manifest_scan_complete(m, gen), 0);
        handed(m, PASS_COPY_FIRST, gen, buf, sizeof(buf));
        CHECK_STR(buf, "y q");
        /* x, retried, now follows y; again hands a row of the first pass
         * out by itself */
        struct ferry_handout h;
        ferry_manifest_handout_start(&h, PASS_COPY_FIRST, gen);
        struct ferry_batch *b = ferry_batch_new(WORK_COPY, 4);
        CHECK_EQ(ferry_manifest_handout_again(m, &h, x, b), 0);
        CHECK_EQ(b->n, 0); /* a follower: the next pass links it */
        CHECK_EQ(ferry_manifest_handout_again(m, &h, out[1].id, b), 0);
        CHECK_EQ(b->n, 1);
        CHECK(!ferry_manifest_handout_passed(&h, out[1].id));
        ferry_batch_free(b);
        ferry_manifest_close(m);
}

/* classify.c: a done row found again with its data as copied: its
 * metadata alone moved, or the run wants what was not applied, or it is a
 * hardlink name copied apart -> UP_META (need META, or DATA for a link);
 * the recorded stat stays the applied one; its data moved -> UP_CHANGED. */
static void upsert_one(struct fixture *fx, int64_t dir, const char *name,
                       const struct ferry_stat *st, int64_t gen,
                       bool hard_links, enum ferry_upsert want)
{
        enum ferry_upsert res = 0;
        CHECK_EQ(file_upsert(fx->m, dir, false, true, name, strlen(name), st,
                             gen, hard_links, &res),
                 0);
        CHECK_EQ(res, want);
}

static int64_t row_int(struct fixture *fx, const char *col, const char *name)
{
        char sql[160];
        snprintf(sql, sizeof(sql),
                 "SELECT %s FROM files WHERE name = CAST('%s' AS BLOB)"
                 " AND ?1 = ?1",
                 col, name);
        return sql_int(fx->db, sql, 0);
}

static void mark_done(struct fixture *fx, const char *name,
                      const struct ferry_stat *st, uint32_t applied)
{
        struct ferry_item it;
        memset(&it, 0, sizeof(it));
        it.id = row_int(fx, "id", name);
        it.type = FT_REG;
        it.st = *st;
        it.applied = applied;
        it.dst = (struct ferry_dst_rec){FT_REG, st->size, st->mtime};
        CHECK_EQ(mf_file_done(fx->m, &it), 0);
}

static void test_classify_metadata(void)
{
        struct fixture fx;
        fx_open(&fx);
        int64_t gen = 0, root = 0;
        bool is_new = false;
        struct ferry_stat d = mkstat(S_IFDIR | 0755, 0, 5, 2, 3);
        struct ferry_stat a = mkstat(S_IFREG | 0644, 10, 100, 70, 1);
        struct ferry_stat b = mkstat(S_IFREG | 0644, 20, 200, 71, 2);
        struct ferry_stat c = b; /* b's other name */
        const uint32_t all = MF_AP_PERMS | MF_AP_OWNER | MF_AP_TIMES;
        CHECK_EQ(ferry_manifest_begin(fx.m), 0);
        CHECK_EQ(mf_next_gen(fx.m, &gen), 0);
        CHECK_EQ(mf_dir_upsert(fx.m, "", 0, &d, gen, &root, &is_new,
                               &unit_marking),
                 0);
        upsert_one(&fx, root, "a", &a, gen, false, UP_NEW);
        upsert_one(&fx, root, "b", &b, gen, false, UP_NEW);
        upsert_one(&fx, root, "c", &c, gen, false, UP_NEW);
        CHECK_EQ(ferry_manifest_commit(fx.m), 0);
        CHECK_EQ(ferry_manifest_begin(fx.m), 0);
        /* copied with --no-perms --no-hard-links */
        mark_done(&fx, "a", &a, MF_AP_OWNER | MF_AP_TIMES);
        mark_done(&fx, "b", &b, MF_AP_OWNER | MF_AP_TIMES);
        mark_done(&fx, "c", &c, MF_AP_OWNER | MF_AP_TIMES);
        CHECK_EQ(ferry_manifest_commit(fx.m), 0);

        /* the same options: nothing to do */
        ferry_manifest_set_wanted(fx.m, MF_AP_OWNER | MF_AP_TIMES, 0, 0);
        CHECK_EQ(ferry_manifest_begin(fx.m), 0);
        CHECK_EQ(mf_next_gen(fx.m, &gen), 0);
        upsert_one(&fx, root, "a", &a, gen, false, UP_UNCHANGED);
        /* a chmod in SRC: metadata alone, the applied stat kept */
        struct ferry_stat a2 = a;
        a2.mode = S_IFREG | 0600;
        a2.ctime.sec++;
        upsert_one(&fx, root, "a", &a2, gen, false, UP_META);
        CHECK_EQ(ferry_manifest_commit(fx.m), 0);
        CHECK_EQ(row_int(&fx, "need", "a"), MF_NEED_META);
        CHECK_EQ(row_int(&fx, "state", "a"), ST_PENDING);
        CHECK_EQ(row_int(&fx, "mode", "a"), S_IFREG | 0644);

        /* a run with perms and hard links: b's mode is wanted (META, it
         * is the group's first name), c is to be a link to b (DATA) */
        ferry_manifest_set_wanted(fx.m, all, 0, 0);
        CHECK_EQ(ferry_manifest_begin(fx.m), 0);
        CHECK_EQ(mf_next_gen(fx.m, &gen), 0);
        upsert_one(&fx, root, "b", &b, gen, true, UP_META);
        upsert_one(&fx, root, "c", &c, gen, true, UP_META);
        CHECK_EQ(ferry_manifest_commit(fx.m), 0);
        CHECK_EQ(row_int(&fx, "need", "b"), MF_NEED_META);
        CHECK_EQ(row_int(&fx, "hl", "b"), MF_HL_LEADER);
        CHECK_EQ(row_int(&fx, "need", "c"), MF_NEED_DATA);
        CHECK_EQ(row_int(&fx, "hl", "c"), row_int(&fx, "id", "b"));

        /* its data moved too: a copy, the hash gone */
        CHECK_EQ(ferry_manifest_begin(fx.m), 0);
        CHECK_EQ(mf_next_gen(fx.m, &gen), 0);
        a2.size++;
        upsert_one(&fx, root, "a", &a2, gen, true, UP_CHANGED);
        CHECK_EQ(ferry_manifest_commit(fx.m), 0);
        CHECK_EQ(row_int(&fx, "need", "a"), MF_NEED_DATA);
        CHECK_EQ(row_int(&fx, "mode", "a"), S_IFREG | 0600);
        fx_close(&fx);
}

int main(int argc, char **argv)
{
        unit_init(argc, argv);
        RUN(test_create_and_reopen);
        RUN(test_refuses_what_is_not_a_manifest);
        RUN(test_refuses_truncated_manifest);
        RUN(test_refuses_deep_damage);
        RUN(test_wal_left_by_a_crash);
        RUN(test_status_leaves_no_wal);
        RUN(test_bind_job);
        RUN(test_repoint_job);
        RUN(test_adopt_not_with_verify);
        RUN(test_upserts_and_byte_names);
        RUN(test_classify_metadata);
        RUN(test_hardlinks);
        RUN(test_fill_limits_and_queries);
        RUN(test_status_counts);
        RUN(test_status_causes);
        RUN(test_sample_done);
        RUN(test_keep_subtree);
        RUN(test_listed_marking);
        RUN(test_upgrade_from_1);
        RUN(test_far_times);
        RUN(test_sql_agrees_with_enums);
        RUN(test_record_listing);
        RUN(test_record_listing_unread);
        RUN(test_outcomes_elect_leaders);
        RUN(test_outcomes_keep_causes);
        return unit_done();
}
