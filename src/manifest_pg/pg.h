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
 * token: its late outcome is taken. The token fences the done marks,
 * not what the host writes into DST: a host partitioned past its lease
 * may still rename a copy into place (the same bytes another host
 * copies), but it never marks it done.
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
 * differs. Records the host (its last_seen: now). The other calls work on
 * this job, as this host. */
int ferry_pg_job_join(struct ferry_pg *pg, const char *name, const char *src_fp,
                      const char *dst_fp, const char *host);
/* When the joined job was made (seconds since the epoch, the server's
 * clock): a DST entry changed since may be a copy a host renamed into
 * place before it could mark it (copy.h, written_since). */
int64_t ferry_pg_job_created(const struct ferry_pg *pg);

/* What a claim hands out. */
enum ferry_pg_kind {
        PG_DIRS = 1, /* directories to list (the shared scan queue) */
        PG_FILES,    /* file rows to copy */
        PG_DIR_META, /* listed directories whose metadata is to apply */
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
 * existing one's when the job has that path already. */
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
};
/* Adds n file rows of scan gen, one statement per FERRY_PG_BATCH_MAX, all
 * in one transaction. A name its directory has already is an error. */
int ferry_pg_add_files(struct ferry_pg *pg, int64_t gen,
                       const struct ferry_pg_file *files, size_t n);

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
};
struct ferry_pg_claim {
        int64_t token; /* 0 when n is 0 */
        size_t n;
        struct ferry_pg_row *rows;
        struct pg_result *res; /* owns what rows point into */
};

/* Claims up to max (<= FERRY_PG_BATCH_MAX) claimable rows of kind, leased
 * to this host for lease_s seconds under one new token (SELECT ... FOR
 * UPDATE SKIP LOCKED: two claims never take one row). n 0: none is
 * claimable now (some may be leased: ferry_pg_remaining), and c holds
 * nothing. c is the caller's, released with ferry_pg_claim_release
 * (harmless on an empty one). */
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
};
struct ferry_pg_outcome {
        int64_t id;
        enum ferry_pg_result result;
        const void *hash; /* PG_DONE of a file: hash_len bytes, or NULL */
        size_t hash_len;
        const char *error; /* PG_FAILED: why */
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
 * lease): 0 pending is the end of that kind's work. */
int ferry_pg_remaining(struct ferry_pg *pg, enum ferry_pg_kind kind,
                       uint64_t *pending, uint64_t *leased);

/* Gives back at once every claim this host holds that it did not
 * complete (a host that stops: the other hosts need not wait for its
 * leases to run out); *n rows. */
int ferry_pg_release(struct ferry_pg *pg, uint64_t *n);

/* Failed file rows, directories that could not be listed and those
 * whose metadata failed become pending again (a host's start: the same
 * command retries them), and the directories those write into get their
 * metadata applied again; *n rows changed. */
int ferry_pg_retry_failed(struct ferry_pg *pg, uint64_t *n);

/* The joined job as a whole. */
struct ferry_pg_counts {
        uint64_t files, files_done, files_failed, bytes, bytes_done;
        uint64_t dirs, dirs_failed; /* could not be listed */
        uint64_t meta_failed;       /* directories whose metadata failed */
};
int ferry_pg_counts(struct ferry_pg *pg, struct ferry_pg_counts *out);

#endif
