/*
 * manifest/scan.c - what a scan of SRC writes for its files: the file
 * rows (the upsert and what it found; classify.c judges a row found again
 * whose data is as copied), a whole directory's rows read at once for a
 * listing that is the directory whole, and, when --delete is refused,
 * undoing this scan's removals; and the operation-level calls set_wanted,
 * scan_start, record_listing and scan_complete. The directory rows (and
 * the small cache of the directories being listed, m->dcache) and the
 * marks that go by directory are scan_dirs.c's.
 *
 * A file row is part of scan gen when its gen is gen (the scan wrote it)
 * or when its directory's listed is gen (sql/002_listed.sql).
 */
#define _GNU_SOURCE
#include "manifest/internal.h"

#include "buf.h"
#include "chunks.h"

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
        S_DIR_ROWS,
        S_DIR_ROWS_ATIME,
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
        /* a directory's rows at once: the name, then S_FILE_FIND's row */
        [S_DIR_ROWS] =
                "SELECT name, id, type, size, mtime_ns, ctime_ns, mode, ino,"
                " state, gen, applied, hl, rdev, uid, gid"
                " FROM files WHERE dir = ?1 LIMIT ?2",
        [S_DIR_ROWS_ATIME] =
                "SELECT name, id, type, size, mtime_ns, ctime_ns, mode, ino,"
                " state, gen, applied, hl, rdev, uid, gid, atime_ns"
                " FROM files WHERE dir = ?1 LIMIT ?2",
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

/* The row named name in dir (S_FILE_FIND): *found false when none. */
static int find_row(struct ferry_manifest *m, int64_t dir, const char *name,
                    size_t len, struct mf_row *r, bool *found)
{
        bool atime = m->wanted & MF_AP_ATIMES;
        sqlite3_stmt *s = atime ? STMT(S_FILE_FIND_ATIME) : STMT(S_FILE_FIND);
        if (!s)
                return mf_db_fail(m, "read");
        sqlite3_bind_int64(s, 1, dir);
        mf_bind_bytes(s, 2, name, len);
        int rc = sqlite3_step(s);
        *found = rc == SQLITE_ROW;
        if (*found)
                mf_read_row(s, 0, atime, r);
        sqlite3_reset(s);
        return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0
                                                     : mf_db_fail(m, "read");
}

/* An entry whose row r exists: what it became (*o), written as needed. */
static int upsert_found(struct ferry_manifest *m, bool marking,
                        const struct mf_row *r, const struct ferry_stat *st,
                        int64_t gen, const struct ferry_listing_rec *how,
                        struct ferry_entry_rec *o)
{
        bool out = left_out(how, st);
        struct mf_found f;
        mf_read_found(m, r, st, &f);
        /* a name listed twice (a directory changing while it is read)
         * must not be handed out twice */
        o->id = f.id;
        o->again = r->gen != gen;
        /* a special file the options now copy, or now leave out (one
         * ferry made stays done) */
        bool regate = f.state == ST_SKIPPED ? !out
                                            : out && (f.state == ST_PENDING ||
                                                      f.state == ST_VANISHED);
        if (regate) {
                o->res = UP_CHANGED;
                return file_update(m, f.id, st, gen, how);
        }
        /* a changed file's chunks are of its old content (a file too
         * small for chunks has none: no lookup) */
        int rc = 0;
        if (!f.data_same && r->size >= FERRY_CHUNK_MIN_FILE &&
            (rc = mf_chunks_drop(m, f.id)))
                return rc;
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
        sqlite3_stmt *s = STMT(S_FILE_SEEN);
        if (!s)
                return mf_db_fail(m, "write");
        sqlite3_bind_int64(s, 1, f.id);
        sqlite3_bind_int64(s, 2, gen);
        return mf_exec_stmt(m, s, "file update");
}

/* What the caller knows of an entry's row: nothing (looked up by name),
 * or, read with its directory's rows, the row or that there is none. */
struct known_row {
        bool known;
        const struct mf_row *row; /* NULL: no such row */
};

static int upsert(struct ferry_manifest *m, int64_t dir, bool dir_is_new,
                  bool marking, const char *name, size_t len,
                  const struct ferry_stat *st, int64_t gen,
                  const struct ferry_listing_rec *how,
                  const struct known_row *k, struct ferry_entry_rec *o)
{
        *o = (struct ferry_entry_rec){.res = UP_NEW,
                                      .skipped = left_out(how, st)};
        struct mf_row r;
        bool found = !dir_is_new && k->known && k->row;
        int rc = 0;
        if (found)
                r = *k->row;
        else if (!dir_is_new && !k->known)
                rc = find_row(m, dir, name, len, &r, &found);
        if (rc)
                return rc;
        if (found)
                return upsert_found(m, marking, &r, st, gen, how, o);
        rc = file_insert(m, dir, name, len, st, gen, how);
        /* a new directory's rows are inserted unread: a name it lists
         * twice (a directory changing while it is read) is there already */
        if (rc && dir_is_new &&
            sqlite3_extended_errcode(m->db) == SQLITE_CONSTRAINT_UNIQUE &&
            !(rc = find_row(m, dir, name, len, &r, &found)) && found)
                return upsert_found(m, marking, &r, st, gen, how, o);
        o->id = rc ? 0 : sqlite3_last_insert_rowid(m->db);
        return rc;
}

static int upsert_rec(struct ferry_manifest *m, int64_t dir, bool dir_is_new,
                      bool marking, const char *name, size_t len,
                      const struct ferry_stat *st,
                      const struct ferry_listing_rec *how,
                      const struct known_row *k, struct ferry_entry_rec *o)
{
        int rc = upsert(m, dir, dir_is_new, marking, name, len, st, how->gen,
                        how, k, o);
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
        const struct known_row k = {.known = false};
        return upsert_rec(m, dir, dir_is_new, marking, name, len, st, &how, &k,
                          o);
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
        if (!rc)
                rc = mf_chunks_orphans(m);
        return rc ? rc : mf_elect_leaders(m);
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
                       bool marking, int64_t rows)
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
                rc = mf_dir_listed_rows(m, dir, how->gen, marking, l->seen,
                                        rows);
        return rc;
}

/*
 * A listing that is its directory whole (one chunk, the common case) gets
 * the directory's rows read at once, one range of the files_by_name index,
 * where a lookup per entry walks the index from its root each time (bench
 * d, the no-op re-run, is mostly these lookups), and matched to its
 * entries by name in memory. The rows read stay true while each upsert
 * writes its own row only: every row is one entry's (a listing that names
 * one twice is looked up by name), and an upsert that changed more rows
 * than its own (a hardlink group regrouped) ends their use: the entries
 * after it are looked up by name. While they stay true they also count
 * the directory's rows for mf_dir_listed.
 */
#define DIR_ROWS_MAX 1024 /* a directory with more rows: looked up by name */
#define NO_ROW       SIZE_MAX

struct named_row {
        const char *name; /* in dir_rows.names, or the listing's arena */
        size_t off, len;  /* off: into dir_rows.names, while reading */
        size_t i; /* the row's index in rows, or the entry's in the listing */
};

struct dir_rows {
        struct mf_row *rows;
        struct named_row *by_name; /* rows' names, then sorted */
        struct ferry_buf names;
        size_t n;
        size_t *match; /* entry i's row in rows, or NO_ROW */
        int64_t alive; /* rows matched by no entry and not removed */
        bool valid;
};

static int name_cmp(const void *a, const void *b)
{
        const struct named_row *x = a, *y = b;
        size_t n = x->len < y->len ? x->len : y->len;
        int c = n ? memcmp(x->name, y->name, n) : 0;
        return c ? c : (x->len > y->len) - (x->len < y->len);
}

#define DIR_ROWS_INIT                                                          \
        {                                                                      \
                .names = FERRY_BUF_INIT, .valid = false                        \
        }

static void dir_rows_release(struct dir_rows *dr)
{
        free(dr->rows);
        free(dr->by_name);
        free(dr->match);
        ferry_buf_release(&dr->names);
        *dr = (struct dir_rows)DIR_ROWS_INIT;
}

/* Reads the rows of dir (at most DIR_ROWS_MAX, or none: dr->n past it). */
static int read_rows(struct ferry_manifest *m, int64_t dir, struct dir_rows *dr)
{
        bool atime = m->wanted & MF_AP_ATIMES;
        sqlite3_stmt *s = atime ? STMT(S_DIR_ROWS_ATIME) : STMT(S_DIR_ROWS);
        if (!s)
                return mf_db_fail(m, "read");
        sqlite3_bind_int64(s, 1, dir);
        sqlite3_bind_int64(s, 2, DIR_ROWS_MAX + 1);
        size_t cap = 0;
        int rc;
        while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
                if (dr->n == cap) {
                        cap = cap ? 2 * cap : 64;
                        void *r = realloc(dr->rows, cap * sizeof(*dr->rows));
                        if (r)
                                dr->rows = r;
                        void *b = realloc(dr->by_name,
                                          cap * sizeof(*dr->by_name));
                        if (b)
                                dr->by_name = b;
                        if (!r || !b)
                                break;
                }
                size_t len = (size_t)sqlite3_column_bytes(s, 0);
                dr->by_name[dr->n] = (struct named_row){
                        .off = dr->names.len, .len = len, .i = dr->n};
                if (len &&
                    ferry_buf_add(&dr->names, sqlite3_column_blob(s, 0), len))
                        break;
                mf_read_row(s, 1, atime, &dr->rows[dr->n++]);
        }
        /* every row read (LIMIT: one more than the most) */
        dr->valid = rc == SQLITE_DONE && dr->n <= DIR_ROWS_MAX;
        sqlite3_reset(s);
        for (size_t i = 0; i < dr->n; i++) /* names.buf moves no more */
                dr->by_name[i].name = dr->names.buf + dr->by_name[i].off;
        return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0
                                                     : mf_db_fail(m, "read");
}

/* Row by_name[j], matched by no entry, counts among the directory's rows:
 * it is not removed, and not one the selection leaves out (mf_kept). */
static bool unseen_alive(struct ferry_manifest *m,
                         const struct ferry_listing *l,
                         const struct dir_rows *dr, size_t j)
{
        const struct mf_row *r = &dr->rows[dr->by_name[j].i];
        return r->state != ST_REMOVED &&
               !mf_kept(m, l->path, l->path_len, dr->by_name[j].name,
                        dr->by_name[j].len, r->type, r->size);
}

/* Matches l's entries to the rows by name: not valid when l names one
 * twice (or memory ran out). */
static void match_rows(struct ferry_manifest *m, const struct ferry_listing *l,
                       struct dir_rows *dr)
{
        struct named_row *e = malloc(l->n * sizeof(*e));
        dr->match = malloc(l->n * sizeof(*dr->match));
        dr->valid = e && dr->match;
        for (size_t i = 0; dr->valid && i < l->n; i++)
                e[i] = (struct named_row){.name = l->arena +
                                                  l->entries[i].name_off,
                                          .len = l->entries[i].name_len,
                                          .i = i};
        if (dr->valid) {
                qsort(e, l->n, sizeof(*e), name_cmp);
                if (dr->n)
                        qsort(dr->by_name, dr->n, sizeof(*dr->by_name),
                              name_cmp);
        }
        size_t j = 0;
        dr->alive = 0;
        for (size_t i = 0; dr->valid && i < l->n; i++) {
                if (i + 1 < l->n && !name_cmp(&e[i], &e[i + 1]))
                        dr->valid = false; /* named twice */
                int c = 1;
                for (; j < dr->n && (c = name_cmp(&e[i], &dr->by_name[j])) > 0;
                     j++)
                        dr->alive += unseen_alive(m, l, dr, j);
                dr->match[e[i].i] = c ? NO_ROW : dr->by_name[j++].i;
        }
        for (; dr->valid && j < dr->n; j++)
                dr->alive += unseen_alive(m, l, dr, j);
        free(e);
}

/* The rows of a listing's directory, when it is the directory whole. */
static int dir_rows_read(struct ferry_manifest *m,
                         const struct ferry_listing *l, int64_t dir,
                         bool is_new, struct dir_rows *dr)
{
        if (is_new || !l->first || !l->last || !l->n)
                return 0;
        int rc = read_rows(m, dir, dr);
        if (!rc && dr->valid)
                match_rows(m, l, dr);
        return rc;
}

/* Entry i's row as read with its directory (known false: look it up). */
static struct known_row known_row(const struct dir_rows *dr, size_t i)
{
        if (!dr->valid)
                return (struct known_row){.known = false};
        size_t r = dr->match[i];
        return (struct known_row){true, r == NO_ROW ? NULL : &dr->rows[r]};
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
        int rc = mf_listing_dir(m, l, how->gen, &dir, &is_new, &marking);
        if (!rc && !dir)
                return mf_fail(m,
                               "manifest: a listing of '%.*s' came before "
                               "its directory",
                               (int)l->path_len, l->path);
        struct dir_rows dr = DIR_ROWS_INIT;
        if (!rc)
                rc = dir_rows_read(m, l, dir, is_new, &dr);
        for (size_t i = 0; i < l->n && !rc; i++) {
                const struct ferry_entry *e = &l->entries[i];
                struct ferry_entry_rec *o = &out[i];
                struct known_row k = known_row(&dr, i);
                int before = sqlite3_total_changes(m->db);
                rc = upsert_rec(m, dir, is_new, marking, l->arena + e->name_off,
                                e->name_len, &e->st, how, &k, o);
                /* more than its own row: the rows read may be stale */
                if ((unsigned)sqlite3_total_changes(m->db) - (unsigned)before >
                    1)
                        dr.valid = false;
                if (!rc && (o->res == UP_NEW || o->res == UP_CHANGED) &&
                    !is_new)
                        rc = replaced_dir(m, l, e, how->gen);
                if (rc)
                        o->res = 0; /* not recorded */
        }
        /* each entry's row is not removed now: the rows read count the
         * directory's (mf_dir_listed) */
        int64_t rows = dr.valid ? (int64_t)l->n + dr.alive : -1;
        dir_rows_release(&dr);
        return rc ? rc : listing_end(m, l, how, dir, marking, rows);
}
