/*
 * manifest/results.c - what the copy and verify passes record: a file
 * row done (with what DST holds now), failed, vanished or pending again
 * (for its data, or its metadata alone when verify found only that
 * differing), deleted (with the metadata it applied: applied, xdigest,
 * nlink, for the next scan's classification in classify.c); what ferry last
 * put in DST under a row's name (dst_at; and
 * dir_known, whether ferry made a directory); failed rows
 * retried and done rows reset when DST was replaced; and the runs table
 * (a run's start and result, and since when earlier runs were cut short).
 * What an outcome does to a big file's chunks is chunks.c's
 * (mf_chunk_outcome, after the row's own update).
 * Also the commit policy (mf_sync_owed): which COMMIT syncs the -wal.
 */
#define _GNU_SOURCE
#include "manifest/internal.h"

#include "chunks.h"

#include <string.h>
#include <time.h>
#include <unistd.h>

enum results_stmt {
        S_FILE_DONE,
        S_FILE_STATE,
        S_FILE_DELETE,
        S_FILE_META_AGAIN,
        S_FILE_DST,
        S_FILE_SET_DST,
        S_RETRY_FAILED, /* for sqlite3_exec */
        S_RESET_DONE,   /* several statements, for sqlite3_exec */
        S_RUN_START,
        S_RUN_FINISH,
        S_INTERRUPTED,
        S_NSTMTS
};

// clang-format off
static const char *const results_sql[S_NSTMTS] = {
        [S_FILE_DONE] =
                "UPDATE files SET state = " SQL_DONE ", hash = ?2, size = ?3,"
                " mtime_ns = ?4, ctime_ns = ?5, mode = ?6, uid = ?7,"
                " gid = ?8, dev = ?9, ino = ?10, error = NULL,"
                " fail_side = NULL, fail_step = NULL, fail_errno = NULL,"
                " attempts = attempts + 1, dst_type = ?11,"
                " dst_size = ?12, dst_mtime_ns = ?13, applied = ?14,"
                " xdigest = ?15, nlink = ?16, atime_ns = ?17, need = " SQL_NEED_DATA
                ", meta_step = ?18, meta_errno = ?19 WHERE id = ?1",
        /* ?4 .. ?6: the failure (mf_bind_failure) */
        [S_FILE_STATE] =
                "UPDATE files SET state = ?2, error = ?3,"
                " need = CASE WHEN ?2 = " SQL_PENDING " THEN " SQL_NEED_DATA
                " ELSE need END, attempts = attempts + (?3 IS NOT NULL), fail_side = ?4,"
                " fail_step = ?5, fail_errno = ?6 WHERE id = ?1",
        [S_FILE_DELETE] = "DELETE FROM files WHERE id = ?1",
        /* ?2 need, ?3 error, ?4 .. ?6 the failure, ?7 the bits to clear */
        [S_FILE_META_AGAIN] =
                "UPDATE files SET state = " SQL_PENDING ", need = ?2,"
                " applied = applied & ~?7, error = ?3,"
                " attempts = attempts + (?3 IS NOT NULL), fail_side = ?4,"
                " fail_step = ?5, fail_errno = ?6 WHERE id = ?1",
        [S_FILE_DST] =
                "SELECT dst_type, dst_size, dst_mtime_ns FROM files"
                " WHERE dir = ?1 AND name = ?2",
        [S_FILE_SET_DST] =
                "UPDATE files SET dst_type = ?2, dst_size = ?3,"
                " dst_mtime_ns = ?4 WHERE id = ?1",
        /* one pass over the table (no index serves it; each re-run pays
         * it): failed rows pending again, and a done row whose metadata
         * fell short has its metadata alone tried again, no data moves
         * (SET reads the row as it was) */
        [S_RETRY_FAILED] =
                "UPDATE files SET need = CASE WHEN state = " SQL_DONE
                " THEN " SQL_NEED_META " ELSE need END, state = " SQL_PENDING
                " WHERE state = " SQL_FAILED " OR (state = " SQL_DONE
                " AND meta_step != 0)",
        /* the hash goes too: mf_keep_removed reads a hash with
         * no error as "copied" */
        [S_RESET_DONE] =
                "UPDATE files SET state = " SQL_PENDING ", hash = NULL,"
                " need = " SQL_NEED_DATA " WHERE state = " SQL_DONE ";"
                "UPDATE dirs SET state = " SQL_TO_APPLY ";"
                /* DST's chunks and temp files are not there any more */
                "DELETE FROM partial; DELETE FROM chunks;",
        [S_RUN_START] =
                "INSERT INTO runs (started, pid, command) VALUES (?1, ?2, ?3)",
        [S_RUN_FINISH] =
                "UPDATE runs SET finished = ?2, result = ?3 WHERE id = ?1",
        /* ?2 .. ?5: the results of a run that recorded every result */
        [S_INTERRUPTED] =
                "SELECT coalesce(min(started), 0) FROM runs"
                " WHERE id < ?1 AND id > (SELECT coalesce("
                "max(id), 0) FROM runs WHERE result IN (?2, ?3, ?4, ?5)"
                " AND id < ?1)",
};
// clang-format on
_Static_assert(S_NSTMTS <= MF_TABLE_MAX, "results.c: statement table too big");

#define STMT(id) mf_stmt(m, T_RESULTS, id, results_sql[id])

/*
 * The commit policy. The manifest runs with synchronous=NORMAL (open.c):
 * in WAL mode SQLite then syncs the -wal before each checkpoint, the main
 * file after it and a -wal header when the -wal starts over, but not at a
 * COMMIT, which "might roll back following a power loss" and never
 * corrupts the file (sqlite.org/pragma.html#pragma_synchronous: WAL mode
 * is always consistent with synchronous=NORMAL). The -wal is appended to
 * in order and recovery replays its frames up to the last valid commit
 * frame (sqlite.org/fileformat2.html, "The Write-Ahead Log"), so one sync
 * of the -wal makes every commit before it durable. Two kinds of commit
 * need one:
 *  - a done mark (rule 7: one that was committed survives a power cut),
 *    or a claim of a DST entry (rule 9 trusts it): such a transaction sets
 *    owe_sync and its COMMIT syncs the -wal, as synchronous=FULL would
 *    have inside the COMMIT (the level cannot follow each transaction:
 *    SQLite refuses to change it inside one, and ferry is always in one);
 *  - the rows handed out to be copied (rule 1: their pending state, their
 *    ids that name temp files, the run's row that written_since reads):
 *    the hand-out syncs before it gives out work (ferry_manifest_sync)
 *    when a commit since the last sync is not yet durable (unsynced).
 * Everything else (schema, scan rows of a re-run that copies nothing,
 * notes, directory marks, which are redone when lost) costs no sync.
 */
static int sync_wal(struct ferry_manifest *m)
{
        m->owe_sync = m->unsynced = false;
        sqlite3_file *wal = NULL;
        if (sqlite3_file_control(m->db, "main", SQLITE_FCNTL_JOURNAL_POINTER,
                                 &wal) != SQLITE_OK ||
            !wal || !wal->pMethods)
                return 0; /* no -wal open: in memory, nothing to sync */
        int rc = wal->pMethods->xSync(wal, SQLITE_SYNC_NORMAL);
        if (rc == SQLITE_OK)
                return 0;
        return mf_fail(m, "manifest sync of '%s-wal' failed: %s", m->path,
                       sqlite3_errstr(rc));
}

void ferry_manifest_owe_sync(struct ferry_manifest *m)
{
        m->owe_sync = true;
}

int mf_sync_owed(struct ferry_manifest *m)
{
        if (m->owe_sync)
                return sync_wal(m);
        m->unsynced = true;
        return 0;
}

int ferry_manifest_sync(struct ferry_manifest *m)
{
        return m->unsynced ? sync_wal(m) : 0;
}

int ferry_manifest_run_start(struct ferry_manifest *m, const char *command,
                             int64_t *run_id)
{
        sqlite3_stmt *s = STMT(S_RUN_START);
        if (!s)
                return mf_db_fail(m, "write");
        sqlite3_bind_int64(s, 1, (int64_t)time(NULL));
        sqlite3_bind_int64(s, 2, (int64_t)getpid());
        sqlite3_bind_text(s, 3, command, -1, SQLITE_STATIC);
        int rc = sqlite3_step(s);
        sqlite3_reset(s);
        if (rc != SQLITE_DONE)
                return mf_db_fail(m, "write");
        *run_id = sqlite3_last_insert_rowid(m->db);
        return 0;
}

int ferry_manifest_run_finish(struct ferry_manifest *m, int64_t run_id,
                              int result)
{
        sqlite3_stmt *s = STMT(S_RUN_FINISH);
        if (!s)
                return mf_db_fail(m, "write");
        sqlite3_bind_int64(s, 1, run_id);
        sqlite3_bind_int64(s, 2, (int64_t)time(NULL));
        sqlite3_bind_int(s, 3, result);
        int rc = sqlite3_step(s);
        sqlite3_reset(s);
        return rc == SQLITE_DONE ? 0 : mf_db_fail(m, "write");
}

int ferry_manifest_reset_done(struct ferry_manifest *m)
{
        return mf_exec_sql(m, results_sql[S_RESET_DONE],
                           "reset after a replaced destination");
}

int mf_file_done(struct ferry_manifest *m, const struct ferry_item *it)
{
        return mf_file_done_ap(m, it, 0);
}

int mf_file_done_ap(struct ferry_manifest *m, const struct ferry_item *it,
                    uint32_t also)
{
        sqlite3_stmt *s = STMT(S_FILE_DONE);
        if (!s)
                return mf_db_fail(m, "write");
        sqlite3_bind_int64(s, 1, it->id);
        sqlite3_bind_blob(s, 2, it->hash, 16, SQLITE_STATIC);
        mf_bind_stat(s, 3, &it->st);
        sqlite3_bind_int(s, 11, it->dst.type);
        sqlite3_bind_int64(s, 12, (int64_t)it->dst.size);
        mf_bind_time(s, 13, it->dst.mtime);
        /* what was applied, for the next scan (sql/006_meta.sql) */
        sqlite3_bind_int64(s, 14, (int64_t)(it->applied | also));
        if (it->has_xdigest)
                sqlite3_bind_int64(s, 15, (int64_t)it->xdigest);
        sqlite3_bind_int64(s, 16, (int64_t)it->st.nlink);
        if ((it->applied | also) & MF_AP_ATIMES)
                mf_bind_time(s, 17, it->st.atime); /* else NULL: untracked */
        sqlite3_bind_int(s, 18, (int)it->meta_fail.step);
        sqlite3_bind_int(s, 19, it->meta_fail.step ? it->meta_fail.err : 0);
        m->owe_sync = true; /* a done mark (rule 7) */
        return mf_exec_stmt(m, s, "file update");
}

int mf_file_dst(struct ferry_manifest *m, int64_t dir, const char *name,
                size_t len, struct ferry_dst_rec *rec)
{
        sqlite3_stmt *s = STMT(S_FILE_DST);
        if (!s)
                return mf_db_fail(m, "read");
        sqlite3_bind_int64(s, 1, dir);
        mf_bind_bytes(s, 2, name, len);
        int rc = sqlite3_step(s);
        memset(rec, 0, sizeof(*rec));
        if (rc == SQLITE_ROW && sqlite3_column_type(s, 0) != SQLITE_NULL) {
                rec->type = (enum ferry_ftype)sqlite3_column_int(s, 0);
                rec->size = (uint64_t)sqlite3_column_int64(s, 1);
                rec->mtime = mf_column_time(s, 2);
        }
        sqlite3_reset(s);
        return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0
                                                     : mf_db_fail(m, "read");
}

/* Records rec as what DST holds for row id (an outcome's claim). */
static int file_set_dst(struct ferry_manifest *m, int64_t id,
                        const struct ferry_dst_rec *rec)
{
        sqlite3_stmt *s = STMT(S_FILE_SET_DST);
        if (!s)
                return mf_db_fail(m, "write");
        sqlite3_bind_int64(s, 1, id);
        sqlite3_bind_int(s, 2, rec->type);
        sqlite3_bind_int64(s, 3, (int64_t)rec->size);
        mf_bind_time(s, 4, rec->mtime);
        m->owe_sync = true; /* rule 9 trusts it */
        return mf_exec_stmt(m, s, "file update");
}

int ferry_manifest_interrupted_since(struct ferry_manifest *m, int64_t run_id,
                                     int64_t *since)
{
        int64_t v = 0;
        sqlite3_stmt *s = STMT(S_INTERRUPTED);
        if (!s)
                return mf_db_fail(m, "read");
        /* the results of runs that recorded every result */
        sqlite3_bind_int(s, 2, FERRY_OK);
        sqlite3_bind_int(s, 3, FERRY_EPARTIAL);
        sqlite3_bind_int(s, 4, FERRY_EVANISHED);
        sqlite3_bind_int(s, 5, FERRY_EMETA);
        sqlite3_bind_int64(s, 1, run_id);
        int rc = sqlite3_step(s);
        if (rc == SQLITE_ROW)
                v = sqlite3_column_int64(s, 0);
        sqlite3_reset(s);
        *since = v;
        return rc == SQLITE_ROW ? 0 : mf_db_fail(m, "read");
}

int mf_file_set_state(struct ferry_manifest *m, int64_t id,
                      enum ferry_state state, const struct ferry_failure *f,
                      const char *error)
{
        sqlite3_stmt *s = STMT(S_FILE_STATE);
        if (!s)
                return mf_db_fail(m, "write");
        sqlite3_bind_int64(s, 1, id);
        sqlite3_bind_int(s, 2, state);
        if (error)
                sqlite3_bind_text(s, 3, error, -1, SQLITE_TRANSIENT);
        mf_bind_failure(s, 4, f);
        return mf_exec_stmt(m, s, "file update");
}

/* --verify found row id's metadata differing in DST (bits): pending
 * again, needing its metadata only, or its data (a link) when the
 * differing part is the hardlink; the bits are to be applied again. */
static int file_meta_again(struct ferry_manifest *m,
                           const struct ferry_outcome *o)
{
        sqlite3_stmt *s = STMT(S_FILE_META_AGAIN);
        if (!s)
                return mf_db_fail(m, "write");
        sqlite3_bind_int64(s, 1, o->id);
        sqlite3_bind_int(s, 2,
                         o->meta_differs & MF_AP_LINKS ? MF_NEED_DATA
                                                       : MF_NEED_META);
        if (o->why)
                sqlite3_bind_text(s, 3, o->why, -1, SQLITE_TRANSIENT);
        mf_bind_failure(s, 4, o->fail);
        sqlite3_bind_int64(s, 7, (int64_t)o->meta_differs);
        return mf_exec_stmt(m, s, "file update");
}

int mf_file_delete(struct ferry_manifest *m, int64_t id)
{
        return mf_exec_id(m, STMT(S_FILE_DELETE), id, "file delete");
}

int mf_retry_failed(struct ferry_manifest *m)
{
        return mf_exec_sql(m, results_sql[S_RETRY_FAILED],
                           "reset of failed rows");
}

/* ---- operation-level calls (manifest.h) ---- */

static int record_outcome(struct ferry_manifest *m,
                          const struct ferry_outcome *o, int64_t *last_dir,
                          bool *fresh)
{
        int rc = o->claim ? file_set_dst(m, o->id, o->claim) : 0;
        switch (o->kind) {
        case FO_DONE:
                if (!rc)
                        rc = mf_file_done_ap(m, o->item, o->applied_also);
                /* a file made in DST changed its directory's mtime; the
                 * metadata of one applied in place did not */
                if (o->item->need == MF_NEED_META)
                        break;
                /* a first name's new copy: its followers link to it */
                if (!rc)
                        rc = mf_relink_followers(m, o->item, fresh);
                if (!rc && *last_dir != o->item->dir_id)
                        rc = mf_dir_touch(m, o->item->dir_id);
                *last_dir = o->item->dir_id;
                break;
        case FO_FAILED:
        case FO_VANISHED:
                if (!rc)
                        rc = mf_file_set_state(
                                m, o->id,
                                o->kind == FO_FAILED ? ST_FAILED : ST_VANISHED,
                                o->fail, o->why);
                if (!rc && !(rc = mf_elect_leader(m, o->id)))
                        *fresh = true;
                break;
        case FO_AGAIN:
                if (!rc)
                        rc = mf_file_set_state(m, o->id, ST_PENDING, o->fail,
                                               o->why);
                /* a missing file's directories may be made anew */
                if (!rc && o->dst_missing)
                        rc = mf_dir_chain_touch(m, o->id);
                break;
        case FO_META_AGAIN:
                if (!rc)
                        rc = file_meta_again(m, o);
                break;
        case FO_CLAIM: break;
        }
        /* a big file's partial row and chunks (chunks.c) */
        return rc ? rc : mf_chunk_outcome(m, o);
}

int ferry_manifest_record_outcomes(struct ferry_manifest *m,
                                   const struct ferry_outcome *o, size_t n,
                                   bool *fresh)
{
        int64_t last_dir = -1;
        bool any = false;
        int rc = 0;
        for (size_t i = 0; i < n && !rc; i++)
                rc = record_outcome(m, &o[i], &last_dir, &any);
        if (fresh && any)
                *fresh = true;
        return rc;
}

int ferry_manifest_forget_file(struct ferry_manifest *m,
                               const struct ferry_item *it, bool deleted)
{
        int rc = deleted ? mf_dir_touch(m, it->dir_id) : 0;
        /* a big file's chunks go with it (a small one has none) */
        if (!rc && it->type == FT_REG && it->st.size >= FERRY_CHUNK_MIN_FILE)
                rc = mf_chunks_drop(m, it->id);
        return rc ? rc : mf_file_delete(m, it->id);
}

int ferry_manifest_delete_refused(struct ferry_manifest *m, int64_t gen)
{
        int64_t root = 0;
        int rc = mf_keep_removed(m, gen);
        if (!rc)
                rc = mf_dir_find(m, "", 0, &root, NULL);
        return rc || !root ? rc : mf_dir_defer(m, root);
}

int ferry_manifest_dir_known(struct ferry_manifest *m, const char *path,
                             bool *known)
{
        int64_t id = 0;
        int rc = mf_dir_find(m, path, strlen(path), &id, NULL);
        *known = !rc && id;
        return rc;
}

int ferry_manifest_dst_at(struct ferry_manifest *m, const char *dir,
                          const char *name, struct ferry_dst_rec *rec)
{
        int64_t id = 0;
        memset(rec, 0, sizeof(*rec));
        int rc = mf_dir_find(m, dir, strlen(dir), &id, NULL);
        return rc || !id ? rc : mf_file_dst(m, id, name, strlen(name), rec);
}
