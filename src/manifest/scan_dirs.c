/*
 * manifest/scan_dirs.c - what a scan of SRC writes by directory: the
 * directory rows (new, changed, listed whole) and the marks that go by
 * directory: a file row named like a new directory, the rows a marking
 * listing did not see, those below a directory that became a file, those
 * of directories a complete scan did not see (all ST_REMOVED), and the
 * rows below a directory the scan could not read, kept part of the scan;
 * and the directories being listed, kept in a small cache (m->dcache) for
 * the later chunks of their listings (mf_listing_dir). scan.c's
 * record_listing and scan_complete call these. With a selection
 * (ferry_manifest_set_keep, the SQL function ferry_keep) the marks that
 * remove rows pass over the rows it leaves out (the *_KEEP statements).
 *
 * A file row is part of scan gen when its gen is gen (the scan wrote it)
 * or when its directory's listed is gen (sql/002_listed.sql).
 */
#define _GNU_SOURCE
#include "manifest/internal.h"

#include <stdlib.h>
#include <string.h>

enum scan_dirs_stmt {
        S_DIR_FIND,
        S_DIR_INSERT,
        S_DIR_UPDATE,
        S_DIR_LISTED,
        S_DIR_COUNT,
        S_DIR_UNSEEN,
        S_FILE_REMOVE_NAME,
        S_SUBTREE_REMOVED,
        S_MARK_UNSEEN,
        S_KEEP_SUBTREE,
        S_KEEP_ALL,
        S_DIR_COUNT_KEEP,
        S_DIR_UNSEEN_KEEP,
        S_MARK_UNSEEN_KEEP,
        S_NSTMTS
};

// clang-format off
static const char *const scan_dirs_sql[S_NSTMTS] = {
        [S_DIR_FIND] =
                "SELECT id, mode, uid, gid, mtime_ns, listed, applied,"
                " ctime_ns FROM dirs WHERE path = ?1",
        [S_DIR_INSERT] =
                "INSERT INTO dirs (parent, path, mode, uid, gid, mtime_ns,"
                " state, gen, listed, ctime_ns) VALUES (?1, ?2, ?3, ?4, ?5,"
                " ?6, " SQL_TO_APPLY ", ?7, " SQL_MARKING ", ?8)",
        /* ?7: changed (metadata to apply again), ?8: its rows are marked */
        [S_DIR_UPDATE] =
                "UPDATE dirs SET mode = ?2, uid = ?3, gid = ?4,"
                " mtime_ns = ?5, gen = ?6,"
                " state = CASE WHEN ?7 THEN " SQL_TO_APPLY " ELSE state END,"
                " listed = CASE WHEN ?8 THEN " SQL_MARKING " ELSE listed END,"
                " ctime_ns = ?9 WHERE id = ?1",
        /* ?3: a later scan must mark this directory's rows one by one */
        [S_DIR_LISTED] =
                "UPDATE dirs SET listed = ?2, mtime_ns = CASE WHEN"
                " ?3 THEN " SQL_MTIME_NONE " ELSE mtime_ns END WHERE id = ?1",
        [S_DIR_COUNT] =
                "SELECT count(*) FROM files WHERE dir = ?1"
                " AND state != " SQL_REMOVED,
        [S_DIR_UNSEEN] =
                "UPDATE files SET state = " SQL_REMOVED ", gen = ?2"
                " WHERE dir = ?1 AND gen < ?2 AND state != " SQL_REMOVED,
        [S_FILE_REMOVE_NAME] =
                "UPDATE files SET state = " SQL_REMOVED ", gen = ?3"
                " WHERE dir = ?1 AND name = ?2 AND state != " SQL_REMOVED,
        [S_SUBTREE_REMOVED] =
                "UPDATE files SET state = " SQL_REMOVED ", gen = ?1"
                " WHERE state != " SQL_REMOVED " AND dir IN (SELECT id"
                " FROM dirs WHERE path = ?2 OR (path >= ?3"
                " AND path < ?4))",
        [S_MARK_UNSEEN] =
                "UPDATE files SET state = " SQL_REMOVED ", gen = ?1"
                " WHERE state != " SQL_REMOVED " AND dir IN (SELECT id"
                " FROM dirs WHERE gen < ?1)",
        [S_KEEP_SUBTREE] =
                "UPDATE dirs SET gen = ?1, listed = ?1"
                " WHERE path = ?2 OR (path >= ?3 AND path < ?4)",
        [S_KEEP_ALL] = "UPDATE dirs SET gen = ?1, listed = ?1",
        /* the same three, but for the rows the selection leaves out: a
         * row not seen because of it is no source deletion. The count
         * reads seen rows too, so it looks nothing up in SRC (a seen row
         * would be kept): a file that grew past --max-size is counted, and
         * its directory is marked row by row the next time (S_DIR_UNSEEN,
         * which looks it up and keeps it) */
        [S_DIR_COUNT_KEEP] =
                "SELECT count(*) FROM files WHERE dir = ?1"
                " AND state != " SQL_REMOVED " AND NOT ferry_keep((SELECT"
                " path FROM dirs WHERE id = ?1), name, type, size, 0)",
        [S_DIR_UNSEEN_KEEP] =
                "UPDATE files SET state = " SQL_REMOVED ", gen = ?2"
                " WHERE dir = ?1 AND gen < ?2 AND state != " SQL_REMOVED
                " AND NOT ferry_keep((SELECT path FROM dirs WHERE id = ?1),"
                " name, type, size, 1)",
        [S_MARK_UNSEEN_KEEP] =
                "UPDATE files SET state = " SQL_REMOVED ", gen = ?1"
                " WHERE state != " SQL_REMOVED " AND dir IN (SELECT id"
                " FROM dirs WHERE gen < ?1) AND NOT ferry_keep((SELECT"
                " path FROM dirs d WHERE d.id = files.dir), name, type,"
                " size, 1)",
};
// clang-format on
_Static_assert(S_NSTMTS <= MF_TABLE_MAX,
               "scan_dirs.c: statement table too big");

#define STMT(id) mf_stmt(m, T_SCAN_DIRS, id, scan_dirs_sql[id])
/* id, or its _KEEP twin when a selection is set */
#define KEEP_STMT(id) (m->keep ? STMT(id##_KEEP) : STMT(id))

/* ferry_keep(dir path, name or NULL, type, size, may_stat) */
static void sql_keep(sqlite3_context *ctx, int argc, sqlite3_value **v)
{
        (void)argc;
        struct ferry_manifest *m = sqlite3_user_data(ctx);
        const char *dir = sqlite3_value_blob(v[0]);
        size_t dlen = (size_t)sqlite3_value_bytes(v[0]);
        bool is_dir = sqlite3_value_type(v[1]) == SQLITE_NULL;
        const char *name = is_dir ? NULL : sqlite3_value_blob(v[1]);
        size_t nlen = is_dir ? 0 : (size_t)sqlite3_value_bytes(v[1]);
        bool keep = m->keep && m->keep(m->keep_arg, dir ? dir : "", dlen,
                                       is_dir ? NULL
                                       : name ? name
                                              : "",
                                       nlen, sqlite3_value_int(v[2]),
                                       (uint64_t)sqlite3_value_int64(v[3]),
                                       sqlite3_value_int(v[4]) != 0);
        sqlite3_result_int(ctx, keep);
}

int ferry_manifest_set_keep(struct ferry_manifest *m,
                            ferry_manifest_keep_fn keep, void *arg)
{
        m->keep = keep;
        m->keep_arg = arg;
        if (!keep)
                return 0;
        int rc = sqlite3_create_function(m->db, "ferry_keep", 5,
                                         SQLITE_UTF8 | SQLITE_DIRECTONLY, m,
                                         sql_keep, NULL, NULL);
        return rc == SQLITE_OK ? 0 : mf_db_fail(m, "selection");
}

bool mf_kept(struct ferry_manifest *m, const char *dir, size_t dlen,
             const char *name, size_t nlen, int type, uint64_t size)
{
        return m->keep &&
               m->keep(m->keep_arg, dir, dlen, name, nlen, type, size, true);
}

int mf_dir_find(struct ferry_manifest *m, const char *path, size_t len,
                int64_t *id, bool *marking)
{
        sqlite3_stmt *s = STMT(S_DIR_FIND);
        if (!s)
                return mf_db_fail(m, "read");
        mf_bind_bytes(s, 1, path, len);
        int rc = sqlite3_step(s);
        *id = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : 0;
        if (marking)
                *marking = rc != SQLITE_ROW || sqlite3_column_int64(s, 5) < 0;
        sqlite3_reset(s);
        return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0
                                                     : mf_db_fail(m, "read");
}

/* A new directory D of P: a file row named D in P (a file that became this
 * directory) is no longer in SRC. */
static int remove_file_named(struct ferry_manifest *m, int64_t parent,
                             const char *path, size_t len, int64_t gen)
{
        size_t plen = mf_parent_len(path, len), skip = plen ? plen + 1 : 0;
        sqlite3_stmt *s = STMT(S_FILE_REMOVE_NAME);
        if (!s)
                return mf_db_fail(m, "write");
        sqlite3_bind_int64(s, 1, parent);
        mf_bind_bytes(s, 2, path + skip, len - skip);
        sqlite3_bind_int64(s, 3, gen);
        return mf_exec_stmt(m, s, "file update");
}

int mf_dir_upsert(struct ferry_manifest *m, const char *path, size_t len,
                  const struct ferry_stat *st, int64_t gen, int64_t *id,
                  bool *is_new, bool *marking)
{
        sqlite3_stmt *s = STMT(S_DIR_FIND);
        if (!s)
                return mf_db_fail(m, "read");
        mf_bind_bytes(s, 1, path, len);
        int rc = sqlite3_step(s);
        if (rc == SQLITE_ROW) {
                *id = sqlite3_column_int64(s, 0);
                /* only the ctime moves for a setfattr, a setfacl: the
                 * metadata to apply again, no entry lost (NULL: a row of
                 * an older ferry, sql/008_dir_ctime.sql) */
                bool ctime_moved =
                        sqlite3_column_type(s, 7) == SQLITE_NULL ||
                        !ferry_time_eq(mf_column_time(s, 7), st->ctime);
                bool changed =
                        (uint32_t)sqlite3_column_int64(s, 1) != st->mode ||
                        (uint32_t)sqlite3_column_int64(s, 2) != st->uid ||
                        (uint32_t)sqlite3_column_int64(s, 3) != st->gid ||
                        !ferry_time_eq(mf_column_time(s, 4), st->mtime) ||
                        (m->wanted & ~(uint32_t)sqlite3_column_int64(s, 6)) !=
                                0;
                /* an unchanged directory cannot have lost entries (its
                 * mtime would have moved), so its rows are only read; the
                 * count in mf_dir_listed checks that anyway */
                *marking = changed || sqlite3_column_int64(s, 5) < 0;
                sqlite3_reset(s);
                *is_new = false;
                s = STMT(S_DIR_UPDATE);
                if (!s)
                        return mf_db_fail(m, "write");
                sqlite3_bind_int64(s, 1, *id);
                sqlite3_bind_int64(s, 2, st->mode);
                sqlite3_bind_int64(s, 3, st->uid);
                sqlite3_bind_int64(s, 4, st->gid);
                mf_bind_time(s, 5, st->mtime);
                sqlite3_bind_int64(s, 6, gen);
                sqlite3_bind_int(s, 7, changed || ctime_moved);
                sqlite3_bind_int(s, 8, *marking);
                mf_bind_time(s, 9, st->ctime);
                return mf_exec_stmt(m, s, "directory update");
        }
        sqlite3_reset(s);
        if (rc != SQLITE_DONE)
                return mf_db_fail(m, "read");
        int64_t parent = 0;
        if (len) {
                rc = mf_dir_find(m, path, mf_parent_len(path, len), &parent,
                                 NULL);
                /* a new directory changes its parent's mtime in DST */
                if (!rc && parent)
                        rc = remove_file_named(m, parent, path, len, gen);
                if (!rc && parent)
                        rc = mf_dir_touch(m, parent);
                if (rc)
                        return rc;
        }
        s = STMT(S_DIR_INSERT);
        if (!s)
                return mf_db_fail(m, "write");
        if (len)
                sqlite3_bind_int64(s, 1, parent);
        mf_bind_bytes(s, 2, path, len);
        sqlite3_bind_int64(s, 3, st->mode);
        sqlite3_bind_int64(s, 4, st->uid);
        sqlite3_bind_int64(s, 5, st->gid);
        mf_bind_time(s, 6, st->mtime);
        sqlite3_bind_int64(s, 7, gen);
        mf_bind_time(s, 8, st->ctime);
        rc = mf_exec_stmt(m, s, "directory insert");
        if (rc)
                return rc;
        *id = sqlite3_last_insert_rowid(m->db);
        *is_new = true;
        *marking = true;
        return 0;
}

int mf_dir_listed(struct ferry_manifest *m, int64_t id, int64_t gen,
                  bool marking, uint64_t seen)
{
        return mf_dir_listed_rows(m, id, gen, marking, seen, -1);
}

/* The directory's rows that are not removed (S_DIR_COUNT) into *rows. */
static int count_rows(struct ferry_manifest *m, int64_t id, int64_t *rows)
{
        sqlite3_stmt *s = KEEP_STMT(S_DIR_COUNT);
        if (!s)
                return mf_db_fail(m, "read");
        sqlite3_bind_int64(s, 1, id);
        int rc = sqlite3_step(s);
        *rows = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : -1;
        sqlite3_reset(s);
        return rc == SQLITE_ROW ? 0 : mf_db_fail(m, "read");
}

int mf_dir_listed_rows(struct ferry_manifest *m, int64_t id, int64_t gen,
                       bool marking, uint64_t seen, int64_t rows)
{
        bool again = false;
        sqlite3_stmt *s;
        if (marking) {
                /* the rows this scan did not write are gone from SRC */
                if (!(s = KEEP_STMT(S_DIR_UNSEEN)))
                        return mf_db_fail(m, "write");
                sqlite3_bind_int64(s, 1, id);
                sqlite3_bind_int64(s, 2, gen);
                int rc = mf_exec_stmt(m, s, "file update");
                if (rc)
                        return rc;
        } else {
                /* Only read: every row was seen iff there are as many rows
                 * as entries (each entry has its own row). If the mtime
                 * lied, keep them all this time and mark the next time. */
                int rc = rows < 0 ? count_rows(m, id, &rows) : 0;
                if (rc)
                        return rc;
                again = (uint64_t)rows != seen;
        }
        if (!(s = STMT(S_DIR_LISTED)))
                return mf_db_fail(m, "write");
        sqlite3_bind_int64(s, 1, id);
        sqlite3_bind_int64(s, 2, gen);
        sqlite3_bind_int(s, 3, again);
        return mf_exec_stmt(m, s, "directory update");
}

static struct mf_dir_slot *dcache_find(struct ferry_manifest *m,
                                       const char *path, size_t len)
{
        for (unsigned i = 0; i < MF_DIR_CACHE; i++) {
                struct mf_dir_slot *s = &m->dcache[i];
                if (s->path && s->len == len && !memcmp(s->path, path, len))
                        return s;
        }
        return NULL;
}

void mf_dcache_clear(struct ferry_manifest *m)
{
        for (unsigned i = 0; i < MF_DIR_CACHE; i++) {
                free(m->dcache[i].path);
                m->dcache[i] = (struct mf_dir_slot){.path = NULL};
        }
        m->dcache_next = 0;
}

static void dcache_put(struct ferry_manifest *m, const char *path, size_t len,
                       int64_t id, bool is_new, bool marking)
{
        struct mf_dir_slot *s = &m->dcache[m->dcache_next++ % MF_DIR_CACHE];
        free(s->path);
        s->path = malloc(len + 1);
        if (!s->path)
                return;
        memcpy(s->path, path, len);
        s->path[len] = '\0';
        s->len = len;
        s->id = id;
        s->is_new = is_new;
        s->marking = marking;
}

int mf_listing_dir(struct ferry_manifest *m, const struct ferry_listing *l,
                   int64_t gen, int64_t *id, bool *is_new, bool *marking)
{
        if (l->first) {
                int rc = mf_dir_upsert(m, l->path, l->path_len, &l->dir_st, gen,
                                       id, is_new, marking);
                if (!rc)
                        dcache_put(m, l->path, l->path_len, *id, *is_new,
                                   *marking);
                return rc;
        }
        struct mf_dir_slot *s = dcache_find(m, l->path, l->path_len);
        if (s) {
                *id = s->id;
                *is_new = s->is_new;
                *marking = s->marking;
                return 0;
        }
        *is_new = false;
        return mf_dir_find(m, l->path, l->path_len, id, marking);
}

int mf_subtree_removed(struct ferry_manifest *m, const char *path, size_t len,
                       int64_t gen)
{
        sqlite3_stmt *s = STMT(S_SUBTREE_REMOVED);
        if (!s)
                return mf_db_fail(m, "write");
        sqlite3_bind_int64(s, 1, gen);
        if (mf_bind_subtree(s, 2, path, len))
                return mf_fail(m, "out of memory");
        return mf_exec_stmt(m, s, "file update");
}

int mf_mark_unseen(struct ferry_manifest *m, int64_t gen)
{
        return mf_exec_id(m, KEEP_STMT(S_MARK_UNSEEN), gen, "file update");
}

int mf_keep_subtree(struct ferry_manifest *m, const char *path, size_t len,
                    int64_t gen)
{
        /* its directories count as listed: their rows stay part of SRC */
        sqlite3_stmt *d = len ? STMT(S_KEEP_SUBTREE) : STMT(S_KEEP_ALL);
        if (!d)
                return mf_db_fail(m, "write");
        sqlite3_bind_int64(d, 1, gen);
        return len && mf_bind_subtree(d, 2, path, len)
                       ? mf_fail(m, "out of memory")
                       : mf_exec_stmt(m, d, "directory update");
}
