/*
 * manifest/scan.c - what a scan of SRC writes for its files: the file
 * rows (the upsert and what it found; classify.c judges a row found again
 * whose data is as copied) and, when --delete is refused, undoing this
 * scan's removals; and the operation-level calls set_wanted, scan_start,
 * record_listing (which keeps the few directories being listed in a small
 * cache, m->dcache) and scan_complete. The directory rows and the marks
 * that go by directory are scan_dirs.c's.
 *
 * A file row is part of scan gen when its gen is gen (the scan wrote it)
 * or when its directory's listed is gen (sql/002_listed.sql).
 */
#define _GNU_SOURCE
#include "manifest/internal.h"

#include "buf.h"

#include <stdlib.h>
#include <string.h>

enum scan_stmt {
        S_FILE_FIND,
        S_FILE_FIND_ATIME,
        S_FILE_INSERT,
        S_FILE_SEEN,
        S_FILE_UPDATE,
        S_KEEP_REMOVED_HL,
        S_KEEP_REMOVED_STATE,
        S_NSTMTS
};

// clang-format off
static const char *const scan_sql[S_NSTMTS] = {
        /* the atime, the record's last column, only with --atimes */
        [S_FILE_FIND] =
                "SELECT id, type, size, mtime_ns, ctime_ns, mode, ino,"
                " state, gen, applied, hl, rdev, uid, gid"
                " FROM files WHERE dir = ?1 AND name = ?2",
        [S_FILE_FIND_ATIME] =
                "SELECT id, type, size, mtime_ns, ctime_ns, mode, ino,"
                " state, gen, applied, hl, rdev, uid, gid, atime_ns"
                " FROM files WHERE dir = ?1 AND name = ?2",
        [S_FILE_INSERT] =
                "INSERT INTO files (dir, name, type, size, mtime_ns,"
                " ctime_ns, mode, uid, gid, dev, ino, hl, state, gen, nlink,"
                " rdev)"
                " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10,"
                " ?11, ?12, ?13, ?14, ?15, ?16)",
        [S_FILE_SEEN] =
                "UPDATE files SET gen = ?2, state = CASE WHEN state = "
                SQL_VANISHED " THEN " SQL_PENDING " ELSE state END"
                " WHERE id = ?1",
        [S_FILE_UPDATE] =
                "UPDATE files SET type = ?2, size = ?3, mtime_ns = ?4,"
                " ctime_ns = ?5, mode = ?6, uid = ?7, gid = ?8,"
                " dev = ?9, ino = ?10, hl = ?11, state = ?12,"
                " gen = ?13, hash = NULL, nlink = ?14, rdev = ?15,"
                " need = " SQL_NEED_DATA " WHERE id = ?1",
        /* A row removed by scan ?1 held, before, what it holds now (the
         * marks that remove a row change neither its hash nor its error):
         * a hash with no error is a copy (file_done clears the error; a
         * row made pending again keeps its hash but gets an error, or,
         * after a replaced DST, loses the hash). A first name whose group
         * was all removed lost its mark (links.c, forget_group): its other
         * names still point to it. */
        [S_KEEP_REMOVED_HL] =
                "UPDATE files SET hl = " SQL_LEADER " WHERE state IN "
                SQL_GONE " AND state = " SQL_REMOVED " AND gen = ?1"
                " AND hl IS NULL AND EXISTS (SELECT 1 FROM files f"
                " WHERE f.ino = files.ino AND f.dev = files.dev"
                " AND f.hl = files.id)",
        [S_KEEP_REMOVED_STATE] =
                "UPDATE files SET state = CASE WHEN type = " SQL_SPECIAL
                " AND hash IS NULL THEN " SQL_SKIPPED
                " WHEN hash IS NOT NULL AND error IS NULL"
                " THEN " SQL_DONE " ELSE " SQL_PENDING " END"
                " WHERE state IN " SQL_GONE " AND state = " SQL_REMOVED
                " AND gen = ?1",
};
// clang-format on
_Static_assert(S_NSTMTS <= MF_TABLE_MAX, "scan.c: statement table too big");

#define STMT(id) mf_stmt(m, T_SCAN, id, scan_sql[id])

/* A special file the listing's options leave out (ST_SKIPPED), or a file
 * to copy (ST_PENDING). */
static bool left_out(const struct ferry_listing_rec *how,
                     const struct ferry_stat *st)
{
        if (mf_ftype_of(st->mode) != FT_SPECIAL)
                return false;
        return S_ISCHR(st->mode) || S_ISBLK(st->mode) ? !how->devices
                                                      : !how->specials;
}

static int file_insert(struct ferry_manifest *m, int64_t dir, const char *name,
                       size_t len, const struct ferry_stat *st, int64_t gen,
                       const struct ferry_listing_rec *how)
{
        int64_t hl;
        int rc = mf_hardlink_of(m, st, how->hard_links, 0, &hl);
        if (rc)
                return rc;
        sqlite3_stmt *s = STMT(S_FILE_INSERT);
        if (!s)
                return mf_db_fail(m, "write");
        enum ferry_ftype t = mf_ftype_of(st->mode);
        sqlite3_bind_int64(s, 1, dir);
        mf_bind_bytes(s, 2, name, len);
        sqlite3_bind_int(s, 3, t);
        mf_bind_stat(s, 4, st);
        mf_bind_hl(s, 12, hl);
        sqlite3_bind_int(s, 13, left_out(how, st) ? ST_SKIPPED : ST_PENDING);
        sqlite3_bind_int64(s, 14, gen);
        sqlite3_bind_int64(s, 15, (int64_t)st->nlink);
        sqlite3_bind_int64(s, 16, (int64_t)st->rdev); /* 0 but devices */
        return mf_exec_stmt(m, s, "file insert");
}

static int file_update(struct ferry_manifest *m, int64_t id,
                       const struct ferry_stat *st, int64_t gen,
                       const struct ferry_listing_rec *how)
{
        int64_t hl;
        int rc = mf_hardlink_of(m, st, how->hard_links, id, &hl);
        if (rc)
                return rc;
        sqlite3_stmt *s = STMT(S_FILE_UPDATE);
        if (!s)
                return mf_db_fail(m, "write");
        enum ferry_ftype t = mf_ftype_of(st->mode);
        sqlite3_bind_int64(s, 1, id);
        sqlite3_bind_int(s, 2, t);
        mf_bind_stat(s, 3, st);
        mf_bind_hl(s, 11, hl);
        sqlite3_bind_int(s, 12, left_out(how, st) ? ST_SKIPPED : ST_PENDING);
        sqlite3_bind_int64(s, 13, gen);
        sqlite3_bind_int64(s, 14, (int64_t)st->nlink);
        sqlite3_bind_int64(s, 15, (int64_t)st->rdev);
        return mf_exec_stmt(m, s, "file update");
}

static int upsert(struct ferry_manifest *m, int64_t dir, bool dir_is_new,
                  bool marking, const char *name, size_t len,
                  const struct ferry_stat *st, int64_t gen,
                  const struct ferry_listing_rec *how,
                  struct ferry_entry_rec *o)
{
        bool out = left_out(how, st);
        *o = (struct ferry_entry_rec){.res = UP_NEW, .skipped = out};
        int rc;
        if (dir_is_new) {
                rc = file_insert(m, dir, name, len, st, gen, how);
                o->id = rc ? 0 : sqlite3_last_insert_rowid(m->db);
                return rc;
        }
        sqlite3_stmt *s = m->wanted & MF_AP_ATIMES ? STMT(S_FILE_FIND_ATIME)
                                                   : STMT(S_FILE_FIND);
        if (!s)
                return mf_db_fail(m, "read");
        sqlite3_bind_int64(s, 1, dir);
        mf_bind_bytes(s, 2, name, len);
        rc = sqlite3_step(s);
        if (rc == SQLITE_DONE) {
                sqlite3_reset(s);
                rc = file_insert(m, dir, name, len, st, gen, how);
                o->id = rc ? 0 : sqlite3_last_insert_rowid(m->db);
                return rc;
        }
        if (rc != SQLITE_ROW) {
                sqlite3_reset(s);
                return mf_db_fail(m, "read");
        }
        struct mf_found f;
        mf_read_found(m, s, st, &f);
        /* a name listed twice (a directory changing while it is read)
         * must not be handed out twice */
        o->id = f.id;
        o->again = sqlite3_column_int64(s, 8) != gen;
        sqlite3_reset(s);
        /* a special file the options now copy, or now leave out (one
         * ferry made stays done) */
        bool regate = f.state == ST_SKIPPED ? !out
                                            : out && (f.state == ST_PENDING ||
                                                      f.state == ST_VANISHED);
        if (regate) {
                o->res = UP_CHANGED;
                return file_update(m, f.id, st, gen, how);
        }
        /* a pending row whose metadata moved: was it pending for its
         * metadata alone? (an interrupted run's; rare, so read apart) */
        if (f.data_same && !f.meta_same && f.state == ST_PENDING &&
            (rc = mf_found_need(m, &f)))
                return rc;
        bool applied = f.state == ST_DONE ||
                       (f.state == ST_PENDING && f.need == MF_NEED_META);
        if (f.data_same && applied) {
                bool meta = false;
                rc = mf_classify(m, &f, st, gen, how->hard_links, &meta);
                if (rc || meta) {
                        o->res = UP_META;
                        return rc;
                }
        } else if (!f.meta_same) {
                o->res = UP_CHANGED;
                return file_update(m, f.id, st, gen, how);
        }
        o->skipped = f.state == ST_SKIPPED;
        bool unchanged = f.state == ST_DONE || f.state == ST_SKIPPED;
        o->res = unchanged ? UP_UNCHANGED : UP_RESUMED;
        if (unchanged && !marking)
                return 0; /* part of this scan through dirs.listed */
        s = STMT(S_FILE_SEEN);
        if (!s)
                return mf_db_fail(m, "write");
        sqlite3_bind_int64(s, 1, f.id);
        sqlite3_bind_int64(s, 2, gen);
        return mf_exec_stmt(m, s, "file update");
}

static int upsert_rec(struct ferry_manifest *m, int64_t dir, bool dir_is_new,
                      bool marking, const char *name, size_t len,
                      const struct ferry_stat *st,
                      const struct ferry_listing_rec *how,
                      struct ferry_entry_rec *o)
{
        int rc = upsert(m, dir, dir_is_new, marking, name, len, st, how->gen,
                        how, o);
        /* only an existing row may be one the pass went past */
        if (o->res != UP_CHANGED && o->res != UP_RESUMED && o->res != UP_META)
                o->again = false;
        if (rc)
                o->res = 0; /* not recorded */
        return rc;
}

int mf_file_upsert(struct ferry_manifest *m, int64_t dir, bool dir_is_new,
                   bool marking, const char *name, size_t len,
                   const struct ferry_stat *st, int64_t gen, bool hard_links,
                   struct ferry_entry_rec *o)
{
        /* special files left out, as a listing that says nothing */
        struct ferry_listing_rec how = {.gen = gen, .hard_links = hard_links};
        return upsert_rec(m, dir, dir_is_new, marking, name, len, st, &how, o);
}

int mf_keep_removed(struct ferry_manifest *m, int64_t gen)
{
        /* why this is right: scan_sql[S_KEEP_REMOVED_HL] */
        int rc = mf_exec_id(m, STMT(S_KEEP_REMOVED_HL), gen, "update");
        return rc ? rc
                  : mf_exec_id(m, STMT(S_KEEP_REMOVED_STATE), gen, "update");
}

/* ---- operation-level calls (manifest.h) ---- */

void ferry_manifest_set_wanted(struct ferry_manifest *m, uint32_t wanted,
                               uint32_t wanted_link, uint32_t wanted_special)
{
        m->wanted = wanted;
        m->wanted_link = wanted_link;
        m->wanted_special = wanted_special;
}

int ferry_manifest_scan_start(struct ferry_manifest *m, int64_t *gen,
                              uint64_t *files, uint64_t *bytes)
{
        mf_dcache_clear(m); /* a new scan: no directory is being listed */
        int rc = mf_next_gen(m, gen);
        if (!rc)
                rc = mf_retry_failed(m);
        return rc ? rc
                  : ferry_manifest_count(m, COUNT_TO_COPY, 0, files, bytes);
}

int ferry_manifest_scan_complete(struct ferry_manifest *m, int64_t gen)
{
        int rc = mf_mark_unseen(m, gen);
        return rc ? rc : mf_elect_leaders(m);
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

/* The directory of a chunk: recorded by its first chunk, remembered for
 * the later ones (a few directories are listed at a time). */
static int listing_dir(struct ferry_manifest *m, const struct ferry_listing *l,
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

/* A new or changed file in a known directory may have replaced a
 * directory: the rows below that one are gone from SRC. */
static int replaced_dir(struct ferry_manifest *m, const struct ferry_listing *l,
                        const struct ferry_entry *e, int64_t gen)
{
        struct ferry_buf path = FERRY_BUF_INIT;
        ferry_buf_add(&path, l->path, l->path_len);
        ferry_buf_add_path(&path, l->arena + e->name_off);
        int rc = path.oom ? mf_fail(m, "out of memory")
                          : mf_subtree_removed(m, path.buf, path.len, gen);
        ferry_buf_release(&path);
        return rc;
}

/* The directory after its entries: its error, the rows below an
 * unreadable one kept, a whole listing marked listed. */
static int listing_end(struct ferry_manifest *m, const struct ferry_listing *l,
                       const struct ferry_listing_rec *how, int64_t dir,
                       bool marking)
{
        int rc = 0;
        if (l->open_err) {
                if (how->error)
                        rc = mf_dir_set_error(m, dir, how->fail, how->error);
                if (!rc)
                        rc = mf_keep_subtree(m, l->path, l->path_len, how->gen);
        } else if (l->first) {
                rc = mf_dir_set_error(m, dir, NULL, NULL);
        }
        if (!rc && l->last && !l->open_err && !how->stopping)
                rc = mf_dir_listed(m, dir, how->gen, marking, l->seen);
        return rc;
}

int ferry_manifest_record_listing(struct ferry_manifest *m,
                                  const struct ferry_listing *l,
                                  const struct ferry_listing_rec *how,
                                  struct ferry_entry_rec *out)
{
        int64_t dir = 0;
        bool is_new = false, marking = true;
        /* every entry says "not recorded" until it is, also on failure:
         * the caller counts what out says */
        for (size_t i = 0; i < l->n; i++)
                out[i] = (struct ferry_entry_rec){.res = 0};
        int rc = listing_dir(m, l, how->gen, &dir, &is_new, &marking);
        if (!rc && !dir)
                return mf_fail(m,
                               "manifest: a listing of '%.*s' came before "
                               "its directory",
                               (int)l->path_len, l->path);
        for (size_t i = 0; i < l->n && !rc; i++) {
                const struct ferry_entry *e = &l->entries[i];
                struct ferry_entry_rec *o = &out[i];
                rc = upsert_rec(m, dir, is_new, marking, l->arena + e->name_off,
                                e->name_len, &e->st, how, o);
                if (!rc && (o->res == UP_NEW || o->res == UP_CHANGED) &&
                    !is_new)
                        rc = replaced_dir(m, l, e, how->gen);
                if (rc)
                        o->res = 0; /* not recorded */
        }
        return rc ? rc : listing_end(m, l, how, dir, marking);
}
