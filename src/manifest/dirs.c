/*
 * manifest/dirs.c - a directory row's metadata state: to apply (its mode
 * and times must still be set in DST) or applied, the error that says why
 * a directory could not be read or set up, the metadata DST refused to a
 * directory that is there (meta_step, meta_errno: still to apply), and
 * the row's removal. --verify walks the applied ones (what was applied:
 * applied, xdigest).
 * Directory rows are made and marked listed by the scan (scan_dirs.c).
 * Also the walk over the directories to set up or delete after the copy,
 * as their own row type (struct ferry_dir_row).
 */
#define _GNU_SOURCE
#include "manifest/internal.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define WALK_COLS                                                              \
        "id, coalesce(parent, 0), path, mode, uid, gid, mtime_ns, applied,"    \
        " xdigest"

enum dirs_stmt {
        S_DIR_TOUCH,
        S_DIR_CHAIN_TOUCH,
        S_DIR_APPLIED,
        S_DIR_META_FAILED,
        S_DIR_DEFER,
        S_DIR_DELETE,
        S_DIR_ERROR,
        S_WALK_TO_APPLY,
        S_WALK_REMOVED,
        S_WALK_REMOVED_KEEP,
        S_WALK_APPLIED,
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
        /* ?3: the xattr digest (NULL: none read), set with ?2 */
        [S_DIR_APPLIED] =
                "UPDATE dirs SET state = " SQL_APPLIED ","
                " applied = coalesce(?2, applied), xdigest = CASE WHEN"
                " ?2 IS NULL THEN xdigest ELSE ?3 END, meta_step = 0,"
                " meta_errno = 0 WHERE id = ?1",
        /* a metadata shortfall: the state stays to apply (the next run
         * applies it again), what was applied and why the rest was not */
        [S_DIR_META_FAILED] =
                "UPDATE dirs SET applied = ?2, meta_step = ?3,"
                " meta_errno = ?4 WHERE id = ?1",
        /* an mtime no directory has: the next scan finds it changed */
        [S_DIR_DEFER] =
                "UPDATE dirs SET state = " SQL_APPLIED ","
                " mtime_ns = " SQL_MTIME_NONE " WHERE id = ?1",
        [S_DIR_DELETE] = "DELETE FROM dirs WHERE id = ?1",
        /* ?3 .. ?5: the failure (mf_bind_failure) */
        [S_DIR_ERROR] =
                "UPDATE dirs SET error = ?2, fail_side = ?3,"
                " fail_step = ?4, fail_errno = ?5 WHERE id = ?1"
                " AND (error IS NOT ?2 OR fail_side IS NOT ?3"
                " OR fail_step IS NOT ?4 OR fail_errno IS NOT ?5)",
        /* ?1 below this id, ?2 limit, ?3 generation; deepest first (a
         * directory's row is made after its parent's) */
        [S_WALK_TO_APPLY] =
                "SELECT " WALK_COLS " FROM dirs WHERE state = " SQL_TO_APPLY
                " AND gen = ?3 AND id < ?1 ORDER BY id DESC LIMIT ?2",
        [S_WALK_REMOVED] =
                "SELECT " WALK_COLS " FROM dirs WHERE gen < ?3 AND id < ?1"
                " ORDER BY id DESC LIMIT ?2",
        /* the same but for directories the selection leaves out */
        [S_WALK_REMOVED_KEEP] =
                "SELECT " WALK_COLS " FROM dirs WHERE gen < ?3 AND id < ?1"
                " AND NOT ferry_keep(path, NULL, 0, 0, 0)"
                " ORDER BY id DESC LIMIT ?2",
        /* --verify: applied, with the mtime applied (not deferred) */
        [S_WALK_APPLIED] =
                "SELECT " WALK_COLS " FROM dirs WHERE state = " SQL_APPLIED
                " AND gen = ?3 AND id < ?1 AND mtime_ns IS NOT "
                SQL_MTIME_NONE " ORDER BY id DESC LIMIT ?2",
};
// clang-format on
_Static_assert(S_NSTMTS <= MF_TABLE_MAX, "dirs.c: statement table too big");

#define STMT(id) mf_stmt(m, T_DIRS, id, dirs_sql[id])

int mf_dir_touch(struct ferry_manifest *m, int64_t id)
{
        return mf_exec_id(m, STMT(S_DIR_TOUCH), id, "directory update");
}

int mf_dir_chain_touch(struct ferry_manifest *m, int64_t file)
{
        return mf_exec_id(m, STMT(S_DIR_CHAIN_TOUCH), file, "directory update");
}

int mf_dir_applied(struct ferry_manifest *m, int64_t id)
{
        return mf_exec_id(m, STMT(S_DIR_APPLIED), id, "directory update");
}

int mf_dir_applied_ap(struct ferry_manifest *m, const struct ferry_dir_row *d)
{
        sqlite3_stmt *s = STMT(S_DIR_APPLIED);
        if (!s)
                return mf_db_fail(m, "write");
        sqlite3_bind_int64(s, 1, d->id);
        sqlite3_bind_int64(s, 2, d->applied);
        if (d->has_xdigest)
                sqlite3_bind_int64(s, 3, (int64_t)d->xdigest);
        return mf_exec_stmt(m, s, "directory update");
}

static int dir_meta_failed(struct ferry_manifest *m,
                           const struct ferry_dir_row *d,
                           const struct ferry_failure *f)
{
        sqlite3_stmt *s = STMT(S_DIR_META_FAILED);
        if (!s)
                return mf_db_fail(m, "write");
        sqlite3_bind_int64(s, 1, d->id);
        sqlite3_bind_int64(s, 2, d->applied);
        sqlite3_bind_int(s, 3, f ? (int)f->step : 0);
        sqlite3_bind_int(s, 4, f ? f->err : 0);
        return mf_exec_stmt(m, s, "directory update");
}

int mf_dir_defer(struct ferry_manifest *m, int64_t id)
{
        return mf_exec_id(m, STMT(S_DIR_DEFER), id, "update");
}

int mf_dir_delete(struct ferry_manifest *m, int64_t id)
{
        return mf_exec_id(m, STMT(S_DIR_DELETE), id, "directory delete");
}

int mf_dir_set_error(struct ferry_manifest *m, int64_t id,
                     const struct ferry_failure *f, const char *error)
{
        sqlite3_stmt *s = STMT(S_DIR_ERROR);
        if (!s)
                return mf_db_fail(m, "write");
        sqlite3_bind_int64(s, 1, id);
        if (error)
                sqlite3_bind_text(s, 2, error, -1, SQLITE_TRANSIENT);
        mf_bind_failure(s, 3, error ? f : NULL);
        return mf_exec_stmt(m, s, "directory update");
}

/* ---- operation-level calls (manifest.h) ---- */

#define WALK_CHUNK 256 /* rows read at a time */

struct ferry_dir_walk {
        enum ferry_dir_set set;
        int64_t gen;
        int64_t below; /* rows below this id are still to come */
        struct ferry_dir_row rows[WALK_CHUNK];
        char *arena; /* the chunk's paths, NUL-terminated */
        size_t arena_cap;
};

int ferry_manifest_dir_walk(struct ferry_manifest *m, enum ferry_dir_set set,
                            int64_t gen, struct ferry_dir_walk **w)
{
        *w = NULL;
        if (set != DIRS_TO_APPLY && set != DIRS_REMOVED && set != DIRS_APPLIED)
                return mf_fail(m, "manifest: no such set of directories");
        struct ferry_dir_walk *n = calloc(1, sizeof(*n));
        if (!n)
                return mf_fail(m, "out of memory");
        n->set = set;
        n->gen = gen;
        n->below = INT64_MAX;
        *w = n;
        return 0;
}

/* Copies the chunk's paths into w's arena, once the rows are read. */
static int keep_paths(struct ferry_dir_walk *w, size_t n, const size_t *off)
{
        for (size_t i = 0; i < n; i++)
                w->rows[i].path = w->arena + off[i];
        return 0;
}

/* Appends the path of the row s is on to w's arena at *used. */
static int put_path(struct ferry_dir_walk *w, sqlite3_stmt *s, size_t *used,
                    size_t *off)
{
        const void *p = sqlite3_column_blob(s, 2);
        size_t len = (size_t)sqlite3_column_bytes(s, 2);
        if (*used + len + 1 > w->arena_cap) {
                size_t cap = (*used + len + 1) * 2;
                char *a = realloc(w->arena, cap);
                if (!a)
                        return ENOMEM;
                w->arena = a;
                w->arena_cap = cap;
        }
        if (len)
                memcpy(w->arena + *used, p, len);
        w->arena[*used + len] = '\0';
        *off = *used;
        *used += len + 1;
        return 0;
}

int ferry_manifest_dir_walk_next(struct ferry_manifest *m,
                                 struct ferry_dir_walk *w,
                                 const struct ferry_dir_row **rows, size_t *n)
{
        *rows = w->rows;
        *n = 0;
        int id = w->set == DIRS_TO_APPLY  ? S_WALK_TO_APPLY
                 : w->set == DIRS_APPLIED ? S_WALK_APPLIED
                 : m->keep                ? S_WALK_REMOVED_KEEP
                                          : S_WALK_REMOVED;
        sqlite3_stmt *s = STMT(id);
        if (!s)
                return mf_db_fail(m, "query");
        sqlite3_bind_int64(s, 1, w->below);
        sqlite3_bind_int64(s, 2, WALK_CHUNK);
        sqlite3_bind_int64(s, 3, w->gen);
        size_t used = 0, off[WALK_CHUNK];
        int rc;
        while ((rc = sqlite3_step(s)) == SQLITE_ROW && *n < WALK_CHUNK) {
                struct ferry_dir_row *d = &w->rows[*n];
                d->id = sqlite3_column_int64(s, 0);
                d->parent = sqlite3_column_int64(s, 1);
                d->path_len = (size_t)sqlite3_column_bytes(s, 2);
                d->mode = (uint32_t)sqlite3_column_int64(s, 3);
                d->uid = (uint32_t)sqlite3_column_int64(s, 4);
                d->gid = (uint32_t)sqlite3_column_int64(s, 5);
                d->mtime = mf_column_time(s, 6);
                d->applied = (uint32_t)sqlite3_column_int64(s, 7);
                d->has_xdigest = sqlite3_column_type(s, 8) != SQLITE_NULL;
                d->xdigest = (uint64_t)sqlite3_column_int64(s, 8);
                if (put_path(w, s, &used, &off[*n])) {
                        sqlite3_reset(s);
                        *n = 0;
                        return mf_fail(m, "out of memory");
                }
                w->below = d->id;
                (*n)++;
        }
        sqlite3_reset(s);
        if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
                *n = 0;
                return mf_db_fail(m, "query");
        }
        return keep_paths(w, *n, off);
}

void ferry_manifest_dir_walk_end(struct ferry_dir_walk *w)
{
        if (!w)
                return;
        free(w->arena);
        free(w);
}

int ferry_manifest_dir_outcome(struct ferry_manifest *m,
                               const struct ferry_dir_row *d,
                               enum ferry_dir_outcome o,
                               const struct ferry_failure *fail,
                               const char *why)
{
        int rc = 0;
        switch (o) {
        case DIR_APPLIED: return mf_dir_applied_ap(m, d);
        case DIR_FAILED: return mf_dir_set_error(m, d->id, fail, why);
        case DIR_META_FAILED: return dir_meta_failed(m, d, fail);
        case DIR_DEFERRED: return mf_dir_defer(m, d->id);
        case DIR_DELETED:
                /* its parent's mtime changed in DST */
                if (d->parent)
                        rc = mf_dir_touch(m, d->parent);
                return rc ? rc : mf_dir_delete(m, d->id);
        case DIR_FORGOTTEN: return mf_dir_delete(m, d->id);
        case DIR_TO_APPLY: return mf_dir_touch(m, d->id);
        }
        return mf_fail(m, "manifest: no such directory outcome %d", (int)o);
}
