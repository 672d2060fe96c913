/*
 * manifest.h - the SQLite journal of a job: schema, migrations and every
 * statement ferry runs against it.
 *
 * Only the journal thread holds a writable manifest; `ferry status` opens
 * one read-only. All functions return an enum ferry_code (0 = ok) and, on
 * failure, leave a message in the error passed to ferry_manifest_open (kept
 * in the manifest and readable with ferry_manifest_errmsg).
 *
 * Calling sequence of a run:
 *   ferry_manifest_open(path, MF_CREATE, &m, &err);
 *   ferry_manifest_bind_job(m, src, dst);
 *   ferry_manifest_begin(m);  ... upserts, fills, marks ...
 *   ferry_manifest_commit(m); ferry_manifest_begin(m); ...   (group commit)
 *   ferry_manifest_close(m);
 */
#ifndef FERRY_MANIFEST_H
#define FERRY_MANIFEST_H

#include "ferry.h"
#include "batch.h"

#include <stdbool.h>
#include <stdint.h>

#define FERRY_APPLICATION_ID 0x46525259 /* "FRRY" */

struct ferry_migration {
        int version;
        const char *name;
        const char *sql;
};
/* Generated from sql/ at build time, in ascending version order. */
extern const struct ferry_migration ferry_migrations[];
extern const int ferry_n_migrations;

enum ferry_manifest_flags {
        MF_READONLY = 1, /* status: never writes, fails if missing, removes
                          * the -wal and -shm it made when it can; works
                          * without write access (manifest.c, "Reading
                          * without write access") */
        MF_CREATE = 2,   /* create the file and schema when missing */
        MF_MEMORY = 4,   /* an in-memory manifest (dry run of a new job) */
        MF_THOROUGH = 8, /* --verify: read a bigger manifest through first */
};

/* UP_RESUMED: unchanged, but not copied yet (pending or failed before). */
enum ferry_upsert { UP_NEW = 1, UP_CHANGED, UP_UNCHANGED, UP_RESUMED };

/* What ferry_manifest_fill selects. */
enum ferry_query {
        Q_FIRST_PASS = 0, /* pending rows, not hardlink followers */
        Q_NEXT_PASS,      /* pending rows whose leader is not pending */
        Q_VERIFY,         /* done files and symlinks of the latest scan */
        Q_PENDING,        /* dry run: all pending rows */
        Q_REMOVED_FILES,  /* rows removed from SRC, or vanished */
        Q_STALE_TEMPS,    /* pending rows not seen: may have a temp file */
        Q_REMOVED_DIRS,   /* dirs not seen by this scan, deepest first */
        Q_PENDING_DIRS, /* dirs whose metadata must be applied, deepest first */
        Q_ONE_PENDING,  /* the row *cursor if pending, not a follower */
        Q_NQUERIES
};

struct ferry_manifest;

int ferry_manifest_open(const char *path, int flags,
                        struct ferry_manifest **out, struct ferry_error *err);
void ferry_manifest_close(struct ferry_manifest *m);
/* The message of the last failure; valid until the next call. */
const char *ferry_manifest_errmsg(const struct ferry_manifest *m);

/* Records src/dst in a new manifest, or checks they match an old one. */
int ferry_manifest_bind_job(struct ferry_manifest *m, const char *src,
                            const char *dst);

int ferry_manifest_begin(struct ferry_manifest *m);
int ferry_manifest_commit(struct ferry_manifest *m);
int ferry_manifest_rollback(struct ferry_manifest *m);

/* Starts a scan generation (stored in meta) and returns it. */
int ferry_manifest_next_gen(struct ferry_manifest *m, int64_t *gen);
int ferry_manifest_run_start(struct ferry_manifest *m, const char *command,
                             int64_t *run_id);
int ferry_manifest_run_finish(struct ferry_manifest *m, int64_t run_id,
                              int result);
/* Records DST's identity (device and inode of its root); *changed when a
 * different one was recorded before. Changes no row: the identity also
 * changes when DST is only mounted again, so the caller looks at DST
 * (ferry_manifest_sample_done) before ferry_manifest_reset_done. */
int ferry_manifest_check_dst(struct ferry_manifest *m, const char *identity,
                             bool *changed);
/* DST was replaced: every done row, and every directory's metadata, is
 * to be copied again. */
int ferry_manifest_reset_done(struct ferry_manifest *m);

/* A done row as sample_done lends it: dir is its directory relative to
 * SRC and DST ("" for the top), name its name; both NUL-terminated and
 * valid during the call only. size and mtime are SRC's when the row
 * was copied. */
struct ferry_done_file {
        int64_t id;
        const char *dir;
        const char *name;
        enum ferry_ftype type;
        uint64_t size;
        struct ferry_time mtime;
};
/* Returns true to see the next row. */
typedef bool (*ferry_sample_fn)(const struct ferry_done_file *f, void *arg);
/* Calls fn for up to n done regular files and symlinks, spread evenly over
 * the files table by id: one primary-key lookup each, no scan of the
 * table. Stops when fn returns false. *seen: rows handed to fn. */
int ferry_manifest_sample_done(struct ferry_manifest *m, unsigned n,
                               ferry_sample_fn fn, void *arg, unsigned *seen);
/* A short text kept in the manifest under key (e.g. what DST can hold);
 * "" when there is none or it does not fit. */
int ferry_manifest_note(struct ferry_manifest *m, const char *key, char *buf,
                        size_t size);
int ferry_manifest_set_note(struct ferry_manifest *m, const char *key,
                            const char *value);
/* Failed rows of earlier runs become pending again. */
int ferry_manifest_retry_failed(struct ferry_manifest *m);

/*
 * Scan results. A file row is part of scan gen when its gen is gen (the
 * scan wrote it) or when its directory's listed is gen (the scan read the
 * directory whole and saw all its rows), and it is not ST_REMOVED. An
 * unchanged directory's unchanged rows are only read, so a no-op re-run
 * writes about one row per directory (sql/002_listed.sql).
 *
 * dir_upsert says whether the directory is new and whether its rows must be
 * marked one by one (*marking: new, changed or interrupted while marking);
 * dir_find gives the same for a later chunk of its listing.
 */
int ferry_manifest_dir_upsert(struct ferry_manifest *m, const char *path,
                              size_t len, const struct ferry_stat *st,
                              int64_t gen, int64_t *id, bool *is_new,
                              bool *marking);
int ferry_manifest_dir_find(struct ferry_manifest *m, const char *path,
                            size_t len, int64_t *id, bool *marking);
/* The whole listing of a directory was recorded: seen entries in all. Rows
 * a marking scan did not write become ST_REMOVED; an unmarked directory's
 * rows are counted, and if they are more than the entries seen, all are
 * kept this time and the next scan marks them. */
int ferry_manifest_dir_listed(struct ferry_manifest *m, int64_t id, int64_t gen,
                              bool marking, uint64_t seen);
/* A file at path replaced a directory: the rows below it are ST_REMOVED. */
int ferry_manifest_subtree_removed(struct ferry_manifest *m, const char *path,
                                   size_t len, int64_t gen);
/* After a complete scan: rows of directories it did not see are removed. */
int ferry_manifest_mark_unseen(struct ferry_manifest *m, int64_t gen);
/* Marks a directory's metadata as to be applied again. */
int ferry_manifest_dir_touch(struct ferry_manifest *m, int64_t id);
/* The same for the directory of file row file and all above it: the copy
 * of a file found missing in DST may make them anew (mode 0700). */
int ferry_manifest_dir_chain_touch(struct ferry_manifest *m, int64_t file);
int ferry_manifest_dir_applied(struct ferry_manifest *m, int64_t id);
/* The directory's metadata is not applied now but by the next run: marked
 * applied, and recorded so that the next scan finds it changed. */
int ferry_manifest_dir_defer(struct ferry_manifest *m, int64_t id);
int ferry_manifest_dir_delete(struct ferry_manifest *m, int64_t id);
/* Records why a directory failed (NULL clears it). */
int ferry_manifest_dir_set_error(struct ferry_manifest *m, int64_t id,
                                 const struct ferry_failure *f,
                                 const char *error);
/* Keeps every row below path (a directory the scan could not read) part
 * of generation gen. */
int ferry_manifest_keep_subtree(struct ferry_manifest *m, const char *path,
                                size_t len, int64_t gen);

/* Records one scanned non-directory entry; *res says what the row became.
 * dir_is_new skips the lookup; without marking, an unchanged done row is
 * only read. */
int ferry_manifest_file_upsert(struct ferry_manifest *m, int64_t dir,
                               bool dir_is_new, bool marking, const char *name,
                               size_t len, const struct ferry_stat *st,
                               int64_t gen, bool hard_links,
                               enum ferry_upsert *res);

/* Hardlink groups whose first name (hl = -1) is gone or failed: the next
 * name becomes the first (copied with data) and the others, the old first
 * name included, link to it. One row, or every removed/vanished first name
 * (after a complete scan). */
int ferry_manifest_elect_leader(struct ferry_manifest *m, int64_t id);
int ferry_manifest_elect_leaders(struct ferry_manifest *m);

/* The row id of the last upsert that found an existing row (UP_CHANGED or
 * UP_RESUMED). */
int64_t ferry_manifest_upserted(const struct ferry_manifest *m);

/* Results of work. */
int ferry_manifest_file_done(struct ferry_manifest *m,
                             const struct ferry_item *it);
/* What ferry last put in DST for the row (dir, name): rec->type 0 when
 * nothing, or no such row. */
int ferry_manifest_file_dst(struct ferry_manifest *m, int64_t dir,
                            const char *name, size_t len,
                            struct ferry_dst_rec *rec);
/* Records rec as what DST holds for row id (verify: the entry it found
 * differing is ferry's to repair). */
int ferry_manifest_file_set_dst(struct ferry_manifest *m, int64_t id,
                                const struct ferry_dst_rec *rec);
/* When the runs before run_id that may have left copies in DST without
 * their done marks (killed, a power cut, a stop) started, in seconds since
 * the epoch: the earliest run since the last one that ended after
 * recording every result (exit 0, 23 or 24); 0 when there is none. */
int ferry_manifest_interrupted_since(struct ferry_manifest *m, int64_t run_id,
                                     int64_t *since);
/* error: the message (NULL: none, and attempts do not count up); f: what
 * failed, stored beside it (sql/005_failure.sql), NULL for none. */
int ferry_manifest_file_set_state(struct ferry_manifest *m, int64_t id,
                                  enum ferry_state state,
                                  const struct ferry_failure *f,
                                  const char *error);
int ferry_manifest_file_delete(struct ferry_manifest *m, int64_t id);

/*
 * Appends up to max rows of query q with id beyond *cursor to b (items and
 * their paths in b's arena) and moves *cursor past them. Ascending queries
 * start at cursor 0, descending ones (dirs) at INT64_MAX. Stops early once
 * the rows add up to max_bytes. Copy passes hand out rows of generation
 * gen only.
 */
int ferry_manifest_fill(struct ferry_manifest *m, enum ferry_query q,
                        int64_t gen, int64_t *cursor, struct ferry_batch *b,
                        size_t max, uint64_t max_bytes);

/* Files and bytes of regular files still to copy (hardlink followers
 * excluded from the bytes). */
int ferry_manifest_pending(struct ferry_manifest *m, int64_t gen,
                           uint64_t *files, uint64_t *bytes);
/* The highest file row id, uncommitted rows included. */
int ferry_manifest_max_id(struct ferry_manifest *m, int64_t *id);
/* The generation of the latest scan (0 before the first). */
int ferry_manifest_current_gen(struct ferry_manifest *m, int64_t *gen);
/* Done rows (--delete's guard). */
int ferry_manifest_count_done(struct ferry_manifest *m, uint64_t *files);
/* Rows that scan gen found gone from SRC (state removed, generation gen). */
int ferry_manifest_count_removed(struct ferry_manifest *m, int64_t gen,
                                 uint64_t *files);
/* --delete refused: the rows scan gen found gone from SRC get the state
 * they had before it (done, skipped or pending), so that the same SRC, back
 * again, is neither deleted nor copied again. Rows removed by earlier scans
 * stay removed. */
int ferry_manifest_keep_removed(struct ferry_manifest *m, int64_t gen);
/* Rows of generation gen that are pending or failed (verify: not copied
 * yet). */
int ferry_manifest_not_done(struct ferry_manifest *m, int64_t gen,
                            uint64_t *files);

/* Fills info and, in the same read transaction, hands info and the failed
 * rows (grouped by cause, req->per_cause of each) on as req says (may be
 * NULL). */
int ferry_manifest_status(struct ferry_manifest *m,
                          struct ferry_status_info *info,
                          const struct ferry_status_req *req);
/* True when ferry_manifest_status failed because a manifest read without
 * write access changed while it was read: a new open and read answers. */
bool ferry_manifest_moved(const struct ferry_manifest *m);

#endif
