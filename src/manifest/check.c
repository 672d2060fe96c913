/*
 * manifest/check.c - reading an existing manifest through before a run
 * commits to it (SQLite's integrity_check or quick_check), at open or
 * beside the run's scan.
 *
 * Calling sequence (open.c): mf_check_content checks at open and returns
 * the verdict; or, for a plain run (MF_CHECK_BESIDE), mf_check_start runs
 * the same check on a connection of its own in a thread of its own, while
 * the run reads SRC and DST, and the connection's commit hook
 * (check_gate) waits for the verdict before the first COMMIT, an
 * autocommit included. Damage then turns that COMMIT into a rollback and
 * every later call into the "damaged (left untouched)" error
 * (mf_check_refusal, from core.c's mf_db_fail), so nothing of the run is ever
 * written into a damaged file; a run hands no work out before a COMMIT
 * (coord/handout.c), so DST is not written either. mf_check_wait (from
 * the gate, and from close) joins the thread.
 */
#define _GNU_SOURCE
#include "manifest/internal.h"

#include "mvfs.h"

#include "config.h"
#include "thread.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * How much of an existing manifest is read through before a run or a
 * verify writes to it. SQLite reads only the pages a query needs, so
 * damage deep inside goes unnoticed until some query meets it, after the
 * run has written to the file and to DST. Measured on a manifest of one
 * million rows (141 MB, warm cache): PRAGMA integrity_check, which also
 * matches every index entry to its row, takes 1.6 s; PRAGMA quick_check,
 * which reads every page but does not match indexes (it misses about one
 * damaged page in six), 0.3 s. So: integrity_check up to FULL_CHECK_MAX
 * (about 450,000 files, under a second), quick_check up to QUICK_CHECK_MAX
 * (about 7 million files, a few seconds, more from a cold disk), and
 * beyond that only check_header's checks: damage met later ends the run
 * with FERRY_EMANIFEST (db_fail). status only reads and skips this.
 *
 * Those limits are for --verify (MF_THOROUGH), which reads everything
 * anyway. A plain run pays the check on every re-run: from a cold cache,
 * integrity_check of a 100,000-file manifest (13 MB) took 0.47 s, about
 * half of a whole no-op re-run (bench scenario d). So a run reads the
 * manifest through only up to RUN_CHECK_MAX (about 30,000 files, 0.15 s);
 * a bigger one gets the header checks, damage met by a query ends the run
 * with exit 3, and --verify finds the rest. Beside the scan (mf_check_start)
 * the check of a 20,000-file manifest (3.5 MB) no longer comes before it:
 * a no-op re-run (bench scenario n) went from 0.25 to 0.19 s, cold.
 */
#define FULL_CHECK_MAX  ((int64_t)64 << 20)
#define QUICK_CHECK_MAX ((int64_t)1 << 30)
#define RUN_CHECK_MAX   ((int64_t)4 << 20)

/* the check reads the whole file: with the default 2 MiB page cache it
 * re-reads a 4 MiB manifest's pages many times over (a quarter of a no-op
 * re-run's CPU on 20,000 files) */
#define CHECK_CACHE "PRAGMA cache_size = -6144"

/* Tests set other limits in FERRY_MANIFEST_CHECK="FULL,QUICK" (bytes). */
static void check_limits(bool thorough, int64_t *full, int64_t *quick)
{
        *full = thorough ? FULL_CHECK_MAX : RUN_CHECK_MAX;
        *quick = thorough ? QUICK_CHECK_MAX : 0;
#ifdef FERRY_TESTING
        const char *env = getenv("FERRY_MANIFEST_CHECK");
        if (env && strchr(env, ',')) {
                *full = strtoll(env, NULL, 10);
                *quick = strtoll(strchr(env, ',') + 1, NULL, 10);
        }
#endif
}

/* The check due for a file of size bytes, or NULL. */
static const char *check_sql(int64_t size, bool thorough)
{
        int64_t full, quick;
        check_limits(thorough, &full, &quick);
        return size <= full    ? "PRAGMA integrity_check(1)"
               : size <= quick ? "PRAGMA quick_check(1)"
                               : NULL;
}

/* PRAGMA cache_size of db into *out; 0 or an SQLite error. */
static int cache_size(sqlite3 *db, int64_t *out)
{
        sqlite3_stmt *s = NULL;
        int rc = sqlite3_prepare_v2(db, "PRAGMA cache_size", -1, &s, NULL);
        if (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
                *out = sqlite3_column_int64(s, 0);
                rc = SQLITE_OK;
        }
        sqlite3_finalize(s);
        return rc;
}

/* Puts db's cache_size back to was, when set (run_check changed it). */
static void set_cache_size(sqlite3 *db, bool set, int64_t was)
{
        char sql[64];
        snprintf(sql, sizeof(sql), "PRAGMA cache_size = %lld", (long long)was);
        if (set)
                (void)sqlite3_exec(db, sql, NULL, NULL, NULL);
}

/* Runs sql on db: 0 and why "ok", 0 and why what is damaged, or the
 * SQLite error that kept it from running. */
static int run_check(sqlite3 *db, const char *sql, int64_t size, char *why,
                     size_t len)
{
        why[0] = '\0';
        /* a bigger cache for the check alone: the run's own comes back */
        int64_t cache = 0;
        bool big = strstr(sql, "integrity") && size > (2 << 20) &&
                   !cache_size(db, &cache);
        if (big)
                (void)sqlite3_exec(db, CHECK_CACHE, NULL, NULL, NULL);
        sqlite3_stmt *s = NULL;
        int rc = sqlite3_prepare_v2(db, sql, -1, &s, NULL);
        if (rc != SQLITE_OK) {
                set_cache_size(db, big, cache);
                return rc;
        }
        rc = sqlite3_step(s);
        if (rc == SQLITE_ROW) {
                const char *t = (const char *)sqlite3_column_text(s, 0);
                const char *main_db = "*** in database main ***";
                if (t && !strncmp(t, main_db, strlen(main_db)))
                        t += strlen(main_db);
                snprintf(why, len, "%s", t ? t + strspn(t, " \n") : "");
                for (char *p = why; *p; p++)
                        if ((unsigned char)*p < 0x20)
                                *p = ' '; /* one line */
        }
        sqlite3_finalize(s);
        set_cache_size(db, big, cache);
        return rc == SQLITE_ROW ? 0 : rc;
}

/* The verdict of run_check as the run's error (0 when sound). */
static int verdict(struct ferry_manifest *m, int rc, const char *why)
{
        if (rc && (rc & 0xff) != SQLITE_CORRUPT && (rc & 0xff) != SQLITE_NOTADB)
                return mf_fail(m, "manifest '%s' is unreadable: %s", m->path,
                               sqlite3_errstr(rc));
        if (rc)
                return mf_fail(m,
                               "manifest '%s' is damaged: %s (left untouched)",
                               m->path, sqlite3_errstr(rc));
        if (!strcmp(why, "ok"))
                return 0;
        return mf_fail(m, "manifest '%s' is damaged: %s (left untouched)",
                       m->path, why);
}

int mf_check_content(struct ferry_manifest *m, int64_t size, bool thorough)
{
        const char *sql = check_sql(size, thorough);
        if (!sql)
                return 0;
        char why[256];
        int rc = run_check(m->db, sql, size, why, sizeof(why));
        /* configure() sets the run's cache size next */
        return verdict(m, rc, why);
}

/* ---- beside the scan ---- */

struct mf_check {
        pthread_t thread;
        const char *sql;
        int64_t size;
        char *path;
        int rc;          /* run_check's, in the thread */
        char why[256];   /* likewise */
        int64_t changes; /* sqlite3_total_changes64 when it started */
        bool wal_frames; /* the file had a -wal with frames (open.c) */
        bool joined, failed;
        char msg[sizeof(((struct ferry_manifest *)0)->errmsg)]; /* failed's */
};

static void *check_main(void *arg)
{
        ferry_thread_quiet();
        struct mf_check *k = arg;
        sqlite3 *db = NULL;
        k->rc = sqlite3_open_v2(k->path, &db,
                                SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX,
                                ferry_mvfs_name());
        if (k->rc == SQLITE_OK) {
                sqlite3_busy_timeout(db, 10000);
                sqlite3_extended_result_codes(db, 1);
                k->rc = run_check(db, k->sql, k->size, k->why, sizeof(k->why));
        }
        sqlite3_close(db);
        return NULL;
}

/* The commit hook: non-zero turns the COMMIT into a rollback. A
 * transaction that changed no row (one that only read, as
 * ferry_manifest_bind_job's of a known job) writes nothing: it need not
 * wait. DDL is not counted, but a run that migrates checks first (open.c). */
static int check_gate(void *arg)
{
        struct ferry_manifest *m = arg;
        if (sqlite3_total_changes64(m->db) == m->check->changes)
                return 0;
        return mf_check_wait(m) != 0;
}

int mf_check_start(struct ferry_manifest *m, int64_t size, bool wal_frames)
{
        const char *sql = check_sql(size, false);
        if (!sql)
                return 0;
        struct mf_check *k = calloc(1, sizeof(*k));
        if (!k || !(k->path = strdup(m->path))) {
                free(k);
                return mf_check_content(m, size, false);
        }
        k->sql = sql;
        k->size = size;
        k->wal_frames = wal_frames;
        if (pthread_create(&k->thread, NULL, check_main, k)) {
                free(k->path);
                free(k);
                return mf_check_content(m, size, false);
        }
        k->changes = sqlite3_total_changes64(m->db);
        m->check = k;
        sqlite3_commit_hook(m->db, check_gate, m);
        return 0;
}

int mf_check_wait(struct ferry_manifest *m)
{
        struct mf_check *k = m->check;
        if (!k)
                return 0;
        if (!k->joined) {
                pthread_join(k->thread, NULL);
                k->joined = true;
                char kept[sizeof(m->errmsg)];
                memcpy(kept, m->errmsg, sizeof(kept));
                k->failed = verdict(m, k->rc, k->why) != 0;
                memcpy(k->msg, m->errmsg, sizeof(k->msg));
                if (!k->failed)
                        memcpy(m->errmsg, kept, sizeof(kept));
                /* the -wal of a refused file is not replayed into it */
                if (k->failed && k->wal_frames)
                        sqlite3_db_config(m->db,
                                          SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1,
                                          NULL);
        }
        return mf_check_refusal(m);
}

int mf_check_refusal(struct ferry_manifest *m)
{
        if (!m->check || !m->check->failed)
                return 0;
        memcpy(m->errmsg, m->check->msg, sizeof(m->errmsg));
        return FERRY_EMANIFEST;
}

void mf_check_free(struct ferry_manifest *m)
{
        if (!m->check)
                return;
        (void)mf_check_wait(m);
        sqlite3_commit_hook(m->db, NULL, NULL);
        free(m->check->path);
        free(m->check);
        m->check = NULL;
}
