/*
 * manifest/internal.h - what the files of src/manifest/ share: the
 * manifest struct, the statement cache, the SQL spelling of row values,
 * the helpers that bind and read columns (times, names, stats), and the
 * steps the operation-level calls of manifest.h are built from (mf_*:
 * private to src/manifest/ and its white-box unit tests).
 *
 * Each file of src/manifest/ owns one verb of the manifest and one
 * statement table: an enum of its statements beside their SQL, prepared
 * lazily through mf_stmt(). No SQL is written anywhere else. Row values
 * are spelled in SQL with the SQL_* macros below, built from
 * manifest_types.h, never as bare numbers.
 */
#ifndef FERRY_MANIFEST_INTERNAL_H
#define FERRY_MANIFEST_INTERNAL_H

#include "manifest.h"

#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

/* Row values as SQL literals (manifest_types.h). Literals, not bound
 * parameters: the partial indexes files_pending and files_removed serve a
 * query only when its WHERE names the same constants. */
#define SQL_PENDING   MF_SQL_INT(MF_ST_PENDING)
#define SQL_DONE      MF_SQL_INT(MF_ST_DONE)
#define SQL_FAILED    MF_SQL_INT(MF_ST_FAILED)
#define SQL_SKIPPED   MF_SQL_INT(MF_ST_SKIPPED)
#define SQL_VANISHED  MF_SQL_INT(MF_ST_VANISHED)
#define SQL_REMOVED   MF_SQL_INT(MF_ST_REMOVED)
#define SQL_REG       MF_SQL_INT(MF_FT_REG)
#define SQL_LINK      MF_SQL_INT(MF_FT_LINK)
#define SQL_SPECIAL   MF_SQL_INT(MF_FT_SPECIAL)
#define SQL_TO_APPLY  MF_SQL_INT(MF_DS_TO_APPLY)
#define SQL_APPLIED   MF_SQL_INT(MF_DS_APPLIED)
#define SQL_MARKING   MF_SQL_INT(MF_LISTED_MARKING)
#define SQL_NEED_DATA MF_SQL_INT(MF_NEED_DATA)
#define SQL_NEED_META MF_SQL_INT(MF_NEED_META)
/* files.hl of a hardlink group's first name (sql/001_schema.sql) */
#define MF_HL_LEADER -1
#define SQL_LEADER   MF_SQL_INT(MF_HL_LEADER)
/* dirs.mtime_ns no directory has: the next scan finds it changed */
#define MF_MTIME_NONE  -1
#define SQL_MTIME_NONE MF_SQL_INT(MF_MTIME_NONE)
/* "state IN (vanished, removed)": the WHERE of the files_removed index */
#define SQL_GONE "(" SQL_VANISHED ", " SQL_REMOVED ")"

/* The statement tables, one per file of src/manifest/. */
enum mf_table {
        T_OPEN,      /* open.c */
        T_META,      /* meta.c */
        T_SCAN,      /* scan.c */
        T_LINKS,     /* links.c */
        T_DIRS,      /* dirs.c */
        T_RESULTS,   /* results.c */
        T_QUERY,     /* query.c */
        T_STATUS,    /* status.c */
        T_EXPORT,    /* export.c */
        T_CLASSIFY,  /* classify.c */
        T_SCAN_DIRS, /* scan_dirs.c */
        T_CHUNKS,    /* chunks.c */
        MF_NTABLES
};
#define MF_TABLE_MAX 32 /* statements in one table, at most */

/* The directories of the listings being recorded (record_listing). */
#define MF_DIR_CACHE 8
struct mf_dir_slot {
        char *path;
        size_t len;
        int64_t id;
        bool is_new, marking;
};

struct ferry_manifest {
        sqlite3 *db;
        sqlite3_stmt *stmt[MF_NTABLES][MF_TABLE_MAX];
        char *path;     /* for messages */
        bool immutable; /* read as a file nobody writes: reader.c */
        bool moved;     /* ... and it changed meanwhile: read it again */
        struct stat st; /* the file before an immutable read began */
        /* directories being listed, for a listing's later chunks; valid
         * within one scan and one transaction (mf_dcache_clear) */
        struct mf_dir_slot dcache[MF_DIR_CACHE];
        unsigned dcache_next;
        /* ferry_manifest_set_wanted: the metadata the run wants */
        uint32_t wanted, wanted_link, wanted_special;
        /* the last row the copy's first pass handed out (query.c) */
        int64_t first_pass_at;
        /* the open transaction records what must survive a power cut (a
         * done mark, a claim): its COMMIT syncs the -wal; unsynced: a
         * commit since the last sync may not be durable yet (results.c,
         * the commit policy) */
        bool owe_sync, unsynced;
        /* ferry_manifest_set_keep: rows the selection leaves out */
        ferry_manifest_keep_fn keep;
        void *keep_arg;
        struct mf_check *check; /* the check beside the scan (check.c) */
        char errmsg[1024];
};

/* results.c: after a COMMIT, the -wal synced if the transaction owed it
 * (owe_sync); an error leaves the commit not durable (exit 3). */
int mf_sync_owed(struct ferry_manifest *m);

/* scan_dirs.c: the selection keeps this row, which no entry of the
 * listing matched (ferry_manifest_set_keep; a regular file within the size
 * bounds as recorded is looked up in SRC: a real deletion or one that
 * grew past them, both rare in a directory whose mtime did not move) */
bool mf_kept(struct ferry_manifest *m, const char *dir, size_t dlen,
             const char *name, size_t nlen, int type, uint64_t size);

/* check.c: reading an existing manifest through (integrity_check or
 * quick_check, by its size) before a run commits to it. mf_check_content
 * does it now: 0, or the error that refuses the file. mf_check_start does
 * it in a thread (wal_frames: the file had a -wal with frames, which a
 * refused file keeps), on a connection of its own, and makes the first COMMIT
 * wait for it: 0 (or, when no thread starts, mf_check_content's verdict).
 * mf_check_wait joins that thread: 0, or FERRY_EMANIFEST (errmsg says
 * why) when the file is damaged; mf_check_refusal says the same
 * afterwards (0 before or without a check). mf_check_free (close) joins
 * and frees it. */
int mf_check_content(struct ferry_manifest *m, int64_t size, bool thorough);
int mf_check_start(struct ferry_manifest *m, int64_t size, bool wal_frames);
int mf_check_wait(struct ferry_manifest *m);
int mf_check_refusal(struct ferry_manifest *m);
void mf_check_free(struct ferry_manifest *m);

/* core.c: errors */
int mf_fail(struct ferry_manifest *m, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));
bool mf_is_damage(int code);
/* Damage met at any point ends the run with a message that says so. */
int mf_db_fail(struct ferry_manifest *m, const char *what);

/* core.c: statements. mf_stmt returns statement id of table t (its SQL
 * sql), prepared once, reset and with no bindings; NULL when it cannot be
 * prepared. */
sqlite3_stmt *mf_stmt(struct ferry_manifest *m, enum mf_table t, int id,
                      const char *sql);
/* Steps a statement that returns no rows. */
int mf_exec_stmt(struct ferry_manifest *m, sqlite3_stmt *s, const char *what);
/* The statement, with row bound to ?1, stepped once (no rows). */
int mf_exec_id(struct ferry_manifest *m, sqlite3_stmt *s, int64_t row,
               const char *what);
/* Runs sql (one or more statements, no parameters) with sqlite3_exec. */
int mf_exec_sql(struct ferry_manifest *m, const char *sql, const char *what);
/* Steps s, a query of one row, with arg bound to ?1 if it has one, and
 * stores its first n columns (NULL reads as 0) in v. s may be NULL (not
 * prepared): a read failure. */
int mf_select_ints(struct ferry_manifest *m, sqlite3_stmt *s, int64_t arg,
                   int64_t *v, int n);
void mf_finalize_all(struct ferry_manifest *m);
/* Forgets the directories being listed (scan_dirs.c): at a new scan, a
 * rollback, and close. */
void mf_dcache_clear(struct ferry_manifest *m);

/* core.c: columns */
void mf_bind_bytes(sqlite3_stmt *s, int i, const char *p, size_t len);
void mf_bind_time(sqlite3_stmt *s, int i, struct ferry_time t);
struct ferry_time mf_column_time(sqlite3_stmt *s, int col);
/* Text of a blob column, NUL-terminated by SQLite ("" for an empty one). */
const char *mf_column_str(sqlite3_stmt *s, int col);
/* size, mtime, ctime, mode, uid, gid, dev, ino to first .. first + 7 */
void mf_bind_stat(sqlite3_stmt *s, int first, const struct ferry_stat *st);
/* f's side, step and errno to first .. first + 2 (fail_side, fail_step,
 * fail_errno: sql/005_failure.sql); left NULL when f is NULL */
void mf_bind_failure(sqlite3_stmt *s, int first, const struct ferry_failure *f);
/* Binds path and the range of its subtree, ["path/", "path0") ('0'
 * follows '/'), to the parameters i, i + 1 and i + 2; ENOMEM or 0. */
int mf_bind_subtree(sqlite3_stmt *s, int i, const char *path, size_t len);
enum ferry_ftype mf_ftype_of(uint32_t mode);
/* The length of path's parent ("" for a top-level name). */
size_t mf_parent_len(const char *path, size_t len);

/* open.c: opens m->db (name with oflags, or immutable: reader.c) */
int mf_open_db(struct ferry_manifest *m, const char *name, int oflags,
               bool immutable);
int mf_check_identity(struct ferry_manifest *m);
int mf_pragma_int(struct ferry_manifest *m, int id, int64_t *v);
/* The schema version of the open file (PRAGMA user_version): a manifest
 * read without write access is not migrated. */
int mf_schema_version(struct ferry_manifest *m, int64_t *version);

/* reader.c: read-only access for `ferry status` */
int mf_open_reader(struct ferry_manifest *m, bool wal_frames);
/* After an immutable read: nobody wrote the main file meanwhile. */
bool mf_still_alone(const struct ferry_manifest *m);
/* A read through the -wal and -shm by a user who cannot write them failed
 * as a run started or ended under it (SQLITE_READONLY): read again. */
bool mf_shared_read_torn(const struct ferry_manifest *m);

/* links.c: the hl column for a new or changed row (0: NULL) */
int mf_hardlink_of(struct ferry_manifest *m, const struct ferry_stat *st,
                   bool hard_links, int64_t self, int64_t *hl);
/* Hardlink groups whose first name (hl = -1) is gone or failed: the next
 * name becomes the first (copied with data) and the others, the old first
 * name included, link to it. One row, or every removed/vanished first name
 * (after a complete scan). */
int mf_elect_leader(struct ferry_manifest *m, int64_t id);
/* A done file (row done, one name when it was copied) got another name,
 * which this scan made the first name of the group (leader, pending for
 * its data): when the first pass has not handed leader out yet, done
 * becomes the group's first name and leader and its other names follow
 * it (*swapped): the new names are links to done's copy, and no data is
 * copied again. (files_by_inode holds rows with an hl only, so the new
 * name could not find done.) */
int mf_regroup(struct ferry_manifest *m, const struct ferry_stat *st,
               int64_t done, int64_t leader, int64_t gen, bool *swapped);
int mf_elect_leaders(struct ferry_manifest *m);
/* The first name it (done now, its data copied) of a hardlink group got a
 * new copy in DST: its followers done before are pending again in its
 * generation, to be linked to the new copy (their DST names still link
 * the old one). *any when a row changed. */
int mf_relink_followers(struct ferry_manifest *m, const struct ferry_item *it,
                        bool *any);

/* meta.c: starts a scan generation (stored in meta) and returns it */
int mf_next_gen(struct ferry_manifest *m, int64_t *gen);

/*
 * scan.c and scan_dirs.c: the steps of record_listing and scan_complete.
 * A file row is part of scan gen when its gen is gen (the scan wrote it)
 * or when its directory's listed is gen (the scan read the directory
 * whole and saw all its rows), and it is not ST_REMOVED. An unchanged
 * directory's unchanged rows are only read, so a no-op re-run writes
 * about one row per directory (sql/002_listed.sql).
 *
 * scan_dirs.c: dir_upsert says whether the directory is new and whether
 * its rows must be marked one by one (*marking: new, changed or
 * interrupted while marking); dir_find gives the same for a later chunk
 * of its listing (marking may be NULL), and *id 0 when there is no such
 * directory.
 */
int mf_dir_upsert(struct ferry_manifest *m, const char *path, size_t len,
                  const struct ferry_stat *st, int64_t gen, int64_t *id,
                  bool *is_new, bool *marking);
int mf_dir_find(struct ferry_manifest *m, const char *path, size_t len,
                int64_t *id, bool *marking);
/* The directory of a listing chunk: recorded by its first chunk (with
 * mf_dir_upsert), remembered for the later ones (m->dcache). */
int mf_listing_dir(struct ferry_manifest *m, const struct ferry_listing *l,
                   int64_t gen, int64_t *id, bool *is_new, bool *marking);
/* The whole listing of a directory was recorded: seen entries in all. Rows
 * a marking scan did not write become ST_REMOVED; an unmarked directory's
 * rows are counted, and if they are more than the entries seen, all are
 * kept this time and the next scan marks them. */
int mf_dir_listed(struct ferry_manifest *m, int64_t id, int64_t gen,
                  bool marking, uint64_t seen);
/* mf_dir_listed where the caller knows how many of the directory's rows
 * are not removed (rows; -1: not known, counted here). */
int mf_dir_listed_rows(struct ferry_manifest *m, int64_t id, int64_t gen,
                       bool marking, uint64_t seen, int64_t rows);
/* A file at path replaced a directory: the rows below it are ST_REMOVED. */
int mf_subtree_removed(struct ferry_manifest *m, const char *path, size_t len,
                       int64_t gen);
/* After a complete scan: rows of directories it did not see are removed. */
int mf_mark_unseen(struct ferry_manifest *m, int64_t gen);
/* Keeps every row below path (a directory the scan could not read) part
 * of generation gen. */
int mf_keep_subtree(struct ferry_manifest *m, const char *path, size_t len,
                    int64_t gen);
/* scan.c: records one scanned non-directory entry of directory dir in *o
 * (what the row became, its id, whether to hand it out again). dir_is_new
 * skips the lookup; without marking, an unchanged done row is only read.
 * Special files are left out (ST_SKIPPED), as record_listing does when its
 * ferry_listing_rec copies none. */
int mf_file_upsert(struct ferry_manifest *m, int64_t dir, bool dir_is_new,
                   bool marking, const char *name, size_t len,
                   const struct ferry_stat *st, int64_t gen, bool hard_links,
                   struct ferry_entry_rec *o);
/* --delete refused: the rows scan gen found gone from SRC get the state
 * they had before it (done, skipped or pending), so that the same SRC,
 * back again, is neither deleted nor copied again. Rows removed by earlier
 * scans stay removed. */
int mf_keep_removed(struct ferry_manifest *m, int64_t gen);

/* classify.c: a file row as the scan reads it (scan.c: by name, or a
 * directory's rows at once), from columns col.. of s: id, type, size,
 * mtime_ns, ctime_ns, mode, ino, state, gen, applied, hl, rdev, uid, gid,
 * and with atime (--atimes) atime_ns. */
struct mf_row {
        int64_t id, gen, hl; /* hl 0: NULL */
        uint64_t size, ino, rdev;
        struct ferry_time mtime, ctime, atime;
        uint32_t mode, applied, uid, gid;
        int type, state;
        bool has_atime; /* atime read, and not NULL */
};
void mf_read_row(sqlite3_stmt *s, int col, bool atime, struct mf_row *r);
/* classify.c: a row as the scan found it against SRC's st; need as a done
 * row's (MF_NEED_DATA) until mf_found_need reads it. */
struct mf_found {
        int64_t id, hl;
        int state, need;
        uint32_t applied;
        bool data_same;  /* type, size, mtime, inode: the data as copied */
        bool meta_same;  /* and mode, ctime (atime with --atimes) */
        bool inode_same; /* data_same, and mode, owner: the ctime aside */
};
int mf_found_need(struct ferry_manifest *m, struct mf_found *f);
void mf_read_found(const struct ferry_manifest *m, const struct mf_row *r,
                   const struct ferry_stat *st, struct mf_found *f);
/* A done row (or one pending for its metadata) with its data as copied:
 * *meta and pending again when its metadata is to be applied (or it is to
 * be linked); *meta false: nothing to do. */
int mf_classify(struct ferry_manifest *m, const struct mf_found *f,
                const struct ferry_stat *st, int64_t gen, bool hard_links,
                bool *meta);
static inline void mf_bind_hl(sqlite3_stmt *s, int i, int64_t hl)
{
        if (hl)
                sqlite3_bind_int64(s, i, hl);
        else
                sqlite3_bind_null(s, i);
}

/* dirs.c: a directory's metadata to apply again (touch), the same for the
 * directory of file row file and all above it (chain_touch: the copy of a
 * file found missing in DST may make them anew, mode 0700), applied, left
 * to the next run (defer: marked applied, and recorded so that the next
 * scan finds it changed), deleted, its error (NULL clears it). */
int mf_dir_touch(struct ferry_manifest *m, int64_t id);
int mf_dir_chain_touch(struct ferry_manifest *m, int64_t file);
int mf_dir_applied(struct ferry_manifest *m, int64_t id);
/* mf_dir_applied, recording d->applied (MF_AP_* bits) and d->xdigest as
 * what was applied. */
int mf_dir_applied_ap(struct ferry_manifest *m, const struct ferry_dir_row *d);
int mf_dir_defer(struct ferry_manifest *m, int64_t id);
int mf_dir_delete(struct ferry_manifest *m, int64_t id);
int mf_dir_set_error(struct ferry_manifest *m, int64_t id,
                     const struct ferry_failure *f, const char *error);

/* results.c: a row done (it's st, hash and DST record), its state set
 * (error: the message, NULL: none, and attempts do not count up; f: what
 * failed, stored beside it, sql/005_failure.sql, NULL for none), deleted;
 * what ferry last put in DST for the row (dir, name): rec->type 0 when
 * nothing, or no such row; failed rows of earlier runs pending again. */
int mf_file_done(struct ferry_manifest *m, const struct ferry_item *it);
/* mf_file_done with also's MF_AP_* bits applied beyond it->applied. */
int mf_file_done_ap(struct ferry_manifest *m, const struct ferry_item *it,
                    uint32_t also);
int mf_file_set_state(struct ferry_manifest *m, int64_t id,
                      enum ferry_state state, const struct ferry_failure *f,
                      const char *error);
int mf_file_delete(struct ferry_manifest *m, int64_t id);
int mf_file_dst(struct ferry_manifest *m, int64_t dir, const char *name,
                size_t len, struct ferry_dst_rec *rec);
int mf_retry_failed(struct ferry_manifest *m);

/* query.c: the hand-out queries (the passes of manifest.h, and one row by
 * id), first in query.c's statement table. */
enum mf_query {
        Q_FIRST_PASS = 0, /* pending rows, not hardlink followers */
        Q_NEXT_PASS,      /* pending rows whose leader is not pending */
        Q_VERIFY,         /* done files and symlinks of the latest scan */
        Q_PENDING,        /* dry run: all pending rows */
        Q_REMOVED_FILES,  /* rows removed from SRC, or vanished */
        Q_STALE_TEMPS,    /* pending rows not seen: may have a temp file */
        Q_ONE_PENDING,    /* the row *cursor if pending, not a follower */
        Q_NQUERIES
};
/*
 * Appends up to max rows of query q with id beyond *cursor to b (items and
 * their paths in b's arena) and moves *cursor past them. Stops early once
 * the rows add up to max_bytes. Copy passes hand out rows of generation
 * gen only.
 */
int mf_fill(struct ferry_manifest *m, enum mf_query q, int64_t gen,
            int64_t *cursor, struct ferry_batch *b, size_t max,
            uint64_t max_bytes);
/* The highest file row id, uncommitted rows included. */
int mf_max_id(struct ferry_manifest *m, int64_t *id);

/* chunks.c: large files in chunks (chunks.h). mf_chunk_plan gives item k
 * of b, just read by query q, its plan (a regular file of at least
 * FERRY_CHUNK_MIN_FILE bytes whose data is copied or verified): a resume
 * when its partial row's SRC is the row's, a repair when verify marked
 * chunks of the done file bad, else a fresh start, stale rows dropped.
 * mf_chunk_outcome: what outcome o does to the row's partial row and
 * chunks (after the row's own update). mf_chunks_drop: both go;
 * mf_partial_drop: the partial row alone; mf_chunks_orphans: those of
 * file rows that are gone. mf_chunk_status: unfinished files and the
 * bytes of their committed chunks. */
int mf_chunk_plan(struct ferry_manifest *m, enum mf_query q,
                  struct ferry_batch *b, size_t k);
int mf_chunk_outcome(struct ferry_manifest *m, const struct ferry_outcome *o);
int mf_chunks_drop(struct ferry_manifest *m, int64_t id);
int mf_partial_drop(struct ferry_manifest *m, int64_t id);
int mf_chunks_orphans(struct ferry_manifest *m);
int mf_chunk_status(struct ferry_manifest *m, uint64_t *files, uint64_t *bytes);

#endif
