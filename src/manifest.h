/*
 * manifest.h - the journal of a job: one row per file and per directory of
 * SRC, what became of each, and the runs. The SQLite implementation is in
 * src/manifest/ (internal.h says how it is split); nothing else in ferry
 * speaks SQL, and nothing here is SQLite's, so that another backend
 * (PostgreSQL, DESIGN.md) implements this file.
 *
 * Only the coordinator thread (coord.h) holds a writable manifest; `ferry
 * status` opens one read-only. All functions return an enum ferry_code (0 = ok)
 * and, on failure, leave a message in the error passed to ferry_manifest_open
 * (kept in the manifest and readable with ferry_manifest_errmsg).
 *
 * Calling sequence of a run (the operation-level calls, at the end of
 * this file):
 *   ferry_manifest_open(path, MF_CREATE, &m, &err);
 *   ferry_manifest_bind_job(m, src, dst);
 *   ferry_manifest_begin(m); ferry_manifest_run_start(m, cmd, &run);
 *   ferry_manifest_scan_start(m, &gen, &files, &bytes);
 *   ferry_manifest_record_listing(m, listing, &how, out);  per chunk
 *   ferry_manifest_scan_complete(m, gen);
 *   ferry_manifest_handout(m, &h, batch, ...);   ...  the passes
 *   ferry_manifest_record_outcomes(m, o, n, &fresh);   per batch
 *   ferry_manifest_commit(m); ferry_manifest_begin(m); ...   (group commit)
 *   ferry_manifest_dir_walk(...) / ferry_manifest_dir_outcome(...)
 *   ferry_manifest_run_finish(m, run, code); ferry_manifest_commit(m);
 *   ferry_manifest_close(m);
 *
 * ---- The life of a file row (files.state, enum ferry_state) ----------
 *
 *   scan: new entry                     scan: changed entry (any state,
 *   (record_listing)                    removed too) -> pending / skipped
 *         |                                   (record_listing)
 *         v
 *   +-----------+  done and durable: barrier, then COMMIT   +--------+
 *   |  PENDING  | ----------------------------------------> |  DONE  |
 *   |           |  (record_outcomes FO_DONE)                 |        |
 *   |           | <---------------------------------------- |        |
 *   +-----------+  verify found DST differing or missing,   +--------+
 *     |  ^   ^ ^   the DST sample found it missing
 *     |  |   | |   (record_outcomes FO_AGAIN), its metadata differing
 *     |  |   | |   (FO_META_AGAIN), DST was replaced
 *     |  |   | |   (reset_done)
 *     |  |   | |
 *     |  |   | +-- FAILED: at the start of every run (scan_start)
 *     |  |   +---- VANISHED: the scan sees the entry again, unchanged
 *     |  |         (record_listing)
 *     |  +-------- REMOVED: --delete refused, this scan's removals undone:
 *     |            to done (hash, no error), skipped (special) or pending
 *     |            (delete_refused)
 *     |
 *     +-> FAILED    the copy failed (record_outcomes FO_FAILED)
 *     +-> VANISHED  SRC's entry was gone when copied (record_outcomes
 *                   FO_VANISHED)
 *
 *   SKIPPED: a new or changed special file (fifo, socket, device) that
 *   the run's options leave out (--no-specials, --no-devices, devices
 *   when not root, a DST that holds none: ferry_listing_rec); a scan
 *   that allows it again makes it PENDING (and a PENDING one it leaves
 *   out SKIPPED) (record_listing); otherwise it leaves SKIPPED only as
 *   every state does:
 *
 *   any state but REMOVED --> REMOVED   the entry is no longer in SRC:
 *       a scan that read its directory whole did not see it, a directory
 *       above it became a file, or it became a directory (record_listing),
 *       or its directory was not seen by a complete scan (scan_complete);
 *       never a row the run's selection leaves out (set_keep): that one
 *       keeps its state and gen, so no pass hands it out.
 *       REMOVED's gen is the scan that removed it.
 *   REMOVED, VANISHED --> (row deleted)   --delete deleted the DST entry
 *       or found it not ferry's (forget_file).
 *
 *   Nothing else writes files.state. Hardlink groups (files.hl) change no
 *   state: a failed, vanished or removed first name hands the group on
 *   (record_outcomes FO_FAILED and FO_VANISHED, scan_complete; links.c).
 *
 * ---- The life of a directory row (dirs) -----------------------------
 *
 *   state: TO_APPLY (DS_TO_APPLY: mode and times still to set in DST) or
 *   APPLIED.
 *     (new row) --> TO_APPLY                       record_listing
 *     any --> TO_APPLY  its metadata changed in SRC, or a new subdirectory
 *         (record_listing); a file copied into it (record_outcomes
 *         FO_DONE) or deleted from it (forget_file), a subdirectory deleted
 *         (dir_outcome DIR_DELETED); a file of it found missing in DST, for
 *         it and every directory above (record_outcomes FO_AGAIN with
 *         dst_missing); DST replaced (reset_done)
 *     TO_APPLY --> APPLIED   set in DST (dir_outcome DIR_APPLIED), or
 *         left to the next run, whose scan finds it changed (dir_outcome
 *         DIR_DEFERRED; delete_refused for SRC's root); it stays TO_APPLY
 *         when DST refused some of its metadata (DIR_META_FAILED, its
 *         cause in meta_step and meta_errno), so the next run applies it
 *         again
 *     any --> (row deleted)  not seen by a complete scan, and --delete
 *         ran (dir_outcome DIR_DELETED or DIR_FORGOTTEN)
 *   listed: MARKING (-1) while a scan marks its file rows one by one (new
 *   or changed), else the last scan that saw all its rows, or that could
 *   not read it and so keeps its subtree's rows (record_listing).
 *   error: why the directory could not be read or set up, with its cause
 *   (fail_side, fail_step, fail_errno: struct ferry_failure) beside it
 *   (record_listing; dir_outcome DIR_FAILED), cleared by the next scan
 *   that reads it. A file row's error has its cause beside it the same way.
 *
 * ---- The life of a partial row and its chunks (sql/009_chunks.sql) ----
 *
 *   A regular file of at least FERRY_CHUNK_MIN_FILE bytes (chunks.h) is
 *   handed out with a plan built from them (handout; manifest/chunks.c).
 *     (none) --> partial + chunks   a chunk durable in the row's temp file
 *         (record_chunk); one of another temp file, SRC stat or chunk
 *         size than the partial row's drops the row's partial and chunks
 *         first (a done file's chunks too: a copy starts it anew)
 *     partial + chunks --> resumed   a hand-out whose row's stat is the
 *         partial row's SRC stat (size, mtime, ctime, dev, ino): the plan
 *         says resume, with the temp file's identity and the done chunks;
 *         any other partial row (and its chunks) is dropped there
 *     partial + chunks --> chunks    the file done (record_outcomes
 *         FO_DONE): its partial row goes, its chunks are written from the
 *         plan the copier returned (bad 0), for --verify
 *     chunks --> chunks, some bad   verify found those chunks differing
 *         (record_outcomes FO_AGAIN with the plan); the row is pending, and
 *         the next hand-out's plan says repair, CH_BAD for those
 *     partial + chunks kept   a failed, vanished or interrupted copy (a
 *         next run may resume), and the file row removed (until the temp
 *         file or the row goes)
 *     any --> (none)   the file changed in SRC (record_listing UP_CHANGED;
 *         record_outcomes FO_FAILED with src_changed), DST was replaced
 *         (reset_done), the end of the run removed its temp file
 *         (temp_removed), the row was deleted (forget_file), or its file
 *         row is gone (scan_complete's clean-up)
 *
 *   manifest/internal.h names the steps inside each of these calls.
 */
#ifndef FERRY_MANIFEST_H
#define FERRY_MANIFEST_H

#include "ferry.h"
#include "batch.h"
#include "manifest_types.h"

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
                          * without write access (manifest/reader.c, "Reading
                          * without write access") */
        MF_CREATE = 2,   /* create the file and schema when missing */
        MF_MEMORY = 4,   /* an in-memory manifest (dry run of a new job) */
        MF_THOROUGH = 8, /* --verify: read a bigger manifest through first */
        /* a plain run: read an existing one through beside the scan, the
         * first COMMIT waits for it (manifest/check.c) */
        MF_CHECK_BESIDE = 16,
        /* a 0-byte file with no -wal frames is made anew: what a first run
         * killed between SQLite's open and its first write leaves; the job
         * passes it while DST does not exist yet or is an empty directory
         * (else it is refused: the journal of a copy may have been cut to
         * nothing) */
        MF_EMPTY_NEW = 32,
};

/* UP_RESUMED: unchanged, but not copied yet (pending or failed before).
 * UP_META: its data is as copied, its metadata alone changed in SRC (or
 * the run's options want what an earlier run left out): applied in
 * place (need MF_NEED_META), or a hardlink name that is to be a link
 * (need MF_NEED_DATA, no data written). */
enum ferry_upsert { UP_NEW = 1, UP_CHANGED, UP_UNCHANGED, UP_RESUMED, UP_META };

struct ferry_manifest;

int ferry_manifest_open(const char *path, int flags,
                        struct ferry_manifest **out, struct ferry_error *err);
void ferry_manifest_close(struct ferry_manifest *m);
/* The message of the last failure; valid until the next call. */
const char *ferry_manifest_errmsg(const struct ferry_manifest *m);

/* Records src/dst in a new manifest, or checks they match an old one. */
int ferry_manifest_bind_job(struct ferry_manifest *m, const char *src,
                            const char *dst);
/* --adopt: the SRC and DST paths the manifest names, sized from what is
 * stored ("" each when it names none: a new manifest); the caller frees
 * both. */
int ferry_manifest_job_paths(struct ferry_manifest *m, char **src, char **dst);
/* Notes of a re-pointed job (ferry_manifest_note): "1" when set. The
 * first run after a DST re-point checks every done row's DST entry, not a
 * sample (coord/start.c clears it); the manifest's file is still to be
 * renamed to the new paths' default name (job_move.c). */
#define MF_NOTE_DST_CHECK_ALL "dst_check_all"
#define MF_NOTE_MOVE_PENDING  "move_pending"
/* --adopt: a manifest of another SRC or DST (the job's trees moved) is
 * pointed at src and dst in one transaction; its rows stay. dst_moved
 * sets MF_NOTE_DST_CHECK_ALL (a later re-point never clears it);
 * move_pending sets or clears MF_NOTE_MOVE_PENDING. */
int ferry_manifest_repoint_job(struct ferry_manifest *m, const char *src,
                               const char *dst, bool dst_moved,
                               bool move_pending);

int ferry_manifest_begin(struct ferry_manifest *m);
int ferry_manifest_commit(struct ferry_manifest *m);
/* The next COMMIT must survive a power cut: it syncs the -wal. */
void ferry_manifest_owe_sync(struct ferry_manifest *m);
/* Every commit so far made durable (one sync of the -wal, if any commit
 * since the last is not yet): before rows are handed out to be copied. */
int ferry_manifest_sync(struct ferry_manifest *m);
int ferry_manifest_rollback(struct ferry_manifest *m);

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
/* When the runs before run_id that may have left copies in DST without
 * their done marks (killed, a power cut, a stop) started, in seconds since
 * the epoch: the earliest run since the last one that ended after
 * recording every result (exit 0, 23 or 24); 0 when there is none. */
int ferry_manifest_interrupted_since(struct ferry_manifest *m, int64_t run_id,
                                     int64_t *since);
/* The generation of the latest scan (0 before the first). */
int ferry_manifest_current_gen(struct ferry_manifest *m, int64_t *gen);
/* Fills info and, in the same read transaction, hands info and the failed
 * rows (grouped by cause, req->per_cause of each) on as req says (may be
 * NULL). */
int ferry_manifest_status(struct ferry_manifest *m,
                          struct ferry_status_info *info,
                          const struct ferry_status_req *req);
/* Hands every file row (req->done_only: every done one) to req->on_row,
 * EXPORT_CHUNK rows per read transaction, each chunk handed on after its
 * transaction ended (manifest/export.c). Returns 0, FERRY_EMANIFEST, or
 * what on_row returned to stop. *handed: rows handed on (for a retry of a
 * read that ferry_manifest_moved says was torn before any was). */
int ferry_manifest_export(struct ferry_manifest *m,
                          const struct ferry_export_req *req, uint64_t *handed);
/* True when ferry_manifest_status or ferry_manifest_export failed because
 * a manifest read without write access changed while it was read, or a
 * run made or took down its -wal and -shm meanwhile: a new open and read
 * answers. */
bool ferry_manifest_moved(const struct ferry_manifest *m);

/*
 * ---- Operation-level calls: the coordinator's interface ---------------
 *
 * Each call below does one step of a run whole, with the rules it depends
 * on (which rows a listing removes, who becomes a hardlink group's first
 * name, which directories must have their metadata applied again) kept
 * beside the SQL. A file row is part of scan gen when the scan recorded
 * it or saw it in a directory it read whole, and it is not gone from SRC.
 */

/* Starts a scan: a new generation, the failed rows of earlier runs made
 * pending again, and the files and bytes then still to copy. */
int ferry_manifest_scan_start(struct ferry_manifest *m, int64_t *gen,
                              uint64_t *files, uint64_t *bytes);

/* The metadata a run wants in DST (MF_AP_* bits, manifest_types.h): of
 * regular files and directories, of symlinks (no mode; times only where
 * DST keeps them), and of special files (mode, owner, times; no xattrs).
 * A done row whose applied lacks one of them is
 * handed out for its metadata alone (UP_META); 0 (the default) checks no
 * option. MF_AP_LINKS is not among them: --hard-links is the listing's
 * hard_links (a name of a group copied apart becomes a link). */
void ferry_manifest_set_wanted(struct ferry_manifest *m, uint32_t wanted,
                               uint32_t wanted_link, uint32_t wanted_special);

/* The run's selection (--include, --exclude, --files-from, the sizes):
 * keep says of a row the scan did not see whether the selection left it
 * out (true: it is no source deletion, not removed, its directory row
 * neither; dir the directory's path, name NULL for a directory row, type
 * a file row's MF_FT_*, size its recorded size; may_stat: it may look
 * in SRC). Called on the writer's thread, inside a statement. NULL (the
 * default): every row not seen is removed. Before the scan starts. */
typedef bool (*ferry_manifest_keep_fn)(void *arg, const char *dir, size_t dlen,
                                       const char *name, size_t nlen, int type,
                                       uint64_t size, bool may_stat);
int ferry_manifest_set_keep(struct ferry_manifest *m,
                            ferry_manifest_keep_fn keep, void *arg);

/* How a listing chunk is recorded. */
struct ferry_listing_rec {
        int64_t gen;
        bool hard_links; /* --hard-links: names of one inode are a group */
        /* what of the special files is copied (the rest is skipped):
         * FIFOs and sockets, devices (the options, root, DST's caps) */
        bool specials, devices;
        /* l->open_err set: why, kept with the directory; NULL when it is
         * not the directory's fault (no descriptor came free) */
        const char *error;
        const struct ferry_failure *fail; /* what failed, beside error */
        bool stopping; /* the run stops: a last chunk marks nothing listed */
};

/* What one entry of a chunk became. */
struct ferry_entry_rec {
        enum ferry_upsert res; /* 0: not recorded */
        int64_t id;            /* its row */
        /* an existing row this scan had not recorded yet (UP_CHANGED,
         * UP_RESUMED): to hand out once more if the pass is past it */
        bool again;
        bool skipped; /* a special file the options leave out (ST_SKIPPED) */
};

/*
 * Records one chunk of a directory's listing: the directory (the first
 * chunk records its metadata; a later one finds the row the first made),
 * one row per entry (out[i] for l->entries[i]; out holds l->n; on a
 * failure, res is 0 for the entries not recorded), the rows
 * below an entry that replaced a directory removed, the directory's
 * error, and, for the last chunk of a listing read whole, the directory
 * listed (rows not seen removed). A directory
 * read in part (l->open_err) keeps every row below it part of gen.
 */
int ferry_manifest_record_listing(struct ferry_manifest *m,
                                  const struct ferry_listing *l,
                                  const struct ferry_listing_rec *how,
                                  struct ferry_entry_rec *out);

/* A chunk durable in a temp file (chunks.h): its hash, with the temp
 * file's identity and SRC's stat the chunk was read from. A first chunk
 * of another temp file or source than the partial row's replaces the row
 * and its chunks. Written in the open transaction. */
struct ferry_chunk_msg;
int ferry_manifest_record_chunk(struct ferry_manifest *m,
                                const struct ferry_chunk_msg *c);
/* The end of a run removes the temp file of row it (PASS_STALE_TEMPS):
 * its partial row and chunks go too. */
int ferry_manifest_temp_removed(struct ferry_manifest *m,
                                const struct ferry_item *it);

/* After a complete scan: the rows of directories it did not see are
 * removed, and hardlink groups whose first name is gone get another. */
int ferry_manifest_scan_complete(struct ferry_manifest *m, int64_t gen);

/* The sets of file rows the passes hand out. */
enum ferry_pass {
        PASS_COPY_FIRST = 1, /* to copy, not hardlink followers */
        PASS_COPY_NEXT,      /* to copy, whose first name is settled */
        PASS_VERIFY,         /* done files and symlinks of the scan */
        PASS_DRY_RUN,        /* to copy, all */
        PASS_REMOVED,        /* gone from SRC, or vanished */
        PASS_STALE_TEMPS,    /* to copy but not seen: may have a temp */
};

/* Where a pass is; its fields are the manifest's. */
struct ferry_handout {
        enum ferry_pass pass;
        int64_t gen;
        int64_t pos;
};

void ferry_manifest_handout_start(struct ferry_handout *h, enum ferry_pass pass,
                                  int64_t gen);
/* Appends the pass's next rows to b (up to max, stopping once they add up
 * to max_bytes); none at the end of the pass. */
int ferry_manifest_handout(struct ferry_manifest *m, struct ferry_handout *h,
                           struct ferry_batch *b, size_t max,
                           uint64_t max_bytes);
/* Appends row id to b if it is still to copy in the first pass (not a
 * hardlink follower, of the pass's generation). */
int ferry_manifest_handout_again(struct ferry_manifest *m,
                                 const struct ferry_handout *h, int64_t id,
                                 struct ferry_batch *b);
/* The pass has gone past row id: it hands that row out no more. */
bool ferry_manifest_handout_passed(const struct ferry_handout *h, int64_t id);

/* What became of a handed-out file row. */
enum ferry_outcome_kind {
        FO_DONE = 1, /* copied and durable: item's st, hash and dst kept,
                        its directory's metadata to apply again */
        FO_FAILED,   /* why and fail kept; a first name hands its group on */
        FO_VANISHED, /* gone from SRC: why and fail kept, group handed on */
        FO_AGAIN,    /* a done row DST lost or changed: pending again */
        FO_CLAIM,    /* stays as it is: only claim is recorded */
        /* verify: a done row whose DST content is equal but metadata
         * differs (meta_differs, MF_AP_* bits): pending again, those bits
         * cleared from its applied; it needs its metadata only, or its
         * data when a link is no longer one */
        FO_META_AGAIN,
};

struct ferry_outcome {
        enum ferry_outcome_kind kind;
        int64_t id;                    /* the file row */
        const struct ferry_item *item; /* FO_DONE: the copy */
        /* FO_DONE: MF_AP_* bits applied beyond item->applied (the run's
         * --hard-links and --atimes, which the copier does not know) */
        uint32_t applied_also;
        const char *why; /* FO_FAILED, _VANISHED, _AGAIN */
        /* what failed, stored beside why (FO_FAILED, _VANISHED, _AGAIN);
         * NULL for none */
        const struct ferry_failure *fail;
        bool dst_missing; /* FO_AGAIN: its directories may be made anew */
        /* what DST holds for the row is ferry's from now on (an entry it
         * cleared out of the way, or will repair), or NULL */
        const struct ferry_dst_rec *claim;
        uint32_t meta_differs; /* FO_META_AGAIN: the MF_AP_* bits */
        /* a file copied in chunks: its plan as the copier gave it back
         * (FO_DONE: each chunk's hash, kept for --verify; FO_AGAIN from
         * verify: the CH_BAD chunks, marked bad), or NULL */
        const struct ferry_chunk_plan *plan;
        bool src_changed; /* FO_FAILED: SRC changed while it was copied
                             (R_CHANGED): its chunks are of old content */
};

/* Records n outcomes in order. *fresh (may be NULL) becomes true when
 * rows may have become ready to hand out (a group handed on). */
int ferry_manifest_record_outcomes(struct ferry_manifest *m,
                                   const struct ferry_outcome *o, size_t n,
                                   bool *fresh);
/* A removed or vanished row is done with (--delete): forgotten, and its
 * directory's metadata applied again when DST's entry was deleted. */
int ferry_manifest_forget_file(struct ferry_manifest *m,
                               const struct ferry_item *it, bool deleted);
/* --delete refused: the rows scan gen found gone from SRC get the state
 * they had before it (done, skipped or pending), so that the same SRC,
 * back again, is neither deleted nor copied again (rows removed by earlier
 * scans stay removed); and SRC's root directory's metadata is left to the
 * next run (it may be a mount point's). */
int ferry_manifest_delete_refused(struct ferry_manifest *m, int64_t gen);

/* A directory row. path is relative to SRC ("" for its root). */
struct ferry_dir_row {
        int64_t id;
        int64_t parent; /* 0 for the root */
        const char *path;
        size_t path_len;
        uint32_t mode, uid, gid;
        struct ferry_time mtime;
        /* the MF_AP_* bits applied and the digest of SRC's xattrs as
         * applied: as recorded (a walk), or what to record (DIR_APPLIED) */
        uint32_t applied;
        bool has_xdigest; /* xdigest is valid */
        uint64_t xdigest;
};

enum ferry_dir_set {
        DIRS_TO_APPLY = 1, /* of scan gen, metadata to apply */
        DIRS_REMOVED,      /* not seen by scan gen */
        DIRS_APPLIED,      /* of scan gen, applied (--verify) */
};

struct ferry_dir_walk;
/* Walks a set of directory rows, deepest first, a chunk at a time. */
int ferry_manifest_dir_walk(struct ferry_manifest *m, enum ferry_dir_set set,
                            int64_t gen, struct ferry_dir_walk **w);
/* The next chunk: *n rows (0 at the end), valid until the next call. */
int ferry_manifest_dir_walk_next(struct ferry_manifest *m,
                                 struct ferry_dir_walk *w,
                                 const struct ferry_dir_row **rows, size_t *n);
void ferry_manifest_dir_walk_end(struct ferry_dir_walk *w);

enum ferry_dir_outcome {
        DIR_APPLIED = 1, /* metadata set in DST */
        DIR_FAILED,      /* could not be set: why and fail kept */
        DIR_META_FAILED, /* there in DST, its metadata (fail) not all:
                            applied bits and fail kept, still to apply */
        DIR_DEFERRED,    /* left to the next run: marked applied, and
                            the next scan finds it changed */
        DIR_DELETED,     /* deleted from DST: its parent's metadata to
                            apply again, the row forgotten */
        DIR_FORGOTTEN,   /* gone, not deleted from DST: row forgotten */
        DIR_TO_APPLY,    /* --verify: DST's metadata differs, to apply
                            again */
};
/* fail and why: DIR_FAILED's failure and message, DIR_META_FAILED's
 * failure (else ignored). */
int ferry_manifest_dir_outcome(struct ferry_manifest *m,
                               const struct ferry_dir_row *d,
                               enum ferry_dir_outcome o,
                               const struct ferry_failure *fail,
                               const char *why);

/* Row counts. */
enum ferry_count {
        COUNT_TO_COPY = 1, /* pending since gen; bytes of regular files */
        COUNT_DONE,        /* done rows */
        COUNT_GONE,        /* rows scan gen found gone from SRC */
        COUNT_NOT_DONE,    /* rows of scan gen pending or failed */
};
/* bytes may be NULL; it is set for COUNT_TO_COPY only (else 0). */
int ferry_manifest_count(struct ferry_manifest *m, enum ferry_count what,
                         int64_t gen, uint64_t *files, uint64_t *bytes);

/* What in DST is ferry's (owner.h: rule 9). Paths are relative to SRC
 * and DST ("" for the root), as the manifest spells them. */
/* *known: the manifest has directory path (SRC had it, so ferry made it
 * in DST). */
int ferry_manifest_dir_known(struct ferry_manifest *m, const char *path,
                             bool *known);
/* What ferry last put in DST at dir/name: rec->type 0 when nothing (no
 * such row, or nothing copied). */
int ferry_manifest_dst_at(struct ferry_manifest *m, const char *dir,
                          const char *name, struct ferry_dst_rec *rec);

#endif
