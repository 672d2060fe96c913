/*
 * manifest/dirs.c - a directory row's metadata state: to apply (its mode
 * and times must still be set in DST) or applied, the error that says why
 * a directory could not be read or set up, and the row's removal.
 * Directory rows are made and marked listed by the scan (scan.c).
 */
#define _GNU_SOURCE
#include "manifest/internal.h"

enum dirs_stmt {
        S_DIR_TOUCH,
        S_DIR_CHAIN_TOUCH,
        S_DIR_APPLIED,
        S_DIR_DEFER,
        S_DIR_DELETE,
        S_DIR_ERROR,
        S_NSTMTS
};

// clang-format off
static const char *const dirs_sql[S_NSTMTS] = {
        [S_DIR_TOUCH] =
                "UPDATE dirs SET state = " SQL_TO_APPLY " WHERE id = ?1"
                " AND state != " SQL_TO_APPLY,
        /* the directory of file row ?1 and every one above it */
        [S_DIR_CHAIN_TOUCH] =
                "WITH RECURSIVE up(id) AS (SELECT dir FROM files WHERE id = ?1"
                " UNION SELECT d.parent FROM dirs d JOIN up ON d.id = up.id"
                " WHERE d.parent IS NOT NULL)"
                " UPDATE dirs SET state = " SQL_TO_APPLY " WHERE id IN up"
                " AND state != " SQL_TO_APPLY,
        [S_DIR_APPLIED] =
                "UPDATE dirs SET state = " SQL_APPLIED " WHERE id = ?1",
        /* an mtime no directory has: the next scan finds it changed */
        [S_DIR_DEFER] =
                "UPDATE dirs SET state = " SQL_APPLIED ","
                " mtime_ns = " SQL_MTIME_NONE " WHERE id = ?1",
        [S_DIR_DELETE] = "DELETE FROM dirs WHERE id = ?1",
        [S_DIR_ERROR] =
                "UPDATE dirs SET error = ?2 WHERE id = ?1"
                " AND error IS NOT ?2",
};
// clang-format on
_Static_assert(S_NSTMTS <= MF_TABLE_MAX, "dirs.c: statement table too big");

#define STMT(id) mf_stmt(m, T_DIRS, id, dirs_sql[id])

int ferry_manifest_dir_touch(struct ferry_manifest *m, int64_t id)
{
        return mf_exec_id(m, STMT(S_DIR_TOUCH), id, "directory update");
}

int ferry_manifest_dir_chain_touch(struct ferry_manifest *m, int64_t file)
{
        return mf_exec_id(m, STMT(S_DIR_CHAIN_TOUCH), file, "directory update");
}

int ferry_manifest_dir_applied(struct ferry_manifest *m, int64_t id)
{
        return mf_exec_id(m, STMT(S_DIR_APPLIED), id, "directory update");
}

int ferry_manifest_dir_defer(struct ferry_manifest *m, int64_t id)
{
        return mf_exec_id(m, STMT(S_DIR_DEFER), id, "update");
}

int ferry_manifest_dir_delete(struct ferry_manifest *m, int64_t id)
{
        return mf_exec_id(m, STMT(S_DIR_DELETE), id, "directory delete");
}

int ferry_manifest_dir_set_error(struct ferry_manifest *m, int64_t id,
                                 const char *error)
{
        sqlite3_stmt *s = STMT(S_DIR_ERROR);
        if (!s)
                return mf_db_fail(m, "write");
        sqlite3_bind_int64(s, 1, id);
        if (error)
                sqlite3_bind_text(s, 2, error, -1, SQLITE_TRANSIENT);
        return mf_exec_stmt(m, s, "directory update");
}
