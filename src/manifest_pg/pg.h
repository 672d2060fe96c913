/*
 * manifest_pg/pg.h - the core of the shared manifest (issue 14): one job's
 * rows in a PostgreSQL database that several hosts use at once, and the
 * claims by which they share the work. Not a backend of manifest.h:
 * src/shared/ runs a copy on it (ferry --manifest postgresql://...).
 * Schema and migrations: sql/pg/.
 *
 * Calling sequence of a host:
 *   ferry_pg_connect(url, wait_s, &pg, &err);      migrates the schema
 *   ferry_pg_job_join(pg, name, src_fp, dst_fp, host);
 *   ferry_pg_add_dirs(...) / ferry_pg_add_files(...)   in batches
 *   loop:
 *     ferry_pg_claim(pg, kind, max, lease_s, &c);   rows + one token
 *     ... work, ferry_pg_renew(pg, &c.token, 1, lease_s, &n) meanwhile ...
 *     DST barrier (syncfs of what the claim wrote), then
 *     ferry_pg_complete(pg, kind, c.token, outcomes, c.n, &refused);
 *     ferry_pg_claim_release(&c);
 *   ferry_pg_close(pg);
 * A verify (src/shared/verify.c) joins no job: ferry_pg_job_find, then
 * ferry_pg_done_files page by page, ferry_pg_files_again for what
 * differs.
 *
 * ---- A claimable row (files.state / dirs.list_state, pg leases) -------
 *
 *   PENDING, no lease --claim--> PENDING, leased to token T until t
 *   leased to T --renew (T)--> leased to T until t' (also after t, as
 *       long as no other claim took it: T is still the row's)
 *   leased to T, t passed --claim by anyone--> leased to token T2
 *   leased to T --complete (T)--> DONE / FAILED (keeps claim_token T)
 *   leased to T2 --complete (T)--> refused: nothing changes
 *
 * Fencing: every claim takes a new token from a sequence; complete()
 * writes outcomes only where claim_token is still the claim's, all or
 * none in one transaction, so a host whose rows another claim took
 * (it was killed, or partitioned past its lease) can never mark them.
 * A lease that ran out but that no other claim took still holds the
 * token: its late outcome is taken. The token fences the done marks;
 * what a host renames into DST is fenced by time on the host
 * (src/shared/run.c, shared_renew): past two thirds of a lease since its
 * last full renewal, or once a renewal finds a claim taken, its copies
 * are not put in place (copy.h, fence).
 *
 * A directory's metadata (PG_DIR_META) is claimed the same way once the
 * job's scan and copies are over: listed, state 0 (to apply) --claim-->
 * leased --complete--> applied (state 1) or failed (state 2, meta_error
 * says why); ferry_pg_retry_failed makes failed files and directories
 * pending again.
 *
 * Durability (DESIGN.md rule 1, issue 14 item 4): the caller runs its
 * own barrier on its DST mount before complete(); complete() returns
 * after COMMIT, which PostgreSQL makes durable first (synchronous_commit
 * on, the server's default; a connection to a server set to off sets it
 * on for itself).
 *
 * Lost connections: every call waits for the server when it is down or
 * restarting (connect's wait_s, backoff up to 2 s between attempts) and
 * then runs again whole; a claim whose reply was lost expires, a
 * complete whose reply was lost is found applied (its token is on its
 * rows) and reported applied.
 *
 * All functions return an enum ferry_code (0 = ok, FERRY_EMANIFEST on a
 * failure unless the call says otherwise), the message in
 * ferry_pg_errmsg. One handle is one connection: one thread at a time.
 */
#ifndef FERRY_MANIFEST_PG_H
#define FERRY_MANIFEST_PG_H

#include "ferry.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Rows per statement of add_*, claim and complete (PostgreSQL takes
 * 65535 parameters a statement). add_* takes more, in one transaction. */
#define FERRY_PG_BATCH_MAX 1000

struct ferry_pg;
struct pg_result; /* libpq's PGresult */

/* Connects to url (a libpq connection string or postgresql:// URI) and
 * brings the schema up to date (sql/pg/, migrations under an advisory
 * lock: the first host migrates, the others wait and find it done).
 * While the server does not answer or refuses connections (starting,
 * shutting down), tries again for up to wait_s seconds; a url libpq
 * cannot parse fails at once (FERRY_EUSAGE), and so does a server that
 * answers and refuses this login (FERRY_EMANIFEST). The message is in
 * err. *out: caller frees with ferry_pg_close. */
int ferry_pg_connect(const char *url, int wait_s, struct ferry_pg **out,
                     struct ferry_error *err);
void ferry_pg_close(struct ferry_pg *pg);
/* The message of the last failure; valid until the next call. */
const char *ferry_pg_errmsg(const struct ferry_pg *pg);
/* Times the connection was lost and made again (for logs and tests). */
unsigned ferry_pg_reconnects(const struct ferry_pg *pg);

/* Joins job name as host (creating the job when there is none): the job's
 * SRC and DST fingerprints must be these, else FERRY_EPATH, saying which
 * differs. Records the host (its last_seen: now; lease_s, how long its
 * silence may last before status calls it gone). The other calls work on
 * this job, as this host. */
int ferry_pg_job_join(struct ferry_pg *pg, const char *name, const char *src_fp,
                      const char *dst_fp, const char *host, int lease_s);
/* The last refused join was refused for SRC's fingerprint (not DST's). */
bool ferry_pg_src_differs(const struct ferry_pg *pg);
/* Job name refused this SRC (src_fp, whose top-level names are names[0..
 * n-1]) but not DST: when the job is over and at least half of the names
 * at its top level (its rows: files not removed, directories) are among
 * names, the job takes src_fp as its SRC's and is run again (as
 * ferry_pg_rerun) and *taken is true: join it again. Else *taken is false
 * and the message says why, after the join's. */
int ferry_pg_job_new_src(struct ferry_pg *pg, const char *name,
                         const char *src_fp, const char *dst_fp,
                         const char *const *names, size_t n, bool *taken);
/* Records that this host's run ended with exit code result (status shows
 * it as left, not gone). */
int ferry_pg_leave(struct ferry_pg *pg, int result);
/* When the joined job's scan generation began (its creation, or the
 * start of its last run again; seconds since the epoch, the server's
 * clock): a DST entry changed since may be a copy a host renamed into
 * place before it could mark it (copy.h, written_since). 0: no job. */
int64_t ferry_pg_job_created(const struct ferry_pg *pg);
/* The joined job's scan generation: 1, then one more at each run again. */
int64_t ferry_pg_gen(const struct ferry_pg *pg);
/* A job that has nothing left to do (SRC's root listed, no directory to
 * list nor listed one whose metadata is to apply, no file pending; what
 * failed is not work left) is run again: its gen moves on by one and
 * SRC's root goes back on the scan queue, from which each listing puts
 * back the directories it finds. Two hosts starting at once move it
 * once. Then the job's gen and its start, whoever moved it. Called before
 * ferry_pg_retry_failed. */
int ferry_pg_rerun(struct ferry_pg *pg);
/* A row marked removed that was not done: a killed host may have left its
 * temp in DST (path and name may hold a NUL, which no listing makes). */
struct ferry_pg_temp {
        int64_t id;
        char *path, *name;
        size_t path_len, name_len;
};
/* Once the job's scan is over: the file rows of older gens, which this
 * gen's listings did not see, are removed (state 5) if every directory
 * of this gen was listed; nothing at gen 1. *n: rows marked; *temps (*nt
 * of them, in directory order; ferry_pg_temps_free) those of them that
 * were not done. Another host's call marks none again. */
int ferry_pg_mark_removed(struct ferry_pg *pg, uint64_t *n,
                          struct ferry_pg_temp **temps, size_t *nt);
void ferry_pg_temps_free(struct ferry_pg_temp *t, size_t n);
/* Directories this gen's scan saw that were gone from SRC when their turn
 * to be listed came (listed as empty, the error kept): *n. */
int ferry_pg_dirs_vanished(struct ferry_pg *pg, uint64_t *n);

/* What a claim hands out. */
enum ferry_pg_kind {
        PG_DIRS = 1, /* directories to list (the shared scan queue) */
        PG_FILES,    /* file rows to copy */
        PG_DIR_META, /* listed directories whose metadata is to apply */
        /* --delete, once the gen's scan is over and complete (delete.c) */
        PG_DEL_FILES, /* removed file rows, with their DST record */
        PG_DEL_DIRS,  /* removed directories with no row left below */
};

/* A directory to list; path relative to SRC ("" for the root), parent 0
 * for none. */
struct ferry_pg_dir {
        int64_t parent;
        const char *path;
        size_t path_len;
        /* its metadata, as its parent's listing saw it (has_meta) */
        bool has_meta;
        uint32_t mode, uid, gid;
        int64_t mtime_ns;
};
/* Adds n directories of scan gen to the queue, one statement per
 * FERRY_PG_BATCH_MAX; ids[i] (may be NULL) becomes dirs[i]'s row, an
 * existing one's when the job has that path already (one of an older gen
 * is to list again, and its metadata to apply). */
int ferry_pg_add_dirs(struct ferry_pg *pg, int64_t gen,
                      const struct ferry_pg_dir *dirs, size_t n, int64_t *ids);

/* A file row as the scan found it (pending). */
struct ferry_pg_file {
        int64_t dir; /* its directory's row */
        const char *name;
        size_t name_len;
        int type; /* MF_FT_* */
        uint64_t size;
        int64_t mtime_ns, ctime_ns;
        uint32_t mode, uid, gid;
        uint64_t dev, ino;
        uint64_t rdev; /* a device's number, else 0 */
        uint64_t nlink;
        /* a file or special file with more than one name on SRC's own
         * system, with hard links kept: its row joins ino's link group
         * (008_links.sql) */
        bool lgroup;
};
/* Adds n file rows of scan gen, one statement per FERRY_PG_BATCH_MAX, all
 * in one transaction. A name its directory has already takes gen, and
 * becomes pending again, with the listing's stat, when the file changed
 * (type, size, times, mode, owner) or had vanished or been removed.
 * *kept (may be NULL): rows of an older gen that stay done (unchanged). */
int ferry_pg_add_files(struct ferry_pg *pg, int64_t gen,
                       const struct ferry_pg_file *files, size_t n,
                       uint64_t *kept);

/* A claimed row. PG_DIRS, PG_DIR_META: path is the directory's (name
 * NULL); PG_FILES: path is its directory's, name its own. Not
 * NUL-terminated; lent by the claim until ferry_pg_claim_release. */
struct ferry_pg_row {
        int64_t id;
        int64_t dir; /* PG_FILES: its directory's row; else its parent */
        const char *path, *name;
        size_t path_len, name_len;
        int type; /* PG_FILES */
        uint64_t size;
        /* PG_FILES and PG_DIR_META (mode 0: the directory's metadata was
         * never seen) */
        int64_t mtime_ns, ctime_ns;
        uint32_t mode, uid, gid;
        uint64_t dev, ino, rdev;
        /* PG_FILES: what its last copy left in DST (rule 9's record,
         * copy.c's it->dst); dst_type 0: nothing of DST is ferry's */
        int dst_type;
        uint64_t dst_size;
        int64_t dst_mtime_ns;
        /* ferry_pg_done_files: the recorded XXH3-128 (hash_len 16, or 0
         * for none) */
        const void *hash;
        size_t hash_len;
        /* PG_FILES: the link count the listing saw, and for a name of a
         * link group whose data another row's copy holds, that row's
         * directory and name (its copy's path in DST as in SRC; hash is
         * then its recorded XXH3-128); lead_name NULL: copy the data */
        uint64_t nlink;
        const char *lead_path, *lead_name;
        size_t lead_path_len, lead_name_len;
        /* and that row's recorded ctime and DST record (rule 9) */
        int64_t lead_ctime_ns;
        int lead_dst_type;
        uint64_t lead_dst_size;
        int64_t lead_dst_mtime_ns;
        /* PG_FILES: a claim of the row ended without a done outcome
         * (012_unmarked.sql: its lease ran out, or its host let it go):
         * that host may have renamed its copy into place unmarked
         * (copy.h, written_since) */
        bool unmarked;
        /* ferry_pg_dry_removed: its state (manifest_types.h) */
        int state;
};
struct ferry_pg_claim {
        int64_t token; /* 0 when n is 0 */
        size_t n;
        /* n 0 because the job has moved on to a scan generation this host
         * did not join (another host ran it again, rerun.c): this host's
         * part is over, it claims nothing more */
        bool moved;
        struct ferry_pg_row *rows;
        struct pg_result *res; /* owns what rows point into */
};

/* Claims up to max (<= FERRY_PG_BATCH_MAX) claimable rows of kind, leased
 * to this host for lease_s seconds under one new token (SELECT ... FOR
 * UPDATE SKIP LOCKED: two claims never take one row), only while the job
 * is at the gen this host joined. n 0: none is claimable now (some may be
 * leased: ferry_pg_remaining), or c->moved, and c holds nothing. c is the
 * caller's, released with ferry_pg_claim_release (harmless on an empty one). */
int ferry_pg_claim(struct ferry_pg *pg, enum ferry_pg_kind kind, size_t max,
                   int lease_s, struct ferry_pg_claim *c);
void ferry_pg_claim_release(struct ferry_pg_claim *c);

/* Extends, to lease_s seconds from now, the leases of this host's rows
 * that still hold one of tokens[0..n-1], and the host's last_seen.
 * *renewed: rows renewed (fewer than claimed: the others were taken by
 * another claim after their lease ran out). */
int ferry_pg_renew(struct ferry_pg *pg, const int64_t *tokens, size_t n,
                   int lease_s, uint64_t *renewed);

/* What became of a claimed row. */
enum ferry_pg_result {
        PG_DONE = 1, /* PG_FILES: copied, durable (hash kept); PG_DIRS:
                        listed; PG_DIR_META: applied */
        PG_FAILED,   /* error kept */
        PG_VANISHED, /* PG_FILES: gone from SRC since its listing (error
                        kept); not retried, as the SQLite run's. PG_DIRS:
                        the directory is gone from SRC: listed empty, its
                        metadata not applied (error kept) */
};
struct ferry_pg_outcome {
        int64_t id;
        enum ferry_pg_result result;
        const void *hash; /* PG_DONE of a file: hash_len bytes, or NULL */
        size_t hash_len;
        const char *error; /* PG_FAILED: why */
        /* PG_DONE of a file, has_stat: the source as the copy read it,
         * which the row keeps in place of the scan's (a file changed in
         * between was copied as it is now: a verify compares the copy) */
        bool has_stat;
        uint64_t size;
        int64_t mtime_ns, ctime_ns;
        uint32_t mode, uid, gid;
        /* PG_DONE of a file, has_dst: what the copy left in DST, kept as
         * the row's DST record (dst_type 0: none known) */
        bool has_dst;
        int dst_type;
        uint64_t dst_size;
        int64_t dst_mtime_ns;
        /* PG_FILES: the row may be a name of a link group (more than one
         * name): the group's waiting rows are looked at (links.c) */
        bool link;
};
/* Records the outcomes of n (<= FERRY_PG_BATCH_MAX) distinct rows of
 * claim token, in one transaction, only if every one of them still holds
 * token: else nothing is written and *refused is true (a stale claim:
 * its lease ran out and another claim took a row). Rows already
 * completed under token (a retry after a lost reply) count as applied. */
int ferry_pg_complete(struct ferry_pg *pg, enum ferry_pg_kind kind,
                      int64_t token, const struct ferry_pg_outcome *o, size_t n,
                      bool *refused);

/* Rows of kind still pending in the job (*leased of them under a live
 * lease): 0 pending is the end of that kind's work. PG_DIR_META: listed
 * directories whose metadata is still to apply. */
int ferry_pg_remaining(struct ferry_pg *pg, enum ferry_pg_kind kind,
                       uint64_t *pending, uint64_t *leased);

/* Gives back at once every claim this host holds that it did not
 * complete (a host that stops: the other hosts need not wait for its
 * leases to run out); *n rows. */
int ferry_pg_release(struct ferry_pg *pg, uint64_t *n);

/* Failed file rows of the job's gen, directories that could not be
 * listed and those whose metadata failed become pending again (a host's
 * start: the same command retries them), and the directories those write
 * into get their metadata applied again; *n rows changed. Failed files of
 * an older gen are retried by the scan of a run again, which finds them
 * again unless the selection now leaves them out. */
int ferry_pg_retry_failed(struct ferry_pg *pg, uint64_t *n);

/* ---- --delete (src/shared/delete.c, 007_delete.sql) --------------- */

/* What --delete's guard weighs (coord/guard.c's rules, for the whole job
 * once its scan of this gen is over). */
struct ferry_pg_delete_check {
        bool complete;      /* every directory of this gen was listed */
        bool seen;          /* this gen's scan found a file in SRC */
        uint64_t to_delete; /* removed file rows not tried in this gen */
        uint64_t done;      /* file rows done */
};
int ferry_pg_delete_check(struct ferry_pg *pg,
                          struct ferry_pg_delete_check *out);

/* What became of a row of a delete claim (PG_DEL_FILES, PG_DEL_DIRS). */
struct ferry_pg_del_outcome {
        int64_t id;
        /* false: not tried (past the fence): the row goes back */
        bool tried;
        /* the row goes (its DST entry deleted, or nothing of ferry's
         * there), or stays (error: not claimed again in this gen) */
        bool forget;
        /* the directory it was in (a file's, a directory's parent): its
         * metadata is applied again once a row in it was tried */
        int64_t dir;
        const char *error; /* why it stays */
};
/* A host's share of --max-delete for one claim (del_limit.c): what it
 * did not delete goes back, and what it kept for the limit is counted. */
struct ferry_pg_del_share {
        uint64_t unused; /* taken and not deleted */
        uint64_t held;   /* rows kept: the limit was reached */
};
/* Records the outcomes of the n (<= FERRY_PG_BATCH_MAX) rows of delete
 * claim token in one transaction, each row only while it still holds
 * token and is still removed, and share's counts (NULL: no limit); *lost:
 * rows tried that were no longer the claim's (a lease ran out and another
 * claim took them). */
int ferry_pg_deleted(struct ferry_pg *pg, enum ferry_pg_kind kind,
                     int64_t token, const struct ferry_pg_del_outcome *o,
                     size_t n, const struct ferry_pg_del_share *share,
                     uint64_t *lost);
/* Removed rows of this gen's --delete claimed and not yet recorded (under
 * a live lease, or one that ran out: claimable again). */
int ferry_pg_deleting(struct ferry_pg *pg, uint64_t *n);
/* A metadata claim whose outcome was refused (a deletion in one of its
 * directories made it apply again): its other rows go back at once. */
int ferry_pg_meta_drop(struct ferry_pg *pg, int64_t token);

/* ---- --max-delete (del_limit.c, 010_max_delete.sql) ------------------- */

/* Records mine (-1: no --max-delete) as the limit of this host's gen when
 * no host that deletes has yet; *theirs: the gen's limit (*found false:
 * the job has moved on to another gen). */
int ferry_pg_del_limit(struct ferry_pg *pg, int64_t mine, int64_t *theirs,
                       bool *found);
/* Takes up to want entries of what the gen's limit leaves (*got; 0 when
 * nothing is left, or the job is at another gen). */
int ferry_pg_del_take(struct ferry_pg *pg, uint64_t want, uint64_t *got);
/* The gen's limit (-1: none, or none recorded), the entries deleted (or
 * taken by a host still deleting) and kept for it. */
struct ferry_pg_del_budget {
        int64_t limit;
        uint64_t used, held;
};
int ferry_pg_del_budget(struct ferry_pg *pg, struct ferry_pg_del_budget *out);

/* ---- link groups (links.c, 008_links.sql) ------------------------------ */

/* Lets go the waiting rows of the job's link groups that may be claimed
 * now (none while a directory is left to list); *let_go: how many;
 * *scan_over: no directory is left to list. */
int ferry_pg_links_release(struct ferry_pg *pg, uint64_t *let_go,
                           bool *scan_over);
/* Whether a row of the job waits, and whether a file row is under a live
 * lease; cheap (partial indexes), unlike ferry_pg_remaining's counts. */
int ferry_pg_links_waiting(struct ferry_pg *pg, bool *waiting, bool *leased);

/* ---- selection (src/shared/select.c, 009_selection.sql) ------------- */

/* The selection of the joined gen: mine (a canonical text, "" for none)
 * when this host is its first, else the first host's. *theirs: NULL when
 * it is mine, else it (malloc'd). */
int ferry_pg_selection(struct ferry_pg *pg, const char *mine, char **theirs);
/* Up to max (<= FERRY_PG_BATCH_MAX) rows of an older gen than the joined
 * one that are not removed, in id order after id after: each with id,
 * path (its directory's), name, type and size. c is released with
 * ferry_pg_claim_release. */
int ferry_pg_unseen(struct ferry_pg *pg, int64_t after, size_t max,
                    struct ferry_pg_claim *c);
/* Rows ids[0..n-1] (of ferry_pg_unseen) take the joined gen: the
 * selection leaves them out, they are not gone from SRC. */
int ferry_pg_keep_unseen(struct ferry_pg *pg, const int64_t *ids, size_t n);
/* --files-from's paths no host's scan of the joined gen found: absent[i]
 * for the path dirs[i]/names[i] (dirs[i] "" at SRC's top level) when the
 * job has neither a file row of it seen in the gen and not removed nor a
 * directory row of it of the gen. n <= FERRY_PG_BATCH_MAX. */
int ferry_pg_paths_absent(struct ferry_pg *pg, const char *const *dirs,
                          const char *const *names, size_t n, bool *absent);

/* The joined job as a whole, read from its counts (sql/pg/005_counts.sql:
 * a row per connection that changed its rows, not its rows). */
struct ferry_pg_counts {
        uint64_t files, files_done, files_failed, bytes, bytes_done;
        uint64_t files_vanished;
        uint64_t dirs, dirs_failed; /* could not be listed */
        uint64_t meta_failed;       /* directories whose metadata failed */
};
int ferry_pg_counts(struct ferry_pg *pg, struct ferry_pg_counts *out);

/* ---- a verify (src/shared/verify.c) -------------------------------- */

/* Opens job name for a verify: as ferry_pg_job_join, but a job that does
 * not exist is FERRY_EPATH ("no job ..."), not made, and the host is not
 * recorded (the handle claims nothing). */
int ferry_pg_job_find(struct ferry_pg *pg, const char *name, const char *src_fp,
                      const char *dst_fp);

/* A page of file rows, lent until ferry_pg_page_release. */
struct ferry_pg_page {
        size_t n;
        struct ferry_pg_row *rows; /* as a PG_FILES claim's, with hash */
        struct pg_result *res;     /* owns what rows point into */
};

/* The first max (<= FERRY_PG_BATCH_MAX) done file rows whose id is above
 * after, in id order (keyset paging: the next page is after the last
 * row's id); n 0: none is left. page is the caller's, released with
 * ferry_pg_page_release (harmless on an empty one). */
int ferry_pg_done_files(struct ferry_pg *pg, int64_t after, size_t max,
                        struct ferry_pg_page *page);
void ferry_pg_page_release(struct ferry_pg_page *page);

/* The done file rows ids[0..n-1] (n <= FERRY_PG_BATCH_MAX; a verify found
 * them missing or differing) become pending (hash and claim cleared), and
 * their directories and those directories' ancestors get their metadata
 * applied again (a copy renamed into a directory changes its times, a
 * directory made anew its parent's): the next copy run copies them.
 * Rows no longer done are left alone; *n_again: rows changed. */
int ferry_pg_files_again(struct ferry_pg *pg, const int64_t *ids, size_t n,
                         uint64_t *n_again);

/* ---- a large file's chunks (chunks.c, 013_chunks.sql) ----------------- */

/* A chunk durable in this host's temp file of row file, copied under the
 * claim token; for ferry_pg_chunk_plan, the row's SRC only. */
struct ferry_pg_chunk {
        int64_t file, token;
        int32_t idx;
        uint64_t chunk_size;
        uint8_t hash[16];
        uint64_t tmp_ino; /* the temp file (not its device: each host's) */
        /* SRC as the chunk was read (not its inode: a row may hold
         * another host's, shared/batches.c) */
        uint64_t src_size;
        int64_t src_mtime_ns, src_ctime_ns;
};
/* Records c, when its row is still pending under its claim (else nothing:
 * a late host's); another temp's or SRC's chunks of the row go first. */
int ferry_pg_record_chunk(struct ferry_pg *pg, const struct ferry_pg_chunk *c);
/* Marks done in plan (a fresh one of the row's chunk size) the chunks
 * recorded for row src->file with this chunk size and SRC (src), and
 * makes it a resume of their temp file (inode and size, any device). */
struct ferry_chunk_plan;
int ferry_pg_chunk_plan(struct ferry_pg *pg, const struct ferry_pg_chunk *src,
                        struct ferry_chunk_plan *plan);
/* Drops what rows ids[0..n-1] recorded (their files are done). */
int ferry_pg_chunks_drop(struct ferry_pg *pg, const int64_t *ids, size_t n);

/* ---- what `ferry status` reads (status.c): no job joined, no write ---- */

/* A job of the database. */
struct ferry_pg_job_info {
        char *name, *src_fp, *dst_fp;
        int64_t created; /* seconds since the epoch */
        struct ferry_pg_counts c;
        uint64_t files_pending; /* to copy, leased or not */
        uint64_t dirs_to_list, meta_to_apply;
        uint64_t hosts, hosts_running;
        bool paused;        /* ferry set --pause */
        unsigned host_jobs; /* ferry set -j N; 0: each host's own -j */
};
/* Every job of the database by name, or (name not NULL) that one: *n 0
 * when there is none. Free with ferry_pg_jobs_free. */
int ferry_pg_jobs(struct ferry_pg *pg, const char *name,
                  struct ferry_pg_job_info **out, size_t *n);
void ferry_pg_jobs_free(struct ferry_pg_job_info *jobs, size_t n);

/* A host of a job: one run of ferry (hostname:pid). */
struct ferry_pg_host_info {
        char *host;
        int64_t joined, last_seen, left_at; /* left_at 0: did not leave */
        int result;                         /* its exit code; -1: none */
        int lease_s;
        bool running; /* did not leave, seen within its lease */
        uint64_t files_done, bytes_done;
        /* while running: over the last one or two renewals */
        double files_per_s, bytes_per_s;
        /* claims it holds under a live lease; and those whose lease ran
         * out, that no other host took yet */
        uint64_t held_files, held_dirs, held_expired;
};
/* Job name's hosts, those running first, then the latest seen. */
int ferry_pg_hosts(struct ferry_pg *pg, const char *name,
                   struct ferry_pg_host_info **out, size_t *n);
void ferry_pg_hosts_free(struct ferry_pg_host_info *hosts, size_t n);

/* A failure of a job: a file that failed or vanished, a directory that
 * could not be listed or whose metadata failed. Not NUL-terminated; valid
 * during the callback. */
enum ferry_pg_failure_kind {
        PG_FAIL_FILE,
        PG_FAIL_LIST,
        PG_FAIL_META,
        PG_FAIL_VANISHED, /* a file gone from SRC before its copy */
};
struct ferry_pg_failure {
        enum ferry_pg_failure_kind what;
        const char *path, *name, *error; /* name: PG_FAIL_FILE only */
        size_t path_len, name_len, error_len;
};
typedef void (*ferry_pg_failure_fn)(const struct ferry_pg_failure *f,
                                    void *arg);
/* Calls fn for the first max failures of job name (0: all): failed
 * files, directories not listed, metadata failed, vanished files, each
 * kind by path. */
int ferry_pg_failures(struct ferry_pg *pg, const char *name, uint64_t max,
                      ferry_pg_failure_fn fn, void *arg);

/* export.c: hands the file rows of job name (done_only: those done) to
 * fn as the SQLite export does (ferry.h), a page at a time in the order
 * they were added; fn's non-zero return stops it and is returned. An
 * unknown job: FERRY_EPATH. */
int ferry_pg_export(struct ferry_pg *pg, const char *name, bool done_only,
                    ferry_export_fn fn, void *arg);

/* control.c: live control of a job (sql/pg/004_control.sql). */
struct ferry_pg_control {
        bool paused;        /* no host claims anything new */
        unsigned host_jobs; /* copies in flight per host; 0: each its own */
        int64_t bwlimit;    /* bytes/s per host, 0 none; -1: each its own */
        /* minutes after local midnight of each host's window (-1 -1: none;
         * -2 -2: each host's own --window) */
        int window_start, window_end;
};
/* What `ferry set` changes; each field as the control's, or "leave it":
 * pause 1 pauses, 0 resumes, -1 leaves; host_jobs > 0 sets it, 0 gives it
 * back to each host's -j, -1 leaves; bwlimit -1 leaves; window_start -2
 * leaves the window. */
struct ferry_pg_set {
        int pause, host_jobs;
        int64_t bwlimit;
        int window_start, window_end;
};
/* Sets job name's control; *now: the control after the change. An
 * unknown job: FERRY_EPATH. */
int ferry_pg_set_control(struct ferry_pg *pg, const char *name,
                         const struct ferry_pg_set *set,
                         struct ferry_pg_control *now);
/* The joined job's control, as it is now. */
int ferry_pg_control(struct ferry_pg *pg, struct ferry_pg_control *out);

#endif
